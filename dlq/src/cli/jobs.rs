//! `dlq jobs`: the jobs in the database with their counters.

use super::output::{column, note, plural, print_json, Column, Format, Kind, RowWriter};
use super::Context;
use anyhow::Result;
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;

/// List jobs with their item counts and capacity
///
/// MAX ITEMS is the job's own capacity; `-` means the default applies
/// (`dlq capacity`). --prune removes the jobs left with no items.
///
/// Examples:
///   dlq jobs
///   dlq jobs --format csv
///   dlq jobs --prune --dry-run
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// The same as --format json (kept for scripts written before --format)
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
    /// Remove every job with no items (and its capacity override), a
    /// `job_removed` event each; prints the jobs removed (as JSON with
    /// --json). A job a retry run is still working on stays
    #[arg(long)]
    prune: bool,
    /// With --prune: print the jobs it would remove, and remove nothing
    #[arg(long, requires = "prune")]
    dry_run: bool,
}

const COLUMNS: [Column; 8] = [
    column("job_id", "JOB", Kind::Id),
    column("repo", "REPO", Kind::Text),
    column("item_count", "ITEMS", Kind::Count),
    column("eligible_count", "ELIGIBLE", Kind::Count),
    column("manual_review_count", "REVIEW", Kind::Count),
    column("max_items", "MAX ITEMS", Kind::Count),
    column("updated_at", "UPDATED", Kind::Time),
    column("created_at", "CREATED", Kind::Time),
];
const TABLE_COLUMNS: usize = 7;

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    if args.prune {
        return prune(&args, ctx);
    }
    let dlq = ctx.open_existing()?;
    let format = if args.json { Format::Json } else { args.format };
    let mut out = RowWriter::new(format, &COLUMNS)?
        .table_columns(TABLE_COLUMNS)
        .leave_out_first(&["UPDATED", "MAX ITEMS", "REPO"]);
    for job in dlq.jobs()? {
        out.row(vec![
            json!(job.job_id),
            json!(job.repo),
            json!(job.item_count),
            json!(job.eligible_count),
            json!(job.manual_review_count),
            json!(job.max_items),
            json!(job.updated_at),
            json!(job.created_at),
        ])?;
    }
    out.finish("no jobs")?;
    Ok(ExitCode::SUCCESS)
}

/// `--prune`: the jobs removed on stdout (one id a line, or JSON), the
/// count on stderr.
fn prune(args: &Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = if args.dry_run {
        ctx.open_existing()?
    } else {
        ctx.open_existing_to_write()?
    };
    let removed = dlq.prune_jobs(&dlqlite::retry::hostname(), args.dry_run)?;
    if args.json || args.format == Format::Json {
        print_json(&removed)?;
    } else {
        let mut out = std::io::stdout().lock();
        for job in &removed {
            writeln!(out, "{}", dlqlite::text::for_terminal(&job.job_id))?;
        }
        out.flush()?;
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    note(&format!("{verb} {}", plural(removed.len(), "empty job")));
    Ok(ExitCode::SUCCESS)
}
