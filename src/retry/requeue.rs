//! The resume hand-off (docs/legacy-format.md, "The items file"): write
//! the matching items' item_data as an items file (the format is
//! [`crate::legacy::items_file`]'s), and with `take` remove exactly those
//! items, only after the file is completely written and synced.

use crate::error::{Error, Result};
use crate::legacy::items_file::ItemsFileWriter;
use crate::store::{Dlq, ListFilter};
use serde::Serialize;
use std::path::Path;

/// What a requeue wrote (and took).
#[derive(Clone, Debug, Serialize)]
pub struct RequeueReport {
    pub items: usize,
    pub taken: usize,
    pub path: String,
}

/// Writes the items matching `filter` to `path` (atomically, mode 0600: see
/// [`crate::outfile`]) and, with `take`, removes them in one transaction
/// with a `requeued` event each, once the file is complete and synced. An
/// item that changed after it was written (a failure merged into it) is
/// not taken: it stays, with what the file does not hold, and `taken` is
/// less than `items` by as many.
pub fn requeue(dlq: &Dlq, filter: ListFilter, path: &Path, take: bool) -> Result<RequeueReport> {
    let io = |e: std::io::Error| Error::io(path, e);
    let mut output = crate::outfile::OutputFile::create(path)?;
    let mut out = std::io::BufWriter::new(output.file());
    let mut taken_ids: Vec<(String, String, i64)> = Vec::new();
    let written = (|| -> Result<usize> {
        let mut file = ItemsFileWriter::new(&mut out).map_err(io)?;
        for entry in dlq.items(filter) {
            let entry = entry?;
            file.push(&entry.item.item_data).map_err(io)?;
            if take {
                taken_ids.push((entry.job_id, entry.item.item_id, entry.version));
            }
        }
        file.finish().map_err(io)
    })();
    drop(out);
    let count = written?;
    // Synced and renamed (durably) before anything is taken.
    output.commit()?;
    let taken = if take {
        dlq.take_unchanged(&taken_ids, &path.display().to_string())?
    } else {
        0
    };
    Ok(RequeueReport {
        items: count,
        taken,
        path: path.display().to_string(),
    })
}
