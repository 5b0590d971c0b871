//! `dlq mark`: set an item's flags by hand.

use super::output::{note, print_json};
use super::Context;
use anyhow::Result;
use dlqlite::store::MarkRequest;
use std::process::ExitCode;

/// Set an item's reprocess-eligible and manual-review flags
///
/// Flags set here survive later merges of the same item until set again.
///
/// Example: dlq mark item_9 --eligible --no-manual-review
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The item's id
    item_id: String,
    /// The job, when the id is in several
    #[arg(long)]
    job_id: Option<String>,
    /// Let `dlq retry` take it
    #[arg(long, conflicts_with = "ineligible")]
    eligible: bool,
    /// Keep `dlq retry` from taking it (unless --force)
    #[arg(long)]
    ineligible: bool,
    /// Flag it for a person
    #[arg(long, conflicts_with = "no_manual_review")]
    manual_review: bool,
    /// Clear the manual-review flag
    #[arg(long)]
    no_manual_review: bool,
    /// Also print the item's flags as JSON on stdout
    #[arg(long)]
    json: bool,
}

/// "item_9 of job J: eligible, needs manual review".
fn describe(marked: &dlqlite::store::Marked) -> String {
    format!(
        "{} of job {}: {}, {}",
        marked.item_id,
        marked.job_id,
        if marked.reprocess_eligible {
            "eligible"
        } else {
            "not eligible"
        },
        if marked.manual_review_required {
            "needs manual review"
        } else {
            "no manual review"
        }
    )
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let flag = |on: bool, off: bool| {
        if on {
            Some(true)
        } else if off {
            Some(false)
        } else {
            None
        }
    };
    let request = MarkRequest {
        reprocess_eligible: flag(args.eligible, args.ineligible),
        manual_review_required: flag(args.manual_review, args.no_manual_review),
    };
    if request.reprocess_eligible.is_none() && request.manual_review_required.is_none() {
        super::usage!(
            "nothing to mark: pass --eligible, --ineligible, --manual-review or --no-manual-review"
        );
    }
    let dlq = ctx.open_existing_to_write()?;
    let marked = dlq.mark(args.job_id.as_deref(), &args.item_id, &request)?;
    if args.json {
        print_json(&marked)?;
    }
    note(&format!("marked {}", describe(&marked)));
    Ok(ExitCode::SUCCESS)
}
