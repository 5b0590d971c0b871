//! What threshold checks (`dlq check`, metrics) read: the oldest item of
//! each job ([`Dlq::oldest_items`]), the dead letters that arrived since a
//! moment ([`Dlq::arrivals_since`]), and the error signatures and failure
//! families that are new since a named check last ran
//! ([`Dlq::new_signatures`], [`Dlq::new_families`]), whose state is the
//! `checks` and `check_signatures` tables.
//!
//! Both news checks are one rule over a different set of keys: what is
//! present now (in the scope) and was not at the check's last run. A
//! check's families are kept as a check of their own in the same tables,
//! named `NAME` + U+001F + `families` (a name `dlq check` refuses), their
//! ids as the keys: so the two never take each other's news or baseline,
//! and the schema did not change for them.

use super::sql::SqlValue as Value;
use super::sql::{vals, Backend, Row, Val};
use super::{Dlq, EventKind, ListFilter};
use crate::error::Result;
use crate::time::Timestamp;
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

/// A failure family present now that was not at a check's last run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NewFamily {
    pub family_id: i64,
    /// How many items (in the check's scope) are of it now.
    pub items: i64,
    pub template: String,
    pub error_type: Option<String>,
    /// Its first failure, as the family records it.
    pub first_seen: Option<Timestamp>,
}

/// What [`Dlq::new_families`] found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FamilyNews {
    /// No earlier run of this check's families (or one with another
    /// scope): the families present now were recorded as the baseline,
    /// and none is reported new.
    pub baseline: bool,
    /// On a baseline, how many families it recorded (0 otherwise).
    pub recorded: usize,
    /// The new ones, most items first.
    pub new: Vec<NewFamily>,
}

/// The name a check's family state is kept under (see the module docs):
/// U+001F cannot be in a name `dlq check` takes.
pub fn family_check_name(name: &str) -> String {
    format!("{name}\u{1f}families")
}

/// What a news check found: whether it was a baseline, how many keys a
/// baseline recorded, and the new keys with their items, most first.
struct News {
    baseline: bool,
    recorded: usize,
    new: Vec<(String, i64)>,
}

/// The news rule of both checks (see the module docs), in the caller's
/// write transaction: the keys of `present` (a SELECT of `error_signature`
/// and `item_count` columns, `?2` the job or NULL) that the check `name`
/// had not recorded at its last run; then records what is present now,
/// writing only the keys that came or went. A first run, or one whose
/// scope differs from the last, only records a baseline.
fn news(
    conn: super::sql::Conn<'_>,
    now: Timestamp,
    name: &str,
    job_id: Option<&str>,
    present: &str,
) -> Result<News> {
    let earlier = conn.row(
        "SELECT job_id FROM checks WHERE name = ?1",
        vals![name],
        |row| row.opt_text(0),
    )?;
    let baseline = earlier
        .as_ref()
        .is_none_or(|scope| scope.as_deref() != job_id);
    conn.exec(
        "INSERT INTO checks (name, job_id, checked_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO UPDATE SET job_id = excluded.job_id, checked_at = excluded.checked_at",
        vals![name, job_id, now],
    )?;
    let mut new = Vec::new();
    if baseline {
        conn.exec("DELETE FROM check_signatures WHERE name = ?1", vals![name])?;
    } else {
        new = conn.collect(
            &format!(
                "SELECT p.error_signature, CAST(SUM(p.item_count) AS BIGINT) AS items
                 FROM ({present}) AS p
                 WHERE NOT EXISTS (SELECT 1 FROM check_signatures AS s
                     WHERE s.name = ?1 AND s.error_signature = p.error_signature)
                 GROUP BY p.error_signature
                 ORDER BY items DESC, p.error_signature"
            ),
            vals![name, job_id],
            |row| Ok((row.text(0)?, row.i64(1)?)),
        )?;
        // Those gone since the last run, so that one coming back is news
        // again.
        conn.exec(
            &format!(
                "DELETE FROM check_signatures WHERE name = ?1 AND error_signature NOT IN (
                     SELECT error_signature FROM ({present}) AS p)"
            ),
            vals![name, job_id],
        )?;
    }
    let recorded = if baseline {
        conn.exec(
            &format!(
                "INSERT INTO check_signatures (name, error_signature)
                 SELECT DISTINCT CAST(?1 AS TEXT), error_signature FROM ({present}) AS p"
            ),
            vals![name, job_id],
        )?
    } else {
        for (key, _) in &new {
            conn.exec(
                "INSERT INTO check_signatures (name, error_signature) VALUES (?1, ?2)",
                vals![name, key],
            )?;
        }
        0
    };
    Ok(News {
        baseline,
        recorded,
        new,
    })
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

/// An [`OldestItem`] from columns job_id, item_id, first_attempt.
fn oldest_of_row(row: &Row<'_>) -> Result<OldestItem> {
    Ok(OldestItem {
        job_id: row.text(0)?,
        item_id: row.text(1)?,
        first_attempt: row.ts(2)?,
    })
}

impl Dlq {
    /// The oldest item (earliest `first_attempt`; ties to the first
    /// stored) of each job that has items, by job_id, or of one job. One
    /// seek of items_job_first_attempt per job.
    pub fn oldest_items(&self, job_id: Option<&str>) -> Result<Vec<OldestItem>> {
        let b = self.backend();
        let sql = format!(
            "SELECT i.job_id, i.item_id, {}
             FROM jobs AS j
             JOIN items AS i ON i.id = (
                 SELECT o.id FROM items AS o
                 WHERE o.job_id = j.job_id
                 ORDER BY {}, o.id LIMIT 1)
             WHERE CAST(?1 AS TEXT) IS NULL OR j.job_id = ?1
             ORDER BY j.job_id",
            b.ts_text("i.first_attempt"),
            b.ts_order("o.first_attempt", false),
        );
        self.read(|conn| conn.collect(&sql, vals![job_id], oldest_of_row))
    }

    /// The oldest item matching `filter` (earliest `first_attempt`), if
    /// any. With the filter's job set, it walks that job's range of
    /// items_job_first_attempt from the oldest until an item matches.
    pub fn oldest_matching(&self, filter: &ListFilter) -> Result<Option<OldestItem>> {
        let b = self.backend();
        let now = self.age_now();
        self.read(|conn| {
            let mut condition = String::new();
            let mut values: Vec<Value> = Vec::new();
            let plan = filter.search_plan(conn, super::filter_sql::Takes::Page)?;
            filter.push_conditions_on(b, now, &plan, &mut condition, &mut values);
            let sql = format!(
                "SELECT i.job_id, i.item_id, {} FROM items AS i
                 WHERE 1 = 1{condition} ORDER BY {}, i.id LIMIT 1",
                b.ts_text("i.first_attempt"),
                b.ts_order("i.first_attempt", false),
            );
            let bound: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
            conn.row(&sql, &bound, oldest_of_row)
        })
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
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        // Every event of the kind is looked at, whatever its job: filtering
        // by job in SQL would walk past the window to find an old event of
        // that job to stop at. On PostgreSQL, where writers do not take
        // turns, ids do not follow time: the window is a condition there.
        let sql = match self.backend() {
            Backend::Sqlite => {
                "SELECT time, job_id,
                     item_id IS NOT NULL AND (kind <> 'imported'
                         OR json_extract(detail, '$.outcome') = 'new') AS arrival
                 FROM events WHERE kind = ?1 AND ?2 IS NOT NULL ORDER BY id DESC"
            }
            Backend::Postgres => {
                "SELECT time, job_id,
                     CASE WHEN item_id IS NOT NULL AND (kind <> 'imported'
                         OR detail->>'outcome' = 'new') THEN 1 ELSE 0 END AS arrival
                 FROM events WHERE kind = ?1 AND time >= ?2 ORDER BY id DESC"
            }
        };
        self.read(|conn| {
            for kind in ARRIVALS {
                conn.each_while(sql, vals![kind.as_str(), since], |row| {
                    if row.ts(0)? < since {
                        return Ok(false);
                    }
                    let job = row.opt_text(1)?;
                    let Some(job) = job.filter(|_| row.bool(2).unwrap_or(false)) else {
                        return Ok(true);
                    };
                    if job_id.is_some_and(|wanted| wanted != job) {
                        return Ok(true);
                    }
                    *counts.entry(job).or_default() += 1;
                    Ok(true)
                })?;
            }
            Ok(counts)
        })
    }

    /// The error signatures present now (within `job_id`, or every job)
    /// that were not at the last run of the check called `name`, and
    /// records what is present now for its next run, in one write
    /// transaction (two runs of one check cannot both report the same
    /// news). A first run, or one whose scope differs from the last, only
    /// records a baseline. Each run writes only the signatures that came or
    /// went since the last.
    pub fn new_signatures(&self, name: &str, job_id: Option<&str>) -> Result<SignatureNews> {
        let now = self.now();
        // The signatures present now: two statements rather than
        // `?2 IS NULL OR job_id = ?2`, with which SQLite cannot seek to the
        // job's range of the primary key.
        let present = match job_id {
            Some(_) => "SELECT error_signature, item_count FROM signature_counts WHERE job_id = ?2",
            None => {
                "SELECT error_signature, item_count FROM signature_counts
                 WHERE CAST(?2 AS TEXT) IS NULL"
            }
        };
        let news = self.write(|tx| news(tx.sql(), now, name, job_id, present))?;
        Ok(SignatureNews {
            baseline: news.baseline,
            recorded: news.recorded,
            new: news
                .new
                .into_iter()
                .map(|(error_signature, items)| NewSignature {
                    error_signature,
                    items,
                })
                .collect(),
        })
    }

    /// The failure families present now (with items within `job_id`, or
    /// in any job) that were not at the last run of the check called
    /// `name`, recorded for its next run as [`Dlq::new_signatures`] does
    /// signatures (the same rule, baseline and scope; the state of its own,
    /// see the module docs). Over all jobs the families present are read
    /// from the items_family index; for one job, from its items.
    pub fn new_families(&self, name: &str, job_id: Option<&str>) -> Result<FamilyNews> {
        let now = self.now();
        let present = match job_id {
            Some(_) => {
                "SELECT CAST(family_id AS TEXT) AS error_signature, COUNT(*) AS item_count
                 FROM items WHERE job_id = ?2 AND family_id IS NOT NULL GROUP BY family_id"
            }
            None => {
                "SELECT CAST(family_id AS TEXT) AS error_signature, COUNT(*) AS item_count
                 FROM items WHERE family_id IS NOT NULL AND CAST(?2 AS TEXT) IS NULL
                 GROUP BY family_id"
            }
        };
        let state = family_check_name(name);
        self.write(|tx| {
            let news = news(tx.sql(), now, &state, job_id, present)?;
            let mut new = Vec::with_capacity(news.new.len());
            for (key, items) in news.new {
                let family_id: i64 = key.parse().map_err(|_| {
                    crate::error::Error::invalid_argument("families", format!("bad id {key:?}"))
                })?;
                let row = tx.sql().row(
                    "SELECT template, error_type, first_seen FROM families WHERE id = ?1",
                    vals![family_id],
                    |row| Ok((row.text(0)?, row.opt_text(1)?, row.opt_ts(2)?)),
                )?;
                let (template, error_type, first_seen) = row.unwrap_or_default();
                new.push(NewFamily {
                    family_id,
                    items,
                    template,
                    error_type,
                    first_seen,
                });
            }
            Ok(FamilyNews {
                baseline: news.baseline,
                recorded: news.recorded,
                new,
            })
        })
    }
}
