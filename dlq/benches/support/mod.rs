//! What the benchmarks share: settings from the environment, the data
//! directory, the generated legacy tree, and measuring a child process.

#![allow(dead_code)]

use dlqlite::generate::{write_jsonl, write_tree, ShapeSpec, TreeSpec};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A number from the environment, or the default.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// target/bench-data, where generated data is kept between runs (made
/// when missing: a fresh clone has none).
pub fn bench_dir() -> PathBuf {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("target/bench-data");
    std::fs::create_dir_all(&dir).expect("target/bench-data");
    dir
}

/// The generated tree for `items` items (1,000 per job, as the legacy cap
/// kept them), written once and reused.
pub fn tree(items: usize) -> PathBuf {
    let root = bench_dir().join(format!("legacy-{items}"));
    let done = root.join(".complete");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&root);
        let per_job = 1_000.min(items);
        let spec = TreeSpec {
            jobs: items.div_ceil(per_job),
            items_per_job: per_job,
            attempt: 1,
            seed: 42,
        };
        let started = Instant::now();
        let n = write_tree(&root, &spec).expect("generate tree");
        std::fs::write(&done, "").expect("marker");
        eprintln!(
            "generated {n} items in {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
    root
}

/// Removes a database and its WAL files.
pub fn remove_db(db: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}

/// Runs a command to its end; returns the wall time and the peak RSS in KiB
/// (polling /proc/<pid>/status for VmHWM, the kernel's high-water mark).
pub fn run_measured(command: &mut Command) -> (Duration, u64) {
    let started = Instant::now();
    let mut child = command.spawn().expect("spawn");
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_path) {
            if let Some(line) = status.lines().find(|l| l.starts_with("VmHWM:")) {
                let kib: u64 = line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                peak = peak.max(kib);
            }
        }
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "{command:?} failed");
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (started.elapsed(), peak)
}

/// The shapes of DLQ the benchmarks measure (see shapes.rs and serve.rs:
/// a 1,000 jobs, b one job, c a signature per item, d an agent per attempt,
/// e 20 attempts per item, f big item_data, r random order, j 10,000 jobs).
pub fn shape_spec(shape: char, items: usize) -> ShapeSpec {
    let base = ShapeSpec {
        items,
        jobs: 1_000.min(items.max(1)),
        ..ShapeSpec::default()
    };
    match shape {
        'a' => base,
        'b' => ShapeSpec { jobs: 1, ..base },
        'c' => ShapeSpec {
            signature_per_item: true,
            ..base
        },
        'd' => ShapeSpec {
            agent_per_attempt: true,
            ..base
        },
        'e' => ShapeSpec {
            items: (items / 10).max(1),
            attempts: 20,
            jobs: 1_000.min((items / 10).max(1)),
            ..base
        },
        'f' => ShapeSpec {
            big_data_every: Some(100),
            ..base
        },
        'r' => ShapeSpec {
            time_ordered: false,
            ..base
        },
        'j' => ShapeSpec {
            jobs: 10_000.min(items.max(1)),
            ..base
        },
        other => panic!("unknown shape {other:?} (a-f, r, j)"),
    }
}

/// The shape's items as a `dlq export`-shaped JSON lines file under the
/// data directory, generated the first time.
pub fn shape_file(shape: char, items: usize) -> PathBuf {
    let file = bench_dir().join(format!("shape-{shape}-{items}.jsonl"));
    if !file.exists() {
        let partial = file.with_extension("partial");
        let started = Instant::now();
        write_jsonl(&partial, &shape_spec(shape, items)).expect("generate");
        std::fs::rename(&partial, &file).expect("rename");
        eprintln!(
            "generated {} in {:.1}s",
            file.display(),
            started.elapsed().as_secs_f64()
        );
    }
    file
}
