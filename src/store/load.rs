//! Loading many items at once (`import`, and anything that fills a
//! database in bulk): how a load uses the write path's bulk switches
//! (defined on [`WriteTx`]; set-based deletes use them too). A load writes
//! items without the `added`/`merged` event of an add (the caller records
//! what it loaded with [`Loader::imported`], in the item's transaction, and
//! one summary per job at the end with [`Dlq::finish_load`]) and without
//! evicting, in transactions of [`LoadOptions::batch_size`] items. A job
//! that a batch fills past its capacity gets the capacity raised to fit in
//! that batch's transaction (a `capacity_set` event; the load reports the
//! jobs it raised): no committed state has a job over capacity, so an add
//! from another process during the load, or after a load that failed half
//! way, never evicts what the load brought in to make up the difference.
//! Into an empty database the whole load
//! is one transaction that drops the secondary indexes of `items` and
//! `events` and rebuilds them at the end: much faster, and a crash leaves the database
//! empty, as it was.

use super::sql::vals;
use super::{AddReport, CapacityRaised, Dlq, EventKind, WriteTx};
use crate::error::Result;
use crate::model::DeadLetteredItem;
use std::collections::BTreeMap;

/// How a load batches its writes.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Items per transaction (when the database is not empty, or
    /// `bulk_when_empty` is off): a crash loses at most the open batch, and
    /// loading again completes it (adding an item again changes nothing).
    pub batch_size: usize,
    /// Into an empty database, one transaction with the item indexes
    /// rebuilt at the end.
    pub bulk_when_empty: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            batch_size: 5_000,
            bulk_when_empty: true,
        }
    }
}

/// The writes a load makes for one record.
pub struct Loader<'t, 'c> {
    tx: &'t mut WriteTx<'c>,
}

impl Loader<'_, '_> {
    /// Makes sure the job exists (and records its repo).
    pub fn job(&mut self, job_id: &str, repo: Option<&str>) -> Result<()> {
        self.tx.ensure_job(job_id, repo)
    }

    /// Adds (or merges) one item, as [`Dlq::add`] does, but without an
    /// event of its own and without evicting.
    pub fn item(
        &mut self,
        job_id: &str,
        repo: Option<&str>,
        item: &DeadLetteredItem,
    ) -> Result<AddReport> {
        self.tx.add(job_id, repo, item)
    }

    /// Marks the item's flags as a person marked them where it comes from
    /// (see `WriteTx::keep_marks`); whether anything changed.
    pub fn marks(
        &mut self,
        job_id: &str,
        item: &DeadLetteredItem,
        marked: crate::model::MarkedFlags,
    ) -> Result<bool> {
        self.tx.keep_marks(job_id, &item.item_id, marked, item)
    }

    /// Puts the item in family `family_id` of this database (one carried
    /// over with its id by [`Dlq::adopt_families`]), whatever it was mined
    /// into.
    pub fn family(&mut self, job_id: &str, item_id: &str, family_id: i64) -> Result<()> {
        self.tx.sql().exec(
            "UPDATE items SET family_id = ?3 WHERE job_id = ?1 AND item_id = ?2 AND (family_id IS NULL OR family_id <> ?3)",
            vals![job_id, item_id, family_id],
        )?;
        Ok(())
    }

    /// Records that the load brought in (or changed) one item: an
    /// `imported` event with the item's id, written in the item's own
    /// transaction, so the audit log answers for every item a load wrote.
    /// `detail` is JSON text (an object), stored as it is.
    pub fn imported(&mut self, job_id: &str, item_id: &str, detail: &str) -> Result<()> {
        self.tx
            .event_text(EventKind::Imported, Some(job_id), Some(item_id), detail)
    }
}

impl Dlq {
    /// Hands each record to `apply`, which writes it through the
    /// [`Loader`] and says whether it was an item (batches count items).
    /// Returns the jobs whose capacity the load raised (one entry per job:
    /// the capacity before the load's first raise, the items after its
    /// last). See the module docs for the transactions.
    pub fn load<T>(
        &self,
        records: impl IntoIterator<Item = T>,
        options: &LoadOptions,
        mut apply: impl FnMut(&mut Loader<'_, '_>, T) -> Result<bool>,
    ) -> Result<Vec<CapacityRaised>> {
        let mut raised: BTreeMap<String, CapacityRaised> = BTreeMap::new();
        let mut note = |batch: Vec<CapacityRaised>| {
            for r in batch {
                raised
                    .entry(r.job_id.clone())
                    .and_modify(|first| first.items = r.items)
                    .or_insert(r);
            }
        };
        let mut records = records.into_iter().peekable();
        let bulk_switches = |tx: &mut WriteTx<'_>| {
            tx.set_item_events(false);
            tx.set_evictions(false);
        };
        // The bulk switches (indexes dropped and rebuilt) are SQLite's.
        if options.bulk_when_empty && self.backend() == super::Backend::Sqlite && self.is_empty()? {
            note(self.write(|tx| {
                bulk_switches(tx);
                let indexes = tx.suspend_load_indexes()?;
                for record in records.by_ref() {
                    apply(&mut Loader { tx: &mut *tx }, record)?;
                }
                tx.restore(indexes)?;
                tx.raise_capacities_to_fit()
            })?);
            return Ok(raised.into_values().collect());
        }
        while records.peek().is_some() {
            note(self.write(|tx| {
                bulk_switches(tx);
                let mut items = 0;
                for record in records.by_ref() {
                    items += usize::from(apply(&mut Loader { tx: &mut *tx }, record)?);
                    if items >= options.batch_size.max(1) {
                        break;
                    }
                }
                tx.raise_capacities_to_fit()
            })?);
        }
        Ok(raised.into_values().collect())
    }

    /// Whether the legacy JSON DLQ at `root` was adopted into this
    /// database ([`Dlq::adopt_legacy`]): what was recorded then (JSON), if
    /// it was.
    pub fn legacy_adopted(&self, root: &str) -> Result<Option<String>> {
        let key = format!("legacy_adopted:{root}");
        self.read(|conn| {
            conn.row(
                "SELECT value FROM settings WHERE key = ?1",
                vals![key.as_str()],
                |row| row.text(0),
            )
        })
    }

    /// Records that the legacy DLQ at `root` was adopted (`items` read).
    pub(crate) fn mark_legacy_adopted(&self, root: &str, items: u64) -> Result<()> {
        let key = format!("legacy_adopted:{root}");
        let value = serde_json::json!({"root": root, "items_read": items}).to_string();
        self.write(|tx| {
            tx.sql().exec(
                "INSERT INTO settings (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                vals![key.as_str(), value.as_str()],
            )?;
            Ok(())
        })
    }

    /// Ends a load, in one transaction: records one `imported` event per
    /// entry of `events` (a job and what to say of it; the event has no
    /// item_id: it is the job's summary).
    pub fn finish_load(&self, events: Vec<(String, serde_json::Value)>) -> Result<()> {
        self.write(|tx| {
            for (job_id, detail) in events {
                tx.event(EventKind::Imported, Some(&job_id), None, detail)?;
            }
            Ok(())
        })
    }
}
