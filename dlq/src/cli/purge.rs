//! `dlq purge`: remove items by age.

use super::output::{confirm, note, parse_filter, plural, print_json};
use super::progress::Bar;
use super::Context;
use anyhow::Result;
use dlqlite::store::DeleteStep;
use dlqlite::ListFilter;
use std::process::ExitCode;

/// Remove items whose last attempt is older than N days
///
/// Each removal is recorded as a `purged` event.
///
/// Asks for confirmation on a terminal; elsewhere it needs --yes (or
/// --dry-run, which only counts).
///
/// Examples:
///   dlq purge --older-than-days 30 --dry-run
///   dlq purge --older-than-days 30 --job-id mapreduce-20251123_194253 --yes
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
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

/// The cutoff as tables show times (to the second).
fn cutoff(report: &dlqlite::store::PurgeReport) -> String {
    super::term::get().time(&report.cutoff.to_string())
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
        let action = format!(
            "remove {} last failed before {}",
            plural(preview.items, "item"),
            cutoff(&preview)
        );
        if !confirm(&action, args.yes)? {
            note("nothing removed");
            return Ok(ExitCode::from(1));
        }
        // The delete is a few set-based statements over all the rows: the
        // bar names the one running.
        let bar = Bar::working("purge");
        bar.set_message(format!("removing {} item(s)", preview.items));
        // Asked: the same "now" as the question, and exactly what was
        // counted (refused if anything counted changed meanwhile). With
        // --yes nobody was shown a count: it removes what is due when it
        // runs, as clear and retention apply do (a cron line must not fail
        // because adds ran beside it).
        let report = if args.yes {
            dlq.purge(args.older_than_days, &filter, false)
        } else {
            dlq.purge_counted(&preview, args.older_than_days, &filter, |p| {
                bar.set_message(format!(
                    "removing {} item(s): {}",
                    preview.items,
                    step_name(p.step)
                ))
            })
        };
        bar.clear();
        report?
    };
    if args.json {
        print_json(&report)?;
    }
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    note(&format!(
        "{verb} {} last failed before {}",
        plural(report.items, "item"),
        cutoff(&report)
    ));
    Ok(ExitCode::SUCCESS)
}

fn step_name(step: DeleteStep) -> &'static str {
    match step {
        DeleteStep::Selecting => "selecting",
        DeleteStep::WritingEvents => "writing events",
        DeleteStep::UpdatingCounters => "updating counters",
        DeleteStep::Deleting => "deleting",
        DeleteStep::RebuildingIndexes => "rebuilding indexes",
        DeleteStep::Committing => "committing",
    }
}
