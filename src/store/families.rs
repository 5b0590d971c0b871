//! Failure families in the database: the `families` table (schema V10),
//! each item's `family_id`, and the miner that assigns them as items are
//! written (the mining itself is [`crate::families`]'s).
//!
//! Every process that writes keeps a [`Cache`]: a miner holding the
//! families of each part (error type, crash site, number of words: only
//! families of one part can share a failure) it has mined into, each part
//! read whole from `families.part` when a failure first falls in it. So an
//! add into a database of 100,000 families reads the few of its part.
//! Before its first assignment in a write transaction it reads the
//! families changed since it last looked (`rev` above the highest it saw)
//! in the parts it holds. SQLite's writers take turns, so every process
//! mines on top of the same families and none makes a family twice.
//! PostgreSQL's mine at once: there a transaction that made a family takes
//! a lock as it ends ([`super::WriteTx::mine_alone`]) and gives its items
//! to a family of the same part and template another writer committed
//! meanwhile ([`flush`]). A transaction that fails leaves the cache stale,
//! and the next one starts over, so nothing a rolled-back transaction
//! mined is used.
//!
//! A family's count is not stored: it is the number of items whose
//! `family_id` is its id, counted on the `items_family` index when asked
//! (one job's on `items_job_family`), so it always equals a recount.

use super::sql::{vals, Conn};
use super::Dlq;
use crate::error::{Error, Result};
use crate::families::miner::part_of;
use crate::families::{Family, Miner};
use crate::model::FailureDetail;
use crate::time::Timestamp;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// A process's families: the miner and the database id of each of its
/// families.
#[derive(Default)]
pub(crate) struct Cache {
    miner: Miner,
    /// The database id of the miner's family at each index.
    ids: Vec<i64>,
    index: HashMap<i64, usize>,
    /// Families merged into another (`merged_into`), by database id: a
    /// failure mined into one goes to the family it points at.
    merged: HashMap<i64, i64>,
    /// The parts ([`crate::families::miner::part`]) whose families the
    /// miner holds: all of each, read when a failure first fell in it.
    loaded: HashSet<String>,
    /// The highest `rev` read or written.
    rev: i64,
    /// Set while a transaction may have changed the cache without
    /// committing: the next one starts over.
    stale: bool,
    /// Set when a transaction dropped a family it made for one another
    /// writer made first ([`flush`]): after its commit the cache starts
    /// over.
    dropped: bool,
}

/// What a family is mined from: one attempt.
#[derive(Clone, Copy)]
pub(crate) struct Failure<'a> {
    pub error_type: &'a str,
    pub message: &'a str,
    pub stack_trace: Option<&'a str>,
    pub timestamp: Timestamp,
}

impl<'a> From<&'a FailureDetail> for Failure<'a> {
    fn from(f: &'a FailureDetail) -> Self {
        Failure {
            error_type: &f.error_type.name,
            message: &f.error_message,
            stack_trace: f.stack_trace.as_deref(),
            timestamp: f.timestamp,
        }
    }
}

/// What one write transaction mined: written just before it commits.
#[derive(Default)]
pub(crate) struct Pending {
    /// Whether the cache was brought up to date in this transaction.
    synced: bool,
    /// Families whose template generalised (miner indexes).
    generalised: BTreeSet<usize>,
    /// The latest failure of each family seen (by database id).
    seen: BTreeMap<i64, Timestamp>,
    /// The families this transaction made: (miner index, database id).
    made: Vec<(usize, i64)>,
}

impl Pending {
    /// Whether this transaction made a family.
    pub(crate) fn made_any(&self) -> bool {
        !self.made.is_empty()
    }
}

impl Cache {
    /// The family `id` stands for: itself, or the one it was merged into
    /// (followed to the end; a cycle, which no write makes, stops).
    fn resolve(&self, mut id: i64) -> i64 {
        for _ in 0..64 {
            match self.merged.get(&id) {
                Some(&into) if into != id => id = into,
                _ => break,
            }
        }
        id
    }

    /// Reads the families changed since the cache last looked, in the
    /// parts it holds (a merge changes the row of each family it merged);
    /// starts over when it is stale.
    fn sync(&mut self, conn: Conn<'_>) -> Result<()> {
        if self.stale {
            *self = Cache::default();
        }
        if self.rev == 0 {
            // A new cache holds no part yet: it only needs to know where the
            // families stand now, and reads each part when it is mined into.
            self.rev = conn
                .row("SELECT COALESCE(MAX(rev), 0) FROM families", &[], |row| {
                    row.i64(0)
                })?
                .unwrap_or(0);
            return Ok(());
        }
        let changed = conn.collect(
            "SELECT id, error_type, site, state, rev, merged_into, part FROM families WHERE rev > ?1 ORDER BY rev",
            vals![self.rev],
            |row| Ok((FamilyState::read(row)?, row.opt_text(6)?)),
        )?;
        let mut moved = false;
        for (family, part) in changed {
            self.rev = self.rev.max(family.rev);
            // A part not read yet is read whole, as it is then, when a
            // failure first falls in it.
            if part.is_some_and(|part| self.loaded.contains(&part)) {
                moved |= !self.take(family)?;
            }
        }
        if moved {
            // A family now stands elsewhere in the tree (a rebuild gave its
            // id another cause): updated in place it would sit where no
            // failure of its cause looks. Start over from the table.
            *self = Cache::default();
            return self.sync(conn);
        }
        Ok(())
    }

    /// Reads every family of `part`, once: before the first failure that
    /// falls in it is mined. The families of other parts could not take
    /// the failure, so a process that mines a few failures into a
    /// database of many families reads a few of them.
    fn load(&mut self, conn: Conn<'_>, part: String) -> Result<()> {
        if self.loaded.contains(&part) {
            return Ok(());
        }
        // Most recently seen last, as a miner that saw them join keeps
        // them: a leaf compares its most recent families only.
        let families = conn.collect(
            "SELECT id, error_type, site, state, rev, merged_into FROM families WHERE part = ?1
             ORDER BY last_seen, id",
            vals![part.as_str()],
            FamilyState::read,
        )?;
        for family in families {
            // A family a sync read already is in its place.
            if !self.index.contains_key(&family.id) {
                self.take(family)?;
            }
        }
        self.loaded.insert(part);
        Ok(())
    }

    /// Takes in one family's stored state; false (and nothing changed)
    /// when the miner holds it elsewhere in its tree.
    fn take(&mut self, row: FamilyState) -> Result<bool> {
        let FamilyState {
            id,
            error_type,
            site,
            state,
            rev,
            merged_into,
        } = row;
        let family =
            Family::from_state(error_type.as_deref(), site.as_deref(), &state).map_err(|e| {
                Error::invalid_argument("families", format!("family {id}: bad state: {e}"))
            })?;
        match self.index.get(&id) {
            Some(&at) if !self.miner.family(at).same_place(&family) => return Ok(false),
            Some(&at) => self.miner.update(at, family),
            None => {
                let at = self.miner.restore(family);
                self.ids.push(id);
                self.index.insert(id, at);
            }
        }
        match merged_into {
            Some(into) => self.merged.insert(id, into),
            None => self.merged.remove(&id),
        };
        self.rev = self.rev.max(rev);
        Ok(true)
    }
}

/// One row of `families` as the miner reads it.
struct FamilyState {
    id: i64,
    error_type: Option<String>,
    site: Option<String>,
    state: String,
    rev: i64,
    merged_into: Option<i64>,
}

impl FamilyState {
    /// From `id, error_type, site, state, rev, merged_into`.
    fn read(row: &super::sql::Row<'_>) -> Result<Self> {
        Ok(FamilyState {
            id: row.i64(0)?,
            error_type: row.opt_text(1)?,
            site: row.opt_text(2)?,
            state: row.text(3)?,
            rev: row.i64(4)?,
            merged_into: row.opt_i64(5)?,
        })
    }
}

/// The family of a failure: the database id of the family it joins, or
/// of the one it starts.
pub(crate) fn assign(
    cache: &std::sync::Mutex<Cache>,
    pending: &mut Pending,
    conn: Conn<'_>,
    last: Failure<'_>,
) -> Result<i64> {
    let mut cache = cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !pending.synced {
        // Once per transaction: the first assignment reads what other
        // processes mined, or everything again after a failed transaction.
        cache.sync(conn)?;
        pending.synced = true;
        // Until this transaction commits, what it mines is not the
        // database's.
        cache.stale = true;
    }
    let key = crate::families::key::key_of(last.message, last.stack_trace);
    cache.load(conn, part_of(Some(last.error_type), &key))?;
    let assigned = cache.miner.assign_key(Some(last.error_type), key);
    let id = if assigned.new {
        let family = cache.miner.family(assigned.family);
        let rev = cache.rev + 1;
        let id = conn
            .row(
                "INSERT INTO families (template, error_type, site, state, first_seen, last_seen, rev, part)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7) RETURNING id",
                vals![
                    family.template().as_str(),
                    family.error_type.as_deref(),
                    family.site.as_deref(),
                    family.state().as_str(),
                    last.timestamp,
                    rev,
                    family.part().as_str()
                ],
                |row| row.i64(0),
            )?
            .ok_or_else(|| Error::invalid_argument("families", "no id for a new family"))?;
        if cache.ids.is_empty() {
            // The database's first family: its families are mined with
            // these rules (a database that had families before versions
            // were recorded keeps none, which reads as older).
            conn.exec(
                "INSERT INTO settings (key, value) SELECT ?1, ?2
                 WHERE NOT EXISTS (SELECT 1 FROM families WHERE id <> ?3)
                 ON CONFLICT (key) DO NOTHING",
                vals![RULES_SETTING, &crate::families::RULES.to_string(), id],
            )?;
        }
        cache.rev = rev;
        cache.ids.push(id);
        cache.index.insert(id, assigned.family);
        pending.made.push((assigned.family, id));
        id
    } else {
        if assigned.generalised {
            pending.generalised.insert(assigned.family);
        }
        cache.resolve(cache.ids[assigned.family])
    };
    let seen = pending.seen.entry(id).or_insert(last.timestamp);
    *seen = (*seen).max(last.timestamp);
    Ok(id)
}

/// Writes what the transaction mined (templates that generalised, last
/// seen times); called once, just before the commit.
pub(crate) fn flush(
    cache: &std::sync::Mutex<Cache>,
    pending: &mut Pending,
    conn: Conn<'_>,
) -> Result<()> {
    if pending.generalised.is_empty() && pending.seen.is_empty() && pending.made.is_empty() {
        return Ok(());
    }
    let mut cache = cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // A family this transaction made that another writer made too, for the
    // same cause, since this one read the families: PostgreSQL's writers
    // mine at once. The caller holds the families lock now (taken as the
    // transaction ends, so writers do not wait for each other's whole
    // transactions), so every such family is committed and visible: the
    // items go to the older one and this one is not kept. On SQLite,
    // whose writers take turns, there is never one.
    let mut dropped = BTreeSet::new();
    for (at, id) in std::mem::take(&mut pending.made) {
        let family = cache.miner.family(at);
        let twin = conn.row(
            "SELECT id FROM families
             WHERE part = ?1 AND template = ?2 AND id <> ?3 AND merged_into IS NULL
             ORDER BY id LIMIT 1",
            vals![family.part().as_str(), family.template().as_str(), id],
            |row| row.i64(0),
        )?;
        if let Some(twin) = twin {
            conn.exec(
                "UPDATE items SET family_id = ?1 WHERE family_id = ?2",
                vals![twin, id],
            )?;
            conn.exec("DELETE FROM families WHERE id = ?1", vals![id])?;
            if let Some(seen) = pending.seen.remove(&id) {
                let entry = pending.seen.entry(twin).or_insert(seen);
                *entry = (*entry).max(seen);
            }
            pending.generalised.remove(&at);
            dropped.insert(at);
        }
    }
    // The miner holds a family the database will not: it starts over after
    // the commit.
    cache.dropped |= !dropped.is_empty();
    for at in std::mem::take(&mut pending.generalised) {
        let rev = cache.rev + 1;
        let family = cache.miner.family(at);
        conn.exec(
            "UPDATE families SET template = ?1, state = ?2, rev = ?3 WHERE id = ?4",
            vals![
                family.template().as_str(),
                family.state().as_str(),
                rev,
                cache.ids[at]
            ],
        )?;
        cache.rev = rev;
    }
    for (id, seen) in std::mem::take(&mut pending.seen) {
        conn.exec(
            "UPDATE families SET last_seen = ?1 WHERE id = ?2 AND last_seen < ?1",
            vals![seen, id],
        )?;
    }
    Ok(())
}

/// Forgets every family the cache knows: the next assignment reads them
/// all again (after a merge or a rebuild changed many at once).
pub(crate) fn reset(cache: &std::sync::Mutex<Cache>) {
    *cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Cache::default();
}

/// Called after a commit: what the cache mined is now the database's.
pub(crate) fn committed(cache: &std::sync::Mutex<Cache>) {
    let mut cache = cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if cache.dropped {
        *cache = Cache::default();
    }
    cache.stale = false;
}

/// One family, as `dlq families` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FamilyInfo {
    pub id: i64,
    /// The words of its failures' error line, `<*>` where they differ.
    pub template: String,
    /// The last attempt's error type its failures share.
    pub error_type: Option<String>,
    /// The crash site (top application frame) they share, if any.
    pub site: Option<String>,
    /// Items whose last attempt is of this family now.
    pub items: i64,
    pub first_seen: Timestamp,
    pub last_seen: Timestamp,
    /// One of its items: (job_id, item_id).
    pub sample: Option<(String, String)>,
    /// The family it was merged into (`dlq families merge`), where its
    /// items are; `None` for a family of its own.
    pub merged_into: Option<i64>,
    /// The words it may be split at (`dlq families split --by`): their
    /// position from 1 and the word as the template shows it. Filled by
    /// [`Dlq::family`] only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub varying_words: Vec<(usize, String)>,
}

/// Every family with items (of one job or all), and how many items have
/// none yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Families {
    /// Largest first.
    pub families: Vec<FamilyInfo>,
    /// The families left out by the limit, and their items: with
    /// `items_without_family` they make the listed counts add up to
    /// `total_items`.
    pub more_families: usize,
    pub more_items: i64,
    /// Items with no family (stored before families were mined, or with
    /// no attempt): `dlq families rebuild` mines them.
    pub items_without_family: i64,
    pub total_items: i64,
}

impl Dlq {
    /// The families that hold items now, largest first (`limit` of them,
    /// all when `None`), with the counts that make them add up to the
    /// items of the database.
    pub fn families(&self, limit: Option<usize>) -> Result<Families> {
        self.families_in(None, limit)
    }

    /// [`Dlq::families`] of one job's items (all when `job_id` is
    /// `None`): counts, totals and the sample item are the job's; a
    /// family's template, first and last seen are the family's, whichever
    /// job its failures came from.
    pub fn families_in(&self, job_id: Option<&str>, limit: Option<usize>) -> Result<Families> {
        self.read(|conn| {
            // One pass over an index for every count: items_family for the
            // database, items_job_family (covering) for one job.
            let counts = match job_id {
                None => conn.collect(
                    "SELECT family_id, COUNT(*) FROM items GROUP BY family_id",
                    &[],
                    |row| Ok((row.opt_i64(0)?, row.i64(1)?)),
                )?,
                Some(job) => conn.collect(
                    "SELECT family_id, COUNT(*) FROM items WHERE job_id = ?1 GROUP BY family_id",
                    vals![job],
                    |row| Ok((row.opt_i64(0)?, row.i64(1)?)),
                )?,
            };
            let mut without = 0;
            let mut total = 0;
            let mut by_size: Vec<(i64, i64)> = Vec::new();
            for (family, n) in counts {
                total += n;
                match family {
                    Some(id) => by_size.push((id, n)),
                    None => without += n,
                }
            }
            by_size.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let shown = by_size.len().min(limit.unwrap_or(usize::MAX));
            let left_out = by_size.split_off(shown);
            let mut families = Vec::with_capacity(by_size.len());
            let mut more_families = left_out.len();
            let mut more_items: i64 = left_out.iter().map(|(_, n)| n).sum();
            for (id, items) in by_size {
                match family_row(conn, id, items, job_id)? {
                    Some(info) => families.push(info),
                    // An id with no row (a foreign key makes it
                    // impossible): still counted, so the listing adds up.
                    None => {
                        more_families += 1;
                        more_items += items;
                    }
                }
            }
            Ok(Families {
                families,
                more_families,
                more_items,
                items_without_family: without,
                total_items: total,
            })
        })
    }

    /// One family by id, with its count now.
    pub fn family(&self, id: i64) -> Result<FamilyInfo> {
        self.read(|conn| {
            let items = conn
                .row(
                    "SELECT COUNT(*) FROM items WHERE family_id = ?1",
                    vals![id],
                    |row| row.i64(0),
                )?
                .unwrap_or(0);
            let mut info = family_row(conn, id, items, None)?.ok_or_else(|| {
                Error::invalid_argument("family", format!("no family {id} in this database"))
            })?;
            let state = conn.row(
                "SELECT state FROM families WHERE id = ?1",
                vals![id],
                |row| row.text(0),
            )?;
            if let Some(Ok(family)) = state.map(|state| {
                Family::from_state(info.error_type.as_deref(), info.site.as_deref(), &state)
            }) {
                info.varying_words = family.varying_words();
            }
            Ok(info)
        })
    }
}

/// A family's row, with `items` as its count and a sample item (of `job_id`
/// when given).
fn family_row(
    conn: Conn<'_>,
    id: i64,
    items: i64,
    job_id: Option<&str>,
) -> Result<Option<FamilyInfo>> {
    let info = conn.row(
        "SELECT template, error_type, site, first_seen, last_seen, merged_into FROM families WHERE id = ?1",
        vals![id],
        |row| {
            Ok(FamilyInfo {
                id,
                template: row.text(0)?,
                error_type: row.opt_text(1)?,
                site: row.opt_text(2)?,
                items,
                first_seen: row.ts(3)?,
                last_seen: row.ts(4)?,
                sample: None,
                merged_into: row.opt_i64(5)?,
                varying_words: Vec::new(),
            })
        },
    )?;
    let Some(mut info) = info else {
        return Ok(None);
    };
    let sample = |row: &super::sql::Row<'_>| Ok((row.text(0)?, row.text(1)?));
    info.sample = match job_id {
        None => conn.row(
            "SELECT job_id, item_id FROM items WHERE family_id = ?1 LIMIT 1",
            vals![id],
            sample,
        )?,
        Some(job) => conn.row(
            "SELECT job_id, item_id FROM items WHERE job_id = ?1 AND family_id = ?2 LIMIT 1",
            vals![job, id],
            sample,
        )?,
    };
    Ok(Some(info))
}

/// One family row whole (its miner state included): what `dlq copy`
/// carries into a database that has no families yet, ids and all.
#[derive(Clone, Debug)]
pub struct FamilyRow {
    pub id: i64,
    pub template: String,
    pub error_type: Option<String>,
    pub site: Option<String>,
    /// The miner's state of the family (JSON).
    pub state: String,
    pub first_seen: Timestamp,
    pub last_seen: Timestamp,
    pub rev: i64,
    /// The family it was merged into, if any.
    pub merged_into: Option<i64>,
}

impl Dlq {
    /// Every family row, in id order (families are few next to items: one
    /// per cause).
    pub fn family_rows(&self) -> Result<Vec<FamilyRow>> {
        self.read(|conn| {
            conn.collect(
                "SELECT id, template, error_type, site, state, first_seen, last_seen, rev, merged_into
                 FROM families ORDER BY id",
                &[],
                |row| {
                    Ok(FamilyRow {
                        id: row.i64(0)?,
                        template: row.text(1)?,
                        error_type: row.opt_text(2)?,
                        site: row.opt_text(3)?,
                        state: row.text(4)?,
                        first_seen: row.ts(5)?,
                        last_seen: row.ts(6)?,
                        rev: row.i64(7)?,
                        merged_into: row.opt_i64(8)?,
                    })
                },
            )
        })
    }

    /// Takes `rows` as this database's families, with their ids, if it has
    /// none yet (`dlq copy` into a new database keeps every family id);
    /// false, and nothing changed, if it has some.
    pub fn adopt_families(&self, rows: &[FamilyRow]) -> Result<bool> {
        self.write(|tx| {
            tx.mine_alone()?;
            let conn = tx.sql();
            let any = conn.row("SELECT 1 FROM families LIMIT 1", &[], |row| row.i64(0))?;
            if any.is_some() {
                return Ok(false);
            }
            for family in rows {
                // A state the miner cannot read gets no part: it is listed,
                // never mined into.
                let part = Family::from_state(
                    family.error_type.as_deref(),
                    family.site.as_deref(),
                    &family.state,
                )
                .ok()
                .map(|f| f.part());
                conn.exec(
                    "INSERT INTO families (id, template, error_type, site, state, first_seen, last_seen, rev, merged_into, part)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    vals![
                        family.id,
                        family.template.as_str(),
                        family.error_type.as_deref(),
                        family.site.as_deref(),
                        family.state.as_str(),
                        family.first_seen,
                        family.last_seen,
                        family.rev,
                        family.merged_into,
                        part.as_deref()
                    ],
                )?;
            }
            // New families must start above the adopted ones.
            if let Some(sql) = conn.backend().ids_given("families") {
                if !rows.is_empty() {
                    conn.row(&sql, &[], |row| row.i64(0))?;
                }
            }
            Ok(true)
        })
    }
}

/// The `settings` key of the rules version the families were mined with
/// ([`crate::families::RULES`]).
const RULES_SETTING: &str = "families_rules";

/// Records that the families were mined with rules `version`.
fn record_rules(conn: Conn<'_>, version: u32) -> Result<()> {
    conn.exec(
        "INSERT INTO settings (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        vals![RULES_SETTING, &version.to_string()],
    )?;
    Ok(())
}

impl Dlq {
    /// The version of the rules this database's families were mined with
    /// ([`crate::families::RULES`]): `None` when it has families mined
    /// before versions were recorded; the current version when it has no
    /// family yet.
    pub fn families_rules(&self) -> Result<Option<u32>> {
        self.read(|conn| {
            let recorded = conn.row(
                "SELECT value FROM settings WHERE key = ?1",
                vals![RULES_SETTING],
                |row| row.text(0),
            )?;
            if let Some(version) = recorded.and_then(|v| v.parse::<u32>().ok()) {
                return Ok(Some(version));
            }
            let any = conn.row("SELECT 1 FROM families LIMIT 1", &[], |row| row.i64(0))?;
            Ok(any.is_none().then_some(crate::families::RULES))
        })
    }

    /// Records the rules version of families taken from elsewhere
    /// ([`Dlq::adopt_families`]: `dlq copy` keeps the source's).
    pub(crate) fn record_families_rules(&self, version: Option<u32>) -> Result<()> {
        self.write(|tx| match version {
            Some(version) => record_rules(tx.sql(), version),
            None => {
                tx.sql()
                    .exec("DELETE FROM settings WHERE key = ?1", vals![RULES_SETTING])?;
                Ok(())
            }
        })
    }
}

/// What [`Dlq::merge_families`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FamilyMerge {
    /// The family the others went into.
    pub into: i64,
    /// The families merged into it (each as the family it stood for).
    pub merged: Vec<i64>,
    /// Items that moved.
    pub items_moved: u64,
    /// The error types of merged families that differ from the error type
    /// of `into` (each once): a merge a person may not have meant, since
    /// the miner never puts two error types in one family.
    pub other_error_types: Vec<String>,
}

/// What [`Dlq::rebuild_families`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FamilyRebuild {
    /// Items mined again.
    pub items: u64,
    /// Families the new mining found.
    pub families: u64,
    /// Of those, how many kept the id of the family that held most of
    /// their items before.
    pub kept_ids: u64,
    /// Of those, how many went into a family a person merged others into
    /// (an alias row of it, as the merge made).
    pub aliases: u64,
    /// Families that gather nothing any more, each pointed at the family
    /// that took most of its items (`merged_into`).
    pub retired: u64,
}

/// What [`Dlq::split_family`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FamilySplit {
    /// The family split (it keeps the largest value's items).
    pub family: i64,
    /// The word split at, from 1, as in the template.
    pub position: usize,
    /// One family per value, largest first: the first is `family` itself.
    pub parts: Vec<SplitPart>,
}

/// One value of a split and the family that holds its items.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SplitPart {
    pub id: i64,
    pub value: String,
    pub items: u64,
}

/// The most families one split makes: the miner compares at most
/// [`crate::families::miner::LEAF_CANDIDATES`] recent families of a leaf first,
/// and a split that makes dozens is a search, not a cause.
pub const MAX_SPLIT_VALUES: usize = 32;

/// The family `id` stands for in the database: itself, or the end of its
/// `merged_into` chain. An id that is not a family is an error.
fn root_family(conn: Conn<'_>, id: i64) -> Result<i64> {
    let mut at = id;
    for _ in 0..64 {
        let merged = conn.row(
            "SELECT merged_into FROM families WHERE id = ?1",
            vals![at],
            |row| row.opt_i64(0),
        )?;
        match merged {
            None => {
                return Err(Error::invalid_argument(
                    "family",
                    format!("no family {id} in this database"),
                ))
            }
            Some(Some(into)) if into != at => at = into,
            Some(_) => return Ok(at),
        }
    }
    Ok(at)
}

/// After a person's change to the families (merge, split, rebuild):
/// every process's miner reads them again, and the change is an event.
fn families_changed(
    tx: &mut super::WriteTx<'_>,
    kind: super::EventKind,
    what: &impl Serialize,
) -> Result<()> {
    tx.reset_families();
    tx.event(kind, None, None, serde_json::to_value(what)?)
}

/// A `rev` above every family's, for rows changed now (other processes
/// read the families changed since the highest they saw).
fn next_rev(conn: Conn<'_>) -> Result<i64> {
    Ok(conn
        .row(
            "SELECT COALESCE(MAX(rev), 0) + 1 FROM families",
            &[],
            |row| row.i64(0),
        )?
        .unwrap_or(1))
}

impl Dlq {
    /// Merges the families `from` into `into`, in one transaction: their
    /// items move to `into`, and each becomes an alias of it
    /// (`merged_into`), so a failure the miner still finds in one of them
    /// goes to `into` too, in every process. A `families_merged` event
    /// records it; a rebuild keeps it.
    pub fn merge_families(&self, into: i64, from: &[i64]) -> Result<FamilyMerge> {
        if from.is_empty() {
            return Err(Error::invalid_argument(
                "families",
                "name at least one family to merge",
            ));
        }
        let merge = self.write(|tx| {
            tx.mine_alone()?;
            let conn = tx.sql();
            let into = root_family(conn, into)?;
            let rev = next_rev(conn)?;
            let error_type_of = |id: i64| {
                conn.row(
                    "SELECT error_type FROM families WHERE id = ?1",
                    vals![id],
                    |row| row.opt_text(0),
                )
                .map(Option::flatten)
            };
            let into_type = error_type_of(into)?;
            let mut other_error_types = Vec::new();
            let mut merged = Vec::new();
            let mut items_moved = 0u64;
            for &id in from {
                let root = root_family(conn, id)?;
                if root == into || merged.contains(&root) {
                    continue;
                }
                let root_type = error_type_of(root)?;
                if root_type != into_type {
                    let name = root_type.unwrap_or_else(|| "(none)".to_string());
                    if !other_error_types.contains(&name) {
                        other_error_types.push(name);
                    }
                }
                items_moved += conn.exec(
                    "UPDATE items SET family_id = ?1 WHERE family_id = ?2",
                    vals![into, root],
                )? as u64;
                conn.exec(
                    "UPDATE families SET
                         first_seen = (SELECT MIN(first_seen) FROM families WHERE id IN (?1, ?2)),
                         last_seen = (SELECT MAX(last_seen) FROM families WHERE id IN (?1, ?2)),
                         rev = ?3
                     WHERE id = ?1",
                    vals![into, root, rev],
                )?;
                conn.exec(
                    "UPDATE families SET merged_into = ?1, rev = ?2 WHERE id = ?3 OR merged_into = ?3",
                    vals![into, rev, root],
                )?;
                merged.push(root);
            }
            if merged.is_empty() {
                return Err(Error::invalid_argument(
                    "families",
                    format!("every family named is family {into} already"),
                ));
            }
            let merge = FamilyMerge {
                into,
                merged,
                items_moved,
                other_error_types,
            };
            families_changed(tx, super::EventKind::FamiliesMerged, &merge)?;
            Ok(merge)
        })?;
        Ok(merge)
    }

    /// Splits family `id` by the value of its word at `position` (from 1,
    /// a `<*>` of its template): the items with the most common value stay
    /// in it, each other value gets a family of its own, in one
    /// transaction. Each part only ever takes failures with its value
    /// there, in every process; a failure with a value none of them holds
    /// starts a family as any new cause does. A `families_split` event
    /// records it, and `rebuild --all` keeps it. Refused when the word is
    /// not a variable, when every item has the same value, or when there
    /// are more than [`MAX_SPLIT_VALUES`] values.
    pub fn split_family(&self, id: i64, position: usize) -> Result<FamilySplit> {
        self.write(|tx| {
            tx.mine_alone()?;
            let conn = tx.sql();
            let backend = conn.backend();
            let root = root_family(conn, id)?;
            if root != id {
                return Err(Error::invalid_argument(
                    "family",
                    format!("family {id} was merged into family {root}: split {root}"),
                ));
            }
            let (error_type, site, state) = conn
                .row(
                    "SELECT error_type, site, state FROM families WHERE id = ?1",
                    vals![id],
                    |row| Ok((row.opt_text(0)?, row.opt_text(1)?, row.text(2)?)),
                )?
                .ok_or_else(|| Error::invalid_argument("family", format!("no family {id}")))?;
            let family = Family::from_state(error_type.as_deref(), site.as_deref(), &state)
                .map_err(|e| Error::invalid_argument("family", format!("family {id}: {e}")))?;
            let at = position.checked_sub(1).filter(|&at| family.is_variable_at(at));
            let Some(at) = at else {
                return Err(Error::invalid_argument(
                    "position",
                    format!(
                        "word {position} of family {id} is not a <*> of its template ({}): \
                         split at a word that varies, counted from 1",
                        family.template()
                    ),
                ));
            };
            // Each item's value there, from its last attempt (the key its
            // family was mined from), kept in a scratch table: a family
            // may hold every item of the database.
            conn.exec(
                "CREATE TEMP TABLE IF NOT EXISTS family_split (item BIGINT PRIMARY KEY, value TEXT NOT NULL)",
                &[],
            )?;
            conn.exec("DELETE FROM family_split", &[])?;
            let sql = format!(
                "SELECT i.id, f.error_message, f.stack_trace, {last_attempt}
                 FROM items i JOIN failure_history f ON f.id = {last}
                 WHERE i.family_id = ?1 AND i.id > ?2 ORDER BY i.id LIMIT ?3",
                last_attempt = backend.ts_text("i.last_attempt"),
                last = super::counters::last_attempt_select(backend, "id", "i.id"),
            );
            let mut values: HashMap<String, (u64, Timestamp, Timestamp)> = HashMap::new();
            let mut after = 0i64;
            loop {
                let rows = conn.collect(&sql, vals![id, after, MINE_BATCH], |row| {
                    Ok((row.i64(0)?, row.text(1)?, row.opt_text(2)?, row.ts(3)?))
                })?;
                for (key, message, stack_trace, last_attempt) in &rows {
                    let words = crate::families::key::key_of(message, stack_trace.as_deref()).words;
                    // An item mined by an older key may have other words:
                    // it stays where it is.
                    let Some(word) = words.get(at).filter(|_| words.len() == family.word_count())
                    else {
                        continue;
                    };
                    // A key keeps at most 64 bytes of a word: two values
                    // that share those would share a part.
                    if word.raw.len() >= crate::families::key::MAX_WORD_BYTES {
                        return Err(Error::invalid_argument(
                            "position",
                            format!(
                                "word {position} of family {id} has values of {} bytes or more, \
                                 which families compare by their start only: not a word to split on",
                                crate::families::key::MAX_WORD_BYTES
                            ),
                        ));
                    }
                    let value = word.raw.to_string();
                    let entry = values
                        .entry(value.clone())
                        .or_insert((0, *last_attempt, *last_attempt));
                    entry.0 += 1;
                    entry.1 = entry.1.min(*last_attempt);
                    entry.2 = entry.2.max(*last_attempt);
                    if values.len() > MAX_SPLIT_VALUES {
                        return Err(Error::invalid_argument(
                            "position",
                            format!(
                                "word {position} of family {id} has more than {MAX_SPLIT_VALUES} values: \
                                 too many to split into families (search with --filter instead)"
                            ),
                        ));
                    }
                    conn.exec(
                        "INSERT INTO family_split (item, value) VALUES (?1, ?2)",
                        vals![*key, value.as_str()],
                    )?;
                }
                match rows.last() {
                    Some(last) if rows.len() as i64 == MINE_BATCH => after = last.0,
                    _ => break,
                }
            }
            if values.len() < 2 {
                return Err(Error::invalid_argument(
                    "position",
                    format!(
                        "every item of family {id} has the same word {position}: nothing to split"
                    ),
                ));
            }
            let mut parts: Vec<(String, (u64, Timestamp, Timestamp))> = values.into_iter().collect();
            parts.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
            let rev = next_rev(conn)?;
            let mut split = FamilySplit {
                family: id,
                position,
                parts: Vec::new(),
            };
            for (n, (value, (items, first, last))) in parts.iter().enumerate() {
                let part = family.split_at(at, value);
                let part_id = if n == 0 {
                    conn.exec(
                        "UPDATE families SET template = ?1, state = ?2, rev = ?3 WHERE id = ?4",
                        vals![part.template().as_str(), part.state().as_str(), rev, id],
                    )?;
                    id
                } else {
                    let new_id = conn
                        .row(
                            "INSERT INTO families (template, error_type, site, state, first_seen, last_seen, rev, part)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
                            vals![
                                part.template().as_str(),
                                error_type.as_deref(),
                                site.as_deref(),
                                part.state().as_str(),
                                *first,
                                *last,
                                rev,
                                part.part().as_str()
                            ],
                            |row| row.i64(0),
                        )?
                        .ok_or_else(|| Error::invalid_argument("families", "no id for a new family"))?;
                    conn.exec(
                        "UPDATE items SET family_id = ?1
                         WHERE id IN (SELECT item FROM family_split WHERE value = ?2)",
                        vals![new_id, value.as_str()],
                    )?;
                    new_id
                };
                split.parts.push(SplitPart {
                    id: part_id,
                    value: value.clone(),
                    items: *items,
                });
            }
            conn.exec("DELETE FROM family_split", &[])?;
            families_changed(tx, super::EventKind::FamiliesSplit, &split)?;
            Ok(split)
        })
    }

    /// Mines every item's family again, from scratch, in one transaction
    /// (the write lock is held for its length; an interrupted rebuild
    /// changes nothing): what a better miner is applied with.
    ///
    /// Ids are kept where they mean the same cause: each new family takes
    /// the id of the family that held most of its items, largest first,
    /// one new family per id, except that every new family whose items
    /// were mostly in a family a person merged others into goes back into
    /// it (a merge is kept). A new family that finds no id free gets a new
    /// one; an old family left with no items points at the family that
    /// took most of them (`merged_into`), so nothing points at a family
    /// that no longer gathers anything. Memory is the miner's (bounded,
    /// see [`crate::families`]) and the families' own; the items are
    /// streamed and their new families kept in a scratch table.
    pub fn rebuild_families(&self, mut progress: impl FnMut(u64)) -> Result<FamilyRebuild> {
        self.write(|tx| {
            tx.mine_alone()?;
            let conn = tx.sql();
            let backend = conn.backend();
            conn.exec(
                "CREATE TEMP TABLE IF NOT EXISTS family_rebuild (item BIGINT PRIMARY KEY, fam BIGINT NOT NULL)",
                &[],
            )?;
            conn.exec("DELETE FROM family_rebuild", &[])?;
            // 1. Mine every item's last attempt with a fresh miner, given
            //    first the families a person split, with their ids: a
            //    split is kept.
            let mut miner = Miner::default();
            let mut report = FamilyRebuild::default();
            let mut id_of: HashMap<i64, i64> = HashMap::new();
            let mut taken: BTreeSet<i64> = BTreeSet::new();
            // Split parts a person then merged into another family: they
            // still take only their value, and their failures go where the
            // merge sent them; their rows stay as they are.
            let mut merged_parts: BTreeSet<i64> = BTreeSet::new();
            for (id, error_type, site, state, merged_into) in conn.collect(
                "SELECT id, error_type, site, state, merged_into FROM families ORDER BY id",
                &[],
                |row| {
                    Ok((
                        row.i64(0)?,
                        row.opt_text(1)?,
                        row.opt_text(2)?,
                        row.text(3)?,
                        row.opt_i64(4)?,
                    ))
                },
            )? {
                let Ok(family) = Family::from_state(error_type.as_deref(), site.as_deref(), &state)
                else {
                    continue;
                };
                if !family.is_split() {
                    continue;
                }
                let index = miner.restore(family) as i64;
                match merged_into {
                    Some(root) => {
                        id_of.insert(index, root);
                        merged_parts.insert(index);
                    }
                    None => {
                        id_of.insert(index, id);
                        taken.insert(id);
                    }
                }
            }
            let mut after = 0i64;
            let sql = format!(
                "SELECT i.id, f.error_type, f.error_message, f.stack_trace
                 FROM items i JOIN failure_history f ON f.id = {last}
                 WHERE i.id > ?1 ORDER BY i.id LIMIT ?2",
                last = super::counters::last_attempt_select(backend, "id", "i.id"),
            );
            loop {
                let rows = conn.collect(&sql, vals![after, MINE_BATCH], |row| {
                    Ok((
                        row.i64(0)?,
                        row.opt_text(1)?.unwrap_or_default(),
                        row.text(2)?,
                        row.opt_text(3)?,
                    ))
                })?;
                for (key, error_type, message, stack_trace) in &rows {
                    let assigned = miner.assign(Some(error_type), message, stack_trace.as_deref());
                    conn.exec(
                        "INSERT INTO family_rebuild (item, fam) VALUES (?1, ?2)",
                        vals![*key, assigned.family as i64],
                    )?;
                }
                report.items += rows.len() as u64;
                progress(report.items);
                match rows.last() {
                    Some(last) if rows.len() as i64 == MINE_BATCH => after = last.0,
                    _ => break,
                }
            }
            report.families = miner.families().len() as u64;
            // 2. Which old family each new one mostly holds.
            let overlap = conn.collect(
                "SELECT r.fam, i.family_id, COUNT(*) FROM family_rebuild r JOIN items i ON i.id = r.item
                 WHERE i.family_id IS NOT NULL GROUP BY r.fam, i.family_id",
                &[],
                |row| Ok((row.i64(0)?, row.i64(1)?, row.i64(2)?)),
            )?;
            let merge_targets: BTreeSet<i64> = conn
                .collect(
                    "SELECT DISTINCT merged_into FROM families WHERE merged_into IS NOT NULL",
                    &[],
                    |row| row.i64(0),
                )?
                .into_iter()
                .collect();
            let mut pairs = overlap.clone();
            pairs.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
            for &(fam, old, _) in &pairs {
                if id_of.contains_key(&fam) {
                    continue;
                }
                if merge_targets.contains(&old) || !taken.contains(&old) {
                    id_of.insert(fam, old);
                    taken.insert(old);
                }
            }
            // 3. Write the families: kept ids updated, the rest new. A
            //    second new family of a merged one takes an alias row of
            //    that family (one a merge or an earlier rebuild made), so
            //    rebuilding again adds no rows.
            let mut spare: HashMap<i64, Vec<i64>> = HashMap::new();
            for (id, into) in conn.collect(
                "SELECT id, merged_into FROM families WHERE merged_into IS NOT NULL ORDER BY id DESC",
                &[],
                |row| Ok((row.i64(0)?, row.i64(1)?)),
            )? {
                spare.entry(into).or_default().push(id);
            }
            let rev = next_rev(conn)?;
            let now = tx.now();
            let mut first_of: HashMap<i64, usize> = HashMap::new();
            for (index, family) in miner.families().iter().enumerate() {
                let fam = index as i64;
                if merged_parts.contains(&fam) {
                    continue;
                }
                let kept = id_of.get(&fam).copied();
                let merged_into = kept.and_then(|id| first_of.get(&id).map(|_| id));
                match (kept, merged_into) {
                    (Some(id), None) => {
                        first_of.insert(id, index);
                        report.kept_ids += 1;
                        conn.exec(
                            "UPDATE families SET template = ?1, error_type = ?2, site = ?3, state = ?4,
                                 rev = ?5, merged_into = NULL, part = ?7 WHERE id = ?6",
                            vals![
                                family.template().as_str(),
                                family.error_type.as_deref(),
                                family.site.as_deref(),
                                family.state().as_str(),
                                rev,
                                id,
                                family.part().as_str()
                            ],
                        )?;
                    }
                    (_, Some(into)) if spare.get(&into).is_some_and(|v| !v.is_empty()) => {
                        let alias = spare.get_mut(&into).and_then(Vec::pop).unwrap_or(into);
                        report.aliases += 1;
                        conn.exec(
                            "UPDATE families SET template = ?1, error_type = ?2, site = ?3, state = ?4,
                                 rev = ?5, merged_into = ?6, part = ?8 WHERE id = ?7",
                            vals![
                                family.template().as_str(),
                                family.error_type.as_deref(),
                                family.site.as_deref(),
                                family.state().as_str(),
                                rev,
                                into,
                                alias,
                                family.part().as_str()
                            ],
                        )?;
                        id_of.insert(fam, into);
                    }
                    // A second new family of a merged one with no alias row
                    // to take: its own row, an alias of the merge's family.
                    (_, into) => {
                        if into.is_some() {
                            report.aliases += 1;
                        }
                        let id = conn
                            .row(
                                "INSERT INTO families (template, error_type, site, state, first_seen, last_seen, rev, merged_into, part)
                                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8) RETURNING id",
                                vals![
                                    family.template().as_str(),
                                    family.error_type.as_deref(),
                                    family.site.as_deref(),
                                    family.state().as_str(),
                                    now,
                                    rev,
                                    into,
                                    family.part().as_str()
                                ],
                                |row| row.i64(0),
                            )?
                            .ok_or_else(|| Error::invalid_argument("families", "no id for a new family"))?;
                        if into.is_none() {
                            first_of.insert(id, index);
                        }
                        id_of.insert(fam, into.unwrap_or(id));
                    }
                }
            }
            // 4. Every item to its family's id.
            conn.exec(
                "CREATE TEMP TABLE IF NOT EXISTS family_rebuild_ids (fam BIGINT PRIMARY KEY, id BIGINT NOT NULL)",
                &[],
            )?;
            conn.exec("DELETE FROM family_rebuild_ids", &[])?;
            for (fam, id) in &id_of {
                conn.exec(
                    "INSERT INTO family_rebuild_ids (fam, id) VALUES (?1, ?2)",
                    vals![*fam, *id],
                )?;
            }
            conn.exec(
                "UPDATE items SET family_id = (
                     SELECT m.id FROM family_rebuild r JOIN family_rebuild_ids m ON m.fam = r.fam
                     WHERE r.item = items.id)
                 WHERE family_id IS NOT NULL OR id IN (SELECT item FROM family_rebuild)",
                &[],
            )?;
            // 5. Old families with no item left: pointed at the family
            //    that took most of their items.
            let mut retire: HashMap<i64, (i64, i64)> = HashMap::new();
            for &(fam, old, n) in &overlap {
                let Some(&new_id) = id_of.get(&fam) else { continue };
                if new_id == old {
                    continue;
                }
                let best = retire.entry(old).or_insert((new_id, 0));
                if n > best.1 {
                    *best = (new_id, n);
                }
            }
            for (old, (new_id, _)) in retire {
                let still_used = conn
                    .row(
                        "SELECT 1 FROM items WHERE family_id = ?1 LIMIT 1",
                        vals![old],
                        |row| row.i64(0),
                    )?
                    .is_some();
                let is_kept = first_of.contains_key(&old);
                if !still_used && !is_kept {
                    report.retired += conn.exec(
                        "UPDATE families SET merged_into = ?1, rev = ?2 WHERE id = ?3 OR merged_into = ?3",
                        vals![new_id, rev, old],
                    )? as u64;
                }
            }
            conn.exec("DELETE FROM family_rebuild", &[])?;
            conn.exec("DELETE FROM family_rebuild_ids", &[])?;
            record_rules(conn, crate::families::RULES)?;
            families_changed(tx, super::EventKind::FamiliesRebuilt, &report)?;
            Ok(report)
        })
    }
}

/// Items mined per transaction by [`Dlq::mine_missing_families`].
const MINE_BATCH: i64 = 5_000;

impl Dlq {
    /// Mines a family for every item that has none (stored before this
    /// version, when families did not exist yet), in transactions of
    /// 5,000 items in row order: an interrupted run loses nothing
    /// and the next one goes on where it stopped. Items with no attempt
    /// have no family. Returns how many items it mined, calling
    /// `progress` with the running total after each batch.
    pub fn mine_missing_families(&self, mut progress: impl FnMut(u64)) -> Result<u64> {
        let mut done = 0u64;
        let mut after = 0i64;
        loop {
            let (last, n) = self.write(|tx| {
                let backend = tx.sql().backend();
                let sql = format!(
                    "SELECT i.id, f.error_type, f.error_message, f.stack_trace, {last_attempt}
                     FROM items i JOIN failure_history f ON f.id = {last}
                     WHERE i.family_id IS NULL AND i.id > ?1 ORDER BY i.id LIMIT ?2",
                    last_attempt = backend.ts_text("i.last_attempt"),
                    last = super::counters::last_attempt_select(backend, "id", "i.id"),
                );
                let rows = tx.sql().collect(&sql, vals![after, MINE_BATCH], |row| {
                    Ok((
                        row.i64(0)?,
                        row.opt_text(1)?.unwrap_or_default(),
                        row.text(2)?,
                        row.opt_text(3)?,
                        row.ts(4)?,
                    ))
                })?;
                for (key, error_type, message, stack_trace, timestamp) in &rows {
                    let family = tx.family_of_failure(Failure {
                        error_type,
                        message,
                        stack_trace: stack_trace.as_deref(),
                        timestamp: *timestamp,
                    })?;
                    tx.sql().exec(
                        "UPDATE items SET family_id = ?2 WHERE id = ?1",
                        vals![*key, family],
                    )?;
                }
                Ok((rows.last().map(|r| r.0), rows.len()))
            })?;
            done += n as u64;
            progress(done);
            match last {
                Some(key) if n as i64 == MINE_BATCH => after = key,
                _ => return Ok(done),
            }
        }
    }
}
