//! The audit trail and the jobs around it, through the real binary: JSON
//! exports carry each job's repo back through `dlq import` and `dlq add`,
//! `dlq jobs --prune` / `dlq clear --forget` remove empty jobs with an
//! event each, `dlq events --help` lists every event kind, and an imported
//! item answers the "where did an item go?" query of docs/guide.md.
//! Counters are checked against a recount after each change.

use crate::common::*;
use crate::counters::drift;
use dlqlite::EventKind;
use std::path::{Path, PathBuf};

fn sample() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy")
}

/// (job_id, repo) of every job, from `dlq jobs --json`.
fn job_repos(db: &Path) -> Vec<(String, serde_json::Value)> {
    let jobs = json(&ok(dlq(db).args(["jobs", "--json"])));
    jobs.as_array()
        .unwrap()
        .iter()
        .map(|job| {
            (
                job["job_id"].as_str().unwrap().to_string(),
                job["repo"].clone(),
            )
        })
        .collect()
}

fn assert_no_drift(db: &Path) {
    let problems = drift(db);
    assert!(problems.is_empty(), "counters drifted: {problems:?}");
}

#[test]
fn json_exports_carry_the_repo_back_through_import_and_add() {
    let dir = TempDir::new("audit-export-repo");
    let db = dir.join("from.db");
    run(dlq(&db).arg("import").arg(sample()));
    let repos = job_repos(&db);
    assert!(
        repos.iter().all(|(_, repo)| repo.is_string()),
        "every sample job has a repo: {repos:?}"
    );
    for format in ["json", "jsonl"] {
        let file = dir.join(&format!("all.{format}"));
        ok(dlq(&db).arg("export").arg(&file).args(["--format", format]));

        let imported = dir.join(&format!("import-{format}.db"));
        ok(dlq(&imported).arg("import").arg(&file));
        assert_eq!(job_repos(&imported), repos, "{format} export, import");
        assert_no_drift(&imported);

        // `dlq add` reads the same keys, and keeps neither as an unknown
        // field of the item.
        let added = dir.join(&format!("add-{format}.db"));
        ok(dlq(&added).arg("add").arg(&file));
        assert_eq!(job_repos(&added), repos, "{format} export, add");
        assert_eq!(
            count(
                &added,
                &format!(
                    "SELECT COUNT(*) FROM items WHERE {} IS NOT NULL",
                    json_at("extra", "repo", false)
                )
            ),
            0
        );
        assert_eq!(dump(&added), dump(&imported));
    }
}

#[test]
fn an_export_without_repo_still_imports() {
    let dir = TempDir::new("audit-old-export");
    let db = dir.join("dlq.db");
    let mut line = item("item_1", 1, "2025-11-23T19:42:53Z", "boom");
    line["job_id"] = "old-job".into();
    std::fs::write(dir.join("old.jsonl"), format!("{line}\n")).unwrap();
    ok(dlq(&db).arg("import").arg(dir.join("old.jsonl")));
    assert_eq!(
        job_repos(&db),
        [("old-job".to_string(), serde_json::Value::Null)]
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 1);
    assert_no_drift(&db);
}

#[test]
fn prune_removes_only_empty_jobs_with_an_event_each() {
    let dir = TempDir::new("audit-prune");
    let db = dir.join("dlq.db");
    add_lines(&db, "full", [item("a", 1, "2025-11-23T19:42:53Z", "x")]);
    add_lines(&db, "emptied", [item("b", 1, "2025-11-23T19:42:53Z", "y")]);
    add_lines(&db, "capped", [item("c", 1, "2025-11-23T19:42:53Z", "z")]);
    ok(dlq(&db).args(["capacity", "--job-id", "capped", "--set", "7", "--yes"]));
    ok(dlq(&db).args(["clear", "emptied", "--yes"]));
    ok(dlq(&db).args(["clear", "capped", "--yes"]));

    // The dry run names them and changes nothing.
    let before = count(&db, "SELECT COUNT(*) FROM events");
    let output = run(dlq(&db).args(["jobs", "--prune", "--dry-run"]));
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout), "capped\nemptied\n");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "would remove 2 empty jobs\n"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM jobs"), 3);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM events"), before);

    let output = run(dlq(&db).args(["jobs", "--prune"]));
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout), "capped\nemptied\n");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "removed 2 empty jobs\n"
    );
    let left: Vec<String> = job_repos(&db).into_iter().map(|(job, _)| job).collect();
    assert_eq!(left, ["full"]);
    assert_eq!(
        strings(
            &db,
            "SELECT job_id FROM events WHERE kind = 'job_removed' ORDER BY job_id"
        ),
        ["capped", "emptied"]
    );
    assert_no_drift(&db);

    // The removed job's trail stays readable, its removal included.
    let trail = json(&ok(
        dlq(&db).args(["events", "--job-id", "capped", "--format", "json"])
    ));
    let kinds: Vec<&str> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"job_removed"));
    assert!(kinds.contains(&"cleared"), "{kinds:?}");
    assert!(fails(dlq(&db).args(["events", "--job-id", "never-was"])).contains("not found"));

    // Its capacity override went with it: the job comes back on the default.
    add_lines(&db, "capped", [item("c", 1, "2025-11-23T19:42:53Z", "z")]);
    let capacity = json(&ok(
        dlq(&db).args(["capacity", "--job-id", "capped", "--json"])
    ));
    assert_eq!(capacity["job_max_items"], serde_json::Value::Null);

    // Nothing left to prune.
    let output = run(dlq(&db).args(["jobs", "--prune"]));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "removed 0 empty jobs\n"
    );
}

/// Records a retry run of `job` as running in process `pid` of this host.
fn running_run(db: &Path, job: &str, pid: i64) {
    // Test names: no quotes to escape.
    exec(
        db,
        &format!(
            "INSERT INTO retry_runs (run_id, job_id, host, pid, started_at, heartbeat_at, status, parameters)
             VALUES ('run-{job}-{pid}', '{job}', '{}', {pid}, '2026-01-01T00:00:00.000000000Z',
                     '2026-01-01T00:00:00.000000000Z', 'running', '{{}}')",
            dlqlite::retry::hostname()
        ),
    );
}

/// The id of a process that has exited.
fn dead_pid() -> i64 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    i64::from(pid)
}

#[test]
fn a_job_a_live_retry_run_holds_is_not_removed() {
    let dir = TempDir::new("audit-prune-run");
    let db = dir.join("dlq.db");
    add_lines(&db, "busy", [item("a", 1, "2025-11-23T19:42:53Z", "x")]);
    add_lines(&db, "crashed", [item("b", 1, "2025-11-23T19:42:53Z", "x")]);
    ok(dlq(&db).args(["clear", "busy", "--yes"]));
    ok(dlq(&db).args(["clear", "crashed", "--yes"]));
    running_run(&db, "busy", i64::from(std::process::id()));
    running_run(&db, "crashed", dead_pid());

    assert_eq!(ok(dlq(&db).args(["jobs", "--prune"])), "crashed\n");
    assert_eq!(strings(&db, "SELECT job_id FROM jobs"), ["busy"]);
    let refused = fails(dlq(&db).args(["clear", "busy", "--yes", "--forget"]));
    assert!(refused.contains("retry run"), "{refused}");
    assert_eq!(refused.lines().count(), 1, "{refused}");
    assert_eq!(strings(&db, "SELECT job_id FROM jobs"), ["busy"]);
}

#[test]
fn clear_forget_removes_the_items_and_the_job() {
    let dir = TempDir::new("audit-forget");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "gone",
        [
            item("a", 1, "2025-11-23T19:42:53Z", "x"),
            item("b", 1, "2025-11-23T19:42:53Z", "y"),
        ],
    );
    add_lines(&db, "kept", [item("a", 1, "2025-11-23T19:42:53Z", "x")]);
    ok(dlq(&db).args(["capacity", "--job-id", "gone", "--set", "9", "--yes"]));
    ok(dlq(&db).args(["clear", "gone", "--yes", "--forget"]));
    assert_eq!(strings(&db, "SELECT job_id FROM jobs"), ["kept"]);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 1);
    assert_eq!(
        strings(
            &db,
            "SELECT kind FROM events WHERE job_id = 'gone' AND kind IN ('cleared', 'job_removed') ORDER BY id"
        ),
        ["cleared", "cleared", "job_removed"]
    );
    let removed = json(&strings(&db, "SELECT detail FROM events WHERE kind = 'job_removed'")[0]);
    assert_eq!(removed["max_items"], 9);
    assert_no_drift(&db);
}

#[test]
fn events_help_lists_every_kind() {
    let dir = TempDir::new("audit-kinds");
    let help = ok(dlq(&dir.join("dlq.db")).args(["events", "--help"]));
    for kind in EventKind::ALL {
        assert!(help.contains(kind.as_str()), "{kind} missing from:\n{help}");
    }
    // The kinds the review found missing, named here too: ALL itself must
    // not lose them.
    for kind in ["requeued", "job_removed"] {
        assert!(help.contains(kind), "{kind} missing from:\n{help}");
    }
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-11-23T19:42:53Z", "x")]);
    let error = fails(dlq(&db).args(["events", "--kind", "bogus"]));
    assert!(error.contains("job_removed"), "{error}");
    ok(dlq(&db).args(["events", "--kind", "job_removed"]));
}

/// The "Where did an item go?" query of docs/guide.md, for `item_id`.
fn readme_trail_query(item_id: &str) -> String {
    let readme = std::fs::read_to_string(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("docs/guide.md"),
    )
    .unwrap();
    let start = readme
        .find("-- Where did an item")
        .expect("docs/guide.md has the query");
    let rest = &readme[start..];
    // The statement after the comment lines, to its semicolon.
    let body = &rest[rest.find("\nSELECT").unwrap() + 1..];
    let query = &body[..=body.find(';').unwrap()];
    assert!(query.contains("'item_7'"), "{query}");
    query.replace("'item_7'", &format!("'{item_id}'"))
}

#[test]
fn an_imported_item_answers_the_readme_trail_query() {
    let dir = TempDir::new("audit-trail");
    let db = dir.join("dlq.db");
    run(dlq(&db).arg("import").arg(sample()));
    let rows = json(&ok(dlq(&db)
        .args(["sql", "--format", "json"])
        .arg(readme_trail_query("item_7"))));
    let rows = rows.as_array().unwrap();
    // item_7 is in two trees of the sample: new from one, merged from the other.
    let imported: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|row| row["kind"] == "imported")
        .collect();
    assert_eq!(imported.len(), 2, "{rows:?}");
    let details: Vec<serde_json::Value> = imported
        .iter()
        .map(|row| json(row["detail"].as_str().unwrap()))
        .collect();
    assert_eq!(details[0]["outcome"], "new");
    assert_eq!(details[1]["outcome"], "merged");
    for detail in &details {
        let source = detail["source"].as_str().unwrap();
        assert!(source.ends_with("item_7.json"), "{source}");
        assert!(Path::new(source).is_file(), "{source}");
    }

    // Importing again changes nothing, and adds no per-item rows.
    let per_item = "SELECT COUNT(*) FROM events WHERE kind = 'imported' AND item_id IS NOT NULL";
    let before = count(&db, per_item);
    assert_eq!(
        before,
        count(&db, "SELECT COUNT(*) FROM items") + 1,
        "9 new, item_7 merged"
    );
    run(dlq(&db).arg("import").arg(sample()));
    assert_eq!(count(&db, per_item), before);

    // An item imported from an export file names that file.
    let file = dir.join("all.jsonl");
    ok(dlq(&db).arg("export").arg(&file));
    let other = dir.join("other.db");
    ok(dlq(&other).arg("import").arg(&file));
    let rows = json(&ok(dlq(&other)
        .args(["sql", "--format", "json"])
        .arg(readme_trail_query("item_7"))));
    let detail = json(rows[0]["detail"].as_str().unwrap());
    assert_eq!(detail["source"], file.display().to_string());
    assert_no_drift(&db);
    assert_no_drift(&other);
}

/// The `dlq events` section of docs/commands.md names every event kind.
#[test]
fn the_readme_lists_every_event_kind() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("docs/commands.md"),
    )
    .unwrap();
    let start = readme.find("### `dlq events").expect("an events section");
    let section = &readme[start..];
    let section = &section[..section[4..]
        .find("\n### ")
        .map_or(section.len(), |end| end + 4)];
    for kind in dlqlite::EventKind::ALL {
        assert!(
            section.contains(kind.as_str()),
            "docs/commands.md's events section does not name {kind}"
        );
    }
}
