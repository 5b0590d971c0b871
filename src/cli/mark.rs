//! `dlq mark`: set an item's flags by hand.

use super::Context;
use anyhow::{bail, Result};
use dlqlite::store::MarkRequest;
use std::process::ExitCode;

/// Set an item's reprocess-eligible and manual-review flags.
///
/// Flags set here survive later merges of the same item until set again.
///
/// Example: dlq mark item_9 --eligible --no-manual-review
#[derive(Debug, clap::Args)]
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
        bail!(
            "nothing to mark: pass --eligible, --ineligible, --manual-review or --no-manual-review"
        );
    }
    ctx.open_existing_to_write()?
        .mark(args.job_id.as_deref(), &args.item_id, &request)?;
    Ok(ExitCode::SUCCESS)
}
