//! The legacy statistics (`dlq stats`, `dlq show`): totals, eligibility,
//! manual review, oldest and newest item, items per signature and per last
//! error type, for one job or all. Everything comes from the counters (see
//! counters.rs) and two index lookups per job.
//!
//! [`Dlq::top_families`] gives the largest failure families of the same
//! scope, which the table leads with (counted on the items_family index
//! when asked: families have no counters).
//!
//! [`Dlq::stats_stream`] hands the figures over piece by piece in key order,
//! so that `dlq stats --json` with a million signatures holds none of them:
//! memory stays flat in the number of signatures and jobs. [`Dlq::stats`]
//! and [`Dlq::job_stats`] collect the same pieces into [`Stats`].

use super::sql::{vals, Backend, Conn, Row};
use super::{Dlq, FamilyGroups};
use crate::error::{Error, Result};
use crate::time::Timestamp;
use serde::Serialize;
use std::collections::BTreeMap;

/// The legacy DLQ statistics.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Stats {
    pub total_items: i64,
    pub eligible_for_reprocess: i64,
    pub requiring_manual_review: i64,
    /// The earliest first_attempt.
    pub oldest_item: Option<Timestamp>,
    /// The latest last_attempt.
    pub newest_item: Option<Timestamp>,
    /// Items per error signature.
    pub error_categories: BTreeMap<String, i64>,
    /// Items per error type of their last attempt (not a legacy key).
    pub error_types: BTreeMap<String, i64>,
    /// Mean failure_count (not a legacy key).
    pub average_failure_count: f64,
    /// Sum of failure_count.
    #[serde(skip)]
    pub failure_count_sum: i64,
}

/// The figures of [`Stats`] that are not per signature or error type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsHead {
    pub total_items: i64,
    pub eligible_for_reprocess: i64,
    pub requiring_manual_review: i64,
    pub oldest_item: Option<Timestamp>,
    pub newest_item: Option<Timestamp>,
    pub average_failure_count: f64,
    pub failure_count_sum: i64,
}

/// One piece of [`Dlq::stats_stream`], in this order for each statistics
/// object: `Head`, its `Signature`s (by signature), its `ErrorType`s (by
/// name), the nested objects of each job (all jobs only), `Close`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StatsPart<'a> {
    /// A statistics object begins: of all jobs (`None`) or of one.
    Head {
        job_id: Option<&'a str>,
        head: &'a StatsHead,
    },
    /// Items with this error signature.
    Signature(&'a str, i64),
    /// Items whose last attempt has this error type.
    ErrorType(&'a str, i64),
    /// The object opened by the last unclosed `Head` ends.
    Close,
}

fn average(sum: i64, count: i64) -> f64 {
    if count == 0 {
        0.0
    } else {
        // Rounded to 3 places: a stable figure in JSON output.
        (sum as f64 / count as f64 * 1000.0).round() / 1000.0
    }
}

/// The head from a row with the columns total, eligible, manual, failures,
/// oldest and newest, in that order.
fn head_of(row: &Row<'_>) -> Result<StatsHead> {
    let total = row.i64(0)?;
    let failures = row.i64(3)?;
    Ok(StatsHead {
        total_items: total,
        eligible_for_reprocess: row.i64(1)?,
        requiring_manual_review: row.i64(2)?,
        oldest_item: row.opt_ts(4)?,
        newest_item: row.opt_ts(5)?,
        average_failure_count: average(failures, total),
        failure_count_sum: failures,
    })
}

/// A job's earliest first attempt and latest last attempt, as two
/// columns (`oldest`, `newest`) of a SELECT on `jobs j`: two index
/// lookups. On PostgreSQL to the nanosecond (the time and the nanoseconds
/// beside it, read back as the exact text).
pub(super) fn span_columns(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => {
            "(SELECT MIN(first_attempt) FROM items i WHERE i.job_id = j.job_id) AS oldest,
             (SELECT MAX(last_attempt) FROM items i WHERE i.job_id = j.job_id) AS newest"
        }
        Backend::Postgres => {
            "(SELECT dlq_ts_text(first_attempt, first_attempt_ns) FROM items i
                 WHERE i.job_id = j.job_id ORDER BY first_attempt, first_attempt_ns LIMIT 1) AS oldest,
             (SELECT dlq_ts_text(last_attempt, last_attempt_ns) FROM items i
                 WHERE i.job_id = j.job_id ORDER BY last_attempt DESC, last_attempt_ns DESC LIMIT 1) AS newest"
        }
    }
}

/// A job's head, or None when there is no such job.
fn job_head(conn: Conn<'_>, job_id: &str) -> Result<Option<StatsHead>> {
    let sql = format!(
        "SELECT item_count, eligible_count, manual_review_count, failure_count_sum, {}
         FROM jobs j WHERE job_id = ?1",
        span_columns(conn.backend())
    );
    conn.row(&sql, vals![job_id], head_of)
}

/// Streams the rows of a fixed statement whose columns are a key and a
/// count.
fn each_count(
    conn: Conn<'_>,
    sql: &str,
    job_id: Option<&str>,
    mut f: impl FnMut(&str, i64) -> Result<()>,
) -> Result<()> {
    conn.each(sql, vals![job_id], |row| f(&row.text(0)?, row.i64(1)?))
}

/// How many rows one page of [`every_job`]'s readers holds (in unit tests
/// a few, so that jobs and their counts straddle pages).
const PAGE: i64 = if cfg!(test) { 3 } else { 2_000 };

/// Every job's statistics object, by job id: the heads, signatures and
/// error types of all jobs read as three streams in (job, key) order, a
/// page at a time (keyset pages: a seek on the primary key each), and
/// merged. A few round trips per page instead of three queries per job,
/// which on PostgreSQL cost a round trip each (measured: 0.6 s for 1,000
/// jobs of 2 items), and memory bounded by the page whatever the shape.
fn every_job(conn: Conn<'_>, f: &mut impl FnMut(StatsPart<'_>) -> Result<()>) -> Result<()> {
    let heads_sql = |filter: &str| {
        format!(
            "SELECT item_count, eligible_count, manual_review_count, failure_count_sum, {},
                 job_id
             FROM jobs j {filter} ORDER BY job_id LIMIT {PAGE}",
            span_columns(conn.backend())
        )
    };
    let (first, next) = (heads_sql(""), heads_sql("WHERE job_id > ?1"));
    let mut signatures = KeyedPages::new("signature_counts", "error_signature");
    let mut types = KeyedPages::new("error_type_counts", "error_type");
    let mut after: Option<String> = None;
    loop {
        let read = |row: &Row<'_>| Ok((row.text(6)?, head_of(row)?));
        let heads = match &after {
            None => conn.collect(&first, &[], read)?,
            Some(job) => conn.collect(&next, vals![job], read)?,
        };
        for (job, head) in &heads {
            f(StatsPart::Head {
                job_id: Some(job),
                head,
            })?;
            signatures.each_of(conn, job, |key, n| f(StatsPart::Signature(key, n)))?;
            types.each_of(conn, job, |key, n| f(StatsPart::ErrorType(key, n)))?;
            f(StatsPart::Close)?;
        }
        let full = heads.len() as i64 == PAGE;
        match heads.into_iter().last() {
            Some((job, _)) if full => after = Some(job),
            _ => return Ok(()),
        }
    }
}

/// One counter table read in (job_id, key) order, a page at a time.
struct KeyedPages {
    first: String,
    next: String,
    page: std::collections::VecDeque<(String, String, i64)>,
    /// The last (job, key) read, where the next page starts.
    last: Option<(String, String)>,
    done: bool,
}

impl KeyedPages {
    fn new(table: &str, key: &str) -> Self {
        let select = format!("SELECT job_id, {key}, item_count FROM {table}");
        KeyedPages {
            first: format!("{select} ORDER BY job_id, {key} LIMIT {PAGE}"),
            next: format!(
                "{select} WHERE (job_id, {key}) > (?1, ?2) ORDER BY job_id, {key} LIMIT {PAGE}"
            ),
            page: Default::default(),
            last: None,
            done: false,
        }
    }

    /// Hands `job`'s rows to `f`, skipping rows of jobs before it (the
    /// streams come from one snapshot, so there are none).
    fn each_of(
        &mut self,
        conn: Conn<'_>,
        job: &str,
        mut f: impl FnMut(&str, i64) -> Result<()>,
    ) -> Result<()> {
        loop {
            if self.page.is_empty() && !self.done {
                self.fill(conn)?;
            }
            match self.page.front() {
                Some((row_job, _, _)) if row_job.as_str() < job => {
                    self.page.pop_front();
                }
                Some((row_job, key, n)) if row_job == job => {
                    f(key, *n)?;
                    self.page.pop_front();
                }
                _ => return Ok(()),
            }
        }
    }

    fn fill(&mut self, conn: Conn<'_>) -> Result<()> {
        let read = |row: &Row<'_>| Ok((row.text(0)?, row.text(1)?, row.i64(2)?));
        let rows = match &self.last {
            None => conn.collect(&self.first, &[], read)?,
            Some((job, key)) => conn.collect(&self.next, vals![job, key], read)?,
        };
        self.done = (rows.len() as i64) < PAGE;
        if let Some((job, key, _)) = rows.last() {
            self.last = Some((job.clone(), key.clone()));
        }
        self.page.extend(rows);
        Ok(())
    }
}

/// One job's signatures and error types, in key order.
fn job_counts(
    conn: Conn<'_>,
    job_id: &str,
    f: &mut impl FnMut(StatsPart<'_>) -> Result<()>,
) -> Result<()> {
    each_count(
        conn,
        "SELECT error_signature, item_count FROM signature_counts
         WHERE job_id = ?1 ORDER BY error_signature",
        Some(job_id),
        |key, n| f(StatsPart::Signature(key, n)),
    )?;
    each_count(
        conn,
        "SELECT error_type, item_count FROM error_type_counts
         WHERE job_id = ?1 ORDER BY error_type",
        Some(job_id),
        |key, n| f(StatsPart::ErrorType(key, n)),
    )
}

impl Dlq {
    /// The `top` largest failure families of one job or all (0: every
    /// one), with what the listing leaves out, so that it adds up to the
    /// scope's items.
    pub fn top_families(&self, job_id: Option<&str>, top: usize) -> Result<FamilyGroups> {
        let top = if top == 0 { usize::MAX } else { top };
        self.read(|conn| super::analysis::family_groups(conn, job_id, top))
    }

    /// The statistics of one job without its signatures and error types
    /// (an error if it does not exist).
    pub fn job_head(&self, job_id: &str) -> Result<StatsHead> {
        self.read(|conn| job_head(conn, job_id))?
            .ok_or_else(|| Error::JobNotFound(job_id.to_string()))
    }

    /// Hands the statistics of one job, or of all jobs (then, with
    /// `with_jobs`, each job's own nested inside), to `f` piece by piece
    /// (see [`StatsPart`] for the order), from one snapshot. Nothing is
    /// collected but the job ids: a million signatures cost no memory here.
    /// An unknown job is [`Error::JobNotFound`].
    pub fn stats_stream(
        &self,
        job_id: Option<&str>,
        with_jobs: bool,
        mut f: impl FnMut(StatsPart<'_>) -> Result<()>,
    ) -> Result<()> {
        self.read(|conn| {
            if let Some(job) = job_id {
                let head =
                    job_head(conn, job)?.ok_or_else(|| Error::JobNotFound(job.to_string()))?;
                f(StatsPart::Head {
                    job_id: Some(job),
                    head: &head,
                })?;
                job_counts(conn, job, &mut f)?;
                return f(StatsPart::Close);
            }
            // The totals: counters summed, and the earliest and latest
            // attempts from two index lookups per job (the spans are
            // fixed-width text on both backends, so MIN and MAX are time
            // order).
            let head = conn
                .row(
                    &format!(
                        "SELECT COALESCE(SUM(item_count), 0), COALESCE(SUM(eligible_count), 0),
                             COALESCE(SUM(manual_review_count), 0), COALESCE(SUM(failure_count_sum), 0),
                             MIN(oldest), MAX(newest)
                         FROM (SELECT item_count, eligible_count, manual_review_count,
                                   failure_count_sum, {} FROM jobs j) AS per_job",
                        span_columns(conn.backend())
                    ),
                    &[],
                    head_of,
                )?
                .unwrap_or_default();
            f(StatsPart::Head {
                job_id: None,
                head: &head,
            })?;
            // Summed over jobs by the database's sorter, which spills to
            // disk past its memory instead of growing.
            each_count(
                conn,
                "SELECT error_signature, SUM(item_count) FROM signature_counts
                 WHERE CAST(?1 AS TEXT) IS NULL GROUP BY error_signature ORDER BY error_signature",
                None,
                |key, n| f(StatsPart::Signature(key, n)),
            )?;
            each_count(
                conn,
                "SELECT error_type, SUM(item_count) FROM error_type_counts
                 WHERE CAST(?1 AS TEXT) IS NULL GROUP BY error_type ORDER BY error_type",
                None,
                |key, n| f(StatsPart::ErrorType(key, n)),
            )?;
            if with_jobs {
                every_job(conn, &mut f)?;
            }
            f(StatsPart::Close)
        })
    }

    /// Items per day of their first failure (`YYYY-MM-DD`, oldest first),
    /// of one job or all: how many dead letters arrived each day and are
    /// still here. One pass over a covering index.
    pub fn items_per_day(&self, job_id: Option<&str>) -> Result<Vec<(String, i64)>> {
        let day = self.backend().utc_day("first_attempt");
        let sql = if job_id.is_some() {
            format!(
                "SELECT {day} AS day, COUNT(*) FROM items
                 WHERE job_id = ?1 GROUP BY day ORDER BY day"
            )
        } else {
            format!(
                "SELECT {day} AS day, COUNT(*) FROM items
                 WHERE CAST(?1 AS TEXT) IS NULL GROUP BY day ORDER BY day"
            )
        };
        self.read(|conn| conn.collect(&sql, vals![job_id], |row| Ok((row.text(0)?, row.i64(1)?))))
    }

    /// Statistics of one job (an error if it does not exist), collected.
    pub fn job_stats(&self, job_id: &str) -> Result<Stats> {
        let mut stats = Stats::default();
        self.stats_stream(Some(job_id), false, |part| {
            collect(&mut stats, part);
            Ok(())
        })?;
        Ok(stats)
    }

    /// Statistics over all jobs, and per job, collected (with a signature
    /// per item that is every signature twice in memory:
    /// [`Dlq::stats_stream`] holds none).
    pub fn stats(&self) -> Result<(Stats, BTreeMap<String, Stats>)> {
        let mut total = Stats::default();
        let mut jobs: BTreeMap<String, Stats> = BTreeMap::new();
        let mut current: Option<String> = None;
        self.stats_stream(None, true, |part| {
            match (part, &current) {
                (
                    StatsPart::Head {
                        job_id: Some(job), ..
                    },
                    _,
                ) => {
                    current = Some(job.to_string());
                    collect(jobs.entry(job.to_string()).or_default(), part);
                }
                (StatsPart::Close, Some(_)) => current = None,
                (_, Some(job)) => collect(jobs.entry(job.clone()).or_default(), part),
                (_, None) => collect(&mut total, part),
            }
            Ok(())
        })?;
        Ok((total, jobs))
    }
}

fn collect(stats: &mut Stats, part: StatsPart<'_>) {
    match part {
        StatsPart::Head { head, .. } => {
            stats.total_items = head.total_items;
            stats.eligible_for_reprocess = head.eligible_for_reprocess;
            stats.requiring_manual_review = head.requiring_manual_review;
            stats.oldest_item = head.oldest_item;
            stats.newest_item = head.newest_item;
            stats.average_failure_count = head.average_failure_count;
            stats.failure_count_sum = head.failure_count_sum;
        }
        StatsPart::Signature(key, n) => {
            stats.error_categories.insert(key.to_string(), n);
        }
        StatsPart::ErrorType(key, n) => {
            stats.error_types.insert(key.to_string(), n);
        }
        StatsPart::Close => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeadLetteredItem;

    fn item(id: &str, signature: &str, error_type: &str) -> DeadLetteredItem {
        DeadLetteredItem::from_json_str(&format!(
            r#"{{"item_id":"{id}","item_data":{{}},"first_attempt":"2025-06-01T00:00:00Z",
               "last_attempt":"2025-06-01T00:01:00Z","failure_count":1,
               "failure_history":[{{"attempt_number":1,"timestamp":"2025-06-01T00:01:00Z",
               "error_type":"{error_type}","error_message":"m","stack_trace":null,
               "agent_id":"a","step_failed":"s","duration_ms":1,"json_log_location":null}}],
               "error_signature":"{signature}","worktree_artifacts":null,
               "reprocess_eligible":true,"manual_review_required":false}}"#
        ))
        .unwrap()
    }

    /// All jobs' statistics, read in pages of three rows, equal each job's
    /// own (read by other queries), whatever the pages' boundaries: jobs
    /// without items, with one signature, with more than a page of them,
    /// and more jobs than a page.
    #[test]
    fn every_job_read_in_pages_equals_each_job_alone() {
        let dlq = Dlq::open_in_memory().unwrap();
        for job in 0..8 {
            for n in 0..[0, 1, 3, 4, 7, 2, 0, 6][job] {
                let kind = ["Timeout", "Panic"][n % 2];
                dlq.add(
                    &format!("j{job}"),
                    &item(&format!("i{n}"), &format!("s{n}"), kind),
                )
                .unwrap();
            }
        }
        // A job with no items left (its counters are rows of zero or none).
        dlq.add("j8", &item("x", "s", "Timeout")).unwrap();
        dlq.clear_job("j8").unwrap();
        let (total, jobs) = dlq.stats().unwrap();
        let ids: Vec<String> = dlq.jobs().unwrap().into_iter().map(|j| j.job_id).collect();
        assert_eq!(jobs.keys().cloned().collect::<Vec<_>>(), ids);
        for (job, stats) in &jobs {
            assert_eq!(stats, &dlq.job_stats(job).unwrap(), "{job}");
        }
        assert_eq!(total.total_items, 23);
        assert_eq!(jobs.len(), 7, "j0 and j6 never had an item");
        assert_eq!(
            total.error_categories.values().sum::<i64>(),
            total.total_items
        );
    }
}
