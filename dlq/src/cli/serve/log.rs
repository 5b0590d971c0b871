//! The audit log and the retry runs as pages: events filtered by job, kind
//! and item a page at a time (newest first, keyset on the event id), and
//! the runs with their status, counts and, for runs this server started,
//! live progress.

use super::app::{query, App, Failure, PageError, Params, Shared};
use super::pages::{event_table, render, t, time, Tab};
use axum::extract::State;
use axum::response::Html;
use dlqlite::store::{EventQuery, RunInfo, RunStatus};
use dlqlite::EventKind;
use maud::{html, Markup};

/// Events on a page.
const EVENTS: usize = 100;

/// A run recorded as running whose heartbeat is older than this shows as
/// crashed (as `dlq retry --status` decides).
pub const STALE_AFTER_SECS: i64 = 120;

/// The events query of a request (`job`, `kind`, `item`).
pub fn event_query(params: &Params) -> Result<EventQuery, Failure> {
    let kind = match params.get("kind") {
        None => None,
        Some(name) => Some(name.parse::<EventKind>().map_err(|_| {
            Failure::bad_request(format!(
                "unknown event kind {name:?}: {}",
                EventKind::names()
            ))
        })?),
    };
    Ok(EventQuery {
        job_id: params.get("job").map(str::to_string),
        kind,
        item_id: params.get("item").map(str::to_string),
    })
}

/// `before=ID`: the page of events older than that one.
pub fn before(params: &Params) -> Result<Option<i64>, Failure> {
    params
        .get("before")
        .map(|b| {
            b.parse()
                .map_err(|_| Failure::bad_request("before is not an event id"))
        })
        .transpose()
}

/// `GET /events`.
pub async fn events(State(app): State<Shared>, params: Params) -> Result<Html<String>, PageError> {
    let query_ = event_query(&params)?;
    let before = before(&params)?;
    Ok(render(&app, "Events", Tab::Events, None, move |app| {
        let events = app.dlq.events_page(&query_, before, EVENTS)?;
        let older = (events.len() == EVENTS).then(|| events.last().map(|e| e.id)).flatten();
        let kind = query_.kind.map(|k| k.as_str());
        Ok(html! {
            h1 { "Events" }
            form.search method="get" action="/events" {
                label { "job " input type="text" name="job" value=(query_.job_id.as_deref().unwrap_or("")); }
                label { "kind "
                    select name="kind" {
                        option value="" { "any" }
                        @for k in EventKind::ALL { option value=(k.as_str()) selected[kind == Some(k.as_str())] { (k.as_str()) } }
                    }
                }
                label { "item " input type="text" name="item" value=(query_.item_id.as_deref().unwrap_or("")); }
                button type="submit" { "Filter" }
            }
            (event_table(&events, true))
            @if let Some(id) = older {
                p { a.next href=(format!("/events{}", query(&[
                    ("job", query_.job_id.as_deref()), ("kind", kind),
                    ("item", query_.item_id.as_deref()), ("before", Some(&id.to_string())),
                ]))) { "older events →" } }
            }
        })
    })
    .await?)
}

/// Progress of a run this server started: "done / total".
fn progress(app: &App, run: &RunInfo) -> Option<String> {
    let runs = app.runs.lock().ok()?;
    let live = runs.iter().find(|r| r.run_id == run.run_id)?;
    let ended = live.ended.lock().ok()?.clone();
    let p = (*live.progress.lock().ok()?)?;
    let done = p.succeeded + p.failed + p.lost;
    Some(match ended {
        Some(Err(e)) => format!("failed: {e}"),
        _ => format!("{done} / {} done, {} running", p.total, p.running),
    })
}

fn run_rows(app: &App, runs: &[RunInfo]) -> Markup {
    html! {
        @if runs.is_empty() { p { "No retry runs yet." } } @else {
            table #runs {
                thead { tr {
                    th { "run" } th { "job" } th { "status" } th { "progress" } th.num { "attempted" }
                    th.num { "succeeded" } th.num { "failed" } th.num { "skipped" } th { "started" } th { "ended" }
                } }
                tbody {
                    @for run in runs {
                        tr {
                            td { code { (t(&run.run_id)) } }
                            td { (t(&run.job_id)) }
                            td { span class=(format!("status {}", run.status.as_str())) { (run.status.as_str()) } }
                            td { (progress(app, run).unwrap_or_default()) }
                            // A run writes its counts when it ends; while it
                            // runs, the progress column has them (for runs
                            // this server started).
                            @if run.status == RunStatus::Running {
                                td.num { "–" } td.num { "–" } td.num { "–" }
                            } @else {
                                td.num { (run.counts.attempted) }
                                td.num { (run.counts.succeeded) }
                                td.num { (run.counts.failed) }
                            }
                            td.num { (run.counts.skipped) }
                            td.time { (time(&run.started_at)) }
                            td.time { (run.ended_at.map(|e| time(&e)).unwrap_or_default()) }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /runs`.
pub async fn runs(State(app): State<Shared>, params: Params) -> Result<Html<String>, PageError> {
    let job = params.get("job").map(str::to_string);
    let note = params.get("note").map(str::to_string);
    Ok(render(&app, "Retry runs", Tab::Runs, note, move |app| {
        let runs = app.dlq.runs(job.as_deref(), 100, &dlqlite::retry::hostname(), STALE_AFTER_SECS)?;
        Ok(html! {
            h1 { "Retry runs" }
            @if app.exec.is_none() {
                p.hint { "This server does not retry: start it with " code { "dlq serve --exec CMD" } " to retry from the Items page. Runs of " code { "dlq retry" } " show here too." }
            }
            (run_rows(app, &runs))
        })
    })
    .await?)
}
