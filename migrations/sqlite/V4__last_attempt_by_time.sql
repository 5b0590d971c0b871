-- dlqlite schema, version 4: an item's last attempt is the one with the
-- latest timestamp (of those, the highest attempt_number).
--
-- Versions 1-3 took the highest attempt_number. With copies arriving out
-- of order (every copy the legacy writer left numbers its one attempt 1;
-- agents that restart their count) that picked an older attempt than the
-- one whose copy supplied the item's signature and data, so an item could
-- contradict itself. The engine, the views and the counters now share the
-- time rule.

-- Serves "the last attempt of item K" with one seek (ORDER BY timestamp
-- DESC, attempt_number DESC LIMIT 1); the UNIQUE index on (item_key,
-- attempt_number, timestamp) keeps de-duplicating attempts.
CREATE INDEX failure_history_last ON failure_history (item_key, timestamp, attempt_number);

-- Items whose last attempt changes under the new rule get its error type;
-- the update trigger moves them between error_type_counts.
UPDATE items SET last_error_type = (
    SELECT f.error_type FROM failure_history AS f
    WHERE f.item_key = items.id
    ORDER BY f.timestamp DESC, f.attempt_number DESC
    LIMIT 1
)
WHERE last_error_type IS NOT (
    SELECT f.error_type FROM failure_history AS f
    WHERE f.item_key = items.id
    ORDER BY f.timestamp DESC, f.attempt_number DESC
    LIMIT 1
);

DROP VIEW item_summary;
-- One row per item with its last attempt's error, without surrogate keys.
CREATE VIEW item_summary AS
SELECT
    i.job_id,
    i.item_id,
    i.failure_count,
    i.first_attempt,
    i.last_attempt,
    i.error_signature,
    i.reprocess_eligible,
    i.manual_review_required,
    w.worktree_path,
    f.error_type,
    f.exit_code,
    f.error_message
FROM items AS i
LEFT JOIN worktree_artifacts AS w ON w.item_key = i.id
LEFT JOIN failure_history AS f ON f.id = (
    SELECT l.id FROM failure_history AS l
    WHERE l.item_key = i.id
    ORDER BY l.timestamp DESC, l.attempt_number DESC
    LIMIT 1
);
