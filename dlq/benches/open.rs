//! What a new queue costs: opening (and so creating and migrating) a new
//! database, against opening an existing one and against the floor of
//! making a bare SQLite database with one durable table in the same
//! directory, measured in the same run.
//!
//! `cargo bench --bench open` (DLQ_BENCH_RUNS, default 40): prints the
//! median and the 90th percentile of each, in milliseconds, and the first
//! new database on its own (it is built and migrated; later ones in the
//! process are a copy of it). The families
//! issue's Prodigy adopter asks for under 10 ms for a new queue: Prodigy's
//! tests make one per temporary directory.

#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};
use support::{bench_dir, env_usize};

fn summary(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    println!(
        "{name:<40} median {:7.2} ms   p90 {:7.2} ms",
        at(0.5),
        at(0.9)
    );
}

fn main() {
    let runs = env_usize("DLQ_BENCH_RUNS", 40).max(1);
    let root = bench_dir().join("open");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    println!(
        "open bench, {}, {runs} runs each",
        chrono::Utc::now().format("%Y-%m-%d")
    );
    let (mut new, mut existing, mut bare) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..runs {
        // A new database in a new directory, as a new queue makes it.
        let db = root.join(format!("q{n}")).join("dlq.db");
        let started = Instant::now();
        let dlq = dlqlite::Dlq::open(&db).unwrap();
        new.push(started.elapsed());
        drop(dlq);
        let started = Instant::now();
        let dlq = dlqlite::Dlq::open(&db).unwrap();
        existing.push(started.elapsed());
        drop(dlq);
        // The floor: a bare SQLite file with one table, synced.
        let dir = root.join(format!("b{n}"));
        let started = Instant::now();
        std::fs::create_dir_all(&dir).unwrap();
        let conn = rusqlite::Connection::open(dir.join("bare.db")).unwrap();
        conn.pragma_update(None, "synchronous", "FULL").unwrap();
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
            .unwrap();
        drop(conn);
        bare.push(started.elapsed());
    }
    // The first builds and migrates; the process copies it for the rest.
    println!(
        "{:<40} {:7.2} ms",
        "first new database of the process",
        new[0].as_secs_f64() * 1000.0
    );
    summary("new database (Dlq::open)", new);
    summary("existing database (Dlq::open)", existing);
    summary("floor: bare SQLite file, one table", bare);
    let _ = std::fs::remove_dir_all(&root);
}
