//! Reading the audit log.

use super::Dlq;
use crate::error::Result;
use crate::time::Timestamp;
use rusqlite::params;
use serde::Serialize;

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
        kind: Option<&str>,
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
                let detail: Option<String> = row.get(5)?;
                Ok(Event {
                    id: row.get(0)?,
                    time: row.get(1)?,
                    kind: row.get(2)?,
                    job_id: row.get(3)?,
                    item_id: row.get(4)?,
                    detail: detail
                        .and_then(|text| serde_json::from_str(&text).ok())
                        .unwrap_or(serde_json::Value::Null),
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(events)
    }
}
