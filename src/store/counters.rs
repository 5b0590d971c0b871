//! The derived counters, and the one definition of an item's "last attempt"
//! they depend on. This module owns every rule that keeps them equal to a
//! recount of `items`:
//!
//! - `jobs.item_count`, `eligible_count`, `manual_review_count`,
//!   `failure_count_sum`;
//! - `signature_counts` (items per job and signature);
//! - `error_type_counts` (items per job and last error type, `''` for an
//!   item with no attempt);
//! - `items.last_error_type`, the error type of the item's last attempt.
//!
//! Who changes them, and when:
//!
//! - **Inserts** by dlq are counted here in memory ([`InsertCounts`]) and
//!   written in one go ([`InsertCounts::flush`]); a trigger on INSERT made
//!   SQLite journal every insert (measured: imports 25% slower).
//! - **Row-by-row UPDATE and DELETE** (merge, mark, retry, eviction,
//!   `remove`, and anything typed into the sqlite3 shell) are counted by the
//!   triggers `items_counters_update` and `items_counters_delete` (schema
//!   V1, delete trigger as of V3), which apply the same arithmetic per row.
//! - **Bulk deletes** (purge, clear, requeue) drop the triggers inside their
//!   transaction and subtract whole groups at once ([`subtract_doomed`]).
//! - [`recount`] recomputes everything from the rows (`dlq db --recount`,
//!   after inserting rows by hand).
//!
//! The one ordering rule between them: pending insert counts must be
//! written before any statement in the same transaction that fires a
//! trigger, because a trigger's decrement of a signature count that is still
//! pending finds no row and is lost. `WriteTx` flushes before every UPDATE
//! and DELETE of `items` it makes.

use super::sql::{vals, Conn};
use crate::error::Result;
use crate::model::DeadLetteredItem;
use rusqlite::Connection;
use std::collections::HashMap;

/// The order that puts an item's last attempt first: the latest timestamp,
/// then the highest attempt_number, with the columns of the attempts
/// aliased `alias` (empty: unqualified). Stored timestamps are fixed-width
/// UTC text, so text order is time order. The index
/// `failure_history_last` (schema V4) serves it. The Rust side of the same
/// rule is [`DeadLetteredItem::last_failure`]; the `item_summary` view
/// (schema V4) spells it out too, since a view cannot refer to this.
pub(crate) fn last_attempt_order(backend: super::Backend, alias: &str) -> String {
    let dot = if alias.is_empty() { "" } else { "." };
    format!(
        "{}, {alias}{dot}attempt_number DESC",
        backend.ts_order(&format!("{alias}{dot}timestamp"), true)
    )
}

/// A scalar subquery for `column` (e.g. `error_type`, or `id`) of the last
/// attempt of the item whose key is `item_key` (an SQL expression such as
/// `i.id`). On PostgreSQL the nanoseconds below the microsecond break a tie
/// of `timestamp` ([`super::Backend::ts_order`]).
pub(crate) fn last_attempt_select(backend: super::Backend, column: &str, item_key: &str) -> String {
    format!(
        "(SELECT last_f.{column} FROM failure_history AS last_f WHERE last_f.item_key = {item_key} \
         ORDER BY {} LIMIT 1)",
        last_attempt_order(backend, "last_f")
    )
}

/// Counter changes for inserted items, applied in one go.
#[derive(Default)]
pub struct InsertCounts {
    /// Per job: items, eligible, manual review, failure_count sum, and the
    /// items per signature and per last error type.
    jobs: HashMap<String, JobCounts>,
    /// Keys held in all the maps above.
    keys: usize,
}

/// Pending keys past which the counts are written out: with a signature
/// per item, a bulk import held one entry per item until its commit
/// (153 MB at 1,000,000 items).
pub const MAX_PENDING_KEYS: usize = 50_000;

#[derive(Default)]
struct JobCounts {
    totals: [i64; 4],
    signatures: HashMap<String, i64>,
    error_types: HashMap<String, i64>,
}

/// Counts one for `key`; true when the key is new.
fn bump(map: &mut HashMap<String, i64>, key: &str) -> bool {
    match map.get_mut(key) {
        Some(count) => {
            *count += 1;
            false
        }
        None => {
            map.insert(key.to_string(), 1);
            true
        }
    }
}

impl InsertCounts {
    /// Counts one inserted item (allocating only for a new job or signature).
    pub fn add(&mut self, job_id: &str, item: &DeadLetteredItem) {
        if !self.jobs.contains_key(job_id) {
            self.jobs.insert(job_id.to_string(), Default::default());
        }
        let Some(job) = self.jobs.get_mut(job_id) else {
            return;
        };
        job.totals[0] += 1;
        job.totals[1] += i64::from(item.reprocess_eligible);
        job.totals[2] += i64::from(item.manual_review_required);
        job.totals[3] += i64::from(item.failure_count);
        self.keys += usize::from(bump(&mut job.signatures, &item.error_signature));
        self.keys += usize::from(bump(
            &mut job.error_types,
            super::rows::last_error_type(item).unwrap_or(""),
        ));
    }

    /// Whether enough is pending to write it out now.
    pub fn is_full(&self) -> bool {
        self.keys >= MAX_PENDING_KEYS
    }

    /// Writes the counts and starts again from zero. Jobs and keys go in
    /// sorted order, so two transactions lock counter rows in one order
    /// (PostgreSQL would otherwise see a deadlock between them).
    pub fn flush(&mut self, conn: Conn<'_>) -> Result<()> {
        if self.jobs.is_empty() {
            return Ok(());
        }
        self.keys = 0;
        let mut jobs: Vec<_> = self.jobs.drain().collect();
        jobs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (job_id, job) in jobs {
            let [items, eligible, manual, failures] = job.totals;
            conn.exec(
                "UPDATE jobs SET item_count = item_count + ?2,
                     eligible_count = eligible_count + ?3,
                     manual_review_count = manual_review_count + ?4,
                     failure_count_sum = failure_count_sum + ?5
                 WHERE job_id = ?1",
                vals![&job_id, items, eligible, manual, failures],
            )?;
            for (sql, counts) in [
                (
                    "INSERT INTO signature_counts (job_id, error_signature, item_count) VALUES (?1, ?2, ?3)
                     ON CONFLICT (job_id, error_signature)
                     DO UPDATE SET item_count = signature_counts.item_count + excluded.item_count",
                    job.signatures,
                ),
                (
                    "INSERT INTO error_type_counts (job_id, error_type, item_count) VALUES (?1, ?2, ?3)
                     ON CONFLICT (job_id, error_type)
                     DO UPDATE SET item_count = error_type_counts.item_count + excluded.item_count",
                    job.error_types,
                ),
            ] {
                let mut counts: Vec<_> = counts.into_iter().collect();
                counts.sort_unstable();
                for (key, count) in counts {
                    conn.exec(sql, vals![&job_id, &key, count])?;
                }
            }
        }
        Ok(())
    }
}

/// Subtracts the items whose keys are in `temp.doomed_ids` (see bulk.rs)
/// from every counter, from one grouping of them (one sort instead of
/// three), reading the rows in rowid order.
/// The caller deletes the rows with the triggers dropped.
pub(super) fn subtract_doomed(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS doomed_groups (
             job_id TEXT, error_signature TEXT, error_type TEXT,
             n INTEGER, eligible INTEGER, manual INTEGER, failures INTEGER);
         DELETE FROM temp.doomed_groups;
         INSERT INTO temp.doomed_groups
         SELECT i.job_id, i.error_signature, COALESCE(i.last_error_type, ''), COUNT(*),
                SUM(i.reprocess_eligible), SUM(i.manual_review_required), SUM(i.failure_count)
         FROM temp.doomed_ids d CROSS JOIN items i ON i.id = d.id GROUP BY 1, 2, 3;
         UPDATE jobs SET
             item_count = item_count - x.n,
             eligible_count = eligible_count - x.eligible,
             manual_review_count = manual_review_count - x.manual,
             failure_count_sum = failure_count_sum - x.failures
         FROM (SELECT job_id, SUM(n) AS n, SUM(eligible) AS eligible,
                      SUM(manual) AS manual, SUM(failures) AS failures
               FROM temp.doomed_groups GROUP BY job_id) AS x
         WHERE jobs.job_id = x.job_id;
         UPDATE signature_counts SET item_count = item_count - x.n
         FROM (SELECT job_id, error_signature, SUM(n) AS n
               FROM temp.doomed_groups GROUP BY 1, 2) AS x
         WHERE signature_counts.job_id = x.job_id AND signature_counts.error_signature = x.error_signature;
         DELETE FROM signature_counts WHERE item_count <= 0;
         UPDATE error_type_counts SET item_count = item_count - x.n
         FROM (SELECT job_id, error_type, SUM(n) AS n
               FROM temp.doomed_groups GROUP BY 1, 2) AS x
         WHERE error_type_counts.job_id = x.job_id AND error_type_counts.error_type = x.error_type;
         DELETE FROM error_type_counts WHERE item_count <= 0;
         DELETE FROM temp.doomed_groups;",
    )?;
    Ok(())
}

/// Recomputes every counter from the rows: the job counters, the signature
/// and error type counts, and each item's last_error_type from its history.
pub fn recount(conn: super::sql::Conn<'_>) -> Result<RecountReport> {
    let last_type = last_attempt_select(conn.backend(), "error_type", "items.id");
    // The keys whose counter differs from a recount (wrong, missing or
    // extra), counted before the counters are rebuilt.
    let drift = |table: &str, key: &str, recount: &str| -> Result<u64> {
        let sql = format!(
            "SELECT COUNT(*) FROM (
                 SELECT job_id, {key} FROM (
                     SELECT job_id, {key}, item_count FROM {table} EXCEPT {recount}) a
                 UNION
                 SELECT job_id, {key} FROM ({recount} EXCEPT
                     SELECT job_id, {key}, item_count FROM {table}) b) d"
        );
        let n = conn.row(&sql, &[], |row| row.i64(0))?.unwrap_or(0);
        Ok(u64::try_from(n).unwrap_or(0))
    };
    let mut report = RecountReport {
        jobs: conn.exec(
            "UPDATE jobs SET
                 item_count = (SELECT COUNT(*) FROM items i WHERE i.job_id = jobs.job_id),
                 eligible_count = (SELECT COUNT(*) FROM items i WHERE i.job_id = jobs.job_id AND i.reprocess_eligible = 1),
                 manual_review_count = (SELECT COUNT(*) FROM items i WHERE i.job_id = jobs.job_id AND i.manual_review_required = 1),
                 failure_count_sum = (SELECT COALESCE(SUM(failure_count), 0) FROM items i WHERE i.job_id = jobs.job_id)
             WHERE item_count <> (SELECT COUNT(*) FROM items i WHERE i.job_id = jobs.job_id)
                OR eligible_count <> (SELECT COUNT(*) FROM items i WHERE i.job_id = jobs.job_id AND i.reprocess_eligible = 1)
                OR manual_review_count <> (SELECT COUNT(*) FROM items i WHERE i.job_id = jobs.job_id AND i.manual_review_required = 1)
                OR failure_count_sum <> (SELECT COALESCE(SUM(failure_count), 0) FROM items i WHERE i.job_id = jobs.job_id)",
            &[],
        )? as u64,
        signatures: drift(
            "signature_counts",
            "error_signature",
            "SELECT job_id, error_signature, COUNT(*) FROM items GROUP BY job_id, error_signature",
        )?,
        last_error_types: conn.exec(
            &format!(
                "UPDATE items SET last_error_type = {last_type} WHERE last_error_type IS DISTINCT FROM {last_type}"
            ),
            &[],
        )? as u64,
        error_types: 0,
    };
    report.error_types = drift(
        "error_type_counts",
        "error_type",
        "SELECT job_id, COALESCE(last_error_type, '') AS error_type, COUNT(*) FROM items
         GROUP BY job_id, COALESCE(last_error_type, '')",
    )?;
    for statement in [
        "DELETE FROM signature_counts",
        "INSERT INTO signature_counts (job_id, error_signature, item_count)
             SELECT job_id, error_signature, COUNT(*) FROM items GROUP BY job_id, error_signature",
        "DELETE FROM error_type_counts",
        "INSERT INTO error_type_counts (job_id, error_type, item_count)
             SELECT job_id, COALESCE(last_error_type, ''), COUNT(*) FROM items
             GROUP BY job_id, COALESCE(last_error_type, '')",
    ] {
        conn.exec(statement, &[])?;
    }
    Ok(report)
}

/// What [`super::Dlq::recount`] found wrong (and set right): zero
/// everywhere when every counter already equalled a recount.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecountReport {
    /// Jobs whose item, eligible, manual-review or failure counters were off.
    pub jobs: u64,
    /// (job, signature) counters that were off, missing or left over.
    pub signatures: u64,
    /// Items whose cached last error type was not their last attempt's.
    pub last_error_types: u64,
    /// (job, error type) counters that were off, missing or left over.
    pub error_types: u64,
}

impl RecountReport {
    /// Whether every counter was already right.
    pub fn nothing_off(&self) -> bool {
        *self == RecountReport::default()
    }
}

impl super::Dlq {
    /// Recomputes the job counters and signature counts from the items: for
    /// after rows were inserted by hand (updates and deletes are counted by
    /// triggers, inserts by dlq itself).
    pub fn recount(&self) -> Result<RecountReport> {
        self.write(|tx| super::counters::recount(tx.sql()))
    }
}

impl super::Dlq {
    /// A job's `n` most common error signatures with their item counts,
    /// from the signature counters (most first, then by signature).
    pub fn top_signatures(&self, job_id: &str, n: usize) -> Result<Vec<(String, i64)>> {
        let limit = i64::try_from(n).unwrap_or(i64::MAX);
        self.read(|conn| {
            conn.collect(
                "SELECT error_signature, item_count FROM signature_counts WHERE job_id = ?1
                 ORDER BY item_count DESC, error_signature LIMIT ?2",
                vals![job_id, limit],
                |row| Ok((row.text(0)?, row.i64(1)?)),
            )
        })
    }
}

/// The count of a filter that asks only for a job and the flags the jobs
/// table counts (no times, no expression), from those counters; `None`
/// when the filter needs the items.
pub(super) fn count_from_counters(
    conn: Conn<'_>,
    filter: &super::ListFilter,
) -> Result<Option<u64>> {
    if filter.since.is_some()
        || filter.until.is_some()
        || filter.expression.is_some()
        || filter.max_key.is_some()
        || filter.leased_to.is_some()
    {
        return Ok(None);
    }
    let column = match (filter.eligible, filter.manual_review) {
        (None, None) => "item_count",
        (Some(true), None) => "eligible_count",
        (None, Some(true)) => "manual_review_count",
        _ => return Ok(None),
    };
    let sql = format!(
        "SELECT COALESCE(SUM({column}), 0) FROM jobs WHERE CAST(?1 AS TEXT) IS NULL OR job_id = ?1"
    );
    let n = conn
        .row(&sql, vals![filter.job_id.as_deref()], |row| row.i64(0))?
        .unwrap_or(0);
    Ok(Some(u64::try_from(n).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(signature: &str, error_type: &str) -> DeadLetteredItem {
        DeadLetteredItem::from_json_str(
            &serde_json::json!({
                "item_id": "a",
                "item_data": null,
                "first_attempt": "2025-01-01T00:00:00Z",
                "last_attempt": "2025-01-01T00:00:00Z",
                "failure_count": 1,
                "failure_history": [{
                    "attempt_number": 1,
                    "timestamp": "2025-01-01T00:00:00Z",
                    "error_type": error_type,
                    "error_message": "m",
                    "agent_id": "a",
                    "step_failed": "s",
                    "duration_ms": 1
                }],
                "error_signature": signature,
                "reprocess_eligible": true,
                "manual_review_required": false
            })
            .to_string(),
        )
        .unwrap()
    }

    /// The bound on pending memory: full at exactly MAX_PENDING_KEYS
    /// distinct (job, signature) and (job, error type) keys, not before;
    /// repeated keys do not count again.
    #[test]
    fn pending_counts_are_full_at_the_key_limit() {
        let mut counts = InsertCounts::default();
        let same = item("sig", "Timeout");
        for _ in 0..10 {
            counts.add("j", &same);
        }
        assert_eq!(counts.keys, 2, "one signature and one error type");
        // Each new signature is one key; a second error type one more.
        counts.add("j", &item("sig", "Other"));
        assert_eq!(counts.keys, 3);
        let mut n = 0;
        while counts.keys < MAX_PENDING_KEYS - 1 {
            assert!(!counts.is_full(), "full at {} keys", counts.keys);
            counts.add("j", &item(&format!("s{n}"), "Timeout"));
            n += 1;
        }
        assert!(!counts.is_full());
        counts.add("j", &same);
        assert!(!counts.is_full(), "a repeated key is not a new one");
        counts.add("j", &item("last", "Timeout"));
        assert_eq!(counts.keys, MAX_PENDING_KEYS);
        assert!(counts.is_full());
        counts.add("k", &same);
        assert_eq!(
            counts.keys,
            MAX_PENDING_KEYS + 2,
            "another job's keys are its own"
        );
    }
}
