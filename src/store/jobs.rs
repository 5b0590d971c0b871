//! Jobs: which exist ([`Dlq::jobs`], [`Dlq::require_job`]), the capacity
//! each is held to (a per-job cap or the database default, settable before
//! a job's first add), clearing one, and removing jobs left empty
//! ([`Dlq::prune_jobs`]). Capacity changes, clears and removals leave rows
//! in `events`; nothing leaves the DLQ silently.

use super::items::ListFilter;
use super::leases::{process_alive, RunStatus};
use super::sql::{vals, Backend};
use super::write::{default_capacity, EvictedItem, WriteTx};
use super::{Dlq, EventKind};
use crate::error::{Error, Result};
use crate::time::Timestamp;
use serde::Serialize;

/// One job and its counters.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct JobInfo {
    pub job_id: String,
    pub repo: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The job's own capacity, when it overrides the default.
    pub max_items: Option<i64>,
    pub item_count: i64,
    pub eligible_count: i64,
    pub manual_review_count: i64,
}

/// When a job's items failed: [`Dlq::job_spans`].
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct JobSpan {
    pub job_id: String,
    /// The earliest first_attempt of its items.
    pub oldest: Option<Timestamp>,
    /// The latest last_attempt of its items.
    pub newest: Option<Timestamp>,
}

/// The capacity settings in force.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct CapacityInfo {
    /// The default for jobs without an override (0 = unlimited).
    pub default_max_items: i64,
    /// The job asked about, if any.
    pub job_id: Option<String>,
    /// That job's override, if it has one.
    pub job_max_items: Option<i64>,
    /// What applies to that job (or the default).
    pub effective_max_items: i64,
}

/// A job [`Dlq::prune_jobs`] removed (or, on a dry run, would remove).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RemovedJob {
    pub job_id: String,
    pub repo: Option<String>,
    pub created_at: Timestamp,
    /// The capacity override that went with it.
    pub max_items: Option<i64>,
}

/// What [`Dlq::ensure_job`] sets on a job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobOptions {
    /// The job's capacity (0 = unlimited); `None` leaves it as it is (a new
    /// job then follows the default).
    pub max_items: Option<i64>,
}

impl Dlq {
    /// Every job, by job_id.
    pub fn jobs(&self) -> Result<Vec<JobInfo>> {
        self.jobs_where(
            "WHERE CAST(?1 AS TEXT) IS NULL ORDER BY job_id LIMIT ?2",
            None,
            usize::MAX,
        )
    }

    /// Each job's oldest first failure and newest last failure (`None`
    /// for an empty job), by job_id: two index seeks per job.
    pub fn job_spans(&self) -> Result<Vec<JobSpan>> {
        self.spans_where("", None)
    }

    /// One job's span ([`Dlq::job_spans`]): two index seeks.
    pub fn job_span(&self, job_id: &str) -> Result<JobSpan> {
        Ok(self
            .spans_where(" WHERE j.job_id = ?1", Some(job_id))?
            .pop()
            .unwrap_or_else(|| JobSpan {
                job_id: job_id.to_string(),
                oldest: None,
                newest: None,
            }))
    }

    /// Spans of the jobs `filter` (fixed SQL; `?1` is `job`) keeps.
    fn spans_where(&self, filter: &str, job: Option<&str>) -> Result<Vec<JobSpan>> {
        self.read(|conn| {
            let sql = format!(
                "SELECT j.job_id, {} FROM jobs j{filter} ORDER BY j.job_id",
                super::stats::span_columns(conn.backend())
            );
            let params = if job.is_some() { vals![job] } else { vals![] };
            conn.collect(&sql, params, |row| {
                Ok(JobSpan {
                    job_id: row.text(0)?,
                    oldest: row.opt_ts(1)?,
                    newest: row.opt_ts(2)?,
                })
            })
        })
    }

    /// Up to `limit` jobs after `after` (by job_id; from the first when
    /// `None`): a page of [`Dlq::jobs`] for a database with thousands.
    pub fn jobs_after(&self, after: Option<&str>, limit: usize) -> Result<Vec<JobInfo>> {
        self.jobs_where(
            "WHERE CAST(?1 AS TEXT) IS NULL OR job_id > ?1 ORDER BY job_id LIMIT ?2",
            after,
            limit,
        )
    }

    /// The `limit` jobs with the most items (then by job_id).
    pub fn largest_jobs(&self, limit: usize) -> Result<Vec<JobInfo>> {
        self.jobs_where(
            "WHERE CAST(?1 AS TEXT) IS NULL ORDER BY item_count DESC, job_id LIMIT ?2",
            None,
            limit,
        )
    }

    /// Jobs, item counts and flag counts summed over every job, from the
    /// counters: (jobs, items, eligible, manual review).
    pub fn job_totals(&self) -> Result<(i64, i64, i64, i64)> {
        self.read(|conn| {
            Ok(conn
                .row(
                    "SELECT COUNT(*), COALESCE(SUM(item_count), 0), COALESCE(SUM(eligible_count), 0),
                         COALESCE(SUM(manual_review_count), 0) FROM jobs",
                    &[],
                    |row| Ok((row.i64(0)?, row.i64(1)?, row.i64(2)?, row.i64(3)?)),
                )?
                .unwrap_or_default())
        })
    }

    /// The newest last_attempt of all items: one seek of its index.
    pub fn newest_failure(&self) -> Result<Option<Timestamp>> {
        let sql = match self.backend() {
            Backend::Sqlite => "SELECT MAX(last_attempt) FROM items",
            Backend::Postgres => {
                "SELECT dlq_ts_text(last_attempt, last_attempt_ns) FROM items
                 ORDER BY last_attempt DESC, last_attempt_ns DESC LIMIT 1"
            }
        };
        self.read(|conn| Ok(conn.row(sql, &[], |row| row.opt_ts(0))?.flatten()))
    }

    /// The oldest first_attempt of all items: one index seek per job.
    pub fn oldest_failure(&self) -> Result<Option<Timestamp>> {
        let sql = match self.backend() {
            Backend::Sqlite => {
                "SELECT MIN((SELECT MIN(i.first_attempt) FROM items i WHERE i.job_id = j.job_id))
                 FROM jobs j"
            }
            Backend::Postgres => {
                "SELECT dlq_ts_text(first_attempt, first_attempt_ns) FROM items
                 ORDER BY first_attempt, first_attempt_ns LIMIT 1"
            }
        };
        self.read(|conn| Ok(conn.row(sql, &[], |row| row.opt_ts(0))?.flatten()))
    }

    /// One job and its counters ([`Error::JobNotFound`] if there is none).
    pub fn job_info(&self, job_id: &str) -> Result<JobInfo> {
        self.jobs_where("WHERE job_id = ?1 LIMIT ?2", Some(job_id), 1)?
            .pop()
            .ok_or_else(|| Error::JobNotFound(job_id.to_string()))
    }

    /// Jobs as [`Dlq::jobs`] reads them, with `tail` (fixed SQL: the
    /// order and the limit; `?1` is `after`, `?2` the limit).
    fn jobs_where(&self, tail: &str, after: Option<&str>, limit: usize) -> Result<Vec<JobInfo>> {
        let sql = format!(
            "SELECT job_id, repo, created_at, updated_at, max_items, item_count, eligible_count,
                 manual_review_count
             FROM jobs {tail}"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|conn| conn.collect(&sql, vals![after, limit], job_of_row))
    }

    /// Whether a job exists (it does from its first add or capacity set).
    pub fn job_exists(&self, job_id: &str) -> Result<bool> {
        self.read(|conn| {
            Ok(conn
                .row(
                    "SELECT 1 FROM jobs WHERE job_id = ?1",
                    vals![job_id],
                    |_| Ok(()),
                )?
                .is_some())
        })
    }

    /// [`Error::JobNotFound`] unless the job exists.
    pub fn require_job(&self, job_id: &str) -> Result<()> {
        if self.job_exists(job_id)? {
            Ok(())
        } else {
            Err(Error::JobNotFound(job_id.to_string()))
        }
    }

    /// The capacity for a job, or the default.
    pub fn capacity(&self, job_id: Option<&str>) -> Result<CapacityInfo> {
        let (default, job_max) = self.read(|conn| {
            let default = default_capacity(conn)?;
            let job_max = match job_id {
                None => None,
                Some(job) => conn
                    .row(
                        "SELECT max_items FROM jobs WHERE job_id = ?1",
                        vals![job],
                        |row| row.opt_i64(0),
                    )?
                    .ok_or_else(|| Error::JobNotFound(job.to_string()))?,
            };
            Ok((default, job_max))
        })?;
        Ok(CapacityInfo {
            default_max_items: default,
            job_id: job_id.map(str::to_string),
            job_max_items: job_max,
            effective_max_items: job_max.unwrap_or(default),
        })
    }

    /// How many items [`Dlq::set_capacity`] with the same arguments would
    /// evict now (what `dlq capacity --set` asks about first).
    pub fn capacity_evictions(&self, job_id: Option<&str>, max_items: Option<i64>) -> Result<i64> {
        self.read(|conn| {
            Ok(evictions_for(conn, job_id, max_items)?
                .iter()
                .map(|(_, n)| n)
                .sum())
        })
    }

    /// What [`Dlq::set_capacity`] with the same arguments would evict now,
    /// as a selection (`count`, and a `token` for
    /// [`Dlq::set_capacity_counted`]; `max_key` is unused): what `dlq
    /// capacity --set` asks about.
    pub fn capacity_eviction_selection(
        &self,
        job_id: Option<&str>,
        max_items: Option<i64>,
    ) -> Result<super::Selection> {
        let (count, token) = self.read(|conn| eviction_selection(conn, job_id, max_items))?;
        Ok(super::Selection {
            count,
            max_key: 0,
            token,
        })
    }

    /// Sets the default capacity (`job_id` None) or one job's override
    /// (`max_items` None removes the override). Jobs over their new capacity
    /// are trimmed at once; the evictions are returned and in `events`.
    pub fn set_capacity(
        &self,
        job_id: Option<&str>,
        max_items: Option<i64>,
    ) -> Result<Vec<EvictedItem>> {
        self.set_capacity_with(job_id, max_items, None)
    }

    /// [`Dlq::set_capacity`], only if it evicts exactly the items `counted`
    /// (the token of a [`Dlq::capacity_eviction_selection`] made before
    /// asking), taken again inside its transaction:
    /// [`Error::SelectionChanged`], changing nothing, when an item to evict
    /// changed (a failure merged into it), went, or another took its place
    /// since (`dlq capacity --set` evicts what it asked about, and nothing
    /// when it asked about nothing).
    pub fn set_capacity_counted(
        &self,
        job_id: Option<&str>,
        max_items: Option<i64>,
        counted: &str,
    ) -> Result<Vec<EvictedItem>> {
        self.set_capacity_with(job_id, max_items, Some(counted))
    }

    fn set_capacity_with(
        &self,
        job_id: Option<&str>,
        max_items: Option<i64>,
        counted: Option<&str>,
    ) -> Result<Vec<EvictedItem>> {
        if let Some(n) = max_items {
            if n < 0 {
                return Err(Error::invalid_argument(
                    "capacity",
                    format!("{n} is negative (0 means unlimited)"),
                ));
            }
        }
        self.write(|tx| {
            if let Some(counted) = counted {
                let (now, token) = eviction_selection(tx.sql(), job_id, max_items)?;
                if token != counted {
                    return Err(Error::SelectionChanged {
                        counted: counted
                            .split('.')
                            .next()
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(0),
                        now,
                    });
                }
            }
            let jobs: Vec<String> = match job_id {
                Some(job) => {
                    if !set_job_capacity(tx, job, max_items)? {
                        return Err(Error::JobNotFound(job.to_string()));
                    }
                    vec![job.to_string()]
                }
                None => {
                    let Some(n) = max_items else {
                        return Err(Error::invalid_argument(
                            "capacity",
                            "the default needs a number",
                        ));
                    };
                    tx.sql().exec(
                        "UPDATE settings SET value = ?1 WHERE key = 'default_max_items'",
                        vals![&n.to_string()],
                    )?;
                    tx.reload_default_capacity()?;
                    tx.sql().collect(
                        "SELECT job_id FROM jobs WHERE max_items IS NULL ORDER BY job_id",
                        &[],
                        |row| row.text(0),
                    )?
                }
            };
            tx.event(
                EventKind::CapacitySet,
                job_id,
                None,
                serde_json::json!({"max_items": max_items}),
            )?;
            let mut evicted = Vec::new();
            for job in jobs {
                evicted.extend(tx.enforce_capacity(&job)?);
            }
            Ok(evicted)
        })
    }

    /// Makes sure `job_id` exists, with `options` applied: a capacity can be
    /// set before the job's first item arrives. Creating a job or changing
    /// its capacity records an event (`job_created`, `capacity_set`); a job
    /// over its new capacity is trimmed, and the evictions are returned.
    pub fn ensure_job(&self, job_id: &str, options: &JobOptions) -> Result<Vec<EvictedItem>> {
        if let Some(n) = options.max_items {
            if n < 0 {
                return Err(Error::invalid_argument(
                    "capacity",
                    format!("{n} is negative (0 means unlimited)"),
                ));
            }
        }
        self.write(|tx| {
            let existing = tx.sql().row(
                "SELECT max_items FROM jobs WHERE job_id = ?1",
                vals![job_id],
                |row| row.opt_i64(0),
            )?;
            tx.ensure_job_with(job_id, None, options.max_items)?;
            let Some(n) = options.max_items else {
                return Ok(Vec::new());
            };
            if existing == Some(Some(n)) {
                return Ok(Vec::new());
            }
            set_job_capacity(tx, job_id, Some(n))?;
            if existing.is_some() {
                tx.event(
                    EventKind::CapacitySet,
                    Some(job_id),
                    None,
                    serde_json::json!({"max_items": n}),
                )?;
            }
            tx.enforce_capacity(job_id)
        })
    }

    /// Removes every job that has no items, with its capacity override, one
    /// `job_removed` event each (the job's other events stay). A job a retry
    /// run may still be working on is kept: one with a run recorded as
    /// running, unless that run is on `host` and its process is gone. With
    /// `dry_run` nothing is written. The jobs are checked and removed in one
    /// transaction, so a job that gains an item meanwhile stays.
    pub fn prune_jobs(&self, host: &str, dry_run: bool) -> Result<Vec<RemovedJob>> {
        if dry_run {
            return self.read(|conn| removable_jobs(conn, None, host));
        }
        self.write(|tx| {
            let found = removable_jobs(tx.sql(), None, host)?;
            for job in &found {
                remove_job(tx, job)?;
            }
            Ok(found)
        })
    }

    /// Removes every item of a job, one `cleared` event per item. Returns how
    /// many were removed. The job row (and its capacity) stays.
    pub fn clear_job(&self, job_id: &str) -> Result<usize> {
        self.clear_job_with(job_id, None, None)
    }

    /// [`Dlq::clear_job`] (and with `remove_on`, [`Dlq::clear_and_remove_job`])
    /// of exactly the items `counted` holds: `counted` is the token of a
    /// [`Dlq::select`] of the job's items ([`ListFilter`] with only
    /// `job_id`), taken again inside the clearing transaction.
    /// [`Error::SelectionChanged`], removing nothing, when an item came,
    /// went or changed since it was counted (`dlq clear` removes what it
    /// asked about).
    pub fn clear_job_counted(
        &self,
        job_id: &str,
        remove_on: Option<&str>,
        counted: &str,
    ) -> Result<usize> {
        self.clear_job_with(job_id, remove_on, Some(counted))
    }

    /// [`Dlq::clear_job`], then removes the job itself (with its capacity
    /// override; a `job_removed` event), in the same transaction. Refused,
    /// removing nothing, while a retry run may be working on the job (see
    /// [`Dlq::prune_jobs`]; `host` is this machine's name).
    pub fn clear_and_remove_job(&self, job_id: &str, host: &str) -> Result<usize> {
        self.clear_job_with(job_id, Some(host), None)
    }

    /// Clears a job; with `remove_on`, also removes it.
    fn clear_job_with(
        &self,
        job_id: &str,
        remove_on: Option<&str>,
        counted: Option<&str>,
    ) -> Result<usize> {
        let cleared = self.clear_job_in_one(job_id, remove_on, counted)?;
        if cleared > 0 {
            self.release_free_pages();
        }
        Ok(cleared)
    }

    fn clear_job_in_one(
        &self,
        job_id: &str,
        remove_on: Option<&str>,
        counted: Option<&str>,
    ) -> Result<usize> {
        let target = super::selection::Target::Filter(ListFilter {
            job_id: Some(job_id.to_string()),
            ..ListFilter::default()
        });
        self.write_bulk(|tx| {
            // On PostgreSQL this also takes the job's row lock (see
            // WriteTx::lock_job).
            let lock = tx.sql().backend().find_job_locked();
            if tx.sql().row(lock, vals![job_id], |_| Ok(()))?.is_none() {
                return Err(Error::JobNotFound(job_id.to_string()));
            }
            if let Some(token) = counted {
                super::selection::expect_unchanged(tx.sql(), &target, token)?;
            }
            let removed = super::bulk::delete_items(
                tx,
                " AND i.job_id = ?",
                &[super::sql::SqlValue::Text(job_id.to_string())],
                EventKind::Cleared,
                serde_json::json!({}),
            )?;
            if let Some(host) = remove_on {
                let job = removable_jobs(tx.sql(), Some(job_id), host)?
                    .pop()
                    .ok_or_else(|| {
                        Error::invalid_argument(
                            format!("job {job_id}"),
                            "a retry run is working on it; nothing removed",
                        )
                    })?;
                remove_job(tx, &job)?;
            }
            Ok(removed)
        })
    }
}

/// The jobs a capacity of `max_items` for `job_id` (None: the default)
/// would trim, as they stand on `conn`, and how many items each loses.
fn evictions_for(
    conn: super::sql::Conn<'_>,
    job_id: Option<&str>,
    max_items: Option<i64>,
) -> Result<Vec<(String, i64)>> {
    let default = default_capacity(conn)?;
    match job_id {
        Some(job) => {
            let limit = max_items.unwrap_or(default);
            if limit == 0 {
                return Ok(Vec::new());
            }
            conn.collect(
                "SELECT job_id, item_count - ?2 FROM jobs WHERE job_id = ?1 AND item_count > ?2",
                vals![job, limit],
                |row| Ok((row.text(0)?, row.i64(1)?)),
            )
        }
        // The default binds the jobs without an override.
        None => match max_items {
            Some(limit) if limit > 0 => conn.collect(
                "SELECT job_id, item_count - ?1 FROM jobs
                 WHERE max_items IS NULL AND item_count > ?1 ORDER BY job_id",
                vals![limit],
                |row| Ok((row.text(0)?, row.i64(1)?)),
            ),
            _ => Ok(Vec::new()),
        },
    }
}

/// The items those evictions would remove, as a selection: their count and
/// a fingerprint of which items they are, in what state (the selection
/// fingerprint of [`super::selection`], summed over the jobs), so an item
/// that changed, or another that took its place among the oldest, is seen.
fn eviction_selection(
    conn: super::sql::Conn<'_>,
    job_id: Option<&str>,
    max_items: Option<i64>,
) -> Result<(u64, String)> {
    let condition = format!(
        " AND i.id IN ({})",
        super::write::eviction_set(conn.backend())
    );
    let (mut count, mut sum, mut max) = (0u64, 0i64, 0i64);
    for (job, excess) in evictions_for(conn, job_id, max_items)? {
        let values = [
            super::sql::SqlValue::Text(job),
            super::sql::SqlValue::Integer(excess),
            super::sql::SqlValue::Integer(0),
        ];
        let (n, s, m) = super::selection::fingerprint(conn, &condition, &values)?;
        count += n;
        sum = (sum + s) % 4_294_967_291;
        max = max.max(m);
    }
    Ok((count, format!("{count}.{sum}.{max}")))
}

/// The jobs (all, or just `only`) that have no items and no retry run that
/// may be alive, by job_id. Both the counter and the items table are asked:
/// a job is only removed when nothing at all refers to it.
fn removable_jobs(
    conn: super::sql::Conn<'_>,
    only: Option<&str>,
    host: &str,
) -> Result<Vec<RemovedJob>> {
    let empty = conn.collect(
        "SELECT j.job_id, j.repo, j.created_at, j.max_items FROM jobs j
         WHERE (CAST(?1 AS TEXT) IS NULL OR j.job_id = ?1) AND j.item_count = 0
             AND NOT EXISTS (SELECT 1 FROM items i WHERE i.job_id = j.job_id)
         ORDER BY j.job_id",
        vals![only],
        |row| {
            Ok(RemovedJob {
                job_id: row.text(0)?,
                repo: row.opt_text(1)?,
                created_at: row.ts(2)?,
                max_items: row.opt_i64(3)?,
            })
        },
    )?;
    let mut removable = Vec::with_capacity(empty.len());
    for job in empty {
        let running = conn.collect(
            "SELECT host, pid FROM retry_runs WHERE job_id = ?1 AND status = ?2",
            vals![&job.job_id, RunStatus::Running.as_str()],
            |row| Ok((row.text(0)?, row.i64(1)?)),
        )?;
        // A run elsewhere cannot be seen from here: only one of this host
        // whose process is gone is known to be dead.
        let live = running
            .iter()
            .any(|(run_host, pid)| run_host != host || process_alive(*pid));
        if !live {
            removable.push(job);
        }
    }
    Ok(removable)
}

/// Deletes one job row found by [`removable_jobs`] and records it.
fn remove_job(tx: &mut WriteTx<'_>, job: &RemovedJob) -> Result<()> {
    tx.sql().exec(
        "DELETE FROM jobs WHERE job_id = ?1 AND item_count = 0",
        vals![&job.job_id],
    )?;
    tx.event(
        EventKind::JobRemoved,
        Some(&job.job_id),
        None,
        serde_json::json!({
            "repo": job.repo,
            "created_at": job.created_at,
            "max_items": job.max_items,
        }),
    )?;
    tx.forget_job(&job.job_id);
    Ok(())
}

/// Writes one job's capacity override; false when there is no such job.
fn set_job_capacity(tx: &mut WriteTx<'_>, job: &str, max_items: Option<i64>) -> Result<bool> {
    let changed = tx.sql().exec(
        "UPDATE jobs SET max_items = ?2 WHERE job_id = ?1",
        vals![job, max_items],
    )?;
    Ok(changed > 0)
}

/// A [`JobInfo`] from a row of `jobs` (the columns by name).
fn job_of_row(row: &super::sql::Row<'_>) -> Result<JobInfo> {
    Ok(JobInfo {
        job_id: row.text(0)?,
        repo: row.opt_text(1)?,
        created_at: row.ts(2)?,
        updated_at: row.ts(3)?,
        max_items: row.opt_i64(4)?,
        item_count: row.i64(5)?,
        eligible_count: row.i64(6)?,
        manual_review_count: row.i64(7)?,
    })
}
