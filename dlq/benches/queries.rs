//! Query and maintenance speed on a large database.
//!
//! `cargo bench --bench queries` builds (once) a database of DLQ_BENCH_ITEMS
//! items (default 1,000,000; 1,000 per job) from a generated legacy tree
//! under target/bench-data, then times, DLQ_BENCH_RUNS times each (default
//! 5), median and range:
//! - `stats` over all jobs and `list --limit 50`, in-process and as the real
//!   `dlq` command (process start included);
//! - `analyze` over all jobs;
//! - `purge` of half the items (on a fresh copy of the database each run).

use dlqlite::import::{import, ImportOptions};
use dlqlite::{Dlq, ListFilter};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/mod.rs"]
mod support;

use support::{bench_dir, env_usize, remove_db, tree};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The database for `items` items, built once from a generated tree.
fn database(items: usize) -> PathBuf {
    let db = bench_dir().join(format!("queries-{items}.db"));
    let done = bench_dir().join(format!("queries-{items}.complete"));
    if done.exists() {
        return db;
    }
    let tree = tree(items);
    remove_db(&db);
    let dlq = Dlq::open(&db).expect("open");
    let started = Instant::now();
    import(&dlq, &[tree], &ImportOptions::default(), |_| {}).expect("import");
    eprintln!(
        "built {} in {:.1}s",
        db.display(),
        started.elapsed().as_secs_f64()
    );
    drop(dlq);
    std::fs::write(&done, "").expect("marker");
    db
}

/// Median, min and max of `runs` timings of `f`.
fn time(runs: usize, mut f: impl FnMut()) -> (Duration, Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort();
    (times[times.len() / 2], times[0], times[times.len() - 1])
}

fn report(name: &str, (median, min, max): (Duration, Duration, Duration), target: &str) {
    println!(
        "  {name:<34} median {:>9.1} ms  (min {:.1}, max {:.1})   target {target}",
        median.as_secs_f64() * 1e3,
        min.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
}

fn cli(db: &Path, args: &[&str]) {
    let status = Command::new(env!("CARGO_BIN_EXE_dlq"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .expect("run dlq");
    assert!(status.success(), "dlq {args:?}");
}

fn main() {
    let items = env_usize("DLQ_BENCH_ITEMS", 1_000_000);
    let runs = env_usize("DLQ_BENCH_RUNS", 5).max(1);
    let db = database(items);
    let dlq = Dlq::open(&db).expect("open");
    println!("query benchmarks, {items} items, {runs} runs each");
    // DLQ_BENCH_ONLY=queries|purge|add|export|legacy runs one part.
    let only = std::env::var("DLQ_BENCH_ONLY").unwrap_or_default();
    let part = |name: &str| only.is_empty() || only == name;
    if part("queries") {
        report(
            "stats (all jobs, in-process)",
            time(runs, || {
                dlq.stats().expect("stats");
            }),
            "< 100 ms",
        );
        report(
            "dlq stats --json",
            time(runs, || cli(&db, &["stats", "--json"])),
            "< 100 ms",
        );
        report(
            "list --limit 50 (in-process)",
            time(runs, || {
                assert_eq!(dlq.list(ListFilter::default()).take(50).count(), 50);
            }),
            "< 100 ms",
        );
        report(
            "dlq list --limit 50",
            time(runs, || cli(&db, &["list", "--limit", "50"])),
            "< 100 ms",
        );
        report(
            "dlq list --job-id J --limit 50",
            time(runs, || {
                cli(
                    &db,
                    &[
                        "list",
                        "--limit",
                        "50",
                        "--job-id",
                        "mapreduce-20251123_000000",
                    ],
                )
            }),
            "< 100 ms",
        );
        report(
            "analyze (all jobs, in-process)",
            time(runs, || {
                dlq.analyze(None).expect("analyze");
            }),
            "< 1 s",
        );
        report(
            "dlq analyze --json",
            time(runs, || cli(&db, &["analyze", "--json"])),
            "< 1 s",
        );
    }
    if part("purge") {
        // Purge half: the cutoff is the median last_attempt; each run on a copy.
        let median_last: String = {
            let conn = rusqlite::Connection::open(&db).expect("sqlite");
            conn.query_row(
                "SELECT last_attempt FROM items ORDER BY last_attempt LIMIT 1 OFFSET ?1",
                [items as i64 / 2],
                |row| row.get(0),
            )
            .expect("median")
        };
        let median_time = dlqlite::Timestamp::parse(&median_last).expect("timestamp");
        // DLQ_NOW such that "older than 1 day" means "before the median".
        let now = median_time.minus_seconds(-86_400).to_legacy();
        let copy = bench_dir().join("purge-copy.db");
        let mut purged = 0;
        let mut timings = Vec::new();
        for _ in 0..runs.min(3) {
            for suffix in ["-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", copy.display()));
            }
            std::fs::copy(&db, &copy).expect("copy");
            let started = Instant::now();
            let output = Command::new(env!("CARGO_BIN_EXE_dlq"))
                .env("DLQ_NOW", &now)
                .arg("--db")
                .arg(&copy)
                .args(["purge", "--older-than-days", "1", "--yes", "--json"])
                .output()
                .expect("purge");
            timings.push(started.elapsed());
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
            purged = report["items"].as_u64().unwrap_or(0);
        }
        timings.sort();
        let spread = (
            timings[timings.len() / 2],
            timings[0],
            timings[timings.len() - 1],
        );
        report(&format!("dlq purge ({purged} items)"), spread, "< 3 s");
    }
    if part("add") {
        // Add latency on the full database, with the capacity check active.
        let copy = bench_dir().join("add-copy.db");
        remove_db(&copy);
        std::fs::copy(&db, &copy).expect("copy");
        let added = Dlq::open(&copy).expect("open");
        let mut rng = dlqlite::generate::Rng::new(77);
        let mut latencies = Vec::new();
        // The first 200 adds warm the statement and page caches; the next
        // 2,000 are measured (steady state).
        for i in 0..2200 {
            let text = dlqlite::generate::item_json(&mut rng, 1_000_000 + i, 1);
            let item = dlqlite::DeadLetteredItem::from_json_str(&text).expect("item");
            let job = dlqlite::generate::job_id(i % 50);
            let started = Instant::now();
            added.add(&job, &item).expect("add");
            if i >= 200 {
                latencies.push(started.elapsed());
            }
        }
        latencies.sort();
        let pick =
            |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
        println!(
            "  {:<34} p50 {:.3} ms, p99 {:.3} ms   target p99 < 0.5 ms",
            "add (one item, cap active)",
            pick(0.5).as_secs_f64() * 1e3,
            pick(0.99).as_secs_f64() * 1e3
        );
        drop(added);
        remove_db(&copy);
    }
    if part("export") {
        // Export of everything as JSON lines: time and peak RSS.
        let out = bench_dir().join("export.jsonl");
        let (wall, peak) = support::run_measured(
            Command::new(env!("CARGO_BIN_EXE_dlq"))
                .arg("--db")
                .arg(&db)
                .args(["export", "--format", "jsonl"])
                .arg(&out)
                .stderr(Stdio::null()),
        );
        println!(
            "  {:<34} {:.1} s ({:.0} items/s), peak RSS {:.1} MB   target RSS < 100 MB",
            "dlq export --format jsonl",
            wall.as_secs_f64(),
            items as f64 / wall.as_secs_f64(),
            peak as f64 / 1024.0
        );
        let _ = std::fs::remove_file(&out);
    }
    if part("legacy") {
        // The legacy way: load every file of the tree (what the JSON DLQ did)
        // for the same stats and a signature grouping with an hourly histogram.
        let tree = tree(items);
        let started = Instant::now();
        let legacy = legacy_stats(&tree);
        let legacy_time = started.elapsed();
        let (dlq_stats, dlq_analyze) = (
            time(1, || {
                dlq.stats().expect("stats");
            })
            .0,
            time(1, || {
                dlq.analyze(None).expect("analyze");
            })
            .0,
        );
        println!(
            "  {:<34} {:.1} s for {} items: stats {:.0}x and analyze {:.0}x slower than dlq",
            "legacy: load every JSON file",
            legacy_time.as_secs_f64(),
            legacy,
            legacy_time.as_secs_f64() / dlq_stats.as_secs_f64(),
            legacy_time.as_secs_f64() / dlq_analyze.as_secs_f64()
        );
    }
}

/// Stats and analysis the legacy way: read and parse every item file.
/// Returns how many items it read.
fn legacy_stats(root: &Path) -> usize {
    use std::collections::HashMap;
    let mut stack = vec![root.to_path_buf()];
    let mut total = 0;
    let mut eligible = 0;
    let mut signatures: HashMap<String, usize> = HashMap::new();
    let mut error_types: HashMap<String, usize> = HashMap::new();
    let mut hours: HashMap<String, usize> = HashMap::new();
    let mut oldest: Option<String> = None;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json")
                && path.parent().is_some_and(|p| p.ends_with("items"))
            {
                let value: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
                total += 1;
                eligible += usize::from(value["reprocess_eligible"] == true);
                *signatures
                    .entry(value["error_signature"].as_str().unwrap_or("").to_string())
                    .or_default() += 1;
                let first = value["first_attempt"].as_str().unwrap_or("").to_string();
                if oldest.as_ref().is_none_or(|o| &first < o) {
                    oldest = Some(first);
                }
                for attempt in value["failure_history"].as_array().into_iter().flatten() {
                    *error_types
                        .entry(attempt["error_type"].to_string())
                        .or_default() += 1;
                    let hour: String = attempt["timestamp"]
                        .as_str()
                        .unwrap_or("")
                        .chars()
                        .take(13)
                        .collect();
                    *hours.entry(hour).or_default() += 1;
                }
            }
        }
    }
    assert!(
        eligible <= total && !signatures.is_empty() && !error_types.is_empty() && !hours.is_empty()
    );
    total
}
