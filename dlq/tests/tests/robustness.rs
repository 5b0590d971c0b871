//! Load, crashes, bad input and faults: the promises of the other modules,
//! tried the hard way. Bounded so the whole suite stays well under CI's time.

use crate::common::*;
use dlqlite::generate::{item_json, write_tree, Rng, TreeSpec};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// integrity_check and foreign_key_check are both clean.
fn assert_sound(db: &Path) {
    if on_postgres() {
        // A kill before the migrations committed leaves the database
        // without the schema (at most refinery's own table, made before
        // its transaction); the next open migrates it.
        let tables = strings(
            db,
            "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1",
        );
        if !tables.iter().any(|t| t == "jobs") {
            assert!(
                tables.iter().all(|t| t == "refinery_schema_history"),
                "a half-made schema: {tables:?}"
            );
            return;
        }
        // The server keeps its own files sound; what is dlq's: no orphan
        // rows (the foreign keys hold), counters equal to the rows.
        assert_eq!(
            count(
                db,
                "SELECT (SELECT COUNT(*) FROM failure_history WHERE item_key NOT IN (SELECT id FROM items))
                      + (SELECT COUNT(*) FROM worktree_artifacts WHERE item_key NOT IN (SELECT id FROM items))"
            ),
            0
        );
        let drift = crate::counters::drift(db);
        assert!(drift.is_empty(), "counters drifted: {drift:?}");
        return;
    }
    let conn = sql(db);
    // A kill between creating the file and committing the migrations leaves
    // a database with no schema yet (at most refinery's own table, which it
    // creates before its transaction); the next open migrates it.
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    if !tables.iter().any(|t| t == "jobs") {
        assert!(
            tables.iter().all(|t| t == "refinery_schema_history"),
            "a half-migrated schema: {tables:?}"
        );
        return;
    }
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let violations: i64 = conn
        .query_row("SELECT COUNT(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(violations, 0, "foreign key violations");
    // Every counter agrees with the rows (the reference in counters.rs,
    // computed in plain Rust, not by the store).
    let drift = crate::counters::drift(db);
    assert!(drift.is_empty(), "counters drifted: {drift:?}");
}

/// Items, history and artifacts without surrogate keys.
fn contents(db: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for query in [
        format!(
            "SELECT job_id, item_id, CAST(item_data AS TEXT), {}, {}, failure_count,
                 error_signature, reprocess_eligible, manual_review_required, CAST(extra AS TEXT)
             FROM items",
            ts("first_attempt", true),
            ts("last_attempt", true)
        ),
        format!(
            "SELECT i.job_id, i.item_id, f.attempt_number, {}, f.error_type, f.error_message
             FROM failure_history f JOIN items i ON i.id = f.item_key",
            ts("f.timestamp", true)
        ),
        "SELECT i.job_id, i.item_id, w.worktree_path FROM worktree_artifacts w
         JOIN items i ON i.id = w.item_key"
            .to_string(),
    ] {
        let mut rows: Vec<String> = table_rows(db, &query)
            .into_iter()
            .map(|row| serde_json::Value::from(row).to_string())
            .collect();
        rows.sort();
        out.extend(rows);
    }
    out
}

#[test]
fn eight_writers_with_racing_merges_lose_nothing() {
    let dir = TempDir::new("load");
    let db = dir.join("dlq.db");
    ok(dlq(&db).args(["capacity", "--set", "0"]));
    let (procs, per, shared) = (8usize, 2000usize, 300usize);
    let mut files = Vec::new();
    for p in 0..procs {
        let mut lines = String::new();
        for i in 0..per - shared {
            lines.push_str(&item(&format!("p{p}-{i}"), 1, "2025-01-01T00:00:00Z", "x").to_string());
            lines.push('\n');
        }
        // The same items from every process, each with its own attempt.
        for i in 0..shared {
            let time = format!("2025-01-01T00:00:{p:02}Z");
            let value = item(
                &format!("shared-{i}"),
                p as u32 + 1,
                &time,
                &format!("m{p}"),
            );
            lines.push_str(&value.to_string());
            lines.push('\n');
        }
        let path = dir.join(&format!("p{p}.jsonl"));
        std::fs::write(&path, lines).unwrap();
        files.push(path);
    }
    let children: Vec<_> = files
        .iter()
        .map(|f| {
            dlq(&db)
                .args(["add", "--job-id", "j"])
                .arg(f)
                // Eight writers take turns at the lock; on a loaded machine
                // the last may wait past the default 30 s. What is tested
                // is that nothing is lost, not how long a turn takes.
                .env("DLQ_BUSY_TIMEOUT_MS", "300000")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let unique = (procs * (per - shared)) as i64;
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items"),
        unique + shared as i64
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM failure_history"),
        unique + (shared * procs) as i64
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE item_id LIKE 'shared-%' AND failure_count = 8"
        ),
        shared as i64
    );
    // The newest copy (process 7) gave each shared item its signature.
    assert_eq!(
        count(&db, &format!("SELECT COUNT(*) FROM items WHERE item_id LIKE 'shared-%' AND error_signature = '{}'", dlqlite::classify::error_signature("m7"))),
        shared as i64
    );
    assert_sound(&db);
}

/// A broken copy of a good item file for every way a file can be broken.
fn broken_files(good: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for len in 0..good.len() {
        if good.is_char_boundary(len) {
            out.push((format!("trunc-{len}"), good.as_bytes()[..len].to_vec()));
        }
    }
    let value: serde_json::Value = serde_json::from_str(good).unwrap();
    let wrong_values = [
        serde_json::json!(17),
        serde_json::json!("text"),
        serde_json::json!([1]),
        serde_json::json!({"a": 1}),
        serde_json::Value::Null,
    ];
    let top_required = [
        "item_id",
        "first_attempt",
        "last_attempt",
        "failure_count",
        "failure_history",
        "error_signature",
        "reprocess_eligible",
        "manual_review_required",
    ];
    for key in top_required {
        for (n, wrong) in wrong_values.iter().enumerate() {
            let mut broken = value.clone();
            let original = broken[key].clone();
            // A wrong value that happens to be the right type is not broken.
            if std::mem::discriminant(&original) == std::mem::discriminant(wrong) {
                continue;
            }
            broken[key] = wrong.clone();
            out.push((format!("type-{key}-{n}"), broken.to_string().into_bytes()));
        }
        let mut missing = value.clone();
        missing.as_object_mut().unwrap().remove(key);
        out.push((format!("missing-{key}"), missing.to_string().into_bytes()));
    }
    for key in [
        "attempt_number",
        "timestamp",
        "error_message",
        "agent_id",
        "step_failed",
        "duration_ms",
    ] {
        let mut broken = value.clone();
        broken["failure_history"][0][key] = serde_json::json!([true]);
        out.push((format!("history-{key}"), broken.to_string().into_bytes()));
    }
    let mut deep = String::from("{\"item_id\":\"deep\",\"item_data\":");
    deep.push_str(&"[".repeat(100_000));
    deep.push_str(&"]".repeat(100_000));
    deep.push('}');
    out.push(("deep-nesting".into(), deep.into_bytes()));
    let mut invalid = good.as_bytes().to_vec();
    let at = good.find("item_").unwrap_or(0);
    invalid[at] = 0xff;
    out.push(("invalid-utf8".into(), invalid));
    out.push((
        "nul-bytes".into(),
        good.replace("\"item_id\"", "\"item_id\u{0}\"").into_bytes(),
    ));
    let mut rng = Rng::new(5);
    let garbage: Vec<u8> = (0..4096).map(|_| rng.below(256) as u8).collect();
    out.push(("binary-garbage".into(), garbage));
    out.push(("not-an-object".into(), b"[1, 2, 3]".to_vec()));
    out
}

#[test]
fn every_broken_file_is_reported_and_every_good_one_imported() {
    let dir = TempDir::new("bad-input");
    let db = dir.join("dlq.db");
    let tree = dir.join("tree");
    let spec = TreeSpec {
        jobs: 1,
        items_per_job: 5,
        attempt: 1,
        seed: 3,
    };
    write_tree(&tree, &spec).unwrap();
    let items = dlqlite::generate::job_dir(&tree, 0).join("items");
    let good = std::fs::read_to_string(items.join("item_0.json")).unwrap();
    let broken = broken_files(&good);
    for (name, bytes) in &broken {
        std::fs::write(items.join(format!("{name}.json")), bytes).unwrap();
    }
    // A huge but valid item imports.
    let mut huge: serde_json::Value = serde_json::from_str(&good).unwrap();
    huge["item_id"] = "huge".into();
    huge["failure_history"][0]["error_message"] = "x".repeat(5 << 20).into();
    std::fs::write(items.join("huge.json"), huge.to_string()).unwrap();

    let output = run(dlq(&db).args(["import", "--json"]).arg(&tree));
    assert_eq!(
        output.status.code(),
        Some(1),
        "no panic, and a non-zero exit"
    );
    let report = json(&String::from_utf8(output.stdout).unwrap());
    let rejected = report["files_rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), broken.len(), "every broken file reported");
    for r in rejected {
        assert!(!r["error"].as_str().unwrap().is_empty());
        assert!(!r["error"].as_str().unwrap().contains('\n'));
    }
    assert_eq!(report["items_new"], 6, "every good file imported");
    assert_eq!(
        count(
            &db,
            "SELECT length(error_message) FROM failure_log WHERE item_id = 'huge'"
        ),
        5 << 20
    );
    assert_sound(&db);
}

#[test]
fn faults_give_one_line_and_change_nothing() {
    if crate::common::sqlite_only(
        "faults of the database file (not a database, read-only, full disk)",
    ) {
        return;
    }
    let dir = TempDir::new("faults");
    let line = |output: std::process::Output| -> String {
        assert_eq!(
            output.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let err = String::from_utf8(output.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        err
    };
    let item_line = item("a", 1, "2025-01-01T00:00:00Z", "x").to_string();

    // Not a database.
    let not_db = dir.join("not.db");
    std::fs::write(&not_db, b"this is a text file, not SQLite").unwrap();
    let err = line(run(dlq(&not_db).arg("stats")));
    assert!(err.contains("not a SQLite database"), "{err}");
    assert_eq!(
        std::fs::read(&not_db).unwrap(),
        b"this is a text file, not SQLite"
    );

    // A truncated database.
    let good = dir.join("good.db");
    let lines: String = (0..300)
        .map(|i| item(&format!("i{i}"), 1, "2025-01-01T00:00:00Z", "x").to_string() + "\n")
        .collect();
    assert!(
        with_stdin(dlq(&good).args(["add", "--job-id", "j"]), &lines)
            .status
            .success()
    );
    // dlq leaves a small WAL beside the database: fold it in first, so the
    // file holds the items.
    sql(&good)
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.join("truncated.db");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let output = run(dlq(&truncated).args(["list", "--limit", "0"]));
    line(output);
    assert_eq!(
        std::fs::read(&truncated).unwrap(),
        &bytes[..bytes.len() / 2]
    );

    // Locked by another process for longer than the busy timeout.
    let locked = dir.join("locked.db");
    assert!(
        with_stdin(dlq(&locked).args(["add", "--job-id", "j"]), &item_line)
            .status
            .success()
    );
    let holder = rusqlite::Connection::open(&locked).unwrap();
    holder
        .execute_batch("BEGIN EXCLUSIVE; UPDATE settings SET value = value;")
        .unwrap();
    let started = Instant::now();
    let output = run(dlq(&locked)
        .env("DLQ_BUSY_TIMEOUT_MS", "300")
        .args(["add", "--job-id", "j"])
        .arg(write_json(
            dir.path(),
            "b.json",
            &item("b", 1, "2025-01-01T00:00:00Z", "x"),
        )));
    let err = line(output);
    assert!(err.contains("locked") || err.contains("busy"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    assert_eq!(count(&locked, "SELECT COUNT(*) FROM items"), 1);

    // A full disk: a file-size limit on the process.
    let full = dir.join("full.db");
    assert!(
        with_stdin(dlq(&full).args(["add", "--job-id", "j"]), &item_line)
            .status
            .success()
    );
    let before = contents(&full);
    let big: String = (0..3000)
        .map(|i| {
            let mut v = item(&format!("big{i}"), 1, "2025-01-01T00:00:00Z", "x");
            v["item_data"]["blob"] = "y".repeat(2000).into();
            v.to_string() + "\n"
        })
        .collect();
    let big_file = dir.join("big.jsonl");
    std::fs::write(&big_file, big).unwrap();
    let limited = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 1024; trap '' XFSZ; exec \"$0\" --db \"$1\" add --job-id j \"$2\"")
        .arg(env!("CARGO_BIN_EXE_dlq"))
        .arg(&full)
        .arg(&big_file)
        .env_remove("DLQ_DB")
        .output()
        .unwrap();
    let err = line(limited);
    assert!(
        err.contains("full") || err.contains("too large") || err.contains("I/O"),
        "{err}"
    );
    assert_eq!(contents(&full), before);
    assert_sound(&full);

    // A read-only database: root ignores file modes, so the test makes the
    // directory's file immutable where it can and says so where it cannot.
    let ro_dir = dir.join("ro");
    std::fs::create_dir_all(&ro_dir).unwrap();
    let ro = ro_dir.join("ro.db");
    assert!(
        with_stdin(dlq(&ro).args(["add", "--job-id", "j"]), &item_line)
            .status
            .success()
    );
    let before = std::fs::read(&ro).unwrap();
    let is_root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false);
    use std::os::unix::fs::PermissionsExt;
    let protected = if is_root {
        std::process::Command::new("chattr")
            .arg("+i")
            .arg(&ro)
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    } else {
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o400)).is_ok()
            && std::fs::set_permissions(&ro_dir, std::fs::Permissions::from_mode(0o500)).is_ok()
    };
    if protected {
        let output = run(dlq(&ro).args(["add", "--job-id", "j"]).arg(write_json(
            dir.path(),
            "c.json",
            &item("c", 1, "2025-01-01T00:00:00Z", "x"),
        )));
        line(output);
        if is_root {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&ro)
                .status();
        } else {
            let _ = std::fs::set_permissions(&ro_dir, std::fs::Permissions::from_mode(0o700));
            let _ = std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o600));
        }
        assert_eq!(std::fs::read(&ro).unwrap(), before);
    } else {
        // Not a silent skip: the case must run (scripts/test installs
        // e2fsprogs for chattr; root ignores file modes).
        panic!(
            "read-only database case cannot run: `chattr +i` failed (as root it needs \
             e2fsprogs and a file system with the immutable flag) or, as another user, \
             the modes could not be set"
        );
    }
}

/// Runs `args` and SIGKILLs it after `delay`; returns whether it was killed.
/// Runs `args` and kills it after `delay`. `None` if it was killed, else how
/// it ended (status and stderr), for the caller's message: a run that ends
/// early with an error is a finding, not only a timing accident.
fn kill_after(db: &Path, args: &[&str], env: &[(&str, &str)], delay: Duration) -> Option<String> {
    let mut command = dlq(db);
    command
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    while started.elapsed() < delay {
        if child.try_wait().unwrap().is_some() {
            let output = child.wait_with_output().unwrap();
            return Some(format!(
                "{} after {:?}: {}",
                output.status,
                started.elapsed(),
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = child.kill();
    child.wait().unwrap();
    None
}

/// Kills `args` at seeded random moments within `window` until it has been
/// killed mid-run 20 times, checking the database after each kill, then
/// reruns it to the end. A run that finished before its kill is followed by
/// `reset` (so the next run has the whole job to do again; it is told how the
/// run ended) and shrinks the
/// window by a quarter (the timing run was slower than the machine is now,
/// say because other tests were running then): the count of kills then
/// holds however fast or slow the machine is. Returns the kills.
/// How many runs each crash test kills mid-way: fewer on PostgreSQL, where
/// every rerun opens connections to the server and each kill waits for the
/// server to drop the killed client's (the suite's slowest test there).
fn kills() -> usize {
    if on_postgres() {
        8
    } else {
        20
    }
}

fn crash_and_rerun(
    db: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    window: Duration,
    seed: u64,
    reset: &dyn Fn(&str),
) -> usize {
    let mut rng = Rng::new(seed);
    let mut killed = 0;
    let mut window = window;
    for _ in 0..60 {
        if killed == kills() {
            break;
        }
        let delay = Duration::from_micros(rng.below(window.as_micros() as u64 + 1));
        let ended = kill_after(db, args, env, delay);
        if ended.is_none() && on_postgres() && crate::common::database_exists(db) {
            // The server finishes what the killed client had already sent
            // (a COMMIT on its way commits): wait until its connections
            // are gone, or the checks below would read a database that
            // changes under them.
            let started = Instant::now();
            while count(
                db,
                "SELECT COUNT(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND application_name = 'dlq'",
            ) > 0
            {
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "a killed dlq's connection is still open on the server"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if crate::common::database_exists(db) {
            assert_sound(db);
        }
        match ended {
            None => killed += 1,
            Some(how) => {
                reset(&how);
                window = window * 3 / 4;
            }
        }
    }
    let mut command = dlq(db);
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    let output = run(&mut command);
    assert!(output.status.code().is_some(), "the rerun was not killed");
    killed
}

fn timed(db: &Path, args: &[&str], env: &[(&str, &str)]) -> Duration {
    let mut command = dlq(db);
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    let started = Instant::now();
    let output = run(&mut command);
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    started.elapsed()
}

#[test]
fn crashes_at_random_moments_lose_and_double_nothing() {
    let dir = TempDir::new("crash");
    let tree = dir.join("tree");
    write_tree(
        &tree,
        &TreeSpec {
            jobs: 4,
            items_per_job: 300,
            attempt: 1,
            seed: 11,
        },
    )
    .unwrap();
    let tree_arg = tree.to_string_lossy().into_owned();

    // import. The kills fall within the shortest of three whole imports:
    // load only ever lengthens a run, and a rerun after a kill still reads
    // the whole tree (measured ~85% of a first import), so most kills land
    // mid-way however busy the machine. (Twice one timed run, as before,
    // killed fewer than 10 of 20 when that run happened to be slowed.)
    let expected_db = dir.join("expected-import.db");
    let import = ["import", tree_arg.as_str()];
    let window = (0..3)
        .map(|i| match i {
            0 => timed(&expected_db, &import, &[]),
            _ => timed(&dir.join(&format!("timing-{i}.db")), &import, &[]),
        })
        .min()
        .unwrap_or_default();
    let expected = contents(&expected_db);
    let db = dir.join("import.db");
    let remove = |_: &str| remove_db(&db);
    let killed = crash_and_rerun(&db, &import, &[], window, 1, &remove);
    assert_eq!(killed, kills(), "runs killed mid-way (of at most 60)");
    assert_eq!(contents(&db), expected);
    assert_sound(&db);

    // add (a stream of items)
    let stream: PathBuf = dir.join("stream.jsonl");
    let mut rng = Rng::new(12);
    let lines: String = (0..2000)
        .map(|i| item_json(&mut rng, i, 1).replace('\n', " ") + "\n")
        .collect();
    std::fs::write(&stream, lines).unwrap();
    let stream_arg = stream.to_string_lossy().into_owned();
    let add = ["add", "--job-id", "stream", stream_arg.as_str()];
    let expected_db = dir.join("expected-add.db");
    let window = timed(&expected_db, &add, &[]);
    let expected = contents(&expected_db);
    let db = dir.join("add.db");
    let remove = |_: &str| remove_db(&db);
    let killed = crash_and_rerun(&db, &add, &[], window, 2, &remove);
    assert_eq!(killed, kills(), "runs killed mid-way (of at most 60)");
    assert_eq!(contents(&db), expected);
    assert_sound(&db);

    // purge (of about half)
    let now = [("DLQ_NOW", "2024-05-01T00:00:00Z")];
    let purge = ["purge", "--older-than-days", "1", "--yes"];
    let expected_db = dir.join("expected-purge.db");
    copy_db(&dir.join("import.db"), &expected_db);
    let window = timed(&expected_db, &purge, &now);
    let expected = contents(&expected_db);
    assert!(!expected.is_empty() && expected.len() < contents(&dir.join("import.db")).len());
    let db = dir.join("purge.db");
    let fresh = |_: &str| {
        copy_db(&dir.join("import.db"), &db);
    };
    fresh("");
    let killed = crash_and_rerun(&db, &purge, &now, window, 3, &fresh);
    assert_eq!(killed, kills(), "runs killed mid-way (of at most 60)");
    assert_eq!(contents(&db), expected);
    assert_sound(&db);
    let purged = count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'purged'");
    assert_eq!(
        purged,
        count(&dir.join("import.db"), "SELECT COUNT(*) FROM items")
            - count(&db, "SELECT COUNT(*) FROM items"),
        "one event per purged item, none doubled"
    );

    // retry (every item succeeds; leases of killed runs expire after 1 s)
    let db = dir.join("retry.db");
    copy_db(&dir.join("import.db"), &db);
    let job = dlqlite::generate::job_id(0);
    let total = count(
        &db,
        &format!("SELECT COUNT(*) FROM items WHERE job_id = '{job}' AND reprocess_eligible = 1"),
    );
    // Commands that take 0.3 s, two at a time, killed within 0.4 s: no run
    // can finish the job before its kill (a slow machine only makes runs
    // longer), so all 20 kills land mid-run.
    let crashing = [
        "retry",
        job.as_str(),
        "--exec",
        "sleep 0.3",
        "--parallel",
        "2",
        "--lease",
        "1",
    ];
    let never = |how: &str| panic!("a retry run finished before its kill: {how}");
    let killed = crash_and_rerun(&db, &crashing, &[], Duration::from_millis(400), 4, &never);
    assert_eq!(killed, kills());
    std::thread::sleep(Duration::from_millis(1100));
    let output = run(dlq(&db).args(["retry", job.as_str(), "--exec", "true", "--parallel", "4"]));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        count(
            &db,
            &format!(
                "SELECT COUNT(*) FROM items WHERE job_id = '{job}' AND reprocess_eligible = 1"
            )
        ),
        0
    );
    let ok_events = count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'retried_ok'");
    let distinct = count(
        &db,
        "SELECT COUNT(DISTINCT item_id) FROM events WHERE kind = 'retried_ok'",
    );
    assert_eq!(
        (ok_events, distinct),
        (total, total),
        "each item removed exactly once"
    );
    assert_sound(&db);
}

/// `dlq sql` into a reader that does not read: the statement's read
/// transaction is over before the output waits for the reader, so a
/// checkpoint can still reset the WAL behind it (before, the WAL grew for
/// as long as the reader took: 148 MiB while 50,000 items were added).
#[test]
fn dlq_sql_into_a_stalled_reader_does_not_pin_the_wal() {
    if sqlite_only("the WAL is SQLite's") {
        return;
    }
    use std::os::fd::AsRawFd;
    let dir = TempDir::new("sql-stalled-reader");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        (0..2000).map(|i| item(&format!("i{i}"), 1, "2025-01-01T00:00:00Z", "boom")),
    );
    let mut child = dlq(&db)
        .args(["sql", "SELECT * FROM items", "--format", "jsonl"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // Wait until the pipe is full: dlq is blocked writing its output.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int, the bytes queued in the pipe.
        unsafe { libc::ioctl(stdout.as_raw_fd(), libc::FIONREAD, &mut queued) };
        if queued >= 60_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the output never filled the pipe"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    add_lines(&db, "j", [item("later", 1, "2025-01-02T00:00:00Z", "boom")]);
    let conn = sql(&db);
    conn.busy_timeout(Duration::from_millis(500)).unwrap();
    let (busy, wal_pages): (i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!((busy, wal_pages), (0, 0), "a reader held the WAL");
}
