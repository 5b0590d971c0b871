//! `dlq clear`: remove every item of a job.

use super::output::{confirm, note, plural, print_json};
use super::Context;
use anyhow::Result;
use dlqlite::store::{ListFilter, Target};
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
    dlq.job_head(&args.job_id)?;
    let counted = dlq.select(&Target::Filter(ListFilter {
        job_id: Some(args.job_id.clone()),
        ..ListFilter::default()
    }))?;
    let action = format!(
        "remove all {} of job {}",
        plural(counted.count, "item"),
        args.job_id
    );
    if !confirm(&action, args.yes)? {
        note("nothing removed");
        return Ok(ExitCode::from(1));
    }
    // Asked: removes what was counted (and asked about), or nothing. With
    // --yes nobody was shown a count: it removes what is there when it
    // runs (a cron job must not fail because adds go on).
    let host = args.forget.then(dlqlite::retry::hostname);
    let removed = match (args.yes, host) {
        (true, Some(host)) => dlq.clear_and_remove_job(&args.job_id, &host)?,
        (true, None) => dlq.clear_job(&args.job_id)?,
        (false, host) => dlq.clear_job_counted(&args.job_id, host.as_deref(), &counted.token)?,
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
