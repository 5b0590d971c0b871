//! The legacy-compatible dead-letter types.
//!
//! Reading is lenient in exactly the ways the legacy files need (see
//! shared/legacy-format.md): every historical format, any error type name,
//! any timestamp offset and fraction width, unknown fields kept. Writing gives
//! the legacy JSON shape field for field, so an item read and written again
//! compares equal as JSON. The merge rule for two copies of one item lives
//! here too, as a pure function.

mod build;
mod fast;

pub use build::ItemBuilder;

use crate::error::{Error, Result};
use crate::time::Timestamp;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
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

    /// Reads any legacy error type: a bare name or an object with one key.
    pub fn from_raw(raw: &RawValue) -> std::result::Result<Self, String> {
        let value: serde_json::Value =
            serde_json::from_str(raw.get()).map_err(|e| e.to_string())?;
        match value {
            serde_json::Value::String(name) => Ok(ErrorType::named(name)),
            serde_json::Value::Object(map) if map.len() == 1 => {
                let (name, inner) = map.into_iter().next().ok_or("empty error_type")?;
                let exit_code = inner.get("exit_code").and_then(|code| code.as_i64());
                // The current writer's only struct form is {"CommandFailed": {"exit_code": N}};
                // anything else keeps its JSON so it is written back as it was.
                let plain = name == error_types::COMMAND_FAILED
                    && exit_code.is_some()
                    && inner.as_object().is_some_and(|o| o.len() == 1);
                Ok(ErrorType {
                    name,
                    exit_code,
                    raw: if plain {
                        None
                    } else {
                        Some(compact_raw(raw.get()).map_err(|e| e.to_string())?)
                    },
                })
            }
            _ => Err("expected a name or an object with one key".to_string()),
        }
    }

    /// The raw JSON text of this error type, as written to a legacy file.
    pub fn to_json_text(&self) -> String {
        if let Some(raw) = &self.raw {
            return raw.get().to_string();
        }
        let value = match self.exit_code {
            Some(code) => serde_json::json!({ self.name.as_str(): {"exit_code": code} }),
            None => serde_json::Value::String(self.name.clone()),
        };
        value.to_string()
    }
}

impl Serialize for ErrorType {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match &self.raw {
            Some(raw) => raw.serialize(serializer),
            None => match self.exit_code {
                Some(code) => {
                    let mut map = serializer.serialize_map(Some(1))?;
                    map.serialize_entry(&self.name, &ExitCode { exit_code: code })?;
                    map.end()
                }
                None => serializer.serialize_str(&self.name),
            },
        }
    }
}

#[derive(Serialize)]
struct ExitCode {
    exit_code: i64,
}

// ---------------------------------------------------------------------------
// Parsing

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

/// Refuses an id (item or job) that no command line could name: empty, or
/// holding a NUL byte.
pub fn check_id(id: &str) -> std::result::Result<(), String> {
    if id.is_empty() {
        Err("is empty".to_string())
    } else if id.contains('\0') {
        Err("contains a NUL byte".to_string())
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

/// Refuses an item whose JSON nests deeper than [`MAX_JSON_DEPTH`], naming
/// the top-level field it happens in.
pub(crate) fn check_depth(text: &str) -> std::result::Result<(), String> {
    let bytes = text.as_bytes();
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
                    return Err(format!(
                        "field {field}: nested more than {MAX_JSON_DEPTH} levels deep \
                         (the database's JSON functions stop at 1000)"
                    ));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Compact raw JSON text as a boxed raw value.
pub fn compact_raw(text: &str) -> std::result::Result<Box<RawValue>, serde_json::Error> {
    RawValue::from_string(compact_json(text))
}

type RawObject<'a> = BTreeMap<String, &'a RawValue>;

/// Reads one field of an object; the error names the field's path.
struct Fields<'a> {
    map: RawObject<'a>,
    path: String,
}

impl<'a> Fields<'a> {
    fn new(raw: &'a RawValue, path: &str) -> std::result::Result<Self, String> {
        let map: RawObject<'a> = serde_json::from_str(raw.get())
            .map_err(|_| format!("{}: expected a JSON object", display_path(path)))?;
        Ok(Fields {
            map,
            path: path.to_string(),
        })
    }

    fn field_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// A required field, parsed as `T`.
    fn required<T: serde::de::DeserializeOwned>(
        &mut self,
        key: &str,
    ) -> std::result::Result<T, String> {
        match self.map.remove(key) {
            Some(raw) => parse_as(raw, &self.field_path(key)),
            None => Err(format!("missing field {}", self.field_path(key))),
        }
    }

    /// An optional field: `Ok(None)` when absent, `Ok(Some(None))` when null.
    fn optional<T: serde::de::DeserializeOwned>(
        &mut self,
        key: &str,
    ) -> std::result::Result<Option<Option<T>>, String> {
        match self.map.remove(key) {
            Some(raw) => parse_as::<Option<T>>(raw, &self.field_path(key)).map(Some),
            None => Ok(None),
        }
    }

    fn raw(&mut self, key: &str) -> std::result::Result<&'a RawValue, String> {
        self.map
            .remove(key)
            .ok_or_else(|| format!("missing field {}", self.field_path(key)))
    }

    /// Whatever is left: the unknown fields, kept verbatim.
    fn into_extra(self) -> std::result::Result<Extra, String> {
        self.map
            .into_iter()
            .map(|(key, raw)| {
                compact_raw(raw.get())
                    .map(|value| (key, value))
                    .map_err(|e| e.to_string())
            })
            .collect()
    }
}

fn display_path(path: &str) -> &str {
    if path.is_empty() {
        "item"
    } else {
        path
    }
}

fn parse_as<T: serde::de::DeserializeOwned>(
    raw: &RawValue,
    path: &str,
) -> std::result::Result<T, String> {
    serde_json::from_str(raw.get()).map_err(|e| {
        // serde's message ends with " at line 1 column N" of the field's own
        // text, which says nothing about the file: drop it.
        let message = e.to_string();
        let message = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_string();
        format!("field {path}: {message}")
    })
}

fn parse_timestamp(fields: &mut Fields<'_>, key: &str) -> std::result::Result<Timestamp, String> {
    let text: String = fields.required(key)?;
    Timestamp::parse(&text).map_err(|e| format!("field {}: {e}", fields.field_path(key)))
}

impl DeadLetteredItem {
    /// Parses one legacy item file (or any JSON text holding one item).
    pub fn from_json_slice(bytes: &[u8]) -> Result<Self> {
        let text = std::str::from_utf8(bytes).map_err(|e| {
            Error::invalid_item("item", format!("not UTF-8 (byte {})", e.valid_up_to()))
        })?;
        Self::from_json_str(text)
    }

    /// Parses one item from JSON text.
    pub fn from_json_str(text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Err(Error::invalid_item("item", "empty file"));
        }
        check_depth(text).map_err(|reason| Error::invalid_item("item", reason))?;
        if let Some(item) = fast::parse(text) {
            return Ok(item);
        }
        let raw: &RawValue = serde_json::from_str(text)
            .map_err(|e| Error::invalid_item("item", format!("not valid JSON: {e}")))?;
        Self::from_raw(raw).map_err(|reason| Error::invalid_item("item", reason))
    }

    /// Parses one item from a raw JSON value; the error is one line naming
    /// the offending field.
    pub fn from_raw(raw: &RawValue) -> std::result::Result<Self, String> {
        check_depth(raw.get())?;
        if let Some(item) = fast::parse(raw.get()) {
            return Ok(item);
        }
        Self::from_raw_lenient(raw)
    }

    /// The lenient reader: any shape the legacy files took, unknown fields
    /// kept, and an error that names the field.
    fn from_raw_lenient(raw: &RawValue) -> std::result::Result<Self, String> {
        let mut fields = Fields::new(raw, "")?;
        let item_id: String = fields.required("item_id")?;
        check_id(&item_id).map_err(|reason| format!("field item_id: {reason}"))?;
        let item_data = compact_raw(fields.raw("item_data")?.get()).map_err(|e| e.to_string())?;
        let first_attempt = parse_timestamp(&mut fields, "first_attempt")?;
        let last_attempt = parse_timestamp(&mut fields, "last_attempt")?;
        let failure_count: u32 = fields.required("failure_count")?;
        let history_raw: Vec<&RawValue> = fields.required_borrowed("failure_history")?;
        let mut failure_history = Vec::with_capacity(history_raw.len());
        for (index, entry) in history_raw.into_iter().enumerate() {
            failure_history.push(FailureDetail::from_raw(
                entry,
                &format!("failure_history[{index}]"),
            )?);
        }
        let error_signature: String = fields.required("error_signature")?;
        let (worktree_artifacts, worktree_artifacts_absent) =
            match fields.map.remove("worktree_artifacts") {
                None => (None, true),
                Some(raw) if raw.get().trim() == "null" => (None, false),
                Some(raw) => (
                    Some(WorktreeArtifacts::from_raw(raw, "worktree_artifacts")?),
                    false,
                ),
            };
        let reprocess_eligible: bool = fields.required("reprocess_eligible")?;
        let manual_review_required: bool = fields.required("manual_review_required")?;
        let extra = fields.into_extra()?;
        Ok(DeadLetteredItem {
            item_id,
            item_data,
            first_attempt,
            last_attempt,
            failure_count,
            failure_history,
            error_signature,
            worktree_artifacts,
            reprocess_eligible,
            manual_review_required,
            extra,
            worktree_artifacts_absent,
        })
    }

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

    /// The item as pretty legacy JSON (2-space indent, no trailing newline).
    pub fn to_legacy_json_pretty(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// The item as a JSON value in the legacy shape.
    pub fn to_json_value(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(self)?)
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
}

impl<'a> Fields<'a> {
    fn required_borrowed(&mut self, key: &str) -> std::result::Result<Vec<&'a RawValue>, String> {
        let raw = self.raw(key)?;
        serde_json::from_str(raw.get())
            .map_err(|_| format!("field {}: expected an array", self.field_path(key)))
    }
}

impl FailureDetail {
    fn from_raw(raw: &RawValue, path: &str) -> std::result::Result<Self, String> {
        let mut fields = Fields::new(raw, path)?;
        let attempt_number: u32 = fields.required("attempt_number")?;
        let timestamp = parse_timestamp(&mut fields, "timestamp")?;
        let error_type_path = fields.field_path("error_type");
        let error_type = ErrorType::from_raw(fields.raw("error_type")?)
            .map_err(|e| format!("field {error_type_path}: {e}"))?;
        let error_message: String = fields.required("error_message")?;
        let error_context = fields.optional::<Vec<String>>("error_context")?;
        let stack_trace = fields.optional::<String>("stack_trace")?;
        let agent_id: String = fields.required("agent_id")?;
        let step_failed: String = fields.required("step_failed")?;
        let duration_ms: u64 = fields.required("duration_ms")?;
        let json_log_location = fields.optional::<String>("json_log_location")?;
        let omitted = Omitted::none()
            .with(Omitted::ERROR_CONTEXT, error_context.is_none())
            .with(Omitted::STACK_TRACE, stack_trace.is_none())
            .with(Omitted::JSON_LOG_LOCATION, json_log_location.is_none());
        let extra = fields.into_extra()?;
        Ok(FailureDetail {
            attempt_number,
            timestamp,
            error_type,
            error_message,
            error_context: error_context.flatten(),
            stack_trace: stack_trace.flatten(),
            agent_id,
            step_failed,
            duration_ms,
            json_log_location: json_log_location.flatten(),
            extra,
            omitted,
        })
    }

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
    fn from_raw(raw: &RawValue, path: &str) -> std::result::Result<Self, String> {
        let mut fields = Fields::new(raw, path)?;
        let worktree_path: String = fields.required("worktree_path")?;
        let branch_name: String = fields.required("branch_name")?;
        let uncommitted_changes = fields.optional::<String>("uncommitted_changes")?;
        let error_logs = fields.optional::<String>("error_logs")?;
        let omitted = Omitted::none()
            .with(Omitted::UNCOMMITTED_CHANGES, uncommitted_changes.is_none())
            .with(Omitted::ERROR_LOGS, error_logs.is_none());
        let extra = fields.into_extra()?;
        Ok(WorktreeArtifacts {
            worktree_path,
            branch_name,
            uncommitted_changes: uncommitted_changes.flatten(),
            error_logs: error_logs.flatten(),
            extra,
            omitted,
        })
    }

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
// Writing the legacy shape

fn serialize_extra<M: SerializeMap>(
    map: &mut M,
    extra: &Extra,
) -> std::result::Result<(), M::Error> {
    for (key, value) in extra {
        map.serialize_entry(key, value)?;
    }
    Ok(())
}

impl Serialize for DeadLetteredItem {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.serialize_entries(&mut map)?;
        map.end()
    }
}

/// An item with the job it belongs to: the legacy shape plus a `job_id` key
/// (which legacy readers ignore), so a JSON export of several jobs can be
/// read back with each item in its job.
pub struct ItemWithJob<'a> {
    pub job_id: &'a str,
    pub item: &'a DeadLetteredItem,
}

impl Serialize for ItemWithJob<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.item.serialize_entries(&mut map)?;
        if !self.item.extra.contains_key(JOB_ID_KEY) {
            map.serialize_entry(JOB_ID_KEY, self.job_id)?;
        }
        map.end()
    }
}

/// The key [`ItemWithJob`] adds.
pub const JOB_ID_KEY: &str = "job_id";

impl DeadLetteredItem {
    /// Removes and returns the `job_id` key a JSON export added (if it is a
    /// string), so the item reads back as it was stored.
    pub fn take_job_id(&mut self) -> Option<String> {
        let raw = self.extra.get(JOB_ID_KEY)?;
        let job_id: String = serde_json::from_str(raw.get()).ok()?;
        self.extra.remove(JOB_ID_KEY);
        Some(job_id)
    }

    fn serialize_entries<M: SerializeMap>(&self, map: &mut M) -> std::result::Result<(), M::Error> {
        map.serialize_entry("item_id", &self.item_id)?;
        map.serialize_entry("item_data", &self.item_data)?;
        map.serialize_entry("first_attempt", &self.first_attempt)?;
        map.serialize_entry("last_attempt", &self.last_attempt)?;
        map.serialize_entry("failure_count", &self.failure_count)?;
        map.serialize_entry("failure_history", &self.failure_history)?;
        map.serialize_entry("error_signature", &self.error_signature)?;
        if self.worktree_artifacts.is_some() || !self.worktree_artifacts_absent {
            map.serialize_entry("worktree_artifacts", &self.worktree_artifacts)?;
        }
        map.serialize_entry("reprocess_eligible", &self.reprocess_eligible)?;
        map.serialize_entry("manual_review_required", &self.manual_review_required)?;
        serialize_extra(map, &self.extra)
    }
}

impl Serialize for FailureDetail {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let omitted = self.effective_omitted();
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("attempt_number", &self.attempt_number)?;
        map.serialize_entry("timestamp", &self.timestamp)?;
        map.serialize_entry("error_type", &self.error_type)?;
        map.serialize_entry("error_message", &self.error_message)?;
        if !omitted.contains(Omitted::ERROR_CONTEXT) {
            map.serialize_entry("error_context", &self.error_context)?;
        }
        if !omitted.contains(Omitted::STACK_TRACE) {
            map.serialize_entry("stack_trace", &self.stack_trace)?;
        }
        map.serialize_entry("agent_id", &self.agent_id)?;
        map.serialize_entry("step_failed", &self.step_failed)?;
        map.serialize_entry("duration_ms", &self.duration_ms)?;
        if !omitted.contains(Omitted::JSON_LOG_LOCATION) {
            map.serialize_entry("json_log_location", &self.json_log_location)?;
        }
        serialize_extra(&mut map, &self.extra)?;
        map.end()
    }
}

impl Serialize for WorktreeArtifacts {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let omitted = self.effective_omitted();
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("worktree_path", &self.worktree_path)?;
        map.serialize_entry("branch_name", &self.branch_name)?;
        if !omitted.contains(Omitted::UNCOMMITTED_CHANGES) {
            map.serialize_entry("uncommitted_changes", &self.uncommitted_changes)?;
        }
        if !omitted.contains(Omitted::ERROR_LOGS) {
            map.serialize_entry("error_logs", &self.error_logs)?;
        }
        serialize_extra(&mut map, &self.extra)?;
        map.end()
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

impl DeadLetteredItem {
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

#[cfg(test)]
mod tests {
    use super::*;

    const CURRENT: &str = r#"{
      "item_id": "item_7",
      "item_data": {"path": "src/cook/mod.rs", "priority": 5, "big": 123456789012345678901234567890},
      "first_attempt": "2025-11-23T19:42:53.902113845Z",
      "last_attempt": "2025-11-23T19:42:53.902113845Z",
      "failure_count": 1,
      "failure_history": [
        {
          "attempt_number": 2,
          "timestamp": "2025-11-23T19:42:53.902113845Z",
          "error_type": {"CommandFailed": {"exit_code": 101}},
          "error_message": "Agent execution timed out",
          "stack_trace": null,
          "agent_id": "agent-item_7",
          "step_failed": "agent_execution",
          "duration_ms": 600000,
          "json_log_location": "/home/u/x.jsonl"
        }
      ],
      "error_signature": "ad9e863b292069ad",
      "worktree_artifacts": {
        "worktree_path": "/w",
        "branch_name": "b",
        "uncommitted_changes": null,
        "error_logs": null
      },
      "reprocess_eligible": true,
      "manual_review_required": false
    }"#;

    fn value(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn current_format_round_trips_exactly() {
        let item = DeadLetteredItem::from_json_str(CURRENT).unwrap();
        assert_eq!(item.failure_history[0].error_type.exit_code, Some(101));
        let written = item.to_legacy_json_pretty().unwrap();
        // Compare as text: serde_json::Value would round the big number.
        assert!(written.contains("123456789012345678901234567890"));
        assert_eq!(value(&written), value(CURRENT));
    }

    #[test]
    fn first_format_without_optional_fields_round_trips() {
        let text = r#"{"item_id":"a","item_data":null,"first_attempt":"2025-01-11T10:25:00Z",
            "last_attempt":"2025-01-11T10:30:00.120Z","failure_count":3,
            "failure_history":[{"attempt_number":1,"timestamp":"2025-01-11T10:30:00Z",
            "error_type":"Timeout","error_message":"m","agent_id":"a","step_failed":"s",
            "duration_ms":5}],"error_signature":"Unknown::m",
            "reprocess_eligible":false,"manual_review_required":true,"surprise":[1,{"x":2}]}"#;
        let item = DeadLetteredItem::from_json_str(text).unwrap();
        assert!(item.worktree_artifacts_absent);
        assert_eq!(item.extra.len(), 1);
        assert_eq!(item.to_json_value().unwrap(), value(text));
    }

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
    fn error_types_read_a_name_or_an_object_with_one_key() {
        let read = |text: &str| ErrorType::from_raw(&RawValue::from_string(text.into()).unwrap());
        let timeout = read(r#""Timeout""#).unwrap();
        assert_eq!(
            (timeout.name.as_str(), timeout.exit_code),
            ("Timeout", None)
        );
        assert!(timeout.raw.is_none());
        let plain = read(r#"{"CommandFailed": {"exit_code": 101}}"#).unwrap();
        assert_eq!(
            (plain.name.as_str(), plain.exit_code),
            ("CommandFailed", Some(101))
        );
        assert!(plain.raw.is_none(), "the writer's own form needs no copy");
        assert_eq!(
            plain.to_json_text(),
            r#"{"CommandFailed":{"exit_code":101}}"#
        );
        // Anything more is kept as written (compacted).
        for (text, name, code) in [
            (
                r#"{"CommandFailed": {"exit_code": 1, "command": "make"}}"#,
                "CommandFailed",
                Some(1),
            ),
            (
                r#"{"CommandFailed": {"exit_code": null}}"#,
                "CommandFailed",
                None,
            ),
            (r#"{"Crashed": {"exit_code": 7}}"#, "Crashed", Some(7)),
            (r#"{"Odd": "detail"}"#, "Odd", None),
        ] {
            let error_type = read(text).unwrap();
            assert_eq!(
                (error_type.name.as_str(), error_type.exit_code),
                (name, code),
                "{text}"
            );
            assert_eq!(error_type.to_json_text(), compact_json(text), "{text}");
        }
        for bad in [r#"{"A": 1, "B": 2}"#, "{}", "[\"Timeout\"]", "42", "null"] {
            assert!(read(bad).is_err(), "{bad} is not an error type");
        }
    }

    #[test]
    fn spec_only_and_unknown_error_types_are_kept() {
        for error_type in [
            r#"{"PermissionError": null}"#,
            r#""PermissionError""#,
            r#"{"CommandFailed": {"command": "cargo test", "exit_code": null}}"#,
            r#""SomethingNew""#,
            r#"{"Weird": [1, 2]}"#,
        ] {
            let raw = RawValue::from_string(error_type.to_string()).unwrap();
            let parsed = ErrorType::from_raw(&raw).unwrap();
            assert_eq!(value(&parsed.to_json_text()), value(error_type));
            assert_eq!(serde_json::to_value(&parsed).unwrap(), value(error_type));
        }
        let raw = RawValue::from_string("5".to_string()).unwrap();
        assert!(ErrorType::from_raw(&raw).is_err());
    }

    #[test]
    fn errors_name_the_field() {
        let broken = CURRENT.replace("\"attempt_number\": 2", "\"attempt_number\": \"two\"");
        let err = DeadLetteredItem::from_json_str(&broken)
            .unwrap_err()
            .to_string();
        assert!(err.contains("failure_history[0].attempt_number"), "{err}");
        let missing = CURRENT.replace("\"error_signature\": \"ad9e863b292069ad\",", "");
        let err = DeadLetteredItem::from_json_str(&missing)
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing field error_signature"), "{err}");
        for bad in ["", "   ", "[1]", "{\"item_id\": 5}", "{", "null"] {
            assert!(DeadLetteredItem::from_json_str(bad).is_err(), "{bad:?}");
        }
        assert!(DeadLetteredItem::from_json_slice(b"\"\xff\xfe\"").is_err());
    }

    /// The fast reader and the lenient one give the same item for every
    /// file the fast one takes.
    #[test]
    fn fast_and_lenient_readers_agree_on_every_sample_file() {
        let mut stack = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/legacy"
        ))];
        let mut compared = 0;
        let mut texts = vec![CURRENT.to_string()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.to_string_lossy().contains("/items/") {
                    if let Ok(text) = std::fs::read_to_string(&path) {
                        texts.push(text);
                    }
                }
            }
        }
        let mut rng = crate::generate::Rng::new(3);
        for item in 0..50 {
            texts.push(crate::generate::item_json(&mut rng, item, 1));
        }
        for text in &texts {
            let Some(fast) = fast::parse(text) else {
                continue;
            };
            let raw: &RawValue = serde_json::from_str(text).unwrap();
            let lenient = DeadLetteredItem::from_raw_lenient(raw).unwrap();
            assert_eq!(
                serde_json::to_string(&fast).unwrap(),
                serde_json::to_string(&lenient).unwrap()
            );
            assert_eq!(
                fast.worktree_artifacts_absent,
                lenient.worktree_artifacts_absent
            );
            compared += 1;
        }
        assert!(compared >= 55, "{compared}");
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
