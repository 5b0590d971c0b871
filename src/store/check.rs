//! What threshold checks (`dlq check`, metrics) read: the oldest item of
//! each job ([`Dlq::oldest_items`]), the dead letters that arrived since a
//! moment ([`Dlq::arrivals_since`]), and the error signatures that are new
//! since a named check last ran ([`Dlq::new_signatures`], whose state is
//! the `checks` and `check_signatures` tables).

use super::{Dlq, EventKind, ListFilter};
use crate::error::Result;
use crate::time::Timestamp;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, OptionalExtension};
use serde::Serialize;
use std::collections::BTreeMap;

/// A job's oldest item: the one that has been a dead letter longest (the
/// earliest `first_attempt`, the moment it first failed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OldestItem {
    pub job_id: String,
    pub item_id: String,
    pub first_attempt: Timestamp,
}

/// A signature present now that was not at a check's last run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NewSignature {
    pub error_signature: String,
    /// How many items (in the check's scope) carry it now.
    pub items: i64,
}

/// What [`Dlq::new_signatures`] found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SignatureNews {
    /// No earlier run of this check (or one with another scope): the
    /// signatures present now were recorded as the baseline, and none is
    /// reported new.
    pub baseline: bool,
    /// On a baseline, how many signatures it recorded (0 otherwise).
    pub recorded: usize,
    /// The new ones, most items first.
    pub new: Vec<NewSignature>,
}

/// The arrivals [`Dlq::arrivals_since`] counts: a new item stored by an add
/// or brought in by an import. An import's item events also record copies
/// merged into an item already stored (`outcome` in their detail), and one
/// job-level event without an item id: neither is an arrival, as an add's
/// merge (a `merged` event) is not.
const ARRIVALS: [EventKind; 2] = [EventKind::Added, EventKind::Imported];

impl Dlq {
    /// The oldest item (earliest `first_attempt`; ties to the first
    /// stored) of each job that has items, by job_id, or of one job. One
    /// seek of items_job_first_attempt per job.
    pub fn oldest_items(&self, job_id: Option<&str>) -> Result<Vec<OldestItem>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT i.job_id, i.item_id, i.first_attempt
             FROM jobs AS j
             JOIN items AS i ON i.id = (
                 SELECT o.id FROM items AS o
                 WHERE o.job_id = j.job_id
                 ORDER BY o.first_attempt, o.id LIMIT 1)
             WHERE ?1 IS NULL OR j.job_id = ?1
             ORDER BY j.job_id",
        )?;
        let oldest = stmt
            .query_map(params![job_id], |row| {
                Ok(OldestItem {
                    job_id: row.get("job_id")?,
                    item_id: row.get("item_id")?,
                    first_attempt: row.get("first_attempt")?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(oldest)
    }

    /// The oldest item matching `filter` (earliest `first_attempt`), if
    /// any. With the filter's job set, it walks that job's range of
    /// items_job_first_attempt from the oldest until an item matches.
    pub fn oldest_matching(&self, filter: &ListFilter) -> Result<Option<OldestItem>> {
        let conn = self.conn()?;
        let mut condition = String::new();
        let mut values: Vec<Value> = Vec::new();
        filter.push_conditions(self.age_now(), &mut condition, &mut values);
        let sql = format!(
            "SELECT i.job_id, i.item_id, i.first_attempt FROM items AS i
             WHERE 1 = 1{condition} ORDER BY i.first_attempt, i.id LIMIT 1"
        );
        let oldest = conn
            .prepare(&sql)?
            .query_row(params_from_iter(values), |row| {
                Ok(OldestItem {
                    job_id: row.get("job_id")?,
                    item_id: row.get("item_id")?,
                    first_attempt: row.get("first_attempt")?,
                })
            })
            .optional()?;
        Ok(oldest)
    }

    /// How many dead letters arrived (were added, or imported) at or after
    /// `since`, per job, within one job or all. Events have no index on
    /// time, but their ids grow with it (writers take turns, each stamping
    /// its own clock): each kind's events are read newest first through
    /// events_kind and the walk stops at the first one older than `since`,
    /// so it reads the window, never the whole log. A writer whose clock
    /// ran behind can end a walk early.
    pub fn arrivals_since(
        &self,
        since: Timestamp,
        job_id: Option<&str>,
    ) -> Result<BTreeMap<String, u64>> {
        let conn = self.conn()?;
        let since = since.to_storage();
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        // Every event of the kind is looked at, whatever its job: filtering
        // by job in SQL would walk past the window to find an old event of
        // that job to stop at.
        let mut stmt = conn.prepare_cached(
            "SELECT time, job_id,
                 item_id IS NOT NULL AND (kind <> 'imported'
                     OR json_extract(detail, '$.outcome') = 'new') AS arrival
             FROM events WHERE kind = ?1 ORDER BY id DESC",
        )?;
        for kind in ARRIVALS {
            let mut rows = stmt.query(params![kind])?;
            while let Some(row) = rows.next()? {
                let time: String = row.get("time")?;
                if time < since {
                    break;
                }
                let arrival: bool = row.get("arrival")?;
                let job: Option<String> = row.get("job_id")?;
                let Some(job) = job.filter(|_| arrival) else {
                    continue;
                };
                if job_id.is_some_and(|wanted| wanted != job) {
                    continue;
                }
                *counts.entry(job).or_default() += 1;
            }
        }
        Ok(counts)
    }

    /// The error signatures present now (within `job_id`, or every job)
    /// that were not at the last run of the check called `name`, and
    /// records what is present now for its next run, in one write
    /// transaction (two runs of one check cannot both report the same
    /// news). A first run, or one whose scope differs from the last, only
    /// records a baseline. Each run writes only the signatures that came or
    /// went since the last.
    pub fn new_signatures(&self, name: &str, job_id: Option<&str>) -> Result<SignatureNews> {
        let now = self.now().to_storage();
        self.write(|tx| {
            let conn = tx.conn()?;
            let earlier: Option<Option<String>> = conn
                .prepare_cached("SELECT job_id FROM checks WHERE name = ?1")?
                .query_row([name], |row| row.get(0))
                .optional()?;
            let baseline = earlier
                .as_ref()
                .is_none_or(|scope| scope.as_deref() != job_id);
            conn.prepare_cached(
                "INSERT INTO checks (name, job_id, checked_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET job_id = ?2, checked_at = ?3",
            )?
            .execute(params![name, job_id, now])?;
            // The signatures present now: two statements rather than
            // `?1 IS NULL OR job_id = ?1`, with which SQLite cannot seek to
            // the job's range of the primary key.
            let present = match job_id {
                Some(_) => {
                    "SELECT error_signature, item_count FROM signature_counts WHERE job_id = ?2"
                }
                None => "SELECT error_signature, item_count FROM signature_counts WHERE ?2 IS NULL",
            };
            let mut new = Vec::new();
            if baseline {
                conn.prepare_cached("DELETE FROM check_signatures WHERE name = ?1")?
                    .execute([name])?;
            } else {
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT p.error_signature, SUM(p.item_count) AS items FROM ({present}) AS p
                     WHERE NOT EXISTS (SELECT 1 FROM check_signatures AS s
                         WHERE s.name = ?1 AND s.error_signature = p.error_signature)
                     GROUP BY p.error_signature
                     ORDER BY items DESC, p.error_signature"
                ))?;
                new = stmt
                    .query_map(params![name, job_id], |row| {
                        Ok(NewSignature {
                            error_signature: row.get("error_signature")?,
                            items: row.get("items")?,
                        })
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                // Those gone since the last run, so that one coming back
                // is news again.
                conn.prepare_cached(&format!(
                    "DELETE FROM check_signatures WHERE name = ?1 AND error_signature NOT IN (
                         SELECT error_signature FROM ({present}))"
                ))?
                .execute(params![name, job_id])?;
            }
            let recorded = if baseline {
                conn.prepare_cached(&format!(
                    "INSERT INTO check_signatures (name, error_signature)
                     SELECT DISTINCT ?1, error_signature FROM ({present})"
                ))?
                .execute(params![name, job_id])?
            } else {
                let mut insert = conn.prepare_cached(
                    "INSERT INTO check_signatures (name, error_signature) VALUES (?1, ?2)",
                )?;
                for signature in &new {
                    insert.execute(params![name, signature.error_signature])?;
                }
                0
            };
            Ok(SignatureNews {
                baseline,
                recorded,
                new,
            })
        })
    }
}
