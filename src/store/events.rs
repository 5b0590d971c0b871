//! The audit log: the kinds of event dlq writes ([`EventKind`]), and
//! reading the log back ([`Dlq::events`]). Events are written inside each
//! change's own transaction: one at a time by [`super::WriteTx::event`],
//! one per deleted item in a single statement by the set-based deletes
//! (bulk.rs).

use super::Dlq;
use crate::error::Result;
use crate::time::Timestamp;
use rusqlite::params;
use serde::Serialize;

/// The kinds of row dlq writes to `events`, one per change to an item or
/// job (the `kind` column holds [`EventKind::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// A new item was stored.
    Added,
    /// An add merged into the copy already stored.
    Merged,
    /// One item removed by hand.
    Removed,
    /// Removed to keep a job under its capacity.
    Evicted,
    /// Removed by a purge (older than a cutoff).
    Purged,
    /// Removed by clearing its job.
    Cleared,
    /// Brought in from a legacy tree.
    Imported,
    /// Flags set by hand.
    Marked,
    /// A capacity (a job's or the default) was set.
    CapacitySet,
    /// A job was created ahead of its first add.
    JobCreated,
    /// A retry of the item succeeded; the item left the DLQ.
    RetriedOk,
    /// A retry of the item failed again; the attempt was recorded.
    RetriedFailed,
    /// Taken out to run again (requeue).
    Requeued,
    /// A job with no items was removed (`dlq jobs --prune`, `dlq clear
    /// --forget`), with its capacity override.
    JobRemoved,
    /// An error type was put in a failure category (`dlq categories set`).
    CategorySet,
    /// A retention policy was set or removed (`dlq retention`).
    RetentionSet,
}

impl EventKind {
    /// Every kind, in the order the help text lists them.
    pub const ALL: [EventKind; 16] = [
        EventKind::Added,
        EventKind::Merged,
        EventKind::Removed,
        EventKind::Evicted,
        EventKind::Purged,
        EventKind::Cleared,
        EventKind::Imported,
        EventKind::Marked,
        EventKind::CapacitySet,
        EventKind::JobCreated,
        EventKind::RetriedOk,
        EventKind::RetriedFailed,
        EventKind::Requeued,
        EventKind::JobRemoved,
        EventKind::CategorySet,
        EventKind::RetentionSet,
    ];

    /// The name stored in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "added",
            EventKind::Merged => "merged",
            EventKind::Removed => "removed",
            EventKind::Evicted => "evicted",
            EventKind::Purged => "purged",
            EventKind::Cleared => "cleared",
            EventKind::Imported => "imported",
            EventKind::Marked => "marked",
            EventKind::CapacitySet => "capacity_set",
            EventKind::JobCreated => "job_created",
            EventKind::RetriedOk => "retried_ok",
            EventKind::RetriedFailed => "retried_failed",
            EventKind::Requeued => "requeued",
            EventKind::JobRemoved => "job_removed",
            EventKind::CategorySet => "category_set",
            EventKind::RetentionSet => "retention_set",
        }
    }

    /// Every kind's name, comma-separated, in [`EventKind::ALL`]'s order:
    /// what help texts and error messages list, so they cannot drift.
    pub fn names() -> String {
        let names: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
        names.join(", ")
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for EventKind {
    type Err = crate::error::Error;

    /// A kind by its stored name; anything else is an
    /// [`crate::ErrorKind::InvalidInput`] error that lists the kinds.
    fn from_str(name: &str) -> Result<Self> {
        EventKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
            .ok_or_else(|| {
                crate::error::Error::invalid_argument(
                    "event kind",
                    format!(
                        "unknown kind {name:?}; the kinds are {}",
                        EventKind::names()
                    ),
                )
            })
    }
}

impl rusqlite::ToSql for EventKind {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

/// One row of `events`.
#[derive(Clone, Debug, Serialize)]
pub struct Event {
    pub id: i64,
    pub time: Timestamp,
    pub kind: String,
    pub job_id: Option<String>,
    pub item_id: Option<String>,
    pub detail: serde_json::Value,
}

impl Dlq {
    /// The newest `limit` events, newest first, optionally of one job and/or
    /// one kind.
    pub fn events(
        &self,
        job_id: Option<&str>,
        kind: Option<EventKind>,
        limit: usize,
    ) -> Result<Vec<Event>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT id, time, kind, job_id, item_id, detail FROM events
             WHERE (?1 IS NULL OR job_id = ?1) AND (?2 IS NULL OR kind = ?2)
             ORDER BY id DESC LIMIT ?3",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let events = stmt
            .query_map(params![job_id, kind, limit], |row| {
                let detail: Option<String> = row.get("detail")?;
                Ok(Event {
                    id: row.get("id")?,
                    time: row.get("time")?,
                    kind: row.get("kind")?,
                    job_id: row.get("job_id")?,
                    item_id: row.get("item_id")?,
                    detail: detail
                        .and_then(|text| serde_json::from_str(&text).ok())
                        .unwrap_or(serde_json::Value::Null),
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(events)
    }
}
