//! One legacy item's JSON, both ways (docs/legacy-format.md, "One item
//! file"). Reading is lenient in exactly the ways the legacy files need:
//! every historical format, any error type name, any timestamp offset and
//! fraction width, unknown fields kept; a fast pass (`fast`) takes the
//! shapes the writer produced and the lenient reader (`lenient`) the rest,
//! and words the error. Writing (`write`) gives the legacy shape field for
//! field, so an item read and written again compares equal as JSON. The
//! types themselves, and what makes an item valid, are [`crate::model`]'s.

mod error_type;
mod fast;
mod lenient;
mod write;

pub use error_type::ErrorTypeError;
pub use write::{ItemWithJob, JOB_ID_KEY, REPO_KEY};

use crate::error::{Error, Result};
use crate::model::{check_depth, DeadLetteredItem, InvalidId, TooDeep};
use serde_json::value::RawValue;

/// Why one legacy item did not read: the one-line reason an import or
/// `dlq add` reports, naming the field (as a path such as
/// `failure_history[0].timestamp`).
#[derive(Debug, thiserror::Error)]
pub enum ItemError {
    #[error("not UTF-8 (byte {valid_up_to})")]
    NotUtf8 { valid_up_to: usize },
    #[error("empty file")]
    Empty,
    #[error("not valid JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error(transparent)]
    TooDeep(#[from] TooDeep),
    /// `path` is empty for the item itself.
    #[error("{}: expected a JSON object", if .path.is_empty() { "item" } else { .path })]
    NotAnObject { path: String },
    #[error("field {path}: expected an array")]
    NotAnArray { path: String },
    #[error("missing field {path}")]
    MissingField { path: String },
    /// A field of the wrong type, or a timestamp that does not parse.
    #[error("field {path}: {reason}")]
    InvalidField { path: String, reason: String },
    #[error("field {path}: {source}")]
    InvalidErrorType {
        path: String,
        #[source]
        source: ErrorTypeError,
    },
    #[error("field item_id: {0}")]
    InvalidId(#[source] InvalidId),
    /// JSON inside the item that could not be kept (practically never: it
    /// parsed once already).
    #[error("{0}")]
    Json(#[source] serde_json::Error),
}

impl From<ItemError> for Error {
    /// An item error where the crate's errors meet it: the reader has no
    /// better context than "item" (a caller with a file or a position
    /// names it itself).
    fn from(error: ItemError) -> Self {
        Error::invalid_item("item", error.to_string())
    }
}

/// Parses one legacy item file's bytes.
pub fn parse_slice(bytes: &[u8]) -> Result<DeadLetteredItem, ItemError> {
    let text = std::str::from_utf8(bytes).map_err(|e| ItemError::NotUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    parse_str(text)
}

/// Parses one item from JSON text.
pub fn parse_str(text: &str) -> Result<DeadLetteredItem, ItemError> {
    if text.trim().is_empty() {
        return Err(ItemError::Empty);
    }
    check_depth(text)?;
    if let Some(item) = fast::parse(text) {
        return Ok(item);
    }
    let raw: &RawValue = serde_json::from_str(text).map_err(ItemError::NotJson)?;
    lenient::item(raw)
}

impl DeadLetteredItem {
    /// Parses one legacy item file (or any JSON text holding one item).
    pub fn from_json_slice(bytes: &[u8]) -> Result<Self> {
        Ok(parse_slice(bytes)?)
    }

    /// Parses one item from JSON text.
    pub fn from_json_str(text: &str) -> Result<Self> {
        Ok(parse_str(text)?)
    }

    /// Parses one item from a raw JSON value; the error is one line naming
    /// the offending field.
    pub fn from_raw(raw: &RawValue) -> Result<Self, ItemError> {
        check_depth(raw.get())?;
        if let Some(item) = fast::parse(raw.get()) {
            return Ok(item);
        }
        lenient::item(raw)
    }

    /// The item as pretty legacy JSON (2-space indent, no trailing newline).
    pub fn to_legacy_json_pretty(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// The item as a JSON value in the legacy shape.
    pub fn to_json_value(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(self)?)
    }

    /// Removes and returns the `job_id` key a JSON export added (if it is a
    /// string), so the item reads back as it was stored.
    pub fn take_job_id(&mut self) -> Option<String> {
        self.take_string(JOB_ID_KEY)
    }

    /// Removes and returns the `repo` key a JSON export added (if it is a
    /// string): the repo of the item's job. Exports made before it was
    /// written have none.
    pub fn take_repo(&mut self) -> Option<String> {
        self.take_string(REPO_KEY)
    }

    /// Removes an unknown top-level field holding a string; leaves it (and
    /// returns None) when it holds anything else.
    fn take_string(&mut self, key: &str) -> Option<String> {
        let raw = self.extra.get(key)?;
        let value: String = serde_json::from_str(raw.get()).ok()?;
        self.extra.remove(key);
        Some(value)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{compact_json, ErrorType};

    /// An item in the current writer's shape, with a number no float holds.
    pub(crate) const CURRENT: &str = r#"{
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
            let text = crate::generate::item_json(&mut rng, item, 1);
            // A JSON export's line: the item with its job (and repo) added.
            let added = [
                r#""job_id": "job-1", "repo": "/r/x","#,
                r#""job_id":"j","#,
                r#""repo": null, "job_id": 7,"#,
            ][item % 3];
            texts.push(text.replacen('{', &format!("{{{added}"), 1));
            texts.push(text);
        }
        for text in &texts {
            let Some(fast) = fast::parse(text) else {
                continue;
            };
            let raw: &RawValue = serde_json::from_str(text).unwrap();
            let lenient = lenient::item(raw).unwrap();
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
        assert!(compared >= 105, "{compared}");
    }

    /// The reasons users see, pinned: the typed errors must word them as
    /// the string errors before them did.
    #[test]
    fn error_messages_are_pinned() {
        let message = |text: &str| {
            DeadLetteredItem::from_json_str(text)
                .unwrap_err()
                .to_string()
        };
        let history = |entry: &str| {
            message(&CURRENT.replace(
                &CURRENT[CURRENT.find("\"failure_history\"").unwrap()
                    ..CURRENT.find("\"error_signature\"").unwrap()],
                &format!("\"failure_history\": {entry},\n      "),
            ))
        };
        let attempt = r#"{"attempt_number": 1, "timestamp": "T", "error_type": E,
            "error_message": "m", "agent_id": "a", "step_failed": "s", "duration_ms": 1}"#;
        let cases = [
            (message(""), "item: empty file"),
            (
                DeadLetteredItem::from_json_slice(b"\"\xff\xfe\"")
                    .unwrap_err()
                    .to_string(),
                "item: not UTF-8 (byte 1)",
            ),
            (
                message("{"),
                "item: not valid JSON: EOF while parsing an object at line 1 column 1",
            ),
            (message("[1]"), "item: item: expected a JSON object"),
            (
                message("{\"item_id\": 5}"),
                "item: field item_id: invalid type: integer `5`, expected a string",
            ),
            (
                message(&CURRENT.replace("\"item_7\"", "\"\"")),
                "item: field item_id: is empty",
            ),
            (
                message(&CURRENT.replace("\"error_signature\": \"ad9e863b292069ad\",", "")),
                "item: missing field error_signature",
            ),
            (
                history("5"),
                "item: field failure_history: expected an array",
            ),
            (
                history("[5]"),
                "item: failure_history[0]: expected a JSON object",
            ),
            (
                history(&format!("[{}]", attempt.replace('E', "\"Timeout\""))),
                "item: field failure_history[0].timestamp: invalid timestamp \"T\": \
                 premature end of input",
            ),
            (
                history(&format!(
                    "[{}]",
                    attempt
                        .replace("\"T\"", "\"2025-01-01T00:00:00Z\"")
                        .replace('E', "[1]")
                )),
                "item: field failure_history[0].error_type: \
                 expected a name or an object with one key",
            ),
            (
                message(&format!(
                    "{{\"item_id\": \"a\", \"item_data\": {}{}}}",
                    "[".repeat(901),
                    "]".repeat(901)
                )),
                "item: field item_data: nested more than 900 levels deep \
                 (the database's JSON functions stop at 1000)",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}
