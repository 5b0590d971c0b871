//! `dlq report --html`: one self-contained page with charts.

use super::Context;
use anyhow::Result;
use dlqlite::store::{Analysis, Stats};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Write a self-contained HTML report
///
/// No network, inline SVG charts: the statistics, failures over time, error
/// types and categories, and the top pattern groups with sample items.
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
    let stats = match &args.job_id {
        Some(job) => dlq.job_stats(job)?,
        None => dlq.stats()?.0,
    };
    let analysis = dlq.analyze(args.job_id.as_deref())?;
    let page = render(&stats, &analysis, &dlq.now().to_string());
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

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    // Markup, and control and bidi characters written visibly.
    dlqlite::text::for_html(text)
}

/// A horizontal bar chart as inline SVG.
fn bars(rows: &[(String, i64)]) -> String {
    let max = rows.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let height = 22 * rows.len().max(1) + 4;
    let mut svg = format!(
        r#"<svg class="chart" viewBox="0 0 640 {height}" width="640" height="{height}" role="img">"#
    );
    for (i, (label, value)) in rows.iter().enumerate() {
        let y = 4 + i * 22;
        let width = (*value as f64 / max as f64 * 400.0).max(1.0);
        let _ = write!(
            svg,
            r#"<text x="0" y="{ty}">{label}</text><rect x="200" y="{y}" width="{width:.1}" height="16"/><text x="{tx:.1}" y="{ty}">{value}</text>"#,
            ty = y + 13,
            label = escape(&label.chars().take(28).collect::<String>()),
            tx = 205.0 + width,
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A column chart over time as inline SVG.
fn columns(rows: &[(String, i64)]) -> String {
    if rows.is_empty() {
        return "<p>No attempts.</p>".into();
    }
    let max = rows.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let (width, height) = (900.0, 220.0);
    let step = width / rows.len() as f64;
    let mut svg = format!(
        r#"<svg class="chart" viewBox="0 0 {width} {h}" width="{width}" height="{h}" role="img">"#,
        h = height + 40.0
    );
    let label_every = (rows.len() / 8).max(1);
    for (i, (bucket, value)) in rows.iter().enumerate() {
        let bar = *value as f64 / max as f64 * height;
        let x = i as f64 * step;
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{bar:.1}"><title>{b}: {value}</title></rect>"#,
            y = height - bar,
            w = (step * 0.85).max(1.0),
            b = escape(bucket),
        );
        if i % label_every == 0 {
            let _ = write!(
                svg,
                r#"<text x="{x:.1}" y="{ty}">{b}</text>"#,
                ty = height + 16.0,
                b = escape(bucket)
            );
        }
    }
    let _ = write!(
        svg,
        r#"<text x="0" y="{ty}">max {max} per bucket</text></svg>"#,
        ty = height + 34.0
    );
    svg
}

/// The whole page.
pub fn render(stats: &Stats, a: &Analysis, generated: &str) -> String {
    let mut html = head(a.job_id.as_deref().unwrap_or("all jobs"), generated);
    cards(&mut html, stats, a);
    distributions(&mut html, a);
    pattern_groups(&mut html, a);
    let _ = write!(html, "<h2>Similar messages</h2>");
    table(
        &mut html,
        &["Items", "Signatures", "Pattern"],
        a.message_groups.iter().map(|g| {
            vec![
                g.count.to_string(),
                g.signatures.to_string(),
                escape(&g.pattern),
            ]
        }),
    );
    html.push_str("<h2>Top agents and steps</h2>");
    for (what, ranked) in [("Agent", &a.top_agents), ("Step", &a.top_failing_steps)] {
        if what == "Step" {
            html.push_str("<br>");
        }
        table(
            &mut html,
            &["Failures", what],
            ranked
                .iter()
                .map(|r| vec![r.failures.to_string(), escape(&r.name)]),
        );
    }
    html.push_str("</body></html>\n");
    html
}

/// The page up to its first section: title, style, heading.
fn head(scope: &str, generated: &str) -> String {
    let scope = escape(scope);
    format!(
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>DLQ report: {scope}</title>
<style>
body{{font:14px system-ui,sans-serif;margin:2em;color:#222;max-width:1000px}}
h1{{font-size:1.5em}} h2{{font-size:1.15em;margin-top:2em}}
.cards{{display:flex;gap:1em;flex-wrap:wrap}} .card{{border:1px solid #ddd;border-radius:6px;padding:.6em 1em}}
.card b{{display:block;font-size:1.4em}}
table{{border-collapse:collapse}} td,th{{border-bottom:1px solid #eee;padding:.3em .6em;text-align:left;vertical-align:top}}
.chart text{{font-size:11px;fill:#333}} .chart rect{{fill:#4a7ab8}} code{{font-size:12px}}
</style></head><body>
<h1>Dead letter queue report: {scope}</h1><p>Generated {generated} by dlq.</p>
"#,
        generated = escape(generated)
    )
}

/// The headline figures, one card each.
fn cards(html: &mut String, stats: &Stats, a: &Analysis) {
    let time =
        |t: Option<dlqlite::Timestamp>| t.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
    html.push_str(r#"<div class="cards">"#);
    for (label, value) in [
        ("items", stats.total_items.to_string()),
        (
            "eligible for reprocess",
            stats.eligible_for_reprocess.to_string(),
        ),
        (
            "requiring manual review",
            stats.requiring_manual_review.to_string(),
        ),
        ("attempts", a.total_attempts.to_string()),
        (
            "average failure count",
            stats.average_failure_count.to_string(),
        ),
        ("oldest item", time(stats.oldest_item)),
        ("newest item", time(stats.newest_item)),
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

/// Failures over time, error types and failure categories, as charts.
fn distributions(html: &mut String, a: &Analysis) {
    let _ = write!(
        html,
        "<h2>Failures per {}</h2>",
        escape(&a.temporal_distribution.bucket)
    );
    html.push_str(&columns(&a.temporal_distribution.counts));
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
        html.push_str(&bars(&rows));
    }
}

/// The largest pattern groups, with their samples.
fn pattern_groups(html: &mut String, a: &Analysis) {
    html.push_str("<h2>Top pattern groups</h2>");
    let time = |t: Option<dlqlite::Timestamp>| t.map(|t| t.to_string()).unwrap_or_default();
    table(
        html,
        &[
            "Items",
            "Signature",
            "Type",
            "First",
            "Last",
            "Sample items",
            "Message",
        ],
        a.pattern_groups.iter().map(|g| {
            vec![
                g.count.to_string(),
                format!("<code>{}</code>", escape(&g.error_signature)),
                escape(g.error_type.as_deref().unwrap_or("")),
                time(g.first_occurrence),
                time(g.last_occurrence),
                escape(&g.sample_items.join(", ")),
                escape(g.representative_message.as_deref().unwrap_or("")),
            ]
        }),
    );
}

/// A table: `headers`, then rows of cells already escaped.
fn table(html: &mut String, headers: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    html.push_str("<table><tr>");
    for header in headers {
        let _ = write!(html, "<th>{}</th>", escape(header));
    }
    html.push_str("</tr>");
    for row in rows {
        html.push_str("<tr>");
        for cell in row {
            let _ = write!(html, "<td>{cell}</td>");
        }
        html.push_str("</tr>");
    }
    html.push_str("</table>");
}
