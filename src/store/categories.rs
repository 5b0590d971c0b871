//! Failure categories: the [`Category`] type, the `error_categories` table
//! (error type → category, seeded by migration V5 and changed by `dlq
//! categories set`), and the one SQL expression that gives an item's
//! category. Nothing caches the table: every query looks it up, so a change
//! made here or by hand in sqlite3 shows at once in list, filters, analyze,
//! metrics and retention.

use super::sql::{vals, Conn};
use super::{Dlq, EventKind};
use crate::error::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;

/// What a retry of a failure can be expected to do (docs/agent-failures.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Clears up by itself: retry with backoff (timeouts, exhausted resources).
    Transient,
    /// Needs the input, prompt or environment changed first (a failed
    /// command, a validation, a merge conflict).
    ConditionallyRecoverable,
    /// Never succeeds as it is: a person has to act (permissions).
    Permanent,
    /// An error type with no category (yet).
    Unclassified,
}

impl Category {
    /// Every category, in the order listings show them.
    pub const ALL: [Category; 4] = [
        Category::Transient,
        Category::ConditionallyRecoverable,
        Category::Permanent,
        Category::Unclassified,
    ];

    /// The name stored in the database and used by filters and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Transient => "transient",
            Category::ConditionallyRecoverable => "conditionally_recoverable",
            Category::Permanent => "permanent",
            Category::Unclassified => "unclassified",
        }
    }

    /// Every category's name, comma-separated (help and error texts).
    pub fn names() -> String {
        let names: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
        names.join(", ")
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Category {
    type Err = Error;

    /// A category by its name; anything else is an
    /// [`crate::ErrorKind::InvalidInput`] error that lists the categories.
    fn from_str(name: &str) -> Result<Self> {
        Category::ALL
            .into_iter()
            .find(|c| c.as_str() == name)
            .ok_or_else(|| {
                Error::invalid_argument(
                    "category",
                    format!(
                        "unknown category {name:?}; the categories are {}",
                        Category::names()
                    ),
                )
            })
    }
}

/// The category of the item `i` (an `items AS i` query): that of its last
/// attempt's error type, 'unclassified' without a row or without attempts.
/// One primary-key lookup per item.
pub(crate) const ITEM_CATEGORY_SQL: &str =
    "COALESCE((SELECT c.category FROM error_categories AS c \
     WHERE c.error_type = i.last_error_type), 'unclassified')";

/// The job condition on `error_type_counts AS t` for one job or all, as
/// SQL of its own for each: `?1 IS NULL OR t.job_id = ?1` keeps SQLite off
/// the primary key, so one job's counts read every job's (70,000 rows with
/// 10,000 jobs).
fn job_scope(job_id: Option<&str>) -> &'static str {
    if job_id.is_some() {
        "t.job_id = ?1"
    } else {
        "CAST(?1 AS TEXT) IS NULL"
    }
}

/// How many items (of one job, or all) are in `category`, from the error
/// type counters (kept equal to a recount): the count of a listing
/// filtered by category alone, without a lookup per item.
pub(crate) fn count_in_category(
    conn: Conn<'_>,
    job_id: Option<&str>,
    category: Category,
) -> Result<u64> {
    let sql = format!(
        "SELECT CAST(COALESCE(SUM(t.item_count), 0) AS BIGINT) FROM error_type_counts AS t
         WHERE {}
           AND COALESCE((SELECT c.category FROM error_categories AS c
                         WHERE c.error_type = t.error_type), 'unclassified') = ?2",
        job_scope(job_id)
    );
    one_count(conn, &sql, vals![job_id, category.as_str()])
}

/// The one integer a counting statement gives, as a count.
fn one_count(conn: Conn<'_>, sql: &str, params: &[super::sql::Val<'_>]) -> Result<u64> {
    let n = conn.row(sql, params, |row| row.i64(0))?.unwrap_or(0);
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Items whose last attempt has this error type (`last.error_type ==
/// "X"`), of one job or all, from the counters (kept equal to a recount of
/// items.last_error_type, which is what that filter reads).
pub(crate) fn count_last_error_type(
    conn: Conn<'_>,
    job_id: Option<&str>,
    error_type: &str,
) -> Result<u64> {
    let sql = format!(
        "SELECT CAST(COALESCE(SUM(t.item_count), 0) AS BIGINT) FROM error_type_counts AS t
         WHERE t.error_type = ?2 AND {}",
        job_scope(job_id)
    );
    one_count(conn, &sql, vals![job_id, error_type])
}

/// Items with any attempt of this error type (`error_type == "X"`), of one
/// job or all, from the failure_history_error_type index (V8): the distinct
/// item keys of the type, not a probe for every item (2.5 s at 1,000,000
/// items). For one job, the cheaper of a probe per item of the job and a
/// look-up of each matching item's job.
pub(crate) fn count_any_error_type(
    conn: Conn<'_>,
    job_id: Option<&str>,
    error_type: &str,
) -> Result<u64> {
    let matches = one_count(
        conn,
        "SELECT COUNT(DISTINCT item_key) FROM failure_history WHERE error_type = ?1",
        vals![error_type],
    )?;
    let Some(job_id) = job_id else {
        return Ok(matches);
    };
    let (in_job, total) = conn
        .row(
            "SELECT CAST(COALESCE(SUM(CASE WHEN job_id = ?1 THEN item_count END), 0) AS BIGINT),
                 CAST(COALESCE(SUM(item_count), 0) AS BIGINT)
             FROM jobs",
            vals![job_id],
            |row| Ok((row.i64(0)?, row.i64(1)?)),
        )?
        .unwrap_or_default();
    let in_job = u64::try_from(in_job).unwrap_or(0);
    if in_job == u64::try_from(total).unwrap_or(0) {
        // The job holds every item: its matches are all the matches.
        Ok(matches)
    } else if in_job <= matches {
        one_count(
            conn,
            "SELECT COUNT(*) FROM items i WHERE i.job_id = ?1 AND EXISTS
                 (SELECT 1 FROM failure_history f WHERE f.error_type = ?2 AND f.item_key = i.id)",
            vals![job_id, error_type],
        )
    } else {
        one_count(
            conn,
            &format!(
                "SELECT COUNT(*) FROM
                     (SELECT DISTINCT item_key FROM failure_history WHERE error_type = ?2) AS m
                     {} items i ON i.id = m.item_key
                 WHERE i.job_id = ?1",
                conn.backend().ordered_join()
            ),
            vals![job_id, error_type],
        )
    }
}

/// The longest error type name `categories set` takes: names are short
/// identifiers; a megabyte of text is a mistake, not a type.
const MAX_TYPE_LEN: usize = 200;

/// One row of `error_categories`, with how many items it classifies now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CategoryRule {
    pub error_type: String,
    pub category: Category,
    /// Items whose last attempt has this error type (from the counters).
    pub items: i64,
}

/// What `set_category` changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CategoryChange {
    pub error_type: String,
    /// The category before (`None`: the type had no row, so it was
    /// unclassified).
    pub before: Option<Category>,
    pub category: Category,
    /// Items whose category this changes (items with this last error type).
    pub items: i64,
}

impl Dlq {
    /// The category of every error type that has one, by name.
    pub fn category_map(&self) -> Result<HashMap<String, Category>> {
        self.read(|conn| {
            let mut map = HashMap::new();
            conn.each(
                "SELECT error_type, category FROM error_categories",
                &[],
                &mut |row: &super::sql::Row<'_>| {
                    map.insert(row.text(0)?, category_at(row, 1)?);
                    Ok(())
                },
            )?;
            Ok(map)
        })
    }

    /// The category of one error type (`Unclassified` without a row).
    pub fn category_of(&self, error_type: &str) -> Result<Category> {
        self.read(|conn| category_row(conn, error_type))
            .map(|found| found.unwrap_or(Category::Unclassified))
    }

    /// Items per error type of their last attempt, with its category, of
    /// one job or all, from the counters, most items first.
    pub fn error_type_counts(&self, job_id: Option<&str>) -> Result<Vec<(String, Category, i64)>> {
        let sql = format!(
            "SELECT t.error_type,
                 COALESCE((SELECT c.category FROM error_categories AS c WHERE c.error_type = t.error_type), 'unclassified'),
                 CAST(SUM(t.item_count) AS BIGINT) AS n
             FROM error_type_counts AS t WHERE {}
             GROUP BY t.error_type HAVING SUM(t.item_count) > 0 ORDER BY n DESC, t.error_type",
            job_scope(job_id)
        );
        self.read(|conn| {
            conn.collect(&sql, vals![job_id], |row| {
                Ok((row.text(0)?, category_at(row, 1)?, row.i64(2)?))
            })
        })
    }

    /// Every row of `error_categories`, by category then type, with the
    /// items each classifies now; then, as `Unclassified`, the error types
    /// that items have but the table does not name.
    pub fn category_rules(&self) -> Result<Vec<CategoryRule>> {
        // error_type_counts is small (jobs × types): the counts come from
        // the counters, never from a scan of items.
        let mut rules = self.read(|conn| {
            conn.collect(
                "SELECT t.error_type, COALESCE(MAX(c.category), 'unclassified'), CAST(SUM(t.items) AS BIGINT) FROM (
                     SELECT error_type, 0 AS items FROM error_categories
                     UNION ALL
                     SELECT error_type, item_count FROM error_type_counts WHERE error_type <> ''
                 ) AS t
                 LEFT JOIN error_categories AS c ON c.error_type = t.error_type
                 GROUP BY t.error_type",
                &[],
                |row| {
                    Ok(CategoryRule {
                        error_type: row.text(0)?,
                        category: category_at(row, 1)?,
                        items: row.i64(2)?,
                    })
                },
            )
        })?;
        rules.sort_by(|a, b| (a.category, &a.error_type).cmp(&(b.category, &b.error_type)));
        Ok(rules)
    }

    /// Puts `error_type` in `category`, with a `category_set` event (the
    /// type, before and after). Setting `Unclassified` keeps a row (so a
    /// seeded type can be declassified); the change applies to every item,
    /// stored or to come, whose last attempt has this type.
    pub fn set_category(&self, error_type: &str, category: Category) -> Result<CategoryChange> {
        check_type_name(error_type)?;
        self.write(|tx| {
            let conn = tx.sql();
            let before = category_row(conn, error_type)?;
            conn.exec(
                "INSERT INTO error_categories (error_type, category) VALUES (?1, ?2)
                 ON CONFLICT (error_type) DO UPDATE SET category = excluded.category",
                vals![error_type, category.as_str()],
            )?;
            let items = conn
                .row(
                    "SELECT CAST(COALESCE(SUM(item_count), 0) AS BIGINT) FROM error_type_counts
                     WHERE error_type = ?1",
                    vals![error_type],
                    |row| row.i64(0),
                )?
                .unwrap_or(0);
            tx.event(
                EventKind::CategorySet,
                None,
                None,
                serde_json::json!({
                    "error_type": error_type,
                    "before": before.unwrap_or(Category::Unclassified),
                    "category": category,
                    "items": items,
                }),
            )?;
            Ok(CategoryChange {
                error_type: error_type.to_string(),
                before,
                category,
                items,
            })
        })
    }
}

/// The category stored for `error_type`, if it has a row.
fn category_row(conn: Conn<'_>, error_type: &str) -> Result<Option<Category>> {
    conn.row(
        "SELECT category FROM error_categories WHERE error_type = ?1",
        vals![error_type],
        |row| category_at(row, 0),
    )
}

/// Column `idx` read as a category name.
fn category_at(row: &super::sql::Row<'_>, idx: usize) -> Result<Category> {
    row.text(idx)?.parse()
}

/// An error type name `set_category` accepts: not blank, not huge. Any
/// other text is taken as it is, control characters included: attempts
/// can carry such names, and every output escapes them.
fn check_type_name(name: &str) -> Result<()> {
    let problem = if name.trim().is_empty() {
        Some("it is empty or blank".to_string())
    } else if name.len() > MAX_TYPE_LEN {
        Some(format!(
            "it is {} bytes long (at most {MAX_TYPE_LEN})",
            name.len()
        ))
    } else {
        None
    };
    match problem {
        Some(why) => Err(Error::invalid_argument("error type", why)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_listed_for_help_and_errors() {
        assert_eq!(
            Category::names(),
            "transient, conditionally_recoverable, permanent, unclassified"
        );
    }

    #[test]
    fn a_type_name_may_be_200_bytes_long() {
        assert!(check_type_name(&"T".repeat(MAX_TYPE_LEN)).is_ok());
        assert!(check_type_name(&"T".repeat(MAX_TYPE_LEN + 1)).is_err());
    }

    #[test]
    fn names_round_trip() {
        for c in Category::ALL {
            assert_eq!(c.as_str().parse::<Category>().unwrap(), c);
        }
        assert!("Transient".parse::<Category>().is_err());
    }

    #[test]
    fn the_seeded_mapping_and_a_change() {
        let dlq = Dlq::open_in_memory().unwrap();
        assert_eq!(dlq.category_of("Timeout").unwrap(), Category::Transient);
        assert_eq!(
            dlq.category_of("CommandFailed").unwrap(),
            Category::ConditionallyRecoverable
        );
        assert_eq!(
            dlq.category_of("PermissionError").unwrap(),
            Category::Permanent
        );
        assert_eq!(
            dlq.category_of("QuotaExceeded").unwrap(),
            Category::Unclassified
        );
        let change = dlq
            .set_category("QuotaExceeded", Category::Transient)
            .unwrap();
        assert_eq!(change.before, None);
        assert_eq!(
            dlq.category_of("QuotaExceeded").unwrap(),
            Category::Transient
        );
        let change = dlq.set_category("Timeout", Category::Permanent).unwrap();
        assert_eq!(change.before, Some(Category::Transient));
        assert_eq!(dlq.category_map().unwrap()["Timeout"], Category::Permanent);
        assert!(dlq.set_category("", Category::Permanent).is_err());
        assert!(dlq.set_category(" ", Category::Permanent).is_err());
        // Names attempts can carry, control characters included, can be
        // classified.
        assert!(dlq.set_category("a\nb", Category::Permanent).is_ok());
    }
}
