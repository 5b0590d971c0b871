//! The WAL checkpointer: a thread per database that keeps the WAL under
//! [`WAL_BOUND_BYTES`] so no commit pays for a checkpoint (see
//! [`Checkpointer`]), and the sizes it acts at.

use super::{lock_ignoring_poison, open_error, sibling, WriteTurn};
use crate::error::{Error, Result};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Past this size the WAL is checkpointed (PASSIVE: copied back into the
/// database without waiting for anyone). Below it, it is left alone: a
/// short-lived `dlq add` then costs one fsync, its commit's.
pub const CHECKPOINT_AT_BYTES: u64 = 4 << 20;
/// Past this size, after that checkpoint, the WAL is reset (RESTART)
/// holding this process's write turn. A checkpoint that runs while
/// writers append never lets the WAL start over (measured: 4,000
/// back-to-back adds with a reader streaming `list()` grew it to 421 MB);
/// holding the turn, the reset copies only what was appended since the
/// PASSIVE one before it, then waits for a moment when no reader is in
/// the middle of a transaction, polling every `RESET_POLL` for at most
/// `RESET_POLLS` polls: the writers of this process wait for a copy, an
/// fsync and at most that, not for SQLite's busy handler (which sleeps
/// 1, 2, 5, 10, ... 100 ms between looks).
pub const RESET_AT_BYTES: u64 = 8 << 20;
/// PASSIVE checkpoints in a row at most, each copying what writers
/// appended during the one before, while more than
/// [`PASSIVE_AGAIN_BYTES`] is left: the reset that follows them holds the
/// writers for what is left (measured under a steady 8-thread add load,
/// no reader: the reset held them 3.7 ms after one PASSIVE, 2.1 ms after
/// these).
const PASSIVE_ROUNDS: usize = 8;
/// See [`PASSIVE_ROUNDS`].
const PASSIVE_AGAIN_BYTES: u64 = 128 << 10;
/// How often a reset looks for a moment without readers.
const RESET_POLL: Duration = Duration::from_micros(500);
/// How many times a reset looks before it gives up until a later look.
const RESET_POLLS: i32 = 40;
/// Past this size the bound comes before the writers' latency: the reset
/// is tried at every look and waits up to `URGENT_RESET_POLLS` polls
/// for readers (measured on a loaded machine, with a reader streaming
/// `list()` and slowed by other work: 20 ms windows kept missing and the
/// WAL reached 82 MB).
pub const URGENT_AT_BYTES: u64 = 24 << 20;
/// See [`URGENT_AT_BYTES`]: 250 ms.
const URGENT_RESET_POLLS: i32 = 500;

thread_local! {
    /// How many polls the checkpointer's busy handler makes (it is a plain
    /// function, and runs on the checkpointer's own thread).
    static POLL_LIMIT: std::cell::Cell<i32> = const { std::cell::Cell::new(RESET_POLLS) };
}
/// The WAL stays under this size under any steady write load from one
/// process. The checkpointer looks every [`CHECKPOINT_INTERVAL`] and
/// restarts it past [`RESET_AT_BYTES`], which leaves room for what writers
/// add meanwhile. What no checkpoint can undo: one read transaction held
/// open for long (a reader's snapshot pins the WAL until it ends);
/// dlqlite's own reads page in short transactions.
pub const WAL_BOUND_BYTES: i64 = 64 << 20;
/// How often the checkpointer looks at the WAL's size (one stat call).
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);

/// Checkpoints the WAL from a thread of its own, so that no commit pays for
/// it: PASSIVE past [`CHECKPOINT_AT_BYTES`], a reset (RESTART) past
/// [`RESET_AT_BYTES`] holding the write turn. Stops when dropped, with one
/// last look at the WAL.
///
/// How full the WAL is comes from SQLite itself: every commit on a pool
/// connection reports the WAL's frame count (a WAL hook, noted per thread
/// and handed over by the store after its commit, [`Checkpointer::note_commit`]),
/// and every checkpoint returns it. The WAL file's size cannot say it: a
/// restarted WAL is written again from its start and keeps its size. (The
/// `-shm` index holds the count too, but opening and closing that file in
/// this process would drop SQLite's POSIX locks on it: measured, lost
/// commits and SIGBUS in other processes.)
pub(crate) struct Checkpointer {
    shared: std::sync::Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    state: std::sync::Mutex<Looks>,
    wake: std::sync::Condvar,
}

#[derive(Default)]
struct Looks {
    stopped: bool,
    /// Frames in the WAL after the latest commit this process reported.
    frames: u32,
}

thread_local! {
    /// The WAL's frame count after this thread's latest commit (set by the
    /// WAL hook, taken by [`take_wal_frames`]).
    static WAL_FRAMES: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// The WAL hook of every writable pool connection: runs inside each
/// commit, on the committing thread.
pub(crate) fn note_wal_frames(
    _: &rusqlite::hooks::Wal,
    frames: std::ffi::c_int,
) -> rusqlite::Result<()> {
    WAL_FRAMES.set(u32::try_from(frames).ok());
    Ok(())
}

/// The WAL's frame count after this thread's latest commit, if one was
/// reported since the last call.
pub(crate) fn take_wal_frames() -> Option<u32> {
    WAL_FRAMES.take()
}

impl Checkpointer {
    /// Starts checkpointing the database at `path`.
    pub(crate) fn start(path: &Path, write_turn: std::sync::Arc<WriteTurn>) -> Result<Self> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| open_error(path, e))?;
        // Only the reset waits for anything (readers, another process's
        // writer), and it polls: see RESET_AT_BYTES.
        conn.busy_handler(Some(reset_poll))
            .map_err(|e| open_error(path, e))?;
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )
        .map_err(|e| open_error(path, e))?;
        let page_size: u32 = conn
            .query_row("PRAGMA page_size", [], |row| row.get(0))
            .map_err(|e| open_error(path, e))?;
        let shared = std::sync::Arc::new(Shared {
            state: std::sync::Mutex::new(Looks::default()),
            wake: std::sync::Condvar::new(),
        });
        let mut looker = Looker {
            conn,
            wal: sibling(path, "-wal"),
            frame_bytes: u64::from(page_size) + 24,
            write_turn,
            shared: std::sync::Arc::clone(&shared),
            wal_size: 0,
            reset_after: (Instant::now(), Duration::ZERO),
        };
        let thread = std::thread::Builder::new()
            .name("dlq-checkpoint".into())
            .spawn(move || {
                let mut looks = lock_ignoring_poison(&looker.shared.state);
                loop {
                    let (frames, stopped) = (looks.frames, looks.stopped);
                    drop(looks);
                    looker.look(frames, stopped);
                    looks = lock_ignoring_poison(&looker.shared.state);
                    if stopped {
                        return;
                    }
                    looks = match looker.shared.wake.wait_timeout(looks, CHECKPOINT_INTERVAL) {
                        Ok((guard, _)) => guard,
                        Err(poisoned) => poisoned.into_inner().0,
                    };
                }
            })
            .map_err(|e| Error::io(path, e))?;
        Ok(Checkpointer {
            shared,
            thread: Some(thread),
        })
    }

    /// A commit of this process left `frames` frames in the WAL.
    pub(crate) fn note_commit(&self, frames: u32) {
        lock_ignoring_poison(&self.shared.state).frames = frames;
    }
}

/// The checkpointer thread's side.
struct Looker {
    conn: Connection,
    wal: PathBuf,
    /// A WAL frame: a page and its 24-byte header.
    frame_bytes: u64,
    write_turn: std::sync::Arc<WriteTurn>,
    shared: std::sync::Arc<Shared>,
    /// The WAL file's size at the last look.
    wal_size: u64,
    /// No reset before this time; the backoff after failed ones.
    reset_after: (Instant, Duration),
}

impl Looker {
    /// One look at the WAL, and the checkpoint it calls for. `frames`: the
    /// count the latest commit reported. Errors (a vanished file, another
    /// process's checkpoint running) wait for the next look. A reset that
    /// found no moment without readers (or another process's lock) is not
    /// tried again before `reset_after`, which backs off (doubling from
    /// [`CHECKPOINT_INTERVAL`] up to 1 s): this process's writers wait for
    /// each try.
    ///
    /// The reset is a RESTART: the next commit writes the WAL from its
    /// start again, and the file keeps its size (under
    /// [`WAL_BOUND_BYTES`]). A TRUNCATE, which also gives the file back,
    /// held the writers 15-20 ms longer (measured: cutting the file, then
    /// every commit growing it again); only the last look, when no writer
    /// of this handle is left, truncates.
    fn look(&mut self, frames: u32, last_look: bool) {
        let size = std::fs::metadata(&self.wal).map_or(0, |m| m.len());
        // A file that grew holds at least that much (written by paths or
        // processes that did not report): as good a sign as a commit's.
        let grew = if size > self.wal_size { size } else { 0 };
        self.wal_size = size;
        let written = (u64::from(frames) * self.frame_bytes).max(grew);
        let due = written >= CHECKPOINT_AT_BYTES || (last_look && size >= CHECKPOINT_AT_BYTES);
        if !due {
            return;
        }
        // Copy what writers append meanwhile too, while it is worth it,
        // so that the reset under the write turn has little left to copy.
        let mut in_wal = 0;
        for _ in 0..PASSIVE_ROUNDS {
            let Some((log, copied)) = self.checkpoint("PASSIVE") else {
                return;
            };
            in_wal = log;
            // `log` is the WAL as this round began; what commits appended
            // while it ran is what the next round (or the reset) copies.
            let now = u64::from(lock_ignoring_poison(&self.shared.state).frames).max(log);
            if (now - copied) * self.frame_bytes <= PASSIVE_AGAIN_BYTES {
                break;
            }
        }
        if last_look {
            let _turn = self.write_turn.take();
            let _ = self.checkpoint("TRUNCATE");
            return;
        }
        let in_wal = in_wal * self.frame_bytes;
        let urgent = in_wal >= URGENT_AT_BYTES;
        if in_wal < RESET_AT_BYTES || (!urgent && Instant::now() < self.reset_after.0) {
            return;
        }
        let _turn = self.write_turn.take();
        POLL_LIMIT.set(if urgent {
            URGENT_RESET_POLLS
        } else {
            RESET_POLLS
        });
        let restarted = self.checkpoint("RESTART").is_some();
        POLL_LIMIT.set(RESET_POLLS);
        if restarted {
            // No commit of this process can come between the reset and
            // this: they wait for the turn. The next one starts the WAL
            // over and reports a small count.
            lock_ignoring_poison(&self.shared.state).frames = 0;
            self.reset_after = (Instant::now(), Duration::ZERO);
        } else {
            let backoff = (self.reset_after.1 * 2)
                .max(CHECKPOINT_INTERVAL)
                .min(Duration::from_secs(1));
            self.reset_after = (Instant::now() + backoff, backoff);
        }
    }

    /// Runs a checkpoint of `mode`: (frames in the WAL, frames copied into
    /// the database), or `None` when it could not finish (busy, an error).
    fn checkpoint(&self, mode: &str) -> Option<(u64, u64)> {
        let (busy, log, copied): (i64, i64, i64) = self
            .conn
            .query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
                Ok((row.get("busy")?, row.get("log")?, row.get("checkpointed")?))
            })
            .ok()?;
        let log = u64::try_from(log).ok()?;
        let copied = u64::try_from(copied).ok()?.min(log);
        (busy == 0).then_some((log, copied))
    }
}

/// The checkpointer's busy handler: look again every [`RESET_POLL`], up
/// to [`RESET_POLLS`] times (or [`URGENT_RESET_POLLS`]).
fn reset_poll(polls: i32) -> bool {
    if polls >= POLL_LIMIT.get() {
        return false;
    }
    std::thread::sleep(RESET_POLL);
    true
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        lock_ignoring_poison(&self.shared.state).stopped = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
