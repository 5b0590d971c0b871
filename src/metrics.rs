//! The state of a DLQ as metrics: the Prometheus text format 0.0.4 (what
//! node_exporter's textfile collector reads) or OpenMetrics 1.0, from one
//! [`MetricsSnapshot`] (which reads counters, and the items_family index
//! for the largest failure families, never items' rows). `dlq metrics`
//! prints or writes [`render`]'s text; a server would serve the same text
//! with [`Format::content_type`].
//!
//! Every family, its type, labels and meaning is in [`FAMILIES`] and in the
//! docs/guide.md ("Metrics for Prometheus"). Label values are escaped as both
//! formats require (backslash, double quote and line feed); any other
//! character, control characters included, is legal inside a quoted label
//! value and is written as it is: only a line feed ends a line.

use crate::error::Result;
use crate::store::{Dlq, EventKind, MetricsSnapshot, RunStatus};
use std::fmt::Write as _;

/// The text format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text exposition format 0.0.4.
    #[default]
    Prometheus,
    /// OpenMetrics 1.0 text: counter families without the `_total` suffix
    /// (their samples have it), units declared, `# EOF` at the end.
    OpenMetrics,
}

impl Format {
    /// The HTTP Content-Type of the text.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// What to show, and how a retry run is judged crashed.
#[derive(Clone, Debug)]
pub struct Options {
    /// Only this job (every metric: its items, events and runs), or every
    /// job.
    pub job_id: Option<String>,
    /// This machine's name: a run recorded as running here whose process
    /// is gone is crashed.
    pub host: String,
    /// A run whose heartbeat is older than this is crashed (`dlq retry
    /// --status` uses twice the lease: 120 s for the default lease).
    pub stale_after_secs: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            job_id: None,
            host: crate::retry::hostname(),
            stale_after_secs: DEFAULT_STALE_AFTER_SECS,
        }
    }
}

/// Twice `dlq retry`'s default lease (60 s), as `retry --status` judges.
pub const DEFAULT_STALE_AFTER_SECS: i64 = 120;

/// A metric's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Gauge,
    Counter,
}

impl Type {
    pub fn as_str(self) -> &'static str {
        match self {
            Type::Gauge => "gauge",
            Type::Counter => "counter",
        }
    }
}

/// One metric family: its name (for a counter, without `_total`, which
/// its samples carry), type, unit (OpenMetrics), labels and help.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    pub name: &'static str,
    pub kind: Type,
    pub unit: Option<&'static str>,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

impl Family {
    /// The name of its samples (and, in the Prometheus format, of the
    /// family): a counter's ends in `_total`.
    pub fn sample_name(&self) -> String {
        match self.kind {
            Type::Counter => format!("{}_total", self.name),
            Type::Gauge => self.name.to_string(),
        }
    }
}

const SCHEMA: Family = Family {
    name: "dlq_schema_version",
    kind: Type::Gauge,
    unit: None,
    labels: &[],
    help: "Schema version of the dlq database.",
};
const JOBS: Family = Family {
    name: "dlq_jobs",
    kind: Type::Gauge,
    unit: None,
    labels: &[],
    help: "Jobs in the database (1 with --job-id).",
};
const JOB_ITEMS: Family = Family {
    name: "dlq_job_items",
    kind: Type::Gauge,
    unit: None,
    labels: &["job_id"],
    help: "Dead letters (items) a job holds.",
};
const ITEMS: Family = Family {
    name: "dlq_items",
    kind: Type::Gauge,
    unit: None,
    labels: &["job_id", "error_type", "category"],
    help: "Items by job, last attempt's error type (empty: no attempts) and that type's failure category.",
};
const ELIGIBLE: Family = Family {
    name: "dlq_items_eligible",
    kind: Type::Gauge,
    unit: None,
    labels: &["job_id"],
    help: "Items of a job eligible for reprocessing.",
};
const MANUAL_REVIEW: Family = Family {
    name: "dlq_items_manual_review",
    kind: Type::Gauge,
    unit: None,
    labels: &["job_id"],
    help: "Items of a job marked for manual review.",
};
const OLDEST_AGE: Family = Family {
    name: "dlq_oldest_item_age_seconds",
    kind: Type::Gauge,
    unit: Some("seconds"),
    labels: &["job_id"],
    help: "Age of a job's oldest item when written: now minus its first_attempt (jobs with items only).",
};
const OLDEST_TIME: Family = Family {
    name: "dlq_oldest_item_timestamp_seconds",
    kind: Type::Gauge,
    unit: Some("seconds"),
    labels: &["job_id"],
    help: "Unix time of the first_attempt of a job's oldest item (jobs with items only).",
};
const EVENTS: Family = Family {
    name: "dlq_events",
    kind: Type::Counter,
    unit: None,
    labels: &["kind"],
    help: "Events in the audit log by kind (with --job-id: the job's events, with a job_id label).",
};
const RUNS: Family = Family {
    name: "dlq_retry_runs",
    kind: Type::Gauge,
    unit: None,
    labels: &["job_id", "status"],
    help: "Recorded retry runs by job and status (running, finished, interrupted, crashed).",
};

const FAILURE_FAMILY_ITEMS: Family = Family {
    name: "dlq_failure_family_items",
    kind: Type::Gauge,
    unit: None,
    labels: &["family", "template"],
    help: "Items by failure family of their last attempt: the 10 largest (family id and template), and family=other for the rest and the items without a family; they sum to the items (with --job-id: the job's, with a job_id label).",
};

/// Every family, in the order the text has them.
pub const FAMILIES: [Family; 11] = [
    SCHEMA,
    JOBS,
    JOB_ITEMS,
    ITEMS,
    ELIGIBLE,
    MANUAL_REVIEW,
    OLDEST_AGE,
    OLDEST_TIME,
    EVENTS,
    RUNS,
    FAILURE_FAMILY_ITEMS,
];

/// The statuses every job with runs has a sample for (0 included).
const RUN_STATUSES: [RunStatus; 4] = [
    RunStatus::Running,
    RunStatus::Finished,
    RunStatus::Interrupted,
    RunStatus::Crashed,
];

/// The metrics of `dlq` as text in `format`.
pub fn render(dlq: &Dlq, options: &Options, format: Format) -> Result<String> {
    let snapshot = dlq.metrics_snapshot(
        options.job_id.as_deref(),
        &options.host,
        options.stale_after_secs,
    )?;
    Ok(render_snapshot(&snapshot, format))
}

/// A snapshot as text in `format`.
pub fn render_snapshot(snapshot: &MetricsSnapshot, format: Format) -> String {
    let mut out = Text {
        text: String::new(),
        format,
    };
    out.family(&SCHEMA);
    if let Some(version) = snapshot.schema_version {
        out.sample(&SCHEMA, &[], version);
    }
    out.family(&JOBS);
    out.sample(&JOBS, &[], snapshot.jobs.len());
    out.family(&JOB_ITEMS);
    for job in &snapshot.jobs {
        out.sample(&JOB_ITEMS, &[&job.job_id], job.items);
    }
    out.family(&ITEMS);
    for row in &snapshot.error_types {
        out.sample(
            &ITEMS,
            &[&row.job_id, &row.error_type, row.category.as_str()],
            row.items,
        );
    }
    out.family(&ELIGIBLE);
    for job in &snapshot.jobs {
        out.sample(&ELIGIBLE, &[&job.job_id], job.eligible);
    }
    out.family(&MANUAL_REVIEW);
    for job in &snapshot.jobs {
        out.sample(&MANUAL_REVIEW, &[&job.job_id], job.manual_review);
    }
    out.family(&OLDEST_AGE);
    for item in &snapshot.oldest {
        // To the second, never negative (a first_attempt ahead of the
        // clock), as `dlq check --max-age` counts it.
        let age = (snapshot.now.datetime() - item.first_attempt.datetime())
            .num_seconds()
            .max(0);
        out.sample(&OLDEST_AGE, &[&item.job_id], age);
    }
    out.family(&OLDEST_TIME);
    for item in &snapshot.oldest {
        let millis = item.first_attempt.datetime().timestamp_millis();
        out.sample(&OLDEST_TIME, &[&item.job_id], Seconds(millis));
    }
    out.family(&EVENTS);
    // Every kind, 0 included, so that rates work from the first scrape;
    // then any kind this version does not know (a newer dlq wrote it).
    let known = EventKind::ALL.map(EventKind::as_str);
    let kinds = known.iter().copied().chain(
        snapshot
            .events
            .keys()
            .map(String::as_str)
            .filter(|kind| !known.contains(kind)),
    );
    for kind in kinds {
        let count = snapshot.events.get(kind).copied().unwrap_or(0);
        match &snapshot.job_id {
            Some(job) => out.sample_labelled(&EVENTS, &[("job_id", job), ("kind", kind)], count),
            None => out.sample(&EVENTS, &[kind], count),
        }
    }
    out.family(&RUNS);
    let mut jobs_with_runs: Vec<&str> = snapshot.runs.iter().map(|r| r.job_id.as_str()).collect();
    jobs_with_runs.dedup();
    for job in jobs_with_runs {
        for status in RUN_STATUSES {
            let runs = snapshot
                .runs
                .iter()
                .find(|r| r.job_id == job && r.status == status)
                .map_or(0, |r| r.runs);
            out.sample(&RUNS, &[job, status.as_str()], runs);
        }
    }
    out.family(&FAILURE_FAMILY_ITEMS);
    // A series per listed family and one for the rest, 0 included: the
    // label set is bounded whatever the number of families, and the
    // series sum to the items.
    let families = &snapshot.families;
    let rest = families.omitted.items + families.items_without_family;
    let ids: Vec<String> = families
        .listed
        .iter()
        .map(|f| f.family_id.to_string())
        .collect();
    let series = families
        .listed
        .iter()
        .zip(&ids)
        .map(|(f, id)| (id.as_str(), f.template.as_str(), f.count))
        .chain([("other", "", rest)]);
    for (family, template, count) in series {
        let mut labels = Vec::with_capacity(3);
        if let Some(job) = &snapshot.job_id {
            labels.push(("job_id", job.as_str()));
        }
        labels.extend([("family", family), ("template", template)]);
        out.sample_labelled(&FAILURE_FAMILY_ITEMS, &labels, count);
    }
    if format == Format::OpenMetrics {
        out.text.push_str("# EOF\n");
    }
    out.text
}

/// Milliseconds since the epoch, written as seconds with a fraction.
struct Seconds(i64);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let magnitude = self.0.unsigned_abs();
        let (seconds, millis) = (magnitude / 1000, magnitude % 1000);
        if millis == 0 {
            write!(f, "{sign}{seconds}")
        } else {
            write!(f, "{sign}{seconds}.{millis:03}")
        }
    }
}

/// The text being written.
struct Text {
    text: String,
    format: Format,
}

impl Text {
    /// A family's HELP and TYPE (and UNIT) lines.
    fn family(&mut self, family: &Family) {
        let name = match self.format {
            Format::Prometheus => family.sample_name(),
            Format::OpenMetrics => family.name.to_string(),
        };
        // Help texts are ours and hold nothing either format escapes.
        let _ = writeln!(self.text, "# HELP {name} {}", family.help);
        let _ = writeln!(self.text, "# TYPE {name} {}", family.kind.as_str());
        if let (Format::OpenMetrics, Some(unit)) = (self.format, family.unit) {
            let _ = writeln!(self.text, "# UNIT {name} {unit}");
        }
    }

    /// One sample, with the family's labels given these values in order.
    fn sample(&mut self, family: &Family, values: &[&str], value: impl std::fmt::Display) {
        debug_assert_eq!(family.labels.len(), values.len());
        let labels: Vec<(&str, &str)> = family
            .labels
            .iter()
            .copied()
            .zip(values.iter().copied())
            .collect();
        self.sample_labelled(family, &labels, value);
    }

    fn sample_labelled(
        &mut self,
        family: &Family,
        labels: &[(&str, &str)],
        value: impl std::fmt::Display,
    ) {
        self.text.push_str(&family.sample_name());
        if !labels.is_empty() {
            self.text.push('{');
            for (n, (name, value)) in labels.iter().enumerate() {
                if n > 0 {
                    self.text.push(',');
                }
                self.text.push_str(name);
                self.text.push_str("=\"");
                escape_label_value(value, &mut self.text);
                self.text.push('"');
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// Appends `value` escaped for a quoted label value: `\` `"` and line feed
/// as `\\` `\"` `\n`, the only escapes both formats define.
pub fn escape_label_value(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslash_quote_and_line_feed_only() {
        let mut out = String::new();
        escape_label_value("a\\b\"c\nd\re\tf é", &mut out);
        assert_eq!(out, "a\\\\b\\\"c\\nd\re\tf é");
    }

    #[test]
    fn seconds_keep_milliseconds() {
        assert_eq!(Seconds(1_700_000_000_000).to_string(), "1700000000");
        assert_eq!(Seconds(1_700_000_000_042).to_string(), "1700000000.042");
        assert_eq!(Seconds(-1).to_string(), "-0.001");
        assert_eq!(Seconds(-1_500).to_string(), "-1.500");
    }

    #[test]
    fn names_follow_the_conventions() {
        for family in FAMILIES {
            assert!(family.name.starts_with("dlq_"), "{}", family.name);
            assert!(
                family
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                family.name
            );
            assert!(!family.name.ends_with("_total"), "{}", family.name);
            if let Some(unit) = family.unit {
                assert!(
                    family.name.ends_with(&format!("_{unit}")),
                    "{}",
                    family.name
                );
            }
        }
    }
}
