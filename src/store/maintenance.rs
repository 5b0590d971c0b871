//! Maintenance writes: remove one item, clear a job, mark flags, capacity.
//! Each leaves rows in `events`; nothing leaves the DLQ silently.

use super::event_kinds;
use super::query::resolve_job;
use super::write::{default_capacity, EvictedItem, WriteTx};
use super::Dlq;
use crate::error::{Error, Result};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;

/// What `mark` should change; `None` leaves a flag as it is.
#[derive(Clone, Debug, Default)]
pub struct MarkRequest {
    pub reprocess_eligible: Option<bool>,
    pub manual_review_required: Option<bool>,
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

impl Dlq {
    /// Recomputes the job counters and signature counts from the items: for
    /// after rows were inserted by hand (updates and deletes are counted by
    /// triggers, inserts by dlq itself).
    pub fn recount(&self) -> Result<()> {
        self.write(|tx| super::counters::recount(tx.conn()))
    }

    /// Removes one item (recorded as a `removed` event).
    pub fn remove(&self, job_id: Option<&str>, item_id: &str) -> Result<()> {
        self.write(|tx| {
            let job = match job_id {
                Some(job) => job.to_string(),
                None => resolve_job(tx.conn(), item_id)?,
            };
            let signature: Option<String> = tx
                .conn()
                .prepare_cached("DELETE FROM items WHERE job_id = ?1 AND item_id = ?2 RETURNING error_signature")?
                .query_row(params![job, item_id], |row| row.get(0))
                .optional()?;
            let Some(signature) = signature else {
                return Err(Error::ItemNotFound {
                    job_id: Some(job),
                    item_id: item_id.to_string(),
                });
            };
            tx.event(
                event_kinds::REMOVED,
                Some(&job),
                Some(item_id),
                serde_json::json!({"error_signature": signature}),
            )
        })
    }

    /// Removes every item of a job, one `cleared` event per item. Returns how
    /// many were removed. The job row (and its capacity) stays.
    pub fn clear_job(&self, job_id: &str) -> Result<usize> {
        self.write_bulk(|tx| {
            let exists: bool = tx
                .conn()
                .prepare_cached("SELECT EXISTS (SELECT 1 FROM jobs WHERE job_id = ?1)")?
                .query_row([job_id], |row| row.get(0))?;
            if !exists {
                return Err(Error::JobNotFound(job_id.to_string()));
            }
            let removed = super::bulk::delete_items(
                tx,
                " AND i.job_id = ?",
                &[rusqlite::types::Value::Text(job_id.to_string())],
                event_kinds::CLEARED,
                serde_json::json!({}),
            )?;
            Ok(removed)
        })
    }

    /// Sets flags by hand. A flag set here survives later merges until it is
    /// marked again.
    pub fn mark(&self, job_id: Option<&str>, item_id: &str, request: &MarkRequest) -> Result<()> {
        if request.reprocess_eligible.is_none() && request.manual_review_required.is_none() {
            return Err(Error::invalid_argument("mark", "nothing to change"));
        }
        self.write(|tx| {
            let job = match job_id {
                Some(job) => job.to_string(),
                None => resolve_job(tx.conn(), item_id)?,
            };
            let changed = tx
                .conn()
                .prepare_cached(
                    "UPDATE items SET
                         reprocess_eligible = COALESCE(?3, reprocess_eligible),
                         reprocess_eligible_marked = CASE WHEN ?3 IS NULL THEN reprocess_eligible_marked ELSE 1 END,
                         manual_review_required = COALESCE(?4, manual_review_required),
                         manual_review_required_marked = CASE WHEN ?4 IS NULL THEN manual_review_required_marked ELSE 1 END
                     WHERE job_id = ?1 AND item_id = ?2",
                )?
                .execute(params![job, item_id, request.reprocess_eligible, request.manual_review_required])?;
            if changed == 0 {
                return Err(Error::ItemNotFound {
                    job_id: Some(job),
                    item_id: item_id.to_string(),
                });
            }
            tx.event(
                event_kinds::MARKED,
                Some(&job),
                Some(item_id),
                serde_json::json!({
                    "reprocess_eligible": request.reprocess_eligible,
                    "manual_review_required": request.manual_review_required,
                }),
            )
        })
    }

    /// The capacity for a job, or the default.
    pub fn capacity(&self, job_id: Option<&str>) -> Result<CapacityInfo> {
        let conn = self.conn()?;
        let default = default_capacity(&conn)?;
        let job_max = match job_id {
            None => None,
            Some(job) => conn
                .prepare_cached("SELECT max_items FROM jobs WHERE job_id = ?1")?
                .query_row([job], |row| row.get::<_, Option<i64>>(0))
                .optional()?
                .ok_or_else(|| Error::JobNotFound(job.to_string()))?,
        };
        Ok(CapacityInfo {
            default_max_items: default,
            job_id: job_id.map(str::to_string),
            job_max_items: job_max,
            effective_max_items: job_max.unwrap_or(default),
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
        if let Some(n) = max_items {
            if n < 0 {
                return Err(Error::invalid_argument(
                    "capacity",
                    format!("{n} is negative (0 means unlimited)"),
                ));
            }
        }
        self.write(|tx| {
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
                    tx.conn()
                        .prepare_cached(
                            "UPDATE settings SET value = ?1 WHERE key = 'default_max_items'",
                        )?
                        .execute([n.to_string()])?;
                    tx.reload_default_capacity()?;
                    tx.conn()
                        .prepare_cached(
                            "SELECT job_id FROM jobs WHERE max_items IS NULL ORDER BY job_id",
                        )?
                        .query_map([], |row| row.get(0))?
                        .collect::<rusqlite::Result<Vec<_>>>()?
                }
            };
            tx.event(
                event_kinds::CAPACITY,
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
}

/// Writes one job's capacity override; false when there is no such job.
fn set_job_capacity(tx: &mut WriteTx<'_>, job: &str, max_items: Option<i64>) -> Result<bool> {
    let changed = tx
        .conn()
        .prepare_cached("UPDATE jobs SET max_items = ?2 WHERE job_id = ?1")?
        .execute(params![job, max_items])?;
    Ok(changed > 0)
}

/// What [`Dlq::ensure_job`] sets on a job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobOptions {
    /// The job's capacity (0 = unlimited); `None` leaves it as it is (a new
    /// job then follows the default).
    pub max_items: Option<i64>,
}

impl Dlq {
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
            let existing: Option<Option<i64>> = tx
                .conn()
                .prepare_cached("SELECT max_items FROM jobs WHERE job_id = ?1")?
                .query_row([job_id], |row| row.get(0))
                .optional()?;
            tx.ensure_job(job_id, None)?;
            if existing.is_none() {
                tx.event(
                    event_kinds::JOB_CREATED,
                    Some(job_id),
                    None,
                    serde_json::json!({"max_items": options.max_items}),
                )?;
            }
            let Some(n) = options.max_items else {
                return Ok(Vec::new());
            };
            if existing == Some(Some(n)) {
                return Ok(Vec::new());
            }
            set_job_capacity(tx, job_id, Some(n))?;
            if existing.is_some() {
                tx.event(
                    event_kinds::CAPACITY,
                    Some(job_id),
                    None,
                    serde_json::json!({"max_items": n}),
                )?;
            }
            tx.enforce_capacity(job_id)
        })
    }
}

/// What a purge did (or, dry, would do).
#[derive(Clone, Debug, Serialize)]
pub struct PurgeReport {
    /// Items whose last_attempt is before this were taken.
    pub cutoff: crate::time::Timestamp,
    pub items: usize,
    pub dry_run: bool,
}

impl Dlq {
    /// Removes the items matching `filter` whose last_attempt is more than
    /// `older_than_days` days before now, one `purged` event per item, in one
    /// transaction. With `dry_run`, counts them and changes nothing.
    pub fn purge(
        &self,
        older_than_days: u32,
        filter: &super::ListFilter,
        dry_run: bool,
    ) -> Result<PurgeReport> {
        let cutoff = self
            .age_now()
            .minus_seconds(i64::from(older_than_days) * 86_400);
        let mut filter = filter.clone();
        filter.until = Some(match filter.until {
            Some(until) => until.min(cutoff),
            None => cutoff,
        });
        let now = self.age_now();
        let mut condition = String::new();
        let mut values = Vec::new();
        filter.push_conditions(now, &mut condition, &mut values);
        if dry_run {
            let conn = self.conn()?;
            let sql = format!("SELECT COUNT(*) FROM items i WHERE 1 = 1{condition}");
            let items: i64 =
                conn.query_row(&sql, rusqlite::params_from_iter(values), |row| row.get(0))?;
            return Ok(PurgeReport {
                cutoff,
                items: usize::try_from(items).unwrap_or(0),
                dry_run,
            });
        }
        let items = self.write_bulk(|tx| {
            super::bulk::delete_items(
                tx,
                &condition,
                &values,
                event_kinds::PURGED,
                serde_json::json!({"cutoff": cutoff}),
            )
        })?;
        Ok(PurgeReport {
            cutoff,
            items,
            dry_run,
        })
    }
}
