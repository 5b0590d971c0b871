//! Import throughput and peak memory on a generated legacy tree.
//!
//! `cargo bench --bench import` generates (once) a tree of DLQ_BENCH_ITEMS
//! items (default 100,000; 1,000 per job, as the legacy cap kept them) under
//! target/bench-data, then:
//! - imports it in-process into a fresh database DLQ_BENCH_RUNS times
//!   (default 3) and reports items/s (median, min, max);
//! - runs the real `dlq import` on it and reports its peak RSS (VmHWM);
//! - compares the database's size with the tree's allocated size.

use dlqlite::import::{import, ImportOptions};
use dlqlite::Dlq;
use std::path::Path;
use std::time::Instant;

// The same allocator as the `dlq` binary, so in-process figures match it.
#[path = "support/mod.rs"]
mod support;

use support::{bench_dir, env_usize, remove_db, run_measured, tree};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Bytes allocated on disk under `root` (what `du` counts).
pub fn allocated_bytes(root: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

fn main() {
    let items = env_usize("DLQ_BENCH_ITEMS", 100_000);
    let runs = env_usize("DLQ_BENCH_RUNS", 3).max(1);
    let root = tree(items);
    let work = bench_dir().join("work");
    std::fs::create_dir_all(&work).expect("work dir");

    // How long reading and parsing alone take (no database).
    let started = Instant::now();
    let mut parsed = 0usize;
    dlqlite::import::scan(std::slice::from_ref(&root), |record| {
        if matches!(record, dlqlite::import::Record::Item { .. }) {
            parsed += 1;
        }
        true
    })
    .expect("scan");
    let scan_rate = parsed as f64 / started.elapsed().as_secs_f64();
    eprintln!("scan only: {scan_rate:.0} items/s");

    let mut rates = Vec::new();
    for run in 0..runs {
        let db = work.join(format!("import-{run}.db"));
        remove_db(&db);
        let dlq = Dlq::open(&db).expect("open");
        let started = Instant::now();
        let report = import(
            &dlq,
            std::slice::from_ref(&root),
            &ImportOptions::default(),
            |_| {},
        )
        .expect("import");
        let elapsed = started.elapsed().as_secs_f64();
        assert_eq!(report.items_new, items, "every item imported");
        rates.push(items as f64 / elapsed);
        eprintln!("run {run}: {items} items in {elapsed:.2}s");
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];

    // Into a database that already has items: batched transactions, indexes
    // kept up to date as it goes.
    let db = work.join("import-incremental.db");
    remove_db(&db);
    let dlq = Dlq::open(&db).expect("open");
    let options = ImportOptions {
        bulk_when_empty: false,
        ..ImportOptions::default()
    };
    let started = Instant::now();
    import(&dlq, std::slice::from_ref(&root), &options, |_| {}).expect("import");
    let incremental_rate = items as f64 / started.elapsed().as_secs_f64();

    let db = work.join("import-cli.db");
    remove_db(&db);
    let (wall, peak_kib) = run_measured(
        std::process::Command::new(env!("CARGO_BIN_EXE_dlq"))
            .arg("--db")
            .arg(&db)
            .args(["import", "--json"])
            .arg(&root)
            .stdout(std::process::Stdio::null()),
    );
    let db_bytes = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    let tree_bytes = allocated_bytes(&root);

    println!(
        "import benchmark, {items} items ({} jobs of up to 1,000)",
        items.div_ceil(1_000)
    );
    println!("  read + parse only: {scan_rate:.0} items/s");
    println!(
        "  in-process import: median {median:.0} items/s (min {:.0}, max {:.0}, {runs} runs)",
        rates[0],
        rates[rates.len() - 1]
    );
    println!("  batched import (database not empty): {incremental_rate:.0} items/s");
    println!(
        "  dlq import (CLI):  {:.2}s, {:.0} items/s, peak RSS {:.1} MB",
        wall.as_secs_f64(),
        items as f64 / wall.as_secs_f64(),
        peak_kib as f64 / 1024.0
    );
    println!(
        "  size: database {:.1} MB vs legacy tree {:.1} MB allocated ({:.2}x)",
        db_bytes as f64 / 1e6,
        tree_bytes as f64 / 1e6,
        db_bytes as f64 / tree_bytes.max(1) as f64
    );
}
