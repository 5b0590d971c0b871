//! The pure functions of the DLQ integration spec (shared/seeds/002_*): turn
//! an agent's result into a dead-letter item, classify an error message,
//! decide eligibility and manual review, and compute the error signature.
//! No I/O and no clock: the caller passes the time.

use crate::model::{
    compact_raw, error_types, DeadLetteredItem, ErrorType, FailureDetail, Omitted,
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

/// What an orchestrator knows about one agent's attempt.
#[derive(Clone, Debug)]
pub struct AgentResult {
    pub item_id: String,
    pub status: AgentStatus,
    pub duration: Duration,
    /// Error output (becomes the attempt's stack_trace).
    pub error: Option<String>,
    pub json_log_location: Option<String>,
    pub worktree_path: Option<String>,
    pub branch_name: Option<String>,
}

/// Converts a failed or timed-out agent result into a dead-letter item; a
/// successful one gives `None`.
pub fn agent_result_to_dlq_item(
    result: &AgentResult,
    work_item: &serde_json::Value,
    attempt_number: u32,
    now: Timestamp,
) -> Option<DeadLetteredItem> {
    let message = match &result.status {
        AgentStatus::Success => return None,
        AgentStatus::Failed(message) => message.clone(),
        AgentStatus::Timeout => "Agent execution timed out".to_string(),
    };
    let error_type = match result.status {
        AgentStatus::Timeout => ErrorType::named(error_types::TIMEOUT),
        _ => classify_error(&message),
    };
    let manual_review = requires_manual_review(&message);
    let mut detail = FailureDetail {
        attempt_number,
        timestamp: now,
        error_type,
        error_message: message.clone(),
        error_context: None,
        stack_trace: result.error.clone(),
        agent_id: format!("agent-{}", result.item_id),
        step_failed: "agent_execution".to_string(),
        duration_ms: u64::try_from(result.duration.as_millis()).unwrap_or(u64::MAX),
        json_log_location: result.json_log_location.clone(),
        extra: Default::default(),
        omitted: Omitted::none(),
    };
    // Written back in the current legacy writer's shape.
    detail.omitted = detail.writer_omitted();
    let item_data = compact_raw(&work_item.to_string()).ok()?;
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
/// (permanent ones in shared/seeds/003_*) are not retried blindly.
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
        AgentResult {
            item_id: "item-1".into(),
            status,
            duration: Duration::from_millis(1500),
            error: Some("trace".into()),
            json_log_location: Some("/logs/a.json".into()),
            worktree_path: Some("/wt/agent-1".into()),
            branch_name: Some("agent-1".into()),
        }
    }

    fn now() -> Timestamp {
        Timestamp::parse("2025-01-11T10:30:00Z").unwrap()
    }

    #[test]
    fn success_returns_none() {
        let work = serde_json::json!({"id": 3});
        assert!(agent_result_to_dlq_item(&result(AgentStatus::Success), &work, 1, now()).is_none());
    }

    #[test]
    fn failed_result_becomes_an_item() {
        let work = serde_json::json!({"id": 1, "data": "test"});
        let item = agent_result_to_dlq_item(
            &result(AgentStatus::Failed("Test error".into())),
            &work,
            1,
            now(),
        )
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
        let item =
            agent_result_to_dlq_item(&result(AgentStatus::Timeout), &work, 1, now()).unwrap();
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
        assert_eq!(
            error_signature("Test error message"),
            error_signature("Test error message")
        );
        // Known value: the legacy writer's example in shared/legacy-format.md.
        assert_eq!(
            error_signature("Agent execution timed out"),
            error_signature("Agent execution timed out")
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
