//! Copying every item of one database into another (`dlq copy`), either
//! way between SQLite and PostgreSQL. A copy is a load ([`Dlq::load`]):
//! each item goes through the merge rule, so copying again changes
//! nothing, and copying into a database that has some of the items
//! merges their histories. Nothing is evicted: a job that ends over its
//! capacity gets the capacity raised to fit (reported). A job new to the
//! destination takes the source's repo and the capacity it had there: its
//! override, or when it followed the source's default and the two
//! databases' defaults differ, the source's default as its own override
//! (so it keeps as many items as it did, not the destination's default).
//! The
//! destination's audit log gets one `imported` event per item the copy
//! changed (outcome new or merged, and the source) and one summary per
//! job; the source is only read. Into a database without families, the
//! source's families come along with their ids and every item keeps its
//! family.

use crate::error::Result;
use crate::store::{AddOutcome, CapacityRaised, Dlq, JobOptions, ListFilter, LoadOptions};
use serde::Serialize;
use std::collections::BTreeMap;

/// What a copy did.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct CopyReport {
    /// Items read from the source.
    pub items_read: u64,
    /// Items the destination did not have.
    pub items_new: u64,
    /// Items the destination had, changed by the merge.
    pub items_merged: u64,
    /// Items the destination had already, unchanged.
    pub items_unchanged: u64,
    /// Attempts the destination did not have.
    pub new_attempts: u64,
    /// Jobs the source holds.
    pub jobs: u64,
    /// Jobs whose capacity was raised to keep every item.
    pub capacity_raised: Vec<CapacityRaised>,
}

/// Copies every item of `from` into `to`. `source` names the source in the
/// destination's events (a path, or a URL without its password);
/// `progress` is called with the items read so far.
pub fn copy(
    from: &Dlq,
    to: &Dlq,
    source: &str,
    mut progress: impl FnMut(u64),
) -> Result<CopyReport> {
    let mut report = CopyReport::default();
    // Jobs first, with their repo and capacity override, so the items find
    // their job as the source has it (a job without items too).
    let jobs = from.jobs()?;
    report.jobs = jobs.len() as u64;
    let source_default = from.capacity(None)?.default_max_items;
    let follows_default = if source_default == to.capacity(None)?.default_max_items {
        None
    } else {
        Some(source_default)
    };
    let mut repos = BTreeMap::new();
    for job in &jobs {
        if !to.job_exists(&job.job_id)? {
            to.ensure_job(
                &job.job_id,
                &JobOptions {
                    max_items: job.max_items.or(follows_default),
                },
            )?;
        }
        repos.insert(job.job_id.clone(), job.repo.clone());
    }
    // Into a database with no families yet, the source's families come
    // along with their ids, and each item keeps its family; into one that
    // has families, items are mined into the destination's.
    let families_kept = to.adopt_families(&from.family_rows()?)?;
    if families_kept {
        // Mined with the source's rules, whichever they were.
        to.record_families_rules(from.families_rules()?)?;
    }
    let source_json = serde_json::to_string(source)?;
    let mut tallies: BTreeMap<String, [u64; 3]> = BTreeMap::new();
    let mut failed = None;
    let items = from
        .items(ListFilter::default())
        .map_while(|item| match item {
            Ok(item) => Some(item),
            Err(e) => {
                failed = Some(e);
                None
            }
        });
    let raised = to.load(items, &LoadOptions::default(), |tx, job_item| {
        let repo = repos.get(&job_item.job_id).cloned().flatten();
        tx.job(&job_item.job_id, repo.as_deref())?;
        let mut outcome = tx.item(&job_item.job_id, repo.as_deref(), &job_item.item)?;
        if let (true, Some(family)) = (families_kept, job_item.family_id) {
            tx.family(&job_item.job_id, &job_item.item.item_id, family)?;
        }
        // The flags a person marked there stay marked here (else a later
        // merge would undo that decision).
        if tx.marks(&job_item.job_id, &job_item.item, job_item.marked)?
            && outcome.outcome == AddOutcome::Unchanged
        {
            outcome.outcome = AddOutcome::Merged;
        }
        report.items_read += 1;
        report.new_attempts += outcome.new_attempts as u64;
        let tally = tallies.entry(job_item.job_id.clone()).or_default();
        let name = match outcome.outcome {
            AddOutcome::Inserted => {
                report.items_new += 1;
                tally[0] += 1;
                Some("new")
            }
            AddOutcome::Merged => {
                report.items_merged += 1;
                tally[1] += 1;
                Some("merged")
            }
            AddOutcome::Unchanged => {
                report.items_unchanged += 1;
                tally[2] += 1;
                None
            }
        };
        if let Some(name) = name {
            let detail = format!(
                r#"{{"outcome":"{name}","source":{source_json},"new_attempts":{},"copy":true}}"#,
                outcome.new_attempts
            );
            tx.imported(&job_item.job_id, &job_item.item.item_id, &detail)?;
        }
        progress(report.items_read);
        Ok(true)
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    let events = tallies
        .into_iter()
        .map(|(job, [new, merged, unchanged])| {
            let detail = serde_json::json!({
                "source": source,
                "copy": true,
                "items_new": new,
                "items_merged": merged,
                "items_unchanged": unchanged,
            });
            (job, detail)
        })
        .collect();
    to.finish_load(events)?;
    report.capacity_raised = raised.into_raised();
    Ok(report)
}
