//! Items: reading one ([`Dlq::get`]), filtered listings with keyset paging
//! (streamed a page at a time, never collected whole: [`Dlq::list`],
//! [`Dlq::items`]), and the changes made to one item by hand: removing it
//! and marking its flags, each leaving a row in `events`. Adding and merging
//! items is write.rs (one add) and group.rs (concurrent adds).

use super::columns::{columns, sql};
use super::filter_sql::{SearchPlan, Takes};
use super::rows::{self, StoredItem};
use super::sql::SqlValue as Value;
use super::sql::{vals, Val};
use super::EventKind;
use super::{Category, Dlq};
use crate::error::{Error, Result};
use crate::model::DeadLetteredItem;
use crate::time::Timestamp;
use serde::Serialize;
use std::collections::VecDeque;

/// Which items a listing, export or purge takes. Empty means all.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    pub job_id: Option<String>,
    /// Only items whose reprocess_eligible is this.
    pub eligible: Option<bool>,
    /// Only items whose manual_review_required is this.
    pub manual_review: Option<bool>,
    /// Only items whose last_attempt is at or after this.
    pub since: Option<Timestamp>,
    /// Only items whose last_attempt is before this.
    pub until: Option<Timestamp>,
    /// A filter-language expression (see [`crate::filter`]): error types,
    /// signatures, messages, item_data fields and anything else.
    pub expression: Option<crate::filter::Expr>,
    /// Only items whose row key is at most this: a selection frozen when
    /// it was counted ([`crate::store::Selection::max_key`]), so items
    /// stored later are not taken.
    pub max_key: Option<i64>,
    /// Only items leased to this retry run: the confirmed set a run was
    /// given ([`Dlq::lease_selection`]).
    pub leased_to: Option<String>,
}

/// Where the next page starts: after this (last_attempt, row key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageCursor {
    /// The last row's sort value: its last_attempt (listings) or item_id
    /// (whole items of one job).
    pub sort_key: String,
    /// The last row's key (the tie-breaker, and the order of whole items
    /// across jobs).
    pub key: i64,
}

/// One page of a listing, newest last_attempt first.
#[derive(Clone, Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<PageCursor>,
}

/// One row of a listing: the columns of the `item_summary` view.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ItemSummary {
    pub job_id: String,
    pub item_id: String,
    pub failure_count: u32,
    pub first_attempt: Timestamp,
    pub last_attempt: Timestamp,
    pub error_signature: String,
    pub reprocess_eligible: bool,
    pub manual_review_required: bool,
    pub worktree_path: Option<String>,
    pub error_type: Option<String>,
    pub exit_code: Option<i64>,
    pub error_message: Option<String>,
    /// The failure category of the last attempt's error type.
    pub category: Category,
    /// The failure family of the last attempt (`dlq families`); `None`
    /// until it is mined (`dlq families rebuild`).
    pub family_id: Option<i64>,
}

impl ListFilter {
    /// How this filter's message searches are best run on `conn` now, in
    /// a query that `takes` a page or every match ([`SearchPlan::for_expr`]):
    /// for [`ListFilter::push_conditions_on`].
    pub(super) fn search_plan(
        &self,
        conn: super::sql::Conn<'_>,
        takes: super::filter_sql::Takes,
    ) -> Result<SearchPlan> {
        match &self.expression {
            Some(expression) => SearchPlan::for_expr(conn, expression, takes),
            None => Ok(SearchPlan::default()),
        }
    }

    /// Appends this filter's conditions on `items AS i` to `sql` in
    /// `backend`'s SQL, with their values to `values`, its message
    /// searches written as `plan` says. Only fixed SQL text is appended;
    /// every value is a parameter.
    pub(super) fn push_conditions_on(
        &self,
        backend: super::Backend,
        now: Timestamp,
        plan: &SearchPlan,
        sql: &mut String,
        values: &mut Vec<Value>,
    ) {
        if let Some(job) = &self.job_id {
            sql.push_str(" AND i.job_id = ?");
            values.push(Value::Text(job.clone()));
        }
        if let Some(eligible) = self.eligible {
            sql.push_str(" AND i.reprocess_eligible = ?");
            values.push(Value::Integer(i64::from(eligible)));
        }
        if let Some(manual) = self.manual_review {
            sql.push_str(" AND i.manual_review_required = ?");
            values.push(Value::Integer(i64::from(manual)));
        }
        for (bound, op) in [
            (self.since, crate::filter::Op::Ge),
            (self.until, crate::filter::Op::Lt),
        ] {
            if let Some(time) = bound {
                super::filter_sql::push_time_bound(
                    backend,
                    "i.last_attempt",
                    op,
                    time,
                    sql,
                    values,
                );
            }
        }
        if let Some(max_key) = self.max_key {
            sql.push_str(" AND i.id <= ?");
            values.push(Value::Integer(max_key));
        }
        if let Some(run) = &self.leased_to {
            sql.push_str(" AND i.lease_owner = ?");
            values.push(Value::Text(run.clone()));
        }
        if let Some(expression) = &self.expression {
            let condition = expression.to_sql_planned(backend, now, plan);
            sql.push_str(" AND ");
            sql.push_str(&condition.sql);
            values.extend(condition.values);
        }
    }
}

columns! {
    /// The columns of a listing row: an [`ItemSummary`] and its row key,
    /// from `items i` with its last attempt joined as `f`.
    mod summary_columns {
        KEY = "i.id",
        JOB_ID = "i.job_id",
        ITEM_ID = "i.item_id",
        FAILURE_COUNT = "i.failure_count",
        FIRST_ATTEMPT = "i.first_attempt" pg "dlq_ts_text(i.first_attempt, i.first_attempt_ns)",
        LAST_ATTEMPT = "i.last_attempt" pg "dlq_ts_text(i.last_attempt, i.last_attempt_ns)",
        ERROR_SIGNATURE = "i.error_signature",
        REPROCESS_ELIGIBLE = "i.reprocess_eligible",
        MANUAL_REVIEW_REQUIRED = "i.manual_review_required",
        WORKTREE_PATH = "(SELECT w.worktree_path FROM worktree_artifacts w WHERE w.item_key = i.id)",
        ERROR_TYPE = "f.error_type",
        EXIT_CODE = "f.exit_code",
        ERROR_MESSAGE = "f.error_message",
        FAMILY_ID = "i.family_id",
        // categories::ITEM_CATEGORY_SQL, spelt out (the macro takes
        // literals; a unit test keeps them equal).
        CATEGORY = "COALESCE((SELECT c.category FROM error_categories AS c WHERE c.error_type = i.last_error_type), 'unclassified')",
    }
}

columns! {
    /// The columns of a page of whole items: the keys to load them by.
    mod item_key_columns {
        KEY = "i.id",
        ITEM_ID = "i.item_id",
        JOB_ID = "i.job_id",
    }
}

/// Joins the last attempt of each item `i` as `f`.
fn last_failure_join(backend: super::Backend) -> String {
    format!(
        "LEFT JOIN failure_history f ON f.id = {}",
        super::counters::last_attempt_select(backend, "id", "i.id")
    )
}

/// The order a listing walks in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// Newest last_attempt first (then newest row): for screens. A merge
    /// makes an item's last_attempt newer, which can move it behind a walk's
    /// cursor.
    Newest,
    /// On keys no merge changes: one job's items by item_id, several jobs'
    /// by row key. A walk sees every item that exists from its start to its
    /// end exactly once.
    Stable,
    /// Most failures first (then newest row).
    MostFailures,
}

/// How a screen's page of items is sorted ([`Dlq::list_page_sorted`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortBy {
    /// Newest last_attempt first.
    #[default]
    LastAttempt,
    /// Most failures first.
    FailureCount,
}

/// A page of `select` (a SELECT from `items i`, without WHERE) by
/// `filter` in `order`, after `after`.
#[allow(clippy::too_many_arguments)]
fn page_query(
    backend: super::Backend,
    select: &str,
    filter: &ListFilter,
    plan: &SearchPlan,
    now: Timestamp,
    after: Option<&PageCursor>,
    limit: usize,
    order: Order,
) -> (String, Vec<Value>) {
    let mut sql = format!("{select} WHERE 1 = 1");
    let mut values = Vec::new();
    filter.push_conditions_on(backend, now, plan, &mut sql, &mut values);
    let by_item_id = filter.job_id.is_some();
    match (order, after) {
        (Order::Newest, Some(cursor)) => {
            sql.push_str(" AND (i.last_attempt < ? OR (i.last_attempt = ? AND i.id < ?))");
            values.push(Value::Text(cursor.sort_key.clone()));
            values.push(Value::Text(cursor.sort_key.clone()));
            values.push(Value::Integer(cursor.key));
        }
        (Order::MostFailures, Some(cursor)) => {
            let count: i64 = cursor.sort_key.parse().unwrap_or(i64::MAX);
            sql.push_str(" AND (i.failure_count < ? OR (i.failure_count = ? AND i.id < ?))");
            values.push(Value::Integer(count));
            values.push(Value::Integer(count));
            values.push(Value::Integer(cursor.key));
        }
        (Order::Stable, Some(cursor)) if by_item_id => {
            sql.push_str(" AND i.item_id > ?");
            values.push(Value::Text(cursor.sort_key.clone()));
        }
        (Order::Stable, Some(cursor)) => {
            sql.push_str(" AND i.id > ?");
            values.push(Value::Integer(cursor.key));
        }
        (_, None) => {}
    }
    sql.push_str(match order {
        Order::Newest => " ORDER BY i.last_attempt DESC, i.id DESC LIMIT ?",
        Order::MostFailures => " ORDER BY i.failure_count DESC, i.id DESC LIMIT ?",
        Order::Stable if by_item_id => " ORDER BY i.item_id LIMIT ?",
        Order::Stable => " ORDER BY i.id LIMIT ?",
    });
    values.push(Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
    (sql, values)
}

fn cursor_of(last_attempt: &Timestamp, key: i64) -> PageCursor {
    PageCursor {
        sort_key: last_attempt.to_storage(),
        key,
    }
}

/// What `mark` should change; `None` leaves a flag as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkRequest {
    pub reprocess_eligible: Option<bool>,
    pub manual_review_required: Option<bool>,
}

/// An item's flags after [`Dlq::mark`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Marked {
    pub job_id: String,
    pub item_id: String,
    pub reprocess_eligible: bool,
    pub manual_review_required: bool,
}

impl Dlq {
    /// One item, whole. Without a job, the id must be unique across jobs.
    pub fn get(&self, job_id: Option<&str>, item_id: &str) -> Result<DeadLetteredItem> {
        self.read(|conn| {
            let job = match job_id {
                Some(job) => job.to_string(),
                None => resolve_job(conn, item_id)?,
            };
            rows::load_item(conn, &job, item_id)?
                .map(|stored| stored.item)
                .ok_or_else(|| Error::ItemNotFound {
                    job_id: Some(job),
                    item_id: item_id.to_string(),
                })
        })
    }

    /// The job holding `item_id`: [`Error::ItemNotFound`] when none does,
    /// [`Error::AmbiguousItem`] when several do.
    pub fn job_of(&self, item_id: &str) -> Result<String> {
        self.read(|conn| resolve_job(conn, item_id))
    }

    /// One page of summaries, newest last_attempt first (for screens: an
    /// item merged between two pages can move behind the cursor; a walk
    /// that must see every item is [`Dlq::list`]).
    pub fn list_page(
        &self,
        filter: &ListFilter,
        after: Option<&PageCursor>,
        limit: usize,
    ) -> Result<Page<ItemSummary>> {
        self.summary_page(filter, after, limit, Order::Newest)
    }

    /// One page of summaries in a screen's chosen order (see
    /// [`Dlq::list_page`]).
    pub fn list_page_sorted(
        &self,
        filter: &ListFilter,
        sort: SortBy,
        after: Option<&PageCursor>,
        limit: usize,
    ) -> Result<Page<ItemSummary>> {
        let order = match sort {
            SortBy::LastAttempt => Order::Newest,
            SortBy::FailureCount => Order::MostFailures,
        };
        self.summary_page(filter, after, limit, order)
    }

    fn summary_page(
        &self,
        filter: &ListFilter,
        after: Option<&PageCursor>,
        limit: usize,
        order: Order,
    ) -> Result<Page<ItemSummary>> {
        use summary_columns as c;
        let backend = self.backend();
        let columns = c::list(backend);
        let select = format!(
            "SELECT {columns} FROM items i {}",
            last_failure_join(backend)
        );
        let plan = self.read(|conn| filter.search_plan(conn, Takes::Page))?;
        let (sql, values) = page_query(
            backend,
            &select,
            filter,
            &plan,
            self.age_now(),
            after,
            limit,
            order,
        );
        let values: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
        let mut keys = Vec::new();
        let items = self.read(|conn| {
            conn.collect(&sql, &values, |row| {
                keys.push(row.i64(c::KEY)?);
                Ok(ItemSummary {
                    job_id: row.text(c::JOB_ID)?,
                    item_id: row.text(c::ITEM_ID)?,
                    failure_count: u32::try_from(row.i64(c::FAILURE_COUNT)?).unwrap_or(u32::MAX),
                    first_attempt: row.ts(c::FIRST_ATTEMPT)?,
                    last_attempt: row.ts(c::LAST_ATTEMPT)?,
                    error_signature: row.text(c::ERROR_SIGNATURE)?,
                    reprocess_eligible: row.bool(c::REPROCESS_ELIGIBLE)?,
                    manual_review_required: row.bool(c::MANUAL_REVIEW_REQUIRED)?,
                    worktree_path: row.opt_text(c::WORKTREE_PATH)?,
                    error_type: row.opt_text(c::ERROR_TYPE)?,
                    exit_code: row.opt_i64(c::EXIT_CODE)?,
                    error_message: row.opt_text(c::ERROR_MESSAGE)?,
                    category: row
                        .text(c::CATEGORY)?
                        .parse()
                        .unwrap_or(Category::Unclassified),
                    family_id: row.opt_i64(c::FAMILY_ID)?,
                })
            })
        })?;
        let next = match (items.last(), keys.last()) {
            (Some(last), Some(&key)) if items.len() == limit => Some(match order {
                Order::Newest => cursor_of(&last.last_attempt, key),
                Order::MostFailures => PageCursor {
                    sort_key: last.failure_count.to_string(),
                    key,
                },
                Order::Stable => PageCursor {
                    sort_key: last.item_id.clone(),
                    key,
                },
            }),
            _ => None,
        };
        Ok(Page { items, next })
    }

    /// Every matching summary, fetched a page at a time on keys that no
    /// merge changes (one job's items by item_id, several jobs' in the
    /// order they were stored): a walk sees every item that exists from its
    /// start to its end exactly once, however many adds and merges run
    /// meanwhile, and holds no transaction open between pages (which would
    /// keep the WAL from being reset).
    pub fn list(&self, filter: ListFilter) -> SummaryIter {
        SummaryIter {
            pager: Pager::new(self.clone(), filter),
            order: Order::Stable,
        }
    }

    /// Matching summaries newest last_attempt first, a page at a time: what
    /// a screen shows (`dlq list`). An item merged while the walk is under
    /// way can move behind it and be missed; [`Dlq::list`] cannot miss one.
    pub fn list_newest(&self, filter: ListFilter) -> SummaryIter {
        SummaryIter {
            pager: Pager::new(self.clone(), filter),
            order: Order::Newest,
        }
    }

    /// All matching items, whole, fetched a page at a time (for export): one
    /// job's in item_id order, several jobs' in the order they were stored.
    pub fn items(&self, filter: ListFilter) -> ItemIter {
        ItemIter {
            pager: Pager::new(self.clone(), filter),
        }
    }

    /// Row keys and whole items for one page (used by [`ItemIter`]).
    fn item_page(
        &self,
        filter: &ListFilter,
        after: Option<&PageCursor>,
        limit: usize,
    ) -> Result<Page<JobItem>> {
        use item_key_columns as c;
        // Whole items go in storage order, not newest first: one job's by
        // item_id (its unique index), all jobs' by row key. Reading a large
        // database in last_attempt order jumps all over the file (measured:
        // an export of 1,000,000 items took 236 s that way).
        let plan = self.read(|conn| filter.search_plan(conn, Takes::Page))?;
        let (sql, values) = page_query(
            self.backend(),
            sql!("SELECT ", c::LIST, " FROM items i"),
            filter,
            &plan,
            self.age_now(),
            after,
            limit,
            Order::Stable,
        );
        let values: Vec<Val<'_>> = values.iter().map(Val::from_value).collect();
        // One read transaction for the page: a consistent view, and one lock
        // instead of one per statement.
        self.read(|read| {
            let keys = read.collect(&sql, &values, |row| {
                Ok((
                    row.i64(c::KEY)?,
                    row.text(c::ITEM_ID)?,
                    row.text(c::JOB_ID)?,
                ))
            })?;
            let next = match keys.last() {
                Some((key, item_id, _)) if keys.len() == limit => Some(PageCursor {
                    sort_key: item_id.clone(),
                    key: *key,
                }),
                _ => None,
            };
            let mut items = Vec::with_capacity(keys.len());
            for (key, _, job_id) in keys {
                // An item deleted between the two queries is simply skipped.
                if let Some(StoredItem {
                    item,
                    marked,
                    version,
                    family_id,
                    key,
                }) = rows::load_item_by_key(read, key)?
                {
                    items.push(JobItem {
                        job_id,
                        item,
                        marked,
                        version,
                        family_id,
                        key,
                    });
                }
            }
            Ok(Page { items, next })
        })
    }

    /// Whether the database holds no items at all.
    pub fn is_empty(&self) -> Result<bool> {
        self.read(|conn| {
            Ok(conn
                .row("SELECT 1 FROM items LIMIT 1", &[], |_| Ok(()))?
                .is_none())
        })
    }

    /// Removes one item (recorded as a `removed` event).
    pub fn remove(&self, job_id: Option<&str>, item_id: &str) -> Result<()> {
        self.write(|tx| {
            let job = match job_id {
                Some(job) => job.to_string(),
                None => resolve_job(tx.sql(), item_id)?,
            };
            tx.lock_job(&job)?;
            let signature = tx.sql().row(
                "DELETE FROM items WHERE job_id = ?1 AND item_id = ?2 RETURNING error_signature",
                vals![&job, item_id],
                |row| row.text(0),
            )?;
            let Some(signature) = signature else {
                return Err(Error::ItemNotFound {
                    job_id: Some(job),
                    item_id: item_id.to_string(),
                });
            };
            tx.event(
                EventKind::Removed,
                Some(&job),
                Some(item_id),
                serde_json::json!({"error_signature": signature}),
            )
        })
    }

    /// Sets flags by hand. A flag set here survives later merges until it is
    /// marked again.
    pub fn mark(
        &self,
        job_id: Option<&str>,
        item_id: &str,
        request: &MarkRequest,
    ) -> Result<Marked> {
        if request.reprocess_eligible.is_none() && request.manual_review_required.is_none() {
            return Err(Error::invalid_argument("mark", "nothing to change"));
        }
        self.write(|tx| {
            let job = match job_id {
                Some(job) => job.to_string(),
                None => resolve_job(tx.sql(), item_id)?,
            };
            tx.lock_job(&job)?;
            let flags = tx.sql().row(
                "UPDATE items SET
                     reprocess_eligible = COALESCE(?3, reprocess_eligible),
                     reprocess_eligible_marked = CASE WHEN ?3 IS NULL THEN reprocess_eligible_marked ELSE 1 END,
                     manual_review_required = COALESCE(?4, manual_review_required),
                     manual_review_required_marked = CASE WHEN ?4 IS NULL THEN manual_review_required_marked ELSE 1 END
                 WHERE job_id = ?1 AND item_id = ?2
                 RETURNING reprocess_eligible, manual_review_required",
                vals![&job, item_id, request.reprocess_eligible, request.manual_review_required],
                |row| Ok((row.bool(0)?, row.bool(1)?)),
            )?;
            let Some((reprocess_eligible, manual_review_required)) = flags else {
                return Err(Error::ItemNotFound {
                    job_id: Some(job),
                    item_id: item_id.to_string(),
                });
            };
            tx.event(
                EventKind::Marked,
                Some(&job),
                Some(item_id),
                serde_json::json!({
                    "reprocess_eligible": request.reprocess_eligible,
                    "manual_review_required": request.manual_review_required,
                }),
            )?;
            Ok(Marked {
                job_id: job,
                item_id: item_id.to_string(),
                reprocess_eligible,
                manual_review_required,
            })
        })
    }
}

/// The only job holding `item_id`, or an error naming them all.
pub(super) fn resolve_job(conn: super::sql::Conn<'_>, item_id: &str) -> Result<String> {
    // One probe of the (job_id, item_id) index per job: no index on
    // item_id alone is needed (and imports do not pay for one).
    let jobs = conn.collect(
        "SELECT j.job_id FROM jobs j
         WHERE EXISTS (SELECT 1 FROM items i WHERE i.job_id = j.job_id AND i.item_id = ?1)
         ORDER BY j.job_id",
        vals![item_id],
        |row| row.text(0),
    )?;
    match jobs.len() {
        0 => Err(Error::ItemNotFound {
            job_id: None,
            item_id: item_id.to_string(),
        }),
        1 => Ok(jobs.into_iter().next().unwrap_or_default()),
        _ => Err(Error::AmbiguousItem {
            item_id: item_id.to_string(),
            jobs,
        }),
    }
}

/// Walks a filtered listing a page at a time.
struct Pager<T> {
    dlq: Dlq,
    filter: ListFilter,
    buffer: VecDeque<T>,
    cursor: Option<PageCursor>,
    done: bool,
}

const PAGE_SIZE: usize = 256;

impl<T> Pager<T> {
    fn new(dlq: Dlq, filter: ListFilter) -> Self {
        Pager {
            dlq,
            filter,
            buffer: VecDeque::new(),
            cursor: None,
            done: false,
        }
    }

    fn next_with(
        &mut self,
        fetch: impl Fn(&Dlq, &ListFilter, Option<&PageCursor>, usize) -> Result<Page<T>>,
    ) -> Option<Result<T>> {
        loop {
            if let Some(item) = self.buffer.pop_front() {
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            match fetch(&self.dlq, &self.filter, self.cursor.as_ref(), PAGE_SIZE) {
                Ok(page) => {
                    self.done = page.next.is_none();
                    self.cursor = page.next;
                    self.buffer.extend(page.items);
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Streams item summaries; see [`Dlq::list`] and [`Dlq::list_newest`].
pub struct SummaryIter {
    pager: Pager<ItemSummary>,
    order: Order,
}

impl Iterator for SummaryIter {
    type Item = Result<ItemSummary>;
    fn next(&mut self) -> Option<Self::Item> {
        let order = self.order;
        self.pager
            .next_with(|dlq, filter, after, limit| dlq.summary_page(filter, after, limit, order))
    }
}

/// A whole item and the job it belongs to.
#[derive(Clone, Debug)]
pub struct JobItem {
    pub job_id: String,
    pub item: DeadLetteredItem,
    /// The flags a person set with `dlq mark` (a merge keeps them; a copy
    /// carries them).
    pub marked: crate::model::MarkedFlags,
    /// Its change counter as read (`items.version`, bumped by every change
    /// to the item): what takes it later checks it still has.
    pub version: i64,
    /// Its failure family as read (`None` until mined).
    pub family_id: Option<i64>,
    /// Its row key as read: an item removed and stored again under the
    /// same name is a new row, which [`Dlq::take_unchanged`] must not
    /// take for the one read.
    pub key: i64,
}

/// Streams whole items; see [`Dlq::items`].
pub struct ItemIter {
    pager: Pager<JobItem>,
}

impl Iterator for ItemIter {
    type Item = Result<JobItem>;
    fn next(&mut self) -> Option<Self::Item> {
        self.pager.next_with(Dlq::item_page)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_listing_category_is_the_filter_category() {
        let listed = super::summary_columns::LIST;
        assert!(listed.ends_with(super::super::categories::ITEM_CATEGORY_SQL));
    }
}
