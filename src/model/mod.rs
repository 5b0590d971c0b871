//! The dead-letter types and the rules they keep: what a
//! `DeadLetteredItem`, its attempts and its worktree are; the limits an item
//! must meet to be stored (ids, nesting depth, size); the compact form its
//! JSON text is kept in; which attempt is "last"; and the rule that merges
//! two copies of one item, as pure functions. How these types read and
//! write as legacy JSON is [`crate::legacy`]'s (the codec), and how they
//! are built in code is `build`'s ([`ItemBuilder`]).

mod build;

pub use build::ItemBuilder;
// The codec's types that moved to crate::legacy, at their old path too.
pub use crate::legacy::codec::{ItemWithJob, JOB_ID_KEY, REPO_KEY};

use crate::error::{Error, Result};
use crate::time::Timestamp;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// Unknown fields of a legacy object, kept verbatim and written back.
pub type Extra = BTreeMap<String, Box<RawValue>>;

/// One dead-lettered work item, as the legacy `DeadLetteredItem`.
#[derive(Clone, Debug)]
pub struct DeadLetteredItem {
    /// The work item's id (taken from the file, never from its name).
    pub item_id: String,
    /// The original work item, as compact JSON text.
    pub item_data: Box<RawValue>,
    /// When the item first failed.
    pub first_attempt: Timestamp,
    /// When the item last failed.
    pub last_attempt: Timestamp,
    /// How many times it failed.
    pub failure_count: u32,
    /// Every recorded attempt.
    pub failure_history: Vec<FailureDetail>,
    /// Groups similar failures (16 hex digits of SHA-256 in current files).
    pub error_signature: String,
    /// The failed agent's worktree, when kept.
    pub worktree_artifacts: Option<WorktreeArtifacts>,
    /// Whether `dlq retry` takes the item without `--force`.
    pub reprocess_eligible: bool,
    /// Whether a person should look at it.
    pub manual_review_required: bool,
    /// Unknown top-level fields.
    pub extra: Extra,
    /// True when the source had no `worktree_artifacts` key at all.
    pub worktree_artifacts_absent: bool,
}

/// One failed attempt, as the legacy `FailureDetail`.
#[derive(Clone, Debug)]
pub struct FailureDetail {
    pub attempt_number: u32,
    pub timestamp: Timestamp,
    pub error_type: ErrorType,
    pub error_message: String,
    pub error_context: Option<Vec<String>>,
    pub stack_trace: Option<String>,
    pub agent_id: String,
    pub step_failed: String,
    pub duration_ms: u64,
    pub json_log_location: Option<String>,
    /// Unknown fields of this attempt.
    pub extra: Extra,
    /// Which optional fields were absent (rather than null) in the source.
    pub omitted: Omitted,
}

/// The failed agent's worktree, as the legacy `WorktreeArtifacts`.
#[derive(Clone, Debug)]
pub struct WorktreeArtifacts {
    pub worktree_path: String,
    pub branch_name: String,
    pub uncommitted_changes: Option<String>,
    pub error_logs: Option<String>,
    /// Unknown fields.
    pub extra: Extra,
    /// Which optional fields were absent (rather than null) in the source.
    pub omitted: Omitted,
}

/// The error classification: a variant name, its exit code when it has one,
/// and the source's JSON when that says more than name and exit code.
#[derive(Clone, Debug)]
pub struct ErrorType {
    /// The variant name: `Timeout`, `CommandFailed`, ... or any other name.
    pub name: String,
    /// The exit code of `CommandFailed`.
    pub exit_code: Option<i64>,
    /// The error type exactly as written, when it is not the plain form.
    pub raw: Option<Box<RawValue>>,
}

impl PartialEq for ErrorType {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.exit_code == other.exit_code
            && self.raw.as_ref().map(|r| r.get()) == other.raw.as_ref().map(|r| r.get())
    }
}

/// A set of optional legacy field names that the source left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Omitted(u8);

impl Omitted {
    pub const ERROR_CONTEXT: Omitted = Omitted(1);
    pub const STACK_TRACE: Omitted = Omitted(2);
    pub const JSON_LOG_LOCATION: Omitted = Omitted(4);
    pub const UNCOMMITTED_CHANGES: Omitted = Omitted(8);
    pub const ERROR_LOGS: Omitted = Omitted(16);

    const NAMES: [(Omitted, &'static str); 5] = [
        (Omitted::ERROR_CONTEXT, "error_context"),
        (Omitted::STACK_TRACE, "stack_trace"),
        (Omitted::JSON_LOG_LOCATION, "json_log_location"),
        (Omitted::UNCOMMITTED_CHANGES, "uncommitted_changes"),
        (Omitted::ERROR_LOGS, "error_logs"),
    ];

    /// The empty set.
    pub const fn none() -> Self {
        Omitted(0)
    }

    /// Whether `field` is in the set.
    pub fn contains(self, field: Omitted) -> bool {
        self.0 & field.0 != 0
    }

    /// The set with `field` added or removed.
    pub fn with(self, field: Omitted, present: bool) -> Self {
        if present {
            Omitted(self.0 | field.0)
        } else {
            Omitted(self.0 & !field.0)
        }
    }

    /// The names in the set, for the `omitted_fields` column.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(flag, _)| self.contains(*flag))
            .map(|(_, name)| *name)
            .collect()
    }

    /// The set from names; unknown names are ignored.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        names.into_iter().fold(Omitted::none(), |set, name| {
            match Self::NAMES.iter().find(|(_, n)| *n == name) {
                Some((flag, _)) => set.with(*flag, true),
                None => set,
            }
        })
    }
}

// ---------------------------------------------------------------------------
// Error types

/// Error type names the legacy writer and its documents used.
pub mod error_types {
    pub const TIMEOUT: &str = "Timeout";
    pub const COMMAND_FAILED: &str = "CommandFailed";
    pub const COMMIT_VALIDATION_FAILED: &str = "CommitValidationFailed";
    pub const WORKTREE_ERROR: &str = "WorktreeError";
    pub const MERGE_CONFLICT: &str = "MergeConflict";
    pub const VALIDATION_FAILED: &str = "ValidationFailed";
    pub const RESOURCE_EXHAUSTED: &str = "ResourceExhausted";
    pub const PERMISSION_ERROR: &str = "PermissionError";
    pub const UNKNOWN: &str = "Unknown";
}

impl ErrorType {
    /// A unit variant such as `Timeout`.
    pub fn named(name: impl Into<String>) -> Self {
        ErrorType {
            name: name.into(),
            exit_code: None,
            raw: None,
        }
    }

    /// `{"CommandFailed": {"exit_code": N}}`.
    pub fn command_failed(exit_code: i64) -> Self {
        ErrorType {
            name: error_types::COMMAND_FAILED.to_string(),
            exit_code: Some(exit_code),
            raw: None,
        }
    }

    /// `{"CommandFailed": {"command": C, "exit_code": N or null}}`, the
    /// documented (spec-only) form.
    pub fn command_failed_with_command(command: &str, exit_code: Option<i64>) -> Self {
        let raw = serde_json::json!({
            error_types::COMMAND_FAILED: {"command": command, "exit_code": exit_code}
        });
        ErrorType {
            name: error_types::COMMAND_FAILED.to_string(),
            exit_code,
            raw: serde_json::value::to_raw_value(&raw).ok(),
        }
    }
}

// ---------------------------------------------------------------------------
// What an item must be to be stored

/// Removes insignificant white space from JSON text (outside strings), so
/// pretty-printed item data is stored compactly but otherwise byte-exact:
/// numbers keep every digit they had.
pub fn compact_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for ch in text.chars() {
        if in_string {
            out.push(ch);
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == '"' {
                in_string = false;
            }
        } else if ch == '"' {
            in_string = true;
            out.push(ch);
        } else if !matches!(ch, ' ' | '\n' | '\r' | '\t') {
            out.push(ch);
        }
    }
    out
}

/// Compact raw JSON text as a boxed raw value.
pub fn compact_raw(text: &str) -> std::result::Result<Box<RawValue>, serde_json::Error> {
    RawValue::from_string(compact_json(text))
}

/// Why an id (item or job) was refused: no command line could name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidId {
    #[error("is empty")]
    Empty,
    #[error("contains a NUL byte")]
    NulByte,
}

impl From<InvalidId> for String {
    /// The reason as text, for an error that carries one (a job id is an
    /// argument, an item id a field).
    fn from(reason: InvalidId) -> String {
        reason.to_string()
    }
}

/// Refuses an id (item or job) that no command line could name: empty, or
/// holding a NUL byte.
pub fn check_id(id: &str) -> std::result::Result<(), InvalidId> {
    if id.is_empty() {
        Err(InvalidId::Empty)
    } else if id.contains('\0') {
        Err(InvalidId::NulByte)
    } else {
        Ok(())
    }
}

/// The largest item_data SQLite stores (its default SQLITE_MAX_LENGTH,
/// one value of a row; the row's other columns come on top).
pub const MAX_ITEM_DATA_BYTES: usize = 999_000_000;

/// How deep JSON inside an item may nest. SQLite's JSON functions, which
/// the schema's CHECK constraints use, refuse 1,000 levels: deeper data
/// would parse here and then fail the whole transaction.
pub const MAX_JSON_DEPTH: usize = 900;

/// JSON nested deeper than [`MAX_JSON_DEPTH`], in the top-level `field` of
/// an item (or `item` when before any).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "field {field}: nested more than {MAX_JSON_DEPTH} levels deep \
     (the database's JSON functions stop at 1000)"
)]
pub struct TooDeep {
    pub field: String,
}

/// Refuses an item whose JSON nests deeper than [`MAX_JSON_DEPTH`], naming
/// the top-level field it happens in.
pub(crate) fn check_depth(text: &str) -> std::result::Result<(), TooDeep> {
    let bytes = text.as_bytes();
    // Nesting can only pass the limit if that many brackets open: a count
    // (which the compiler vectorises) settles nearly every item without the
    // scan below, which reads byte by byte (a sixth of an import's parse).
    if bytes.iter().filter(|&&b| b == b'{' || b == b'[').count() <= MAX_JSON_DEPTH {
        return Ok(());
    }
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut string_start = 0;
    let mut last_key: Option<(usize, usize)> = None;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
                if depth == 1 {
                    last_key = Some((string_start, i));
                }
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                string_start = i + 1;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    let field = last_key
                        .and_then(|(start, end)| text.get(start..end))
                        .unwrap_or("item");
                    return Err(TooDeep {
                        field: field.to_string(),
                    });
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

impl DeadLetteredItem {
    /// Refuses an item no reader could have produced or SQLite could not
    /// store: an empty item id (or one holding a NUL byte), item_data
    /// nested deeper than [`MAX_JSON_DEPTH`] or larger than
    /// [`MAX_ITEM_DATA_BYTES`], or an attempt numbered 0 (attempts count
    /// from 1). Every add checks it, before its transaction.
    pub fn validate(&self) -> Result<()> {
        check_id(&self.item_id).map_err(|reason| {
            Error::invalid_item(
                format!("item {:?}", self.item_id),
                format!("item_id {reason}"),
            )
        })?;
        let data = self.item_data.get();
        if data.len() > MAX_ITEM_DATA_BYTES {
            return Err(Error::invalid_item(
                format!("item {:?}", self.item_id),
                format!(
                    "item_data is {} bytes, more than SQLite stores in one value ({MAX_ITEM_DATA_BYTES})",
                    data.len()
                ),
            ));
        }
        check_depth(data).map_err(|reason| {
            Error::invalid_item(
                format!("item {:?}", self.item_id),
                format!("item_data: {reason}"),
            )
        })?;
        // Both databases keep a signed 64-bit integer: a larger duration
        // would come back changed, which an import must not do silently.
        if let Some((at, attempt)) = self
            .failure_history
            .iter()
            .enumerate()
            .find(|(_, a)| i64::try_from(a.duration_ms).is_err())
        {
            return Err(Error::invalid_item(
                format!("item {:?}", self.item_id),
                format!(
                    "failure_history[{at}]: duration_ms {} is more than the database keeps ({})",
                    attempt.duration_ms,
                    i64::MAX
                ),
            ));
        }
        if let Some(at) = self
            .failure_history
            .iter()
            .position(|a| a.attempt_number == 0)
        {
            return Err(Error::invalid_item(
                format!("item {:?}", self.item_id),
                format!("failure_history[{at}]: attempt_number is 0 (attempts count from 1)"),
            ));
        }
        Ok(())
    }

    /// The item data as a JSON value.
    pub fn item_data_value(&self) -> serde_json::Value {
        serde_json::from_str(self.item_data.get()).unwrap_or(serde_json::Value::Null)
    }

    /// The item's last attempt: the one with the latest timestamp, and of
    /// those the highest attempt_number. This is the one definition of
    /// "last" (the SQL side is `store::counters::last_attempt_order`): it
    /// decides `last_error_type`, the views, the counters and which copy
    /// wins a merge. Attempt numbers alone cannot decide it: every copy the
    /// legacy writer left numbers its one attempt 1, and agents that restart
    /// their count send attempts out of order.
    pub fn last_failure(&self) -> Option<&FailureDetail> {
        self.failure_history.iter().max_by_key(|f| last_key(f))
    }

    /// How recent this copy is, for choosing between two copies of an item:
    /// its last attempt's [`last_key`]; a copy without attempts ranks below
    /// any with one, and by its `last_attempt` field among those without.
    /// Two copies holding the same last attempt tie: they report the same
    /// failure. (Breaking that tie on `last_attempt` would not commute: a
    /// merged item's `last_attempt` is the latest of all copies, not the
    /// winner's.)
    fn recency(&self) -> (Option<(Timestamp, u32)>, Option<Timestamp>) {
        match self.last_failure() {
            Some(last) => (Some(last_key(last)), None),
            None => (None, Some(self.last_attempt)),
        }
    }

    /// Whether the item is already in its stored form (the common case), so
    /// writers can skip the copy `normalised` makes.
    pub fn is_normalised(&self) -> bool {
        self.failure_history
            .windows(2)
            .all(|pair| pair[0].attempt_key() < pair[1].attempt_key())
            && usize::try_from(self.failure_count).is_ok_and(|n| n >= self.failure_history.len())
    }

    /// The item as stored: history sorted and de-duplicated by attempt key,
    /// failure_count at least the number of attempts. Storing and reading
    /// back an item gives exactly its normalised form.
    pub fn normalised(&self) -> DeadLetteredItem {
        let mut item = self.clone();
        item.failure_history = union_history(&self.failure_history, &[]);
        item.failure_count = item
            .failure_count
            .max(u32::try_from(item.failure_history.len()).unwrap_or(u32::MAX));
        item
    }
}

impl FailureDetail {
    /// What the current legacy writer leaves out: an empty `error_context`
    /// and an absent `json_log_location`; `stack_trace` is written as null.
    pub fn writer_omitted(&self) -> Omitted {
        Omitted::none()
            .with(Omitted::ERROR_CONTEXT, self.error_context.is_none())
            .with(Omitted::JSON_LOG_LOCATION, self.json_log_location.is_none())
    }

    /// The omitted set restricted to fields that are actually None; what
    /// storage compares with `writer_omitted` to decide whether to keep it.
    pub fn effective_omitted(&self) -> Omitted {
        Omitted::none()
            .with(
                Omitted::ERROR_CONTEXT,
                self.error_context.is_none() && self.omitted.contains(Omitted::ERROR_CONTEXT),
            )
            .with(
                Omitted::STACK_TRACE,
                self.stack_trace.is_none() && self.omitted.contains(Omitted::STACK_TRACE),
            )
            .with(
                Omitted::JSON_LOG_LOCATION,
                self.json_log_location.is_none()
                    && self.omitted.contains(Omitted::JSON_LOG_LOCATION),
            )
    }

    /// The key two copies of one attempt share.
    pub fn attempt_key(&self) -> (u32, Timestamp) {
        (self.attempt_number, self.timestamp)
    }
}

impl WorktreeArtifacts {
    /// The omitted set restricted to fields that are actually None (the
    /// legacy writer omitted neither).
    pub fn effective_omitted(&self) -> Omitted {
        Omitted::none()
            .with(
                Omitted::UNCOMMITTED_CHANGES,
                self.uncommitted_changes.is_none()
                    && self.omitted.contains(Omitted::UNCOMMITTED_CHANGES),
            )
            .with(
                Omitted::ERROR_LOGS,
                self.error_logs.is_none() && self.omitted.contains(Omitted::ERROR_LOGS),
            )
    }
}

// ---------------------------------------------------------------------------
// Merging two copies of one item

/// Which flags a person set with `dlq mark`: a merge keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkedFlags {
    pub reprocess_eligible: bool,
    pub manual_review_required: bool,
}

/// The order of "last" among attempts: latest timestamp, then highest
/// attempt_number.
pub fn last_key(attempt: &FailureDetail) -> (Timestamp, u32) {
    (attempt.timestamp, attempt.attempt_number)
}

/// Merges `incoming` into `existing` by the engine's rule and returns the
/// result. Histories are unioned on (attempt_number, timestamp), so merging
/// the same item twice changes nothing; first_attempt is the min and
/// last_attempt the max; failure_count never decreases and is at least the
/// number of attempts; the rest (data, signature, artifacts, flags) comes
/// from the copy that holds the later last attempt
/// ([`DeadLetteredItem::last_failure`]; a copy with attempts beats one
/// without; between copies without, the later `last_attempt` field; the
/// existing copy when both hold the same last attempt), so the merged
/// item's signature belongs to its last attempt whatever order the copies
/// arrive in. Flags a person marked are kept.
pub fn merge(
    existing: &DeadLetteredItem,
    incoming: &DeadLetteredItem,
    marked: MarkedFlags,
) -> DeadLetteredItem {
    let newer = if incoming.recency() > existing.recency() {
        incoming
    } else {
        existing
    };
    let mut merged = newer.clone();
    merged.failure_history = union_history(&existing.failure_history, &incoming.failure_history);
    merged.first_attempt = existing.first_attempt.min(incoming.first_attempt);
    merged.last_attempt = existing.last_attempt.max(incoming.last_attempt);
    merged.failure_count = existing
        .failure_count
        .max(incoming.failure_count)
        .max(u32::try_from(merged.failure_history.len()).unwrap_or(u32::MAX));
    if marked.reprocess_eligible {
        merged.reprocess_eligible = existing.reprocess_eligible;
    }
    if marked.manual_review_required {
        merged.manual_review_required = existing.manual_review_required;
    }
    merged
}

/// The union of two histories on (attempt_number, timestamp), sorted by that
/// key; where both have an attempt, the first list's copy wins.
pub fn union_history(first: &[FailureDetail], second: &[FailureDetail]) -> Vec<FailureDetail> {
    let mut by_key: BTreeMap<(u32, Timestamp), &FailureDetail> = BTreeMap::new();
    for detail in first.iter().chain(second) {
        by_key.entry(detail.attempt_key()).or_insert(detail);
    }
    by_key.into_values().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legacy::codec::tests::CURRENT;

    #[test]
    fn error_types_are_equal_when_name_exit_code_and_source_agree() {
        let raw = |text: &str| ErrorType::from_raw(&RawValue::from_string(text.into()).unwrap());
        let timeout = ErrorType::named("Timeout");
        assert_eq!(timeout, ErrorType::named("Timeout"));
        assert_ne!(timeout, ErrorType::named("Unknown"));
        assert_eq!(ErrorType::command_failed(1), ErrorType::command_failed(1));
        assert_ne!(ErrorType::command_failed(1), ErrorType::command_failed(2));
        assert_ne!(
            ErrorType::command_failed(1),
            ErrorType::command_failed_with_command("make", Some(1)),
            "same name and code, but the source said more"
        );
        assert_eq!(
            raw(r#"{"X": {"exit_code": 3, "a": 1}}"#).unwrap(),
            raw(r#"{"X":{"exit_code":3,"a":1}}"#).unwrap(),
            "the source compared compacted"
        );
        assert_ne!(
            raw(r#"{"X": {"exit_code": 3, "a": 1}}"#).unwrap(),
            raw(r#"{"X": {"exit_code": 3, "a": 2}}"#).unwrap()
        );
    }

    #[test]
    fn compact_json_keeps_strings_and_numbers() {
        assert_eq!(
            compact_json("{ \"a b\" : [ 1 , 2.50 ],\n \"c\": \"x \\\" y\" }"),
            "{\"a b\":[1,2.50],\"c\":\"x \\\" y\"}"
        );
    }

    #[test]
    fn merge_unions_history_and_is_idempotent() {
        let a = DeadLetteredItem::from_json_str(CURRENT).unwrap();
        let mut b = a.clone();
        b.failure_history[0].attempt_number = 3;
        b.failure_history[0].timestamp = Timestamp::parse("2025-11-24T00:00:00Z").unwrap();
        b.last_attempt = b.failure_history[0].timestamp;
        b.reprocess_eligible = false;
        let merged = merge(&a, &b, MarkedFlags::default());
        assert_eq!(merged.failure_history.len(), 2);
        assert_eq!(merged.failure_count, 2);
        assert_eq!(merged.first_attempt, a.first_attempt);
        assert_eq!(merged.last_attempt, b.last_attempt);
        assert!(!merged.reprocess_eligible);
        let again = merge(&merged, &b, MarkedFlags::default());
        assert_eq!(
            again.to_json_value().unwrap(),
            merged.to_json_value().unwrap()
        );
        let kept = merge(
            &a,
            &b,
            MarkedFlags {
                reprocess_eligible: true,
                manual_review_required: false,
            },
        );
        assert!(kept.reprocess_eligible);
    }
}
