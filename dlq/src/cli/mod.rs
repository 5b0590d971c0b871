//! The command line: global options, the subcommand list and dispatch. Each
//! subcommand lives in its own file with an `Args` struct and a `run`
//! function; none of them contains SQL.

mod add;
mod analyze;
mod capacity;
mod categories;
mod check;
mod clear;
mod completions;
mod copy;
mod db;
mod events;
mod export;
mod families;
mod import;
mod inspect;
mod jobs;
mod list;
mod mark;
mod metrics;
mod output;
mod progress;
mod purge;
mod report;
mod requeue;
mod retention;
mod retry;
#[cfg(feature = "serve")]
mod serve;
mod show;
mod sql;
mod stats;
mod table;
mod term;
mod watch;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use dlqlite::{Dlq, OpenOptions, Timestamp};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// The heading of the options every subcommand takes.
const GLOBAL: &str = "Global options";

/// The command line as parsed: [`Cli`] with the global options shown once,
/// in `dlq --help`. A subcommand's help hides them (they made `retry
/// --help` 120 lines, most of it the same in every subcommand) and names
/// them in one line instead; they are still accepted there. Its `-h` and
/// `--help` are one page: options first, then details and examples.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let command = Cli::command();
    let globals: Vec<clap::Arg> = command
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    let names: Vec<String> = globals
        .iter()
        .filter_map(|a| Some(format!("--{}", a.get_long()?)))
        .collect();
    let line = format!("Global options: {} (see `dlq --help`)", names.join(" "));
    command.mut_subcommands(|sub| hide_globals(sub, &globals, &line))
}

/// Gives `sub` (and its subcommands) hidden copies of the global options,
/// before the command is built: clap then propagates nothing over them
/// (it skips an option a subcommand has), and parses them as before. (A
/// change to a built command's options would leave its lookup of long
/// names stale.)
fn hide_globals(sub: clap::Command, globals: &[clap::Arg], line: &str) -> clap::Command {
    let mut sub = sub;
    for global in globals {
        sub = sub.arg(global.clone().hide(true));
    }
    // One layout for `-h` and `--help`: the summary, the usage and one
    // line per option, then the details and examples. clap lays out
    // `--help` with a blank line and a line of defaults per option as soon
    // as a command has a long description or an option a long help, which
    // made `retry --help` 102 lines, most of them spacing.
    let mut after = Vec::new();
    if let Some(long) = sub.get_long_about().map(ToString::to_string) {
        let (summary, details) = long.split_once("\n\n").unwrap_or((&long, ""));
        sub = sub.about(summary.to_string()).long_about(None);
        if !details.is_empty() {
            after.push(details.to_string());
        }
    }
    if let Some(given) = sub.get_after_help() {
        after.push(given.to_string());
    }
    after.push(line.to_string());
    sub.mut_args(|arg| {
        let arg = match arg.get_long_help().map(ToString::to_string) {
            Some(long) => arg.help(long).long_help(None),
            None => arg,
        };
        // Values with a line of help each (`--format`'s) would bring the
        // long layout back: their names go in the option's line instead.
        let values = arg.get_possible_values();
        if values.iter().any(|v| v.get_help().is_some()) {
            let names: Vec<&str> = values.iter().map(|v| v.get_name()).collect();
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            arg.help(format!("{help} [values: {}]", names.join(", ")))
                .hide_possible_values(true)
        } else {
            arg
        }
    })
    .after_help(after.join("\n\n"))
    .mut_subcommands(|sub| hide_globals(sub, globals, line))
}

/// dlq: a dead letter queue on SQLite — keep, search, analyse and replay the
/// work items that keep failing.
#[derive(Debug, Parser)]
#[command(name = "dlq", version, about, long_about = None)]
pub struct Cli {
    /// The database file, or a PostgreSQL URL (postgres://user@host:port/dbname)
    /// [default: $PRODIGY_HOME/dlq.db, PRODIGY_HOME defaulting to ~/.prodigy]
    // hide_env_values: DLQ_DB may hold a URL with a password, which --help
    // would otherwise print.
    #[arg(
        long,
        global = true, help_heading = GLOBAL,
        env = "DLQ_DB",
        value_name = "PATH",
        hide_env_values = true
    )]
    db: Option<PathBuf>,

    /// How long to wait for another writer, in milliseconds [default: 30000]
    // hide_env_values: help then names the variable alone (`[env:
    // DLQ_NOW]`), not `DLQ_NOW=` with an empty value.
    #[arg(long, global = true, help_heading = GLOBAL, env = "DLQ_BUSY_TIMEOUT_MS", value_name = "MS",
          hide_env_values = true,
          value_parser = clap::value_parser!(u32).range(0..=i32::MAX as i64))]
    busy_timeout_ms: Option<u32>,

    /// Take this RFC 3339 time as "now" for ages only (purge and retention
    /// cutoffs, `now` in filters, check and metrics ages), e.g. to replay a
    /// retention run;
    /// leases, attempt times and events keep the real clock
    #[arg(long, global = true, help_heading = GLOBAL, env = "DLQ_NOW", value_name = "TIME",
          hide_env_values = true, value_parser = parse_now)]
    now: Option<Timestamp>,

    /// CSV cells as they are: by default a cell that starts with = + - @
    /// (and is not a number) gets a leading ' so spreadsheets do not run it
    #[arg(long, global = true, help_heading = GLOBAL)]
    raw_csv: bool,

    /// Colour in tables: auto (a terminal, and NO_COLOR not set), always,
    /// never
    #[arg(long, global = true, help_heading = GLOBAL, value_enum, value_name = "WHEN", default_value_t = term::ColorChoice::Auto)]
    color: term::ColorChoice,

    /// Tables: cut no cell (by default a table fits the terminal, or
    /// COLUMNS, and long cells end in …)
    #[arg(long, global = true, help_heading = GLOBAL)]
    wide: bool,

    /// Tables: times relative to now ("3h 5m ago") instead of to the
    /// second in UTC
    #[arg(long, global = true, help_heading = GLOBAL)]
    relative: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Import(import::Args),
    List(list::Args),
    Inspect(inspect::Args),
    Stats(stats::Args),
    Show(show::Args),
    Analyze(analyze::Args),
    Export(export::Args),
    Add(add::Args),
    Retry(retry::Args),
    Requeue(requeue::Args),
    Purge(purge::Args),
    Clear(clear::Args),
    Mark(mark::Args),
    Capacity(capacity::Args),
    Categories(categories::Args),
    Families(families::Args),
    Check(check::Args),
    Retention(retention::Args),
    Metrics(metrics::Args),
    Events(events::Args),
    Watch(watch::Args),
    Jobs(jobs::Args),
    Sql(sql::Args),
    Report(report::Args),
    #[cfg(feature = "serve")]
    Serve(serve::Args),
    Db(db::Args),
    Copy(copy::Args),
    Completions(completions::Args),
}

/// What every subcommand gets: where the database is.
pub struct Context {
    db_path: PathBuf,
    /// `--now` / `DLQ_NOW`: "now" for age selection only.
    now: Option<Timestamp>,
    /// `--busy-timeout-ms` / `DLQ_BUSY_TIMEOUT_MS`.
    options: OpenOptions,
}

impl Context {
    /// Opens (creating if needed) the database.
    pub fn open(&self) -> Result<Dlq> {
        let dlq = self.options.open(&self.db_path)?;
        Ok(self.with_age_clock(dlq))
    }

    /// Opens, to read, a database that must already exist: a command that
    /// only reads must not create an empty database at a mistyped path. A
    /// database this process may not write (a read-only file or directory)
    /// is opened read-only; if that hides a WAL, stderr says so once.
    pub fn open_existing(&self) -> Result<Dlq> {
        self.require_existing()?;
        let dlq = match self.options.open_existing(&self.db_path) {
            Err(dlqlite::Error::ReadOnly { .. }) => self
                .options
                .clone()
                .read_only(true)
                .open_existing(&self.db_path)?,
            other => other?,
        };
        self.warn_unreadable_wal();
        Ok(self.with_age_clock(dlq))
    }

    /// Opens, to change it, a database that must already exist; a read-only
    /// one is an error naming the file and why.
    pub fn open_existing_to_write(&self) -> Result<Dlq> {
        self.require_existing()?;
        let dlq = self.options.open_existing(&self.db_path)?;
        Ok(self.with_age_clock(dlq))
    }

    /// Opens the database to read it, creating it when missing (`db`,
    /// `capacity` without a change).
    pub fn open_or_create(&self) -> Result<Dlq> {
        if self.is_url() {
            self.open()
        } else if self.db_path.exists() {
            self.open_existing()
        } else {
            self.open()
        }
    }

    fn require_existing(&self) -> Result<()> {
        // A server database is checked by connecting to it.
        if !self.is_url() && !self.db_path.exists() {
            anyhow::bail!(
                "no database at {}: import or add items first, or pass --db (or set DLQ_DB)",
                self.db_path.display()
            );
        }
        Ok(())
    }

    /// Says on stderr, once per process, when the database's WAL cannot be
    /// read (see `dlqlite::db::unreadable_wal`): what is read may miss its
    /// latest changes.
    pub fn warn_unreadable_wal(&self) {
        static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if self.is_url() {
            return;
        }
        let Some((wal, size)) = dlqlite::db::unreadable_wal(&self.db_path) else {
            return;
        };
        if WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "dlq: warning: {}: its WAL {} ({size} bytes) cannot be read (the directory is read-only \
             and holds no -shm file): the latest changes may be missing",
            dlqlite::text::for_terminal(&self.db_path.display().to_string()),
            dlqlite::text::for_terminal(&wal.display().to_string()),
        );
    }

    /// `dlq` with `--now`: that time is "now" for ages (purge, retention,
    /// filters, check, metrics).
    pub fn with_age_clock(&self, dlq: Dlq) -> Dlq {
        term::load_categories(&dlq);
        match self.now {
            Some(now) => dlq.with_clock(Arc::new(move || now)),
            None => dlq,
        }
    }

    /// The database path.
    pub fn db_path(&self) -> &std::path::Path {
        &self.db_path
    }

    /// Whether `--db` is a PostgreSQL URL rather than a file.
    pub fn is_url(&self) -> bool {
        self.db_path.to_str().is_some_and(dlqlite::db::is_url)
    }

    /// The options every database is opened with (`--busy-timeout-ms`).
    pub fn open_options(&self) -> OpenOptions {
        self.options.clone()
    }
}

/// A usage error found after parsing (a bad --filter, a flag missing, a
/// confirmation that cannot be asked): `main` exits with 2 for it, as for
/// clap's own usage errors.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Returns early with a [`Usage`] error.
macro_rules! usage {
    ($($arg:tt)*) => {
        return Err($crate::cli::Usage(format!($($arg)*)).into())
    };
}
pub(crate) use usage;

/// `$PRODIGY_HOME`, defaulting to `~/.prodigy`.
pub fn prodigy_home() -> Result<PathBuf> {
    if let Some(home) = std::env::var_os("PRODIGY_HOME").filter(|h| !h.is_empty()) {
        let home = PathBuf::from(home);
        if !home.is_absolute() {
            anyhow::bail!(
                "PRODIGY_HOME ({}) is not an absolute path: set it to one, or pass --db",
                home.display()
            );
        }
        return Ok(home);
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("cannot find the home directory: set HOME, PRODIGY_HOME or --db")?;
    let home = PathBuf::from(home);
    // A relative HOME would put the database under whatever directory dlq
    // runs in.
    if !home.is_absolute() {
        anyhow::bail!(
            "HOME ({}) is not an absolute path: set HOME, PRODIGY_HOME or --db",
            home.display()
        );
    }
    Ok(home.join(".prodigy"))
}

fn parse_now(text: &str) -> std::result::Result<Timestamp, String> {
    Timestamp::parse(text)
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    output::RAW_CSV.store(cli.raw_csv, std::sync::atomic::Ordering::Relaxed);
    term::init(cli.color, cli.wide, cli.relative);
    let db_path = match cli.db {
        Some(path) => path,
        None => prodigy_home()?.join("dlq.db"),
    };
    // A libpq string, a misspelt URL...: refused in one line that does not
    // echo the value (such values often hold a password).
    if let Some(Err(e)) = db_path.to_str().map(dlqlite::db::refuse_lookalike) {
        usage!("--db (or DLQ_DB): {e}");
    }
    if let Some(now) = cli.now {
        eprintln!(
            "dlq: warning: --now/DLQ_NOW: ages (purge, retention, filters, check, metrics) take {now} as now \
             (leases, attempt times and events keep the real clock)"
        );
    }
    let mut options = OpenOptions::new();
    if let Some(ms) = cli.busy_timeout_ms {
        options.busy_timeout(std::time::Duration::from_millis(ms.into()));
    }
    let ctx = Context {
        db_path,
        now: cli.now,
        options,
    };
    // "List(Args { .. })" -> "list": the subcommand's name for messages.
    let name = format!("{:?}", cli.command)
        .split(['(', ' '])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let result = match cli.command {
        Command::Import(args) => import::run(args, &ctx),
        Command::List(args) => list::run(args, &ctx),
        Command::Inspect(args) => inspect::run(args, &ctx),
        Command::Stats(args) => stats::run(args, &ctx),
        Command::Show(args) => show::run(args, &ctx),
        Command::Analyze(args) => analyze::run(args, &ctx),
        Command::Export(args) => export::run(args, &ctx),
        Command::Add(args) => add::run(args, &ctx),
        Command::Retry(args) => retry::run(args, &ctx),
        Command::Requeue(args) => requeue::run(args, &ctx),
        Command::Purge(args) => purge::run(args, &ctx),
        Command::Clear(args) => clear::run(args, &ctx),
        Command::Mark(args) => mark::run(args, &ctx),
        Command::Capacity(args) => capacity::run(args, &ctx),
        Command::Categories(args) => categories::run(args, &ctx),
        Command::Families(args) => families::run(args, &ctx),
        Command::Check(args) => check::run(args, &ctx),
        Command::Retention(args) => retention::run(args, &ctx),
        Command::Metrics(args) => metrics::run(args, &ctx),
        Command::Events(args) => events::run(args, &ctx),
        Command::Watch(args) => watch::run(args, &ctx),
        Command::Jobs(args) => jobs::run(args, &ctx),
        Command::Sql(args) => sql::run(args, &ctx),
        Command::Report(args) => report::run(args, &ctx),
        #[cfg(feature = "serve")]
        Command::Serve(args) => serve::run(args, &ctx),
        Command::Db(args) => db::run(args, &ctx),
        Command::Copy(args) => copy::run(args, &ctx),
        Command::Completions(args) => completions::run(args),
    };
    result.map_err(|error| match error.downcast_ref::<dlqlite::Error>() {
        // Names the subcommand that PostgreSQL cannot run yet.
        Some(dlqlite::Error::Unsupported { what, backend }) => anyhow::anyhow!(
            "{} is not available on {backend} yet (it works on a SQLite database; \
             `dlq copy` moves the items to one)",
            if what == "this operation" {
                format!("dlq {name}")
            } else {
                format!("dlq {name}: {what}")
            }
        ),
        _ => with_suggestion(error, &ctx),
    })
}

/// An unknown job's error with the closest job names, when one is close
/// ("did you mean ...?"): a typo in a long generated job id is the usual
/// cause.
fn with_suggestion(error: anyhow::Error, ctx: &Context) -> anyhow::Error {
    let Some(dlqlite::Error::JobNotFound(wanted)) = error.downcast_ref::<dlqlite::Error>() else {
        return error;
    };
    let wanted = wanted.clone();
    let Ok(jobs) = ctx.open_existing().and_then(|dlq| Ok(dlq.jobs()?)) else {
        return error;
    };
    let names = jobs.iter().map(|job| job.job_id.as_str());
    match closest(&wanted, names) {
        Some(name) => {
            let name = name.to_string();
            error.context(format!("job {wanted:?} not found; did you mean {name:?}?"))
        }
        None => error,
    }
}

/// The name most like `wanted`: the same but for case, or within a few
/// edits (a quarter of its length, at least 2). Ties go to the first.
pub(crate) fn closest<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    // Names past this length are compared for case only: the distance
    // costs their lengths multiplied, and a typo in 200 characters is not
    // what a suggestion can help with.
    const LONGEST: usize = 200;
    let limit = (wanted.chars().count() / 4).max(2);
    let mut best: Option<(usize, &str)> = None;
    for name in names {
        let distance = if name.eq_ignore_ascii_case(wanted) {
            0
        } else if wanted.len() > LONGEST || name.len() > LONGEST {
            continue;
        } else {
            edit_distance(wanted, name, limit)
        };
        if distance <= limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, name));
        }
    }
    best.map(|(_, name)| name)
}

/// Levenshtein distance, or more than `limit` once it is sure to be (long
/// names of very different lengths cost nothing).
fn edit_distance(a: &str, b: &str, limit: usize) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > limit {
        return limit + 1;
    }
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        if current.iter().min().is_some_and(|&m| m > limit) {
            return limit + 1;
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_close_job_name_is_suggested() {
        let jobs = [
            "mapreduce-20251123_194253",
            "mapreduce-20250111_102500",
            "job-early",
        ];
        let pick = |wanted| closest(wanted, jobs.iter().copied());
        assert_eq!(
            pick("mapreduce-20251123_194235"),
            Some("mapreduce-20251123_194253")
        );
        assert_eq!(pick("JOB-EARLY"), Some("job-early"));
        assert_eq!(pick("job-eraly"), Some("job-early"));
        assert_eq!(pick("nosuch"), None);
        assert_eq!(pick(""), None);
        assert_eq!(edit_distance("kitten", "sitting", 10), 3);
        assert_eq!(edit_distance("abc", "abc", 0), 0);
        assert!(edit_distance("a", "abcdefgh", 2) > 2);
    }
}
