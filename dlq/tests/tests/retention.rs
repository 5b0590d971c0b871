//! Retention policies through the real binary: `dlq retention set`,
//! `unset`, `list` and `apply [--dry-run]` at a fixed `--now`. What goes is
//! checked against an oracle written here (the precedence rule of schema
//! V5, in Rust) and read back with plain SQL, never through dlq.

use crate::common::{add_lines, count, dlq, exec, fails, item, json, ok, run, strings, TempDir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// "Now" for every command of these tests.
const NOW: &str = "2025-12-01T00:00:00Z";
const DAY: i64 = 86_400;

/// The error types used, with their seeded categories.
const TYPES: [(&str, &str); 4] = [
    ("Timeout", "transient"),
    ("PermissionError", "permanent"),
    ("CommandFailed", "conditionally_recoverable"),
    ("QuotaExceeded", "unclassified"),
];

/// Ages of the items, in seconds before NOW: a day and an hour, exactly a
/// week (a 7d policy keeps it: "older than" is strict), 10, 40 and 400 days.
const AGES: [i64; 5] = [DAY + 3_600, 7 * DAY, 10 * DAY, 40 * DAY, 400 * DAY];

/// One stored item of the fixture.
#[derive(Clone, Debug)]
struct Fixture {
    job: &'static str,
    item_id: String,
    error_type: &'static str,
    age: i64,
}

/// dlq with the fixed clock.
fn at_now(db: &Path) -> std::process::Command {
    let mut command = dlq(db);
    command.args(["--now", NOW]);
    command
}

/// An item whose one attempt failed with `error_type`, `age` seconds
/// before NOW.
fn aged(id: &str, error_type: &str, age: i64) -> serde_json::Value {
    let time = dlqlite::Timestamp::parse(NOW)
        .unwrap()
        .minus_seconds(age)
        .to_legacy();
    let mut value = item(id, 1, &time, &format!("{error_type} in {id}"));
    value["failure_history"][0]["error_type"] = serde_json::json!(error_type);
    value
}

/// Every type at every age, in jobs A and B: 40 items.
fn setup(dir: &TempDir) -> (PathBuf, Vec<Fixture>) {
    let db = dir.join("dlq.db");
    let mut fixtures = Vec::new();
    for job in ["A", "B"] {
        let mut lines = Vec::new();
        for (error_type, _) in TYPES {
            for age in AGES {
                let item_id = format!("{error_type}-{}", age / 3_600);
                lines.push(aged(&item_id, error_type, age));
                fixtures.push(Fixture {
                    job,
                    item_id,
                    error_type,
                    age,
                });
            }
        }
        add_lines(&db, job, lines);
    }
    (db, fixtures)
}

/// A policy as the oracle sees it.
#[derive(Clone, Debug)]
struct Policy {
    id: i64,
    job: Option<&'static str>,
    category: Option<&'static str>,
    /// None: keep forever.
    max_age: Option<i64>,
}

/// Sets a policy through dlq and returns it with the id dlq gave it.
fn set(
    db: &Path,
    job: Option<&'static str>,
    category: Option<&'static str>,
    max_age: Option<(&str, i64)>,
) -> Policy {
    let mut command = at_now(db);
    command.args(["retention", "set", "--json"]);
    if let Some(job) = job {
        command.args(["--job-id", job]);
    }
    if let Some(category) = category {
        command.args(["--category", category]);
    }
    match max_age {
        Some((text, _)) => command.args(["--max-age", text]),
        None => command.arg("--keep-forever"),
    };
    let change = json(&ok(&mut command));
    let after = &change["after"];
    assert_eq!(after["job_id"], serde_json::json!(job), "{change}");
    assert_eq!(after["category"], serde_json::json!(category), "{change}");
    assert_eq!(
        after["max_age_seconds"],
        serde_json::json!(max_age.map(|(_, s)| s)),
        "{change}"
    );
    Policy {
        id: after["id"].as_i64().unwrap(),
        job,
        category,
        max_age: max_age.map(|(_, seconds)| seconds),
    }
}

/// The oracle: the policy governing an item. (job, category) if there is
/// one; else of (job, any) and (any, category) the one that keeps longer
/// (none = forever; a tie goes to the job's), or whichever exists; else
/// (any, any).
fn governing<'a>(
    policies: &'a [Policy],
    item: &Fixture,
    categories: &BTreeMap<&str, &str>,
) -> Option<&'a Policy> {
    let category = categories[item.error_type];
    let find = |job: Option<&str>, cat: Option<&str>| {
        policies.iter().find(|p| p.job == job && p.category == cat)
    };
    if let Some(p) = find(Some(item.job), Some(category)) {
        return Some(p);
    }
    let keep = |p: &Policy| p.max_age.unwrap_or(i64::MAX);
    match (find(Some(item.job), None), find(None, Some(category))) {
        (Some(job), Some(cat)) => Some(if keep(cat) > keep(job) { cat } else { job }),
        (Some(job), None) => Some(job),
        (None, Some(cat)) => Some(cat),
        (None, None) => find(None, None),
    }
}

/// The oracle's removals: policy id -> items, and the items left.
fn expected(
    policies: &[Policy],
    fixtures: &[Fixture],
    categories: &BTreeMap<&str, &str>,
) -> (BTreeMap<i64, usize>, Vec<String>) {
    let mut removed: BTreeMap<i64, usize> = policies.iter().map(|p| (p.id, 0)).collect();
    let mut left = Vec::new();
    for item in fixtures {
        match governing(policies, item, categories) {
            Some(Policy {
                id,
                max_age: Some(max_age),
                ..
            }) if item.age > *max_age => *removed.get_mut(id).unwrap() += 1,
            _ => left.push(format!("{}/{}", item.job, item.item_id)),
        }
    }
    left.sort();
    (removed, left)
}

fn seeded() -> BTreeMap<&'static str, &'static str> {
    TYPES.into_iter().collect()
}

/// `retention apply [--dry-run] --json` at NOW: the per-policy counts, and
/// the whole report.
fn apply(db: &Path, dry_run: bool) -> (BTreeMap<i64, usize>, serde_json::Value) {
    let mut command = at_now(db);
    command.args(["retention", "apply", "--yes", "--json"]);
    if dry_run {
        command.arg("--dry-run");
    }
    let report = json(&ok(&mut command));
    assert_eq!(report["dry_run"], dry_run, "{report}");
    let per_policy: BTreeMap<i64, usize> = report["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_i64().unwrap(),
                p["removed"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    assert_eq!(
        report["removed"].as_u64().unwrap() as usize,
        per_policy.values().sum::<usize>(),
        "{report}"
    );
    (per_policy, report)
}

/// The items left, read with SQL.
fn left(db: &Path) -> Vec<String> {
    strings(
        db,
        "SELECT job_id || '/' || item_id FROM items ORDER BY job_id || '/' || item_id",
    )
}

/// `purged` events per policy id, read with SQL.
fn purged_by_policy(db: &Path) -> BTreeMap<i64, usize> {
    crate::common::rows_as::<(i64, i64)>(
        db,
        &format!(
            "SELECT CAST({} AS BIGINT), COUNT(*) FROM events WHERE kind = 'purged' GROUP BY 1",
            crate::common::json_at("detail", "retention_policy.id", true)
        ),
    )
    .into_iter()
    .map(|(id, n)| (id, n as usize))
    .collect()
}

#[test]
fn dry_run_counts_exactly_what_apply_removes_per_policy() {
    let dir = TempDir::new("retention-apply");
    let (db, fixtures) = setup(&dir);
    // All four levels of precedence, and a keep-forever in the middle.
    let policies = vec![
        set(&db, None, None, Some(("30d", 30 * DAY))),
        set(&db, None, Some("transient"), Some(("7d", 7 * DAY))),
        set(&db, None, Some("permanent"), None),
        set(&db, Some("A"), None, Some(("365d", 365 * DAY))),
        set(&db, Some("A"), Some("permanent"), Some(("5d", 5 * DAY))),
        set(&db, Some("B"), Some("unclassified"), None),
    ];
    let (removals, survivors) = expected(&policies, &fixtures, &seeded());
    // The fixture exercises every policy that can remove something.
    for policy in policies.iter().filter(|p| p.max_age.is_some()) {
        assert!(removals[&policy.id] > 0, "{policy:?} removes nothing");
    }

    let (dry, _) = apply(&db, true);
    assert_eq!(dry, removals);
    // A dry run changed nothing.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 40);
    assert_eq!(purged_by_policy(&db), BTreeMap::new());

    let (done, report) = apply(&db, false);
    assert_eq!(done, dry, "{report}");
    assert_eq!(left(&db), survivors);
    // One purged event per removed item, naming its policy.
    let nonzero: BTreeMap<i64, usize> = removals
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(&id, &n)| (id, n))
        .collect();
    assert_eq!(purged_by_policy(&db), nonzero);
    let detail = strings(
        &db,
        "SELECT detail FROM events WHERE kind = 'purged' AND item_id = 'Timeout-240' AND job_id = 'B'",
    );
    let detail = json(&detail[0]);
    let transient = policies[1].id;
    assert_eq!(detail["retention_policy"]["id"], transient, "{detail}");
    assert_eq!(detail["retention_policy"]["category"], "transient");
    assert_eq!(detail["retention_policy"]["max_age_seconds"], 7 * DAY);
    assert_eq!(detail["cutoff"], "2025-11-24T00:00:00Z");
    // The counters agree with the rows left.
    assert_eq!(
        count(&db, "SELECT SUM(item_count) FROM jobs"),
        survivors.len() as i64
    );

    // Nothing is left for a second apply at the same now.
    let (again, _) = apply(&db, false);
    assert!(again.values().all(|&n| n == 0), "{again:?}");
    assert_eq!(left(&db), survivors);
}

#[test]
fn keep_forever_protects_until_it_is_unset() {
    let dir = TempDir::new("retention-forever");
    let (db, fixtures) = setup(&dir);
    let mut policies = vec![
        set(&db, None, None, Some(("1d", DAY))),
        set(&db, None, Some("permanent"), None),
    ];
    let (removals, survivors) = expected(&policies, &fixtures, &seeded());
    assert_eq!(apply(&db, true).0, removals);
    apply(&db, false);
    // Every item is older than a day: the permanent ones stay, all of
    // them, and nothing else does.
    assert_eq!(left(&db), survivors);
    assert_eq!(
        strings(&db, "SELECT DISTINCT last_error_type FROM items"),
        ["PermissionError"]
    );
    assert_eq!(survivors.len(), 10);

    // Unset: the permanent items fall to the any-any policy.
    let out = run(at_now(&db).args(["retention", "unset", "--category", "permanent", "--json"]));
    assert!(out.status.success());
    let change = json(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(change["after"], serde_json::Value::Null);
    assert_eq!(change["before"]["max_age_seconds"], serde_json::Value::Null);
    assert_eq!(change["would_remove_total"], 10);
    policies.pop();
    let stored: Vec<Fixture> = fixtures
        .into_iter()
        .filter(|f| survivors.contains(&format!("{}/{}", f.job, f.item_id)))
        .collect();
    let (removals, survivors) = expected(&policies, &stored, &seeded());
    assert_eq!(apply(&db, true).0, removals);
    apply(&db, false);
    assert_eq!(left(&db), survivors);
    assert_eq!(survivors, Vec::<String>::new());

    // Unsetting it again: not there, exit 1.
    let out = run(dlq(&db).args(["retention", "unset", "--category", "permanent"]));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no retention policy for any job, category permanent"),
        "{stderr}"
    );
}

/// A job's age policy and a category kept forever both match a job's
/// permanent items: neither is more specific, and the keep wins. Where the
/// job keeps longer than a category's age, the job's age governs.
#[test]
fn a_job_age_does_not_remove_a_category_kept_forever() {
    let dir = TempDir::new("retention-cross");
    let (db, fixtures) = setup(&dir);
    let policies = vec![
        set(&db, None, Some("permanent"), None),
        set(&db, None, Some("transient"), Some(("1d", DAY))),
        set(&db, Some("A"), None, Some(("30d", 30 * DAY))),
    ];
    let (removals, survivors) = expected(&policies, &fixtures, &seeded());
    assert_eq!(apply(&db, true).0, removals);
    apply(&db, false);
    assert_eq!(left(&db), survivors);
    // Every permanent item of A is still there, old ones included.
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE job_id = 'A' AND last_error_type = 'PermissionError'"
        ),
        5
    );
    // A's transient items older than a day but not 30 days stay (A keeps
    // them longer); B's go after a day.
    let transient_left = |job: &str| {
        count(
            &db,
            &format!(
                "SELECT COUNT(*) FROM items WHERE job_id = '{job}'
                 AND last_error_type IN ('Timeout', 'ResourceExhausted', 'WorktreeError')"
            ),
        )
    };
    let a_expected = fixtures
        .iter()
        .filter(|f| f.job == "A" && seeded()[f.error_type] == "transient" && f.age <= 30 * DAY)
        .count() as i64;
    let b_expected = fixtures
        .iter()
        .filter(|f| f.job == "B" && seeded()[f.error_type] == "transient" && f.age <= DAY)
        .count() as i64;
    assert!(a_expected > b_expected, "the fixture tells the two apart");
    assert_eq!(transient_left("A"), a_expected);
    assert_eq!(transient_left("B"), b_expected);
}

#[test]
fn with_no_policy_apply_removes_nothing() {
    let dir = TempDir::new("retention-none");
    let (db, _) = setup(&dir);
    for dry_run in [true, false] {
        let mut command = at_now(&db);
        command.args(["retention", "apply"]);
        if dry_run {
            command.arg("--dry-run");
        }
        let out = run(&mut command);
        assert!(out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("no retention policies"), "{stderr}");
        let (per_policy, report) = apply(&db, dry_run);
        assert_eq!(per_policy, BTreeMap::new());
        assert_eq!(report["removed"], 0);
    }
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 40);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'purged'"),
        0
    );
    let out = run(dlq(&db).args(["retention", "list"]));
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("no retention policies for items (apply removes no item)"));
    assert_eq!(
        json(&ok(dlq(&db).args([
            "retention",
            "list",
            "--format",
            "json"
        ]))),
        serde_json::json!([])
    );
}

#[test]
fn a_remapped_category_changes_which_policy_applies() {
    let dir = TempDir::new("retention-remap");
    let (db, fixtures) = setup(&dir);
    let policies = vec![
        set(&db, None, None, None),
        set(&db, None, Some("transient"), Some(("7d", 7 * DAY))),
        set(&db, None, Some("permanent"), Some(("30d", 30 * DAY))),
    ];
    let mut categories = seeded();
    let (before, _) = expected(&policies, &fixtures, &categories);
    assert_eq!(apply(&db, true).0, before);

    // QuotaExceeded was unclassified (kept forever); now it is transient,
    // and Timeout is permanent (30d instead of 7d).
    ok(dlq(&db).args(["categories", "set", "QuotaExceeded", "transient"]));
    ok(dlq(&db).args(["categories", "set", "Timeout", "permanent"]));
    categories.insert("QuotaExceeded", "transient");
    categories.insert("Timeout", "permanent");
    let (after, survivors) = expected(&policies, &fixtures, &categories);
    assert_ne!(after, before);
    assert_eq!(apply(&db, true).0, after);
    apply(&db, false);
    assert_eq!(left(&db), survivors);
    // The old QuotaExceeded items went; the 10-day-old Timeout items stayed.
    let quota = "SELECT COUNT(*) FROM items WHERE last_error_type = 'QuotaExceeded'";
    assert_eq!(count(&db, quota), 4);
    assert_eq!(
        strings(
            &db,
            "SELECT job_id || '/' || item_id FROM items WHERE item_id = 'Timeout-240' ORDER BY 1"
        ),
        ["A/Timeout-240", "B/Timeout-240"]
    );
}

#[test]
fn list_shows_each_policy_with_its_items() {
    let dir = TempDir::new("retention-list");
    let (db, fixtures) = setup(&dir);
    let policies = vec![
        set(&db, None, None, Some(("30d", 30 * DAY))),
        set(&db, Some("A"), Some("transient"), None),
        set(&db, None, Some("transient"), Some(("36h", 36 * 3_600))),
    ];
    let categories = seeded();
    let (removals, _) = expected(&policies, &fixtures, &categories);
    let rows = json(&ok(at_now(&db).args([
        "retention",
        "list",
        "--format",
        "json",
    ])));
    let rows = rows.as_array().unwrap();
    // Precedence order: the job's own policy, then any job's category
    // policy, then any-any.
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [policies[1].id, policies[2].id, policies[0].id]);
    for row in rows {
        let id = row["id"].as_i64().unwrap();
        let governed = fixtures
            .iter()
            .filter(|f| governing(&policies, f, &categories).map(|p| p.id) == Some(id))
            .count();
        assert_eq!(row["items"], governed, "{row}");
        assert_eq!(row["would_remove"], removals[&id], "{row}");
    }
    assert_eq!(rows[0]["job_id"], "A");
    assert_eq!(rows[0]["max_age"], "forever");
    assert_eq!(rows[0]["max_age_seconds"], serde_json::Value::Null);
    assert_eq!(rows[1]["job_id"], serde_json::Value::Null);
    assert_eq!(rows[1]["max_age"], "36h");
    assert_eq!(rows[2]["category"], serde_json::Value::Null);
    assert_eq!(rows[2]["max_age"], "30d");
    // The table says * for any.
    let table = ok(at_now(&db).args(["retention", "list"]));
    let header = table.lines().next().unwrap();
    for column in ["ID", "JOB", "CATEGORY", "MAX AGE", "ITEMS", "WOULD REMOVE"] {
        assert!(header.contains(column), "{table}");
    }
    let last = table.lines().last().unwrap();
    let cells: Vec<&str> = last.split_whitespace().collect();
    assert_eq!(cells[1..4], ["*", "*", "30d"], "{table}");
}

#[test]
fn set_replaces_a_scope_and_is_audited() {
    let dir = TempDir::new("retention-set");
    let (db, _) = setup(&dir);
    let first = set(&db, Some("A"), None, Some(("30d", 30 * DAY)));
    let out = run(at_now(&db).args([
        "retention",
        "set",
        "--job-id",
        "A",
        "--max-age",
        "2w",
        "--json",
    ]));
    assert!(out.status.success());
    let change = json(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(change["before"]["max_age_seconds"], 30 * DAY);
    assert_eq!(change["after"]["max_age_seconds"], 14 * DAY);
    assert_eq!(change["after"]["id"], first.id);
    // A's items older than 14 days: the 40- and 400-day ones of 4 types.
    assert_eq!(change["would_remove"], 8);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("remove after 14d") && stderr.contains("would remove 8 items"),
        "{stderr}"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM retention_policies"), 1);

    // The same again changes nothing and writes no event.
    ok(dlq(&db).args(["retention", "set", "--job-id", "A", "--max-age", "14d"]));
    let events = strings(
        &db,
        "SELECT detail FROM events WHERE kind = 'retention_set' ORDER BY id",
    );
    assert_eq!(events.len(), 2, "{events:?}");
    let last = json(&events[1]);
    assert_eq!(last["job_id"], "A");
    assert_eq!(last["before"]["max_age_seconds"], 30 * DAY);
    assert_eq!(last["after"]["max_age_seconds"], 14 * DAY);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'retention_set' AND job_id = 'A'"
        ),
        2
    );

    // A job that does not exist yet: allowed, with a note.
    let out = run(dlq(&db).args(["retention", "set", "--job-id", "later", "--keep-forever"]));
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("job \"later\" has no items yet"));
}

#[test]
fn bad_input_is_one_line_and_changes_nothing() {
    let dir = TempDir::new("retention-bad");
    let (db, _) = setup(&dir);
    let usage = |args: &[&str], needle: &str| {
        let out = run(dlq(&db).args(args));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    };
    usage(
        &["retention", "set"],
        "--max-age DURATION or --keep-forever",
    );
    usage(
        &["retention", "set", "--max-age", "7d", "--keep-forever"],
        "cannot be used with",
    );
    usage(
        &["retention", "set", "--max-age", "0d"],
        "not more than zero",
    );
    usage(&["retention", "set", "--max-age=-3d"], "not more than zero");
    usage(&["retention", "set", "--max-age", "7"], "not a duration");
    usage(&["retention", "set", "--max-age", "1y"], "not a duration");
    usage(
        &[
            "retention",
            "set",
            "--category",
            "transiant",
            "--max-age",
            "7d",
        ],
        "did you mean \"transient\"",
    );
    let stderr = fails(dlq(&db).args(["retention", "set", "--job-id", "", "--max-age", "7d"]));
    assert!(stderr.contains("job id"), "{stderr}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM retention_policies"), 0);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'retention_set'"
        ),
        0
    );
}

/// Audit-log events are asked about as items are: with only events due,
/// `retention apply` without a terminal and without --yes removes none.
#[test]
fn apply_asks_before_it_trims_the_audit_log() {
    if crate::common::sqlite_only("events aged by hand with SQLite's SQL") {
        return;
    }
    let dir = TempDir::new("retention-asks-events");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    ok(dlq(&db).args(["retention", "set", "--events", "--max-age", "1d"]));
    exec(
        &db,
        "UPDATE events SET time = '2020-01-01T00:00:00.000000000Z'",
    );
    let events = count(&db, "SELECT COUNT(*) FROM events");
    let output = run(dlq(&db).args(["retention", "apply"]));
    assert_eq!(output.status.code(), Some(2), "as purge: a usage error");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("audit-log event") && said.contains("pass --yes"),
        "{said}"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM events"), events);
    ok(dlq(&db).args(["retention", "apply", "--yes"]));
    assert!(count(&db, "SELECT COUNT(*) FROM events") < events);
}

/// `retention apply` asks as purge does: without a terminal and without
/// --yes it removes nothing (exit 2, "pass --yes"); and what it removes is what it
/// counted: an item that fails again after the count makes it refuse.
#[test]
fn apply_asks_first_and_removes_what_it_counted() {
    let dir = TempDir::new("retention-asks");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        (0..3).map(|n| item(&format!("old{n}"), 1, "2020-01-01T00:00:00Z", "boom")),
    );
    ok(at_now(&db).args(["retention", "set", "--max-age", "30d"]));
    let output = run(at_now(&db).args(["retention", "apply"]));
    assert_eq!(output.status.code(), Some(2), "as purge: a usage error");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("pass --yes"), "{said}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
    // Through the library: counted, then one of them fails again.
    let dlq = dlqlite::Dlq::open(crate::common::target(&db)).unwrap();
    let now = dlqlite::Timestamp::parse(NOW).unwrap();
    let counted = dlq.apply_retention_at(now, true).unwrap();
    assert_eq!(counted.removed, 3);
    let mut again = item("old0", 2, "2020-01-02T00:00:00Z", "boom again");
    again["failure_count"] = 2.into();
    dlq.add(
        "j",
        &dlqlite::DeadLetteredItem::from_json_str(&again.to_string()).unwrap(),
    )
    .unwrap();
    let error = dlq.apply_retention_counted(&counted).unwrap_err();
    assert_eq!(error.kind(), dlqlite::ErrorKind::Conflict, "{error}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
    let counted = dlq.apply_retention_at(now, true).unwrap();
    assert_eq!(dlq.apply_retention_counted(&counted).unwrap().removed, 3);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
}
