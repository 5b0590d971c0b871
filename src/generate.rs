//! Synthetic legacy DLQ trees for tests and benchmarks: the current writer's
//! layout and file shape, deterministic for a given seed, written one file
//! at a time (never the whole tree in memory).

use crate::classify::error_signature;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// What to generate.
#[derive(Clone, Debug)]
pub struct TreeSpec {
    pub jobs: usize,
    pub items_per_job: usize,
    /// Attempt number written into every item's single history entry (the
    /// legacy writer replaced the file on each attempt).
    pub attempt: u32,
    pub seed: u64,
}

/// A small deterministic generator (xorshift64*), so no test depends on a
/// random crate or on luck.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

const MESSAGES: [&str; 8] = [
    "Agent execution timed out",
    "cargo test failed with exit code 101",
    "error: could not compile `cook` due to 3 previous errors",
    "merge conflict in src/lib.rs",
    "Commit required but no commit was created",
    "permission denied: /etc/shadow",
    "429 Too Many Requests: rate limited by provider",
    "validation failed: output schema mismatch",
];

const ERROR_TYPES: [&str; 8] = [
    "\"Timeout\"",
    "{\"CommandFailed\":{\"exit_code\":101}}",
    "{\"CommandFailed\":{\"exit_code\":1}}",
    "\"MergeConflict\"",
    "\"CommitValidationFailed\"",
    "\"Unknown\"",
    "\"ResourceExhausted\"",
    "\"ValidationFailed\"",
];

/// The job directory of job number `job` under `root`.
pub fn job_dir(root: &Path, job: usize) -> PathBuf {
    let job_id = job_id(job);
    root.join("dlq")
        .join(format!("repo-{}", job % 7))
        .join(&job_id)
        .join("mapreduce")
        .join("dlq")
        .join(&job_id)
}

/// The id of job number `job`.
pub fn job_id(job: usize) -> String {
    format!("mapreduce-20251123_{:06}", job)
}

/// One item file's text, in the current writer's pretty shape.
pub fn item_json(rng: &mut Rng, item: usize, attempt: u32) -> String {
    let kind = usize::try_from(rng.below(MESSAGES.len() as u64)).unwrap_or(0);
    let message = MESSAGES[kind];
    let seconds = 1_700_000_000 + rng.below(30_000_000) as i64 + i64::from(attempt) * 3600;
    let nanos = rng.below(1_000_000_000) as u32;
    let time = chrono::DateTime::from_timestamp(seconds, nanos)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        .unwrap_or_else(|| "2025-11-23T19:42:53Z".to_string());
    let context = if rng.below(4) == 0 {
        format!(
            "\n      \"error_context\": [\n        \"Processing work item 'item_{item}'\",\n        \"Executing agent command\"\n      ],"
        )
    } else {
        String::new()
    };
    format!(
        r#"{{
  "item_id": "item_{item}",
  "item_data": {{
    "path": "src/module_{module}/file_{item}.rs",
    "priority": {priority}
  }},
  "first_attempt": "{time}",
  "last_attempt": "{time}",
  "failure_count": 1,
  "failure_history": [
    {{
      "attempt_number": {attempt},
      "timestamp": "{time}",
      "error_type": {error_type},
      "error_message": "{message}",{context}
      "stack_trace": "{message}\n    at agent_execution (src/cook/execution/mapreduce.rs:{line})",
      "agent_id": "agent-item_{item}",
      "step_failed": "agent_execution",
      "duration_ms": {duration},
      "json_log_location": "/home/u/.claude/projects/x/{log:016x}.jsonl"
    }}
  ],
  "error_signature": "{signature}",
  "worktree_artifacts": {{
    "worktree_path": "/home/u/.prodigy/worktrees/repo/agent_{item}",
    "branch_name": "agent-{item}-item_{item}",
    "uncommitted_changes": null,
    "error_logs": null
  }},
  "reprocess_eligible": {eligible},
  "manual_review_required": {review}
}}"#,
        module = item % 50,
        priority = rng.below(10),
        error_type = ERROR_TYPES[kind],
        line = rng.below(2000),
        duration = rng.below(600_000),
        log = rng.next_u64(),
        signature = error_signature(message),
        eligible = kind != 5,
        review = kind == 5,
    )
}

/// Writes a tree under `root`; returns the number of item files.
pub fn write_tree(root: &Path, spec: &TreeSpec) -> Result<usize> {
    let mut rng = Rng::new(spec.seed);
    let mut written = 0;
    for job in 0..spec.jobs {
        let dir = job_dir(root, job);
        let items = dir.join("items");
        std::fs::create_dir_all(&items).map_err(|e| Error::io(&items, e))?;
        let mut ids = Vec::with_capacity(spec.items_per_job);
        for item in 0..spec.items_per_job {
            let text = item_json(&mut rng, item, spec.attempt);
            let path = items.join(format!("item_{item}.json"));
            std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
            ids.push(format!("item_{item}"));
            written += 1;
        }
        let index = serde_json::json!({
            "item_count": ids.len(),
            "item_ids": ids,
            "job_id": job_id(job),
            "updated_at": "2025-11-23T19:42:53.902113845Z",
        });
        let path = dir.join("index.json");
        std::fs::write(&path, index.to_string()).map_err(|e| Error::io(&path, e))?;
    }
    Ok(written)
}
