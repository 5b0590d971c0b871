//! `dlq jobs`: the jobs in the database with their counters.

use super::output::{cell, print_json, Table};
use super::Context;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;

/// List jobs with their item counts and capacity; --prune removes the jobs
/// left with no items.
///
/// Examples:
///   dlq jobs --json
///   dlq jobs --prune --dry-run
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
    /// Remove every job with no items (and its capacity override), a
    /// `job_removed` event each; prints the jobs removed. A job a retry run
    /// is still working on stays
    #[arg(long)]
    prune: bool,
    /// With --prune: print the jobs it would remove, and remove nothing
    #[arg(long, requires = "prune")]
    dry_run: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    if args.prune {
        return prune(&args, ctx);
    }
    let dlq = ctx.open_existing()?;
    let jobs = dlq.jobs()?;
    if args.json {
        print_json(&jobs)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(&[
        "JOB",
        "REPO",
        "ITEMS",
        "ELIGIBLE",
        "REVIEW",
        "MAX_ITEMS",
        "UPDATED",
    ]);
    for job in jobs {
        table.row(vec![
            job.job_id,
            cell(job.repo),
            job.item_count.to_string(),
            job.eligible_count.to_string(),
            job.manual_review_count.to_string(),
            job.max_items
                .map(|n| n.to_string())
                .unwrap_or_else(|| "default".into()),
            job.updated_at.to_string(),
        ]);
    }
    table.print()?;
    Ok(ExitCode::SUCCESS)
}

/// `--prune`: the jobs removed on stdout (one id a line, or JSON), the
/// count on stderr.
fn prune(args: &Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    let removed = dlq.prune_jobs(&dlqlite::retry::hostname(), args.dry_run)?;
    if args.json {
        print_json(&removed)?;
    } else {
        let mut out = std::io::stdout().lock();
        for job in &removed {
            writeln!(out, "{}", dlqlite::text::for_terminal(&job.job_id))?;
        }
        out.flush()?;
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    // A closed stderr must not turn a done prune into a panic.
    let _ = writeln!(std::io::stderr(), "{verb} {} empty job(s)", removed.len());
    Ok(ExitCode::SUCCESS)
}
