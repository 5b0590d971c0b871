//! `dlq list`: dead letters, newest last_attempt first.

use super::output::{column, note, parse_filter, thousands, Column, Format, Kind, RowWriter};
use super::Context;
use anyhow::Result;
use dlqlite::ListFilter;
use serde_json::json;
use std::process::ExitCode;

/// List dead letters, newest last_attempt first
///
/// Filter expressions (also for export, purge and retry):
///   fields      job_id item_id failure_count error_signature reprocess_eligible
///               manual_review_required first_attempt last_attempt
///               category (of the last attempt's error type: see `dlq categories`)
///               family (of the last attempt: see `dlq families`)
///               error_type exit_code error_message agent_id step_failed
///                 (true when any attempt matches; last.error_type etc. for the last)
///               item.<path> (a path into item_data; item.failure_count,
///                 item.reprocess_eligible and item.error_signature are the DLQ fields)
///   operators   == != > >= < <= contains, && and, || or, ! not, ( )
///               matches: every word of the string, in any order, ignoring
///                 the case of A-Z (error_message matches "connection refused")
///   values      "text" 'text' 42 1.5 true false null, now - 7d (s m h d w)
///   types       failure_count, exit_code and family take numbers; flags true or
///               false; times an RFC 3339 time or now - N. item.<path> is
///               untyped JSON, where every number sorts before every string:
///               ordering it (< <= > >=) against a quoted number ("5") is an
///               error (write 5); == and != with a quoted number compare text.
///
/// Examples:
///   dlq list --job-id mapreduce-20251123_194253 --eligible
///   dlq list --filter 'item.priority >= 5 && error_type == "Timeout"'
///   dlq list --filter 'last_attempt < now - 7d' --format csv
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Only this job
    #[arg(long)]
    job_id: Option<String>,
    /// Only items eligible for reprocessing
    #[arg(long)]
    eligible: bool,
    /// Only items that require manual review
    #[arg(long)]
    manual_review: bool,
    /// Only items matching this expression
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    /// How many items at most (0 = all)
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// The listing's columns (those of the item_summary view); a table shows
/// the first [`TABLE_COLUMNS`].
const COLUMNS: [Column; 14] = [
    column("job_id", "JOB", Kind::Id),
    column("item_id", "ITEM", Kind::Id),
    column("failure_count", "FAILS", Kind::Count),
    column("last_attempt", "LAST ATTEMPT", Kind::Time),
    column("error_type", "ERROR TYPE", Kind::ErrorType),
    column("category", "CATEGORY", Kind::Text),
    column("exit_code", "EXIT", Kind::Count),
    column("reprocess_eligible", "ELIGIBLE", Kind::Flag),
    column("manual_review_required", "REVIEW", Kind::Warning),
    column("error_message", "MESSAGE", Kind::Message),
    column("error_signature", "SIGNATURE", Kind::Text),
    column("first_attempt", "FIRST ATTEMPT", Kind::Time),
    column("worktree_path", "WORKTREE", Kind::Text),
    column("family_id", "FAMILY", Kind::Count),
];
const TABLE_COLUMNS: usize = 10;

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let filter = ListFilter {
        job_id: args.job_id.clone(),
        eligible: args.eligible.then_some(true),
        manual_review: args.manual_review.then_some(true),
        expression: parse_filter(args.filter.as_deref())?,
        ..ListFilter::default()
    };
    let dlq = ctx.open_existing()?;
    if let Some(job) = &args.job_id {
        dlq.require_job(job)?;
    }
    // One job's listing can spare its job column first.
    let leave_out: &[&str] = if args.job_id.is_some() {
        &["JOB", "EXIT", "REVIEW", "ELIGIBLE", "CATEGORY"]
    } else {
        &["EXIT", "REVIEW", "ELIGIBLE", "CATEGORY", "JOB"]
    };
    let mut out = RowWriter::new(args.format, &COLUMNS)?
        .table_columns(TABLE_COLUMNS)
        .leave_out_first(leave_out);
    let limit = if args.limit == 0 {
        usize::MAX
    } else {
        args.limit
    };
    let mut cut = false;
    for (index, summary) in dlq.list_newest(filter.clone()).enumerate() {
        if index == limit {
            cut = true;
            break;
        }
        let s = summary?;
        out.row(vec![
            json!(s.job_id),
            json!(s.item_id),
            json!(s.failure_count),
            json!(s.last_attempt),
            json!(s.error_type),
            json!(s.category),
            json!(s.exit_code),
            json!(s.reprocess_eligible),
            json!(s.manual_review_required),
            json!(s.error_message),
            json!(s.error_signature),
            json!(s.first_attempt),
            json!(s.worktree_path),
            json!(s.family_id),
        ])?;
    }
    let shown = out.finish("no items match")?;
    if cut {
        // One more count, only when the listing was cut.
        let total = dlq.count_matching(&filter)?;
        note(&format!(
            "showing {} of {} items (--limit 0 for all)",
            thousands(shown as u64),
            thousands(total)
        ));
    }
    Ok(ExitCode::SUCCESS)
}
