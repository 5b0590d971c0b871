//! The lenient reader: any shape the legacy files took, unknown fields kept
//! verbatim, optional fields remembered as absent or null, and an error that
//! names the field by its path.

use super::ItemError;
use crate::model::{
    check_id, compact_raw, DeadLetteredItem, ErrorType, Extra, FailureDetail, Omitted,
    WorktreeArtifacts,
};
use crate::time::Timestamp;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

type RawObject<'a> = BTreeMap<String, &'a RawValue>;

/// The fields of one object, taken one at a time; the errors name each
/// field's path.
struct Fields<'a> {
    map: RawObject<'a>,
    path: String,
}

impl<'a> Fields<'a> {
    fn new(raw: &'a RawValue, path: &str) -> Result<Self, ItemError> {
        let map: RawObject<'a> =
            serde_json::from_str(raw.get()).map_err(|_| ItemError::NotAnObject {
                path: path.to_string(),
            })?;
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
    fn required<T: serde::de::DeserializeOwned>(&mut self, key: &str) -> Result<T, ItemError> {
        let raw = self.raw(key)?;
        parse_as(raw, self.field_path(key))
    }

    /// An optional field: `Ok(None)` when absent, `Ok(Some(None))` when null.
    fn optional<T: serde::de::DeserializeOwned>(
        &mut self,
        key: &str,
    ) -> Result<Option<Option<T>>, ItemError> {
        match self.map.remove(key) {
            Some(raw) => parse_as::<Option<T>>(raw, self.field_path(key)).map(Some),
            None => Ok(None),
        }
    }

    fn raw(&mut self, key: &str) -> Result<&'a RawValue, ItemError> {
        self.map.remove(key).ok_or_else(|| ItemError::MissingField {
            path: self.field_path(key),
        })
    }

    /// A required array, its elements left unparsed.
    fn array(&mut self, key: &str) -> Result<Vec<&'a RawValue>, ItemError> {
        let raw = self.raw(key)?;
        serde_json::from_str(raw.get()).map_err(|_| ItemError::NotAnArray {
            path: self.field_path(key),
        })
    }

    fn timestamp(&mut self, key: &str) -> Result<Timestamp, ItemError> {
        let text: String = self.required(key)?;
        Timestamp::parse(&text).map_err(|reason| ItemError::InvalidField {
            path: self.field_path(key),
            reason,
        })
    }

    /// Whatever is left: the unknown fields, kept verbatim.
    fn into_extra(self) -> Result<Extra, ItemError> {
        self.map
            .into_iter()
            .map(|(key, raw)| {
                compact_raw(raw.get())
                    .map(|value| (key, value))
                    .map_err(ItemError::Json)
            })
            .collect()
    }
}

fn parse_as<T: serde::de::DeserializeOwned>(raw: &RawValue, path: String) -> Result<T, ItemError> {
    serde_json::from_str(raw.get()).map_err(|e| {
        // serde's message ends with " at line 1 column N" of the field's own
        // text, which says nothing about the file: drop it.
        let message = e.to_string();
        let reason = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_string();
        ItemError::InvalidField { path, reason }
    })
}

/// Reads one item.
pub(super) fn item(raw: &RawValue) -> Result<DeadLetteredItem, ItemError> {
    let mut fields = Fields::new(raw, "")?;
    let item_id: String = fields.required("item_id")?;
    check_id(&item_id).map_err(ItemError::InvalidId)?;
    let item_data = compact_raw(fields.raw("item_data")?.get()).map_err(ItemError::Json)?;
    let first_attempt = fields.timestamp("first_attempt")?;
    let last_attempt = fields.timestamp("last_attempt")?;
    let failure_count: u32 = fields.required("failure_count")?;
    let history_raw = fields.array("failure_history")?;
    let mut failure_history = Vec::with_capacity(history_raw.len());
    for (index, entry) in history_raw.into_iter().enumerate() {
        failure_history.push(failure(entry, &format!("failure_history[{index}]"))?);
    }
    let error_signature: String = fields.required("error_signature")?;
    let (worktree_artifacts, worktree_artifacts_absent) =
        match fields.map.remove("worktree_artifacts") {
            None => (None, true),
            Some(raw) if raw.get().trim() == "null" => (None, false),
            Some(raw) => (Some(artifacts(raw, "worktree_artifacts")?), false),
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

/// Reads one attempt of `failure_history`, at `path`.
fn failure(raw: &RawValue, path: &str) -> Result<FailureDetail, ItemError> {
    let mut fields = Fields::new(raw, path)?;
    let attempt_number: u32 = fields.required("attempt_number")?;
    let timestamp = fields.timestamp("timestamp")?;
    let error_type_path = fields.field_path("error_type");
    let error_type = ErrorType::from_raw(fields.raw("error_type")?).map_err(|source| {
        ItemError::InvalidErrorType {
            path: error_type_path,
            source,
        }
    })?;
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

/// Reads `worktree_artifacts`, at `path`.
fn artifacts(raw: &RawValue, path: &str) -> Result<WorktreeArtifacts, ItemError> {
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
