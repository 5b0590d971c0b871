//! The pages every visit starts from: the layout, Overview, Items (search,
//! sort, keyset paging, selection), Item (everything about one item), the
//! confirmation of an action and the error page, plus the embedded CSS and
//! script. Every piece of database text goes through [`t`]: HTML-escaped by
//! maud, with control, bidi and invisible characters shown as escapes.

use super::actions::{Action, Items, Outcome, Plan};
use super::app::{blocking, query, App, Failure, PageError, Params, Shared};
use super::insight;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use dlqlite::store::{Event, EventQuery, ItemSummary, ListFilter, PageCursor, SortBy};
use dlqlite::{Category, Timestamp};
use maud::{html, Markup, PreEscaped, DOCTYPE};

/// Rows on a page of items.
pub const PAGE: usize = 50;

/// Database text for a page: escaped for HTML, with unsafe characters
/// (controls, bidi, invisible) written visibly.
pub fn t(text: &str) -> PreEscaped<String> {
    PreEscaped(dlqlite::text::for_html(text))
}

/// The characters a table cell shows of a message, a pattern or a detail
/// (the item page shows them whole): a megabyte of error text in one row
/// would stop a browser from laying out the page.
pub const CELL_CHARS: usize = 300;

/// A table cell's text: the first line, at most [`CELL_CHARS`] characters
/// (then "…"), escaped as [`t`] does.
pub fn brief(text: &str) -> PreEscaped<String> {
    let line = dlqlite::text::headline(text);
    match line.char_indices().nth(CELL_CHARS) {
        Some((cut, _)) => PreEscaped(format!("{}…", dlqlite::text::for_html(&line[..cut]))),
        None => t(line),
    }
}

/// A time as the CLI's tables show it: to the second, UTC.
pub fn time(at: &Timestamp) -> String {
    let text = at.to_string();
    match (text.get(..10), text.get(11..19)) {
        (Some(day), Some(clock)) => format!("{day} {clock}"),
        _ => text,
    }
}

pub fn plural(n: impl Into<u64>, one: &str) -> String {
    let n = n.into();
    format!("{n} {one}{}", if n == 1 { "" } else { "s" })
}

/// Which tab is lit.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Overview,
    Items,
    Patterns,
    Events,
    Runs,
    None,
}

/// A page: `content` computed on the blocking pool with the newest event
/// (what the live script compares), in the frame of [`layout`]. Every page
/// goes through here, so no database call runs on the server's own thread
/// (where one waiting for a connection would stall every request).
pub async fn render(
    app: &Shared,
    title: &'static str,
    tab: Tab,
    note: Option<String>,
    content: impl FnOnce(&App) -> Result<Markup, Failure> + Send + 'static,
) -> Result<Html<String>, Failure> {
    blocking(app, move |app| {
        let content = content(app)?;
        // Only the live script needs it: a page that can be shown is shown.
        let last_event = app.dlq.last_event_id().unwrap_or(0);
        Ok(layout(
            app,
            last_event,
            title,
            tab,
            note.as_deref(),
            content,
        ))
    })
    .await
}

/// The frame of every page: the tabs, a note from the last action, the
/// content, and the facts a live update compares (the newest event).
pub fn layout(
    app: &App,
    last_event: i64,
    title: &str,
    tab: Tab,
    note: Option<&str>,
    content: Markup,
) -> Html<String> {
    let tabs = [
        (Tab::Overview, "/", "Overview"),
        (Tab::Items, "/items", "Items"),
        (Tab::Patterns, "/patterns", "Patterns"),
        (Tab::Events, "/events", "Events"),
        (Tab::Runs, "/runs", "Retry runs"),
    ];
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (t(title)) " · dlq" }
                    link rel="stylesheet" href="/static/dlq.css";
                    script src="/static/dlq.js" defer {}
                }
                body data-last-event=(last_event) {
                    header {
                        a.brand href="/" { "dlq" }
                        nav {
                            @for (which, href, label) in tabs {
                                a href=(href) class=[(which == tab).then_some("on")] { (label) }
                            }
                        }
                        @if app.read_only { span.badge { "read-only" } }
                        span.live #live title="updates as the database changes" { "live" }
                    }
                    @if let Some(note) = note {
                        p.note role="status" { (t(note)) }
                    }
                    main #main { (content) }
                    footer { "database " (t(&app.db_label)) }
                }
            }
        }
        .into_string(),
    )
}

/// A failure as a page: what went wrong, in one line.
pub fn error_page(failure: &Failure) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    title { (failure.status.as_u16()) " · dlq" }
                    link rel="stylesheet" href="/static/dlq.css";
                }
                body {
                    header { a.brand href="/" { "dlq" } }
                    main {
                        h1 { (failure.status.as_u16()) " " (failure.status.canonical_reason().unwrap_or("")) }
                        p.error { (t(&failure.message)) }
                        @if failure.status == StatusCode::UNAUTHORIZED {
                            // SameSite=Strict: a link from another site (a
                            // chat, a mail) arrives without the cookie; the
                            // same address opened from here has it.
                            p { "Opened this dashboard in this browser before, from a link elsewhere? "
                                a href="" { "Reload this page" } "." }
                        }
                    }
                }
            }
        }
        .into_string(),
    )
}

/// A small bar chart (SVG drawn here; no script), each bar titled with
/// its bucket and count.
pub fn day_chart(days: &[(String, i64)], what: &str) -> Markup {
    let max = days.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let (width, height, top) = (720.0_f64, 110.0_f64, 14.0_f64);
    let bar = if days.is_empty() {
        width
    } else {
        width / days.len() as f64
    };
    html! {
        svg.chart viewBox=(format!("0 0 {width} {}", top + height + 16.0)) role="img" aria-label=(what) {
            @for (n, (day, count)) in days.iter().enumerate() {
                @let h = (*count as f64 / max as f64) * height;
                rect x=(format!("{:.1}", n as f64 * bar + 1.0)) y=(format!("{:.1}", top + height - h))
                    width=(format!("{:.1}", (bar - 2.0).max(1.0))) height=(format!("{h:.1}")) {
                    title { (t(day)) ": " (count) }
                }
            }
            @if let (Some((first, _)), Some((last, _))) = (days.first(), days.last()) {
                text x="2" y=(top + height + 13.0) { (t(first)) }
                text x=(width - 2.0) y=(top + height + 13.0) text-anchor="end" { (t(last)) }
            }
            text x=(width - 2.0) y="10" text-anchor="end" { "max " (max) " a day" }
        }
    }
}

/// The `span` calendar days up to `end` (the newest day in `per_day` when
/// `None`) from `per_day` (`YYYY-MM-DD`, ascending), days without items
/// as 0; and the items of earlier days left out.
pub fn calendar(
    per_day: &[(String, i64)],
    end: Option<chrono::NaiveDate>,
    span: i64,
) -> (Vec<(String, i64)>, i64) {
    use chrono::NaiveDate;
    let parse = |d: &str| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok();
    let Some(end) = end.or_else(|| per_day.iter().rev().find_map(|(d, _)| parse(d))) else {
        return (Vec::new(), 0);
    };
    let start = end - chrono::Duration::days(span - 1);
    let counts: std::collections::HashMap<NaiveDate, i64> = per_day
        .iter()
        .filter_map(|(d, n)| parse(d).map(|d| (d, *n)))
        .collect();
    let earlier = counts
        .iter()
        .filter(|(d, _)| **d < start)
        .map(|(_, n)| n)
        .sum();
    let days = start
        .iter_days()
        .take_while(|d| *d <= end)
        .map(|d| {
            (
                d.format("%Y-%m-%d").to_string(),
                counts.get(&d).copied().unwrap_or(0),
            )
        })
        .collect();
    (days, earlier)
}

/// A link to the items a filter matches.
pub fn search_link(job: Option<&str>, filter: &str) -> String {
    format!("/items{}", query(&[("job", job), ("q", Some(filter))]))
}

/// A filter literal: the text quoted for the filter language (JSON's
/// escapes are not the language's: a control character would have been
/// searched for as another text).
pub fn quoted(text: &str) -> String {
    dlqlite::filter::quote(text)
}

/// Jobs the Overview lists, the largest first.
const OVERVIEW_JOBS: usize = 100;

/// `GET /`: jobs, totals, categories, arrivals per day.
pub async fn overview(
    State(app): State<Shared>,
    params: Params,
) -> Result<Html<String>, PageError> {
    let shared = app.clone();
    let note = params.get("note").map(str::to_string);
    Ok(render(&app, "Overview", Tab::Overview, note, move |app| {
        // Totals from the counters; the jobs table shows the largest jobs
        // (a database can hold thousands: /api/jobs pages through them all).
        let (job_count, items, eligible, review) = app.dlq.job_totals()?;
        let jobs = app.dlq.largest_jobs(OVERVIEW_JOBS)?;
        let spans = jobs
            .iter()
            .map(|job| app.dlq.job_span(&job.job_id))
            .collect::<dlqlite::Result<Vec<_>>>()?;
        let rules = app.dlq.category_rules()?;
        let arrivals = insight::arrivals(&shared, None);
        let oldest = app.dlq.oldest_failure()?;
        let newest = app.dlq.newest_failure()?;
        let mut by_category: Vec<(Category, i64)> = Category::ALL.iter().map(|c| (*c, 0)).collect();
        for rule in &rules {
            if let Some(slot) = by_category.iter_mut().find(|(c, _)| *c == rule.category) {
                slot.1 += rule.items;
            }
        }
        let unclassified = items - by_category.iter().map(|(_, n)| n).sum::<i64>();
        if let Some(slot) = by_category.iter_mut().find(|(c, _)| *c == Category::Unclassified) {
            slot.1 += unclassified.max(0);
        }
        let content = html! {
            h1 { "Dead letters" }
            div.cards {
                div.card { span.n #total-items { (items) } span { "items" } }
                div.card { span.n { (eligible) } span { "eligible for retry" } }
                div.card { span.n { (review) } span { "need manual review" } }
                div.card { span.n { (job_count) } span { "jobs" } }
                div.card { span.n.small { (oldest.map(|t| time(&t)).unwrap_or_else(|| "-".into())) } span { "oldest failure" } }
                div.card { span.n.small { (newest.map(|t| time(&t)).unwrap_or_else(|| "-".into())) } span { "newest failure" } }
            }
            h2 { "New dead letters per day, the last 60 days" }
            (arrivals)
            h2 { "Failure categories" }
            table.compact {
                thead { tr { th { "category" } th.num { "items" } } }
                tbody {
                    @for (category, n) in &by_category {
                        tr {
                            td { a class=(format!("cat {}", category.as_str())) href=(search_link(None, &format!("category == {}", quoted(category.as_str())))) { (category.as_str()) } }
                            td.num { (n) }
                        }
                    }
                }
            }
            h2 { "Jobs" @if job_count > jobs.len() as i64 { " (the " (jobs.len()) " largest of " (job_count) ")" } }
            @if jobs.is_empty() {
                p { "No dead letters yet. Add some with " code { "dlq add" } " or " code { "dlq import" } "." }
            } @else {
                table {
                    thead { tr {
                        th { "job" } th.num { "items" } th.num { "eligible" } th.num { "manual review" }
                        th { "oldest failure" } th { "newest failure" }
                    } }
                    tbody {
                        @for (job, span) in jobs.iter().zip(&spans) {
                            tr {
                                td { a href=(search_link(Some(&job.job_id), "")) { (t(&job.job_id)) } }
                                td.num { (job.item_count) }
                                td.num { (job.eligible_count) }
                                td.num { (job.manual_review_count) }
                                td.time { (span.oldest.map(|t| time(&t)).unwrap_or_default()) }
                                td.time { (span.newest.map(|t| time(&t)).unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
        };
        Ok(content)
    })
    .await?)
}

/// The filter language with a caret under the column an error names.
fn filter_error(filter: &str, error: &dlqlite::filter::FilterError) -> Markup {
    let caret = format!("{}^", " ".repeat(error.column.saturating_sub(1)));
    html! {
        div.error #filter-error {
            p { "invalid filter at column " (error.column) ": " (t(&error.message)) }
            pre { (t(filter)) "\n" (caret) }
        }
    }
}

/// `GET /items`: a search over one job or all, sorted, a page at a time,
/// with the actions on a selection or on everything matched. An invalid
/// filter is shown at its column (400).
pub async fn items(State(app): State<Shared>, params: Params) -> Result<Response, PageError> {
    let job = params.get("job").map(str::to_string);
    let q = params.get("q").unwrap_or("").to_string();
    let sort = super::api::parse_sort(&params)?;
    let after = params
        .get("cursor")
        .map(|text| super::api::parse_cursor(text, sort))
        .transpose()?;
    let note = params.get("note").map(str::to_string);
    let parsed = if q.trim().is_empty() {
        Ok(None)
    } else {
        dlqlite::filter::parse(&q).map(Some)
    };
    let status = if parsed.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let shared = app.clone();
    // A search waits for a turn; an invalid one is answered at once.
    let turn = match parsed {
        Ok(_) => app.heavy.clone().acquire_owned().await.ok(),
        Err(_) => None,
    };
    let page = render(&app, "Items", Tab::Items, note, move |app| {
        let _turn = turn;
        if let Some(job) = &job {
            app.dlq.require_job(job)?;
        }
        let expression = match parsed {
            Err(error) => {
                return Ok(search_form(
                    &shared,
                    job.as_deref(),
                    &q,
                    sort,
                    Some(filter_error(&q, &error)),
                ))
            }
            Ok(expression) => expression,
        };
        let filter = ListFilter {
            job_id: job.clone(),
            expression,
            ..ListFilter::default()
        };
        let count = app.dlq.count_matching(&filter)?;
        let page = app.dlq.list_page_sorted(&filter, sort, after.as_ref(), PAGE)?;
        Ok(html! {
            (search_form(&shared, job.as_deref(), &q, sort, None))
            p.count #match-count { (plural(count, "item")) @if count == 1 { " matches" } @else { " match" } }
            (item_table(&shared, job.as_deref(), &q, sort, count, &page.items, page.next.as_ref()))
        })
    })
    .await?;
    Ok((status, page).into_response())
}

fn search_form(
    app: &App,
    job: Option<&str>,
    q: &str,
    sort: SortBy,
    error: Option<Markup>,
) -> Markup {
    html! {
        h1 { "Items" }
        form.search method="get" action="/items" {
            (job_select(app, job))
            label.grow { "filter "
                input #q type="search" name="q" value=(q) size="60" spellcheck="false"
                    placeholder="error_type == \"Timeout\" && last_attempt > now - 1d";
            }
            label { "sort "
                select name="sort" {
                    option value="last_attempt" selected[sort == SortBy::LastAttempt] { "newest failure" }
                    option value="failure_count" selected[sort == SortBy::FailureCount] { "most failures" }
                }
            }
            button type="submit" { "Search" }
        }
        @if let Some(error) = error { (error) }
    }
}

/// Jobs a job menu lists (by job_id); a job past them is still reached by
/// its link or `?job=`.
const MENU_JOBS: usize = 2000;

/// The "job" menu of a search form, `selected` chosen.
pub fn job_select(app: &App, selected: Option<&str>) -> Markup {
    let jobs = app.dlq.jobs_after(None, MENU_JOBS).unwrap_or_default();
    html! {
        label { "job "
            select name="job" {
                option value="" { "all jobs" }
                @if let Some(job) = selected.filter(|s| !jobs.iter().any(|j| j.job_id == *s)) {
                    option value=(job) selected { (t(job)) }
                }
                @for j in &jobs {
                    option value=(j.job_id) selected[selected == Some(j.job_id.as_str())] { (t(&j.job_id)) }
                }
            }
        }
    }
}

/// The rows, their checkboxes and the action buttons (one form).
#[allow(clippy::too_many_arguments)]
fn item_table(
    app: &App,
    job: Option<&str>,
    q: &str,
    sort: SortBy,
    count: u64,
    rows: &[ItemSummary],
    next: Option<&PageCursor>,
) -> Markup {
    let sort_name = match sort {
        SortBy::LastAttempt => "last_attempt",
        SortBy::FailureCount => "failure_count",
    };
    let back = format!(
        "/items{}",
        query(&[("job", job), ("q", Some(q)), ("sort", Some(sort_name))])
    );
    let next_link = next.map(|cursor| {
        format!(
            "/items{}",
            query(&[
                ("job", job),
                ("q", Some(q)),
                ("sort", Some(sort_name)),
                ("cursor", Some(&super::api::cursor_text(cursor))),
            ])
        )
    });
    html! {
        form #items-form method="post" action="/action" {
            input type="hidden" name="csrf" value=(app.csrf);
            input type="hidden" name="back" value=(back);
            @if let Some(job) = job { input type="hidden" name="job" value=(job); }
            input type="hidden" name="q" value=(q);
            @if !app.read_only && count > 0 {
                (action_bar(app, count))
            }
            table.items {
                thead { tr {
                    @if !app.read_only { th { input #select-all type="checkbox" title="choose every row on this page"; } }
                    th { "item" } @if job.is_none() { th { "job" } }
                    th.num { "failures" } th { "last failure" } th { "error type" } th { "message" } th { "flags" }
                } }
                tbody {
                    @for row in rows {
                        tr {
                            @if !app.read_only {
                                td { input type="checkbox" name="item" value=(serde_json::json!([row.job_id, row.item_id]).to_string()); }
                            }
                            td { a href=(format!("/item{}", query(&[("job", Some(&row.job_id)), ("id", Some(&row.item_id))]))) { (t(&row.item_id)) } }
                            @if job.is_none() { td { (t(&row.job_id)) } }
                            td.num { (row.failure_count) }
                            td.time { (time(&row.last_attempt)) }
                            td { span class=(format!("cat {}", row.category.as_str())) { (t(row.error_type.as_deref().unwrap_or("-"))) } }
                            td.msg { (brief(row.error_message.as_deref().unwrap_or(""))) }
                            td { (flags(row.reprocess_eligible, row.manual_review_required)) }
                        }
                    }
                }
            }
        }
        @if let Some(link) = next_link { p { a.next href=(link) { "next page →" } } }
    }
}

fn flags(eligible: bool, review: bool) -> Markup {
    html! {
        @if eligible { span.flag.ok { "eligible" } } @else { span.flag { "not eligible" } }
        @if review { " " span.flag.warn { "manual review" } }
    }
}

/// The actions on several items, as `/action` takes them (`CODE:all` or
/// `CODE:selected`), with their labels.
pub const ACTIONS: [(&str, &str); 6] = [
    ("eligible", "Mark eligible"),
    ("ineligible", "Mark not eligible"),
    ("review", "Flag for review"),
    ("unreview", "Clear review"),
    ("delete", "Delete"),
    ("retry", "Retry"),
];

/// The buttons: on the ticked rows, or on every item the search matches.
fn action_bar(app: &App, count: u64) -> Markup {
    let actions = ACTIONS;
    html! {
        div.actions {
            span { "Ticked rows: " }
            @for (code, label) in actions {
                // Delete and retry ask first ("…"); marks apply at once.
                button type="submit" name="do" value=(format!("{code}:selected")) class=[(code == "delete").then_some("danger")] {
                    (label) @if code == "delete" || code == "retry" { "…" }
                }
            }
        }
        div.actions {
            span { "All " (count) " matching: " }
            @for (code, label) in actions {
                button type="submit" name="do" value=(format!("{code}:all")) class=[(code == "delete").then_some("danger")] { (label) "…" }
            }
        }
        @if app.exec.is_none() {
            p.hint { "Retry is off: start the server with " code { "dlq serve --exec CMD" } " (the command " code { "dlq retry --exec" } " would run) to retry from here." }
        }
    }
}

/// `GET /item?job=J&id=I`: everything about one item.
pub async fn item(State(app): State<Shared>, params: Params) -> Result<Html<String>, PageError> {
    let job = params.get("job").map(str::to_string);
    let id = params
        .get("id")
        .ok_or_else(|| Failure::bad_request("which item? /item?job=JOB&id=ITEM"))?
        .to_string();
    let note = params.get("note").map(str::to_string);
    let shared = app.clone();
    Ok(render(&app, "Item", Tab::Items, note, move |app| {
        let job_id = match job {
            Some(job) => job,
            None => app.dlq.job_of(&id)?,
        };
        let item = app.dlq.get(Some(&job_id), &id)?;
        let events = app.dlq.events_page(
            &EventQuery { job_id: Some(job_id.clone()), item_id: Some(id.clone()), kind: None },
            None,
            100,
        )?;
        let data = serde_json::from_str::<serde_json::Value>(item.item_data.get())
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or_else(|| item.item_data.get().to_string());
        let pair = serde_json::json!([job_id, id]).to_string();
        let back = format!("/item{}", query(&[("job", Some(&job_id)), ("id", Some(&id))]));
        Ok(html! {
            h1 { "Item " (t(&item.item_id)) }
            p { "job " a href=(search_link(Some(&job_id), "")) { (t(&job_id)) }
                " · " (plural(item.failure_count, "failure")) " · first " (time(&item.first_attempt))
                " · last " (time(&item.last_attempt)) }
            p { "signature " code { (t(&item.error_signature)) } " · "
                a href=(search_link(Some(&job_id), &format!("error_signature == {}", quoted(&item.error_signature)))) { "items with this signature" } }
            p #flags { (flags(item.reprocess_eligible, item.manual_review_required)) }
            @if !shared.read_only {
                form.actions method="post" action="/action" {
                    input type="hidden" name="csrf" value=(shared.csrf);
                    input type="hidden" name="item" value=(pair);
                    input type="hidden" name="back" value=(back);
                    @if item.reprocess_eligible {
                        button type="submit" name="do" value="ineligible:selected" { "Mark not eligible" }
                    } @else {
                        button type="submit" name="do" value="eligible:selected" { "Mark eligible" }
                    }
                    @if item.manual_review_required {
                        button type="submit" name="do" value="unreview:selected" { "Clear review" }
                    } @else {
                        button type="submit" name="do" value="review:selected" { "Flag for review" }
                    }
                    button type="submit" name="do" value="retry:selected" { "Retry…" }
                    button.danger type="submit" name="do" value="delete:selected" { "Delete…" }
                }
            }
            h2 { "item_data" }
            pre.json { (t(&data)) }
            h2 { "Attempts" }
            @for attempt in item.failure_history.iter().rev() {
                section.attempt {
                    h3 { "#" (attempt.attempt_number) " · " (time(&attempt.timestamp)) " · "
                        span.cat { (t(&attempt.error_type.name)) } }
                    dl {
                        @if let Some(code) = attempt.error_type.exit_code { dt { "exit code" } dd { (code) } }
                        dt { "message" } dd { pre { (t(&attempt.error_message)) } }
                        @if let Some(context) = &attempt.error_context {
                            dt { "context" } dd { ul { @for line in context { li { (t(line)) } } } }
                        }
                        // A retry's failure keeps the stderr tail as both: shown once.
                        @if let Some(trace) = attempt.stack_trace.as_ref().filter(|trace| trace.trim() != attempt.error_message.trim()) {
                            dt { "stack trace" } dd { pre { (t(trace)) } }
                        }
                        dt { "agent" } dd { (t(&attempt.agent_id)) }
                        dt { "step" } dd { (t(&attempt.step_failed)) }
                        dt { "duration" } dd title=(format!("{} ms", attempt.duration_ms)) { (duration(attempt.duration_ms)) }
                        @if let Some(log) = &attempt.json_log_location { dt { "json log" } dd { code { (t(log)) } } }
                    }
                }
            }
            @if let Some(artifacts) = &item.worktree_artifacts {
                h2 { "Worktree artifacts" }
                dl {
                    dt { "worktree" } dd { code { (t(&artifacts.worktree_path)) } }
                    dt { "branch" } dd { code { (t(&artifacts.branch_name)) } }
                    @if let Some(changes) = &artifacts.uncommitted_changes { dt { "uncommitted changes" } dd { pre { (t(changes)) } } }
                    @if let Some(logs) = &artifacts.error_logs { dt { "error logs" } dd { pre { (t(logs)) } } }
                }
            }
            h2 { "Events" }
            (event_table(&events, false))
        })
    })
    .await?)
}

/// Events as a table (the item page's and the Events page's).
pub fn event_table(events: &[Event], with_item: bool) -> Markup {
    html! {
        @if events.is_empty() { p { "No events." } } @else {
            table.events {
                thead { tr { th.num { "id" } th { "time" } th { "kind" } @if with_item { th { "job" } th { "item" } } th { "detail" } } }
                tbody {
                    @for event in events {
                        tr {
                            td.num { (event.id) }
                            td.time { (time(&event.time)) }
                            td { span.kind { (t(&event.kind)) } }
                            @if with_item {
                                td { @if let Some(job) = &event.job_id {
                                    a href=(format!("/events{}", query(&[("job", Some(job))]))) { (t(job)) }
                                } }
                                td { @if let (Some(job), Some(item)) = (&event.job_id, &event.item_id) {
                                    a href=(format!("/item{}", query(&[("job", Some(job)), ("id", Some(item))]))) { (t(item)) }
                                } @else if let Some(item) = &event.item_id { (t(item)) } }
                            }
                            td.msg { code { (brief(&event.detail.to_string())) } }
                        }
                    }
                }
            }
        }
    }
}

/// The confirmation of an action: its count, what it applies to, and the
/// form that acts on exactly those rows.
pub fn confirm(
    app: &App,
    last_event: i64,
    plan: &Plan,
    counted: &Outcome,
    notice: Option<&str>,
    form: &Params,
    back: &str,
) -> Html<String> {
    let what = match &plan.items {
        Items::Named(pairs) => format!(
            "{} chosen item{}",
            pairs.len(),
            if pairs.len() == 1 { "" } else { "s" }
        ),
        Items::Search { job_id, filter } => format!(
            "the items {}{}",
            if filter.trim().is_empty() {
                "of".to_string()
            } else {
                format!("matching {filter} in")
            },
            match job_id {
                Some(job) => format!(" job {job}"),
                None => " every job".to_string(),
            }
        ),
    };
    let retry_note = matches!(plan.action, Action::Retry);
    let content = html! {
        h1 { "Confirm" }
        @if let Some(notice) = notice { p.error { (t(notice)) } }
        p.confirm #confirm-text {
            (plan.action.verb()) " " strong #confirm-count { (plural(counted.count, "item")) } "?"
        }
        p { "From " (t(&what)) "." @if retry_note { " A retry takes the eligible ones, as " code { "dlq retry" } " does." } }
        @if let Items::Named(pairs) = &plan.items {
            ul.chosen {
                @for (job, item) in pairs.iter().take(CHOSEN_SHOWN) {
                    li { (t(item)) span.hint { " of " (t(job)) } }
                }
                @if pairs.len() > CHOSEN_SHOWN { li.hint { "and " (pairs.len() - CHOSEN_SHOWN) " more" } }
            }
        }
        @if counted.count == 0 {
            p { "Nothing to do." } p { a href=(back) { "back" } }
        } @else {
            form method="post" action="/action" {
                @for (key, value) in form_fields(form) {
                    input type="hidden" name=(key) value=(value);
                }
                input type="hidden" name="confirm" value="1";
                @if let Some(selection) = &counted.selection { input type="hidden" name="selection" value=(selection); }
                button #confirm type="submit" class=[matches!(plan.action, Action::Delete).then_some("danger")] {
                    (plan.action.verb()) " " (plural(counted.count, "item"))
                }
                " " a href=(back) { "Cancel" }
            }
        }
    };
    layout(app, last_event, "Confirm", Tab::None, None, content)
}

/// The chosen items a confirmation names (the rest are counted).
const CHOSEN_SHOWN: usize = 10;

/// The fields a confirmation posts again (not its own).
fn form_fields(form: &Params) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for key in ["csrf", "do", "job", "q", "back"] {
        if let Some(value) = form.get(key) {
            out.push((key.to_string(), value.to_string()));
        }
    }
    for value in form.all("item") {
        out.push(("item".to_string(), value.to_string()));
    }
    out
}

pub async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/dlq.css"),
    )
        .into_response()
}

pub async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/dlq.js"),
    )
        .into_response()
}

/// A duration as a person reads it: "850 ms", "12.4 s", "10m", "1h 5m".
fn duration(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1_000.0)
    } else {
        crate::cli::term::span(ms / 1_000)
    }
}
