-- dlqlite schema, version 1.
--
-- This schema is a user interface: people open the database with the plain
-- `sqlite3` shell, so names follow the legacy JSON fields, every value is
-- plain text or an integer, and nothing needs an application-defined SQL
-- function. Timestamps are fixed-width UTC text with nine fractional digits
-- (2025-11-23T19:42:53.902113845Z): they sort as text in instant order and
-- SQLite's date functions read them. Booleans are 0/1.
--
-- Never edit this file once released: add V2__*.sql instead.

-- Key/value settings. `default_max_items` is the per-job capacity used when a
-- job has no override (0 = unlimited).
CREATE TABLE settings (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
INSERT INTO settings (key, value) VALUES ('default_max_items', '10000');

-- One row per job. The counters let stats and capacity checks skip scanning
-- items. dlq counts the rows it inserts in the same statement batch (a
-- trigger on INSERT would make SQLite journal every insert: measured 25%
-- slower imports); the triggers below keep them right on every UPDATE and
-- DELETE, including those made by hand in sqlite3. After inserting items by
-- hand, run `dlq db --recount`.
CREATE TABLE jobs (
    job_id              TEXT PRIMARY KEY NOT NULL,
    repo                TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    max_items           INTEGER CHECK (max_items IS NULL OR max_items >= 0),
    item_count          INTEGER NOT NULL DEFAULT 0,
    eligible_count      INTEGER NOT NULL DEFAULT 0,
    manual_review_count INTEGER NOT NULL DEFAULT 0,
    failure_count_sum   INTEGER NOT NULL DEFAULT 0
);

-- One row per dead-lettered item; columns are named as the legacy fields.
-- Foreign keys are checked at COMMIT (DEFERRABLE INITIALLY DEFERRED): an
-- immediate check makes SQLite keep a statement journal for every insert.
-- The plain sqlite3 shell starts with foreign keys off: run
-- `PRAGMA foreign_keys = ON;` before deleting rows by hand so history and
-- artifacts go with their item.
CREATE TABLE items (
    id                     INTEGER PRIMARY KEY,
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
    -- The error_type of the last attempt (highest attempt_number, then
    -- timestamp), kept by dlq so stats and listings need no history lookup.
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
    -- job_id first: a job's items are inserted next to each other.
    UNIQUE (job_id, item_id)
);
-- Newest/oldest per job (list order, capacity eviction, purge per job).
CREATE INDEX items_job_last_attempt ON items (job_id, last_attempt);
-- Purge by age and listing across all jobs.
CREATE INDEX items_last_attempt ON items (last_attempt);
-- Grouping and filtering by signature; covers analyze's first and last
-- occurrence per signature (no table lookups).
CREATE INDEX items_signature ON items (error_signature, job_id, first_attempt, last_attempt);
-- Retry selects the eligible items of one job.
CREATE INDEX items_job_eligible ON items (job_id, last_attempt) WHERE reprocess_eligible = 1;
-- Oldest first attempt per job (stats).
CREATE INDEX items_job_first_attempt ON items (job_id, first_attempt);

-- One row per failed attempt of an item.
CREATE TABLE failure_history (
    id                INTEGER PRIMARY KEY,
    item_key          INTEGER NOT NULL REFERENCES items (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    attempt_number    INTEGER NOT NULL,
    timestamp         TEXT NOT NULL,
    -- The error type's variant name: Timeout, CommandFailed, ... (any name is kept).
    error_type        TEXT NOT NULL,
    -- Set when the error type carries an exit code (CommandFailed).
    exit_code         INTEGER,
    -- The error type as the source wrote it, when it says more than a name
    -- and an exit code (for example {"CommandFailed": {"command": "x", "exit_code": null}}).
    error_type_json   TEXT CHECK (error_type_json IS NULL OR json_valid(error_type_json)),
    error_message     TEXT NOT NULL,
    -- JSON array of strings, or NULL.
    error_context     TEXT CHECK (error_context IS NULL OR json_valid(error_context)),
    stack_trace       TEXT,
    agent_id          TEXT NOT NULL,
    step_failed       TEXT NOT NULL,
    duration_ms       INTEGER NOT NULL,
    json_log_location TEXT,
    extra             TEXT CHECK (extra IS NULL OR json_valid(extra)),
    omitted_fields    TEXT CHECK (omitted_fields IS NULL OR json_valid(omitted_fields)),
    UNIQUE (item_key, attempt_number, timestamp)
);

-- The failed agent's worktree, at most one per item.
CREATE TABLE worktree_artifacts (
    item_key            INTEGER PRIMARY KEY REFERENCES items (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    worktree_path       TEXT NOT NULL,
    branch_name         TEXT NOT NULL,
    uncommitted_changes TEXT,
    error_logs          TEXT,
    extra               TEXT CHECK (extra IS NULL OR json_valid(extra))
);

-- Append-only audit log. Nothing leaves the DLQ without a row here.
CREATE TABLE events (
    id      INTEGER PRIMARY KEY,
    time    TEXT NOT NULL,
    kind    TEXT NOT NULL,
    job_id  TEXT,
    item_id TEXT,
    detail  TEXT CHECK (detail IS NULL OR json_valid(detail))
);
CREATE INDEX events_job ON events (job_id, id);
CREATE INDEX events_kind ON events (kind, id);

-- Error signature counts per job (stats.error_categories), kept like the
-- job counters above.
CREATE TABLE signature_counts (
    job_id          TEXT NOT NULL,
    error_signature TEXT NOT NULL,
    item_count      INTEGER NOT NULL,
    PRIMARY KEY (job_id, error_signature)
) WITHOUT ROWID;

-- Items per last error type per job (stats), kept like signature_counts.
CREATE TABLE error_type_counts (
    job_id      TEXT NOT NULL,
    error_type  TEXT NOT NULL,
    item_count  INTEGER NOT NULL,
    PRIMARY KEY (job_id, error_type)
) WITHOUT ROWID;

-- A bulk delete (purge, clear) adjusts the counters in a few set-based
-- statements instead, flagged by a settings row that exists only inside its
-- own transaction.
CREATE TRIGGER items_counters_delete AFTER DELETE ON items
WHEN NOT EXISTS (SELECT 1 FROM settings WHERE key = 'bulk_delete_in_progress')
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
    ORDER BY l.attempt_number DESC, l.timestamp DESC
    LIMIT 1
);

-- One row per attempt, with the job and item it belongs to.
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
