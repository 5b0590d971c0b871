//! `dlq events`: the audit log.

use super::output::{Format, RowWriter};
use super::Context;
use anyhow::Result;
use dlqlite::EventKind;
use serde_json::json;
use std::process::ExitCode;

/// Show the audit log, newest first: every add, merge, removal, eviction,
/// purge, clear, import, mark, capacity change, retry, requeue, and job
/// created or removed.
///
/// Example: dlq events --kind evicted --job-id mapreduce-20251123_194253
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this job
    #[arg(long)]
    job_id: Option<String>,
    // The help lists EventKind::ALL, so a new kind cannot be left out.
    #[arg(long, value_parser = parse_kind, help = kind_help())]
    kind: Option<EventKind>,
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

/// An event kind by name; clap reports anything else as a usage error.
fn parse_kind(name: &str) -> std::result::Result<EventKind, String> {
    name.parse().map_err(|e: dlqlite::Error| e.to_string())
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    let events = dlq.events(
        args.job_id.as_deref(),
        args.kind,
        if args.limit == 0 {
            usize::MAX
        } else {
            args.limit
        },
    )?;
    if let Some(job) = &args.job_id {
        // Events outlive their items and their job (a removed job keeps its
        // trail): only a job that neither exists nor left an event is
        // unknown, said as every other command says it.
        if events.is_empty() && dlq.events(Some(job), None, 1)?.is_empty() {
            dlq.require_job(job)?;
        }
    }
    let mut out = RowWriter::new(
        args.format,
        &["id", "time", "kind", "job_id", "item_id", "detail"],
    )?;
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
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}
