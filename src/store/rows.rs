//! One item's rows: writing a `DeadLetteredItem` into `items`,
//! `failure_history` and `worktree_artifacts`, and reading it back whole.
//! Reading what was written gives the item's normalised form exactly.

use super::columns::{columns, sql};
use super::sql::{vals, Backend, Conn, Row, Val};
use crate::error::{Error, Result};
use crate::model::{
    DeadLetteredItem, ErrorType, Extra, FailureDetail, MarkedFlags, Omitted, WorktreeArtifacts,
};
use crate::time::Timestamp;
use serde_json::value::RawValue;

/// An item as stored, with its row key and the flags a person marked.
pub struct StoredItem {
    pub key: i64,
    pub item: DeadLetteredItem,
    pub marked: MarkedFlags,
    /// The item's change counter (schema V9) as read.
    pub version: i64,
    /// Its failure family (schema V10), `None` until mined.
    pub family_id: Option<i64>,
}

const WORKTREE_ARTIFACTS: &str = "worktree_artifacts";
const ARTIFACT_PREFIX: &str = "worktree_artifacts.";

fn extra_json(extra: &Extra) -> Result<Option<String>> {
    if extra.is_empty() {
        Ok(None)
    } else {
        Ok(Some(serde_json::to_string(extra)?))
    }
}

fn parse_extra(text: Option<String>, context: &str) -> Result<Extra> {
    match text {
        None => Ok(Extra::new()),
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| Error::invalid_item(context, format!("bad extra column: {e}"))),
    }
}

/// The item-level omitted_fields column: NULL when the item has the current
/// writer's shape.
fn item_omitted_json(item: &DeadLetteredItem) -> Result<Option<String>> {
    let mut names: Vec<String> = Vec::new();
    if item.worktree_artifacts.is_none() && item.worktree_artifacts_absent {
        names.push(WORKTREE_ARTIFACTS.to_string());
    }
    if let Some(artifacts) = &item.worktree_artifacts {
        for name in artifacts.effective_omitted().names() {
            names.push(format!("{ARTIFACT_PREFIX}{name}"));
        }
    }
    if names.is_empty() {
        Ok(None)
    } else {
        Ok(Some(serde_json::to_string(&names)?))
    }
}

fn failure_omitted_json(detail: &FailureDetail) -> Result<Option<String>> {
    let effective = detail.effective_omitted();
    if effective == detail.writer_omitted() {
        Ok(None)
    } else {
        Ok(Some(serde_json::to_string(&effective.names())?))
    }
}

fn parse_names(text: &str, context: &str) -> Result<Vec<String>> {
    serde_json::from_str(text)
        .map_err(|e| Error::invalid_item(context, format!("bad omitted_fields column: {e}")))
}

/// Inserts a new item row; `None` when (job_id, item_id) already exists.
pub fn insert_item_row(
    conn: Conn<'_>,
    job_id: &str,
    item: &DeadLetteredItem,
    family: Option<i64>,
) -> Result<Option<i64>> {
    let sql = match conn.backend() {
        Backend::Sqlite => {
            "INSERT INTO items (job_id, item_id, item_data, first_attempt, last_attempt, failure_count,
                 error_signature, reprocess_eligible, manual_review_required, extra, omitted_fields,
                 last_error_type, family_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
             ON CONFLICT (job_id, item_id) DO NOTHING"
        }
        Backend::Postgres => {
            "INSERT INTO items (job_id, item_id, item_data, first_attempt, first_attempt_ns,
                 last_attempt, last_attempt_ns, failure_count, error_signature, reprocess_eligible,
                 manual_review_required, extra, omitted_fields, last_error_type, family_id)
             VALUES (?1, ?2, ?3, dlq_ts(?4::text), dlq_ns(?4::text), dlq_ts(?5::text),
                 dlq_ns(?5::text), ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
             ON CONFLICT (job_id, item_id) DO NOTHING
             RETURNING id"
        }
    };
    let columns = item_columns_values(item)?;
    let mut params = vec![Val::from(job_id), Val::from(&item.item_id)];
    params.extend(columns.vals());
    params.push(Val::from(family));
    match conn {
        Conn::Sqlite(sqlite) => {
            let inserted = conn.exec(sql, &params)?;
            Ok((inserted > 0).then(|| sqlite.last_insert_rowid()))
        }
        #[cfg(feature = "postgres")]
        Conn::Postgres(_) => conn.row(sql, &params, |row| row.i64(0)),
    }
}

/// Rewrites the item row's own columns (not its history or artifacts),
/// and bumps its version (schema V9): a merge that only adds an attempt
/// leaves the row's values as they were, and is a change all the same.
pub fn update_item_row(
    conn: Conn<'_>,
    key: i64,
    item: &DeadLetteredItem,
    family: Option<i64>,
) -> Result<()> {
    let sql = match conn.backend() {
        Backend::Sqlite => {
            "UPDATE items SET item_data = ?2, first_attempt = ?3, last_attempt = ?4, failure_count = ?5,
                 error_signature = ?6, reprocess_eligible = ?7, manual_review_required = ?8,
                 extra = ?9, omitted_fields = ?10, last_error_type = ?11,
                 family_id = ?12, version = version + 1
             WHERE id = ?1"
        }
        Backend::Postgres => {
            "UPDATE items SET item_data = ?2, first_attempt = dlq_ts(?3::text),
                 first_attempt_ns = dlq_ns(?3::text), last_attempt = dlq_ts(?4::text),
                 last_attempt_ns = dlq_ns(?4::text), failure_count = ?5,
                 error_signature = ?6, reprocess_eligible = ?7, manual_review_required = ?8,
                 extra = ?9, omitted_fields = ?10, last_error_type = ?11,
                 family_id = ?12, version = version + 1
             WHERE id = ?1"
        }
    };
    let columns = item_columns_values(item)?;
    let mut params = vec![Val::from(key)];
    params.extend(columns.vals());
    params.push(Val::from(family));
    conn.exec(sql, &params)?;
    Ok(())
}

/// The item's own columns as both statements above bind them, from their
/// third parameter on: item_data, first_attempt, last_attempt,
/// failure_count, error_signature, reprocess_eligible,
/// manual_review_required, extra, omitted_fields, last_error_type.
struct ItemColumns<'i> {
    item: &'i DeadLetteredItem,
    extra: Option<String>,
    omitted: Option<String>,
}

fn item_columns_values(item: &DeadLetteredItem) -> Result<ItemColumns<'_>> {
    Ok(ItemColumns {
        item,
        extra: extra_json(&item.extra)?,
        omitted: item_omitted_json(item)?,
    })
}

impl ItemColumns<'_> {
    fn vals(&self) -> [Val<'_>; 10] {
        let item = self.item;
        [
            Val::from(item.item_data.get()),
            Val::from(item.first_attempt),
            Val::from(item.last_attempt),
            Val::from(item.failure_count),
            Val::from(&item.error_signature),
            Val::from(item.reprocess_eligible),
            Val::from(item.manual_review_required),
            Val::from(self.extra.as_ref()),
            Val::from(self.omitted.as_ref()),
            Val::from(last_error_type(item)),
        ]
    }
}

/// The value of the `last_error_type` column: the error type of the
/// item's last attempt ([`DeadLetteredItem::last_failure`], the Rust side
/// of [`super::counters::last_attempt_order`]).
pub(super) fn last_error_type(item: &DeadLetteredItem) -> Option<&str> {
    item.last_failure().map(|f| f.error_type.name.as_str())
}

/// Inserts attempts; an attempt already stored (same attempt_number and
/// timestamp) is left as it is. Returns how many were new.
pub fn insert_history(conn: Conn<'_>, key: i64, history: &[FailureDetail]) -> Result<usize> {
    let sql = match conn.backend() {
        Backend::Sqlite => {
            "INSERT INTO failure_history (item_key, attempt_number, timestamp, error_type, exit_code,
                 error_type_json, error_message, error_context, stack_trace, agent_id, step_failed,
                 duration_ms, json_log_location, extra, omitted_fields)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
             ON CONFLICT (item_key, attempt_number, timestamp) DO NOTHING"
        }
        Backend::Postgres => {
            "INSERT INTO failure_history (item_key, attempt_number, timestamp, timestamp_ns,
                 error_type, exit_code, error_type_json, error_message, error_context, stack_trace,
                 agent_id, step_failed, duration_ms, json_log_location, extra, omitted_fields)
             VALUES (?1, ?2, dlq_ts(?3::text), dlq_ns(?3::text), ?4, ?5, ?6, ?7, ?8, ?9, ?10,
                 ?11, ?12, ?13, ?14, ?15)
             ON CONFLICT (item_key, attempt_number, timestamp, timestamp_ns) DO NOTHING"
        }
    };
    let mut added = 0;
    for detail in history {
        let context = match &detail.error_context {
            Some(lines) => Some(serde_json::to_string(lines)?),
            None => None,
        };
        let duration = i64::try_from(detail.duration_ms).unwrap_or(i64::MAX);
        let extra = extra_json(&detail.extra)?;
        let omitted = failure_omitted_json(detail)?;
        added += conn.exec(
            sql,
            vals![
                key,
                detail.attempt_number,
                detail.timestamp,
                &detail.error_type.name,
                detail.error_type.exit_code,
                detail.error_type.raw.as_ref().map(|raw| raw.get()),
                &detail.error_message,
                context.as_ref(),
                detail.stack_trace.as_ref(),
                &detail.agent_id,
                &detail.step_failed,
                duration,
                detail.json_log_location.as_ref(),
                extra.as_ref(),
                omitted.as_ref(),
            ],
        )?;
    }
    Ok(added)
}

/// Replaces the item's artifacts row with `artifacts` (or removes it).
pub fn write_artifacts(
    conn: Conn<'_>,
    key: i64,
    artifacts: Option<&WorktreeArtifacts>,
    replace: bool,
) -> Result<()> {
    if replace {
        conn.exec(
            "DELETE FROM worktree_artifacts WHERE item_key = ?1",
            vals![key],
        )?;
    }
    if let Some(artifacts) = artifacts {
        let extra = extra_json(&artifacts.extra)?;
        conn.exec(
            "INSERT INTO worktree_artifacts (item_key, worktree_path, branch_name,
                 uncommitted_changes, error_logs, extra)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            vals![
                key,
                &artifacts.worktree_path,
                &artifacts.branch_name,
                artifacts.uncommitted_changes.as_ref(),
                artifacts.error_logs.as_ref(),
                extra.as_ref(),
            ],
        )?;
    }
    Ok(())
}

/// Writes a whole new item (row, history, artifacts); `None` if it exists.
pub fn insert_item(
    conn: Conn<'_>,
    job_id: &str,
    item: &DeadLetteredItem,
    family: Option<i64>,
) -> Result<Option<i64>> {
    let Some(key) = insert_item_row(conn, job_id, item, family)? else {
        return Ok(None);
    };
    insert_history(conn, key, &item.failure_history)?;
    write_artifacts(conn, key, item.worktree_artifacts.as_ref(), false)?;
    Ok(Some(key))
}

columns! {
    /// The columns of `items` that [`item_row`] reads.
    mod item_columns {
        KEY = "id",
        ITEM_ID = "item_id",
        ITEM_DATA = "item_data",
        FIRST_ATTEMPT = "first_attempt" pg "dlq_ts_text(first_attempt, first_attempt_ns)",
        LAST_ATTEMPT = "last_attempt" pg "dlq_ts_text(last_attempt, last_attempt_ns)",
        FAILURE_COUNT = "failure_count",
        ERROR_SIGNATURE = "error_signature",
        REPROCESS_ELIGIBLE = "reprocess_eligible",
        MANUAL_REVIEW_REQUIRED = "manual_review_required",
        REPROCESS_ELIGIBLE_MARKED = "reprocess_eligible_marked",
        MANUAL_REVIEW_REQUIRED_MARKED = "manual_review_required_marked",
        EXTRA = "extra",
        OMITTED_FIELDS = "omitted_fields",
        VERSION = "version",
        FAMILY_ID = "family_id",
    }
}

struct ItemRow {
    key: i64,
    item_id: String,
    item_data: String,
    first_attempt: Timestamp,
    last_attempt: Timestamp,
    failure_count: u32,
    error_signature: String,
    reprocess_eligible: bool,
    manual_review_required: bool,
    marked: MarkedFlags,
    extra: Option<String>,
    omitted: Option<String>,
    version: i64,
    family_id: Option<i64>,
}

fn item_row(row: &Row<'_>) -> Result<ItemRow> {
    use item_columns as c;
    Ok(ItemRow {
        key: row.i64(c::KEY)?,
        item_id: row.text(c::ITEM_ID)?,
        item_data: row.text(c::ITEM_DATA)?,
        first_attempt: row.ts(c::FIRST_ATTEMPT)?,
        last_attempt: row.ts(c::LAST_ATTEMPT)?,
        failure_count: u32::try_from(row.i64(c::FAILURE_COUNT)?).unwrap_or(u32::MAX),
        error_signature: row.text(c::ERROR_SIGNATURE)?,
        reprocess_eligible: row.bool(c::REPROCESS_ELIGIBLE)?,
        manual_review_required: row.bool(c::MANUAL_REVIEW_REQUIRED)?,
        marked: MarkedFlags {
            reprocess_eligible: row.bool(c::REPROCESS_ELIGIBLE_MARKED)?,
            manual_review_required: row.bool(c::MANUAL_REVIEW_REQUIRED_MARKED)?,
        },
        extra: row.opt_text(c::EXTRA)?,
        omitted: row.opt_text(c::OMITTED_FIELDS)?,
        version: row.i64(c::VERSION)?,
        family_id: row.opt_i64(c::FAMILY_ID)?,
    })
}

/// Loads one item of a job, whole.
pub fn load_item(conn: Conn<'_>, job_id: &str, item_id: &str) -> Result<Option<StoredItem>> {
    let sql = match conn.backend() {
        Backend::Sqlite => sql!(
            "SELECT ",
            item_columns::LIST,
            " FROM items WHERE job_id = ?1 AND item_id = ?2"
        ),
        Backend::Postgres => sql!(
            "SELECT ",
            item_columns::PG_LIST,
            " FROM items WHERE job_id = ?1 AND item_id = ?2"
        ),
    };
    let row = conn.row(sql, vals![job_id, item_id], item_row)?;
    row.map(|row| assemble(conn, row)).transpose()
}

/// Loads one item by its row key, whole.
pub fn load_item_by_key(conn: Conn<'_>, key: i64) -> Result<Option<StoredItem>> {
    let sql = match conn.backend() {
        Backend::Sqlite => sql!("SELECT ", item_columns::LIST, " FROM items WHERE id = ?1"),
        Backend::Postgres => sql!(
            "SELECT ",
            item_columns::PG_LIST,
            " FROM items WHERE id = ?1"
        ),
    };
    let row = conn.row(sql, vals![key], item_row)?;
    row.map(|row| assemble(conn, row)).transpose()
}

fn assemble(conn: Conn<'_>, row: ItemRow) -> Result<StoredItem> {
    let context = format!("stored item {:?}", row.item_id);
    let item_data = RawValue::from_string(row.item_data)
        .map_err(|e| Error::invalid_item(&context, format!("bad item_data column: {e}")))?;
    let omitted_names = match &row.omitted {
        Some(text) => parse_names(text, &context)?,
        None => Vec::new(),
    };
    let artifact_omitted = Omitted::from_names(
        omitted_names
            .iter()
            .filter_map(|name| name.strip_prefix(ARTIFACT_PREFIX)),
    );
    let worktree_artifacts = load_artifacts(conn, row.key, artifact_omitted, &context)?;
    let item = DeadLetteredItem {
        item_id: row.item_id,
        item_data,
        first_attempt: row.first_attempt,
        last_attempt: row.last_attempt,
        failure_count: row.failure_count,
        failure_history: load_history(conn, row.key, &context)?,
        error_signature: row.error_signature,
        worktree_artifacts,
        reprocess_eligible: row.reprocess_eligible,
        manual_review_required: row.manual_review_required,
        extra: parse_extra(row.extra, &context)?,
        worktree_artifacts_absent: omitted_names.iter().any(|n| n == WORKTREE_ARTIFACTS),
    };
    Ok(StoredItem {
        key: row.key,
        item,
        marked: row.marked,
        version: row.version,
        family_id: row.family_id,
    })
}

columns! {
    /// The columns of `worktree_artifacts` that [`load_artifacts`] reads.
    mod artifact_columns {
        WORKTREE_PATH = "worktree_path",
        BRANCH_NAME = "branch_name",
        UNCOMMITTED_CHANGES = "uncommitted_changes",
        ERROR_LOGS = "error_logs",
        EXTRA = "extra",
    }
}

fn load_artifacts(
    conn: Conn<'_>,
    key: i64,
    omitted: Omitted,
    context: &str,
) -> Result<Option<WorktreeArtifacts>> {
    use artifact_columns as c;
    let row = conn.row(
        sql!(
            "SELECT ",
            c::LIST,
            " FROM worktree_artifacts WHERE item_key = ?1"
        ),
        vals![key],
        |row| {
            Ok((
                row.text(c::WORKTREE_PATH)?,
                row.text(c::BRANCH_NAME)?,
                row.opt_text(c::UNCOMMITTED_CHANGES)?,
                row.opt_text(c::ERROR_LOGS)?,
                row.opt_text(c::EXTRA)?,
            ))
        },
    )?;
    row.map(
        |(worktree_path, branch_name, uncommitted_changes, error_logs, extra)| {
            Ok(WorktreeArtifacts {
                worktree_path,
                branch_name,
                uncommitted_changes,
                error_logs,
                extra: parse_extra(extra, context)?,
                omitted,
            })
        },
    )
    .transpose()
}

columns! {
    /// The columns of `failure_history` that [`load_history`] reads.
    mod history_columns {
        ATTEMPT_NUMBER = "attempt_number",
        TIMESTAMP = "timestamp" pg "dlq_ts_text(timestamp, timestamp_ns)",
        ERROR_TYPE = "error_type",
        EXIT_CODE = "exit_code",
        ERROR_TYPE_JSON = "error_type_json",
        ERROR_MESSAGE = "error_message",
        ERROR_CONTEXT = "error_context",
        STACK_TRACE = "stack_trace",
        AGENT_ID = "agent_id",
        STEP_FAILED = "step_failed",
        DURATION_MS = "duration_ms",
        JSON_LOG_LOCATION = "json_log_location",
        EXTRA = "extra",
        OMITTED_FIELDS = "omitted_fields",
    }
}

fn load_history(conn: Conn<'_>, key: i64, context: &str) -> Result<Vec<FailureDetail>> {
    use history_columns as c;
    let sql = match conn.backend() {
        Backend::Sqlite => sql!(
            "SELECT ",
            c::LIST,
            " FROM failure_history WHERE item_key = ?1 ORDER BY attempt_number, timestamp"
        ),
        Backend::Postgres => sql!(
            "SELECT ",
            c::PG_LIST,
            " FROM failure_history WHERE item_key = ?1
             ORDER BY attempt_number, timestamp, timestamp_ns"
        ),
    };
    let mut history = Vec::new();
    conn.each(sql, vals![key], |row| {
        let raw = row.opt_text(c::ERROR_TYPE_JSON)?;
        let raw = raw.map(RawValue::from_string).transpose().map_err(|e| {
            Error::invalid_item(context, format!("bad error_type_json column: {e}"))
        })?;
        let error_context = row.opt_text(c::ERROR_CONTEXT)?;
        let error_context = error_context
            .map(|text| serde_json::from_str::<Vec<String>>(&text))
            .transpose()
            .map_err(|e| Error::invalid_item(context, format!("bad error_context column: {e}")))?;
        let duration = row.i64(c::DURATION_MS)?;
        let omitted = row.opt_text(c::OMITTED_FIELDS)?;
        let mut detail = FailureDetail {
            attempt_number: u32::try_from(row.i64(c::ATTEMPT_NUMBER)?).unwrap_or(u32::MAX),
            timestamp: row.ts(c::TIMESTAMP)?,
            error_type: ErrorType {
                name: row.text(c::ERROR_TYPE)?,
                exit_code: row.opt_i64(c::EXIT_CODE)?,
                raw,
            },
            error_message: row.text(c::ERROR_MESSAGE)?,
            error_context,
            stack_trace: row.opt_text(c::STACK_TRACE)?,
            agent_id: row.text(c::AGENT_ID)?,
            step_failed: row.text(c::STEP_FAILED)?,
            duration_ms: u64::try_from(duration).unwrap_or(0),
            json_log_location: row.opt_text(c::JSON_LOG_LOCATION)?,
            extra: parse_extra(row.opt_text(c::EXTRA)?, context)?,
            omitted: Omitted::none(),
        };
        detail.omitted = match omitted {
            None => detail.writer_omitted(),
            Some(text) => {
                Omitted::from_names(parse_names(&text, context)?.iter().map(String::as_str))
            }
        };
        history.push(detail);
        Ok(())
    })?;
    Ok(history)
}
