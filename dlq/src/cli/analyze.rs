//! `dlq analyze`: failure families first, then failure patterns,
//! distributions and categories.

use super::output::{note, print_json, Kind, Table};
use super::Context;
use anyhow::Result;
use dlqlite::store::Analysis;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Analyse failures: families, patterns, error types, over time, categories, agents
///
/// First the largest failure families (one per cause, see `dlq families`),
/// then pattern groups by signature and by normalised message (messages that
/// differ only in numbers, paths, hex ids, uuids or durations group
/// together), error types over all attempts and last attempts, failures per
/// hour or day, failure categories (transient, conditionally_recoverable,
/// permanent, unclassified; see `dlq categories` in docs/commands.md), and the agents and steps that
/// fail most.
///
/// Examples:
///   dlq analyze --job-id mapreduce-20251123_194253
///   dlq analyze --export analysis.json
///   dlq analyze --top 0 --json   # every group, nothing left out
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Only this job
    #[arg(long)]
    job_id: Option<String>,
    /// Also write the analysis as JSON to this file
    #[arg(long, value_name = "FILE")]
    export: Option<PathBuf>,
    /// Families, pattern groups and message groups to list, the largest
    /// first (0 = all); the rest are summed up as "and G more groups
    /// holding I items" (`families_omitted`, `pattern_groups_omitted`,
    /// `message_groups_omitted` in JSON)
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
    /// Print JSON instead of tables
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let options = dlqlite::store::AnalyzeOptions { top: args.top };
    let analysis = ctx
        .open_existing()?
        .analyze_with(args.job_id.as_deref(), &options)?;
    if let Some(path) = &args.export {
        let text = serde_json::to_string_pretty(&analysis)?;
        dlqlite::outfile::write_file(path, (text + "\n").as_bytes())?;
        if path.as_os_str() == "-" {
            // The export is stdout's: the tables would break its JSON.
            return Ok(ExitCode::SUCCESS);
        }
    }
    if args.json {
        print_json(&analysis)?;
    } else {
        print_tables(&analysis)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The line under a cut listing that accounts for what was cut.
fn print_omitted(omitted: &dlqlite::store::Omitted) -> Result<()> {
    if omitted.groups > 0 {
        println!(
            "and {} more group(s) holding {} item(s) (--top 0 lists all)",
            omitted.groups, omitted.items
        );
    }
    Ok(())
}

/// A bar of `width` cells for `value` out of `max`.
pub fn bar(value: i64, max: i64, width: usize) -> String {
    if max <= 0 || value <= 0 {
        return String::new();
    }
    let cells = ((value as f64 / max as f64) * width as f64)
        .round()
        .max(1.0) as usize;
    "█".repeat(cells.min(width))
}

fn print_tables(a: &Analysis) -> Result<()> {
    if a.total_items == 0 {
        // Once, instead of seven empty sections.
        match &a.job_id {
            Some(job) => note(&format!("job {job:?} has no items: nothing to analyse")),
            None => note("the database holds no items: nothing to analyse"),
        }
        return Ok(());
    }
    let scope = dlqlite::text::for_terminal(a.job_id.as_deref().unwrap_or("all jobs"));
    println!(
        "{scope}: {} item(s), {} attempt(s)\n",
        a.total_items, a.total_attempts
    );
    print_families(a)?;
    print_pattern_groups(a)?;
    print_message_groups(a)?;
    print_error_types(a)?;
    println!("\nFailure categories (items, by last attempt)");
    let mut table = Table::new(&[("CATEGORY", Kind::Text), ("ITEMS", Kind::Count)]);
    for (category, count) in &a.failure_categories {
        table.push(vec![category.clone(), count.to_string()]);
    }
    table.print()?;
    print_over_time(a)?;
    for (title, ranked) in [
        ("Top agents", &a.top_agents),
        ("Top failing steps", &a.top_failing_steps),
    ] {
        println!("\n{title}");
        if title == "Top agents" && !a.agents_repeat() {
            println!("{}", dlqlite::store::AGENTS_DO_NOT_REPEAT);
            continue;
        }
        let mut table = Table::new(&[("FAILURES", Kind::Count), ("NAME", Kind::Text)]);
        for r in ranked {
            table.push(vec![r.failures.to_string(), r.name.clone()]);
        }
        table.print()?;
    }
    Ok(())
}

/// The largest families, and the lines that make the listing add up to
/// the items.
fn print_families(a: &Analysis) -> Result<()> {
    println!("Failure families (items, by last attempt)");
    super::families::print_family_table(&a.families)?;
    print_omitted(&a.families_omitted)?;
    if a.items_without_family > 0 {
        println!(
            "and {} item(s) without a family (dlq families rebuild mines them)",
            a.items_without_family
        );
    }
    println!();
    Ok(())
}

fn print_pattern_groups(a: &Analysis) -> Result<()> {
    println!("Pattern groups (by error signature)");
    let time = |t: Option<dlqlite::Timestamp>| t.map(|t| t.to_string()).unwrap_or_default();
    let mut table = Table::new(&[
        ("COUNT", Kind::Count),
        ("SIGNATURE", Kind::Text),
        ("TYPE", Kind::ErrorType),
        ("FIRST", Kind::Time),
        ("LAST", Kind::Time),
        ("SAMPLES", Kind::Text),
        ("MESSAGE", Kind::Message),
    ])
    .leave_out_first(&["FIRST", "SAMPLES"]);
    for g in &a.pattern_groups {
        let message = g.representative_message.as_deref().unwrap_or_default();
        table.push(vec![
            g.count.to_string(),
            g.error_signature.clone(),
            g.error_type.clone().unwrap_or_default(),
            time(g.first_occurrence),
            time(g.last_occurrence),
            g.sample_items.join(" "),
            message.to_string(),
        ]);
    }
    table.print()?;
    print_omitted(&a.pattern_groups_omitted)
}

fn print_message_groups(a: &Analysis) -> Result<()> {
    println!("\nMessage groups (last messages; numbers, paths, ids and durations masked)");
    let mut table = Table::new(&[
        ("COUNT", Kind::Count),
        ("SIGNATURES", Kind::Count),
        ("PATTERN", Kind::Text),
    ]);
    for g in &a.message_groups {
        table.push(vec![
            g.count.to_string(),
            g.signatures.to_string(),
            g.pattern.clone(),
        ]);
    }
    table.print()?;
    print_omitted(&a.message_groups_omitted)
}

/// Each error type's count over all attempts and over last attempts, and
/// its category.
fn print_error_types(a: &Analysis) -> Result<()> {
    println!("\nError types");
    let (all, last) = (
        &a.error_distribution.all_attempts,
        &a.error_distribution.last_attempts,
    );
    let mut table = Table::new(&[
        ("TYPE", Kind::ErrorType),
        ("ALL ATTEMPTS", Kind::Count),
        ("LAST ATTEMPTS", Kind::Count),
        ("CATEGORY", Kind::Text),
    ]);
    let names: std::collections::BTreeSet<&String> = all.keys().chain(last.keys()).collect();
    for name in names {
        let count = |counts: &std::collections::BTreeMap<String, i64>| {
            counts.get(name).copied().unwrap_or(0).to_string()
        };
        table.push(vec![
            name.clone(),
            count(all),
            count(last),
            a.error_distribution
                .categories
                .get(name)
                .map_or("unclassified", |c| c.as_str())
                .to_string(),
        ]);
    }
    table.print()
}

/// Failures per bucket, with a bar each.
fn print_over_time(a: &Analysis) -> Result<()> {
    println!("\nFailures per {}", a.temporal_distribution.bucket);
    let counts = &a.temporal_distribution.counts;
    let max = counts.iter().map(|(_, n)| *n).max().unwrap_or(0);
    // Bucket and count take 23 columns; the bar what the width leaves.
    let bar_width = super::term::get()
        .width
        .map_or(50, |width| width.saturating_sub(23).clamp(1, 50));
    let mut out = std::io::stdout().lock();
    for (bucket, count) in counts {
        writeln!(
            out,
            "{bucket:<13} {count:>8} {}",
            bar(*count, max, bar_width)
        )?;
    }
    Ok(())
}
