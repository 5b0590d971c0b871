//! `dlq check`: each threshold on both sides of its limit (exactly at the
//! limit holds), the breach lines, JSON, the exit codes (0 hold, 1 breach,
//! 2 usage, 3 unknown) and the state of --new-signature and --new-family
//! in the database.

use crate::common::{add_lines, count, dlq, item, json, ok, run, sql, strings, ts, TempDir};
use std::path::{Path, PathBuf};
use std::process::Output;

/// Runs `dlq check ARGS` on `db`; returns the output.
fn check(db: &Path, args: &[&str]) -> Output {
    run(dlq(db).arg("check").args(args))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Exit 0 and nothing on stdout.
fn holds(db: &Path, args: &[&str]) {
    let output = check(db, args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{args:?}: {}{}",
        stdout(&output),
        stderr(&output)
    );
    assert_eq!(stdout(&output), "", "{args:?}");
}

/// Exit 1 with exactly these lines on stdout.
fn breaches(db: &Path, args: &[&str], lines: &[&str]) {
    let output = check(db, args);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{args:?}: {}{}",
        stdout(&output),
        stderr(&output)
    );
    let printed = stdout(&output);
    assert_eq!(printed.lines().collect::<Vec<_>>(), lines, "{args:?}");
}

/// A database with job `j` holding `n` items (first failed on 2025-01-01,
/// a minute apart) and job `k` holding one (2025-06-01).
fn jobs(dir: &TempDir, n: usize) -> PathBuf {
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        (0..n).map(|i| {
            let time = format!("2025-01-01T{:02}:{:02}:00Z", i / 60 % 24, i % 60);
            item(&format!("i{i}"), 1, &time, "boom")
        }),
    );
    add_lines(&db, "k", [item("x", 1, "2025-06-01T00:00:00Z", "bang")]);
    db
}

#[test]
fn max_items_breaches_only_above_the_limit() {
    let dir = TempDir::new("check-items");
    let db = jobs(&dir, 3);
    holds(&db, &["--max-items", "3"]);
    breaches(&db, &["--max-items", "2"], &["job j: 3 items > 2"]);
    breaches(
        &db,
        &["--max-items", "0"],
        &["job j: 3 items > 0", "job k: 1 item > 0"],
    );
    // One job only.
    holds(&db, &["--max-items", "1", "--job-id", "k"]);
    breaches(
        &db,
        &["--max-items", "0", "--job-id", "k"],
        &["job k: 1 item > 0"],
    );
    // A filter counts only the items that match it.
    let filter = ["--filter", "item_id != \"i0\""];
    holds(&db, &[&["--max-items", "2"][..], &filter].concat());
    breaches(
        &db,
        &[&["--max-items", "1"][..], &filter].concat(),
        &["job j: 2 items > 1"],
    );
}

#[test]
fn large_counts_read_with_thousands_separators() {
    let dir = TempDir::new("check-thousands");
    let db = jobs(&dir, 1_001);
    holds(&db, &["--max-items", "1001", "--job-id", "j"]);
    breaches(
        &db,
        &["--max-items", "1000", "--job-id", "j"],
        &["job j: 1,001 items > 1,000"],
    );
}

#[test]
fn max_age_counts_from_the_first_failure() {
    let dir = TempDir::new("check-age");
    let db = dir.join("dlq.db");
    // First failed on the 1st, failed again on the 5th: its age counts
    // from the 1st.
    let mut old = item("a", 1, "2025-01-01T00:00:00Z", "boom");
    old["last_attempt"] = "2025-01-05T00:00:00Z".into();
    add_lines(
        &db,
        "j",
        [old, item("b", 1, "2025-01-02T00:00:00Z", "boom")],
    );
    fn at<'a>(now: &'a str, args: &[&'a str]) -> Vec<&'a str> {
        [&["--now", now][..], args].concat()
    }
    holds(&db, &at("2025-01-03T00:00:00Z", &["--max-age", "2d"]));
    breaches(
        &db,
        &at("2025-01-03T00:00:01Z", &["--max-age", "2d"]),
        &["job j: oldest item 2d 1s > 2d"],
    );
    breaches(
        &db,
        &at("2025-01-04T04:00:00Z", &["--max-age", "2d"]),
        &["job j: oldest item 3d 4h > 2d"],
    );
    holds(&db, &at("2025-01-04T04:00:00Z", &["--max-age", "76h"]));
    breaches(
        &db,
        &at("2025-01-04T04:00:00Z", &["--max-age", "75h"]),
        &["job j: oldest item 3d 4h > 3d 3h"],
    );
    // With a filter, the oldest matching item.
    let filter = ["--filter", "item_id == \"b\""];
    holds(
        &db,
        &at(
            "2025-01-04T00:00:00Z",
            &[&["--max-age", "2d"][..], &filter].concat(),
        ),
    );
    breaches(
        &db,
        &at(
            "2025-01-04T00:00:01Z",
            &[&["--max-age", "2d"][..], &filter].concat(),
        ),
        &["job j: oldest item 2d 1s > 2d"],
    );
    // JSON names the item and gives the age and the limit in seconds.
    let output = check(
        &db,
        &at("2025-01-04T04:00:00Z", &["--max-age", "2d", "--json"]),
    );
    assert_eq!(output.status.code(), Some(1));
    let report = json(&stdout(&output));
    assert_eq!(report["ok"], false);
    assert_eq!(report["status"], "breach");
    let breach = &report["breaches"][0];
    assert_eq!(breach["check"], "max_age");
    assert_eq!(breach["job_id"], "j");
    assert_eq!(breach["item_id"], "a");
    assert_eq!(breach["value"], 3 * 86_400 + 4 * 3_600);
    assert_eq!(breach["limit"], 2 * 86_400);
    assert_eq!(breach["line"], "job j: oldest item 3d 4h > 2d");
}

/// The times of `job`'s `added` events, oldest first.
fn added_times(db: &Path, job: &str) -> Vec<String> {
    strings(
        db,
        &format!(
            "SELECT {} FROM events WHERE kind = 'added' AND job_id = '{job}' ORDER BY id",
            ts("time", false)
        ),
    )
}

fn plus_millis(time: &str, millis: i64) -> String {
    dlqlite::Timestamp::parse(time)
        .unwrap()
        .plus_millis(millis)
        .to_storage()
}

#[test]
fn max_new_counts_arrivals_within_the_window() {
    let dir = TempDir::new("check-new");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    add_lines(
        &db,
        "j",
        [
            item("b", 1, "2025-01-01T00:00:00Z", "boom"),
            item("c", 1, "2025-01-01T00:00:00Z", "boom"),
        ],
    );
    // A copy of an item already there merges: not an arrival.
    add_lines(&db, "j", [item("a", 2, "2025-01-02T00:00:00Z", "boom")]);
    let times = added_times(&db, "j");
    assert_eq!(times.len(), 3);
    holds(&db, &["--max-new", "3", "--per", "1h"]);
    breaches(
        &db,
        &["--max-new", "2", "--per", "1h"],
        &["job j: 3 new items in the last 1h > 2"],
    );
    // The window's start is inclusive: the first arrival, exactly an hour
    // before "now", still counts; a millisecond later it is out.
    assert!(
        plus_millis(&times[0], 1) < times[1],
        "the two adds share a millisecond: {times:?}"
    );
    let hour_after = plus_millis(&times[0], 3_600_000);
    breaches(
        &db,
        &["--now", &hour_after, "--max-new", "2", "--per", "1h"],
        &["job j: 3 new items in the last 1h > 2"],
    );
    let later = plus_millis(&times[0], 3_600_001);
    holds(&db, &["--now", &later, "--max-new", "2", "--per", "1h"]);
    // An import's new items are arrivals too (its merges are not).
    let sample = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy");
    let _ = run(dlq(&db).arg("import").arg(sample));
    breaches(
        &db,
        &[
            "--max-new",
            "3",
            "--per",
            "1h",
            "--job-id",
            "mapreduce-20251123_194253",
        ],
        &["job mapreduce-20251123_194253: 4 new items in the last 1h > 3"],
    );
    holds(
        &db,
        &[
            "--max-new",
            "4",
            "--per",
            "1h",
            "--job-id",
            "mapreduce-20251123_194253",
        ],
    );
}

#[test]
fn new_signatures_are_news_once_per_check_name() {
    let dir = TempDir::new("check-signature");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    // The first check records a baseline and says so once.
    let first = check(&db, &["--new-signature"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(stderr(&first).contains("baseline"), "{}", stderr(&first));
    assert_eq!(stderr(&first).lines().count(), 1);
    holds(&db, &["--new-signature"]);
    // A new failure with a message of several lines: its headline.
    let message = "Compiling x v0.1.0\ncargo test failed: 3 tests failed\nwarning: done";
    add_lines(&db, "j", [item("b", 1, "2025-01-02T00:00:00Z", message)]);
    let signature = dlqlite::classify::error_signature(message);
    breaches(
        &db,
        &["--new-signature"],
        &[&format!(
            "new signature {signature} \"cargo test failed: 3 tests failed\" since the last check"
        )],
    );
    // News once: the next check has seen it.
    holds(&db, &["--new-signature"]);
    // Another name keeps its own state: its first run is a baseline.
    let other = check(&db, &["--new-signature", "--name", "nightly"]);
    assert_eq!(other.status.code(), Some(0));
    assert!(stderr(&other).contains("baseline"));
    // A signature that went away and came back is news again.
    ok(dlq(&db).args(["clear", "j", "--yes"]));
    holds(&db, &["--new-signature"]);
    add_lines(&db, "j", [item("c", 1, "2025-01-03T00:00:00Z", "boom")]);
    let output = check(&db, &["--new-signature", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let report = json(&stdout(&output));
    let breach = &report["breaches"][0];
    assert_eq!(breach["check"], "new_signature");
    assert_eq!(breach["value"], dlqlite::classify::error_signature("boom"));
    assert_eq!(breach["message"], "boom");
    assert_eq!(breach["items"], 1);
    assert_eq!(report["breaches"].as_array().unwrap().len(), 1);
}

#[test]
fn every_threshold_is_tested_and_reported() {
    let dir = TempDir::new("check-all");
    let db = jobs(&dir, 2);
    holds(&db, &["--new-signature"]);
    add_lines(&db, "k", [item("y", 1, "2025-06-02T00:00:00Z", "fresh")]);
    let output = check(
        &db,
        &[
            "--now",
            "2100-01-01T00:00:00Z",
            "--max-items",
            "1",
            "--max-age",
            "1d",
            "--max-new",
            "1",
            "--per",
            "100000d",
            "--new-signature",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let lines = stdout(&output);
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 7, "{lines:?}");
    assert_eq!(lines[0], "job j: 2 items > 1");
    assert_eq!(lines[1], "job k: 2 items > 1");
    assert!(lines[2].starts_with("job j: oldest item "), "{lines:?}");
    assert!(lines[3].starts_with("job k: oldest item "), "{lines:?}");
    assert_eq!(lines[4], "job j: 2 new items in the last 100000d > 1");
    assert_eq!(lines[5], "job k: 2 new items in the last 100000d > 1");
    assert!(
        lines[6].starts_with("new signature ") && lines[6].contains("\"fresh\""),
        "{lines:?}"
    );
    // All hold: exit 0, JSON says ok.
    let output = check(&db, &["--max-items", "10", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let report = json(&stdout(&output));
    assert_eq!(report["ok"], true);
    assert_eq!(report["status"], "ok");
    assert_eq!(report["breaches"], serde_json::json!([]));
}

#[test]
fn usage_errors_exit_2() {
    let dir = TempDir::new("check-usage");
    let db = jobs(&dir, 1);
    for args in [
        &[][..],
        &["--max-new", "3"],
        &["--per", "1h"],
        &["--max-new", "3", "--per", "0s"],
        &["--max-age", "2"],
        &["--max-age", "-2d"],
        &["--max-items", "-1"],
        &["--name", "x", "--max-items", "3"],
        &["--new-signature", "--name", ""],
        &["--max-items", "3", "--filter", "nosuch == 1"],
    ] {
        let output = check(&db, args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(stderr(&output).lines().count(), 1, "{}", stderr(&output));
        assert_eq!(stdout(&output), "");
    }
}

#[test]
fn a_check_that_cannot_be_made_exits_3() {
    let dir = TempDir::new("check-unknown");
    // No database: nothing is created, and it is not "all fine".
    let missing = dir.join("missing.db");
    let output = check(&missing, &["--max-items", "3", "--json"]);
    assert_eq!(output.status.code(), Some(3));
    assert!(
        stderr(&output).contains("no database"),
        "{}",
        stderr(&output)
    );
    let report = json(&stdout(&output));
    assert_eq!(report["ok"], false);
    assert_eq!(report["status"], "unknown");
    assert!(!missing.exists());
    // Not a dlq database.
    let junk = dir.join("junk.db");
    std::fs::write(&junk, "not a database at all, just text").unwrap();
    let output = check(&junk, &["--max-items", "3"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert_eq!(stdout(&output), "");
    // An unknown job, with the closest name.
    let db = jobs(&dir, 1);
    let output = check(&db, &["--max-items", "3", "--job-id", "J"]);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        stderr(&output).trim_end(),
        "dlq: error: job \"J\" not found; did you mean \"j\"?"
    );
}

#[test]
fn a_read_only_database_checks_all_but_new_signatures() {
    if crate::common::sqlite_only("a read-only database file") {
        return;
    }
    let dir = TempDir::new("check-readonly");
    let db = jobs(&dir, 1);
    let conn = sql(&db);
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    // Root ignores file modes: the immutable flag holds for it too.
    let paths = [db.clone(), dir.path().to_path_buf()];
    struct Mutable<'a>(&'a [PathBuf]);
    impl Drop for Mutable<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .args(self.0)
                .status();
        }
    }
    let _mutable = Mutable(&paths);
    let set = std::process::Command::new("chattr")
        .arg("+i")
        .args(&paths)
        .status()
        .is_ok_and(|s| s.success());
    if !set {
        eprintln!("skipped: chattr +i is not available here");
        return;
    }
    holds(&db, &["--max-items", "1", "--max-age", "100000d"]);
    breaches(
        &db,
        &["--max-items", "0", "--job-id", "j"],
        &["job j: 1 item > 0"],
    );
    let output = check(&db, &["--new-signature"]);
    assert_eq!(output.status.code(), Some(3));
    let said = stderr(&output);
    assert!(
        said.contains("--new-signature") && said.contains("writable"),
        "{said}"
    );
}

#[test]
fn new_families_are_news_once_and_kept_apart_from_signatures() {
    let dir = TempDir::new("check-family");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        [item(
            "a",
            1,
            "2025-01-01T00:00:00Z",
            "connect ECONNREFUSED 10.0.0.1:5432",
        )],
    );
    // The first run records a baseline, apart from the signatures' (which
    // this name has too, so it is not the first run of the name).
    holds(&db, &["--new-signature"]);
    let first = check(&db, &["--new-family"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(stderr(&first).contains("baseline"), "{}", stderr(&first));
    assert!(stderr(&first).contains("1 family"), "{}", stderr(&first));
    holds(&db, &["--new-family"]);
    // Another item of the same cause (another host, another message
    // signature): no new family, though a new signature.
    add_lines(
        &db,
        "j",
        [item(
            "b",
            1,
            "2025-01-02T00:00:00Z",
            "connect ECONNREFUSED 10.0.0.2:6379",
        )],
    );
    holds(&db, &["--new-family"]);
    assert_eq!(check(&db, &["--new-signature"]).status.code(), Some(1));
    // A new cause is news, once.
    add_lines(
        &db,
        "j",
        [
            item("c", 1, "2025-01-03T00:00:00Z", "npm ERR! code ERESOLVE"),
            item("d", 1, "2025-01-03T00:01:00Z", "npm ERR! code ERESOLVE"),
        ],
    );
    let id = count(&db, "SELECT family_id FROM items WHERE item_id = 'c'");
    breaches(
        &db,
        &["--new-family"],
        &[&format!(
            "new family {id} \"npm ERR! code ERESOLVE\" (2 items) since the last check"
        )],
    );
    holds(&db, &["--new-family"]);
    assert_eq!(check(&db, &["--new-signature"]).status.code(), Some(1));
    // With the other checks, in JSON.
    add_lines(
        &db,
        "j",
        [item("e", 1, "2025-01-04T00:00:00Z", "disk quota exceeded")],
    );
    let output = check(&db, &["--new-family", "--new-signature", "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = json(&stdout(&output));
    let found: Vec<&str> = report["breaches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["check"].as_str().unwrap())
        .collect();
    assert_eq!(found, ["new_signature", "new_family"], "{report}");
    let breach = &report["breaches"][1];
    assert_eq!(breach["template"], "disk quota exceeded");
    assert_eq!(breach["items"], 1);
    assert_eq!(breach["first_seen"], "2025-01-04T00:00:00Z");
    // Another name has its own baseline; a scope of one job is news of
    // that job's items only.
    let other = check(&db, &["--new-family", "--name", "nightly"]);
    assert_eq!(other.status.code(), Some(0));
    assert!(stderr(&other).contains("baseline"));
    add_lines(
        &db,
        "k",
        [item("x", 1, "2025-01-05T00:00:00Z", "out of memory")],
    );
    let scoped = ["--new-family", "--job-id", "k", "--name", "k"];
    assert!(stderr(&check(&db, &scoped)).contains("baseline"));
    // A family older than the job's baseline is new to the job.
    add_lines(
        &db,
        "k",
        [item(
            "y",
            1,
            "2025-01-06T00:00:00Z",
            "npm ERR! code ERESOLVE",
        )],
    );
    let output = check(&db, &scoped);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with(&format!("new family {id} ")),
        "{}",
        stdout(&output)
    );
    holds(&db, &scoped);
    // A name with a control character would reach into another check's
    // state: refused.
    let refused = check(&db, &["--new-family", "--name", "a\u{1f}families"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
}

/// The thresholds are the library's (`Dlq::check`): the same breaches
/// through the API, each with its numbers, and thresholds it cannot check
/// refused as invalid input.
#[test]
fn the_library_checks_the_same_thresholds() {
    use dlqlite::check::{Breach, MaxNew, Thresholds};
    let dir = TempDir::new("check-api");
    let db = jobs(&dir, 5);
    let dlq = dlqlite::Dlq::open(crate::common::target(&db)).unwrap();
    let report = dlq
        .check(&Thresholds {
            max_items: Some(4),
            max_new: Some(MaxNew {
                limit: 100,
                per: 3_600,
            }),
            name: "api".into(),
            ..Thresholds::default()
        })
        .unwrap();
    assert_eq!(
        report.breaches,
        [Breach::MaxItems {
            job_id: "j".into(),
            items: 5,
            limit: 4
        }]
    );
    // A filter narrows the count: two of j's items.
    let narrowed = dlq
        .check(&Thresholds {
            max_items: Some(1),
            job_id: Some("j".into()),
            filter: Some(dlqlite::filter::parse(r#"item_id == "i0" or item_id == "i1""#).unwrap()),
            name: "api".into(),
            ..Thresholds::default()
        })
        .unwrap();
    assert_eq!(
        narrowed.breaches,
        [Breach::MaxItems {
            job_id: "j".into(),
            items: 2,
            limit: 1
        }]
    );
    // The first news run is a baseline; an item of a new cause is news once.
    let news = Thresholds {
        new_family: true,
        name: "api".into(),
        ..Thresholds::default()
    };
    let first = dlq.check(&news).unwrap();
    assert_eq!(first.family_baseline, Some(2), "{first:?}");
    assert!(first.breaches.is_empty());
    add_lines(
        &db,
        "k",
        [item(
            "y",
            1,
            "2025-06-02T00:00:00Z",
            "disk quota exceeded on /var",
        )],
    );
    let second = dlq.check(&news).unwrap();
    assert_eq!(second.family_baseline, None);
    assert!(
        matches!(&second.breaches[..], [Breach::NewFamily(f)] if f.items == 1),
        "{second:?}"
    );
    assert!(dlq.check(&news).unwrap().breaches.is_empty(), "news once");
    for bad in [
        Thresholds::default(),
        Thresholds {
            new_signature: true,
            ..Thresholds::default()
        },
        Thresholds {
            new_family: true,
            name: "a\u{1f}b".into(),
            ..Thresholds::default()
        },
        Thresholds {
            new_family: true,
            filter: Some(dlqlite::filter::parse("failure_count > 1").unwrap()),
            name: "x".into(),
            ..Thresholds::default()
        },
    ] {
        let error = dlq.check(&bad).unwrap_err();
        assert_eq!(
            error.kind(),
            dlqlite::ErrorKind::InvalidInput,
            "{bad:?}: {error}"
        );
    }
    // Without news thresholds the name is not needed.
    let unnamed = Thresholds {
        max_items: Some(100),
        ..Thresholds::default()
    };
    assert!(dlq.check(&unnamed).unwrap().breaches.is_empty());
    let missing = dlq
        .check(&Thresholds {
            max_items: Some(1),
            job_id: Some("nope".into()),
            name: "x".into(),
            ..Thresholds::default()
        })
        .unwrap_err();
    assert_eq!(missing.kind(), dlqlite::ErrorKind::NotFound, "{missing}");
}
