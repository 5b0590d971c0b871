//! Adopting a legacy JSON DLQ in place: what an embedding program that
//! used to keep its dead letters as JSON files (Prodigy's queue) calls when
//! it opens its database, so that switching loses sight of nothing.
//!
//! The first adoption imports every legacy job of the root's queue
//! (`root/mapreduce/dlq/<job_id>/`) by the import's own rules (read only,
//! lossless, an item already stored is merged or left unchanged) and
//! records that it did (`settings`, one record per job directory), in the
//! job's one transaction, so later opens pay a lookup per job and two
//! processes opening at once import each job once (the second finds the
//! record when its turn to write comes). A crash half way leaves the JSON
//! untouched and no record: the next open imports again. Nothing is ever
//! written as JSON.

use super::{import_walking, ImportOptions, ImportReport, Walk};
use crate::error::{Error, Result};
use crate::Dlq;
use std::path::Path;

impl Dlq {
    /// Imports the legacy JSON DLQ kept at `root` (Prodigy's layout:
    /// `root/mapreduce/dlq/<job_id>/items/*.json`, and nothing else under
    /// `root`, which may be a project directory holding other trees) once
    /// per database and job directory: `Some(report)` when this call
    /// imported a job, `None` when every job there was adopted into this
    /// database before (by any process, under any spelling of the path) or
    /// there is none. Each job directory is adopted on its own, so one that
    /// appears later (a link whose target was missing, a job an older
    /// program wrote since) is adopted then. Files that cannot be read are
    /// in the report's rejections, as in `dlq import`, and in the job's
    /// `imported` event; they are not tried again.
    pub fn adopt_legacy(&self, root: &Path) -> Result<Option<ImportReport>> {
        if !holds_legacy_jobs(root) {
            return Ok(None);
        }
        // Recorded under the canonical path, so `dir/`, `./dir` or a link to
        // it is the same root. A record of the whole root (made before jobs
        // were adopted one by one) still counts, under either spelling.
        let canonical = std::fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
        let key = canonical.display().to_string();
        let spelled = root.display().to_string();
        let whole = |root: &str| self.loaded_once(&crate::store::legacy_adoption_key(root));
        if whole(&key)?.is_some() || whole(&spelled)?.is_some() {
            return Ok(None);
        }
        let queue = canonical.join("mapreduce").join("dlq");
        let mut adopted: Option<ImportReport> = None;
        for job in job_dirs(&queue) {
            let job_key = crate::store::legacy_adoption_key(&job.display().to_string());
            if self.loaded_once(&job_key)?.is_some() {
                continue;
            }
            let options = ImportOptions {
                once: Some(job_key),
                ..ImportOptions::default()
            };
            // The queue's own links are followed, as the program reading
            // it through them did (a job or `mapreduce/dlq` kept elsewhere).
            let report = import_walking(self, &[job], &options, Walk::FollowingLinks, |_| {})?;
            if report.loaded_before {
                continue;
            }
            match &mut adopted {
                None => adopted = Some(report),
                Some(sum) => sum.absorb(report),
            }
        }
        Ok(adopted)
    }
}

/// The job directories of a queue (`<base>/mapreduce/dlq`): its entries
/// with an `items/` directory, links followed, in name order.
fn job_dirs(queue: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(queue) else {
        return Vec::new();
    };
    let mut jobs: Vec<_> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("items").is_dir())
        .collect();
    jobs.sort();
    jobs
}

/// Whether `root/mapreduce/dlq/` holds a job directory with an `items/`
/// directory (the legacy writer's layout; one directory read, so an open
/// with nothing to adopt costs next to nothing).
pub fn holds_legacy_jobs(root: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(root.join("mapreduce").join("dlq")) else {
        return false;
    };
    entries
        .flatten()
        .any(|entry| entry.path().join("items").is_dir())
}
