//! `dlq clear`: remove every item of a job.

use super::output::confirm;
use super::Context;
use anyhow::Result;
use std::process::ExitCode;

/// Remove every item of a job (each recorded as a `cleared` event).
///
/// Asks for confirmation on a terminal; elsewhere it needs --yes.
///
/// Example: dlq clear mapreduce-20251123_194253 --yes
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job
    job_id: String,
    /// Do not ask
    #[arg(long)]
    yes: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing_to_write()?;
    let stats = dlq.job_head(&args.job_id)?;
    if !confirm(
        &format!(
            "remove all {} item(s) of {}?",
            stats.total_items,
            dlqlite::text::for_terminal(&args.job_id)
        ),
        args.yes,
    )? {
        eprintln!("nothing removed");
        return Ok(ExitCode::from(1));
    }
    let removed = dlq.clear_job(&args.job_id)?;
    println!(
        "removed {removed} item(s) from {}",
        dlqlite::text::for_terminal(&args.job_id)
    );
    Ok(ExitCode::SUCCESS)
}
