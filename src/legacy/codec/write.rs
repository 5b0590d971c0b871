//! Writing the legacy shape: the fields in the writer's order, optional
//! fields left out where the source left them out, unknown fields written
//! back verbatim. [`ItemWithJob`] adds the `job_id` (and `repo`) keys of a
//! JSON export.

use crate::model::{DeadLetteredItem, Extra, FailureDetail, Omitted, WorktreeArtifacts};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

fn serialize_extra<M: SerializeMap>(map: &mut M, extra: &Extra) -> Result<(), M::Error> {
    for (key, value) in extra {
        map.serialize_entry(key, value)?;
    }
    Ok(())
}

/// The entries of an item, into a map the caller opened and closes.
fn serialize_item_entries<M: SerializeMap>(
    item: &DeadLetteredItem,
    map: &mut M,
) -> Result<(), M::Error> {
    map.serialize_entry("item_id", &item.item_id)?;
    map.serialize_entry("item_data", &item.item_data)?;
    map.serialize_entry("first_attempt", &item.first_attempt)?;
    map.serialize_entry("last_attempt", &item.last_attempt)?;
    map.serialize_entry("failure_count", &item.failure_count)?;
    map.serialize_entry("failure_history", &item.failure_history)?;
    map.serialize_entry("error_signature", &item.error_signature)?;
    if item.worktree_artifacts.is_some() || !item.worktree_artifacts_absent {
        map.serialize_entry("worktree_artifacts", &item.worktree_artifacts)?;
    }
    map.serialize_entry("reprocess_eligible", &item.reprocess_eligible)?;
    map.serialize_entry("manual_review_required", &item.manual_review_required)?;
    serialize_extra(map, &item.extra)
}

impl Serialize for DeadLetteredItem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        serialize_item_entries(self, &mut map)?;
        map.end()
    }
}

/// An item with the job it belongs to: the legacy shape plus a `job_id` key
/// and, when the job has one, a `repo` key (legacy readers ignore both), so
/// a JSON export of several jobs can be read back with each item in its job
/// and each job with its repo.
pub struct ItemWithJob<'a> {
    pub job_id: &'a str,
    /// The job's repo (the legacy tree's `dlq/<repo>/` segment), if known.
    pub repo: Option<&'a str>,
    pub item: &'a DeadLetteredItem,
}

impl Serialize for ItemWithJob<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        serialize_item_entries(self.item, &mut map)?;
        if !self.item.extra.contains_key(JOB_ID_KEY) {
            map.serialize_entry(JOB_ID_KEY, self.job_id)?;
        }
        // An item's own field of that name wins, as for job_id: it is
        // written back as it was (and an import reads it as the repo).
        if let Some(repo) = self.repo {
            if !self.item.extra.contains_key(REPO_KEY) {
                map.serialize_entry(REPO_KEY, repo)?;
            }
        }
        map.end()
    }
}

/// The key [`ItemWithJob`] adds.
pub const JOB_ID_KEY: &str = "job_id";

/// The key [`ItemWithJob`] adds when the job has a repo.
pub const REPO_KEY: &str = "repo";

impl Serialize for FailureDetail {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
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
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
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
