//! `dlq import` and `dlq export --format legacy` through the real binary, on
//! the sample tree in examples/legacy and on generated trees.

use crate::common::*;
use crate::oracles::{ref_merge, ref_normalised};
use dlqlite::model::DeadLetteredItem;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn sample() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy")
}

/// Every file under `root` (not following links) with its content hash.
fn tree_hash(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                out.insert(
                    path.clone(),
                    format!("link:{}", std::fs::read_link(&path).unwrap().display()),
                );
            } else {
                let digest = Sha256::digest(std::fs::read(&path).unwrap());
                out.insert(path, format!("{digest:x}"));
            }
        }
    }
    out
}

/// Table contents without surrogate keys, in a fixed order.
/// Asserts two dumps are equal, showing only the first difference.
fn assert_same(left: &[String], right: &[String]) {
    let short = |s: &str| s.chars().take(300).collect::<String>();
    for (a, b) in left.iter().zip(right) {
        assert!(a == b, "first difference:\n  {}\n  {}", short(a), short(b));
    }
    assert_eq!(left.len(), right.len(), "row counts differ");
}

fn import_json(db: &Path, paths: &[&Path]) -> (bool, serde_json::Value) {
    let mut command = dlq(db);
    command.args(["import", "--json"]).args(paths);
    let output = run(&mut command);
    (
        output.status.success(),
        json(&String::from_utf8(output.stdout).unwrap()),
    )
}

#[test]
fn the_sample_tree_imports_with_exact_counts_and_reports() {
    let dir = TempDir::new("sample");
    let db = dir.join("dlq.db");
    let before = tree_hash(&sample());
    let (success, report) = import_json(&db, &[&sample()]);
    assert!(
        !success,
        "rejected files must make the exit status non-zero"
    );
    assert_eq!(report["jobs"], 3);
    assert_eq!(report["files_seen"], 15);
    assert_eq!(report["items_new"], 9);
    assert_eq!(report["items_merged"], 1);
    assert_eq!(report["items_unchanged"], 1);
    let rejected: Vec<String> = report["files_rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let path = r["path"].as_str().unwrap();
            assert!(!r["error"].as_str().unwrap().is_empty());
            assert!(Path::new(path).is_file(), "{path}");
            Path::new(path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        rejected,
        [
            "item_11.json",
            "item_12.json",
            "not-utf8.json",
            "wrong-types.json"
        ]
    );
    let mismatches: Vec<(String, String, Option<String>)> = report["index_mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["job_id"].as_str().unwrap().into(),
                m["kind"].as_str().unwrap().into(),
                m["item_id"].as_str().map(String::from),
            )
        })
        .collect();
    assert!(mismatches.contains(&(
        "mapreduce-20251123_194253".into(),
        "listed_but_missing".into(),
        Some("item_5".into())
    )));
    assert!(mismatches.contains(&(
        "mapreduce-20251123_194253".into(),
        "count_differs".into(),
        None
    )));
    assert!(mismatches.contains(&(
        "mapreduce-20250111_102500".into(),
        "index_missing".into(),
        None
    )));
    assert!(mismatches.contains(&("job-early".into(), "index_unreadable".into(), None)));

    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 9);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM failure_history"), 11);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM worktree_artifacts"), 5);
    // The id comes from the file: the slash id and the early, cut id.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items WHERE item_id IN ('src/lib.rs', 'Fix the login flow with...')"), 2);
    // item_7 has both copies' attempts (dlq/ and state/).
    assert_eq!(
        count(
            &db,
            "SELECT failure_count FROM items WHERE item_id = 'item_7'"
        ),
        2
    );
    let repos: Vec<(String, Option<String>)> =
        rows_as(&db, "SELECT job_id, repo FROM jobs ORDER BY job_id");
    assert_eq!(
        repos,
        [
            ("job-early".to_string(), Some("project-x".to_string())),
            (
                "mapreduce-20250111_102500".to_string(),
                Some("session-8e1a2b".to_string())
            ),
            (
                "mapreduce-20251123_194253".to_string(),
                Some("prodigy".to_string())
            ),
        ]
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'imported' AND item_id IS NULL"
        ),
        3
    );

    // The second import changes nothing, and the source is untouched.
    let tables = dump(&db);
    let (_, again) = import_json(&db, &[&sample()]);
    assert_eq!(again["items_new"], 0);
    assert_eq!(again["items_merged"], 0);
    assert_eq!(again["items_unchanged"], 11);
    assert_same(&dump(&db), &tables);
    assert_eq!(tree_hash(&sample()), before);
}

#[test]
fn human_summary_and_dry_run() {
    let dir = TempDir::new("human");
    let db = dir.join("dlq.db");
    let output = run(dlq(&db).args(["import", "--dry-run"]).arg(sample()));
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    // The jobs table on stdout, what was done on stderr.
    assert!(stdout.contains("mapreduce-20251123_194253"), "{stdout}");
    assert!(stderr.contains("dry run, nothing written"), "{stderr}");
    assert!(
        stderr.contains("rejected: ") && stderr.contains("item_12.json: empty file"),
        "{stderr}"
    );
    assert!(
        !crate::common::database_exists(&db),
        "a dry run created the database"
    );
    let output = run(dlq(&db).arg("import").arg(sample()));
    assert!(String::from_utf8(output.stderr).unwrap().contains("9 new"));
    let tables = dump(&db);
    // A dry run over what is there: it sees the items it would merge
    // with (on PostgreSQL, in a transaction it rolls back), and changes
    // nothing (events included: dump has them).
    let output = run(dlq(&db).args(["import", "--dry-run"]).arg(sample()));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("dry run, nothing written: ")
            && stderr.contains("0 new, 0 merged, 11 unchanged"),
        "{stderr}"
    );
    assert_same(&dump(&db), &tables);
    // And one that would change things: a job cleared since.
    run(dlq(&db).args(["clear", "job-early", "--yes"]));
    let tables = dump(&db);
    let output = run(dlq(&db).args(["import", "--dry-run"]).arg(sample()));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("dry run, nothing written: ")
            && stderr.contains("1 new, 0 merged, 10 unchanged"),
        "{stderr}"
    );
    assert_same(&dump(&db), &tables);
    let output = run(dlq(&db)
        .args(["import", "--dry-run"])
        .arg(dir.join("nothing-here")));
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(String::from_utf8(output.stderr).unwrap().lines().count(), 1);
    assert_same(&dump(&db), &tables);
}

/// Parses a JSON file and rewrites every timestamp string to one canonical
/// form, so instants compare equal whatever offset or fraction they had.
fn canonical(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::String(text) => match dlqlite::Timestamp::parse(&text) {
            Ok(ts) if text.len() >= 20 && text.as_bytes()[4] == b'-' => {
                serde_json::Value::String(ts.to_storage())
            }
            _ => serde_json::Value::String(text),
        },
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(canonical).collect())
        }
        serde_json::Value::Object(map) => map.into_iter().map(|(k, v)| (k, canonical(v))).collect(),
        other => other,
    }
}

fn read_value(path: &Path) -> serde_json::Value {
    canonical(serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap())
}

fn item_files(root: &Path) -> Vec<PathBuf> {
    tree_hash(root)
        .into_keys()
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.components().any(|c| c.as_os_str() == "items")
        })
        .collect()
}

#[test]
fn export_legacy_round_trips() {
    let dir = TempDir::new("roundtrip");
    let db = dir.join("dlq.db");
    import_json(&db, &[&sample()]);
    let out = dir.join("out");
    ok(dlq(&db).args(["export", "--format", "legacy"]).arg(&out));

    // Round trip 1: the export imports into a fresh database with identical tables.
    let fresh = dir.join("fresh.db");
    let (success, report) = import_json(&fresh, &[&out]);
    assert!(success, "{report}");
    assert_eq!(report["index_mismatches"], serde_json::json!([]));
    assert_same(&dump(&fresh), &dump(&db));

    // Round trip 2: every exported file equals the merged source item.
    // The expected merge comes from the reference model in oracles.rs, not
    // from the engine's own merge.
    let mut merged: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    let mut sources: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for path in item_files(&sample()) {
        let bytes = std::fs::read(&path).unwrap();
        let Ok(item) = DeadLetteredItem::from_json_slice(&bytes) else {
            continue;
        };
        let raw: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        sources
            .entry(item.item_id.clone())
            .or_default()
            .push(read_value(&path));
        let next = match merged.get(&item.item_id) {
            None => ref_normalised(&raw),
            Some(existing) => ref_merge(existing, &raw, (false, false)),
        };
        merged.insert(item.item_id.clone(), next);
    }
    let exported = item_files(&out);
    assert_eq!(exported.len(), merged.len());
    for path in exported {
        let value = read_value(&path);
        let id = value["item_id"].as_str().unwrap().to_string();
        let expected = canonical(merged[&id].clone());
        assert_eq!(value, expected, "{id}");
        // Items found once must equal their source file exactly (as JSON, by instant).
        if sources[&id].len() == 1 {
            assert_eq!(value, sources[&id][0], "{id}");
        }
    }
}

#[test]
fn hostile_ids_export_inside_the_directory() {
    let dir = TempDir::new("hostile");
    let db = dir.join("dlq.db");
    let ids = [
        "../../escape",
        "/etc/passwd",
        "..",
        ".",
        "dir/sub/item",
        "%2F",
        "spaces and ünicode ✓",
        "line\nbreak",
    ];
    // An empty id, or one holding NUL, could never be named on a command
    // line: refused with the field (dlq/tests/tests/hostile.rs).
    let long = "L".repeat(5000);
    let mut lines = String::new();
    for id in ids.iter().copied().chain([long.as_str()]) {
        lines.push_str(&item(id, 1, "2025-01-01T00:00:00Z", "x").to_string());
        lines.push('\n');
    }
    for job in ["../evil-job", "ok-job"] {
        let output = with_stdin(dlq(&db).args(["add", "--job-id", job]), &lines);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let out = dir.join("out");
    ok(dlq(&db).args(["export", "--format", "legacy"]).arg(&out));
    let files = tree_hash(&out);
    let canonical_out = std::fs::canonicalize(&out).unwrap();
    for path in files.keys() {
        assert!(
            std::fs::canonicalize(path)
                .unwrap()
                .starts_with(&canonical_out),
            "{}",
            path.display()
        );
    }
    assert!(!dir.path().join("escape").exists() && !dir.path().join("evil-job").exists());
    assert_eq!(item_files(&out).len(), 2 * (ids.len() + 1));
    // The ids inside the files stay exact: a re-import gives the same tables.
    let fresh = dir.join("fresh.db");
    let (success, report) = import_json(&fresh, &[&out]);
    assert!(success, "{report}");
    assert_same(&dump(&fresh), &dump(&db));
}

#[test]
fn generated_trees_import_exactly_and_added_attempts_merge() {
    let dir = TempDir::new("generated");
    let db = dir.join("dlq.db");
    let tree = dir.join("tree");
    let spec = dlqlite::generate::TreeSpec {
        jobs: 3,
        items_per_job: 400,
        attempt: 1,
        seed: 7,
    };
    assert_eq!(dlqlite::generate::write_tree(&tree, &spec).unwrap(), 1200);
    let (success, report) = import_json(&db, &[&tree]);
    assert!(success, "{report}");
    assert_eq!(report["items_new"], 1200);
    assert_eq!(report["index_mismatches"], serde_json::json!([]));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM failure_history"), 1200);
    let before = tree_hash(&tree);

    // The legacy writer overwrote files on a new attempt: a state/ snapshot of
    // the first job with attempt 2 of every item adds exactly those attempts.
    let later = dir.join("later");
    let spec2 = dlqlite::generate::TreeSpec {
        jobs: 1,
        items_per_job: 400,
        attempt: 2,
        seed: 8,
    };
    dlqlite::generate::write_tree(&later, &spec2).unwrap();
    let (success, report) = import_json(&db, &[&tree, &later]);
    assert!(success, "{report}");
    assert_eq!(report["items_new"], 0);
    assert_eq!(report["items_merged"], 400);
    assert_eq!(report["items_unchanged"], 1200);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 1200);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM failure_history"), 1600);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE failure_count = 2"),
        400
    );
    assert_eq!(tree_hash(&tree), before);
}

#[cfg(unix)]
#[test]
fn symlink_cycles_terminate_and_links_out_are_not_followed() {
    use std::os::unix::fs::symlink;
    let dir = TempDir::new("symlinks");
    let db = dir.join("dlq.db");
    let tree = dir.join("tree");
    let spec = dlqlite::generate::TreeSpec {
        jobs: 1,
        items_per_job: 3,
        attempt: 1,
        seed: 1,
    };
    dlqlite::generate::write_tree(&tree, &spec).unwrap();
    // A loop back to the root, a loop inside items/, and a link to a tree outside.
    symlink(&tree, tree.join("loop")).unwrap();
    let items = dlqlite::generate::job_dir(&tree, 0).join("items");
    symlink(&items, items.join("again")).unwrap();
    let outside = dir.join("outside");
    dlqlite::generate::write_tree(
        &outside,
        &dlqlite::generate::TreeSpec {
            jobs: 2,
            items_per_job: 2,
            attempt: 1,
            seed: 2,
        },
    )
    .unwrap();
    symlink(&outside, tree.join("elsewhere")).unwrap();
    let (success, report) = import_json(&db, &[&tree]);
    assert!(success, "{report}");
    assert_eq!(report["jobs"], 1);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
    let skipped = report["paths_skipped"].to_string();
    assert!(
        skipped.contains("elsewhere") && skipped.contains("out of the tree"),
        "{skipped}"
    );
}

/// An import is a migration: it keeps every item, also of a job larger than
/// its capacity, raises that job's capacity to fit (with an event saying
/// why) and says so; both into an empty database (one bulk transaction) and
/// into a non-empty one (batches).
#[test]
fn import_keeps_every_item_of_a_job_over_its_capacity() {
    let dir = TempDir::new("over-capacity");
    let db = dir.join("dlq.db");
    let tree = dir.join("tree");
    let spec = dlqlite::generate::TreeSpec {
        jobs: 2,
        items_per_job: 30,
        attempt: 1,
        seed: 3,
    };
    dlqlite::generate::write_tree(&tree, &spec).unwrap();
    ok(dlq(&db).args(["capacity", "--set", "12", "--yes"]));
    let (success, report) = import_json(&db, &[&tree]);
    assert!(success, "{report}");
    assert_eq!(report["items_new"], 60);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 60);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'evicted'"),
        0
    );
    let raised = report["jobs_over_capacity"].as_array().unwrap();
    assert_eq!(raised.len(), 2, "{report}");
    for job in raised {
        assert_eq!(job["items"], 30);
        assert_eq!(job["previous_max_items"], 12);
        let id = job["job_id"].as_str().unwrap();
        let capacity = json(&ok(dlq(&db).args(["capacity", "--job-id", id, "--json"])));
        assert_eq!(capacity["effective_max_items"], 30, "{capacity}");
    }
    assert_eq!(
        count(
            &db,
            &format!(
                "SELECT COUNT(*) FROM events WHERE kind = 'capacity_set' AND job_id IS NOT NULL
                 AND {} = 12",
                json_at("detail", "previous_max_items", true)
            )
        ),
        2
    );
    // Attempt 2 of every item of a third, bigger job, into the non-empty
    // database: the batched path keeps them all too, and the summary says so.
    let more = dir.join("more");
    dlqlite::generate::write_tree(
        &more,
        &dlqlite::generate::TreeSpec {
            jobs: 3,
            items_per_job: 40,
            attempt: 2,
            seed: 4,
        },
    )
    .unwrap();
    let output = run(dlq(&db).arg("import").arg(&more));
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(
        text.contains("kept all 40 items, over its capacity of 30"),
        "{text}"
    );
    assert!(
        text.contains("kept all 40 items, over its capacity of 12"),
        "{text}"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 40 * 2 + 40);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'evicted'"),
        0
    );
    // Adding goes on evicting at the (raised) capacity.
    let mut item = item("new-one", 1, "2099-01-01T00:00:00Z", "late");
    item["job_id"] = serde_json::json!(dlqlite::generate::job_id(2));
    let added = with_stdin(dlq(&db).args(["add", "--json"]), &item.to_string());
    assert!(added.status.success());
    assert_eq!(
        json(&String::from_utf8_lossy(&added.stdout))["items_evicted"],
        1
    );
}

/// A `dlq export` file holds many items of many jobs: the summary counts the
/// jobs from the items and says items, not files.
#[test]
fn import_of_an_export_file_counts_its_jobs_and_items() {
    let dir = TempDir::new("export-file-summary");
    let db = dir.join("dlq.db");
    for job in ["a", "b", "c"] {
        add_lines(
            &db,
            job,
            (0..3).map(|i| item(&format!("{job}{i}"), 1, "2025-01-01T00:00:00Z", "boom")),
        );
    }
    let file = dir.join("all.jsonl");
    ok(dlq(&db).arg("export").arg(&file));
    let db2 = dir.join("second.db");
    let (success, report) = import_json(&db2, &[&file]);
    assert!(success, "{report}");
    assert_eq!(report["jobs"], 3, "{report}");
    assert_eq!(report["files_seen"], 1);
    assert_eq!(report["items_read"], 9);
    let db3 = dir.join("third.db");
    let output = run(dlq(&db3).arg("import").arg(&file));
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let summary = String::from_utf8(output.stderr).unwrap();
    assert!(
        summary.contains("3 job(s), 9 item(s) from 1 file(s): 9 new"),
        "{summary}"
    );
    for job in ["a", "b", "c"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(job) && l.contains(" 3 ")),
            "{text}"
        );
    }
}

/// A line of an export file that does not parse names no job: it is
/// reported, and no job (nor an `imported` event) is made up for it.
#[test]
fn a_bad_line_of_an_export_file_is_credited_to_no_job() {
    let dir = TempDir::new("export-file-bad-line");
    let db = dir.join("dlq.db");
    let file = dir.join("bad.jsonl");
    std::fs::write(&file, "{\"not\": \"an item\"}\n").unwrap();
    let (success, report) = import_json(&db, &[&file]);
    assert!(!success, "a rejected line fails the import: {report}");
    assert_eq!(
        report["files_rejected"].as_array().unwrap().len(),
        1,
        "{report}"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM jobs"), 0);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE job_id = '' OR job_id IS NULL"
        ),
        0
    );
}

/// An index.json that lies at length (500,000 ids for a one-item job, well
/// under the 64 MiB cap) is summarised: the report lists 100 of each kind
/// and counts the rest, so output and memory follow the tree's content.
/// Before, every id was a line of stderr and a record of `--json`.
#[test]
fn a_lying_index_is_summarised_not_echoed() {
    let dir = TempDir::new("lying-index");
    let job = dir.join("tree/mapreduce/dlq/j");
    std::fs::create_dir_all(job.join("items")).unwrap();
    write_json(
        &job.join("items"),
        "real.json",
        &item("real", 1, "2025-01-01T00:00:00Z", "boom"),
    );
    let ids: Vec<String> = (0..500_000).map(|n| format!("ghost-{n}")).collect();
    write_json(
        &job,
        "index.json",
        &serde_json::json!({"item_count": 1, "item_ids": ids, "job_id": "j"}),
    );
    let db = dir.join("dlq.db");
    let output = run(dlq(&db).args(["import", "--json"]).arg(dir.join("tree")));
    assert!(output.status.success(), "{output:?}");
    assert!(
        output.stderr.len() < 20_000,
        "{} bytes of stderr",
        output.stderr.len()
    );
    assert!(
        output.stdout.len() < 50_000,
        "{} bytes of stdout",
        output.stdout.len()
    );
    let report = json(&String::from_utf8(output.stdout).unwrap());
    let mismatches = report["index_mismatches"].as_array().unwrap();
    let listed = mismatches
        .iter()
        .filter(|m| m["kind"] == "listed_but_missing" && m["item_id"].is_string())
        .count();
    assert_eq!(listed, 100, "{report}");
    let total: u64 = mismatches
        .iter()
        .map(|m| m["more"].as_u64().unwrap_or(1))
        .sum();
    // 500,000 listed but missing; "real" unlisted; the count agrees.
    assert_eq!(total, 500_001, "{report}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("listed but missing, 499900 more"),
        "{stderr}"
    );
}

/// Ctrl-C in the middle of an import into an empty database (one
/// transaction) exits 130 and says that what was not committed was rolled
/// back; nothing of it is in the database.
#[test]
fn an_interrupted_import_says_what_was_written() {
    if sqlite_only("into an empty SQLite database the load is one transaction") {
        return;
    }
    let dir = TempDir::new("import-interrupted");
    let db = dir.join("dlq.db");
    let file = dir.join("many.jsonl");
    let mut lines = String::new();
    for n in 0..60_000 {
        let mut value = item(&format!("i{n}"), 1, "2025-01-01T00:00:00Z", "boom");
        value["job_id"] = "j".into();
        lines.push_str(&value.to_string());
        lines.push('\n');
    }
    std::fs::write(&file, lines).unwrap();
    let child = dlq(&db)
        .arg("import")
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the database is there, the import is under way.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !db.exists() {
        assert!(std::time::Instant::now() < until);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(0) {
        // This machine imported it all before the signal: nothing to see.
        return;
    }
    assert_eq!(output.status.code(), Some(130), "{said}");
    assert!(
        said.contains("interrupted") && said.contains("rolled back"),
        "{said}"
    );
    // One line, and it says what was kept: nothing.
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(said.contains("nothing was imported"), "{said}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
}

/// Into a database that has items the import commits in batches: Ctrl-C
/// keeps the committed ones and says so (not "nothing"), and what is there
/// is whole batches.
#[test]
fn an_interrupted_import_into_items_keeps_its_committed_batches() {
    let dir = TempDir::new("import-interrupted-batches");
    let db = dir.join("dlq.db");
    add_lines(&db, "other", [item("x", 1, "2025-01-01T00:00:00Z", "boom")]);
    let file = dir.join("many.jsonl");
    let mut lines = String::new();
    for n in 0..60_000 {
        let mut value = item(&format!("i{n}"), 1, "2025-01-01T00:00:00Z", "boom");
        value["job_id"] = "j".into();
        lines.push_str(&value.to_string());
        lines.push('\n');
    }
    std::fs::write(&file, lines).unwrap();
    let child = dlq(&db)
        .arg("import")
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(0) {
        // This machine imported it all before the signal: nothing to see.
        return;
    }
    assert_eq!(output.status.code(), Some(130), "{said}");
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(
        said.contains("import interrupted after")
            && said.contains("batches of 5000 items committed before are kept")
            && !said.contains("nothing was imported"),
        "{said}"
    );
    let kept = count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'j'");
    assert_eq!(kept % 5000, 0, "{kept}: {said}");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'other'"),
        1
    );
}
