//! Replay overhead: `dlq retry --exec true --parallel 8` over
//! DLQ_BENCH_ITEMS items (default 10,000), against the same number of
//! `sh -c true` started by 8 threads with no database at all. The
//! difference per item is what dlq adds to each command. Also reports the
//! run's peak RSS.

#[path = "support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::{env_usize, run_measured};

fn baseline(items: usize, parallel: usize) -> Duration {
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| {
                while next.fetch_add(1, Ordering::SeqCst) < items {
                    let status = Command::new("sh")
                        .args(["-c", "true"])
                        .stdin(Stdio::piped())
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .status()
                        .expect("sh");
                    assert!(status.success());
                }
            });
        }
    });
    started.elapsed()
}

fn main() {
    let items = env_usize("DLQ_BENCH_ITEMS", 10_000);
    let parallel = 8;
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("target/bench-data");
    std::fs::create_dir_all(&dir).expect("dir");
    let db = dir.join("retry.db");
    support::remove_db(&db);
    let dlq = dlqlite::Dlq::open(&db).expect("open");
    dlq.set_capacity(None, Some(0)).expect("unlimited");
    let mut rng = dlqlite::generate::Rng::new(9);
    dlq.load(0..items, &Default::default(), |load, i| {
        let text = dlqlite::generate::item_json(&mut rng, i, 1);
        let mut item = dlqlite::DeadLetteredItem::from_json_str(&text)?;
        item.reprocess_eligible = true;
        load.item("bench", None, &item)?;
        Ok(true)
    })
    .expect("fill");
    drop(dlq);

    let base = baseline(items, parallel);
    let (wall, peak_kib) = run_measured(
        Command::new(env!("CARGO_BIN_EXE_dlq"))
            .arg("--db")
            .arg(&db)
            .args([
                "retry",
                "bench",
                "--exec",
                "true",
                "--parallel",
                "8",
                "--json",
            ])
            .stdout(Stdio::null()),
    );
    let per_item = |d: Duration| d.as_secs_f64() * 1e3 / items as f64;
    println!("retry benchmark, {items} items, --exec true --parallel {parallel}");
    println!(
        "  sh -c true x{items}, 8 threads:  {:.2}s  ({:.3} ms/item)",
        base.as_secs_f64(),
        per_item(base)
    );
    println!(
        "  dlq retry:                    {:.2}s  ({:.3} ms/item), peak RSS {:.1} MB",
        wall.as_secs_f64(),
        per_item(wall),
        peak_kib as f64 / 1024.0
    );
    println!(
        "  overhead beyond the command:  {:.3} ms/item of wall time ({:.3} ms of worker time)   target < 2 ms",
        per_item(wall.saturating_sub(base)),
        per_item(wall.saturating_sub(base)) * parallel as f64
    );
}
