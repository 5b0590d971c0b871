//! dlqlite's behaviour suite for Prodigy's dead letter queue
//! (`prodigy::cook::execution::dlq`), written against Prodigy's public API
//! only. It is kept in dlqlite (contrib/prodigy/behaviour.rs) and
//! scripts/prodigy-check copies it into a Prodigy checkout as
//! tests/dlqlite_behaviour.rs, then runs it twice with the same assertions:
//!
//! - in an unmodified checkout: Prodigy's own queue (one JSON file per item);
//! - in the checkout whose src/cook/execution/dlq.rs re-exports
//!   `dlqlite::compat::prodigy`, with `DLQLITE_ADAPTER=1` in the environment.
//!
//! Where the two differ on purpose, the assertion is chosen by
//! [`adapter`]: in the tests named `difference_...` (docs/prodigy.md,
//! "Deliberate differences", says why for each) and in the last check of
//! `legacy_json_removed_item_stays_removed` (the adapter leaves Prodigy's
//! old file in place). The first test checks that `DLQLITE_ADAPTER` says
//! which implementation is really under test, so the gates cannot
//! silently test the wrong side. Every other assertion holds for both.
//!
//! `child_process_writer` is not a test: it is what the two-process tests
//! run in a child process (this same test binary, `--ignored --exact`), so
//! it is `#[ignore]`d and shows in the counts as "1 ignored".

use chrono::{DateTime, Duration, TimeZone, Timelike, Utc};
use prodigy::cook::execution::dlq::{
    DLQFilter, DeadLetterQueue, DeadLetteredItem, ErrorType, FailureDetail, WorktreeArtifacts,
};
use prodigy::cook::execution::events::{EventLogger, EventRecord, EventWriter, MapReduceEvent};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// Helpers

/// Whether the queue under test is dlqlite's adapter (set by
/// scripts/prodigy-check; checked by `implementation_is_the_one_announced`).
fn adapter() -> bool {
    std::env::var("DLQLITE_ADAPTER").as_deref() == Ok("1")
}

/// A fixed clock: minute `m` after 2026-01-01T00:00:00Z.
fn t(m: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + Duration::minutes(m)
}

fn attempt(number: u32, at: DateTime<Utc>, error_type: ErrorType, message: &str) -> FailureDetail {
    FailureDetail {
        attempt_number: number,
        timestamp: at,
        error_type,
        error_message: message.to_string(),
        error_context: None,
        stack_trace: None,
        agent_id: format!("agent-{number}"),
        step_failed: "claude: /fix".to_string(),
        duration_ms: 1000,
        json_log_location: None,
    }
}

/// An item that failed once, at minute `m`: Prodigy's own shape
/// (`dlq_integration::agent_result_to_dlq_item` makes one attempt, count 1).
fn item(id: &str, m: i64) -> DeadLetteredItem {
    DeadLetteredItem {
        item_id: id.to_string(),
        item_data: json!({"id": id, "minute": m}),
        first_attempt: t(m),
        last_attempt: t(m),
        failure_count: 1,
        failure_history: vec![attempt(
            1,
            t(m),
            ErrorType::CommandFailed { exit_code: 1 },
            "build failed",
        )],
        error_signature: "CommandFailed::build failed".to_string(),
        worktree_artifacts: None,
        reprocess_eligible: true,
        manual_review_required: false,
    }
}

async fn queue(base: &Path, job: &str, max_items: usize) -> DeadLetterQueue {
    DeadLetterQueue::new(job.to_string(), base.to_path_buf(), max_items, 30, None)
        .await
        .unwrap()
}

/// The ids a queue lists, in its order (latest last attempt first).
async fn ids(q: &DeadLetterQueue) -> Vec<String> {
    q.list_items(DLQFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.item_id)
        .collect()
}

async fn id_set(q: &DeadLetterQueue) -> BTreeSet<String> {
    ids(q).await.into_iter().collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn value(item: &DeadLetteredItem) -> Value {
    serde_json::to_value(item).unwrap()
}

/// Prodigy's item file: `<base>/mapreduce/dlq/<job>/items/<id>.json`.
fn legacy_file(base: &Path, job: &str, id: &str) -> PathBuf {
    base.join("mapreduce")
        .join("dlq")
        .join(job)
        .join("items")
        .join(format!("{id}.json"))
}

/// Writes an item as Prodigy's queue did (pretty JSON, one file per item).
fn write_legacy(base: &Path, job: &str, item: &DeadLetteredItem) -> PathBuf {
    let path = legacy_file(base, job, &item.item_id);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(item).unwrap()).unwrap();
    path
}

/// An event writer that keeps the DLQ events, as short strings.
struct Recorder(Arc<Mutex<Vec<String>>>);

#[async_trait::async_trait]
impl EventWriter for Recorder {
    async fn write(&self, events: &[EventRecord]) -> anyhow::Result<()> {
        let mut seen = self.0.lock().unwrap();
        for record in events {
            seen.push(match &record.event {
                MapReduceEvent::DLQItemAdded {
                    item_id,
                    failure_count,
                    ..
                } => format!("added {item_id} ({failure_count})"),
                MapReduceEvent::DLQItemRemoved { item_id, .. } => format!("removed {item_id}"),
                MapReduceEvent::DLQItemsEvicted { count, .. } => format!("evicted {count}"),
                MapReduceEvent::DLQItemsReprocessed { count, .. } => {
                    format!("reprocessed {count}")
                }
                MapReduceEvent::DLQAnalysisGenerated { patterns, .. } => {
                    format!("analysis {patterns}")
                }
                other => format!("other {}", other.event_name()),
            });
        }
        Ok(())
    }

    async fn flush(&self) -> anyhow::Result<()> {
        Ok(())
    }

    fn clone(&self) -> Box<dyn EventWriter> {
        Box::new(Recorder(Arc::clone(&self.0)))
    }
}

/// A queue reporting to Prodigy's `EventLogger`, which writes to a
/// [`Recorder`]; `events` flushes the logger and takes what it recorded.
struct Recorded {
    q: DeadLetterQueue,
    logger: Arc<EventLogger>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Recorded {
    async fn new(base: &Path, job: &str, max_items: usize) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let logger = Arc::new(EventLogger::new(vec![Box::new(Recorder(Arc::clone(
            &seen,
        )))]));
        let q = DeadLetterQueue::new(
            job.to_string(),
            base.to_path_buf(),
            max_items,
            30,
            Some(Arc::clone(&logger)),
        )
        .await
        .unwrap();
        Recorded { q, logger, seen }
    }

    async fn events(&self) -> Vec<String> {
        self.logger.flush().await.unwrap();
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

// ---------------------------------------------------------------------------
// Which implementation

#[tokio::test]
async fn implementation_is_the_one_announced() {
    let dir = TempDir::new().unwrap();
    let q = queue(dir.path(), "job", 10).await;
    q.add(item("a", 0)).await.unwrap();
    let database = dir.path().join("mapreduce/dlq/dlq.db").exists();
    let json = legacy_file(dir.path(), "job", "a").exists();
    assert_eq!(
        (database, json),
        (adapter(), !adapter()),
        "DLQLITE_ADAPTER={:?} but the queue wrote: database {database}, JSON file {json}",
        std::env::var("DLQLITE_ADAPTER").ok()
    );
}

// ---------------------------------------------------------------------------
// Round trip

#[tokio::test]
async fn round_trip_keeps_every_field() {
    let dir = TempDir::new().unwrap();
    let at = |m: i64, nanos: u32| t(m).with_nanosecond(nanos).unwrap();
    let mut first = attempt(
        1,
        at(0, 123_456_789),
        ErrorType::Timeout,
        "timed out after 300s",
    );
    first.error_context = Some(vec!["map phase".into(), "agent agent-1".into()]);
    first.stack_trace = Some("at main.rs:1".into());
    first.json_log_location = Some("/home/u/.claude/log.jsonl".into());
    let second = attempt(
        2,
        at(7, 1),
        ErrorType::CommandFailed { exit_code: 101 },
        "cargo test failed",
    );
    let full = DeadLetteredItem {
        item_id: "item-full".into(),
        item_data: json!({"path": "src/a.rs", "n": 1.5, "nested": {"list": [1, null, "x"]}}),
        first_attempt: at(0, 123_456_789),
        last_attempt: at(7, 1),
        failure_count: 2,
        failure_history: vec![first, second],
        error_signature: "CommandFailed { exit_code: 101 }::cargo test failed".into(),
        worktree_artifacts: Some(WorktreeArtifacts {
            worktree_path: PathBuf::from("/tmp/wt/agent-2"),
            branch_name: "prodigy-agent-2".into(),
            uncommitted_changes: Some(" M src/a.rs".into()),
            error_logs: None,
        }),
        reprocess_eligible: false,
        manual_review_required: true,
    };
    let q = queue(dir.path(), "job", 10).await;
    q.add(full.clone()).await.unwrap();
    assert_eq!(
        value(&q.get_item("item-full").await.unwrap().unwrap()),
        value(&full)
    );
    let again = queue(dir.path(), "job", 10).await;
    assert_eq!(
        value(&again.get_item("item-full").await.unwrap().unwrap()),
        value(&full)
    );
    assert!(again.get_item("missing").await.unwrap().is_none());
}

// ---------------------------------------------------------------------------
// Capacity

#[tokio::test]
async fn capacity_full_queue_evicts_the_oldest_last_attempt() {
    let dir = TempDir::new().unwrap();
    let q = Recorded::new(dir.path(), "job", 10).await;
    // Added out of time order: eviction goes by last_attempt, not by when
    // an item was added.
    for m in [5, 3, 9, 0, 7, 1, 8, 2, 6, 4] {
        q.q.add(item(&format!("m{m}"), m)).await.unwrap();
    }
    q.events().await;
    q.q.add(item("m10", 10)).await.unwrap();
    let expected: BTreeSet<String> = (1..=10).map(|m| format!("m{m}")).collect();
    assert_eq!(id_set(&q.q).await, expected);
    assert_eq!(q.q.get_stats().await.unwrap().total_items, 10);
    assert_eq!(
        q.events().await,
        ["removed m0", "evicted 1", "added m10 (1)"]
    );
}

#[tokio::test]
async fn capacity_keeps_the_added_item_even_when_it_is_the_oldest() {
    let dir = TempDir::new().unwrap();
    let q = queue(dir.path(), "job", 10).await;
    for m in 10..20 {
        q.add(item(&format!("m{m}"), m)).await.unwrap();
    }
    q.add(item("old", 0)).await.unwrap();
    let items = id_set(&q).await;
    assert_eq!(items.len(), 10);
    assert!(items.contains("old"), "the item just added is kept");
    assert!(!items.contains("m10"), "the oldest other item made room");
    // At the next add it is the oldest, and goes.
    q.add(item("m20", 20)).await.unwrap();
    let items = id_set(&q).await;
    assert_eq!(items.len(), 10);
    assert!(!items.contains("old"));
}

#[tokio::test]
async fn capacity_one_keeps_the_latest_add() {
    let dir = TempDir::new().unwrap();
    let q = queue(dir.path(), "job", 1).await;
    q.add(item("a", 0)).await.unwrap();
    q.add(item("b", 1)).await.unwrap();
    assert_eq!(ids(&q).await, ["b"]);
    q.add(item("older", -5)).await.unwrap();
    assert_eq!(ids(&q).await, ["older"]);
}

#[tokio::test]
async fn capacity_is_per_job() {
    let dir = TempDir::new().unwrap();
    let a = queue(dir.path(), "job-a", 3).await;
    let b = queue(dir.path(), "job-b", 3).await;
    for m in 0..3 {
        a.add(item(&format!("a{m}"), m)).await.unwrap();
        b.add(item(&format!("b{m}"), m)).await.unwrap();
    }
    assert_eq!(id_set(&a).await, set(&["a0", "a1", "a2"]));
    assert_eq!(id_set(&b).await, set(&["b0", "b1", "b2"]));
    a.add(item("a3", 3)).await.unwrap();
    assert_eq!(id_set(&a).await, set(&["a1", "a2", "a3"]));
    assert_eq!(
        id_set(&b).await,
        set(&["b0", "b1", "b2"]),
        "job-b untouched"
    );
}

#[tokio::test]
async fn capacity_counts_items_stored_before_the_queue_was_created() {
    let dir = TempDir::new().unwrap();
    let first = queue(dir.path(), "job", 5).await;
    for m in 0..5 {
        first.add(item(&format!("m{m}"), m)).await.unwrap();
    }
    drop(first);
    let second = queue(dir.path(), "job", 5).await;
    second.add(item("m5", 5)).await.unwrap();
    assert_eq!(id_set(&second).await, set(&["m1", "m2", "m3", "m4", "m5"]));
}

#[tokio::test]
async fn difference_capacity_evicts_a_tenth_or_one() {
    let dir = TempDir::new().unwrap();
    let q = Recorded::new(dir.path(), "job", 20).await;
    for m in 0..20 {
        q.q.add(item(&format!("m{m}"), m)).await.unwrap();
    }
    q.events().await;
    q.q.add(item("m20", 20)).await.unwrap();
    let items = id_set(&q.q).await;
    assert!(items.contains("m20") && !items.contains("m0"));
    if adapter() {
        // Trimmed to exactly max_items: one item made room.
        assert_eq!(items.len(), 20);
        assert!(items.contains("m1"));
        assert_eq!(
            q.events().await,
            ["removed m0", "evicted 1", "added m20 (1)"]
        );
    } else {
        // Prodigy evicts max_items / 10 (at least one) before adding.
        assert_eq!(items.len(), 19);
        assert!(!items.contains("m1"));
        assert_eq!(
            q.events().await,
            ["removed m0", "removed m1", "evicted 2", "added m20 (1)"]
        );
    }
}

#[tokio::test]
async fn difference_capacity_readding_to_a_full_queue() {
    let dir = TempDir::new().unwrap();
    let q = Recorded::new(dir.path(), "job", 10).await;
    for m in 0..10 {
        q.q.add(item(&format!("m{m}"), m)).await.unwrap();
    }
    q.events().await;
    // m5 fails again: the job does not grow.
    q.q.add(item("m5", 30)).await.unwrap();
    let items = id_set(&q.q).await;
    assert!(items.contains("m5"));
    if adapter() {
        assert_eq!(items.len(), 10, "nothing evicted: the job did not grow");
        let m5 = q.q.get_item("m5").await.unwrap().unwrap();
        assert_eq!(q.events().await, ["added m5 (1)"]);
        assert_eq!(m5.failure_count, 2);
    } else {
        assert_eq!(items.len(), 9, "m0 evicted although the job did not grow");
        assert!(!items.contains("m0"));
        assert_eq!(
            q.events().await,
            ["removed m0", "evicted 1", "added m5 (1)"]
        );
    }
}

#[tokio::test]
async fn difference_capacity_zero() {
    let dir = TempDir::new().unwrap();
    let q = queue(dir.path(), "job", 0).await;
    for m in 0..3 {
        q.add(item(&format!("m{m}"), m)).await.unwrap();
    }
    if adapter() {
        assert_eq!(id_set(&q).await, set(&["m0", "m1", "m2"]), "0 is unlimited");
    } else {
        assert_eq!(ids(&q).await, ["m2"], "Prodigy keeps the last one");
    }
}

// ---------------------------------------------------------------------------
// Adding an item that is already there

/// `v1` failed at minute 0 (attempt 1), `v2` at minute 5 (attempt 2), with
/// other data, signature and flags.
fn two_failures() -> (DeadLetteredItem, DeadLetteredItem) {
    let v1 = item("x", 0);
    let mut v2 = item("x", 5);
    v2.item_data = json!({"id": "x", "version": 2});
    v2.failure_history = vec![attempt(2, t(5), ErrorType::Timeout, "timed out")];
    v2.error_signature = "Timeout::timed out".into();
    v2.reprocess_eligible = false;
    v2.manual_review_required = true;
    (v1, v2)
}

#[tokio::test]
async fn readd_keeps_one_item_with_the_later_failures_data() {
    let dir = TempDir::new().unwrap();
    let (v1, v2) = two_failures();
    let q = queue(dir.path(), "job", 10).await;
    q.add(v1).await.unwrap();
    q.add(v2.clone()).await.unwrap();
    assert_eq!(ids(&q).await, ["x"]);
    let stored = q.get_item("x").await.unwrap().unwrap();
    assert_eq!(stored.item_data, v2.item_data);
    assert_eq!(stored.error_signature, v2.error_signature);
    assert!(!stored.reprocess_eligible && stored.manual_review_required);
    assert_eq!(stored.last_attempt, t(5));
    let stats = q.get_stats().await.unwrap();
    assert_eq!(stats.total_items, 1);
    assert_eq!(stats.error_categories.len(), 1);
    assert_eq!(stats.error_categories["Timeout::timed out"], 1);
    // The same through a queue opened afterwards.
    let again = queue(dir.path(), "job", 10).await;
    assert_eq!(
        value(&again.get_item("x").await.unwrap().unwrap()),
        value(&stored)
    );
}

#[tokio::test]
async fn remove_then_add_replaces_the_item() {
    // Prodigy's own way to update an item (dlq_agent_integration_test).
    let dir = TempDir::new().unwrap();
    let (v1, v2) = two_failures();
    let q = queue(dir.path(), "job", 10).await;
    q.add(v1).await.unwrap();
    q.remove("x").await.unwrap();
    q.add(v2.clone()).await.unwrap();
    assert_eq!(value(&q.get_item("x").await.unwrap().unwrap()), value(&v2));
}

#[tokio::test]
async fn difference_readd_keeps_the_failure_history() {
    let dir = TempDir::new().unwrap();
    let (v1, v2) = two_failures();
    let q = queue(dir.path(), "job", 10).await;
    q.add(v1.clone()).await.unwrap();
    q.add(v2.clone()).await.unwrap();
    let stored = q.get_item("x").await.unwrap().unwrap();
    let attempts: Vec<u32> = stored
        .failure_history
        .iter()
        .map(|a| a.attempt_number)
        .collect();
    if adapter() {
        assert_eq!(attempts, [1, 2]);
        assert_eq!(stored.failure_count, 2);
        assert_eq!(stored.first_attempt, t(0));
    } else {
        assert_eq!(attempts, [2], "the second add replaced the first");
        assert_eq!(stored.failure_count, 1);
        assert_eq!(stored.first_attempt, t(5));
    }
}

#[tokio::test]
async fn difference_readding_an_older_copy() {
    // A stale copy (a resumed run reporting an old failure) after a newer one.
    let dir = TempDir::new().unwrap();
    let (v1, v2) = two_failures();
    let q = queue(dir.path(), "job", 10).await;
    q.add(v2.clone()).await.unwrap();
    q.add(v1.clone()).await.unwrap();
    let stored = q.get_item("x").await.unwrap().unwrap();
    if adapter() {
        assert_eq!(
            stored.item_data, v2.item_data,
            "the later failure's data stays"
        );
        assert_eq!(stored.last_attempt, t(5));
        assert_eq!(stored.failure_history.len(), 2);
    } else {
        assert_eq!(value(&stored), value(&v1), "the last add wins");
    }
}

#[tokio::test]
async fn difference_readding_with_the_same_timestamps() {
    // get, change a field, add: same failures, other data and flags.
    let dir = TempDir::new().unwrap();
    let v1 = item("x", 0);
    let mut changed = v1.clone();
    changed.item_data = json!({"id": "x", "edited": true});
    changed.reprocess_eligible = false;
    let q = queue(dir.path(), "job", 10).await;
    q.add(v1.clone()).await.unwrap();
    q.add(changed.clone()).await.unwrap();
    let stored = q.get_item("x").await.unwrap().unwrap();
    if adapter() {
        // A tie on the last failure: the stored copy wins.
        assert_eq!(value(&stored), value(&v1));
    } else {
        assert_eq!(value(&stored), value(&changed));
    }
}

// ---------------------------------------------------------------------------
// Prodigy's JSON files already under the base path

#[tokio::test]
async fn legacy_json_is_read_when_the_queue_opens() {
    let dir = TempDir::new().unwrap();
    let mut written = Vec::new();
    for m in 0..3 {
        let mut it = item(&format!("old{m}"), m);
        it.failure_count = 2;
        it.failure_history.insert(
            0,
            attempt(1, t(m) - Duration::seconds(30), ErrorType::Unknown, "first"),
        );
        it.failure_history[1].attempt_number = 2;
        write_legacy(dir.path(), "job", &it);
        written.push(it);
    }
    let q = queue(dir.path(), "job", 10).await;
    assert_eq!(ids(&q).await, ["old2", "old1", "old0"]);
    for it in &written {
        assert_eq!(
            value(&q.get_item(&it.item_id).await.unwrap().unwrap()),
            value(it)
        );
    }
    let stats = q.get_stats().await.unwrap();
    assert_eq!(stats.total_items, 3);
    assert_eq!(stats.newest_item, Some(t(2)));
}

#[tokio::test]
async fn legacy_json_unreadable_files_are_skipped() {
    let dir = TempDir::new().unwrap();
    write_legacy(dir.path(), "job", &item("good", 0));
    let bad = legacy_file(dir.path(), "job", "bad");
    std::fs::write(&bad, "{ not json").unwrap();
    std::fs::write(bad.with_file_name("notes.txt"), "not an item").unwrap();
    let q = queue(dir.path(), "job", 10).await;
    assert_eq!(ids(&q).await, ["good"]);
    assert_eq!(
        std::fs::read_to_string(&bad).unwrap(),
        "{ not json",
        "left alone"
    );
}

#[tokio::test]
async fn legacy_json_of_other_jobs_stays_with_them() {
    let dir = TempDir::new().unwrap();
    write_legacy(dir.path(), "job-1", &item("one", 0));
    write_legacy(dir.path(), "job-2", &item("two", 1));
    let one = queue(dir.path(), "job-1", 10).await;
    let two = queue(dir.path(), "job-2", 10).await;
    assert_eq!(ids(&one).await, ["one"]);
    assert_eq!(ids(&two).await, ["two"]);
    assert!(one.get_item("two").await.unwrap().is_none());
}

#[tokio::test]
async fn legacy_json_then_add_then_reopen() {
    let dir = TempDir::new().unwrap();
    let old = write_legacy(dir.path(), "job", &item("old", 0));
    let before = std::fs::read(&old).unwrap();
    let q = queue(dir.path(), "job", 10).await;
    q.add(item("new", 1)).await.unwrap();
    let again = queue(dir.path(), "job", 10).await;
    assert_eq!(ids(&again).await, ["new", "old"]);
    assert_eq!(
        std::fs::read(&old).unwrap(),
        before,
        "the old file is not rewritten"
    );
}

#[tokio::test]
async fn legacy_json_counts_toward_capacity() {
    let dir = TempDir::new().unwrap();
    for m in 0..5 {
        write_legacy(dir.path(), "job", &item(&format!("m{m}"), m));
    }
    let q = queue(dir.path(), "job", 5).await;
    q.add(item("m5", 5)).await.unwrap();
    assert_eq!(id_set(&q).await, set(&["m1", "m2", "m3", "m4", "m5"]));
}

#[tokio::test]
async fn legacy_json_removed_item_stays_removed() {
    let dir = TempDir::new().unwrap();
    write_legacy(dir.path(), "job", &item("keep", 0));
    let gone = write_legacy(dir.path(), "job", &item("gone", 1));
    let q = queue(dir.path(), "job", 10).await;
    q.remove("gone").await.unwrap();
    let again = queue(dir.path(), "job", 10).await;
    assert_eq!(ids(&again).await, ["keep"]);
    // Prodigy deletes the file; the adapter never writes JSON.
    assert_eq!(gone.exists(), adapter());
}

#[tokio::test]
async fn legacy_json_removed_item_stays_removed_whatever_the_base_path_spelling() {
    // The same directory named with a trailing slash (as a configured or
    // joined path may be): a reprocessed item must not come back.
    let dir = TempDir::new().unwrap();
    write_legacy(dir.path(), "job", &item("keep", 0));
    write_legacy(dir.path(), "job", &item("gone", 1));
    let q = queue(dir.path(), "job", 10).await;
    assert_eq!(q.reprocess(vec!["gone".into()]).await.unwrap().len(), 1);
    let spelled = PathBuf::from(format!("{}/", dir.path().display()));
    let again = queue(&spelled, "job", 10).await;
    assert_eq!(ids(&again).await, ["keep"]);
    let plain = queue(dir.path(), "job", 10).await;
    assert_eq!(ids(&plain).await, ["keep"]);
}

#[tokio::test]
async fn legacy_json_deeper_below_the_base_path_is_not_the_queues() {
    // A base path is a directory Prodigy keeps other things in too (a
    // project root, for MapReduceResumeManager): only
    // <base>/mapreduce/dlq/<job>/items/ belongs to its queue.
    let dir = TempDir::new().unwrap();
    write_legacy(dir.path(), "job", &item("mine", 0));
    let elsewhere = dir.path().join("fixtures").join("copy");
    write_legacy(&elsewhere, "job", &item("fixture", 1));
    write_legacy(&elsewhere, "other", &item("other", 2));
    let q = queue(dir.path(), "job", 10).await;
    assert_eq!(ids(&q).await, ["mine"]);
    let other = queue(dir.path(), "other", 10).await;
    assert!(ids(&other).await.is_empty());
}

#[tokio::test]
async fn difference_legacy_json_written_after_the_first_open() {
    let dir = TempDir::new().unwrap();
    write_legacy(dir.path(), "job", &item("early", 0));
    let q = queue(dir.path(), "job", 10).await;
    assert_eq!(ids(&q).await, ["early"]);
    // Another writer (an older Prodigy) adds a file later.
    write_legacy(dir.path(), "job", &item("late", 1));
    let again = queue(dir.path(), "job", 10).await;
    if adapter() {
        assert_eq!(ids(&again).await, ["early"], "adopted once, not re-read");
    } else {
        assert_eq!(ids(&again).await, ["late", "early"]);
    }
}

#[tokio::test]
async fn difference_no_json_files_written() {
    let dir = TempDir::new().unwrap();
    let q = queue(dir.path(), "job", 10).await;
    q.add(item("a", 0)).await.unwrap();
    let job_dir = dir.path().join("mapreduce/dlq/job");
    if adapter() {
        assert!(!job_dir.exists(), "no items/ or index.json");
    } else {
        assert!(legacy_file(dir.path(), "job", "a").exists());
        let index: Value =
            serde_json::from_str(&std::fs::read_to_string(job_dir.join("index.json")).unwrap())
                .unwrap();
        assert_eq!(index["item_count"], 1);
    }
}

// ---------------------------------------------------------------------------
// Two queues on one base path

#[tokio::test]
async fn two_queues_a_queue_created_later_sees_earlier_writes() {
    let dir = TempDir::new().unwrap();
    let first = queue(dir.path(), "job", 10).await;
    first.add(item("a", 0)).await.unwrap();
    first.add(item("b", 1)).await.unwrap();
    first.remove("a").await.unwrap();
    let second = queue(dir.path(), "job", 10).await;
    assert_eq!(ids(&second).await, ["b"]);
    second.add(item("c", 2)).await.unwrap();
    let third = queue(dir.path(), "job", 10).await;
    assert_eq!(ids(&third).await, ["c", "b"]);
}

#[tokio::test]
async fn difference_two_queues_see_each_others_writes() {
    let dir = TempDir::new().unwrap();
    let one = queue(dir.path(), "job", 10).await;
    let two = queue(dir.path(), "job", 10).await;
    one.add(item("a", 0)).await.unwrap();
    two.add(item("b", 1)).await.unwrap();
    if adapter() {
        assert_eq!(ids(&one).await, ["b", "a"]);
        assert_eq!(ids(&two).await, ["b", "a"]);
        assert_eq!(two.get_stats().await.unwrap().total_items, 2);
    } else {
        // Each queue knows the files present at `new` and its own writes.
        assert_eq!(ids(&one).await, ["a"]);
        assert_eq!(ids(&two).await, ["b"]);
        assert!(two.get_item("a").await.unwrap().is_none());
    }
}

#[tokio::test]
async fn difference_two_queues_reprocess_one_item_once() {
    let dir = TempDir::new().unwrap();
    queue(dir.path(), "job", 10)
        .await
        .add(item("x", 0))
        .await
        .unwrap();
    let one = queue(dir.path(), "job", 10).await;
    let two = queue(dir.path(), "job", 10).await;
    assert_eq!(one.reprocess(vec!["x".into()]).await.unwrap().len(), 1);
    let second_time = two.reprocess(vec!["x".into()]).await.unwrap();
    if adapter() {
        assert!(second_time.is_empty(), "already taken by the other queue");
    } else {
        assert_eq!(second_time.len(), 1, "handed out twice");
    }
    assert!(ids(&queue(dir.path(), "job", 10).await).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn difference_two_queues_reprocessing_at_once() {
    let dir = TempDir::new().unwrap();
    let all: Vec<String> = (0..100).map(|i| format!("i{i:03}")).collect();
    let q = queue(dir.path(), "job", 1000).await;
    for (m, id) in all.iter().enumerate() {
        q.add(item(id, m as i64)).await.unwrap();
    }
    let one = queue(dir.path(), "job", 1000).await;
    let two = queue(dir.path(), "job", 1000).await;
    let (a, b) = tokio::join!(one.reprocess(all.clone()), two.reprocess(all.clone()));
    if adapter() {
        let handed = a.unwrap().len() + b.unwrap().len();
        assert_eq!(handed, 100, "each item handed out once");
    } else {
        // Each queue hands out its own snapshot, or fails when the other
        // deleted a file between its exists() and remove_file().
        match (a, b) {
            (Ok(a), Ok(b)) => assert_eq!(a.len() + b.len(), 200),
            (a, b) => assert!(a.is_err() || b.is_err()),
        }
    }
    assert!(ids(&queue(dir.path(), "job", 1000).await).await.is_empty());
}

// ---------------------------------------------------------------------------
// Two processes

/// Runs `child_process_writer` in a child process (this test binary).
fn spawn_writer(base: &Path, job: &str, ids: &[String], minute: i64, attempt: u32) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "child_process_writer",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("DLQ_BEHAVIOUR_CHILD_BASE", base)
        .env("DLQ_BEHAVIOUR_CHILD_JOB", job)
        .env("DLQ_BEHAVIOUR_CHILD_IDS", ids.join(","))
        .env("DLQ_BEHAVIOUR_CHILD_MINUTE", minute.to_string())
        .env("DLQ_BEHAVIOUR_CHILD_ATTEMPT", attempt.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_ok(child: Child) {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Not a test: the writer the two-process tests start (see the module docs).
#[tokio::test]
#[ignore = "run by the two-process tests in a child process"]
async fn child_process_writer() {
    let Ok(base) = std::env::var("DLQ_BEHAVIOUR_CHILD_BASE") else {
        return;
    };
    let job = std::env::var("DLQ_BEHAVIOUR_CHILD_JOB").unwrap();
    let minute: i64 = std::env::var("DLQ_BEHAVIOUR_CHILD_MINUTE")
        .unwrap()
        .parse()
        .unwrap();
    let number: u32 = std::env::var("DLQ_BEHAVIOUR_CHILD_ATTEMPT")
        .unwrap()
        .parse()
        .unwrap();
    let q = queue(Path::new(&base), &job, 1000).await;
    for (i, id) in std::env::var("DLQ_BEHAVIOUR_CHILD_IDS")
        .unwrap()
        .split(',')
        .enumerate()
    {
        let m = minute + i as i64;
        let mut it = item(id, m);
        it.failure_history[0].attempt_number = number;
        it.item_data = json!({"id": id, "pid": std::process::id()});
        q.add(it).await.unwrap();
    }
}

#[tokio::test]
async fn two_processes_add_to_one_queue_at_once() {
    let dir = TempDir::new().unwrap();
    let one: Vec<String> = (0..25).map(|i| format!("p1-{i:02}")).collect();
    let two: Vec<String> = (0..25).map(|i| format!("p2-{i:02}")).collect();
    let c1 = spawn_writer(dir.path(), "job", &one, 0, 1);
    let c2 = spawn_writer(dir.path(), "job", &two, 100, 1);
    wait_ok(c1);
    wait_ok(c2);
    let q = queue(dir.path(), "job", 1000).await;
    let expected: BTreeSet<String> = one.iter().chain(&two).cloned().collect();
    assert_eq!(id_set(&q).await, expected);
    assert_eq!(q.get_stats().await.unwrap().total_items, 50);
}

#[tokio::test]
async fn difference_two_processes_one_item() {
    let dir = TempDir::new().unwrap();
    let open_before = queue(dir.path(), "job", 1000).await;
    wait_ok(spawn_writer(dir.path(), "job", &["x".into()], 0, 1));
    wait_ok(spawn_writer(dir.path(), "job", &["x".into()], 5, 2));
    let q = queue(dir.path(), "job", 1000).await;
    let stored = q.get_item("x").await.unwrap().unwrap();
    assert_eq!(stored.last_attempt, t(5));
    let attempts: Vec<u32> = stored
        .failure_history
        .iter()
        .map(|a| a.attempt_number)
        .collect();
    if adapter() {
        assert_eq!(attempts, [1, 2], "both processes' failures");
        assert_eq!(
            ids(&open_before).await,
            ["x"],
            "seen by a queue opened before"
        );
    } else {
        assert_eq!(
            attempts,
            [2],
            "the second process's copy replaced the first"
        );
        assert!(
            ids(&open_before).await.is_empty(),
            "not seen by a queue opened before"
        );
    }
}

// ---------------------------------------------------------------------------
// Reprocess

#[tokio::test]
async fn reprocess_returns_data_in_the_order_asked() {
    let dir = TempDir::new().unwrap();
    let q = Recorded::new(dir.path(), "job", 10).await;
    for (m, id) in ["a", "b", "c", "d"].iter().enumerate() {
        let mut it = item(id, m as i64);
        it.reprocess_eligible = *id != "c";
        q.q.add(it).await.unwrap();
    }
    q.events().await;
    let asked = ["d", "c", "nope", "a", "a"].map(String::from).to_vec();
    let data = q.q.reprocess(asked).await.unwrap();
    assert_eq!(
        data,
        [
            json!({"id": "d", "minute": 3}),
            json!({"id": "a", "minute": 0})
        ]
    );
    assert_eq!(
        ids(&q.q).await,
        ["c", "b"],
        "the ineligible and the unasked stay"
    );
    assert_eq!(
        q.events().await,
        ["removed d", "removed a", "reprocessed 2"]
    );
    assert!(q.q.reprocess(vec!["c".into()]).await.unwrap().is_empty());
    assert_eq!(q.events().await, ["reprocessed 0"]);
}

// ---------------------------------------------------------------------------
// Events

#[tokio::test]
async fn events_of_add_remove_analyze_and_purge() {
    let dir = TempDir::new().unwrap();
    let q = Recorded::new(dir.path(), "job", 10).await;
    q.q.add(item("a", 0)).await.unwrap();
    q.q.add(item("b", 10)).await.unwrap();
    q.q.add(item("c", 20)).await.unwrap();
    q.q.remove("a").await.unwrap();
    q.q.remove("never-there").await.unwrap();
    assert_eq!(
        q.events().await,
        [
            "added a (1)",
            "added b (1)",
            "added c (1)",
            "removed a",
            "removed never-there"
        ]
    );
    q.q.analyze_patterns().await.unwrap();
    assert_eq!(q.events().await, ["analysis 1"]);
    assert_eq!(q.q.purge_old_items(t(15)).await.unwrap(), 1);
    assert_eq!(q.events().await, ["removed b"]);
    q.q.list_items(DLQFilter::default()).await.unwrap();
    q.q.get_stats().await.unwrap();
    q.q.get_item("c").await.unwrap();
    q.q.export_items(&dir.path().join("export.json"))
        .await
        .unwrap();
    assert!(q.events().await.is_empty(), "reads log nothing");
}

// ---------------------------------------------------------------------------
// Reads

fn varied() -> Vec<DeadLetteredItem> {
    let mut a = item("a", 0);
    a.failure_history[0].error_type = ErrorType::CommandFailed { exit_code: 2 };
    a.error_signature = "CommandFailed::exit 2".into();
    let mut b = item("b", 60);
    b.reprocess_eligible = false;
    b.manual_review_required = true;
    b.failure_history
        .push(attempt(2, t(60), ErrorType::Timeout, "timed out"));
    b.failure_history[0].timestamp = t(30);
    b.first_attempt = t(30);
    b.failure_count = 2;
    let mut c = item("c", 130);
    c.failure_history[0].error_type = ErrorType::Timeout;
    c.error_signature = "Timeout::timed out".into();
    vec![a, b, c]
}

#[tokio::test]
async fn list_items_filters_and_order() {
    let dir = TempDir::new().unwrap();
    let q = queue(dir.path(), "job", 10).await;
    for it in varied() {
        q.add(it).await.unwrap();
    }
    let q = &q;
    let list = |filter: DLQFilter| async move {
        q.list_items(filter)
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.item_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(list(DLQFilter::default()).await, ["c", "b", "a"]);
    let of_type = |e: ErrorType| DLQFilter {
        error_type: Some(e),
        ..DLQFilter::default()
    };
    assert_eq!(list(of_type(ErrorType::Timeout)).await, ["c", "b"]);
    assert_eq!(
        list(of_type(ErrorType::CommandFailed { exit_code: 1 })).await,
        ["b"]
    );
    assert_eq!(
        list(of_type(ErrorType::CommandFailed { exit_code: 2 })).await,
        ["a"]
    );
    assert!(list(of_type(ErrorType::MergeConflict)).await.is_empty());
    let eligible = DLQFilter {
        reprocess_eligible: Some(false),
        ..DLQFilter::default()
    };
    assert_eq!(list(eligible).await, ["b"]);
    let window = DLQFilter {
        after: Some(t(60)),
        before: Some(t(130)),
        ..DLQFilter::default()
    };
    assert_eq!(list(window).await, ["c", "b"], "both bounds included");
    let before = DLQFilter {
        before: Some(t(60) - Duration::nanoseconds(1)),
        ..DLQFilter::default()
    };
    assert_eq!(list(before).await, ["a"]);
    let signature = DLQFilter {
        error_signature: Some("build".into()),
        ..DLQFilter::default()
    };
    assert_eq!(list(signature).await, ["b"]);
}

#[tokio::test]
async fn stats_and_patterns() {
    let dir = TempDir::new().unwrap();
    let q = queue(dir.path(), "job", 10).await;
    for it in varied() {
        q.add(it).await.unwrap();
    }
    let stats = q.get_stats().await.unwrap();
    assert_eq!(stats.total_items, 3);
    assert_eq!(stats.eligible_for_reprocess, 2);
    assert_eq!(stats.requiring_manual_review, 1);
    assert_eq!(stats.oldest_item, Some(t(0)));
    assert_eq!(stats.newest_item, Some(t(130)));
    assert_eq!(stats.error_categories.len(), 3);

    let analysis = q.analyze_patterns().await.unwrap();
    assert_eq!(analysis.total_items, 3);
    assert_eq!(analysis.pattern_groups.len(), 3);
    assert!(analysis
        .pattern_groups
        .iter()
        .all(|g| g.count == 1 && g.sample_items.len() == 1));
    assert_eq!(
        analysis.error_distribution[&ErrorType::Timeout],
        2,
        "attempts, not items"
    );
    assert_eq!(
        analysis.error_distribution[&ErrorType::CommandFailed { exit_code: 1 }],
        1
    );
    assert_eq!(
        analysis.error_distribution[&ErrorType::CommandFailed { exit_code: 2 }],
        1
    );
    assert_eq!(
        analysis.temporal_distribution,
        [(t(0), 1), (t(60), 1), (t(120), 1)],
        "hours of the last attempts"
    );
}

#[tokio::test]
async fn purge_removes_items_last_tried_before_the_time() {
    let dir = TempDir::new().unwrap();
    let q = queue(dir.path(), "job", 10).await;
    for m in [0, 5, 10] {
        q.add(item(&format!("m{m}"), m)).await.unwrap();
    }
    assert_eq!(q.purge_old_items(t(5)).await.unwrap(), 1, "strictly before");
    assert_eq!(ids(&q).await, ["m10", "m5"]);
    assert_eq!(q.purge_old_items(t(0)).await.unwrap(), 0);
    let empty = queue(&dir.path().join("nothing"), "job", 10).await;
    assert_eq!(empty.purge_old_items(t(100)).await.unwrap(), 0);
}

#[tokio::test]
async fn export_writes_every_item_whole() {
    let dir = TempDir::new().unwrap();
    let q = queue(dir.path(), "job", 10).await;
    let items = varied();
    for it in &items {
        q.add(it.clone()).await.unwrap();
    }
    let path = dir.path().join("export.json");
    q.export_items(&path).await.unwrap();
    let mut exported: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    exported.sort_by_key(|v| v["item_id"].as_str().unwrap().to_string());
    let expected: Vec<Value> = items.iter().map(value).collect();
    assert_eq!(exported, expected);
}

#[tokio::test]
async fn an_unused_base_path_reads_empty() {
    let dir = TempDir::new().unwrap();
    let base = dir.path().join("never-written");
    let q = queue(&base, "job", 10).await;
    assert!(ids(&q).await.is_empty());
    assert!(q.get_item("x").await.unwrap().is_none());
    let stats = q.get_stats().await.unwrap();
    assert_eq!(stats.total_items, 0);
    assert!(stats.oldest_item.is_none());
    assert_eq!(q.analyze_patterns().await.unwrap().total_items, 0);
    q.remove("x").await.unwrap();
    assert!(!base.exists(), "reading and removing create nothing");
}
