//! Failure categories through the real binary: the seeded mapping, a
//! user's remapping with `dlq categories set`, and that every reader
//! follows it (list, the filter field, analyze, retry --category, the
//! item_summary view, the audit log).

use crate::common::{add_lines, count, dlq, item, json, ok, strings, TempDir};
use std::path::Path;

/// An item whose one attempt failed with `error_type`.
fn typed(id: &str, error_type: &str) -> serde_json::Value {
    let mut value = item(
        id,
        1,
        "2025-11-23T10:00:00Z",
        &format!("{error_type} in {id}"),
    );
    value["failure_history"][0]["error_type"] = serde_json::json!(error_type);
    value
}

/// item id -> category, as `dlq list --format json` shows it.
fn listed(db: &Path, filter: Option<&str>) -> Vec<(String, String)> {
    let mut command = dlq(db);
    command.args(["list", "--limit", "0", "--format", "json"]);
    if let Some(filter) = filter {
        command.args(["--filter", filter]);
    }
    let mut rows: Vec<(String, String)> = json(&ok(&mut command))
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["item_id"].as_str().unwrap().to_string(),
                row["category"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    rows.sort();
    rows
}

fn pairs(rows: &[(&str, &str)]) -> Vec<(String, String)> {
    rows.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn setup(dir: &TempDir) -> std::path::PathBuf {
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "J",
        [
            typed("a", "Timeout"),
            typed("b", "PermissionError"),
            typed("c", "QuotaExceeded"),
            typed("d", "MergeConflict"),
        ],
    );
    db
}

#[test]
fn the_seeded_categories_show_in_list_and_the_view() {
    let dir = TempDir::new("categories-seeded");
    let db = setup(&dir);
    assert_eq!(
        listed(&db, None),
        pairs(&[
            ("a", "transient"),
            ("b", "permanent"),
            ("c", "unclassified"),
            ("d", "conditionally_recoverable"),
        ])
    );
    // The view a sqlite3 user reads says the same.
    assert_eq!(
        strings(
            &db,
            "SELECT item_id || '=' || category FROM item_summary ORDER BY item_id"
        ),
        [
            "a=transient",
            "b=permanent",
            "c=unclassified",
            "d=conditionally_recoverable"
        ]
    );
    let table = ok(dlq(&db).args(["list", "--wide"]));
    assert!(
        table.lines().next().unwrap().contains("CATEGORY"),
        "{table}"
    );
}

#[test]
fn a_remapped_type_changes_list_filter_analyze_and_the_view() {
    let dir = TempDir::new("categories-remap");
    let db = setup(&dir);
    let transient = || listed(&db, Some(r#"category == "transient""#));
    assert_eq!(transient(), pairs(&[("a", "transient")]));
    // A cut listing counts what matches (from the counters, for a
    // category alone): the count follows a remap too.
    let showing = |db: &Path| {
        let output = dlq(db)
            .args([
                "list",
                "--limit",
                "1",
                "--filter",
                r#"category == "transient""#,
            ])
            .output()
            .unwrap();
        String::from_utf8(output.stderr).unwrap()
    };
    assert_eq!(showing(&db), "");
    let analyze = |db: &Path| json(&ok(dlq(db).args(["analyze", "--json"])));
    assert_eq!(analyze(&db)["failure_categories"]["unclassified"], 1);

    let out = dlq(&db)
        .args(["categories", "set", "QuotaExceeded", "transient", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let change = json(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(change["before"], serde_json::Value::Null);
    assert_eq!(change["category"], "transient");
    assert_eq!(change["items"], 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("QuotaExceeded: unclassified -> transient")
    );

    assert_eq!(
        transient(),
        pairs(&[("a", "transient"), ("c", "transient")])
    );
    assert!(
        showing(&db).contains("showing 1 of 2 items"),
        "{}",
        showing(&db)
    );
    let a = analyze(&db);
    assert_eq!(a["failure_categories"]["transient"], 2);
    assert!(a["failure_categories"].get("unclassified").is_none(), "{a}");
    assert_eq!(
        a["error_distribution"]["categories"]["QuotaExceeded"],
        "transient"
    );
    assert_eq!(
        strings(&db, "SELECT category FROM item_summary WHERE item_id = 'c'"),
        ["transient"]
    );

    // A built-in type moves too, and `!=` sees it.
    ok(dlq(&db).args(["categories", "set", "Timeout", "permanent"]));
    assert_eq!(
        listed(&db, Some(r#"category != "permanent""#)),
        pairs(&[("c", "transient"), ("d", "conditionally_recoverable")])
    );
    let analysis = analyze(&db);
    assert_eq!(analysis["failure_categories"]["permanent"], 2);

    // Each change is in the audit log.
    let events = json(&ok(dlq(&db).args([
        "events",
        "--kind",
        "category_set",
        "--format",
        "json",
    ])));
    assert_eq!(events.as_array().unwrap().len(), 2);
    assert_eq!(events[0]["detail"]["error_type"], "Timeout");
    assert_eq!(events[0]["detail"]["before"], "transient");
}

#[test]
fn categories_lists_types_with_their_items() {
    let dir = TempDir::new("categories-list");
    let db = setup(&dir);
    let rows = json(&ok(dlq(&db).args(["categories", "--format", "json"])));
    let find = |name: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|row| row["error_type"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not listed: {rows}"))
    };
    assert_eq!(find("Timeout")["category"], "transient");
    assert_eq!(find("Timeout")["items"], 1);
    assert_eq!(find("WorktreeError")["items"], 0);
    // A type only items know is listed as unclassified.
    assert_eq!(find("QuotaExceeded")["category"], "unclassified");
    assert_eq!(find("QuotaExceeded")["items"], 1);
    // `list` is the same listing.
    assert_eq!(
        json(&ok(dlq(&db).args([
            "categories",
            "list",
            "--format",
            "json"
        ]))),
        rows
    );
}

#[test]
fn retry_category_is_short_for_the_filter() {
    let dir = TempDir::new("categories-retry");
    let db = setup(&dir);
    let dry = |extra: &[&str]| {
        let mut command = dlq(&db);
        command.args(["retry", "J", "--exec", "true", "--dry-run", "--json"]);
        command.args(extra);
        let out = json(&ok(&mut command));
        let mut ids: Vec<String> = out["items"]
            .as_array()
            .unwrap_or_else(|| panic!("{out}"))
            .iter()
            .map(|i| i.as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(dry(&["--category", "permanent", "--force"]), ["b"]);
    ok(dlq(&db).args(["categories", "set", "QuotaExceeded", "permanent"]));
    assert_eq!(dry(&["--category", "permanent", "--force"]), ["b", "c"]);
    // With --filter both must hold.
    assert_eq!(
        dry(&[
            "--category",
            "permanent",
            "--force",
            "--filter",
            r#"item_id == "c""#
        ]),
        ["c"]
    );
}

#[test]
fn bad_categories_and_types_are_refused_in_one_line() {
    let dir = TempDir::new("categories-bad");
    let db = setup(&dir);
    for (args, wanted) in [
        (
            vec!["categories", "set", "Timeout", "permenent"],
            "did you mean \"permanent\"",
        ),
        (vec!["categories", "set", "", "permanent"], "error type"),
        (vec!["categories", "set", "  ", "permanent"], "blank"),
        (
            vec!["list", "--filter", r#"category == "transint""#],
            "category is one of",
        ),
        (
            vec!["retry", "J", "--exec", "true", "--category", "sometimes"],
            "the categories are",
        ),
    ] {
        let output = dlq(&db).args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(wanted), "{args:?}: {stderr}");
        assert!(!stderr.contains('\u{1b}'), "{args:?}: {stderr}");
    }
    // A name attempts can carry, control characters and all, can be
    // classified, and is escaped where it is shown.
    let output = dlq(&db)
        .args(["categories", "set", "a\u{1b}[2Jb", "permanent"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        !stderr.contains('\u{1b}') && stderr.contains("permanent"),
        "{stderr}"
    );
    // Nothing was changed by the refusals.
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'category_set'"
        ),
        1
    );
}
