//! `dlq copy`: every item of one database into another, SQLite or
//! PostgreSQL either way (dlqlite::copy).

use super::output::{plural, print_json};
use super::progress::Bar;
use super::Context;
use anyhow::{Context as _, Result};
use std::io::Write;
use std::process::ExitCode;

/// Copy every item from one database into another
///
/// SRC and DST are each a SQLite file or a PostgreSQL URL
/// (postgres://user@host:port/dbname; the password from the URL,
/// PGPASSWORD or ~/.pgpass). Every item goes through the merge rule: a
/// copy into an empty database gives the same items, histories, artifacts
/// and counters; copying again changes nothing; copying into a database
/// that has some of the items merges their histories. Nothing is evicted
/// (a job that ends over its capacity gets its capacity raised, as
/// `import` does). A job new to DST keeps the capacity it had in SRC
/// (when it followed SRC's default and DST's default differs, SRC's
/// default becomes its own). DST is created when it is a file that does not exist
/// (a PostgreSQL database must exist; dlq creates its tables). The
/// source is only read. `--db` is not used.
///
/// Examples:
///   dlq copy --from ~/.prodigy/dlq.db --to postgres://dlq@db.internal/dlq
///   dlq copy --from postgres://dlq@db.internal/dlq --to snapshot.db
///   dlq copy --from demo.db --to postgres://dlq@db.internal/dlq --json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The database to read (a file or a postgres:// URL)
    #[arg(long, value_name = "SRC")]
    from: String,
    /// The database to write (a file or a postgres:// URL)
    #[arg(long, value_name = "DST")]
    to: String,
    /// Print what was done as JSON on stdout
    #[arg(long)]
    json: bool,
}

/// A database named on the command line, for messages (a URL without its
/// password).
fn label(target: &str) -> String {
    if dlqlite::db::is_conninfo(target) {
        // Such a string often holds a password: not echoed.
        "(a libpq connection string)".to_string()
    } else if target.contains("://") || dlqlite::db::is_url(target.trim()) {
        // Any URL-like value, a misspelt one too, loses its password.
        dlqlite::db::redacted_url(target)
    } else {
        target.to_string()
    }
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let (from_label, to_label) = (label(&args.from), label(&args.to));
    if same_database(&args.from, &args.to) {
        super::usage!("--from and --to are the same database ({to_label})");
    }
    let options = ctx.open_options();
    // The source is only read: opened read-only, so a file dlq may not
    // write (or a server role without write rights) is a source too. One
    // with an older schema is upgraded first, as any command that writes
    // would do (a read-only handle cannot).
    let from = match options.clone().read_only(true).open_existing(&args.from) {
        Err(e) if e.kind() == dlqlite::ErrorKind::ReadOnly => options.open_existing(&args.from),
        opened => opened,
    }
    .with_context(|| format!("opening --from {from_label}"))?;
    if let Some((wal, size)) = dlqlite::db::unreadable_wal(std::path::Path::new(&args.from)) {
        // A copy of what can be read would silently miss the rest.
        anyhow::bail!(
            "--from {}: its WAL {} ({size} bytes) cannot be read (the directory is read-only and \
             holds no -shm file), so a copy would miss its latest changes: copy the database \
             with its -wal somewhere writable first",
            dlqlite::text::for_terminal(&from_label),
            dlqlite::text::for_terminal(&wal.display().to_string())
        );
    }
    let to = options
        .open(&args.to)
        .with_context(|| format!("opening --to {to_label}"))?;
    let total: i64 = from.jobs()?.iter().map(|job| job.item_count).sum();
    let bar = Bar::new("copy", "items", Some(u64::try_from(total).unwrap_or(0)));
    let report = dlqlite::copy::copy(&from, &to, &from_label, |n| bar.set_done(n))?;
    bar.clear();
    if args.json {
        print_json(&report)?;
    }
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "copied {} from {} to {}: {} new, {} merged, {} unchanged ({} new attempt(s)), {}",
        plural(report.items_read, "item"),
        dlqlite::text::for_terminal(&from_label),
        dlqlite::text::for_terminal(&to_label),
        report.items_new,
        report.items_merged,
        report.items_unchanged,
        report.new_attempts,
        plural(report.jobs, "job"),
    )?;
    for raised in &report.capacity_raised {
        writeln!(
            err,
            "{}: kept all {} items, over its capacity of {}: its capacity is now {}",
            dlqlite::text::for_terminal(&raised.job_id),
            raised.items,
            raised.previous_max_items,
            raised.items
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether two targets name one database: the same URL, or paths to one
/// file (by device and inode, so a hard link or a bind mount is caught
/// too: SQLite keys its WAL and locks by name, so writing a file through
/// two names at once corrupts it).
fn same_database(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    if dlqlite::db::is_url(a) || dlqlite::db::is_url(b) {
        return false;
    }
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}
