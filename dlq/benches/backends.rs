//! SQLite and PostgreSQL side by side (the PostgreSQL backend):
//!
//! 1. Concurrent writers: 1, 4 and 8 `dlq add` processes at once, each
//!    adding DLQ_BENCH_ADDS / writers items (default 8,000 in all, ~1 KB,
//!    two attempts each) one per transaction through the library (what many
//!    agents reporting their own failures look like) to a job of its own,
//!    then the same to one shared job. Reports adds per second.
//! 2. `dlq copy` of DLQ_BENCH_ITEMS items (default 20,000) from SQLite to
//!    PostgreSQL and back: items per second, and that the copy back dumps
//!    the same counters.
//!
//! 3. At size (DLQ_BENCH_BIG items, default 1,000,000, of the shape
//!    DLQ_BENCH_SHAPE, default `c`: 1,000 jobs and a signature per item):
//!    `dlq import` of it into SQLite, `dlq copy` of that to PostgreSQL,
//!    then on each backend `dlq stats --json`, `dlq list --limit 50`
//!    (all jobs and one), `dlq analyze --json` (median of
//!    DLQ_BENCH_RUNS, default 3, with the peak RSS) and one `dlq purge`
//!    of about half the items on a copy (SQLite: a file copy; PostgreSQL:
//!    CREATE DATABASE ... TEMPLATE). Both databases are kept under
//!    target/bench-data (the PostgreSQL one while the cluster lives: give
//!    DLQ_BENCH_PG_URL to keep it between runs).
//!
//! DLQ_BENCH_ONLY=writers|copy|big runs one part.
//!
//! PostgreSQL: DLQ_BENCH_PG_URL, or a throwaway cluster started with
//! scripts/pg for the run (stopped at the end). The cluster runs with
//! fsync off (scripts/pg says so): the PostgreSQL figures leave out the
//! cost of a durable commit, which the SQLite ones include.

#[path = "support/mod.rs"]
mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use support::{bench_dir, env_usize, remove_db, run_measured, shape_file};

fn dlq(db: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dlq"));
    command.arg("--db").arg(db).env_remove("DLQ_DB");
    command
}

fn item_line(writer: usize, n: usize) -> String {
    let padding = "x".repeat(600);
    format!(
        r#"{{"item_id":"w{writer}-{n}","item_data":{{"path":"src/{n}.rs","pad":"{padding}"}},"first_attempt":"2025-06-01T00:00:00.123456789Z","last_attempt":"2025-06-01T00:01:00.123456789Z","failure_count":2,"failure_history":[{{"attempt_number":1,"timestamp":"2025-06-01T00:00:00.123456789Z","error_type":"Timeout","error_message":"timed out after 300s on item {n}","stack_trace":null,"agent_id":"agent-{writer}-{n}","step_failed":"agent_execution","duration_ms":300000,"json_log_location":null}},{{"attempt_number":2,"timestamp":"2025-06-01T00:01:00.123456789Z","error_type":{{"CommandFailed":{{"exit_code":1}}}},"error_message":"cargo test failed on item {n}","stack_trace":null,"agent_id":"agent-{writer}-{n}-b","step_failed":"agent_execution","duration_ms":1000,"json_log_location":null}}],"error_signature":"sig-{n}","worktree_artifacts":null,"reprocess_eligible":true,"manual_review_required":false}}"#
    ) + "\n"
}

/// `writers` processes adding `total` items at once, one add per
/// transaction; adds per second. Each process is this benchmark again, in
/// writer mode (`DLQ_BENCH_WRITER`), adding through the library.
fn writers(db: &str, writers: usize, total: usize, shared_job: bool) -> f64 {
    let per = total / writers;
    let started = Instant::now();
    let children: Vec<_> = (0..writers)
        .map(|w| {
            let job = if shared_job {
                "shared".to_string()
            } else {
                format!("job-{w}")
            };
            Command::new(std::env::current_exe().expect("this benchmark"))
                .env("DLQ_BENCH_WRITER", format!("{db}\n{job}\n{w}\n{per}"))
                .stdout(Stdio::null())
                .spawn()
                .expect("writer")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().expect("wait").success(), "a writer failed");
    }
    (per * writers) as f64 / started.elapsed().as_secs_f64()
}

/// Writer mode: adds `count` items to `job`, one transaction each.
fn writer(spec: &str) {
    let parts: Vec<&str> = spec.split('\n').collect();
    let [db, job, w, count] = parts[..] else {
        panic!("DLQ_BENCH_WRITER: {spec}");
    };
    let (w, count): (usize, usize) = (w.parse().expect("writer"), count.parse().expect("count"));
    let dlq = dlqlite::Dlq::open(db).expect("open");
    for n in 0..count {
        let item = dlqlite::DeadLetteredItem::from_json_str(item_line(w, n).trim()).expect("item");
        dlq.write(|tx| tx.add(job, None, &item).map(|_| ()))
            .expect("add");
    }
}

/// A fresh PostgreSQL database on the server at `server`, by name.
fn fresh_pg(server: &str, name: &str) -> String {
    let mut admin = postgres::Client::connect(server, postgres::NoTls).expect("connect");
    // Two statements: DROP DATABASE cannot run in the transaction that
    // one batch of several would be.
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .expect("drop database");
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .expect("create database");
    let at = server.rfind('/').expect("a URL with a database");
    format!("{}/{name}", &server[..at])
}

struct Cluster(Option<PathBuf>);

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pg"))
                .arg("stop")
                .arg(dir)
                .status();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn server() -> (String, Cluster) {
    if let Ok(url) = std::env::var("DLQ_BENCH_PG_URL") {
        return (url, Cluster(None));
    }
    let dir = bench_dir().join("pg-cluster");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cluster dir");
    let output = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pg"))
        .arg("start")
        .arg(&dir)
        .output()
        .expect("scripts/pg");
    assert!(
        output.status.success(),
        "scripts/pg start: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let url = String::from_utf8(output.stdout)
        .expect("URL")
        .trim()
        .to_string();
    (url, Cluster(Some(dir)))
}

fn main() {
    if let Ok(spec) = std::env::var("DLQ_BENCH_WRITER") {
        return writer(&spec);
    }
    let adds = env_usize("DLQ_BENCH_ADDS", 8_000);
    let items = env_usize("DLQ_BENCH_ITEMS", 20_000);
    let (pg_server, _cluster) = server();
    let only = std::env::var("DLQ_BENCH_ONLY").unwrap_or_default();
    let part = |name: &str| only.is_empty() || only == name;
    if part("writers") {
        concurrent_writers(&pg_server, adds);
    }
    if part("copy") {
        copy_both_ways(&pg_server, items);
    }
    if part("big") {
        at_size(&pg_server);
    }
}

/// Part 1: concurrent writer processes on each backend.
fn concurrent_writers(pg_server: &str, adds: usize) {
    let dir = bench_dir();
    println!("concurrent writer processes, {adds} adds in all, one per transaction (adds/s)");
    println!(
        "{:<10} {:<12} {:>10} {:>10} {:>10}",
        "backend", "jobs", "1", "4", "8"
    );
    for shared in [false, true] {
        for backend in ["sqlite", "postgres"] {
            let mut rates = Vec::new();
            for n in [1, 4, 8] {
                let db = match backend {
                    "sqlite" => {
                        let path = dir.join(format!("backends-{n}.db"));
                        remove_db(&path);
                        path.display().to_string()
                    }
                    _ => fresh_pg(pg_server, &format!("bench_writers_{n}")),
                };
                rates.push(writers(&db, n, adds, shared));
            }
            println!(
                "{backend:<10} {:<12} {:>10.0} {:>10.0} {:>10.0}",
                if shared { "one shared" } else { "one each" },
                rates[0],
                rates[1],
                rates[2]
            );
        }
    }
}

/// Part 2: `dlq copy` both ways.
fn copy_both_ways(pg_server: &str, items: usize) {
    let dir = bench_dir();
    let source = dir.join("backends-copy-source.db");
    let back = dir.join("backends-copy-back.db");
    remove_db(&source);
    remove_db(&back);
    let source_text = source.display().to_string();
    let mut load = dlq(&source_text)
        .args(["add", "--job-id", "copied"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dlq add");
    let mut stdin = load.stdin.take().expect("stdin");
    let lines: String = (0..items).map(|n| item_line(0, n)).collect();
    std::thread::spawn(move || stdin.write_all(lines.as_bytes()).expect("write"));
    assert!(load.wait().expect("wait").success());
    let pg = fresh_pg(pg_server, "bench_copy");
    let copy = |from: &str, to: &Path| {
        let started = Instant::now();
        let status = dlq("unused.db")
            .arg("copy")
            .arg("--from")
            .arg(from)
            .arg("--to")
            .arg(to)
            .stderr(Stdio::null())
            .status()
            .expect("dlq copy");
        assert!(status.success());
        items as f64 / started.elapsed().as_secs_f64()
    };
    let there = copy(&source_text, Path::new(&pg));
    let back_rate = copy(&pg, &back);
    println!("dlq copy, {items} items: SQLite -> PostgreSQL {there:.0} items/s, PostgreSQL -> SQLite {back_rate:.0} items/s");
    let counts = |db: &Path| {
        let conn = rusqlite::Connection::open(db).expect("open");
        conn.query_row(
            "SELECT item_count, failure_count_sum FROM jobs WHERE job_id = 'copied'",
            [],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
        )
        .expect("counts")
    };
    assert_eq!(counts(&source), counts(&back));
}

/// `dlq ARGS` on `db` to its end, output dropped: wall time and peak RSS.
fn measured(db: &str, args: &[&str], env: &[(&str, &str)]) -> (f64, f64) {
    let mut command = dlq(db);
    command
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let (wall, peak) = run_measured(&mut command);
    (wall.as_secs_f64(), peak as f64 / 1024.0)
}

/// The item count `dlq db --json` reports for `db` (None: no database).
fn db_items(db: &str) -> Option<i64> {
    let output = dlq(db).args(["db", "--json"]).output().ok()?;
    let info: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    info["items"].as_i64()
}

/// The same cutoff on both backends for purging about half: DLQ_NOW one
/// day after the median last attempt (read through `dlq sql`).
fn purge_now(db: &str, items: usize) -> String {
    let output = dlq(db)
        .args([
            "sql",
            &format!(
                "SELECT last_attempt FROM items ORDER BY last_attempt LIMIT 1 OFFSET {}",
                items / 2
            ),
            "--format",
            "json",
        ])
        .output()
        .expect("dlq sql");
    let rows: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let last = rows[0]["last_attempt"].as_str().expect("a last_attempt");
    dlqlite::Timestamp::parse(last)
        .expect("timestamp")
        .minus_seconds(-86_400)
        .to_legacy()
}

/// Part 3: the same large database on both backends.
fn at_size(pg_server: &str) {
    let items = env_usize("DLQ_BENCH_BIG", 1_000_000);
    let runs = env_usize("DLQ_BENCH_RUNS", 3).max(1);
    let shape = std::env::var("DLQ_BENCH_SHAPE")
        .ok()
        .and_then(|s| s.chars().next())
        .unwrap_or('c');
    let file = shape_file(shape, items);
    let sqlite = bench_dir().join(format!("backends-big-{shape}-{items}.db"));
    let sqlite = sqlite.display().to_string();
    if db_items(&sqlite) != Some(items as i64) {
        remove_db(Path::new(&sqlite));
        let (wall, peak) = measured(&sqlite, &["import", &file.display().to_string()], &[]);
        println!(
            "dlq import of {items} items (shape {shape}) into SQLite: {wall:.1} s ({:.0} items/s), peak RSS {peak:.0} MB",
            items as f64 / wall
        );
    }
    let name = format!("bench_big_{shape}_{items}");
    let at = pg_server.rfind('/').expect("a URL with a database");
    let pg = format!("{}/{name}", &pg_server[..at]);
    if db_items(&pg) != Some(items as i64) {
        let pg = fresh_pg(pg_server, &name);
        let (wall, peak) = measured("unused.db", &["copy", "--from", &sqlite, "--to", &pg], &[]);
        println!(
            "dlq copy of {items} items SQLite -> PostgreSQL: {wall:.1} s ({:.0} items/s), peak RSS {peak:.0} MB",
            items as f64 / wall
        );
    }
    println!("{items} items, shape {shape}, median of {runs} (peak RSS)");
    println!("{:<34} {:>18} {:>18}", "", "SQLite", "PostgreSQL");
    let job = dlqlite::generate::job_id(0);
    let commands: [(&str, Vec<&str>); 4] = [
        ("dlq stats --json", vec!["stats", "--json"]),
        ("dlq list --limit 50", vec!["list", "--limit", "50"]),
        (
            "dlq list --job-id J --limit 50",
            vec!["list", "--job-id", &job, "--limit", "50"],
        ),
        ("dlq analyze --json", vec!["analyze", "--json"]),
    ];
    for (label, args) in &commands {
        let cells: Vec<String> = [&sqlite, &pg]
            .iter()
            .map(|db| {
                let mut timings: Vec<(f64, f64)> =
                    (0..runs).map(|_| measured(db, args, &[])).collect();
                timings.sort_by(|a, b| a.0.total_cmp(&b.0));
                let (wall, _) = timings[timings.len() / 2];
                let peak = timings.iter().map(|t| t.1).fold(0.0, f64::max);
                format!("{:.0} ms ({peak:.0} MB)", wall * 1e3)
            })
            .collect();
        println!("{label:<34} {:>18} {:>18}", cells[0], cells[1]);
    }
    // Purge about half, once, on a copy of each.
    let now = purge_now(&sqlite, items);
    let env = [("DLQ_NOW", now.as_str())];
    let purge = ["purge", "--older-than-days", "1", "--yes"];
    let copy = bench_dir().join("backends-big-purge.db");
    remove_db(&copy);
    let copy = copy.display().to_string();
    // The file and its WAL (what the import left there is the database
    // as much as the file is).
    for suffix in ["", "-wal"] {
        let from = format!("{sqlite}{suffix}");
        if Path::new(&from).exists() {
            std::fs::copy(&from, format!("{copy}{suffix}")).expect("copy");
        }
    }
    let sqlite_purge = measured(&copy, &purge, &env);
    let left = db_items(&copy).expect("items left");
    remove_db(Path::new(&copy));
    let mut admin = postgres::Client::connect(pg_server, postgres::NoTls).expect("connect");
    admin
        .batch_execute("DROP DATABASE IF EXISTS bench_big_purge WITH (FORCE)")
        .expect("drop");
    admin
        .batch_execute(&format!(
            "CREATE DATABASE bench_big_purge TEMPLATE \"{name}\""
        ))
        .expect("template copy");
    let pg_copy = format!("{}/bench_big_purge", &pg_server[..at]);
    let pg_purge = measured(&pg_copy, &purge, &env);
    assert_eq!(db_items(&pg_copy), Some(left), "both purged the same items");
    println!(
        "{:<34} {:>18} {:>18}",
        format!("dlq purge ({} items)", items as i64 - left),
        format!("{:.1} s ({:.0} MB)", sqlite_purge.0, sqlite_purge.1),
        format!("{:.1} s ({:.0} MB)", pg_purge.0, pg_purge.1)
    );
    admin
        .batch_execute("DROP DATABASE IF EXISTS bench_big_purge WITH (FORCE)")
        .expect("drop");
}
