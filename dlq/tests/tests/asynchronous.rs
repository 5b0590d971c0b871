//! The async API (feature `tokio`) from a tokio runtime: many tasks adding
//! at once, a retry with an async handler, a requeue in memory.

use crate::common::*;
use dlqlite::retry::{AttemptFailure, Outcome, RetryOptions, RunControl};
use dlqlite::{AsyncDlq, DeadLetteredItem, ErrorKind};
use std::sync::Arc;
use std::time::Duration;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn one(id: &str) -> DeadLetteredItem {
    DeadLetteredItem::from_json_str(&item(id, 1, "2025-01-01T00:00:00Z", "boom").to_string())
        .unwrap()
}

#[test]
fn tasks_add_at_once_and_a_retry_runs_an_async_handler() {
    let dir = TempDir::new("async");
    let db = dir.join("dlq.db");
    // (The PostgreSQL switch's database is made by a blocking client: not
    // on the runtime.)
    let target = super::common::target(&db);
    runtime().block_on(async {
        let dlq = AsyncDlq::open(target).await.unwrap();
        // 32 tasks on one runtime thread, 10 adds each: the adds run on the
        // blocking pool and share commits.
        let tasks: Vec<_> = (0..32)
            .map(|t| {
                let dlq = dlq.clone();
                tokio::spawn(async move {
                    for n in 0..10 {
                        dlq.add("j", one(&format!("t{t:02}-{n}"))).await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(dlq.job_stats("j").await.unwrap().total_items, 320);
        let err = dlq.job_stats("none").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);

        // Every item fails its first attempt and succeeds its second; the
        // handler awaits another task meanwhile.
        let options = RetryOptions::new("j")
            .parallel(4)
            .max_retries(2)
            .backoff_base(Duration::from_millis(1));
        let summary = dlq
            .retry(
                options,
                Arc::new(RunControl::default()),
                |attempt| async move {
                    let number = tokio::spawn(async move { attempt.number }).await.unwrap();
                    if number == 1 {
                        Outcome::Failure(AttemptFailure {
                            error_type: dlqlite::ErrorType::named("Timeout"),
                            error_message: format!("{} not yet", attempt.item.item.item_id),
                            error_context: None,
                            stack_trace: None,
                            step_failed: "async".into(),
                        })
                    } else {
                        Outcome::Success
                    }
                },
            )
            .await
            .unwrap();
        assert_eq!(summary.counts.attempted, 320);
        assert_eq!(summary.counts.succeeded, 320);
        assert_eq!(summary.counts.attempts, 640);
        assert_eq!(dlq.jobs().await.unwrap()[0].item_count, 0);

        // Requeue in memory.
        dlq.add_many("k", vec![one("a"), one("b")]).await.unwrap();
        let taken = dlq
            .take_eligible("k", dlqlite::store::TakeOptions::default())
            .await
            .unwrap();
        assert_eq!(taken.len(), 2);
        assert_eq!(dlq.job_stats("k").await.unwrap().total_items, 0);
    });
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'retried_ok'"),
        320
    );
}

/// How many of this process's file descriptors are open on `file`.
fn descriptors_on(file: &std::path::Path) -> usize {
    let file = std::fs::canonicalize(file).unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| *target == file)
        .count()
}

/// Dropping the last `AsyncDlq` never closes the database on the runtime's
/// thread (SQLite's final checkpoint and close take tens to hundreds of
/// milliseconds after many writes): the close goes to the blocking pool.
/// Shown deterministically: with the pool's one thread held busy, the drop
/// returns at once, a 1 ms ticker on the same current-thread runtime keeps
/// ticking, the database is still open (its descriptors), and the close
/// completes once the pool is free.
#[test]
fn dropping_an_async_handle_never_blocks_its_runtime() {
    if sqlite_only("a SQLite database's descriptors show when it is closed") {
        return;
    }
    let dir = TempDir::new("async-drop");
    let db = dir.join("dlq.db");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dlq = AsyncDlq::open(super::common::target(&db)).await.unwrap();
        for n in 0..200 {
            dlq.add("j", one(&format!("i{n}"))).await.unwrap();
        }
        assert!(descriptors_on(&db) > 0);
        // The pool's one thread, held until told.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let busy = tokio::task::spawn_blocking(move || held.recv().ok());
        let ticks = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let ticker = {
            let ticks = Arc::clone(&ticks);
            tokio::spawn(async move {
                let mut every = tokio::time::interval(Duration::from_millis(1));
                loop {
                    every.tick().await;
                    ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(dlq);
        // Closed on this thread, its descriptors would be gone by now.
        assert!(
            descriptors_on(&db) > 0,
            "the drop closed the database on the runtime's thread"
        );
        let before = ticks.load(std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(ticks.load(std::sync::atomic::Ordering::Relaxed) > before);
        release.send(()).unwrap();
        busy.await.unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while descriptors_on(&db) > 0 {
            assert!(std::time::Instant::now() < until, "the close never ran");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        ticker.abort();
    });
    // Every add is there after the close.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 200);
}
