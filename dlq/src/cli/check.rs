//! `dlq check`: one-shot thresholds for cron, CI and monitoring, and the
//! exit codes that say how they came out (0 all hold, 1 a breach, 2 a
//! usage error, 3 the check could not be made).

use super::output::{note, parse_filter, plural, print_json, thousands};
use super::term::span;
use super::Context;
use anyhow::{Context as _, Result};
use dlqlite::check::{Breach, MaxNew, Thresholds};
use serde_json::{json, Value};
use std::io::Write;
use std::process::ExitCode;

/// Test thresholds once: exit 0 if all hold, 1 with a line per breach
///
/// Every threshold given is tested, per job (one job with --job-id, else
/// every job), and each breach prints one line on stdout:
///   --max-items N          job X: 1,204 items > 1,000
///   --max-age DURATION     job X: oldest item 3d 4h > 2d
///                            (age: now - first_attempt, when it first failed)
///   --max-new N --per DUR  job X: 57 new items in the last 1h > 50
///                            (items added or imported within DUR)
///   --new-signature        new signature 9bfee574ec1da5f3 "cargo test failed" since the last check
///   --new-family           new family 12 "npm ERR! code <*>" (3 items) since the last check
/// Exactly at a limit holds. Durations: 30s 15m 12h 2d 1w. --filter narrows
/// the items --max-items and --max-age look at. --new-signature and
/// --new-family have no window of their own: their window is the time
/// since the last run of the check of this --name. Each keeps what it saw
/// in the database under --name (apart from each other), so checks from
/// cron on any host compare with each other; the first run of each records
/// a baseline.
///
/// Exit codes: 0 every threshold holds (nothing printed); 1 a breach; 2 a
/// usage error; 3 the check could not be made (no database, not a dlq
/// database, unreadable, unknown job): never mistaken for "all fine".
///
/// Examples:
///   dlq check --max-items 1000
///   dlq check --job-id mapreduce-20251123_194253 --max-age 3650d --json
///   dlq check --max-new 1000 --per 1h
///   dlq check --max-items 100 --filter 'error_type == "Timeout"'
///   dlq check --new-signature --name nightly
///   dlq check --new-family --name nightly
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[command(group(clap::ArgGroup::new("news").multiple(true).args(["new_signature", "new_family"])))]
pub struct Args {
    /// Only this job (default: every job)
    #[arg(long)]
    job_id: Option<String>,
    /// Count only items matching this expression (--max-items, --max-age;
    /// see `dlq list --help`)
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    /// Breach: a job holds more than N items
    #[arg(long, value_name = "N")]
    max_items: Option<u64>,
    /// Breach: a job's oldest item first failed longer ago than this
    #[arg(long, value_name = "DURATION", value_parser = parse_span)]
    max_age: Option<u64>,
    /// Breach: more than N items arrived in a job within --per
    #[arg(long, value_name = "N", requires = "per")]
    max_new: Option<u64>,
    /// The window of --max-new
    #[arg(long, value_name = "DURATION", value_parser = parse_window, requires = "max_new")]
    per: Option<u64>,
    /// Breach: an error signature present now was not at the last check
    /// of this --name (writes that check's state to the database)
    #[arg(long)]
    new_signature: bool,
    /// Breach: a failure family with items now had none at the last check
    /// of this --name (a new cause; see `dlq families`; writes that
    /// check's state to the database)
    #[arg(long)]
    new_family: bool,
    /// The name --new-signature and --new-family keep their state under
    /// (checks with different names each see their own news)
    #[arg(
        long,
        value_name = "NAME",
        default_value = "default",
        requires = "news"
    )]
    name: String,
    /// Print one JSON object on stdout: {"ok", "status", "breaches": [{"check",
    /// "job_id", "value", "limit", "line"}]} ("error" instead when unknown)
    #[arg(long)]
    json: bool,
}

/// A duration as filters write it (`2d`), in seconds.
fn parse_span(text: &str) -> std::result::Result<u64, String> {
    dlqlite::filter::parse_duration(text.trim())
        .and_then(|seconds| u64::try_from(seconds).ok())
        .ok_or_else(|| {
            format!("{text:?} is not a duration: a whole number and a unit, s m h d or w (2d, 36h)")
        })
}

/// `--per`: a duration, and not an empty window.
fn parse_window(text: &str) -> std::result::Result<u64, String> {
    match parse_span(text)? {
        0 => Err(format!("{text:?} is an empty window: give at least 1s")),
        seconds => Ok(seconds),
    }
}

/// A breach as `dlq check` prints it: a line for people, and the JSON
/// object for machines.
struct Shown {
    check: &'static str,
    job_id: Option<String>,
    value: Value,
    limit: Value,
    line: String,
    /// More for machines (the oldest item, a signature's message).
    extra: serde_json::Map<String, Value>,
}

impl Shown {
    fn to_json(&self) -> Value {
        let mut object = serde_json::Map::new();
        object.insert("check".into(), json!(self.check));
        object.insert("job_id".into(), json!(self.job_id));
        object.insert("value".into(), self.value.clone());
        object.insert("limit".into(), self.limit.clone());
        object.insert("line".into(), json!(self.line));
        object.extend(self.extra.clone());
        Value::Object(object)
    }
}

/// Exit code 3: the check could not be made.
const UNKNOWN: u8 = 3;

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    if args.max_items.is_none()
        && args.max_age.is_none()
        && args.max_new.is_none()
        && !args.new_signature
        && !args.new_family
    {
        super::usage!(
            "no threshold to check: give --max-items, --max-age, --max-new with --per, --new-signature or --new-family"
        );
    }
    if args.name.is_empty() {
        super::usage!("--name is empty: name the check (the default is \"default\")");
    }
    if args.name.len() > 200 {
        super::usage!("--name is {} bytes long (at most 200)", args.name.len());
    }
    if args.name.chars().any(char::is_control) {
        // U+001F names each check's family state (store/check.rs).
        super::usage!("--name has a control character: name the check in printable text");
    }
    if args.filter.is_some() && args.max_items.is_none() && args.max_age.is_none() {
        // Arrivals and news count every item: a filter that
        // narrows nothing must not look as if it did.
        super::usage!("--filter narrows --max-items and --max-age only, and neither was given");
    }
    let expression = parse_filter(args.filter.as_deref())?;
    match evaluate(&args, expression, ctx) {
        Ok(breaches) => Ok(report(&args, &breaches)),
        Err(error) if error.downcast_ref::<super::Usage>().is_some() => Err(error),
        Err(error) => {
            let line = crate::one_line(&super::with_suggestion(error, ctx));
            note(&format!("dlq: error: {line}"));
            if args.json {
                let _ = print_json(&json!({"ok": false, "status": "unknown", "error": line}));
            }
            Ok(ExitCode::from(UNKNOWN))
        }
    }
}

/// Prints the verdict and returns its exit code. Lines that cannot be
/// written (a closed stdout) do not change the verdict.
fn report(args: &Args, breaches: &[Shown]) -> ExitCode {
    if args.json {
        let _ = print_json(&json!({
            "ok": breaches.is_empty(),
            "status": if breaches.is_empty() { "ok" } else { "breach" },
            "breaches": breaches.iter().map(Shown::to_json).collect::<Vec<_>>(),
        }));
    } else {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for breach in breaches {
            let _ = writeln!(out, "{}", dlqlite::text::for_terminal(&breach.line));
        }
        let _ = out.flush();
    }
    if breaches.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Tests every threshold given (all of them, whatever the first found):
/// the library's [`dlqlite::check`], shown.
fn evaluate(
    args: &Args,
    expression: Option<dlqlite::filter::Expr>,
    ctx: &Context,
) -> Result<Vec<Shown>> {
    let dlq = if args.new_signature || args.new_family {
        ctx.open_existing_to_write().context(
            "--new-signature and --new-family record what they saw in the database, which must be writable",
        )?
    } else {
        ctx.open_existing()?
    };
    let thresholds = Thresholds {
        job_id: args.job_id.clone(),
        filter: expression,
        max_items: args.max_items,
        max_age: args.max_age,
        max_new: args
            .max_new
            .zip(args.per)
            .map(|(limit, per)| MaxNew { limit, per }),
        new_signature: args.new_signature,
        new_family: args.new_family,
        name: args.name.clone(),
    };
    let found = dlq.check(&thresholds)?;
    if let Some(recorded) = found.signature_baseline {
        note(&format!(
            "dlq: check {:?}: no earlier check of this name and scope to compare with: \
             recorded {} as the baseline; new ones are reported from the next check",
            args.name,
            plural(recorded as u64, "signature")
        ));
    }
    if let Some(recorded) = found.family_baseline {
        note(&format!(
            "dlq: check {:?}: no earlier family check of this name and scope to compare with: \
             recorded {} as the baseline; new ones are reported from the next check",
            args.name,
            match recorded {
                1 => "1 family".to_string(),
                n => format!("{} families", thousands(n as u64)),
            }
        ));
    }
    Ok(found
        .breaches
        .into_iter()
        .map(|breach| shown(args, breach))
        .collect())
}

/// A breach's line and JSON object.
fn shown(args: &Args, breach: Breach) -> Shown {
    let check = breach.check();
    let mut extra = serde_json::Map::new();
    let (job_id, value, limit, line) = match breach {
        Breach::MaxItems {
            job_id,
            items,
            limit,
        } => {
            let line = format!(
                "job {job_id}: {} > {}",
                plural(items, "item"),
                thousands(limit)
            );
            (Some(job_id), json!(items), json!(limit), line)
        }
        Breach::MaxAge {
            job_id,
            item_id,
            first_attempt,
            age,
            limit,
        } => {
            extra.insert("item_id".into(), json!(item_id));
            extra.insert("first_attempt".into(), json!(first_attempt));
            let line = format!(
                "job {job_id}: oldest item {} > {}",
                age_over(age, limit),
                span(limit)
            );
            (Some(job_id), json!(age), json!(limit), line)
        }
        Breach::MaxNew {
            job_id,
            arrived,
            per,
            limit,
        } => {
            extra.insert("per".into(), json!(per));
            let line = format!(
                "job {job_id}: {} in the last {} > {}",
                plural(arrived, "new item"),
                span(per),
                thousands(limit)
            );
            (Some(job_id), json!(arrived), json!(limit), line)
        }
        Breach::NewSignature { signature, sample } => {
            let message = sample.message.as_deref().map(short).unwrap_or_default();
            extra.insert("items".into(), json!(signature.items));
            extra.insert("error_type".into(), json!(sample.error_type));
            extra.insert("message".into(), json!(sample.message));
            // Quoted with its own quotes escaped: one line a script can
            // split whatever the message holds.
            let line = format!(
                "new signature {} {message:?} since the last check",
                signature.error_signature
            );
            let value = json!(signature.error_signature);
            (args.job_id.clone(), value, Value::Null, line)
        }
        Breach::NewFamily(family) => {
            extra.insert("items".into(), json!(family.items));
            extra.insert("template".into(), json!(family.template));
            extra.insert("error_type".into(), json!(family.error_type));
            extra.insert("first_seen".into(), json!(family.first_seen));
            let line = format!(
                "new family {} {:?} ({}) since the last check",
                family.family_id,
                short(&family.template),
                plural(family.items, "item")
            );
            (
                args.job_id.clone(),
                json!(family.family_id),
                Value::Null,
                line,
            )
        }
    };
    Shown {
        check,
        job_id,
        value,
        limit,
        line,
        extra,
    }
}

/// An age over its limit as `--relative` shows it, or to the second when
/// that would read the same as the limit ("2d > 2d").
fn age_over(age: u64, limit: u64) -> String {
    let shown = span(age);
    if shown != span(limit) {
        return shown;
    }
    let units = [
        (age / 86_400, "d"),
        (age % 86_400 / 3_600, "h"),
        (age % 3_600 / 60, "m"),
        (age % 60, "s"),
    ];
    let parts: Vec<String> = units
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    parts.join(" ")
}

/// A message's headline, cut to fit one line.
fn short(message: &str) -> String {
    const WIDTH: usize = 60;
    let line = dlqlite::text::headline(message);
    if unicode_width::UnicodeWidthStr::width(line) <= WIDTH {
        return line.to_string();
    }
    let mut cut: String = super::table::within(line.chars(), WIDTH - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_age_just_over_reads_differently_from_its_limit() {
        assert_eq!(age_over(3 * 86_400 + 4 * 3_600, 2 * 86_400), "3d 4h");
        assert_eq!(age_over(2 * 86_400 + 1, 2 * 86_400), "2d 1s");
        assert_eq!(age_over(3_600 + 61, 3_600), "1h 1m");
        assert_eq!(age_over(3_600 + 1, 3_600), "1h 1s");
        assert_eq!(age_over(200 * 86_400 + 5, 200 * 86_400), "200d 5s");
    }

    #[test]
    fn durations_are_a_number_and_a_unit() {
        assert_eq!(parse_span("2d"), Ok(172_800));
        assert_eq!(parse_span("36h"), Ok(129_600));
        assert_eq!(parse_span("0s"), Ok(0));
        assert!(parse_span("2").is_err());
        assert!(parse_span("-2d").is_err());
        assert!(parse_span("2 days").is_err());
        assert!(parse_window("0m").is_err());
    }
}
