//! Writing the database back out: the legacy per-item layout (the rollback
//! path for older tooling), and JSON / JSON lines of legacy-shape items.
//! Items are streamed a page at a time.

use crate::error::{Error, Result};
use crate::legacy::codec::ItemWithJob;
use crate::model::DeadLetteredItem;
use crate::store::{Dlq, ListFilter};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Longest file stem written; longer ids are cut and end in a hash.
const MAX_STEM_BYTES: usize = 200;

/// A file or directory name for an id that can never escape its directory:
/// `/`, `\`, NUL, control characters, `%` and `~` are %-escaped, a leading
/// `.` too (so no `.`/`..`/hidden names), the empty id is `%`, and a name
/// too long for a file system is cut and ends in `~` and a hash of the id.
/// Distinct ids give distinct names. Ids that need none of this are kept
/// as they are, as the legacy writer did.
pub fn safe_file_stem(id: &str) -> String {
    if id.is_empty() {
        return "%".to_string();
    }
    let mut stem = String::with_capacity(id.len());
    for (index, ch) in id.chars().enumerate() {
        let escape = matches!(ch, '/' | '\\' | '%' | '~' | '\0')
            || ch.is_control()
            || (index == 0 && ch == '.');
        if escape {
            let mut buffer = [0u8; 4];
            for byte in ch.encode_utf8(&mut buffer).bytes() {
                stem.push_str(&format!("%{byte:02X}"));
            }
        } else {
            stem.push(ch);
        }
    }
    if stem.len() <= MAX_STEM_BYTES {
        return stem;
    }
    let mut cut = MAX_STEM_BYTES - 17;
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    // Do not end inside a %XX escape.
    if let Some(percent) = stem[..cut].rfind('%') {
        if cut - percent < 3 {
            cut = percent;
        }
    }
    let digest = Sha256::digest(id.as_bytes());
    let hash: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{}~{hash}", &stem[..cut])
}

/// What a legacy export wrote.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExportReport {
    pub jobs: usize,
    pub items: usize,
    /// Where each job went.
    pub job_dirs: Vec<String>,
}

/// Writes jobs in the legacy layout under `dir`:
/// `dir/dlq/<repo or "imported">/<job_id>/mapreduce/dlq/<job_id>/items/<item>.json`
/// plus `index.json`, every file in the exact legacy JSON shape.
///
/// Refused into a directory that is not empty unless `force` (stale files
/// there would come back on the next import). Nothing is written through a
/// link inside `dir`, and every file is new, mode 0600 (see
/// [`crate::outfile`]); with `force` a file of the same name is removed
/// first (the name, never what a link points to).
pub fn export_legacy(
    dlq: &Dlq,
    dir: &Path,
    job_id: Option<&str>,
    force: bool,
) -> Result<ExportReport> {
    if !force {
        if let Ok(mut entries) = std::fs::read_dir(dir) {
            if entries.next().is_some() {
                return Err(Error::invalid_argument(
                    "export directory",
                    format!(
                        "{} is not empty (stale files would come back on the next import); \
                         pass --force to export into it anyway",
                        dir.display()
                    ),
                ));
            }
        }
    }
    let write = |path: &Path, contents: &[u8]| -> Result<()> {
        if force {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(path, e))
                }
                _ => {}
            }
        }
        crate::outfile::write_new_file(path, contents)
    };
    let jobs = dlq.jobs()?;
    let jobs: Vec<_> = match job_id {
        Some(job) => {
            let found: Vec<_> = jobs.into_iter().filter(|j| j.job_id == job).collect();
            if found.is_empty() {
                return Err(Error::JobNotFound(job.to_string()));
            }
            found
        }
        None => jobs,
    };
    let mut report = ExportReport::default();
    for job in jobs {
        let job_stem = safe_file_stem(&job.job_id);
        let repo_stem = safe_file_stem(
            job.repo
                .as_deref()
                .unwrap_or(crate::import::discover::NO_REPO),
        );
        let job_dir: PathBuf = dir
            .join("dlq")
            .join(&repo_stem)
            .join(&job_stem)
            .join("mapreduce")
            .join("dlq")
            .join(&job_stem);
        let items_dir = job_dir.join("items");
        crate::outfile::create_private_dir_all(dir, &items_dir)?;
        let mut item_ids = Vec::new();
        let filter = ListFilter {
            job_id: Some(job.job_id.clone()),
            ..ListFilter::default()
        };
        for item in dlq.items(filter) {
            let item = item?.item;
            let stem = safe_file_stem(&item.item_id);
            let path = items_dir.join(format!("{stem}.json"));
            let text = item.to_legacy_json_pretty()?;
            write(&path, text.as_bytes())?;
            item_ids.push(stem);
            report.items += 1;
        }
        let index = serde_json::json!({
            "item_count": item_ids.len(),
            "item_ids": item_ids,
            "job_id": job.job_id,
            "updated_at": dlq.now(),
        });
        let index_path = job_dir.join("index.json");
        write(
            &index_path,
            serde_json::to_string_pretty(&index)?.as_bytes(),
        )?;
        report.jobs += 1;
        report.job_dirs.push(job_dir.display().to_string());
    }
    Ok(report)
}

/// The formats [`write_items`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemFormat {
    /// One JSON array of legacy-shape items (each with its `job_id`).
    Json,
    /// One legacy-shape item (with its `job_id`) per line.
    Jsonl,
    /// One row per item under [`CSV_HEADER`], a cell a spreadsheet would
    /// run as a formula neutralised (see [`crate::text::for_csv`]).
    Csv,
    /// The same with every cell as it is.
    CsvRaw,
}

/// The CSV columns: the item's own fields (item_data as JSON text), its
/// worktree, and its last attempt flattened into `last_*` columns.
pub const CSV_HEADER: [&str; 19] = [
    "job_id",
    "item_id",
    "item_data",
    "first_attempt",
    "last_attempt",
    "failure_count",
    "error_signature",
    "reprocess_eligible",
    "manual_review_required",
    "worktree_path",
    "branch_name",
    "last_attempt_number",
    "last_error_type",
    "last_exit_code",
    "last_error_message",
    "last_agent_id",
    "last_step_failed",
    "last_duration_ms",
    "last_json_log_location",
];

fn csv_record(job_id: &str, item: &DeadLetteredItem) -> Vec<String> {
    let last = item.last_failure();
    let opt = |value: Option<String>| value.unwrap_or_default();
    vec![
        job_id.to_string(),
        item.item_id.clone(),
        item.item_data.get().to_string(),
        item.first_attempt.to_legacy(),
        item.last_attempt.to_legacy(),
        item.failure_count.to_string(),
        item.error_signature.clone(),
        item.reprocess_eligible.to_string(),
        item.manual_review_required.to_string(),
        opt(item
            .worktree_artifacts
            .as_ref()
            .map(|w| w.worktree_path.clone())),
        opt(item
            .worktree_artifacts
            .as_ref()
            .map(|w| w.branch_name.clone())),
        opt(last.map(|f| f.attempt_number.to_string())),
        opt(last.map(|f| f.error_type.name.clone())),
        opt(last
            .and_then(|f| f.error_type.exit_code)
            .map(|c| c.to_string())),
        opt(last.map(|f| f.error_message.clone())),
        opt(last.map(|f| f.agent_id.clone())),
        opt(last.map(|f| f.step_failed.clone())),
        opt(last.map(|f| f.duration_ms.to_string())),
        opt(last.and_then(|f| f.json_log_location.clone())),
    ]
}

/// Writes the matching items to `out`, streamed; returns how many.
pub fn write_items(
    dlq: &Dlq,
    filter: ListFilter,
    out: &mut impl Write,
    format: ItemFormat,
) -> Result<usize> {
    let io = |e: std::io::Error| Error::io("output", e);
    let mut count = 0;
    match format {
        ItemFormat::Csv | ItemFormat::CsvRaw => {
            let raw = format == ItemFormat::CsvRaw;
            let mut writer = csv::Writer::from_writer(&mut *out);
            let csv_error =
                |e: csv::Error| Error::io("output", std::io::Error::other(e.to_string()));
            writer.write_record(CSV_HEADER).map_err(csv_error)?;
            for entry in dlq.items(filter) {
                let entry = entry?;
                let record = csv_record(&entry.job_id, &entry.item);
                if raw {
                    writer.write_record(&record)
                } else {
                    writer.write_record(record.iter().map(|c| crate::text::for_csv(c).into_owned()))
                }
                .map_err(csv_error)?;
                count += 1;
            }
            writer.flush().map_err(io)?;
        }
        ItemFormat::Json | ItemFormat::Jsonl => {
            let lines = format == ItemFormat::Jsonl;
            if !lines {
                out.write_all(b"[").map_err(io)?;
            }
            for entry in dlq.items(filter) {
                let entry = entry?;
                let with_job = ItemWithJob {
                    job_id: &entry.job_id,
                    item: &entry.item,
                };
                if !lines {
                    out.write_all(if count == 0 { b"\n" } else { b",\n" })
                        .map_err(io)?;
                }
                serde_json::to_writer(&mut *out, &with_job)?;
                if lines {
                    out.write_all(b"\n").map_err(io)?;
                }
                count += 1;
            }
            if !lines {
                out.write_all(b"\n]\n").map_err(io)?;
            }
        }
    }
    out.flush().map_err(io)?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_names() {
        assert_eq!(safe_file_stem("item_7"), "item_7");
        assert_eq!(safe_file_stem("a b ünï"), "a b ünï");
        assert_eq!(safe_file_stem("a/b"), "a%2Fb");
        assert_eq!(safe_file_stem(".."), "%2E.");
        assert_eq!(safe_file_stem("/etc/passwd"), "%2Fetc%2Fpasswd");
        assert_eq!(safe_file_stem("nul\0x"), "nul%00x");
        assert_eq!(safe_file_stem(""), "%");
        assert_ne!(safe_file_stem("a%2Fb"), safe_file_stem("a/b"));
        let long = "x".repeat(1000);
        let stem = safe_file_stem(&long);
        assert!(stem.len() <= MAX_STEM_BYTES);
        assert_ne!(stem, safe_file_stem(&"x".repeat(1001)));
        let long_escapes = "/".repeat(300);
        assert!(safe_file_stem(&long_escapes).len() <= MAX_STEM_BYTES);
        assert!(!safe_file_stem(&"é".repeat(300)).contains('/'));
    }
}
