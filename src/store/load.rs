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
//! `events` and builds them again at the end: much faster, and a crash
//! leaves the database empty, as it was. Every load indexes the attempts
//! it stored for message search in one statement per transaction
//! ([`WriteTx::suspend_search_index`]).

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
    /// A key (of `settings`) that makes the load happen once per database,
    /// however many processes start it at the same time: the whole load is
    /// then one transaction, which first looks for the key and ends by
    /// recording it. A load that finds it writes nothing and returns
    /// [`Loaded::Before`]. (Looking before the transaction and recording
    /// after it lets two processes both load: what the first handed out
    /// and removed meanwhile, the second brings back.)
    pub once: Option<String>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            batch_size: 5_000,
            bulk_when_empty: true,
            once: None,
        }
    }
}

/// What a load did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// It wrote its records. The jobs whose capacity it raised (one entry
    /// per job: the capacity before the load's first raise, the items
    /// after its last).
    Written(Vec<CapacityRaised>),
    /// Its [`LoadOptions::once`] key was recorded by an earlier load: it
    /// wrote nothing.
    Before,
}

impl Loaded {
    /// The jobs whose capacity the load raised (none when it wrote nothing).
    pub fn into_raised(self) -> Vec<CapacityRaised> {
        match self {
            Loaded::Written(raised) => raised,
            Loaded::Before => Vec::new(),
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
    /// See the module docs for the transactions, and [`LoadOptions::once`].
    pub fn load<T>(
        &self,
        records: impl IntoIterator<Item = T>,
        options: &LoadOptions,
        mut apply: impl FnMut(&mut Loader<'_, '_>, T) -> Result<bool>,
    ) -> Result<Loaded> {
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
        let bulk = options.bulk_when_empty
            && self.backend() == super::Backend::Sqlite
            && self.is_empty()?;
        if bulk || options.once.is_some() {
            let written = self.write(|tx| {
                if let Some(key) = &options.once {
                    if !claim(tx, key)? {
                        return Ok(None);
                    }
                }
                bulk_switches(tx);
                // Looked at again inside the transaction: another process
                // may have filled the database since.
                let indexes = if bulk && !holds_items(tx)? {
                    tx.expect_new_items();
                    Some(tx.suspend_load_indexes()?)
                } else {
                    None
                };
                // A load only adds attempts (no evictions): they are
                // indexed in one statement at the end.
                let search = if self.backend() == super::Backend::Sqlite {
                    Some(tx.suspend_search_index()?)
                } else {
                    None
                };
                let mut items = 0u64;
                for record in records.by_ref() {
                    items += u64::from(apply(&mut Loader { tx: &mut *tx }, record)?);
                }
                if let Some(indexes) = indexes {
                    tx.restore(indexes)?;
                }
                if let Some(search) = search {
                    tx.restore(search)?;
                }
                if let Some(key) = &options.once {
                    record_claim(tx, key, items)?;
                }
                tx.raise_capacities_to_fit().map(Some)
            })?;
            return Ok(match written {
                Some(batch) => {
                    note(batch);
                    Loaded::Written(raised.into_values().collect())
                }
                None => Loaded::Before,
            });
        }
        while records.peek().is_some() {
            note(self.write(|tx| {
                bulk_switches(tx);
                // A load only adds attempts (no evictions): the batch's are
                // indexed in one statement at its end.
                let search = if self.backend() == super::Backend::Sqlite {
                    Some(tx.suspend_search_index()?)
                } else {
                    None
                };
                let mut items = 0;
                for record in records.by_ref() {
                    items += usize::from(apply(&mut Loader { tx: &mut *tx }, record)?);
                    if items >= options.batch_size.max(1) {
                        break;
                    }
                }
                if let Some(search) = search {
                    tx.restore(search)?;
                }
                tx.raise_capacities_to_fit()
            })?);
        }
        Ok(Loaded::Written(raised.into_values().collect()))
    }

    /// Whether the load keyed `key` ([`LoadOptions::once`]) ran in this
    /// database: what it recorded (JSON), if it did.
    pub fn loaded_once(&self, key: &str) -> Result<Option<String>> {
        self.read(|conn| {
            conn.row(
                "SELECT value FROM settings WHERE key = ?1",
                vals![key],
                |row| row.text(0),
            )
        })
    }

    /// Whether the legacy JSON DLQ at `root` (a canonical path, or as an
    /// older version spelled it) was adopted into this database
    /// ([`Dlq::adopt_legacy`]): what was recorded for it, whole or for any
    /// of its jobs (JSON), if it was.
    pub fn legacy_adopted(&self, root: &str) -> Result<Option<String>> {
        let whole = legacy_adoption_key(root);
        let jobs = legacy_adoption_key(&format!("{root}/mapreduce/dlq/"));
        self.read(|conn| {
            conn.row(
                "SELECT value FROM settings
                 WHERE key = ?1 OR substr(key, 1, length(CAST(?2 AS TEXT))) = CAST(?2 AS TEXT)
                 ORDER BY key LIMIT 1",
                vals![whole.as_str(), jobs.as_str()],
                |row| row.text(0),
            )
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

/// The [`LoadOptions::once`] key of the adoption of the legacy DLQ at
/// `root`.
pub(crate) fn legacy_adoption_key(root: &str) -> String {
    format!("legacy_adopted:{root}")
}

/// Whether the database has an item, as this transaction sees it.
fn holds_items(tx: &mut WriteTx<'_>) -> Result<bool> {
    Ok(tx
        .sql()
        .row("SELECT 1 FROM items LIMIT 1", &[], |_| Ok(()))?
        .is_some())
}

/// Claims the load keyed `key` in its write transaction: false when a load
/// recorded it before. Inserted first, so that two processes cannot both
/// find it missing (on PostgreSQL the second insert waits for the first
/// transaction and then finds the row).
fn claim(tx: &mut WriteTx<'_>, key: &str) -> Result<bool> {
    let inserted = tx.sql().exec(
        "INSERT INTO settings (key, value) VALUES (?1, '{}') ON CONFLICT (key) DO NOTHING",
        vals![key],
    )?;
    Ok(inserted == 1)
}

/// Records what the load keyed `key` wrote, in its transaction.
fn record_claim(tx: &mut WriteTx<'_>, key: &str, items: u64) -> Result<()> {
    let value = serde_json::json!({ "items_read": items }).to_string();
    tx.sql().exec(
        "UPDATE settings SET value = ?2 WHERE key = ?1",
        vals![key, value.as_str()],
    )?;
    Ok(())
}
