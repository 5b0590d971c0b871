//! A job directory's index.json (docs/legacy-format.md): reading it by the
//! rules of item files, the job id it gives, where it disagrees with the
//! files (it is a hint, never trusted over them), and writing it.

use super::discover::{JobDir, Walker};
use super::layout::INDEX_FILE;
use super::names::safe_file_stem;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What the reader takes from a job's index.json (`updated_at` and any
/// other key are not read, so they cannot make it unreadable).
#[derive(Clone, Debug, Deserialize)]
pub struct Index {
    pub item_count: Option<u64>,
    /// The stems of the item files directly in `items/`.
    pub item_ids: Vec<String>,
    pub job_id: Option<String>,
}

/// Why a job directory has no index to compare with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexProblem {
    /// There is no index.json.
    Missing,
    /// It is not a regular file in the tree, too large, or not an index.
    Unreadable,
}

impl IndexProblem {
    /// Its [`IndexMismatch::kind`].
    pub fn kind(self) -> &'static str {
        match self {
            IndexProblem::Missing => "index_missing",
            IndexProblem::Unreadable => "index_unreadable",
        }
    }
}

/// One disagreement between a job's index.json and its files.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct IndexMismatch {
    pub job_id: String,
    /// `listed_but_missing`, `present_but_unlisted`, `count_differs`,
    /// `index_missing` or `index_unreadable`.
    pub kind: String,
    pub item_id: Option<String>,
}

impl Index {
    /// Reads the index of `job` by the rules of item files: a regular file
    /// in the tree, at most [`super::MAX_ITEM_BYTES`] (a link to /dev/zero
    /// or a huge sparse file must not be read whole).
    pub fn read(walker: &mut Walker, job: &JobDir) -> Result<Index, IndexProblem> {
        match walker.open_regular(&job.path.join(INDEX_FILE), super::MAX_ITEM_BYTES) {
            Ok(None) => Err(IndexProblem::Missing),
            Err(_) => Err(IndexProblem::Unreadable),
            Ok(Some(file)) => serde_json::from_reader(std::io::BufReader::new(file))
                .map_err(|_| IndexProblem::Unreadable),
        }
    }
}

/// The index.json the old writer kept, for `item_ids` (the stems of the
/// files written) of `job_id`: its four keys, in its (sorted) order.
pub fn index_json(job_id: &str, item_ids: &[String], updated_at: Timestamp) -> serde_json::Value {
    serde_json::json!({
        "item_count": item_ids.len(),
        "item_ids": item_ids,
        "job_id": job_id,
        "updated_at": updated_at,
    })
}

/// The job id of a job directory: its name, except where the directory is
/// an escaped name that `dlq export` wrote for an id a file system cannot
/// hold, in which case index.json has the exact id.
pub fn job_id_of(job: &JobDir, index: Option<&Index>) -> String {
    if let Some(id) = index.and_then(|i| i.job_id.as_deref()) {
        if id != job.dir_name && safe_file_stem(id) == job.dir_name {
            return id.to_string();
        }
    }
    job.dir_name.clone()
}

/// Where the index of `job_id` disagrees with `files`, the stems of the
/// item files directly in `items/` (what the old writer listed).
pub fn compare(
    job_id: &str,
    index: Result<Index, IndexProblem>,
    files: &BTreeSet<String>,
) -> Vec<IndexMismatch> {
    let mismatch = |kind: &str, item_id: Option<&str>| IndexMismatch {
        job_id: job_id.to_string(),
        kind: kind.to_string(),
        item_id: item_id.map(str::to_string),
    };
    let index = match index {
        Ok(index) => index,
        Err(problem) => return vec![mismatch(problem.kind(), None)],
    };
    let listed: BTreeSet<&str> = index.item_ids.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    for id in &listed {
        if !files.contains(*id) {
            out.push(mismatch("listed_but_missing", Some(id)));
        }
    }
    for id in files {
        if !listed.contains(id.as_str()) {
            out.push(mismatch("present_but_unlisted", Some(id)));
        }
    }
    if let Some(count) = index.item_count {
        if usize::try_from(count).ok() != Some(files.len()) {
            out.push(mismatch("count_differs", None));
        }
    }
    out
}
