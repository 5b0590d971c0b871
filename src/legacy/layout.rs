//! Where a legacy tree keeps things (docs/legacy-format.md): a job directory
//! is `<base>/mapreduce/dlq/<job_id>/` holding `items/` and `index.json`,
//! under any of the bases the old tool used over time. Both directions live
//! here: recognising a job directory and its repo on the way in, and the
//! paths the tree writer lays out on the way back.

use super::names::safe_file_stem;
use std::path::{Path, PathBuf};

/// The directory of a job directory that holds its item files.
pub const ITEMS_DIR: &str = "items";

/// The file of a job directory that lists its items.
pub const INDEX_FILE: &str = "index.json";

/// The repo segment `dlq export` writes for a job with no repo.
pub const NO_REPO: &str = "imported";

/// The last component of `path` as text, if it is UTF-8.
pub(crate) fn name_of(path: &Path) -> Option<&str> {
    path.file_name().and_then(|n| n.to_str())
}

/// Whether `path` is `<base>/mapreduce/dlq/<job_id>`.
pub fn is_job_dir(path: &Path) -> bool {
    let Some(parent) = path.parent() else {
        return false;
    };
    let Some(grandparent) = parent.parent() else {
        return false;
    };
    name_of(parent) == Some("dlq")
        && name_of(grandparent) == Some("mapreduce")
        && path.file_name().is_some()
}

/// The repo segment of a job directory's path: `<home>/dlq/<repo>/<job>/...`,
/// `<home>/state/<repo>/...`, or `<project>/.prodigy/...`. The segment
/// [`NO_REPO`] means none (it is what an export writes for a job without one).
pub fn repo_of(job_dir: &Path) -> Option<String> {
    repo_segment(job_dir).filter(|repo| repo != NO_REPO)
}

fn repo_segment(job_dir: &Path) -> Option<String> {
    let base = job_dir.parent()?.parent()?.parent()?;
    let base_name = name_of(base)?;
    if base_name == ".prodigy" {
        return base.parent().and_then(name_of).map(str::to_string);
    }
    let parent = base.parent()?;
    if name_of(parent) == Some("state") {
        return Some(base_name.to_string());
    }
    let grandparent = parent.parent()?;
    if name_of(grandparent) == Some("dlq") {
        return name_of(parent).map(str::to_string);
    }
    None
}

/// The job directory the tree writer uses for `job_id` under `root`, in the
/// usual layout of the old tool's home:
/// `root/dlq/<repo or "imported">/<job_id>/mapreduce/dlq/<job_id>`, every
/// id made a safe file name ([`safe_file_stem`]). [`repo_of`] reads the repo
/// back from it.
pub fn job_dir(root: &Path, repo: Option<&str>, job_id: &str) -> PathBuf {
    let job_stem = safe_file_stem(job_id);
    root.join("dlq")
        .join(safe_file_stem(repo.unwrap_or(NO_REPO)))
        .join(&job_stem)
        .join("mapreduce")
        .join("dlq")
        .join(&job_stem)
}

/// The file name of an item file: its safe stem and `.json`.
pub fn item_file_name(stem: &str) -> String {
    format!("{stem}.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_dirs_and_repos() {
        let p = Path::new("/h/.prodigy/dlq/my-repo/job-1/mapreduce/dlq/job-1");
        assert!(is_job_dir(p));
        assert_eq!(repo_of(p).as_deref(), Some("my-repo"));
        let p = Path::new("/h/.prodigy/state/session-abc/mapreduce/dlq/job-1");
        assert_eq!(repo_of(p).as_deref(), Some("session-abc"));
        let p = Path::new("/src/project/.prodigy/mapreduce/dlq/job-1");
        assert_eq!(repo_of(p).as_deref(), Some("project"));
        let p = Path::new("/tmp/prodigy_dlq/mapreduce/dlq/job-1");
        assert_eq!(repo_of(p), None);
        assert!(!is_job_dir(Path::new("/a/dlq/job")));
    }

    #[test]
    fn written_job_dirs_read_back() {
        let root = Path::new("/out");
        let dir = job_dir(root, Some("repo"), "job/1");
        assert_eq!(
            dir,
            Path::new("/out/dlq/repo/job%2F1/mapreduce/dlq/job%2F1")
        );
        assert!(is_job_dir(&dir));
        assert_eq!(repo_of(&dir).as_deref(), Some("repo"));
        assert_eq!(repo_of(&job_dir(root, None, "j")), None);
    }
}
