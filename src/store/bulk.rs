//! Deleting many items at once (purge, clear, requeue): set-based statements
//! instead of row-by-row triggers and cascades, with one audit event per
//! item. Runs inside the caller's write transaction, which must come from
//! `Dlq::write_bulk` (foreign key actions off: the children are deleted
//! here).

use super::filter_sql::Takes;
use super::sql::SqlValue as Value;
use super::sql::{vals, Backend, Val};
use super::write::WriteTx;
use super::EventKind;
use crate::error::Result;
use rusqlite::params_from_iter;
use serde::Serialize;

/// From this share of the table on, a bulk delete rebuilds the indexes of
/// items instead of deleting from them (see below).
const REBUILD_FRACTION: f64 = 0.4;

/// Deletes the items of `items AS i` matching `condition` (fixed SQL with
/// `?` placeholders for `values`), writing a `kind` event for each with its
/// signature and last_attempt (and `extra` in the detail). Returns how many.
pub(super) fn delete_items(
    tx: &mut WriteTx<'_>,
    condition: &str,
    values: &[Value],
    kind: EventKind,
    extra: serde_json::Value,
) -> Result<usize> {
    if tx.sql().backend() == Backend::Postgres {
        return delete_postgres(tx, condition, values, kind, &extra, &mut |_, _| {});
    }
    with_temp_cache(tx, |tx| {
        delete(tx, condition, values, kind, &extra, &mut |_, _| {})
    })
}

/// The bulk delete on PostgreSQL: one statement deletes the rows, writes
/// their events and takes them out of the counters, set-based (the
/// cascades remove attempts and artifacts). The row triggers that keep the
/// counters are set aside for that statement (`dlq.counter_triggers`, a
/// setting of this transaction only): run per row they made a purge of
/// 500,000 of 1,000,000 items take 247 s, against 10 s for the delete
/// itself. A counter row the delete empties is deleted, the others lowered
/// (two CTEs on disjoint rows: a statement may change a row only once).
/// The jobs involved are locked first,
/// in the order adds lock them (job row, then items), so a delete and an
/// add never deadlock; a row a concurrent add changed is checked against
/// the condition again before it goes (READ COMMITTED re-evaluation).
fn delete_postgres(
    tx: &mut WriteTx<'_>,
    condition: &str,
    values: &[Value],
    kind: EventKind,
    extra: &serde_json::Value,
    step: &mut dyn FnMut(DeleteStep, usize),
) -> Result<usize> {
    step(DeleteStep::Selecting, 0);
    let conn = tx.sql();
    let bound: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
    conn.exec(
        &format!(
            "SELECT 1 FROM jobs WHERE job_id IN (SELECT i.job_id FROM items i WHERE 1 = 1{condition})
             ORDER BY job_id FOR UPDATE"
        ),
        &bound,
    )?;
    step(DeleteStep::Deleting, 0);
    let extra = extra.to_string();
    let kind = kind.as_str();
    let mut all = bound.clone();
    all.extend_from_slice(vals![tx.now(), kind, &extra]);
    // The condition's placeholders come first in the text, then the
    // event's: bare `?` are numbered in order.
    let events = tx.events_table()?;
    // The counters must already hold what this transaction inserted: a
    // counter row is deleted when the delete empties it.
    tx.flush_counts()?;
    let conn = tx.sql();
    conn.exec("SET LOCAL dlq.counter_triggers = 'off'", &[])?;
    let deleted = conn.row(
        &format!(
            "WITH gone AS (
                 DELETE FROM items i WHERE 1 = 1{condition}
                 RETURNING i.id, i.job_id, i.item_id, i.error_signature, i.last_attempt,
                     i.last_attempt_ns, i.reprocess_eligible, i.manual_review_required,
                     i.failure_count, COALESCE(i.last_error_type, '') AS error_type),
             logged AS (
                 INSERT INTO {events} (time, kind, job_id, item_id, detail)
                 SELECT ?, ?, job_id, item_id,
                     jsonb_build_object('error_signature', error_signature,
                         'last_attempt', dlq_ts_text(last_attempt, last_attempt_ns)) || jsonb_strip_nulls(CAST(? AS jsonb))
                 FROM gone ORDER BY id
                 RETURNING 1),
             per_job AS (
                 SELECT job_id, COUNT(*) AS n, SUM(reprocess_eligible) AS eligible,
                     SUM(manual_review_required) AS review, SUM(failure_count) AS failures
                 FROM gone GROUP BY job_id),
             jobs_lowered AS (
                 UPDATE jobs j SET item_count = j.item_count - g.n,
                     eligible_count = j.eligible_count - g.eligible,
                     manual_review_count = j.manual_review_count - g.review,
                     failure_count_sum = j.failure_count_sum - g.failures
                 FROM per_job g WHERE j.job_id = g.job_id
                 RETURNING 1),
             per_signature AS (
                 SELECT job_id, error_signature, COUNT(*) AS n FROM gone GROUP BY 1, 2),
             signatures_emptied AS (
                 DELETE FROM signature_counts s USING per_signature g
                 WHERE s.job_id = g.job_id AND s.error_signature = g.error_signature
                     AND s.item_count <= g.n
                 RETURNING 1),
             signatures_lowered AS (
                 UPDATE signature_counts s SET item_count = s.item_count - g.n
                 FROM per_signature g
                 WHERE s.job_id = g.job_id AND s.error_signature = g.error_signature
                     AND s.item_count > g.n
                 RETURNING 1),
             per_type AS (
                 SELECT job_id, error_type, COUNT(*) AS n FROM gone GROUP BY 1, 2),
             types_emptied AS (
                 DELETE FROM error_type_counts s USING per_type g
                 WHERE s.job_id = g.job_id AND s.error_type = g.error_type AND s.item_count <= g.n
                 RETURNING 1),
             types_lowered AS (
                 UPDATE error_type_counts s SET item_count = s.item_count - g.n
                 FROM per_type g
                 WHERE s.job_id = g.job_id AND s.error_type = g.error_type AND s.item_count > g.n
                 RETURNING 1)
             SELECT COUNT(*) FROM logged"
        ),
        &all,
        |row| row.i64(0),
    )?;
    conn.exec("SET LOCAL dlq.counter_triggers = 'on'", &[])?;
    Ok(usize::try_from(deleted.unwrap_or(0)).unwrap_or(0))
}

/// The steps of a bulk delete, each reported as it starts. A step is one
/// or a few set-based statements, whose rows cannot be counted as they go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeleteStep {
    /// Finding the items to delete.
    Selecting,
    /// One audit event per item.
    WritingEvents,
    UpdatingCounters,
    /// The items, their attempts and their artifacts.
    Deleting,
    /// Building the indexes of items again (when a large share went).
    RebuildingIndexes,
    /// Committing (syncing) the transaction.
    Committing,
}

/// Progress of a purge, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub struct PurgeProgress {
    /// The step that has just started.
    pub step: DeleteStep,
    /// The items being deleted (0 while [`DeleteStep::Selecting`]).
    pub items: usize,
    pub elapsed: std::time::Duration,
}

/// Runs `f` with a small page cache for the temp database, where the
/// doomed row keys go (8 bytes each): what would not fit spills to a temp
/// file, read in order. The main database keeps the pool's cache. Big caches
/// (256 MB each) made a purge of 500,000 items 2-3x faster but its peak RSS
/// 415 MB; now nothing in a purge grows with its size but SQLite's sorter,
/// which spills to disk past the cache too.
fn with_temp_cache<T>(
    tx: &mut WriteTx<'_>,
    f: impl FnOnce(&mut WriteTx<'_>) -> Result<T>,
) -> Result<T> {
    let conn = tx.conn()?;
    let temp_cache: i64 = conn.query_row("PRAGMA temp.cache_size", [], |row| row.get(0))?;
    let main_cache: i64 = conn.query_row("PRAGMA main.cache_size", [], |row| row.get(0))?;
    conn.pragma_update(Some("temp"), "cache_size", -TEMP_CACHE_KIB)?;
    conn.pragma_update(Some("main"), "cache_size", -MAIN_CACHE_KIB)?;
    let result = f(tx);
    tx.conn()?
        .pragma_update(Some("temp"), "cache_size", temp_cache)?;
    tx.conn()?
        .pragma_update(Some("main"), "cache_size", main_cache)?;
    result
}

/// The temp database's cache during a bulk delete, in KiB.
const TEMP_CACHE_KIB: i64 = 8_192;
const MAIN_CACHE_KIB: i64 = 16_384;

fn delete(
    tx: &mut WriteTx<'_>,
    condition: &str,
    values: &[Value],
    kind: EventKind,
    extra: &serde_json::Value,
    step: &mut dyn FnMut(DeleteStep, usize),
) -> Result<usize> {
    step(DeleteStep::Selecting, 0);
    let conn = tx.conn()?;
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS doomed_ids (id INTEGER PRIMARY KEY);
         DELETE FROM temp.doomed_ids;",
    )?;
    // `condition` is SQL built from fixed fragments; the values are bound.
    let select =
        format!("INSERT INTO temp.doomed_ids (id) SELECT i.id FROM items i WHERE 1 = 1{condition}");
    let doomed = conn.execute(
        &select,
        params_from_iter(values.iter().map(Val::from_value)),
    )?;
    if doomed == 0 {
        return Ok(0);
    }
    step(DeleteStep::WritingEvents, doomed);
    // The events and the counters read the doomed rows in rowid order (the
    // keys are the temp table's own order; CROSS JOIN keeps SQLite from
    // walking an index of items instead), so the table is read front to
    // back, not in the index order the selection came in.
    conn.execute(
        "INSERT INTO events (time, kind, job_id, item_id, detail)
         SELECT ?1, ?2, i.job_id, i.item_id,
             json_patch(json_object('error_signature', i.error_signature, 'last_attempt', i.last_attempt), ?3)
         FROM temp.doomed_ids d CROSS JOIN items i ON i.id = d.id ORDER BY d.id",
        rusqlite::params![tx.now().to_storage(), kind.as_str(), extra.to_string()],
    )?;
    step(DeleteStep::UpdatingCounters, doomed);
    super::counters::subtract_doomed(conn)?;
    // The counters are done; the per-row trigger would count every item
    // again (and load each deleted row to do it).
    let triggers = tx.suspend_item_triggers()?;
    // Each deleted item costs a B-tree delete in every index of items, in
    // rowid order, which is random order for each index. When a large part
    // of the table goes, dropping the indexes and building them again from
    // the rows left (a sort and a sequential load) is cheaper: measured on
    // 1,000,000 items, removing half took 8.7 s with the indexes in place
    // and 6.8 s with the rebuild; the two cross near 40%.
    let left: i64 =
        tx.conn()?
            .query_row("SELECT COALESCE(SUM(item_count), 0) FROM jobs", [], |row| {
                row.get(0)
            })?;
    let rebuild = doomed as f64 >= REBUILD_FRACTION * (left as f64 + doomed as f64);
    let indexes = if rebuild {
        Some(tx.suspend_item_indexes()?)
    } else {
        None
    };
    // The message search index forgets the doomed attempts in one
    // statement, not a trigger per row.
    let search = tx.suspend_search_index()?;
    tx.unindex_doomed_attempts()?;
    step(DeleteStep::Deleting, doomed);
    // Children first: the caller turned SQLite's cascades off (see
    // Dlq::write_bulk), so nothing else removes them.
    tx.conn()?.execute_batch(
        "DELETE FROM failure_history WHERE item_key IN (SELECT id FROM temp.doomed_ids);
         DELETE FROM worktree_artifacts WHERE item_key IN (SELECT id FROM temp.doomed_ids);
         DELETE FROM items WHERE id IN (SELECT id FROM temp.doomed_ids);
         DELETE FROM temp.doomed_ids;",
    )?;
    if let Some(indexes) = indexes {
        step(DeleteStep::RebuildingIndexes, doomed);
        tx.restore(indexes)?;
    }
    tx.restore(search)?;
    tx.restore(triggers)?;
    Ok(doomed)
}

/// What a purge did (or, dry, would do).
#[derive(Clone, Debug, Serialize)]
pub struct PurgeReport {
    /// Items whose last_attempt is before this were taken.
    pub cutoff: crate::time::Timestamp,
    pub items: usize,
    pub dry_run: bool,
    /// The time the purge took as now (the cutoff is this minus the days).
    #[serde(skip)]
    pub now: crate::time::Timestamp,
    /// A dry run's token of the items it counted: [`super::Dlq::purge_counted`]
    /// removes exactly those or refuses.
    #[serde(skip)]
    pub selection: Option<String>,
}

impl super::Dlq {
    /// Removes the items matching `filter` whose last_attempt is more than
    /// `older_than_days` days before now, one `purged` event per item, in one
    /// transaction. With `dry_run`, counts them and changes nothing.
    pub fn purge(
        &self,
        older_than_days: u32,
        filter: &super::ListFilter,
        dry_run: bool,
    ) -> Result<PurgeReport> {
        self.purge_at(self.age_now(), older_than_days, filter, dry_run)
    }

    /// [`super::Dlq::purge`] as if it were `now` (for the cutoff and for `now` in
    /// the filter): a purge confirmed after its dry run passes the dry
    /// run's [`PurgeReport::now`], so it removes what was counted, not what
    /// the clock added while a person read the question.
    pub fn purge_at(
        &self,
        now: crate::time::Timestamp,
        older_than_days: u32,
        filter: &super::ListFilter,
        dry_run: bool,
    ) -> Result<PurgeReport> {
        self.purge_at_with_progress(now, older_than_days, filter, dry_run, |_| {})
    }

    /// [`super::Dlq::purge_at`], reporting each step of the delete as it
    /// starts (a dry run, one count, reports nothing).
    pub fn purge_at_with_progress(
        &self,
        now: crate::time::Timestamp,
        older_than_days: u32,
        filter: &super::ListFilter,
        dry_run: bool,
        progress: impl FnMut(&PurgeProgress),
    ) -> Result<PurgeReport> {
        self.purge_checked(now, older_than_days, filter, dry_run, None, progress)
    }

    fn purge_checked(
        &self,
        now: crate::time::Timestamp,
        older_than_days: u32,
        filter: &super::ListFilter,
        dry_run: bool,
        expect: Option<&str>,
        mut progress: impl FnMut(&PurgeProgress),
    ) -> Result<PurgeReport> {
        let started = std::time::Instant::now();
        let mut step = |step, items| {
            progress(&PurgeProgress {
                step,
                items,
                elapsed: started.elapsed(),
            })
        };
        let cutoff = now.minus_seconds(i64::from(older_than_days) * 86_400);
        let mut filter = filter.clone();
        filter.until = Some(match filter.until {
            Some(until) => until.min(cutoff),
            None => cutoff,
        });
        // Every match is taken: message searches read the search index's
        // candidates. (The plan is a matter of speed only, so it is read
        // before the transaction that deletes.)
        let plan = self.read(|conn| filter.search_plan(conn, Takes::Every))?;
        let mut condition = String::new();
        let mut values = Vec::new();
        filter.push_conditions_on(self.backend(), now, &plan, &mut condition, &mut values);
        if dry_run {
            let print =
                self.read(|conn| super::selection::fingerprint(conn, &condition, &values))?;
            return Ok(PurgeReport {
                cutoff,
                items: usize::try_from(print.0).unwrap_or(0),
                dry_run,
                now,
                selection: Some(super::selection::token(now, print)),
            });
        }
        let items = self.write_bulk(|tx| {
            if let Some(expected) = expect {
                // Inside the transaction that deletes: exactly what was
                // counted, or nothing.
                let print = super::selection::fingerprint(tx.sql(), &condition, &values)?;
                if super::selection::token(now, print) != expected {
                    return Err(crate::error::Error::SelectionChanged {
                        counted: expected
                            .split('.')
                            .next()
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(0),
                        now: print.0,
                    });
                }
            }
            let extra = serde_json::json!({"cutoff": cutoff});
            if tx.sql().backend() == Backend::Postgres {
                return delete_postgres(
                    tx,
                    &condition,
                    &values,
                    EventKind::Purged,
                    &extra,
                    &mut step,
                );
            }
            let items = with_temp_cache(tx, |tx| {
                delete(
                    tx,
                    &condition,
                    &values,
                    EventKind::Purged,
                    &extra,
                    &mut step,
                )
            })?;
            if items > 0 {
                step(DeleteStep::Committing, items);
            }
            Ok(items)
        })?;
        if items > 0 {
            // The purge is committed; this only hands its pages back.
            self.release_free_pages();
        }
        Ok(PurgeReport {
            cutoff,
            items,
            dry_run,
            now,
            selection: None,
        })
    }

    /// Removes exactly the items a dry run of the purge counted
    /// (`counted`, from [`super::Dlq::purge`] with `dry_run`), at the same now, or
    /// nothing: [`crate::Error::SelectionChanged`] when any of them changed,
    /// went, or others came to match meanwhile (what `dlq purge` asks
    /// about is what it removes).
    pub fn purge_counted(
        &self,
        counted: &PurgeReport,
        older_than_days: u32,
        filter: &super::ListFilter,
        progress: impl FnMut(&PurgeProgress),
    ) -> Result<PurgeReport> {
        self.purge_checked(
            counted.now,
            older_than_days,
            filter,
            false,
            counted.selection.as_deref(),
            progress,
        )
    }
}
