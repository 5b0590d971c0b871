//! Taking items out of the DLQ to run them again: in memory
//! ([`Dlq::take_eligible`], for an orchestrator's next map phase) or after
//! `dlq requeue` wrote them to a file ([`Dlq::take_items`]). Either way in
//! one transaction, with a `requeued` event per item. With
//! [`super::TakeOptions::keep_history`] the items stay, marked not eligible,
//! so one that fails again keeps counting its attempts.

use super::items::ListFilter;
use super::Dlq;
use super::EventKind;
use crate::error::{Error, Result};
use rusqlite::params;
use rusqlite::types::Value;
use serde::Serialize;

/// What [`Dlq::take_eligible`] takes.
#[derive(Clone, Debug, Default)]
pub struct TakeOptions {
    /// Only the eligible items of the job that also match this (its
    /// `job_id` and `eligible` are set by the call).
    pub filter: ListFilter,
    /// Keep the items and their history instead of removing them: each is
    /// marked not eligible (so it is not taken twice), and when it fails
    /// again its next attempt joins its history (failure_count goes on
    /// from where it was). An item that then succeeds is still there:
    /// remove it ([`Dlq::remove`]). Default false: taken items are removed,
    /// history and all.
    pub keep_history: bool,
    /// At most this many (in item_id order).
    pub limit: Option<usize>,
}

/// One taken item: its id and the work item to run again.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TakenItem {
    pub item_id: String,
    pub item_data: serde_json::Value,
}

impl Dlq {
    /// Takes a job's eligible items (those `dlq retry` would take without
    /// `--force`) for a requeue, atomically: the items returned are exactly
    /// the items removed (or, with [`TakeOptions::keep_history`], marked
    /// taken), in item_id order. A job that does not exist is
    /// [`crate::ErrorKind::NotFound`]; one with nothing eligible gives an
    /// empty list.
    pub fn take_eligible(&self, job_id: &str, options: &TakeOptions) -> Result<Vec<TakenItem>> {
        let mut filter = options.filter.clone();
        filter.job_id = Some(job_id.to_string());
        filter.eligible = Some(true);
        let now = self.age_now();
        let take = |tx: &mut super::WriteTx<'_>| -> Result<Vec<TakenItem>> {
            let conn = tx.conn()?;
            let exists: bool = conn
                .prepare_cached("SELECT EXISTS (SELECT 1 FROM jobs WHERE job_id = ?1)")?
                .query_row([job_id], |row| row.get(0))?;
            if !exists {
                return Err(Error::JobNotFound(job_id.to_string()));
            }
            let mut sql =
                String::from("SELECT i.id, i.item_id, i.item_data FROM items i WHERE 1 = 1");
            let mut values = Vec::new();
            filter.push_conditions(now, &mut sql, &mut values);
            sql.push_str(" ORDER BY i.item_id LIMIT ?");
            values.push(Value::Integer(
                options
                    .limit
                    .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX)),
            ));
            conn.execute_batch(
                "CREATE TEMP TABLE IF NOT EXISTS taken_keys (id INTEGER PRIMARY KEY);
                 DELETE FROM temp.taken_keys;",
            )?;
            let mut taken = Vec::new();
            {
                let mut select = conn.prepare(&sql)?;
                let mut keep =
                    conn.prepare_cached("INSERT INTO temp.taken_keys (id) VALUES (?1)")?;
                let mut rows = select.query(rusqlite::params_from_iter(values))?;
                while let Some(row) = rows.next()? {
                    let key: i64 = row.get("id")?;
                    let data: String = row.get("item_data")?;
                    keep.execute([key])?;
                    taken.push(TakenItem {
                        item_id: row.get("item_id")?,
                        item_data: serde_json::from_str(&data)?,
                    });
                }
            }
            let detail =
                serde_json::json!({"destination": "memory", "keep_history": options.keep_history});
            if options.keep_history {
                // Not a mark: the item's next failure decides its flags
                // again, as any newer copy does.
                conn.execute(
                    "UPDATE items SET reprocess_eligible = 0, reprocess_eligible_marked = 0
                     WHERE id IN (SELECT id FROM temp.taken_keys)",
                    [],
                )?;
                for item in &taken {
                    tx.event(
                        EventKind::Requeued,
                        Some(job_id),
                        Some(&item.item_id),
                        detail.clone(),
                    )?;
                }
            } else {
                super::bulk::delete_items(
                    tx,
                    " AND i.id IN (SELECT id FROM temp.taken_keys)",
                    &[],
                    EventKind::Requeued,
                    detail,
                )?;
            }
            tx.conn()?.execute_batch("DELETE FROM temp.taken_keys;")?;
            Ok(taken)
        };
        if options.keep_history {
            self.write(take)
        } else {
            self.write_bulk(take)
        }
    }

    /// Removes exactly these (job_id, item_id) items in one transaction, a
    /// `requeued` event each naming where they went. Returns how many.
    pub fn take_items(&self, items: &[(String, String)], destination: &str) -> Result<usize> {
        if items.is_empty() {
            return Ok(0);
        }
        self.write_bulk(|tx| {
            tx.conn()?.execute_batch(
                "CREATE TEMP TABLE IF NOT EXISTS taken_items (job_id TEXT NOT NULL, item_id TEXT NOT NULL,
                     PRIMARY KEY (job_id, item_id));
                 DELETE FROM temp.taken_items;",
            )?;
            {
                let mut insert = tx
                    .conn()?
                    .prepare_cached("INSERT OR IGNORE INTO temp.taken_items (job_id, item_id) VALUES (?1, ?2)")?;
                for (job_id, item_id) in items {
                    insert.execute(params![job_id, item_id])?;
                }
            }
            let taken = super::bulk::delete_items(
                tx,
                " AND EXISTS (SELECT 1 FROM temp.taken_items t WHERE t.job_id = i.job_id AND t.item_id = i.item_id)",
                &[],
                EventKind::Requeued,
                serde_json::json!({"destination": destination}),
            )?;
            tx.conn()?.execute_batch("DELETE FROM temp.taken_items;")?;
            Ok(taken)
        })
    }
}
