//! `dlq stats`: the legacy DLQ statistics, for one job or all.

use super::output::{cell, print_json, Table};
use super::Context;
use anyhow::Result;
use dlqlite::store::Stats;
use std::io::Write;
use std::process::ExitCode;

/// Show statistics: totals, eligibility, manual review, oldest and newest
/// item, items per error signature, items per error type of their last
/// attempt, and the average failure count.
///
/// With --json and a job: one object with the legacy keys (total_items,
/// eligible_for_reprocess, requiring_manual_review, oldest_item, newest_item,
/// error_categories) plus error_types and average_failure_count. Without a
/// job: the same keys over all jobs, plus `jobs`: job_id -> that job's
/// object.
///
/// Example: dlq stats --job-id mapreduce-20251123_194253 --json
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this job
    #[arg(long, visible_alias = "workflow-id")]
    job_id: Option<String>,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    show(ctx, args.job_id.as_deref(), args.json)
}

/// Prints the statistics of one job or of all (shared with `dlq show`).
pub fn show(ctx: &Context, job_id: Option<&str>, json: bool) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    match job_id {
        Some(job) => {
            let stats = dlq.job_stats(job)?;
            if json {
                print_json(&stats)?;
            } else {
                print_stats(job, &stats)?;
            }
        }
        None => {
            let (total, per_job) = dlq.stats()?;
            if json {
                print_json(&AllJobs {
                    total: &total,
                    jobs: &per_job,
                })?;
            } else {
                print_stats(&format!("all jobs ({})", per_job.len()), &total)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `dlq stats --json` without a job: the totals' keys, then `jobs`.
/// Serialised as it stands: building a JSON value first doubled the time and
/// memory when there are a million signatures.
#[derive(serde::Serialize)]
struct AllJobs<'a> {
    #[serde(flatten)]
    total: &'a Stats,
    jobs: &'a std::collections::BTreeMap<String, Stats>,
}

/// How many signatures the table lists (the JSON lists all).
const TABLE_SIGNATURES: usize = 20;

fn print_stats(title: &str, stats: &Stats) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{title}")?;
    writeln!(out, "  total items:             {}", stats.total_items)?;
    writeln!(
        out,
        "  eligible for reprocess:  {}",
        stats.eligible_for_reprocess
    )?;
    writeln!(
        out,
        "  requiring manual review: {}",
        stats.requiring_manual_review
    )?;
    writeln!(
        out,
        "  oldest item:             {}",
        cell(stats.oldest_item)
    )?;
    writeln!(
        out,
        "  newest item:             {}",
        cell(stats.newest_item)
    )?;
    writeln!(
        out,
        "  average failure count:   {}",
        stats.average_failure_count
    )?;
    if !stats.error_types.is_empty() {
        let mut types: Vec<_> = stats.error_types.iter().collect();
        types.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let listed: Vec<String> = types.iter().map(|(t, n)| format!("{t} {n}")).collect();
        writeln!(out, "  last error types:        {}", listed.join(", "))?;
    }
    if !stats.error_categories.is_empty() {
        writeln!(out)?;
        drop(out);
        let mut categories: Vec<_> = stats.error_categories.iter().collect();
        let order = |a: &(&String, &i64), b: &(&String, &i64)| b.1.cmp(a.1).then(a.0.cmp(b.0));
        if categories.len() > TABLE_SIGNATURES {
            categories.select_nth_unstable_by(TABLE_SIGNATURES - 1, order);
        }
        let more = categories.len().saturating_sub(TABLE_SIGNATURES);
        categories.truncate(TABLE_SIGNATURES);
        categories.sort_by(order);
        let mut table = Table::new(&["ITEMS", "ERROR SIGNATURE"]);
        for (signature, count) in categories {
            table.row(vec![count.to_string(), signature.clone()]);
        }
        table.print()?;
        if more > 0 {
            println!("... and {more} more signature(s): `dlq stats --json` lists them all");
        }
    }
    Ok(())
}
