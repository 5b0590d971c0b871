//! The SQL of replay: run records, leases (claim, renew, release) and the
//! outcome of an attempt (the item removed, or a new attempt appended). A
//! claim is one UPDATE under the write lock that takes only items nobody
//! holds or whose lease has expired, so two runs never hold one item.

use super::rows;
use super::sql::SqlValue as Value;
use super::sql::{vals, Val};
use super::{Dlq, EventKind, JobItem, ListFilter};
use crate::error::Result;
use crate::model::FailureDetail;
use crate::time::Timestamp;
use serde::Serialize;

/// Counts a run keeps.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct RunCounts {
    /// Items taken and tried.
    pub attempted: u64,
    /// Items that succeeded and were removed.
    pub succeeded: u64,
    /// Items that failed every attempt of this run and stay.
    pub failed: u64,
    /// Items not taken because they are not eligible (without --force).
    pub skipped: u64,
    /// Commands run (attempts), successful or not.
    pub attempts: u64,
}

/// What recording a successful attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[doc(hidden)] // The retry engine's.
pub enum Succeeded {
    /// The item was removed.
    Removed,
    /// The item changed since the retry read it: kept, lease given back.
    KeptChanged,
    /// The run no longer held the item (removed or taken over).
    LeaseLost,
}

/// Where a retry run is: [`RunStatus::Running`] until it ends, then
/// finished or interrupted; a run still marked running whose process is
/// gone (or whose heartbeat stopped) reads as crashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RunStatus {
    Running,
    /// Ended after trying every item it was given.
    Finished,
    /// Stopped early: asked to (Ctrl-C), or an error.
    Interrupted,
    /// Marked running, but its process is gone or its heartbeat stopped.
    Crashed,
}

impl RunStatus {
    /// The name stored in `retry_runs.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Finished => "finished",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Crashed => "crashed",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RunStatus {
    /// The status stored under `name`.
    pub(super) fn from_name(name: &str) -> Option<RunStatus> {
        [
            RunStatus::Running,
            RunStatus::Finished,
            RunStatus::Interrupted,
            RunStatus::Crashed,
        ]
        .into_iter()
        .find(|status| status.as_str() == name)
    }
}

/// A recorded run, as `dlq retry --status` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct RunInfo {
    pub run_id: String,
    pub job_id: String,
    pub host: String,
    pub pid: i64,
    pub started_at: Timestamp,
    pub heartbeat_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    pub status: RunStatus,
    pub parameters: serde_json::Value,
    #[serde(flatten)]
    pub counts: RunCounts,
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Dlq {
    /// Records the start of a run.
    #[doc(hidden)] // The retry engine's; the counter tests drive it directly.
    pub fn register_run(
        &self,
        run_id: &str,
        job_id: &str,
        host: &str,
        pid: u32,
        parameters: &serde_json::Value,
    ) -> Result<()> {
        let parameters = parameters.to_string();
        self.write(|tx| {
            tx.sql().exec(
                "INSERT INTO retry_runs (run_id, job_id, host, pid, started_at, heartbeat_at, status, parameters)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7)",
                vals![run_id, job_id, host, pid, tx.now(), RunStatus::Running.as_str(), &parameters],
            )?;
            Ok(())
        })
    }

    /// Records the end of a run (and its counts).
    #[doc(hidden)] // The retry engine's; the counter tests drive it directly.
    pub fn finish_run(&self, run_id: &str, status: RunStatus, counts: &RunCounts) -> Result<()> {
        self.write(|tx| {
            tx.sql().exec(
                "UPDATE retry_runs SET status = ?2, ended_at = ?3, heartbeat_at = ?3, attempted = ?4,
                     succeeded = ?5, failed = ?6, skipped = ?7, attempts = ?8
                 WHERE run_id = ?1",
                vals![
                    run_id,
                    status.as_str(),
                    tx.now(),
                    count(counts.attempted),
                    count(counts.succeeded),
                    count(counts.failed),
                    count(counts.skipped),
                    count(counts.attempts)
                ],
            )?;
            Ok(())
        })
    }

    /// Takes up to `limit` items of the filter's job with a row key above
    /// `after`, free or with an expired lease (or, for a filter of items
    /// leased in advance, [`ListFilter::leased_to`], leased to `run_id`
    /// already), and leases them to `run_id` until `until`. Returns their
    /// row keys in order.
    #[doc(hidden)] // The retry engine's; the counter tests drive it directly.
    pub fn claim(
        &self,
        run_id: &str,
        filter: &ListFilter,
        after: i64,
        limit: usize,
        until: Timestamp,
    ) -> Result<Vec<i64>> {
        // The filter's `now` may be a chosen one (with_clock); whether a
        // lease has expired is always a question for the real clock.
        let age_now = self.age_now();
        self.write(|tx| {
            let now = tx.now();
            let mut condition = String::new();
            let mut values: Vec<Value> = vec![
                Value::Text(run_id.to_string()),
                Value::Text(until.to_storage()),
                Value::Integer(after),
                Value::Text(now.to_storage()),
            ];
            // A selection leased in advance is taken again by its own run;
            // otherwise a claim takes only what nobody holds.
            let own = if filter.leased_to.is_some() {
                values.push(Value::Text(run_id.to_string()));
                " OR i.lease_owner = ?"
            } else {
                ""
            };
            let plan = filter.search_plan(tx.sql(), super::filter_sql::Takes::Page)?;
            filter.push_conditions_on(
                tx.sql().backend(),
                age_now,
                &plan,
                &mut condition,
                &mut values,
            );
            values.push(Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
            // Fixed SQL from ListFilter; every value is bound.
            let sql = match tx.sql().backend() {
                // NOT INDEXED: walk the rows in id order from the cursor.
                // With an index on the job the planner would read all of
                // the job's items and sort them for every claim (measured:
                // 10x slower replay). SQLite has one writer at a time, so
                // the UPDATE alone makes the claim exclusive.
                super::Backend::Sqlite => format!(
                    "UPDATE items SET lease_owner = ?, lease_expires = ?
                     WHERE id IN (
                         SELECT i.id FROM items i NOT INDEXED
                         WHERE i.id > ? AND (i.lease_owner IS NULL OR i.lease_expires < ?{own}){condition}
                         ORDER BY i.id LIMIT ?)
                     RETURNING id"
                ),
                // Workers on many hosts claim at once: each locks the rows
                // it takes and skips the ones another is taking, and a row
                // another claim committed meanwhile is checked again under
                // the lock (its lease is then live, so it is not taken).
                super::Backend::Postgres => format!(
                    "UPDATE items SET lease_owner = ?, lease_expires = ?
                     WHERE id IN (
                         SELECT i.id FROM items i
                         WHERE i.id > ? AND (i.lease_owner IS NULL OR i.lease_expires < ?{own}){condition}
                         ORDER BY i.id LIMIT ?
                         FOR UPDATE SKIP LOCKED)
                     RETURNING id"
                ),
            };
            let values: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
            let mut keys = tx.sql().collect(&sql, &values, |row| row.i64(0))?;
            keys.sort_unstable();
            Ok(keys)
        })
    }

    /// Extends every lease of `run_id` (and its heartbeat) to `until`.
    pub(crate) fn renew_leases(&self, run_id: &str, until: Timestamp) -> Result<usize> {
        self.write(|tx| {
            let renewed = tx.sql().exec(
                "UPDATE items SET lease_expires = ?2 WHERE lease_owner = ?1",
                vals![run_id, until],
            )?;
            tx.sql().exec(
                "UPDATE retry_runs SET heartbeat_at = ?2 WHERE run_id = ?1",
                vals![run_id, tx.now()],
            )?;
            Ok(renewed)
        })
    }

    /// The item leased to `run_id` with this row key, whole.
    /// The item `run_id` holds, and its version (schema V9) as read: what
    /// the retry's command is given, so what its success may remove.
    #[doc(hidden)] // The retry engine's; the counter tests drive it directly.
    pub fn leased_item(&self, run_id: &str, key: i64) -> Result<Option<(JobItem, i64)>> {
        self.read(|conn| {
            let job = conn.row(
                "SELECT job_id FROM items WHERE id = ?1 AND lease_owner = ?2",
                vals![key, run_id],
                |row| row.text(0),
            )?;
            let Some(job_id) = job else {
                return Ok(None);
            };
            // The version comes with the item, in this one read.
            Ok(rows::load_item_by_key(conn, key)?.map(|stored| {
                let version = stored.version;
                let item = JobItem {
                    job_id,
                    item: stored.item,
                    marked: stored.marked,
                    version,
                    family_id: stored.family_id,
                    key: stored.key,
                };
                (item, version)
            }))
        })
    }

    /// The attempt succeeded: removes the item with a `retried_ok` event,
    /// if `run_id` still holds it and it is still at `version` (what the
    /// command was given). An item that changed since (a failure merged
    /// into it, a mark, a hand edit) stays, its lease given back, and the
    /// success is recorded as a `retried_ok` event with `"kept": true`: the
    /// command succeeded on an older state of it.
    #[doc(hidden)] // The retry engine's; the counter tests drive it directly.
    pub fn retry_succeeded(
        &self,
        run_id: &str,
        key: i64,
        version: i64,
        attempt: u32,
        duration_ms: u64,
    ) -> Result<Succeeded> {
        self.write(|tx| {
            // The job's row first, as adds and purges lock them (the
            // delete's counter trigger needs it): without it a retry and a
            // purge of one job deadlocked on PostgreSQL.
            if !lock_holders_job(tx, run_id, key)? {
                return Ok(Succeeded::LeaseLost);
            }
            let removed = tx.sql().row(
                "DELETE FROM items WHERE id = ?1 AND lease_owner = ?2 AND version = ?3
                 RETURNING job_id, item_id",
                vals![key, run_id, version],
                |row| Ok((row.text(0)?, row.text(1)?)),
            )?;
            if let Some((job_id, item_id)) = removed {
                tx.event(
                    EventKind::RetriedOk,
                    Some(&job_id),
                    Some(&item_id),
                    serde_json::json!({"run_id": run_id, "attempt": attempt, "duration_ms": duration_ms}),
                )?;
                return Ok(Succeeded::Removed);
            }
            let kept = tx.sql().row(
                "UPDATE items SET lease_owner = NULL, lease_expires = NULL
                 WHERE id = ?1 AND lease_owner = ?2 RETURNING job_id, item_id",
                vals![key, run_id],
                |row| Ok((row.text(0)?, row.text(1)?)),
            )?;
            let Some((job_id, item_id)) = kept else {
                return Ok(Succeeded::LeaseLost);
            };
            tx.event(
                EventKind::RetriedOk,
                Some(&job_id),
                Some(&item_id),
                serde_json::json!({
                    "run_id": run_id, "attempt": attempt, "duration_ms": duration_ms,
                    "kept": true, "why": "changed since the retry read it",
                }),
            )?;
            Ok(Succeeded::KeptChanged)
        })
    }

    /// The attempt failed: appends it to the item's history (its
    /// attempt_number is one past the highest stored), bumps failure_count,
    /// last_attempt, the signature and last error type, with a
    /// `retried_failed` event. Returns the attempt number and the item's
    /// version after it, or None when the lease was lost.
    #[doc(hidden)] // The retry engine's; the counter tests drive it directly.
    pub fn retry_failed(
        &self,
        run_id: &str,
        key: i64,
        mut failure: FailureDetail,
    ) -> Result<Option<(u32, i64)>> {
        self.write(|tx| {
            // The job's row first (see retry_succeeded); the lease is
            // checked again below, under it.
            if !lock_holders_job(tx, run_id, key)? {
                return Ok(None);
            }
            let conn = tx.sql();
            let held = conn.row(
                "SELECT job_id, item_id FROM items WHERE id = ?1 AND lease_owner = ?2",
                vals![key, run_id],
                |row| Ok((row.text(0)?, row.text(1)?)),
            )?;
            let Some((job_id, item_id)) = held else {
                return Ok(None);
            };
            let highest = conn
                .row(
                    "SELECT COALESCE(MAX(attempt_number), 0) FROM failure_history WHERE item_key = ?1",
                    vals![key],
                    |row| row.i64(0),
                )?
                .unwrap_or(0);
            failure.attempt_number = u32::try_from(highest).unwrap_or(u32::MAX).saturating_add(1);
            // The new attempt has the highest number; it is the item's last
            // (counters::last_attempt_order) unless an attempt is dated
            // later (a skewed or future clock). Only then does it keep the
            // signature and last error type it has.
            let (later, update) = match conn.backend() {
                super::Backend::Sqlite => (
                    "SELECT 1 FROM failure_history WHERE item_key = ?1 AND timestamp > ?2 LIMIT 1",
                    "UPDATE items SET failure_count = failure_count + 1, version = version + 1,
                         last_attempt = MAX(last_attempt, ?2),
                         error_signature = CASE WHEN ?5 THEN error_signature ELSE ?3 END,
                         last_error_type = CASE WHEN ?5 THEN last_error_type ELSE ?4 END
                     WHERE id = ?1",
                ),
                super::Backend::Postgres => (
                    "SELECT 1 FROM failure_history WHERE item_key = ?1
                         AND (timestamp, timestamp_ns) > (dlq_ts(?2::text), dlq_ns(?2::text)) LIMIT 1",
                    "UPDATE items SET failure_count = failure_count + 1, version = version + 1,
                         last_attempt = CASE WHEN (last_attempt, last_attempt_ns) < (dlq_ts(?2::text), dlq_ns(?2::text))
                             THEN dlq_ts(?2::text) ELSE last_attempt END,
                         last_attempt_ns = CASE WHEN (last_attempt, last_attempt_ns) < (dlq_ts(?2::text), dlq_ns(?2::text))
                             THEN dlq_ns(?2::text) ELSE last_attempt_ns END,
                         error_signature = CASE WHEN ?5::integer = 1 THEN error_signature ELSE ?3 END,
                         last_error_type = CASE WHEN ?5::integer = 1 THEN last_error_type ELSE ?4 END
                     WHERE id = ?1",
                ),
            };
            let later_exists = conn.row(later, vals![key, failure.timestamp], |_| Ok(()))?.is_some();
            if !later_exists {
                // The new attempt is the last: its family is the item's.
                let family = tx.family_of_failure(&failure)?;
                tx.sql().exec(
                    "UPDATE items SET family_id = ?2 WHERE id = ?1",
                    vals![key, family],
                )?;
            }
            let conn = tx.sql();
            rows::insert_history(conn, key, std::slice::from_ref(&failure))?;
            let signature = crate::classify::error_signature(&failure.error_message);
            conn.exec(
                update,
                vals![
                    key,
                    failure.timestamp,
                    &signature,
                    &failure.error_type.name,
                    later_exists
                ],
            )?;
            tx.event(
                EventKind::RetriedFailed,
                Some(&job_id),
                Some(&item_id),
                serde_json::json!({
                    "run_id": run_id,
                    "attempt": failure.attempt_number,
                    "error_type": failure.error_type.name,
                    "exit_code": failure.error_type.exit_code,
                }),
            )?;
            let version = conn
                .row("SELECT version FROM items WHERE id = ?1", vals![key], |row| {
                    row.i64(0)
                })?
                .unwrap_or(0);
            Ok(Some((failure.attempt_number, version)))
        })
    }
}

/// Locks the job row of the item `key` that `run_id` holds, before its
/// items are touched; false when the run no longer holds the item.
fn lock_holders_job(tx: &mut super::WriteTx<'_>, run_id: &str, key: i64) -> Result<bool> {
    let job = tx.sql().row(
        "SELECT job_id FROM items WHERE id = ?1 AND lease_owner = ?2",
        vals![key, run_id],
        |row| row.text(0),
    )?;
    match job {
        Some(job_id) => {
            tx.lock_job(&job_id)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

impl Dlq {
    /// Gives an item back (its lease ends now).
    pub(crate) fn release_lease(&self, run_id: &str, key: i64) -> Result<()> {
        self.write(|tx| {
            tx.sql().exec(
                "UPDATE items SET lease_owner = NULL, lease_expires = NULL WHERE id = ?1 AND lease_owner = ?2",
                vals![key, run_id],
            )?;
            Ok(())
        })
    }

    /// Gives back every item `run_id` holds (also those of a selection
    /// leased to a run that could not start).
    pub fn release_all_leases(&self, run_id: &str) -> Result<usize> {
        self.write(|tx| {
            tx.sql().exec(
                "UPDATE items SET lease_owner = NULL, lease_expires = NULL WHERE lease_owner = ?1",
                vals![run_id],
            )
        })
    }

    /// How many items match `filter` (for skipped and remaining counts).
    pub fn count_matching(&self, filter: &ListFilter) -> Result<u64> {
        self.read(|conn| {
            if let Some(category) = only_a_category(filter) {
                // From the counters, not a lookup per item.
                return super::categories::count_in_category(
                    conn,
                    filter.job_id.as_deref(),
                    category,
                );
            }
            if let Some(n) = super::counters::count_from_counters(conn, filter)? {
                return Ok(n);
            }
            if let Some((error_type, last)) = only_an_error_type(filter) {
                let job = filter.job_id.as_deref();
                return if last {
                    super::categories::count_last_error_type(conn, job, error_type)
                } else {
                    super::categories::count_any_error_type(conn, job, error_type)
                };
            }
            count_rows(conn, filter, self.age_now())
        })
    }

    /// Recent runs, newest first. A run recorded as running whose process is
    /// gone (same host) or whose heartbeat is older than `stale_after` shows
    /// as crashed.
    pub fn runs(
        &self,
        job_id: Option<&str>,
        limit: usize,
        host: &str,
        stale_after_secs: i64,
    ) -> Result<Vec<RunInfo>> {
        let now = self.now();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let runs = self.read(|conn| {
            conn.collect(
                "SELECT run_id, job_id, host, pid, started_at, heartbeat_at, ended_at, status, parameters,
                     attempted, succeeded, failed, skipped, attempts
                 FROM retry_runs WHERE CAST(?1 AS TEXT) IS NULL OR job_id = ?1 ORDER BY id DESC LIMIT ?2",
                vals![job_id, limit],
                |row| {
                    let get = |column: usize| -> Result<u64> {
                        Ok(u64::try_from(row.i64(column)?).unwrap_or(0))
                    };
                    let status = row.text(7)?;
                    Ok(RunInfo {
                        run_id: row.text(0)?,
                        job_id: row.text(1)?,
                        host: row.text(2)?,
                        pid: row.i64(3)?,
                        started_at: row.ts(4)?,
                        heartbeat_at: row.ts(5)?,
                        ended_at: row.opt_ts(6)?,
                        status: RunStatus::from_name(&status).ok_or_else(|| {
                            crate::error::Error::invalid_argument(
                                "retry_runs.status",
                                format!("{status:?} is not a run status"),
                            )
                        })?,
                        parameters: serde_json::from_str(&row.text(8)?)
                            .unwrap_or(serde_json::Value::Null),
                        counts: RunCounts {
                            attempted: get(9)?,
                            succeeded: get(10)?,
                            failed: get(11)?,
                            skipped: get(12)?,
                            attempts: get(13)?,
                        },
                    })
                },
            )
        })?;
        Ok(runs
            .into_iter()
            .map(|mut run| {
                if run.status == RunStatus::Running
                    && run_crashed(
                        &run.host,
                        run.pid,
                        run.heartbeat_at,
                        host,
                        now,
                        stale_after_secs,
                    )
                {
                    run.status = RunStatus::Crashed;
                }
                run
            })
            .collect())
    }
}

/// Whether a run recorded as running (on `run_host`, as `pid`, last
/// heartbeat at `heartbeat_at`) has crashed, as seen from `host` at `now`:
/// its process is gone (same host), or its heartbeat is older than
/// `stale_after_secs`. The one rule `retry --status` and metrics share.
pub(super) fn run_crashed(
    run_host: &str,
    pid: i64,
    heartbeat_at: Timestamp,
    host: &str,
    now: Timestamp,
    stale_after_secs: i64,
) -> bool {
    let gone = run_host == host && !process_alive(pid);
    let stale = heartbeat_at < now.minus_seconds(stale_after_secs);
    gone || stale
}

/// Whether a process with this id exists on this machine.
pub(super) fn process_alive(pid: i64) -> bool {
    if cfg!(target_os = "linux") {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

/// `error_type == "X"` (any attempt: false) or `last.error_type == "X"`
/// (true) alone, perhaps in one job: what the dashboard's Patterns page
/// links, counted from an index or the counters. Not `""`: the counters
/// keep `''` for an item without attempts, which neither test matches.
fn only_an_error_type(filter: &ListFilter) -> Option<(&str, bool)> {
    use crate::filter::{AttemptColumn, Expr, Field, Literal, Op};
    let ListFilter {
        job_id: _,
        eligible: None,
        manual_review: None,
        since: None,
        until: None,
        max_key: None,
        leased_to: None,
        expression:
            Some(Expr::Compare {
                field:
                    Field::Attempt {
                        column: AttemptColumn::ErrorType,
                        last,
                    },
                op: Op::Eq,
                value: Literal::Text(name),
            }),
    } = filter
    else {
        return None;
    };
    (!name.is_empty()).then_some((name.as_str(), *last))
}

/// The category of a filter that is nothing but `category == "C"` (and a
/// job), which the counters can count.
fn only_a_category(filter: &ListFilter) -> Option<super::Category> {
    use crate::filter::{Column, Expr, Field, Literal, Op};
    let ListFilter {
        job_id: _,
        eligible: None,
        manual_review: None,
        since: None,
        until: None,
        max_key: None,
        leased_to: None,
        expression:
            Some(Expr::Compare {
                field: Field::Column(Column::Category),
                op: Op::Eq,
                value: Literal::Text(name),
            }),
    } = filter
    else {
        return None;
    };
    name.parse().ok()
}

/// The items matching `filter`, counted row by row.
fn count_rows(conn: super::sql::Conn<'_>, filter: &ListFilter, now: Timestamp) -> Result<u64> {
    let mut condition = String::new();
    let mut values = Vec::new();
    // Every match is counted: message searches read the search index's
    // candidates, once each, instead of testing every item.
    let plan = filter.search_plan(conn, super::filter_sql::Takes::Every)?;
    filter.push_conditions_on(conn.backend(), now, &plan, &mut condition, &mut values);
    let sql = format!("SELECT COUNT(*) FROM items i WHERE 1 = 1{condition}");
    let values: Vec<super::sql::Val<'_>> = values.iter().map(super::sql::Val::from_value).collect();
    let n = conn.row(&sql, &values, |row| row.i64(0))?.unwrap_or(0);
    Ok(u64::try_from(n).unwrap_or(0))
}
