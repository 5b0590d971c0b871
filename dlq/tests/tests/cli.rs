//! Every reporting and maintenance command through the real binary, on a
//! fixture database: machine formats are parsed and their numbers checked
//! against SQL on the same database.

use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// A fixture: the sample tree plus a generated job with known shapes.
struct Fixture {
    _dir: TempDir,
    db: PathBuf,
    dir: PathBuf,
}

fn fixture(label: &str) -> Fixture {
    let dir = TempDir::new(label);
    let db = dir.join("dlq.db");
    let sample = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy");
    run(dlq(&db).arg("import").arg(&sample));
    // A job whose messages differ only in numbers, and an id shared with the sample.
    let timeouts = (0..6).map(|i| {
        let mut value = item(
            &format!("t{i}"),
            1,
            &format!("2025-11-2{}T10:00:00Z", i % 3),
            &format!("timed out after {}s", 30 + i),
        );
        value["failure_history"][0]["error_type"] = "Timeout".into();
        value["item_data"]["priority"] = (i as i64).into();
        value
    });
    let boom = item("item_7", 1, "2025-11-20T00:00:00Z", "boom");
    add_lines(&db, "gen-job", timeouts.chain([boom]));
    let dir_path = dir.path().to_path_buf();
    Fixture {
        _dir: dir,
        db,
        dir: dir_path,
    }
}

fn jsonl(text: &str) -> Vec<serde_json::Value> {
    text.lines().map(json).collect()
}

#[test]
fn list_orders_filters_and_formats() {
    let f = fixture("list");
    let all = json(&ok(
        dlq(&f.db).args(["list", "--limit", "0", "--format", "json"])
    ));
    let all = all.as_array().unwrap();
    assert_eq!(all.len() as i64, count(&f.db, "SELECT COUNT(*) FROM items"));
    let times: Vec<&str> = all
        .iter()
        .map(|i| i["last_attempt"].as_str().unwrap())
        .collect();
    let mut sorted: Vec<dlqlite::Timestamp> = times
        .iter()
        .map(|t| dlqlite::Timestamp::parse(t).unwrap())
        .collect();
    let original = sorted.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(original, sorted, "newest last_attempt first");

    let limited = jsonl(&ok(
        dlq(&f.db).args(["list", "--limit", "3", "--format", "jsonl"])
    ));
    assert_eq!(limited.len(), 3);
    let eligible = jsonl(&ok(dlq(&f.db).args([
        "list",
        "--limit",
        "0",
        "--eligible",
        "--format",
        "jsonl",
    ])));
    assert_eq!(
        eligible.len() as i64,
        count(
            &f.db,
            "SELECT COUNT(*) FROM items WHERE reprocess_eligible = 1"
        )
    );
    let review = jsonl(&ok(dlq(&f.db).args([
        "list",
        "--limit",
        "0",
        "--manual-review",
        "--format",
        "jsonl",
    ])));
    assert_eq!(
        review.len() as i64,
        count(
            &f.db,
            "SELECT COUNT(*) FROM items WHERE manual_review_required = 1"
        )
    );
    let job = jsonl(&ok(
        dlq(&f.db).args(["list", "--job-id", "gen-job", "--format", "jsonl"])
    ));
    assert_eq!(job.len(), 7);

    let filtered = jsonl(&ok(dlq(&f.db).args([
        "list",
        "--limit",
        "0",
        "--format",
        "jsonl",
        "--filter",
        "item.priority >= 3 && error_type == \"Timeout\"",
    ])));
    let ids: Vec<&str> = filtered
        .iter()
        .map(|i| i["item_id"].as_str().unwrap())
        .collect();
    for id in ["t3", "t4", "t5", "item_7"] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    assert!(!ids.contains(&"t2"), "{ids:?}");
    let expected = count(
        &f.db,
        &format!(
            "SELECT COUNT(*) FROM items WHERE {} >= 3
             AND EXISTS (SELECT 1 FROM failure_history f WHERE f.item_key = items.id AND f.error_type = 'Timeout')",
            json_at("item_data", "priority", true)
        ),
    );
    assert_eq!(ids.len() as i64, expected);

    let csv = ok(dlq(&f.db).args(["list", "--limit", "2", "--format", "csv"]));
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "job_id,item_id,failure_count,last_attempt,error_type,category,exit_code,reprocess_eligible,manual_review_required,error_message,error_signature,first_attempt,worktree_path,family_id"
    );
    assert_eq!(lines.count(), 2);
    let table = ok(dlq(&f.db).args(["list", "--limit", "2"]));
    assert!(table.starts_with("JOB "), "{table}");

    let err = fails(dlq(&f.db).args(["list", "--filter", "item.priority >= "]));
    assert!(
        err.contains("column 18") && err.lines().count() == 1,
        "{err}"
    );
    let err = fails(dlq(&f.db).args(["list", "--job-id", "no-such-job"]));
    assert!(err.contains("no-such-job"), "{err}");
}

#[test]
fn inspect_prints_the_legacy_shape_and_names_ambiguity() {
    let f = fixture("inspect");
    let item = json(&ok(dlq(&f.db).args(["inspect", "t1"])));
    assert_eq!(item["item_id"], "t1");
    assert_eq!(
        item["failure_history"][0]["json_log_location"],
        "/logs/x.jsonl"
    );
    assert_eq!(
        item["error_signature"],
        dlqlite::classify::error_signature("timed out after 31s")
    );
    let err = fails(dlq(&f.db).args(["inspect", "item_7"]));
    assert!(
        err.contains("gen-job")
            && err.contains("mapreduce-20251123_194253")
            && err.contains("--job-id"),
        "{err}"
    );
    let item = json(&ok(dlq(&f.db).args([
        "inspect",
        "item_7",
        "--job-id",
        "mapreduce-20251123_194253",
    ])));
    assert_eq!(item["failure_history"].as_array().unwrap().len(), 2);
    let err = fails(dlq(&f.db).args(["inspect", "nope"]));
    assert!(err.contains("\"nope\" not found"), "{err}");
}

#[test]
fn stats_and_show_agree_with_sql() {
    let f = fixture("stats");
    for args in [
        vec!["stats", "--job-id", "gen-job", "--json"],
        vec!["show", "gen-job", "--json"],
    ] {
        let stats = json(&ok(dlq(&f.db).args(&args)));
        assert_eq!(stats["total_items"], 7);
        assert_eq!(stats["error_types"]["Timeout"], 6);
        assert_eq!(stats["error_types"]["CommandFailed"], 1);
        assert_eq!(stats["average_failure_count"], 1.0);
        assert_eq!(stats["oldest_item"], "2025-11-20T00:00:00Z");
    }
    let all = json(&ok(dlq(&f.db).args(["stats", "--json"])));
    assert_eq!(
        all["total_items"].as_i64().unwrap(),
        count(&f.db, "SELECT COUNT(*) FROM items")
    );
    assert_eq!(
        all["eligible_for_reprocess"].as_i64().unwrap(),
        count(
            &f.db,
            "SELECT COUNT(*) FROM items WHERE reprocess_eligible = 1"
        )
    );
    let sum_failures = count(&f.db, "SELECT SUM(failure_count) FROM items") as f64;
    let average = (sum_failures / all["total_items"].as_f64().unwrap() * 1000.0).round() / 1000.0;
    assert_eq!(all["average_failure_count"].as_f64().unwrap(), average);
    assert_eq!(all["jobs"].as_object().unwrap().len(), 4);
    let human = ok(dlq(&f.db).args(["show", "gen-job"]));
    assert!(human.contains("total items:             7"), "{human}");
}

#[test]
fn analyze_groups_and_distributes() {
    let f = fixture("analyze");
    let export = f.dir.join("analysis.json");
    let a = json(&ok(dlq(&f.db)
        .args(["analyze", "--json", "--export"])
        .arg(&export)));
    assert_eq!(json(&std::fs::read_to_string(&export).unwrap()), a);
    let total_items = count(&f.db, "SELECT COUNT(*) FROM items");
    let attempts = count(&f.db, "SELECT COUNT(*) FROM failure_history");
    assert_eq!(a["total_items"].as_i64().unwrap(), total_items);
    let groups: i64 = a["pattern_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["count"].as_i64().unwrap())
        .sum();
    assert_eq!(groups, total_items);
    // Six signatures, one message pattern.
    let timeouts = a["message_groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["pattern"] == "timed out after <duration>")
        .expect("timeouts grouped");
    assert_eq!(timeouts["count"], 6);
    assert_eq!(timeouts["signatures"], 6);
    let all: i64 = a["error_distribution"]["all_attempts"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(all, attempts);
    assert_eq!(
        a["error_distribution"]["all_attempts"]["Timeout"]
            .as_i64()
            .unwrap(),
        count(
            &f.db,
            "SELECT COUNT(*) FROM failure_history WHERE error_type = 'Timeout'"
        )
    );
    let last: i64 = a["error_distribution"]["last_attempts"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(last, total_items);
    let temporal: i64 = a["temporal_distribution"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[1].as_i64().unwrap())
        .sum();
    assert_eq!(temporal, attempts);
    assert_eq!(a["temporal_distribution"]["bucket"], "day");
    let categories: i64 = a["failure_categories"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(categories, total_items);
    assert_eq!(a["failure_categories"]["permanent"], 1);
    // Top agents and steps: every one (the fixture has fewer than the top
    // N), with its attempts as SQL counts them, most first.
    for (key, column) in [
        ("top_agents", "agent_id"),
        ("top_failing_steps", "step_failed"),
    ] {
        let listed: Vec<(String, i64)> = a[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["failures"].as_i64().unwrap(),
                )
            })
            .collect();
        assert!(
            listed.windows(2).all(|w| w[0].1 >= w[1].1),
            "{key}: {listed:?}"
        );
        let mut listed = listed;
        listed.sort();
        let counted: Vec<(String, i64)> = rows_as(
            &f.db,
            &format!("SELECT {column}, COUNT(*) FROM failure_history GROUP BY {column} ORDER BY 1"),
        );
        assert_eq!(listed, counted, "{key}");
    }

    let job = json(&ok(
        dlq(&f.db).args(["analyze", "--json", "--job-id", "gen-job"])
    ));
    assert_eq!(job["total_items"], 7);
    assert_eq!(job["temporal_distribution"]["bucket"], "hour");
    let table = ok(dlq(&f.db).args(["analyze", "--job-id", "gen-job"]));
    assert!(
        table.contains("Failures per hour") && table.contains('█'),
        "{table}"
    );
}

/// The table lists the largest signatures and counts the rest; JSON has all.
#[test]
fn stats_table_lists_the_largest_signatures_and_counts_the_rest() {
    let dir = TempDir::new("stats-many");
    let db = dir.join("dlq.db");
    // "disk full" twice, then 23 messages of their own.
    add_lines(
        &db,
        "j",
        (0..25).map(|i| {
            let message = if i < 2 {
                "disk full".to_string()
            } else {
                format!("missing /src/{i}.rs")
            };
            item(&format!("i{i}"), 1, "2025-11-01T00:00:00Z", &message)
        }),
    );
    let table = ok(dlq(&db).args(["stats"]));
    let rows: Vec<&str> = table
        .lines()
        .skip_while(|line| !line.starts_with("ITEMS"))
        .skip(1)
        .take_while(|line| !line.starts_with("..."))
        .collect();
    assert_eq!(rows.len(), 20, "{table}");
    let disk_full = dlqlite::classify::error_signature("disk full");
    // Each signature with its type and representative message.
    assert_eq!(
        rows[0].split_whitespace().collect::<Vec<_>>(),
        ["2", disk_full.as_str(), "CommandFailed", "disk", "full"]
    );
    assert!(table.contains("... and 4 more signature(s)"), "{table}");
    let all = json(&ok(dlq(&db).args(["stats", "--json"])));
    assert_eq!(all["error_categories"].as_object().unwrap().len(), 24);
    assert_eq!(all["error_categories"][&disk_full], 2);
    assert_eq!(
        all["jobs"]["j"]["error_categories"],
        all["error_categories"]
    );
}

/// Each pattern group's span and samples, for all jobs and for one, against
/// the same questions asked in SQL.
#[test]
fn analyze_pattern_groups_agree_with_sql() {
    let dir = TempDir::new("analyze-spans");
    let db = dir.join("dlq.db");
    // "disk full" in two jobs, first attempts earlier than last ones and not
    // in the same order; "boom" once.
    for (job, items) in [("a", 0..5), ("b", 5..8)] {
        let disk_full = items.map(|i| {
            let last = format!("2025-11-{:02}T10:00:00Z", 10 + (i * 7) % 9);
            let mut value = item(&format!("d{i}"), 1, &last, "disk full");
            value["first_attempt"] = format!("2025-10-{:02}T08:00:00Z", 10 + (i * 5) % 8).into();
            value
        });
        let boom = item(&format!("boom-{job}"), 1, "2025-11-01T00:00:00Z", "boom");
        add_lines(&db, job, disk_full.chain([boom]));
    }
    let time = |text: &str| dlqlite::Timestamp::parse(text).unwrap();
    for job in [None, Some("a"), Some("b")] {
        let mut command = dlq(&db);
        command.args(["analyze", "--json"]);
        if let Some(job) = job {
            command.args(["--job-id", job]);
        }
        let analysis = json(&ok(&mut command));
        let groups = analysis["pattern_groups"].as_array().unwrap();
        assert_eq!(groups.len(), 2, "{job:?}");
        for group in groups {
            let signature = group["error_signature"].as_str().unwrap();
            // Signatures are hex and the jobs plain names: nothing to quote.
            let scope = format!(
                "error_signature = '{signature}'{}",
                job.map(|j| format!(" AND job_id = '{j}'"))
                    .unwrap_or_default()
            );
            let (n, first, last): (i64, String, String) = row_as(
                &db,
                &format!(
                    "SELECT COUNT(*), MIN({}), MAX({}) FROM items WHERE {scope}",
                    ts("first_attempt", true),
                    ts("last_attempt", true)
                ),
            );
            assert_eq!(group["count"], n, "{job:?} {signature}");
            assert_eq!(
                time(group["first_occurrence"].as_str().unwrap()),
                time(&first)
            );
            assert_eq!(
                time(group["last_occurrence"].as_str().unwrap()),
                time(&last)
            );
            let newest = strings(
                &db,
                &format!(
                    "SELECT item_id FROM items WHERE {scope}
                     ORDER BY last_attempt DESC, id DESC LIMIT 3"
                ),
            );
            assert_eq!(group["sample_items"], serde_json::json!(newest), "{job:?}");
        }
    }
}

#[test]
fn exports_parse_and_read_back() {
    let f = fixture("export");
    let json_path = f.dir.join("all.json");
    ok(dlq(&f.db).args(["export"]).arg(&json_path));
    let items = json(&std::fs::read_to_string(&json_path).unwrap());
    assert_eq!(
        items.as_array().unwrap().len() as i64,
        count(&f.db, "SELECT COUNT(*) FROM items")
    );

    let csv_path = f.dir.join("timeouts.csv");
    ok(dlq(&f.db)
        .args(["export", "--filter", "error_type == 'Timeout'"])
        .arg(&csv_path));
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, dlqlite::export::CSV_HEADER);
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(
        rows.len() as i64,
        count(
            &f.db,
            "SELECT COUNT(DISTINCT item_key) FROM failure_history WHERE error_type = 'Timeout'"
        )
    );
    let data: serde_json::Value = serde_json::from_str(&rows[0][2]).unwrap();
    assert!(data.is_object());
    assert_eq!(&rows[0][12], "Timeout");

    // JSON back in with dlq add, JSON lines with dlq import: the same tables.
    let fresh = f.dir.join("fresh.db");
    ok(dlq(&fresh).arg("add").arg(&json_path));
    let jsonl_path = f.dir.join("all.jsonl");
    ok(dlq(&f.db)
        .args(["export", "--format", "jsonl"])
        .arg(&jsonl_path));
    let fresh2 = f.dir.join("fresh2.db");
    let report = json(&ok(dlq(&fresh2)
        .args(["import", "--json"])
        .arg(&jsonl_path)));
    assert_eq!(report["files_rejected"], serde_json::json!([]));
    let item_rows = |db: &Path| -> Vec<Vec<serde_json::Value>> {
        table_rows(
            db,
            &format!(
                "SELECT job_id, item_id, CAST(item_data AS TEXT), {}, {}, failure_count,
                     error_signature, reprocess_eligible, manual_review_required, CAST(extra AS TEXT)
                 FROM items ORDER BY job_id, item_id",
                ts("first_attempt", true),
                ts("last_attempt", true)
            ),
        )
    };
    assert_eq!(item_rows(&fresh), item_rows(&f.db));
    assert_eq!(item_rows(&fresh2), item_rows(&f.db));
    assert_eq!(
        count(&fresh, "SELECT COUNT(*) FROM failure_history"),
        count(&f.db, "SELECT COUNT(*) FROM failure_history")
    );

    let err = fails(dlq(&f.db).args(["export"]).arg(f.dir.join("noext")));
    assert!(err.contains("--format"), "{err}");
}

#[test]
fn purge_and_clear_ask_first_and_record_events() {
    let f = fixture("purge");
    let before = count(&f.db, "SELECT COUNT(*) FROM items");
    let old = count(
        &f.db,
        "SELECT COUNT(*) FROM items WHERE last_attempt < '2025-06-01'",
    );
    assert!(old > 0 && old < before);
    let now = "2025-12-01T00:00:00Z"; // 183 days after 2025-06-01
    let purge = |args: &[&str]| {
        let mut command = dlq(&f.db);
        command
            .env("DLQ_NOW", now)
            .args(["purge", "--older-than-days", "183"])
            .args(args);
        command
    };
    let dry = json(&ok(&mut purge(&["--dry-run", "--json"])));
    assert_eq!(dry["items"].as_i64().unwrap(), old);
    assert_eq!(count(&f.db, "SELECT COUNT(*) FROM items"), before);
    // No terminal and no --yes: refused, nothing changed.
    let err = fails(&mut purge(&[]));
    // One error line (DLQ_NOW adds its warning line).
    let errors = err
        .lines()
        .filter(|l| !l.contains("warning: --now"))
        .count();
    assert!(err.contains("--yes") && errors == 1, "{err}");
    assert_eq!(count(&f.db, "SELECT COUNT(*) FROM items"), before);
    let done = json(&ok(&mut purge(&["--yes", "--json"])));
    assert_eq!(done["items"].as_i64().unwrap(), old);
    assert_eq!(done["dry_run"], false);
    assert_eq!(count(&f.db, "SELECT COUNT(*) FROM items"), before - old);
    // Again: nothing left to take, and it says so without calling it a dry run.
    let again = json(&ok(&mut purge(&["--json"])));
    assert_eq!(
        (again["items"].as_i64(), &again["dry_run"]),
        (Some(0), &false.into())
    );
    assert_eq!(
        count(&f.db, "SELECT COUNT(*) FROM events WHERE kind = 'purged'"),
        old
    );
    assert_eq!(
        count(
            &f.db,
            "SELECT COUNT(*) FROM failure_history WHERE item_key NOT IN (SELECT id FROM items)"
        ),
        0
    );

    let err = fails(dlq(&f.db).args(["clear", "gen-job"]));
    assert!(err.contains("--yes"), "{err}");
    ok(dlq(&f.db).args(["clear", "gen-job", "--yes"]));
    assert_eq!(
        count(&f.db, "SELECT COUNT(*) FROM items WHERE job_id = 'gen-job'"),
        0
    );
    assert_eq!(
        count(
            &f.db,
            "SELECT COUNT(*) FROM events WHERE kind = 'cleared' AND job_id = 'gen-job'"
        ),
        7
    );
    let stats = json(&ok(
        dlq(&f.db).args(["stats", "--job-id", "gen-job", "--json"])
    ));
    assert_eq!(stats["total_items"], 0);
}

#[test]
fn mark_survives_merges_and_events_list_it() {
    let f = fixture("mark");
    ok(dlq(&f.db).args(["mark", "t0", "--ineligible", "--manual-review"]));
    // A newer copy says eligible: the person's flags win.
    let newer = item("t0", 2, "2026-01-01T00:00:00Z", "timed out after 30s").to_string();
    let output = with_stdin(dlq(&f.db).args(["add", "--job-id", "gen-job"]), &newer);
    assert!(output.status.success());
    let item = json(&ok(dlq(&f.db).args(["inspect", "t0"])));
    assert_eq!(item["reprocess_eligible"], false);
    assert_eq!(item["manual_review_required"], true);
    assert_eq!(item["failure_count"], 2);
    let err = fails(dlq(&f.db).args(["mark", "t0"]));
    assert!(err.contains("nothing to mark"), "{err}");

    let events = jsonl(&ok(
        dlq(&f.db).args(["events", "--kind", "marked", "--format", "jsonl"])
    ));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["item_id"], "t0");
    assert_eq!(events[0]["detail"]["reprocess_eligible"], false);
    let csv = ok(dlq(&f.db).args([
        "events", "--job-id", "gen-job", "--format", "csv", "--limit", "100",
    ]));
    assert_eq!(
        csv.lines().next().unwrap(),
        "id,time,kind,job_id,item_id,detail"
    );
    assert_eq!(
        csv.lines().count() as i64 - 1,
        count(
            &f.db,
            "SELECT COUNT(*) FROM events WHERE job_id = 'gen-job'"
        )
    );
}

#[test]
fn sql_reads_and_refuses_writes() {
    let f = fixture("sql");
    let rows = jsonl(&ok(dlq(&f.db).args([
        "sql",
        "SELECT job_id, COUNT(*) AS n FROM items GROUP BY job_id ORDER BY job_id",
        "--format",
        "jsonl",
    ])));
    assert_eq!(rows.len(), 4);
    assert_eq!(
        rows.iter().find(|r| r["job_id"] == "gen-job").unwrap()["n"],
        7
    );
    let before = count(&f.db, "SELECT COUNT(*) FROM items");
    for statement in [
        "DELETE FROM items",
        "UPDATE items SET failure_count = 0",
        "DROP TABLE items",
        "SELECT 1; DELETE FROM items",
        "ATTACH 'x.db' AS x",
    ] {
        let err = fails(dlq(&f.db).args(["sql", statement]));
        assert_eq!(err.lines().count(), 1, "{statement}: {err}");
    }
    assert_eq!(count(&f.db, "SELECT COUNT(*) FROM items"), before);
    let csv = ok(dlq(&f.db).args([
        "sql",
        "SELECT 1 AS a, 'x,y' AS b, NULL AS c",
        "--format",
        "csv",
    ]));
    assert_eq!(csv, "a,b,c\n1,\"x,y\",\n");
}

#[test]
fn report_is_one_self_contained_page() {
    let f = fixture("report");
    let hostile = item(
        "<script>alert(1)</script>",
        1,
        "2025-11-22T00:00:00Z",
        "<b>bold</b> & more",
    )
    .to_string();
    assert!(
        with_stdin(dlq(&f.db).args(["add", "--job-id", "gen-job"]), &hostile)
            .status
            .success()
    );
    let page = f.dir.join("report.html");
    ok(dlq(&f.db).args(["report", "--html"]).arg(&page));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<svg"), "inline charts");
    assert!(
        !html.contains("<script"),
        "no script, and the hostile id is escaped"
    );
    assert!(html.contains("&lt;b&gt;bold&lt;/b&gt; &amp; more"));
    for remote in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(remote), "{remote}");
    }
    assert!(html.contains("Failures per") && html.contains("Top pattern groups"));
}

#[test]
fn conventions_help_completions_pipes_and_usage() {
    let f = fixture("conventions");
    for command in [
        "import",
        "list",
        "inspect",
        "stats",
        "show",
        "analyze",
        "export",
        "add",
        "purge",
        "clear",
        "mark",
        "capacity",
        "events",
        "jobs",
        "sql",
        "report",
        "db",
        "completions",
    ] {
        let help = ok(dlq(&f.db).args([command, "--help"]));
        assert!(help.contains("Example"), "{command} --help has no example");
    }
    for shell in ["bash", "zsh", "fish"] {
        assert!(ok(dlq(&f.db).args(["completions", shell])).contains("dlq"));
    }
    let output = run(dlq(&f.db).args(["list", "--limit", "nope"]));
    assert_eq!(output.status.code(), Some(2));

    // A closed pipe ends quietly with success.
    let many: String = (0..3000)
        .map(|i| item(&format!("p{i}"), 1, "2025-01-01T00:00:00Z", "x").to_string() + "\n")
        .collect();
    assert!(
        with_stdin(dlq(&f.db).args(["add", "--job-id", "pipe"]), &many)
            .status
            .success()
    );
    let mut child = dlq(&f.db)
        .args(["export", "-", "--format", "jsonl"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn reading_commands_do_not_create_a_database_at_a_wrong_path() {
    let dir = TempDir::new("no-db");
    let db = dir.join("typo.db");
    for args in [
        vec!["stats"],
        vec!["list"],
        vec!["analyze"],
        vec!["events"],
        vec!["inspect", "x"],
        vec!["purge", "--older-than-days", "1", "--yes"],
    ] {
        let err = fails(dlq(&db).args(&args));
        assert!(
            err.contains("no database") && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
    let err = fails(dlq(&db).args(["import", "/no/such/tree"]));
    assert!(err.contains("/no/such/tree"), "{err}");
    assert!(!database_exists(&db), "a database was created");
}

/// `analyze --json` adds up on every shape: listed groups plus the omitted
/// ones hold every item, for pattern groups (signatures) and message groups
/// (last messages), with any `--top`, for all jobs and for one. Message
/// groups are checked against a grouping computed here from the raw rows:
/// each item's last attempt (highest attempt_number, then latest
/// timestamp), its message normalised by the library's public function.
#[test]
fn analyze_groups_add_up_to_every_item() {
    let dir = TempDir::new("analyze-adds-up");
    let db = dir.join("dlq.db");
    // A signature per item (its message names its own path and duration),
    // items with several attempts whose last one is not the last inserted,
    // an item with no attempt, and a second job.
    let mut lines = Vec::new();
    for i in 0..40 {
        let mut value = item(
            &format!("i{i}"),
            1,
            "2025-03-01T00:00:00Z",
            &format!("cargo test failed in /src/m{i}.rs after {i}s"),
        );
        if i % 5 == 0 {
            // In the file: attempt 2 (the latest timestamp, so the last
            // attempt), attempt 1, then attempt 3 (the highest number, but
            // the earliest): the timestamp decides, not the number or the
            // place in the file.
            let history = value["failure_history"].as_array_mut().unwrap();
            let mut third = history[0].clone();
            third["attempt_number"] = 3.into();
            third["timestamp"] = "2025-02-01T00:00:00Z".into();
            third["error_message"] = format!("agent {i} timed out").into();
            let mut second = history[0].clone();
            second["attempt_number"] = 2.into();
            second["timestamp"] = "2025-04-01T00:00:00Z".into();
            second["error_message"] = format!("merge conflict in /src/x{i}.rs").into();
            history.insert(0, second);
            history.push(third);
            value["failure_count"] = 3.into();
        }
        lines.push(value);
    }
    let mut bare = item("no-attempts", 1, "2025-03-01T00:00:00Z", "x");
    bare["failure_history"] = serde_json::json!([]);
    lines.push(bare);
    add_lines(&db, "big", lines);
    add_lines(
        &db,
        "small",
        (0..3).map(|i| item(&format!("s{i}"), 1, "2025-03-02T00:00:00Z", "disk full")),
    );

    // The reference: items per pattern of their last attempt's message
    // (latest timestamp, then highest attempt number).
    let reference = |job: Option<&str>| -> BTreeMap<String, i64> {
        let mut last: BTreeMap<i64, (i64, String, String)> = BTreeMap::new();
        let attempts: Vec<(i64, i64, String, String)> = rows_as(
            &db,
            &format!(
                "SELECT item_key, attempt_number, {}, error_message FROM failure_history",
                ts("timestamp", true)
            ),
        );
        for (key, n, at, message) in attempts {
            let better = last
                .get(&key)
                .is_none_or(|(bn, bat, _)| (&at, n) > (bat, *bn));
            if better {
                last.insert(key, (n, at, message));
            }
        }
        let mut groups = BTreeMap::new();
        let items: Vec<(i64, String)> = rows_as(&db, "SELECT id, job_id FROM items");
        for (key, item_job) in items {
            if job.is_some_and(|j| j != item_job) {
                continue;
            }
            let pattern = match last.get(&key) {
                Some((_, _, message)) => dlqlite::store::normalise_message(message),
                None => "(no attempts)".to_string(),
            };
            *groups.entry(pattern).or_insert(0) += 1;
        }
        groups
    };

    for job in [None, Some("big"), Some("small")] {
        for top in ["0", "1", "2", "20"] {
            let mut command = dlq(&db);
            command.args(["analyze", "--json", "--top", top]);
            if let Some(job) = job {
                command.args(["--job-id", job]);
            }
            let a = json(&ok(&mut command));
            let total = a["total_items"].as_i64().unwrap();
            for (list, omitted) in [
                ("pattern_groups", "pattern_groups_omitted"),
                ("message_groups", "message_groups_omitted"),
            ] {
                let groups = a[list].as_array().unwrap();
                let listed: i64 = groups.iter().map(|g| g["count"].as_i64().unwrap()).sum();
                assert_eq!(
                    listed + a[omitted]["items"].as_i64().unwrap(),
                    total,
                    "{list} of {job:?} with --top {top}: {a}"
                );
                if top != "0" {
                    assert!(groups.len() <= top.parse().unwrap());
                } else {
                    assert_eq!(a[omitted], serde_json::json!({"groups": 0, "items": 0}));
                }
            }
            if top == "0" {
                let got: BTreeMap<String, i64> = a["message_groups"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|g| {
                        (
                            g["pattern"].as_str().unwrap().to_string(),
                            g["count"].as_i64().unwrap(),
                        )
                    })
                    .collect();
                assert_eq!(got, reference(job), "message groups of {job:?}");
                let signatures: i64 = a["pattern_groups"].as_array().unwrap().len() as i64;
                let distinct = count(
                    &db,
                    &format!(
                        "SELECT COUNT(DISTINCT error_signature) FROM items{}",
                        job.map(|j| format!(" WHERE job_id = '{j}'"))
                            .unwrap_or_default()
                    ),
                );
                assert_eq!(signatures, distinct);
            }
        }
    }
    let all = json(&ok(dlq(&db).args(["analyze", "--json", "--top", "0"])));
    let merge = all["message_groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["pattern"] == "merge conflict in <path>")
        .unwrap();
    assert_eq!(merge["count"], 8);
    assert_eq!(merge["signatures"], 8);
    assert!(merge["sample_message"]
        .as_str()
        .unwrap()
        .starts_with("merge conflict in /src/x"));
    let table = ok(dlq(&db).args(["analyze", "--top", "2"]));
    assert!(
        table.contains("and 40 more group(s) holding 40 item(s)"),
        "{table}"
    );
}

/// `dlq stats --json` is written piece by piece as the store streams it; it
/// must be the same text serde_json gives the collected statistics, for all
/// jobs (with a job that has no items, and `jobs` always present) and for
/// one job, including on an empty database.
#[test]
fn streamed_stats_json_is_the_collected_statistics() {
    let dir = TempDir::new("stats-stream");
    let db = dir.join("dlq.db");
    let check = |db: &Path| {
        let dlq = dlqlite::Dlq::open(super::common::target(db)).unwrap();
        let (total, jobs) = dlq.stats().unwrap();
        #[derive(serde::Serialize)]
        struct AllJobs<'a> {
            #[serde(flatten)]
            total: &'a dlqlite::store::Stats,
            jobs: &'a BTreeMap<String, dlqlite::store::Stats>,
        }
        let expected = serde_json::to_string_pretty(&AllJobs {
            total: &total,
            jobs: &jobs,
        })
        .unwrap();
        let text = ok(&mut dlq_cmd_stats(db, None));
        assert_eq!(text, expected + "\n");
        for job in jobs.keys() {
            let text = ok(&mut dlq_cmd_stats(db, Some(job)));
            let one = dlq.job_stats(job).unwrap();
            assert_eq!(text, serde_json::to_string_pretty(&one).unwrap() + "\n");
        }
    };
    ok(dlq(&db).args(["capacity", "--set", "100", "--yes"]));
    check(&db);
    add_lines(
        &db,
        "a",
        (0..5).map(|i| {
            item(
                &format!("a{i}"),
                1,
                "2025-01-01T00:00:00Z",
                &format!("m{}", i % 2),
            )
        }),
    );
    add_lines(&db, "b", [item("b0", 2, "2025-02-01T00:00:00Z", "other")]);
    ok(dlq(&db).args(["clear", "b", "--yes"]));
    check(&db);
}

fn dlq_cmd_stats(db: &Path, job: Option<&str>) -> std::process::Command {
    let mut command = dlq(db);
    command.args(["stats", "--json"]);
    if let Some(job) = job {
        command.args(["--job-id", job]);
    }
    command
}

/// `-` is standard output for every file dlq writes, never a file named
/// `-` (export and report did so already; metrics, analyze and requeue did
/// not).
#[test]
fn a_dash_is_stdout_for_every_output() {
    let dir = TempDir::new("dash-stdout");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        (0..3).map(|i| item(&format!("i{i}"), 1, "2025-01-01T00:00:00Z", "boom")),
    );
    let in_dir = |args: &[&str]| {
        let output = run(dlq(&db).current_dir(dir.path()).args(args));
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!dir.join("-").exists(), "{args:?} wrote a file named -");
        String::from_utf8(output.stdout).unwrap()
    };
    assert!(in_dir(&["metrics", "--output", "-"]).contains("dlq_items"));
    assert!(json(&in_dir(&["analyze", "--export", "-"])).is_object());
    let taken = in_dir(&["requeue", "j", "-o", "-", "--take"]);
    assert!(taken.contains("src/i0.rs"), "{taken}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
}

/// Help names each environment variable alone: no `DLQ_NOW=` with an
/// empty value after it, in any subcommand's help. The global options are
/// shown once, under their own heading in `dlq --help`; a subcommand's help
/// names them in one line (they made `retry --help` 120 lines) and they
/// still work after the subcommand.
#[test]
fn help_names_environment_variables_without_a_stray_equals_sign() {
    let dir = TempDir::new("help-env");
    let db = dir.join("dlq.db");
    let top = ok(dlq(&db).arg("--help"));
    let mut commands = subcommands(&top);
    assert!(commands.len() > 10, "{top}");
    commands.push(String::new());
    for command in commands {
        let mut run = dlq(&db);
        if !command.is_empty() {
            run.arg(&command);
        }
        let help = ok(run.arg("--help"));
        assert!(!help.contains("=]"), "{command}: {help}");
        // A page, not a manual: `-h` and `--help` are the same page, at
        // most 60 lines (docs/commands.md holds the rest).
        if !command.is_empty() {
            let nested = subcommands(&help);
            for words in std::iter::once(vec![command.as_str()])
                .chain(nested.iter().map(|n| vec![command.as_str(), n.as_str()]))
            {
                let page = ok(dlq(&db).args(&words).arg("--help"));
                let lines = page.lines().count();
                assert!(lines <= 60, "{words:?}: {lines} lines\n{page}");
                assert_eq!(page, ok(dlq(&db).args(&words).arg("-h")), "{words:?}");
            }
        }
        if command.is_empty() {
            assert!(help.contains("[env: DLQ_NOW]"), "{help}");
            assert!(help.contains("Global options:\n"), "{help}");
        } else {
            assert!(
                !help.contains("--busy-timeout-ms <MS>"),
                "{command}: {help}"
            );
            assert!(
                help.contains("Global options: --db --busy-timeout-ms --now")
                    && help.contains("(see `dlq --help`)"),
                "{command}: {help}"
            );
        }
    }
    // Nested subcommands too; and a global option after the subcommand
    // still counts.
    let help = ok(dlq(&db).args(["retention", "apply", "--help"]));
    assert!(!help.contains("--busy-timeout-ms <MS>"), "{help}");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let elsewhere = dir.join("other.db");
    let listed = ok(dlq(&elsewhere)
        .args(["list", "--format", "csv", "--db"])
        .arg(crate::common::target(&db)));
    assert!(listed.contains("\nj,a,"), "{listed}");
}

/// With `--yes` nobody was shown a count, so `purge`, `clear`, `capacity
/// --set` and `retention apply` act on what is there when they run: adds
/// landing beside them (a cron line's neighbours) never make them fail.
#[test]
fn yes_acts_on_what_is_there_while_adds_run() {
    let dir = TempDir::new("yes-under-adds");
    let db = dir.join("dlq.db");
    let old =
        |n: u32, attempt: u32| item(&format!("o{n}"), attempt, "2020-01-01T00:00:00Z", "boom");
    add_lines(&db, "j", (0..50).map(|n| old(n, 1)));
    ok(dlq(&db).args(["retention", "set", "--max-age", "30d"]));
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        // Old items again and again, new attempts of them too: each add
        // changes what a count of the job (or of its old items) saw.
        let adder = scope.spawn(|| {
            let mut round = 2;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                add_lines(&db, "j", (0..50).map(|n| old(n, round)));
                round += 1;
            }
        });
        for _ in 0..4 {
            for args in [
                &["purge", "--older-than-days", "30", "--yes"][..],
                &["clear", "j", "--yes"],
                &["capacity", "--job-id", "j", "--set", "10", "--yes"],
                &["retention", "apply", "--yes"],
            ] {
                let out = run(dlq(&db).args(args));
                assert!(
                    out.status.success(),
                    "{args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        adder.join().unwrap();
    });
}

/// `item.priority >= "5"` ordered a JSON number against a string, which
/// SQLite sorts after every number: it matched nothing and exited 0. It is
/// now a usage error naming the field and the number to write; equality
/// with a quoted number still compares text.
#[test]
fn ordering_item_data_against_a_quoted_number_is_a_usage_error() {
    let dir = TempDir::new("filter-quoted-number");
    let db = dir.join("dlq.db");
    let mut value = item("a", 1, "2025-01-01T00:00:00Z", "boom");
    value["item_data"]["priority"] = 7.into();
    value["item_data"]["zip"] = "02134".into();
    add_lines(&db, "j", [value]);
    let output = run(dlq(&db).args(["list", "--filter", r#"item.priority >= "5""#]));
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("item.priority") && said.contains("write 5 without quotes"),
        "{said}"
    );
    // Unquoted, it compares numbers; == with a quoted number compares text.
    let listed = ok(dlq(&db).args([
        "list",
        "--filter",
        "item.priority >= 5",
        "--format",
        "jsonl",
    ]));
    assert_eq!(listed.lines().count(), 1, "{listed}");
    let listed = ok(dlq(&db).args([
        "list",
        "--filter",
        r#"item.zip == "02134""#,
        "--format",
        "jsonl",
    ]));
    assert_eq!(listed.lines().count(), 1, "{listed}");
    // The rule is in the help.
    let help = ok(dlq(&db).args(["list", "--help"]));
    assert!(help.contains("against a quoted number"), "{help}");
}

/// `export --format csv` carries the `category` column `list --format csv`
/// has, with the same value for each item (after a rule changes it too).
#[test]
fn csv_export_carries_the_category_of_the_listing() {
    let dir = TempDir::new("export-category");
    let db = dir.join("dlq.db");
    let mut timeout = item("t", 1, "2025-01-01T00:00:00Z", "slow");
    timeout["failure_history"][0]["error_type"] = "Timeout".into();
    let mut odd = item("o", 1, "2025-01-01T00:00:00Z", "odd");
    odd["failure_history"][0]["error_type"] = "Odd".into();
    add_lines(
        &db,
        "j",
        [timeout, odd, item("c", 1, "2025-01-01T00:00:00Z", "boom")],
    );
    ok(dlq(&db).args(["categories", "set", "Odd", "permanent"]));
    let by_item = |text: &str| -> BTreeMap<String, String> {
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
        let id = header.iter().position(|h| h == "item_id").unwrap();
        let category = header
            .iter()
            .position(|h| h == "category")
            .unwrap_or_else(|| panic!("no category column: {header:?}"));
        reader
            .records()
            .map(|r| {
                let r = r.unwrap();
                (r[id].to_string(), r[category].to_string())
            })
            .collect()
    };
    let exported = by_item(&ok(dlq(&db).args(["export", "-", "--format", "csv"])));
    let listed = by_item(&ok(dlq(&db).args(["list", "--format", "csv"])));
    assert_eq!(exported, listed);
    assert_eq!(exported["o"], "permanent", "{exported:?}");
    assert_eq!(exported.len(), 3, "{exported:?}");
}

/// "Top agents" ranks agents only where some agent failed more than once:
/// data from the JSON layout names each item's agent after the item, and
/// a list of them, each failing once, says nothing.
#[test]
fn top_agents_are_shown_only_where_agents_repeat() {
    let dir = TempDir::new("top-agents");
    let db = dir.join("dlq.db");
    // One agent per item (the common `item` fixture: agent-<id>).
    add_lines(
        &db,
        "j",
        ["a", "b", "c"].map(|id| item(id, 1, "2025-01-01T00:00:00Z", "boom")),
    );
    let text = ok(dlq(&db).args(["analyze", "--job-id", "j"]));
    assert!(
        text.contains(dlqlite::store::AGENTS_DO_NOT_REPEAT),
        "{text}"
    );
    assert!(!text.contains("agent-a"), "{text}");
    // The JSON keeps the counts all the same.
    let a = json(&ok(dlq(&db).args(["analyze", "--json", "--job-id", "j"])));
    assert_eq!(a["top_agents"].as_array().unwrap().len(), 3);
    // An agent that failed twice stands out.
    let mut again = item("d", 1, "2025-01-02T00:00:00Z", "boom");
    again["failure_history"][0]["agent_id"] = "agent-a".into();
    add_lines(&db, "j", [again]);
    let text = ok(dlq(&db).args(["analyze", "--job-id", "j"]));
    assert!(
        !text.contains(dlqlite::store::AGENTS_DO_NOT_REPEAT),
        "{text}"
    );
    assert!(text.contains("agent-a"), "{text}");
}
