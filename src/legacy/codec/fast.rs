//! The fast path for reading an item: one typed serde pass for files in the
//! shapes the legacy writer produced (no unknown fields, no duplicate keys),
//! and for the lines of a JSON export, which add the item's `job_id` and
//! `repo` (kept as unknown fields, as the lenient reader keeps them).
//! Anything it does not take returns `None`, and the lenient reader
//! ([`super::lenient`]) handles it (and words the error). Both must give the
//! same item for the same file; a test checks that on every sample file.

use crate::model::{
    check_id, compact_raw, DeadLetteredItem, ErrorType, FailureDetail, Omitted, WorktreeArtifacts,
};
use crate::time::Timestamp;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// An optional field that remembers whether it was absent or null.
#[derive(Default)]
enum Field<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(deserializer)? {
            Some(value) => Field::Value(value),
            None => Field::Null,
        })
    }
}

impl<T> Field<T> {
    fn absent(&self) -> bool {
        matches!(self, Field::Absent)
    }

    fn value(self) -> Option<T> {
        match self {
            Field::Value(value) => Some(value),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Item<'a> {
    // What an export adds (`super::JOB_ID_KEY`, `super::REPO_KEY`): every
    // line of a JSON-lines import has them.
    #[serde(default, borrow, deserialize_with = "present")]
    job_id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    repo: Option<&'a RawValue>,
    item_id: String,
    #[serde(borrow)]
    item_data: &'a RawValue,
    #[serde(borrow)]
    first_attempt: Cow<'a, str>,
    #[serde(borrow)]
    last_attempt: Cow<'a, str>,
    failure_count: u32,
    #[serde(borrow)]
    failure_history: Vec<Failure<'a>>,
    error_signature: String,
    #[serde(default)]
    worktree_artifacts: Field<Artifacts>,
    reprocess_eligible: bool,
    manual_review_required: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Failure<'a> {
    attempt_number: u32,
    #[serde(borrow)]
    timestamp: Cow<'a, str>,
    #[serde(borrow)]
    error_type: &'a RawValue,
    error_message: String,
    #[serde(default)]
    error_context: Field<Vec<String>>,
    #[serde(default)]
    stack_trace: Field<String>,
    agent_id: String,
    step_failed: String,
    duration_ms: u64,
    #[serde(default)]
    json_log_location: Field<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Artifacts {
    worktree_path: String,
    branch_name: String,
    #[serde(default)]
    uncommitted_changes: Field<String>,
    #[serde(default)]
    error_logs: Field<String>,
}

/// A field that is there, whatever it holds (`null` too: the lenient
/// reader keeps an unknown `null` field as it is).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// Parses `text` in one pass, or `None` if the lenient reader must decide.
pub(super) fn parse(text: &str) -> Option<DeadLetteredItem> {
    let item: Item<'_> = serde_json::from_str(text).ok()?;
    // A bad id is for the lenient reader to name.
    check_id(&item.item_id).ok()?;
    let mut failure_history = Vec::with_capacity(item.failure_history.len());
    for failure in item.failure_history {
        failure_history.push(failure.convert()?);
    }
    let worktree_artifacts_absent = item.worktree_artifacts.absent();
    let mut extra = crate::model::Extra::new();
    for (key, raw) in [
        (super::JOB_ID_KEY, item.job_id),
        (super::REPO_KEY, item.repo),
    ] {
        if let Some(raw) = raw {
            extra.insert(key.to_string(), compact_raw(raw.get()).ok()?);
        }
    }
    Some(DeadLetteredItem {
        item_id: item.item_id,
        item_data: compact_raw(item.item_data.get()).ok()?,
        first_attempt: Timestamp::parse(&item.first_attempt).ok()?,
        last_attempt: Timestamp::parse(&item.last_attempt).ok()?,
        failure_count: item.failure_count,
        failure_history,
        error_signature: item.error_signature,
        worktree_artifacts: item.worktree_artifacts.value().map(Artifacts::convert),
        reprocess_eligible: item.reprocess_eligible,
        manual_review_required: item.manual_review_required,
        extra,
        worktree_artifacts_absent,
    })
}

impl Failure<'_> {
    fn convert(self) -> Option<FailureDetail> {
        let raw_type = self.error_type.get();
        let error_type = if raw_type.starts_with('"') {
            ErrorType::named(serde_json::from_str::<String>(raw_type).ok()?)
        } else {
            ErrorType::from_raw(self.error_type).ok()?
        };
        let omitted = Omitted::none()
            .with(Omitted::ERROR_CONTEXT, self.error_context.absent())
            .with(Omitted::STACK_TRACE, self.stack_trace.absent())
            .with(Omitted::JSON_LOG_LOCATION, self.json_log_location.absent());
        Some(FailureDetail {
            attempt_number: self.attempt_number,
            timestamp: Timestamp::parse(&self.timestamp).ok()?,
            error_type,
            error_message: self.error_message,
            error_context: self.error_context.value(),
            stack_trace: self.stack_trace.value(),
            agent_id: self.agent_id,
            step_failed: self.step_failed,
            duration_ms: self.duration_ms,
            json_log_location: self.json_log_location.value(),
            extra: Default::default(),
            omitted,
        })
    }
}

impl Artifacts {
    fn convert(self) -> WorktreeArtifacts {
        let omitted = Omitted::none()
            .with(
                Omitted::UNCOMMITTED_CHANGES,
                self.uncommitted_changes.absent(),
            )
            .with(Omitted::ERROR_LOGS, self.error_logs.absent());
        WorktreeArtifacts {
            worktree_path: self.worktree_path,
            branch_name: self.branch_name,
            uncommitted_changes: self.uncommitted_changes.value(),
            error_logs: self.error_logs.value(),
            extra: Default::default(),
            omitted,
        }
    }
}
