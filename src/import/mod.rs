//! Importing legacy JSON DLQ trees (and `dlq export` files) into the
//! database. Reading the format is [`crate::legacy`]'s; this module is the
//! orchestration around it.
//!
//! Split as atuin does it: [`scan`] walks the trees and *produces* records
//! (parsed items, rejected files, index disagreements) without touching the
//! database; [`import`] runs the scan on a second thread and *writes* the
//! records in batched transactions. Source files are only ever read.

use crate::error::{Error, Result};
use crate::legacy::discover::{JobDir, Walker};
use crate::legacy::index::{self, Index};
use crate::model::DeadLetteredItem;
use crate::store::{AddOutcome, CapacityRaised, Dlq, Loader};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

// Moved to `crate::legacy`, still reachable here (IndexMismatch is part of
// the ImportReport).
mod adopt;

pub use crate::legacy::index::IndexMismatch;
pub use crate::legacy::read::read_item;
pub use adopt::holds_legacy_jobs;

/// The tree walk moved to `crate::legacy`; its old path still works.
pub mod discover {
    pub use crate::legacy::discover::*;
    pub use crate::legacy::layout::{is_job_dir, repo_of, NO_REPO};
}

/// What the scan produces, in walk order.
#[derive(Debug)]
pub enum Record {
    /// A job directory was found.
    Job(JobDir, String),
    /// A `dlq export` file (JSON or JSON lines) is read next: the items and
    /// rejections that follow, up to the next `Job`, are its items.
    ExportFile(PathBuf),
    /// A file (or an export file's entry) parsed into an item of `job_id`.
    Item {
        job_id: String,
        repo: Option<String>,
        path: PathBuf,
        item: Box<DeadLetteredItem>,
    },
    /// A `.json` file that could not be read or parsed.
    Rejected(RejectedFile),
    /// index.json disagrees with the files.
    IndexMismatch(IndexMismatch),
}

/// A file that was skipped, with a one-line reason.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct RejectedFile {
    pub path: String,
    pub error: String,
}

/// How an import batches its writes: see [`crate::store::LoadOptions`].
pub type ImportOptions = crate::store::LoadOptions;

/// What an import did (the `--json` output).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ImportReport {
    /// Jobs that received items, counted from the items' job ids.
    pub jobs: usize,
    /// Files read: item files of legacy trees (rejected ones included) and
    /// export files.
    pub files_seen: usize,
    /// Items parsed (from item files and export files).
    pub items_read: usize,
    pub items_new: usize,
    pub items_merged: usize,
    pub items_unchanged: usize,
    /// Jobs that ended with more items than their capacity: an import keeps
    /// every item and raises the job's capacity to its item count instead
    /// of evicting (a `capacity_set` event each).
    pub jobs_over_capacity: Vec<CapacityRaised>,
    pub files_rejected: Vec<RejectedFile>,
    pub index_mismatches: Vec<IndexMismatch>,
    /// Paths the walk passed over (symlinks out of the tree, unreadable
    /// directories), with why.
    pub paths_skipped: Vec<RejectedFile>,
    /// The jobs imported, by job id.
    #[serde(skip)]
    pub job_ids: BTreeSet<String>,
    /// The import's [`ImportOptions::once`] key was recorded before: it
    /// wrote nothing (and read no further than it had to).
    #[serde(skip)]
    pub loaded_before: bool,
}

impl ImportReport {
    /// Adds `other`'s counts and lists to this one (imports of several
    /// roots told as one).
    pub fn absorb(&mut self, other: ImportReport) {
        self.files_seen += other.files_seen;
        self.items_read += other.items_read;
        self.items_new += other.items_new;
        self.items_merged += other.items_merged;
        self.items_unchanged += other.items_unchanged;
        self.jobs_over_capacity.extend(other.jobs_over_capacity);
        self.files_rejected.extend(other.files_rejected);
        self.index_mismatches.extend(other.index_mismatches);
        self.paths_skipped.extend(other.paths_skipped);
        self.job_ids.extend(other.job_ids);
        self.jobs = self.job_ids.len();
        self.loaded_before &= other.loaded_before;
    }
}

/// Progress, for a progress bar.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub files_seen: usize,
    pub items_written: usize,
    pub elapsed: Duration,
}

/// What an import did to one job: its summary `imported` event.
#[derive(Default, Serialize)]
struct JobTally {
    sources: BTreeSet<String>,
    /// Item files read, rejected ones included.
    files: usize,
    new: usize,
    merged: usize,
    unchanged: usize,
    rejected: usize,
    /// The first [`REJECTIONS_KEPT`] rejected files, each with why: kept in
    /// the database, so a caller that drops the report (an adoption on
    /// open) still leaves a trace of what was passed over.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rejected_files: Vec<RejectedFile>,
}

/// How many rejected files a job's summary event names (it counts all).
const REJECTIONS_KEPT: usize = 20;

fn display(path: &Path) -> String {
    path.display().to_string()
}

/// Walks `roots` and hands every record to `emit`, in walk order; stops early
/// when `emit` returns false. Reads only.
pub fn scan(roots: &[PathBuf], emit: impl FnMut(Record) -> bool) -> Result<Vec<RejectedFile>> {
    scan_avoiding(roots, &[], emit)
}

/// [`scan`] that never opens the files `avoid` names by (device, inode):
/// the database being imported into, and its -wal and -shm
/// ([`crate::db::database_file_ids`]), wherever they lie in the tree.
pub fn scan_avoiding(
    roots: &[PathBuf],
    avoid: &[(u64, u64)],
    emit: impl FnMut(Record) -> bool,
) -> Result<Vec<RejectedFile>> {
    scan_walking(roots, avoid, Walk::InTree, emit)
}

/// How a scan treats symlinks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Walk {
    /// Followed only into the tree ([`discover::Walker::new`]).
    InTree,
    /// Followed anywhere ([`discover::Walker::following_links`]).
    FollowingLinks,
}

fn scan_walking(
    roots: &[PathBuf],
    avoid: &[(u64, u64)],
    walk: Walk,
    mut emit: impl FnMut(Record) -> bool,
) -> Result<Vec<RejectedFile>> {
    let mut skipped = Vec::new();
    for root in roots {
        if root.is_file() {
            if !scan_export_file(root, &mut emit) {
                break;
            }
            continue;
        }
        let walker = match walk {
            Walk::InTree => Walker::new(root),
            Walk::FollowingLinks => Walker::following_links(root),
        };
        let mut walker = walker
            .map_err(|e| Error::io(root, e))?
            .avoiding(avoid.to_vec());
        let mut go_on = true;
        walker.for_each_job_dir(|walker, job| {
            go_on = scan_job(walker, job, &mut emit);
            go_on
        });
        skipped.extend(walker.skipped.into_iter().map(|s| RejectedFile {
            path: display(&s.path),
            error: s.reason,
        }));
        if !go_on {
            break;
        }
    }
    Ok(skipped)
}

/// How many files an import of `roots` reads: the item files of the trees
/// (found by the walk [`scan`] makes, without reading them) and one per
/// export file. A progress bar's total; cheap next to the import, which
/// opens and parses every one of them.
pub fn count_files(roots: &[PathBuf]) -> usize {
    let mut files = 0;
    for root in roots {
        if root.is_file() {
            files += 1;
            continue;
        }
        let Ok(mut walker) = Walker::new(root) else {
            continue;
        };
        walker.for_each_job_dir(|walker, job| {
            let items_dir = job.path.join(crate::legacy::layout::ITEMS_DIR);
            walker.for_each_item_file(&items_dir, |_| {
                files += 1;
                true
            });
            true
        });
    }
    files
}

fn scan_job(walker: &mut Walker, job: JobDir, emit: &mut impl FnMut(Record) -> bool) -> bool {
    let index = Index::read(walker, &job);
    let job_id = index::job_id_of(&job, index.as_ref().ok());
    let repo = job.repo.clone();
    if !emit(Record::Job(job.clone(), job_id.clone())) {
        return false;
    }
    let items_dir = job.path.join(crate::legacy::layout::ITEMS_DIR);
    let mut top_level: BTreeSet<String> = BTreeSet::new();
    let mut go_on = true;
    let avoid = walker.avoided_files().to_vec();
    walker.for_each_item_file(&items_dir, |path| {
        if path.parent() == Some(items_dir.as_path()) {
            if let Some(stem) = path.file_stem() {
                top_level.insert(stem.to_string_lossy().into_owned());
            }
        }
        let read = match crate::legacy::discover::avoided(&avoid, path) {
            Some(reason) => Err(reason.to_string()),
            None => read_item(path).map_err(|e| e.to_string()),
        };
        let record = match read {
            Ok(item) => Record::Item {
                job_id: job_id.clone(),
                repo: repo.clone(),
                path: path.to_path_buf(),
                item: Box::new(item),
            },
            Err(error) => Record::Rejected(RejectedFile {
                path: display(path),
                error,
            }),
        };
        go_on = emit(record);
        go_on
    });
    if !go_on {
        return false;
    }
    for mismatch in index::compare(&job_id, index, walker, &job, &top_level) {
        if !emit(Record::IndexMismatch(mismatch)) {
            return false;
        }
    }
    true
}

/// Reads a JSON or JSON-lines file of items (a `dlq export`): each item's
/// job comes from its `job_id` key. An item of the wrong shape is rejected
/// with its position and the rest still import; JSON that is not well formed
/// rejects the rest of the file.
fn scan_export_file(path: &Path, emit: &mut impl FnMut(Record) -> bool) -> bool {
    let source = display(path);
    let reject = |position: Option<usize>, error: String| {
        Record::Rejected(RejectedFile {
            path: match position {
                Some(n) => format!("{source}: item {n}"),
                None => source.clone(),
            },
            error,
        })
    };
    let file = match crate::legacy::read::open_without_waiting(path) {
        Ok(file) => file,
        Err(e) => return emit(reject(None, format!("cannot read: {e}"))),
    };
    if !emit(Record::ExportFile(path.to_path_buf())) {
        return false;
    }
    let mut go_on = true;
    let read = crate::legacy::stream::read_raw_items(file, &source, |position, raw| {
        let record = match DeadLetteredItem::from_raw(raw) {
            Err(reason) => reject(Some(position), reason.to_string()),
            Ok(mut item) => match item.take_job_id() {
                None => reject(Some(position), "no job_id key: use dlq add --job-id".into()),
                Some(job_id) => Record::Item {
                    job_id,
                    // Exports made before the repo was written have none.
                    repo: item.take_repo(),
                    path: path.to_path_buf(),
                    item: Box::new(item),
                },
            },
        };
        go_on = emit(record);
        if go_on {
            Ok(())
        } else {
            Err(Error::invalid_argument("import", "stopped"))
        }
    });
    match read {
        Err(Error::InvalidItem { reason, .. }) if go_on => emit(reject(None, reason)),
        Err(e) if go_on => emit(reject(None, e.to_string())),
        _ => go_on,
    }
}

/// What the writing side has done so far.
struct Writer {
    report: ImportReport,
    tallies: BTreeMap<String, JobTally>,
    current_job: String,
    /// Whether the records now arriving come from an export file.
    in_export_file: bool,
    started: Instant,
    last_progress: Instant,
}

impl Writer {
    /// Writes one record; true when it was an item.
    fn apply(&mut self, tx: &mut Loader<'_, '_>, record: Record) -> Result<bool> {
        let report = &mut self.report;
        match record {
            Record::ExportFile(_) => {
                report.files_seen += 1;
                self.in_export_file = true;
                Ok(false)
            }
            Record::Job(job, job_id) => {
                tx.job(&job_id, job.repo.as_deref())?;
                self.in_export_file = false;
                report.job_ids.insert(job_id.clone());
                self.current_job.clone_from(&job_id);
                self.tallies
                    .entry(job_id)
                    .or_default()
                    .sources
                    .insert(display(&job.path));
                Ok(false)
            }
            Record::Item {
                job_id,
                repo,
                path,
                item,
            } => {
                if !self.in_export_file {
                    report.files_seen += 1;
                }
                report.items_read += 1;
                let outcome = tx.item(&job_id, repo.as_deref(), &item)?;
                // The item's own trail: where it came from. An unchanged
                // item gets none (its first import has it; a rerun would
                // only repeat it).
                let changed = match outcome.outcome {
                    AddOutcome::Inserted => Some("new"),
                    AddOutcome::Merged => Some("merged"),
                    AddOutcome::Unchanged => None,
                };
                if let Some(outcome_name) = changed {
                    // Written as text: building a JSON value per item cost
                    // a measurable share of a large import.
                    let detail = format!(
                        r#"{{"outcome":"{outcome_name}","source":{},"new_attempts":{}}}"#,
                        serde_json::to_string(&*path.to_string_lossy())?,
                        outcome.new_attempts
                    );
                    tx.imported(&job_id, &item.item_id, &detail)?;
                }
                if !report.job_ids.contains(&job_id) {
                    report.job_ids.insert(job_id.clone());
                }
                let tally = self.tallies.entry(job_id).or_default();
                tally.files += 1;
                match outcome.outcome {
                    AddOutcome::Inserted => {
                        report.items_new += 1;
                        tally.new += 1;
                    }
                    AddOutcome::Merged => {
                        report.items_merged += 1;
                        tally.merged += 1;
                    }
                    AddOutcome::Unchanged => {
                        report.items_unchanged += 1;
                        tally.unchanged += 1;
                    }
                }
                Ok(true)
            }
            Record::Rejected(rejected) => {
                // A rejected item file of a tree belongs to the job being
                // read; a rejected line of an export file names no job (it
                // did not parse), so it is counted in the report only.
                if !self.in_export_file {
                    report.files_seen += 1;
                    let tally = self.tallies.entry(self.current_job.clone()).or_default();
                    tally.files += 1;
                    tally.rejected += 1;
                    if tally.rejected_files.len() < REJECTIONS_KEPT {
                        tally.rejected_files.push(rejected.clone());
                    }
                }
                report.files_rejected.push(rejected);
                Ok(false)
            }
            Record::IndexMismatch(mismatch) => {
                report.index_mismatches.push(mismatch);
                Ok(false)
            }
        }
    }

    fn progress(&self) -> Progress {
        Progress {
            files_seen: self.report.files_seen,
            items_written: self.report.items_new
                + self.report.items_merged
                + self.report.items_unchanged,
            elapsed: self.started.elapsed(),
        }
    }

    /// Reports progress at most every 100 ms.
    fn tick(&mut self, progress: &mut impl FnMut(&Progress)) {
        if self.last_progress.elapsed() >= Duration::from_millis(100) {
            self.last_progress = Instant::now();
            progress(&self.progress());
        }
    }
}

/// Imports every job under `roots` into `dlq`. The scan runs on its own
/// thread while this one writes.
///
/// Into a database that already has items, records are written in
/// transactions of `options.batch_size`: a crash loses at most the open
/// batch, and a rerun completes it (re-adding is a no-op merge). Into an
/// empty database the whole import is one transaction that drops the
/// secondary indexes of `items` first and rebuilds them at the end, which is
/// much faster; a crash then leaves the database empty, as it was. Each
/// item written (new or merged) gets an `imported` event with its source
/// file, in its own transaction; after the load, one more `imported` event
/// per job (no item_id) sums up what happened to the job.
pub fn import(
    dlq: &Dlq,
    roots: &[PathBuf],
    options: &ImportOptions,
    progress: impl FnMut(&Progress),
) -> Result<ImportReport> {
    import_walking(dlq, roots, options, Walk::InTree, progress)
}

/// [`import`], walking as `walk` says.
pub(crate) fn import_walking(
    dlq: &Dlq,
    roots: &[PathBuf],
    options: &ImportOptions,
    walk: Walk,
    mut progress: impl FnMut(&Progress),
) -> Result<ImportReport> {
    for root in roots {
        let meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
        if !meta.is_dir() && !meta.is_file() {
            // /dev/zero never ends and a fifo may never open.
            return Err(Error::invalid_argument(
                format!("import path {}", root.display()),
                "not a directory or a regular file (a fifo, socket or device)",
            ));
        }
    }
    // Records cross threads in chunks: one wake-up per chunk, not per file.
    const CHUNK: usize = 64;
    let (sender, receiver) = mpsc::sync_channel::<Vec<Record>>(32);
    let scan_roots = roots.to_vec();
    let avoid = dlq
        .path()
        .map(crate::db::database_file_ids)
        .unwrap_or_default();
    let scanner = std::thread::spawn(move || {
        let mut chunk = Vec::with_capacity(CHUNK);
        let scanned = scan_walking(&scan_roots, &avoid, walk, |record| {
            chunk.push(record);
            chunk.len() < CHUNK
                || sender
                    .send(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK)))
                    .is_ok()
        });
        if !chunk.is_empty() {
            // The writer may have stopped already; its error is the one to report.
            let _ = sender.send(chunk);
        }
        scanned
    });

    let mut writer = Writer {
        report: ImportReport::default(),
        tallies: BTreeMap::new(),
        current_job: String::new(),
        in_export_file: false,
        started: Instant::now(),
        last_progress: Instant::now(),
    };
    let records = receiver.into_iter().flatten();
    // The load consumes (and on an error drops) the receiver, which stops
    // the scanner.
    let loaded = dlq.load(records, options, |loader, record| {
        let item = writer.apply(loader, record)?;
        writer.tick(&mut progress);
        Ok(item)
    });
    let scanned = scanner
        .join()
        .map_err(|_| Error::internal("the import's scanning thread"))?;
    let loaded = loaded?;
    let mut report = writer.report;
    let raised = match loaded {
        crate::store::Loaded::Written(raised) => raised,
        crate::store::Loaded::Before => {
            report.loaded_before = true;
            return Ok(report);
        }
    };
    report.paths_skipped = scanned?;
    report.jobs = report.job_ids.len();
    let events = writer
        .tallies
        .iter()
        .map(|(job_id, tally)| Ok((job_id.clone(), serde_json::to_value(tally)?)))
        .collect::<Result<Vec<_>>>()?;
    dlq.finish_load(events)?;
    report.jobs_over_capacity = raised;
    progress(&Progress {
        files_seen: report.files_seen,
        items_written: report.items_new + report.items_merged + report.items_unchanged,
        elapsed: writer.started.elapsed(),
    });
    Ok(report)
}
