//! What takes the whole database to compute (pattern analysis, items per
//! day) is computed off the request path and kept per scope (a job or all)
//! until the audit log moves on: a page answers at once with the newest
//! figures and says how old they are, while a thread computes the next.
//! Owns the Patterns page (failure families first, then `dlq analyze`'s
//! groups) and the arrivals chart of the Overview.

use super::app::{query, App, PageError, Params, Shared};
use super::pages::{
    brief, calendar, day_chart, job_select, plural, quoted, render, search_link, t, time, Tab,
    ACTIONS, CELL_CHARS,
};
use axum::extract::State;
use axum::response::Html;
use dlqlite::store::{Analysis, Families};
use dlqlite::Timestamp;
use maud::{html, Markup};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Scopes kept at once (each holds one analysis: top groups, bounded).
const SCOPES: usize = 32;

/// How long a request waits for a first computation before answering
/// "computing" (small databases finish within it).
const FIRST_WAIT: Duration = Duration::from_millis(60);

/// Families the Patterns page (and `/api/analyze`) lists; the rest are
/// counted in one line.
pub const FAMILIES_SHOWN: usize = 50;

/// One scope's figures.
#[derive(Clone)]
pub struct Figures {
    pub analysis: Arc<Analysis>,
    /// The largest [`FAMILIES_SHOWN`] families of the scope.
    pub families: Arc<Families>,
    pub per_day: Arc<Vec<(String, i64)>>,
    /// The newest event when they were computed.
    pub version: i64,
    pub computed_at: Timestamp,
}

#[derive(Default)]
struct Entry {
    figures: Option<Figures>,
    computing: bool,
    error: Option<String>,
    used: Option<Instant>,
}

/// The figures of each scope, and which are being computed.
#[derive(Default)]
pub struct Cache {
    entries: Mutex<HashMap<Option<String>, Entry>>,
}

/// What a page gets: the newest figures, whether they are behind the
/// database, and a computation's failure.
pub struct Snapshot {
    pub figures: Option<Figures>,
    pub stale: bool,
    pub error: Option<String>,
}

/// The figures of `scope`, starting a computation when they are missing
/// or behind the audit log.
pub fn figures(app: &Shared, scope: Option<&str>) -> Snapshot {
    let version = app.dlq.last_event_id().unwrap_or(-1);
    let key = scope.map(str::to_string);
    let start = {
        let Ok(mut entries) = app.insight.entries.lock() else {
            return Snapshot {
                figures: None,
                stale: true,
                error: Some("internal error".into()),
            };
        };
        if entries.len() >= SCOPES && !entries.contains_key(&key) {
            // Forget the scope used longest ago (not one being computed).
            if let Some(oldest) = entries
                .iter()
                .filter(|(_, e)| !e.computing)
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            {
                entries.remove(&oldest);
            }
        }
        let entry = entries.entry(key.clone()).or_default();
        entry.used = Some(Instant::now());
        let behind = entry.figures.as_ref().is_none_or(|f| f.version != version);
        let start = behind && !entry.computing;
        if start {
            entry.computing = true;
        }
        start
    };
    if start {
        let app = Arc::clone(app);
        let key = key.clone();
        std::thread::spawn(move || compute(&app, key, version));
    }
    let deadline = Instant::now() + FIRST_WAIT;
    loop {
        let snapshot = {
            let Ok(entries) = app.insight.entries.lock() else {
                return Snapshot {
                    figures: None,
                    stale: true,
                    error: Some("internal error".into()),
                };
            };
            let entry = entries.get(&key);
            Snapshot {
                figures: entry.and_then(|e| e.figures.clone()),
                stale: entry
                    .is_none_or(|e| e.figures.as_ref().is_none_or(|f| f.version != version)),
                error: entry.and_then(|e| e.error.clone()),
            }
        };
        if !snapshot.stale || snapshot.error.is_some() || Instant::now() >= deadline {
            return snapshot;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn compute(app: &App, key: Option<String>, version: i64) {
    let scope = key.as_deref();
    let result = app.dlq.analyze(scope).and_then(|analysis| {
        Ok((
            analysis,
            app.dlq.families_in(scope, Some(FAMILIES_SHOWN))?,
            app.dlq.items_per_day(scope)?,
        ))
    });
    if let Ok(mut entries) = app.insight.entries.lock() {
        let entry = entries.entry(key).or_default();
        entry.computing = false;
        match result {
            Ok((analysis, families, per_day)) => {
                entry.error = None;
                entry.figures = Some(Figures {
                    analysis: Arc::new(analysis),
                    families: Arc::new(families),
                    per_day: Arc::new(per_day),
                    version,
                    computed_at: app.dlq.now(),
                });
            }
            Err(e) => entry.error = Some(e.to_string()),
        }
    }
}

/// "as of 12:00:03, updating" when the figures are behind.
fn freshness(snapshot: &Snapshot) -> Markup {
    html! {
        @if let Some(error) = &snapshot.error {
            p.error { "could not compute: " (t(error)) }
        }
        @match (&snapshot.figures, snapshot.stale) {
            (None, _) => p.hint #computing { "Computing… this page fills in when it is done." },
            (Some(f), true) => p.hint { "As of " (time(&f.computed_at)) "; newer figures are being computed." },
            (Some(_), false) => {},
        }
    }
}

/// Days the Overview's chart shows.
const CHART_DAYS: i64 = 60;

/// The Overview's chart: items per day of first failure over the 60 days
/// up to today ("now" for ages: `--now`), and how many items are older.
pub fn arrivals(app: &Shared, scope: Option<&str>) -> Markup {
    let snapshot = figures(app, scope);
    let today = chrono::NaiveDate::parse_from_str(
        app.dlq.age_now().to_string().get(..10).unwrap_or(""),
        "%Y-%m-%d",
    )
    .ok();
    let (days, earlier) = snapshot
        .figures
        .as_ref()
        .map(|f| calendar(&f.per_day, today, CHART_DAYS))
        .unwrap_or_default();
    let newest = snapshot
        .figures
        .as_ref()
        .and_then(|f| f.per_day.last().map(|(day, _)| day.clone()));
    let recent: i64 = days.iter().map(|(_, n)| n).sum();
    html! {
        (freshness(&snapshot))
        @if snapshot.figures.is_some() {
            @if recent == 0 {
                p.hint { "No new dead letters in the last 60 days"
                    @if let Some(day) = &newest { " (the newest first failed on " (t(day)) ")" } "." }
            } @else {
                (day_chart(&days, "new dead letters per day"))
            }
            @if earlier > 0 && recent > 0 { p.hint { (earlier) " items first failed before " (t(days.first().map(|d| d.0.as_str()).unwrap_or(""))) "." } }
        }
    }
}

/// `GET /patterns?job=J`: the analysis, each group linking to its items.
pub async fn patterns(
    State(app): State<Shared>,
    params: Params,
) -> Result<Html<String>, PageError> {
    let job = params.get("job").map(str::to_string);
    // What an action on a family did, after its confirmation came back here.
    let note = params.get("note").map(str::to_string);
    let shared = app.clone();
    Ok(render(&app, "Patterns", Tab::Patterns, note, move |app| {
        if let Some(job) = &job {
            app.dlq.require_job(job)?;
        }
        let snapshot = figures(&shared, job.as_deref());
        let scope = job.as_deref();
        Ok(html! {
            h1 { "Patterns" @if let Some(job) = scope { " of " (t(job)) } }
            form.search method="get" action="/patterns" {
                (job_select(app, scope))
                button type="submit" { "Show" }
            }
            (freshness(&snapshot))
            @if let Some(figures) = &snapshot.figures {
                (families(app, scope, &figures.families, &figures.analysis))
                (analysis(scope, &figures.analysis))
            }
        })
    })
    .await?)
}

/// Attempts over time as a chart shows them: per day, every day from the
/// first to the last (at most a year back from the last), days without
/// attempts as 0; per hour as analyze gives them.
fn over_time(t: &dlqlite::store::TemporalDistribution) -> (Vec<(String, i64)>, i64) {
    let parse = |d: &str| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok();
    let ends = (
        t.counts.first().and_then(|(d, _)| parse(d)),
        t.counts.last().and_then(|(d, _)| parse(d)),
    );
    match (t.bucket.as_str(), ends) {
        ("day", (Some(first), Some(last))) => {
            let span = ((last - first).num_days() + 1).clamp(1, 366);
            calendar(&t.counts, Some(last), span)
        }
        _ => (t.counts.clone(), 0),
    }
}

/// "3 items" of a count from the database.
fn count(n: i64, one: &str) -> String {
    plural(u64::try_from(n).unwrap_or(0), one)
}

/// A template as a cell shows it: its first [`CELL_CHARS`] characters,
/// escaped, each variable slot (`<*>`) in a `span.slot`.
fn template(text: &str) -> Markup {
    let line = dlqlite::text::headline(text);
    let (shown, cut) = match line.char_indices().nth(CELL_CHARS) {
        Some((at, _)) => (&line[..at], true),
        None => (line, false),
    };
    let mut parts = shown.split("<*>");
    let first = parts.next().unwrap_or("");
    html! {
        (t(first))
        @for part in parts { span.slot title="varies between the family's failures" { "<*>" } (t(part)) }
        @if cut { "…" }
    }
}

/// The failure families of the scope, largest first: each with its
/// template, a link to its items and the bulk actions on all of them (the
/// items page's "All N matching" flow: counted, confirmed, then done on
/// exactly the rows counted).
fn families(app: &App, scope: Option<&str>, f: &Families, a: &Analysis) -> Markup {
    let back = format!("/patterns{}", query(&[("job", scope)]));
    let actions = ACTIONS
        .iter()
        .filter(|(code, _)| *code != "retry" || app.exec.is_some());
    html! {
        h2 { "Failure families" }
        p.hint { "One row per cause: the items whose last attempt has the same error type, crash site and error line, "
            span.slot { "<*>" } " where their failures differ. First and last seen are the family's, in every job." }
        table.families {
            thead { tr {
                th.num { "items" } th.num { "family" } th { "template" } th { "error type" } th { "category" }
                th { "first seen" br; "last seen" }
                @if !app.read_only { th { "on all its items" } }
            } }
            tbody {
                @for family in &f.families {
                    @let filter = format!("family == {}", family.id);
                    @let error_type = family.error_type.as_deref().unwrap_or("-");
                    @let category = family.error_type.as_deref()
                        .and_then(|e| a.error_distribution.categories.get(e))
                        .map(|c| c.as_str()).unwrap_or("unclassified");
                    tr.family data-family=(family.id) {
                        td.num { a.family-items href=(search_link(scope, &filter)) { (family.items) } }
                        td.num { (family.id) }
                        td.msg.template { code { (template(&family.template)) } }
                        td { span class=(format!("cat {category}")) { (t(error_type)) } }
                        td { (category) }
                        td.time { (time(&family.first_seen)) br; (time(&family.last_seen)) }
                        @if !app.read_only {
                            td {
                                form.row-action method="post" action="/action" {
                                    input type="hidden" name="csrf" value=(app.csrf);
                                    input type="hidden" name="back" value=(back);
                                    @if let Some(job) = scope { input type="hidden" name="job" value=(job); }
                                    input type="hidden" name="q" value=(filter);
                                    select name="do" aria-label="action" {
                                        @for (code, label) in actions.clone() {
                                            option value=(format!("{code}:all")) { (label) }
                                        }
                                    }
                                    button type="submit" title="counts the family's items and asks first" { "Apply…" }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if f.families.is_empty() { p.hint { "No families: no item has one yet." } }
        @if f.more_families > 0 {
            p.hint #families-more { (count(f.more_items, "item")) " in " (f.more_families) @if f.more_families == 1 { " smaller family" } @else { " smaller families" } " not shown (" code { "dlq families --limit 0" } " lists all)." }
        }
        @if f.items_without_family > 0 {
            p.hint #families-without { (count(f.items_without_family, "item")) " without a family (stored before families, or with no attempt): "
                code { "dlq families rebuild" } " mines them." }
        }
        p.hint #families-total { (count(f.total_items, "item")) " in all." }
    }
}

fn analysis(scope: Option<&str>, a: &Analysis) -> Markup {
    let link = |filter: String| search_link(scope, &filter);
    html! {
        p { (plural(u64::try_from(a.total_items).unwrap_or(0), "item")) ", " (plural(u64::try_from(a.total_attempts).unwrap_or(0), "attempt")) }
        h2 { "Pattern groups (by error signature)" }
        table {
            thead { tr { th.num { "items" } th { "error type" } th { "representative message" } th { "first" } th { "last" } th { "signature" } } }
            tbody {
                @for group in &a.pattern_groups {
                    tr {
                        td.num { a href=(link(format!("error_signature == {}", quoted(&group.error_signature)))) { (group.count) } }
                        td { (t(group.error_type.as_deref().unwrap_or("-"))) }
                        td.msg { (brief(group.representative_message.as_deref().unwrap_or(""))) }
                        td.time { (group.first_occurrence.map(|x| time(&x)).unwrap_or_default()) }
                        td.time { (group.last_occurrence.map(|x| time(&x)).unwrap_or_default()) }
                        td { code { (brief(&group.error_signature)) } }
                    }
                }
            }
        }
        @if a.pattern_groups_omitted.groups > 0 {
            p.hint { (a.pattern_groups_omitted.groups) " more signatures with " (a.pattern_groups_omitted.items) " items" }
        }
        h2 { "Message groups" }
        table {
            thead { tr { th.num { "items" } th.num { "signatures" } th { "pattern" } th { "sample" } } }
            tbody {
                @for group in &a.message_groups {
                    @let filter = group.sample_signatures.iter().map(|s| format!("error_signature == {}", quoted(s))).collect::<Vec<_>>().join(" || ");
                    tr {
                        td.num {
                            @if filter.is_empty() { (group.count) } @else { a href=(link(filter.clone())) { (group.count) } }
                            @if group.signatures > group.sample_signatures.len() { span.hint { " (link: " (group.sample_signatures.len()) " of " (group.signatures) " signatures)" } }
                        }
                        td.num { (group.signatures) }
                        td.msg { code { (brief(&group.pattern)) } }
                        td.msg { (brief(&group.sample_message)) }
                    }
                }
            }
        }
        @if a.message_groups_omitted.groups > 0 {
            p.hint { (a.message_groups_omitted.groups) " more groups with " (a.message_groups_omitted.items) " items" }
        }
        h2 { "Error types" }
        table.compact {
            thead { tr { th { "error type" } th { "category" } th.num { "items (last attempt)" } th.num { "attempts (any)" } } }
            tbody {
                @for (name, n) in &a.error_distribution.all_attempts {
                    @let category = a.error_distribution.categories.get(name).map(|c| c.as_str()).unwrap_or("unclassified");
                    tr {
                        td { span class=(format!("cat {category}")) { (t(name)) } }
                        td { (category) }
                        td.num { a href=(link(format!("last.error_type == {}", quoted(name)))) { (a.error_distribution.last_attempts.get(name).copied().unwrap_or(0)) } }
                        td.num { a href=(link(format!("error_type == {}", quoted(name)))) title="the items with an attempt of this type" { (n) } }
                    }
                }
            }
        }
        h2 { "Failure categories" }
        table.compact {
            tbody {
                @for (category, n) in &a.failure_categories {
                    tr { td { a class=(format!("cat {category}")) href=(link(format!("category == {}", quoted(category)))) { (t(category)) } } td.num { (n) } }
                }
            }
        }
        h2 { "Failures over time (attempts per " (t(&a.temporal_distribution.bucket)) ")" }
        @let (buckets, earlier) = over_time(&a.temporal_distribution);
        (day_chart(&buckets, &format!("attempts per {}", a.temporal_distribution.bucket)))
        @if earlier > 0 { p.hint { (earlier) " attempts before " (t(buckets.first().map(|d| d.0.as_str()).unwrap_or(""))) " not shown." } }
        div.two {
            div {
                h2 { "Top agents (failed attempts)" }
                @if a.agents_repeat() {
                    table.compact { tbody { @for r in &a.top_agents {
                        tr { td { a href=(link(format!("agent_id == {}", quoted(&r.name)))) { (t(&r.name)) } } td.num { (r.failures) } }
                    } } }
                } @else {
                    p.hint { (dlqlite::store::AGENTS_DO_NOT_REPEAT) }
                }
            }
            div {
                h2 { "Top failing steps (failed attempts)" }
                table.compact { tbody { @for r in &a.top_failing_steps {
                    tr { td { a href=(link(format!("step_failed == {}", quoted(&r.name)))) { (t(&r.name)) } } td.num { (r.failures) } }
                } } }
            }
        }
    }
}
