-- The schema of a dlqlite database, as the migrations in migrations/sqlite/ leave
-- it (V1 to V15), in one file: what you can query with `sqlite3 dlq.db`.
-- dlq/tests/tests/schema.rs checks that it matches a freshly migrated database,
-- so it cannot drift. Comments outside the statements are this file's own;
-- comments inside them are the migrations' (SQLite keeps them), except
-- where a later migration changed the rule they describe.
--
-- Writes belong to dlq (the counters and the audit log depend on it);
-- reading with plain SQL is what the schema is for.

-- ----------------------------------------------------------------------
-- Database-wide settings (key/value): today the default capacity for
-- jobs without a cap of their own.

CREATE TABLE settings (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);

-- ----------------------------------------------------------------------
-- One row per job. item_count, eligible_count, manual_review_count and
-- failure_count_sum are counters kept equal to a recount of `items` (by
-- dlq on insert, by the triggers below on row-by-row UPDATE and DELETE,
-- by dlq's set-based deletes, which set the triggers aside and subtract
-- whole groups): read them instead of counting. max_items NULL means the
-- database default applies.

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

-- ----------------------------------------------------------------------
-- One row per dead-lettered work item (job_id, item_id unique). The
-- whole failure history is in failure_history. failure_count is the
-- source's count of failures (it can exceed the attempts kept);
-- first_attempt and last_attempt are the earliest and latest the copies
-- of the item said; error_signature, item_data and the flags come from
-- the copy whose last attempt is latest, and last_error_type is the error
-- type of the last attempt: the one with the latest timestamp (ties: the
-- higher attempt_number). Timestamps are RFC 3339 text in UTC with nine
-- fraction digits, so they sort as text. id is AUTOINCREMENT (V14): an
-- item removed and stored again gets a new id, never one used before.

CREATE TABLE items (
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
    -- claimed earlier checks it is unchanged.
    version                INTEGER NOT NULL DEFAULT 0,
    -- The failure family of the last attempt (V10; NULL: not mined yet,
    -- see `dlq families rebuild`).
    family_id              INTEGER,
    -- job_id first: a job's items are inserted next to each other.
    UNIQUE (job_id, item_id)
);

-- Bumps the version for an update that changes the item and did not bump
-- it itself (dlq's writers do; the sqlite3 shell does not).
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

CREATE INDEX items_job_last_attempt ON items (job_id, last_attempt);

CREATE INDEX items_last_attempt ON items (last_attempt);

CREATE INDEX items_signature ON items (error_signature, job_id, first_attempt, last_attempt);

CREATE INDEX items_job_first_attempt ON items (job_id, first_attempt);

CREATE INDEX items_lease_owner ON items (lease_owner) WHERE lease_owner IS NOT NULL;

-- The dashboard's sort by failure count, of one job and of all (V7).
CREATE INDEX items_job_failure_count ON items (job_id, failure_count);

CREATE INDEX items_failure_count ON items (failure_count);

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

-- ----------------------------------------------------------------------
-- Every attempt of every item, never overwritten: a merge adds the
-- attempts it did not have. item_key is items.id.

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

CREATE INDEX failure_history_last ON failure_history (item_key, timestamp, attempt_number);

-- Counting the items with any attempt of an error type (V8).
CREATE INDEX failure_history_error_type ON failure_history (error_type, item_key);

-- ----------------------------------------------------------------------
-- The message search index (V15): FTS5's trigram tokenizer over every
-- attempt's error_message, under the attempt's id, for `contains` and
-- `matches` in filters. No copy of the text (it reads failure_history)
-- and no positions: a search asks for every trigram of the text sought
-- and dlq checks each candidate with instr(), so the answers are those of
-- a scan. The triggers keep it equal to the rows, for hand edits too (the
-- sqlite3 shell needs FTS5, as Debian's has). To check it against the
-- rows: INSERT INTO failure_text (failure_text, rank) VALUES
-- ('integrity-check', 1); to make it again: INSERT INTO failure_text
-- (failure_text) VALUES ('rebuild'). Its shadow tables failure_text_data,
-- _idx and _config are FTS5's own.

CREATE VIRTUAL TABLE failure_text USING fts5(
    error_message,
    content = 'failure_history',
    content_rowid = 'id',
    tokenize = 'trigram',
    detail = none,
    columnsize = 0
);

CREATE TRIGGER failure_text_insert AFTER INSERT ON failure_history
BEGIN
    INSERT INTO failure_text (rowid, error_message) VALUES (NEW.id, NEW.error_message);
END;

CREATE TRIGGER failure_text_delete AFTER DELETE ON failure_history
BEGIN
    INSERT INTO failure_text (failure_text, rowid, error_message)
    VALUES ('delete', OLD.id, OLD.error_message);
END;

CREATE TRIGGER failure_text_update AFTER UPDATE OF id, error_message ON failure_history
BEGIN
    INSERT INTO failure_text (failure_text, rowid, error_message)
    VALUES ('delete', OLD.id, OLD.error_message);
    INSERT INTO failure_text (rowid, error_message) VALUES (NEW.id, NEW.error_message);
END;

-- ----------------------------------------------------------------------
-- The agent's worktree left behind by the item's last failure, if any.

CREATE TABLE worktree_artifacts (
    item_key            INTEGER PRIMARY KEY REFERENCES items (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    worktree_path       TEXT NOT NULL,
    branch_name         TEXT NOT NULL,
    uncommitted_changes TEXT,
    error_logs          TEXT,
    extra               TEXT CHECK (extra IS NULL OR json_valid(extra))
);

-- ----------------------------------------------------------------------
-- Counters: items per (job, error_signature), kept equal to a recount.

CREATE TABLE signature_counts (
    job_id          TEXT NOT NULL,
    error_signature TEXT NOT NULL,
    item_count      INTEGER NOT NULL,
    PRIMARY KEY (job_id, error_signature)
) WITHOUT ROWID;

-- ----------------------------------------------------------------------
-- Counters: items per (job, error type of the item's last attempt; ''
-- for an item without attempts), kept equal to a recount.

CREATE TABLE error_type_counts (
    job_id      TEXT NOT NULL,
    error_type  TEXT NOT NULL,
    item_count  INTEGER NOT NULL,
    PRIMARY KEY (job_id, error_type)
) WITHOUT ROWID;

-- ----------------------------------------------------------------------
-- Failure categories: the category of each error type (an item's category
-- is that of its last attempt's error type; a type with no row here, and an
-- item without attempts, is 'unclassified'). Seeded with the agent failure
-- categories; `dlq categories set TYPE CATEGORY` changes or adds a row.

CREATE TABLE error_categories (
    error_type TEXT PRIMARY KEY NOT NULL,
    category   TEXT NOT NULL CHECK (category IN ('transient', 'conditionally_recoverable', 'permanent', 'unclassified'))
) WITHOUT ROWID;
INSERT INTO error_categories (error_type, category) VALUES
    ('Timeout', 'transient'),
    ('ResourceExhausted', 'transient'),
    ('WorktreeError', 'transient'),
    ('CommandFailed', 'conditionally_recoverable'),
    ('CommitValidationFailed', 'conditionally_recoverable'),
    ('ValidationFailed', 'conditionally_recoverable'),
    ('MergeConflict', 'conditionally_recoverable'),
    ('PermissionError', 'permanent');

-- ----------------------------------------------------------------------
-- Retention policies (`dlq retention`): job_id / category NULL = any; the
-- most specific matching policy applies to an item ((job, category) over
-- (job, any) and (any, category), those over (any, any); of a matching
-- (job, any) and (any, category), the one that keeps longer); max_age_seconds
-- NULL keeps forever. `dlq retention apply` removes items whose last attempt is
-- older than their policy's age, with a `purged` event naming the policy.

CREATE TABLE retention_policies (
    id              INTEGER PRIMARY KEY,
    job_id          TEXT,
    category        TEXT CHECK (category IS NULL OR category IN ('transient', 'conditionally_recoverable', 'permanent', 'unclassified')),
    max_age_seconds INTEGER CHECK (max_age_seconds IS NULL OR max_age_seconds > 0),
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE UNIQUE INDEX retention_policies_scope ON retention_policies (
    job_id IS NULL, COALESCE(job_id, ''), COALESCE(category, '')
);

-- ----------------------------------------------------------------------
-- The audit log: one row per change to an item or a job (added, merged,
-- removed, evicted, purged, cleared, imported, marked, capacity_set,
-- job_created, retried_ok, retried_failed, requeued, job_removed); an
-- import also writes one `imported` row per job (item_id NULL) summing it
-- up. Nothing leaves the DLQ without a row here. detail is JSON.

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

-- One item's events (V7).
CREATE INDEX events_item ON events (item_id, id);

-- ----------------------------------------------------------------------
-- One row per `dlq retry` run (and per library retry): who ran it, its
-- parameters and counts. status is running, finished or interrupted; a
-- run still running whose process is gone or whose heartbeat stopped is
-- reported as crashed when read.

CREATE TABLE retry_runs (
    id            INTEGER PRIMARY KEY,
    run_id        TEXT NOT NULL UNIQUE,
    job_id        TEXT NOT NULL,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    started_at    TEXT NOT NULL,
    heartbeat_at  TEXT NOT NULL,
    ended_at      TEXT,
    -- running, finished, interrupted (a status of crashed is worked out when
    -- read: running, but the process is gone or its heartbeat stopped)
    status        TEXT NOT NULL,
    -- The command line parameters (command, parallel, filter, ...), JSON.
    parameters    TEXT NOT NULL CHECK (json_valid(parameters)),
    attempted     INTEGER NOT NULL DEFAULT 0,
    succeeded     INTEGER NOT NULL DEFAULT 0,
    failed        INTEGER NOT NULL DEFAULT 0,
    skipped       INTEGER NOT NULL DEFAULT 0,
    attempts      INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX retry_runs_job ON retry_runs (job_id, id);

-- ----------------------------------------------------------------------
-- What `dlq check --new-signature` saw at its last run, per check name
-- (V6): the check's scope and time, and the signatures present then.

CREATE TABLE checks (
    name       TEXT PRIMARY KEY NOT NULL,
    -- The job the check looks at; NULL: every job. A check run with another
    -- scope under the same name starts a new baseline.
    job_id     TEXT,
    checked_at TEXT NOT NULL
);

CREATE TABLE check_signatures (
    name            TEXT NOT NULL REFERENCES checks (name) ON DELETE CASCADE,
    error_signature TEXT NOT NULL,
    PRIMARY KEY (name, error_signature)
) WITHOUT ROWID;

-- ----------------------------------------------------------------------
-- The migrations applied (refinery's table): the schema version is the
-- highest version here.

CREATE TABLE refinery_schema_history(
             version int4 PRIMARY KEY,
             name VARCHAR(255),
             applied_on VARCHAR(255),
             checksum VARCHAR(255));

-- ----------------------------------------------------------------------
-- Views for reading: every attempt with its item (failure_log), and each
-- item with its last attempt and worktree (item_summary, with the category of that attempt's error type).

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

-- ----------------------------------------------------------------------
-- Failure families (V10, docs/families.md): one row per cause, mined from
-- each item's last attempt when it is written. An item's family is
-- items.family_id; a family's count is counted from items when asked.

CREATE TABLE families (
    id          INTEGER PRIMARY KEY,
    -- The words with <*> where the family's failures differ.
    template    TEXT NOT NULL,
    -- What must be equal for two failures to share the family: the last
    -- attempt's error type and crash site (top application frame).
    error_type  TEXT,
    site        TEXT,
    -- The miner's own state of the family (JSON), so that a later process
    -- goes on mining where this one stopped.
    state       TEXT NOT NULL CHECK (json_valid(state)),
    first_seen  TEXT NOT NULL,
    last_seen   TEXT NOT NULL,
    -- Bumped by every change to the row: a process that mined before
    -- reads the families changed since (families_rev > the one it saw).
    rev         INTEGER NOT NULL,
    -- (V12) The family a person merged this one into (`dlq families
    -- merge`), or a rebuild retired it into: its items are there, and a
    -- failure the miner still finds in it goes there. NULL: its own.
    merged_into INTEGER,
    -- (V13) The family's part: its number of words, error type and site
    -- joined by char(31). A process that mines reads the families of the
    -- parts its failures fall in, not all of them.
    part TEXT
);
CREATE INDEX families_rev ON families (rev);
CREATE INDEX families_part ON families (part);
CREATE INDEX items_family ON items (family_id);
-- A job's items per family (the dashboard's Patterns page of one job).
CREATE INDEX items_job_family ON items (job_id, family_id);
