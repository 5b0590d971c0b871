//! `dlq events`: the audit log.

use super::output::{column, note, plural, Column, Format, Kind, RowWriter};
use super::Context;
use anyhow::Result;
use dlqlite::EventKind;
use serde_json::json;
use std::process::ExitCode;

/// Show the audit log, newest first
///
/// Every add, merge, removal, eviction, purge, clear, import, mark, capacity
/// change, retry, requeue, and job created or removed.
///
/// Example: dlq events --kind evicted --job-id mapreduce-20251123_194253
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Only this job
    #[arg(long)]
    job_id: Option<String>,
    // The help lists EventKind::ALL, so a new kind cannot be left out.
    #[arg(long, value_name = "KIND", help = kind_help())]
    kind: Option<String>,
    /// How many at most (0 = all)
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// The help of --kind: every kind, from the enum.
fn kind_help() -> String {
    format!("Only this kind ({})", EventKind::names())
}

/// An event kind by name. An unknown one is an error as an unknown job is
/// (exit 1, with the closest kind and the list).
fn parse_kind(name: &str) -> Result<EventKind> {
    name.parse().map_err(|_| {
        let close = super::closest(name, EventKind::ALL.iter().map(|k| k.as_str()))
            .map(|k| format!("; did you mean {k:?}?"))
            .unwrap_or_default();
        anyhow::anyhow!(
            "unknown event kind {name:?}{close} (the kinds are {})",
            EventKind::names()
        )
    })
}

const COLUMNS: [Column; 6] = [
    column("id", "ID", Kind::Count),
    column("time", "TIME", Kind::Time),
    column("kind", "KIND", Kind::Text),
    column("job_id", "JOB", Kind::Id),
    column("item_id", "ITEM", Kind::Id),
    column("detail", "DETAIL", Kind::Text),
];

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    let limit = if args.limit == 0 {
        usize::MAX
    } else {
        args.limit
    };
    // One more than shown, to know whether the listing was cut.
    let kind = args.kind.as_deref().map(parse_kind).transpose()?;
    let mut events = dlq.events(args.job_id.as_deref(), kind, limit.saturating_add(1))?;
    if let Some(job) = &args.job_id {
        // Events outlive their items and their job (a removed job keeps its
        // trail): only a job that neither exists nor left an event is
        // unknown, said as every other command says it.
        if events.is_empty() && dlq.events(Some(job), None, 1)?.is_empty() {
            dlq.require_job(job)?;
        }
    }
    let cut = events.len() > limit;
    events.truncate(limit);
    let mut out = RowWriter::new(args.format, &COLUMNS)?.leave_out_first(&["ID", "JOB"]);
    for e in events {
        out.row(vec![
            json!(e.id),
            json!(e.time),
            json!(e.kind),
            json!(e.job_id),
            json!(e.item_id),
            e.detail,
        ])?;
    }
    let shown = out.finish("no events match")?;
    if cut {
        note(&format!(
            "showing the newest {} (--limit 0 for all)",
            plural(shown, "event")
        ));
    }
    Ok(ExitCode::SUCCESS)
}
