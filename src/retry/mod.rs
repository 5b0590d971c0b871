//! Replaying dead letters: the engine behind `dlq retry`, usable from Rust
//! with a closure as the handler.
//!
//! A run registers itself, then claims items of the job through the database
//! (leases: see `store::leases`) a few at a time in row order, and hands them
//! to `parallel` worker threads. Each worker tries its item up to
//! `max_retries` times with exponential backoff: a success removes the item,
//! a failure appends an attempt to its history. A renewer thread extends the
//! run's leases while it works, so a long command keeps its items, and a run
//! that dies simply stops renewing: its leases expire and another run takes
//! the items. Items are streamed, never all loaded.

pub mod command;
pub(crate) mod pipes;
pub mod requeue;

use crate::error::{Error, Result};
use crate::filter::Expr;
use crate::model::{ErrorType, FailureDetail, Omitted};
use crate::store::{Dlq, JobItem, ListFilter, RunCounts, RunStatus, Succeeded};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What to replay and how. Start from [`RetryOptions::new`] (the same
/// defaults as `dlq retry`) and change what differs:
///
/// ```
/// use dlqlite::retry::RetryOptions;
/// use std::time::Duration;
///
/// let options = RetryOptions::new("nightly")
///     .parallel(8)
///     .max_retries(2)
///     .backoff_base(Duration::from_millis(500));
/// assert_eq!(options.lease, Duration::from_secs(60));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RetryOptions {
    pub job_id: String,
    /// Only items matching this expression.
    pub filter: Option<Expr>,
    /// Only items whose row key is at most this (a counted selection:
    /// nothing stored after it was counted).
    pub max_key: Option<i64>,
    /// Take exactly the items leased to this run before it started
    /// ([`Dlq::lease_selection`]: a confirmed selection), whatever their
    /// flags; `filter`, `max_key` and `force` are then not used.
    pub leased_in_advance: bool,
    /// Also take items that are not eligible for reprocessing.
    pub force: bool,
    /// Worker threads (1 to [`MAX_PARALLEL`]).
    pub parallel: usize,
    /// Attempts per item within this run (1 to [`MAX_RETRIES`]).
    pub max_retries: u32,
    /// At most this many attempt starts per second (`None`, or 0 or less:
    /// no limit).
    pub rate: Option<f64>,
    /// Backoff before attempt k+1 of an item: base * 2^(k-1), capped.
    pub backoff_base: Duration,
    /// How long a claim lasts without renewal ([`MIN_LEASE`] to
    /// [`MAX_LEASE`]).
    pub lease: Duration,
    /// Identifies the run in leases, events and `retry_runs`.
    pub run_id: String,
    /// What the run record keeps as its parameters.
    pub parameters: serde_json::Value,
}

impl Default for RetryOptions {
    /// [`RetryOptions::new`] without a job (set `job_id` before running).
    fn default() -> Self {
        RetryOptions::new("")
    }
}

impl RetryOptions {
    /// Replays `job_id`'s eligible items with `dlq retry`'s defaults: 10
    /// workers, 3 attempts per item, no rate limit, a 200 ms backoff base,
    /// 60 s leases, a fresh run id.
    pub fn new(job_id: impl Into<String>) -> Self {
        RetryOptions {
            job_id: job_id.into(),
            filter: None,
            max_key: None,
            leased_in_advance: false,
            force: false,
            parallel: 10,
            max_retries: 3,
            rate: None,
            backoff_base: Duration::from_millis(200),
            lease: Duration::from_secs(60),
            run_id: new_run_id(),
            parameters: serde_json::Value::Null,
        }
    }

    /// Only items matching this filter expression.
    pub fn filter(mut self, filter: Expr) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Only items whose row key is at most `key`
    /// ([`crate::store::Selection::max_key`]).
    pub fn max_key(mut self, key: i64) -> Self {
        self.max_key = Some(key);
        self
    }

    /// Only the items leased to this run (its `run_id`) before it starts,
    /// with [`Dlq::lease_selection`]: a confirmed selection, taken exactly
    /// (the dashboard's retry). The run renews those leases from its
    /// start; lease them at most a lease before it.
    pub fn leased_in_advance(mut self) -> Self {
        self.leased_in_advance = true;
        self
    }

    /// Also items that are not eligible.
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// Worker threads (1 to [`MAX_PARALLEL`]; [`RetryOptions::validate`]
    /// refuses others).
    pub fn parallel(mut self, workers: usize) -> Self {
        self.parallel = workers;
        self
    }

    /// Attempts per item within this run (1 to [`MAX_RETRIES`]).
    pub fn max_retries(mut self, attempts: u32) -> Self {
        self.max_retries = attempts;
        self
    }

    /// At most this many attempt starts per second.
    pub fn rate(mut self, per_second: f64) -> Self {
        self.rate = Some(per_second);
        self
    }

    pub fn backoff_base(mut self, base: Duration) -> Self {
        self.backoff_base = base;
        self
    }

    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = run_id.into();
        self
    }

    /// What the run record keeps as the run's parameters.
    pub fn parameters(mut self, parameters: serde_json::Value) -> Self {
        self.parameters = parameters;
        self
    }

    /// Checks every option against its range; [`retry`] runs nothing
    /// before this passes, and `dlq retry` parses its flags with the same
    /// bounds. An [`crate::ErrorKind::InvalidInput`] error names the
    /// option.
    pub fn validate(&self) -> Result<()> {
        let invalid = |what: &str, why: String| Err(Error::invalid_argument(what, why));
        crate::model::check_id(&self.job_id)
            .map_err(|reason| Error::invalid_argument("job id", reason))?;
        if self.run_id.trim().is_empty() {
            return invalid("run id", "is empty".to_string());
        }
        if !(1..=MAX_PARALLEL).contains(&self.parallel) {
            return invalid(
                "parallel",
                format!("{} is not 1 to {MAX_PARALLEL}", self.parallel),
            );
        }
        if !(1..=MAX_RETRIES).contains(&self.max_retries) {
            return invalid(
                "max retries",
                format!("{} is not 1 to {MAX_RETRIES}", self.max_retries),
            );
        }
        if !(MIN_LEASE..=MAX_LEASE).contains(&self.lease) {
            return invalid(
                "lease",
                format!(
                    "{:?} is not {} s to {} s",
                    self.lease,
                    MIN_LEASE.as_secs(),
                    MAX_LEASE.as_secs()
                ),
            );
        }
        if self.rate.is_some_and(|rate| !rate.is_finite()) {
            return invalid("rate", "is not a finite number".to_string());
        }
        Ok(())
    }
}

/// The most workers a run starts (`dlq retry --parallel` takes the same
/// range): a larger number would only be threads waiting for the lock.
pub const MAX_PARALLEL: usize = 1024;
/// The most attempts per item one run makes.
pub const MAX_RETRIES: u32 = 1000;
/// The shortest lease: renewed every third of it, shorter would be all
/// renewals.
pub const MIN_LEASE: Duration = Duration::from_secs(1);
/// The longest lease (30 days): a crashed run's items come back within it.
pub const MAX_LEASE: Duration = Duration::from_secs(30 * 86_400);

/// The longest backoff between two attempts of one item.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The wait before attempt `number` (2 and up) of one item in a run:
/// `base`, doubling with each attempt, never more than [`MAX_BACKOFF`].
pub fn backoff_before(base: Duration, number: u32) -> Duration {
    let doublings = number.saturating_sub(2).min(16);
    base.saturating_mul(1 << doublings).min(MAX_BACKOFF)
}

/// How an attempt ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    Success,
    Failure(AttemptFailure),
}

/// A failed attempt, as it goes into the item's history.
#[derive(Clone, Debug)]
pub struct AttemptFailure {
    pub error_type: ErrorType,
    pub error_message: String,
    /// Lines about the attempt beyond its message (the legacy
    /// `error_context`): `dlq retry --exec` notes here a result file it
    /// ignored.
    pub error_context: Option<Vec<String>>,
    pub stack_trace: Option<String>,
    pub step_failed: String,
}

/// What a handler gets for one attempt.
pub struct Attempt<'a> {
    pub item: &'a JobItem,
    /// 1-based, within this run.
    pub number: u32,
    /// Set when the run is told to kill running attempts (second Ctrl-C).
    pub control: &'a RunControl,
}

/// Replays one item once. Implemented for closures, so a Rust orchestrator
/// replays without a subprocess.
pub trait Handler: Sync {
    fn attempt(&self, attempt: &Attempt<'_>) -> Outcome;
}

impl<F: Fn(&Attempt<'_>) -> Outcome + Sync> Handler for F {
    fn attempt(&self, attempt: &Attempt<'_>) -> Outcome {
        self(attempt)
    }
}

/// Stopping a run from outside (Ctrl-C): first stop claiming, then kill.
#[derive(Default)]
pub struct RunControl {
    stop: AtomicBool,
    kill: AtomicBool,
    wake: (Mutex<()>, Condvar),
    /// Process groups of running commands, for killing.
    pub(crate) running: Mutex<Vec<i32>>,
}

impl RunControl {
    /// Stop taking new items; running attempts finish, no new attempts start.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.1.notify_all();
    }

    /// Also kill the commands that are running.
    pub fn kill(&self) {
        self.stop();
        self.kill.store(true, Ordering::SeqCst);
        command::kill_all(self);
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    pub fn killing(&self) -> bool {
        self.kill.load(Ordering::SeqCst)
    }

    /// Sleeps up to `duration`, waking early when the run is stopped.
    fn sleep(&self, duration: Duration) {
        let deadline = Instant::now() + duration;
        let mut guard = match self.wake.0.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        while !self.stopping() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            guard = match self.wake.1.wait_timeout(guard, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// Progress, for a progress line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub succeeded: u64,
    pub failed: u64,
    /// Removed or taken over while tried (see [`RetrySummary::lost`]).
    pub lost: u64,
    pub running: u64,
    /// The items the run found to try when it started (items added
    /// meanwhile can take `succeeded + failed + lost` past it).
    pub total: u64,
    pub elapsed: Duration,
}

/// What a run did.
#[derive(Clone, Debug, Serialize)]
pub struct RetrySummary {
    pub run_id: String,
    pub job_id: String,
    #[serde(flatten)]
    pub counts: RunCounts,
    /// Items tried whose lease was lost before their outcome was recorded:
    /// removed meanwhile (purge, clear, requeue --take, by hand) or, after
    /// their lease expired, taken by another run. `attempted` is always
    /// `succeeded + failed + lost`.
    pub lost: u64,
    /// Items whose command succeeded (counted in `succeeded`) but that
    /// changed since the retry read them, a failure merged in meanwhile:
    /// kept in the DLQ, since the success was for an older state of them.
    pub kept_changed: u64,
    /// Items of the selection still in the DLQ after the run.
    pub remaining: u64,
    pub interrupted: bool,
    pub duration_ms: u64,
}

#[derive(Default)]
struct Shared {
    /// The items to try, counted at the start (for progress only).
    total: u64,
    lost: AtomicU64,
    kept: AtomicU64,
    attempted: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    attempts: AtomicU64,
    running: AtomicU64,
}

/// The longest wait between two starts that `rate` can ask for.
const MAX_INTERVAL: Duration = Duration::from_secs(86_400);

/// Starts spaced `1/rate` seconds apart.
struct RateLimit {
    interval: Option<Duration>,
    next: Mutex<Instant>,
}

impl RateLimit {
    /// `rate` starts per second; none (or 0 or less) is no limit.
    fn new(rate: Option<f64>) -> Self {
        RateLimit {
            interval: rate
                .filter(|r| *r > 0.0)
                // At most a day apart: a tiny rate must not overflow an Instant.
                .map(|r| Duration::try_from_secs_f64(1.0 / r).unwrap_or(MAX_INTERVAL))
                .map(|interval| interval.min(MAX_INTERVAL)),
            next: Mutex::new(Instant::now()),
        }
    }

    fn wait(&self, control: &RunControl) {
        let Some(interval) = self.interval else {
            return;
        };
        let start = {
            let mut next = match self.next.lock() {
                Ok(next) => next,
                Err(poisoned) => poisoned.into_inner(),
            };
            let now = Instant::now();
            let start = (*next).max(now);
            *next = start + interval;
            start
        };
        let now = Instant::now();
        if start > now {
            control.sleep(start - now);
        }
    }
}

/// The selection a run works on: the job, the filter, eligibility.
fn selection(options: &RetryOptions, eligible: Option<bool>) -> ListFilter {
    if options.leased_in_advance {
        return ListFilter {
            job_id: Some(options.job_id.clone()),
            leased_to: Some(options.run_id.clone()),
            ..ListFilter::default()
        };
    }
    ListFilter {
        job_id: Some(options.job_id.clone()),
        eligible,
        expression: options.filter.clone(),
        max_key: options.max_key,
        ..ListFilter::default()
    }
}

/// The items a run would take, without taking them (`--dry-run`), and how
/// many it would skip as ineligible.
pub fn preview(
    dlq: &Dlq,
    options: &RetryOptions,
    limit: usize,
) -> Result<(Vec<crate::store::ItemSummary>, u64, u64)> {
    let take = selection(options, if options.force { None } else { Some(true) });
    let total = dlq.count_matching(&take)?;
    // A set leased in advance was chosen whole: nothing in it is skipped.
    let skipped = if options.force || options.leased_in_advance {
        0
    } else {
        dlq.count_matching(&selection(options, Some(false)))?
    };
    let items = dlq
        .list_newest(take)
        .take(limit)
        .collect::<Result<Vec<_>>>()?;
    Ok((items, total, skipped))
}

/// Replays the job's items through `handler`: records the run, starts
/// [`RetryOptions::parallel`] workers and a lease renewer, feeds the
/// workers claimed items until none are left (or the run is stopped), then
/// gives back what the run still holds and records how it ended.
pub fn retry(
    dlq: &Dlq,
    options: &RetryOptions,
    handler: &dyn Handler,
    control: &RunControl,
    mut progress: impl FnMut(&Progress),
) -> Result<RetrySummary> {
    let started = Instant::now();
    let (take, skipped, total) = start_run(dlq, options)?;
    let shared = Shared {
        total,
        ..Shared::default()
    };
    // Once at the start: the total is known before the first outcome.
    progress(&snapshot(&shared, started));
    let rate = RateLimit::new(options.rate);
    let renewer = Renewer::default();
    let (work_tx, work_rx) = mpsc::sync_channel::<i64>(options.parallel);
    let work_rx = Mutex::new(work_rx);
    let (done_tx, done_rx) = mpsc::channel::<Result<()>>();
    let mut results = Results {
        done: done_rx,
        in_flight: 0,
        failure: None,
        control,
        shared: &shared,
        started,
        last_progress: Instant::now(),
        progress: &mut progress,
    };
    let outcome: Result<()> = std::thread::scope(|scope| {
        scope.spawn(|| renewer.run(dlq, options));
        scope.spawn(|| renewer.guard(options, control, &shared));
        let run = Run {
            dlq,
            options,
            handler,
            control,
            shared: &shared,
            rate: &rate,
        };
        let workers: Vec<_> = (0..options.parallel)
            .map(|_| {
                let done = done_tx.clone();
                let work_rx = &work_rx;
                scope.spawn(move || work(run, work_rx, done))
            })
            .collect();
        drop(done_tx);
        claim_and_feed(dlq, options, &take, work_tx, &mut results, &renewer);
        results.drain();
        for worker in workers {
            let _ = worker.join();
        }
        renewer.stop();
        // A lapse explains whatever failed after it (the workers' writes
        // wait for the same lock).
        match crate::db::lock_ignoring_poison(&renewer.lapsed).take() {
            Some(e) => Err(e),
            None => results.failure.take().map_or(Ok(()), Err),
        }
    });
    let summary = end_run(
        dlq, options, &shared, &take, skipped, outcome, control, started,
    )?;
    progress(&snapshot(&shared, started));
    Ok(summary)
}

/// Checks the options and the job, records the run, and says what it takes
/// and how many ineligible items it leaves (with `force`, none).
/// Also counts what it will try, for the progress reports.
fn start_run(dlq: &Dlq, options: &RetryOptions) -> Result<(ListFilter, u64, u64)> {
    options.validate()?;
    dlq.require_job(&options.job_id)?;
    dlq.register_run(
        &options.run_id,
        &options.job_id,
        &hostname(),
        std::process::id(),
        &options.parameters,
    )?;
    let take = selection(options, if options.force { None } else { Some(true) });
    // A set leased in advance was chosen whole: nothing in it is skipped.
    let skipped = if options.force || options.leased_in_advance {
        0
    } else {
        dlq.count_matching(&selection(options, Some(false)))?
    };
    let total = dlq.count_matching(&take)?;
    Ok((take, skipped, total))
}

/// When a lease taken now ends.
fn lease_until(dlq: &Dlq, lease: Duration) -> crate::time::Timestamp {
    dlq.now()
        .plus_millis(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX))
}

/// Keeps the run's leases (and its heartbeat) alive, and makes sure no
/// command of the run outlives a lease it holds.
///
/// Renewals happen every third of a lease. One can fail or wait: another
/// writer may hold the database's write lock longer than a lease (a big
/// `dlq add`, a purge, an operator's `sqlite3` transaction). Then the
/// renewer keeps trying, and a guard that never touches the database
/// watches the time: once less than [`LEASE_MARGIN`] of the last secured
/// lease is left, it kills the run's commands and stops the run, before
/// another run could take the items and start them a second time.
#[derive(Default)]
struct Renewer {
    done: AtomicBool,
    wake: (Mutex<()>, Condvar),
    /// Until when every lease of the run holds for sure: when the last
    /// renewal that went through (or the run) started, plus a lease. Items
    /// claimed later hold longer.
    secured: Mutex<Option<Instant>>,
    /// Why the last renewal failed, while renewals fail.
    failing: Mutex<Option<String>>,
    /// Set when the guard stopped the run.
    lapsed: Mutex<Option<Error>>,
}

/// The part of a lease left when a run whose renewals fail kills its
/// commands: a sixth (10 s of the default 60 s lease). Renewals come every
/// third, so a run only gets there after its renewals failed for half a
/// lease.
pub const LEASE_MARGIN: u32 = 6;

impl Renewer {
    fn run(&self, dlq: &Dlq, options: &RetryOptions) {
        let retry_every =
            (options.lease / 12).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let mut wait = options.lease / 3;
        while self.sleep(wait) {
            let started = Instant::now();
            match dlq.renew_leases(&options.run_id, lease_until(dlq, options.lease)) {
                Ok(_) => {
                    *crate::db::lock_ignoring_poison(&self.secured) = Some(started + options.lease);
                    *crate::db::lock_ignoring_poison(&self.failing) = None;
                    wait = options.lease / 3;
                }
                Err(e) => {
                    *crate::db::lock_ignoring_poison(&self.failing) = Some(e.to_string());
                    wait = retry_every;
                }
            }
        }
    }

    /// Notes a claim about to be made at `asked`: until a renewal goes
    /// through, the run's leases hold until its first claim's end.
    fn claiming(&self, asked: Instant, lease: Duration) {
        let mut secured = crate::db::lock_ignoring_poison(&self.secured);
        if secured.is_none() {
            *secured = Some(asked + lease);
        }
    }

    /// Kills the run's commands (and stops it) once its leases are about
    /// to run out unrenewed. Before its first claim a run holds nothing.
    fn guard(&self, options: &RetryOptions, control: &RunControl, shared: &Shared) {
        let margin = options.lease / LEASE_MARGIN;
        let tick =
            (options.lease / 20).clamp(Duration::from_millis(10), Duration::from_millis(500));
        while self.sleep(tick) {
            let Some(secured) = *crate::db::lock_ignoring_poison(&self.secured) else {
                continue;
            };
            if Instant::now() + margin < secured {
                continue;
            }
            let running = shared.running.load(Ordering::SeqCst);
            control.kill();
            let reason = crate::db::lock_ignoring_poison(&self.failing)
                .clone()
                .unwrap_or_else(|| "the renewal did not return".to_string());
            *crate::db::lock_ignoring_poison(&self.lapsed) = Some(Error::LeasesLapsing {
                unrenewed: (options.lease - margin).as_secs_f64(),
                reason,
                running,
            });
            return;
        }
    }

    /// Waits `wait` unless stopped first; false once stopped.
    fn sleep(&self, wait: Duration) -> bool {
        let guard = crate::db::lock_ignoring_poison(&self.wake.0);
        let _unused = self
            .wake
            .1
            .wait_timeout_while(guard, wait, |_| !self.done.load(Ordering::SeqCst));
        !self.done.load(Ordering::SeqCst)
    }

    fn stop(&self) {
        self.done.store(true, Ordering::SeqCst);
        self.wake.1.notify_all();
    }
}

/// What every worker of a run shares, borrowed from [`retry`].
#[derive(Clone, Copy)]
struct Run<'a> {
    dlq: &'a Dlq,
    options: &'a RetryOptions,
    handler: &'a dyn Handler,
    control: &'a RunControl,
    shared: &'a Shared,
    rate: &'a RateLimit,
}

/// One worker: tries the items whose keys it receives until the channel
/// closes, and reports each outcome.
fn work(run: Run<'_>, keys: &Mutex<mpsc::Receiver<i64>>, done: mpsc::Sender<Result<()>>) {
    let shared = run.shared;
    loop {
        let Ok(key) = crate::db::lock_ignoring_poison(keys).recv() else {
            return;
        };
        shared.running.fetch_add(1, Ordering::SeqCst);
        let result = work_item(run, key);
        shared.running.fetch_sub(1, Ordering::SeqCst);
        if done.send(result).is_err() {
            return;
        }
    }
}

/// The workers' outcomes as they come: how many items are out, the first
/// failure (which stops the run), and progress reports at most every
/// 200 ms.
struct Results<'a> {
    done: mpsc::Receiver<Result<()>>,
    in_flight: usize,
    failure: Option<crate::error::Error>,
    control: &'a RunControl,
    shared: &'a Shared,
    started: Instant,
    last_progress: Instant,
    progress: &'a mut dyn FnMut(&Progress),
}

impl Results<'_> {
    fn record(&mut self, result: Result<()>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Err(e) = result {
            self.failure.get_or_insert(e);
            self.control.stop();
        }
        self.tick();
    }

    fn tick(&mut self) {
        if self.last_progress.elapsed() >= Duration::from_millis(200) {
            self.last_progress = Instant::now();
            (self.progress)(&snapshot(self.shared, self.started));
        }
    }

    /// Waits until fewer than `limit` items are out; false when the
    /// workers are gone.
    fn wait_below(&mut self, limit: usize) -> bool {
        while self.in_flight >= limit {
            match self.done.recv() {
                Ok(result) => self.record(result),
                Err(_) => return false,
            }
        }
        true
    }

    /// Every outcome still to come (the workers stop when the work channel
    /// is closed and empty).
    fn drain(&mut self) {
        while let Ok(result) = self.done.recv() {
            self.record(result);
        }
    }
}

/// Claims a worker's worth of items at a time, in row order, and hands
/// them to the workers, keeping the claims at most one round ahead of
/// them. Stops when nothing is left, the run is stopped, or something
/// failed; claimed items not started are given back. Dropping `work` at
/// the end lets the workers finish.
fn claim_and_feed(
    dlq: &Dlq,
    options: &RetryOptions,
    take: &ListFilter,
    work: mpsc::SyncSender<i64>,
    results: &mut Results<'_>,
    renewer: &Renewer,
) {
    let ahead = 2 * options.parallel;
    let mut after = 0;
    while !results.control.stopping() && results.failure.is_none() {
        let room = ahead.saturating_sub(results.in_flight).max(1);
        renewer.claiming(Instant::now(), options.lease);
        let until = lease_until(dlq, options.lease);
        let keys = match dlq.claim(&options.run_id, take, after, room, until) {
            Ok(keys) => keys,
            Err(e) => {
                results.failure = Some(e);
                return;
            }
        };
        let Some(last) = keys.last() else {
            return;
        };
        after = *last;
        for key in keys {
            if results.control.stopping() {
                if let Err(e) = dlq.release_lease(&options.run_id, key) {
                    results.failure = Some(e);
                }
                continue;
            }
            if work.send(key).is_err() {
                return;
            }
            results.in_flight += 1;
            if !results.wait_below(ahead) {
                return;
            }
            results.tick();
        }
    }
}

/// Gives back what the run still holds (whatever happened), records how it
/// ended, and sums it up.
#[allow(clippy::too_many_arguments)] // The run's parts, borrowed from retry().
fn end_run(
    dlq: &Dlq,
    options: &RetryOptions,
    shared: &Shared,
    take: &ListFilter,
    skipped: u64,
    outcome: Result<()>,
    control: &RunControl,
    started: Instant,
) -> Result<RetrySummary> {
    let released = dlq.release_all_leases(&options.run_id);
    let counts = RunCounts {
        attempted: shared.attempted.load(Ordering::SeqCst),
        succeeded: shared.succeeded.load(Ordering::SeqCst),
        failed: shared.failed.load(Ordering::SeqCst),
        skipped,
        attempts: shared.attempts.load(Ordering::SeqCst),
    };
    let interrupted = control.stopping();
    let status = if outcome.is_err() || interrupted {
        RunStatus::Interrupted
    } else {
        RunStatus::Finished
    };
    dlq.finish_run(&options.run_id, status, &counts)?;
    outcome?;
    released?;
    Ok(RetrySummary {
        run_id: options.run_id.clone(),
        job_id: options.job_id.clone(),
        counts,
        lost: shared.lost.load(Ordering::SeqCst),
        kept_changed: shared.kept.load(Ordering::SeqCst),
        remaining: dlq.count_matching(take)?,
        interrupted,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

fn snapshot(shared: &Shared, started: Instant) -> Progress {
    Progress {
        succeeded: shared.succeeded.load(Ordering::SeqCst),
        failed: shared.failed.load(Ordering::SeqCst),
        lost: shared.lost.load(Ordering::SeqCst),
        running: shared.running.load(Ordering::SeqCst),
        total: shared.total,
        elapsed: started.elapsed(),
    }
}

/// Tries one item up to max_retries times.
fn work_item(run: Run<'_>, key: i64) -> Result<()> {
    let Run {
        dlq,
        options,
        handler,
        control,
        shared,
        rate,
    } = run;
    let Some((item, mut version)) = dlq.leased_item(&options.run_id, key)? else {
        // Removed or taken over since the claim: nothing to do.
        return Ok(());
    };
    let attempts = options.max_retries.max(1);
    for number in 1..=attempts {
        if number > 1 {
            control.sleep(backoff_before(options.backoff_base, number));
        }
        if control.stopping() && number > 1 {
            break;
        }
        rate.wait(control);
        if control.stopping() {
            // Stopped while waiting for the rate limit: nothing more starts.
            if number == 1 {
                return dlq.release_lease(&options.run_id, key);
            }
            break;
        }
        if number == 1 {
            shared.attempted.fetch_add(1, Ordering::SeqCst);
        }
        let started_at = dlq.now();
        let clock = Instant::now();
        shared.attempts.fetch_add(1, Ordering::SeqCst);
        let outcome = handler.attempt(&Attempt {
            item: &item,
            number,
            control,
        });
        let duration_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
        if control.killing() && !matches!(outcome, Outcome::Success) {
            // The run killed its own command (a second Ctrl-C, or leases
            // it could not renew): that is not the item failing again, so
            // no attempt is recorded; the item counts as not retried.
            shared.failed.fetch_add(1, Ordering::SeqCst);
            return dlq.release_lease(&options.run_id, key);
        }
        match outcome {
            Outcome::Success => {
                match dlq.retry_succeeded(&options.run_id, key, version, number, duration_ms)? {
                    Succeeded::Removed => {
                        shared.succeeded.fetch_add(1, Ordering::SeqCst);
                    }
                    Succeeded::KeptChanged => {
                        shared.succeeded.fetch_add(1, Ordering::SeqCst);
                        shared.kept.fetch_add(1, Ordering::SeqCst);
                    }
                    Succeeded::LeaseLost => {
                        shared.lost.fetch_add(1, Ordering::SeqCst);
                    }
                }
                return Ok(());
            }
            Outcome::Failure(failure) => {
                let mut detail = FailureDetail {
                    attempt_number: 0,
                    timestamp: started_at,
                    error_type: failure.error_type,
                    error_message: failure.error_message,
                    error_context: failure.error_context,
                    stack_trace: failure.stack_trace,
                    agent_id: format!("dlq-retry:{}", options.run_id),
                    step_failed: failure.step_failed,
                    duration_ms,
                    json_log_location: None,
                    extra: Default::default(),
                    omitted: Omitted::none(),
                };
                // Written back in the current legacy writer's shape.
                detail.omitted = detail.writer_omitted();
                match dlq.retry_failed(&options.run_id, key, detail)? {
                    // Its own write: the next attempt's success may remove it.
                    Some((_, now)) => version = now,
                    None => {
                        // The lease was lost (the item was removed or expired
                        // and taken): stop working on it.
                        shared.lost.fetch_add(1, Ordering::SeqCst);
                        return Ok(());
                    }
                }
            }
        }
        if control.stopping() {
            break;
        }
    }
    shared.failed.fetch_add(1, Ordering::SeqCst);
    dlq.release_lease(&options.run_id, key)
}

/// This machine's name, for run records.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// A run id unique across processes and machines: host, pid, start time.
pub fn new_run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}:{}:{:x}", hostname(), std::process::id(), nanos)
}

/// Shares a control with a signal handler.
pub type SharedControl = Arc<RunControl>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_base_and_stops_at_the_cap() {
        let ms = Duration::from_millis;
        let base = ms(200);
        assert_eq!(backoff_before(base, 2), ms(200));
        assert_eq!(backoff_before(base, 3), ms(400));
        assert_eq!(backoff_before(base, 4), ms(800));
        assert_eq!(backoff_before(base, 9), ms(200 * 128));
        assert_eq!(backoff_before(base, 10), MAX_BACKOFF, "25.6 s, then 30 s");
        assert_eq!(backoff_before(base, 1_000), MAX_BACKOFF);
        assert_eq!(backoff_before(ms(20_000), 3), MAX_BACKOFF);
        assert_eq!(backoff_before(Duration::ZERO, 50), Duration::ZERO);
        assert_eq!(backoff_before(Duration::MAX, 2), MAX_BACKOFF);
    }

    // Waiting is behaviour here: these tests bound times from below (a slow
    // machine only waits longer), and from above only by a margin of
    // seconds around an event that must cut a long wait short.

    #[test]
    fn sleep_waits_its_time_unless_the_run_stops() {
        let control = RunControl::default();
        let started = Instant::now();
        control.sleep(Duration::from_millis(150));
        assert!(started.elapsed() >= Duration::from_millis(150));
        let control = std::sync::Arc::new(RunControl::default());
        let stopper = {
            let control = control.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                control.stop();
            })
        };
        let started = Instant::now();
        control.sleep(Duration::from_secs(60));
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "stop cut it short"
        );
        assert!(control.stopping() && !control.killing());
        stopper.join().unwrap();
        // Once stopped, a sleep returns at once.
        let started = Instant::now();
        control.sleep(Duration::from_secs(60));
        assert!(started.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn the_rate_limit_spaces_starts_and_none_means_none() {
        let control = RunControl::default();
        let spaced = RateLimit {
            interval: Some(Duration::from_millis(100)),
            next: Mutex::new(Instant::now()),
        };
        let started = Instant::now();
        for _ in 0..5 {
            spaced.wait(&control);
        }
        // The first start is at once, the fifth 4 intervals later.
        assert!(started.elapsed() >= Duration::from_millis(400));
        let free = RateLimit {
            interval: None,
            next: Mutex::new(Instant::now() + Duration::from_secs(3_600)),
        };
        let started = Instant::now();
        free.wait(&control);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no limit, no wait"
        );
        // A stopped run does not wait for its turn.
        let late = RateLimit {
            interval: Some(Duration::from_secs(3_600)),
            next: Mutex::new(Instant::now() + Duration::from_secs(3_600)),
        };
        control.stop();
        let started = Instant::now();
        late.wait(&control);
        assert!(started.elapsed() < Duration::from_secs(30));
    }
}
