//! Taking items out of the DLQ to run them again: in memory
//! ([`Dlq::take_eligible`], for an orchestrator's next map phase) or after
//! `dlq requeue` wrote them to a file ([`Dlq::take_items`]). Either way in
//! one transaction, with a `requeued` event per item. With
//! [`super::TakeOptions::keep_history`] the items stay, marked not eligible,
//! so one that fails again keeps counting its attempts.

use super::items::ListFilter;
use super::sql::SqlValue as Value;
use super::sql::{vals, Val};
use super::Dlq;
use super::EventKind;
use crate::error::{Error, Result};
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

/// An item as read for [`Dlq::take_unchanged`]: its name, its row key
/// and its version ([`super::JobItem`] has both).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadItem {
    pub job_id: String,
    pub item_id: String,
    pub key: i64,
    pub version: i64,
}

impl ReadItem {
    /// What `item` was read as.
    pub fn of(item: &super::JobItem) -> Self {
        ReadItem {
            job_id: item.job_id.clone(),
            item_id: item.item.item_id.clone(),
            key: item.key,
            version: item.version,
        }
    }
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
            let conn = tx.sql();
            // On PostgreSQL this takes the job's row lock too (see
            // WriteTx::lock_job): an add to the job waits for the take.
            let lock = conn.backend().find_job_locked();
            if conn.row(lock, vals![job_id], |_| Ok(()))?.is_none() {
                return Err(Error::JobNotFound(job_id.to_string()));
            }
            // Unqualified temp tables: both backends look in the session's
            // temp schema first.
            conn.exec(
                "CREATE TEMP TABLE IF NOT EXISTS taken_keys (id BIGINT PRIMARY KEY)",
                &[],
            )?;
            conn.exec("DELETE FROM taken_keys", &[])?;
            let mut sql =
                String::from("INSERT INTO taken_keys (id) SELECT i.id FROM items i WHERE 1 = 1");
            let mut values = Vec::new();
            let plan = filter.search_plan(conn, super::filter_sql::Takes::Page)?;
            filter.push_conditions_on(conn.backend(), now, &plan, &mut sql, &mut values);
            sql.push_str(" ORDER BY i.item_id LIMIT ?");
            values.push(Value::Integer(
                options
                    .limit
                    .map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX)),
            ));
            let bound: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
            conn.exec(&sql, &bound)?;
            let taken = conn.collect(
                "SELECT i.item_id, i.item_data FROM taken_keys t JOIN items i ON i.id = t.id
                 ORDER BY i.item_id",
                &[],
                |row| {
                    Ok(TakenItem {
                        item_id: row.text(0)?,
                        item_data: serde_json::from_str(&row.text(1)?)?,
                    })
                },
            )?;
            let detail =
                serde_json::json!({"destination": "memory", "keep_history": options.keep_history});
            if options.keep_history {
                // Not a mark: the item's next failure decides its flags
                // again, as any newer copy does.
                conn.exec(
                    "UPDATE items SET reprocess_eligible = 0, reprocess_eligible_marked = 0
                     WHERE id IN (SELECT id FROM taken_keys)",
                    &[],
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
                    " AND i.id IN (SELECT id FROM taken_keys)",
                    &[],
                    EventKind::Requeued,
                    detail,
                )?;
            }
            tx.sql().exec("DELETE FROM taken_keys", &[])?;
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
        self.take(
            items.iter().map(|(job, item)| (job, item, None)),
            destination,
        )
    }

    /// [`Dlq::take_items`] for items read earlier: each is taken only if it
    /// is still the row it was read from ([`super::JobItem::key`]) at the
    /// version it was read at ([`super::JobItem::version`]); one that
    /// changed since (a failure merged into it), or was removed and stored
    /// again under its name, stays. Returns how many were taken.
    pub fn take_unchanged(&self, items: &[ReadItem], destination: &str) -> Result<usize> {
        self.take(
            items
                .iter()
                .map(|read| (&read.job_id, &read.item_id, Some((read.key, read.version)))),
            destination,
        )
    }

    fn take<'a>(
        &self,
        items: impl ExactSizeIterator<Item = (&'a String, &'a String, Option<(i64, i64)>)> + Clone,
        destination: &str,
    ) -> Result<usize> {
        if items.len() == 0 {
            return Ok(0);
        }
        self.write_bulk(|tx| {
            let conn = tx.sql();
            conn.exec(
                "CREATE TEMP TABLE IF NOT EXISTS taken_rows (job_id TEXT NOT NULL, item_id TEXT NOT NULL,
                     row_key BIGINT, version BIGINT, PRIMARY KEY (job_id, item_id))",
                &[],
            )?;
            conn.exec("DELETE FROM taken_rows", &[])?;
            for (job_id, item_id, read) in items.clone() {
                let (key, version) = read.unzip();
                conn.exec(
                    "INSERT INTO taken_rows (job_id, item_id, row_key, version) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT DO NOTHING",
                    vals![job_id, item_id, key, version],
                )?;
            }
            let taken = super::bulk::delete_items(
                tx,
                " AND EXISTS (SELECT 1 FROM taken_rows t WHERE t.job_id = i.job_id AND t.item_id = i.item_id
                     AND (t.version IS NULL OR (t.version = i.version AND t.row_key = i.id)))",
                &[],
                EventKind::Requeued,
                serde_json::json!({"destination": destination}),
            )?;
            tx.sql().exec("DELETE FROM taken_rows", &[])?;
            Ok(taken)
        })
    }
}
