//! Actions: mark, delete and retry, on one item, a selection or every item
//! a search matches. One plan ([`Plan`]) serves the JSON API
//! (`POST /api/actions`) and the pages' forms (`POST /action`); counting
//! and acting go through the library ([`Dlq::select`],
//! [`Dlq::mark_selection`], [`Dlq::remove_selection`],
//! [`dlqlite::retry::retry`]), so the CLI, the dashboard and the audit log
//! agree. A confirmed action carries the selection token of its count and
//! changes exactly those rows or nothing.
//!
//! [`Dlq::select`]: dlqlite::Dlq::select
//! [`Dlq::mark_selection`]: dlqlite::Dlq::mark_selection
//! [`Dlq::remove_selection`]: dlqlite::Dlq::remove_selection

use super::app::{blocking, query, ApiError, Failure, PageError, Params, Shared};
use super::pages;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use dlqlite::filter::{Column, Expr, Field, Literal, Op};
use dlqlite::retry::command::CommandHandler;
use dlqlite::retry::{new_run_id, retry, Progress, RetryOptions, RunControl};
use dlqlite::store::{ListFilter, MarkRequest, Target};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `dlq serve --exec CMD`: how the dashboard retries.
pub struct Exec {
    pub command: String,
    pub timeout: Option<Duration>,
    pub parallel: usize,
    pub max_retries: u32,
}

/// A retry run this server started, followed for its progress.
pub struct LiveRun {
    pub run_id: String,
    pub control: Arc<RunControl>,
    pub progress: Arc<Mutex<Option<Progress>>>,
    /// How it ended, once it has: `Ok(())` or the error's line.
    pub ended: Arc<Mutex<Option<Result<(), String>>>>,
    pub thread: Option<std::thread::JoinHandle<()>>,
}

/// What to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Mark(MarkRequest),
    Delete,
    Retry,
}

impl Action {
    /// A verb for sentences: "Delete 3 items".
    pub fn verb(&self) -> String {
        match self {
            Action::Delete => "Delete".into(),
            Action::Retry => "Retry".into(),
            Action::Mark(request) => {
                let mut parts = Vec::new();
                match request.reprocess_eligible {
                    Some(true) => parts.push("Mark eligible"),
                    Some(false) => parts.push("Mark not eligible"),
                    None => {}
                }
                match request.manual_review_required {
                    Some(true) => parts.push("Flag for manual review"),
                    Some(false) => parts.push("Clear manual review"),
                    None => {}
                }
                parts.join(" and ")
            }
        }
    }

    fn from_code(code: &str) -> Result<Action, Failure> {
        let mark = |eligible, review| {
            Action::Mark(MarkRequest {
                reprocess_eligible: eligible,
                manual_review_required: review,
            })
        };
        Ok(match code {
            "delete" => Action::Delete,
            "retry" => Action::Retry,
            "eligible" => mark(Some(true), None),
            "ineligible" => mark(Some(false), None),
            "review" => mark(None, Some(true)),
            "unreview" => mark(None, Some(false)),
            other => {
                return Err(Failure::bad_request(format!(
                "unknown action {other:?}: delete, retry, eligible, ineligible, review or unreview"
            )))
            }
        })
    }
}

/// Which items: named, or a search (a job and a filter, either optional).
#[derive(Clone, Debug)]
pub enum Items {
    Named(Vec<(String, String)>),
    Search {
        job_id: Option<String>,
        filter: String,
    },
}

/// An action and its items.
#[derive(Clone, Debug)]
pub struct Plan {
    pub action: Action,
    pub items: Items,
}

/// What an action did or would do.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub action: &'static str,
    pub dry_run: bool,
    /// The items it changed (or would): for a retry, the eligible ones.
    pub count: u64,
    /// With a dry run: hand this back to act on exactly the rows counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<String>,
    /// A retry's runs, one per job.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<StartedRun>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StartedRun {
    pub run_id: String,
    pub job_id: String,
}

fn parse_filter(text: &str) -> Result<Option<Expr>, Failure> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    dlqlite::filter::parse(text)
        .map(Some)
        .map_err(|e| Failure::bad_request(format!("invalid filter: {e}")))
}

/// `item_id == a || item_id == b || ...`, balanced so that thousands of ids
/// stay within SQLite's expression depth.
fn any_item(ids: &[&str]) -> Expr {
    if ids.len() == 1 {
        return Expr::Compare {
            field: Field::Column(Column::ItemId),
            op: Op::Eq,
            value: Literal::Text(ids[0].to_string()),
        };
    }
    let (left, right) = ids.split_at(ids.len() / 2);
    Expr::Or(Box::new(any_item(left)), Box::new(any_item(right)))
}

impl Plan {
    /// The library's target for a mark or delete.
    fn target(&self) -> Result<Target, Failure> {
        Ok(match &self.items {
            Items::Named(pairs) => Target::Items(pairs.clone()),
            Items::Search { job_id, filter } => Target::Filter(ListFilter {
                job_id: job_id.clone(),
                expression: parse_filter(filter)?,
                ..ListFilter::default()
            }),
        })
    }

    /// A retry's selection, one filter per job (a run retries one job):
    /// the eligible items, as `dlq retry` takes them.
    fn retry_filters(&self) -> Result<Vec<ListFilter>, Failure> {
        let eligible = |job_id: &str, expression| ListFilter {
            job_id: Some(job_id.to_string()),
            eligible: Some(true),
            expression,
            ..ListFilter::default()
        };
        match &self.items {
            Items::Search { job_id: None, .. } => Err(Failure::bad_request(
                "a retry runs one job at a time: choose a job (job_id) for the search",
            )),
            Items::Search {
                job_id: Some(job),
                filter,
            } => Ok(vec![eligible(job, parse_filter(filter)?)]),
            Items::Named(pairs) => {
                if pairs.len() > dlqlite::store::MAX_NAMED_ITEMS {
                    return Err(Failure::bad_request(format!(
                        "{} items named; at most {} (use a filter)",
                        pairs.len(),
                        dlqlite::store::MAX_NAMED_ITEMS
                    )));
                }
                let mut by_job: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
                for (job, item) in pairs {
                    by_job.entry(job).or_default().push(item);
                }
                Ok(by_job
                    .into_iter()
                    .map(|(job, ids)| eligible(job, Some(any_item(&ids))))
                    .collect())
            }
        }
    }
}

/// Counts (dry run) or performs the plan. `selection` is the token of an
/// earlier count: the action then applies to exactly those rows.
pub fn perform(
    app: &super::app::App,
    plan: &Plan,
    dry_run: bool,
    selection: Option<&str>,
) -> Result<Outcome, Failure> {
    if !dry_run && app.read_only {
        return Err(Failure::forbidden("the dashboard is read-only: no changes"));
    }
    let action = match plan.action {
        Action::Delete => "delete",
        Action::Retry => "retry",
        Action::Mark(_) => "mark",
    };
    if let Items::Search {
        job_id: Some(job), ..
    } = &plan.items
    {
        app.dlq.require_job(job)?;
    }
    let outcome = |count, selection, runs| Outcome {
        action,
        dry_run,
        count,
        selection,
        runs,
    };
    match plan.action {
        Action::Retry => {
            // One run per job, each on the eligible items of its job. A dry
            // run counts each job's selection; the tokens (one per job,
            // comma-separated) make the runs take exactly those items: each
            // job's items are leased to its run in the transaction that
            // checks the token, and the run takes only what it was leased,
            // so nothing stored, merged or marked eligible later is taken.
            let filters = plan.retry_filters()?;
            if dry_run {
                let mut count = 0;
                let mut tokens = Vec::new();
                for filter in filters {
                    let counted = app.dlq.select(&Target::Filter(filter))?;
                    count += counted.count;
                    tokens.push(counted.token);
                }
                return Ok(outcome(count, Some(tokens.join(",")), Vec::new()));
            }
            let Some(exec) = &app.exec else {
                return Err(Failure::forbidden(
                    "retries are off: start the server with `dlq serve --exec CMD` (the command \
                     `dlq retry --exec` would run) to retry from the dashboard",
                ));
            };
            let given: Option<Vec<&str>> = selection.map(|s| s.split(',').collect());
            if given
                .as_ref()
                .is_some_and(|tokens| tokens.len() != filters.len())
            {
                return Err(Failure::bad_request(
                    "the selection is not one this retry counted",
                ));
            }
            let mut leased: Vec<(String, String, u64)> = Vec::new();
            let give_back = |leased: &[(String, String, u64)]| {
                for (_, run_id, _) in leased {
                    let _ = app.dlq.release_all_leases(run_id);
                }
            };
            for (n, filter) in filters.into_iter().enumerate() {
                let run_id = new_run_id();
                let until = app.dlq.now().plus_millis(LEASE_MS);
                let token = given.as_ref().map(|tokens| tokens[n]);
                let job_id = filter.job_id.clone().unwrap_or_default();
                match app
                    .dlq
                    .lease_selection(&Target::Filter(filter), token, &run_id, until)
                {
                    Ok(done) if done.count > 0 => leased.push((job_id, run_id, done.count)),
                    Ok(_) => {}
                    Err(e) => {
                        give_back(&leased);
                        return Err(e.into());
                    }
                }
            }
            let mut count = 0;
            let mut runs = Vec::new();
            for (n, (job_id, run_id, taken)) in leased.iter().enumerate() {
                count += taken;
                match start_retry(app, exec, job_id, run_id) {
                    Ok(run) => runs.push(run),
                    Err(e) => {
                        give_back(&leased[n..]);
                        return Err(e);
                    }
                }
            }
            Ok(outcome(count, None, runs))
        }
        Action::Mark(request) => {
            let target = plan.target()?;
            if dry_run {
                let counted = app.dlq.select(&target)?;
                return Ok(outcome(counted.count, Some(counted.token), Vec::new()));
            }
            let done = app.dlq.mark_selection(&target, selection, &request)?;
            Ok(outcome(done.count, None, Vec::new()))
        }
        Action::Delete => {
            let target = plan.target()?;
            if dry_run {
                let counted = app.dlq.select(&target)?;
                return Ok(outcome(counted.count, Some(counted.token), Vec::new()));
            }
            let done = app.dlq.remove_selection(&target, selection)?;
            Ok(outcome(done.count, None, Vec::new()))
        }
    }
}

/// The lease a dashboard retry's items are taken with: [`RetryOptions`]'
/// default, which the run then renews.
const LEASE_MS: i64 = 60_000;

/// Starts the retry run `run_id` of one job on a thread of its own, as
/// `dlq retry --exec` would run it, on the items leased to it.
fn start_retry(
    app: &super::app::App,
    exec: &Exec,
    job_id: &str,
    run_id: &str,
) -> Result<StartedRun, Failure> {
    let job_id = job_id.to_string();
    let run_id = run_id.to_string();
    let options = RetryOptions::new(job_id.clone())
        .run_id(run_id.clone())
        .leased_in_advance()
        .parallel(exec.parallel)
        .max_retries(exec.max_retries)
        .parameters(serde_json::json!({
            "started_by": "dlq serve",
            "exec": exec.command,
            "parallel": exec.parallel,
            "max_retries": exec.max_retries,
        }));
    debug_assert_eq!(options.lease.as_millis(), LEASE_MS as u128);
    options.validate()?;
    let handler = CommandHandler::new(&exec.command, exec.timeout, &std::env::temp_dir())?;
    let control = Arc::new(RunControl::default());
    let progress = Arc::new(Mutex::new(None));
    let ended = Arc::new(Mutex::new(None));
    let dlq = app.dlq.clone();
    let thread = {
        let (control, progress, ended) = (control.clone(), progress.clone(), ended.clone());
        std::thread::Builder::new()
            .name(format!("retry {run_id}"))
            .spawn(move || {
                let result = retry(&dlq, &options, &handler, &control, |p: &Progress| {
                    if let Ok(mut slot) = progress.lock() {
                        *slot = Some(*p);
                    }
                });
                if let Ok(mut slot) = ended.lock() {
                    *slot = Some(result.map(|_| ()).map_err(|e| e.to_string()));
                }
            })
            .map_err(|e| {
                Failure::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("cannot start a retry: {e}"),
                )
            })?
    };
    let started = StartedRun {
        run_id: run_id.clone(),
        job_id: job_id.clone(),
    };
    if let Ok(mut runs) = app.runs.lock() {
        // Runs that have ended are in retry_runs with their counts; only
        // the ones under way need following here.
        runs.retain_mut(|run| {
            let ended = run.ended.lock().map(|e| e.is_some()).unwrap_or(true);
            if ended {
                if let Some(thread) = run.thread.take() {
                    let _ = thread.join();
                }
            }
            !ended
        });
        runs.push(LiveRun {
            run_id,
            control,
            progress,
            ended,
            thread: Some(thread),
        });
    }
    Ok(started)
}

/// Stops every run this server started (no new items; running commands
/// finish) and waits for them to give their items back.
pub fn stop_runs(app: &super::app::App, deadline: std::time::Instant) {
    let threads: Vec<_> = match app.runs.lock() {
        Ok(mut runs) => runs
            .iter_mut()
            .filter_map(|run| {
                run.control.stop();
                run.thread.take()
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    // A supervisor sends one SIGTERM and expects an exit: commands still
    // running at the deadline are killed (their items stay, with no
    // failure recorded for a kill the run made itself).
    while threads.iter().any(|t| !t.is_finished()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if threads.iter().any(|t| !t.is_finished()) {
        eprintln!("dlq serve: killing the retry commands still running at the end of the grace");
        kill_runs(app);
    }
    for thread in threads {
        let _ = thread.join();
    }
}

/// How many runs this server started are still under way.
pub fn running(app: &super::app::App) -> usize {
    app.runs
        .lock()
        .map(|runs| {
            runs.iter()
                .filter(|r| r.ended.lock().map(|e| e.is_none()).unwrap_or(false))
                .count()
        })
        .unwrap_or(0)
}

/// Kills the running commands of every run this server started.
pub fn kill_runs(app: &super::app::App) {
    if let Ok(runs) = app.runs.lock() {
        for run in runs.iter() {
            run.control.kill();
        }
    }
}

/// The body of `POST /api/actions`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApiRequest {
    action: String,
    #[serde(default)]
    items: Option<Vec<(String, String)>>,
    #[serde(default)]
    filter: Option<String>,
    #[serde(default)]
    job_id: Option<String>,
    #[serde(default)]
    dry_run: bool,
    /// The token a dry run answered: act on exactly those rows.
    #[serde(default)]
    selection: Option<String>,
    /// For "mark": the flags to set (at least one).
    #[serde(default)]
    reprocess_eligible: Option<bool>,
    #[serde(default)]
    manual_review_required: Option<bool>,
}

/// `POST /api/actions`: a JSON plan; answers the count it did or would
/// touch.
pub async fn api(State(app): State<Shared>, body: Bytes) -> Result<Response, ApiError> {
    let request: ApiRequest = serde_json::from_slice(&body)
        .map_err(|e| Failure::bad_request(format!("malformed JSON body: {e}")))?;
    let action = match request.action.as_str() {
        "mark" => {
            if request.reprocess_eligible.is_none() && request.manual_review_required.is_none() {
                return Err(Failure::bad_request(
                    "mark what? give reprocess_eligible and/or manual_review_required",
                )
                .into());
            }
            Action::Mark(MarkRequest {
                reprocess_eligible: request.reprocess_eligible,
                manual_review_required: request.manual_review_required,
            })
        }
        "delete" => Action::Delete,
        "retry" => Action::Retry,
        other => {
            return Err(Failure::bad_request(format!(
                "unknown action {other:?}: mark, delete or retry"
            ))
            .into())
        }
    };
    if !matches!(action, Action::Mark(_))
        && (request.reprocess_eligible.is_some() || request.manual_review_required.is_some())
    {
        return Err(Failure::bad_request("the flags go with action \"mark\" only").into());
    }
    let items = match (request.items, request.filter) {
        (Some(_), Some(_)) => {
            return Err(Failure::bad_request("give items or filter, not both").into())
        }
        (Some(pairs), None) => {
            if request.job_id.is_some() {
                return Err(
                    Failure::bad_request("job_id goes with filter; items name their jobs").into(),
                );
            }
            Items::Named(pairs)
        }
        (None, Some(filter)) => Items::Search {
            job_id: request.job_id,
            filter,
        },
        (None, None) => {
            return Err(Failure::bad_request(
                "which items? give items: [[job_id, item_id], ...] or filter (\"\" for all)",
            )
            .into())
        }
    };
    let plan = Plan { action, items };
    let (dry_run, selection) = (request.dry_run, request.selection);
    let turn = app.heavy.clone().acquire_owned().await.ok();
    let outcome = blocking(&app, move |app| {
        let _turn = turn;
        perform(app, &plan, dry_run, selection.as_deref())
    })
    .await?;
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string(&outcome).unwrap_or_default(),
    )
        .into_response())
}

/// A local path to go back to: anything else (another site, `//host`)
/// becomes the overview.
pub fn local(back: Option<&str>) -> String {
    match back {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && !path.contains('\\')
                && !path.chars().any(char::is_control) =>
        {
            path.to_string()
        }
        _ => "/".to_string(),
    }
}

/// `POST /action`: the pages' forms. Marks of chosen items apply at once;
/// a delete, a retry or anything on a whole search is counted and shown for
/// confirmation first, and the confirmation acts on exactly what it showed.
pub async fn form(State(app): State<Shared>, body: Bytes) -> Result<Response, PageError> {
    let form = Params::parse(Some(
        std::str::from_utf8(&body).map_err(|_| Failure::bad_request("the form is not UTF-8"))?,
    ));
    let csrf_ok = form.get("csrf").is_some_and(|c| c == app.csrf);
    if !csrf_ok {
        return Err(Failure::forbidden(
            "missing or wrong CSRF token: reload the page and try again",
        )
        .into());
    }
    // A read-only dashboard shows no buttons; a form posted anyway (an old
    // page, a hand-made request) is refused at once rather than answered
    // with a confirmation whose button can only fail.
    if app.read_only {
        return Err(Failure::forbidden("the dashboard is read-only: no changes").into());
    }
    let (code, scope) = form
        .get("do")
        .and_then(|d| d.split_once(':'))
        .ok_or_else(|| Failure::bad_request("no action chosen"))?;
    let action = Action::from_code(code)?;
    let job_id = form.get("job").map(str::to_string);
    let filter = form.get("q").unwrap_or("").to_string();
    let items = match scope {
        "all" => Items::Search { job_id, filter },
        "selected" => {
            let mut pairs = Vec::new();
            for value in form.all("item") {
                let pair: (String, String) = serde_json::from_str(value)
                    .map_err(|_| Failure::bad_request("a chosen item is not [job_id, item_id]"))?;
                pairs.push(pair);
            }
            if pairs.is_empty() {
                return Err(Failure::bad_request("no items chosen: tick some first").into());
            }
            Items::Named(pairs)
        }
        other => return Err(Failure::bad_request(format!("unknown scope {other:?}")).into()),
    };
    let back = local(form.get("back"));
    let plan = Plan { action, items };
    let confirmed = form.get("confirm") == Some("1");
    let immediate = matches!(plan.action, Action::Mark(_)) && scope == "selected";
    let selection = form.get("selection").map(str::to_string);
    let plan_for_page = plan.clone();
    let form_for_page = form.clone();
    let turn = app.heavy.clone().acquire_owned().await.ok();
    let result = blocking(&app, move |app| {
        let _turn = turn;
        if confirmed || immediate {
            match perform(app, &plan, false, selection.as_deref()) {
                Ok(done) => Ok(Err(done)),
                Err(e) if e.status == StatusCode::CONFLICT => {
                    // The search changed under the confirmation: count
                    // again and ask again.
                    let again = perform(app, &plan, true, None)?;
                    Ok(Ok((again, Some(e.message), app.dlq.last_event_id()?)))
                }
                Err(e) => Err(e),
            }
        } else {
            let counted = perform(app, &plan, true, None)?;
            Ok(Ok((counted, None, app.dlq.last_event_id()?)))
        }
    })
    .await?;
    match result {
        Ok((counted, notice, last_event)) => Ok(pages::confirm(
            &app,
            last_event,
            &plan_for_page,
            &counted,
            notice.as_deref(),
            &form_for_page,
            &back,
        )
        .into_response()),
        Err(done) => {
            let note = match plan_for_page.action {
                Action::Retry if done.runs.is_empty() => "nothing to retry".to_string(),
                Action::Retry => format!(
                    "retrying {} item{} in {} run{}",
                    done.count,
                    if done.count == 1 { "" } else { "s" },
                    done.runs.len(),
                    if done.runs.len() == 1 { "" } else { "s" }
                ),
                action => format!(
                    "{}: {} item{}",
                    action.verb(),
                    done.count,
                    if done.count == 1 { "" } else { "s" }
                ),
            };
            let target = match (&plan_for_page.action, &plan_for_page.items) {
                (Action::Retry, _) => "/runs".to_string(),
                // The item page of an item just deleted would be a 404:
                // back to its job's items instead.
                (Action::Delete, Items::Named(pairs)) if back.starts_with("/item?") => {
                    format!(
                        "/items{}",
                        query(&[("job", pairs.first().map(|p| p.0.as_str()))])
                    )
                }
                _ => back,
            };
            let separator = if target.contains('?') { '&' } else { '?' };
            let location = format!(
                "{target}{separator}{}",
                &query(&[("note", Some(&note))])[1..]
            );
            Ok((StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response())
        }
    }
}
