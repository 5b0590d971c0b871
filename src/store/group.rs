//! Group commit: how the adds of one process's threads become one
//! transaction and one durable sync.
//!
//! A commit costs one fsync of the WAL (synchronous=FULL: a returned add
//! survives a power cut), about a millisecond here, and writers take turns,
//! so eight threads adding one item at a time each paid for the fsyncs of
//! the seven before them: less throughput than one thread, p99 in the
//! hundreds of milliseconds. Instead, an add joins a queue; whichever
//! waiting caller finds no group being committed leads the next one: it
//! takes everything queued (in arrival order, up to [`GROUP_MAX_ITEMS`]),
//! commits it in one transaction and hands each caller its own result.
//! There is no writer thread to start or stop: the callers themselves
//! commit, one group at a time, in FIFO order.
//!
//! Each add waits until a deadline (its own timeout, or the handle's busy
//! timeout): queued past it, it leaves the queue with
//! [`crate::ErrorKind::Busy`]; a group waits for the lock (this process's
//! write turn, then SQLite's lock against other processes) until the
//! earliest deadline in it, after which the adds whose time is up fail and
//! the rest go back to the head of the queue.
//!
//! A failed add must not fail its neighbours: when a group's transaction
//! fails for another reason than the lock, each add in it is tried again
//! alone and gets its own result.

use super::{AddReport, Dlq, WriteTx};
use crate::db::lock_ignoring_poison;
use crate::error::{Error, ErrorKind, Result};
use crate::model::DeadLetteredItem;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The most items one group commits (whole adds: an `add_many` larger than
/// this is a group of its own). Bounds how long the adds queued behind a
/// group wait for it.
const GROUP_MAX_ITEMS: usize = 1_000;

/// The queue of adds and whether a group is being committed.
#[derive(Debug, Default)]
pub(super) struct Committer {
    state: Mutex<State>,
    /// Signalled when a group is done (results set, leadership free).
    done: Condvar,
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Arc<Request>>,
    leading: bool,
}

/// One caller's add (one item, or an `add_many`: all or nothing).
#[derive(Debug)]
struct Request {
    job_id: String,
    items: Vec<DeadLetteredItem>,
    deadline: Instant,
    result: Mutex<Option<Result<Vec<AddReport>>>>,
}

impl Request {
    fn finish(&self, result: Result<Vec<AddReport>>) {
        *lock_ignoring_poison(&self.result) = Some(result);
    }

    fn take_result(&self) -> Option<Result<Vec<AddReport>>> {
        lock_ignoring_poison(&self.result).take()
    }
}

/// Clears the leader's mark when its group is done, also when committing
/// panicked: the adds it left without a result fail instead of waiting
/// forever, and the next caller can lead.
struct Leading<'a> {
    committer: &'a Committer,
    group: Vec<Arc<Request>>,
    /// Adds to put back at the head of the queue (lock not had in time).
    again: Vec<Arc<Request>>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        for request in &self.group {
            let mut result = lock_ignoring_poison(&request.result);
            if result.is_none() && !self.again.iter().any(|r| Arc::ptr_eq(r, request)) {
                *result = Some(Err(Error::internal("the add committing this add's group")));
            }
        }
        let mut state = lock_ignoring_poison(&self.committer.state);
        for request in self.again.drain(..).rev() {
            state.queue.push_front(request);
        }
        state.leading = false;
        self.committer.done.notify_all();
    }
}

impl Committer {
    /// Queues an add and returns its result, committing groups (this one's
    /// or the ones before it) whenever no other caller is.
    fn submit(&self, dlq: &Dlq, request: Request) -> Result<Vec<AddReport>> {
        let request = Arc::new(request);
        let mut state = lock_ignoring_poison(&self.state);
        state.queue.push_back(Arc::clone(&request));
        loop {
            if let Some(result) = request.take_result() {
                return result;
            }
            if !state.leading {
                state.leading = true;
                let group = next_group(&mut state.queue);
                drop(state);
                let mut leading = Leading {
                    committer: self,
                    group,
                    again: Vec::new(),
                };
                leading.again = dlq.commit_group(&leading.group);
                if leading.again.len() == leading.group.len() {
                    // The lock failed with everyone's time still ahead
                    // (SQLite can report busy at once): do not spin on it.
                    std::thread::sleep(Duration::from_millis(5));
                }
                drop(leading);
                state = lock_ignoring_poison(&self.state);
                continue;
            }
            let now = Instant::now();
            let wait = if now < request.deadline {
                request.deadline - now
            } else if let Some(at) = state.queue.iter().position(|r| Arc::ptr_eq(r, &request)) {
                state.queue.remove(at);
                return Err(dlq.timed_out());
            } else {
                // In the group being committed, whose wait for the lock
                // ends at its earliest deadline: the result comes soon.
                Duration::from_millis(100)
            };
            state = match self.done.wait_timeout(state, wait) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// The adds at the head of the queue, up to [`GROUP_MAX_ITEMS`] items (at
/// least one add).
fn next_group(queue: &mut VecDeque<Arc<Request>>) -> Vec<Arc<Request>> {
    let mut items = 0;
    let mut group = Vec::new();
    while let Some(next) = queue.front() {
        if !group.is_empty() && items + next.items.len() > GROUP_MAX_ITEMS {
            break;
        }
        items += next.items.len();
        group.extend(queue.pop_front());
    }
    group
}

/// One request's adds inside a transaction; evictions they make are
/// reported with the request's last add.
fn add_request(tx: &mut WriteTx<'_>, request: &Request) -> Result<Vec<AddReport>> {
    // One item added is one the caller must find again (Dlq::add, the
    // Prodigy adapter): a full job makes room with its oldest other item.
    tx.keep_added(request.items.len() == 1);
    let mut reports = Vec::with_capacity(request.items.len());
    for item in &request.items {
        reports.push(tx.add(&request.job_id, None, item)?);
    }
    let evicted = tx.settle_evictions()?;
    if let Some(last) = reports.last_mut() {
        last.evicted.extend(evicted);
    }
    Ok(reports)
}

impl Dlq {
    /// Adds one item to a job: inserts it, or merges it into the copy
    /// already there (see [`crate::model::merge`]); capacity is enforced in
    /// the same transaction. Adds from several threads are committed
    /// together (see the module docs), in the order they arrived; when this
    /// returns Ok the add is durable. Waits for the lock at most the busy
    /// timeout ([`crate::OpenOptions::busy_timeout`]), then fails with
    /// [`ErrorKind::Busy`].
    pub fn add(&self, job_id: &str, item: &DeadLetteredItem) -> Result<AddReport> {
        let deadline = deadline_after(self.busy);
        self.add_until(job_id, std::slice::from_ref(item), deadline)
            .map(single)
    }

    /// [`Dlq::add`] that waits at most `timeout` for its turn, then fails
    /// with [`ErrorKind::Busy`] having stored nothing.
    pub fn add_timeout(
        &self,
        job_id: &str,
        item: &DeadLetteredItem,
        timeout: Duration,
    ) -> Result<AddReport> {
        let deadline = deadline_after(timeout);
        self.add_until(job_id, std::slice::from_ref(item), deadline)
            .map(single)
    }

    /// Adds several items to a job in one transaction: all of them or, on
    /// any error, none. One report per item, in order.
    pub fn add_many(&self, job_id: &str, items: &[DeadLetteredItem]) -> Result<Vec<AddReport>> {
        let deadline = deadline_after(self.busy);
        self.add_until(job_id, items, deadline)
    }

    fn add_until(
        &self,
        job_id: &str,
        items: &[DeadLetteredItem],
        deadline: Instant,
    ) -> Result<Vec<AddReport>> {
        // Bad input fails here, alone, before it can fail a group.
        crate::model::check_id(job_id)
            .map_err(|reason| Error::invalid_argument("job id", reason))?;
        for item in items {
            item.validate()?;
        }
        if items.is_empty() {
            return Ok(Vec::new());
        }
        self.committer.submit(
            self,
            Request {
                job_id: job_id.to_string(),
                items: items.to_vec(),
                deadline,
                result: Mutex::new(None),
            },
        )
    }

    /// Commits one group; returns the adds to queue again (the lock was not
    /// had before the earliest deadline, and theirs is still ahead).
    fn commit_group(&self, group: &[Arc<Request>]) -> Vec<Arc<Request>> {
        let Some(deadline) = group.iter().map(|r| r.deadline).min() else {
            return Vec::new();
        };
        let result: Result<Vec<Vec<AddReport>>> = self.write_until(Some(deadline), |tx| {
            // Adds to several jobs take the jobs' row locks (PostgreSQL) in
            // job order, as every multi-job write does: two groups of
            // other processes cannot each hold a job the other waits for.
            let mut jobs: Vec<&str> = group.iter().map(|r| r.job_id.as_str()).collect();
            jobs.sort_unstable();
            jobs.dedup();
            if jobs.len() > 1 {
                for job in jobs {
                    tx.ensure_job(job, None)?;
                }
            }
            group.iter().map(|r| add_request(tx, r)).collect()
        });
        match result {
            Ok(reports) => {
                for (request, reports) in group.iter().zip(reports) {
                    request.finish(Ok(reports));
                }
                Vec::new()
            }
            Err(e) if e.kind() == ErrorKind::Busy => {
                let now = Instant::now();
                let mut again = Vec::new();
                for request in group {
                    if request.deadline <= now {
                        request.finish(Err(self.timed_out()));
                    } else {
                        again.push(Arc::clone(request));
                    }
                }
                again
            }
            Err(e) if group.len() == 1 => {
                group[0].finish(Err(e));
                Vec::new()
            }
            Err(_) => {
                for request in group {
                    let alone =
                        self.write_until(Some(request.deadline), |tx| add_request(tx, request));
                    request.finish(alone);
                }
                Vec::new()
            }
        }
    }

    /// The error of an add whose deadline passed before it had the lock.
    pub(super) fn timed_out(&self) -> Error {
        Error::storage(
            ErrorKind::Busy,
            self.path.as_deref().map(Into::into),
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out waiting for the write lock: the add's deadline (its timeout, or the busy timeout) passed first",
            ),
        )
    }
}

/// Now plus `wait`; a wait too long for the clock (`Duration::MAX`) is a
/// century.
fn deadline_after(wait: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(wait)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}

fn single(mut reports: Vec<AddReport>) -> AddReport {
    // add_until returns one report per item, and these callers gave one.
    reports.pop().unwrap_or(AddReport {
        outcome: super::AddOutcome::Unchanged,
        new_attempts: 0,
        evicted: Vec::new(),
    })
}
