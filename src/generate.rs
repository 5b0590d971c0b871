//! Synthetic legacy DLQ trees for tests and benchmarks: the current writer's
//! layout and file shape, deterministic for a given seed, written one file
//! at a time (never the whole tree in memory). Behind the `testing` feature,
//! which the crate's own dev-dependency turns on for its tests and benches:
//! it is no part of the library's API. The layout and index.json are
//! [`crate::legacy`]'s; the item text is written here by hand, so that the
//! readers are tested on text they did not write.

use crate::classify::error_signature;
use crate::error::{Error, Result};
use crate::legacy::{index::index_json, layout};
use crate::time::Timestamp;
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
    layout::job_dir(root, Some(&format!("repo-{}", job % 7)), &job_id(job))
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
    let updated_at = Timestamp::parse("2025-11-23T19:42:53.902113845Z")
        .map_err(|reason| Error::invalid_argument("updated_at", reason))?;
    let mut written = 0;
    for job in 0..spec.jobs {
        let dir = job_dir(root, job);
        let items = dir.join(layout::ITEMS_DIR);
        std::fs::create_dir_all(&items).map_err(|e| Error::io(&items, e))?;
        let mut ids = Vec::with_capacity(spec.items_per_job);
        for item in 0..spec.items_per_job {
            let text = item_json(&mut rng, item, spec.attempt);
            let id = format!("item_{item}");
            let path = items.join(layout::item_file_name(&id));
            std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
            ids.push(id);
            written += 1;
        }
        let index = index_json(&job_id(job), &ids, updated_at);
        let path = dir.join(layout::INDEX_FILE);
        std::fs::write(&path, index.to_string()).map_err(|e| Error::io(&path, e))?;
    }
    Ok(written)
}

/// The shape of a generated DLQ (see [`write_jsonl`]): the benchmarks run
/// every query and write on each of the shapes real DLQs have, not only on
/// the friendly one of [`write_tree`] (1,000 items per job, 8 messages).
#[derive(Clone, Debug)]
pub struct ShapeSpec {
    pub jobs: usize,
    pub items: usize,
    /// Attempts per item (the legacy writer kept one; dlq keeps them all).
    pub attempts: u32,
    /// Every item's message names its own path and duration, so every item
    /// has a signature of its own (the legacy signature hashes the message).
    pub signature_per_item: bool,
    /// Every attempt has an agent id of its own.
    pub agent_per_attempt: bool,
    /// Every this-many-th item carries `big_data_bytes` of item_data.
    pub big_data_every: Option<usize>,
    pub big_data_bytes: usize,
    /// Days the last attempts spread over, ending 2026-11-01.
    pub days: u32,
    /// Items come in time order (as a live DLQ fills: each failure is added
    /// when it happens), give or take ten minutes; otherwise in random time
    /// order (as an import of legacy trees lays them out).
    pub time_ordered: bool,
    pub seed: u64,
}

impl Default for ShapeSpec {
    fn default() -> Self {
        ShapeSpec {
            jobs: 1_000,
            items: 1_000_000,
            attempts: 1,
            signature_per_item: false,
            agent_per_attempt: false,
            big_data_every: None,
            big_data_bytes: 100_000,
            days: 365,
            time_ordered: true,
            seed: 42,
        }
    }
}

/// Writes `spec.items` items as JSON lines (the `dlq export --format
/// jsonl` shape, each with its `job_id`), item `n` in job `n % jobs`, one
/// line at a time. Returns the number written.
pub fn write_jsonl(path: &Path, spec: &ShapeSpec) -> Result<usize> {
    use std::io::Write;
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut rng = Rng::new(spec.seed);
    let end: i64 = 1_793_491_200; // 2026-11-01T00:00:00Z
    let span = i64::from(spec.days.max(1)) * 86_400;
    let big = "x".repeat(spec.big_data_bytes);
    for n in 0..spec.items {
        let job = job_id(n % spec.jobs.max(1));
        let kind = usize::try_from(rng.below(MESSAGES.len() as u64)).unwrap_or(0);
        let last = if spec.time_ordered {
            let at = end - span + (n as i64 * span) / spec.items.max(1) as i64;
            at + rng.below(600) as i64
        } else {
            end - rng.below(span as u64) as i64
        };
        let mut history = Vec::with_capacity(spec.attempts as usize);
        let mut message = String::new();
        for attempt in 1..=spec.attempts {
            let at = last - i64::from(spec.attempts - attempt) * 600;
            let time = chrono::DateTime::from_timestamp(at, rng.below(1_000_000_000) as u32)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
                .unwrap_or_default();
            message = if spec.signature_per_item {
                format!(
                    "{} in /work/src/module_{}/file_{n}.rs after {}s",
                    MESSAGES[kind],
                    n % 50,
                    rng.below(900)
                )
            } else {
                MESSAGES[kind].to_string()
            };
            let agent = if spec.agent_per_attempt {
                format!("agent-{:016x}", rng.next_u64())
            } else {
                format!("agent-item_{}", n / spec.jobs.max(1))
            };
            history.push(serde_json::json!({
                "attempt_number": attempt,
                "timestamp": time,
                "error_type": serde_json::from_str::<serde_json::Value>(ERROR_TYPES[kind])
                    .unwrap_or_default(),
                "error_message": message,
                "stack_trace": format!("{message}\n    at agent_execution (src/cook/execution/mapreduce.rs:{})", rng.below(2000)),
                "agent_id": agent,
                "step_failed": "agent_execution",
                "duration_ms": rng.below(600_000),
                "json_log_location": format!("/home/u/.claude/projects/x/{:016x}.jsonl", rng.next_u64()),
            }));
        }
        let first = history
            .first()
            .map(|h| h["timestamp"].clone())
            .unwrap_or_default();
        let last_time = history
            .last()
            .map(|h| h["timestamp"].clone())
            .unwrap_or_default();
        let mut data = serde_json::json!({
            "path": format!("src/module_{}/file_{n}.rs", n % 50),
            "priority": rng.below(10),
        });
        if spec
            .big_data_every
            .is_some_and(|every| n % every.max(1) == 0)
        {
            data["blob"] = big.clone().into();
        }
        let item = serde_json::json!({
            "job_id": job,
            "item_id": format!("item_{n}"),
            "item_data": data,
            "first_attempt": first,
            "last_attempt": last_time,
            "failure_count": spec.attempts,
            "failure_history": history,
            "error_signature": error_signature(&message),
            "worktree_artifacts": {
                "worktree_path": format!("/home/u/.prodigy/worktrees/repo/agent_{n}"),
                "branch_name": format!("agent-item_{n}"),
                "uncommitted_changes": null,
                "error_logs": null
            },
            "reprocess_eligible": kind != 5,
            "manual_review_required": kind == 5,
        });
        serde_json::to_writer(&mut out, &item)?;
        out.write_all(b"\n").map_err(|e| Error::io(path, e))?;
    }
    out.flush().map_err(|e| Error::io(path, e))?;
    Ok(spec.items)
}
