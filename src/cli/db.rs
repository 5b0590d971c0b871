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
    if args.recount {
        dlq.recount()?;
    }
    let info = dlq.db_info()?;
    if args.json {
        print_json(&info)?;
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
