//! The audit log's retention policy (`dlq retention set --events`): how
//! long events are kept (the `events_max_age_seconds` row of `settings`;
//! none, the default, keeps them forever), and trimming the log by it.
//!
//! Trimming removes a *prefix* of the log: every event up to one id, never
//! an event after one it keeps. That is what keeps `dlq watch` exact: a
//! cursor (a file the database does not know) at or after the last id
//! removed misses nothing, and one before it knows that events after it
//! are gone (the `events_trimmed` summary event names that id) instead of
//! skipping them without a word. So the prefix ends before the first event
//! that is younger than the cutoff, and the cutoff is held back:
//!
//! * no max age under [`MIN_EVENTS_MAX_AGE`] (a day) is accepted, so a
//!   watcher down overnight still finds its place;
//! * nor past the start of a retry run still going (not ended, heartbeat
//!   younger than the cutoff): its `retried_*` events, which carry its
//!   run_id, stay while `retry_runs` says it runs;
//! * the newest event is always kept: SQLite hands out the next id as the
//!   largest plus one, so an emptied log would reuse ids a cursor has seen.
//!
//! Ages are read by the real clock, like the times events are stamped
//! with: `--now` (which moves item ages) never trims the log.
//!
//! Deletes go in batches of [`TRIM_BATCH`] events, each its own short
//! transaction, so writers are never held up for long; the last batch
//! writes the one `events_trimmed` event (removed, through_id, cutoff). A
//! dry run counts the same prefix from one snapshot.

use super::sql::{vals, Conn};
use super::{Dlq, EventKind};
use crate::error::{Error, Result};
use crate::time::Timestamp;
use serde::Serialize;

/// The shortest max age the audit log takes: one day.
pub const MIN_EVENTS_MAX_AGE: i64 = 86_400;

/// Events deleted per transaction.
const TRIM_BATCH: i64 = 5_000;

/// The `settings` key of the audit log's max age, in seconds.
const SETTING: &str = "events_max_age_seconds";

/// A change of the audit log's policy: max ages in seconds before and
/// after (`None`: kept forever), and what an apply would now remove.
#[derive(Clone, Debug, Serialize)]
pub struct EventsRetentionChange {
    pub before: Option<i64>,
    pub after: Option<i64>,
    pub would_remove: usize,
}

/// What trimming the audit log did, or (`dry_run`) would do.
#[derive(Clone, Debug, Serialize)]
pub struct EventsTrimReport {
    pub dry_run: bool,
    /// The policy's max age; `None`: no policy, nothing removed.
    pub max_age_seconds: Option<i64>,
    /// Events older than this may go (the max age, held back by running
    /// retry runs).
    pub cutoff: Option<Timestamp>,
    /// The last event id removed (everything up to it is gone).
    pub through_id: Option<i64>,
    pub removed: usize,
}

/// The last trim of the log, from its `events_trimmed` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trimmed {
    /// Every event up to this id was removed.
    pub through_id: i64,
    /// Every event removed was older than this.
    pub cutoff: Option<Timestamp>,
    /// When the trim ran.
    pub time: Timestamp,
}

fn read_max_age(conn: Conn<'_>) -> Result<Option<i64>> {
    let value = conn.row(
        "SELECT value FROM settings WHERE key = ?1",
        vals![SETTING],
        |row| row.text(0),
    )?;
    Ok(value.and_then(|v| v.parse::<i64>().ok()).filter(|s| *s > 0))
}

/// The events a trim at `now` removes: the policy's max age and cutoff
/// (`None`: no policy), and the last id that goes (`None`: nothing goes);
/// every event up to it goes, none after it.
fn plan(conn: Conn<'_>, now: Timestamp) -> Result<(Option<i64>, Option<Timestamp>, Option<i64>)> {
    let Some(max_age) = read_max_age(conn)? else {
        return Ok((None, None, None));
    };
    let mut cutoff = now.minus_seconds(max_age).clamped_to_storage_range();
    // A run still going keeps its events from its start on.
    let running = conn
        .row(
            "SELECT MIN(started_at) FROM retry_runs WHERE ended_at IS NULL AND heartbeat_at >= ?1",
            vals![cutoff],
            |row| row.opt_ts(0),
        )?
        .flatten();
    if let Some(started) = running {
        cutoff = cutoff.min(started);
    }
    let last = conn
        .row("SELECT MAX(id) FROM events", &[], |row| row.opt_i64(0))?
        .flatten();
    let Some(last) = last else {
        return Ok((Some(max_age), Some(cutoff), None));
    };
    // Walks the primary key from the oldest event; stops at the first
    // young one (the events before it are the ones removed anyway).
    let first_young = conn
        .row(
            "SELECT id FROM events WHERE time >= ?1 ORDER BY id LIMIT 1",
            vals![cutoff],
            |row| row.i64(0),
        )?
        .unwrap_or(last);
    // The last id that goes is one that exists (PostgreSQL's ids have
    // gaps): a watcher at it missed nothing, and is told so.
    let through = conn
        .row(
            "SELECT MAX(id) FROM events WHERE id < ?1",
            vals![first_young.min(last)],
            |row| row.opt_i64(0),
        )?
        .flatten();
    Ok((Some(max_age), Some(cutoff), through))
}

fn count_through(conn: Conn<'_>, through: Option<i64>) -> Result<usize> {
    let Some(through) = through else {
        return Ok(0);
    };
    let n = conn
        .row(
            "SELECT COUNT(*) FROM events WHERE id <= ?1",
            vals![through],
            |row| row.i64(0),
        )?
        .unwrap_or(0);
    Ok(usize::try_from(n).unwrap_or(0))
}

impl Dlq {
    /// The audit log's max age in seconds; `None` keeps it forever.
    pub fn events_retention(&self) -> Result<Option<i64>> {
        self.read(read_max_age)
    }

    /// Sets the audit log's max age (`None`: keep forever, the default),
    /// at least [`MIN_EVENTS_MAX_AGE`], with a `retention_set` event
    /// (`"scope": "events"`) when it changes.
    pub fn set_events_retention(
        &self,
        max_age_seconds: Option<i64>,
    ) -> Result<EventsRetentionChange> {
        if let Some(seconds) = max_age_seconds.filter(|s| *s < MIN_EVENTS_MAX_AGE) {
            return Err(Error::invalid_argument(
                "events max age",
                format!(
                    "{seconds} seconds: the audit log is kept at least a day ({MIN_EVENTS_MAX_AGE} seconds), \
                     so a watcher stopped overnight still finds its place"
                ),
            ));
        }
        let before = self.write(|tx| {
            let conn = tx.sql();
            let before = read_max_age(conn)?;
            if before == max_age_seconds {
                return Ok(before);
            }
            conn.exec("DELETE FROM settings WHERE key = ?1", vals![SETTING])?;
            if let Some(seconds) = max_age_seconds {
                let text = seconds.to_string();
                conn.exec(
                    "INSERT INTO settings (key, value) VALUES (?1, ?2)",
                    vals![SETTING, text.as_str()],
                )?;
            }
            tx.event(
                EventKind::RetentionSet,
                None,
                None,
                serde_json::json!({
                    "scope": "events",
                    "before": before.map(|s| serde_json::json!({"max_age_seconds": s})),
                    "after": max_age_seconds.map(|s| serde_json::json!({"max_age_seconds": s})),
                }),
            )?;
            Ok(before)
        })?;
        let preview = self.trim_events(true)?;
        Ok(EventsRetentionChange {
            before,
            after: max_age_seconds,
            would_remove: preview.removed,
        })
    }

    /// Removes the events older than the audit log's max age (see the
    /// module docs for what is kept), in batches, with one
    /// `events_trimmed` event when any went. With `dry_run`, counts them
    /// and changes nothing.
    pub fn trim_events(&self, dry_run: bool) -> Result<EventsTrimReport> {
        let now = self.now();
        // The plan (and a dry run's count) from one snapshot.
        let (max_age_seconds, cutoff, through, counted) = self.read(|conn| {
            let (max_age, cutoff, through) = plan(conn, now)?;
            let counted = if dry_run {
                count_through(conn, through)?
            } else {
                0
            };
            Ok((max_age, cutoff, through, counted))
        })?;
        let report = |removed| EventsTrimReport {
            dry_run,
            max_age_seconds,
            cutoff,
            through_id: through.filter(|_| removed > 0),
            removed,
        };
        if dry_run {
            return Ok(report(counted));
        }
        let Some(through) = through else {
            return Ok(report(0));
        };
        let mut removed = 0usize;
        loop {
            let (batch, done) = self.write(|tx| {
                let batch = tx.sql().exec(
                    "DELETE FROM events WHERE id IN
                         (SELECT id FROM events WHERE id <= ?1 ORDER BY id LIMIT ?2)",
                    vals![through, TRIM_BATCH],
                )?;
                let done = i64::try_from(batch).unwrap_or(i64::MAX) < TRIM_BATCH;
                let total = removed + batch;
                if done && total > 0 {
                    tx.event(
                        EventKind::EventsTrimmed,
                        None,
                        None,
                        serde_json::json!({
                            "removed": total,
                            "through_id": through,
                            "cutoff": cutoff,
                            "max_age_seconds": max_age_seconds,
                        }),
                    )?;
                }
                Ok((batch, done))
            })?;
            removed += batch;
            if done {
                break;
            }
        }
        if removed > 0 {
            self.release_free_pages();
        }
        Ok(report(removed))
    }

    /// The last trim of the audit log, if it was ever trimmed: read from
    /// the newest `events_trimmed` event (a trim never removes the event
    /// of the one before without writing its own).
    pub fn last_trim(&self) -> Result<Option<Trimmed>> {
        let Some(event) = self
            .events(None, Some(EventKind::EventsTrimmed), 1)?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        let Some(through_id) = event.detail["through_id"].as_i64() else {
            return Ok(None);
        };
        let cutoff = event.detail["cutoff"]
            .as_str()
            .and_then(|text| Timestamp::parse(text).ok());
        Ok(Some(Trimmed {
            through_id,
            cutoff,
            time: event.time,
        }))
    }
}
