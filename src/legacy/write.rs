//! Writing a legacy tree (the rollback path for older tooling): the layout
//! of [`super::layout`], file names from [`super::names`], each item in the
//! exact legacy JSON shape, and a job's index.json once its items are
//! written. Every file is new, mode 0600, and nothing is written through a
//! link inside the tree's root (see [`crate::outfile`]).

use super::index::index_json;
use super::layout::{self, INDEX_FILE, ITEMS_DIR};
use super::names::safe_file_stem;
use crate::error::{Error, Result};
use crate::model::DeadLetteredItem;
use crate::time::Timestamp;
use std::path::{Path, PathBuf};

/// Writes jobs in the legacy layout under one root directory.
pub struct TreeWriter {
    root: PathBuf,
    replace: bool,
}

/// Writes one job directory: items one at a time, then its index.
pub struct JobWriter<'a> {
    tree: &'a TreeWriter,
    job_id: String,
    job_dir: PathBuf,
    items_dir: PathBuf,
    item_ids: Vec<String>,
}

impl TreeWriter {
    /// A writer into `root`. Refused when `root` is not empty unless
    /// `replace` (stale files there would come back on the next import);
    /// with `replace` a file of the same name is removed before it is
    /// written (the name, never what a link points to).
    pub fn new(root: &Path, replace: bool) -> Result<Self> {
        if !replace {
            if let Ok(mut entries) = std::fs::read_dir(root) {
                if entries.next().is_some() {
                    return Err(Error::invalid_argument(
                        "export directory",
                        format!(
                            "{} is not empty (stale files would come back on the next import); \
                             pass --force to export into it anyway",
                            root.display()
                        ),
                    ));
                }
            }
        }
        Ok(TreeWriter {
            root: root.to_path_buf(),
            replace,
        })
    }

    /// Creates the directories of `job_id` ([`layout::job_dir`], 0700) and
    /// a writer for its items.
    pub fn job(&self, job_id: &str, repo: Option<&str>) -> Result<JobWriter<'_>> {
        let job_dir = layout::job_dir(&self.root, repo, job_id);
        let items_dir = job_dir.join(ITEMS_DIR);
        crate::outfile::create_private_dir_all(&self.root, &items_dir)?;
        Ok(JobWriter {
            tree: self,
            job_id: job_id.to_string(),
            job_dir,
            items_dir,
            item_ids: Vec::new(),
        })
    }

    fn write(&self, path: &Path, contents: &[u8]) -> Result<()> {
        if self.replace {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(path, e))
                }
                _ => {}
            }
        }
        crate::outfile::write_new_file(path, contents)
    }
}

impl JobWriter<'_> {
    /// Writes `item` as `items/<safe item id>.json`, pretty-printed as the
    /// old writer did.
    pub fn add(&mut self, item: &DeadLetteredItem) -> Result<()> {
        let stem = safe_file_stem(&item.item_id);
        let path = self.items_dir.join(layout::item_file_name(&stem));
        self.tree
            .write(&path, item.to_legacy_json_pretty()?.as_bytes())?;
        self.item_ids.push(stem);
        Ok(())
    }

    /// Writes index.json listing the items written, and returns the job
    /// directory.
    pub fn finish(self, updated_at: Timestamp) -> Result<PathBuf> {
        let index = index_json(&self.job_id, &self.item_ids, updated_at);
        self.tree.write(
            &self.job_dir.join(INDEX_FILE),
            serde_json::to_string_pretty(&index)?.as_bytes(),
        )?;
        Ok(self.job_dir)
    }
}
