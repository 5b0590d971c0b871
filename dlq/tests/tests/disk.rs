//! Disk use through the real binary: the audit log's retention policy
//! (`dlq retention set --events`, trimmed by `dlq retention apply`), what
//! it keeps (the window, a retry run still going, a watch cursor's place)
//! and giving space back (incremental auto-vacuum, `dlq db --vacuum`).
//!
//! Events are stamped by the real clock, so these tests age them by hand in
//! SQL (as a log written long ago would be), which is why they run on
//! SQLite only; the file sizes are SQLite's too.

use crate::common::{
    add_lines, count, dlq, exec, fails, hold_write_lock, item, json, ok, run, sqlite_only, strings,
    TempDir,
};
use std::path::Path;

/// Items with about 3 KB of data each, last failed in 2020 (old) or now.
fn bulky(prefix: &str, n: usize, when: &str) -> Vec<serde_json::Value> {
    (0..n)
        .map(|i| {
            let mut value = item(&format!("{prefix}{i}"), 1, when, &format!("boom {i}"));
            value["item_data"]["payload"] = serde_json::json!("x".repeat(2_000));
            value["failure_history"][0]["stack_trace"] = serde_json::json!("at f\n".repeat(150));
            value
        })
        .collect()
}

/// `add_lines`, then without the job's `job_created` event: the tests
/// here count and age the adds' events by position, which the event that
/// made the job would shift by one.
fn add_counted(db: &Path, job: &str, items: Vec<serde_json::Value>) {
    add_lines(db, job, items);
    exec(db, "DELETE FROM events WHERE kind = 'job_created'");
}

fn pragma(db: &Path, name: &str) -> i64 {
    count(db, &format!("PRAGMA {name}"))
}

fn file_size(db: &Path) -> u64 {
    std::fs::metadata(db).unwrap().len()
}

/// Ages the oldest `n` events to 2020-01-01, a second apart in id order.
fn age_events(db: &Path, n: i64) {
    exec(
        db,
        &format!(
            "UPDATE events SET time = strftime('%Y-%m-%dT%H:%M:%S', '2020-01-01', '+' || id || ' seconds') || '.000000000Z'
             WHERE id IN (SELECT id FROM events ORDER BY id LIMIT {n})"
        ),
    );
}

fn events_dump(db: &Path) -> Vec<String> {
    strings(
        db,
        "SELECT json_array(id, time, kind, job_id, item_id, detail) FROM events ORDER BY id",
    )
}

fn nth_event_id(db: &Path, n: i64) -> i64 {
    count(
        db,
        &format!("SELECT id FROM events ORDER BY id LIMIT 1 OFFSET {}", n - 1),
    )
}

#[test]
fn purge_trim_and_vacuum_give_the_space_back() {
    if sqlite_only("file sizes, free pages and events aged in SQL") {
        return;
    }
    let dir = TempDir::new("disk-space");
    let db = dir.join("dlq.db");
    add_counted(&db, "j", bulky("old", 2_400, "2020-06-01T00:00:00Z"));
    add_counted(&db, "j", bulky("new", 600, "2099-01-01T00:00:00Z"));
    // A new database hands freed pages back as deletes go.
    assert_eq!(pragma(&db, "auto_vacuum"), 2, "incremental auto-vacuum");
    ok(dlq(&db).args(["db"]));
    let full = file_size(&db);
    let out = run(dlq(&db).args(["purge", "--older-than-days", "30", "--yes"]));
    assert!(out.status.success());
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 600);
    assert!(
        pragma(&db, "freelist_count") < 16,
        "free pages left by the purge: {}",
        pragma(&db, "freelist_count")
    );
    // The log: 3,000 adds and 2,400 purges; all but the newest 600 aged.
    let events = count(&db, "SELECT COUNT(*) FROM events");
    assert!(events >= 5_400, "{events}");
    age_events(&db, events - 600);
    ok(dlq(&db).args(["retention", "set", "--events", "--max-age", "30d"]));
    let report = json(&ok(dlq(&db).args([
        "retention",
        "apply",
        "--yes",
        "--json",
    ])));
    assert_eq!(report["events"]["removed"], events - 600, "{report}");
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'events_trimmed'"
        ),
        1
    );
    let out = run(dlq(&db).args(["db", "--vacuum", "--json"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bytes before"), "{stderr}");
    let info = json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(info["vacuum"]["checkpointed"], true, "{info}");
    let small = file_size(&db);
    eprintln!("file: {full} bytes full, {small} after purge, trim and vacuum");
    assert!(small * 3 < full, "{full} -> {small}");
    assert!(pragma(&db, "freelist_count") < 4);
    // Counters still equal a recount.
    let recount =
        String::from_utf8_lossy(&run(dlq(&db).args(["db", "--recount"])).stderr).to_string();
    assert!(recount.contains("already equalled"), "{recount}");
}

#[test]
fn vacuum_shrinks_an_older_database_and_makes_it_incremental() {
    if sqlite_only("file sizes and SQLite's auto_vacuum") {
        return;
    }
    let dir = TempDir::new("disk-older");
    let db = dir.join("dlq.db");
    add_counted(&db, "j", bulky("old", 1_000, "2020-06-01T00:00:00Z"));
    // As a database made before auto-vacuum was set.
    exec(&db, "PRAGMA auto_vacuum = NONE; VACUUM;");
    assert_eq!(pragma(&db, "auto_vacuum"), 0);
    ok(dlq(&db).args(["purge", "--older-than-days", "30", "--yes"]));
    let free = pragma(&db, "freelist_count");
    assert!(free > 500, "an older database keeps its free pages: {free}");
    let before = pragma(&db, "page_count");
    let stderr =
        String::from_utf8_lossy(&run(dlq(&db).args(["db", "--vacuum"])).stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(pragma(&db, "freelist_count") < 4);
    assert!(pragma(&db, "page_count") * 2 < before);
    assert_eq!(pragma(&db, "auto_vacuum"), 2, "switched to incremental");
}

#[test]
fn vacuum_refuses_a_busy_database_in_one_line() {
    if sqlite_only("SQLite's write lock") {
        return;
    }
    let dir = TempDir::new("disk-busy");
    let db = dir.join("dlq.db");
    add_counted(&db, "j", bulky("a", 10, "2020-06-01T00:00:00Z"));
    let pages = pragma(&db, "page_count");
    let lock = hold_write_lock(&db);
    let stderr = fails(dlq(&db).args(["--busy-timeout-ms", "200", "db", "--vacuum"]));
    drop(lock);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("vacuum refused"), "{stderr}");
    assert!(stderr.contains("busy"), "{stderr}");
    assert_eq!(pragma(&db, "page_count"), pages);
}

#[test]
fn events_policy_keeps_the_window_and_running_runs_and_dry_run_changes_nothing() {
    if sqlite_only("events aged in SQL") {
        return;
    }
    let dir = TempDir::new("disk-window");
    let db = dir.join("dlq.db");
    add_counted(&db, "j", bulky("a", 40, "2020-06-01T00:00:00Z"));
    let total = count(&db, "SELECT COUNT(*) FROM events");
    age_events(&db, 30);
    // Too short a window is refused, and so is a policy on items at once.
    let stderr = fails(dlq(&db).args(["retention", "set", "--events", "--max-age", "12h"]));
    assert!(stderr.contains("at least 1d"), "{stderr}");
    fails(dlq(&db).args([
        "retention",
        "set",
        "--events",
        "--job-id",
        "j",
        "--max-age",
        "2d",
    ]));
    // Without a policy nothing is trimmed.
    let report = json(&ok(dlq(&db).args([
        "retention",
        "apply",
        "--yes",
        "--json",
    ])));
    assert_eq!(report["events"]["removed"], 0);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM events"), total);
    ok(dlq(&db).args(["retention", "set", "--events", "--max-age", "2d"]));
    let total = total + 1; // its retention_set event
                           // A retry run still going, started at the 21st event's time, keeps
                           // the events from there on.
    let twenty_first = nth_event_id(&db, 21);
    exec(
        &db,
        &format!(
            "INSERT INTO retry_runs (run_id, job_id, host, pid, started_at, heartbeat_at, status, parameters)
             SELECT 'run-1', 'j', 'h', 1, time, strftime('%Y-%m-%dT%H:%M:%S.000000000Z', 'now'), 'running', '{{}}'
             FROM events WHERE id = {twenty_first}"
        ),
    );
    let before = events_dump(&db);
    let dry = json(&ok(dlq(&db).args([
        "retention",
        "apply",
        "--dry-run",
        "--json",
    ])));
    assert_eq!(dry["events"]["removed"], 20, "{dry}");
    assert_eq!(dry["events"]["through_id"], twenty_first - 1, "{dry}");
    assert_eq!(events_dump(&db), before, "a dry run changes nothing");
    let report = json(&ok(dlq(&db).args([
        "retention",
        "apply",
        "--yes",
        "--json",
    ])));
    assert_eq!(report["events"]["removed"], 20, "{report}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM events"), total - 20 + 1);
    assert_eq!(count(&db, "SELECT MIN(id) FROM events"), twenty_first);
    // Every event kept that was not aged is still there, unchanged.
    let kept = events_dump(&db);
    assert_eq!(kept[..kept.len() - 1], before[20..]);
    let summary = json(
        &strings(
            &db,
            "SELECT detail FROM events WHERE kind = 'events_trimmed'",
        )[0],
    );
    assert_eq!(summary["removed"], 20);
    assert_eq!(summary["through_id"], twenty_first - 1);
    // The run ends: the rest of the aged events go, the young ones stay.
    exec(
        &db,
        "UPDATE retry_runs SET status = 'finished', ended_at = heartbeat_at",
    );
    let report = json(&ok(dlq(&db).args([
        "retention",
        "apply",
        "--yes",
        "--json",
    ])));
    assert_eq!(report["events"]["removed"], 10, "{report}");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE time < '2021'"),
        0
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'added'"),
        10
    );
    // Unset: nothing more goes.
    ok(dlq(&db).args(["retention", "unset", "--events"]));
    age_events(&db, 5);
    let report = json(&ok(dlq(&db).args([
        "retention",
        "apply",
        "--yes",
        "--json",
    ])));
    assert_eq!(report["events"]["removed"], 0);
    assert!(report["events"]["max_age_seconds"].is_null());
}

#[test]
fn a_watch_cursor_in_the_trimmed_part_says_so() {
    if sqlite_only("events aged in SQL") {
        return;
    }
    let dir = TempDir::new("disk-watch");
    let db = dir.join("dlq.db");
    add_counted(&db, "j", bulky("a", 20, "2020-06-01T00:00:00Z"));
    age_events(&db, 10);
    let cursor_at = |name: &str, n: i64| {
        let id = nth_event_id(&db, n);
        let time = strings(&db, &format!("SELECT time FROM events WHERE id = {id}"))[0].clone();
        let path = dir.join(name);
        std::fs::write(
            &path,
            serde_json::json!({"event_id": id, "event_time": time, "database": db}).to_string(),
        )
        .unwrap();
        (path, id)
    };
    let (behind, behind_id) = cursor_at("behind.cursor", 5);
    let (at_end, _) = cursor_at("at-end.cursor", 10);
    ok(dlq(&db).args(["retention", "set", "--events", "--max-age", "2d"]));
    let through = nth_event_id(&db, 10);
    ok(dlq(&db).args(["retention", "apply", "--yes"]));
    assert_eq!(count(&db, "SELECT MIN(id) FROM events"), through + 1);
    // Events after the cursor were trimmed: it stops, and says so.
    let stderr = fails(
        dlq(&db)
            .args(["watch", "--once", "--since-cursor"])
            .arg(&behind),
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("trimmed the audit log up to event") && stderr.contains("--from-start"),
        "{stderr}"
    );
    // The cursor is left as it was.
    assert_eq!(
        json(&std::fs::read_to_string(&behind).unwrap())["event_id"],
        behind_id
    );
    // A cursor at the last event trimmed missed nothing: it goes on.
    let out = run(dlq(&db)
        .args(["watch", "--once", "--format", "jsonl", "--since-cursor"])
        .arg(&at_end));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing after it was"));
    let seen: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| json(line)["item_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(seen.len(), 10, "{seen:?}");
    // --from-start starts after the trimmed part, and says so.
    let out = run(dlq(&db).args(["watch", "--once", "--from-start", "--format", "jsonl"]));
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("trimmed by retention up to event"));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 10);
}

#[test]
fn a_follower_that_falls_behind_a_trim_stops_with_events_trimmed() {
    if sqlite_only("events aged in SQL") {
        return;
    }
    let dir = TempDir::new("disk-follower");
    let db = dir.join("dlq.db");
    add_counted(&db, "j", bulky("a", 12, "2020-06-01T00:00:00Z"));
    let dlq = dlqlite::Dlq::open(&db).unwrap();
    // A follower placed after the 3rd event, as one that was running when
    // the log was trimmed past it.
    let third = nth_event_id(&db, 3);
    let mut behind =
        dlqlite::watch::Watcher::new(&dlq, third, dlqlite::watch::WatchOptions::default()).unwrap();
    age_events(&db, 6);
    dlq.set_events_retention(Some(2 * 86_400)).unwrap();
    let report = dlq.trim_events(false).unwrap();
    assert_eq!(report.removed, 6);
    assert_eq!(report.through_id, Some(nth_event_id(&db, 1) - 1));
    match behind.next_pending() {
        Err(dlqlite::Error::EventsTrimmed {
            position,
            through_id,
        }) => {
            assert_eq!(position, third);
            assert_eq!(Some(through_id), report.through_id);
        }
        other => panic!("expected EventsTrimmed, got {other:?}"),
    }
    // One at the last event trimmed goes on, missing nothing.
    let mut at = dlqlite::watch::Watcher::new(
        &dlq,
        report.through_id.unwrap(),
        dlqlite::watch::WatchOptions::default(),
    )
    .unwrap();
    let mut seen = 0;
    while at.next_pending().unwrap().is_some() {
        seen += 1;
    }
    assert_eq!(seen, 6, "the 6 adds kept");
}
