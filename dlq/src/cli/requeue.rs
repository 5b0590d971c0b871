//! `dlq requeue`: hand eligible items back to a map phase.

use super::output::{note, parse_filter, plural, print_json};
use super::Context;
use anyhow::Result;
use dlqlite::retry::requeue::{write, RequeueReport};
use dlqlite::ListFilter;
use std::path::PathBuf;
use std::process::ExitCode;

/// Write a job's eligible items as the input of a map phase
///
/// The file is {"items": [<item_data>, ...]} (json_path `$.items[*]`): the
/// `include_dlq_items` hand-off.
///
/// The file is written beside its destination, synced, then renamed. With
/// --take the items are removed from the DLQ (a `requeued` event each) in one
/// transaction, only after the file is complete.
///
/// Example: dlq requeue mapreduce-20251123_194253 -o retry-input.json --take
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The job
    job_id: String,
    /// Where to write
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Only items matching this expression (see `dlq list --help`)
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    /// Remove the written items from the DLQ
    #[arg(long)]
    take: bool,
    /// Also print what was written as JSON on stdout
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = if args.take {
        ctx.open_existing_to_write()?
    } else {
        ctx.open_existing()?
    };
    dlq.require_job(&args.job_id)?;
    let filter = ListFilter {
        job_id: Some(args.job_id.clone()),
        eligible: Some(true),
        expression: parse_filter(args.filter.as_deref())?,
        ..ListFilter::default()
    };
    let written = write(&dlq, filter, &args.output)?;
    let taken = if args.take {
        // The file is in place: a failed take must say so, and that
        // nothing left the DLQ (the transaction took none of them).
        written.take(&dlq).map_err(|e| {
            anyhow::anyhow!(
                "wrote {} to {}, but took none out of the DLQ ({e}); all are still there: run it again, or remove the file",
                plural(written.items(), "item"),
                args.output.display()
            )
        })?
    } else {
        0
    };
    let report = RequeueReport {
        items: written.items(),
        taken,
        path: args.output.display().to_string(),
    };
    if args.json {
        print_json(&report)?;
    }
    let taken = if !args.take {
        String::new()
    } else if report.taken == report.items {
        " and took them out of the DLQ".to_string()
    } else {
        format!(
            " and took {} out of the DLQ; {} changed after {} written (an attempt merged in, a mark, a write outside dlq) and {} still in the DLQ",
            report.taken,
            report.items - report.taken,
            if report.items - report.taken == 1 { "it was" } else { "they were" },
            if report.items - report.taken == 1 { "is" } else { "are" },
        )
    };
    note(&format!(
        "wrote {} to {}{taken}",
        plural(report.items, "item"),
        args.output.display(),
    ));
    Ok(ExitCode::SUCCESS)
}
