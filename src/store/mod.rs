//! The dead-letter store: the [`Dlq`] handle and all of dlqlite's SQL.
//! Each file owns one concern, and holds the `impl Dlq` block of the
//! methods that belong to it:
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | the handle: opening, the clock, read and write transactions (either backend), database facts |
//! | `sql.rs` | the seam between the engine and its backends (SQLite, PostgreSQL): statements, parameters, rows |
//! | `open.rs` | [`OpenOptions`]: create or open-existing, read-only, timeouts, pool size |
//! | `items.rs` | reading items (get, list, paging, sorting) and changing one by hand (remove, mark) |
//! | `selection.rs` | the items an action takes (a filter or named ones): counted with a fingerprint, then marked or removed exactly as counted |
//! | `columns.rs` | the `columns!` macro: a SELECT's column list and its indexes from one definition |
//! | `rows.rs` | one item's rows in `items`, `failure_history`, `worktree_artifacts`: writing and reading them whole |
//! | `write.rs` | [`WriteTx`]: the add path (insert or merge), capacity eviction, the events an add leaves |
//! | `group.rs` | group commit: concurrent adds from many threads in one transaction |
//! | `jobs.rs` | jobs, their capacity, creating one ahead of its first add, clearing one |
//! | `counters.rs` | the counter tables and the one definition of an item's last attempt; recount |
//! | `bulk.rs` | set-based deletes (clear, purge, take) with one event per item; purge |
//! | `load.rs` | loading many items at once (import): batches, the bulk switches |
//! | `take.rs` | taking eligible items out to run them again (requeue) |
//! | `leases.rs` | retry runs and the leases that let runs share a job |
//! | `events.rs` | the audit log: event kinds, reading the log (newest first, or forward from a position) and the change probe followers poll |
//! | `stats.rs` | the legacy statistics, streamed |
//! | `analysis.rs`, `message_groups.rs` | `analyze`: pattern and message groups, distributions |
//! | `categories.rs` | failure categories: [`Category`], the `error_categories` table, an item's category in SQL |
//! | `retention.rs` | retention policies: the `retention_policies` table, which policy governs an item, applying them |
//! | `log_retention.rs` | the audit log's retention policy: how long events are kept, trimming the log (a prefix, in batches) |
//! | `space.rs` | disk space of a SQLite file: free pages, VACUUM, incremental vacuum after big deletes |
//! | `filter_sql.rs` | the filter language compiled to SQL |
//! | `adhoc.rs` | read-only ad-hoc SQL (`dlq sql`) |
//! | `check.rs` | what thresholds read (`dlq check`, metrics): oldest items, arrivals, new signatures and the checks' state |
//! | `metrics.rs` | what `dlq metrics` reads: one snapshot of the counters (items by job, type and category; events by kind; runs by status) |
//!
//! Every write runs in one IMMEDIATE transaction, so writers wait for each
//! other instead of failing; docs/architecture.md follows a write through.
//! On PostgreSQL a write is one READ COMMITTED transaction in which an add
//! first locks its job's row (adds to one job take turns, others do not
//! wait). The parts written against `sql.rs` run on both backends; the rest
//! still takes a SQLite connection and is `Error::Unsupported` on
//! PostgreSQL (docs/postgres.md, "What works").

pub mod adhoc;
mod analysis;
mod budget;
mod bulk;
mod categories;
mod check;
mod columns;
mod counters;
mod events;
mod families;
mod filter_sql;
mod group;
mod items;
mod jobs;
mod leases;
mod load;
mod log_retention;
mod message_groups;
mod metrics;
mod open;
mod retention;
mod rows;
mod selection;
mod space;
pub(crate) mod sql;
mod stats;
mod take;
mod write;

pub use analysis::{
    normalise_message, Analysis, AnalyzeOptions, FamilyGroup, FamilyGroups, MessageGroup, Omitted,
    PatternGroup, SignatureSample, TemporalDistribution, AGENTS_DO_NOT_REPEAT,
};
pub use budget::{Budget, BudgetGuard};
pub use bulk::{DeleteStep, PurgeProgress, PurgeReport};
pub use categories::{Category, CategoryChange, CategoryRule};
pub use check::{
    family_check_name, FamilyNews, NewFamily, NewSignature, OldestItem, SignatureNews,
};

pub use counters::RecountReport;
pub use events::{ChangeProbe, Event, EventKind, EventQuery};
pub use families::{
    Families, FamilyInfo, FamilyMerge, FamilyRebuild, FamilyRow, FamilySplit, SplitPart,
    MAX_SPLIT_VALUES,
};
pub use filter_sql::Condition;
pub use items::{ItemIter, ItemSummary, JobItem, ListFilter, Page, PageCursor, SummaryIter};
pub use items::{MarkRequest, Marked, SortBy};
pub use jobs::{CapacityInfo, JobInfo, JobOptions, JobSpan, RemovedJob};
pub use leases::{RunCounts, RunInfo, RunStatus, Succeeded};
pub(crate) use load::legacy_adoption_key;
pub use load::{LoadOptions, Loaded, Loader};
pub use log_retention::{EventsRetentionChange, EventsTrimReport, Trimmed, MIN_EVENTS_MAX_AGE};
pub use metrics::{ErrorTypeCount, JobCounts, MetricsSnapshot, RunStatusCount, FAMILY_SERIES};
pub use open::OpenOptions;
pub use retention::{
    scope_text, PolicyOutcome, PolicyStatus, RetentionChange, RetentionPolicy, RetentionReport,
};
pub use selection::{ActionReport, Selection, Target, MAX_NAMED_ITEMS};
pub use space::{Space, VacuumReport};
pub use sql::SqlValue;
pub use stats::{Stats, StatsHead, StatsPart};
pub use take::{ReadItem, TakeOptions, TakenItem};
pub use write::{AddOutcome, AddReport, CapacityRaised, EvictedItem, WriteTx};

use crate::db::{self, DbPool};
use crate::error::Result;
use crate::time::Timestamp;
use rusqlite::TransactionBehavior;
use serde::Serialize;
pub use sql::Backend;
use std::path::Path;
use std::sync::Arc;

/// Where the current time comes from (tests inject a fixed clock).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// A handle on one dead-letter database. Cheap to clone and safe to share
/// across threads: clones share one connection pool.
#[derive(Clone)]
pub struct Dlq {
    pool: Pools,
    path: Option<Arc<Path>>,
    clock: Clock,
    /// "Now" for age selection only (purge cutoffs, `now` in filters), when
    /// it is not the real time: see [`Dlq::with_clock`].
    age_clock: Option<Clock>,
    /// Writers of this process take turns here before asking SQLite for the
    /// write lock (see [`db::WriteTurn`]).
    write_turn: Arc<db::WriteTurn>,
    /// Adds waiting to be committed together (group.rs).
    committer: Arc<group::Committer>,
    /// How long an add waits for the lock unless it says otherwise.
    busy: std::time::Duration,
    /// Checkpoints the WAL off the write path while any clone lives.
    checkpointer: Option<Arc<db::Checkpointer>>,
    /// Read as an unchanging file (see [`Dlq::is_snapshot`]).
    immutable: bool,
    /// The families this process has mined (families.rs), shared by
    /// its clones.
    families: Arc<std::sync::Mutex<families::Cache>>,
}

impl std::fmt::Debug for Dlq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dlq").field("path", &self.path).finish()
    }
}

/// Facts about the database file (`dlq db`).
#[derive(Clone, Debug, Serialize)]
pub struct DbInfo {
    pub path: Option<String>,
    pub schema_version: Option<i64>,
    pub supported_schema_version: i64,
    pub jobs: i64,
    pub items: i64,
    pub failure_history: i64,
    pub worktree_artifacts: i64,
    pub events: i64,
    pub size_bytes: i64,
}

impl Dlq {
    /// Opens (creating and migrating as needed) the database at `path`, with
    /// the default [`OpenOptions`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        OpenOptions::new().open(path)
    }

    /// Opens the database at `path`, which must exist (see
    /// [`OpenOptions::open_existing`]).
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self> {
        OpenOptions::new().open_existing(path)
    }

    /// A fresh database in memory (tests, dry runs, embedding).
    pub fn open_in_memory() -> Result<Self> {
        Ok(Dlq::in_memory(db::open_memory_pool(None)?))
    }

    /// An in-memory copy of the database at `path`: changes are never written
    /// back. This is how `--dry-run` works.
    ///
    /// On PostgreSQL (`path` a URL) nothing is copied: the handle is one
    /// connection in one transaction that is rolled back when the handle
    /// drops, and each write runs in a savepoint of it. Its writes take
    /// the row locks real ones would (the jobs they add to) and hold them
    /// until then; it publishes no events. A database without dlq's
    /// schema yet is an empty SQLite copy in memory, as a missing file is.
    pub fn open_scratch_copy(path: impl AsRef<Path>) -> Result<Self> {
        OpenOptions::new().open_scratch_copy(path)
    }

    /// [`Dlq::open_scratch_copy`] with `options`' busy timeout (on
    /// PostgreSQL, how long the dry run waits for a row lock).
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub(super) fn scratch_copy_with(options: &OpenOptions, path: &Path) -> Result<Self> {
        if let Some(target) = path.to_str() {
            db::refuse_lookalike(target)?;
        }
        #[cfg(feature = "postgres")]
        if let Some(url) = path.to_str().filter(|p| db::is_url(p)) {
            return match options.clone().create(false).open_postgres_with(url, true) {
                Err(e) if e.kind() == crate::error::ErrorKind::NotFound => Dlq::open_in_memory(),
                opened => opened,
            };
        }
        let from = path.exists().then_some(path);
        Ok(Dlq::in_memory(db::open_memory_pool(from)?))
    }

    /// A handle on an in-memory pool: no file, so no path and no
    /// checkpointer.
    fn in_memory(pool: DbPool) -> Self {
        Dlq {
            pool: Pools::Sqlite(pool),
            path: None,
            clock: Arc::new(Timestamp::now),
            age_clock: None,
            write_turn: Arc::default(),
            committer: Arc::default(),
            busy: db::DEFAULT_BUSY_TIMEOUT,
            checkpointer: None,
            immutable: false,
            families: Arc::default(),
        }
    }

    /// Whether this handle reads the database as a file nothing changes: a
    /// read-only database in a directory where SQLite cannot make its
    /// shared-memory file is opened `immutable`, and then sees what the
    /// file held when it was opened, but nothing committed later (nor what
    /// a WAL beside it holds). Fine for one query; a follower (`dlq watch`)
    /// cannot work on it.
    pub fn is_snapshot(&self) -> bool {
        self.immutable
    }

    /// Whether this handle can only read (opened read-only, or a file or
    /// directory this process cannot write).
    pub fn is_read_only(&self) -> Result<bool> {
        match &self.pool {
            Pools::Sqlite(_) => Ok(self.immutable || self.conn()?.is_readonly(rusqlite::MAIN_DB)?),
            #[cfg(feature = "postgres")]
            Pools::Postgres { read_only, .. } => Ok(*read_only),
        }
    }

    /// Which backend holds this database.
    pub fn backend(&self) -> Backend {
        match &self.pool {
            Pools::Sqlite(_) => Backend::Sqlite,
            #[cfg(feature = "postgres")]
            Pools::Postgres { .. } => Backend::Postgres,
        }
    }

    /// The same handle with another "now" for age selection: purge
    /// cutoffs and `now` in filters. Leases, heartbeats, attempt times and
    /// events keep the real clock, so a fixed or future "now" can never take
    /// items another run holds on a live lease, or stamp the audit log.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.age_clock = Some(clock);
        self
    }

    /// The database file, or `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The current time (the real clock).
    pub fn now(&self) -> Timestamp {
        (self.clock)()
    }

    /// "Now" for age selection (see [`Dlq::with_clock`]).
    pub fn age_now(&self) -> Timestamp {
        match &self.age_clock {
            Some(clock) => clock(),
            None => self.now(),
        }
    }

    /// Facts about the database.
    pub fn db_info(&self) -> Result<DbInfo> {
        let path = self.path().map(|p| match self.backend() {
            // A URL is shown without its password.
            Backend::Postgres => crate::db::redacted_url(&p.to_string_lossy()),
            Backend::Sqlite => p.display().to_string(),
        });
        let supported_schema_version = match self.backend() {
            Backend::Sqlite => crate::db::supported_schema_version(),
            #[cfg(feature = "postgres")]
            Backend::Postgres => crate::db::postgres::supported_schema_version(),
            #[cfg(not(feature = "postgres"))]
            Backend::Postgres => 0,
        };
        self.read(|conn| {
            let count = |table: &str| -> Result<i64> {
                // Table names come from the fixed list below, never from input.
                Ok(conn
                    .row(&format!("SELECT COUNT(*) FROM {table}"), &[], |row| {
                        row.i64(0)
                    })?
                    .unwrap_or(0))
            };
            let size_bytes = match conn.backend() {
                Backend::Sqlite => {
                    let sqlite = conn.sqlite("the database size")?;
                    let page_count: i64 =
                        sqlite.query_row("PRAGMA page_count", [], |row| row.get(0))?;
                    let page_size: i64 =
                        sqlite.query_row("PRAGMA page_size", [], |row| row.get(0))?;
                    page_count * page_size
                }
                Backend::Postgres => conn
                    .row("SELECT pg_database_size(current_database())", &[], |row| {
                        row.i64(0)
                    })?
                    .unwrap_or(0),
            };
            Ok(DbInfo {
                path,
                schema_version: schema_version(conn)?,
                supported_schema_version,
                jobs: count("jobs")?,
                items: count("items")?,
                failure_history: count("failure_history")?,
                worktree_artifacts: count("worktree_artifacts")?,
                events: count("events")?,
                size_bytes,
            })
        })
    }

    /// Runs `f` in one write transaction (BEGIN IMMEDIATE) and commits it when
    /// `f` returns Ok; any error rolls everything back.
    pub fn write<T>(&self, f: impl FnOnce(&mut WriteTx<'_>) -> Result<T>) -> Result<T> {
        self.write_with(true, None, f)
    }

    /// [`Dlq::write`] that waits for the lock (this process's turn, then
    /// SQLite's) only until `deadline`, failing with
    /// [`crate::ErrorKind::Busy`] after it.
    pub(super) fn write_until<T>(
        &self,
        deadline: Option<std::time::Instant>,
        f: impl FnOnce(&mut WriteTx<'_>) -> Result<T>,
    ) -> Result<T> {
        self.write_with(true, deadline, f)
    }

    /// [`Dlq::write`] with SQLite's foreign key actions off, for deletes
    /// that remove the children of the items themselves (bulk.rs): the
    /// cascade would look up every deleted item's history and artifacts
    /// once more and find nothing (measured: 2 s of a 500,000-item purge).
    pub(super) fn write_bulk<T>(&self, f: impl FnOnce(&mut WriteTx<'_>) -> Result<T>) -> Result<T> {
        self.write_with(false, None, f)
    }

    fn write_with<T>(
        &self,
        foreign_keys: bool,
        deadline: Option<std::time::Instant>,
        f: impl FnOnce(&mut WriteTx<'_>) -> Result<T>,
    ) -> Result<T> {
        #[cfg(feature = "postgres")]
        if let Pools::Postgres {
            pool,
            read_only,
            scratch,
        } = &self.pool
        {
            return self.write_postgres(pool, *read_only, *scratch, deadline, f);
        }
        // A writer that panicked left nothing half-done: its transaction
        // rolled back when its connection went back to the pool.
        let _turn = match deadline {
            None => self.write_turn.take(),
            Some(deadline) => self
                .write_turn
                .take_until(deadline)
                .ok_or_else(|| self.timed_out())?,
        };
        let mut conn = match deadline {
            None => self.conn()?,
            Some(deadline) => self.conn_until(deadline)?,
        };
        if !foreign_keys {
            // A no-op inside a transaction, so it is set before BEGIN and
            // set back after COMMIT or ROLLBACK, before the connection goes
            // back to the pool.
            conn.pragma_update(None, "foreign_keys", "OFF")?;
        }
        if let Some(deadline) = deadline {
            // Another process's lock is waited for until the deadline too
            // (set back with foreign keys below).
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            conn.busy_timeout(db::clamp_timeout(left))?;
        }
        // A panic in `f` unwinds through the transaction (rolling it back)
        // and is caught here only so that foreign keys are on again before
        // the connection goes back to the pool; then it carries on.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // A count left by a commit that did not come through here
            // would be stale by the time it was handed over.
            let _ = db::take_wal_frames();
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = {
                let mut writer = WriteTx::new(sql::Conn::Sqlite(&tx), self.now(), &self.families)?;
                let value = f(&mut writer)?;
                writer.settle_evictions()?;
                writer.flush_counts()?;
                writer.flush_families()?;
                value
            };
            tx.commit()?;
            families::committed(&self.families);
            if let (Some(checkpointer), Some(frames)) = (&self.checkpointer, db::take_wal_frames())
            {
                checkpointer.note_commit(frames);
            }
            Ok(value)
        }));
        let restored = if foreign_keys {
            Ok(())
        } else {
            conn.pragma_update(None, "foreign_keys", "ON")
        }
        .and_then(|()| match deadline {
            Some(_) => conn.busy_timeout(db::clamp_timeout(self.busy)),
            None => Ok(()),
        });
        match result {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(result) => {
                restored?;
                result
            }
        }
    }

    /// Whether two connections can be out at once (not for an in-memory
    /// database, whose pool holds its only connection): the parallel
    /// readers in analysis.rs run their halves one after the other then.
    fn parallel_reads(&self) -> bool {
        match &self.pool {
            Pools::Sqlite(pool) => pool.max_size() > 1,
            #[cfg(feature = "postgres")]
            Pools::Postgres { scratch, .. } => !scratch,
        }
    }

    /// The SQLite pool; on PostgreSQL, [`crate::Error::Unsupported`] (the
    /// operations still written for SQLite alone come through here).
    fn sqlite_pool(&self) -> Result<&DbPool> {
        match &self.pool {
            Pools::Sqlite(pool) => Ok(pool),
            #[cfg(feature = "postgres")]
            Pools::Postgres { .. } => Err(crate::error::Error::unsupported(
                unported_operation(),
                Backend::Postgres.name(),
            )),
        }
    }

    fn conn(&self) -> Result<Conn> {
        let pool = self.sqlite_pool()?;
        // Entered first, so a pool timeout names the database too.
        let scope = crate::error::DbScope::enter(self.path.as_ref());
        Ok(Conn {
            inner: pool.get()?,
            _scope: scope,
        })
    }

    /// Runs `f` on a connection of either backend, outside any write
    /// transaction (reads: on PostgreSQL in a READ ONLY transaction, so
    /// what `f` reads is one snapshot).
    pub(crate) fn read<T>(&self, f: impl FnOnce(sql::Conn<'_>) -> Result<T>) -> Result<T> {
        match &self.pool {
            Pools::Sqlite(_) => {
                let conn = self.conn()?;
                let read = conn.unchecked_transaction()?;
                let value = budget::bounded(&read, || f(sql::Conn::Sqlite(&read)))?;
                read.commit()?;
                Ok(value)
            }
            #[cfg(feature = "postgres")]
            Pools::Postgres { pool, scratch, .. } => {
                let _scope = crate::error::DbScope::enter(self.path.as_ref());
                let mut client = pool.get()?;
                let tx = PgTx::new(*scratch, "dlq_read");
                client
                    .client
                    .batch_execute(tx.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"))?;
                let cell = std::cell::RefCell::new(client);
                let result = f(sql::Conn::Postgres(&cell));
                let mut client = cell.into_inner();
                let end = client.client.batch_execute(if result.is_ok() {
                    tx.commit()
                } else {
                    tx.rollback()
                });
                let value = result?;
                end?;
                Ok(value)
            }
        }
    }

    /// [`Dlq::write_with`] on PostgreSQL: one transaction (READ COMMITTED;
    /// adds to one job take turns on its `jobs` row, which the first
    /// statement of an add locks), committed when `f` returns Ok.
    #[cfg(feature = "postgres")]
    fn write_postgres<T>(
        &self,
        pool: &db::postgres::PgPool,
        read_only: bool,
        scratch: bool,
        deadline: Option<std::time::Instant>,
        f: impl FnOnce(&mut WriteTx<'_>) -> Result<T>,
    ) -> Result<T> {
        if read_only {
            return Err(crate::error::Error::ReadOnly {
                path: self
                    .path
                    .as_deref()
                    .map(Path::to_path_buf)
                    .unwrap_or_default(),
                reason: "the handle was opened read-only".into(),
            });
        }
        let _scope = crate::error::DbScope::enter(self.path.as_ref());
        let client = match deadline {
            None => pool.get()?,
            Some(deadline) => pool.get_timeout(
                deadline
                    .saturating_duration_since(std::time::Instant::now())
                    .max(POOL_FLOOR),
            )?,
        };
        let tx = PgTx::new(scratch, "dlq_write");
        let cell = std::cell::RefCell::new(client);
        cell.borrow_mut().client.batch_execute(tx.begin("BEGIN"))?;
        // A panic in `f` must not hand the connection back to the pool in
        // the middle of this transaction.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if let Some(deadline) = deadline {
                // The call's deadline bounds its lock waits too (the
                // connection's lock_timeout is the handle's busy timeout).
                // At least 1 ms: 0 would mean "wait forever".
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                let ms = left.as_millis().clamp(1, i32::MAX as u128);
                cell.borrow_mut()
                    .client
                    .batch_execute(&format!("SET LOCAL lock_timeout = {ms}"))?;
            }
            let mut writer = WriteTx::new(sql::Conn::Postgres(&cell), self.now(), &self.families)?;
            let value = f(&mut writer)?;
            writer.settle_evictions()?;
            writer.flush_counts()?;
            writer.flush_families()?;
            if !scratch {
                // A scratch transaction is never committed: its events
                // stay staged (and its writes would otherwise hold the
                // events lock, and so every writer's commit, until the
                // end of the dry run).
                writer.publish_events()?;
            }
            Ok(value)
        }));
        let mut client = cell.into_inner();
        match result {
            Ok(Ok(value)) => {
                client.client.batch_execute(tx.commit())?;
                if !scratch {
                    families::committed(&self.families);
                }
                Ok(value)
            }
            Ok(Err(error)) => {
                client.client.batch_execute(tx.rollback())?;
                Err(error)
            }
            Err(panic) => {
                let _ = client.client.batch_execute(tx.rollback());
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// [`Dlq::conn`] that waits for a free connection only until
    /// `deadline` (then [`crate::ErrorKind::Busy`]).
    fn conn_until(&self, deadline: std::time::Instant) -> Result<Conn> {
        let scope = crate::error::DbScope::enter(self.path.as_ref());
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        Ok(Conn {
            // Opening a connection is not waiting for anyone: even a zero
            // deadline gets one (a handle with no connection yet has none
            // idle).
            inner: self
                .sqlite_pool()?
                .get_timeout(db::clamp_timeout(left).max(POOL_FLOOR))?,
            _scope: scope,
        })
    }
}

/// The statements that begin and end one read or write on PostgreSQL: a
/// transaction, or on a scratch handle (whose one connection is inside a
/// transaction that is never committed) a savepoint in it.
#[cfg(feature = "postgres")]
struct PgTx {
    begin: String,
    commit: String,
    rollback: String,
    scratch: bool,
}

#[cfg(feature = "postgres")]
impl PgTx {
    fn new(scratch: bool, savepoint: &str) -> Self {
        PgTx {
            begin: format!("SAVEPOINT {savepoint}"),
            commit: format!("RELEASE SAVEPOINT {savepoint}"),
            rollback: format!("ROLLBACK TO SAVEPOINT {savepoint}; RELEASE SAVEPOINT {savepoint}"),
            scratch,
        }
    }

    fn begin<'a>(&'a self, transaction: &'a str) -> &'a str {
        if self.scratch {
            &self.begin
        } else {
            transaction
        }
    }

    fn commit(&self) -> &str {
        if self.scratch {
            &self.commit
        } else {
            "COMMIT"
        }
    }

    fn rollback(&self) -> &str {
        if self.scratch {
            &self.rollback
        } else {
            "ROLLBACK"
        }
    }
}

/// The connection pool of either backend.
#[derive(Clone)]
enum Pools {
    Sqlite(DbPool),
    #[cfg(feature = "postgres")]
    Postgres {
        pool: db::postgres::PgPool,
        read_only: bool,
        /// A dry run's handle: see [`Dlq::open_scratch_copy`].
        scratch: bool,
    },
}

/// What an operation not yet written for PostgreSQL is called in the error
/// it gets there (the command line adds its subcommand's name).
/// The newest migration applied to the database `conn` reads.
fn schema_version(conn: sql::Conn<'_>) -> Result<Option<i64>> {
    match conn.backend() {
        Backend::Sqlite => crate::db::applied_schema_version(conn.sqlite("the schema version")?),
        Backend::Postgres => Ok(conn
            .row(
                "SELECT MAX(CAST(version AS BIGINT)) FROM refinery_schema_history",
                &[],
                |row| row.opt_i64(0),
            )?
            .flatten()),
    }
}

#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
fn unported_operation() -> &'static str {
    "this operation"
}

/// The least an add with a deadline waits for a pooled connection.
const POOL_FLOOR: std::time::Duration = std::time::Duration::from_secs(1);

/// A pooled connection, with this thread's note of which database it is on
/// (so SQLite errors raised while it is held name the file).
pub(crate) struct Conn {
    inner: r2d2::PooledConnection<r2d2_sqlite::SqliteConnectionManager>,
    _scope: crate::error::DbScope,
}

impl std::ops::Deref for Conn {
    type Target = rusqlite::Connection;
    fn deref(&self) -> &rusqlite::Connection {
        &self.inner
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut rusqlite::Connection {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bulk write turns foreign keys off on its connection; a panic in it
    /// must not hand that connection back to the pool that way.
    #[test]
    fn a_panicking_bulk_write_leaves_foreign_keys_on() {
        let dlq = Dlq::open_in_memory().unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = dlq.write_bulk(|_| -> Result<()> { panic!("inside a bulk write") });
        }));
        assert!(panicked.is_err());
        // The in-memory pool has one connection: the one that panicked.
        let on: i64 = dlq
            .conn()
            .unwrap()
            .query_row("PRAGMA foreign_keys", [], |row| row.get(0))
            .unwrap();
        assert_eq!(on, 1);
    }

    /// An add over capacity while the item indexes are suspended evicts
    /// when they are back (it would scan the table for each eviction
    /// otherwise), and the counters agree with a recount.
    #[test]
    fn evictions_wait_for_suspended_indexes() {
        let dlq = Dlq::open_in_memory().unwrap();
        dlq.write(|tx| {
            tx.ensure_job("j", None)?;
            Ok(())
        })
        .unwrap();
        dlq.set_capacity(Some("j"), Some(2)).unwrap();
        let evicted_during = dlq
            .write(|tx| {
                let indexes = tx.suspend_item_indexes()?;
                let mut evicted = 0;
                for n in 0..5 {
                    let item = crate::model::DeadLetteredItem::from_json_str(&format!(
                        r#"{{"item_id": "i{n}", "item_data": {{}}, "first_attempt": "2025-01-0{d}T00:00:00Z",
                            "last_attempt": "2025-01-0{d}T00:00:00Z", "failure_count": 1,
                            "failure_history": [], "error_signature": "s{n}",
                            "worktree_artifacts": null, "reprocess_eligible": true,
                            "manual_review_required": false}}"#,
                        d = n + 1
                    ))?;
                    evicted += tx.add("j", None, &item)?.evicted.len();
                }
                tx.restore(indexes)?;
                Ok(evicted)
            })
            .unwrap();
        assert_eq!(evicted_during, 0);
        let conn = dlq.conn().unwrap();
        let left: Vec<String> = conn
            .prepare("SELECT item_id FROM items ORDER BY item_id")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(left, ["i3", "i4"]);
        let events: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM events WHERE kind = 'evicted'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(events, 3);
        let counted: (i64, i64) = conn
            .query_row(
                "SELECT (SELECT item_count FROM jobs) AS items,
                     (SELECT SUM(item_count) FROM signature_counts) AS signed",
                [],
                |r| Ok((r.get("items")?, r.get("signed")?)),
            )
            .unwrap();
        assert_eq!(counted, (2, 2));
    }
}
