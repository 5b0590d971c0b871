//! Adopting a legacy JSON DLQ in place: what an embedding program that
//! used to keep its dead letters as JSON files (Prodigy's queue) calls when
//! it opens its database, so that switching loses sight of nothing.
//!
//! The first adoption imports every legacy job of the root's queue
//! (`root/mapreduce/dlq/<job_id>/`) by the import's own rules (read only,
//! lossless, an item already stored is merged or left unchanged) and
//! records that it did (`settings`), in one transaction, so later opens pay
//! one lookup and two processes opening at once import it once (the
//! second finds the record when its turn to write comes). A crash half way
//! leaves the JSON untouched and no record: the next open imports again.
//! Nothing is ever written as JSON.

use super::{import_walking, ImportOptions, ImportReport, Walk};
use crate::error::{Error, Result};
use crate::Dlq;
use std::path::Path;

impl Dlq {
    /// Imports the legacy JSON DLQ kept at `root` (Prodigy's layout:
    /// `root/mapreduce/dlq/<job_id>/items/*.json`, and nothing else under
    /// `root`, which may be a project directory holding other trees) once
    /// per database and root: `Some(report)` when this call imported it,
    /// `None` when this root was adopted into this database before (by any
    /// process, under any spelling of its path) or holds no legacy job
    /// there. Files that cannot be read are in the report's rejections, as
    /// in `dlq import`; they are not tried again.
    pub fn adopt_legacy(&self, root: &Path) -> Result<Option<ImportReport>> {
        if !holds_legacy_jobs(root) {
            return Ok(None);
        }
        // Recorded under the canonical path, so `dir/`, `./dir` or a link to
        // it is the same root; the spelling recorded before that counts too.
        let canonical = std::fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
        let key = canonical.display().to_string();
        let spelled = root.display().to_string();
        if self.legacy_adopted(&key)?.is_some() || self.legacy_adopted(&spelled)?.is_some() {
            return Ok(None);
        }
        let options = ImportOptions {
            once: Some(crate::store::legacy_adoption_key(&key)),
            ..ImportOptions::default()
        };
        // The queue's own links are followed, as the program reading it
        // through them did (a job or `mapreduce/dlq` kept elsewhere).
        let report = import_walking(
            self,
            &[canonical.join("mapreduce").join("dlq")],
            &options,
            Walk::FollowingLinks,
            |_| {},
        )?;
        if report.loaded_before {
            return Ok(None);
        }
        Ok(Some(report))
    }
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
