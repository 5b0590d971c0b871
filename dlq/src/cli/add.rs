//! `dlq add`: add legacy-shape items to a job from a file or stdin.

use super::Context;
use anyhow::{Context as _, Result};
use dlqlite::input::read_items;
use dlqlite::store::AddOutcome;
use serde::Serialize;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

/// Add items (one legacy-shape item, a JSON array of them, or JSON lines)
///
/// The whole input is added in one transaction: a malformed item adds
/// nothing and names its position. Adding an item that is already there
/// merges the two (histories are unioned), so adding twice changes nothing.
/// Items of a `dlq export` (json or jsonl) carry their job in a `job_id`
/// key (and its repo in a `repo` key), used when --job-id is not given.
///
/// Examples:
///   dlq add --job-id mapreduce-20251123_194253 item_7.json
///   dlq add failures.jsonl
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The job the items belong to [default: each item's job_id key]
    #[arg(long)]
    job_id: Option<String>,
    /// Input file; `-` or nothing reads stdin
    file: Option<PathBuf>,
    /// Print the summary as JSON
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    items_read: usize,
    items_new: usize,
    items_merged: usize,
    items_unchanged: usize,
    items_evicted: usize,
}

/// What items are read from: a file, or stdin (a file, or spooled to one),
/// so that it can be read twice.
trait Input: Read + std::io::Seek {}
impl<T: Read + std::io::Seek> Input for T {}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let (mut reader, source): (Box<dyn Input>, String) = match &args.file {
        Some(path) if path.as_os_str() != "-" => {
            if dlqlite::db::is_database_file(ctx.db_path(), path) {
                anyhow::bail!(
                    "{}: is the database itself (or its -wal/-shm), not items to add",
                    path.display()
                );
            }
            let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
            (
                Box::new(std::io::BufReader::new(file)),
                path.display().to_string(),
            )
        }
        _ => {
            let stdin = std::io::stdin();
            if stdin.is_terminal() {
                // Otherwise it would look hung, waiting for input nobody
                // knows it wants.
                eprintln!("dlq: reading items from stdin (JSON or JSON lines; Ctrl-D to end)");
            }
            (spooled(stdin.lock())?, "stdin".to_string())
        }
    };
    let dlq = ctx.open()?;
    // Items that carry their jobs may name several. On PostgreSQL each job's
    // row is locked until the commit, so they are locked first, in job
    // order, as every multi-job write takes them: two adds of the same jobs
    // in opposite orders would otherwise each hold a job the other waits
    // for (a deadlock, 40P01). SQLite has one writer and needs no pass.
    let mut jobs: std::collections::BTreeMap<String, Option<String>> = Default::default();
    if args.job_id.is_none() && dlq.backend() == dlqlite::store::Backend::Postgres {
        read_items(&mut reader, &source, |_, mut item| {
            if let Some(job) = item.take_job_id() {
                let repo = item.take_repo();
                jobs.entry(job).or_insert(repo);
            }
            Ok(())
        })?;
        reader.seek(std::io::SeekFrom::Start(0))?;
    }
    let summary = dlq.write(|tx| {
        for (job, repo) in &jobs {
            tx.ensure_job(job, repo.as_deref())?;
        }
        let mut summary = Summary::default();
        summary.items_read = read_items(reader, &source, |position, mut item| {
            let carried = item.take_job_id();
            // Taken even when --job-id overrides the job, so it does not stay
            // behind as an unknown field of the item; it then names the
            // exported job's repo, which the new job is not.
            let carried_repo = item.take_repo();
            let repo = if args.job_id.is_none() {
                carried_repo
            } else {
                None
            };
            let Some(job_id) = args.job_id.clone().or(carried) else {
                return Err(dlqlite::Error::invalid_item(
                    format!("{source}: item {position}"),
                    "no job: pass --job-id (the item has no job_id key)",
                ));
            };
            let report = tx.add(&job_id, repo.as_deref(), &item)?;
            match report.outcome {
                AddOutcome::Inserted => summary.items_new += 1,
                AddOutcome::Merged => summary.items_merged += 1,
                AddOutcome::Unchanged => summary.items_unchanged += 1,
            }
            summary.items_evicted += report.evicted.len();
            Ok(())
        })?;
        summary.items_evicted += tx.settle_evictions()?.len();
        Ok(summary)
    })?;
    if args.json {
        super::output::print_json(&summary)?;
    }
    println_summary(args.job_id.as_deref().unwrap_or("items"), &summary)?;
    Ok(ExitCode::SUCCESS)
}

/// What was added, for people: one line on stderr.
/// Standard input, taken in full before the write transaction starts: a
/// slow producer (or a person typing) would otherwise hold the write lock,
/// and every other writer (adds, retry lease renewals) would wait on it.
/// A pipe or terminal goes through an unnamed scratch file (memory stays
/// flat); a redirected regular file is read as it is.
fn spooled(mut stdin: std::io::StdinLock<'static>) -> Result<Box<dyn Input>> {
    use std::io::{Seek, SeekFrom};
    use std::os::fd::AsFd;
    let file = stdin
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .map(std::fs::File::from)
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()));
    if let Some(file) = file {
        return Ok(Box::new(std::io::BufReader::new(file)));
    }
    let dir = std::env::temp_dir();
    let mut spool = dlqlite::outfile::spool(&dir).with_context(|| {
        "a scratch file for stdin (in the temporary directory: set TMPDIR to change it)".to_string()
    })?;
    std::io::copy(&mut stdin, &mut spool)
        .with_context(|| format!("reading stdin into a scratch file in {}", dir.display()))?;
    spool.seek(SeekFrom::Start(0))?;
    Ok(Box::new(std::io::BufReader::new(spool)))
}

fn println_summary(job: &str, s: &Summary) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stderr().lock();
    write!(
        out,
        "{}: {} read, {} new, {} merged, {} unchanged",
        dlqlite::text::for_terminal(job),
        s.items_read,
        s.items_new,
        s.items_merged,
        s.items_unchanged
    )?;
    if s.items_evicted > 0 {
        write!(
            out,
            ", {} evicted (over capacity; see `dlq events`)",
            s.items_evicted
        )?;
    }
    writeln!(out)?;
    Ok(())
}
