//! `dlq retry` and `dlq requeue` with real commands, crashes and concurrent
//! runs; and the library replay with a closure.

use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn add_items(db: &Path, job: &str, n: usize, eligible: impl Fn(usize) -> bool) {
    add_lines(
        db,
        job,
        (0..n).map(|i| {
            let mut value = item(&format!("i{i:03}"), 1, "2025-01-01T00:00:00Z", "boom");
            value["reprocess_eligible"] = eligible(i).into();
            value["item_data"]["priority"] = (i as i64).into();
            value
        }),
    );
}

/// A new database in a temp dir with `n` items in job "j" (see add_items).
fn job_j(label: &str, n: usize, eligible: impl Fn(usize) -> bool) -> (TempDir, PathBuf) {
    let dir = TempDir::new(label);
    let db = dir.join("dlq.db");
    add_items(&db, "j", n, eligible);
    (dir, db)
}

fn retry_json(db: &Path, args: &[&str]) -> (i32, serde_json::Value) {
    let output = run(dlq(db).arg("retry").args(args).arg("--json"));
    let code = output.status.code().unwrap_or(-1);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        !text.is_empty(),
        "no output: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (code, json(&text))
}

#[test]
fn success_removes_and_failure_appends() {
    let (_dir, db) = job_j("retry-basic", 3, |_| true);
    let (code, summary) = retry_json(
        &db,
        &[
            "j",
            "--exec",
            "echo 'disk on fire' >&2; exit 3",
            "--max-retries",
            "1",
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(summary["failed"], 3);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
    assert_eq!(count(&db, "SELECT MIN(failure_count) FROM items"), 2);
    let (error_type, exit_code, message): (String, i64, String) = row_as(
        &db,
        "SELECT error_type, exit_code, error_message FROM failure_log WHERE item_id = 'i000' AND attempt_number = 2",
    );
    assert_eq!(
        (error_type.as_str(), exit_code, message.as_str()),
        ("CommandFailed", 3, "disk on fire")
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'retried_failed'"
        ),
        3
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL"
        ),
        0,
        "leases released"
    );

    let (code, summary) = retry_json(&db, &["j", "--exec", "exit 0"]);
    assert_eq!(code, 0);
    assert_eq!(summary["succeeded"], 3);
    assert_eq!(summary["remaining"], 0);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM failure_history"), 0);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'retried_ok'"),
        3
    );
}

#[test]
fn a_command_that_succeeds_on_its_second_attempt() {
    let (_dir, db) = job_j("retry-second", 1, |_| true);
    let (code, summary) = retry_json(
        &db,
        &[
            "j",
            "--exec",
            "[ \"$DLQ_ATTEMPT\" -ge 2 ]",
            "--backoff-ms",
            "10",
        ],
    );
    assert_eq!(code, 0, "{summary}");
    assert_eq!(summary["attempts"], 2);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
    let kinds: Vec<String> = strings(
        &db,
        "SELECT kind FROM events WHERE kind LIKE 'retried%' ORDER BY id",
    );
    assert_eq!(kinds, ["retried_failed", "retried_ok"]);
}

#[test]
fn the_command_gets_the_item_on_stdin_and_in_its_environment() {
    let (dir, db) = job_j("retry-env", 1, |_| true);
    let out = dir.join("seen");
    let command = format!(
        "cat > {o}.stdin; echo \"$DLQ_JOB_ID|$DLQ_ITEM_ID|$DLQ_ATTEMPT\" > {o}.env; cp \"$DLQ_ITEM_FILE\" {o}.item",
        o = out.display()
    );
    let (code, _) = retry_json(&db, &["j", "--exec", &command]);
    assert_eq!(code, 0);
    let stdin = json(&std::fs::read_to_string(format!("{}.stdin", out.display())).unwrap());
    assert_eq!(
        stdin,
        serde_json::json!({"path": "src/i000.rs", "priority": 0})
    );
    assert_eq!(
        std::fs::read_to_string(format!("{}.env", out.display())).unwrap(),
        "j|i000|1\n"
    );
    let item = json(&std::fs::read_to_string(format!("{}.item", out.display())).unwrap());
    assert_eq!(item["item_id"], "i000");
    assert_eq!(item["failure_history"][0]["error_message"], "boom");
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    let (dir, db) = job_j("retry-timeout", 1, |_| true);
    let pid_file = dir.join("pid");
    let command = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
    let started = Instant::now();
    let (code, summary) = retry_json(
        &db,
        &[
            "j",
            "--exec",
            &command,
            "--timeout",
            "0.5",
            "--max-retries",
            "1",
        ],
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(code, 1, "{summary}");
    let (error_type,): (String,) = row_as(
        &db,
        "SELECT error_type FROM failure_log WHERE attempt_number = 2",
    );
    assert_eq!(error_type, "Timeout");
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    // Gone, or at most a zombie waiting for init to reap it. A killed
    // process still has to be scheduled to die: on a loaded machine that
    // can take a moment, so allow a few seconds (the sleep itself is 30 s).
    let dead = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        (status.is_empty() || status.contains(") Z "), status)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !dead().0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (gone, status) = dead();
    assert!(gone, "the background sleep survived: {status}");
}

#[test]
fn filter_force_and_dry_run_select_the_right_items() {
    let (dir, db) = job_j("retry-select", 6, |i| i % 2 == 0); // i000, i002, i004 eligible
    let before = count(&db, "SELECT COUNT(*) FROM events");
    let (_, dry) = retry_json(&db, &["j", "--dry-run", "--filter", "item.priority >= 2"]);
    assert_eq!(dry["would_try"], 2);
    assert_eq!(
        dry["skipped"], 2,
        "i003 and i005 match but are not eligible"
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events"),
        before,
        "dry run changed nothing"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM retry_runs"), 0);

    let log = dir.join("log");
    let command = format!("echo $DLQ_ITEM_ID >> {}", log.display());
    let (code, summary) = retry_json(
        &db,
        &["j", "--exec", &command, "--filter", "item.priority >= 2"],
    );
    assert_eq!(code, 0);
    assert_eq!(summary["skipped"], 2);
    let mut ran: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    ran.sort();
    assert_eq!(ran, ["i002", "i004"]);
    std::fs::remove_file(&log).unwrap();
    let (_, summary) = retry_json(
        &db,
        &[
            "j",
            "--exec",
            &command,
            "--force",
            "--filter",
            "item.priority <= 3",
        ],
    );
    assert_eq!(summary["skipped"], 0);
    let mut ran: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    ran.sort();
    assert_eq!(ran, ["i000", "i001", "i003"]);
    let left: Vec<String> = strings(&db, "SELECT item_id FROM items ORDER BY item_id");
    assert_eq!(left, ["i005"]);
}

/// Start and end markers per item from a log of "start|end ID NANOS" lines.
pub(crate) fn intervals(log: &str, killed_at: Option<u128>) -> BTreeMap<String, Vec<(u128, u128)>> {
    let mut open: BTreeMap<String, Vec<u128>> = BTreeMap::new();
    let mut done: BTreeMap<String, Vec<(u128, u128)>> = BTreeMap::new();
    for line in log.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [kind, id, at] = parts[..] else { continue };
        let at: u128 = at.parse().unwrap();
        match kind {
            "start" => open.entry(id.to_string()).or_default().push(at),
            "end" => {
                let starts = open.get_mut(id).expect("end without start");
                let start = starts.pop().expect("end without start");
                done.entry(id.to_string()).or_default().push((start, at));
            }
            _ => {}
        }
    }
    // Commands of a killed run never wrote their end: they died with it.
    for (id, starts) in open {
        for start in starts {
            let end = killed_at.expect("an unfinished command without a kill");
            done.entry(id.clone()).or_default().push((start, end));
        }
    }
    done
}

pub(crate) fn assert_no_overlap(intervals: &BTreeMap<String, Vec<(u128, u128)>>) {
    for (id, runs) in intervals {
        let mut runs = runs.clone();
        runs.sort();
        for pair in runs.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "{id} ran twice at the same time: {runs:?}"
            );
        }
    }
}

pub(crate) fn logging_command(log: &Path, sleep: &str) -> String {
    format!(
        "echo \"start $DLQ_ITEM_ID $(date +%s%N)\" >> {log}; sleep {sleep}; echo \"end $DLQ_ITEM_ID $(date +%s%N)\" >> {log}",
        log = log.display()
    )
}

pub(crate) fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn a_killed_run_loses_nothing_and_its_items_are_taken_after_the_lease() {
    let (dir, db) = job_j("retry-kill", 24, |_| true);
    let log = dir.join("log");
    let command = logging_command(&log, "0.3");
    let mut child = dlq(&db)
        .args([
            "retry",
            "j",
            "--parallel",
            "4",
            "--lease",
            "2",
            "--exec",
            &command,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_lines(&log, 6);
    child.kill().unwrap(); // SIGKILL
    let killed_at = now_nanos();
    child.wait().unwrap();
    let left = count(&db, "SELECT COUNT(*) FROM items");
    assert!(left > 0, "the kill should land mid-run");
    let runs = json(&ok(dlq(&db).args(["retry", "--status", "--json"])));
    assert_eq!(runs[0]["status"], "crashed");
    // The dead run's claims: hold them well past this test's next step (as a
    // live owner would), keeping when they really end.
    let held: Vec<String> = strings(
        &db,
        "SELECT item_id FROM items WHERE lease_owner IS NOT NULL ORDER BY item_id",
    );
    assert!(!held.is_empty(), "the kill should land while commands run");
    let real_until: Vec<(String, String)> = rows_as(
        &db,
        &format!(
            "SELECT item_id, {} FROM items WHERE lease_owner IS NOT NULL",
            ts("lease_expires", false)
        ),
    );
    exec(
        &db,
        "UPDATE items SET lease_expires = '9999-01-01T00:00:00.000000000Z' WHERE lease_owner IS NOT NULL",
    );
    // Before the leases expire the held items are not taken; every other
    // item is.
    let (code, early) = retry_json(&db, &["j", "--exec", &command, "--lease", "2"]);
    assert_eq!(code, 0, "{early}");
    assert_eq!(
        early["attempted"].as_i64().unwrap(),
        left - held.len() as i64
    );
    assert_eq!(
        strings(&db, "SELECT item_id FROM items ORDER BY item_id"),
        held,
        "exactly the held items are left"
    );
    for (id, until) in &real_until {
        // Generated ids and stored times: nothing to quote.
        exec(
            &db,
            &format!("UPDATE items SET lease_expires = '{until}' WHERE item_id = '{id}'"),
        );
    }
    // ...after, everything completes.
    std::thread::sleep(Duration::from_millis(2200));
    let (code, summary) = retry_json(&db, &["j", "--exec", &command, "--parallel", "4"]);
    assert_eq!(code, 0, "{summary}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
    let intervals = intervals(&std::fs::read_to_string(&log).unwrap(), Some(killed_at));
    assert_eq!(intervals.len(), 24, "every item ran");
    assert_no_overlap(&intervals);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'retried_ok'"),
        24,
        "each removed exactly once"
    );
}

#[test]
fn two_concurrent_runs_never_share_an_item() {
    let (dir, db) = job_j("retry-concurrent", 40, |_| true);
    let log = dir.join("log");
    let command = logging_command(&log, "0.3");
    let spawn = || {
        dlq(&db)
            .args([
                "retry",
                "j",
                "--parallel",
                "4",
                "--json",
                "--exec",
                &command,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let (sa, sb) = (
        json(&String::from_utf8(a.stdout).unwrap()),
        json(&String::from_utf8(b.stdout).unwrap()),
    );
    assert_eq!(
        sa["succeeded"].as_u64().unwrap() + sb["succeeded"].as_u64().unwrap(),
        40
    );
    // Both took part: 40 commands of 0.3 s, 4 at a time, last 3 s or more,
    // far longer than the start of a second process.
    assert!(
        sa["succeeded"].as_u64() > Some(0) && sb["succeeded"].as_u64() > Some(0),
        "one run did everything: {sa} {sb}"
    );
    let intervals = intervals(&std::fs::read_to_string(&log).unwrap(), None);
    assert_eq!(intervals.len(), 40);
    assert!(
        intervals.values().all(|runs| runs.len() == 1),
        "an item ran twice"
    );
    assert_no_overlap(&intervals);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
}

#[test]
fn ctrl_c_lets_running_commands_finish_and_a_rerun_continues() {
    let (dir, db) = job_j("retry-interrupt", 12, |_| true);
    let log = dir.join("log");
    let command = logging_command(&log, "0.4");
    let child = dlq(&db)
        .args([
            "retry",
            "j",
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
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let summary = json(&String::from_utf8(output.stdout).unwrap());
    assert_eq!(summary["interrupted"], true);
    assert_adds_up(&summary);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        logged.matches("start").count(),
        logged.matches("end").count(),
        "running commands finished"
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL"
        ),
        0,
        "leases released"
    );
    let left = count(&db, "SELECT COUNT(*) FROM items");
    assert!(left > 0);
    let runs = json(&ok(dlq(&db).args(["retry", "--status", "--json"])));
    assert_eq!(runs[0]["status"], "interrupted");
    // The run record names this machine (crash detection compares it).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(runs[0]["host"], host.trim(), "{runs}");
    let (code, _) = retry_json(&db, &["j", "--exec", &command, "--parallel", "4"]);
    assert_eq!(code, 0);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
}

#[test]
fn requeue_writes_the_map_input_and_takes_only_after() {
    let dir = TempDir::new("requeue");
    let db = dir.join("dlq.db");
    add_items(&db, "j", 4, |i| i != 1);
    let out = dir.join("input.json");
    let report = json(&ok(dlq(&db)
        .args(["requeue", "j", "--json", "-o"])
        .arg(&out)));
    assert_eq!(report["items"], 3);
    let input = json(&std::fs::read_to_string(&out).unwrap());
    let priorities: Vec<i64> = input["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["priority"].as_i64().unwrap())
        .collect();
    assert_eq!(priorities.len(), 3);
    assert!(!priorities.contains(&1));
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items"),
        4,
        "without --take nothing is removed"
    );
    let report = json(&ok(dlq(&db)
        .args([
            "requeue",
            "j",
            "--json",
            "--take",
            "--filter",
            "item.priority >= 2",
            "-o",
        ])
        .arg(&out)));
    assert_eq!(report["taken"], 2);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 2);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'requeued'"),
        2
    );
    let err = fails(dlq(&db).args(["requeue", "j", "--take", "-o", "/no/such/dir/x.json"]));
    assert!(err.contains("/no/such/dir"), "{err}");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items"),
        2,
        "a failed write takes nothing"
    );
}

/// Options out of range are refused before anything runs or is recorded,
/// by the library as by `dlq retry` (which parses with the same bounds).
#[test]
fn out_of_range_options_are_refused_not_clamped() {
    use dlqlite::retry::{retry, Outcome, RetryOptions, RunControl, MAX_PARALLEL};
    let dlq = dlqlite::Dlq::open_in_memory().unwrap();
    let text = item("i0", 1, "2025-01-01T00:00:00Z", "boom").to_string();
    dlq.add(
        "j",
        &dlqlite::DeadLetteredItem::from_json_str(&text).unwrap(),
    )
    .unwrap();
    let handler = |_: &dlqlite::retry::Attempt<'_>| Outcome::Success;
    for (options, what) in [
        (RetryOptions::new("j").parallel(0), "parallel"),
        (
            RetryOptions::new("j").parallel(MAX_PARALLEL + 1),
            "parallel",
        ),
        (RetryOptions::new("j").max_retries(0), "max retries"),
        (RetryOptions::new("j").lease(Duration::ZERO), "lease"),
        (RetryOptions::new("j").rate(f64::NAN), "rate"),
        (RetryOptions::new(""), "job id"),
    ] {
        let err = options.validate().unwrap_err();
        assert_eq!(err.kind(), dlqlite::ErrorKind::InvalidInput, "{what}");
        assert!(err.to_string().contains(what), "{what}: {err}");
        let err = retry(&dlq, &options, &handler, &RunControl::default(), |_| {}).unwrap_err();
        assert_eq!(err.kind(), dlqlite::ErrorKind::InvalidInput, "{what}");
    }
    assert!(
        dlq.runs(None, 10, "h", 60).unwrap().is_empty(),
        "no run recorded"
    );
    assert_eq!(
        dlq.job_stats("j").unwrap().total_items,
        1,
        "nothing retried"
    );
    assert!(
        RetryOptions::new("j").validate().is_ok(),
        "the defaults pass"
    );
}

#[test]
fn the_library_replays_through_a_closure() {
    use dlqlite::retry::{retry, AttemptFailure, Outcome, RetryOptions, RunControl};
    let dlq = dlqlite::Dlq::open_in_memory().unwrap();
    for i in 0..5 {
        let text = item(&format!("i{i}"), 1, "2025-01-01T00:00:00Z", "boom").to_string();
        dlq.add(
            "j",
            &dlqlite::DeadLetteredItem::from_json_str(&text).unwrap(),
        )
        .unwrap();
    }
    let options = RetryOptions::new("j")
        .parallel(3)
        .max_retries(2)
        .backoff_base(Duration::from_millis(1))
        .lease(Duration::from_secs(30))
        .run_id("in-process");
    let handler = |attempt: &dlqlite::retry::Attempt<'_>| {
        // i0 always fails; the rest succeed on their second attempt.
        if attempt.item.item.item_id == "i0" || attempt.number == 1 {
            Outcome::Failure(AttemptFailure {
                error_type: dlqlite::ErrorType::named("ValidationFailed"),
                error_message: format!("not yet ({})", attempt.number),
                error_context: None,
                stack_trace: None,
                step_failed: "closure".into(),
            })
        } else {
            Outcome::Success
        }
    };
    let summary = retry(&dlq, &options, &handler, &RunControl::default(), |_| {}).unwrap();
    assert_eq!(summary.counts.succeeded, 4);
    assert_eq!(summary.counts.failed, 1);
    assert_eq!(summary.counts.attempts, 10);
    let left = dlq.get(Some("j"), "i0").unwrap();
    assert_eq!(left.failure_count, 3);
    assert_eq!(
        left.failure_history.last().unwrap().error_type.name,
        "ValidationFailed"
    );
}

/// `retry --status` says crashed for a run whose process is gone (same
/// host) or whose heartbeat is stale (any host), and running otherwise; a
/// finished run keeps its counts.
#[test]
fn run_records_show_crashed_runs_and_keep_their_counts() {
    let dir = TempDir::new("runs");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "x")]);
    let dlq = dlqlite::Dlq::open(super::common::target(&db)).unwrap();
    let me = std::process::id();
    let params = serde_json::json!({"exec": "true"});
    // A pid that is not running: past the kernel's largest.
    let dead_pid = 4_194_305;
    dlq.register_run("alive-here", "j", "this-host", me, &params)
        .unwrap();
    dlq.register_run("dead-here", "j", "this-host", dead_pid, &params)
        .unwrap();
    dlq.register_run("elsewhere", "j", "other-host", dead_pid, &params)
        .unwrap();
    dlq.register_run("stale-elsewhere", "j", "other-host", me, &params)
        .unwrap();
    dlq.register_run("done", "j", "this-host", dead_pid, &params)
        .unwrap();
    let counts = dlqlite::store::RunCounts {
        attempted: 5,
        succeeded: 2,
        failed: 3,
        skipped: 7,
        attempts: 11,
    };
    dlq.finish_run("done", dlqlite::store::RunStatus::Finished, &counts)
        .unwrap();
    exec(
        &db,
        "UPDATE retry_runs SET heartbeat_at = '2020-01-01T00:00:00.000000000Z' WHERE run_id = 'stale-elsewhere'",
    );
    let runs = dlq.runs(None, 10, "this-host", 60).unwrap();
    let status: Vec<(String, String)> = runs
        .iter()
        .map(|r| (r.run_id.clone(), r.status.to_string()))
        .collect();
    assert_eq!(
        status,
        [
            ("done".to_string(), "finished".to_string()),
            ("stale-elsewhere".into(), "crashed".into()),
            ("elsewhere".into(), "running".into()),
            ("dead-here".into(), "crashed".into()),
            ("alive-here".into(), "running".into()),
        ],
        "newest first; a live heartbeat on another host is believed"
    );
    assert_eq!(runs[0].counts, counts);
    assert_eq!(runs[0].parameters, params);
    assert!(runs[0].ended_at.is_some());
    assert_eq!(dlq.runs(None, 2, "this-host", 60).unwrap().len(), 2);
    assert!(dlq
        .runs(Some("other"), 10, "this-host", 60)
        .unwrap()
        .is_empty());
}

fn closure_options(run_id: &str, parallel: usize) -> dlqlite::retry::RetryOptions {
    dlqlite::retry::RetryOptions::new("j")
        .parallel(parallel)
        .max_retries(1)
        .backoff_base(Duration::from_millis(1))
        .run_id(run_id)
}

fn failure(message: &str) -> dlqlite::retry::Outcome {
    dlqlite::retry::Outcome::Failure(dlqlite::retry::AttemptFailure {
        error_type: dlqlite::ErrorType::named("ValidationFailed"),
        error_message: message.into(),
        error_context: None,
        stack_trace: None,
        step_failed: "closure".into(),
    })
}

/// An item that has failed its last attempt of a run is given back at
/// once, not when the run ends: another run can take it meanwhile.
#[test]
fn a_failed_item_is_given_back_while_the_run_goes_on() {
    use dlqlite::retry::{retry, Outcome, RunControl};
    let (_dir, db) = job_j("release-early", 2, |_| true);
    let dlq = dlqlite::Dlq::open(super::common::target(&db)).unwrap();
    let seen_free = std::sync::atomic::AtomicBool::new(false);
    let handler = |attempt: &dlqlite::retry::Attempt<'_>| {
        if attempt.item.item.item_id == "i000" {
            return failure("fails at once");
        }
        // The slow item: wait until the failed one's lease is gone.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            let held = count(
                &db,
                "SELECT COUNT(*) FROM items WHERE item_id = 'i000' AND lease_owner IS NULL AND failure_count = 2",
            );
            if held == 1 {
                seen_free.store(true, std::sync::atomic::Ordering::SeqCst);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Outcome::Success
    };
    let summary = retry(
        &dlq,
        &closure_options("early", 2),
        &handler,
        &RunControl::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!((summary.counts.succeeded, summary.counts.failed), (1, 1));
    assert!(
        seen_free.load(std::sync::atomic::Ordering::SeqCst),
        "the failed item stayed leased while the run went on"
    );
}

/// A run that stops on a storage error still gives back every item it
/// holds (here a trigger makes recording the failed attempt fail, as a
/// full disk would).
#[test]
fn a_run_that_fails_gives_back_its_leases() {
    use dlqlite::retry::{retry, RunControl};
    let (_dir, db) = job_j("release-on-error", 6, |_| true);
    let dlq = dlqlite::Dlq::open(super::common::target(&db)).unwrap();
    let handler = |_: &dlqlite::retry::Attempt<'_>| {
        if on_postgres() {
            let _ = pg::client(&db).batch_execute(
                "CREATE OR REPLACE FUNCTION simulated_full_disk() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN RAISE EXCEPTION 'could not extend file: No space left on device (simulated)'
                     USING ERRCODE = '53100'; END $$;
                 CREATE OR REPLACE TRIGGER simulated_full_disk BEFORE INSERT ON failure_history
                     FOR EACH ROW EXECUTE FUNCTION simulated_full_disk()",
            );
        } else {
            let _ = sql(&db).execute_batch(
                "CREATE TRIGGER IF NOT EXISTS simulated_full_disk BEFORE INSERT ON failure_history
                 BEGIN SELECT RAISE(ABORT, 'database or disk is full (simulated)'); END;",
            );
        }
        failure("fails")
    };
    let result = retry(
        &dlq,
        &closure_options("doomed", 1),
        &handler,
        &RunControl::default(),
        |_| {},
    );
    let error = result
        .expect_err("the storage error ends the run")
        .to_string();
    assert!(error.contains("simulated"), "{error}");
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL"
        ),
        0,
        "leases given back"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 6);
}

/// A run claims at most one round ahead of its workers: with --parallel P,
/// never more than 2P items are leased at once, however long the job.
#[test]
fn a_run_leases_at_most_two_rounds_of_items() {
    use dlqlite::retry::{retry, RunControl};
    let (_dir, db) = job_j("lease-bound", 20, |_| true);
    let dlq = dlqlite::Dlq::open(super::common::target(&db)).unwrap();
    for parallel in [1usize, 3] {
        let most = std::sync::atomic::AtomicI64::new(0);
        let handler = |_: &dlqlite::retry::Attempt<'_>| {
            let leased = count(
                &db,
                "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL",
            );
            most.fetch_max(leased, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(10));
            failure("again")
        };
        let summary = retry(
            &dlq,
            &closure_options(&format!("bound-{parallel}"), parallel),
            &handler,
            &RunControl::default(),
            |_| {},
        )
        .unwrap();
        assert_eq!(summary.counts.failed, 20);
        let most = most.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            most <= 2 * parallel as i64 && most >= parallel as i64,
            "--parallel {parallel}: {most} items leased at once"
        );
    }
}

/// A second Ctrl-C kills the running commands (the first lets them
/// finish): the run ends without waiting for them, their attempts are
/// recorded as failed, and no lease is left.
#[test]
fn a_second_ctrl_c_kills_the_running_commands() {
    let (dir, db) = job_j("retry-kill", 4, |_| true);
    let log = dir.join("log");
    // A sleep whose arguments only this test uses, to look for it after.
    let sleep = format!("sleep 60.{}", std::process::id());
    let command = format!("echo start >> {}; exec {sleep}", log.display());
    let child = dlq(&db)
        .args([
            "retry",
            "j",
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
    for _ in 0..2 {
        let status = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(200));
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let summary = json(&String::from_utf8(output.stdout).unwrap());
    assert_eq!(summary["interrupted"], true, "{summary}");
    assert_eq!(summary["succeeded"], 0, "{summary}");
    assert_adds_up(&summary);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL"
        ),
        0
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 4);
    // The killed commands are gone: none of the sleeps is left.
    let alive: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " "))
        .filter(|cmdline| cmdline.trim_end() == sleep)
        .collect();
    assert!(
        alive.is_empty(),
        "a command survived the second Ctrl-C: {alive:?}"
    );
}

/// Every attempted item ended one way: succeeded, failed or lost; an item
/// a stopping run never started counts in none of them.
fn assert_adds_up(summary: &serde_json::Value) {
    let n = |key: &str| {
        summary[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key}: {summary}"))
    };
    assert_eq!(
        n("attempted"),
        n("succeeded") + n("failed") + n("lost"),
        "{summary}"
    );
}

/// A rate of 0 (or less) is no limit, and the progress a run reports
/// counts what it did so far.
#[test]
fn a_zero_rate_is_no_limit_and_progress_counts_the_work() {
    use dlqlite::retry::{retry, RunControl};
    let (_dir, db) = job_j("zero-rate", 12, |_| true);
    let dlq = dlqlite::Dlq::open(super::common::target(&db)).unwrap();
    let mut options = closure_options("zero-rate", 1);
    options.rate = Some(0.0);
    let handler = |_: &dlqlite::retry::Attempt<'_>| {
        std::thread::sleep(Duration::from_millis(40));
        failure("again")
    };
    let reports = std::sync::Mutex::new(Vec::new());
    let summary = retry(&dlq, &options, &handler, &RunControl::default(), |p| {
        reports
            .lock()
            .unwrap()
            .push((p.succeeded, p.failed, p.running));
    })
    .unwrap();
    assert_eq!(summary.counts.failed, 12);
    let reports = reports.into_inner().unwrap();
    // 12 x 40 ms on one worker: progress every 200 ms, so at least two.
    assert!(reports.len() >= 2, "{reports:?}");
    assert!(
        reports
            .iter()
            .all(|&(ok, failed, running)| ok == 0 && failed <= 12 && running <= 1),
        "{reports:?}"
    );
    assert!(
        reports.iter().any(|&(_, failed, _)| failed > 0),
        "{reports:?}"
    );
}

/// A retry's failure is the item's last attempt unless one is dated later
/// (a skewed or future clock): then the signature and last error type stay
/// that attempt's, and the counters still equal a recount.
#[test]
fn a_retry_failure_before_a_future_dated_attempt_is_not_the_last() {
    let dir = TempDir::new("future-attempt");
    let db = dir.join("dlq.db");
    let mut value = item("f", 1, "2099-01-01T00:00:00Z", "from the future");
    value["failure_history"][0]["error_type"] = "Timeout".into();
    add_lines(&db, "j", [value]);
    let before: Vec<String> = strings(
        &db,
        "SELECT error_signature || '/' || last_error_type FROM items",
    );
    let (code, _) = retry_json(&db, &["j", "--exec", "exit 3", "--max-retries", "1"]);
    assert_eq!(code, 1);
    assert_eq!(count(&db, "SELECT failure_count FROM items"), 2);
    assert_eq!(
        strings(
            &db,
            "SELECT error_signature || '/' || last_error_type FROM items"
        ),
        before
    );
    assert_eq!(
        strings(&db, "SELECT error_type FROM item_summary"),
        ["Timeout"]
    );
    let counted = dump(&db);
    ok(dlq(&db).args(["db", "--recount"]));
    assert_eq!(dump(&db), counted, "counters differ from a recount");
}

/// A failure merged into an item while its retry's command runs is never
/// deleted by that retry's success: the success was for the item as the
/// command was given it. The item stays, with the new failure, and the
/// success is an event.
#[test]
fn a_success_keeps_an_item_that_changed_while_its_command_ran() {
    let (dir, db) = job_j("retry-changed", 2, |_| true);
    // The same item, failing again elsewhere with other data.
    let mut newer = item("i000", 2, "2025-01-02T00:00:00Z", "boom again");
    newer["item_data"]["priority"] = 99.into();
    let file = write_json(dir.path(), "newer.json", &newer);
    let output = run(dlq(&db)
        .args([
            "retry",
            "j",
            "--json",
            "--max-retries",
            "1",
            "--exec",
            // Only for i000: a neighbour merges a failure into it, then
            // the command succeeds.
            "if [ \"$DLQ_ITEM_ID\" = i000 ]; then \"$DLQ_BIN\" --db \"$TARGET\" add --job-id j \"$NEWER\" >/dev/null || exit 9; fi; exit 0",
        ])
        .env("DLQ_BIN", env!("CARGO_BIN_EXE_dlq"))
        .env("TARGET", target(&db))
        .env("NEWER", &file));
    let code = output.status.code().unwrap_or(-1);
    let summary = json(&String::from_utf8(output.stdout).unwrap());
    assert_eq!(code, 0, "{summary}");
    assert_eq!(summary["succeeded"], 2, "{summary}");
    assert_eq!(summary["kept_changed"], 1, "{summary}");
    assert_eq!(summary["lost"], 0, "{summary}");
    // i001 is gone, i000 stays with both attempts and the newer data.
    assert_eq!(
        strings(&db, "SELECT item_id FROM items ORDER BY item_id"),
        ["i000"]
    );
    assert_eq!(count(&db, "SELECT failure_count FROM items"), 2);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM failure_history"),
        2,
        "the merged failure was lost"
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'retried_ok' AND item_id = 'i000'"
        ),
        1
    );
    // Nothing holds it: a later run can take it.
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL"
        ),
        0
    );
}

/// A command that hands its stdin and stderr to a process outside its
/// group (`setsid -f`) and ends: dlq cannot reach that process, so it must
/// not wait for it, neither feeding it the rest of an item too big for the
/// pipe nor reading its stderr to the end. Before, the run hung forever
/// (with or without --timeout) while renewing its lease.
#[test]
fn a_command_handing_its_pipes_to_an_escaped_process_does_not_hold_the_run() {
    let dir = TempDir::new("retry-escaped-stdin");
    let db = dir.join("dlq.db");
    let mut big = item("big", 1, "2025-01-01T00:00:00Z", "boom");
    big["item_data"]["blob"] = "x".repeat(512 * 1024).into();
    add_lines(&db, "j", [big]);
    let pids = dir.join("escaped.pids");
    let command = "setsid -f sh -c 'echo $$ >> \"$PIDS\"; exec sleep 600'; exit 0";
    for timeout in [None, Some("300")] {
        let mut retry = dlq(&db);
        retry
            .args(["retry", "j", "--json", "--exec", command])
            .env("PIDS", &pids);
        if let Some(seconds) = timeout {
            retry.args(["--timeout", seconds]);
            add_lines(&db, "j", [item("again", 1, "2025-01-01T00:00:00Z", "boom")]);
        }
        let output = run_within(&mut retry, Duration::from_secs(60));
        kill_listed(&pids);
        let summary = json(&String::from_utf8(output.stdout).unwrap());
        assert_eq!(output.status.code(), Some(0), "{summary}");
        assert_eq!(summary["succeeded"], 1, "{summary}");
    }
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
}

/// A writer beside a run holds the lock longer than a lease: the run
/// cannot renew, so it kills its command before the lease runs out (and
/// says why), instead of letting another run take the item and start it a
/// second time while the first command still runs.
#[test]
fn a_run_that_cannot_renew_its_leases_kills_its_commands_before_they_run_out() {
    if sqlite_only("PostgreSQL renews row by row beside a table lock") {
        return;
    }
    let (dir, db) = job_j("retry-lease-lapse", 1, |_| true);
    let pids = dir.join("pids");
    let command = format!("echo $$ >> '{}'; exec sleep 120", pids.display());
    let child = dlq(&db)
        .args(["retry", "j", "--json", "--lease", "6", "--exec", &command])
        .env("DLQ_BUSY_TIMEOUT_MS", "60000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_lines(&pids, 1);
    let pid = std::fs::read_to_string(&pids).unwrap().trim().to_string();
    let lock = hold_write_lock(&db);
    let locked = Instant::now();
    let alive = || Path::new(&format!("/proc/{pid}")).exists();
    while alive() && locked.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let died = locked.elapsed();
    kill_listed(&pids);
    // Renewed last at most 2 s (a third of the lease) before the lock:
    // the lease runs out 6 s after that at the latest.
    assert!(
        died < Duration::from_secs(6),
        "the command still ran {died:?} into the lock"
    );
    drop(lock);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("leases went unrenewed"), "{stderr}");
    assert!(stderr.contains("none runs twice"), "{stderr}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 1);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL"
        ),
        0
    );
}

/// A run whose start waits for the lock (another writer holds it longer
/// than a lease) holds no lease while it waits: once it starts, its fresh
/// commands run to their end, and nothing is recorded as a failure.
#[test]
fn a_run_that_waited_for_the_lock_to_start_keeps_its_fresh_commands() {
    if sqlite_only("the lock held is SQLite's") {
        return;
    }
    let (_dir, db) = job_j("retry-late-start", 2, |_| true);
    let lock = hold_write_lock(&db);
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        drop(lock);
    });
    let (code, summary) = retry_json(&db, &["j", "--exec", "sleep 0.5; exit 0", "--lease", "2"]);
    release.join().unwrap();
    assert_eq!(code, 0, "{summary}");
    assert_eq!(summary["succeeded"], 2, "{summary}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
}

/// A run without --timeout has one: an hour, so one hung command cannot
/// hang the run for ever; `--timeout 0` asks for none.
#[test]
fn a_retry_has_a_default_timeout_and_0_means_none() {
    let dir = TempDir::new("retry-default-timeout");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    // Both fail their one attempt (exit 1), and record what they ran with.
    run(dlq(&db).args(["retry", "j", "--exec", "exit 1", "--max-retries", "1"]));
    run(dlq(&db).args([
        "retry",
        "j",
        "--exec",
        "exit 1",
        "--max-retries",
        "1",
        "--timeout",
        "0",
    ]));
    let runs = json(&ok(dlq(&db).args(["retry", "--status", "--json"])));
    let mut timeouts: Vec<String> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["parameters"]["timeout"].to_string())
        .collect();
    timeouts.sort();
    assert_eq!(timeouts, ["3600.0", "null"], "{runs}");
}

/// A failed command can say why through DLQ_RESULT_FILE (an empty 0600 file
/// in a 0700 directory of the run): its error_type and error_message are
/// the attempt's, instead of CommandFailed and stderr. What is not such an
/// object (or a symlink put in its place) is ignored with a note in the
/// attempt's error_context; a command that exits 0 succeeds whatever it
/// wrote.
#[test]
fn a_failed_command_reports_its_own_error_through_dlq_result_file() {
    let (dir, db) = job_j("retry-result-file", 4, |_| true);
    let seen = dir.join("seen");
    let command = format!(
        r#"f="$DLQ_RESULT_FILE"
stat -c '%a %s' "$f" > {o}.mode; stat -c %a "$(dirname "$f")" >> {o}.mode
echo "stderr line" >&2
case "$DLQ_ITEM_ID" in
  i000) printf '{{"error_type": "RateLimited", "error_message": "429: slow down"}}' > "$f"; exit 3 ;;
  i001) printf '{{not json' > "$f"; exit 3 ;;
  i002) rm "$f"; ln -s /etc/passwd "$f"; exit 3 ;;
  i003) printf '{{"error_type": "RateLimited"}}' > "$f"; exit 0 ;;
esac"#,
        o = seen.display()
    );
    let (code, summary) = retry_json(
        &db,
        &[
            "j",
            "--exec",
            &command,
            "--max-retries",
            "1",
            "--parallel",
            "1",
        ],
    );
    assert_eq!(code, 1, "{summary}");
    assert_eq!(summary["succeeded"], 1, "{summary}");
    let mode = std::fs::read_to_string(format!("{}.mode", seen.display())).unwrap();
    assert!(mode.starts_with("600 0\n700\n"), "{mode}");
    let last = |id: &str| {
        let item = json(&ok(dlq(&db).args(["inspect", id])));
        item["failure_history"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone()
    };
    let reported = last("i000");
    assert_eq!(reported["attempt_number"], 2, "{reported}");
    assert_eq!(reported["error_type"], "RateLimited", "{reported}");
    assert_eq!(reported["error_message"], "429: slow down", "{reported}");
    for (id, why) in [("i001", "not JSON"), ("i002", "cannot open it")] {
        let ignored = last(id);
        assert_eq!(
            ignored["error_type"],
            serde_json::json!({"CommandFailed": {"exit_code": 3}}),
            "{ignored}"
        );
        assert_eq!(ignored["error_message"], "stderr line", "{ignored}");
        let context = ignored["error_context"][0].as_str().unwrap_or_default();
        assert!(
            context.starts_with("DLQ_RESULT_FILE ignored: ") && context.contains(why),
            "{ignored}"
        );
    }
    assert!(fails(dlq(&db).args(["inspect", "i003"])).contains("not found"));
    // Documented, with what DLQ_ATTEMPT counts.
    let help = ok(dlq(&db).args(["retry", "--help"]));
    assert!(
        help.contains("DLQ_RESULT_FILE") && help.contains("attempt in this run"),
        "{help}"
    );
}
