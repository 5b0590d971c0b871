//! `dlq jobs`: the jobs in the database with their counters.

use super::output::{cell, print_json, Kind, Table};
use super::Context;
use anyhow::Result;
use std::process::ExitCode;

/// List jobs with their item counts and capacity
///
/// Example: dlq jobs --json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    let jobs = dlq.jobs()?;
    if args.json {
        print_json(&jobs)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(&[
        ("JOB", Kind::Text),
        ("REPO", Kind::Text),
        ("ITEMS", Kind::Count),
        ("ELIGIBLE", Kind::Count),
        ("REVIEW", Kind::Count),
        ("MAX ITEMS", Kind::Count),
        ("UPDATED", Kind::Time),
    ]);
    for job in jobs {
        table.push(vec![
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
