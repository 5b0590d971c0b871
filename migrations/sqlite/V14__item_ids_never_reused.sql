-- dlqlite schema, version 14: an item's row id is never used again.
--
-- `Dlq::take_unchanged` (and so `requeue --take` and Prodigy's reprocess)
-- takes an item only if it still has the row id and version it was read
-- with. Without AUTOINCREMENT, SQLite gives a new row the highest row id
-- plus one, so an item removed while it held the highest id and stored
-- again under its name came back with the same id and version 0, and a
-- stale read took it: the new failure was handed out as the old one.
-- AUTOINCREMENT never hands out an id twice. (PostgreSQL's identity column
-- never did.)
--
-- SQLite cannot add AUTOINCREMENT to a table, so the table is made again
-- with the same columns, ids and versions, and its indexes, triggers and
-- views after it. The migration runs with foreign keys off (db.rs): with
-- them on, dropping the old table would first delete every item and, by
-- cascade, its history. The guard below makes sure of it.
CREATE TEMP TABLE v14_guard (foreign_keys INTEGER CHECK (foreign_keys = 0));
INSERT INTO v14_guard SELECT foreign_keys FROM pragma_foreign_keys;
DROP TABLE temp.v14_guard;

DROP VIEW failure_log;
DROP VIEW item_summary;

CREATE TABLE items_v14 (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id                 TEXT NOT NULL REFERENCES jobs (job_id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    item_id                TEXT NOT NULL,
    -- The work item exactly as the source had it (JSON text, compact).
    item_data              TEXT NOT NULL CHECK (json_valid(item_data)),
    first_attempt          TEXT NOT NULL,
    last_attempt           TEXT NOT NULL,
    failure_count          INTEGER NOT NULL CHECK (failure_count >= 0),
    error_signature        TEXT NOT NULL,
    reprocess_eligible     INTEGER NOT NULL CHECK (reprocess_eligible IN (0, 1)),
    manual_review_required INTEGER NOT NULL CHECK (manual_review_required IN (0, 1)),
    -- The error_type of the last attempt (latest timestamp, then highest
    -- attempt_number), kept by dlq so stats and listings need no history lookup.
    last_error_type        TEXT,
    -- 1 when a person set the flag with `dlq mark`: merges then keep it.
    reprocess_eligible_marked     INTEGER NOT NULL DEFAULT 0 CHECK (reprocess_eligible_marked IN (0, 1)),
    manual_review_required_marked INTEGER NOT NULL DEFAULT 0 CHECK (manual_review_required_marked IN (0, 1)),
    -- Unknown top-level fields of the source file (JSON object), written back on export.
    extra                  TEXT CHECK (extra IS NULL OR json_valid(extra)),
    -- Optional legacy fields the source left out (JSON array of names), when
    -- that differs from what the current legacy writer would omit.
    omitted_fields         TEXT CHECK (omitted_fields IS NULL OR json_valid(omitted_fields)),
    -- Retry leases: a worker owns the item until lease_expires.
    lease_owner            TEXT,
    lease_expires          TEXT,
    -- A change counter (V9): bumped by every change to the item (a merge,
    -- a mark, a hand edit; not a lease). What acts on an item it counted or
    -- claimed earlier checks it is unchanged (its id and version).
    version                INTEGER NOT NULL DEFAULT 0,
    -- The failure family of the last attempt (V10; NULL: not mined yet,
    -- see `dlq families rebuild`).
    family_id              INTEGER,
    -- job_id first: a job's items are inserted next to each other.
    UNIQUE (job_id, item_id)
);
INSERT INTO items_v14 (id, job_id, item_id, item_data, first_attempt, last_attempt, failure_count,
    error_signature, reprocess_eligible, manual_review_required, last_error_type,
    reprocess_eligible_marked, manual_review_required_marked, extra, omitted_fields,
    lease_owner, lease_expires, version, family_id)
SELECT id, job_id, item_id, item_data, first_attempt, last_attempt, failure_count,
    error_signature, reprocess_eligible, manual_review_required, last_error_type,
    reprocess_eligible_marked, manual_review_required_marked, extra, omitted_fields,
    lease_owner, lease_expires, version, family_id
FROM items ORDER BY id;
DROP TABLE items;
ALTER TABLE items_v14 RENAME TO items;
-- The ids of items removed before this upgrade are known nowhere, and the
-- highest of them may lie above every id left: a process still holding a
-- read of one would take the item stored next under it. So a database
-- that was in use (it has events) starts its new ids 2^32 above the
-- largest left. A new database starts at 1.
INSERT INTO sqlite_sequence (name, seq)
SELECT 'items', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'items');
UPDATE sqlite_sequence SET seq = (SELECT COALESCE(MAX(id), 0) FROM items) + 4294967296
WHERE name = 'items' AND EXISTS (SELECT 1 FROM events);

CREATE INDEX items_failure_count ON items (failure_count);
CREATE INDEX items_family ON items (family_id);
CREATE INDEX items_job_failure_count ON items (job_id, failure_count);
CREATE INDEX items_job_family ON items (job_id, family_id);
CREATE INDEX items_job_first_attempt ON items (job_id, first_attempt);
CREATE INDEX items_job_last_attempt ON items (job_id, last_attempt);
CREATE INDEX items_last_attempt ON items (last_attempt);
CREATE INDEX items_lease_owner ON items (lease_owner) WHERE lease_owner IS NOT NULL;
CREATE INDEX items_signature ON items (error_signature, job_id, first_attempt, last_attempt);

CREATE TRIGGER items_counters_update
AFTER UPDATE OF job_id, reprocess_eligible, manual_review_required, failure_count, error_signature, last_error_type ON items
BEGIN
    UPDATE jobs SET
        item_count = item_count - 1,
        eligible_count = eligible_count - OLD.reprocess_eligible,
        manual_review_count = manual_review_count - OLD.manual_review_required,
        failure_count_sum = failure_count_sum - OLD.failure_count
    WHERE job_id = OLD.job_id;
    UPDATE jobs SET
        item_count = item_count + 1,
        eligible_count = eligible_count + NEW.reprocess_eligible,
        manual_review_count = manual_review_count + NEW.manual_review_required,
        failure_count_sum = failure_count_sum + NEW.failure_count
    WHERE job_id = NEW.job_id;
    UPDATE signature_counts SET item_count = item_count - 1
        WHERE job_id = OLD.job_id AND error_signature = OLD.error_signature;
    DELETE FROM signature_counts
        WHERE job_id = OLD.job_id AND error_signature = OLD.error_signature AND item_count <= 0;
    INSERT INTO signature_counts (job_id, error_signature, item_count)
        VALUES (NEW.job_id, NEW.error_signature, 1)
        ON CONFLICT (job_id, error_signature) DO UPDATE SET item_count = item_count + 1;
    UPDATE error_type_counts SET item_count = item_count - 1
        WHERE job_id = OLD.job_id AND error_type = COALESCE(OLD.last_error_type, '');
    DELETE FROM error_type_counts
        WHERE job_id = OLD.job_id AND error_type = COALESCE(OLD.last_error_type, '') AND item_count <= 0;
    INSERT INTO error_type_counts (job_id, error_type, item_count)
        VALUES (NEW.job_id, COALESCE(NEW.last_error_type, ''), 1)
        ON CONFLICT (job_id, error_type) DO UPDATE SET item_count = item_count + 1;
END;

CREATE TRIGGER items_counters_delete AFTER DELETE ON items
BEGIN
    UPDATE jobs SET
        item_count = item_count - 1,
        eligible_count = eligible_count - OLD.reprocess_eligible,
        manual_review_count = manual_review_count - OLD.manual_review_required,
        failure_count_sum = failure_count_sum - OLD.failure_count
    WHERE job_id = OLD.job_id;
    UPDATE signature_counts SET item_count = item_count - 1
        WHERE job_id = OLD.job_id AND error_signature = OLD.error_signature;
    DELETE FROM signature_counts
        WHERE job_id = OLD.job_id AND error_signature = OLD.error_signature AND item_count <= 0;
    UPDATE error_type_counts SET item_count = item_count - 1
        WHERE job_id = OLD.job_id AND error_type = COALESCE(OLD.last_error_type, '');
    DELETE FROM error_type_counts
        WHERE job_id = OLD.job_id AND error_type = COALESCE(OLD.last_error_type, '') AND item_count <= 0;
END;

CREATE TRIGGER items_version
AFTER UPDATE OF job_id, item_id, item_data, first_attempt, last_attempt, failure_count,
    error_signature, reprocess_eligible, manual_review_required, extra, omitted_fields ON items
WHEN NEW.version = OLD.version AND (
    NEW.job_id IS NOT OLD.job_id OR NEW.item_id IS NOT OLD.item_id
    OR NEW.item_data IS NOT OLD.item_data
    OR NEW.first_attempt IS NOT OLD.first_attempt OR NEW.last_attempt IS NOT OLD.last_attempt
    OR NEW.failure_count IS NOT OLD.failure_count OR NEW.error_signature IS NOT OLD.error_signature
    OR NEW.reprocess_eligible IS NOT OLD.reprocess_eligible
    OR NEW.manual_review_required IS NOT OLD.manual_review_required
    OR NEW.extra IS NOT OLD.extra OR NEW.omitted_fields IS NOT OLD.omitted_fields)
BEGIN
    UPDATE items SET version = OLD.version + 1 WHERE id = NEW.id;
END;

CREATE VIEW failure_log AS
SELECT
    i.job_id,
    i.item_id,
    f.attempt_number,
    f.timestamp,
    f.error_type,
    f.exit_code,
    f.error_type_json,
    f.error_message,
    f.error_context,
    f.stack_trace,
    f.agent_id,
    f.step_failed,
    f.duration_ms,
    f.json_log_location
FROM failure_history AS f
JOIN items AS i ON i.id = f.item_key;

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
    f.error_message,
    COALESCE(c.category, 'unclassified') AS category,
    i.family_id
FROM items AS i
LEFT JOIN worktree_artifacts AS w ON w.item_key = i.id
LEFT JOIN failure_history AS f ON f.id = (
    SELECT l.id FROM failure_history AS l
    WHERE l.item_key = i.id
    ORDER BY l.timestamp DESC, l.attempt_number DESC
    LIMIT 1
)
LEFT JOIN error_categories AS c ON c.error_type = f.error_type;
