//! Writes `examples/sample`, the legacy JSON tree the README's first
//! command imports: 4 jobs, 360 dead letters of realistic agent failures
//! (npm, cargo, pytest and tsc output, Python, Rust and Java traces, merge
//! conflicts, timeouts, API, permission and disk errors) drawn from the
//! labelled corpus the failure-family benchmark uses, so `dlq families`
//! has causes to find. Some items failed more than once, agents repeat
//! across items, and every file is in the exact shape Prodigy's writer
//! left (written by `dlqlite::export::export_legacy`).
//!
//! Deterministic: the same items every run (only index.json's updated_at,
//! the time of the export, differs). Regenerate it with
//!
//!     cargo run -p dlq --example make-sample -- examples/sample
//!
//! (the directory must not exist yet).

use dlqlite::model::{DeadLetteredItem, ErrorType, FailureDetail};
use dlqlite::{Dlq, Timestamp};
use std::path::PathBuf;

/// Jobs of the sample: (job id, items).
const JOBS: [(&str, usize); 4] = [
    ("mapreduce-20251124_091500", 140),
    ("mapreduce-20251125_142210", 100),
    ("mapreduce-20251126_080045", 80),
    ("mapreduce-20251127_173030", 40),
];

/// The error types Prodigy's writer knows without data; anything else the
/// corpus names is written as `Unknown`, as Prodigy would have.
const LEGACY_TYPES: [&str; 6] = [
    "Timeout",
    "WorktreeError",
    "MergeConflict",
    "ValidationFailed",
    "ResourceExhausted",
    "CommitValidationFailed",
];

fn error_type(name: Option<&str>, exit_code: i64) -> ErrorType {
    match name {
        Some("CommandFailed") => ErrorType::command_failed(exit_code),
        Some(name) if LEGACY_TYPES.contains(&name) => ErrorType::named(name),
        _ => ErrorType::named("Unknown"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(
        std::env::args_os()
            .nth(1)
            .ok_or("usage: make-sample <directory to create>")?,
    );
    if out.exists() {
        return Err(format!("{} exists already", out.display()).into());
    }
    let scratch = std::env::temp_dir().join(format!("dlq-make-sample-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let dlq = Dlq::open(scratch.join("sample.db"))?;
    let total: usize = JOBS.iter().map(|(_, n)| n).sum();
    let failures = dlqlite::corpus::agent_failures(20_251_128, total * 2);
    let mut next = failures.iter();
    let start = Timestamp::parse("2025-11-24T09:15:00Z").map_err(|e| e.to_string())?;
    let mut n = 0usize;
    for (day, (job, items)) in JOBS.iter().enumerate() {
        for i in 0..*items {
            n += 1;
            let attempts = 1 + u32::from(n.is_multiple_of(7)) + u32::from(n.is_multiple_of(11));
            // Unique across the jobs, so `dlq inspect task-007` needs no job.
            let id = format!("task-{n:03}");
            let task = ["fix lint", "add tests", "update docs", "refactor"][n % 4];
            let data = serde_json::json!({
                "file": format!("src/module_{}/handler_{i}.rs", i % 12),
                "task": task,
            });
            let mut builder = DeadLetteredItem::builder(&id, data);
            let mut last = None;
            for attempt in 1..=attempts {
                let failure = next.next().ok_or("the corpus ran out")?;
                // A later attempt usually fails the same way.
                let failure = if attempt > 1 && !n.is_multiple_of(3) {
                    last.unwrap_or(failure)
                } else {
                    failure
                };
                last = Some(failure);
                let seconds = (day as i64) * 86_400 + (i as i64) * 97 + i64::from(attempt) * 1_800;
                let mut detail = FailureDetail::new(
                    attempt,
                    start.minus_seconds(-seconds),
                    error_type(failure.error_type.as_deref(), 1),
                    failure.message.clone(),
                )
                .agent_id(format!("agent-{}", (n * 7 + attempt as usize) % 9))
                .duration_ms(2_000 + (n as u64 * 7_919) % 600_000)
                .json_log_location(format!(
                    "/home/dev/.prodigy/logs/{job}/{id}-{attempt}.jsonl"
                ));
                if let Some(trace) = &failure.stack_trace {
                    detail = detail.stack_trace(trace.clone());
                }
                builder = builder.attempt(detail);
            }
            let item = builder
                .manual_review_required(n.is_multiple_of(13))
                .worktree(
                    format!("/home/dev/.prodigy/worktrees/{job}/{id}"),
                    format!("prodigy-agent-{job}-{id}"),
                )
                .build()?;
            dlq.add(job, &item)?;
        }
    }
    dlqlite::export::export_legacy(&dlq, &out, None, false)?;
    drop(dlq);
    std::fs::remove_dir_all(&scratch)?;
    println!(
        "wrote {total} items in {} jobs to {}",
        JOBS.len(),
        out.display()
    );
    Ok(())
}
