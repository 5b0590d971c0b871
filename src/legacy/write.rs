//! Writing a legacy tree (the rollback path for older tooling): the layout
//! of [`super::layout`], file names from [`super::names`], each item in the
//! exact legacy JSON shape, and a job's index.json once its items are
//! written. Every file is new, mode 0600, and nothing is written through a
//! link inside the tree's root: the root and each level below it are held
//! as directory descriptors ([`crate::outfile::Dir`]) and every name is
//! looked up in the level above it, so a directory swapped for a link while
//! the export runs is not followed either.

use super::index::index_json;
use super::layout::{self, INDEX_FILE, ITEMS_DIR};
use super::names::safe_file_stem;
use crate::error::{Error, Result};
use crate::model::DeadLetteredItem;
use crate::outfile::Dir;
use crate::time::Timestamp;
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// Writes jobs in the legacy layout under one root directory.
pub struct TreeWriter {
    root_path: PathBuf,
    /// The root, held from the first time it is seen to exist: every job's
    /// directories are opened from this descriptor, level by level.
    root: OnceLock<Dir>,
    replace: bool,
}

/// Writes one job directory: items one at a time, then its index. Both
/// directories are held open, so every file lands in the directories that
/// were checked when the job started, whatever is renamed meanwhile.
pub struct JobWriter<'a> {
    tree: &'a TreeWriter,
    job_id: String,
    job_path: PathBuf,
    job_dir: Dir,
    items_dir: Dir,
    item_ids: Vec<String>,
}

impl TreeWriter {
    /// A writer into `root`. Refused when `root` is not empty unless
    /// `replace` (stale files there would come back on the next import);
    /// with `replace` a file of the same name is removed before it is
    /// written (the name, never what a link points to). `root` is created
    /// with the first job if it does not exist.
    pub fn new(root: &Path, replace: bool) -> Result<Self> {
        let tree = TreeWriter {
            root_path: root.to_path_buf(),
            root: OnceLock::new(),
            replace,
        };
        // Checked now, before any query, when it exists.
        if let Some(dir) = Dir::open_root(root)? {
            tree.hold_root(dir)?;
        }
        Ok(tree)
    }

    /// The root, created and opened on first use.
    fn root(&self) -> Result<&Dir> {
        match self.root.get() {
            Some(dir) => Ok(dir),
            None => self.hold_root(Dir::create_root(&self.root_path)?),
        }
    }

    /// Keeps `dir` as the root once it is known to be empty (or `replace`).
    fn hold_root(&self, dir: Dir) -> Result<&Dir> {
        if !self.replace && !dir.is_empty()? {
            return Err(Error::invalid_argument(
                "export directory",
                format!(
                    "{} is not empty (stale files would come back on the next import); \
                     pass --force to export into it anyway",
                    self.root_path.display()
                ),
            ));
        }
        Ok(self.root.get_or_init(|| dir))
    }

    /// Creates the directories of `job_id` ([`layout::job_dir`], 0700) and
    /// a writer for its items. Each level is opened from the one above it
    /// without following a link, so a link at any level below the root is
    /// refused.
    pub fn job(&self, job_id: &str, repo: Option<&str>) -> Result<JobWriter<'_>> {
        let job_path = layout::job_dir(&self.root_path, repo, job_id);
        let relative = job_path.strip_prefix(&self.root_path).map_err(|_| {
            Error::invalid_argument(
                "directory",
                format!("{} is outside the tree", job_path.display()),
            )
        })?;
        let mut levels = relative.components();
        let mut job_dir = match levels.next() {
            Some(Component::Normal(first)) => self.root()?.create_dir(first)?,
            _ => return Err(not_a_level(&job_path)),
        };
        for level in levels {
            let Component::Normal(name) = level else {
                return Err(not_a_level(&job_path));
            };
            job_dir = job_dir.create_dir(name)?;
        }
        let items_dir = job_dir.create_dir(OsStr::new(ITEMS_DIR))?;
        Ok(JobWriter {
            tree: self,
            job_id: job_id.to_string(),
            job_path,
            job_dir,
            items_dir,
            item_ids: Vec::new(),
        })
    }

    /// Writes the file `name` in `dir`: new, 0600, never through a link.
    fn write(&self, dir: &Dir, name: &str, contents: &[u8]) -> Result<()> {
        let name = OsStr::new(name);
        if self.replace {
            dir.remove_file(name)?;
        }
        dir.create_file(name)?
            .write_all(contents)
            .map_err(|e| Error::io(dir.path().join(name), e))
    }
}

/// The layout only makes plain names (safe_file_stem); anything else is a
/// bug, refused rather than followed.
fn not_a_level(path: &Path) -> Error {
    Error::invalid_argument(
        "directory",
        format!("{} has a level that is not a plain name", path.display()),
    )
}

impl JobWriter<'_> {
    /// Writes `item` as `items/<safe item id>.json`, pretty-printed as the
    /// old writer did.
    pub fn add(&mut self, item: &DeadLetteredItem) -> Result<()> {
        let stem = safe_file_stem(&item.item_id);
        self.tree.write(
            &self.items_dir,
            &layout::item_file_name(&stem),
            item.to_legacy_json_pretty()?.as_bytes(),
        )?;
        self.item_ids.push(stem);
        Ok(())
    }

    /// Writes index.json listing the items written, and returns the job
    /// directory (the path it was created at).
    pub fn finish(self, updated_at: Timestamp) -> Result<PathBuf> {
        let index = index_json(&self.job_id, &self.item_ids, updated_at);
        self.tree.write(
            &self.job_dir,
            INDEX_FILE,
            serde_json::to_string_pretty(&index)?.as_bytes(),
        )?;
        Ok(self.job_path)
    }
}
