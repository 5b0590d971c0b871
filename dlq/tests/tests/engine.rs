//! The storage engine through the real binary: add/stats, merges, capacity,
//! migrations, concurrency, the sqlite3 shell and file permissions.

use crate::common::*;

#[test]
fn add_then_stats_round_trip() {
    let dir = TempDir::new("stats");
    let db = dir.join("dlq.db");
    let a = write_json(
        dir.path(),
        "a.json",
        &item("a", 1, "2025-01-01T00:00:00Z", "boom"),
    );
    let mut b_item = item("b", 1, "2025-01-02T00:00:00.5Z", "bang");
    b_item["reprocess_eligible"] = false.into();
    b_item["manual_review_required"] = true.into();
    b_item["first_attempt"] = "2024-12-31T12:00:00-07:00".into();
    let b = write_json(dir.path(), "b.json", &b_item);
    ok(dlq(&db).args(["add", "--job-id", "job-1"]).arg(&a));
    ok(dlq(&db).args(["add", "--job-id", "job-1"]).arg(&b));
    let stats = json(&ok(dlq(&db).args(["stats", "--job-id", "job-1", "--json"])));
    assert_eq!(stats["total_items"], 2);
    assert_eq!(stats["eligible_for_reprocess"], 1);
    assert_eq!(stats["requiring_manual_review"], 1);
    assert_eq!(stats["oldest_item"], "2024-12-31T19:00:00Z");
    assert_eq!(stats["newest_item"], "2025-01-02T00:00:00.500Z");
    let boom = dlqlite::classify::error_signature("boom");
    assert_eq!(stats["error_categories"][&boom], 1);
    assert_eq!(stats["error_categories"].as_object().unwrap().len(), 2);

    let all = json(&ok(dlq(&db).args(["stats", "--json"])));
    assert_eq!(all["total_items"], 2);
    assert_eq!(all["jobs"]["job-1"], stats);
    // --workflow-id is the legacy spelling.
    let legacy = json(&ok(dlq(&db).args([
        "stats",
        "--workflow-id",
        "job-1",
        "--json",
    ])));
    assert_eq!(legacy, stats);
}

#[test]
fn adding_the_same_item_twice_changes_nothing() {
    let dir = TempDir::new("twice");
    let db = dir.join("dlq.db");
    let a = write_json(
        dir.path(),
        "a.json",
        &item("a", 1, "2025-01-01T00:00:00Z", "boom"),
    );
    ok(dlq(&db).args(["add", "--job-id", "j"]).arg(&a));
    let dump = |db: &std::path::Path| {
        let row = table_rows(
            db,
            &format!(
                "SELECT job_id, item_id, CAST(item_data AS TEXT), {}, {}, failure_count,
                     error_signature, reprocess_eligible, manual_review_required FROM items",
                ts("first_attempt", true),
                ts("last_attempt", true)
            ),
        );
        let history = count(db, "SELECT COUNT(*) FROM failure_history");
        (row, history)
    };
    let before = dump(&db);
    let out = json(&ok(dlq(&db)
        .args(["add", "--json", "--job-id", "j"])
        .arg(&a)));
    assert_eq!(out["items_unchanged"], 1);
    assert_eq!(dump(&db), before);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 1);
}

#[test]
fn two_histories_of_one_item_merge_into_their_union() {
    let dir = TempDir::new("merge");
    let db = dir.join("dlq.db");
    // The legacy writer replaced the file: each copy has one attempt.
    let first = write_json(
        dir.path(),
        "1.json",
        &item("a", 1, "2025-01-01T00:00:00Z", "first"),
    );
    let mut second_item = item("a", 2, "2025-01-03T00:00:00Z", "second");
    second_item["failure_history"][0]["error_type"] = "Timeout".into();
    second_item["item_data"] = serde_json::json!({"path": "src/a.rs", "moved": true});
    second_item["worktree_artifacts"]["worktree_path"] = "/wt/a-second".into();
    let second = write_json(dir.path(), "2.json", &second_item);
    ok(dlq(&db).args(["add", "--job-id", "j"]).arg(&second));
    let out = json(&ok(dlq(&db)
        .args(["add", "--json", "--job-id", "j"])
        .arg(&first)));
    assert_eq!(out["items_merged"], 1);
    let (count, first_attempt, last_attempt, signature): (i64, String, String, String) = row_as(
        &db,
        &format!(
            "SELECT failure_count, {}, {}, error_signature FROM items",
            ts("first_attempt", true),
            ts("last_attempt", true)
        ),
    );
    assert_eq!(count, 2);
    assert_eq!(first_attempt, "2025-01-01T00:00:00.000000000Z");
    assert_eq!(last_attempt, "2025-01-03T00:00:00.000000000Z");
    // Signature, data and artifacts come from the newer copy.
    assert_eq!(signature, dlqlite::classify::error_signature("second"));
    let (data, worktree): (String, String) = row_as(
        &db,
        "SELECT CAST(i.item_data AS TEXT), w.worktree_path FROM items i JOIN worktree_artifacts w ON w.item_key = i.id",
    );
    assert_eq!(json(&data), second_item["item_data"]);
    assert_eq!(worktree, "/wt/a-second");
    let attempts: Vec<(i64, String)> = rows_as(
        &db,
        "SELECT attempt_number, error_type FROM failure_log ORDER BY attempt_number",
    );
    assert_eq!(
        attempts,
        [(1, "CommandFailed".to_string()), (2, "Timeout".to_string())]
    );
    // Adding either copy again changes nothing.
    let out = json(&ok(dlq(&db)
        .args(["add", "--json", "--job-id", "j"])
        .arg(&first)));
    assert_eq!(out["items_unchanged"], 1);
}

#[test]
fn a_newer_copy_replaces_the_stored_artifacts() {
    // The older copy is stored first, so the merge must rewrite the
    // worktree_artifacts row (the other order keeps the stored one).
    let dir = TempDir::new("artifacts");
    let db = dir.join("dlq.db");
    let older = write_json(
        dir.path(),
        "1.json",
        &item("a", 1, "2025-01-01T00:00:00Z", "first"),
    );
    let mut newer_item = item("a", 2, "2025-01-03T00:00:00Z", "second");
    newer_item["worktree_artifacts"]["worktree_path"] = "/wt/a-second".into();
    newer_item["worktree_artifacts"]["error_logs"] = "/logs/second.log".into();
    let newer = write_json(dir.path(), "2.json", &newer_item);
    ok(dlq(&db).args(["add", "--job-id", "j"]).arg(&older));
    let out = json(&ok(dlq(&db)
        .args(["add", "--json", "--job-id", "j"])
        .arg(&newer)));
    assert_eq!(out["items_merged"], 1);
    let rows = strings(&db, "SELECT worktree_path FROM worktree_artifacts");
    assert_eq!(rows, ["/wt/a-second"]);
    let shown = json(&ok(dlq(&db).args(["inspect", "--job-id", "j", "a"])));
    assert_eq!(
        shown["worktree_artifacts"],
        newer_item["worktree_artifacts"]
    );
}

#[test]
fn a_write_transaction_sees_the_capacity_in_force() {
    let dir = TempDir::new("txcap");
    let dlq = dlqlite::Dlq::open(super::common::target(&dir.join("dlq.db"))).unwrap();
    let one = dlqlite::DeadLetteredItem::from_json_str(
        &item("a", 1, "2025-01-01T00:00:00Z", "boom").to_string(),
    )
    .unwrap();
    dlq.add("capped", &one).unwrap();
    dlq.add("open", &one).unwrap();
    dlq.set_capacity(Some("capped"), Some(7)).unwrap();
    dlq.set_capacity(None, Some(300)).unwrap();
    let caps = |dlq: &dlqlite::Dlq| {
        dlq.write(|tx| {
            Ok((
                tx.max_items("capped")?,
                tx.max_items("open")?,
                tx.max_items("no-such-job")?,
            ))
        })
        .unwrap()
    };
    assert_eq!(caps(&dlq), (7, 300, 300));
    dlq.set_capacity(Some("capped"), None).unwrap();
    dlq.set_capacity(None, Some(0)).unwrap();
    assert_eq!(caps(&dlq), (0, 0, 0));
    dlq.set_capacity(None, Some(12)).unwrap();
    assert_eq!(caps(&dlq), (12, 12, 12));
}

#[test]
fn capacity_keeps_the_newest_and_records_every_eviction() {
    let dir = TempDir::new("cap");
    let db = dir.join("dlq.db");
    let (n, k) = (5, 3);
    ok(dlq(&db).args(["capacity", "--set", &n.to_string(), "--yes"]));
    let lines: Vec<String> = (0..n + k)
        .map(|i| {
            item(
                &format!("i{i}"),
                1,
                &format!("2025-01-01T00:00:{:02}Z", i),
                "x",
            )
            .to_string()
        })
        .collect();
    // Add in shuffled order: eviction must go by last_attempt, not insertion.
    for i in [3, 0, 7, 1, 6, 2, 5, 4] {
        let output = with_stdin(dlq(&db).args(["add", "--job-id", "j", "-"]), &lines[i]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let kept = strings(&db, "SELECT item_id FROM items ORDER BY item_id");
    assert_eq!(kept, ["i3", "i4", "i5", "i6", "i7"]);
    let mut evicted = strings(&db, "SELECT item_id FROM events WHERE kind = 'evicted'");
    evicted.sort();
    assert_eq!(evicted, ["i0", "i1", "i2"]);
    let signature = strings(
        &db,
        &format!(
            "SELECT {} FROM events WHERE kind = 'evicted' LIMIT 1",
            json_at("detail", "error_signature", false)
        ),
    )
    .remove(0);
    assert_eq!(signature, dlqlite::classify::error_signature("x"));
    assert_eq!(
        json(&ok(dlq(&db).args(["stats", "--json"])))["total_items"],
        n
    );

    // Lowering a job's capacity evicts at once.
    let out =
        json(&ok(dlq(&db).args([
            "capacity", "--job-id", "j", "--set", "2", "--json", "--yes",
        ])));
    assert_eq!(out["evicted"], 3);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 2);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'evicted'"),
        6
    );
}

#[test]
fn a_fresh_database_migrates_once() {
    let dir = TempDir::new("migrate");
    let db = dir.join("nested/dir/dlq.db");
    let info = json(&ok(dlq(&db).args(["db", "--json"])));
    let supported = supported_schema_version();
    assert!(supported >= 2);
    assert_eq!(info["schema_version"], supported);
    let applied = |db: &std::path::Path| -> Vec<(i64, String)> {
        rows_as(
            db,
            "SELECT version, applied_on FROM refinery_schema_history ORDER BY version",
        )
    };
    let before = applied(&db);
    assert_eq!(before.len() as i64, supported, "one row per migration");
    ok(dlq(&db).args(["db", "--json"]));
    assert_eq!(applied(&db), before, "reopening applied a migration again");
}

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let dir = TempDir::new("newer");
    let db = dir.join("dlq.db");
    ok(dlq(&db).args(["db"]));
    exec(
        &db,
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
         VALUES (99, 'future', '2030-01-01T00:00:00Z', '1')",
    );
    let before = dump(&db);
    let bytes = (!on_postgres()).then(|| std::fs::read(&db).unwrap());
    let err = fails(dlq(&db).args(["stats"]));
    assert_eq!(err.lines().count(), 1, "{err}");
    let supports = format!("supports ({})", supported_schema_version());
    assert!(
        err.contains("schema version 99") && err.contains(&supports),
        "{err}"
    );
    assert_eq!(dump(&db), before);
    if let Some(bytes) = bytes {
        assert_eq!(std::fs::read(&db).unwrap(), bytes, "not one byte written");
    }
}

/// Schema V4 moved "last attempt" from the highest attempt_number to the
/// latest timestamp. A database written under V3 gets every derived column
/// and count recomputed by the upgrade.
#[test]
fn the_v4_upgrade_recomputes_the_last_attempt_of_stored_items() {
    if crate::common::sqlite_only("rebuilds a SQLite database as schema V3 left it") {
        return;
    }
    let dir = TempDir::new("v4");
    let db = dir.join("dlq.db");
    // Attempt 2 is the latest; attempt 3 (the highest number) is older.
    let mut value = item("a", 2, "2025-04-01T00:00:00Z", "late");
    let mut third = value["failure_history"][0].clone();
    third["attempt_number"] = 3.into();
    third["timestamp"] = "2025-02-01T00:00:00Z".into();
    third["error_type"] = "Timeout".into();
    value["failure_history"].as_array_mut().unwrap().push(third);
    value["failure_count"] = 2.into();
    add_lines(&db, "j", [value, item("b", 1, "2025-01-01T00:00:00Z", "b")]);
    let current = dump(&db);
    assert!(
        current.contains(&r#"["error_type","j","CommandFailed",2]"#.to_string()),
        "{current:#?}"
    );
    // Put the database back as V3 left it: the old rule's last error type
    // (the trigger moves the counts), the old view, no new index, and none
    // of V5's and V6's tables nor V7's and V8's indexes, nor V9's version
    // and V10's families and V11's index, nor V15's search index.
    let conn = sql(&db);
    conn.execute_batch(
        "UPDATE items SET last_error_type = 'Timeout' WHERE item_id = 'a';
         DROP TRIGGER items_version;
         ALTER TABLE items DROP COLUMN version;
         DROP INDEX failure_history_last;
         DROP VIEW item_summary;
         CREATE VIEW item_summary AS SELECT i.job_id, i.item_id, f.error_type, f.exit_code, f.error_message
             FROM items AS i LEFT JOIN failure_history AS f ON f.id = (
             SELECT l.id FROM failure_history AS l WHERE l.item_key = i.id
             ORDER BY l.attempt_number DESC, l.timestamp DESC LIMIT 1);
         DROP INDEX items_family;
         DROP INDEX items_job_family;
         ALTER TABLE items DROP COLUMN family_id;
         DROP TABLE families;
         DROP TABLE check_signatures;
         DROP TABLE checks;
         DROP TABLE retention_policies;
         DROP TABLE error_categories;
         DROP INDEX events_item;
         DROP INDEX items_job_failure_count;
         DROP INDEX items_failure_count;
         DROP INDEX failure_history_error_type;
         DROP TRIGGER failure_text_insert;
         DROP TRIGGER failure_text_delete;
         DROP TRIGGER failure_text_update;
         DROP TABLE failure_text;
         DELETE FROM refinery_schema_history WHERE version >= 4;",
    )
    .unwrap();
    drop(conn);
    assert_ne!(dump(&db), current);
    let info = json(&ok(dlq(&db).args(["db", "--json"])));
    assert_eq!(info["schema_version"], supported_schema_version());
    assert_eq!(dump(&db), current);
    // A recount from the rows agrees with what the upgrade left.
    ok(dlq(&db).args(["db", "--recount"]));
    assert_eq!(dump(&db), current);
    // The last attempt of an item is one seek, not a sort of its history.
    let plan: Vec<String> = sql(&db)
        .prepare("EXPLAIN QUERY PLAN SELECT * FROM item_summary")
        .unwrap()
        .query_map([], |r| r.get(3))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        plan.iter()
            .any(|step| step.contains("failure_history_last"))
            && !plan.iter().any(|step| step.contains("TEMP B-TREE")),
        "{plan:#?}"
    );
}

#[test]
fn processes_adding_at_once_to_a_new_database_all_succeed() {
    let dir = TempDir::new("concurrent");
    let db = dir.join("dlq.db");
    let make = |prefix: &str| -> std::path::PathBuf {
        let lines: String = (0..1000)
            .map(|i| {
                item(&format!("{prefix}-{i}"), 1, "2025-01-01T00:00:00Z", "x").to_string() + "\n"
            })
            .collect();
        let path = dir.join(&format!("{prefix}.jsonl"));
        std::fs::write(&path, lines).unwrap();
        path
    };
    let inputs: Vec<_> = ["a", "b", "c", "d"].iter().map(|p| make(p)).collect();
    // No process creates the database first: all race to create it, switch
    // it to WAL and migrate it (each a place where a loser once failed).
    let mut children: Vec<_> = inputs
        .iter()
        .map(|input| {
            dlq(&db)
                .args(["add", "--job-id", "j"])
                .arg(input)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in &mut children {
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{err}");
    }
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 4000);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM failure_history"), 4000);
    assert_eq!(
        count(&db, "SELECT item_count FROM jobs WHERE job_id = 'j'"),
        4000
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM refinery_schema_history"),
        supported_schema_version()
    );
}

#[test]
fn the_sqlite3_shell_reads_the_views() {
    if crate::common::sqlite_only("the sqlite3 shell") {
        return;
    }
    let dir = TempDir::new("shell");
    let db = dir.join("dlq.db");
    let a = write_json(
        dir.path(),
        "a.json",
        &item("a", 1, "2025-01-01T00:00:00Z", "boom"),
    );
    ok(dlq(&db).args(["add", "--job-id", "j"]).arg(&a));
    let shell = |query: &str| -> String {
        let output = std::process::Command::new("sqlite3")
            .arg(&db)
            .arg(query)
            .output()
            .expect("sqlite3 is installed");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    assert_eq!(
        shell("SELECT job_id, item_id, failure_count, error_type, exit_code, error_message, worktree_path FROM item_summary"),
        "j|a|1|CommandFailed|101|boom|/wt/a\n"
    );
    assert_eq!(
        shell("SELECT item_id, attempt_number, timestamp, json_log_location FROM failure_log"),
        "a|1|2025-01-01T00:00:00.000000000Z|/logs/x.jsonl\n"
    );
    // Stored timestamps are readable by SQLite's own date functions.
    assert_eq!(
        shell("SELECT date(last_attempt) FROM items"),
        "2025-01-01\n"
    );
}

#[cfg(unix)]
#[test]
fn a_new_database_file_is_private() {
    if crate::common::sqlite_only("the database file's mode") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("mode");
    let db = dir.join("new/dlq.db");
    ok(dlq(&db).args(["db"]));
    let mode = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn bad_input_is_one_line_and_adds_nothing() {
    let dir = TempDir::new("badadd");
    let db = dir.join("dlq.db");
    let good = item("a", 1, "2025-01-01T00:00:00Z", "boom").to_string();
    let mut bad = item("b", 1, "2025-01-01T00:00:00Z", "boom");
    bad["failure_history"][0]["timestamp"] = "not a time".into();
    let output = with_stdin(
        dlq(&db).args(["add", "--job-id", "j"]),
        &format!("{good}\n{bad}\n"),
    );
    assert_eq!(output.status.code(), Some(1));
    let err = String::from_utf8(output.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("item 2") && err.contains("failure_history[0].timestamp"),
        "{err}"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
    let err = fails(dlq(&db).args(["add", "--job-id", "j", "/no/such/file.json"]));
    assert!(err.contains("/no/such/file.json"), "{err}");
}

#[test]
fn counters_follow_hand_edits_and_recount_repairs_hand_inserts() {
    let dir = TempDir::new("counters");
    let db = dir.join("dlq.db");
    let lines: String = (0..6)
        .map(|i| {
            item(
                &format!("i{i}"),
                1,
                "2025-01-01T00:00:00Z",
                if i % 2 == 0 { "even" } else { "odd" },
            )
            .to_string()
                + "\n"
        })
        .collect();
    let output = with_stdin(dlq(&db).args(["add", "--job-id", "j"]), &lines);
    assert!(output.status.success());
    let stats = || json(&ok(dlq(&db).args(["stats", "--job-id", "j", "--json"])));
    // A hand delete and update are counted by the triggers.
    exec_by_hand(
        &db,
        "DELETE FROM items WHERE item_id = 'i0';
             UPDATE items SET reprocess_eligible = 0, error_signature = 'manual' WHERE item_id = 'i1';",
    );
    let s = stats();
    assert_eq!(s["total_items"], 5);
    assert_eq!(s["eligible_for_reprocess"], 4);
    assert_eq!(s["error_categories"]["manual"], 1);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM failure_history"),
        5,
        "cascade"
    );
    // A hand insert is not, until --recount.
    exec(
        &db,
        "INSERT INTO items (job_id, item_id, item_data, first_attempt, last_attempt, failure_count,
             error_signature, reprocess_eligible, manual_review_required)
         VALUES ('j', 'by-hand', '{}', '2025-01-01T00:00:00.000000000Z', '2025-01-01T00:00:00.000000000Z', 1, 'manual', 1, 1)",
    );
    // The recount says what it set right (a repair is never silent), and a
    // second one finds nothing off.
    let output = run(dlq(&db).args(["db", "--recount", "--json"]));
    assert!(output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("recount: set right 1 job(s)' item counters, 1 signature count(s)"),
        "{said}"
    );
    let report = json(&String::from_utf8_lossy(&output.stdout))["recount"].clone();
    assert_eq!(report["jobs"], 1, "{report}");
    assert_eq!(report["signatures"], 1, "{report}");
    assert_eq!(report["error_types"], 1, "{report}");
    assert_eq!(report["last_error_types"], 0, "{report}");
    let s = stats();
    assert_eq!(s["total_items"], 6);
    assert_eq!(s["requiring_manual_review"], 1);
    assert_eq!(s["error_categories"]["manual"], 2);
    let output = run(dlq(&db).args(["db", "--recount"]));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("every counter already equalled a recount"),
        "{output:?}"
    );
}

/// The schema objects of `items` and `failure_history` (the search
/// index's triggers, set aside by a bulk delete), the counters, and the
/// checks every bulk delete must leave true.
fn bulk_state(db: &std::path::Path) -> (Vec<String>, Vec<String>) {
    let schema = if on_postgres() {
        strings(
            db,
            "SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes
             WHERE tablename = 'items' ORDER BY indexname",
        )
    } else {
        strings(
            db,
            "SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_master
             WHERE tbl_name IN ('items', 'failure_history') ORDER BY name",
        )
    };
    let mut counters: Vec<String> = table_rows(
        db,
        "SELECT job_id, 'job', item_count, eligible_count, manual_review_count, failure_count_sum FROM jobs
         UNION ALL SELECT job_id, error_signature, item_count, 0, 0, 0 FROM signature_counts
         UNION ALL SELECT job_id, error_type, item_count, 0, 0, 0 FROM error_type_counts",
    )
    .iter()
    .map(|row| serde_json::Value::from(row.clone()).to_string())
    .collect();
    counters.sort();
    if !on_postgres() {
        assert_eq!(
            count(db, "SELECT COUNT(*) FROM pragma_foreign_key_check"),
            0
        );
    }
    assert_eq!(
        count(
            db,
            "SELECT (SELECT COUNT(*) FROM failure_history WHERE item_key NOT IN (SELECT id FROM items))
                  + (SELECT COUNT(*) FROM worktree_artifacts WHERE item_key NOT IN (SELECT id FROM items))"
        ),
        0,
        "orphaned history or artifacts"
    );
    if !on_postgres() {
        let integrity: String = sql(db)
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(integrity, "ok");
    }
    (schema, counters)
}

#[test]
fn bulk_deletes_keep_counters_indexes_and_cascades() {
    use dlqlite::generate::{item_json, Rng};
    let dir = TempDir::new("bulk");
    let db = dir.join("dlq.db");
    let now = dlqlite::Timestamp::parse("2024-10-28T00:00:00Z").unwrap();
    let dlq = dlqlite::Dlq::open(super::common::target(&db))
        .unwrap()
        .with_clock(std::sync::Arc::new(move || now));
    let mut rng = Rng::new(5);
    dlq.write(|tx| {
        for job in 0..3 {
            for i in 0..300 {
                let item =
                    dlqlite::DeadLetteredItem::from_json_str(&item_json(&mut rng, i, 1)).unwrap();
                tx.add(&format!("job-{job}"), None, &item)?;
            }
        }
        Ok(())
    })
    .unwrap();
    let (schema, _) = bulk_state(&db);
    if !on_postgres() {
        assert!(schema
            .iter()
            .any(|s| s.starts_with("trigger items_counters_delete")));
    }
    // Counters right after each bulk delete means: what a recount gives.
    let check = || {
        let (after, counters) = bulk_state(&db);
        assert_eq!(after, schema, "indexes and triggers are all back");
        // Against the reference computed from the rows (not recount()).
        let drift = crate::counters::drift(&db);
        assert!(drift.is_empty(), "counters drifted: {drift:?}");
        dlq.recount().unwrap();
        assert_eq!(
            bulk_state(&db).1,
            counters,
            "counters differ from a recount"
        );
    };
    // Whole days back from `now` to the n-th oldest last_attempt, plus one:
    // a purge by that many days takes fewer than n items.
    let days_to = |n: i64| -> u32 {
        let days_back = if on_postgres() {
            "floor(EXTRACT(EPOCH FROM (TIMESTAMPTZ '2024-10-28T00:00:00Z' - last_attempt)) / 86400)"
        } else {
            "julianday('2024-10-28T00:00:00Z') - julianday(last_attempt)"
        };
        let days = count(
            &db,
            &format!(
                "SELECT CAST({days_back} AS INTEGER)
                 FROM items ORDER BY last_attempt LIMIT 1 OFFSET {n}"
            ),
        );
        u32::try_from(days + 1).unwrap()
    };
    let filter = dlqlite::ListFilter::default();

    // A fifth: deleted row by row from every index.
    let purged = dlq.purge(days_to(180), &filter, false).unwrap().items;
    assert!((90..=180).contains(&purged), "{purged}");
    check();
    // Most of what is left: the indexes are dropped and rebuilt.
    let left = count(&db, "SELECT COUNT(*) FROM items");
    let purged_more = dlq
        .purge(days_to(left * 3 / 4), &filter, false)
        .unwrap()
        .items;
    assert!(purged_more as i64 >= left / 2, "{purged_more} of {left}");
    check();
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'purged'"),
        (purged + purged_more) as i64
    );
    // A whole job.
    let in_job = count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'job-0'");
    assert_eq!(dlq.clear_job("job-0").unwrap() as i64, in_job);
    check();
    // Foreign keys are on again for ordinary writes: removing one item
    // takes its history with it.
    let (job, id): (String, String) =
        row_as(&db, "SELECT job_id, item_id FROM items ORDER BY id LIMIT 1");
    dlq.remove(Some(&job), &id).unwrap();
    check();
}

/// The library's in-memory database has one connection: analyze, whose
/// parts read on two, must still answer (it waited out the pool's timeout
/// and failed after 35 s while it held a connection of its own).
#[test]
fn analyze_answers_on_an_in_memory_database() {
    let dlq = dlqlite::Dlq::open_in_memory().unwrap();
    for (job, id, message) in [("a", "x", "boom"), ("a", "y", "boom"), ("b", "z", "bang")] {
        let value = item(id, 1, "2025-01-01T00:00:00Z", message);
        let parsed = dlqlite::DeadLetteredItem::from_json_str(&value.to_string()).unwrap();
        dlq.add(job, &parsed).unwrap();
    }
    let all = dlq.analyze(None).unwrap();
    assert_eq!((all.total_items, all.total_attempts), (3, 3));
    assert_eq!(all.pattern_groups[0].count, 2);
    assert_eq!(all.pattern_groups[0].sample_items, ["y", "x"]);
    let one = dlq.analyze(Some("b")).unwrap();
    assert_eq!((one.total_items, one.total_attempts), (1, 1));
    assert_eq!(one.pattern_groups[0].sample_items, ["z"]);
}

/// A returned add is durable (its commit syncs the WAL: synchronous=FULL),
/// and a one-item `dlq add` into an existing database makes no other sync
/// than what that commit needs: the WAL, and the directory entry SQLite
/// syncs once per process that opens the WAL. (It made five before: the
/// commit did not sync at all, and closing checkpointed.)
#[test]
fn one_add_is_one_durable_commit() {
    if crate::common::sqlite_only("SQLite's fsyncs under strace") {
        return;
    }
    let dir = TempDir::new("fsync");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("first", 1, "2025-01-01T00:00:00Z", "boom")]);
    let trace = dir.join("trace");
    let line = item("second", 1, "2025-01-02T00:00:00Z", "boom").to_string();
    let mut command = std::process::Command::new("strace");
    command
        .args(["-f", "-e", "trace=fsync,fdatasync,sync_file_range", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_dlq"))
        .arg("--db")
        .arg(&db)
        .args(["add", "--job-id", "j"]);
    let output = match command.stdin(std::process::Stdio::piped()).spawn() {
        Ok(mut child) => {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(line.as_bytes())
                .unwrap();
            child.wait_with_output().unwrap()
        }
        Err(e) => panic!("this test needs strace (scripts/test installs it): {e}"),
    };
    assert!(output.status.success(), "{output:?}");
    let syncs: Vec<String> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter(|l| l.contains("sync"))
        .map(str::to_string)
        .collect();
    assert!(
        (1..=2).contains(&syncs.len()),
        "expected the commit's WAL sync (and the WAL's directory), got {syncs:?}"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 2);
}
