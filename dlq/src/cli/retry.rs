//! `dlq retry`: replay dead letters through a command.

use super::output::{note, parse_filter, print_json, Kind, Table};
use super::progress::Bar;
use super::Context;
use anyhow::Result;
use dlqlite::retry::command::CommandHandler;
use dlqlite::retry::{
    preview, retry, Progress, RetryOptions, RunControl, MAX_LEASE, MAX_PARALLEL, MAX_RETRIES,
    MIN_LEASE,
};
use dlqlite::text::for_terminal;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Replay a job's dead letters through a command, in parallel
///
/// CMD runs through `sh -c` once per attempt, in its own process group,
/// with the item's item_data on stdin (stdout is discarded, the tail of
/// stderr kept). Exit 0 removes the item; anything else appends a
/// CommandFailed attempt, and the item is tried again, up to --max-retries
/// times, with backoff. Past --timeout its process group is killed (a
/// Timeout attempt).
///
/// Its environment:
///   DLQ_JOB_ID, DLQ_ITEM_ID  the item
///   DLQ_ATTEMPT      1, 2, ...: the attempt in this run (the stored
///                    attempt_number counts the item's whole history)
///   DLQ_ITEM_FILE    the whole item, legacy JSON (0600, removed after)
///   DLQ_RESULT_FILE  a command that fails may write {"error_type": "X",
///                    "error_message": "..."} there (64 KiB at most): the
///                    attempt records that instead of CommandFailed
///
/// Items not eligible for reprocessing are skipped unless --force. Items
/// are claimed with leases, so two runs never take one item at once, and
/// a dead run's items are taken again when its leases expire. Ctrl-C stops
/// taking items; a second one kills the running commands. Run the same
/// command again to continue.
///
/// Exit status: 0 when every item tried succeeded, 1 when some failed again
/// or the run was interrupted.
///
/// Examples:
///   dlq retry mapreduce-20251123_194253 --exec './process-item.sh' --parallel 4
///   dlq retry J --exec 'jq -e .priority' --filter 'item.priority >= 5' --dry-run
///   dlq retry J --exec './process-item.sh' --category transient --dry-run
///   dlq retry --status
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The job (with --status: only its runs)
    job_id: Option<String>,
    /// The command, run with `/bin/sh -c` (not empty)
    #[arg(long, value_name = "CMD", value_parser = non_blank_command)]
    exec: Option<String>,
    /// Commands at once (1 to 1024)
    #[arg(long, visible_alias = "max-parallel", default_value_t = 10,
          value_parser = clap::value_parser!(u16).range(1..=MAX_PARALLEL as i64))]
    parallel: u16,
    /// Attempts per item in this run (1 to 1000)
    #[arg(long, default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_RETRIES)))]
    max_retries: u32,
    /// Only items matching this expression (see `dlq list --help`)
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    /// Only items of this failure category (transient,
    /// conditionally_recoverable, permanent, unclassified): short for
    /// --filter 'category == "C"', and with --filter both must match
    #[arg(long, value_name = "C", value_parser = super::categories::parse_category)]
    category: Option<dlqlite::Category>,
    /// Also take items not eligible for reprocessing
    #[arg(long)]
    force: bool,
    /// List what would run; change nothing
    #[arg(long)]
    dry_run: bool,
    /// Seconds an attempt may run before its process group is killed (up to
    /// 30 days; 0: no limit). One hung command must not hang the run.
    #[arg(long, value_name = "SECS", default_value = "3600",
          value_parser = seconds_up_to_30_days)]
    timeout: f64,
    /// At most this many command starts per second
    #[arg(long, value_name = "N", value_parser = positive_rate)]
    rate: Option<f64>,
    /// Backoff between attempts of one item: BASE ms, doubling, capped at 30 s
    #[arg(long, value_name = "BASE", default_value_t = 200)]
    backoff_ms: u64,
    /// Seconds a claim lasts unless renewed (renewed every third of it)
    #[arg(long, value_name = "SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64)
              .range(MIN_LEASE.as_secs()..=MAX_LEASE.as_secs()))]
    lease: u64,
    /// Print the summary as JSON
    #[arg(long)]
    json: bool,
    /// List recent runs instead (running, finished, interrupted, crashed)
    #[arg(long)]
    status: bool,
}

/// `--exec`: an empty command would "succeed" for every item and remove
/// them all.
fn non_blank_command(text: &str) -> std::result::Result<String, String> {
    if text.trim().is_empty() {
        Err("the command is empty (an empty command would succeed and remove every item)".into())
    } else {
        Ok(text.to_string())
    }
}

/// `--timeout`: seconds a Duration can hold, at most 30 days; 0 is no
/// limit.
pub(super) fn seconds_up_to_30_days(text: &str) -> std::result::Result<f64, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if seconds.is_finite() && (0.0..=30.0 * 86_400.0).contains(&seconds) {
        Ok(seconds)
    } else {
        Err(format!(
            "{text} is not from 0 (no limit) to 30 days (2592000 s)"
        ))
    }
}

/// A `--timeout` as the handler takes it: `None` for 0, no limit.
pub(super) fn attempt_timeout(seconds: f64) -> Option<Duration> {
    (seconds > 0.0).then(|| Duration::from_secs_f64(seconds))
}

/// `--rate`: a positive number of starts per second.
fn positive_rate(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && (0.001..=1e6).contains(&rate) => Ok(rate),
        _ => Err(format!(
            "{text:?} is not a number of starts per second from 0.001 to 1000000"
        )),
    }
}

pub fn run(args: Args, ctx: &super::Context) -> Result<std::process::ExitCode> {
    if args.status {
        return status(&args, ctx);
    }
    let Some(job_id) = args.job_id.clone() else {
        super::usage!("which job? dlq retry JOB --exec CMD");
    };
    let options = options(&args, job_id.clone())?;
    let dlq = if args.dry_run {
        ctx.open_existing()?
    } else {
        ctx.open_existing_to_write()?
    };
    dlq.require_job(&job_id)?;
    if args.dry_run {
        return dry_run(&dlq, &options, args.json);
    }
    let Some(exec) = args.exec.clone() else {
        super::usage!("what to run? pass --exec CMD");
    };
    let handler = CommandHandler::new(&exec, attempt_timeout(args.timeout), &std::env::temp_dir())?;
    // The total is the run's own count, known once it has started.
    let bar = Bar::new("retry", "items", None);
    let control = stop_on_ctrl_c(bar.clone());
    let summary = retry(&dlq, &options, &handler, &control, |p: &Progress| {
        let done = p.succeeded + p.failed + p.lost;
        // Items added while the run goes can take it past its count.
        bar.set_total("items", p.total.max(done));
        bar.set_done(done);
        bar.set_message(format!(
            "{} ok, {} failed, {} running",
            p.succeeded, p.failed, p.running
        ));
    });
    bar.clear();
    let summary = summary?;
    if args.json {
        print_json(&summary)?;
    }
    print_summary(&summary)?;
    Ok(
        if summary.interrupted || summary.counts.failed > 0 || summary.lost > 0 {
            std::process::ExitCode::from(1)
        } else {
            std::process::ExitCode::SUCCESS
        },
    )
}

/// The run's options from the flags (the run record keeps the flags as its
/// parameters), checked as the library will check them.
fn options(args: &Args, job_id: String) -> Result<RetryOptions> {
    let mut options = RetryOptions::new(job_id)
        .force(args.force)
        .parallel(usize::from(args.parallel))
        .max_retries(args.max_retries)
        .backoff_base(Duration::from_millis(args.backoff_ms))
        .lease(Duration::from_secs(args.lease))
        .parameters(serde_json::json!({
            "exec": args.exec,
            "parallel": args.parallel,
            "max_retries": args.max_retries,
            "filter": args.filter,
            "category": args.category,
            "force": args.force,
            "timeout": (args.timeout > 0.0).then_some(args.timeout),
            "rate": args.rate,
            "backoff_ms": args.backoff_ms,
            "lease": args.lease,
        }));
    let filter = parse_filter(args.filter.as_deref())?;
    let category = args.category.map(dlqlite::filter::Expr::category_is);
    options.filter = match (filter, category) {
        (Some(filter), Some(category)) => Some(category.and(filter)),
        (filter, category) => filter.or(category),
    };
    options.rate = args.rate;
    // The flags were parsed within these bounds; a dry run checks them the
    // way the run itself would.
    options.validate()?;
    Ok(options)
}

/// The run's control, stopped by a first Ctrl-C (no new items; running
/// commands finish) and killed by a second.
/// The messages go around the progress bar.
fn stop_on_ctrl_c(bar: Bar) -> Arc<RunControl> {
    let control = Arc::new(RunControl::default());
    let presses = Arc::new(AtomicUsize::new(0));
    let handler_control = Arc::clone(&control);
    // A second handler cannot be set in one process; only the CLI sets it.
    let _ = ctrlc::set_handler(move || {
        if presses.fetch_add(1, Ordering::SeqCst) == 0 {
            bar.suspend(|| {
                eprintln!(
                    "\nstopping: no new items; running commands finish (Ctrl-C again kills them)"
                )
            });
            handler_control.stop();
        } else {
            bar.suspend(|| eprintln!("\nkilling running commands"));
            handler_control.kill();
        }
    });
    control
}

/// The one-line summary of a finished run, on stderr (what was done, for
/// people; --json is the machine's).
fn print_summary(summary: &dlqlite::retry::RetrySummary) -> Result<()> {
    let c = &summary.counts;
    let mut out = std::io::stderr().lock();
    writeln!(
        out,
        "{}: {} item(s) tried ({} attempt(s)): {} succeeded and removed{}, {} failed again{}, {} skipped as not eligible{}; {} remaining{}",
        for_terminal(&summary.job_id),
        c.attempted,
        c.attempts,
        c.succeeded - summary.kept_changed,
        if summary.kept_changed > 0 {
            format!(
                ", {} succeeded but kept (changed while they ran: an attempt merged in, a mark, a write outside dlq)",
                summary.kept_changed
            )
        } else {
            String::new()
        },
        c.failed,
        if summary.lost > 0 {
            format!(", {} removed or taken over by others while tried", summary.lost)
        } else {
            String::new()
        },
        c.skipped,
        if c.skipped > 0 { " (--force takes them)" } else { "" },
        summary.remaining,
        if summary.interrupted { "; interrupted: run it again to continue" } else { "" }
    )?;
    Ok(())
}

fn dry_run(
    dlq: &dlqlite::Dlq,
    options: &RetryOptions,
    json: bool,
) -> Result<std::process::ExitCode> {
    let (items, total, skipped) = preview(dlq, options, usize::MAX)?;
    if json {
        let ids: Vec<&str> = items.iter().map(|i| i.item_id.as_str()).collect();
        print_json(
            &serde_json::json!({"job_id": options.job_id, "would_try": total, "skipped": skipped, "items": ids}),
        )?;
    } else {
        let mut table = Table::new(&[
            ("ITEM", Kind::Id),
            ("FAILS", Kind::Count),
            ("LAST ATTEMPT", Kind::Time),
            ("ERROR TYPE", Kind::ErrorType),
        ]);
        for item in &items {
            table.push(vec![
                item.item_id.clone(),
                item.failure_count.to_string(),
                item.last_attempt.to_string(),
                item.error_type.clone().unwrap_or_default(),
            ]);
        }
        table.print()?;
        println!("dry run: would try {total} item(s); {skipped} skipped as not eligible");
    }
    Ok(std::process::ExitCode::SUCCESS)
}

fn status(args: &Args, ctx: &Context) -> Result<std::process::ExitCode> {
    let dlq = ctx.open_existing()?;
    // A run is crashed when its heartbeat is older than two leases.
    let runs = dlq.runs(
        args.job_id.as_deref(),
        20,
        &dlqlite::retry::hostname(),
        2 * args.lease.max(1) as i64,
    )?;
    if let Some(job) = &args.job_id {
        // A job with runs recorded is known even once removed; one with
        // neither is a typo, said as every command says it.
        if runs.is_empty() {
            dlq.require_job(job)?;
        }
    }
    if args.json {
        print_json(&runs)?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    if runs.is_empty() {
        note("no retry runs recorded");
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let mut table = Table::new(&[
        ("RUN", Kind::Id),
        ("JOB", Kind::Id),
        ("STATUS", Kind::Text),
        ("STARTED", Kind::Time),
        ("ENDED", Kind::Time),
        ("TRIED", Kind::Count),
        ("OK", Kind::Count),
        ("FAILED", Kind::Count),
        ("SKIPPED", Kind::Count),
    ])
    .leave_out_first(&["ENDED", "SKIPPED", "RUN"]);
    for run in runs {
        table.push(vec![
            run.run_id,
            run.job_id,
            run.status.to_string(),
            run.started_at.to_string(),
            run.ended_at.map(|t| t.to_string()).unwrap_or_default(),
            run.counts.attempted.to_string(),
            run.counts.succeeded.to_string(),
            run.counts.failed.to_string(),
            run.counts.skipped.to_string(),
        ]);
    }
    table.print()?;
    Ok(std::process::ExitCode::SUCCESS)
}
