//! The Prodigy adapter (`dlqlite::compat::prodigy`, feature `prodigy`)
//! through its public API only: Prodigy-shaped items in and out, stored in
//! the dlqlite database its base path names, events to a logger, nothing
//! created before the first write. Run with `cargo test --test tests
//! prodigy`.

use crate::common::TempDir;
use chrono::{DateTime, Duration, Utc};
use dlqlite::compat::prodigy::{
    database_path, DLQEvent, DLQEventLogger, DLQFilter, DLQStorage, DeadLetterQueue,
    DeadLetteredItem, ErrorType, FailureDetail, WorktreeArtifacts,
};
use serde_json::json;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A logger that keeps what it is told.
#[derive(Default)]
struct Recorder(Mutex<Vec<(String, DLQEvent)>>);

impl DLQEventLogger for Recorder {
    async fn log_dlq_event(&self, job_id: String, event: DLQEvent) -> anyhow::Result<()> {
        self.0.lock().unwrap().push((job_id, event));
        Ok(())
    }
}

impl Recorder {
    /// The events as short strings: `added:a`, `removed:b`, `evicted:2`...
    fn names(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, event)| match event {
                DLQEvent::ItemAdded { item } => format!("added:{}", item.item_id),
                DLQEvent::ItemRemoved { item_id } => format!("removed:{item_id}"),
                DLQEvent::ItemsReprocessed { count } => format!("reprocessed:{count}"),
                DLQEvent::ItemsEvicted { count } => format!("evicted:{count}"),
                DLQEvent::AnalysisGenerated { patterns } => format!("analysis:{patterns}"),
            })
            .collect()
    }
}

type Queue = DeadLetterQueue<Recorder>;

/// Runs a future on a current-thread runtime, as `#[tokio::test]` does.
fn run<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn attempt(number: u32, time: DateTime<Utc>, error_type: ErrorType) -> FailureDetail {
    FailureDetail {
        attempt_number: number,
        timestamp: time,
        error_type,
        error_message: format!("attempt {number} failed"),
        error_context: None,
        stack_trace: None,
        agent_id: format!("agent-{number}"),
        step_failed: "map".to_string(),
        duration_ms: 100,
        json_log_location: None,
    }
}

fn item(id: &str, last: DateTime<Utc>, signature: &str, eligible: bool) -> DeadLetteredItem {
    DeadLetteredItem {
        item_id: id.to_string(),
        item_data: json!({"id": id}),
        first_attempt: last - Duration::hours(1),
        last_attempt: last,
        failure_count: 1,
        failure_history: vec![attempt(1, last, ErrorType::Unknown)],
        error_signature: signature.to_string(),
        worktree_artifacts: None,
        reprocess_eligible: eligible,
        manual_review_required: !eligible,
    }
}

/// An item with every optional field set, and numbers serde_json keeps.
fn full_item() -> DeadLetteredItem {
    let t = at("2025-11-23T19:42:53.902113845Z");
    let mut second = attempt(2, t, ErrorType::CommandFailed { exit_code: 101 });
    second.error_context = Some(vec!["running agent".into(), "cargo test".into()]);
    second.stack_trace = Some("at main.rs:1".into());
    second.json_log_location = Some("/logs/agent-2.json".into());
    DeadLetteredItem {
        item_id: "item_7".to_string(),
        item_data: json!({"path": "src/lib.rs", "n": 12345678901234_i64, "x": 0.5, "tags": ["a", null]}),
        first_attempt: t - Duration::minutes(5),
        last_attempt: t,
        failure_count: 2,
        failure_history: vec![
            attempt(1, t - Duration::minutes(5), ErrorType::Timeout),
            second,
        ],
        error_signature: "CommandFailed::cargo test failed".to_string(),
        worktree_artifacts: Some(WorktreeArtifacts {
            worktree_path: "/tmp/worktrees/agent-2".into(),
            branch_name: "prodigy-agent-2".into(),
            uncommitted_changes: Some("M src/lib.rs".into()),
            error_logs: None,
        }),
        reprocess_eligible: true,
        manual_review_required: false,
    }
}

fn queue(base: &Path, job: &str, max_items: usize) -> (Queue, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let dlq = run(DeadLetterQueue::new(
        job.to_string(),
        base.to_path_buf(),
        max_items,
        30,
        Some(Arc::clone(&recorder)),
    ))
    .unwrap();
    (dlq, recorder)
}

fn ids(items: &[DeadLetteredItem]) -> Vec<&str> {
    items.iter().map(|i| i.item_id.as_str()).collect()
}

#[test]
fn nothing_is_created_before_the_first_write() {
    let dir = TempDir::new("prodigy-lazy");
    let base = dir.join("base");
    let (dlq, recorder) = queue(&base, "job", 100);
    assert_eq!(dlq.database_path(), database_path(&base));
    assert_eq!(
        database_path(&base),
        base.join("mapreduce").join("dlq").join("dlq.db")
    );
    run(async {
        assert!(dlq.get_item("a").await.unwrap().is_none());
        assert!(dlq
            .list_items(DLQFilter::default())
            .await
            .unwrap()
            .is_empty());
        let stats = dlq.get_stats().await.unwrap();
        assert_eq!(stats.total_items, 0);
        assert!(stats.oldest_item.is_none());
        assert_eq!(dlq.analyze_patterns().await.unwrap().total_items, 0);
        assert_eq!(dlq.purge_old_items(Utc::now()).await.unwrap(), 0);
        assert!(dlq.reprocess(vec!["a".into()]).await.unwrap().is_empty());
        dlq.remove("a").await.unwrap();
    });
    assert!(!base.exists(), "reading created {}", base.display());
    // Removing what is not there is Ok and logged, as in Prodigy.
    assert!(recorder.names().contains(&"removed:a".to_string()));

    run(dlq.add(item("a", Utc::now(), "s", true))).unwrap();
    assert!(database_path(&base).is_file());
}

#[test]
fn an_item_round_trips_field_for_field() {
    let dir = TempDir::new("prodigy-round-trip");
    let (dlq, recorder) = queue(dir.path(), "job", 100);
    let original = full_item();
    run(dlq.add(original.clone())).unwrap();
    let back = run(dlq.get_item("item_7")).unwrap().unwrap();
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&original).unwrap()
    );
    assert_eq!(back.failure_history[1].timestamp, original.last_attempt);
    assert_eq!(recorder.names(), ["added:item_7"]);

    // The same database, read by dlqlite itself and by a second queue.
    let engine = dlqlite::Dlq::open(database_path(dir.path())).unwrap();
    assert_eq!(engine.job_stats("job").unwrap().total_items, 1);
    let stored = engine.get(Some("job"), "item_7").unwrap();
    assert_eq!(stored.failure_history[1].error_type.exit_code, Some(101));
    let (again, _) = queue(dir.path(), "job", 100);
    assert!(run(again.get_item("item_7")).unwrap().is_some());
    // Another job under the same base path is another queue.
    let (other, _) = queue(dir.path(), "other-job", 100);
    assert!(run(other.get_item("item_7")).unwrap().is_none());
}

#[test]
fn removing_a_missing_item_is_ok() {
    let dir = TempDir::new("prodigy-remove");
    let (dlq, recorder) = queue(dir.path(), "job", 100);
    run(async {
        dlq.add(item("a", Utc::now(), "s", true)).await.unwrap();
        dlq.remove("a").await.unwrap();
        dlq.remove("a").await.unwrap();
        dlq.remove("never-there").await.unwrap();
        assert!(dlq.get_item("a").await.unwrap().is_none());
    });
    assert_eq!(
        recorder.names(),
        ["added:a", "removed:a", "removed:a", "removed:never-there"]
    );
    // Through the storage type too.
    let storage = DLQStorage::new(dir.path().to_path_buf()).unwrap();
    run(storage.remove("job", "a")).unwrap();
    run(storage.remove("no-such-job", "a")).unwrap();
}

#[test]
fn lists_newest_first_and_filters_like_prodigy() {
    let dir = TempDir::new("prodigy-list");
    let (dlq, _) = queue(dir.path(), "job", 100);
    let t = at("2025-06-01T12:00:00Z");
    let mut one = item("exit-1", t, "network-error", true);
    one.failure_history[0].error_type = ErrorType::CommandFailed { exit_code: 1 };
    let mut two = item("exit-2", t + Duration::minutes(1), "syntax-error", false);
    two.failure_history[0].error_type = ErrorType::CommandFailed { exit_code: 2 };
    let mut timeout = item("timeout", t + Duration::minutes(2), "network-timeout", true);
    timeout.failure_history[0].error_type = ErrorType::Timeout;
    let old = item("old", t - Duration::days(3), "network-error", false);
    run(async {
        for it in [one, two, timeout, old] {
            dlq.add(it).await.unwrap();
        }
    });
    let list = |filter: DLQFilter| run(dlq.list_items(filter)).unwrap();
    assert_eq!(
        ids(&list(DLQFilter::default())),
        ["timeout", "exit-2", "exit-1", "old"]
    );
    let eligible = DLQFilter {
        reprocess_eligible: Some(true),
        ..Default::default()
    };
    assert_eq!(ids(&list(eligible)), ["timeout", "exit-1"]);
    // The error type matches with its exit code.
    let exit_2 = DLQFilter {
        error_type: Some(ErrorType::CommandFailed { exit_code: 2 }),
        ..Default::default()
    };
    assert_eq!(ids(&list(exit_2)), ["exit-2"]);
    let unknown = DLQFilter {
        error_type: Some(ErrorType::Unknown),
        ..Default::default()
    };
    assert_eq!(ids(&list(unknown)), ["old"]);
    // The signature matches as a substring.
    let network = DLQFilter {
        error_signature: Some("network".into()),
        ..Default::default()
    };
    assert_eq!(ids(&list(network)), ["timeout", "exit-1", "old"]);
    // after and before both include their bound.
    let window = DLQFilter {
        after: Some(t),
        before: Some(t + Duration::minutes(1)),
        ..Default::default()
    };
    assert_eq!(ids(&list(window)), ["exit-2", "exit-1"]);
    let combined = DLQFilter {
        reprocess_eligible: Some(false),
        error_signature: Some("error".into()),
        after: Some(t - Duration::days(1)),
        ..Default::default()
    };
    assert_eq!(ids(&list(combined)), ["exit-2"]);
}

#[test]
fn stats_count_the_job() {
    let dir = TempDir::new("prodigy-stats");
    let (dlq, _) = queue(dir.path(), "job", 100);
    let t = at("2025-06-01T12:00:00Z");
    let stats = run(async {
        dlq.add(item("a", t, "sig-1", true)).await.unwrap();
        dlq.add(item("b", t + Duration::hours(2), "sig-1", false))
            .await
            .unwrap();
        dlq.add(item("c", t + Duration::hours(1), "sig-2", true))
            .await
            .unwrap();
        dlq.get_stats().await.unwrap()
    });
    assert_eq!(stats.total_items, 3);
    assert_eq!(stats.eligible_for_reprocess, 2);
    assert_eq!(stats.requiring_manual_review, 1);
    assert_eq!(stats.oldest_item, Some(t - Duration::hours(1)));
    assert_eq!(stats.newest_item, Some(t + Duration::hours(2)));
    assert_eq!(stats.error_categories.len(), 2);
    assert_eq!(stats.error_categories["sig-1"], 2);
    assert_eq!(stats.error_categories["sig-2"], 1);
}

#[test]
fn capacity_evicts_the_oldest_and_logs_it() {
    let dir = TempDir::new("prodigy-capacity");
    let (dlq, recorder) = queue(dir.path(), "job", 3);
    let t = at("2025-06-01T12:00:00Z");
    run(async {
        for n in 0..5 {
            let id = format!("item-{n}");
            dlq.add(item(&id, t + Duration::minutes(n), "s", true))
                .await
                .unwrap();
        }
    });
    let left = run(dlq.list_items(DLQFilter::default())).unwrap();
    assert_eq!(ids(&left), ["item-4", "item-3", "item-2"]);
    let names = recorder.names();
    assert_eq!(
        names[names.len() - 3..],
        ["removed:item-1", "evicted:1", "added:item-4"]
    );
    // The capacity is the job's in dlqlite too.
    let engine = dlqlite::Dlq::open(database_path(dir.path())).unwrap();
    assert_eq!(engine.capacity(Some("job")).unwrap().effective_max_items, 3);
}

#[test]
fn adding_again_merges_and_remove_then_add_replaces() {
    let dir = TempDir::new("prodigy-merge");
    let (dlq, _) = queue(dir.path(), "job", 100);
    let t = at("2025-06-01T12:00:00Z");
    let first = item("a", t, "s", true);
    let mut later = item("a", t + Duration::minutes(1), "s2", false);
    later.failure_history[0].attempt_number = 1;
    let merged = run(async {
        dlq.add(first.clone()).await.unwrap();
        dlq.add(later.clone()).await.unwrap();
        dlq.get_item("a").await.unwrap().unwrap()
    });
    // dlqlite's rule: histories unioned, the later failure's copy wins.
    assert_eq!(merged.failure_history.len(), 2);
    assert_eq!(merged.failure_count, 2);
    assert_eq!(merged.error_signature, "s2");
    assert!(!merged.reprocess_eligible);
    assert_eq!(merged.first_attempt, first.first_attempt);
    // What Prodigy does to update an item: remove, then add.
    let replaced = run(async {
        dlq.remove("a").await.unwrap();
        dlq.add(first.clone()).await.unwrap();
        dlq.get_item("a").await.unwrap().unwrap()
    });
    assert_eq!(
        serde_json::to_value(&replaced).unwrap(),
        serde_json::to_value(&first).unwrap()
    );
}

#[test]
fn reprocess_takes_only_eligible_items() {
    let dir = TempDir::new("prodigy-reprocess");
    let (dlq, recorder) = queue(dir.path(), "job", 100);
    let t = Utc::now();
    let data = run(async {
        dlq.add(item("yes", t, "s", true)).await.unwrap();
        dlq.add(item("no", t, "s", false)).await.unwrap();
        dlq.reprocess(vec!["yes".into(), "no".into(), "gone".into()])
            .await
            .unwrap()
    });
    assert_eq!(data, [json!({"id": "yes"})]);
    assert!(run(dlq.get_item("yes")).unwrap().is_none());
    assert!(run(dlq.get_item("no")).unwrap().is_some());
    assert_eq!(recorder.names()[2..], ["removed:yes", "reprocessed:1"]);
}

#[test]
fn purge_removes_items_last_tried_before_the_cutoff() {
    let dir = TempDir::new("prodigy-purge");
    let (dlq, recorder) = queue(dir.path(), "job", 100);
    let cutoff = at("2025-06-01T12:00:00Z");
    let purged = run(async {
        dlq.add(item("old", cutoff - Duration::days(5), "s", true))
            .await
            .unwrap();
        dlq.add(item("edge", cutoff, "s", true)).await.unwrap();
        // A last attempt after "now" is still compared with the cutoff.
        dlq.add(item("new", cutoff + Duration::days(5), "s", true))
            .await
            .unwrap();
        dlq.purge_old_items(cutoff).await.unwrap()
    });
    assert_eq!(purged, 1);
    let left = run(dlq.list_items(DLQFilter::default())).unwrap();
    assert_eq!(ids(&left), ["new", "edge"]);
    assert_eq!(recorder.names().last().unwrap(), "removed:old");
    let far = run(dlq.purge_old_items(cutoff + Duration::days(3650))).unwrap();
    assert_eq!(far, 2);
}

#[test]
fn analysis_groups_signatures_and_counts_error_types() {
    let dir = TempDir::new("prodigy-analysis");
    let (dlq, recorder) = queue(dir.path(), "job", 100);
    let t = at("2025-06-01T12:10:00Z");
    let analysis = run(async {
        for n in 0..4 {
            let mut it = item(
                &format!("t{n}"),
                t + Duration::minutes(n),
                "Timeout::x",
                true,
            );
            it.failure_history[0].error_type = ErrorType::Timeout;
            dlq.add(it).await.unwrap();
        }
        let mut one = item("c1", t + Duration::hours(1), "Cmd::y", true);
        one.failure_history = vec![
            attempt(1, t, ErrorType::CommandFailed { exit_code: 1 }),
            attempt(
                2,
                t + Duration::hours(1),
                ErrorType::CommandFailed { exit_code: 2 },
            ),
        ];
        dlq.add(one).await.unwrap();
        dlq.analyze_patterns().await.unwrap()
    });
    assert_eq!(analysis.total_items, 5);
    assert_eq!(analysis.pattern_groups.len(), 2);
    let biggest = &analysis.pattern_groups[0];
    assert_eq!(
        (biggest.signature.as_str(), biggest.count),
        ("Timeout::x", 4)
    );
    assert_eq!(biggest.sample_items.len(), 3);
    assert_eq!(biggest.first_occurrence, Some(t - Duration::hours(1)));
    assert_eq!(biggest.last_occurrence, Some(t + Duration::minutes(3)));
    let dist = &analysis.error_distribution;
    assert_eq!(dist[&ErrorType::Timeout], 4);
    assert_eq!(dist[&ErrorType::CommandFailed { exit_code: 1 }], 1);
    assert_eq!(dist[&ErrorType::CommandFailed { exit_code: 2 }], 1);
    assert_eq!(
        analysis.temporal_distribution,
        [
            (at("2025-06-01T12:00:00Z"), 4),
            (at("2025-06-01T13:00:00Z"), 1)
        ]
    );
    assert_eq!(recorder.names().last().unwrap(), "analysis:2");
}

#[test]
fn export_writes_the_items_as_prodigy_json() {
    let dir = TempDir::new("prodigy-export");
    let (dlq, _) = queue(dir.path(), "job", 100);
    let out = dir.join("export.json");
    run(async {
        dlq.add(full_item()).await.unwrap();
        dlq.add(item("b", Utc::now(), "s", true)).await.unwrap();
        dlq.export_items(&out).await.unwrap();
    });
    let text = std::fs::read_to_string(&out).unwrap();
    let back: Vec<DeadLetteredItem> = serde_json::from_str(&text).unwrap();
    assert_eq!(ids(&back), ["b", "item_7"]);
    assert_eq!(
        serde_json::to_value(&back[1]).unwrap(),
        serde_json::to_value(full_item()).unwrap()
    );
}

#[test]
fn storage_persists_loads_and_merges() {
    let dir = TempDir::new("prodigy-storage");
    let storage = DLQStorage::new(dir.path().to_path_buf()).unwrap();
    assert!(run(storage.load_all("job")).unwrap().is_empty());
    assert!(!storage.database_path().exists());
    run(storage.persist("job", &full_item())).unwrap();
    run(storage.persist("job", &item("b", Utc::now(), "s", true))).unwrap();
    let all = run(storage.load_all("job")).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all["item_7"].failure_history.len(), 2);
}

#[test]
fn concurrent_adds_from_many_tasks_all_land() {
    let dir = TempDir::new("prodigy-concurrent");
    let (dlq, recorder) = queue(dir.path(), "job", 1000);
    let dlq = Arc::new(dlq);
    // Tasks interleave at every await; their blocking store calls run on
    // tokio's blocking pool at the same time.
    run(async {
        let mut tasks = Vec::new();
        for agent in 0..8 {
            let dlq = Arc::clone(&dlq);
            tasks.push(tokio::spawn(async move {
                for n in 0..10 {
                    let id = format!("agent-{agent}-item-{n}");
                    dlq.add(item(&id, Utc::now(), "s", true)).await.unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
    assert_eq!(run(dlq.get_stats()).unwrap().total_items, 80);
    assert_eq!(recorder.names().len(), 80);
}

#[test]
fn signatures_and_the_retry_rule_are_prodigys() {
    assert_eq!(
        Queue::create_error_signature(
            &ErrorType::Timeout,
            "Connection failed at /path/to/file:123 with error code 42",
        ),
        "Timeout::Connection failed at with error code"
    );
    assert_eq!(
        Queue::create_error_signature(
            &ErrorType::CommandFailed { exit_code: 2 },
            "a b c d e f g h i j k l 1 /x"
        ),
        "CommandFailed { exit_code: 2 }::a b c d e f g h i j"
    );
    assert!(!Queue::should_move_to_dlq(3, 3));
    assert!(Queue::should_move_to_dlq(4, 3));
}

#[test]
fn a_queue_without_a_logger_works() {
    let dir = TempDir::new("prodigy-no-logger");
    let dlq: DeadLetterQueue = run(DeadLetterQueue::load(
        "job".into(),
        dir.path().to_path_buf(),
    ))
    .unwrap();
    run(dlq.add(item("a", Utc::now(), "s", true))).unwrap();
    assert_eq!(run(dlq.get_stats()).unwrap().total_items, 1);
}

#[test]
fn an_item_dlqlite_refuses_is_an_error_that_names_it() {
    let dir = TempDir::new("prodigy-refused");
    let (dlq, recorder) = queue(dir.path(), "job", 100);
    let err = run(dlq.add(item("", Utc::now(), "s", true))).unwrap_err();
    assert!(format!("{err:#}").contains("item_id"), "{err:#}");
    assert!(recorder.names().is_empty());
}

#[test]
fn prodigy_json_files_migrate_with_dlq_import() {
    if crate::common::sqlite_only("the Prodigy drop-in keeps its database file under the project") {
        return;
    }
    // The tree Prodigy's own storage leaves: one pretty JSON file per item
    // under <base>/mapreduce/dlq/<job_id>/items/.
    let dir = TempDir::new("prodigy-migrate");
    let base = dir.join("project");
    let items_dir = base.join("mapreduce/dlq/job-1/items");
    std::fs::create_dir_all(&items_dir).unwrap();
    let legacy = [
        full_item(),
        item("b", at("2025-06-01T12:00:00Z"), "s", false),
    ];
    for it in &legacy {
        std::fs::write(
            items_dir.join(format!("{}.json", it.item_id)),
            serde_json::to_string_pretty(it).unwrap(),
        )
        .unwrap();
    }
    let db = database_path(&base);
    crate::common::ok(crate::common::dlq(&db).arg("import").arg(&base));
    let (dlq, _) = queue(&base, "job-1", 100);
    let listed = run(dlq.list_items(DLQFilter::default())).unwrap();
    assert_eq!(ids(&listed), ["item_7", "b"]);
    for it in &legacy {
        let back = run(dlq.get_item(&it.item_id)).unwrap().unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(it).unwrap()
        );
    }
}

/// A Prodigy that switches keeps its dead letters: a queue on a base path
/// that holds Prodigy's JSON files sees every item (imported once, on the
/// first open), the files stay as they were, and a second queue on the
/// same path imports nothing again.
#[test]
fn a_base_path_full_of_legacy_json_shows_every_item() {
    let dir = TempDir::new("prodigy-adopt");
    let base = dir.join("base");
    let mut files = Vec::new();
    for (job, ids) in [("job", ["a", "b", "c"]), ("other", ["x", "y", "z"])] {
        let items = base.join("mapreduce").join("dlq").join(job).join("items");
        std::fs::create_dir_all(&items).unwrap();
        for id in ids {
            let path = items.join(format!("{id}.json"));
            let text =
                serde_json::to_string_pretty(&item(id, at("2025-03-01T00:00:00Z"), "s", true))
                    .unwrap();
            std::fs::write(&path, &text).unwrap();
            files.push((path, text));
        }
    }
    let (dlq, _) = queue(&base, "job", 100);
    run(async {
        let listed = dlq.list_items(DLQFilter::default()).await.unwrap();
        let mut seen = ids(&listed);
        seen.sort();
        assert_eq!(seen, ["a", "b", "c"]);
        assert!(dlq.get_item("b").await.unwrap().is_some());
        assert_eq!(dlq.get_stats().await.unwrap().total_items, 3);
    });
    for (path, text) in &files {
        assert_eq!(
            &std::fs::read_to_string(path).unwrap(),
            text,
            "{}",
            path.display()
        );
    }
    // The adapter's database is SQLite whatever backend the suite runs on.
    let db = database_path(&base);
    let imported = || -> i64 {
        rusqlite::Connection::open(&db)
            .unwrap()
            .query_row(
                "SELECT COUNT(*) FROM events WHERE kind = 'imported' AND item_id IS NOT NULL",
                [],
                |row| row.get(0),
            )
            .unwrap()
    };
    assert_eq!(imported(), 6);
    // Another queue, another job, same path: there already, not again.
    let (other, _) = queue(&base, "other", 100);
    run(async {
        assert_eq!(other.get_stats().await.unwrap().total_items, 3);
        other
            .add(item("w", at("2025-03-02T00:00:00Z"), "s", true))
            .await
            .unwrap();
    });
    assert_eq!(imported(), 6);
    // Adds never write JSON.
    assert!(!base.join("mapreduce/dlq/other/items/w.json").exists());
}

/// Writes one item as Prodigy's JSON file under `base`'s queue of `job`.
fn write_legacy(base: &Path, job: &str, id: &str) {
    let items = base.join("mapreduce").join("dlq").join(job).join("items");
    std::fs::create_dir_all(&items).unwrap();
    let text =
        serde_json::to_string_pretty(&item(id, at("2025-03-01T00:00:00Z"), "s", true)).unwrap();
    std::fs::write(items.join(format!("{id}.json")), text).unwrap();
}

/// The base path is recognised by the directory, not by how it is
/// spelled: an item reprocessed through one spelling does not come back
/// through another (a trailing slash, a `..`).
#[test]
fn an_adopted_base_path_is_the_same_whatever_its_spelling() {
    let dir = TempDir::new("prodigy-adopt-spelling");
    let base = dir.join("base");
    write_legacy(&base, "job", "keep");
    write_legacy(&base, "job", "gone");
    let (dlq, _) = queue(&base, "job", 10);
    assert_eq!(run(dlq.reprocess(vec!["gone".into()])).unwrap().len(), 1);
    let slash = std::path::PathBuf::from(format!("{}/", base.display()));
    let dotdot = base.join("mapreduce").join("..");
    for spelled in [slash, dotdot, base.clone()] {
        let (again, _) = queue(&spelled, "job", 10);
        let listed = run(again.list_items(DLQFilter::default())).unwrap();
        assert_eq!(ids(&listed), ["keep"], "{}", spelled.display());
    }
}

/// Only `<base>/mapreduce/dlq/<job>/` is the queue's: a legacy tree
/// deeper below the base path (a fixture, a copy of another project) is
/// not adopted.
#[test]
fn legacy_json_deeper_below_the_base_path_is_not_adopted() {
    let dir = TempDir::new("prodigy-adopt-depth");
    let base = dir.join("base");
    write_legacy(&base, "job", "mine");
    let elsewhere = base.join("fixtures").join("copy");
    write_legacy(&elsewhere, "job", "fixture");
    write_legacy(&elsewhere, "other", "other");
    let (dlq, _) = queue(&base, "job", 10);
    let listed = run(dlq.list_items(DLQFilter::default())).unwrap();
    assert_eq!(ids(&listed), ["mine"]);
    let (other, _) = queue(&base, "other", 10);
    assert!(run(other.list_items(DLQFilter::default()))
        .unwrap()
        .is_empty());
}

/// Two queues reprocessing the same items at once hand each item out
/// once: an item is returned only by the call that took it.
#[test]
fn two_queues_reprocessing_at_once_hand_each_item_out_once() {
    let dir = TempDir::new("prodigy-reprocess-race");
    let base = dir.join("base");
    let all: Vec<String> = (0..200).map(|i| format!("i{i:03}")).collect();
    let (first, _) = queue(&base, "job", 1000);
    run(async {
        for id in &all {
            first.add(item(id, Utc::now(), "s", true)).await.unwrap();
        }
    });
    let (one, one_log) = queue(&base, "job", 1000);
    let (two, two_log) = queue(&base, "job", 1000);
    // Each call's store work runs on the blocking pool, so the two race.
    let (a, b) = run(async {
        let (a, b) = tokio::join!(one.reprocess(all_ids(200)), two.reprocess(all_ids(200)));
        (a.unwrap(), b.unwrap())
    });
    assert_eq!(a.len() + b.len(), 200, "{} + {}", a.len(), b.len());
    // Each queue logs the items it took, and only those.
    let removed = |log: &Recorder| {
        log.names()
            .iter()
            .filter(|n| n.starts_with("removed:"))
            .count()
    };
    assert_eq!(removed(&one_log), a.len());
    assert_eq!(removed(&two_log), b.len());
    assert!(run(first.list_items(DLQFilter::default()))
        .unwrap()
        .is_empty());
}

fn all_ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("i{i:03}")).collect()
}
