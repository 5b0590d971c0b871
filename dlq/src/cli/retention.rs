//! `dlq retention`: retention policies, how long items are kept by job and
//! failure category and how long the audit log is kept (`--events`), and
//! applying them (from cron).

use super::output::{column, confirm, note, plural, print_json, Column, Format, Kind, RowWriter};
use super::{usage, Context};
use anyhow::Result;
use dlqlite::store::{scope_text, RetentionPolicy};
use dlqlite::Category;
use serde_json::json;
use std::process::ExitCode;

/// Keep items by job and failure category; remove older ones on apply
///
/// A policy says how long items are kept after their last attempt, for a
/// job or any job and a failure category or any (see `dlq categories`):
/// `--max-age 7d`, or `--keep-forever`. The most specific policy that
/// matches an item governs it: (job, category) over (job, any) and (any,
/// category), and those over (any, any); where a (job, any) and an (any,
/// category) policy both match, the one that keeps longer governs
/// (keep-forever longest), so a category kept forever stays kept in every
/// job. `list` shows what each policy governs. With no policy (the
/// default) nothing is ever removed.
///
/// `--events` is the audit log's policy (`dlq events`): events older than
/// its max age (at least 1d) go on apply, oldest first, never one younger
/// than a retry run still going, and never the newest. Without it (the
/// default) the log is kept forever. A `dlq watch --since-cursor` whose
/// place was trimmed stops and says so; keep the max age longer than a
/// watcher may be down.
///
/// `apply` removes, in one transaction, every item older than its policy's
/// max age, each with a `purged` event naming the policy; then the audit
/// log's old events, in batches, with one `events_trimmed` event; then,
/// in a database made by this dlq, the freed pages go back to the file
/// system. It counts first and asks on a terminal, as purge does; elsewhere
/// (cron) it needs --yes. `apply --dry-run` counts exactly what `apply` would remove at the
/// same time (`--now`; event ages always by the real clock, as events are
/// stamped). Changes to policies are `retention_set` events.
///
/// Examples:
///   dlq retention set --max-age 30d
///   dlq retention set --category transient --max-age 7d
///   dlq retention set --category permanent --keep-forever
///   dlq retention set --job-id J --max-age 12h --json
///   dlq retention set --events --max-age 90d
///   dlq retention list
///   dlq retention apply --dry-run
///   dlq retention apply --yes --json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment, args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// Output format of the listing
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// List the policies, with the items each governs now and how many an
    /// apply would remove (the default)
    List {
        /// Output format
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Set the policy of a scope (replacing the one it has)
    ///
    /// Example: dlq retention set --category transient --max-age 7d
    #[command(verbatim_doc_comment)]
    Set {
        #[command(flatten)]
        scope: Scope,
        /// Remove items whose last attempt is older than this: 30s, 15m,
        /// 12h, 7d, 2w (as in filters)
        #[arg(long, value_name = "DURATION", value_parser = parse_max_age)]
        max_age: Option<i64>,
        /// Keep matching items forever (protects them from less specific
        /// policies)
        #[arg(long, conflicts_with = "max_age")]
        keep_forever: bool,
        /// Also print the change as JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// Remove the policy of a scope
    ///
    /// Example: dlq retention unset --category transient
    #[command(verbatim_doc_comment)]
    Unset {
        #[command(flatten)]
        scope: Scope,
        /// Also print the change as JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// Remove the items older than their policy's max age
    ///
    /// Counts first and asks on a terminal, as purge does; elsewhere (cron)
    /// it needs --yes. Removes exactly the items counted, or nothing if
    /// they changed meanwhile.
    ///
    /// Examples:
    ///   dlq retention apply --dry-run
    ///   dlq retention apply --yes
    #[command(verbatim_doc_comment)]
    Apply {
        /// Count what would go; change nothing
        #[arg(long)]
        dry_run: bool,
        /// Do not ask (what cron needs)
        #[arg(long)]
        yes: bool,
        /// Print the result as JSON ({"dry_run", "now", "policies": [{"id",
        /// "job_id", "category", "max_age_seconds", "cutoff", "removed"}],
        /// "removed", "events": {"max_age_seconds", "cutoff", "through_id",
        /// "removed"}})
        #[arg(long)]
        json: bool,
    },
}

/// Which items a policy is for, or the audit log.
#[derive(Debug, clap::Args)]
struct Scope {
    /// Only this job (default: any job); it need not exist yet
    #[arg(long, value_parser = not_blank)]
    job_id: Option<String>,
    /// Only items of this failure category (default: any category)
    #[arg(long, value_name = "C", value_parser = super::categories::parse_category)]
    category: Option<Category>,
    /// The audit log's policy instead (how long events are kept; at least
    /// 1d)
    #[arg(long, conflicts_with_all = ["job_id", "category"])]
    events: bool,
}

/// A job id for a policy: a blank one names no job anyone has.
fn not_blank(text: &str) -> std::result::Result<String, String> {
    if text.trim().is_empty() {
        Err("a job id is not blank".to_string())
    } else {
        Ok(text.to_string())
    }
}

/// A max age in seconds, for clap: a filter duration, more than zero.
fn parse_max_age(text: &str) -> std::result::Result<i64, String> {
    match dlqlite::filter::parse_duration(text.trim()) {
        Some(seconds) if seconds > 0 => Ok(seconds),
        Some(_) => Err(format!("{text:?} is not more than zero")),
        None => Err(format!(
            "{text:?} is not a duration: a whole number and a unit, s, m, h, d or w (7d)"
        )),
    }
}

/// A max age as people write it: the largest unit it is a whole number
/// of (7d, 36h, 90m, 45s), or "forever".
fn age_text(seconds: Option<i64>) -> String {
    let Some(seconds) = seconds else {
        return "forever".to_string();
    };
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds % size == 0 {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

/// "policy 3 (any job, category transient, 7d)".
fn policy_text(
    id: i64,
    job_id: Option<&str>,
    category: Option<Category>,
    age: Option<i64>,
) -> String {
    format!(
        "policy {id} ({}, {})",
        scope_text(job_id, category),
        keep_text(age)
    )
}

/// "remove after 7d", "keep forever".
fn keep_text(age: Option<i64>) -> String {
    match age {
        Some(_) => format!("remove after {}", age_text(age)),
        None => "keep forever".to_string(),
    }
}

const COLUMNS: [Column; 9] = [
    column("id", "ID", Kind::Count),
    column("job_id", "JOB", Kind::Id),
    column("category", "CATEGORY", Kind::Text),
    column("max_age", "MAX AGE", Kind::Text),
    column("items", "ITEMS", Kind::Count),
    column("would_remove", "WOULD REMOVE", Kind::Count),
    column("updated_at", "UPDATED", Kind::Time),
    column("max_age_seconds", "MAX AGE SECONDS", Kind::Count),
    column("created_at", "CREATED", Kind::Time),
];

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    match args.action {
        None => list(args.format, ctx),
        Some(Action::List { format }) => list(format, ctx),
        Some(Action::Set {
            scope,
            max_age,
            keep_forever,
            json,
        }) => {
            if max_age.is_none() && !keep_forever {
                usage!("retention set needs --max-age DURATION or --keep-forever");
            }
            if scope.events {
                return set_events(max_age, json, ctx);
            }
            set(&scope, max_age, json, ctx)
        }
        Some(Action::Unset { scope, json }) if scope.events => set_events(None, json, ctx),
        Some(Action::Unset { scope, json }) => unset(&scope, json, ctx),
        Some(Action::Apply { dry_run, yes, json }) => apply(dry_run, yes, json, ctx),
    }
}

fn list(format: Format, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    let table = format == Format::Table;
    // A table says "*" for any; machine formats say null.
    let any = |value: Option<String>| match value {
        Some(value) => json!(value),
        None if table => json!("*"),
        None => json!(null),
    };
    let mut out = RowWriter::new(format, &COLUMNS)?.table_columns(7);
    for status in dlq.retention_status()? {
        let policy = &status.policy;
        out.row(vec![
            json!(policy.id),
            any(policy.job_id.clone()),
            any(policy.category.map(|c| c.to_string())),
            json!(age_text(policy.max_age_seconds)),
            json!(status.items),
            json!(status.would_remove),
            json!(policy.updated_at),
            json!(policy.max_age_seconds),
            json!(policy.created_at),
        ])?;
    }
    out.finish("no retention policies for items (apply removes no item)")?;
    // The audit log's policy is one line on stderr: it has no job or
    // category, and the rows above stay what scripts read.
    let events = dlq.trim_events(true)?;
    note(&events_line(&events));
    Ok(ExitCode::SUCCESS)
}

/// The audit log's policy and what an apply would do to it, in one line.
fn events_line(report: &dlqlite::store::EventsTrimReport) -> String {
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    match report.max_age_seconds {
        None => "audit log: kept forever (no --events policy)".to_string(),
        Some(age) => format!(
            "audit log: events kept {}; {verb} {}{}",
            age_text(Some(age)),
            plural(report.removed, "event"),
            match (report.through_id, report.cutoff) {
                (Some(id), Some(cutoff)) if report.removed > 0 => format!(
                    " (up to event {id}, older than {})",
                    super::term::get().time(&cutoff.to_string())
                ),
                _ => String::new(),
            }
        ),
    }
}

/// `set --events` (`max_age` None: keep forever) and `unset --events`.
fn set_events(max_age: Option<i64>, json: bool, ctx: &Context) -> Result<ExitCode> {
    if let Some(age) = max_age.filter(|a| *a < dlqlite::store::MIN_EVENTS_MAX_AGE) {
        usage!(
            "--events --max-age {} is too short: the audit log is kept at least 1d, \
             so a watcher stopped overnight still finds its place",
            age_text(Some(age))
        );
    }
    let dlq = ctx.open_existing_to_write()?;
    let change = dlq.set_events_retention(max_age)?;
    let was = match change.before {
        _ if change.before == change.after => "unchanged".to_string(),
        None => "was: kept forever".to_string(),
        Some(before) => format!("was: {}", keep_text(Some(before))),
    };
    note(&format!(
        "audit log: {}; {was}; the next apply would remove {}",
        keep_text(change.after),
        plural(change.would_remove, "event")
    ));
    if json {
        print_json(&change)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn set(scope: &Scope, max_age: Option<i64>, json: bool, ctx: &Context) -> Result<ExitCode> {
    // Not created: a policy set in a new file at a mistyped --db would
    // never apply to anything.
    let dlq = ctx.open_existing_to_write()?;
    let job = scope.job_id.as_deref();
    let change = dlq.set_retention(job, scope.category, max_age)?;
    let Some(after) = &change.after else {
        anyhow::bail!("the policy was removed while it was being set");
    };
    let was = match &change.before {
        None => "new".to_string(),
        Some(before) if before == after => "unchanged".to_string(),
        Some(before) => format!("was: {}", keep_text(before.max_age_seconds)),
    };
    let next = match after.max_age_seconds {
        Some(_) => format!(
            "the next apply would remove {} under it ({} in all)",
            plural(change.would_remove, "item"),
            thousands(change.would_remove_total)
        ),
        None => format!(
            "the next apply would remove {} in all",
            plural(change.would_remove_total, "item")
        ),
    };
    note(&format!(
        "{}: {was}; {next}",
        policy_text(
            after.id,
            after.job_id.as_deref(),
            after.category,
            after.max_age_seconds
        )
    ));
    if let Some(job) = job {
        if !dlq.job_exists(job)? {
            note(&format!(
                "note: job {job:?} has no items yet; the policy applies once it has"
            ));
        }
    }
    if json {
        print_json(&change)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn thousands(n: usize) -> String {
    super::output::thousands(u64::try_from(n).unwrap_or(u64::MAX))
}

fn unset(scope: &Scope, json: bool, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing_to_write()?;
    let change = dlq.remove_retention(scope.job_id.as_deref(), scope.category)?;
    let removed: Option<&RetentionPolicy> = change.before.as_ref();
    let what = match removed {
        Some(p) => policy_text(p.id, p.job_id.as_deref(), p.category, p.max_age_seconds),
        None => scope_text(scope.job_id.as_deref(), scope.category),
    };
    note(&format!(
        "removed {what}; the next apply would remove {} in all",
        plural(change.would_remove_total, "item")
    ));
    if json {
        print_json(&change)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn apply(dry_run: bool, yes: bool, json: bool, ctx: &Context) -> Result<ExitCode> {
    let dlq = if dry_run {
        ctx.open_existing()?
    } else {
        ctx.open_existing_to_write()?
    };
    let counted = dlq.apply_retention(true)?;
    let report = if dry_run {
        counted
    } else {
        // One question for both: items and audit-log events are removed
        // alike, so neither goes without a yes (or --yes).
        let events_due = dlq.trim_events(true)?.removed;
        if counted.removed > 0 || events_due > 0 {
            let action = match (counted.removed, events_due) {
                (items, 0) => format!(
                    "remove {} older than their retention policies allow",
                    plural(items, "item")
                ),
                (0, events) => format!(
                    "remove {} older than the audit log's policy allows",
                    plural(events, "audit-log event")
                ),
                (items, events) => format!(
                    "remove {} and {} older than their retention policies allow",
                    plural(items, "item"),
                    plural(events, "audit-log event")
                ),
            };
            if !confirm(&action, yes)? {
                note("nothing removed");
                return Ok(ExitCode::from(1));
            }
        }
        if yes {
            // Nobody was shown a count (cron): what is due when it runs.
            dlq.apply_retention_at(counted.now, false)?
        } else {
            // What was counted (and asked about), or nothing.
            dlq.apply_retention_counted(&counted)?
        }
    };
    // After the items: the `purged` events just written are young.
    let events = dlq.trim_events(dry_run)?;
    if json {
        let mut value = serde_json::to_value(&report)?;
        if let Some(object) = value.as_object_mut() {
            object.insert("events".into(), serde_json::to_value(&events)?);
        }
        print_json(&value)?;
    }
    if report.policies.is_empty() {
        note("no retention policies for items (no item is removed by apply)");
        note(&events_line(&events));
        return Ok(ExitCode::SUCCESS);
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    let term = super::term::get();
    for outcome in &report.policies {
        let policy = policy_text(
            outcome.id,
            outcome.job_id.as_deref(),
            outcome.category,
            outcome.max_age_seconds,
        );
        match outcome.cutoff {
            Some(cutoff) => note(&format!(
                "{policy}: {verb} {} last failed before {}",
                plural(outcome.removed, "item"),
                term.time(&cutoff.to_string())
            )),
            None => note(&format!("{policy}: keeps its items")),
        }
    }
    note(&format!("{verb} {} in all", plural(report.removed, "item")));
    note(&events_line(&events));
    Ok(ExitCode::SUCCESS)
}
