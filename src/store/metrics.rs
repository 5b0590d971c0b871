//! What `dlq metrics` (and a future `/metrics` endpoint) reads: one
//! [`MetricsSnapshot`] of the counters, never a scan of items' rows. Items
//! per failure family (the 10 largest, and the rest as one figure) are
//! counted on the items_family index (families have no counters). Items per
//! job, error type and category come from `error_type_counts` joined with
//! `error_categories`; eligible and manual-review counts from `jobs`; the
//! oldest item per job from [`Dlq::oldest_items`] (one index seek per job);
//! events by kind from the events_kind index; retry runs by status from
//! `retry_runs`, with a run whose process is gone read as crashed (the rule
//! `retry --status` uses). Rendering is [`crate::metrics`].

use super::leases::run_crashed;
use super::sql::vals;
use super::{Dlq, FamilyGroups, OldestItem, RunStatus};
use crate::error::Result;
use crate::time::Timestamp;
use serde::Serialize;
use std::collections::BTreeMap;

/// One job's counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobCounts {
    pub job_id: String,
    pub items: i64,
    pub eligible: i64,
    pub manual_review: i64,
}

/// How many items of a job have one last error type, and that type's
/// category now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ErrorTypeCount {
    pub job_id: String,
    /// The last attempt's error type; empty for an item with no attempts.
    pub error_type: String,
    pub category: super::Category,
    pub items: i64,
}

/// How many recorded retry runs of a job are in one status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunStatusCount {
    pub job_id: String,
    pub status: RunStatus,
    pub runs: i64,
}

/// Everything the metrics show, read at one moment (see the module docs).
#[derive(Clone, Debug, Serialize)]
pub struct MetricsSnapshot {
    /// "Now" for the ages (the age clock: `--now` moves it).
    pub now: Timestamp,
    /// The schema version the database is at.
    pub schema_version: Option<i64>,
    /// Only this job, or every job.
    pub job_id: Option<String>,
    /// By job_id.
    pub jobs: Vec<JobCounts>,
    /// By job_id, then error type. Rows the counters keep at 0 are there.
    pub error_types: Vec<ErrorTypeCount>,
    /// The oldest item of each job that has items, by job_id.
    pub oldest: Vec<OldestItem>,
    /// Events by kind (the whole log, or the job's events): only the kinds
    /// present; the renderer adds the others as 0.
    pub events: BTreeMap<String, i64>,
    /// By job_id, then status; only the statuses present.
    pub runs: Vec<RunStatusCount>,
    /// The [`FAMILY_SERIES`] largest failure families and what they leave
    /// out: bounded, however many families there are.
    pub families: FamilyGroups,
}

/// How many failure families the metrics name: a label set that stays
/// bounded (each family is a series, and a DLQ can hold thousands).
pub const FAMILY_SERIES: usize = 10;

/// The snapshot's statements: jobs, error types, events, runs; `?1` is
/// the job or NULL. Each table is read by its primary key or an index:
/// with a job, a seek to its range (two forms rather than `?1 IS NULL OR
/// job_id = ?1`, with which SQLite cannot seek).
fn statements(one_job: bool) -> (&'static str, &'static str, &'static str, &'static str) {
    if one_job {
        (
            "SELECT job_id, item_count, eligible_count, manual_review_count
             FROM jobs WHERE job_id = ?1",
            "SELECT t.job_id, t.error_type, COALESCE(c.category, 'unclassified') AS category,
                 t.item_count
             FROM error_type_counts AS t
             LEFT JOIN error_categories AS c ON c.error_type = t.error_type
             WHERE t.job_id = ?1 ORDER BY t.job_id, t.error_type",
            // The job's events through events_job (a row lookup each for
            // the kind): the cost of the job's share of the log.
            "SELECT kind, COUNT(*) FROM events WHERE job_id = ?1 GROUP BY kind",
            "SELECT job_id, status, host, pid, heartbeat_at FROM retry_runs WHERE job_id = ?1",
        )
    } else {
        (
            "SELECT job_id, item_count, eligible_count, manual_review_count
             FROM jobs WHERE CAST(?1 AS TEXT) IS NULL ORDER BY job_id",
            "SELECT t.job_id, t.error_type, COALESCE(c.category, 'unclassified') AS category,
                 t.item_count
             FROM error_type_counts AS t
             LEFT JOIN error_categories AS c ON c.error_type = t.error_type
             WHERE CAST(?1 AS TEXT) IS NULL ORDER BY t.job_id, t.error_type",
            // events_kind holds (kind, id): counted from the index alone.
            "SELECT kind, COUNT(*) FROM events WHERE CAST(?1 AS TEXT) IS NULL GROUP BY kind",
            "SELECT job_id, status, host, pid, heartbeat_at FROM retry_runs
             WHERE CAST(?1 AS TEXT) IS NULL",
        )
    }
}

impl Dlq {
    /// The metrics of every job, or of `job_id` (an unknown job is
    /// [`crate::Error::JobNotFound`]). A run recorded as running on `host`
    /// whose process is gone, or whose heartbeat is older than
    /// `stale_after_secs`, counts as crashed.
    pub fn metrics_snapshot(
        &self,
        job_id: Option<&str>,
        host: &str,
        stale_after_secs: i64,
    ) -> Result<MetricsSnapshot> {
        if let Some(job) = job_id {
            self.require_job(job)?;
        }
        // Before this method takes its own connection: an in-memory
        // database has only one.
        let oldest = self.oldest_items(job_id)?;
        let now = self.age_now();
        let real_now = self.now();
        // One read transaction: the counts below agree with each other.
        let (jobs_sql, types_sql, events_sql, runs_sql) = statements(job_id.is_some());
        let (schema_version, jobs, error_types, events, runs, families) = self.read(|tx| {
            let schema_version = super::schema_version(tx)?;
            let jobs = tx.collect(jobs_sql, vals![job_id], |row| {
                Ok(JobCounts {
                    job_id: row.text(0)?,
                    items: row.i64(1)?,
                    eligible: row.i64(2)?,
                    manual_review: row.i64(3)?,
                })
            })?;
            let error_types = tx.collect(types_sql, vals![job_id], |row| {
                Ok(ErrorTypeCount {
                    job_id: row.text(0)?,
                    error_type: row.text(1)?,
                    category: row.text(2)?.parse()?,
                    items: row.i64(3)?,
                })
            })?;
            let mut events = BTreeMap::new();
            tx.each(events_sql, vals![job_id], |row| {
                events.insert(row.text(0)?, row.i64(1)?);
                Ok(())
            })?;
            // retry_runs holds a row per run (a few per retry command), not
            // per item: read whole, counted here, so that each running one
            // can be checked for a crash.
            let mut runs: BTreeMap<(String, &'static str), (RunStatus, i64)> = BTreeMap::new();
            tx.each(runs_sql, vals![job_id], |row| {
                let job = row.text(0)?;
                let name = row.text(1)?;
                let mut status = RunStatus::from_name(&name).ok_or_else(|| {
                    crate::error::Error::invalid_argument(
                        "retry_runs.status",
                        format!("{name:?} is not a run status"),
                    )
                })?;
                if status == RunStatus::Running
                    && run_crashed(
                        &row.text(2)?,
                        row.i64(3)?,
                        row.ts(4)?,
                        host,
                        real_now,
                        stale_after_secs,
                    )
                {
                    status = RunStatus::Crashed;
                }
                runs.entry((job, status.as_str())).or_insert((status, 0)).1 += 1;
                Ok(())
            })?;
            let families = super::analysis::family_groups(tx, job_id, FAMILY_SERIES)?;
            Ok((schema_version, jobs, error_types, events, runs, families))
        })?;
        let runs = runs
            .into_iter()
            .map(|((job_id, _), (status, runs))| RunStatusCount {
                job_id,
                status,
                runs,
            })
            .collect();
        Ok(MetricsSnapshot {
            now,
            schema_version,
            job_id: job_id.map(str::to_string),
            jobs,
            error_types,
            oldest,
            events,
            runs,
            families,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::statements;
    use crate::store::Dlq;

    /// The plan of each query: an index or primary key, never a scan of
    /// items or of the log's rows, and no sort.
    #[test]
    fn the_queries_use_indexes() {
        let dlq = Dlq::open_in_memory().unwrap();
        let conn = dlq.conn().unwrap();
        let plan = |sql: &str, job: Option<&str>| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows: Vec<String> = stmt
                .query_map([job], |row| row.get::<_, String>(3))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            rows.join("; ")
        };
        let (jobs, types, events, _) = statements(true);
        assert!(plan(jobs, Some("j")).contains("SEARCH jobs USING"));
        let types = plan(types, Some("j"));
        assert!(types.contains("SEARCH t USING"), "{types}");
        assert!(!types.contains("TEMP B-TREE"), "{types}");
        let events = plan(events, Some("j"));
        assert!(events.contains("INDEX events_job"), "{events}");
        let (_, types, events, _) = statements(false);
        let types = plan(types, None);
        assert!(!types.contains("TEMP B-TREE"), "{types}");
        let events = plan(events, None);
        assert!(events.contains("COVERING INDEX events_kind"), "{events}");
        assert!(!events.contains("TEMP B-TREE"), "{events}");
    }
}
