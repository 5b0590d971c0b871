//! `dlq db`: where the database is, its schema version and row counts;
//! recounting the counters, and giving free space back (`--vacuum`).

use super::output::{cell, print_json};
use super::Context;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;

/// Show the database path, schema version and row counts
///
/// The job counters (items, eligible, manual review, per signature) are kept
/// by dlq and by triggers; after inserting items by hand with sqlite3, run
/// `dlq db --recount` to recompute them.
///
/// Deleted rows leave free pages in the file. A database made by this dlq
/// hands them back as purges, clears and `dlq retention apply` go
/// (incremental auto-vacuum); `--vacuum` rewrites the file without them
/// at once (and switches an older database to incremental auto-vacuum).
/// It takes the write lock, so it is refused (exit 1, one line) when
/// another process holds the database busy past --busy-timeout-ms, and it
/// needs free disk of about twice the database's size while it runs (a
/// temporary copy, then the WAL). On PostgreSQL the server reclaims space
/// (autovacuum): nothing is done.
///
/// Examples:
///   dlq --db demo.db db
///   dlq --db demo.db db --vacuum
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Print JSON
    #[arg(long)]
    json: bool,
    /// Recompute the job counters from the items first
    #[arg(long)]
    recount: bool,
    /// Rewrite the file without its free pages first (SQLite's VACUUM),
    /// reporting the size before and after
    #[arg(long)]
    vacuum: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = if args.vacuum {
        ctx.open_existing_to_write()?
    } else if args.recount {
        ctx.open()?
    } else {
        ctx.open_or_create()?
    };
    let recount = if args.recount {
        let report = dlq.recount()?;
        eprintln!("{}", recount_line(&report));
        Some(report)
    } else {
        None
    };
    let vacuum = if args.vacuum { vacuum(&dlq)? } else { None };
    let info = dlq.db_info()?;
    if args.json {
        let mut value = serde_json::to_value(&info)?;
        if let (Some(report), Some(object)) = (recount, value.as_object_mut()) {
            object.insert("recount".into(), serde_json::to_value(report)?);
        }
        if let (Some(report), Some(object)) = (vacuum, value.as_object_mut()) {
            object.insert("vacuum".into(), serde_json::to_value(report)?);
        }
        print_json(&value)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "path:               {}",
        dlqlite::text::for_terminal(&cell(info.path))
    )?;
    writeln!(
        out,
        "schema version:     {} (this dlq: {})",
        cell(info.schema_version),
        info.supported_schema_version
    )?;
    writeln!(out, "jobs:               {}", info.jobs)?;
    writeln!(out, "items:              {}", info.items)?;
    writeln!(out, "failure_history:    {}", info.failure_history)?;
    writeln!(out, "worktree_artifacts: {}", info.worktree_artifacts)?;
    writeln!(out, "events:             {}", info.events)?;
    writeln!(out, "size:               {} bytes", info.size_bytes)?;
    Ok(ExitCode::SUCCESS)
}

/// `--vacuum`: the report, and one line on stderr; `None` on PostgreSQL.
fn vacuum(dlq: &dlqlite::Dlq) -> Result<Option<dlqlite::store::VacuumReport>> {
    if dlq.backend() == dlqlite::store::Backend::Postgres {
        eprintln!("vacuum: on PostgreSQL the server reclaims space (autovacuum); nothing done");
        return Ok(None);
    }
    let report = match dlq.vacuum() {
        Ok(report) => report,
        Err(e) if e.kind() == dlqlite::ErrorKind::Busy => anyhow::bail!(
            "vacuum refused: another process holds the database busy; nothing changed, try again later"
        ),
        Err(e) => return Err(e.into()),
    };
    let bytes = |n: i64| super::output::thousands(u64::try_from(n).unwrap_or(0));
    eprintln!(
        "vacuum: {} bytes before ({} free), {} after{}",
        bytes(report.before.bytes()),
        bytes(report.before.free_bytes()),
        bytes(report.after.bytes()),
        if report.checkpointed {
            ""
        } else {
            " (the file shrinks at the next checkpoint: a reader still uses the old pages)"
        }
    );
    Ok(Some(report))
}

/// What a recount found, in one line: a repair is never silent.
fn recount_line(report: &dlqlite::store::RecountReport) -> String {
    if report.nothing_off() {
        return "recount: every counter already equalled a recount".to_string();
    }
    let mut parts = Vec::new();
    for (n, what) in [
        (report.jobs, "job(s)' item counters"),
        (report.signatures, "signature count(s)"),
        (report.error_types, "error-type count(s)"),
        (report.last_error_types, "item(s)' last error type"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    format!(
        "recount: set right {} (they had drifted from the items)",
        parts.join(", ")
    )
}
