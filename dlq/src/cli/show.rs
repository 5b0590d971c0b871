//! `dlq show`: one job's statistics (the legacy `prodigy dlq show JOB`).

use super::Context;
use anyhow::Result;
use std::process::ExitCode;

/// Show one job's statistics (the same as `dlq stats --job-id JOB`)
///
/// Example: dlq show mapreduce-20251123_194253 --json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The job
    job_id: String,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    super::stats::show(ctx, Some(&args.job_id), args.json)
}
