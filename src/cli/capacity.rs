//! `dlq capacity`: show or set the per-job capacity.

use super::output::print_json;
use super::Context;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;

/// Show or set how many items a job keeps (0 = unlimited).
///
/// When a job is over its capacity, the items with the oldest last_attempt
/// are evicted; every eviction is written to `events`. Lowering the capacity
/// evicts at once.
///
/// Examples:
///   dlq capacity                          # the default
///   dlq capacity --set 5000               # change the default
///   dlq capacity --job-id J --set 100     # override for one job
///   dlq capacity --job-id J --unset       # back to the default
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The job to show or set (without it: the default for all jobs)
    #[arg(long)]
    job_id: Option<String>,
    /// The new capacity (0 = unlimited)
    #[arg(long, conflicts_with = "unset")]
    set: Option<i64>,
    /// Remove the job's override (needs --job-id)
    #[arg(long, requires = "job_id")]
    unset: bool,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = if args.set.is_some() || args.unset {
        ctx.open()?
    } else {
        ctx.open_or_create()?
    };
    let job = args.job_id.as_deref();
    let evicted = if args.set.is_some() || args.unset {
        dlq.set_capacity(job, args.set)?
    } else {
        Vec::new()
    };
    let info = dlq.capacity(job)?;
    if args.json {
        let mut value = serde_json::to_value(&info)?;
        if let Some(object) = value.as_object_mut() {
            object.insert("evicted".into(), evicted.len().into());
        }
        print_json(&value)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    let show = |n: i64| {
        if n == 0 {
            "unlimited".to_string()
        } else {
            n.to_string()
        }
    };
    match &info.job_id {
        Some(job) => writeln!(
            out,
            "{}: {} ({})",
            dlqlite::text::for_terminal(job),
            show(info.effective_max_items),
            if info.job_max_items.is_some() {
                "job override"
            } else {
                "default"
            }
        )?,
        None => writeln!(out, "default: {}", show(info.default_max_items))?,
    }
    if !evicted.is_empty() {
        writeln!(
            out,
            "evicted {} item(s) over capacity (see `dlq events --kind evicted`)",
            evicted.len()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
