//! Deleting many items at once (purge, clear): set-based statements instead
//! of row-by-row triggers and cascades, with one audit event per item. Runs
//! inside the caller's write transaction.

use super::write::WriteTx;
use crate::error::Result;
use rusqlite::params_from_iter;
use rusqlite::types::Value;

/// Deletes the items of `items AS i` matching `condition` (fixed SQL with
/// `?` placeholders for `values`), writing a `kind` event for each with its
/// signature and last_attempt (and `extra` in the detail). Returns how many.
pub fn delete_items(
    tx: &mut WriteTx<'_>,
    condition: &str,
    values: &[Value],
    kind: &str,
    extra: serde_json::Value,
) -> Result<usize> {
    let conn = tx.conn();
    // Deleting touches pages all over every index of items: a big page cache
    // for the duration turns most of the I/O into memory work (measured 3x on
    // a purge of 500,000 of 1,000,000 items).
    let cache: i64 = conn.query_row("PRAGMA cache_size", [], |row| row.get(0))?;
    conn.pragma_update(None, "cache_size", -262_144)?;
    let result = delete_with_big_cache(tx, condition, values, kind, extra);
    tx.conn().pragma_update(None, "cache_size", cache)?;
    result
}

fn delete_with_big_cache(
    tx: &mut WriteTx<'_>,
    condition: &str,
    values: &[Value],
    kind: &str,
    extra: serde_json::Value,
) -> Result<usize> {
    let conn = tx.conn();
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS doomed_items (id INTEGER PRIMARY KEY);
         DELETE FROM temp.doomed_items;",
    )?;
    // `condition` is SQL built from fixed fragments; the values are bound.
    let select = format!(
        "INSERT INTO temp.doomed_items (id) SELECT i.id FROM items i WHERE 1 = 1{condition}"
    );
    let doomed = conn.execute(&select, params_from_iter(values.iter()))?;
    if doomed == 0 {
        return Ok(0);
    }
    conn.execute(
        "INSERT INTO events (time, kind, job_id, item_id, detail)
         SELECT ?1, ?2, i.job_id, i.item_id,
             json_patch(json_object('error_signature', i.error_signature, 'last_attempt', i.last_attempt), ?3)
         FROM temp.doomed_items d JOIN items i ON i.id = d.id",
        rusqlite::params![tx.now(), kind, extra.to_string()],
    )?;
    conn.execute_batch(
        "INSERT INTO settings (key, value) VALUES ('bulk_delete_in_progress', '1');
         UPDATE jobs SET
             item_count = item_count - x.n,
             eligible_count = eligible_count - x.eligible,
             manual_review_count = manual_review_count - x.manual,
             failure_count_sum = failure_count_sum - x.failures
         FROM (SELECT i.job_id, COUNT(*) AS n, SUM(i.reprocess_eligible) AS eligible,
                      SUM(i.manual_review_required) AS manual, SUM(i.failure_count) AS failures
               FROM temp.doomed_items d JOIN items i ON i.id = d.id GROUP BY i.job_id) AS x
         WHERE jobs.job_id = x.job_id;
         UPDATE signature_counts SET item_count = item_count - x.n
         FROM (SELECT i.job_id, i.error_signature, COUNT(*) AS n
               FROM temp.doomed_items d JOIN items i ON i.id = d.id GROUP BY 1, 2) AS x
         WHERE signature_counts.job_id = x.job_id AND signature_counts.error_signature = x.error_signature;
         DELETE FROM signature_counts WHERE item_count <= 0;
         UPDATE error_type_counts SET item_count = item_count - x.n
         FROM (SELECT i.job_id, COALESCE(i.last_error_type, '') AS error_type, COUNT(*) AS n
               FROM temp.doomed_items d JOIN items i ON i.id = d.id GROUP BY 1, 2) AS x
         WHERE error_type_counts.job_id = x.job_id AND error_type_counts.error_type = x.error_type;
         DELETE FROM error_type_counts WHERE item_count <= 0;
         DELETE FROM failure_history WHERE item_key IN (SELECT id FROM temp.doomed_items);
         DELETE FROM worktree_artifacts WHERE item_key IN (SELECT id FROM temp.doomed_items);
         DELETE FROM items WHERE id IN (SELECT id FROM temp.doomed_items);
         DELETE FROM settings WHERE key = 'bulk_delete_in_progress';
         DELETE FROM temp.doomed_items;",
    )?;
    Ok(doomed)
}
