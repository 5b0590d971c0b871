//! `dlq import`: move legacy JSON DLQ trees into the database.

use super::output::{print_json, Kind, Table};
use super::progress::Bar;
use super::Context;
use anyhow::Result;
use dlqlite::import::{count_files, import, ImportOptions, ImportReport};
use dlqlite::rank::TopN;
use dlqlite::store::StatsPart;
use dlqlite::text::for_terminal;
use dlqlite::Dlq;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Import legacy JSON DLQs (every `mapreduce/dlq/<job_id>/` under the paths)
///
/// Reads `items/` recursively (the id comes from the file, not its name),
/// merges copies of one item found in several places, skips and reports
/// files that cannot be parsed, and reports where index.json disagrees with
/// the files. Never changes anything under the paths. Importing twice
/// changes nothing. Exits 1 when any file was rejected.
///
/// Example: dlq --db demo.db import examples/legacy
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Trees to search [default: $PRODIGY_HOME, which defaults to ~/.prodigy]
    paths: Vec<PathBuf>,
    /// Report what would happen; write nothing
    #[arg(long)]
    dry_run: bool,
    /// Print one JSON object (jobs, files_seen, items_read, items_new,
    /// items_merged, items_unchanged, jobs_over_capacity, files_rejected,
    /// index_mismatches, paths_skipped)
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let paths = if args.paths.is_empty() {
        vec![super::prodigy_home()?]
    } else {
        args.paths.clone()
    };
    // A path that does not exist is an error before any database is made.
    for path in &paths {
        if !path.exists() {
            anyhow::bail!("{}: no such file or directory", path.display());
        }
        if dlqlite::db::is_database_file(ctx.db_path(), path) {
            anyhow::bail!(
                "{}: is the database itself (or its -wal/-shm), not something to import",
                path.display()
            );
        }
    }
    // A directory with no legacy DLQ in it is a mistyped path, not an
    // import of nothing: said before any database is made.
    // (A path that is not a directory is the import's to judge: an export
    // file, or a device or fifo it refuses.)
    let found_any = paths
        .iter()
        .any(|path| !path.is_dir() || holds_a_job_dir(path));
    if !found_any {
        let shown: Vec<String> = paths
            .iter()
            .map(|p| for_terminal(&p.display().to_string()).into_owned())
            .collect();
        anyhow::bail!(
            "no legacy DLQ in {}: looked at any depth for <dir>/mapreduce/dlq/<job_id>/items/*.json (and index.json), as in Prodigy's ~/.prodigy/dlq/<repo>/<job_id>/mapreduce/dlq/<job_id>/; nothing imported, no database made (a JSON or JSONL export file is imported by naming the file)",
            shown.join(", ")
        );
    }
    let dlq = if args.dry_run {
        ctx.with_age_clock(ctx.open_options().open_scratch_copy(ctx.db_path())?)
    } else {
        ctx.open()?
    };
    let options = ImportOptions::default();
    // Items read so far, for the interruption's line (the progress
    // callback's count, at most 100 ms old).
    let read = Arc::new(AtomicUsize::new(0));
    if !args.dry_run {
        // Ctrl-C (or SIGTERM) ends the process in the middle of a
        // transaction, which is rolled back: say what is kept, since the bar
        // has been counting items as they were read. Into an empty SQLite
        // database the whole import is one transaction (the load's bulk
        // path): nothing; otherwise the batches committed before.
        let one_transaction = options.bulk_when_empty
            && dlq.backend() == dlqlite::store::Backend::Sqlite
            && dlq.is_empty()?;
        let batch = options.batch_size.max(1);
        let read = Arc::clone(&read);
        let _ = ctrlc::set_handler(move || {
            let read = read.load(Ordering::Relaxed);
            if one_transaction {
                eprintln!(
                    "\ndlq: import interrupted after {read} item(s) read: nothing was imported (into \
                     an empty database the import is one transaction, rolled back); run the same \
                     import again"
                );
            } else {
                eprintln!(
                    "\ndlq: import interrupted after {read} item(s) read: the batches of {batch} \
                     items committed before are kept, the one being written is rolled back; run \
                     the same import again to finish (items already there are left unchanged)"
                );
            }
            std::process::exit(130);
        });
    }
    let bar = Bar::new("import", "files", None);
    let report = std::thread::scope(|scope| {
        if bar.is_visible() {
            // The total comes from a walk of its own, beside the import
            // (which reads the files as it finds them).
            scope.spawn(|| bar.set_total("files", count_files(&paths) as u64));
        }
        import(&dlq, &paths, &options, |p| {
            read.store(p.items_written, Ordering::Relaxed);
            bar.set_done(p.files_seen as u64);
            bar.set_message(format!("{} items read", p.items_written));
        })
    });
    bar.clear();
    let report = report?;
    if args.json {
        print_json(&report)?;
    }
    print_summary(&dlq, &report, args.dry_run, !args.json)?;
    Ok(if report.files_rejected.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Whether the walk of `root` finds at least one legacy job directory
/// (it stops at the first).
fn holds_a_job_dir(root: &std::path::Path) -> bool {
    let Ok(mut walker) = dlqlite::import::discover::Walker::new(root) else {
        return false;
    };
    let mut found = false;
    walker.for_each_job_dir(|_, _| {
        found = true;
        false
    });
    found
}

/// What was rejected and what was done (stderr), and with `table` the jobs
/// imported (stdout; with --json, the JSON is stdout's).
fn print_summary(dlq: &Dlq, report: &ImportReport, dry_run: bool, table: bool) -> Result<()> {
    {
        let mut err = std::io::stderr().lock();
        for rejected in &report.files_rejected {
            writeln!(
                err,
                "rejected: {}: {}",
                for_terminal(&rejected.path),
                for_terminal(&rejected.error)
            )?;
        }
        for mismatch in &report.index_mismatches {
            let item = match (&mismatch.item_id, mismatch.more) {
                (Some(id), _) => format!(" {id:?}"),
                (None, Some(more)) => format!(", {more} more"),
                (None, None) => String::new(),
            };
            writeln!(
                err,
                "index.json of {}: {}{item}",
                for_terminal(&mismatch.job_id),
                mismatch.kind.replace('_', " ")
            )?;
        }
        for skipped in &report.paths_skipped {
            writeln!(
                err,
                "skipped: {}: {}",
                for_terminal(&skipped.path),
                for_terminal(&skipped.error)
            )?;
        }
    }
    if table && !report.job_ids.is_empty() {
        let mut jobs = Table::new(&[
            ("JOB", Kind::Id),
            ("ITEMS", Kind::Count),
            ("TOP ERROR SIGNATURES", Kind::Text),
        ]);
        for job_id in &report.job_ids {
            // The three largest signatures, picked as they stream by (a job
            // can have a signature per item).
            let mut total = 0;
            let mut top = TopN::new(3);
            if dlq.backend() == dlqlite::store::Backend::Postgres {
                // The statistics are not on PostgreSQL yet: the counters.
                total = dlq.job_info(job_id)?.item_count;
                for (signature, n) in dlq.top_signatures(job_id, 3)? {
                    top.offer_owned(signature, n);
                }
            } else {
                dlq.stats_stream(Some(job_id), false, |part| {
                    match part {
                        StatsPart::Head { head, .. } => total = head.total_items,
                        StatsPart::Signature(signature, n) => top.offer(signature, n),
                        _ => {}
                    }
                    Ok(())
                })?;
            }
            let top: Vec<String> = top
                .into_sorted()
                .iter()
                .map(|(sig, n)| format!("{sig} ({n})"))
                .collect();
            jobs.push(vec![job_id.clone(), total.to_string(), top.join(", ")]);
        }
        jobs.print()?;
    }
    // What was done, for people: stderr, as every command that changes
    // something says it (the table above is the report).
    let mut out = std::io::stderr().lock();
    // An item file of a legacy tree is one item; an export file holds many,
    // and then the items are what a person wants counted.
    let read = if report.items_read + report.files_rejected.len() == report.files_seen {
        format!("{} file(s)", report.files_seen)
    } else {
        format!(
            "{} item(s) from {} file(s)",
            report.items_read, report.files_seen
        )
    };
    writeln!(
        out,
        "{}{}{} job(s), {read}: {} new, {} merged, {} unchanged, {} rejected, {} index mismatch(es)",
        // Set off from the table above it.
        if table && !report.job_ids.is_empty() { "\n" } else { "" },
        if dry_run { "dry run, nothing written: " } else { "" },
        report.jobs,
        report.items_new,
        report.items_merged,
        report.items_unchanged,
        report.files_rejected.len(),
        report
            .index_mismatches
            .iter()
            .map(|m| m.more.unwrap_or(1))
            .sum::<u64>()
    )?;
    for raised in &report.jobs_over_capacity {
        let now = if dry_run { "would be" } else { "is now" };
        writeln!(
            out,
            "{}: kept all {} items, over its capacity of {}: its capacity {now} {} \
             (`dlq capacity --job-id {} --set N` to change it)",
            dlqlite::text::for_terminal(&raised.job_id),
            raised.items,
            raised.previous_max_items,
            raised.items,
            dlqlite::text::for_terminal(&raised.job_id)
        )?;
    }
    Ok(())
}
