//! The write path: add (insert or merge), capacity eviction and the audit
//! events they leave. Everything here runs inside the caller's IMMEDIATE
//! transaction, so an add and the evictions it causes commit together.

use super::counters::InsertCounts;
use super::rows;
use super::sql::{vals, Backend, Conn};
use super::EventKind;
use crate::error::Result;
use crate::model::{merge, DeadLetteredItem, MarkedFlags};
use crate::time::Timestamp;
use rusqlite::Connection;
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};

/// Over-capacity items a job may hold inside one transaction before they
/// are evicted together: one DELETE per batch instead of one per added item
/// (an add past the cap cost 3x an uncapped add when each evicted alone).
const EVICT_BATCH: i64 = 256;

/// What an add did to the item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddOutcome {
    /// The item was new.
    Inserted,
    /// The item existed and the merge changed it.
    Merged,
    /// The item existed and the merge changed nothing.
    Unchanged,
}

/// An item removed to keep a job within its capacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictedItem {
    pub job_id: String,
    pub item_id: String,
    pub error_signature: String,
    pub last_attempt: String,
}

/// A job whose capacity an import raised to keep all its items.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CapacityRaised {
    pub job_id: String,
    /// The job's items, now also its capacity.
    pub items: i64,
    /// The capacity in force before (the job's own or the default).
    pub previous_max_items: i64,
}

/// The result of one add.
#[derive(Clone, Debug)]
pub struct AddReport {
    pub outcome: AddOutcome,
    /// Attempts that were not stored before.
    pub new_attempts: usize,
    /// Items evicted to make room (possibly the added item itself, when it is
    /// older than everything else in a full job). Inside a transaction of
    /// many adds, evictions happen in batches: see
    /// [`WriteTx::settle_evictions`].
    pub evicted: Vec<EvictedItem>,
}

/// Schema objects (indexes, triggers) dropped for a bulk change, with the
/// SQL that creates them again.
#[must_use = "restore them before the transaction ends"]
pub(crate) struct Suspended {
    sql: Vec<String>,
    indexes: bool,
    /// The message search index's triggers were set aside when the
    /// largest attempt id was this: the attempts stored since are indexed
    /// when they come back.
    search_watermark: Option<i64>,
    /// The page cache size to go back to (indexes only).
    cache_size: Option<i64>,
}

/// The page cache while the item indexes are suspended, in KiB. A bulk load
/// writes each page once, and the index rebuild's sorter spills to disk
/// past it: with the pool's 32 MB a 100,000-item import peaked at 117 MB,
/// with this 79 MB, in the same time.
const BULK_CACHE_KIB: i64 = 8_000;

/// An open write transaction. Obtained from [`super::Dlq::write`].
pub struct WriteTx<'c> {
    conn: Conn<'c>,
    now: Timestamp,
    default_cap: i64,
    jobs_touched: HashSet<String>,
    /// (item_count, capacity) per job, exact within this transaction, so a
    /// bulk add does not query the job row after every insert.
    job_load: HashMap<String, (i64, i64)>,
    /// Counter changes of the items inserted so far, written before anything
    /// reads the counters and before commit.
    pending_counts: InsertCounts,
    item_events: bool,
    /// Whether adds evict over capacity (import keeps every item instead).
    evict: bool,
    /// Jobs over capacity whose oldest items are not evicted yet: eviction
    /// runs in batches of [`EVICT_BATCH`], and at the latest when the
    /// transaction ends ([`WriteTx::settle_evictions`]).
    pending_evictions: BTreeSet<String>,
    /// Per job, the row this transaction added or merged into last.
    last_added: HashMap<String, i64>,
    /// Whether evictions spare that row: set for an add of one item
    /// ([`WriteTx::keep_added`]), so it keeps the item it adds however old
    /// (the oldest other item makes room), as Prodigy's queue does. An add
    /// of many in one transaction keeps the newest instead.
    keep_added: bool,
    /// Whether the item indexes are suspended: evicting then would scan
    /// the whole table for every evicted item, so it waits for
    /// [`WriteTx::restore`].
    indexes_suspended: bool,
    /// In a load into a database that was empty when this transaction
    /// began, 32-bit hashes of the (job, item) keys it has added: a key
    /// not among them cannot be stored yet, so its add looks for no stored
    /// row. (A hash shared by two keys only costs the look: about 230 of
    /// 1,000,000 adds; 4 bytes a key keep a million-item load's memory
    /// near 10 MB.)
    fresh_keys: Option<HashSet<u32>>,
    /// On PostgreSQL, whether this transaction staged events in
    /// `pending_events` (see [`WriteTx::events_table`]).
    events_staged: std::cell::Cell<bool>,
    /// Whether this transaction holds [`FAMILIES_LOCK`] (see
    /// [`WriteTx::mine_alone`]).
    mining_alone: std::cell::Cell<bool>,
    /// The process's families, and what this transaction mined
    /// (families.rs).
    families: &'c std::sync::Mutex<super::families::Cache>,
    families_pending: super::families::Pending,
}

/// The advisory lock PostgreSQL writers hold while they move their staged
/// events into `events` and commit (any number that no other lock of dlq
/// uses; "dlqevent" in ASCII).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
const EVENTS_LOCK: i64 = 0x646c_7165_7665_6e74;

/// The advisory lock PostgreSQL transactions that mine families hold to
/// their end ("dlqfamil" in ASCII; see [`WriteTx::mine_alone`]).
const FAMILIES_LOCK: i64 = 0x646c_7166_616d_696c;

impl<'c> WriteTx<'c> {
    pub(super) fn new(
        conn: Conn<'c>,
        now: Timestamp,
        families: &'c std::sync::Mutex<super::families::Cache>,
    ) -> Result<Self> {
        Ok(WriteTx {
            families,
            families_pending: super::families::Pending::default(),
            events_staged: std::cell::Cell::new(false),
            mining_alone: std::cell::Cell::new(false),
            conn,
            now,
            default_cap: default_capacity(conn)?,
            jobs_touched: HashSet::new(),
            job_load: HashMap::new(),
            pending_counts: InsertCounts::default(),
            item_events: true,
            evict: true,
            pending_evictions: BTreeSet::new(),
            last_added: HashMap::new(),
            keep_added: false,
            indexes_suspended: false,
            fresh_keys: None,
        })
    }

    /// The family of `item`'s last attempt, mined now (families.rs); none
    /// for an item without attempts.
    pub(super) fn family_of(&mut self, item: &DeadLetteredItem) -> Result<Option<i64>> {
        item.last_failure()
            .map(|last| self.family_of_failure(last))
            .transpose()
    }

    /// The family of one failure, mined now.
    pub(super) fn family_of_failure<'f>(
        &mut self,
        failure: impl Into<super::families::Failure<'f>>,
    ) -> Result<i64> {
        super::families::assign(
            self.families,
            &mut self.families_pending,
            self.conn,
            failure.into(),
        )
    }

    /// Makes this transaction the only one that changes families until it
    /// ends (a no-op on SQLite, whose writers take turns anyway). A person's
    /// change to the families (merge, split, rebuild) takes it first, before
    /// any row lock; a transaction that mined a new family takes it as it
    /// ends, to find a family another writer made for the same cause
    /// meanwhile (families.rs, [`super::families::flush`]). Once per
    /// transaction.
    pub(super) fn mine_alone(&self) -> Result<()> {
        if !self.mining_alone.get() {
            self.conn.take_turns(FAMILIES_LOCK)?;
            self.mining_alone.set(true);
        }
        Ok(())
    }

    /// Makes this process's miner read every family again at its next
    /// assignment.
    pub(super) fn reset_families(&self) {
        super::families::reset(self.families);
    }

    /// Writes what this transaction mined; just before the commit.
    pub(super) fn flush_families(&mut self) -> Result<()> {
        if self.families_pending.made_any() {
            self.mine_alone()?;
        }
        super::families::flush(self.families, &mut self.families_pending, self.conn)
    }

    /// The transaction's time.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Drops what this transaction remembers of a job it removed, so an
    /// add to the same id later in the transaction creates it again.
    pub(super) fn forget_job(&mut self, job_id: &str) {
        self.jobs_touched.remove(job_id);
        self.job_load.remove(job_id);
    }

    /// Whether each add writes an `added`/`merged` event (the default). A bulk
    /// import turns this off and writes an `imported` event per item it
    /// changed instead (and one summary per job).
    pub(crate) fn set_item_events(&mut self, on: bool) {
        self.item_events = on;
    }

    /// Whether adds over a job's capacity evict its oldest items (the
    /// default). An import turns this off: it keeps every item and raises
    /// the capacity of a job it filled past it (see
    /// [`WriteTx::raise_capacity_to_fit`]).
    pub(crate) fn set_evictions(&mut self, on: bool) {
        self.evict = on;
    }

    /// Creates the job if needed and bumps its updated_at (once per
    /// transaction); records `repo` if the job has none yet.
    pub fn ensure_job(&mut self, job_id: &str, repo: Option<&str>) -> Result<()> {
        self.ensure_job_with(job_id, repo, None).map(drop)
    }

    /// [`WriteTx::ensure_job`]; a job it makes gets a `job_created` event
    /// (with `max_items`, the capacity it is made with, if any), whatever
    /// made it: an add, an import, a copy or `ensure_job`. True when it
    /// made the job.
    pub(super) fn ensure_job_with(
        &mut self,
        job_id: &str,
        repo: Option<&str>,
        max_items: Option<i64>,
    ) -> Result<bool> {
        // Once per job and transaction: the repo only fills a NULL, and the
        // same upsert for every item of a bulk import is pure overhead.
        if self.jobs_touched.contains(job_id) {
            return Ok(false);
        }
        crate::model::check_id(job_id)
            .map_err(|reason| crate::error::Error::invalid_argument("job id", reason))?;
        let existed = self
            .conn
            .row(
                "SELECT 1 FROM jobs WHERE job_id = ?1",
                vals![job_id],
                |_| Ok(()),
            )?
            .is_some();
        // On PostgreSQL this locks the job's row until commit: adds to one
        // job take turns (capacity stays exact), adds to others do not wait.
        self.conn.exec(
            "INSERT INTO jobs (job_id, repo, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
             ON CONFLICT (job_id) DO UPDATE SET
                 updated_at = excluded.updated_at,
                 repo = COALESCE(jobs.repo, excluded.repo)",
            vals![job_id, repo, self.now],
        )?;
        self.jobs_touched.insert(job_id.to_string());
        if !existed {
            self.event(
                EventKind::JobCreated,
                Some(job_id),
                None,
                serde_json::json!({ "max_items": max_items }),
            )?;
        }
        Ok(!existed)
    }

    /// Takes the job's row lock on PostgreSQL before changing its items, the
    /// order adds take them in (job row, then items: no deadlock between a
    /// remove and an add). SQLite's one writer needs nothing.
    pub(super) fn lock_job(&self, job_id: &str) -> Result<()> {
        if self.conn.backend() == Backend::Postgres {
            self.conn.row(
                "SELECT 1 FROM jobs WHERE job_id = ?1 FOR UPDATE",
                vals![job_id],
                |_| Ok(()),
            )?;
        }
        Ok(())
    }

    /// Adds an item to a job: inserts it, or merges it into the stored copy by
    /// the rule in [`crate::model::merge`]. Then enforces the job's capacity.
    pub fn add(
        &mut self,
        job_id: &str,
        repo: Option<&str>,
        item: &DeadLetteredItem,
    ) -> Result<AddReport> {
        self.ensure_job(job_id, repo)?;
        item.validate()?;
        let normalised = if item.is_normalised() {
            Cow::Borrowed(item)
        } else {
            Cow::Owned(item.normalised())
        };
        // Stored already: a merge (mining only if it changes anything).
        if !self.first_in_fresh_load(job_id, &item.item_id) {
            if let Some(stored) = rows::load_item(self.conn, job_id, &item.item_id)? {
                return self.merge_existing(job_id, stored, &normalised);
            }
        }
        let family = self.family_of(&normalised)?;
        if let Some(key) = rows::insert_item(self.conn, job_id, &normalised, family)? {
            self.note_added(job_id, key);
            self.pending_counts.add(job_id, &normalised);
            if self.pending_counts.is_full() {
                self.flush_counts()?;
            }
            if self.item_events {
                self.event(
                    EventKind::Added,
                    Some(job_id),
                    Some(&item.item_id),
                    serde_json::json!({"failure_count": normalised.failure_count}),
                )?;
            }
            let evicted = self.after_insert(job_id)?;
            return Ok(AddReport {
                outcome: AddOutcome::Inserted,
                new_attempts: normalised.failure_history.len(),
                evicted,
            });
        }
        // Another writer stored it meanwhile (PostgreSQL: the insert waited
        // for its commit): merge into theirs.
        let Some(stored) = rows::load_item(self.conn, job_id, &item.item_id)? else {
            return Err(crate::error::Error::ItemNotFound {
                job_id: Some(job_id.to_string()),
                item_id: item.item_id.clone(),
            });
        };
        self.merge_existing(job_id, stored, &normalised)
    }

    /// Records `key` as the row this transaction added to `job_id` last
    /// (no new string per add: a load adds to one job many times).
    fn note_added(&mut self, job_id: &str, key: i64) {
        match self.last_added.get_mut(job_id) {
            Some(last) => *last = key,
            None => {
                self.last_added.insert(job_id.to_string(), key);
            }
        }
    }

    /// Tells the adds to come that the database held no item when this
    /// transaction began (a bulk load into an empty database).
    pub(super) fn expect_new_items(&mut self) {
        self.fresh_keys = Some(HashSet::new());
    }

    /// Whether this is, for sure, the first add of the key since the
    /// database was empty ([`WriteTx::expect_new_items`]).
    fn first_in_fresh_load(&mut self, job_id: &str, item_id: &str) -> bool {
        let Some(seen) = &mut self.fresh_keys else {
            return false;
        };
        use std::hash::{Hash, Hasher};
        // Fixed keys: the same key hashes the same for the whole load.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (job_id, item_id).hash(&mut hasher);
        seen.insert(hasher.finish() as u32)
    }

    fn merge_existing(
        &mut self,
        job_id: &str,
        stored: rows::StoredItem,
        incoming: &DeadLetteredItem,
    ) -> Result<AddReport> {
        let merged = merge(&stored.item, incoming, stored.marked);
        let before = serde_json::to_string(&stored.item)?;
        let after = serde_json::to_string(&merged)?;
        if before == after {
            return Ok(AddReport {
                outcome: AddOutcome::Unchanged,
                new_attempts: 0,
                evicted: Vec::new(),
            });
        }
        // The UPDATE fires the counter trigger (counters.rs says why this
        // comes first).
        self.flush_counts()?;
        let family = self.family_of(&merged)?;
        rows::update_item_row(self.conn, stored.key, &merged, family)?;
        self.note_added(job_id, stored.key);
        let new_attempts = rows::insert_history(self.conn, stored.key, &merged.failure_history)?;
        let artifacts_before = serde_json::to_string(&stored.item.worktree_artifacts)?;
        let artifacts_after = serde_json::to_string(&merged.worktree_artifacts)?;
        if artifacts_before != artifacts_after {
            rows::write_artifacts(
                self.conn,
                stored.key,
                merged.worktree_artifacts.as_ref(),
                true,
            )?;
        }
        if self.item_events {
            self.event(
                EventKind::Merged,
                Some(job_id),
                Some(&incoming.item_id),
                serde_json::json!({"new_attempts": new_attempts, "failure_count": merged.failure_count}),
            )?;
        }
        Ok(AddReport {
            outcome: AddOutcome::Merged,
            new_attempts,
            evicted: Vec::new(),
        })
    }

    /// Gives the item the flags a person marked where it comes from (`dlq
    /// mark` there), marked here too, so a later merge keeps them as it
    /// would have there: what a copy carries besides the item. Flags not
    /// marked there are left as they are. Returns whether anything changed.
    pub(crate) fn keep_marks(
        &mut self,
        job_id: &str,
        item_id: &str,
        marked: MarkedFlags,
        item: &DeadLetteredItem,
    ) -> Result<bool> {
        if marked == MarkedFlags::default() {
            return Ok(false);
        }
        // The counter triggers fire on this update: they must see every
        // item this transaction inserted already counted (counters.rs).
        self.flush_counts()?;
        let (eligible, review) = (
            marked.reprocess_eligible.then_some(item.reprocess_eligible),
            marked
                .manual_review_required
                .then_some(item.manual_review_required),
        );
        let changed = self.conn.exec(
            // The casts type the parameters for PostgreSQL.
            "UPDATE items SET
                 reprocess_eligible = COALESCE(CAST(?3 AS INTEGER), reprocess_eligible),
                 reprocess_eligible_marked = CASE WHEN CAST(?3 AS INTEGER) IS NULL
                     THEN reprocess_eligible_marked ELSE 1 END,
                 manual_review_required = COALESCE(CAST(?4 AS INTEGER), manual_review_required),
                 manual_review_required_marked = CASE WHEN CAST(?4 AS INTEGER) IS NULL
                     THEN manual_review_required_marked ELSE 1 END
             WHERE job_id = ?1 AND item_id = ?2
                 AND ((CAST(?3 AS INTEGER) IS NOT NULL
                       AND (reprocess_eligible <> CAST(?3 AS INTEGER) OR reprocess_eligible_marked = 0))
                   OR (CAST(?4 AS INTEGER) IS NOT NULL
                       AND (manual_review_required <> CAST(?4 AS INTEGER) OR manual_review_required_marked = 0)))",
            vals![job_id, item_id, eligible, review],
        )?;
        Ok(changed > 0)
    }

    /// The capacity in force for a job (0 = unlimited).
    pub fn max_items(&self, job_id: &str) -> Result<i64> {
        let cap = self.conn.row(
            "SELECT max_items FROM jobs WHERE job_id = ?1",
            vals![job_id],
            |row| row.opt_i64(0),
        )?;
        Ok(cap.flatten().unwrap_or(self.default_cap))
    }

    /// Counts a new item of a job and evicts if that puts it over capacity.
    fn after_insert(&mut self, job_id: &str) -> Result<Vec<EvictedItem>> {
        let (count, cap) = match self.job_load.get_mut(job_id) {
            Some(load) => {
                load.0 += 1;
                *load
            }
            None => self.load_of(job_id)?,
        };
        if !self.evict || cap <= 0 || count <= cap {
            return Ok(Vec::new());
        }
        if self.indexes_suspended || count - cap < EVICT_BATCH {
            self.pending_evictions.insert(job_id.to_string());
            return Ok(Vec::new());
        }
        self.pending_evictions.remove(job_id);
        self.evict(job_id, count - cap, cap)
    }

    /// Makes the evictions that follow spare the row last added to each job
    /// (true: the adds to come are one item's, which must stay).
    pub(crate) fn keep_added(&mut self, keep: bool) {
        self.keep_added = keep;
    }

    /// Evicts what the adds so far put over capacity and is still there.
    /// [`super::Dlq::write`] calls it before committing; call it to learn
    /// about those evictions (adds in one transaction evict in batches, so
    /// an add's [`AddReport::evicted`] may be empty while its job is over
    /// capacity until then).
    pub fn settle_evictions(&mut self) -> Result<Vec<EvictedItem>> {
        if self.indexes_suspended {
            return Ok(Vec::new());
        }
        let mut evicted = Vec::new();
        for job in std::mem::take(&mut self.pending_evictions) {
            evicted.extend(self.enforce_capacity(&job)?);
        }
        Ok(evicted)
    }

    /// Writes the pending counter changes.
    pub(super) fn flush_counts(&mut self) -> Result<()> {
        self.pending_counts.flush(self.conn)
    }

    /// Reads a job's item count and capacity (and caches them).
    fn load_of(&mut self, job_id: &str) -> Result<(i64, i64)> {
        self.flush_counts()?;
        let (count, cap) = self
            .conn
            .row(
                "SELECT item_count, max_items FROM jobs WHERE job_id = ?1",
                vals![job_id],
                |row| Ok((row.i64(0)?, row.opt_i64(1)?)),
            )?
            .ok_or_else(|| crate::error::Error::JobNotFound(job_id.to_string()))?;
        let load = (count, cap.unwrap_or(self.default_cap));
        self.job_load.insert(job_id.to_string(), load);
        Ok(load)
    }

    /// Evicts the items with the oldest last_attempt (then the oldest row)
    /// until the job fits its capacity; each eviction is an `evicted` event.
    pub fn enforce_capacity(&mut self, job_id: &str) -> Result<Vec<EvictedItem>> {
        let (count, cap) = self.load_of(job_id)?;
        if cap <= 0 || count <= cap {
            return Ok(Vec::new());
        }
        self.evict(job_id, count - cap, cap)
    }

    /// [`WriteTx::raise_capacity_to_fit`] for every job this transaction
    /// added items to (in job order). A load calls it before each batch
    /// commits, so no committed state has a job over its capacity: an add
    /// from another process between two batches must not evict what the
    /// load brought in.
    pub(crate) fn raise_capacities_to_fit(&mut self) -> Result<Vec<CapacityRaised>> {
        let mut jobs: Vec<String> = self
            .job_load
            .iter()
            .filter(|(_, (count, cap))| *cap > 0 && count > cap)
            .map(|(job, _)| job.clone())
            .collect();
        jobs.sort_unstable();
        let mut raised = Vec::new();
        for job in jobs {
            raised.extend(self.raise_capacity_to_fit(&job)?);
        }
        Ok(raised)
    }

    /// When a job holds more items than its capacity (as after an import,
    /// which never evicts), raises the job's capacity to its item count with
    /// a `capacity_set` event saying why, so nothing is evicted by the next
    /// add either. Returns the capacity before and after, if it changed.
    pub(crate) fn raise_capacity_to_fit(&mut self, job_id: &str) -> Result<Option<CapacityRaised>> {
        let (count, cap) = self.load_of(job_id)?;
        if cap <= 0 || count <= cap {
            return Ok(None);
        }
        self.conn.exec(
            "UPDATE jobs SET max_items = ?2 WHERE job_id = ?1",
            vals![job_id, count],
        )?;
        self.job_load.insert(job_id.to_string(), (count, count));
        self.event(
            EventKind::CapacitySet,
            Some(job_id),
            None,
            serde_json::json!({
                "max_items": count,
                "previous_max_items": cap,
                "reason": "import keeps every item; the job holds more than its capacity",
            }),
        )?;
        Ok(Some(CapacityRaised {
            job_id: job_id.to_string(),
            items: count,
            previous_max_items: cap,
        }))
    }

    fn evict(&mut self, job_id: &str, excess: i64, cap: i64) -> Result<Vec<EvictedItem>> {
        // The DELETE fires the counter trigger, which must see every item
        // inserted so far already counted (counters.rs).
        self.flush_counts()?;
        // Walks items_job_last_attempt: O(log n) per evicted item. The
        // index is never suspended here (see `deferred_evictions`).
        let sql = format!(
            "DELETE FROM items WHERE id IN ({})
             RETURNING item_id, error_signature, {}",
            eviction_set(self.conn.backend()),
            self.conn.backend().ts_text("last_attempt"),
        );
        let keep = match self.keep_added {
            true => self.last_added.get(job_id).copied().unwrap_or(0),
            false => 0,
        };
        let evicted = self
            .conn
            .collect(&sql, vals![job_id, excess, keep], |row| {
                Ok(EvictedItem {
                    job_id: job_id.to_string(),
                    item_id: row.text(0)?,
                    error_signature: row.text(1)?,
                    last_attempt: row.text(2)?,
                })
            })?;
        if let Some(load) = self.job_load.get_mut(job_id) {
            load.0 -= i64::try_from(evicted.len()).unwrap_or(0);
        }
        for item in &evicted {
            self.event(
                EventKind::Evicted,
                Some(job_id),
                Some(&item.item_id),
                serde_json::json!({
                    "reason": "capacity",
                    "max_items": cap,
                    "error_signature": item.error_signature,
                    "last_attempt": item.last_attempt,
                }),
            )?;
        }
        Ok(evicted)
    }

    /// Appends one row to the audit log.
    pub fn event(
        &self,
        kind: EventKind,
        job_id: Option<&str>,
        item_id: Option<&str>,
        detail: serde_json::Value,
    ) -> Result<()> {
        self.event_text(kind, job_id, item_id, &detail.to_string())
    }

    /// [`WriteTx::event`] with the detail already JSON text (the schema
    /// checks it is valid JSON).
    pub(crate) fn event_text(
        &self,
        kind: EventKind,
        job_id: Option<&str>,
        item_id: Option<&str>,
        detail: &str,
    ) -> Result<()> {
        // Whole statements, not one formatted per event: a load writes an
        // event per item.
        let sql = match self.events_table()? {
            "events" => {
                "INSERT INTO events (time, kind, job_id, item_id, detail) VALUES (?1, ?2, ?3, ?4, ?5)"
            }
            _ => {
                "INSERT INTO pending_events (time, kind, job_id, item_id, detail) VALUES (?1, ?2, ?3, ?4, ?5)"
            }
        };
        self.conn
            .exec(sql, vals![self.now, kind.as_str(), job_id, item_id, detail])?;
        Ok(())
    }

    /// The table this transaction writes its events to. SQLite's writers
    /// take turns, so event ids grow in commit order and a follower
    /// reading `id > cursor` misses nothing. PostgreSQL's commit
    /// concurrently: an id taken by a transaction that commits after a
    /// later id was read would be skipped. So there each transaction
    /// stages its events in a temporary table, and
    /// [`WriteTx::publish_events`] moves them into `events` under an
    /// advisory lock held to the commit: ids are handed out in commit
    /// order. The lock is the last one a writer takes (no deadlock) and
    /// covers only the move and the commit.
    pub(super) fn events_table(&self) -> Result<&'static str> {
        if self.conn.backend() == Backend::Sqlite {
            return Ok("events");
        }
        if !self.events_staged.get() {
            self.conn.exec(
                "CREATE TEMP TABLE IF NOT EXISTS pending_events (
                     seq     bigint GENERATED ALWAYS AS IDENTITY,
                     time    timestamptz NOT NULL,
                     kind    text NOT NULL,
                     job_id  text,
                     item_id text,
                     detail  jsonb
                 ) ON COMMIT DELETE ROWS",
                &[],
            )?;
            self.events_staged.set(true);
        }
        Ok("pending_events")
    }

    /// On PostgreSQL, moves the staged events into `events` (see
    /// [`WriteTx::events_table`]); the caller commits next.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(super) fn publish_events(&mut self) -> Result<()> {
        if !self.events_staged.get() {
            return Ok(());
        }
        self.conn
            .exec("SELECT pg_advisory_xact_lock(?1)", vals![EVENTS_LOCK])?;
        self.conn.exec(
            "INSERT INTO events (time, kind, job_id, item_id, detail)
             SELECT time, kind, job_id, item_id, detail FROM pending_events ORDER BY seq",
            &[],
        )?;
        Ok(())
    }

    /// Drops the secondary indexes of `items` for a bulk load or a bulk
    /// delete; give the result to [`WriteTx::restore`] before the
    /// transaction ends. Both run in the caller's transaction, so the
    /// indexes are never missing outside it. The definitions are read from
    /// the schema, so they follow migrations.
    pub(crate) fn suspend_item_indexes(&mut self) -> Result<Suspended> {
        self.suspend_indexes(&["items"])
    }

    /// [`WriteTx::suspend_item_indexes`] and those of `events` too: for a
    /// load into an empty database, which writes an event per item (an
    /// index each for jobs, kinds and items: 11 % of such a load's wall
    /// time at 100,000 items) into a log it has only begun. Not for a bulk
    /// delete, whose log may already hold millions of rows to index again.
    pub(crate) fn suspend_load_indexes(&mut self) -> Result<Suspended> {
        self.suspend_indexes(&["items", "events"])
    }

    fn suspend_indexes(&mut self, tables: &[&str]) -> Result<Suspended> {
        let conn = self.conn.sqlite("suspending indexes")?;
        self.indexes_suspended = true;
        let cache_size: i64 = conn.query_row("PRAGMA main.cache_size", [], |row| row.get(0))?;
        conn.pragma_update(Some("main"), "cache_size", -BULK_CACHE_KIB)?;
        let mut suspended = self.suspend("index", tables)?;
        suspended.cache_size = Some(cache_size);
        Ok(suspended)
    }

    /// Drops the triggers on `items` (which keep the counters right for
    /// row-by-row changes) for a bulk delete that adjusts the counters
    /// itself; restore them with [`WriteTx::restore`] as for indexes.
    pub(super) fn suspend_item_triggers(&mut self) -> Result<Suspended> {
        self.suspend("trigger", &["items"])
    }

    /// Drops the triggers that keep the message search index (schema V15,
    /// `failure_text`) for a load or a bulk delete, which index in one
    /// statement what they change: [`WriteTx::restore`] brings the triggers
    /// back and indexes the attempts stored meanwhile (new attempts get
    /// ids above every one before them); a bulk delete tells the index
    /// what it deletes first ([`WriteTx::unindex_doomed_attempts`]).
    /// Nothing else may change attempts meanwhile. Row by row the index
    /// costs far more: FTS5 writes its pending terms to disk at every
    /// statement of a transaction (its savepoint), so a trigger per row
    /// made a 100,000-item import into a non-empty database 2.7 times as
    /// slow.
    pub(crate) fn suspend_search_index(&mut self) -> Result<Suspended> {
        let watermark: i64 = self.conn.sqlite("suspending the search index")?.query_row(
            "SELECT COALESCE(MAX(id), 0) FROM failure_history",
            [],
            |row| row.get(0),
        )?;
        let mut suspended = self.suspend("trigger", &["failure_history"])?;
        suspended.search_watermark = Some(watermark);
        Ok(suspended)
    }

    /// Takes the attempts of the items in `temp.doomed_ids` out of the
    /// message search index, in one statement (FTS5 is told each one's
    /// text), before a bulk delete removes them with the index's triggers
    /// set aside ([`WriteTx::suspend_search_index`]).
    pub(super) fn unindex_doomed_attempts(&mut self) -> Result<()> {
        self.conn.sqlite("unindexing attempts")?.execute(
            "INSERT INTO failure_text (failure_text, rowid, error_message)
             SELECT 'delete', f.id, f.error_message FROM failure_history f
             WHERE f.item_key IN (SELECT id FROM temp.doomed_ids) ORDER BY f.id",
            [],
        )?;
        Ok(())
    }

    fn suspend(&mut self, kind: &str, tables: &[&str]) -> Result<Suspended> {
        let conn = self.conn.sqlite("suspending triggers")?;
        let mut objects = Vec::new();
        for table in tables {
            objects.extend(
                conn.prepare(
                    "SELECT name, sql FROM sqlite_master
                     WHERE type = ?1 AND tbl_name = ?2 AND sql IS NOT NULL ORDER BY name",
                )?
                .query_map([kind, table], |row| {
                    Ok((row.get::<_, String>("name")?, row.get::<_, String>("sql")?))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?,
            );
        }
        for (name, _) in &objects {
            // Identifiers cannot be parameters: quote the name as SQL says.
            let quoted = name.replace('"', "\"\"");
            let drop = if kind == "index" { "INDEX" } else { "TRIGGER" };
            conn.execute(&format!("DROP {drop} \"{quoted}\""), [])?;
        }
        Ok(Suspended {
            sql: objects.into_iter().map(|(_, sql)| sql).collect(),
            indexes: kind == "index",
            search_watermark: None,
            cache_size: None,
        })
    }

    /// Creates again what [`WriteTx::suspend_item_indexes`] or
    /// `WriteTx::suspend_item_triggers` dropped.
    /// Evictions deferred while the indexes were suspended run now.
    pub(crate) fn restore(&mut self, suspended: Suspended) -> Result<()> {
        for sql in suspended.sql {
            let conn = self.conn.sqlite("restoring indexes")?;
            let statement = sql.trim_start().to_ascii_uppercase();
            if !["CREATE INDEX", "CREATE UNIQUE INDEX", "CREATE TRIGGER"]
                .iter()
                .any(|start| statement.starts_with(start))
            {
                return Err(crate::error::Error::invalid_argument(
                    "schema definition",
                    sql,
                ));
            }
            // `execute` runs exactly one statement (a trigger's body is
            // part of its one CREATE TRIGGER).
            conn.execute(&sql, [])?;
        }
        if let Some(watermark) = suspended.search_watermark {
            self.conn.sqlite("indexing attempts")?.execute(
                "INSERT INTO failure_text (rowid, error_message)
                 SELECT id, error_message FROM failure_history WHERE id > ?1 ORDER BY id",
                [watermark],
            )?;
        }
        if let Some(cache_size) = suspended.cache_size {
            let conn = self.conn.sqlite("restoring indexes")?;
            conn.pragma_update(Some("main"), "cache_size", cache_size)?;
        }
        if suspended.indexes {
            self.indexes_suspended = false;
            self.settle_evictions()?;
        }
        Ok(())
    }

    /// Re-reads the default capacity after `settings` changed.
    pub(super) fn reload_default_capacity(&mut self) -> Result<()> {
        self.default_cap = default_capacity(self.conn)?;
        Ok(())
    }

    /// The underlying SQLite connection, for the store's parts not yet
    /// written for both backends ([`crate::Error::Unsupported`] on
    /// PostgreSQL).
    pub(super) fn conn(&self) -> Result<&'c Connection> {
        self.conn.sqlite("this operation")
    }

    /// The connection, for the parts of the store written for both
    /// backends.
    pub(super) fn sql(&self) -> Conn<'c> {
        self.conn
    }
}

/// The default per-job capacity from `settings` (10,000 unless changed).
pub(super) fn default_capacity(conn: Conn<'_>) -> Result<i64> {
    let value = conn.row(
        "SELECT value FROM settings WHERE key = 'default_max_items'",
        &[],
        |row| row.text(0),
    )?;
    Ok(value.and_then(|v| v.trim().parse().ok()).unwrap_or(10_000))
}

/// The row keys of the items a job over its capacity loses first: the
/// `?2` oldest last attempts of job `?1` (ties by row key), never row
/// `?3` (the item an add just wrote; 0 for none). What eviction deletes
/// and what `dlq capacity --set` counts before asking.
pub(super) fn eviction_set(backend: Backend) -> String {
    format!(
        "SELECT id FROM items WHERE job_id = ?1 AND id <> ?3 ORDER BY {}, id ASC LIMIT ?2",
        backend.ts_order("last_attempt", false)
    )
}
