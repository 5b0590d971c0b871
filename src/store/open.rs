//! How a [`Dlq`] is opened: [`OpenOptions`] (create or open-existing,
//! read-only, busy timeout, pool size, default capacity). Opening reads no
//! environment variable; `dlq` turns `--busy-timeout-ms` (or
//! `DLQ_BUSY_TIMEOUT_MS`) into [`OpenOptions::busy_timeout`].

use super::Dlq;
use crate::db::{self, Setup};
use crate::error::{Error, Result};
use crate::time::Timestamp;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Options for opening a database file, in the style of
/// [`std::fs::OpenOptions`]:
///
/// ```no_run
/// use dlqlite::OpenOptions;
/// use std::time::Duration;
///
/// // Fail instead of creating a database at a mistyped path, and give up
/// // on another writer's lock after 2 seconds.
/// let dlq = OpenOptions::new()
///     .busy_timeout(Duration::from_secs(2))
///     .open_existing("/var/lib/agents/dlq.db")?;
/// # Ok::<(), dlqlite::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct OpenOptions {
    setup: Setup,
    default_capacity: Option<i64>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// Create when missing, read-write, a 30 s busy timeout, up to 8
    /// connections, the capacity already set in the database.
    pub fn new() -> Self {
        OpenOptions {
            setup: Setup::default(),
            default_capacity: None,
        }
    }

    /// Whether a missing file (and its parent directories) is created, as
    /// 0600 (directories 0700). Default true.
    pub fn create(&mut self, create: bool) -> &mut Self {
        self.setup.create = create;
        self
    }

    /// Open read-only: the database must exist and have this build's schema
    /// (a read-only handle cannot migrate it); every write fails with
    /// [`crate::ErrorKind::ReadOnly`]. Reads work on a file or directory
    /// the process cannot write. In a read-only directory without the
    /// database's `-shm` file (which SQLite needs to read a WAL) the file
    /// alone is read, as SQLite's `immutable`: what a `-wal` left beside it
    /// holds is not seen ([`crate::db::unreadable_wal`] tells). A read-write
    /// open of a database that cannot be written fails with
    /// [`crate::Error::ReadOnly`], naming the file or directory. Default
    /// false.
    pub fn read_only(&mut self, read_only: bool) -> &mut Self {
        self.setup.read_only = read_only;
        self
    }

    /// How long a statement waits for another connection's lock before it
    /// fails with [`crate::ErrorKind::Busy`] (at most about 24 days, SQLite's
    /// limit). Default 30 s.
    pub fn busy_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.setup.busy_timeout = timeout;
        self
    }

    /// The most connections the handle (and its clones) hold at once; at
    /// least 1. Default 8.
    pub fn pool_size(&mut self, size: u32) -> &mut Self {
        self.setup.pool_size = size.max(1);
        self
    }

    /// The default capacity of jobs without their own (0 = unlimited). It is
    /// stored in the database, like `dlq capacity --set N`: when it differs
    /// from the stored one, opening sets it, records a `capacity_set` event
    /// and trims jobs over it. Default: leave the stored one.
    pub fn default_capacity(&mut self, max_items: i64) -> &mut Self {
        self.default_capacity = Some(max_items);
        self
    }

    /// Opens the database at `path` with these options.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Dlq> {
        let path = path.as_ref();
        if let Some(n) = self.default_capacity {
            if n < 0 {
                return Err(Error::invalid_argument(
                    "default capacity",
                    format!("{n} is negative (0 means unlimited)"),
                ));
            }
            if self.setup.read_only {
                return Err(Error::invalid_argument(
                    "default capacity",
                    "a read-only handle cannot set it",
                ));
            }
        }
        #[cfg(feature = "postgres")]
        if let Some(url) = path.to_str().filter(|p| db::is_url(p)) {
            return self.open_postgres(url);
        }
        if let Some(target) = path.to_str() {
            db::refuse_lookalike(target)?;
        }
        #[cfg(not(feature = "postgres"))]
        if let Some(url) = path.to_str().filter(|p| db::is_url(p)) {
            return Err(Error::Open {
                path: db::redacted_url(url).into(),
                reason: "this dlq was built without PostgreSQL (cargo feature `postgres`)".into(),
                kind: crate::ErrorKind::Unsupported,
            });
        }
        let (pool, immutable) = db::open_pool(path, self.setup)?;
        let write_turn: Arc<db::WriteTurn> = Arc::default();
        let checkpointer = if self.setup.read_only {
            None
        } else {
            // SQLite follows a symlink and keeps the WAL beside the real
            // file: watch that one.
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            Some(Arc::new(db::Checkpointer::start(
                &real,
                Arc::clone(&write_turn),
            )?))
        };
        let dlq = Dlq {
            pool: super::Pools::Sqlite(pool),
            path: Some(Arc::from(path)),
            clock: Arc::new(Timestamp::now),
            age_clock: None,
            write_turn,
            committer: Arc::default(),
            busy: self.setup.busy_timeout,
            checkpointer,
            immutable,
            families: Arc::default(),
        };
        if let Some(n) = self.default_capacity {
            if dlq.capacity(None)?.default_max_items != n {
                dlq.set_capacity(None, Some(n))?;
            }
        }
        Ok(dlq)
    }

    /// Opens the PostgreSQL database at `url` (creating dlq's schema in it
    /// when it has none yet: the database itself must exist).
    #[cfg(feature = "postgres")]
    fn open_postgres(&self, url: &str) -> Result<Dlq> {
        self.open_postgres_with(url, false)
    }

    /// [`OpenOptions::open_postgres`], or with `scratch` a handle whose
    /// changes are never committed (see [`Dlq::open_scratch_copy`]).
    #[cfg(feature = "postgres")]
    pub(super) fn open_postgres_with(&self, url: &str, scratch: bool) -> Result<Dlq> {
        let pool = db::postgres::open_pool(
            url,
            self.setup.create,
            self.setup.read_only,
            scratch,
            self.setup.busy_timeout,
            self.setup.pool_size,
        )?;
        let redacted = db::redacted_url(url);
        let dlq = Dlq {
            pool: super::Pools::Postgres {
                pool,
                read_only: self.setup.read_only,
                scratch,
            },
            path: Some(Arc::from(Path::new(&redacted))),
            clock: Arc::new(Timestamp::now),
            age_clock: None,
            write_turn: Arc::default(),
            committer: Arc::default(),
            busy: self.setup.busy_timeout,
            checkpointer: None,
            immutable: false,
            families: Arc::default(),
        };
        if let Some(n) = self.default_capacity {
            if dlq.capacity(None)?.default_max_items != n {
                dlq.set_capacity(None, Some(n))?;
            }
        }
        Ok(dlq)
    }

    /// [`Dlq::open_scratch_copy`] with these options' busy timeout (the
    /// other options do not apply to a scratch copy).
    pub fn open_scratch_copy(&self, path: impl AsRef<Path>) -> Result<Dlq> {
        Dlq::scratch_copy_with(self, path.as_ref())
    }

    /// Opens the database at `path`, which must exist: a mistyped path is
    /// an error ([`crate::ErrorKind::NotFound`]), not a new empty database.
    pub fn open_existing(&self, path: impl AsRef<Path>) -> Result<Dlq> {
        self.clone().create(false).open(path)
    }
}
