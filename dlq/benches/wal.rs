//! The WAL bound and concurrent writers (issue "a library an orchestrator
//! adopts"):
//!
//! 1. An add storm: DLQ_BENCH_ADDS adds (default 20,000) of ~2 KB items
//!    from 1 thread, then from 8 threads on one `Dlq`, while a reader
//!    streams `list()` over and over. Reports adds/s, p50/p99/max latency
//!    and the WAL's peak size (sampled every 5 ms).
//! 2. `dlq retry J --exec 'exit 1' --parallel 8 --max-retries 1` over DLQ_BENCH_ITEMS
//!    items (default 100,000): every item fails again, so every item is a
//!    write. Reports the WAL's peak.
//!
//! Asserts the WAL never passed `dlqlite::db::WAL_BOUND_BYTES`.

#[path = "support/mod.rs"]
mod support;

use dlqlite::{DeadLetteredItem, Dlq};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{bench_dir, env_usize, remove_db};

/// Samples a file's size until stopped; returns the largest seen.
struct Peak {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Peak {
    fn watch(path: PathBuf) -> Peak {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (s, p) = (Arc::clone(&stop), Arc::clone(&peak));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                p.fetch_max(size, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Peak {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("sampler");
        }
        self.peak.load(Ordering::Relaxed)
    }
}

fn wal_of(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", db.display()))
}

/// An item of about 2 KB (item_data carries the padding).
fn item(rng: &mut dlqlite::generate::Rng, i: usize) -> DeadLetteredItem {
    let mut value: serde_json::Value =
        serde_json::from_str(&dlqlite::generate::item_json(rng, i, 1)).expect("json");
    value["item_data"]["padding"] = "x".repeat(1_500).into();
    DeadLetteredItem::from_json_str(&value.to_string()).expect("item")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn storm(dir: &Path, adds: usize, threads: usize, reader_on: bool) -> u64 {
    let db = dir.join(format!("storm-{threads}.db"));
    remove_db(&db);
    let dlq = Dlq::open(&db).expect("open");
    dlq.set_capacity(None, Some(0)).expect("unlimited");
    let items: Vec<DeadLetteredItem> = {
        let mut rng = dlqlite::generate::Rng::new(11);
        (0..adds).map(|i| item(&mut rng, i)).collect()
    };
    let peak = Peak::watch(wal_of(&db));
    let done = AtomicBool::new(false);
    let started = Instant::now();
    let mut latencies: Vec<Duration> = std::thread::scope(|scope| {
        // A reader that keeps streaming the job, as a dashboard would.
        let reader = scope.spawn(|| {
            let mut passes = 0;
            while reader_on && !done.load(Ordering::Relaxed) {
                for summary in dlq.list(dlqlite::ListFilter::default()).take(5_000) {
                    summary.expect("list");
                }
                passes += 1;
            }
            passes
        });
        let per_thread = adds.div_ceil(threads);
        let workers: Vec<_> = items
            .chunks(per_thread)
            .enumerate()
            .map(|(t, chunk)| {
                let dlq = dlq.clone();
                scope.spawn(move || {
                    let job = format!("storm-{}", t % 2);
                    chunk
                        .iter()
                        .map(|item| {
                            let at = Instant::now();
                            dlq.add(&job, item).expect("add");
                            at.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let latencies = workers
            .into_iter()
            .flat_map(|w| w.join().expect("worker"))
            .collect();
        done.store(true, Ordering::Relaxed);
        reader.join().expect("reader");
        latencies
    });
    let wall = started.elapsed();
    let peak = peak.finish();
    latencies.sort();
    println!(
        "  {threads} thread(s): {:>6.0} adds/s   p50 {:.2} ms  p99 {:.2} ms  max {:.1} ms   WAL peak {:.1} MB",
        adds as f64 / wall.as_secs_f64(),
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        peak as f64 / 1e6
    );
    peak
}

fn retry_storm(dir: &Path, items: usize) -> u64 {
    let db = dir.join("wal-retry.db");
    remove_db(&db);
    let dlq = Dlq::open(&db).expect("open");
    dlq.set_capacity(None, Some(0)).expect("unlimited");
    let mut rng = dlqlite::generate::Rng::new(9);
    dlq.load(0..items, &Default::default(), |load, i| {
        let mut item = item(&mut rng, i);
        item.reprocess_eligible = true;
        load.item("bench", None, &item)?;
        Ok(true)
    })
    .expect("fill");
    drop(dlq);
    remove_wal_leftover(&db);
    let peak = Peak::watch(wal_of(&db));
    let started = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_dlq"))
        .arg("--db")
        .arg(&db)
        .args([
            "retry",
            "bench",
            "--exec",
            "exit 1",
            "--parallel",
            "8",
            "--max-retries",
            "1",
            "--json",
        ])
        .stdout(Stdio::null())
        .status()
        .expect("dlq retry");
    let wall = started.elapsed();
    let peak = peak.finish();
    // Exit 1: every item failed again, as asked.
    assert_eq!(status.code(), Some(1), "dlq retry");
    println!(
        "  dlq retry --exec 'exit 1' --parallel 8, {items} items: {:.1} s, WAL peak {:.1} MB",
        wall.as_secs_f64(),
        peak as f64 / 1e6
    );
    peak
}

/// The fill leaves its WAL behind (under the checkpoint size); start the
/// retry's measurement from a checkpointed database.
fn remove_wal_leftover(db: &Path) {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
}

fn main() {
    let adds = env_usize("DLQ_BENCH_ADDS", 20_000);
    let items = env_usize("DLQ_BENCH_ITEMS", 100_000);
    let dir = bench_dir();
    std::fs::create_dir_all(&dir).expect("dir");
    println!("WAL benchmark, {adds} adds of ~2 KB items, a reader streaming list() meanwhile");
    let reader = std::env::var("DLQ_BENCH_READER").map_or(true, |v| v != "0");
    let one = storm(&dir, adds, 1, reader);
    let eight = storm(&dir, adds, 8, reader);
    let retry = retry_storm(&dir, items);
    let bound = dlqlite::db::WAL_BOUND_BYTES as u64;
    for (what, peak) in [
        ("1-thread adds", one),
        ("8-thread adds", eight),
        ("retry", retry),
    ] {
        assert!(
            peak <= bound,
            "{what}: the WAL reached {peak} bytes, past its bound of {bound}"
        );
    }
    println!("  WAL bound {} MB: held", bound / 1_000_000);
}
