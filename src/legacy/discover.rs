//! Walking a legacy tree: finding its job directories (what
//! [`super::layout`] recognises) at any depth and the item files under
//! them. Never writes anything. Symlinks are followed only when they point
//! inside the tree being walked (or anywhere, for a program adopting its
//! own queue: [`Walker::following_links`]), and every directory is entered
//! at most once, so cycles terminate.

use super::layout::{is_job_dir, name_of, repo_of};
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// A job directory found in a legacy tree.
#[derive(Clone, Debug)]
pub struct JobDir {
    pub path: PathBuf,
    /// The directory's name (the job id as the legacy writer used it).
    pub dir_name: String,
    /// The repo segment the path shows, if any.
    pub repo: Option<String>,
}

/// Something the walk passed over, with why.
#[derive(Clone, Debug)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

/// Walks one root. Directories already entered (by device and inode) are
/// not entered again.
pub struct Walker {
    root: PathBuf,
    visited: HashSet<(u64, u64)>,
    /// Files never to open: the database being written and its -wal and
    /// -shm ([`Walker::avoiding`]).
    avoid: Vec<(u64, u64)>,
    /// Follows symlinks wherever they point ([`Walker::following_links`]).
    follow_links: bool,
    pub skipped: Vec<Skipped>,
}

#[cfg(unix)]
fn dir_identity(meta: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn dir_identity(_meta: &fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// What an entry of a directory turned out to be.
enum Entry {
    Dir(PathBuf),
    File(PathBuf),
    Other,
}

impl Walker {
    /// A walker for the tree under `root` (which must exist).
    pub fn new(root: &Path) -> std::io::Result<Self> {
        let root = fs::canonicalize(root)?;
        Ok(Walker {
            root,
            visited: HashSet::new(),
            avoid: Vec::new(),
            follow_links: false,
            skipped: Vec::new(),
        })
    }

    /// A walker that follows every symlink, wherever it points, from `root`
    /// as spelled (made absolute), so that a linked `mapreduce/dlq` or job
    /// directory is still known by its name. For a program adopting its own
    /// queue, which it reads through those links itself; `dlq import` of a
    /// tree someone handed over uses [`Walker::new`].
    pub fn following_links(root: &Path) -> std::io::Result<Self> {
        fs::metadata(root)?;
        Ok(Walker {
            root: std::path::absolute(root)?,
            follow_links: true,
            ..Walker::new(root)?
        })
    }

    /// Never opens these files (by device and inode): opening and closing
    /// a database this process has a connection to would drop the
    /// process's POSIX locks on it (the database file, or its -wal or
    /// -shm, lying in the tree under an item's name or linked there).
    pub fn avoiding(mut self, files: Vec<(u64, u64)>) -> Self {
        self.avoid = files;
        self
    }

    /// The files this walker avoids.
    pub fn avoided_files(&self) -> &[(u64, u64)] {
        &self.avoid
    }

    /// Why `path` must not be opened, if it is one of the files avoided.
    pub fn avoided(&self, path: &Path) -> Option<&'static str> {
        avoided(&self.avoid, path)
    }

    /// The root (canonical, unless the walker follows links).
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn skip(&mut self, path: &Path, reason: impl Into<String>) {
        self.skipped.push(Skipped {
            path: path.to_path_buf(),
            reason: reason.into(),
        });
    }

    /// Classifies a path, following a symlink only into the tree. A regular
    /// file type known from the directory listing costs no system call.
    fn classify_entry(&mut self, path: &Path, known: Option<fs::FileType>) -> Entry {
        if known.is_some_and(|t| t.is_file()) {
            return Entry::File(path.to_path_buf());
        }
        self.classify(path)
    }

    /// Opens `path` when it is a regular file (a symlink only if it stays in
    /// the tree) no larger than `max_bytes`: a job's index.json, read by the
    /// same rules as item files. `Ok(None)` when there is nothing there;
    /// `Err` says why it was passed over (also in `skipped`).
    pub fn open_regular(
        &mut self,
        path: &Path,
        max_bytes: u64,
    ) -> Result<Option<fs::File>, String> {
        if matches!(fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        {
            return Ok(None);
        }
        match self.classify(path) {
            Entry::File(file) => {
                if let Some(reason) = self.avoided(&file) {
                    self.skip(path, reason.to_string());
                    return Err(reason.to_string());
                }
                let opened = super::read::open_without_waiting(&file).map_err(|e| e.to_string());
                let opened = opened.and_then(|f| {
                    // A regular file: `open_without_waiting` refused any other.
                    let meta = f.metadata().map_err(|e| e.to_string())?;
                    if meta.len() > max_bytes {
                        Err(format!(
                            "too large ({} bytes; at most {max_bytes})",
                            meta.len()
                        ))
                    } else {
                        Ok(f)
                    }
                });
                opened
                    .map(Some)
                    .inspect_err(|reason| self.skip(path, reason.clone()))
            }
            _ => Err("not a regular file in the tree".to_string()),
        }
    }

    /// Classifies a path, following a symlink only into the tree.
    fn classify(&mut self, path: &Path) -> Entry {
        let meta = match fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) => {
                self.skip(path, e.to_string());
                return Entry::Other;
            }
        };
        let meta = if meta.file_type().is_symlink() {
            match fs::canonicalize(path) {
                Ok(target) if self.follow_links || target.starts_with(&self.root) => {
                    match fs::metadata(&target) {
                        Ok(meta) => meta,
                        Err(e) => {
                            self.skip(path, e.to_string());
                            return Entry::Other;
                        }
                    }
                }
                Ok(_) => {
                    self.skip(path, "symlink out of the tree, not followed");
                    return Entry::Other;
                }
                Err(_) => {
                    self.skip(path, "dangling symlink");
                    return Entry::Other;
                }
            }
        } else {
            meta
        };
        if meta.is_dir() {
            if self.visited.insert(dir_identity(&meta)) {
                Entry::Dir(path.to_path_buf())
            } else {
                // Entered before (a symlink loop or a second link to it).
                Entry::Other
            }
        } else if meta.is_file() {
            Entry::File(path.to_path_buf())
        } else {
            // A fifo would hang the read, a device never end; neither is a
            // legacy file, and a person should hear it was passed over.
            if path.extension().is_some_and(|ext| ext == "json") {
                self.skip(path, "not a regular file (a fifo, socket or device)");
            }
            Entry::Other
        }
    }

    /// The entries of a directory, sorted by name so walks are repeatable.
    fn entries(&mut self, dir: &Path) -> Vec<(PathBuf, Option<fs::FileType>)> {
        match fs::read_dir(dir) {
            Ok(read) => {
                let mut paths: Vec<_> = read
                    .filter_map(|e| e.ok().map(|e| (e.path(), e.file_type().ok())))
                    .collect();
                // File names, not whole paths: they share the directory.
                paths.sort_by(|a, b| a.0.file_name().cmp(&b.0.file_name()));
                paths
            }
            Err(e) => {
                self.skip(dir, format!("cannot read directory: {e}"));
                Vec::new()
            }
        }
    }

    /// Calls `found` for every job directory under the root, in path order.
    /// The subtree of a job directory is left to the caller.
    pub fn for_each_job_dir(&mut self, mut found: impl FnMut(&mut Walker, JobDir) -> bool) {
        let root = self.root.clone();
        let mut stack = match self.classify(&root) {
            Entry::Dir(dir) => vec![dir],
            _ => Vec::new(),
        };
        while let Some(dir) = stack.pop() {
            if is_job_dir(&dir) {
                let job = JobDir {
                    dir_name: name_of(&dir).map(str::to_string).unwrap_or_else(|| {
                        dir.file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default()
                    }),
                    repo: repo_of(&dir),
                    path: dir,
                };
                if !found(self, job) {
                    return;
                }
                continue;
            }
            let mut subdirs = Vec::new();
            for (entry, known) in self.entries(&dir) {
                if let Entry::Dir(sub) = self.classify_entry(&entry, known) {
                    subdirs.push(sub);
                }
            }
            // Reverse so the stack pops them in name order.
            stack.extend(subdirs.into_iter().rev());
        }
    }

    /// The item files (`*.json`, at any depth) under `items_dir`, in path
    /// order, and the stems of those directly inside it (what index.json
    /// lists). Streams: `found` gets each file as it is reached.
    pub fn for_each_item_file(&mut self, items_dir: &Path, mut found: impl FnMut(&Path) -> bool) {
        let mut stack = match self.classify(items_dir) {
            Entry::Dir(dir) => vec![dir],
            _ => return,
        };
        while let Some(dir) = stack.pop() {
            let mut subdirs = Vec::new();
            for (entry, known) in self.entries(&dir) {
                match self.classify_entry(&entry, known) {
                    Entry::Dir(sub) => subdirs.push(sub),
                    Entry::File(file) => {
                        if is_item_file(&file) && !found(&file) {
                            return;
                        }
                    }
                    Entry::Other => {}
                }
            }
            stack.extend(subdirs.into_iter().rev());
        }
    }
}

/// Whether `file` is named like an item file: `<item_id>.json`, including
/// `.json` (what the legacy writer made of an empty item id, which the
/// import then refuses by name instead of passing over in silence).
fn is_item_file(file: &Path) -> bool {
    file.extension().is_some_and(|ext| ext == "json")
        || file.file_name().is_some_and(|name| name == ".json")
}

/// Why `path` must not be opened, if it is one of the files `avoid` names
/// (asked by stat, without opening it).
pub fn avoided(avoid: &[(u64, u64)], path: &Path) -> Option<&'static str> {
    if avoid.is_empty() {
        return None;
    }
    crate::db::file_id(path)
        .filter(|id| avoid.contains(id))
        .map(|_| "is the database being written (or its -wal or -shm); not read")
}
