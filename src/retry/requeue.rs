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
///
/// When the take fails (the database busy past its timeout, ...) the file
/// is written and every item is still in the DLQ: [`write()`] and
/// [`Written::take`] are the two steps, for a caller that must say so.
pub fn requeue(dlq: &Dlq, filter: ListFilter, path: &Path, take: bool) -> Result<RequeueReport> {
    let written = write(dlq, filter, path)?;
    let taken = if take { written.take(dlq)? } else { 0 };
    Ok(RequeueReport {
        items: written.items(),
        taken,
        path: path.display().to_string(),
    })
}

/// An items file written, and what taking its items means.
pub struct Written {
    path: String,
    /// Each item in the file, as read when it was written.
    items: Vec<crate::store::ReadItem>,
}

impl Written {
    /// How many items the file holds.
    pub fn items(&self) -> usize {
        self.items.len()
    }

    /// Removes the written items that are unchanged since they were
    /// written, in one transaction; returns how many.
    pub fn take(&self, dlq: &Dlq) -> Result<usize> {
        dlq.take_unchanged(&self.items, &self.path)
    }
}

/// The first step of [`requeue`]: the file, complete, synced and in
/// place, and nothing taken.
pub fn write(dlq: &Dlq, filter: ListFilter, path: &Path) -> Result<Written> {
    let io = |e: std::io::Error| Error::io(path, e);
    let mut output = crate::outfile::OutputFile::create(path)?;
    let mut out = std::io::BufWriter::new(output.file());
    let mut items: Vec<crate::store::ReadItem> = Vec::new();
    let written = (|| -> Result<()> {
        let mut file = ItemsFileWriter::new(&mut out).map_err(io)?;
        for entry in dlq.items(filter) {
            let entry = entry?;
            file.push(&entry.item.item_data).map_err(io)?;
            items.push(crate::store::ReadItem::of(&entry));
        }
        file.finish().map_err(io).map(drop)
    })();
    drop(out);
    written?;
    // Synced and renamed (durably) before anything is taken.
    output.commit()?;
    Ok(Written {
        path: path.display().to_string(),
        items,
    })
}
