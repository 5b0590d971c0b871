//! `dlq inspect`: one item, whole, in the legacy JSON shape.

use super::Context;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;

/// Print one item as JSON in the legacy shape, with its whole history
///
/// When the id exists in several jobs, pass --job-id (the error lists them).
///
/// Example: dlq inspect item_7 | jq -r '.failure_history[0].json_log_location'
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The item's id
    item_id: String,
    /// The job, when the id is in several
    #[arg(long)]
    job_id: Option<String>,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let item = ctx
        .open_existing()?
        .get(args.job_id.as_deref(), &args.item_id)?;
    let mut out = std::io::stdout().lock();
    let json = item.to_legacy_json_pretty()?;
    writeln!(out, "{}", dlqlite::text::json_for_terminal(&json))?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
