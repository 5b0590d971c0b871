//! A job directory's index.json (docs/legacy-format.md): reading it by the
//! rules of item files, the job id it gives, where it disagrees with the
//! files (it is a hint, never trusted over them), and writing it.

use super::discover::{JobDir, Walker};
use super::layout::INDEX_FILE;
use super::names::safe_file_stem;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashSet};

/// What the reader takes from a job's index.json (`updated_at` and any
/// other key are not read, so they cannot make it unreadable). Its
/// `item_ids` are required but not kept: [`compare`] streams them, so a
/// lying index (millions of ids for a one-item job) costs no memory.
#[derive(Clone, Debug, Deserialize)]
pub struct Index {
    pub item_count: Option<u64>,
    #[serde(rename = "item_ids")]
    _item_ids: serde::de::IgnoredAny,
    pub job_id: Option<String>,
}

/// The most mismatches of one kind a job's report lists one by one; the
/// rest are one record that counts them ([`IndexMismatch::more`]), so the
/// report is bounded by the tree's real content, not by what an index
/// claims.
pub const MAX_LISTED_MISMATCHES: usize = 100;

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
    /// A record standing for this many further mismatches of its kind (no
    /// `item_id`), past the first [`MAX_LISTED_MISMATCHES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more: Option<u64>,
}

impl Index {
    /// Reads the index of `job` by the rules of item files: a regular file
    /// in the tree, at most [`super::MAX_ITEM_BYTES`] (a link to /dev/zero
    /// or a huge sparse file must not be read whole).
    pub fn read(walker: &mut Walker, job: &JobDir) -> Result<Index, IndexProblem> {
        match walker.open_regular(&job.path.join(INDEX_FILE), super::MAX_ITEM_BYTES) {
            Ok(None) => Err(IndexProblem::Missing),
            Err(_) => Err(IndexProblem::Unreadable),
            // Bounded whatever the size said: /proc and device files say 0.
            Ok(Some(file)) => serde_json::from_reader(std::io::BufReader::new(
                std::io::Read::take(file, super::MAX_ITEM_BYTES),
            ))
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
/// item files directly in `items/` (what the old writer listed). `index`
/// is the result of [`Index::read`]; the listed ids are read again from the
/// file one at a time.
pub fn compare(
    job_id: &str,
    index: Result<Index, IndexProblem>,
    walker: &mut Walker,
    job: &JobDir,
    files: &BTreeSet<String>,
) -> Vec<IndexMismatch> {
    let mut out = Mismatches {
        job_id,
        out: Vec::new(),
    };
    let index = match index.and_then(|index| read_listed(walker, job, files).map(|l| (index, l))) {
        Ok(both) => both,
        Err(problem) => {
            out.push(problem.kind(), None);
            return out.out;
        }
    };
    let (index, listed) = index;
    out.many("listed_but_missing", listed.missing, listed.missing_count);
    let unlisted = files
        .iter()
        .filter(|id| !listed.matched.contains(id.as_str()));
    let mut unlisted_count = 0u64;
    let mut unlisted_ids = Vec::new();
    for id in unlisted {
        unlisted_count += 1;
        if unlisted_ids.len() < MAX_LISTED_MISMATCHES {
            unlisted_ids.push(id.clone());
        }
    }
    out.many("present_but_unlisted", unlisted_ids, unlisted_count);
    if let Some(count) = index.item_count {
        if usize::try_from(count).ok() != Some(files.len()) {
            out.push("count_differs", None);
        }
    }
    out.out
}

/// A job's mismatches as they are found.
struct Mismatches<'a> {
    job_id: &'a str,
    out: Vec<IndexMismatch>,
}

impl Mismatches<'_> {
    fn push(&mut self, kind: &str, item_id: Option<String>) {
        self.out.push(IndexMismatch {
            job_id: self.job_id.to_string(),
            kind: kind.to_string(),
            item_id,
            more: None,
        });
    }

    /// `ids` (at most [`MAX_LISTED_MISMATCHES`]) one by one, then one
    /// record for the rest of `total`.
    fn many(&mut self, kind: &str, ids: Vec<String>, total: u64) {
        let listed = ids.len() as u64;
        for id in ids {
            self.push(kind, Some(id));
        }
        if total > listed {
            self.out.push(IndexMismatch {
                job_id: self.job_id.to_string(),
                kind: kind.to_string(),
                item_id: None,
                more: Some(total - listed),
            });
        }
    }
}

/// What an index's `item_ids` say about `files`.
struct Listed<'f> {
    /// The files it lists.
    matched: HashSet<&'f str>,
    /// The first [`MAX_LISTED_MISMATCHES`] distinct ids it lists that no
    /// file has, and how many entries name no file (repeats included: an
    /// index can repeat an id endlessly, and counting them apart would take
    /// memory the tree does not justify).
    missing: Vec<String>,
    missing_count: u64,
}

/// Streams the `item_ids` of `job`'s index.json, one id in memory at a time.
fn read_listed<'f>(
    walker: &mut Walker,
    job: &JobDir,
    files: &'f BTreeSet<String>,
) -> Result<Listed<'f>, IndexProblem> {
    let file = match walker.open_regular(&job.path.join(INDEX_FILE), super::MAX_ITEM_BYTES) {
        Ok(Some(file)) => file,
        Ok(None) => return Err(IndexProblem::Missing),
        Err(_) => return Err(IndexProblem::Unreadable),
    };
    let mut listed = Listed {
        matched: HashSet::new(),
        missing: Vec::new(),
        missing_count: 0,
    };
    let mut reader = serde_json::Deserializer::from_reader(std::io::BufReader::new(
        std::io::Read::take(file, super::MAX_ITEM_BYTES),
    ));
    serde::de::DeserializeSeed::deserialize(IndexSeed(&mut listed, files), &mut reader)
        .map_err(|_| IndexProblem::Unreadable)?;
    Ok(listed)
}

/// The index object, with only `item_ids` looked at.
struct IndexSeed<'l, 'f>(&'l mut Listed<'f>, &'f BTreeSet<String>);

impl<'de> serde::de::DeserializeSeed<'de> for IndexSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for IndexSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an index object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let IndexSeed(listed, files) = self;
        while let Some(key) = map.next_key::<String>()? {
            if key == "item_ids" {
                map.next_value_seed(IdsSeed(&mut *listed, files))?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The `item_ids` array, one id at a time.
struct IdsSeed<'l, 'f>(&'l mut Listed<'f>, &'f BTreeSet<String>);

impl<'de> serde::de::DeserializeSeed<'de> for IdsSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for IdsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of item ids")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let IdsSeed(listed, files) = self;
        while let Some(id) = seq.next_element::<String>()? {
            match files.get(&id) {
                Some(file) => {
                    listed.matched.insert(file.as_str());
                }
                None => {
                    listed.missing_count += 1;
                    if listed.missing.len() < MAX_LISTED_MISMATCHES && !listed.missing.contains(&id)
                    {
                        listed.missing.push(id);
                    }
                }
            }
        }
        Ok(())
    }
}
