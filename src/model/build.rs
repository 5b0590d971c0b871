//! Builders for items and attempts made in code, so that callers never
//! touch the legacy format's internals (raw JSON, unknown fields, which
//! optional fields were absent): what they build is stored and written
//! back exactly as the current legacy writer would have written it.

use super::{
    compact_raw, union_history, DeadLetteredItem, ErrorType, FailureDetail, Omitted,
    WorktreeArtifacts,
};
use crate::error::{Error, Result};
use crate::time::Timestamp;

impl FailureDetail {
    /// One failed attempt: its number (from 1), when it ended, its error
    /// type and message. Agent `agent-unknown`, step `agent_execution`,
    /// duration 0 until set.
    pub fn new(
        attempt_number: u32,
        timestamp: Timestamp,
        error_type: ErrorType,
        error_message: impl Into<String>,
    ) -> Self {
        let mut detail = FailureDetail {
            attempt_number,
            timestamp,
            error_type,
            error_message: error_message.into(),
            error_context: None,
            stack_trace: None,
            agent_id: "agent-unknown".to_string(),
            step_failed: crate::classify::DEFAULT_STEP.to_string(),
            duration_ms: 0,
            json_log_location: None,
            extra: Default::default(),
            omitted: Omitted::none(),
        };
        detail.omitted = detail.writer_omitted();
        detail
    }

    pub fn agent_id(mut self, agent_id: impl Into<String>) -> Self {
        self.agent_id = agent_id.into();
        self
    }

    pub fn step(mut self, step: impl Into<String>) -> Self {
        self.step_failed = step.into();
        self
    }

    pub fn duration_ms(mut self, duration_ms: u64) -> Self {
        self.duration_ms = duration_ms;
        self
    }

    pub fn stack_trace(mut self, trace: impl Into<String>) -> Self {
        self.stack_trace = Some(trace.into());
        self.omitted = self.writer_omitted();
        self
    }

    pub fn context(mut self, lines: Vec<String>) -> Self {
        self.error_context = Some(lines);
        self.omitted = self.writer_omitted();
        self
    }

    pub fn json_log_location(mut self, path: impl Into<String>) -> Self {
        self.json_log_location = Some(path.into());
        self.omitted = self.writer_omitted();
        self
    }
}

/// Builds a [`DeadLetteredItem`]: see [`DeadLetteredItem::builder`].
#[derive(Clone, Debug)]
#[must_use = "call build() to get the item"]
pub struct ItemBuilder {
    item_id: String,
    item_data: serde_json::Value,
    attempts: Vec<FailureDetail>,
    signature: Option<String>,
    eligible: Option<bool>,
    manual_review: Option<bool>,
    worktree: Option<(String, String)>,
}

impl DeadLetteredItem {
    /// Starts an item for the work item `item_data`:
    ///
    /// ```
    /// use dlqlite::{DeadLetteredItem, ErrorType, FailureDetail, Timestamp};
    ///
    /// let at = Timestamp::parse("2025-11-23T19:42:53Z").unwrap();
    /// let item = DeadLetteredItem::builder("item-7", serde_json::json!({"path": "src/lib.rs"}))
    ///     .attempt(
    ///         FailureDetail::new(1, at, ErrorType::command_failed(101), "cargo test failed")
    ///             .agent_id("agent-3")
    ///             .duration_ms(1200),
    ///     )
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(item.failure_count, 1);
    /// assert_eq!(item.last_attempt, at);
    /// assert_eq!(item.error_signature, dlqlite::classify::error_signature("cargo test failed"));
    /// ```
    pub fn builder(item_id: impl Into<String>, item_data: serde_json::Value) -> ItemBuilder {
        ItemBuilder {
            item_id: item_id.into(),
            item_data,
            attempts: Vec::new(),
            signature: None,
            eligible: None,
            manual_review: None,
            worktree: None,
        }
    }
}

impl ItemBuilder {
    /// Adds a failed attempt (at least one is needed).
    pub fn attempt(mut self, attempt: FailureDetail) -> Self {
        self.attempts.push(attempt);
        self
    }

    /// The signature that groups it (default: the signature of the last
    /// attempt's message, as the legacy writer made it).
    pub fn error_signature(mut self, signature: impl Into<String>) -> Self {
        self.signature = Some(signature.into());
        self
    }

    /// Whether `dlq retry` takes it without `--force` (default: unless the
    /// last message calls for a person, see [`crate::classify`]).
    pub fn reprocess_eligible(mut self, eligible: bool) -> Self {
        self.eligible = Some(eligible);
        self
    }

    /// Whether a person should look at it (default: from the last message).
    pub fn manual_review_required(mut self, review: bool) -> Self {
        self.manual_review = Some(review);
        self
    }

    /// The failed agent's worktree.
    pub fn worktree(mut self, path: impl Into<String>, branch: impl Into<String>) -> Self {
        self.worktree = Some((path.into(), branch.into()));
        self
    }

    /// The item: its attempts in order (a repeated attempt once), its
    /// first and last attempt times and failure count from them. Fails on
    /// no attempt, an empty id, attempt 0, or item data nested deeper than
    /// SQLite reads.
    pub fn build(self) -> Result<DeadLetteredItem> {
        let context = || format!("item {:?}", self.item_id);
        let history = union_history(&self.attempts, &[]);
        let (Some(first), Some(last)) = (
            history.iter().map(|a| a.timestamp).min(),
            history.iter().max_by_key(|a| super::last_key(a)),
        ) else {
            return Err(Error::invalid_item(
                context(),
                "no attempt: an item records at least one failure",
            ));
        };
        let message = last.error_message.clone();
        let text = self.item_data.to_string();
        super::check_depth(&text)
            .map_err(|reason| Error::invalid_item(context(), format!("item_data: {reason}")))?;
        let item_data = compact_raw(&text)
            .map_err(|e| Error::invalid_item(context(), format!("item_data: {e}")))?;
        let manual = self
            .manual_review
            .unwrap_or_else(|| crate::classify::requires_manual_review(&message));
        let item = DeadLetteredItem {
            item_id: self.item_id.clone(),
            item_data,
            first_attempt: first,
            last_attempt: last.timestamp,
            failure_count: u32::try_from(history.len()).unwrap_or(u32::MAX),
            error_signature: self
                .signature
                .unwrap_or_else(|| crate::classify::error_signature(&message)),
            worktree_artifacts: self.worktree.map(|(worktree_path, branch_name)| {
                WorktreeArtifacts {
                    worktree_path,
                    branch_name,
                    uncommitted_changes: None,
                    error_logs: None,
                    extra: Default::default(),
                    omitted: Omitted::none(),
                }
            }),
            reprocess_eligible: self.eligible.unwrap_or(!manual),
            manual_review_required: manual,
            failure_history: history,
            extra: Default::default(),
            worktree_artifacts_absent: false,
        };
        item.validate()?;
        Ok(item)
    }
}
