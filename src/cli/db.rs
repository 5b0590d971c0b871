//! `dlq db`: where the database is, its schema version and row counts.

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
/// Example: dlq --db demo.db db
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Print JSON
    #[arg(long)]
    json: bool,
    /// Recompute the job counters from the items first
    #[arg(long)]
    recount: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = if args.recount {
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
    let info = dlq.db_info()?;
    if args.json {
        let mut value = serde_json::to_value(&info)?;
        if let (Some(report), Some(object)) = (recount, value.as_object_mut()) {
            object.insert("recount".into(), serde_json::to_value(report)?);
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
