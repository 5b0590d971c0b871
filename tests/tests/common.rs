//! Shared test helpers: temporary directories, running `dlq`, and legacy
//! item JSON.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let path =
            std::env::temp_dir().join(format!("dlqlite-test-{}-{label}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `dlq` binary with a clean environment pointing at `db`. It dies
/// with the test thread that started it: a test killed on a timeout (as
/// cargo-mutants does to a mutant that hangs) leaves no `dlq` running.
pub fn dlq(db: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(env!("CARGO_BIN_EXE_dlq"));
    // SAFETY: prctl(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    command
        .arg("--db")
        .arg(db)
        .env_remove("DLQ_DB")
        .env_remove("DLQ_NOW")
        // Tables must not depend on the terminal the tests run in.
        .env_remove("COLUMNS")
        .env_remove("NO_COLOR")
        .env(
            "PRODIGY_HOME",
            db.parent().unwrap_or(Path::new(".")).join("prodigy-home"),
        )
        .stdin(Stdio::null());
    command
}

/// Waits (up to 20 s) until the file at `path` has `n` lines, as when a
/// background run has started its commands; fails the test otherwise.
pub fn wait_for_lines(path: &Path, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::read_to_string(path).map_or(0, |t| t.lines().count()) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{} did not reach {n} lines in 20 s",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs a command and returns its output.
pub fn run(command: &mut Command) -> Output {
    command.output().expect("run dlq")
}

/// Runs a command that must succeed; returns stdout.
pub fn ok(command: &mut Command) -> String {
    let output = run(command);
    assert!(
        output.status.success(),
        "command failed: {:?}\nstdout: {}\nstderr: {}",
        command,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs a command that must fail; returns stderr.
pub fn fails(command: &mut Command) -> String {
    let output = run(command);
    assert!(!output.status.success(), "command succeeded: {command:?}");
    String::from_utf8(output.stderr).unwrap()
}

/// Runs a command with `input` on stdin.
pub fn with_stdin(command: &mut Command, input: &str) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Every stored row without its surrogate keys, as JSON arrays in a fixed
/// order: items (with `last_error_type`), attempts, artifacts, job
/// counters, signature and error-type counts, and the `item_summary` view.
/// Two databases holding the same items dump equal.
pub fn dump(db: &Path) -> Vec<String> {
    let conn = sql(db);
    let mut rows = Vec::new();
    for query in [
        "SELECT json_array(job_id, item_id, item_data, first_attempt, last_attempt, failure_count, error_signature,
             reprocess_eligible, manual_review_required, extra, omitted_fields, last_error_type) FROM items ORDER BY job_id, item_id",
        "SELECT json_array(i.job_id, i.item_id, f.attempt_number, f.timestamp, f.error_type, f.exit_code, f.error_type_json,
             f.error_message, f.error_context, f.stack_trace, f.agent_id, f.step_failed, f.duration_ms,
             f.json_log_location, f.extra, f.omitted_fields)
         FROM failure_history f JOIN items i ON i.id = f.item_key ORDER BY 1",
        "SELECT json_array(i.job_id, i.item_id, w.worktree_path, w.branch_name, w.uncommitted_changes, w.error_logs, w.extra)
         FROM worktree_artifacts w JOIN items i ON i.id = w.item_key ORDER BY 1",
        "SELECT json_array(job_id, repo, item_count, eligible_count, manual_review_count, failure_count_sum) FROM jobs ORDER BY job_id",
        "SELECT json_array('signature', job_id, error_signature, item_count) FROM signature_counts ORDER BY 1",
        "SELECT json_array('error_type', job_id, error_type, item_count) FROM error_type_counts ORDER BY 1",
        "SELECT json_array('summary', job_id, item_id, error_type, exit_code, error_message) FROM item_summary ORDER BY 1",
    ] {
        let mut stmt = conn.prepare(query).unwrap();
        let found: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        rows.extend(found);
    }
    rows
}

/// A current-format legacy item with one attempt.
pub fn item(id: &str, attempt: u32, timestamp: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "item_id": id,
        "item_data": {"path": format!("src/{id}.rs"), "priority": attempt},
        "first_attempt": timestamp,
        "last_attempt": timestamp,
        "failure_count": 1,
        "failure_history": [{
            "attempt_number": attempt,
            "timestamp": timestamp,
            "error_type": {"CommandFailed": {"exit_code": 101}},
            "error_message": message,
            "stack_trace": null,
            "agent_id": format!("agent-{id}"),
            "step_failed": "agent_execution",
            "duration_ms": 1000,
            "json_log_location": "/logs/x.jsonl"
        }],
        "error_signature": dlqlite::classify::error_signature(message),
        "worktree_artifacts": {
            "worktree_path": format!("/wt/{id}"),
            "branch_name": format!("agent-{id}"),
            "uncommitted_changes": null,
            "error_logs": null
        },
        "reprocess_eligible": true,
        "manual_review_required": false
    })
}

/// Adds `items` to `job` through `dlq add`, as JSON lines on stdin; fails
/// the test with dlq's stderr if the command fails.
pub fn add_lines(db: &Path, job: &str, items: impl IntoIterator<Item = serde_json::Value>) {
    let lines: String = items
        .into_iter()
        .map(|value| value.to_string() + "\n")
        .collect();
    let output = with_stdin(dlq(db).args(["add", "--job-id", job]), &lines);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Writes `value` to `dir/name` and returns the path.
pub fn write_json(dir: &Path, name: &str, value: &serde_json::Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path
}

/// Opens the database directly (for checks the CLI does not show).
pub fn sql(db: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(db).unwrap()
}

pub fn count(db: &Path, query: &str) -> i64 {
    sql(db).query_row(query, [], |row| row.get(0)).unwrap()
}

/// The first column of every row of a query, as text.
pub fn strings(db: &Path, query: &str) -> Vec<String> {
    sql(db)
        .prepare(query)
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}
