//! The JSON API under `/api/` (documented in docs/dashboard.md): what the pages
//! show, for scripts and the pages' live updates. Every answer is one JSON
//! object; every failure `{"error": "..."}` with a 4xx/5xx. Counts come
//! from the counters where the question allows (see
//! [`dlqlite::Dlq::count_matching`]); listings are keyset-paged.

use super::app::{blocking, ApiError, App, Failure, Params, Shared};
use super::insight;
use super::log::{before, event_query, STALE_AFTER_SECS};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use dlqlite::store::{ListFilter, PageCursor, SortBy};
use serde_json::{json, Value};

/// The most rows one call lists.
const MAX_LIMIT: usize = 1000;

fn answer(value: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn limit(params: &Params, default: usize) -> Result<usize, Failure> {
    match params.get("limit") {
        None => Ok(default),
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(Failure::bad_request(format!(
                "limit must be 1 to {MAX_LIMIT}"
            ))),
        },
    }
}

fn job(app: &App, params: &Params) -> Result<Option<String>, Failure> {
    let job = params.get("job").map(str::to_string);
    if let Some(job) = &job {
        app.dlq.require_job(job)?;
    }
    Ok(job)
}

/// `GET /api/jobs`: every job with its counters and when its items failed.
pub async fn jobs(State(app): State<Shared>, params: Params) -> Result<Response, ApiError> {
    let value = blocking(&app, move |app| {
        let limit = limit(&params, MAX_LIMIT)?;
        let jobs = app.dlq.jobs_after(params.get("after"), limit)?;
        let mut list = Vec::with_capacity(jobs.len());
        for job in &jobs {
            let span = app.dlq.job_span(&job.job_id)?;
            list.push(json!({
                "job_id": job.job_id, "repo": job.repo, "items": job.item_count,
                "eligible": job.eligible_count, "manual_review": job.manual_review_count,
                "max_items": job.max_items, "created_at": job.created_at,
                "oldest_failure": span.oldest, "newest_failure": span.newest,
            }));
        }
        let next = (jobs.len() == limit)
            .then(|| jobs.last().map(|j| j.job_id.clone()))
            .flatten();
        Ok(json!({ "jobs": list, "next": next }))
    })
    .await?;
    Ok(answer(&value))
}

/// The cursor of the next page as one string: `KEY:SORTKEY`.
pub fn cursor_text(cursor: &PageCursor) -> String {
    format!("{}:{}", cursor.key, cursor.sort_key)
}

/// A cursor [`cursor_text`] made for a listing in `sort` order.
pub fn parse_cursor(text: &str, sort: SortBy) -> Result<PageCursor, Failure> {
    let bad = || Failure::bad_request("cursor is not one this listing gave (KEY:SORTKEY)");
    let (key, sort_key) = text.split_once(':').ok_or_else(bad)?;
    let fits = match sort {
        SortBy::LastAttempt => dlqlite::Timestamp::parse(sort_key).is_ok(),
        SortBy::FailureCount => sort_key.parse::<u32>().is_ok(),
    };
    if !fits {
        return Err(bad());
    }
    Ok(PageCursor {
        key: key.parse().map_err(|_| bad())?,
        sort_key: sort_key.to_string(),
    })
}

/// `sort=`: last_attempt (the default) or failure_count.
pub fn parse_sort(params: &Params) -> Result<SortBy, Failure> {
    match params.get("sort") {
        None | Some("last_attempt") => Ok(SortBy::LastAttempt),
        Some("failure_count") => Ok(SortBy::FailureCount),
        Some(other) => Err(Failure::bad_request(format!(
            "unknown sort {other:?}: last_attempt or failure_count"
        ))),
    }
}

/// `GET /api/items?job=&filter=&sort=&limit=&cursor=`: a page of
/// summaries, the count of all matches, and the next page's cursor.
pub async fn items(State(app): State<Shared>, params: Params) -> Result<Response, ApiError> {
    let turn = app.heavy.clone().acquire_owned().await.ok();
    let value = blocking(&app, move |app| {
        let _turn = turn;
        let job_id = job(app, &params)?;
        let expression = match params.get("filter") {
            None => None,
            Some(text) if text.trim().is_empty() => None,
            Some(text) => Some(
                dlqlite::filter::parse(text)
                    .map_err(|e| Failure::bad_request(format!("invalid filter: {e}")))?,
            ),
        };
        let sort = parse_sort(&params)?;
        let after = params
            .get("cursor")
            .map(|text| parse_cursor(text, sort))
            .transpose()?;
        let limit = limit(&params, 50)?;
        let filter = ListFilter {
            job_id,
            expression,
            ..ListFilter::default()
        };
        let count = app.dlq.count_matching(&filter)?;
        let page = app
            .dlq
            .list_page_sorted(&filter, sort, after.as_ref(), limit)?;
        Ok(json!({
            "count": count,
            "items": page.items,
            "next": page.next.as_ref().map(cursor_text),
        }))
    })
    .await?;
    Ok(answer(&value))
}

/// `GET /api/item?job=&id=`: the whole item in the legacy JSON shape.
pub async fn item(State(app): State<Shared>, params: Params) -> Result<Response, ApiError> {
    let value = blocking(&app, move |app| {
        let id = params
            .get("id")
            .ok_or_else(|| Failure::bad_request("which item? ?job=JOB&id=ITEM"))?;
        let job_id = match params.get("job") {
            Some(job) => job.to_string(),
            None => app.dlq.job_of(id)?,
        };
        let item = app.dlq.get(Some(&job_id), id)?;
        Ok(json!({ "job_id": job_id, "item": item.to_json_value()? }))
    })
    .await?;
    Ok(answer(&value))
}

/// `GET /api/stats?job=`: totals and items per error type and category,
/// from the counters.
pub async fn stats(State(app): State<Shared>, params: Params) -> Result<Response, ApiError> {
    let value = blocking(&app, move |app| {
        let scope = params.get("job").map(str::to_string);
        // (jobs, items, eligible, manual review, oldest, newest): one
        // job's from its row and two seeks, all jobs' from the counters,
        // one seek per job and one of the last_attempt index.
        let (jobs, items, eligible, review, oldest, newest) = match &scope {
            Some(job) => {
                let info = app.dlq.job_info(job)?;
                let span = app.dlq.job_span(job)?;
                let (items, eligible, review) = (
                    info.item_count,
                    info.eligible_count,
                    info.manual_review_count,
                );
                (1, items, eligible, review, span.oldest, span.newest)
            }
            None => {
                let (jobs, items, eligible, review) = app.dlq.job_totals()?;
                let (oldest, newest) = (app.dlq.oldest_failure()?, app.dlq.newest_failure()?);
                (jobs, items, eligible, review, oldest, newest)
            }
        };
        let types = app.dlq.error_type_counts(scope.as_deref())?;
        let mut categories = serde_json::Map::new();
        for category in dlqlite::Category::ALL {
            categories.insert(category.as_str().to_string(), json!(0));
        }
        let mut error_types = serde_json::Map::new();
        for (name, category, n) in &types {
            error_types.insert(name.clone(), json!(n));
            let slot = categories.entry(category.as_str()).or_insert(json!(0));
            *slot = json!(slot.as_i64().unwrap_or(0) + n);
        }
        Ok(json!({
            "job_id": scope,
            "jobs": jobs,
            "total_items": items,
            "eligible_for_reprocess": eligible,
            "requiring_manual_review": review,
            "oldest_item": oldest,
            "newest_item": newest,
            "error_types": error_types,
            "categories": categories,
        }))
    })
    .await?;
    Ok(answer(&value))
}

/// `GET /api/analyze?job=`: the analysis (as `dlq analyze --json`) and the
/// failure families the Patterns page lists (the largest 50, with
/// `more_families`/`more_items` and `items_without_family` adding up to
/// `total_items`), from the background cache; `"stale": true` while newer figures are computed,
/// `"computing": true` (and no analysis) before the first.
pub async fn analyze(State(app): State<Shared>, params: Params) -> Result<Response, ApiError> {
    let shared = app.clone();
    let value = blocking(&app, move |app| {
        let scope = job(app, &params)?;
        let snapshot = insight::figures(&shared, scope.as_deref());
        if let Some(error) = snapshot.error {
            return Err(Failure::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("analysis failed: {error}"),
            ));
        }
        Ok(match snapshot.figures {
            None => json!({ "computing": true }),
            Some(figures) => json!({
                "stale": snapshot.stale,
                "computed_at": figures.computed_at,
                "analysis": *figures.analysis,
                "families": *figures.families,
                "items_per_day": *figures.per_day,
            }),
        })
    })
    .await?;
    Ok(answer(&value))
}

/// `GET /api/events?job=&kind=&item=&before=&limit=`: newest first; `next`
/// is the `before` of the next page.
pub async fn events(State(app): State<Shared>, params: Params) -> Result<Response, ApiError> {
    let value = blocking(&app, move |app| {
        let query = event_query(&params)?;
        let limit = limit(&params, 100)?;
        let events = app.dlq.events_page(&query, before(&params)?, limit)?;
        let next = (events.len() == limit)
            .then(|| events.last().map(|e| e.id))
            .flatten();
        Ok(json!({ "events": events, "next": next }))
    })
    .await?;
    Ok(answer(&value))
}

/// `GET /api/runs?job=&limit=`: retry runs, newest first, with the live
/// progress of those this server started.
pub async fn runs(State(app): State<Shared>, params: Params) -> Result<Response, ApiError> {
    let value = blocking(&app, move |app| {
        let limit = limit(&params, 100)?;
        let job_id = job(app, &params)?;
        let runs = app.dlq.runs(
            job_id.as_deref(),
            limit,
            &dlqlite::retry::hostname(),
            STALE_AFTER_SECS,
        )?;
        let live = app.runs.lock().ok();
        let list: Vec<Value> = runs
            .iter()
            .map(|run| {
                let mut value = serde_json::to_value(run).unwrap_or(Value::Null);
                let progress = live.as_ref().and_then(|live| {
                    let r = live.iter().find(|r| r.run_id == run.run_id)?;
                    let p = (*r.progress.lock().ok()?)?;
                    Some(json!({
                        "total": p.total, "succeeded": p.succeeded, "failed": p.failed,
                        "lost": p.lost, "running": p.running,
                    }))
                });
                if let (Some(object), Some(progress)) = (value.as_object_mut(), progress) {
                    object.insert("progress".into(), progress);
                }
                value
            })
            .collect();
        Ok(json!({ "runs": list }))
    })
    .await?;
    Ok(answer(&value))
}

/// `GET /api/live`: what a page polls to know the database changed: the
/// newest event id, the item total and the runs under way.
pub async fn live(State(app): State<Shared>) -> Result<Response, ApiError> {
    let value = blocking(&app, |app| {
        let (_, items, _, _) = app.dlq.job_totals()?;
        let running = super::actions::running(app);
        Ok(json!({
            "last_event_id": app.dlq.last_event_id()?,
            "items": items,
            "runs_running": running,
        }))
    })
    .await?;
    Ok(answer(&value))
}
