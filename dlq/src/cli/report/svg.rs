//! The inline SVG charts of `dlq report`: horizontal bars of counts by name,
//! and attempts per hour or day on a time axis. No script and no external
//! reference; every label from the database goes through [`escape`].

use super::escape;
use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};
use dlqlite::Timestamp;
use std::fmt::Write as _;

/// A horizontal bar chart as inline SVG.
pub fn bars(rows: &[(String, i64)]) -> String {
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

// The time chart's frame: the plot sits inside these margins, which hold
// the axis labels.
const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 34.0;
/// Room between the y axis and the first bar, and after the last.
const PAD: f64 = 8.0;
/// The narrowest bar: a day in a chart of years is a pixel wide, too thin
/// to see, so bars of close buckets may overlap instead.
const MIN_BAR: f64 = 3.0;
/// At most this many labelled ticks on the time axis (more would overlap).
const MAX_TIME_TICKS: usize = 8;
/// At most this many labelled counts on the y axis.
const MAX_COUNT_TICKS: i64 = 5;

/// Where a bucket of `analyze`'s temporal distribution starts: `hour`
/// buckets are `2025-11-23T19`, `day` buckets `2025-11-23`.
fn bucket_start(bucket: &str, kind: &str) -> Option<DateTime<Utc>> {
    let text = if kind == "hour" {
        format!("{bucket}:00:00Z")
    } else {
        format!("{bucket}T00:00:00Z")
    };
    Timestamp::parse(&text).ok().map(|t| t.datetime())
}

/// Attempts per bucket (`kind` is `hour` or `day`) as columns on a time
/// axis: a bar's x is linear in its bucket's start between the first
/// bucket and the end of the last, so a gap of months shows as one; the
/// y axis counts from 0 at the bottom.
pub fn timeline(kind: &str, rows: &[(String, i64)]) -> String {
    let bucket_len = if kind == "hour" {
        Duration::hours(1)
    } else {
        Duration::days(1)
    };
    // analyze writes every bucket from a stored timestamp, so all parse; one
    // that did not would have no place on the axis and is left out.
    let mut points: Vec<(DateTime<Utc>, &str, i64)> = rows
        .iter()
        .filter_map(|(b, n)| bucket_start(b, kind).map(|t| (t, b.as_str(), *n)))
        .collect();
    points.sort_by_key(|p| p.0);
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return "<p>No attempts.</p>".into();
    };
    let (start, end) = (first.0, last.0 + bucket_len);
    let span = (end - start).num_seconds().max(1) as f64;
    let plot_w = WIDTH - LEFT - RIGHT - 2.0 * PAD;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x_of = |t: DateTime<Utc>| LEFT + PAD + (t - start).num_seconds() as f64 / span * plot_w;
    let max = points.iter().map(|p| p.2).max().unwrap_or(0);
    let (top, step) = count_scale(max);
    let y_of = |n: i64| TOP + plot_h - n as f64 / top as f64 * plot_h;

    let mut svg = format!(
        r#"<svg class="chart timeline" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">"#
    );
    // The y axis: gridlines and counts, 0 at the bottom.
    for k in 0..=top / step {
        let n = k * step;
        let y = y_of(n);
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{x2}" y2="{y:.1}"/><text class="ytick" x="{tx}" y="{ty:.1}" text-anchor="end">{n}</text>"#,
            x2 = WIDTH - RIGHT,
            tx = LEFT - 6.0,
            ty = y + 4.0,
        );
    }
    let _ = write!(
        svg,
        r#"<text class="ylabel" transform="translate(14 {cy:.1}) rotate(-90)" text-anchor="middle">attempts per {kind}</text>"#,
        cy = TOP + plot_h / 2.0,
        kind = escape(kind),
    );
    // The bars: as wide as their bucket on this scale, within limits that
    // keep a lone bucket from filling the chart and a thin one visible; the
    // offset into the bucket is the same for every bar.
    let slot = bucket_len.num_seconds() as f64 / span * plot_w;
    let bar_w = (slot * 0.8).clamp(MIN_BAR, 40.0);
    let inset = (slot - bar_w) / 2.0;
    for (t, bucket, n) in &points {
        let y = y_of(*n);
        let _ = write!(
            svg,
            r#"<rect class="bucket" data-start="{b}" x="{x:.2}" y="{y:.1}" width="{bar_w:.2}" height="{h:.1}"><title>{label}: {n}</title></rect>"#,
            b = escape(bucket),
            x = x_of(*t) + inset,
            h = TOP + plot_h - y,
            label = escape(&bucket_label(*t, kind)),
        );
    }
    // The axes, drawn over the bars' feet.
    let base = TOP + plot_h;
    let _ = write!(
        svg,
        r#"<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}"/><line class="axis" x1="{LEFT}" y1="{base}" x2="{x2}" y2="{base}"/>"#,
        x2 = WIDTH - RIGHT,
    );
    for (t, label) in time_ticks(start, end, kind) {
        let x = x_of(t);
        // Labels at the edges are anchored inward so they stay on the page.
        let anchor = if x < LEFT + 40.0 {
            "start"
        } else if x > WIDTH - RIGHT - 40.0 {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            svg,
            r#"<line class="axis" x1="{x:.1}" y1="{base}" x2="{x:.1}" y2="{y2}"/><text class="xtick" x="{x:.1}" y="{ty}" text-anchor="{anchor}">{label}</text>"#,
            y2 = base + 4.0,
            ty = base + 17.0,
            label = escape(&label),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// How a bucket is named in its tooltip.
fn bucket_label(t: DateTime<Utc>, kind: &str) -> String {
    if kind == "hour" {
        t.format("%Y-%m-%d %H:00Z").to_string()
    } else {
        t.format("%Y-%m-%d").to_string()
    }
}

/// The top of the count axis and the step between its labels: a 1, 2 or 5
/// times a power of ten, the smallest giving at most [`MAX_COUNT_TICKS`]
/// steps up to the largest count.
fn count_scale(max: i64) -> (i64, i64) {
    let max = max.max(1);
    let mut power = 1i64;
    loop {
        for m in [1, 2, 5] {
            let step = m * power;
            let steps = (max + step - 1) / step;
            if steps <= MAX_COUNT_TICKS {
                return (steps * step, step);
            }
        }
        power = power.saturating_mul(10);
    }
}

/// The distance between two labelled ticks of the time axis.
#[derive(Clone, Copy)]
enum TimeStep {
    Hours(i64),
    Days(i64),
    Months(i32),
}

/// Round instants between `start` and `end` to label the time axis with:
/// the finest of hours, days, weeks, months and years that gives at most
/// [`MAX_TIME_TICKS`], and their labels.
fn time_ticks(
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    kind: &str,
) -> Vec<(DateTime<Utc>, String)> {
    use TimeStep::*;
    let hourly = [Hours(1), Hours(2), Hours(3), Hours(6), Hours(12)];
    let coarser = [
        Days(1),
        Days(2),
        Days(7),
        Days(14),
        Months(1),
        Months(2),
        Months(3),
        Months(6),
        Months(12),
        Months(24),
        Months(60),
        Months(120),
        Months(600),
        Months(1200),
        Months(6000),
        Months(12000),
    ];
    // Day buckets start at midnight: ticks between midnights mean nothing.
    let steps = if kind == "hour" {
        hourly.iter().chain(coarser.iter())
    } else {
        [].iter().chain(coarser.iter())
    };
    let mut best = Vec::new();
    for step in steps {
        let ticks = ticks_every(*step, start, end);
        if ticks.len() <= MAX_TIME_TICKS {
            let format = match step {
                Hours(_) => "%m-%d %H:00",
                Days(_) => "%Y-%m-%d",
                Months(_) => "%Y-%m",
            };
            return ticks
                .into_iter()
                .map(|t| (t, t.format(format).to_string()))
                .collect();
        }
        best = ticks;
    }
    // Not reached for years 0000-9999 (the coarsest step is 1000 years).
    best.truncate(MAX_TIME_TICKS);
    best.into_iter()
        .map(|t| (t, t.format("%Y").to_string()))
        .collect()
}

/// The instants in `start..=end` that are whole multiples of `step`: hours
/// and days counted from the Unix epoch, months from year 0.
fn ticks_every(step: TimeStep, start: DateTime<Utc>, end: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let mut ticks = Vec::new();
    let seconds = match step {
        TimeStep::Hours(n) => Some(n * 3600),
        TimeStep::Days(n) => Some(n * 86_400),
        TimeStep::Months(_) => None,
    };
    if let Some(every) = seconds {
        let first = start.timestamp().div_euclid(every) * every;
        let mut t = if first < start.timestamp() {
            first + every
        } else {
            first
        };
        while t <= end.timestamp() && ticks.len() <= MAX_TIME_TICKS {
            if let Some(tick) = DateTime::from_timestamp(t, 0) {
                ticks.push(tick);
            }
            t += every;
        }
        return ticks;
    }
    let TimeStep::Months(every) = step else {
        return ticks;
    };
    // Months since year 0, rounded up to a multiple of the step.
    let mut month = start.year() * 12 + start.month0() as i32;
    let first_of = |m: i32| {
        Utc.with_ymd_and_hms(m.div_euclid(12), m.rem_euclid(12) as u32 + 1, 1, 0, 0, 0)
            .single()
    };
    if first_of(month).is_some_and(|t| t < start) {
        month += 1;
    }
    month += (every - month.rem_euclid(every)) % every;
    while let Some(t) = first_of(month) {
        if t > end || ticks.len() > MAX_TIME_TICKS {
            break;
        }
        ticks.push(t);
        month += every;
    }
    ticks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        Timestamp::parse(text).unwrap().datetime()
    }

    #[test]
    fn count_axis_steps_are_round_and_cover_the_largest_count() {
        assert_eq!(count_scale(0), (1, 1));
        assert_eq!(count_scale(5), (5, 1));
        assert_eq!(count_scale(6), (6, 2));
        assert_eq!(count_scale(23), (25, 5));
        assert_eq!(count_scale(1234), (1500, 500));
    }

    #[test]
    fn time_ticks_are_round_and_few() {
        let months = time_ticks(
            at("2024-06-01T00:00:00Z"),
            at("2025-11-24T00:00:00Z"),
            "day",
        );
        let labels: Vec<&str> = months.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(
            labels,
            ["2024-07", "2024-10", "2025-01", "2025-04", "2025-07", "2025-10"]
        );
        let hours = time_ticks(
            at("2025-11-23T19:00:00Z"),
            at("2025-11-24T02:00:00Z"),
            "hour",
        );
        assert_eq!(hours.first().unwrap().1, "11-23 19:00");
        assert!(hours.len() <= MAX_TIME_TICKS && hours.len() >= 3);
        let days = time_ticks(
            at("2025-11-01T00:00:00Z"),
            at("2025-11-06T00:00:00Z"),
            "day",
        );
        assert_eq!(days.len(), 6);
        assert_eq!(days[0].1, "2025-11-01");
    }
}
