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
use support::{bench_dir, env_usize, remove_db};

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
            let _ = Command::new("scripts/pg").arg("stop").arg(dir).status();
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
    let output = Command::new("scripts/pg")
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
                    _ => fresh_pg(&pg_server, &format!("bench_writers_{n}")),
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

    // dlq copy both ways.
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
    let pg = fresh_pg(&pg_server, "bench_copy");
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
