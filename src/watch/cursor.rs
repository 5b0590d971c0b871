//! A follower's place in the audit log, kept in a file between runs (`dlq
//! watch --since-cursor`): the last event handled, the time of that event
//! and the database it was kept for. Events are never rewritten, so a
//! database whose event of that id has another time, or none, is not the
//! one the cursor was kept for, and a cursor that falls in the part of the
//! log retention trimmed stops the follower instead of skipping what it
//! never saw. The file is written atomically (0600, never through a link)
//! and read without following one.

use crate::error::{Error, Result};
use crate::store::Backend;
use crate::time::Timestamp;
use crate::Dlq;
use std::path::{Path, PathBuf};

/// A cursor file, and the event it holds.
#[derive(Debug)]
pub struct Cursor {
    path: PathBuf,
    saved: i64,
    database: String,
}

/// Something a follower should tell a person while it opens its place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// Starting at the start of a log that retention trimmed: the start is
    /// after the last event trimmed, not the first event ever written.
    StartsAfterTrim { through_id: i64 },
    /// The cursor's own event was the last one retention trimmed: nothing
    /// after it was, and the follower goes on.
    CursorEventTrimmed {
        event_id: i64,
        trimmed_at: Timestamp,
    },
}

/// Where a follower starts at the start of the log: before the first
/// event, or after the last event retention trimmed (with a notice).
pub fn log_start(dlq: &Dlq) -> Result<(i64, Option<Notice>)> {
    Ok(match dlq.last_trim()? {
        None => (0, None),
        Some(trim) => (
            trim.through_id,
            Some(Notice::StartsAfterTrim {
                through_id: trim.through_id,
            }),
        ),
    })
}

fn error(path: &Path, reason: impl Into<String>) -> Error {
    Error::Cursor {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

impl Cursor {
    /// Reads the cursor at `path`, or creates it at the starting point (the
    /// end of the log, or its start with `from_start`) when it is missing.
    /// `database` is what the handle was opened with (a path or a URL).
    pub fn open(
        path: &Path,
        dlq: &Dlq,
        database: &Path,
        from_start: bool,
    ) -> Result<(Cursor, Option<Notice>)> {
        let database = match dlq.backend() {
            // A URL is kept without its password.
            Backend::Postgres => crate::db::redacted_url(&database.to_string_lossy()),
            Backend::Sqlite => std::fs::canonicalize(database)
                .unwrap_or_else(|_| database.to_path_buf())
                .display()
                .to_string(),
        };
        // Everywhere else `-` is stdout; a cursor written there would land
        // between the events it follows.
        if path == Path::new("-") {
            return Err(error(
                path,
                "a cursor is a file dlq reads back, not stdout; name a file",
            ));
        }
        match read_no_follow(path) {
            Ok(text) => {
                let value: serde_json::Value = serde_json::from_str(&text)
                    .ok()
                    .filter(serde_json::Value::is_object)
                    .ok_or_else(|| error(path, "not a dlq watch cursor"))?;
                let id = value["event_id"]
                    .as_i64()
                    .filter(|id| *id >= 0)
                    .ok_or_else(|| error(path, "no event_id"))?;
                let time = value["event_time"].as_str().unwrap_or("");
                let event = match id {
                    0 => None,
                    id => dlq.event(id)?,
                };
                let notice = match event {
                    None => trimmed_past(dlq, path, id, time)?,
                    Some(_) => None,
                };
                if id > 0 && notice.is_none() {
                    let why = match event {
                        None => "is not in this one",
                        Some(e) if e.time.to_storage() != time => "has another time here",
                        Some(_) => "",
                    };
                    if !why.is_empty() {
                        return Err(error(
                            path,
                            format!(
                                "kept for another database ({}): its event {id} {why}; \
                                 remove the file to start afresh",
                                value["database"].as_str().unwrap_or("unknown")
                            ),
                        ));
                    }
                }
                let mut cursor = Cursor {
                    path: path.to_path_buf(),
                    saved: id,
                    database,
                };
                // Written once now, unchanged: a cursor that cannot be
                // written must stop the follower before a hook runs, not
                // after (a restarted service would run that hook again and
                // again).
                cursor.write(dlq, id)?;
                Ok((cursor, notice))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (start, notice) = if from_start {
                    log_start(dlq)?
                } else {
                    (dlq.last_event_id()?, None)
                };
                let mut cursor = Cursor {
                    path: path.to_path_buf(),
                    saved: -1,
                    database,
                };
                cursor.save(dlq, start)?;
                Ok((cursor, notice))
            }
            Err(e) => Err(error(path, io_reason(&e))),
        }
    }

    /// The event the cursor holds: the last one handled.
    pub fn position(&self) -> i64 {
        self.saved
    }

    /// Keeps `id` as the last event handled (written when it moved).
    pub fn save(&mut self, dlq: &Dlq, id: i64) -> Result<()> {
        if id == self.saved {
            return Ok(());
        }
        self.write(dlq, id)
    }

    /// Writes `id` atomically: a temporary file beside it, synced, renamed
    /// over it ([`crate::outfile`]). A directory that is missing or cannot
    /// be written is said as the cursor's error.
    fn write(&mut self, dlq: &Dlq, id: i64) -> Result<()> {
        let time = match id {
            0 => None,
            id => dlq.event(id)?.map(|e| e.time.to_storage()),
        };
        let text = serde_json::json!({
            "event_id": id,
            "event_time": time,
            "database": self.database,
        })
        .to_string()
            + "\n";
        if let Err(e) = crate::outfile::write_file(&self.path, text.as_bytes()) {
            let dir = match self.path.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir,
                _ => Path::new("."),
            };
            if !dir.is_dir() {
                return Err(error(
                    &self.path,
                    format!("directory {} does not exist", dir.display()),
                ));
            }
            let why = match &e {
                Error::Io { source, .. } => io_reason(source),
                other => other.to_string(),
            };
            return Err(error(
                &self.path,
                format!("cannot write in {}: {why}", dir.display()),
            ));
        }
        self.saved = id;
        Ok(())
    }
}

/// Whether a cursor (at event `id`, 0: the start) whose event is missing
/// lies in the part of the log that retention trimmed. A cursor exactly at
/// the last event trimmed missed nothing: a notice (it goes on). One
/// before it would skip what was trimmed after it: an error. Anything else
/// (never trimmed, a cursor past the trim, or one younger than the trim's
/// cutoff) is `None`: the caller decides.
fn trimmed_past(dlq: &Dlq, path: &Path, id: i64, time: &str) -> Result<Option<Notice>> {
    let Some(trim) = dlq.last_trim()? else {
        return Ok(None);
    };
    if id > trim.through_id {
        return Ok(None);
    }
    // Every event a trim removed was older than its cutoff.
    let stamped = Timestamp::parse(time).ok();
    if let (Some(stamped), Some(cutoff)) = (stamped, trim.cutoff) {
        if stamped >= cutoff {
            return Ok(None);
        }
    }
    if id == trim.through_id {
        return Ok(Some(Notice::CursorEventTrimmed {
            event_id: id,
            trimmed_at: trim.time,
        }));
    }
    Err(error(
        path,
        format!(
            "at event {id}, but `dlq retention apply` trimmed the audit log up to event {} \
             ({}): the events after the cursor up to it are gone and cannot be watched; to \
             go on from the oldest event kept, remove the file and run again with \
             --from-start (and keep `dlq retention set --events --max-age` longer than a \
             watcher may be stopped)",
            trim.through_id,
            trim.time.to_storage()
        ),
    ))
}

/// An I/O error for people, without "(os error N)".
fn io_reason(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(end) => text[..end].to_string(),
        None => text,
    }
}

/// A file's text, refusing a symbolic link (a cursor is dlq's own file)
/// and anything but a regular file (opened without blocking: a fifo would
/// wait for a writer forever).
fn read_no_follow(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    // Never the database or its -wal or -shm: opening and closing them
    // would drop this process's locks on the database (asked with stat).
    if crate::db::is_opened_database_file(path) {
        return Err(std::io::Error::other(
            "is the database (or its -wal or -shm), not a cursor",
        ));
    }
    let file = crate::infile::open_regular(path, crate::infile::Links::Refuse)?;
    let mut text = String::new();
    file.take(64 * 1024).read_to_string(&mut text)?;
    Ok(text)
}
