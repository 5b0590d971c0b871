//! The derived counters (`jobs` counters, `signature_counts`,
//! `error_type_counts`, `items.last_error_type`) against a reference
//! computed here from the raw rows, in plain Rust: after every path that
//! changes data, through the real binary, the sqlite3 shell and the library,
//! and over random sequences of operations. The reference shares no code
//! with the store (not even `dlq db --recount`).

use crate::common::*;
use crate::oracles::{ref_merge, ref_normalised};
use dlqlite::{DeadLetteredItem, Dlq};
use quickcheck::{Arbitrary, Gen};
use std::collections::BTreeMap;
use std::path::Path;

/// Per job: items, eligible, manual review, failure_count sum.
type JobCounters = BTreeMap<String, [i64; 4]>;
/// (job, key) -> items.
type Tally = BTreeMap<(String, String), i64>;

/// What the counters should be, from the rows alone.
fn expected(db: &Path) -> (JobCounters, Tally, Tally, Vec<String>) {
    let mut jobs: JobCounters = BTreeMap::new();
    for job in strings(db, "SELECT job_id FROM jobs") {
        jobs.insert(job, [0; 4]);
    }
    // The last attempt of each item: latest timestamp, then highest
    // attempt_number (the documented rule), picked here in Rust. Stored
    // timestamps are fixed-width UTC, so their text orders like time.
    let mut last: BTreeMap<i64, ((String, i64), String)> = BTreeMap::new();
    let attempts: Vec<(i64, i64, String, String)> = rows_as(
        db,
        &format!(
            "SELECT item_key, attempt_number, {}, error_type FROM failure_history",
            ts("timestamp", true)
        ),
    );
    for (key, number, timestamp, error_type) in attempts {
        let order = (timestamp, number);
        match last.get(&key) {
            Some((best, _)) if *best >= order => {}
            _ => {
                last.insert(key, (order, error_type));
            }
        }
    }
    let mut signatures = Tally::new();
    let mut error_types = Tally::new();
    let mut wrong_last = Vec::new();
    type ItemRow = (i64, String, String, String, i64, i64, i64, Option<String>);
    let items: Vec<ItemRow> = rows_as(
        db,
        "SELECT id, job_id, item_id, error_signature, reprocess_eligible,
                manual_review_required, failure_count, last_error_type FROM items",
    );
    for (key, job, item_id, signature, eligible, manual, failures, stored_last) in items {
        let counters = jobs.entry(job.clone()).or_insert([0; 4]);
        counters[0] += 1;
        counters[1] += eligible;
        counters[2] += manual;
        counters[3] += failures;
        *signatures.entry((job.clone(), signature)).or_default() += 1;
        let true_last = last.get(&key).map(|(_, t)| t.clone());
        if stored_last != true_last {
            wrong_last.push(format!(
                "{job}/{item_id}: last_error_type {stored_last:?}, last attempt says {true_last:?}"
            ));
        }
        *error_types
            .entry((job, true_last.unwrap_or_default()))
            .or_default() += 1;
    }
    (jobs, signatures, error_types, wrong_last)
}

fn tally_of(db: &Path, query: &str) -> Tally {
    rows_as::<(String, String, i64)>(db, query)
        .into_iter()
        .map(|(job, key, n)| ((job, key), n))
        .collect()
}

/// Every difference between the stored counters and the reference; empty
/// when they agree.
pub fn drift(db: &Path) -> Vec<String> {
    let (jobs, signatures, error_types, mut problems) = expected(db);
    let stored_jobs: JobCounters = rows_as::<(String, i64, i64, i64, i64)>(
        db,
        "SELECT job_id, item_count, eligible_count, manual_review_count, failure_count_sum
         FROM jobs",
    )
    .into_iter()
    .map(|(job, a, b, c, d)| (job, [a, b, c, d]))
    .collect();
    if stored_jobs != jobs {
        problems.push(format!(
            "jobs [items, eligible, manual, failures]: stored {stored_jobs:?}, rows say {jobs:?}"
        ));
    }
    for (table, key, expected) in [
        ("signature_counts", "error_signature", signatures),
        ("error_type_counts", "error_type", error_types),
    ] {
        let stored = tally_of(
            db,
            &format!("SELECT job_id, {key}, item_count FROM {table}"),
        );
        if stored != expected {
            problems.push(format!("{table}: stored {stored:?}, rows say {expected:?}"));
        }
    }
    problems.extend(search_index_drift(db));
    problems
}

/// Every difference between the message search index (SQLite's
/// `failure_text`, schema V15) and the attempts: FTS5's own recount of the
/// rows (`integrity-check` with rank 1 tokenizes every message again and
/// compares), and, computed here, that the trigrams of the start of a
/// stored message find every attempt whose message holds it (what
/// `contains` relies on; for 40 of the distinct messages, so that a
/// database of thousands stays quick to check). PostgreSQL keeps its GIN index itself.
pub fn search_index_drift(db: &Path) -> Vec<String> {
    if on_postgres() {
        return Vec::new();
    }
    let mut problems = Vec::new();
    if let Err(e) = sql(db).execute(
        "INSERT INTO failure_text (failure_text, rank) VALUES ('integrity-check', 1)",
        [],
    ) {
        problems.push(format!("failure_text differs from failure_history: {e}"));
    }
    let attempts: Vec<(i64, String)> = rows_as(db, "SELECT id, error_message FROM failure_history");
    let messages: std::collections::BTreeSet<&str> =
        attempts.iter().map(|(_, m)| m.as_str()).collect();
    for message in messages.into_iter().take(40) {
        // Its first 12 characters: a long message (a test stores 5 MB)
        // would be millions of terms.
        let needle: String = message.chars().take(12).collect();
        let chars: Vec<char> = needle.chars().collect();
        if chars.len() < 3 {
            continue;
        }
        let query = chars
            .windows(3)
            .map(|w| format!("\"{}\"", w.iter().collect::<String>().replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" AND ");
        let found: std::collections::BTreeSet<i64> = sql(db)
            .prepare("SELECT rowid FROM failure_text WHERE failure_text MATCH ?1")
            .unwrap()
            .query_map([&query], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for (id, text) in &attempts {
            if text.contains(&needle) && !found.contains(id) {
                problems.push(format!(
                    "failure_text misses attempt {id} ({text:?}) for {needle:?}"
                ));
            }
        }
    }
    problems
}

fn assert_no_drift(db: &Path, after: &str) {
    let problems = drift(db);
    assert!(
        problems.is_empty(),
        "counters differ from the rows after {after}:\n{}",
        problems.join("\n")
    );
}

/// An item with attempts `(attempt_number, timestamp, error_type)`, the last
/// one's message deciding the signature.
fn item_with(id: &str, attempts: &[(u32, &str, &str)], eligible: bool) -> serde_json::Value {
    let history: Vec<serde_json::Value> = attempts
        .iter()
        .map(|(n, at, error_type)| {
            serde_json::json!({
                "attempt_number": n, "timestamp": at, "error_type": error_type,
                "error_message": format!("{error_type} on {id} at {n}"),
                "stack_trace": null, "agent_id": format!("agent-{n}"), "step_failed": "s",
                "duration_ms": 5, "json_log_location": null
            })
        })
        .collect();
    let first = attempts.iter().map(|a| a.1).min().unwrap();
    let last = attempts.iter().map(|a| a.1).max().unwrap();
    serde_json::json!({
        "item_id": id, "item_data": {"id": id},
        "first_attempt": first, "last_attempt": last,
        "failure_count": attempts.len(), "failure_history": history,
        "error_signature": format!("sig-{}", attempts.last().unwrap().2),
        "worktree_artifacts": null,
        "reprocess_eligible": eligible, "manual_review_required": !eligible
    })
}

fn add_jsonl(db: &Path, job: &str, items: &[serde_json::Value]) -> serde_json::Value {
    let lines: String = items.iter().map(|v| v.to_string() + "\n").collect();
    let output = with_stdin(dlq(db).args(["add", "--job-id", job, "--json"]), &lines);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    json(&String::from_utf8_lossy(&output.stdout))
}

/// A legacy tree with `items` in job `job`.
fn legacy_tree(root: &Path, job: &str, items: &[serde_json::Value]) {
    let dir = root.join(format!("dlq/repo/{job}/mapreduce/dlq/{job}/items"));
    std::fs::create_dir_all(&dir).unwrap();
    for item in items {
        let id = item["item_id"].as_str().unwrap();
        write_json(&dir, &format!("{id}.json"), item);
    }
}

/// Legacy files can list attempts in any order and twice: the stored item,
/// its last error type and the counters must not depend on it.
#[test]
fn unsorted_and_repeated_histories_are_stored_in_attempt_order() {
    let dir = TempDir::new("unsorted");
    let db = dir.join("dlq.db");
    let descending = item_with(
        "down",
        &[
            (3, "2026-01-03T00:00:00Z", "Timeout"),
            (2, "2026-01-02T00:00:00Z", "MergeConflict"),
            (1, "2026-01-01T00:00:00Z", "CommandFailed"),
        ],
        true,
    );
    let mut repeated = item_with(
        "twice",
        &[
            (1, "2026-01-01T00:00:00Z", "Timeout"),
            (2, "2026-01-02T00:00:00Z", "Unknown"),
            (1, "2026-01-01T00:00:00Z", "Timeout"),
        ],
        true,
    );
    repeated["failure_count"] = 1.into();
    add_jsonl(&db, "j", &[descending, repeated]);
    assert_no_drift(&db, "unsorted adds");
    let last: Vec<String> = strings(
        &db,
        "SELECT item_id || '=' || last_error_type || '/' || failure_count FROM items ORDER BY item_id",
    );
    assert_eq!(last, ["down=Timeout/3", "twice=Unknown/2"]);
    let down = json(&ok(dlq(&db).args(["inspect", "down"])));
    let numbers: Vec<u64> = down["failure_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["attempt_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM failure_history"), 5);
}

#[test]
fn every_path_that_changes_data_keeps_the_counters_equal_to_the_rows() {
    let dir = TempDir::new("counters-paths");
    let db = dir.join("dlq.db");
    let old = "2024-01-01T00:00:00Z";
    let mid = "2025-06-01T00:00:00Z";
    let new = "2026-11-01T00:00:00Z";

    // Import into an empty database (the bulk path), with copies of one
    // item in two trees whose merge changes its signature.
    let tree = dir.join("tree");
    legacy_tree(
        &tree,
        "imp",
        &(0..30)
            .map(|i| item_with(&format!("t{i}"), &[(1, old, "Timeout")], i % 3 != 0))
            .collect::<Vec<_>>(),
    );
    let state = dir.join("state");
    legacy_tree(
        &state,
        "imp",
        &[item_with("t1", &[(2, mid, "MergeConflict")], true)],
    );
    ok(dlq(&db).args(["capacity", "--set", "20", "--yes"]));
    assert_no_drift(&db, "capacity --set on an empty database");
    let report = json(&ok(dlq(&db)
        .arg("import")
        .arg(&tree)
        .arg(&state)
        .arg("--json")));
    assert_eq!(report["items_new"], 30);
    assert_no_drift(&db, "a bulk import with a merge and a job over capacity");

    // Import into a non-empty database (the batched path).
    let tree2 = dir.join("tree2");
    legacy_tree(
        &tree2,
        "imp2",
        &(0..25)
            .map(|i| item_with(&format!("u{i}"), &[(1, mid, "CommandFailed")], true))
            .collect::<Vec<_>>(),
    );
    legacy_tree(
        &tree2,
        "imp",
        &[item_with("t2", &[(3, new, "ValidationFailed")], false)],
    );
    ok(dlq(&db).arg("import").arg(&tree2));
    assert_no_drift(&db, "a batched import into a non-empty database");

    // Add one; add many in one call, with merges of items added earlier in
    // the same call and evictions of items added in it.
    ok(dlq(&db).args(["capacity", "--job-id", "imp2", "--set", "0", "--yes"]));
    add_jsonl(&db, "a", &[item_with("one", &[(1, mid, "Timeout")], true)]);
    assert_no_drift(&db, "add of one item");
    ok(dlq(&db).args(["capacity", "--set", "4", "--yes"]));
    let mut batch: Vec<serde_json::Value> = (0..8)
        .map(|i| {
            let day = format!("2026-10-{:02}T00:00:00Z", i + 1);
            item_with(&format!("b{i}"), &[(1, &day, "Timeout")], i % 2 == 0)
        })
        .collect();
    batch.push(item_with(
        "b7",
        &[(2, "2026-10-30T00:00:00Z", "WorktreeError")],
        false,
    ));
    batch.push(item_with("b6", &[(5, old, "PermissionError")], false));
    let summary = add_jsonl(&db, "a", &batch);
    assert!(summary["items_evicted"].as_u64().unwrap() > 0, "{summary}");
    assert_no_drift(&db, "add of many items with merges and evictions");

    // Capacity lowered evicts at once.
    ok(dlq(&db).args(["capacity", "--job-id", "imp", "--set", "5", "--yes"]));
    assert_no_drift(&db, "capacity lowered");

    // Mark.
    ok(dlq(&db).args([
        "mark",
        "b7",
        "--job-id",
        "a",
        "--eligible",
        "--no-manual-review",
    ]));
    assert_no_drift(&db, "mark");

    // Retry: a failure appends an attempt (new last error type and
    // signature), a success removes the item.
    ok(dlq(&db).args(["capacity", "--job-id", "imp2", "--set", "0", "--yes"]));
    let _ = run(dlq(&db).args([
        "retry",
        "imp2",
        "--exec",
        "exit 3",
        "--max-retries",
        "1",
        "--backoff-ms",
        "0",
        "--filter",
        "item_id < \"u5\"",
    ]));
    assert!(count(&db, "SELECT COUNT(*) FROM failure_history f JOIN items i ON i.id = f.item_key WHERE i.job_id = 'imp2' AND f.attempt_number = 2") > 0);
    assert_no_drift(&db, "retry that failed");
    ok(dlq(&db).args([
        "retry",
        "imp2",
        "--exec",
        "true",
        "--filter",
        "item_id < \"u9\"",
        "--force",
    ]));
    assert_no_drift(&db, "retry that succeeded");

    // Requeue --take.
    let out = dir.join("requeue.json");
    ok(dlq(&db)
        .args(["requeue", "imp2", "--take", "-o"])
        .arg(&out)
        .args(["--filter", "item_id < \"u15\""]));
    assert_no_drift(&db, "requeue --take");

    // Purge, by age and by job.
    ok(dlq(&db).args(["purge", "--older-than-days", "400", "--yes"]));
    assert_no_drift(&db, "purge");
    ok(dlq(&db).args([
        "purge",
        "--older-than-days",
        "1",
        "--job-id",
        "imp2",
        "--yes",
    ]));
    assert_no_drift(&db, "purge of one job");

    // Hand-written changes in the sqlite3 shell (or psql).
    exec_by_hand(
        &db,
        "UPDATE items SET error_signature = 'by-hand', reprocess_eligible = 1 - reprocess_eligible
                 WHERE id IN (SELECT id FROM items ORDER BY id LIMIT 3);
             UPDATE items SET job_id = 'imp' WHERE job_id = 'a' AND item_id = 'b7';
             DELETE FROM items WHERE id = (SELECT MAX(id) FROM items);
             UPDATE failure_history SET error_message = 'typed by hand: ' || error_message
                 WHERE id IN (SELECT id FROM failure_history ORDER BY id LIMIT 2);",
    );
    let found = count(
        &db,
        "SELECT COUNT(*) FROM items i WHERE i.id IN (SELECT item_key FROM failure_history
             WHERE error_message LIKE 'typed by hand: %')",
    );
    let listed = dlq(&db)
        .args([
            "list",
            "--filter",
            "error_message contains \"typed by hand\"",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(found as usize),
        "{listed}"
    );
    assert_no_drift(&db, "hand UPDATE and DELETE in the sqlite3 shell");

    // Remove one, clear a job.
    let (job, item): (String, String) =
        row_as(&db, "SELECT job_id, item_id FROM items ORDER BY id LIMIT 1");
    ok(dlq(&db).args(["clear", &job, "--yes"]));
    let _ = item;
    assert_no_drift(&db, "clear");
    assert!(count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'evicted'") > 0);
}

/// One operation of the random sequences below.
#[derive(Clone, Debug)]
enum Op {
    /// Items added in one transaction: (job, id, attempt, day, error type).
    Add(Vec<(u8, u8, u8, u8, u8)>),
    Capacity(u8, u8),
    Mark(u8, u8, bool),
    Remove(u8, u8),
    Purge(u8),
    Clear(u8),
    RetryFailed(u8, u8),
    RetryOk(u8, u8),
    Take(u8, u8),
}

const TYPES: [&str; 4] = ["Timeout", "CommandFailed", "MergeConflict", "Unknown"];

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Self {
        let small = |g: &mut Gen, n: u8| u8::arbitrary(g) % n;
        match small(g, 12) {
            0..=3 => {
                let n = 1 + usize::from(small(g, 8));
                Op::Add(
                    (0..n)
                        .map(|_| {
                            (
                                small(g, 3),
                                small(g, 6),
                                small(g, 4),
                                small(g, 28),
                                small(g, 4),
                            )
                        })
                        .collect(),
                )
            }
            4 => Op::Capacity(small(g, 3), small(g, 6)),
            5 => Op::Mark(small(g, 3), small(g, 6), bool::arbitrary(g)),
            6 => Op::Remove(small(g, 3), small(g, 6)),
            7 => Op::Purge(small(g, 28)),
            8 => Op::Clear(small(g, 3)),
            9 => Op::RetryFailed(small(g, 3), small(g, 6)),
            10 => Op::RetryOk(small(g, 3), small(g, 6)),
            _ => Op::Take(small(g, 3), small(g, 6)),
        }
    }
}

fn lib_value(id: u8, attempt: u8, day: u8, error_type: u8) -> serde_json::Value {
    let at = format!("2026-01-{:02}T00:00:00Z", day + 1);
    item_with(
        &format!("i{id}"),
        &[(u32::from(attempt) + 1, &at, TYPES[usize::from(error_type)])],
        error_type.is_multiple_of(2),
    )
}

fn lib_item(id: u8, attempt: u8, day: u8, error_type: u8) -> DeadLetteredItem {
    let value = lib_value(id, attempt, day, error_type);
    DeadLetteredItem::from_json_str(&value.to_string()).unwrap()
}

/// Applies one operation; whether it succeeded. Errors such as "no such
/// item" are expected in random sequences: the reference model says which.
fn apply(dlq: &Dlq, op: &Op) -> bool {
    let job = |j: u8| format!("job{j}");
    match op {
        Op::Add(items) => dlq
            .write(|tx| {
                for (j, id, attempt, day, error_type) in items {
                    tx.add(&job(*j), None, &lib_item(*id, *attempt, *day, *error_type))?;
                }
                Ok(())
            })
            .map(drop),
        Op::Capacity(j, n) => dlq
            .set_capacity(Some(&job(*j)), Some(i64::from(*n)))
            .map(drop),
        Op::Mark(j, id, on) => dlq
            .mark(
                Some(&job(*j)),
                &format!("i{id}"),
                &dlqlite::store::MarkRequest {
                    reprocess_eligible: Some(*on),
                    manual_review_required: Some(!*on),
                },
            )
            .map(drop),
        Op::Remove(j, id) => dlq.remove(Some(&job(*j)), &format!("i{id}")),
        Op::Purge(day) => {
            // Purge is relative to now: a clock placed `day` days after
            // the items' month starts.
            let now =
                dlqlite::Timestamp::parse(&format!("2026-02-{:02}T00:00:00Z", day + 1)).unwrap();
            dlq.clone()
                .with_clock(std::sync::Arc::new(move || now))
                .purge(20, &Default::default(), false)
                .map(drop)
        }
        Op::Clear(j) => dlq.clear_job(&job(*j)).map(drop),
        Op::RetryFailed(j, id) | Op::RetryOk(j, id) => retry_one(dlq, &job(*j), *id, op),
        Op::Take(j, id) => dlq
            .take_items(&[(job(*j), format!("i{id}"))], "elsewhere")
            .map(drop),
    }
    .is_ok()
}

/// One retry attempt of one item through the lease API, as `dlq retry` makes
/// it.
fn retry_one(dlq: &Dlq, job: &str, id: u8, op: &Op) -> dlqlite::Result<()> {
    let run = format!("run-{job}-{id}");
    let until = dlq.now().minus_seconds(-60);
    let filter = dlqlite::ListFilter {
        job_id: Some(job.to_string()),
        expression: Some(dlqlite::filter::parse(&format!("item_id == \"i{id}\"")).unwrap()),
        ..Default::default()
    };
    for key in dlq.claim(&run, &filter, 0, 1, until)? {
        if matches!(op, Op::RetryOk(..)) {
            let version = dlq.leased_item(&run, key)?.map_or(0, |(_, v)| v);
            dlq.retry_succeeded(&run, key, version, 1, 5)?;
        } else {
            let failure = lib_item(id, 9, 27, 2).failure_history.remove(0);
            dlq.retry_failed(&run, key, failure)?;
        }
    }
    Ok(())
}

#[test]
fn random_sequences_of_writes_keep_the_counters_equal_to_the_rows() {
    fn property(ops: Vec<Op>) -> quickcheck::TestResult {
        let dir = TempDir::new("counters-prop");
        let db = dir.join("dlq.db");
        let dlq = Dlq::open(super::common::target(&db)).unwrap();
        for (n, op) in ops.iter().enumerate() {
            apply(&dlq, op);
            let mut problems = drift(&db);
            // And no job is left over its capacity when a write returns.
            let over = count(
                &db,
                "SELECT COUNT(*) FROM jobs WHERE max_items > 0 AND item_count > max_items",
            );
            if over > 0 {
                problems.push(format!("{over} job(s) over their capacity"));
            }
            if !problems.is_empty() {
                return quickcheck::TestResult::error(format!(
                    "after op {n} of {ops:?}:\n{}",
                    problems.join("\n")
                ));
            }
        }
        quickcheck::TestResult::passed()
    }
    quickcheck::QuickCheck::new()
        .tests(cases_with_a_database_each(60))
        .quickcheck(property as fn(Vec<Op>) -> quickcheck::TestResult);
}

// ---------------------------------------------------------------------------
// The whole tables against a reference model

/// One stored item as the reference model holds it.
#[derive(Clone, Debug)]
struct ModelItem {
    /// The item in its legacy JSON shape.
    value: serde_json::Value,
    /// Flags set with mark (they survive merges until marked again).
    marked: (bool, bool),
    /// Its row key: on SQLite one past the largest in the table; on
    /// PostgreSQL (identity keys, never reused) one past the largest ever.
    row: i64,
    /// Held by a retry run's live lease.
    leased: bool,
}

/// The reference: plain maps, with the merge of oracles.rs.
#[derive(Debug, Default)]
struct Model {
    /// Job -> its capacity override.
    jobs: BTreeMap<String, Option<i64>>,
    items: BTreeMap<(String, String), ModelItem>,
    /// Audit events by kind (the kinds the model decides).
    events: BTreeMap<String, i64>,
    /// The largest row key ever given: the next is one past it (PostgreSQL's
    /// identity, SQLite's AUTOINCREMENT since V14).
    largest_row: i64,
}

const DEFAULT_CAPACITY: i64 = 10_000;

fn instant(value: &serde_json::Value) -> dlqlite::Timestamp {
    dlqlite::Timestamp::parse(value.as_str().unwrap()).unwrap()
}

impl Model {
    fn event(&mut self, kind: &str, n: usize) {
        if n > 0 {
            *self.events.entry(kind.to_string()).or_default() += n as i64;
        }
    }

    fn remove_where(&mut self, kind: &str, doomed: impl Fn(&(String, String), &ModelItem) -> bool) {
        let before = self.items.len();
        self.items.retain(|key, item| !doomed(key, item));
        self.event(kind, before - self.items.len());
    }

    /// Evicts the oldest last_attempt (then the oldest row) past capacity.
    fn enforce(&mut self, job: &str) {
        let cap = self.jobs[job].unwrap_or(DEFAULT_CAPACITY);
        let mut of_job: Vec<(dlqlite::Timestamp, i64, (String, String))> = self
            .items
            .iter()
            .filter(|(key, _)| key.0 == job)
            .map(|(key, item)| (instant(&item.value["last_attempt"]), item.row, key.clone()))
            .collect();
        if cap <= 0 || of_job.len() as i64 <= cap {
            return;
        }
        of_job.sort();
        let excess = of_job.len() - cap as usize;
        for (_, _, key) in &of_job[..excess] {
            self.items.remove(key);
        }
        self.event("evicted", excess);
    }

    /// What `op` does; whether it succeeds.
    fn apply(&mut self, op: &Op) -> bool {
        let job = |j: u8| format!("job{j}");
        let key = |j: u8, id: u8| (job(j), format!("i{id}"));
        match op {
            Op::Add(items) => {
                let mut grown = Vec::new();
                for (j, id, attempt, day, error_type) in items {
                    self.jobs.entry(job(*j)).or_insert(None);
                    let incoming = lib_value(*id, *attempt, *day, *error_type);
                    let next_row = self.largest_row + 1;
                    match self.items.get_mut(&key(*j, *id)) {
                        Some(stored) => {
                            stored.value = ref_merge(&stored.value, &incoming, stored.marked);
                        }
                        None => {
                            self.largest_row = next_row;
                            self.items.insert(
                                key(*j, *id),
                                ModelItem {
                                    value: ref_normalised(&incoming),
                                    marked: (false, false),
                                    row: next_row,
                                    leased: false,
                                },
                            );
                            grown.push(job(*j));
                        }
                    }
                }
                // Evictions of one transaction are settled before it commits.
                grown.sort();
                grown.dedup();
                for job in grown {
                    self.enforce(&job);
                }
                true
            }
            Op::Capacity(j, n) => {
                let Some(cap) = self.jobs.get_mut(&job(*j)) else {
                    return false;
                };
                *cap = Some(i64::from(*n));
                self.enforce(&job(*j));
                true
            }
            Op::Mark(j, id, on) => {
                let Some(item) = self.items.get_mut(&key(*j, *id)) else {
                    return false;
                };
                item.value["reprocess_eligible"] = (*on).into();
                item.value["manual_review_required"] = (!*on).into();
                item.marked = (true, true);
                self.event("marked", 1);
                true
            }
            Op::Remove(j, id) => {
                if self.items.remove(&key(*j, *id)).is_none() {
                    return false;
                }
                self.event("removed", 1);
                true
            }
            Op::Purge(day) => {
                // now = 2026-02-(day+1); 20 days before it, strictly.
                let now = dlqlite::Timestamp::parse(&format!("2026-02-{:02}T00:00:00Z", day + 1))
                    .unwrap();
                let cutoff = now.minus_seconds(20 * 86_400);
                self.remove_where("purged", |_, item| {
                    instant(&item.value["last_attempt"]) < cutoff
                });
                true
            }
            Op::Clear(j) => {
                if !self.jobs.contains_key(&job(*j)) {
                    return false;
                }
                let job = job(*j);
                self.remove_where("cleared", |key, _| key.0 == job);
                true
            }
            Op::Take(j, id) => {
                let taken = key(*j, *id);
                self.remove_where("requeued", |key, _| *key == taken);
                true
            }
            Op::RetryOk(j, id) | Op::RetryFailed(j, id) => {
                let Some(item) = self.items.get_mut(&key(*j, *id)) else {
                    return true;
                };
                if item.leased {
                    return true;
                }
                if matches!(op, Op::RetryOk(..)) {
                    self.items.remove(&key(*j, *id));
                    self.event("retried_ok", 1);
                    return true;
                }
                // Appended as one past the highest attempt number; the run
                // keeps its lease.
                let mut attempt = lib_value(*id, 9, 27, 2)["failure_history"][0].clone();
                let history = item.value["failure_history"].as_array_mut().unwrap();
                let highest = history
                    .iter()
                    .map(|a| a["attempt_number"].as_u64().unwrap())
                    .max()
                    .unwrap_or(0);
                attempt["attempt_number"] = (highest + 1).into();
                let message = attempt["error_message"].as_str().unwrap().to_string();
                let at = attempt["timestamp"].clone();
                history.push(attempt);
                let count = item.value["failure_count"].as_u64().unwrap() + 1;
                item.value["failure_count"] = count.into();
                if instant(&at) > instant(&item.value["last_attempt"]) {
                    item.value["last_attempt"] = at;
                }
                item.value["error_signature"] = dlqlite::classify::error_signature(&message).into();
                item.leased = true;
                self.event("retried_failed", 1);
                true
            }
        }
    }

    /// Every difference between the database and the model.
    fn differences(&self, dlq: &Dlq, db: &Path) -> Vec<String> {
        let mut problems = Vec::new();
        let jobs: BTreeMap<String, Option<i64>> = rows_as(db, "SELECT job_id, max_items FROM jobs")
            .into_iter()
            .collect();
        if jobs != self.jobs {
            problems.push(format!("jobs: stored {jobs:?}, model {:?}", self.jobs));
        }
        let rows: BTreeMap<(String, String), (i64, bool, bool, bool)> = rows_as::<(
            String,
            String,
            i64,
            bool,
            bool,
            bool,
        )>(
            db,
            "SELECT job_id, item_id, id, reprocess_eligible_marked, manual_review_required_marked,
                        lease_owner IS NOT NULL FROM items",
        )
        .into_iter()
        .map(|(job, item, row, a, b, c)| ((job, item), (row, a, b, c)))
        .collect();
        // PostgreSQL's identity keys leave gaps (a conflicting insert takes
        // a number too): there the keys are compared by their order.
        let rank = |keys: Vec<i64>| -> BTreeMap<i64, i64> {
            let mut sorted = keys;
            sorted.sort_unstable();
            sorted.into_iter().zip(1..).collect()
        };
        let (stored_rank, model_rank) = if on_postgres() {
            (
                rank(rows.values().map(|r| r.0).collect()),
                rank(self.items.values().map(|i| i.row).collect()),
            )
        } else {
            (BTreeMap::new(), BTreeMap::new())
        };
        let rows: BTreeMap<(String, String), (i64, bool, bool, bool)> = rows
            .into_iter()
            .map(|(key, (row, a, b, c))| (key, (*stored_rank.get(&row).unwrap_or(&row), a, b, c)))
            .collect();
        let stored_keys: Vec<_> = rows.keys().collect();
        let model_keys: Vec<_> = self.items.keys().collect();
        if stored_keys != model_keys {
            problems.push(format!(
                "items: stored {stored_keys:?}, model {model_keys:?}"
            ));
            return problems;
        }
        for (key, item) in &self.items {
            let (row, eligible_marked, review_marked, leased) = rows[key];
            let model_row = *model_rank.get(&item.row).unwrap_or(&item.row);
            let want = (model_row, item.marked.0, item.marked.1, item.leased);
            if (row, eligible_marked, review_marked, leased) != want {
                problems.push(format!(
                    "{key:?} (row, marked, marked, leased): stored {:?}, model {want:?}",
                    (row, eligible_marked, review_marked, leased)
                ));
            }
            let stored = dlq
                .get(Some(&key.0), &key.1)
                .unwrap()
                .to_json_value()
                .unwrap();
            if crate::oracles::canonical(&stored) != crate::oracles::canonical(&item.value) {
                problems.push(format!("{key:?}: stored {stored}, model {}", item.value));
            }
        }
        let kinds: Vec<&str> = vec![
            "evicted",
            "marked",
            "removed",
            "purged",
            "cleared",
            "requeued",
            "retried_ok",
            "retried_failed",
        ];
        let events: BTreeMap<String, i64> = rows_as(
            db,
            &format!(
                "SELECT kind, COUNT(*) FROM events WHERE kind IN ({}) GROUP BY kind",
                kinds
                    .iter()
                    .map(|k| format!("'{k}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .into_iter()
        .collect();
        if events != self.events {
            problems.push(format!(
                "events: stored {events:?}, model {:?}",
                self.events
            ));
        }
        problems
    }
}

#[test]
fn random_sequences_of_writes_leave_the_tables_equal_to_the_reference_model() {
    fn property(ops: Vec<Op>) -> quickcheck::TestResult {
        let dir = TempDir::new("model-prop");
        let db = dir.join("dlq.db");
        let dlq = Dlq::open(super::common::target(&db)).unwrap();
        let mut model = Model::default();
        for (n, op) in ops.iter().enumerate() {
            let succeeded = apply(&dlq, op);
            let expected = model.apply(op);
            let mut problems = model.differences(&dlq, &db);
            if succeeded != expected {
                problems.push(format!("succeeded: {succeeded}, the model says {expected}"));
            }
            if !problems.is_empty() {
                return quickcheck::TestResult::error(format!(
                    "after op {n} ({op:?}) of {ops:?}:\n{}",
                    problems.join("\n")
                ));
            }
        }
        quickcheck::TestResult::passed()
    }
    quickcheck::QuickCheck::new()
        .tests(cases_with_a_database_each(60))
        .quickcheck(property as fn(Vec<Op>) -> quickcheck::TestResult);
}

/// One `dlq add` far past the cap evicts in batches as it goes and settles
/// the rest before committing: the newest `cap` items stay, every eviction
/// has its event, and the counters agree with the rows.
#[test]
fn a_large_add_past_the_cap_keeps_the_newest() {
    let dir = TempDir::new("evict-batches");
    let db = dir.join("dlq.db");
    ok(dlq(&db).args(["capacity", "--set", "100", "--yes"]));
    // Item n fails on day n % 700 of a 700-day span, in a shuffled order.
    let items: Vec<serde_json::Value> = (0..700)
        .map(|i| (i * 379) % 700)
        .map(|n| {
            let at = dlqlite::Timestamp::parse("2024-01-01T00:00:00Z")
                .unwrap()
                .minus_seconds(-(n as i64) * 86_400)
                .to_string();
            item_with(&format!("n{n:03}"), &[(1, &at, "Timeout")], true)
        })
        .collect();
    let summary = add_jsonl(&db, "j", &items);
    assert_eq!(summary["items_evicted"], 600, "{summary}");
    let kept = strings(&db, "SELECT item_id FROM items ORDER BY item_id");
    let newest: Vec<String> = (600..700).map(|n| format!("n{n:03}")).collect();
    assert_eq!(kept, newest);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'evicted'"),
        600
    );
    assert_no_drift(&db, "an add of 700 items into a job capped at 100");

    // 356 items: the very last add fills an eviction batch (256 over the
    // cap), so nothing is left for the settling before commit.
    let exact: Vec<serde_json::Value> = items[..356].to_vec();
    let summary = add_jsonl(&db, "exact", &exact);
    assert_eq!(summary["items_evicted"], 256, "{summary}");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'exact'"),
        100
    );
    assert_no_drift(&db, "an add whose last item fills an eviction batch");

    // 455 items: a batch at the 356th, then 99 more that bring the job back
    // to its cap only if the batch's evictions were counted.
    let summary = add_jsonl(&db, "after", &items[..455]);
    assert_eq!(summary["items_evicted"], 355, "{summary}");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'after'"),
        100
    );
}

/// Importing never evicts, and never touches the capacity of a job that
/// fits it.
#[test]
fn an_import_that_fits_leaves_the_capacity_alone() {
    let dir = TempDir::new("import-fits");
    let db = dir.join("dlq.db");
    ok(dlq(&db).args(["capacity", "--set", "50", "--yes"]));
    let tree = dir.join("tree");
    for i in 0..3 {
        let value = item_with(
            &format!("f{i}"),
            &[(1, "2025-01-01T00:00:00Z", "Timeout")],
            true,
        );
        let items = tree.join("mapreduce/dlq/fits/items");
        std::fs::create_dir_all(&items).unwrap();
        std::fs::write(items.join(format!("f{i}.json")), value.to_string()).unwrap();
    }
    ok(dlq(&db).arg("import").arg(&tree));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM jobs WHERE job_id = 'fits' AND max_items IS NULL"
        ),
        1
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'capacity_set'"
        ),
        1,
        "only the --set"
    );
}
