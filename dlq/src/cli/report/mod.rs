//! `dlq report --html`: one self-contained page (no script, no network)
//! with the statistics, a table of jobs (all-jobs report), the charts of
//! svg.rs, the top pattern groups and similar messages. Everything from the
//! database goes through [`escape`].

mod svg;

use super::Context;
use anyhow::Result;
use dlqlite::store::{Analysis, StatsHead, StatsPart};
use dlqlite::Timestamp;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Write a self-contained HTML report
///
/// No network, inline SVG charts: the statistics, the jobs, failures over
/// time, error types and categories, and the top pattern groups with sample
/// items.
///
/// Example: dlq report --html dlq-report.html --job-id mapreduce-20251123_194253
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Where to write the page
    #[arg(long, value_name = "FILE")]
    html: PathBuf,
    /// Only this job
    #[arg(long)]
    job_id: Option<String>,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    let (head, jobs) = match &args.job_id {
        Some(job) => (dlq.job_head(job)?, Vec::new()),
        None => heads(&dlq)?,
    };
    let analysis = dlq.analyze(args.job_id.as_deref())?;
    let page = render(&head, &jobs, &analysis, dlq.now());
    if args.html.as_os_str() == "-" {
        use std::io::Write;
        std::io::stdout().lock().write_all(page.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    dlqlite::outfile::write_file(&args.html, page.as_bytes())?;
    eprintln!(
        "wrote {}",
        dlqlite::text::for_terminal(&args.html.display().to_string())
    );
    Ok(ExitCode::SUCCESS)
}

/// The figures of all jobs together and of each job (by job id), from one
/// pass of the statistics stream that keeps none of the signatures.
fn heads(dlq: &dlqlite::Dlq) -> Result<(StatsHead, Vec<(String, StatsHead)>)> {
    let mut total = StatsHead::default();
    let mut jobs = Vec::new();
    dlq.stats_stream(None, true, |part| {
        match part {
            StatsPart::Head {
                job_id: Some(job),
                head,
            } => jobs.push((job.to_string(), head.clone())),
            StatsPart::Head { job_id: None, head } => total = head.clone(),
            _ => {}
        }
        Ok(())
    })?;
    Ok((total, jobs))
}

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    // Markup, and control and bidi characters written visibly.
    dlqlite::text::for_html(text)
}

/// A time as every cell of the page shows it: to the second, in UTC.
fn when(t: Timestamp) -> String {
    t.datetime().format("%Y-%m-%d %H:%M:%SZ").to_string()
}

/// An optional time, or a dash.
fn when_or_dash(t: Option<Timestamp>) -> String {
    t.map(when).unwrap_or_else(|| "-".into())
}

/// A message cut to fit a table cell: its most useful line (as terminal
/// tables show it: [`dlqlite::text::headline`]), at most [`MESSAGE_CHARS`]
/// long, with the whole message (within a bound) as a tooltip and an
/// ellipsis when something was left out.
fn message_cell(message: &str) -> String {
    let useful = dlqlite::text::headline(message);
    let mut shown: String = useful.chars().take(MESSAGE_CHARS).collect();
    if shown.len() < message.trim().len() {
        shown.push_str(" …");
    }
    let tooltip: String = message.chars().take(TOOLTIP_CHARS).collect();
    format!(
        r#"<span title="{}">{}</span>"#,
        escape(&tooltip),
        escape(&shown)
    )
}

/// How much of a message a cell shows.
const MESSAGE_CHARS: usize = 300;
/// How much of a message its tooltip holds.
const TOOLTIP_CHARS: usize = 2000;

/// The whole page: `head` is of the job reported on or of all jobs, `jobs`
/// each job's own (none on a one-job report).
fn render(
    head: &StatsHead,
    jobs: &[(String, StatsHead)],
    a: &Analysis,
    generated: Timestamp,
) -> String {
    let mut html = page_head(a.job_id.as_deref().unwrap_or("all jobs"), generated);
    cards(&mut html, head, a);
    if a.job_id.is_none() {
        jobs_table(&mut html, jobs);
    }
    distributions(&mut html, a);
    pattern_groups(&mut html, a);
    html.push_str("<h2>Similar messages</h2>");
    table(
        &mut html,
        &[("Items", NUM), ("Signatures", NUM), ("Pattern", MSG)],
        a.message_groups.iter().map(|g| {
            vec![
                g.count.to_string(),
                g.signatures.to_string(),
                message_cell(&g.pattern),
            ]
        }),
    );
    html.push_str("<h2>Top agents and steps</h2>");
    for (what, ranked) in [("Agent", &a.top_agents), ("Step", &a.top_failing_steps)] {
        if what == "Step" {
            html.push_str("<br>");
        }
        if what == "Agent" && !a.agents_repeat() {
            html.push_str(&format!(
                "<p>Agents: {}.</p>",
                escape(dlqlite::store::AGENTS_DO_NOT_REPEAT)
            ));
            continue;
        }
        table(
            &mut html,
            &[("Failures", NUM), (what, "")],
            ranked
                .iter()
                .map(|r| vec![r.failures.to_string(), escape(&r.name)]),
        );
    }
    html.push_str("</body></html>\n");
    html
}

/// The page up to its first section: title, style, heading.
fn page_head(scope: &str, generated: Timestamp) -> String {
    let scope = escape(scope);
    // Tables are as wide as their content, except those with a message
    // column, which take the page's width and give the message what the
    // other columns leave; times and counts never wrap. A message breaks
    // between words, and inside a word only when one word is wider than
    // the column (`anywhere`, unlike `break-word`, keeps a long URL from
    // widening the table past the page).
    format!(
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>DLQ report: {scope}</title>
<style>
body{{font:14px system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}}
h1{{font-size:1.5em;overflow-wrap:anywhere}} h2{{font-size:1.15em;margin-top:2em}}
.cards{{display:flex;gap:1em;flex-wrap:wrap}} .card{{border:1px solid #ddd;border-radius:6px;padding:.6em 1em}}
.card b{{display:block;font-size:1.4em;white-space:nowrap}}
table{{border-collapse:collapse}} table.wide{{width:100%}}
td,th{{border-bottom:1px solid #eee;padding:.3em .6em;text-align:left;vertical-align:top}}
th{{white-space:nowrap}} td.t{{white-space:nowrap}} td.num{{white-space:nowrap;text-align:right}}
td.msg{{width:100%;min-width:22em;overflow-wrap:anywhere}}
td.id{{overflow-wrap:anywhere;min-width:10em}} code{{font-size:12px}}
.chart text{{font-size:11px;fill:#333}} .chart rect{{fill:#4a7ab8}}
.chart .grid{{stroke:#e6e6e6}} .chart .axis{{stroke:#777}}
</style></head><body>
<h1>Dead letter queue report: {scope}</h1><p>Generated {generated} by dlq.</p>
"#,
        generated = escape(&when(generated))
    )
}

/// The headline figures, one card each.
fn cards(html: &mut String, head: &StatsHead, a: &Analysis) {
    html.push_str(r#"<div class="cards">"#);
    for (label, value) in [
        ("items", head.total_items.to_string()),
        (
            "eligible for reprocess",
            head.eligible_for_reprocess.to_string(),
        ),
        (
            "requiring manual review",
            head.requiring_manual_review.to_string(),
        ),
        ("attempts", a.total_attempts.to_string()),
        (
            "average failure count",
            head.average_failure_count.to_string(),
        ),
        ("oldest item", when_or_dash(head.oldest_item)),
        ("newest item", when_or_dash(head.newest_item)),
    ] {
        let _ = write!(
            html,
            r#"<div class="card"><b>{}</b>{}</div>"#,
            escape(&value),
            escape(label)
        );
    }
    html.push_str("</div>");
}

/// Every job with its counts and the span of its items.
fn jobs_table(html: &mut String, jobs: &[(String, StatsHead)]) {
    html.push_str(r#"<h2>Jobs</h2>"#);
    table(
        html,
        &[
            ("Job", ID),
            ("Items", NUM),
            ("Eligible", NUM),
            ("Manual review", NUM),
            ("Oldest", TIME),
            ("Newest", TIME),
        ],
        jobs.iter().map(|(job, head)| {
            vec![
                escape(job),
                head.total_items.to_string(),
                head.eligible_for_reprocess.to_string(),
                head.requiring_manual_review.to_string(),
                when_or_dash(head.oldest_item),
                when_or_dash(head.newest_item),
            ]
        }),
    );
}

/// Failures over time, error types and failure categories, as charts.
fn distributions(html: &mut String, a: &Analysis) {
    let _ = write!(
        html,
        "<h2>Failures per {} (UTC)</h2>",
        escape(&a.temporal_distribution.bucket)
    );
    html.push_str(&svg::timeline(
        &a.temporal_distribution.bucket,
        &a.temporal_distribution.counts,
    ));
    for (title, counts) in [
        (
            "Error types (all attempts)",
            &a.error_distribution.all_attempts,
        ),
        (
            "Error types (last attempt of each item)",
            &a.error_distribution.last_attempts,
        ),
        ("Failure categories", &a.failure_categories),
    ] {
        let rows: Vec<(String, i64)> = counts.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let _ = write!(html, "<h2>{title}</h2>");
        html.push_str(&svg::bars(&rows));
    }
}

/// The largest pattern groups, with their samples.
fn pattern_groups(html: &mut String, a: &Analysis) {
    html.push_str("<h2>Top pattern groups</h2>");
    table(
        html,
        &[
            ("Items", NUM),
            ("Signature", ID),
            ("Type", ""),
            ("First", TIME),
            ("Last", TIME),
            ("Sample items", ID),
            ("Message", MSG),
        ],
        a.pattern_groups.iter().map(|g| {
            vec![
                g.count.to_string(),
                format!("<code>{}</code>", escape(&g.error_signature)),
                escape(g.error_type.as_deref().unwrap_or("")),
                when_or_dash(g.first_occurrence),
                when_or_dash(g.last_occurrence),
                escape(&g.sample_items.join(", ")),
                message_cell(g.representative_message.as_deref().unwrap_or("")),
            ]
        }),
    );
}

// The classes of table columns (see the page's style).
/// A count: right-aligned, never wrapped.
const NUM: &str = "num";
/// A time: never wrapped.
const TIME: &str = "t";
/// An id from the database: wraps anywhere rather than widen the table.
const ID: &str = "id";
/// A message: takes the remaining width, wraps between words.
const MSG: &str = "msg";

/// A table: `columns` are (header, class), then rows of cells already
/// escaped. A table with a message column takes the whole width.
fn table(html: &mut String, columns: &[(&str, &str)], rows: impl Iterator<Item = Vec<String>>) {
    let wide = columns.iter().any(|(_, class)| *class == MSG);
    html.push_str(if wide {
        r#"<table class="wide"><tr>"#
    } else {
        "<table><tr>"
    });
    for (header, _) in columns {
        let _ = write!(html, "<th>{}</th>", escape(header));
    }
    html.push_str("</tr>");
    for row in rows {
        html.push_str("<tr>");
        for (cell, (_, class)) in row.iter().zip(columns) {
            if class.is_empty() {
                let _ = write!(html, "<td>{cell}</td>");
            } else {
                let _ = write!(html, r#"<td class="{class}">{cell}</td>"#);
            }
        }
        html.push_str("</tr>");
    }
    html.push_str("</table>");
}
