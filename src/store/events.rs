//! The audit log: the kinds of event dlq writes ([`EventKind`]), and
//! reading the log back ([`Dlq::events`], newest first; [`Dlq::events_after`],
//! oldest first from a position, which `dlq watch` follows). Events are
//! written inside each change's own transaction: one at a time by
//! [`super::WriteTx::event`], one per deleted item in a single statement by
//! the set-based deletes (bulk.rs). Nothing rewrites an event, only the
//! log's retention policy deletes them, and only a prefix of the log
//! (log_retention.rs); writers are serialised by SQLite, so events commit
//! in id order: "the last event id handled" is an exact position in the log.

use super::sql::{vals, Val};
use super::Dlq;
use crate::error::Result;
use crate::time::Timestamp;

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
    /// Old events were trimmed from this log by its retention policy
    /// (`dlq retention apply`): one summary event per apply that removed
    /// any, naming the last id removed.
    EventsTrimmed,
    /// Families were merged by a person (`dlq families merge`): detail
    /// `{"into", "from", "items"}`.
    FamiliesMerged,
    /// A family was split by the values of one of its words (`dlq
    /// families split`): detail `{"family", "position", "parts"}`.
    FamiliesSplit,
    /// Every item's family was mined again (`dlq families rebuild
    /// --all`): detail says how many families kept their id.
    FamiliesRebuilt,
}

impl EventKind {
    /// Every kind, in the order the help text lists them.
    pub const ALL: [EventKind; 20] = [
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
        EventKind::EventsTrimmed,
        EventKind::FamiliesMerged,
        EventKind::FamiliesSplit,
        EventKind::FamiliesRebuilt,
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
            EventKind::EventsTrimmed => "events_trimmed",
            EventKind::FamiliesMerged => "families_merged",
            EventKind::FamiliesSplit => "families_split",
            EventKind::FamiliesRebuilt => "families_rebuilt",
        }
    }

    /// Whether an event of this kind announces a dead letter being stored
    /// (added, merged into, imported): what `dlq watch` prints, when the
    /// event names an item.
    pub fn announces_dead_letter(self) -> bool {
        matches!(
            self,
            EventKind::Added | EventKind::Merged | EventKind::Imported
        )
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

/// Which events [`Dlq::events_page`] lists (empty: all).
#[derive(Clone, Debug, Default)]
pub struct EventQuery {
    pub job_id: Option<String>,
    pub kind: Option<EventKind>,
    pub item_id: Option<String>,
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
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let kind = kind.map(EventKind::as_str);
        self.read(|conn| {
            conn.collect(
                "SELECT id, time, kind, job_id, item_id, detail FROM events
                 WHERE (CAST(?1 AS TEXT) IS NULL OR job_id = ?1)
                     AND (CAST(?2 AS TEXT) IS NULL OR kind = ?2)
                 ORDER BY id DESC LIMIT ?3",
                vals![job_id, kind, limit],
                event_of_row,
            )
        })
    }

    /// One page of the log, newest first: events before the one with id
    /// `before` (from the newest when `None`), optionally of one job, one
    /// kind and one item. The conditions are fixed SQL, so the planner
    /// seeks the item's, the job's or the kind's index; every value is bound.
    pub fn events_page(
        &self,
        query: &EventQuery,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Event>> {
        let mut sql =
            String::from("SELECT id, time, kind, job_id, item_id, detail FROM events WHERE 1 = 1");
        let mut values: Vec<super::sql::SqlValue> = Vec::new();
        if let Some(item) = &query.item_id {
            sql.push_str(" AND item_id = ?");
            values.push(item.clone().into());
        }
        if let Some(job) = &query.job_id {
            sql.push_str(" AND job_id = ?");
            values.push(job.clone().into());
        }
        if let Some(kind) = query.kind {
            sql.push_str(" AND kind = ?");
            values.push(kind.as_str().to_string().into());
        }
        if let Some(before) = before {
            sql.push_str(" AND id < ?");
            values.push(before.into());
        }
        sql.push_str(" ORDER BY id DESC LIMIT ?");
        values.push(i64::try_from(limit).unwrap_or(i64::MAX).into());
        let values: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
        self.read(|conn| conn.collect(&sql, &values, event_of_row))
    }

    /// Up to `limit` events after the one with id `after`, oldest first,
    /// optionally of one job and of some kinds (`None`: every kind). Walks
    /// the primary key from `after` (the job and kind conditions are kept
    /// off their indexes with unary `+`: on a job's index the planner would
    /// read every event of the job to sort them), so a follower polling
    /// at the end of the log reads next to nothing. One short read; no
    /// transaction outlives it.
    pub fn events_after(
        &self,
        after: i64,
        job_id: Option<&str>,
        kinds: Option<&[EventKind]>,
        limit: usize,
    ) -> Result<Vec<Event>> {
        let kinds = kinds.map(|kinds| {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            serde_json::Value::from(names).to_string()
        });
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let sql = match self.backend() {
            super::Backend::Sqlite => EVENTS_AFTER,
            super::Backend::Postgres => EVENTS_AFTER_PG,
        };
        self.read(|conn| {
            conn.collect(
                sql,
                vals![after, job_id, kinds.as_ref(), limit],
                event_of_row,
            )
        })
    }

    /// The event with this id, if there is one.
    pub fn event(&self, id: i64) -> Result<Option<Event>> {
        self.read(|conn| {
            conn.row(
                "SELECT id, time, kind, job_id, item_id, detail FROM events WHERE id = ?1",
                vals![id],
                event_of_row,
            )
        })
    }

    /// The id of the newest event, 0 when the log is empty: the end of the
    /// log, where a follower that wants only what comes next starts.
    pub fn last_event_id(&self) -> Result<i64> {
        let id =
            self.read(|conn| conn.row("SELECT MAX(id) FROM events", &[], |row| row.opt_i64(0)))?;
        Ok(id.flatten().unwrap_or(0))
    }

    /// A cheap "has anything changed?" for a follower (see
    /// [`ChangeProbe`]).
    pub fn change_probe(&self) -> Result<ChangeProbe> {
        // An in-memory database's pool holds its only connection: a probe
        // holding it would leave nothing for the queries it triggers.
        if !self.parallel_reads() {
            return Ok(ChangeProbe {
                source: Probe::Always,
                seen: None,
            });
        }
        let source = match self.backend() {
            super::Backend::Sqlite => Probe::DataVersion(self.conn()?),
            super::Backend::Postgres => Probe::LastEvent(self.clone()),
        };
        Ok(ChangeProbe { source, seen: None })
    }
}

/// Events after a position, oldest first: `?2` a job or NULL, `?3` a JSON
/// array of kind names or NULL. `+` keeps the job and kind conditions off
/// `events_job` and `events_kind`, so the plan is a range of the primary
/// key (checked in the tests below).
const EVENTS_AFTER: &str = "SELECT id, time, kind, job_id, item_id, detail FROM events
     WHERE id > ?1
       AND (?2 IS NULL OR +job_id = ?2)
       AND (?3 IS NULL OR +kind IN (SELECT value FROM json_each(?3)))
     ORDER BY id LIMIT ?4";

/// [`EVENTS_AFTER`] on PostgreSQL (ids there are handed out in commit
/// order: see `WriteTx::events_table`).
const EVENTS_AFTER_PG: &str = "SELECT id, time, kind, job_id, item_id, detail FROM events
     WHERE id > ?1
       AND (CAST(?2 AS TEXT) IS NULL OR job_id = ?2)
       AND (CAST(?3 AS TEXT) IS NULL OR kind IN (SELECT json_array_elements_text(CAST(?3 AS json))))
     ORDER BY id LIMIT ?4";

/// An [`Event`] from the columns id, time, kind, job_id, item_id, detail.
fn event_of_row(row: &super::sql::Row<'_>) -> Result<Event> {
    let detail = row.opt_text(5)?;
    Ok(Event {
        id: row.i64(0)?,
        time: row.ts(1)?,
        kind: row.text(2)?,
        job_id: row.opt_text(3)?,
        item_id: row.opt_text(4)?,
        detail: detail
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(serde_json::Value::Null),
    })
}

/// Tells whether another connection committed anything since the last
/// look, from SQLite's `PRAGMA data_version` on one connection held for the
/// purpose: it reads a counter in the WAL index, no table, and takes no
/// lock a writer waits for. A follower asks it every poll and queries the
/// log only when it says yes, so an idle follower costs one pragma a poll.
/// (On an in-memory database it always says yes.)
pub struct ChangeProbe {
    source: Probe,
    seen: Option<i64>,
}

/// What a [`ChangeProbe`] asks.
enum Probe {
    /// No connection to spare (an in-memory database): always "changed".
    Always,
    /// SQLite's `PRAGMA data_version` on a connection of its own: it moves
    /// with every commit by another connection.
    DataVersion(super::Conn),
    /// PostgreSQL: the newest event id (every change writes an event).
    LastEvent(Dlq),
}

impl ChangeProbe {
    /// Whether anything was committed since the last call (the first call
    /// says yes).
    pub fn changed(&mut self) -> Result<bool> {
        let version = match &self.source {
            Probe::Always => return Ok(true),
            Probe::DataVersion(conn) => {
                conn.query_row("PRAGMA data_version", [], |row| row.get(0))?
            }
            Probe::LastEvent(dlq) => dlq.last_event_id()?,
        };
        let changed = self.seen != Some(version);
        self.seen = Some(version);
        Ok(changed)
    }
}

impl std::fmt::Debug for ChangeProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeProbe")
            .field("seen", &self.seen)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::params;

    fn plan(dlq: &Dlq, sql: &str, params: impl rusqlite::Params) -> Vec<String> {
        let conn = dlq.conn().unwrap();
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let steps = stmt
            .query_map(params, |row| row.get::<_, String>(3))
            .unwrap()
            .map(|step| step.unwrap())
            .collect();
        steps
    }

    #[test]
    fn following_the_log_walks_the_primary_key() {
        let dlq = Dlq::open_in_memory().unwrap();
        for (job, kinds) in [
            (None, None),
            (Some("j"), None),
            (None, Some(r#"["added","merged","imported"]"#)),
            (Some("j"), Some(r#"["added"]"#)),
        ] {
            let steps = plan(&dlq, EVENTS_AFTER, params![5, job, kinds, 256]);
            assert!(
                steps
                    .iter()
                    .any(|s| s.contains("USING INTEGER PRIMARY KEY (rowid>?)")),
                "{steps:#?}"
            );
            assert!(
                !steps.iter().any(|s| s.contains("TEMP B-TREE")),
                "{steps:#?}"
            );
        }
    }

    #[test]
    fn events_after_reads_forward_from_a_position() {
        let dlq = Dlq::open_in_memory().unwrap();
        assert_eq!(dlq.last_event_id().unwrap(), 0);
        for (job, id) in [("a", "1"), ("b", "2"), ("a", "3")] {
            let item = crate::DeadLetteredItem::from_json_str(
                &serde_json::json!({
                    "item_id": id,
                    "item_data": null,
                    "first_attempt": "2025-01-01T00:00:00Z",
                    "last_attempt": "2025-01-01T00:00:00Z",
                    "failure_count": 1,
                    "failure_history": [],
                    "error_signature": "s",
                    "reprocess_eligible": true,
                    "manual_review_required": false
                })
                .to_string(),
            )
            .unwrap();
            dlq.add(job, &item).unwrap();
        }
        let end = dlq.last_event_id().unwrap();
        let all = dlq.events_after(0, None, None, 100).unwrap();
        assert_eq!(all.last().map(|e| e.id), Some(end));
        assert!(all.windows(2).all(|w| w[0].id < w[1].id));
        let added = [EventKind::Added];
        let of_a = dlq.events_after(0, Some("a"), Some(&added), 100).unwrap();
        let ids: Vec<_> = of_a.iter().map(|e| e.item_id.clone().unwrap()).collect();
        assert_eq!(ids, ["1", "3"]);
        let after_first = dlq
            .events_after(of_a[0].id, Some("a"), Some(&added), 1)
            .unwrap();
        assert_eq!(after_first.len(), 1);
        assert_eq!(after_first[0].item_id.as_deref(), Some("3"));
        assert!(dlq.events_after(end, None, None, 10).unwrap().is_empty());
        assert_eq!(dlq.event(end).unwrap().map(|e| e.id), Some(end));
        assert!(dlq.event(end + 1).unwrap().is_none());
    }
}
