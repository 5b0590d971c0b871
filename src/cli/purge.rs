//! `dlq purge`: remove items by age.

use super::output::{confirm, parse_filter, print_json};
use super::Context;
use anyhow::Result;
use dlqlite::ListFilter;
use std::process::ExitCode;

/// Remove items whose last attempt is older than N days (each recorded as a
/// `purged` event).
///
/// Asks for confirmation on a terminal; elsewhere it needs --yes (or
/// --dry-run, which only counts).
///
/// Examples:
///   dlq purge --older-than-days 30 --dry-run
///   dlq purge --older-than-days 30 --job-id mapreduce-20251123_194253 --yes
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Age in days, by last_attempt
    #[arg(long, value_name = "N")]
    older_than_days: u32,
    /// Only this job
    #[arg(long)]
    job_id: Option<String>,
    /// Only items matching this expression (see `dlq list --help`)
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    /// Count what would go; change nothing
    #[arg(long)]
    dry_run: bool,
    /// Do not ask
    #[arg(long)]
    yes: bool,
    /// Print the result as JSON ({"cutoff", "items", "dry_run"})
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let filter = ListFilter {
        job_id: args.job_id.clone(),
        expression: parse_filter(args.filter.as_deref())?,
        ..ListFilter::default()
    };
    let dlq = if args.dry_run {
        ctx.open_existing()?
    } else {
        ctx.open_existing_to_write()?
    };
    if let Some(job) = &args.job_id {
        dlq.require_job(job)?;
    }
    let preview = dlq.purge(args.older_than_days, &filter, true)?;
    let report = if args.dry_run {
        preview
    } else if preview.items == 0 {
        // Nothing to ask about; the report is of a real purge that removed nothing.
        dlqlite::store::PurgeReport {
            dry_run: false,
            ..preview
        }
    } else {
        let question = format!(
            "remove {} item(s) last failed before {}?",
            preview.items, preview.cutoff
        );
        if !confirm(&question, args.yes)? {
            eprintln!("nothing removed");
            return Ok(ExitCode::from(1));
        }
        // The same "now" as the question: exactly what was counted.
        dlq.purge_at(preview.now, args.older_than_days, &filter, false)?
    };
    if args.json {
        print_json(&report)?;
    } else if report.dry_run {
        println!(
            "would remove {} item(s) last failed before {}",
            report.items, report.cutoff
        );
    } else {
        println!(
            "removed {} item(s) last failed before {}",
            report.items, report.cutoff
        );
    }
    Ok(ExitCode::SUCCESS)
}
