//! Writing the database back out: whole jobs as a legacy tree (the
//! rollback path for older tooling; the tree writer is
//! [`crate::legacy::write`]'s), and the matching items as JSON / JSON lines
//! of legacy-shape items or CSV. Items are streamed a page at a time.

use crate::error::{Error, Result};
use crate::legacy::codec::ItemWithJob;
use crate::legacy::write::TreeWriter;
use crate::model::DeadLetteredItem;
use crate::store::{Dlq, ListFilter};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

// Moved to `crate::legacy::names`, still reachable here.
pub use crate::legacy::names::safe_file_stem;

/// What a legacy export wrote.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExportReport {
    pub jobs: usize,
    pub items: usize,
    /// Where each job went.
    pub job_dirs: Vec<String>,
}

/// Progress of an export, for a progress bar.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub items_written: usize,
    pub elapsed: Duration,
}

/// Calls a progress callback at most every 100 ms (a clock read per item,
/// no query).
struct Ticker<'a> {
    started: Instant,
    last: Instant,
    progress: &'a mut dyn FnMut(&Progress),
}

impl<'a> Ticker<'a> {
    fn new(progress: &'a mut dyn FnMut(&Progress)) -> Self {
        let now = Instant::now();
        Ticker {
            started: now,
            last: now,
            progress,
        }
    }

    fn tick(&mut self, items_written: usize) {
        if self.last.elapsed() >= Duration::from_millis(100) {
            self.last = Instant::now();
            self.report(items_written);
        }
    }

    fn report(&mut self, items_written: usize) {
        (self.progress)(&Progress {
            items_written,
            elapsed: self.started.elapsed(),
        });
    }
}

/// Writes jobs in the legacy layout under `dir`:
/// `dir/dlq/<repo or "imported">/<job_id>/mapreduce/dlq/<job_id>/items/<item>.json`
/// plus `index.json`, every file in the exact legacy JSON shape.
///
/// Refused into a directory that is not empty unless `force` (stale files
/// there would come back on the next import). Nothing is written through a
/// link inside `dir`, not even one swapped in while the export runs: each
/// level is held by descriptor and written into by name (see
/// [`crate::outfile::Dir`]). Every file is new, mode 0600; with `force` a
/// file of the same name is removed first (the name, never what a link
/// points to).
pub fn export_legacy(
    dlq: &Dlq,
    dir: &Path,
    job_id: Option<&str>,
    force: bool,
) -> Result<ExportReport> {
    export_legacy_with_progress(dlq, dir, job_id, force, |_| {})
}

/// [`export_legacy`], reporting progress at most every 100 ms and once at
/// the end.
pub fn export_legacy_with_progress(
    dlq: &Dlq,
    dir: &Path,
    job_id: Option<&str>,
    force: bool,
    mut progress: impl FnMut(&Progress),
) -> Result<ExportReport> {
    let mut ticker = Ticker::new(&mut progress);
    let tree = TreeWriter::new(dir, force)?;
    let jobs = dlq.jobs()?;
    let jobs: Vec<_> = match job_id {
        Some(job) => {
            let found: Vec<_> = jobs.into_iter().filter(|j| j.job_id == job).collect();
            if found.is_empty() {
                return Err(Error::JobNotFound(job.to_string()));
            }
            found
        }
        None => jobs,
    };
    let mut report = ExportReport::default();
    for job in jobs {
        let mut writer = tree.job(&job.job_id, job.repo.as_deref())?;
        let filter = ListFilter {
            job_id: Some(job.job_id.clone()),
            ..ListFilter::default()
        };
        for item in dlq.items(filter) {
            writer.add(&item?.item)?;
            report.items += 1;
            ticker.tick(report.items);
        }
        let job_dir = writer.finish(dlq.now())?;
        report.jobs += 1;
        report.job_dirs.push(job_dir.display().to_string());
    }
    ticker.report(report.items);
    Ok(report)
}

/// The formats [`write_items`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemFormat {
    /// One JSON array of legacy-shape items (each with its `job_id`, and
    /// its job's `repo` when it has one).
    Json,
    /// One legacy-shape item (with its `job_id` and `repo`) per line.
    Jsonl,
    /// One row per item under [`CSV_HEADER`], a cell a spreadsheet would
    /// run as a formula neutralised (see [`crate::text::for_csv`]).
    Csv,
    /// The same with every cell as it is.
    CsvRaw,
}

/// The CSV columns: the item's own fields (item_data as JSON text), its
/// worktree, its last attempt flattened into `last_*` columns, and the
/// failure category of that attempt's error type (`category`, as `dlq list
/// --format csv` has it; last, so the columns before keep their places).
pub const CSV_HEADER: [&str; 20] = [
    "job_id",
    "item_id",
    "item_data",
    "first_attempt",
    "last_attempt",
    "failure_count",
    "error_signature",
    "reprocess_eligible",
    "manual_review_required",
    "worktree_path",
    "branch_name",
    "last_attempt_number",
    "last_error_type",
    "last_exit_code",
    "last_error_message",
    "last_agent_id",
    "last_step_failed",
    "last_duration_ms",
    "last_json_log_location",
    "category",
];

fn csv_record(
    job_id: &str,
    item: &DeadLetteredItem,
    categories: &std::collections::HashMap<String, crate::Category>,
) -> Vec<String> {
    let last = item.last_failure();
    // As the listing's category: that of the last attempt's error type,
    // unclassified without a rule (or without an attempt).
    let category = last
        .and_then(|f| categories.get(&f.error_type.name).copied())
        .unwrap_or(crate::Category::Unclassified);
    let opt = |value: Option<String>| value.unwrap_or_default();
    vec![
        job_id.to_string(),
        item.item_id.clone(),
        item.item_data.get().to_string(),
        item.first_attempt.to_legacy(),
        item.last_attempt.to_legacy(),
        item.failure_count.to_string(),
        item.error_signature.clone(),
        item.reprocess_eligible.to_string(),
        item.manual_review_required.to_string(),
        opt(item
            .worktree_artifacts
            .as_ref()
            .map(|w| w.worktree_path.clone())),
        opt(item
            .worktree_artifacts
            .as_ref()
            .map(|w| w.branch_name.clone())),
        opt(last.map(|f| f.attempt_number.to_string())),
        opt(last.map(|f| f.error_type.name.clone())),
        opt(last
            .and_then(|f| f.error_type.exit_code)
            .map(|c| c.to_string())),
        opt(last.map(|f| f.error_message.clone())),
        opt(last.map(|f| f.agent_id.clone())),
        opt(last.map(|f| f.step_failed.clone())),
        opt(last.map(|f| f.duration_ms.to_string())),
        opt(last.and_then(|f| f.json_log_location.clone())),
        category.as_str().to_string(),
    ]
}

/// Writes the matching items to `out`, streamed; returns how many.
pub fn write_items(
    dlq: &Dlq,
    filter: ListFilter,
    out: &mut impl Write,
    format: ItemFormat,
) -> Result<usize> {
    write_items_with_progress(dlq, filter, out, format, |_| {})
}

/// [`write_items`], reporting progress at most every 100 ms and once at the
/// end.
pub fn write_items_with_progress(
    dlq: &Dlq,
    filter: ListFilter,
    out: &mut impl Write,
    format: ItemFormat,
    mut progress: impl FnMut(&Progress),
) -> Result<usize> {
    let mut ticker = Ticker::new(&mut progress);
    let io = |e: std::io::Error| Error::io("output", e);
    let mut count = 0;
    match format {
        ItemFormat::Csv | ItemFormat::CsvRaw => {
            let raw = format == ItemFormat::CsvRaw;
            let mut writer = csv::Writer::from_writer(&mut *out);
            let csv_error =
                |e: csv::Error| Error::io("output", std::io::Error::other(e.to_string()));
            writer.write_record(CSV_HEADER).map_err(csv_error)?;
            let categories = dlq.category_map()?;
            for entry in dlq.items(filter) {
                let entry = entry?;
                let record = csv_record(&entry.job_id, &entry.item, &categories);
                if raw {
                    writer.write_record(&record)
                } else {
                    writer.write_record(record.iter().map(|c| crate::text::for_csv(c).into_owned()))
                }
                .map_err(csv_error)?;
                count += 1;
                ticker.tick(count);
            }
            writer.flush().map_err(io)?;
        }
        ItemFormat::Json | ItemFormat::Jsonl => {
            let lines = format == ItemFormat::Jsonl;
            // Each item carries its job's repo, so an import of the file
            // restores it (one lookup here, not one per item).
            let repos: std::collections::HashMap<String, String> = dlq
                .jobs()?
                .into_iter()
                .filter_map(|job| Some((job.job_id, job.repo?)))
                .collect();
            if !lines {
                out.write_all(b"[").map_err(io)?;
            }
            for entry in dlq.items(filter) {
                let entry = entry?;
                let with_job = ItemWithJob {
                    job_id: &entry.job_id,
                    repo: repos.get(&entry.job_id).map(String::as_str),
                    item: &entry.item,
                };
                if !lines {
                    out.write_all(if count == 0 { b"\n" } else { b",\n" })
                        .map_err(io)?;
                }
                serde_json::to_writer(&mut *out, &with_job)?;
                if lines {
                    out.write_all(b"\n").map_err(io)?;
                }
                count += 1;
                ticker.tick(count);
            }
            if !lines {
                out.write_all(b"\n]\n").map_err(io)?;
            }
        }
    }
    out.flush().map_err(io)?;
    ticker.report(count);
    Ok(count)
}
