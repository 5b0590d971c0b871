//! The pure functions of the DLQ integration spec (docs/agent-failures.md): turn
//! an agent's result into a dead-letter item, classify an error message,
//! decide eligibility and manual review, and compute the error signature.
//! No I/O; the only clock is [`AgentResult::new`]'s default `finished_at`.

use crate::model::{
    check_depth, compact_raw, error_types, DeadLetteredItem, ErrorType, FailureDetail, Omitted,
    WorktreeArtifacts,
};
use crate::time::Timestamp;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// How an agent's attempt at a work item ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentStatus {
    /// The agent finished the work item.
    Success,
    /// The agent failed with this message.
    Failed(String),
    /// The agent ran past its time limit.
    Timeout,
}

/// What an orchestrator knows about one agent's attempt. Built with
/// [`AgentResult::failed`], [`AgentResult::timed_out`] or
/// [`AgentResult::succeeded`] and the setters below, so that fields added
/// later break no caller:
///
/// ```
/// use dlqlite::classify::{agent_result_to_dlq_item, AgentResult};
/// use dlqlite::Timestamp;
///
/// let finished = Timestamp::parse("2025-11-23T19:42:53Z").unwrap();
/// let result = AgentResult::failed("item-7", "cargo test failed")
///     .agent_id("agent-3")
///     .step("agent_execution")
///     .exit_code(101)
///     .finished_at(finished)
///     .duration(std::time::Duration::from_secs(12));
/// let work_item = serde_json::json!({"path": "src/lib.rs"});
/// let item = agent_result_to_dlq_item(&result, &work_item, 1).unwrap();
/// assert_eq!(item.failure_history[0].agent_id, "agent-3");
/// assert_eq!(item.failure_history[0].error_type.exit_code, Some(101));
/// // The attempt is stamped with when the agent finished, not when it was
/// // converted: converting it again gives the same attempt, and adding
/// // that changes nothing.
/// assert_eq!(agent_result_to_dlq_item(&result, &work_item, 1).unwrap().last_attempt, finished);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AgentResult {
    pub item_id: String,
    pub status: AgentStatus,
    /// When the attempt ended: the attempt's timestamp, so that converting
    /// the same result twice gives the same attempt.
    pub finished_at: Timestamp,
    /// Which agent made the attempt (default `agent-<item_id>`).
    pub agent_id: String,
    /// The step that failed (default `agent_execution`).
    pub step: String,
    /// The failed command's exit code, when there was one.
    pub exit_code: Option<i64>,
    pub duration: Duration,
    /// Error output (becomes the attempt's stack_trace).
    pub error: Option<String>,
    pub json_log_location: Option<String>,
    pub worktree_path: Option<String>,
    pub branch_name: Option<String>,
}

/// The step an [`AgentResult`] names unless told otherwise.
pub const DEFAULT_STEP: &str = "agent_execution";

impl AgentResult {
    /// An attempt with this status that finished now.
    pub fn new(item_id: impl Into<String>, status: AgentStatus) -> Self {
        let item_id = item_id.into();
        AgentResult {
            agent_id: format!("agent-{item_id}"),
            item_id,
            status,
            finished_at: Timestamp::now(),
            step: DEFAULT_STEP.to_string(),
            exit_code: None,
            duration: Duration::ZERO,
            error: None,
            json_log_location: None,
            worktree_path: None,
            branch_name: None,
        }
    }

    /// A failed attempt with this message.
    pub fn failed(item_id: impl Into<String>, message: impl Into<String>) -> Self {
        AgentResult::new(item_id, AgentStatus::Failed(message.into()))
    }

    /// An attempt that ran past its time limit.
    pub fn timed_out(item_id: impl Into<String>) -> Self {
        AgentResult::new(item_id, AgentStatus::Timeout)
    }

    /// A successful attempt (converts to no item).
    pub fn succeeded(item_id: impl Into<String>) -> Self {
        AgentResult::new(item_id, AgentStatus::Success)
    }

    pub fn finished_at(mut self, at: Timestamp) -> Self {
        self.finished_at = at;
        self
    }

    pub fn agent_id(mut self, agent_id: impl Into<String>) -> Self {
        self.agent_id = agent_id.into();
        self
    }

    pub fn step(mut self, step: impl Into<String>) -> Self {
        self.step = step.into();
        self
    }

    pub fn exit_code(mut self, exit_code: i64) -> Self {
        self.exit_code = Some(exit_code);
        self
    }

    pub fn duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// The agent's error output (the attempt's stack_trace).
    pub fn error_output(mut self, output: impl Into<String>) -> Self {
        self.error = Some(output.into());
        self
    }

    pub fn json_log_location(mut self, path: impl Into<String>) -> Self {
        self.json_log_location = Some(path.into());
        self
    }

    /// The agent's worktree, kept for a person to look at.
    pub fn worktree(mut self, path: impl Into<String>, branch: impl Into<String>) -> Self {
        self.worktree_path = Some(path.into());
        self.branch_name = Some(branch.into());
        self
    }
}

/// Converts a failed or timed-out agent result into a dead-letter item
/// (`None` for a success), as the DLQ integration spec calls it. The
/// attempt is stamped with the result's `finished_at`, so the same result
/// converted twice is the same attempt, and adding it again changes
/// nothing. `None` also when `work_item` cannot be stored (JSON nested
/// deeper than SQLite reads).
pub fn agent_result_to_dlq_item(
    result: &AgentResult,
    work_item: &serde_json::Value,
    attempt_number: u32,
) -> Option<DeadLetteredItem> {
    let message = match &result.status {
        AgentStatus::Success => return None,
        AgentStatus::Failed(message) => message.clone(),
        AgentStatus::Timeout => "Agent execution timed out".to_string(),
    };
    let error_type = match (&result.status, result.exit_code) {
        (AgentStatus::Timeout, _) => ErrorType::named(error_types::TIMEOUT),
        (_, code) => match classify_error(&message) {
            generic if generic.name == error_types::COMMAND_FAILED => {
                ErrorType::command_failed_with_command(&result.step, code)
            }
            specific => specific,
        },
    };
    let manual_review = requires_manual_review(&message);
    let now = result.finished_at;
    let mut detail = FailureDetail {
        attempt_number,
        timestamp: now,
        error_type,
        error_message: message.clone(),
        error_context: None,
        stack_trace: result.error.clone(),
        agent_id: result.agent_id.clone(),
        step_failed: result.step.clone(),
        duration_ms: u64::try_from(result.duration.as_millis()).unwrap_or(u64::MAX),
        json_log_location: result.json_log_location.clone(),
        extra: Default::default(),
        omitted: Omitted::none(),
    };
    // Written back in the current legacy writer's shape.
    detail.omitted = detail.writer_omitted();
    let text = work_item.to_string();
    check_depth(&text).ok()?;
    let item_data = compact_raw(&text).ok()?;
    Some(DeadLetteredItem {
        item_id: result.item_id.clone(),
        item_data,
        first_attempt: now,
        last_attempt: now,
        failure_count: 1,
        failure_history: vec![detail],
        error_signature: error_signature(&message),
        worktree_artifacts: result.worktree_path.as_ref().map(|path| WorktreeArtifacts {
            worktree_path: path.clone(),
            branch_name: result.branch_name.clone().unwrap_or_default(),
            uncommitted_changes: None,
            error_logs: None,
            extra: Default::default(),
            omitted: Omitted::none(),
        }),
        reprocess_eligible: is_reprocessable(&result.status, &message),
        manual_review_required: manual_review,
        extra: Default::default(),
        worktree_artifacts_absent: false,
    })
}

/// The signature that groups failures: the first 16 lowercase hex digits of
/// SHA-256 over the whole message, as the current legacy writer made it.
pub fn error_signature(message: &str) -> String {
    let digest = Sha256::digest(message.as_bytes());
    let mut hex = String::with_capacity(16);
    for byte in digest.iter().take(8) {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// Classifies an error message (case-insensitive): timeouts, permission
/// problems, then the git and resource failures whose names the messages
/// carry; anything else is a failed command with no exit code.
pub fn classify_error(message: &str) -> ErrorType {
    let lower = message.to_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|needle| lower.contains(needle));
    if has(&["timeout", "timed out"]) {
        ErrorType::named(error_types::TIMEOUT)
    } else if has(&["permission", "access denied"]) {
        ErrorType::named(error_types::PERMISSION_ERROR)
    } else if has(&["merge conflict"]) {
        ErrorType::named(error_types::MERGE_CONFLICT)
    } else if has(&["worktree"]) {
        ErrorType::named(error_types::WORKTREE_ERROR)
    } else if has(&[
        "out of memory",
        "no space left",
        "resource exhausted",
        "too many open files",
    ]) {
        ErrorType::named(error_types::RESOURCE_EXHAUSTED)
    } else {
        ErrorType::command_failed_with_command("agent_execution", None)
    }
}

/// Whether a person should look at the failure: permission problems and
/// anything called critical will not fix themselves.
pub fn requires_manual_review(message: &str) -> bool {
    let lower = message.to_lowercase();
    lower.contains("permission") || lower.contains("critical") || lower.contains("access denied")
}

/// Whether `dlq retry` may take the item without `--force`. Timeouts and
/// ordinary failures may succeed on retry; failures that need a person
/// (see docs/agent-failures.md) are not retried blindly.
pub fn is_reprocessable(status: &AgentStatus, message: &str) -> bool {
    match status {
        AgentStatus::Success => false,
        AgentStatus::Timeout => true,
        AgentStatus::Failed(_) => !requires_manual_review(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(status: AgentStatus) -> AgentResult {
        AgentResult::new("item-1", status)
            .finished_at(now())
            .duration(Duration::from_millis(1500))
            .error_output("trace")
            .json_log_location("/logs/a.json")
            .worktree("/wt/agent-1", "agent-1")
    }

    fn now() -> Timestamp {
        Timestamp::parse("2025-01-11T10:30:00Z").unwrap()
    }

    #[test]
    fn success_returns_none() {
        let work = serde_json::json!({"id": 3});
        assert!(agent_result_to_dlq_item(&result(AgentStatus::Success), &work, 1).is_none());
    }

    #[test]
    fn failed_result_becomes_an_item() {
        let work = serde_json::json!({"id": 1, "data": "test"});
        let item =
            agent_result_to_dlq_item(&result(AgentStatus::Failed("Test error".into())), &work, 1)
                .unwrap();
        assert_eq!(item.item_id, "item-1");
        assert_eq!(item.failure_count, 1);
        assert_eq!(item.failure_history.len(), 1);
        assert!(item.reprocess_eligible);
        assert!(!item.manual_review_required);
        assert_eq!(item.failure_history[0].duration_ms, 1500);
        assert_eq!(
            item.failure_history[0].json_log_location.as_deref(),
            Some("/logs/a.json")
        );
        assert_eq!(
            item.worktree_artifacts.as_ref().unwrap().worktree_path,
            "/wt/agent-1"
        );
        assert_eq!(item.item_data_value(), work);
    }

    #[test]
    fn timeout_is_eligible_with_a_16_hex_signature() {
        let work = serde_json::json!({"id": 2});
        let item = agent_result_to_dlq_item(&result(AgentStatus::Timeout), &work, 1).unwrap();
        assert!(item.reprocess_eligible);
        assert_eq!(item.error_signature.len(), 16);
        assert!(item
            .error_signature
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(item.failure_history[0].error_type.name, "Timeout");
    }

    #[test]
    fn signature_is_stable() {
        assert_eq!(error_signature("Test error message"), "a4487cca28a46fcd");
        // Known value: the legacy writer's example (docs/legacy-format.md).
        assert_eq!(
            error_signature("Agent execution timed out"),
            "ad9e863b292069ad"
        );
        assert_eq!(error_signature(""), "e3b0c44298fc1c14");
        assert_ne!(error_signature("a"), error_signature("b"));
    }

    #[test]
    fn classification() {
        assert_eq!(
            classify_error("Operation timed out after 30s").name,
            "Timeout"
        );
        assert_eq!(
            classify_error("Permission denied: cannot write").name,
            "PermissionError"
        );
        assert_eq!(
            classify_error("CONFLICT: merge conflict in a.rs").name,
            "MergeConflict"
        );
        assert_eq!(
            classify_error("No space left on device").name,
            "ResourceExhausted"
        );
        let other = classify_error("cargo test failed");
        assert_eq!(other.name, "CommandFailed");
        assert_eq!(other.exit_code, None);
        assert!(other.to_json_text().contains("agent_execution"));
    }

    #[test]
    fn permission_failures_need_review_and_are_not_eligible() {
        let status = AgentStatus::Failed("permission denied".into());
        assert!(requires_manual_review("permission denied"));
        assert!(!is_reprocessable(&status, "permission denied"));
        assert!(requires_manual_review("CRITICAL: data loss"));
        assert!(!requires_manual_review("flaky test"));
    }
}
