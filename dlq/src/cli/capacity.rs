//! `dlq capacity`: show or set the per-job capacity.

use super::output::{confirm, note, plural, print_json};
use super::Context;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;

/// Show or set how many items a job keeps (0 = unlimited)
///
/// When a job is over its capacity, the items with the oldest last_attempt
/// are evicted (never the item an add is adding); every eviction is
/// written to `events`. Lowering the capacity evicts at once: when it would
/// evict items, dlq asks first on a terminal and needs --yes without one.
/// To remove items by age instead, see `dlq retention`.
///
/// Examples:
///   dlq capacity                          # the default
///   dlq capacity --set 5000               # change the default
///   dlq capacity --job-id J --set 100     # override for one job
///   dlq capacity --job-id J --unset       # back to the default
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
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
    /// Evict what the new capacity leaves no room for without asking
    #[arg(long)]
    yes: bool,
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
    // A capacity set for a job before its first item: the job is made
    // with it (what the library's ensure_job does), so the first add
    // already fits it.
    if let (Some(job_id), Some(max_items)) = (job, args.set) {
        if !dlq.job_exists(job_id)? {
            dlq.ensure_job(
                job_id,
                &dlqlite::JobOptions {
                    max_items: Some(max_items),
                },
            )?;
            let info = dlq.capacity(job)?;
            if args.json {
                let mut value = serde_json::to_value(&info)?;
                if let Some(object) = value.as_object_mut() {
                    object.insert("evicted".into(), 0.into());
                    object.insert("job_created".into(), true.into());
                }
                print_json(&value)?;
            }
            note(&format!(
                "capacity of job {}: {} (a new job: it has no items yet)",
                dlqlite::text::for_terminal(job_id),
                describe(&info)
            ));
            return Ok(ExitCode::SUCCESS);
        }
    }
    let changing = args.set.is_some() || args.unset;
    let before = if changing {
        Some(dlq.capacity(job)?)
    } else {
        None
    };
    let mut counted = None;
    if changing {
        let over = dlq.capacity_eviction_selection(job, args.set)?;
        let n = over.count;
        counted = Some(over.token);
        if n > 0 {
            let whose = match job {
                Some(job) => format!("job {job}"),
                None => "the jobs on the default capacity".to_string(),
            };
            let action = format!(
                "evict {} of {whose} (the oldest last attempts) to fit the new capacity",
                plural(n, "item")
            );
            if !confirm(&action, args.yes)? {
                note("nothing changed");
                return Ok(ExitCode::from(1));
            }
        }
    }
    let evicted = if changing {
        match (args.yes, counted.as_deref()) {
            // Nobody was shown a count: what is over the new capacity when
            // it runs goes.
            (true, _) | (false, None) => dlq.set_capacity(job, args.set)?,
            // What was asked about, or nothing.
            (false, Some(counted)) => dlq.set_capacity_counted(job, args.set, counted)?,
        }
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
    }
    if let Some(before) = before {
        // What changed, for people, on stderr.
        let whose = match job {
            Some(job) => format!("capacity of job {job}"),
            None => "default capacity".to_string(),
        };
        let mut line = format!("{whose}: {} (was {})", describe(&info), describe(&before));
        if !evicted.is_empty() {
            line.push_str(&format!(
                "; evicted {} over it (see `dlq events --kind evicted`)",
                plural(evicted.len(), "item")
            ));
        }
        note(&line);
        return Ok(ExitCode::SUCCESS);
    }
    if !args.json {
        let name = match &info.job_id {
            Some(job) => dlqlite::text::for_terminal(job).into_owned(),
            None => "default".to_string(),
        };
        writeln!(std::io::stdout().lock(), "{name}: {}", describe(&info))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// "5000", "unlimited, the default", "1000, the default".
fn describe(info: &dlqlite::store::CapacityInfo) -> String {
    let show = |n: i64| {
        if n == 0 {
            "unlimited".to_string()
        } else {
            n.to_string()
        }
    };
    match &info.job_id {
        Some(_) if info.job_max_items.is_some() => show(info.effective_max_items),
        Some(_) => format!("{}, the default", show(info.effective_max_items)),
        None => show(info.default_max_items),
    }
}
