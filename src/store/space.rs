//! Disk space of a SQLite database: how much of the file is free pages
//! ([`Dlq::space`]), giving it back to the file system at once
//! ([`Dlq::vacuum`], `dlq db --vacuum`), and as deletes go (new databases
//! are made with `auto_vacuum = INCREMENTAL`, see `db.rs`; after a big
//! delete, [`Dlq::release_free_pages`] runs `PRAGMA incremental_vacuum`).
//!
//! Deleting rows leaves their pages on SQLite's free list: the file keeps
//! its size until a VACUUM rewrites it, or, in incremental mode, until the
//! free pages are cut from its end. On PostgreSQL the server reclaims space
//! (autovacuum); nothing here runs there.

use super::Dlq;
use crate::error::Result;
use serde::Serialize;

/// The pages of a SQLite database file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Space {
    pub page_size: i64,
    pub page_count: i64,
    /// Pages on the free list: space the file holds and no row uses.
    pub freelist_count: i64,
    /// 0 none, 1 full, 2 incremental (SQLite's `PRAGMA auto_vacuum`).
    pub auto_vacuum: i64,
}

impl Space {
    /// The database's size: pages times page size (the file's, once the
    /// WAL is checkpointed).
    pub fn bytes(&self) -> i64 {
        self.page_count * self.page_size
    }

    /// What the free pages take.
    pub fn free_bytes(&self) -> i64 {
        self.freelist_count * self.page_size
    }
}

/// What `dlq db --vacuum` did.
#[derive(Clone, Debug, Serialize)]
pub struct VacuumReport {
    pub before: Space,
    pub after: Space,
    /// Whether the WAL was checkpointed and cut back after it, so the
    /// file is at its new size now (otherwise after the next checkpoint,
    /// once readers that still see the old pages are gone).
    pub checkpointed: bool,
}

fn space_of(conn: &rusqlite::Connection) -> Result<Space> {
    let pragma = |name: &str| -> Result<i64> {
        // The names are the fixed ones below, never input.
        Ok(conn.query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))?)
    };
    Ok(Space {
        page_size: pragma("page_size")?,
        page_count: pragma("page_count")?,
        freelist_count: pragma("freelist_count")?,
        auto_vacuum: pragma("auto_vacuum")?,
    })
}

impl Dlq {
    /// The database's pages (SQLite; [`crate::Error::Unsupported`] on
    /// PostgreSQL).
    pub fn space(&self) -> Result<Space> {
        self.read(|conn| space_of(conn.sqlite("page counts")?))
    }

    /// Rewrites the database without its free pages (SQLite's VACUUM),
    /// switching it to incremental auto-vacuum on the way (VACUUM is the
    /// one time an existing database can switch), then checkpoints the
    /// WAL so the file shrinks. Takes the write lock like any write: busy
    /// past the busy timeout ([`crate::ErrorKind::Busy`]) when another
    /// process holds it, and nothing changed then. Needs room for two
    /// copies of the database while it runs (a temporary one, then the
    /// WAL).
    pub fn vacuum(&self) -> Result<VacuumReport> {
        let _turn = self.write_turn.take();
        let conn = self.conn()?;
        let before = space_of(&conn)?;
        // Takes effect with the VACUUM below (a no-op when already set).
        conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL")?;
        conn.execute_batch("VACUUM")?;
        // The rewritten pages are in the WAL; TRUNCATE copies them back and
        // cuts the file (busy = 1 when a reader still needs the old ones).
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))?;
        let after = space_of(&conn)?;
        Ok(VacuumReport {
            before,
            after,
            checkpointed: busy == 0,
        })
    }

    /// After a big delete: in a database with incremental auto-vacuum,
    /// gives the free pages back to the file system (`PRAGMA
    /// incremental_vacuum`), [`RELEASE_BATCH`] pages per write transaction
    /// so other writers get their turn in between. Elsewhere (PostgreSQL,
    /// an older database until `dlq db --vacuum`) nothing. Best effort: the
    /// delete before it is committed, so a failure here (busy) is not its
    /// failure; the pages stay free and the next call, or a vacuum, takes
    /// them.
    pub(crate) fn release_free_pages(&self) {
        if self.backend() != super::Backend::Sqlite || self.is_snapshot() {
            return;
        }
        let mut left = i64::MAX;
        loop {
            let step = self.write(|tx| {
                let conn = tx.sql().sqlite("incremental vacuum")?;
                let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |row| row.get(0))?;
                let free: i64 = conn.query_row("PRAGMA freelist_count", [], |row| row.get(0))?;
                if mode != 2 || free == 0 {
                    return Ok(0);
                }
                // Stepped to the end: each step frees one page (a single
                // step, as execute_batch takes, would free one page only).
                // (A PRAGMA takes no bound parameter: the count is ours.)
                let mut statement =
                    conn.prepare(&format!("PRAGMA incremental_vacuum({RELEASE_BATCH})"))?;
                let mut rows = statement.query([])?;
                while rows.next()?.is_some() {}
                Ok(free)
            });
            match step {
                // Done, or no progress (never loop on a list that does
                // not shrink).
                Ok(free) if free == 0 || free >= left => return,
                Ok(free) => left = free,
                Err(_) => return,
            }
        }
    }
}

/// Free pages handed back per transaction: 16 MiB of 4 KiB pages, a few
/// milliseconds of writing.
const RELEASE_BATCH: i64 = 4_096;
