//! Retention policies (`dlq retention`): the `retention_policies` table
//! (schema V5), setting and removing a policy, and applying them all: the
//! items each policy governs whose last attempt is older than its max age
//! go, in one transaction, each with a `purged` event naming the policy.
//!
//! Which policy governs an item is the V5 rule: the most specific matching
//! one, (job, category) over (job, any) and (any, category), and those over
//! (any, any). A (job, any) and an (any, category) policy that both match
//! are neither more specific than the other: the one that keeps longer
//! governs (keep-forever longest; equal ages: the job's), so a category
//! kept forever is not removed by a job's age policy, nor the other way
//! round. Policies are few, so the rule is compiled here into plain
//! conditions on `items AS i`: a policy's scope, minus the scopes of the
//! policies that win over it where they overlap. A dry run and an apply at the
//! same "now" build the same conditions and so select the same items.

use super::bulk::delete_items;
use super::categories::ITEM_CATEGORY_SQL;
use super::filter_sql::push_time_bound;
use super::sql::SqlValue as Value;
use super::sql::{vals, Backend, Conn, Row, Val};
use super::write::WriteTx;
use super::{Category, Dlq, EventKind};
use crate::error::{Error, Result};
use crate::filter::Op;
use crate::time::Timestamp;
use serde::Serialize;

/// One row of `retention_policies`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RetentionPolicy {
    pub id: i64,
    /// The job it applies to; `None`: any job.
    pub job_id: Option<String>,
    /// The category it applies to; `None`: any category.
    pub category: Option<Category>,
    /// Items whose last attempt is older than this many seconds are
    /// removed by an apply; `None` keeps them forever.
    pub max_age_seconds: Option<i64>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl RetentionPolicy {
    /// Whether this policy governs, instead of `other`, the items both
    /// match (see the module docs). Exactly one of two distinct overlapping
    /// policies wins over the other, so every item has one governing policy.
    fn beats(&self, other: &RetentionPolicy) -> bool {
        if self.id == other.id || !self.overlaps(other) {
            return false;
        }
        // Fixes everything `other` fixes: the same or a narrower scope.
        let covers = |a: &RetentionPolicy, b: &RetentionPolicy| {
            (a.job_id.is_some() || b.job_id.is_none())
                && (a.category.is_some() || b.category.is_none())
        };
        match (covers(self, other), covers(other, self)) {
            (true, false) => true,
            (false, true) => false,
            // (job, any) against (any, category): the longer keep wins.
            _ => match (self.max_age_seconds, other.max_age_seconds) {
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some(a), Some(b)) if a != b => a > b,
                _ => self.job_id.is_some(),
            },
        }
    }

    /// Whether some item could match both scopes.
    fn overlaps(&self, other: &RetentionPolicy) -> bool {
        fn agree<T: PartialEq>(a: &Option<T>, b: &Option<T>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
        }
        agree(&self.job_id, &other.job_id) && agree(&self.category, &other.category)
    }

    /// "job \"J\", category transient", "any job, any category".
    pub fn scope(&self) -> String {
        scope_text(self.job_id.as_deref(), self.category)
    }
}

/// A policy's scope in words (messages, errors).
pub fn scope_text(job_id: Option<&str>, category: Option<Category>) -> String {
    let job = match job_id {
        Some(job) => format!("job {job:?}"),
        None => "any job".to_string(),
    };
    let category = match category {
        Some(category) => format!("category {category}"),
        None => "any category".to_string(),
    };
    format!("{job}, {category}")
}

/// What `set_retention` or `remove_retention` changed, and what the next
/// apply would do now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RetentionChange {
    /// The policy of this scope before (`None`: there was none).
    pub before: Option<RetentionPolicy>,
    /// And after (`None`: removed).
    pub after: Option<RetentionPolicy>,
    /// Items this policy would remove if applied now (0 when removed or
    /// kept forever).
    pub would_remove: usize,
    /// Items all the policies would remove if applied now: removing a
    /// policy hands its items to a less specific one.
    pub would_remove_total: usize,
}

/// A policy and the items it governs now (`dlq retention list`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyStatus {
    #[serde(flatten)]
    pub policy: RetentionPolicy,
    /// Items this policy governs (no policy wins over it for them),
    /// whatever their age.
    pub items: usize,
    /// Of those, the items an apply would remove now.
    pub would_remove: usize,
}

/// One policy's part of an apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyOutcome {
    pub id: i64,
    pub job_id: Option<String>,
    pub category: Option<Category>,
    pub max_age_seconds: Option<i64>,
    /// Items last failed before this went (`None`: kept forever).
    pub cutoff: Option<Timestamp>,
    /// Items removed (or, dry, that would be).
    pub removed: usize,
}

/// What an apply did (or, dry, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RetentionReport {
    pub dry_run: bool,
    /// The "now" the cutoffs were taken from.
    pub now: Timestamp,
    /// Every policy, in precedence order within a job (see
    /// [`Dlq::retention_policies`]).
    pub policies: Vec<PolicyOutcome>,
    /// Items removed in all.
    pub removed: usize,
    /// A dry run's count of which items it would remove, in what state:
    /// hand the report to [`Dlq::apply_retention_counted`] to remove
    /// exactly those.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<String>,
}

/// Conditions on `items AS i` (fixed SQL, each starting with AND) and
/// their values.
type Condition = (String, Vec<Value>);

const POLICY_COLUMNS: &str = "id, job_id, category, max_age_seconds, created_at, updated_at";

fn policy_row(row: &Row<'_>) -> Result<RetentionPolicy> {
    Ok(RetentionPolicy {
        id: row.i64(0)?,
        job_id: row.opt_text(1)?,
        category: row.opt_text(2)?.map(|c| c.parse()).transpose()?,
        max_age_seconds: row.opt_i64(3)?,
        created_at: row.ts(4)?,
        updated_at: row.ts(5)?,
    })
}

/// Every policy: a job's own first (by job), within each its category
/// policies before its any-category one, then the any-job policies the
/// same way. Reading down, the first row that matches an item governs it.
fn read_policies(conn: Conn<'_>) -> Result<Vec<RetentionPolicy>> {
    conn.collect(
        &format!(
            "SELECT {POLICY_COLUMNS} FROM retention_policies
             ORDER BY job_id IS NULL, job_id, category IS NULL, category"
        ),
        &[],
        policy_row,
    )
}

/// The policy of exactly this scope. `IS NOT DISTINCT FROM` compares NULL
/// with NULL, and the scope is unique (the V5 index).
fn find_policy(
    conn: Conn<'_>,
    job_id: Option<&str>,
    category: Option<Category>,
) -> Result<Option<RetentionPolicy>> {
    conn.row(
        &format!(
            "SELECT {POLICY_COLUMNS} FROM retention_policies
             WHERE job_id IS NOT DISTINCT FROM CAST(?1 AS TEXT)
                 AND category IS NOT DISTINCT FROM CAST(?2 AS TEXT)"
        ),
        vals![job_id, category.map(Category::as_str)],
        policy_row,
    )
}

/// Appends to `sql` (conditions on `items AS i`, each starting with AND)
/// the items `policy` governs among `all`: its scope, minus the scope of
/// each policy that wins over it. Only the qualifiers `policy` does not fix
/// are tested for those (within "job J", a (J, c) policy is "category c").
fn push_governed(
    policy: &RetentionPolicy,
    all: &[RetentionPolicy],
    sql: &mut String,
    values: &mut Vec<Value>,
) {
    push_scope(policy.job_id.as_deref(), policy.category, sql, values);
    for other in all {
        if !other.beats(policy) {
            continue;
        }
        let job = other.job_id.as_deref().filter(|_| policy.job_id.is_none());
        let category = other.category.filter(|_| policy.category.is_none());
        sql.push_str(" AND NOT (1 = 1");
        push_scope(job, category, sql, values);
        sql.push(')');
    }
}

fn push_scope(
    job_id: Option<&str>,
    category: Option<Category>,
    sql: &mut String,
    values: &mut Vec<Value>,
) {
    if let Some(job) = job_id {
        sql.push_str(" AND i.job_id = ?");
        values.push(Value::Text(job.to_string()));
    }
    if let Some(category) = category {
        sql.push_str(" AND ");
        sql.push_str(ITEM_CATEGORY_SQL);
        sql.push_str(" = ?");
        values.push(Value::Text(category.as_str().to_string()));
    }
}

/// A policy's cutoff at `now`: items last failed before it are older than
/// the max age (as `dlq purge` reads age). Held to the years the stored
/// form sorts in, so a huge max age removes nothing rather than everything.
fn cutoff(policy: &RetentionPolicy, now: Timestamp) -> Option<Timestamp> {
    policy
        .max_age_seconds
        .map(|seconds| now.minus_seconds(seconds).clamped_to_storage_range())
}

/// The conditions of the items `policy` removes at `now` (`None` for a
/// keep-forever policy, which removes nothing).
fn removal_condition(
    backend: Backend,
    policy: &RetentionPolicy,
    all: &[RetentionPolicy],
    now: Timestamp,
) -> Option<Condition> {
    let cutoff = cutoff(policy, now)?;
    // The age test first: with a job, (job_id, last_attempt) is one range
    // of items_job_last_attempt; without, of items_last_attempt.
    let mut sql = String::new();
    let mut values = Vec::new();
    push_governed(policy, all, &mut sql, &mut values);
    push_time_bound(
        backend,
        "i.last_attempt",
        Op::Lt,
        cutoff,
        &mut sql,
        &mut values,
    );
    Some((sql, values))
}

fn count_items(conn: Conn<'_>, condition: &str, values: &[Value]) -> Result<usize> {
    // `condition` is SQL built from fixed fragments; the values are bound.
    let sql = format!("SELECT COUNT(*) FROM items AS i WHERE 1 = 1{condition}");
    let bound: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
    let n = conn.row(&sql, &bound, |row| row.i64(0))?.unwrap_or(0);
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Each policy with the conditions of the items it removes at `now`
/// (`None`: kept forever), all built before anything is removed.
fn plan(conn: Conn<'_>, now: Timestamp) -> Result<Vec<(RetentionPolicy, Option<Condition>)>> {
    let policies = read_policies(conn)?;
    Ok(policies
        .iter()
        .map(|policy| {
            let condition = removal_condition(conn.backend(), policy, &policies, now);
            (policy.clone(), condition)
        })
        .collect())
}

/// Which items the planned removals take, in what state: each policy's
/// selection fingerprint (see [`super::selection`]) and the policies
/// themselves, as one token.
fn selection_of(
    conn: Conn<'_>,
    now: Timestamp,
    planned: &[(RetentionPolicy, Option<Condition>)],
) -> Result<String> {
    let mut token = now.to_storage();
    for (policy, condition) in planned {
        let (count, sum, max) = match condition {
            Some((condition, values)) => super::selection::fingerprint(conn, condition, values)?,
            None => (0, 0, 0),
        };
        token.push_str(&format!(
            ";{}:{:?}:{count}.{sum}.{max}",
            policy.id, policy.max_age_seconds
        ));
    }
    Ok(token)
}

fn outcome(policy: &RetentionPolicy, now: Timestamp, removed: usize) -> PolicyOutcome {
    PolicyOutcome {
        id: policy.id,
        job_id: policy.job_id.clone(),
        category: policy.category,
        max_age_seconds: policy.max_age_seconds,
        cutoff: cutoff(policy, now),
        removed,
    }
}

fn report(dry_run: bool, now: Timestamp, policies: Vec<PolicyOutcome>) -> RetentionReport {
    RetentionReport {
        dry_run,
        now,
        removed: policies.iter().map(|o| o.removed).sum(),
        policies,
        selection: None,
    }
}

impl Dlq {
    /// Every retention policy, in precedence order within a job (see
    /// [`RetentionPolicy`]; reading down, the first that matches an item
    /// governs it).
    pub fn retention_policies(&self) -> Result<Vec<RetentionPolicy>> {
        self.read(read_policies)
    }

    /// Every policy with the items it governs and the items an apply would
    /// remove at [`Dlq::age_now`], from one snapshot.
    pub fn retention_status(&self) -> Result<Vec<PolicyStatus>> {
        let now = self.age_now();
        self.read(|snapshot| {
            let policies = read_policies(snapshot)?;
            let mut status = Vec::with_capacity(policies.len());
            for policy in &policies {
                // Both counts in one pass over the governed items.
                let mut aged = String::new();
                let mut values = Vec::new();
                if let Some(cutoff) = cutoff(policy, now) {
                    push_time_bound(
                        snapshot.backend(),
                        "i.last_attempt",
                        Op::Lt,
                        cutoff,
                        &mut aged,
                        &mut values,
                    );
                } else {
                    // Keep forever: nothing would go.
                    aged.push_str(" AND 1 = 0");
                }
                let mut sql = format!(
                    "SELECT COUNT(*), COALESCE(SUM(CASE WHEN 1 = 1{aged} THEN 1 ELSE 0 END), 0)
                     FROM items AS i WHERE 1 = 1"
                );
                push_governed(policy, &policies, &mut sql, &mut values);
                let bound: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
                let (items, would_remove) = snapshot
                    .row(&sql, &bound, |row| Ok((row.i64(0)?, row.i64(1)?)))?
                    .unwrap_or_default();
                status.push(PolicyStatus {
                    policy: policy.clone(),
                    items: usize::try_from(items).unwrap_or(0),
                    would_remove: usize::try_from(would_remove).unwrap_or(0),
                });
            }
            Ok(status)
        })
    }

    /// Sets the policy of a scope (`None`: any job, any category): items it
    /// governs are removed by an apply once their last attempt is older
    /// than `max_age_seconds`, or kept forever with `None`. Replaces the
    /// scope's policy if there is one; a `retention_set` event records
    /// before and after (nothing is written when nothing changes). A job
    /// need not exist yet.
    pub fn set_retention(
        &self,
        job_id: Option<&str>,
        category: Option<Category>,
        max_age_seconds: Option<i64>,
    ) -> Result<RetentionChange> {
        if let Some(job) = job_id {
            crate::model::check_id(job)
                .map_err(|reason| Error::invalid_argument("job id", reason))?;
        }
        if let Some(seconds) = max_age_seconds.filter(|&s| s <= 0) {
            return Err(Error::invalid_argument(
                "max age",
                format!("{seconds} seconds: it must be more than 0"),
            ));
        }
        let (before, after) = self.write(|tx| {
            let conn = tx.sql();
            let before = find_policy(conn, job_id, category)?;
            if before
                .as_ref()
                .is_some_and(|b| b.max_age_seconds == max_age_seconds)
            {
                return Ok((before.clone(), before));
            }
            let now = tx.now();
            match &before {
                Some(policy) => conn.exec(
                    "UPDATE retention_policies SET max_age_seconds = ?1, updated_at = ?2 WHERE id = ?3",
                    vals![max_age_seconds, now, policy.id],
                )?,
                None => conn.exec(
                    "INSERT INTO retention_policies (job_id, category, max_age_seconds, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?4)",
                    vals![job_id, category.map(Category::as_str), max_age_seconds, now],
                )?,
            };
            let after = find_policy(conn, job_id, category)?;
            retention_event(tx, job_id, category, before.as_ref(), after.as_ref())?;
            Ok((before, after))
        })?;
        self.change_with_preview(before, after)
    }

    /// Removes the policy of a scope, with a `retention_set` event (after:
    /// null); its items fall to the next less specific policy, if any.
    /// [`Error::RetentionPolicyNotFound`] when the scope has none.
    pub fn remove_retention(
        &self,
        job_id: Option<&str>,
        category: Option<Category>,
    ) -> Result<RetentionChange> {
        let before = self.write(|tx| {
            let conn = tx.sql();
            let Some(before) = find_policy(conn, job_id, category)? else {
                return Err(Error::RetentionPolicyNotFound {
                    scope: scope_text(job_id, category),
                });
            };
            conn.exec(
                "DELETE FROM retention_policies WHERE id = ?1",
                vals![before.id],
            )?;
            retention_event(tx, job_id, category, Some(&before), None)?;
            Ok(before)
        })?;
        self.change_with_preview(Some(before), None)
    }

    fn change_with_preview(
        &self,
        before: Option<RetentionPolicy>,
        after: Option<RetentionPolicy>,
    ) -> Result<RetentionChange> {
        let preview = self.apply_retention(true)?;
        let would_remove = after
            .as_ref()
            .and_then(|a| preview.policies.iter().find(|p| p.id == a.id))
            .map_or(0, |p| p.removed);
        Ok(RetentionChange {
            before,
            after,
            would_remove,
            would_remove_total: preview.removed,
        })
    }

    /// Applies every policy at [`Dlq::age_now`]: see
    /// [`Dlq::apply_retention_at`].
    pub fn apply_retention(&self, dry_run: bool) -> Result<RetentionReport> {
        self.apply_retention_at(self.age_now(), dry_run)
    }

    /// Removes, for each policy with a max age, the items it governs whose
    /// last attempt is before `now` minus that age, each with a `purged`
    /// event whose detail names the policy (`retention_policy`: id, job_id
    /// and category when not "any", max_age_seconds) and the cutoff. All in
    /// one transaction: all of it happens or none. Keep-forever policies
    /// remove nothing (and shadow less specific ones); with no policies
    /// nothing is removed. With `dry_run`, counts the same items from one
    /// snapshot and changes nothing.
    pub fn apply_retention_at(&self, now: Timestamp, dry_run: bool) -> Result<RetentionReport> {
        if dry_run {
            return self.read(|snapshot| {
                let mut outcomes = Vec::new();
                let planned = plan(snapshot, now)?;
                for (policy, condition) in &planned {
                    let removed = match condition {
                        Some((condition, values)) => count_items(snapshot, condition, values)?,
                        None => 0,
                    };
                    outcomes.push(outcome(policy, now, removed));
                }
                let mut report = report(true, now, outcomes);
                report.selection = Some(selection_of(snapshot, now, &planned)?);
                Ok(report)
            });
        }
        self.apply_retention_checked(now, None)
    }

    /// Removes exactly the items a dry run of the retention counted
    /// (`counted`, from [`Dlq::apply_retention`] with `dry_run`), at the
    /// same now, or nothing: [`crate::Error::SelectionChanged`] when any of
    /// them changed, went, or others came to be removed meanwhile (a
    /// policy set, an item failing again), so `dlq retention apply`
    /// removes what it asked about.
    pub fn apply_retention_counted(&self, counted: &RetentionReport) -> Result<RetentionReport> {
        self.apply_retention_checked(counted.now, Some(counted))
    }

    fn apply_retention_checked(
        &self,
        now: Timestamp,
        counted: Option<&RetentionReport>,
    ) -> Result<RetentionReport> {
        // The policies are read inside the write transaction: a policy set
        // meanwhile is either applied whole or not at all.
        let report = self.write_bulk(|tx| {
            if let Some(counted) = counted {
                let planned = plan(tx.sql(), now)?;
                if counted.selection.as_deref() != Some(&selection_of(tx.sql(), now, &planned)?) {
                    let now_count = planned
                        .iter()
                        .filter_map(|(_, c)| c.as_ref())
                        .map(|(condition, values)| count_items(tx.sql(), condition, values))
                        .sum::<Result<usize>>()?;
                    return Err(crate::Error::SelectionChanged {
                        counted: counted.removed as u64,
                        now: now_count as u64,
                    });
                }
            }
            let mut outcomes = Vec::new();
            for (policy, condition) in plan(tx.sql(), now)? {
                let removed = match condition {
                    Some((condition, values)) => delete_items(
                        tx,
                        &condition,
                        &values,
                        EventKind::Purged,
                        serde_json::json!({
                            "cutoff": cutoff(&policy, now),
                            // json_patch drops nulls: an absent job_id or
                            // category is "any".
                            "retention_policy": {
                                "id": policy.id,
                                "job_id": policy.job_id,
                                "category": policy.category,
                                "max_age_seconds": policy.max_age_seconds,
                            },
                        }),
                    )?,
                    None => 0,
                };
                outcomes.push(outcome(&policy, now, removed));
            }
            Ok(report(false, now, outcomes))
        })?;
        if report.removed > 0 {
            self.release_free_pages();
        }
        Ok(report)
    }
}

/// A `retention_set` event: the scope, and the policy before and after
/// (`null`: none).
fn retention_event(
    tx: &WriteTx<'_>,
    job_id: Option<&str>,
    category: Option<Category>,
    before: Option<&RetentionPolicy>,
    after: Option<&RetentionPolicy>,
) -> Result<()> {
    let keep = |policy: Option<&RetentionPolicy>| {
        policy.map(|p| serde_json::json!({"id": p.id, "max_age_seconds": p.max_age_seconds}))
    };
    tx.event(
        EventKind::RetentionSet,
        job_id,
        None,
        serde_json::json!({
            "job_id": job_id,
            "category": category,
            "before": keep(before),
            "after": keep(after),
        }),
    )
}
