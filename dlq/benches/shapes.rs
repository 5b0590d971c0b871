//! Every operation on every shape of DLQ: the figures in the README's
//! per-shape tables.
//!
//! `cargo bench --bench shapes` generates (once, under target/bench-data)
//! one `dlq export`-shaped JSON lines file per shape, then for each shape:
//! imports it with the real `dlq import` (rate and peak RSS), times
//! `dlq stats --json`, `dlq list --limit 50` and `dlq analyze --json` (median
//! of DLQ_BENCH_RUNS, peak RSS), adds items one at a time into a job at its
//! capacity in-process (p50/p99; each add evicts one), and purges a 1/30
//! slice (a daily retention run) and half of the items with `dlq purge`, each
//! on a fresh copy, beside a bare `DELETE FROM items WHERE last_attempt < X`
//! plus a WAL checkpoint on another copy (the floor: the ratio is printed).
//!
//! Shapes (DLQ_BENCH_SHAPES, default all; DLQ_BENCH_ITEMS, default
//! 1,000,000):
//! - a: 1,000 jobs, 8 messages, one attempt per item;
//! - b: one job;
//! - c: a signature per item (each message names its own path and time);
//! - d: an agent id per attempt;
//! - e: 20 attempts per item (a tenth of DLQ_BENCH_ITEMS items: 20 times
//!   as many attempts);
//! - f: 100 KB of item_data on 1% of the items;
//! - r: as a, but the rows in random time order, as an import of legacy
//!   trees lays them out (a-f come in time order, as a live DLQ fills).
//!
//! Also, for the "import never evicts" and eviction claims: a 100,000-item
//! single-job legacy tree imported with `dlq import` (every item kept), and
//! `dlq add` of 20,000 items into a job capped at 10,000 against the same
//! add uncapped.

use dlqlite::generate::{job_id, write_jsonl, write_tree, ShapeSpec, TreeSpec};
use dlqlite::{DeadLetteredItem, Dlq};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/mod.rs"]
mod support;

use support::{bench_dir, env_usize, remove_db, run_measured, shape_file, shape_spec as spec};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn dlq_cmd(db: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dlq"));
    command
        .arg("--db")
        .arg(db)
        .env_remove("DLQ_NOW")
        .stdout(Stdio::null());
    command
}

/// Median, min, max of `runs` measured runs, and the highest peak RSS (MB).
fn measure(runs: usize, mut make: impl FnMut() -> Command) -> (Duration, Duration, Duration, f64) {
    let mut times = Vec::new();
    let mut peak = 0;
    for _ in 0..runs {
        let (time, rss) = run_measured(&mut make());
        times.push(time);
        peak = peak.max(rss);
    }
    times.sort();
    (
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        peak as f64 / 1024.0,
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn row(shape: char, what: &str, figure: String) {
    println!("| {shape} | {what} | {figure} |");
}

/// Copies a database (after folding its WAL in) to `to`.
fn copy_db(from: &Path, to: &Path) {
    remove_db(to);
    rusqlite::Connection::open(from)
        .expect("open")
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .expect("checkpoint");
    std::fs::copy(from, to).expect("copy");
}

/// The last_attempt below which `fraction` of the items lie.
fn cutoff(db: &Path, fraction: f64) -> String {
    let conn = rusqlite::Connection::open(db).expect("open");
    let items: i64 = conn
        .query_row("SELECT COUNT(*) FROM items", [], |r| r.get(0))
        .expect("count");
    conn.query_row(
        "SELECT last_attempt FROM items ORDER BY last_attempt LIMIT 1 OFFSET ?1",
        [(items as f64 * fraction) as i64],
        |r| r.get(0),
    )
    .expect("cutoff")
}

fn purge(shape: char, db: &Path, fraction: f64, label: &str, runs: usize) {
    let copy = bench_dir().join("shape-purge.db");
    let cutoff = cutoff(db, fraction);
    // `purge --older-than-days 1` at "now" = cutoff + 1 day removes exactly
    // the items before the cutoff.
    let now = dlqlite::Timestamp::parse(&cutoff)
        .expect("cutoff")
        .minus_seconds(-86_400)
        .to_string();
    let mut purge_times = Vec::new();
    let mut bare_times = Vec::new();
    let mut peak: u64 = 0;
    let mut removed = 0;
    for _ in 0..runs {
        copy_db(db, &copy);
        let mut command = dlq_cmd(&copy);
        command
            .env("DLQ_NOW", &now)
            .args(["purge", "--older-than-days", "1", "--yes", "--json"]);
        let (time, rss) = run_measured(&mut command);
        purge_times.push(time);
        peak = peak.max(rss);
        copy_db(db, &copy);
        let conn = rusqlite::Connection::open(&copy).expect("open");
        let started = Instant::now();
        conn.execute_batch("PRAGMA foreign_keys = ON").expect("fk");
        removed = conn
            .execute("DELETE FROM items WHERE last_attempt < ?1", [&cutoff])
            .expect("delete");
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .expect("checkpoint");
        bare_times.push(started.elapsed());
        drop(conn);
    }
    remove_db(&copy);
    purge_times.sort();
    bare_times.sort();
    let (purge_median, bare_median) = (
        purge_times[purge_times.len() / 2],
        bare_times[bare_times.len() / 2],
    );
    row(
        shape,
        &format!("`dlq purge` of {label} ({removed} items)"),
        format!(
            "{:.2} s (min {:.2}, max {:.2}), peak RSS {:.0} MB; bare DELETE + checkpoint {:.2} s: ratio {:.2}",
            purge_median.as_secs_f64(),
            purge_times[0].as_secs_f64(),
            purge_times[purge_times.len() - 1].as_secs_f64(),
            peak as f64 / 1024.0,
            bare_median.as_secs_f64(),
            purge_median.as_secs_f64() / bare_median.as_secs_f64().max(1e-9)
        ),
    );
}

/// `dlq analyze --json` reconciles: listed groups plus the omitted ones
/// hold every item, for pattern and message groups, cut and whole.
fn analyze_adds_up(shape: char, db: &Path) {
    for top in ["20", "0"] {
        let output = Command::new(env!("CARGO_BIN_EXE_dlq"))
            .arg("--db")
            .arg(db)
            .args(["analyze", "--json", "--top", top])
            .output()
            .expect("analyze");
        assert!(output.status.success());
        let a: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
        let total = a["total_items"].as_i64().expect("total");
        for (list, omitted) in [
            ("pattern_groups", "pattern_groups_omitted"),
            ("message_groups", "message_groups_omitted"),
        ] {
            let listed: i64 = a[list]
                .as_array()
                .expect("groups")
                .iter()
                .map(|g| g["count"].as_i64().expect("count"))
                .sum();
            let rest = a[omitted]["items"].as_i64().expect("omitted");
            assert_eq!(
                listed + rest,
                total,
                "shape {shape}: {list} with --top {top}"
            );
        }
    }
    row(
        shape,
        "`dlq analyze --json` adds up (--top 20 and 0)",
        "yes".into(),
    );
}

/// A new item for job `job`, newer than everything generated.
fn new_item(n: usize) -> DeadLetteredItem {
    let text = serde_json::json!({
        "item_id": format!("added_{n}"),
        "item_data": {"n": n},
        "first_attempt": "2026-11-10T00:00:00Z",
        "last_attempt": "2026-11-10T00:00:00Z",
        "failure_count": 1,
        "failure_history": [{
            "attempt_number": 1, "timestamp": "2026-11-10T00:00:00Z",
            "error_type": "Timeout", "error_message": "Agent execution timed out",
            "stack_trace": null, "agent_id": "agent-new", "step_failed": "agent_execution",
            "duration_ms": 1, "json_log_location": null
        }],
        "error_signature": "0000000000000000",
        "worktree_artifacts": null,
        "reprocess_eligible": true,
        "manual_review_required": false
    })
    .to_string();
    DeadLetteredItem::from_json_str(&text).expect("item")
}

/// Adds one at a time into a job held at its capacity: every add evicts.
fn add_at_cap(shape: char, db: &Path) {
    let dlq = Dlq::open(db).expect("open");
    let job = job_id(0);
    let count = dlq.job_stats(&job).expect("job").total_items;
    dlq.set_capacity(Some(&job), Some(count)).expect("cap");
    let mut latencies = Vec::new();
    for n in 0..2_000 {
        let item = new_item(n);
        let started = Instant::now();
        let report = dlq.add(&job, &item).expect("add");
        latencies.push(started.elapsed());
        assert_eq!(report.evicted.len(), 1, "each add at the cap evicts one");
    }
    // The first 200 warm the caches.
    let mut measured = latencies.split_off(200);
    measured.sort();
    let pick = |q: f64| measured[((measured.len() as f64 * q) as usize).min(measured.len() - 1)];
    row(
        shape,
        &format!("add at the cap (job of {count}, 1,800 adds, each evicts)"),
        format!("p50 {:.2} ms, p99 {:.2} ms", ms(pick(0.5)), ms(pick(0.99))),
    );
}

fn shape_rows(shape: char, items: usize, runs: usize) {
    let spec = spec(shape, items);
    let file = shape_file(shape, items);
    let db = bench_dir().join(format!("shape-{shape}-{items}.db"));
    remove_db(&db);
    let mut import = dlq_cmd(&db);
    import.arg("import").arg(&file);
    let (time, rss) = run_measured(&mut import);
    row(
        shape,
        &format!(
            "`dlq import` of {} items, {} attempts",
            spec.items,
            spec.items * spec.attempts as usize
        ),
        format!(
            "{:.1} s, {:.0} items/s, peak RSS {:.0} MB",
            time.as_secs_f64(),
            spec.items as f64 / time.as_secs_f64(),
            rss as f64 / 1024.0
        ),
    );
    // Two retention policies for `retention list` and `apply --dry-run`
    // (they remove nothing here: the purges below run on their own).
    for args in [
        ["retention", "set", "--max-age", "365d"],
        ["retention", "set", "--category", "transient"],
    ] {
        let mut command = dlq_cmd(&db);
        command.args(args);
        if args[3] == "transient" {
            command.args(["--max-age", "30d"]);
        }
        assert!(command.output().expect("retention set").status.success());
    }
    for (what, args) in [
        ("`dlq stats --json`", vec!["stats", "--json"]),
        ("`dlq stats` (table)", vec!["stats"]),
        ("`dlq list --limit 50`", vec!["list", "--limit", "50"]),
        ("`dlq analyze --json`", vec!["analyze", "--json"]),
        (
            "`dlq list --filter 'category == \"transient\"' --limit 50`",
            vec![
                "list",
                "--filter",
                r#"category == "transient""#,
                "--limit",
                "50",
            ],
        ),
        ("`dlq metrics`", vec!["metrics"]),
        (
            "`dlq check` (items, oldest age, arrivals in 1d)",
            vec![
                "check",
                "--max-items",
                "1000000000",
                "--max-age",
                "36500d",
                "--max-new",
                "1000000000",
                "--per",
                "1d",
            ],
        ),
        ("`dlq retention list`", vec!["retention", "list"]),
        (
            "`dlq retention apply --dry-run`",
            vec!["retention", "apply", "--dry-run"],
        ),
    ] {
        let (median, min, max, peak) = measure(runs, || {
            let mut command = dlq_cmd(&db);
            command.args(&args);
            command
        });
        row(
            shape,
            what,
            format!(
                "{:.0} ms (min {:.0}, max {:.0}), peak RSS {peak:.0} MB",
                ms(median),
                ms(min),
                ms(max)
            ),
        );
    }
    analyze_adds_up(shape, &db);
    if std::env::var_os("DLQ_BENCH_READS_ONLY").is_some() {
        // The reads above without the (much longer) purges and adds.
        remove_db(&db);
        return;
    }
    purge(shape, &db, 1.0 / 30.0, "a 1/30 slice", runs);
    purge(shape, &db, 0.5, "half", runs.min(2));
    // Last: it changes the database (each add evicts one old item).
    add_at_cap(shape, &db);
    remove_db(&db);
}

/// A 100,000-item single-job legacy tree: every item kept, and how long.
fn single_job_tree(items: usize) {
    let root = bench_dir().join(format!("legacy-one-job-{items}"));
    let done = root.join(".complete");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&root);
        write_tree(
            &root,
            &TreeSpec {
                jobs: 1,
                items_per_job: items,
                attempt: 1,
                seed: 9,
            },
        )
        .expect("tree");
        std::fs::write(&done, "").expect("marker");
    }
    let db = bench_dir().join("one-job-tree.db");
    remove_db(&db);
    let (time, rss) = run_measured(dlq_cmd(&db).arg("import").arg(&root));
    let kept: i64 = rusqlite::Connection::open(&db)
        .expect("open")
        .query_row("SELECT COUNT(*) FROM items", [], |r| r.get(0))
        .expect("count");
    assert_eq!(kept as usize, items, "import keeps every item");
    println!(
        "| b | `dlq import` of a {items}-item single-job legacy tree | {:.1} s, all {kept} items kept, peak RSS {:.0} MB |",
        time.as_secs_f64(),
        rss as f64 / 1024.0
    );
    remove_db(&db);
}

/// `dlq add` of `items` JSON lines into one job capped at half of them,
/// against the same add with no cap.
fn capped_add(items: usize) {
    let spec = ShapeSpec {
        jobs: 1,
        items,
        ..ShapeSpec::default()
    };
    let file: PathBuf = bench_dir().join(format!("one-job-{items}.jsonl"));
    if !file.exists() {
        write_jsonl(&file, &spec).expect("generate");
    }
    let db = bench_dir().join("capped-add.db");
    let mut figures = Vec::new();
    for cap in [0, items / 2] {
        remove_db(&db);
        let status = dlq_cmd(&db)
            .args(["capacity", "--set", &cap.to_string()])
            .status()
            .expect("capacity");
        assert!(status.success());
        let (time, rss) = run_measured(dlq_cmd(&db).arg("add").arg(&file));
        figures.push((cap, time, rss));
    }
    remove_db(&db);
    let uncapped = figures[0].1.as_secs_f64();
    let capped = figures[1].1.as_secs_f64();
    println!(
        "| b | `dlq add` of {items} items into one job: uncapped / capped at {} | {uncapped:.2} s / {capped:.2} s ({:.2}x), peak RSS {:.0} / {:.0} MB |",
        items / 2,
        capped / uncapped,
        figures[0].2 as f64 / 1024.0,
        figures[1].2 as f64 / 1024.0
    );
}

fn main() {
    let items = env_usize("DLQ_BENCH_ITEMS", 1_000_000);
    let runs = env_usize("DLQ_BENCH_RUNS", 3).max(1);
    let shapes = std::env::var("DLQ_BENCH_SHAPES").unwrap_or_else(|_| "abcdefr".into());
    std::fs::create_dir_all(bench_dir()).expect("bench dir");
    println!("shape benchmarks, {items} items, {runs} runs each");
    println!("| shape | operation | figure |");
    println!("|---|---|---|");
    if shapes.contains('t') || std::env::var("DLQ_BENCH_SHAPES").is_err() {
        single_job_tree((items / 10).max(10));
        capped_add((items / 50).max(10));
    }
    for shape in shapes.chars().filter(|c| "abcdefr".contains(*c)) {
        shape_rows(shape, items, runs);
    }
}
