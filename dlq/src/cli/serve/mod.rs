//! `dlq serve`: the web dashboard. Parses the options, decides the token
//! and the address (loopback by default; anything else only with a token
//! given explicitly), opens the database, prints the URL to open, and runs
//! the HTTP server on a current-thread tokio runtime with the store on the
//! blocking pool until Ctrl-C or SIGTERM. The pages, the API and the
//! actions are in this directory's other files; none of them holds SQL.
//! The connections themselves, and the limits on them (header timeout,
//! connection cap, the stop's deadline), are server.rs's.

mod actions;
mod api;
mod app;
mod insight;
mod log;
mod metrics;
mod pages;
mod server;

use super::Context;
use anyhow::{Context as _, Result};
use std::io::{Read as _, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Serve a live web dashboard: search, inspect and act on dead letters
///
/// Pages: Overview, Items (search with the filter language), Item,
/// Patterns, Events, Retry runs; a JSON API under /api/. Every request
/// needs the access token: printed in the URL to open (a new one each
/// start), given with --token / DLQ_TOKEN, or kept in a file with
/// --token-file (the same on every start). Binds to 127.0.0.1; another
/// address needs a token given or kept. Ctrl-C (or SIGTERM) stops it: requests
/// in flight and retry commands it started get 5 seconds to finish, then
/// it kills those commands and exits anyway.
///
/// Examples:
///   dlq serve
///   dlq serve --token-file dlq-token
///   dlq serve --bind 127.0.0.1:0 --read-only
///   dlq serve --bind 127.0.0.1:0 --exec ./process-item.sh --parallel 2
///   DLQ_TOKEN=$(openssl rand -hex 24) dlq serve --bind 0.0.0.0:8421
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Address and port to listen on (port 0: any free port)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8420")]
    bind: String,
    /// Show only: no marking, deleting or retrying
    #[arg(long)]
    read_only: bool,
    /// Let the dashboard retry: the command `dlq retry --exec` would run for
    /// each item, as it runs it (item_data on stdin, DLQ_JOB_ID,
    /// DLQ_ITEM_ID, DLQ_ATTEMPT, DLQ_ITEM_FILE and DLQ_RESULT_FILE in the
    /// environment, see `dlq retry --help`; up to --max-retries attempts per
    /// item with backoff)
    #[arg(long, value_name = "CMD")]
    exec: Option<String>,
    /// With --exec: seconds before a retry command is killed (0: no limit)
    #[arg(long, value_name = "SECONDS", requires = "exec", default_value = "3600",
          value_parser = super::retry::seconds_up_to_30_days)]
    timeout: f64,
    /// With --exec: commands a retry runs at once
    #[arg(long, value_name = "N", default_value_t = 4, requires = "exec",
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    parallel: u16,
    /// With --exec: attempts per item in a run (1 to 1000), as `dlq retry
    /// --max-retries`
    #[arg(long, value_name = "N", default_value_t = 3, requires = "exec",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(dlqlite::retry::MAX_RETRIES)))]
    max_retries: u32,
    /// The access token (16 to 256 of A-Z a-z 0-9 - . _ ~) instead of a
    /// generated one; needed to bind to anything but loopback
    #[arg(long, env = "DLQ_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    token: Option<String>,
    /// Keep the access token in this file: read when it is there, else made
    /// and written (0600), so bookmarks survive a restart
    #[arg(long, value_name = "PATH")]
    token_file: Option<std::path::PathBuf>,
    /// Open the dashboard in a browser (xdg-open)
    #[arg(long)]
    open: bool,
    /// Seconds a client has to send a request's headers, from connecting or
    /// from the previous answer (so also how long an idle connection stays
    /// open); a slower one is disconnected
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    header_timeout: f64,
    /// Connections open at once; one more is answered 503 and closed
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max_connections: u32,
    /// Seconds one request's database work may take; longer, it is
    /// interrupted and answered 503 (so is the work of a client that left)
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    request_timeout: f64,
}

/// Requests that can read a whole search at once: the store pools 8
/// connections; the other 3 stay for everything else (one for the
/// background analysis).
const HEAVY_AT_ONCE: usize = 5;

/// A token from /dev/urandom: 24 bytes, hex.
fn new_token() -> Result<String> {
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for an access token")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn check_token(token: &str) -> Result<()> {
    let ok = (16..=256).contains(&token.len())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    if !ok {
        super::usage!(
            "invalid --token/DLQ_TOKEN: use 16 to 256 of A-Z a-z 0-9 - . _ ~ (e.g. `openssl rand -hex 24`)"
        );
    }
    Ok(())
}

fn parse_bind(text: &str) -> Result<SocketAddr> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(address);
    }
    if let Some(port) = text
        .strip_prefix("localhost:")
        .and_then(|p| p.parse::<u16>().ok())
    {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    super::usage!("invalid --bind {text:?}: give ADDRESS:PORT, e.g. 127.0.0.1:8420 or [::1]:8420");
}

/// The CSRF token: derived from the access token, so a page rendered before
/// a restart with the same `--token` still posts.
fn csrf_of(token: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("dlq-csrf:{token}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let address = parse_bind(&args.bind)?;
    let mut token = args.token.clone();
    if token.is_some() && args.token_file.is_some() {
        // Checked here, not by clap: its refusal names --token even when
        // the token came from DLQ_TOKEN.
        super::usage!("--token-file cannot go with a token given by --token or DLQ_TOKEN: use one");
    }
    if let (None, Some(path)) = (&token, &args.token_file) {
        let fresh = new_token()?;
        let (kept, created) = dlqlite::outfile::keep_secret(path, || Ok(fresh))?;
        if check_token(&kept).is_err() {
            anyhow::bail!(
                "the token in {} is not 16 to 256 of A-Z a-z 0-9 - . _ ~: remove the file to have a new one made",
                dlqlite::text::for_terminal(&path.display().to_string())
            );
        }
        eprintln!(
            "dlq serve: access token {} {}: the same on every start with --token-file",
            if created {
                "made and kept (0600) in"
            } else {
                "read from"
            },
            dlqlite::text::for_terminal(&path.display().to_string())
        );
        token = Some(kept);
    }
    // A token given (--token, DLQ_TOKEN) or kept (--token-file) is known to
    // whoever started the dashboard.
    let explicit = token.is_some();
    if let Some(token) = &token {
        check_token(token)?;
    }
    if !address.ip().is_loopback() && !explicit {
        super::usage!(
            "will not serve on {} without a token given explicitly (anyone who can reach it would \
             see every item): pass --token or --token-file, or set DLQ_TOKEN, or bind to 127.0.0.1",
            address.ip()
        );
    }
    if let Some(command) = &args.exec {
        if command.trim().is_empty() {
            super::usage!("--exec is empty: give the command a retry runs");
        }
    }
    if !(args.header_timeout.is_finite()
        && args.header_timeout > 0.0
        && args.header_timeout <= 3600.0)
    {
        super::usage!(
            "invalid --header-timeout {}: seconds, more than 0 and at most 3600",
            args.header_timeout
        );
    }
    if !(args.request_timeout.is_finite()
        && args.request_timeout > 0.0
        && args.request_timeout <= 86_400.0)
    {
        super::usage!(
            "invalid --request-timeout {}: seconds, more than 0 and at most 86400",
            args.request_timeout
        );
    }
    let limits = server::Limits {
        header_timeout: Duration::from_secs_f64(args.header_timeout),
        max_connections: args.max_connections,
    };
    let token = match token {
        Some(token) => token,
        None => new_token()?,
    };
    let dlq = ctx.open_existing()?;
    let read_only = args.read_only || dlq.is_read_only()?;
    if read_only && args.exec.is_some() {
        super::usage!(
            "--exec retries, which change the database; it cannot go with a read-only dashboard"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(16)
        .build()
        .context("cannot start the server's runtime")?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(address))
        .with_context(|| format!("cannot listen on {address}"))?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let on_server = dlq.backend() == dlqlite::store::Backend::Postgres;
    let app = Arc::new(app::App {
        dlq,
        csrf: csrf_of(&token),
        cookie: format!("dlq_token_{}", bound.port()),
        token,
        read_only,
        exec: args.exec.map(|command| actions::Exec {
            command,
            timeout: super::retry::attempt_timeout(args.timeout),
            parallel: usize::from(args.parallel),
            max_retries: args.max_retries,
        }),
        runs: Mutex::new(Vec::new()),
        insight: insight::Cache::default(),
        heavy: Arc::new(tokio::sync::Semaphore::new(HEAVY_AT_ONCE)),
        request_budget: Duration::from_secs_f64(args.request_timeout),
        stopping: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        db_label: if on_server {
            dlqlite::db::redacted_url(&ctx.db_path.to_string_lossy())
        } else {
            ctx.db_path.display().to_string()
        },
        db_identity: (!on_server).then(|| {
            use std::os::unix::fs::MetadataExt;
            let opened = std::fs::metadata(&ctx.db_path)
                .ok()
                .map(|m| (m.dev(), m.ino()));
            (ctx.db_path.clone(), opened)
        }),
    });
    let host = match bound.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
        IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    // A generated token is printed in the URL to open (the only way to
    // learn it); one given with --token/DLQ_TOKEN is not: whoever gave it
    // knows it, and stdout often ends up in a service's log.
    let url = if explicit {
        format!("http://{host}:{}/", bound.port())
    } else {
        format!("http://{host}:{}/?token={}", bound.port(), app.token)
    };
    {
        // The URL is the one line on stdout (scripts read it); the rest
        // goes to stderr.
        let mut out = std::io::stdout().lock();
        writeln!(out, "{url}")?;
        out.flush()?;
    }
    eprintln!(
        "dlq serve: {} on http://{}:{}/{}{}; Ctrl-C stops",
        dlqlite::text::for_terminal(&app.db_label),
        host,
        bound.port(),
        if read_only { " (read-only)" } else { "" },
        if app.exec.is_some() {
            " (retries on)"
        } else {
            ""
        },
    );
    if args.open {
        open_browser(&url);
    }
    // First Ctrl-C (or SIGTERM): stop serving; retries this server started
    // take no new items and their running commands get the grace to
    // finish, then are killed. A second kills them (their process groups)
    // at once.
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let stop_tx = Mutex::new(Some(stop_tx));
    let presses = AtomicUsize::new(0);
    let handler_app = app.clone();
    let _ = ctrlc::set_handler(move || {
        if presses.fetch_add(1, Ordering::SeqCst) == 0 {
            if let Some(tx) = stop_tx.lock().ok().and_then(|mut s| s.take()) {
                let _ = tx.send(());
            }
        } else {
            eprintln!("dlq serve: killing running retry commands");
            actions::kill_runs(&handler_app);
        }
    });
    let router = app::router(app.clone());
    let stopping_app = app.clone();
    let stopped = runtime.block_on(server::serve(listener, router, limits, async move {
        let _ = stop_rx.await;
        // Said at once: the server may take up to its grace to stop.
        eprintln!(
            "dlq serve: stopping{}",
            if actions::running(&stopping_app) > 0 {
                "; running retry commands get 5 s to finish, then are killed (Ctrl-C again kills them now)"
            } else {
                ""
            }
        );
    }));
    // Store work still running for requests is interrupted now; what ends
    // within the grace is answered.
    app.stopping.store(true, Ordering::Relaxed);
    if stopped.abandoned > 0 {
        eprintln!(
            "dlq serve: closed {} connection{} still open after {} s",
            stopped.abandoned,
            if stopped.abandoned == 1 { "" } else { "s" },
            server::SHUTDOWN_GRACE.as_secs()
        );
    }
    // Retry commands are this server's own work: they get the same grace,
    // then are killed (or at once, by a second Ctrl-C).
    actions::stop_runs(&app, stopped.deadline);
    // The store's work for requests still on the blocking pool gets what
    // is left of the grace; then the process exits without it (an
    // unfinished write is rolled back, as after a crash).
    runtime.shutdown_timeout(
        stopped
            .deadline
            .saturating_duration_since(std::time::Instant::now()),
    );
    Ok(ExitCode::SUCCESS)
}

/// `xdg-open URL` (macOS: `open`), reaped by a thread; a failure is a note.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    match std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => eprintln!("dlq serve: could not start {opener} ({e}); open the URL above"),
    }
}
