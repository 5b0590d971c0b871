//! The resume hand-off of shared/seeds/002_*: write the eligible items'
//! item_data as `{"items": [...]}` (a map phase's input, json_path
//! `$.items[*]`), and with `take` remove exactly those items, only after the
//! file is completely written and synced.

use crate::error::{Error, Result};
use crate::store::{Dlq, ListFilter};
use serde::Serialize;
use std::io::Write;
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
/// with a `requeued` event each, once the file is complete and synced.
pub fn requeue(dlq: &Dlq, filter: ListFilter, path: &Path, take: bool) -> Result<RequeueReport> {
    let io = |p: &Path, e: std::io::Error| Error::io(p, e);
    let mut output = crate::outfile::OutputFile::create(path)?;
    let tmp = path.to_path_buf();
    let mut out = std::io::BufWriter::new(output.file());
    let mut taken_ids: Vec<(String, String)> = Vec::new();
    let written = (|| -> Result<usize> {
        out.write_all(b"{\"items\": [").map_err(|e| io(&tmp, e))?;
        let mut count = 0;
        for entry in dlq.items(filter) {
            let entry = entry?;
            out.write_all(if count == 0 { b"\n  " } else { b",\n  " })
                .map_err(|e| io(&tmp, e))?;
            out.write_all(entry.item.item_data.get().as_bytes())
                .map_err(|e| io(&tmp, e))?;
            if take {
                taken_ids.push((entry.job_id, entry.item.item_id));
            }
            count += 1;
        }
        out.write_all(b"\n]}\n").map_err(|e| io(&tmp, e))?;
        out.flush().map_err(|e| io(&tmp, e))?;
        Ok(count)
    })();
    drop(out);
    let count = written?;
    // Synced and renamed (durably) before anything is taken.
    output.commit()?;
    let taken = if take {
        dlq.take_items(&taken_ids, &path.display().to_string())?
    } else {
        0
    };
    Ok(RequeueReport {
        items: count,
        taken,
        path: path.display().to_string(),
    })
}
