//! One binary test per README command and flag that had none: each parses
//! the command's machine output and checks it against SQL on the raw
//! tables or against values written out by hand here.

use crate::common::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn with_flags(id: &str, eligible: bool, review: bool, when: &str) -> serde_json::Value {
    let mut value = item(id, 1, when, &format!("failure of {id}"));
    value["reprocess_eligible"] = eligible.into();
    value["manual_review_required"] = review.into();
    value
}

fn jsonl(text: &str) -> Vec<serde_json::Value> {
    text.lines().map(json).collect()
}

fn ids(rows: &[serde_json::Value]) -> Vec<String> {
    let mut ids: Vec<String> = rows
        .iter()
        .map(|r| r["item_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn jobs_capacity_and_db_report_what_the_tables_hold() {
    let dir = TempDir::new("jobs");
    let db = dir.join("dlq.db");
    let when = "2025-03-01T00:00:00Z";
    add_lines(
        &db,
        "j1",
        [
            with_flags("a", true, false, when),
            with_flags("b", false, true, when),
            with_flags("c", false, false, when),
        ],
    );
    add_lines(&db, "j2", [with_flags("d", true, true, when)]);

    let jobs = json(&ok(dlq(&db).args(["jobs", "--json"])));
    let jobs = jobs.as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    for job in jobs {
        let id = job["job_id"].as_str().unwrap();
        let where_job = |extra: &str| {
            count(
                &db,
                &format!("SELECT COUNT(*) FROM items WHERE job_id = '{id}' {extra}"),
            )
        };
        assert_eq!(job["item_count"], where_job(""));
        assert_eq!(
            job["eligible_count"],
            where_job("AND reprocess_eligible = 1")
        );
        assert_eq!(
            job["manual_review_count"],
            where_job("AND manual_review_required = 1")
        );
        assert_eq!(job["max_items"], serde_json::Value::Null);
    }
    assert_eq!(jobs[0]["job_id"], "j1");
    assert_eq!(
        (
            jobs[0]["item_count"].as_i64(),
            jobs[0]["eligible_count"].as_i64()
        ),
        (Some(3), Some(1))
    );

    // No argument: the settings in force.
    let settings = json(&ok(dlq(&db).args(["capacity", "--json"])));
    assert_eq!(settings["default_max_items"], 10_000);
    assert_eq!(settings["job_id"], serde_json::Value::Null);
    // A job's own capacity below its size evicts the oldest at once.
    let set = json(&ok(dlq(&db).args([
        "capacity", "--job-id", "j1", "--set", "2", "--json", "--yes",
    ])));
    assert_eq!(set["job_max_items"], 2);
    assert_eq!(set["effective_max_items"], 2);
    assert_eq!(set["evicted"], 1);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'j1'"),
        2
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'evicted'"),
        1
    );
    let shown = json(&ok(dlq(&db).args(["capacity", "--job-id", "j1", "--json"])));
    assert_eq!(shown["job_max_items"], 2);
    let unset = json(&ok(
        dlq(&db).args(["capacity", "--job-id", "j1", "--unset", "--json"])
    ));
    assert_eq!(unset["job_max_items"], serde_json::Value::Null);
    assert_eq!(unset["effective_max_items"], 10_000);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM jobs WHERE job_id = 'j1' AND max_items IS NULL"
        ),
        1
    );

    let info = json(&ok(dlq(&db).args(["db", "--json"])));
    for table in [
        "jobs",
        "items",
        "failure_history",
        "worktree_artifacts",
        "events",
    ] {
        assert_eq!(
            info[table],
            count(&db, &format!("SELECT COUNT(*) FROM {table}")),
            "{table}"
        );
    }
    assert_eq!(info["schema_version"], info["supported_schema_version"]);
    assert_eq!(info["path"], target(&db).to_str().unwrap());
}

#[test]
fn events_come_newest_first_and_limit_and_filters_cut_them() {
    let dir = TempDir::new("events");
    let db = dir.join("dlq.db");
    add_lines(&db, "j1", [item("a", 1, "2025-01-01T00:00:00Z", "x")]);
    add_lines(&db, "j2", [item("b", 1, "2025-01-01T00:00:00Z", "x")]);
    for n in 1..=4 {
        ok(dlq(&db).args([
            "capacity",
            "--job-id",
            "j2",
            "--set",
            &n.to_string(),
            "--yes",
        ]));
    }
    ok(dlq(&db).args(["mark", "a", "--ineligible"]));
    let all = jsonl(&ok(dlq(&db).args(["events", "--format", "jsonl"])));
    assert_eq!(all.len() as i64, count(&db, "SELECT COUNT(*) FROM events"));
    let ids: Vec<i64> = all.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    assert_eq!(all[0]["kind"], "marked");
    let two = jsonl(&ok(
        dlq(&db).args(["events", "--format", "jsonl", "--limit", "2"])
    ));
    assert_eq!(two, all[..2]);
    let j2 = jsonl(&ok(
        dlq(&db).args(["events", "--format", "jsonl", "--job-id", "j2"])
    ));
    assert_eq!(
        j2.len(),
        6,
        "job_created, added, then four capacity settings"
    );
    assert!(j2.iter().all(|e| e["job_id"] == "j2"));
    assert_eq!(j2[4]["kind"], "added");
    assert_eq!(j2[5]["kind"], "job_created");
    assert_eq!(j2[0]["detail"]["max_items"], 4, "the last setting first");
    let marked = jsonl(&ok(
        dlq(&db).args(["events", "--format", "jsonl", "--kind", "marked"])
    ));
    assert_eq!(marked.len(), 1);
    assert_eq!(marked[0]["item_id"], "a");
}

#[test]
fn events_refuse_an_unknown_kind_or_job_instead_of_an_empty_table() {
    let dir = TempDir::new("events-bad");
    let db = dir.join("dlq.db");
    add_lines(&db, "j1", [item("a", 1, "2025-01-01T00:00:00Z", "x")]);
    let output = run(dlq(&db).args(["events", "--kind", "bogus"]));
    assert_eq!(
        output.status.code(),
        Some(1),
        "not there, as an unknown job"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bogus") && stderr.contains("requeued"),
        "names the value and the kinds: {stderr}"
    );
    let stderr = fails(dlq(&db).args(["events", "--job-id", "nosuch"]));
    assert!(
        stderr.contains("nosuch") && stderr.contains("not found"),
        "{stderr}"
    );
    // Every kind the help lists is accepted.
    for kind in dlqlite::EventKind::ALL {
        ok(dlq(&db).args(["events", "--kind", kind.as_str()]));
    }
}

#[test]
fn purge_takes_only_its_job_and_its_filter() {
    let dir = TempDir::new("purge-scope");
    let db = dir.join("dlq.db");
    let old = "2020-01-01T00:00:00Z";
    let new = "2025-06-01T00:00:00Z";
    for job in ["j1", "j2"] {
        add_lines(
            &db,
            job,
            [
                item("old-keep", 1, old, "timed out"),
                item("old-drop", 1, old, "permission denied"),
                item("new", 1, new, "timed out"),
            ],
        );
    }
    let now = ["--now", "2025-06-02T00:00:00Z"];
    let purge = |args: &[&str]| {
        json(&ok(dlq(&db)
            .args(now)
            .args(["purge", "--older-than-days", "30", "--yes", "--json"])
            .args(args)))
    };
    let report = purge(&[
        "--job-id",
        "j1",
        "--filter",
        "error_message contains \"permission\"",
    ]);
    assert_eq!(report["items"], 1);
    let left = strings(&db, "SELECT job_id || '/' || item_id FROM items ORDER BY 1");
    assert_eq!(
        left,
        [
            "j1/new",
            "j1/old-keep",
            "j2/new",
            "j2/old-drop",
            "j2/old-keep"
        ]
    );
    let report = purge(&["--job-id", "j2"]);
    assert_eq!(report["items"], 2);
    let left = strings(&db, "SELECT job_id || '/' || item_id FROM items ORDER BY 1");
    assert_eq!(left, ["j1/new", "j1/old-keep", "j2/new"]);
    // Every removed item is in the audit log.
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'purged'"),
        3
    );
}

#[test]
fn export_job_id_writes_that_job_only() {
    let dir = TempDir::new("export-job");
    let db = dir.join("dlq.db");
    add_lines(&db, "j1", [item("a", 1, "2025-01-01T00:00:00Z", "x")]);
    add_lines(
        &db,
        "j2",
        [
            item("b", 1, "2025-01-01T00:00:00Z", "x"),
            item("c", 1, "2025-01-02T00:00:00Z", "y"),
        ],
    );
    let lines = jsonl(&ok(
        dlq(&db).args(["export", "-", "--format", "jsonl", "--job-id", "j2"])
    ));
    assert_eq!(ids(&lines), ["b", "c"]);
    assert!(lines.iter().all(|l| l["job_id"] == "j2"));
    let filtered = jsonl(&ok(dlq(&db).args([
        "export",
        "-",
        "--format",
        "jsonl",
        "--job-id",
        "j2",
        "--filter",
        "error_message == \"y\"",
    ])));
    assert_eq!(ids(&filtered), ["c"]);
}

/// The filter language through `dlq list`, on items whose expected matches
/// are written out by hand.
#[test]
fn filters_select_by_hand_checked_rows() {
    let dir = TempDir::new("filter-rows");
    let db = dir.join("dlq.db");
    let mut a = item("a", 1, "2025-05-30T00:00:00Z", "connection timed out");
    a["item_data"] = serde_json::json!({"priority": 7});
    // b: two attempts; the last (attempt 2) is a Timeout, the first exit 101.
    let mut b = item("b", 1, "2025-05-01T00:00:00Z", "exit 101");
    let mut second = b["failure_history"][0].clone();
    second["attempt_number"] = 2.into();
    second["timestamp"] = "2025-05-02T00:00:00Z".into();
    second["error_type"] = "Timeout".into();
    second["error_message"] = "slow".into();
    b["failure_history"].as_array_mut().unwrap().push(second);
    b["last_attempt"] = "2025-05-02T00:00:00Z".into();
    b["failure_count"] = 2.into();
    b["item_data"] = serde_json::json!({"priority": 2});
    let mut c = item("c", 3, "2024-01-01T00:00:00Z", "permission denied");
    c["reprocess_eligible"] = false.into();
    c["item_data"] = serde_json::json!(["not", "an", "object"]);
    add_lines(&db, "j", [a, b, c]);
    let select = |filter: &str| {
        let rows = json(&ok(dlq(&db).args([
            "--now",
            "2025-06-01T00:00:00Z",
            "list",
            "--format",
            "json",
            "--filter",
            filter,
        ])));
        ids(rows.as_array().unwrap())
    };
    let cases: &[(&str, &[&str])] = &[
        ("error_message contains \"time\"", &["a"]),
        ("error_message contains \"\"", &["a", "b", "c"]),
        ("not error_message contains \"time\"", &["b", "c"]),
        ("last_attempt > now - 7d", &["a"]),
        ("last_attempt > now - 31d", &["a", "b"]),
        ("last_attempt <= now - 31d || item_id == \"a\"", &["a", "c"]),
        ("last.error_type == \"Timeout\"", &["b"]),
        ("last.exit_code == 101", &["a", "c"]),
        ("exit_code == 101", &["a", "b", "c"]),
        ("last.exit_code == null", &["b"]),
        ("item.priority >= 5", &["a"]),
        ("!(item.priority >= 5)", &["b", "c"]),
        ("item.priority == null", &["c"]),
        ("reprocess_eligible && failure_count >= 2", &["b"]),
        (
            "!reprocess_eligible or last.error_message == \"slow\"",
            &["b", "c"],
        ),
    ];
    for (filter, want) in cases {
        assert_eq!(select(filter), *want, "{filter}");
    }
}

#[test]
fn marked_flags_hold_until_marked_again() {
    let dir = TempDir::new("mark-until");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        [with_flags("a", false, true, "2025-01-01T00:00:00Z")],
    );
    let flags = || {
        let item = json(&ok(dlq(&db).args(["inspect", "a"])));
        (
            item["reprocess_eligible"].as_bool().unwrap(),
            item["manual_review_required"].as_bool().unwrap(),
        )
    };
    ok(dlq(&db).args(["mark", "a", "--eligible", "--no-manual-review"]));
    assert_eq!(flags(), (true, false));
    // A newer copy that says the opposite does not undo a person's mark.
    let mut newer = with_flags("a", false, true, "2025-02-01T00:00:00Z");
    newer["failure_history"][0]["attempt_number"] = 2.into();
    add_lines(&db, "j", [newer]);
    assert_eq!(flags(), (true, false));
    // Marked again: the new mark holds in turn.
    ok(dlq(&db).args(["mark", "a", "--ineligible"]));
    let mut newest = with_flags("a", true, true, "2025-03-01T00:00:00Z");
    newest["failure_history"][0]["attempt_number"] = 3.into();
    add_lines(&db, "j", [newest]);
    assert_eq!(flags(), (false, false));
    let item = json(&ok(dlq(&db).args(["inspect", "a"])));
    assert_eq!(item["failure_history"].as_array().unwrap().len(), 3);
}

/// A legacy item file for `item` at `<base>/mapreduce/dlq/<job>/items/`.
fn legacy_file(base: &Path, job: &str, value: &serde_json::Value) {
    let items = base.join("mapreduce/dlq").join(job).join("items");
    std::fs::create_dir_all(&items).unwrap();
    write_json(
        &items,
        &format!("{}.json", value["item_id"].as_str().unwrap()),
        value,
    );
}

#[test]
fn import_reads_prodigy_home_by_default_and_the_tmpdir_layout() {
    let dir = TempDir::new("import-default");
    let db = dir.join("dlq.db");
    // dlq() points PRODIGY_HOME at <dir>/prodigy-home.
    let home = dir.join("prodigy-home");
    legacy_file(
        &home.join("dlq/my-repo/job-1"),
        "job-1",
        &item("a", 1, "2025-01-01T00:00:00Z", "x"),
    );
    legacy_file(
        &home.join("state/session-9"),
        "job-2",
        &item("b", 1, "2025-01-01T00:00:00Z", "x"),
    );
    let report = json(&ok(dlq(&db).args(["import", "--json"])));
    assert_eq!(report["items_new"], 2);
    assert_eq!(report["jobs"], 2);
    let repos = strings(&db, "SELECT job_id || '=' || repo FROM jobs ORDER BY 1");
    assert_eq!(repos, ["job-1=my-repo", "job-2=session-9"]);

    // The fallback the legacy writer used when ~/.prodigy was unusable.
    let tmp = dir.join("tmp");
    legacy_file(
        &tmp.join("prodigy_dlq"),
        "job-3",
        &item("c", 1, "2025-01-01T00:00:00Z", "x"),
    );
    let report = json(&ok(dlq(&db)
        .args(["import", "--json"])
        .arg(tmp.join("prodigy_dlq"))));
    assert_eq!(report["items_new"], 1);
    assert_eq!(
        strings(&db, "SELECT item_id FROM items WHERE job_id = 'job-3'"),
        ["c"]
    );
}

#[test]
fn an_import_across_the_batch_boundary_keeps_every_item() {
    // 5,000 items go in one transaction: 5,001 spans two, into a database
    // that is not empty (so the batched path, not the bulk one, runs).
    let dir = TempDir::new("import-batch");
    let db = dir.join("dlq.db");
    add_lines(&db, "seed", [item("s", 1, "2025-01-01T00:00:00Z", "x")]);
    let export = dir.join("big.jsonl");
    let mut text = String::new();
    for n in 0..5_001 {
        let mut value = item(&format!("i{n:05}"), 1, "2025-01-01T00:00:00Z", "x");
        value["job_id"] = "big".into();
        text.push_str(&value.to_string());
        text.push('\n');
    }
    std::fs::write(&export, text).unwrap();
    let report = json(&ok(dlq(&db).args(["import", "--json"]).arg(&export)));
    assert_eq!(report["items_new"], 5_001);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'big'"),
        5_001
    );
    assert_eq!(
        count(&db, "SELECT item_count FROM jobs WHERE job_id = 'big'"),
        5_001
    );
    // Again: every one unchanged, none new.
    let report = json(&ok(dlq(&db).args(["import", "--json"]).arg(&export)));
    assert_eq!(report["items_unchanged"], 5_001);
    assert_eq!(report["items_new"], 0);
}

fn retry_job(label: &str, n: usize) -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new(label);
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        (0..n).map(|i| item(&format!("i{i}"), 1, "2025-01-01T00:00:00Z", "x")),
    );
    (dir, db)
}

#[test]
fn a_failed_retry_attempt_is_recorded_whole_with_backoff_between_attempts() {
    let (_dir, db) = retry_job("retry-fields", 1);
    let output = dlq(&db)
        .args([
            "retry",
            "j",
            "--json",
            "--max-retries",
            "3",
            "--backoff-ms",
            "300",
            "--exec",
            "echo 'first line' >&2; echo 'the error' >&2; exit 7",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "some failed: exit 1");
    let summary = json(&String::from_utf8(output.stdout).unwrap());
    assert_eq!(
        (
            summary["attempted"].as_u64(),
            summary["failed"].as_u64(),
            summary["succeeded"].as_u64()
        ),
        (Some(1), Some(1), Some(0))
    );
    let item = json(&ok(dlq(&db).args(["inspect", "i0"])));
    let history = item["failure_history"].as_array().unwrap();
    assert_eq!(history.len(), 4, "the original attempt and three more");
    assert_eq!(item["failure_count"], 4);
    let runs = json(&ok(dlq(&db).args(["retry", "--status", "--json"])));
    let run_id = runs[0]["run_id"].as_str().unwrap();
    let mut times = Vec::new();
    for (k, attempt) in history[1..].iter().enumerate() {
        assert_eq!(attempt["attempt_number"], 2 + k as u64);
        assert_eq!(
            attempt["error_type"],
            serde_json::json!({"CommandFailed": {"exit_code": 7}})
        );
        let message = attempt["error_message"].as_str().unwrap();
        assert!(message.contains("the error"), "{message}");
        assert_eq!(attempt["agent_id"], format!("dlq-retry:{run_id}"));
        assert!(attempt["duration_ms"].as_u64().is_some());
        times.push(
            chrono::DateTime::parse_from_rfc3339(attempt["timestamp"].as_str().unwrap()).unwrap(),
        );
    }
    assert_eq!(item["last_attempt"], history[3]["timestamp"]);
    // Backoff: 300 ms before the second try of this run, 600 before the
    // third (lower bounds only: a slow machine waits longer, never less).
    let gap = |a: usize, b: usize| (times[b] - times[a]).num_milliseconds();
    assert!(gap(0, 1) >= 300, "{}", gap(0, 1));
    assert!(gap(1, 2) >= 600, "{}", gap(1, 2));
    assert_eq!(runs[0]["status"], "finished");
    assert_eq!(runs[0]["failed"], 1);
}

#[test]
fn rate_spaces_command_starts() {
    let (dir, db) = retry_job("retry-rate", 6);
    let log = dir.join("starts");
    let command = format!("date +%s%N >> {}", log.display());
    ok(dlq(&db).args([
        "retry",
        "j",
        "--parallel",
        "6",
        "--rate",
        "4",
        "--exec",
        &command,
    ]));
    let mut starts: Vec<u128> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    starts.sort();
    assert_eq!(starts.len(), 6);
    // Six starts at 4 a second: the last at least 5 * 250 ms after the
    // first (less a little for the shell's own start-up jitter).
    let span_ms = (starts[5] - starts[0]) / 1_000_000;
    assert!(span_ms >= 1_150, "6 starts in {span_ms} ms at --rate 4");
}

#[test]
fn retry_status_lists_runs_with_their_states() {
    let (_dir, db) = retry_job("retry-status", 2);
    ok(dlq(&db).args(["retry", "j", "--exec", "true"]));
    add_lines(&db, "k", [item("x", 1, "2025-01-01T00:00:00Z", "x")]);
    let failed = dlq(&db)
        .args(["retry", "k", "--exec", "false", "--max-retries", "1"])
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(1));
    let runs = json(&ok(dlq(&db).args(["retry", "--status", "--json"])));
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["job_id"], "k", "newest first");
    assert_eq!(runs[0]["status"], "finished");
    assert_eq!(
        (runs[0]["succeeded"].as_u64(), runs[0]["failed"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(
        (runs[1]["succeeded"].as_u64(), runs[1]["failed"].as_u64()),
        (Some(2), Some(0))
    );
    let only_j = json(&ok(dlq(&db).args(["retry", "--status", "--json", "j"])));
    assert_eq!(only_j.as_array().unwrap().len(), 1);
    assert_eq!(only_j[0]["job_id"], "j");
}

/// Commands that outlive the lease are not taken by a second run while the
/// first renews its leases.
#[test]
fn leases_are_renewed_while_commands_run() {
    let (dir, db) = retry_job("retry-renew", 2);
    let log = dir.join("log");
    let command = format!(
        "echo \"start $DLQ_ITEM_ID\" >> {log}; sleep 8; echo \"end $DLQ_ITEM_ID\" >> {log}",
        log = log.display()
    );
    let first = dlq(&db)
        .args([
            "retry",
            "j",
            "--lease",
            "3",
            "--parallel",
            "2",
            "--json",
            "--exec",
            &command,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_lines(&log, 2);
    // Past the lease (3 s): only renewal keeps the items held. A lease of
    // 3 s rather than 1 s leaves a renewal 1.5 s to get through on a loaded
    // machine before the run's guard (rightly) gives its items up.
    std::thread::sleep(Duration::from_millis(4_000));
    let second = json(&ok(
        dlq(&db).args(["retry", "j", "--json", "--exec", &command])
    ));
    assert_eq!(second["attempted"], 0, "took items on a renewed lease");
    let first = first.wait_with_output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(
        json(&String::from_utf8(first.stdout).unwrap())["succeeded"],
        2
    );
    let starts = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("start"))
        .count();
    assert_eq!(starts, 2, "each item ran once");
}

/// The pid of a live `sleep <marker>` process.
fn pid_with(marker: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let state = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // A zombie is dead already.
            let zombie = state.rsplit(')').next()?.trim_start().starts_with('Z');
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            (!zombie
                && args.len() >= 2
                && args[0].ends_with(b"sleep")
                && args[1] == marker.as_bytes())
            .then_some(pid)
        })
}

/// The children of `parent` whose program is `program`.
fn children_running(parent: u32, program: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let ppid: u32 = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let first = cmdline.split(|b| *b == 0).next()?;
            (ppid == parent && first == program.as_bytes()).then_some(pid)
        })
        .collect()
}

/// Starts a retry whose command is `sleep <marker>`, waits for the sleep,
/// SIGKILLs dlq (after `before_kill`), and waits up to 10 s for the sleep
/// to be gone.
fn command_dies_with_dlq(label: &str, before_kill: impl Fn(u32)) {
    let (dir, db) = retry_job(label, 1);
    // A sleep no other process has: its argument names this test.
    let marker = format!("31.{}{}", std::process::id(), label.len());
    let started = dir.join("started");
    let command = format!("touch {}; exec sleep {marker}", started.display());
    let mut child = dlq(&db)
        .args(["retry", "j", "--exec", &command])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while pid_with(&marker).is_none() {
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    before_kill(child.id());
    child.kill().unwrap(); // SIGKILL: dlq cannot clean up
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_with(&marker).is_some() {
        assert!(
            Instant::now() < deadline,
            "the command outlived dlq by 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(started.exists());
}

#[test]
fn commands_die_with_a_killed_dlq() {
    command_dies_with_dlq("retry-die", |_| {});
}

/// Two mechanisms end a command when dlq dies: a guard process that kills
/// the command's process group, and PR_SET_PDEATHSIG on the command's
/// shell. With the guard gone first (the OOM killer, a careless pkill),
/// the second must still do it.
#[test]
fn commands_die_with_dlq_even_when_the_guard_is_gone() {
    command_dies_with_dlq("retry-die-unguarded", |dlq_pid| {
        let guards = children_running(dlq_pid, "/bin/sh");
        assert_eq!(guards.len(), 1, "one guard shell: {guards:?}");
        let status = std::process::Command::new("kill")
            .args(["-KILL", &guards[0].to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !children_running(dlq_pid, "/bin/sh").is_empty() {
            assert!(Instant::now() < deadline, "the guard did not die");
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}

/// Found by an independent bug-injection audit: the numbers across all jobs,
/// a renamed job directory, and `add --job-id` over a carried job id.
#[test]
fn stats_across_jobs_take_the_earliest_first_and_latest_last_attempt() {
    let dir = TempDir::new("stats-range");
    let db = dir.join("dlq.db");
    let mut a = item("a", 1, "2025-01-01T00:00:00Z", "x");
    a["first_attempt"] = "2024-01-01T00:00:00Z".into();
    add_lines(&db, "job-a", [a]);
    add_lines(&db, "job-b", [item("b", 1, "2024-06-01T00:00:00Z", "x")]);
    let stats = json(&ok(dlq(&db).args(["stats", "--json"])));
    let instant =
        |v: &serde_json::Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let at = |text: &str| chrono::DateTime::parse_from_rfc3339(text).unwrap();
    assert_eq!(instant(&stats["oldest_item"]), at("2024-01-01T00:00:00Z"));
    assert_eq!(instant(&stats["newest_item"]), at("2025-01-01T00:00:00Z"));
    assert_eq!(
        instant(&stats["jobs"]["job-a"]["oldest_item"]),
        at("2024-01-01T00:00:00Z")
    );
    assert_eq!(
        instant(&stats["jobs"]["job-b"]["newest_item"]),
        at("2024-06-01T00:00:00Z")
    );
    assert_eq!(stats["total_items"], 2);
}

#[test]
fn a_job_directory_keeps_its_name_when_index_json_names_another_job() {
    let dir = TempDir::new("renamed-job");
    let db = dir.join("dlq.db");
    let tree = dir.join("tree");
    legacy_file(&tree, "job-b", &item("x", 1, "2025-01-01T00:00:00Z", "x"));
    write_json(
        &tree.join("mapreduce/dlq/job-b"),
        "index.json",
        &serde_json::json!({"job_id": "job-a", "item_ids": ["x"], "item_count": 1}),
    );
    ok(dlq(&db).args(["import", "--json"]).arg(&tree));
    assert_eq!(
        strings(&db, "SELECT job_id FROM items WHERE item_id = 'x'"),
        ["job-b"]
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM jobs WHERE job_id = 'job-a'"),
        0
    );
}

#[test]
fn add_job_id_wins_over_a_carried_job_id() {
    let dir = TempDir::new("add-job-id");
    let db = dir.join("dlq.db");
    let mut carried = item("x", 1, "2025-01-01T00:00:00Z", "x");
    carried["job_id"] = "old".into();
    add_lines(&db, "new", [carried.clone()]);
    assert_eq!(
        strings(&db, "SELECT job_id FROM items WHERE item_id = 'x'"),
        ["new"]
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM jobs WHERE job_id = 'old'"),
        0
    );
    // Without --job-id the carried one is used.
    let mut other = carried;
    other["item_id"] = "y".into();
    let output = with_stdin(dlq(&db).arg("add"), &format!("{other}\n"));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        strings(&db, "SELECT job_id FROM items WHERE item_id = 'y'"),
        ["old"]
    );
}

/// `dlq add` reading a pipe whose writer is slow (or a person typing) takes
/// its input in full before it asks for the write lock: another writer is
/// not kept waiting meanwhile, and the add is still all or nothing.
#[test]
fn a_slow_add_does_not_hold_other_writers() {
    use std::io::Write;
    let dir = TempDir::new("slow-add");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "other",
        [item("first", 1, "2025-01-01T00:00:00Z", "x")],
    );
    let mut slow = dlq(&db)
        .args(["add", "--job-id", "slow"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = slow.stdin.take().unwrap();
    writeln!(stdin, "{}", item("a", 1, "2025-01-01T00:00:00Z", "x")).unwrap();
    stdin.flush().unwrap();
    // While the slow add waits for the rest of its input, another add with
    // a short busy timeout gets the lock.
    std::thread::sleep(Duration::from_millis(300));
    let output = with_stdin(
        dlq(&db)
            .env("DLQ_BUSY_TIMEOUT_MS", "300")
            .args(["add", "--job-id", "other"]),
        &format!("{}\n", item("second", 1, "2025-01-02T00:00:00Z", "y")),
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'slow'"),
        0
    );
    writeln!(stdin, "{}", item("b", 1, "2025-01-01T00:00:00Z", "x")).unwrap();
    drop(stdin);
    let done = slow.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'slow'"),
        2
    );
}

/// `capacity --set` for a job before its first item makes the job with it
/// (as the library's ensure_job does), and the first adds fit it.
#[test]
fn a_capacity_can_be_set_before_a_jobs_first_item() {
    let dir = TempDir::new("capacity-new-job");
    let db = dir.join("dlq.db");
    add_lines(&db, "other", [item("a", 1, "2025-01-01T00:00:00Z", "x")]);
    let output = run(dlq(&db).args(["capacity", "--job-id", "NEW", "--set", "2"]));
    assert!(output.status.success());
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(said.contains("NEW") && said.contains('2'), "{said}");
    add_lines(
        &db,
        "NEW",
        (1..=3).map(|d| item(&format!("i{d}"), 1, &format!("2025-01-0{d}T00:00:00Z"), "x")),
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'NEW'"),
        2
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'job_created' AND job_id = 'NEW'"
        ),
        1
    );
    // Unsetting a job that does not exist is still an error.
    let refused = fails(dlq(&db).args(["capacity", "--job-id", "NOPE", "--unset"]));
    assert!(refused.contains("NOPE"), "{refused}");
}

/// An import of a directory that holds no legacy DLQ is an error that
/// names what it looked for, and makes no database.
#[test]
fn an_import_of_a_directory_without_a_dlq_fails_and_makes_nothing() {
    let dir = TempDir::new("import-nothing");
    let db = dir.join("new.db");
    let empty = dir.join("empty/sub");
    std::fs::create_dir_all(&empty).unwrap();
    let refused = fails(dlq(&db).arg("import").arg(dir.join("empty")));
    assert!(refused.contains("no legacy DLQ"), "{refused}");
    assert!(refused.contains("mapreduce/dlq"), "{refused}");
    // The three layouts it takes: a legacy tree, Prodigy's home, a file.
    assert!(
        refused.contains("<dir>/mapreduce/dlq/<job_id>/items/*.json")
            && refused.contains("~/.prodigy/dlq/")
            && refused.contains("JSON or JSONL export file"),
        "{refused}"
    );
    assert_eq!(refused.trim().lines().count(), 1, "{refused}");
    assert!(!db.exists());
}
