//! `dlq watch`: new dead letters from other processes, once each, with the
//! hook once each; a cursor that survives SIGKILL without a gap or a
//! repeat; job, filter and --events selection; failing hooks; the cursor
//! of another database; a missing database; hook retries with a cursor;
//! a database replaced under the watch; unwritable and fifo cursors; hook
//! output on a terminal; the note for a job with nothing yet.

use crate::common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const TS: &str = "2025-11-23T19:40:00Z";

/// Waits (up to 30 s) for `done`; fails the test with `what` otherwise.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn cursor_id(path: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str::<serde_json::Value>(&text).ok()?["event_id"].as_i64()
}

fn last_event_id(db: &Path) -> i64 {
    count(db, "SELECT COALESCE(MAX(id), 0) FROM events")
}

/// `dlq add` of these items to `job`, started and left running.
fn start_add(db: &Path, job: &str, ids: &[String]) -> Child {
    use std::io::Write;
    let mut child = dlq(db)
        .args(["add", "--job-id", job])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let text: String = ids
        .iter()
        .map(|id| item(id, 1, TS, &format!("boom {id}")).to_string() + "\n")
        .collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    child
}

/// The hook of these tests: the legacy JSON on stdin to hooks/ITEM.json,
/// one line per run to hooks.log.
fn hook(dir: &TempDir) -> String {
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    format!(
        "cat > '{0}/hooks/'\"$DLQ_ITEM_ID\".json && \
         echo \"$DLQ_EVENT $DLQ_JOB_ID $DLQ_ITEM_ID $DLQ_EVENT_ID\" >> '{0}/hooks.log'",
        dir.path().display()
    )
}

fn item_ids(jsonl: &[String]) -> Vec<String> {
    jsonl
        .iter()
        .map(|line| json(line)["item_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn concurrent_adds_show_once_each_and_a_killed_watcher_resumes_without_gap_or_repeat() {
    let dir = TempDir::new("watch-live");
    let db = dir.join("dlq.db");
    add_lines(&db, "seed", [item("old", 1, TS, "before the watch")]);
    let cursor = dir.join("watch.cursor");
    let out = dir.join("out.jsonl");
    let start_watch = |out: &Path| {
        dlq(&db)
            .args(["watch", "--format", "jsonl", "--exec", &hook(&dir)])
            .arg("--since-cursor")
            .arg(&cursor)
            .stdout(std::fs::File::create(out).unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut watcher = start_watch(&out);
    // A missing cursor is created at the end of the log: the watch is on.
    wait_until("the cursor file", || cursor_id(&cursor).is_some());
    assert_eq!(cursor_id(&cursor), Some(last_event_id(&db)));

    let mut expected = BTreeSet::new();
    let adds: Vec<Child> = (0..3)
        .map(|p| {
            let ids: Vec<String> = (0..2).map(|i| format!("p{p}-{i}")).collect();
            expected.extend(ids.iter().cloned());
            start_add(&db, "live", &ids)
        })
        .collect();
    for add in adds {
        let output = add.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let log = dir.join("hooks.log");
    wait_until("six hooks", || lines(&log).len() >= 6);
    // The cursor reaches the last event once the last hook is done.
    let end = last_event_id(&db);
    wait_until("the cursor at the end", || cursor_id(&cursor) == Some(end));

    let printed = item_ids(&lines(&out));
    assert_eq!(printed.len(), 6, "{printed:?}");
    assert_eq!(printed.iter().cloned().collect::<BTreeSet<_>>(), expected);
    for line in lines(&out) {
        let line = json(&line);
        assert_eq!(line["event"], "added");
        assert_eq!(line["job_id"], "live");
        assert_eq!(line["failure_count"], 1);
        assert_eq!(line["error_type"], "CommandFailed");
    }
    let hooked: Vec<String> = lines(&log);
    assert_eq!(hooked.len(), 6, "{hooked:?}");
    let hooked_ids: BTreeSet<String> = hooked
        .iter()
        .map(|l| l.split(' ').nth(2).unwrap().to_string())
        .collect();
    assert_eq!(hooked_ids, expected);
    for line in &hooked {
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields[..2], ["added", "live"], "{line}");
        assert!(fields[3].parse::<i64>().unwrap() > 0, "{line}");
        // The whole item, in the legacy shape, came on stdin.
        let stdin =
            std::fs::read_to_string(dir.join(&format!("hooks/{}.json", fields[2]))).unwrap();
        let stdin = json(&stdin);
        assert_eq!(stdin["item_id"], fields[2]);
        assert_eq!(
            stdin["failure_history"][0]["error_message"],
            format!("boom {}", fields[2])
        );
    }

    // Killed outright; items come while it is down.
    watcher.kill().unwrap();
    watcher.wait().unwrap();
    add_lines(&db, "live", [item("while-down", 1, TS, "boom while-down")]);
    add_lines(&db, "other", [item("down-too", 1, TS, "boom down-too")]);
    // A merge is a dead letter again.
    add_lines(
        &db,
        "live",
        [item("p0-0", 2, "2025-11-24T00:00:00Z", "boom again")],
    );

    let out2 = dir.join("out2.jsonl");
    let watcher = start_watch(&out2);
    wait_until("three more hooks", || lines(&log).len() >= 9);
    let end = last_event_id(&db);
    wait_until("the cursor at the new end", || {
        cursor_id(&cursor) == Some(end)
    });
    let resumed = lines(&out2);
    assert_eq!(item_ids(&resumed), ["while-down", "down-too", "p0-0"]);
    assert_eq!(json(&resumed[2])["event"], "merged");
    assert_eq!(json(&resumed[2])["failure_count"], 2);
    let hooked = lines(&log);
    assert_eq!(hooked.len(), 9, "{hooked:?}");
    assert!(hooked[8].starts_with("merged live p0-0 "), "{hooked:?}");
    // Stopped by SIGTERM: exit 0, the cursor where it was.
    unsafe {
        libc::kill(watcher.id() as i32, libc::SIGTERM);
    }
    let output = watcher.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(cursor_id(&cursor), Some(end));
    // Nothing new: a run with --once prints nothing and runs nothing.
    let again = ok(dlq(&db)
        .args([
            "watch",
            "--once",
            "--format",
            "jsonl",
            "--exec",
            &hook(&dir),
        ])
        .arg("--since-cursor")
        .arg(&cursor));
    assert_eq!(again, "");
    assert_eq!(lines(&log).len(), 9);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&cursor).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn job_filter_and_events_select_by_the_items_current_state() {
    let dir = TempDir::new("watch-select");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "a",
        [item("a1", 1, TS, "disk full"), item("a2", 1, TS, "timeout")],
    );
    add_lines(&db, "b", [item("b1", 1, TS, "disk full")]);
    add_lines(&db, "a", [item("a2", 2, TS, "timeout again")]);
    let watch = |args: &[&str]| {
        let text = ok(dlq(&db)
            .args(["watch", "--once", "--from-start", "--format", "jsonl"])
            .args(args));
        text.lines().map(str::to_string).collect::<Vec<_>>()
    };
    let all = watch(&[]);
    assert_eq!(item_ids(&all), ["a1", "a2", "b1", "a2"]);
    assert_eq!(item_ids(&watch(&["--job-id", "b"])), ["b1"]);
    // The filter sees the item as it is now: a2 has failed twice, so both
    // of its events match.
    assert_eq!(
        item_ids(&watch(&["--filter", "failure_count >= 2"])),
        ["a2", "a2"]
    );
    assert_eq!(
        item_ids(&watch(&["--filter", "error_message contains 'disk'"])),
        ["a1", "b1"]
    );
    // Without a cursor and --from-start, it starts at the end.
    assert!(watch(&[]).len() == 4);
    let from_end = ok(dlq(&db).args(["watch", "--once", "--format", "jsonl"]));
    assert_eq!(from_end, "");

    // A removed item is skipped; --events shows every event anyway.
    ok(dlq(&db).args(["mark", "a1", "--job-id", "a", "--ineligible"]));
    ok(dlq(&db).args(["clear", "b", "--yes"]));
    assert_eq!(item_ids(&watch(&[])), ["a1", "a2", "a2"]);
    let events = watch(&["--events"]);
    let kinds: Vec<String> = events
        .iter()
        .map(|l| json(l)["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "job_created",
            "added",
            "added",
            "job_created",
            "added",
            "merged",
            "marked",
            "cleared"
        ]
    );
    assert!(json(&events[4])["failure_count"].is_null(), "b1 is gone");
    assert!(json(&events[6])["detail"].is_object());

    // Tables: one line per dead letter under one header, escaped.
    add_lines(
        &db,
        "a",
        [item("esc\u{1b}[31m", 1, TS, "red \u{1b}]0;title\u{7}")],
    );
    let table = ok(dlq(&db).args(["watch", "--once", "--from-start", "--job-id", "a"]));
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 5, "{table}");
    assert!(rows[0].starts_with("TIME"), "{table}");
    assert!(
        rows[4].contains("added") && rows[4].contains("esc\\e[31m"),
        "{table}"
    );
    assert!(
        !table.contains('\u{1b}') && !table.contains('\u{7}'),
        "{table}"
    );
}

#[test]
fn a_failing_hook_warns_and_the_watch_goes_on() {
    let dir = TempDir::new("watch-hook-fails");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m"), item("x2", 1, TS, "m")]);
    let log = dir.join("ran.log");
    let command = format!(
        "echo \"$DLQ_ITEM_ID\" >> '{}'; [ \"$DLQ_ITEM_ID\" != x1 ]",
        log.display()
    );
    let output = run(dlq(&db).args([
        "watch",
        "--once",
        "--from-start",
        "--format",
        "jsonl",
        "--exec",
        &command,
    ]));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("warning") && stderr.contains("x1") && stderr.contains("status 1"),
        "{stderr}"
    );
    assert_eq!(lines(&log), ["x1", "x2"]);
    assert_eq!(item_ids(&lines_of(&output.stdout)), ["x1", "x2"]);

    // A hook that hangs is killed at --exec-timeout, with a warning.
    let started = Instant::now();
    let output = run(dlq(&db).args([
        "watch",
        "--once",
        "--from-start",
        "--job-id",
        "j",
        "--exec",
        "sleep 60",
        "--exec-timeout",
        "1",
    ]));
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("timed out"));
    assert!(started.elapsed() < Duration::from_secs(50));
}

fn lines_of(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_hook_dies_with_a_killed_watcher() {
    let dir = TempDir::new("watch-hook-dies");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m")]);
    let pid_file = dir.join("hook.pid");
    let command = format!("sleep 300 & echo $! > '{}'; wait", pid_file.display());
    let mut watcher = dlq(&db)
        .args(["watch", "--from-start", "--exec", &command])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the hook", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    watcher.kill().unwrap();
    watcher.wait().unwrap();
    let gone = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    };
    wait_until("the hook's sleep to be killed", gone);
}

#[test]
fn a_cursor_of_another_database_or_no_database_is_refused() {
    let dir = TempDir::new("watch-cursor");
    let db = dir.join("one.db");
    let other = dir.join("other.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m"), item("x2", 1, TS, "m")]);
    add_lines(
        &other,
        "j",
        [item("y1", 1, TS, "m"), item("y2", 1, TS, "m")],
    );
    let cursor = dir.join("c.cursor");
    ok(dlq(&db)
        .args(["watch", "--once"])
        .arg("--since-cursor")
        .arg(&cursor));
    assert_eq!(cursor_id(&cursor), Some(last_event_id(&db)));
    let error = fails(
        dlq(&other)
            .args(["watch", "--once"])
            .arg("--since-cursor")
            .arg(&cursor),
    );
    assert!(error.contains("another database"), "{error}");
    assert_eq!(error.lines().count(), 1, "{error}");
    std::fs::write(&cursor, "garbage").unwrap();
    let error = fails(
        dlq(&db)
            .args(["watch", "--once"])
            .arg("--since-cursor")
            .arg(&cursor),
    );
    assert!(error.contains("not a dlq watch cursor"), "{error}");
    // Never through a link.
    std::fs::remove_file(&cursor).unwrap();
    std::os::unix::fs::symlink(dir.join("elsewhere"), &cursor).unwrap();
    let error = fails(
        dlq(&db)
            .args(["watch", "--once"])
            .arg("--since-cursor")
            .arg(&cursor),
    );
    assert!(error.contains("symbolic link"), "{error}");
    assert!(!dir.join("elsewhere").exists());
    // `-` is not a cursor: it would be written between the events.
    let output = run(dlq(&db).args(["watch", "--once", "--since-cursor", "-"]));
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("not stdout"), "{error}");
    assert_eq!(error.lines().count(), 1, "{error}");

    let missing = dir.join("missing.db");
    let output = run(dlq(&missing).args(["watch", "--once"]));
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("import or add items first"));
    assert!(!missing.exists());
    let output = run(dlq(&db).args(["watch", "--filter", "nonsense =="]));
    assert_eq!(output.status.code(), Some(2));
}

/// A hook failing its first `fails` runs (a counter file in `dir`), logging
/// "ITEM N" per run to ran.log.
fn flaky_hook(dir: &TempDir, fails: u32) -> String {
    let d = dir.path().display();
    format!(
        "n=$(cat '{d}/count' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{d}/count'; \
         echo \"$DLQ_ITEM_ID $n\" >> '{d}/ran.log'; [ $n -gt {fails} ]"
    )
}

#[test]
fn with_a_cursor_a_failing_hook_is_retried_and_once_stops_before_it() {
    let dir = TempDir::new("watch-hook-retry-once");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m"), item("x2", 1, TS, "m")]);
    let cursor = dir.join("c.cursor");
    let command = flaky_hook(&dir, 2);
    let watch = || {
        run(dlq(&db)
            .args(["watch", "--once", "--from-start", "--format", "jsonl"])
            .args(["--exec", &command, "--since-cursor"])
            .arg(&cursor))
    };
    for n in 1..=2 {
        let output = watch();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("stopping here"), "{stderr}");
        // The cursor stays before x1: the next run starts with it.
        let x1 = count(
            &db,
            "SELECT MIN(id) FROM events WHERE item_id = 'x1' AND kind = 'added'",
        );
        assert!(cursor_id(&cursor).unwrap() < x1);
        assert_eq!(lines(&dir.join("ran.log")).len(), n);
    }
    let output = watch();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        lines(&dir.join("ran.log")),
        ["x1 1", "x1 2", "x1 3", "x2 4"]
    );
    assert_eq!(cursor_id(&cursor), Some(last_event_id(&db)));
}

#[test]
fn a_running_watch_with_a_cursor_retries_a_failing_hook_until_it_succeeds() {
    let dir = TempDir::new("watch-hook-retry");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m"), item("x2", 1, TS, "m")]);
    let cursor = dir.join("c.cursor");
    let errors = dir.join("stderr.txt");
    let mut watcher = dlq(&db)
        .args(["watch", "--from-start", "--exec", &flaky_hook(&dir, 2)])
        .arg("--since-cursor")
        .arg(&cursor)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&errors).unwrap())
        .spawn()
        .unwrap();
    let log = dir.join("ran.log");
    wait_until("x1 three times and x2", || lines(&log).len() >= 4);
    wait_until("the cursor at the end", || {
        cursor_id(&cursor) == Some(last_event_id(&db))
    });
    assert!(watcher.try_wait().unwrap().is_none(), "the watch ended");
    watcher.kill().unwrap();
    watcher.wait().unwrap();
    assert_eq!(lines(&log), ["x1 1", "x1 2", "x1 3", "x2 4"]);
    let stderr = std::fs::read_to_string(&errors).unwrap();
    assert_eq!(stderr.matches("trying again").count(), 2, "{stderr}");
}

#[test]
fn a_database_removed_or_replaced_under_a_running_watch_ends_it() {
    if crate::common::sqlite_only("a database file removed or replaced under a watch") {
        return;
    }
    for how in ["rm", "mv"] {
        let dir = TempDir::new("watch-replaced");
        let db = dir.join("dlq.db");
        add_lines(&db, "j", [item("x1", 1, TS, "m")]);
        let other = dir.join("other.db");
        add_lines(&other, "j", [item("y1", 1, TS, "m")]);
        let cursor = dir.join("c.cursor");
        let mut watcher = dlq(&db)
            .args(["watch", "--format", "jsonl", "--since-cursor"])
            .arg(&cursor)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until("the cursor file", || cursor_id(&cursor).is_some());
        let before = std::fs::read_to_string(&cursor).unwrap();
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
        }
        if how == "rm" {
            add_lines(&db, "j", [item("z1", 1, TS, "m")]);
        } else {
            std::fs::rename(&other, &db).unwrap();
        }
        wait_until("the watch to end", || watcher.try_wait().unwrap().is_some());
        let output = watcher.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{how}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("was removed or replaced"), "{stderr}");
        assert!(output.stdout.is_empty());
        assert_eq!(std::fs::read_to_string(&cursor).unwrap(), before);
    }
}

/// A hook retried (its webhook down) for a database that is then removed
/// ends the watch as an idle one does, instead of retrying for ever.
#[test]
fn a_database_removed_while_a_hook_is_retried_ends_the_watch() {
    if crate::common::sqlite_only("a database file removed under a watch") {
        return;
    }
    let dir = TempDir::new("watch-retry-removed");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m")]);
    let cursor = dir.join("c.cursor");
    let errors = dir.join("stderr.txt");
    let mut watcher = dlq(&db)
        .args([
            "watch",
            "--from-start",
            "--exec",
            "exit 7",
            "--since-cursor",
        ])
        .arg(&cursor)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&errors).unwrap())
        .spawn()
        .unwrap();
    wait_until("a retry", || {
        std::fs::read_to_string(&errors)
            .unwrap_or_default()
            .contains("trying again")
    });
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    wait_until("the watch to end", || watcher.try_wait().unwrap().is_some());
    assert_eq!(watcher.wait().unwrap().code(), Some(1));
    let stderr = std::fs::read_to_string(&errors).unwrap();
    assert!(
        stderr
            .lines()
            .last()
            .unwrap()
            .contains("was removed or replaced"),
        "{stderr}"
    );
}

#[test]
fn a_cursor_that_cannot_be_written_stops_the_watch_before_any_hook() {
    let dir = TempDir::new("watch-cursor-unwritable");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m")]);
    let log = dir.join("ran.log");
    let command = format!("echo ran >> '{}'", log.display());
    let missing = dir.join("nowhere").join("c.cursor");
    let error = fails(
        dlq(&db)
            .args(["watch", "--once", "--from-start", "--exec", &command])
            .arg("--since-cursor")
            .arg(&missing),
    );
    assert!(
        error.contains(&format!(
            "cursor {}: directory {} does not exist",
            missing.display(),
            dir.join("nowhere").display()
        )),
        "{error}"
    );
    assert!(!log.exists());

    // An existing cursor in a directory that is no longer writable (not
    // testable as root, who can write anyway).
    use std::os::unix::fs::PermissionsExt;
    let locked = dir.join("locked");
    std::fs::create_dir(&locked).unwrap();
    let cursor = locked.join("c.cursor");
    ok(dlq(&db)
        .args(["watch", "--once"])
        .arg("--since-cursor")
        .arg(&cursor));
    add_lines(&db, "j", [item("x2", 1, TS, "m")]);
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
    let root = std::fs::write(locked.join("probe"), "").is_ok();
    if !root {
        let error = fails(
            dlq(&db)
                .args(["watch", "--once", "--exec", &command])
                .arg("--since-cursor")
                .arg(&cursor),
        );
        assert!(error.contains("cannot write in"), "{error}");
        assert!(error.contains("ermission denied"), "{error}");
        assert!(!log.exists());
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn a_cursor_that_is_a_fifo_is_refused_at_once() {
    let dir = TempDir::new("watch-cursor-fifo");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m")]);
    let fifo = dir.join("c.cursor");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let mut watcher = dlq(&db)
        .args(["watch", "--once", "--since-cursor"])
        .arg(&fifo)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while watcher.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            watcher.kill().unwrap();
            panic!("dlq watch blocked on a fifo cursor");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = watcher.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a regular file"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn hook_output_is_escaped_on_a_terminal_and_raw_otherwise() {
    let dir = TempDir::new("watch-hook-output");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m")]);
    let command = r"printf 'out\033[2J\n'; printf 'err\033[2J\n' >&2";
    // Not a terminal: the bytes as they are (a log keeps them).
    let output = run(dlq(&db).args([
        "watch",
        "--once",
        "--from-start",
        "--format",
        "jsonl",
        "--exec",
        command,
    ]));
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("out\x1b[2J\n"), "{stderr:?}");
    assert!(stderr.contains("err\x1b[2J\n"), "{stderr:?}");
    assert!(output.stdout.iter().all(|b| *b != 0x1b));

    // On a terminal (script(1) gives it one): escaped.
    let shell_command = format!(
        "'{}' --db '{}' watch --once --from-start --format jsonl --exec \"$HOOK\"",
        env!("CARGO_BIN_EXE_dlq"),
        target(&db).display()
    );
    let output = std::process::Command::new("script")
        .args(["-qec", &shell_command, "/dev/null"])
        .env("HOOK", command)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains(r"out\e[2J"), "{text:?}");
    assert!(text.contains(r"err\e[2J"), "{text:?}");
    assert!(!text.contains('\x1b'), "{text:?}");
}

#[test]
fn a_hook_leaving_a_process_outside_its_group_does_not_hold_the_watch() {
    let dir = TempDir::new("watch-hook-setsid");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m")]);
    let pid_file = dir.join("escaped.pid");
    let command = format!("setsid sleep 120 & echo $! > '{}'", pid_file.display());
    let started = Instant::now();
    let output = run(dlq(&db).args(["watch", "--once", "--from-start", "--exec", &command]));
    let took = started.elapsed();
    if let Ok(pid) = std::fs::read_to_string(&pid_file) {
        let _ = std::process::Command::new("kill").arg(pid.trim()).status();
    }
    assert!(output.status.success(), "{output:?}");
    assert!(took < Duration::from_secs(60), "{took:?}");
}

/// A hook that hands its stdin to a process outside its group and ends,
/// with an item too big for the pipe: the rest of the input is dropped, not
/// written into a pipe nobody in reach will read.
#[test]
fn a_hook_handing_its_stdin_to_an_escaped_process_does_not_hold_the_watch() {
    let dir = TempDir::new("watch-hook-escaped-stdin");
    let db = dir.join("dlq.db");
    let mut big = item("x1", 1, TS, "m");
    big["item_data"]["blob"] = "x".repeat(512 * 1024).into();
    add_lines(&db, "j", [big]);
    let pids = dir.join("escaped.pids");
    let command = "setsid -f sh -c 'echo $$ >> \"$PIDS\"; exec sleep 600'; exit 0";
    let output = run_within(
        dlq(&db)
            .args(["watch", "--once", "--from-start", "--exec", command])
            .env("PIDS", &pids),
        Duration::from_secs(60),
    );
    kill_listed(&pids);
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn a_job_with_nothing_yet_gets_a_note_and_a_cursor_of_another_time_says_so() {
    let dir = TempDir::new("watch-job-note");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("x1", 1, TS, "m")]);
    let output = run(dlq(&db).args(["watch", "--once", "--job-id", "jj"]));
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim_end(),
        "dlq: note: job jj has no dead letters yet; waiting for them"
    );
    let output = run(dlq(&db).args(["watch", "--once", "--job-id", "j"]));
    assert!(output.stderr.is_empty(), "{output:?}");

    let cursor = dir.join("c.cursor");
    std::fs::write(
        &cursor,
        r#"{"event_id": 1, "event_time": "2001-01-01T00:00:00.000000Z"}"#,
    )
    .unwrap();
    let error = fails(
        dlq(&db)
            .args(["watch", "--once"])
            .arg("--since-cursor")
            .arg(&cursor),
    );
    assert!(
        error.contains("its event 1 has another time here"),
        "{error}"
    );
}

/// Into a pipe, a table line cuts its message as `dlq list` does (a 2 MB
/// message was one 2 MB line); `--format jsonl` keeps it whole.
#[test]
fn a_huge_message_is_cut_in_a_table_line_and_whole_in_jsonl() {
    let dir = TempDir::new("watch-huge-message");
    let db = dir.join("dlq.db");
    let message = "x".repeat(2 * 1024 * 1024);
    add_lines(&db, "j", [item("big", 1, TS, &message)]);
    let table = ok(dlq(&db).args(["watch", "--once", "--from-start"]));
    let longest = table.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 400, "a line of {longest} bytes");
    assert!(table.contains("xxx…"), "{table}");
    let jsonl = ok(dlq(&db).args(["watch", "--once", "--from-start", "--format", "jsonl"]));
    assert!(jsonl.contains(&message));
}

/// The cursor is the library's (`dlqlite::watch::Cursor`): a new one
/// starts at the end of the log, keeps what it is given across opens, and
/// refuses a database it was not kept for.
#[test]
fn the_library_keeps_a_cursor_per_database() {
    use dlqlite::watch::Cursor;
    let dir = TempDir::new("watch-cursor-api");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let dlq = dlqlite::Dlq::open(target(&db)).unwrap();
    let file = dir.join("cursor.json");
    let (mut cursor, notice) = Cursor::open(&file, &dlq, &target(&db), false).unwrap();
    assert_eq!(notice, None);
    let end = dlq.last_event_id().unwrap();
    assert!(end > 0);
    assert_eq!(cursor.position(), end);
    add_lines(&db, "j", [item("b", 1, "2025-01-02T00:00:00Z", "bang")]);
    let next = dlq.last_event_id().unwrap();
    cursor.save(&dlq, next).unwrap();
    let (again, _) = Cursor::open(&file, &dlq, &target(&db), false).unwrap();
    assert_eq!(again.position(), next);
    // Another database: its event of that id is missing, or another.
    let other = dir.join("other.db");
    add_lines(&other, "j", [item("c", 1, "2025-01-01T00:00:00Z", "boom")]);
    let elsewhere = dlqlite::Dlq::open(target(&other)).unwrap();
    let refused = Cursor::open(&file, &elsewhere, &target(&other), false).unwrap_err();
    assert_eq!(refused.kind(), dlqlite::ErrorKind::InvalidInput);
    assert!(
        refused.to_string().contains("kept for another database"),
        "{refused}"
    );
    // Not a cursor at all.
    std::fs::write(&file, "[]").unwrap();
    let garbage = Cursor::open(&file, &dlq, &target(&db), false).unwrap_err();
    assert!(
        garbage.to_string().contains("not a dlq watch cursor"),
        "{garbage}"
    );
}
