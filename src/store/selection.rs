//! Selections: the items an action applies to, chosen by a filter or named
//! one by one, counted first and then acted on exactly (the dashboard's "all
//! N items matching this search"). Counting takes a [`Selection`]: the
//! count, a fingerprint of the row keys and the `now` the filter was read
//! at. An action given that selection takes it again inside its own write
//! transaction and refuses ([`Error::SelectionChanged`]) when it differs, so
//! it never touches a row the person did not see counted, and a search such
//! as `last_attempt > now - 1d` means the same rows at both steps.

use super::bulk;
use super::filter_sql::Takes;
use super::items::{ListFilter, MarkRequest};
use super::sql::SqlValue as Value;
use super::sql::{vals, Backend, Conn, Val};
use super::write::WriteTx;
use super::{Dlq, EventKind};
use crate::error::{Error, Result};
use crate::time::Timestamp;
use serde::Serialize;

/// The most items a [`Target::Items`] may name (two bound values each).
pub const MAX_NAMED_ITEMS: usize = 10_000;

/// Which items an action takes.
#[derive(Clone, Debug)]
pub enum Target {
    /// Every item the filter matches.
    Filter(ListFilter),
    /// These (job_id, item_id) pairs; names that do not exist are ignored.
    Items(Vec<(String, String)>),
}

/// A counted selection: how many items, and a fingerprint of which.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Selection {
    pub count: u64,
    /// The largest row key counted: items stored later have larger keys,
    /// so a filter bounded by it ([`ListFilter::max_key`]) takes none of
    /// them (a retry of a counted selection).
    pub max_key: i64,
    /// The count, a hash-sum and the largest of the row keys, and `now`:
    /// opaque, to hand back to an action.
    pub token: String,
}

/// What an action did: the items it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ActionReport {
    pub count: u64,
}

impl Target {
    /// This target's conditions on `items AS i` (fixed SQL text, each
    /// starting with " AND ") and their bound values.
    /// Every match is taken: message searches read the search index's
    /// candidates, planned on `conn` (a matter of speed only).
    fn condition(&self, conn: Conn<'_>, now: Timestamp) -> Result<(String, Vec<Value>)> {
        let mut sql = String::new();
        let mut values = Vec::new();
        match self {
            Target::Filter(filter) => {
                let plan = filter.search_plan(conn, Takes::Every)?;
                filter.push_conditions_on(conn.backend(), now, &plan, &mut sql, &mut values)
            }
            Target::Items(pairs) => {
                if pairs.len() > MAX_NAMED_ITEMS {
                    return Err(Error::invalid_argument(
                        "items",
                        format!(
                            "{} items named; at most {MAX_NAMED_ITEMS} (use a filter)",
                            pairs.len()
                        ),
                    ));
                }
                if pairs.is_empty() {
                    sql.push_str(" AND 1 = 0");
                } else {
                    sql.push_str(" AND (i.job_id, i.item_id) IN (VALUES ");
                    for (n, (job, item)) in pairs.iter().enumerate() {
                        sql.push_str(if n == 0 { "(?, ?)" } else { ", (?, ?)" });
                        values.push(Value::Text(job.clone()));
                        values.push(Value::Text(item.clone()));
                    }
                    sql.push(')');
                }
            }
        }
        Ok((sql, values))
    }
}

/// On PostgreSQL, the row locks of the jobs of the items matching
/// `condition`, taken first, as adds take them (SQLite has one writer).
fn lock_jobs_of(conn: Conn<'_>, condition: &str, values: &[Value]) -> Result<()> {
    if conn.backend() == Backend::Postgres {
        conn.exec(
            &format!(
                "SELECT 1 FROM jobs WHERE job_id IN (SELECT i.job_id FROM items i WHERE 1 = 1{condition})
                 ORDER BY job_id FOR UPDATE"
            ),
            &values.iter().map(Val::from_value).collect::<Vec<_>>(),
        )?;
    }
    Ok(())
}

/// (count, hash-sum, max) of the rows matching `condition`. Each row's
/// term takes in its identity and state (`dlq_key_hash` of job_id,
/// item_id, first and last attempt, signature and item_data, see db.rs: a row key
/// alone can be given again to a new item once the last row is deleted),
/// its row key, its failure_count and its version (schema V9, bumped by
/// every change to the item, a merged attempt that moves none of the other
/// fields included): an item that changed after it was counted, or was
/// removed and stored again under its name, is not the item that was
/// confirmed. Swapping one matching row for another changes the sum.
pub(super) fn fingerprint(
    conn: Conn<'_>,
    condition: &str,
    values: &[Value],
) -> Result<(u64, i64, i64)> {
    // PostgreSQL hashes the same fields with its own text hash (a token
    // is only ever compared with one of the same database).
    let hash = match conn.backend() {
        Backend::Sqlite => {
            "dlq_key_hash(i.job_id, i.item_id, i.first_attempt, i.last_attempt, i.error_signature, i.item_data)"
        }
        Backend::Postgres => {
            "(hashtextextended(concat_ws(chr(31), i.job_id, i.item_id, i.first_attempt, i.first_attempt_ns,
                 i.last_attempt, i.last_attempt_ns, i.error_signature, i.item_data::text), 0) % 4294967291)"
        }
    };
    let sql = format!(
        "SELECT COUNT(*),
             CAST(COALESCE(SUM(({hash} + i.id * 2654435761
                           + i.failure_count * 40503 + i.version * 374761393) % 4294967291), 0) AS BIGINT),
             COALESCE(MAX(i.id), 0)
         FROM items i WHERE 1 = 1{condition}"
    );
    let bound: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
    let (count, sum, max) = conn
        .row(&sql, &bound, |row| {
            Ok((row.i64(0)?, row.i64(1)?, row.i64(2)?))
        })?
        .unwrap_or_default();
    Ok((u64::try_from(count).unwrap_or(0), sum, max))
}

pub(super) fn token(now: Timestamp, (count, sum, max): (u64, i64, i64)) -> String {
    format!("{count}.{sum}.{max}.{}", now.to_storage())
}

/// The `now` a selection token was counted at, and the token's count.
fn parse_token(token: &str) -> Result<(Timestamp, u64)> {
    let bad = || Error::invalid_argument("selection", "not a selection token from a count");
    let mut parts = token.splitn(4, '.');
    let count = parts.next().and_then(|c| c.parse().ok()).ok_or_else(bad)?;
    let (_, _) = (parts.next().ok_or_else(bad)?, parts.next().ok_or_else(bad)?);
    let now = parts
        .next()
        .and_then(|t| Timestamp::parse(t).ok())
        .ok_or_else(bad)?;
    Ok((now, count))
}

/// Fails with [`Error::SelectionChanged`] unless `target` holds, on `conn`
/// (inside the acting transaction), exactly the items `token_given` counted.
pub(super) fn expect_unchanged(conn: Conn<'_>, target: &Target, token_given: &str) -> Result<()> {
    let (now, counted) = parse_token(token_given)?;
    let (condition, values) = target.condition(conn, now)?;
    let print = fingerprint(conn, &condition, &values)?;
    if token(now, print) != token_given {
        return Err(Error::SelectionChanged {
            counted,
            now: print.0,
        });
    }
    Ok(())
}

impl Dlq {
    /// Counts the target's items now, for an action to apply to exactly
    /// them later.
    pub fn select(&self, target: &Target) -> Result<Selection> {
        let now = self.age_now();
        let print = self.read(|conn| {
            let (condition, values) = target.condition(conn, now)?;
            fingerprint(conn, &condition, &values)
        })?;
        Ok(Selection {
            count: print.0,
            max_key: print.2,
            token: token(now, print),
        })
    }

    /// The selection `token` counted, if the target still holds exactly
    /// those items ([`Error::SelectionChanged`] otherwise): for an action
    /// that cannot run in one transaction (a retry), checked before it
    /// starts.
    pub fn check_selection(&self, target: &Target, token_given: &str) -> Result<Selection> {
        let (now, counted) = parse_token(token_given)?;
        let print = self.read(|conn| {
            let (condition, values) = target.condition(conn, now)?;
            fingerprint(conn, &condition, &values)
        })?;
        if token(now, print) != token_given {
            return Err(Error::SelectionChanged {
                counted,
                now: print.0,
            });
        }
        Ok(Selection {
            count: print.0,
            max_key: print.2,
            token: token_given.to_string(),
        })
    }

    /// Sets flags on the target's items, with a `marked` event each, in one
    /// transaction. With `expect`, only if the target still holds exactly
    /// the items counted then.
    pub fn mark_selection(
        &self,
        target: &Target,
        expect: Option<&str>,
        request: &MarkRequest,
    ) -> Result<ActionReport> {
        if request.reprocess_eligible.is_none() && request.manual_review_required.is_none() {
            return Err(Error::invalid_argument("mark", "nothing to change"));
        }
        self.act(target, expect, |tx, condition, values| {
            let conn = tx.sql();
            // Unqualified: both backends look in the temp schema first.
            conn.exec(
                "CREATE TEMP TABLE IF NOT EXISTS selected_ids (id BIGINT PRIMARY KEY)",
                &[],
            )?;
            conn.exec("DELETE FROM selected_ids", &[])?;
            lock_jobs_of(conn, condition, values)?;
            let bound: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
            let n = conn.exec(
                &format!("INSERT INTO selected_ids (id) SELECT i.id FROM items i WHERE 1 = 1{condition}"),
                &bound,
            )?;
            let detail = serde_json::json!({
                "reprocess_eligible": request.reprocess_eligible,
                "manual_review_required": request.manual_review_required,
            })
            .to_string();
            conn.exec(
                &format!(
                    "INSERT INTO {} (time, kind, job_id, item_id, detail)
                     SELECT ?1, ?2, i.job_id, i.item_id, ?3
                     FROM selected_ids s {} items i ON i.id = s.id ORDER BY s.id",
                    tx.events_table()?,
                    conn.backend().ordered_join()
                ),
                vals![tx.now(), EventKind::Marked.as_str(), &detail],
            )?;
            conn.exec(
                "UPDATE items SET
                     reprocess_eligible = COALESCE(?1, reprocess_eligible),
                     reprocess_eligible_marked = CASE WHEN ?1 IS NULL THEN reprocess_eligible_marked ELSE 1 END,
                     manual_review_required = COALESCE(?2, manual_review_required),
                     manual_review_required_marked = CASE WHEN ?2 IS NULL THEN manual_review_required_marked ELSE 1 END
                 WHERE id IN (SELECT id FROM selected_ids)",
                vals![request.reprocess_eligible, request.manual_review_required],
            )?;
            conn.exec("DELETE FROM selected_ids", &[])?;
            Ok(n)
        })
    }

    /// Leases the target's items to the retry run `run_id` until `until`,
    /// in one transaction; with `expect`, only if the target still holds
    /// exactly the items counted then. A confirmed retry runs on these and
    /// nothing else ([`crate::retry::RetryOptions::leased_in_advance`]): no
    /// item stored, merged into the search or marked eligible after the
    /// count. Fails as changed when another run holds a live lease on one
    /// of them (it is being retried already).
    pub fn lease_selection(
        &self,
        target: &Target,
        expect: Option<&str>,
        run_id: &str,
        until: Timestamp,
    ) -> Result<ActionReport> {
        self.act(target, expect, |tx, condition, values| {
            let conn = tx.sql();
            lock_jobs_of(conn, condition, values)?;
            let now = tx.now();
            let mut bound: Vec<Val<'_>> = vals![run_id, now].to_vec();
            bound.extend(values.iter().map(Val::from_value));
            let held = conn
                .row(
                    &format!(
                        "SELECT COUNT(*) FROM items i
                         WHERE i.lease_owner IS NOT NULL AND i.lease_owner <> ? AND i.lease_expires >= ?{condition}"
                    ),
                    &bound,
                    |row| row.i64(0),
                )?
                .unwrap_or(0);
            if held > 0 {
                let total = conn
                    .row(
                        &format!("SELECT COUNT(*) FROM items i WHERE 1 = 1{condition}"),
                        &values.iter().map(Val::from_value).collect::<Vec<_>>(),
                        |row| row.i64(0),
                    )?
                    .unwrap_or(0);
                return Err(Error::SelectionChanged {
                    counted: u64::try_from(total).unwrap_or(0),
                    now: u64::try_from(total - held).unwrap_or(0),
                });
            }
            let mut bound: Vec<Val<'_>> = vals![run_id, until].to_vec();
            bound.extend(values.iter().map(Val::from_value));
            conn.exec(
                &format!(
                    "UPDATE items SET lease_owner = ?, lease_expires = ?
                     WHERE id IN (SELECT i.id FROM items i WHERE 1 = 1{condition})"
                ),
                &bound,
            )
        })
    }

    /// Removes the target's items, with a `removed` event each (as
    /// [`Dlq::remove`]), in one transaction. With `expect`, only if the
    /// target still holds exactly the items counted then.
    pub fn remove_selection(&self, target: &Target, expect: Option<&str>) -> Result<ActionReport> {
        self.act(target, expect, |tx, condition, values| {
            bulk::delete_items(
                tx,
                condition,
                values,
                EventKind::Removed,
                serde_json::json!({}),
            )
        })
    }

    /// Runs `change` on the target in one write transaction, after checking
    /// `expect` against the target as it is inside that transaction.
    fn act(
        &self,
        target: &Target,
        expect: Option<&str>,
        change: impl FnOnce(&mut WriteTx<'_>, &str, &[Value]) -> Result<usize>,
    ) -> Result<ActionReport> {
        let now = match expect {
            Some(token_given) => parse_token(token_given)?.0,
            None => self.age_now(),
        };
        self.write(|tx| {
            let (condition, values) = target.condition(tx.sql(), now)?;
            if let Some(token_given) = expect {
                expect_unchanged(tx.sql(), target, token_given)?;
            }
            let n = change(tx, &condition, &values)?;
            Ok(ActionReport {
                count: u64::try_from(n).unwrap_or(0),
            })
        })
    }
}
