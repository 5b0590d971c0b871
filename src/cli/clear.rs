//! `dlq clear`: remove every item of a job.

use super::output::{confirm, note, plural, print_json};
use super::Context;
use anyhow::Result;
use std::process::ExitCode;

/// Remove every item of a job (each recorded as a `cleared` event)
///
/// With --forget, the job too.
///
/// Asks for confirmation on a terminal; elsewhere it needs --yes.
///
/// Example: dlq clear mapreduce-20251123_194253 --yes
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The job
    job_id: String,
    /// Do not ask
    #[arg(long)]
    yes: bool,
    /// Also print what was removed as JSON on stdout
    #[arg(long)]
    json: bool,
    /// Then remove the job itself, with its capacity override (a
    /// `job_removed` event), in the same transaction; refused while a retry
    /// run is working on it
    #[arg(long)]
    forget: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing_to_write()?;
    let stats = dlq.job_head(&args.job_id)?;
    let action = format!(
        "remove all {} of job {}",
        plural(stats.total_items, "item"),
        args.job_id
    );
    if !confirm(&action, args.yes)? {
        note("nothing removed");
        return Ok(ExitCode::from(1));
    }
    let removed = if args.forget {
        dlq.clear_and_remove_job(&args.job_id, &dlqlite::retry::hostname())?
    } else {
        dlq.clear_job(&args.job_id)?
    };
    if args.json {
        print_json(&serde_json::json!({
            "job_id": args.job_id,
            "removed": removed,
            "job_removed": args.forget,
        }))?;
    }
    note(&format!(
        "removed {} of job {}{}",
        plural(removed, "item"),
        args.job_id,
        if args.forget { " and the job" } else { "" }
    ));
    Ok(ExitCode::SUCCESS)
}
