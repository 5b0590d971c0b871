-- dlqlite schema for PostgreSQL, version 1.
--
-- The PostgreSQL translation of dlqlite's SQLite schema as its migrations
-- V1 to V8 leave it (docs/schema.sql; migrations/sqlite/): the same tables,
-- columns, indexes, triggers and views under the same names, so the engine's
-- SQL, shared by both backends, means the same on each. Like the SQLite
-- schema it is a user interface: people read the database with plain psql
-- (\d+ shows the comments below), and writes belong to dlq (the counters and
-- the audit log depend on it). refinery records the migrations applied in
-- its own table, refinery_schema_history, created by refinery itself.
--
-- What differs from SQLite, and why:
--   * Integers are bigint (SQLite's INTEGER is 64-bit). The 0/1 flags are
--     smallint with CHECK (x IN (0, 1)), not boolean: the shared SQL says
--     `flag = 1` and `SUM(flag)`.
--   * Surrogate keys (items.id, failure_history.id, events.id,
--     retry_runs.id, retention_policies.id) are identity columns: never
--     reused, unlike SQLite's rowid (a deleted last row's id came back).
--   * Text is COLLATE "C" throughout: text compares and sorts byte by byte,
--     as SQLite's BINARY collation does, whatever the database's locale, so
--     listings come in the same order on both backends and match the order
--     Rust's str comparison gives (ASCII-only case folding, too).
--   * JSON that comes from the sources (item_data, extra, omitted_fields,
--     error_type_json, error_context) is `json`, which keeps the exact text
--     (key order, duplicate keys, spacing): export writes it back byte for
--     byte. It has ->, ->> and #>>; cast it (item_data::jsonb) for the jsonb
--     operators and functions. dlq's own documents (events.detail,
--     retry_runs.parameters) are jsonb. Both types reject invalid JSON,
--     which SQLite's CHECK (json_valid(...)) did. (A document with a \u0000
--     escape is stored and read back as text, but PostgreSQL's JSON
--     operators and jsonb refuse it.)
--   * Timestamps are timestamptz. Sources write RFC 3339 with nanoseconds and
--     timestamptz holds microseconds, so each source timestamp
--     (items.first_attempt and last_attempt, failure_history.timestamp) has
--     a column *_ns with the nanoseconds below the microsecond (0-999): the
--     exact instant is the column plus that many nanoseconds, and every
--     ordering by those timestamps is by (column, column_ns). dlq's own
--     times (created_at, lease_expires, events.time, ...) are plain
--     timestamptz, to the microsecond. dlq_ts, dlq_ns and dlq_ts_text
--     convert between the two columns and dlq's text form.
--   * The counter triggers are plpgsql functions with the same effect. Inserts
--     fire no trigger, as in SQLite: dlq counts the rows it inserts itself.
--
-- Never edit this file once released: add V2__*.sql instead.

-- ----------------------------------------------------------------------
-- Timestamp conversions used by dlq's SQL (they are no part of what is
-- stored: psql users read the columns). dlq's text form is RFC 3339 in UTC
-- with nine fraction digits (2025-11-23T19:42:53.902113845Z), years
-- 0000-9999.

-- The instant of an RFC 3339 timestamp to the microsecond: the fraction is
-- cut after six digits (PostgreSQL's own input would round it, and a
-- rounded-up instant could sort after a later one's microsecond). Year 0000
-- is 1 BC to PostgreSQL. A leap second (:60) becomes the last microsecond
-- of its minute, as timestamptz has no leap seconds. dlq's own form takes
-- the first branch, without regular expressions. These functions are single
-- expressions, not STRICT, so that PostgreSQL inlines them into the
-- statements that call them (a call of a SQL function that is not inlined
-- took 20 microseconds: seconds per 100,000 imported items).
CREATE FUNCTION dlq_ts(t text) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN length(t) = 30 AND substr(t, 20, 1) = '.' AND substr(t, 30, 1) = 'Z'
                AND substr(t, 18, 2) <> '60' AND substr(t, 1, 4) <> '0000'
            THEN (substr(t, 1, 26) || 'Z')::timestamptz
        WHEN t LIKE '0000-%'
            THEN ('0001' || substr(regexp_replace(regexp_replace(t, '(\.\d{6})\d+', '\1'),
                                                  '(T\d\d:\d\d):60(\.\d+)?', '\1:59.999999'), 5)
                  || ' BC')::timestamptz
        ELSE regexp_replace(regexp_replace(t, '(\.\d{6})\d+', '\1'),
                            '(T\d\d:\d\d):60(\.\d+)?', '\1:59.999999')::timestamptz
    END
$$;
COMMENT ON FUNCTION dlq_ts(text) IS
    'The instant of an RFC 3339 timestamp, truncated to the microsecond (dlq_ns has the rest)';

-- The nanoseconds below the microsecond of an RFC 3339 timestamp: fraction
-- digits 7 to 9 (0 when it has six or fewer; 999 for a leap second, the
-- last nanosecond of its minute).
CREATE FUNCTION dlq_ns(t text) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN t IS NULL THEN NULL
        WHEN length(t) = 30 AND substr(t, 20, 1) = '.' AND substr(t, 18, 2) <> '60'
            THEN substr(t, 27, 3)::smallint
        WHEN t ~ 'T\d\d:\d\d:60' THEN 999::smallint
        ELSE COALESCE(rpad(substring(t FROM '\.\d{6}(\d{1,3})'), 3, '0')::smallint, 0::smallint)
    END
$$;
COMMENT ON FUNCTION dlq_ns(text) IS
    'The nanoseconds below the microsecond of an RFC 3339 timestamp (0-999)';

-- dlq's text form of a timestamp column and its *_ns column:
-- dlq_ts_text(last_attempt, last_attempt_ns).
CREATE FUNCTION dlq_ts_text(ts timestamptz, ns integer) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN ts < '0001-01-01T00:00:00Z'::timestamptz
            THEN '0000' || to_char(ts AT TIME ZONE 'UTC', '-MM-DD"T"HH24:MI:SS.US')
        ELSE to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')
    END || lpad(ns::text, 3, '0') || 'Z'
$$;
COMMENT ON FUNCTION dlq_ts_text(timestamptz, integer) IS
    'dlq''s text form (RFC 3339, UTC, nine fraction digits) of a timestamp and its nanoseconds below the microsecond';

-- ----------------------------------------------------------------------
-- Database-wide settings (key/value): today the default capacity for
-- jobs without a cap of their own. `default_max_items` is the per-job
-- capacity used when a job has no override (0 = unlimited).

CREATE TABLE settings (
    key   text COLLATE "C" NOT NULL PRIMARY KEY,
    value text COLLATE "C" NOT NULL
);
INSERT INTO settings (key, value) VALUES ('default_max_items', '10000');
COMMENT ON TABLE settings IS
    'Database-wide settings (key/value): default_max_items is the capacity of a job without a cap of its own (0 = unlimited)';

-- ----------------------------------------------------------------------
-- One row per job. item_count, eligible_count, manual_review_count and
-- failure_count_sum are counters kept equal to a recount of `items` (by
-- dlq on insert, by the triggers below on row-by-row UPDATE and DELETE,
-- by dlq's set-based deletes, which set the triggers aside and subtract
-- whole groups): read them instead of counting. max_items NULL means the
-- database default applies. After inserting items by hand, run
-- `dlq db --recount`.

CREATE TABLE jobs (
    job_id              text COLLATE "C" NOT NULL PRIMARY KEY,
    repo                text COLLATE "C",
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    max_items           bigint CHECK (max_items IS NULL OR max_items >= 0),
    item_count          bigint NOT NULL DEFAULT 0,
    eligible_count      bigint NOT NULL DEFAULT 0,
    manual_review_count bigint NOT NULL DEFAULT 0,
    failure_count_sum   bigint NOT NULL DEFAULT 0
);
COMMENT ON TABLE jobs IS
    'One row per job; the counters equal a recount of items (kept by dlq and the triggers on items): read them instead of counting';
COMMENT ON COLUMN jobs.max_items IS 'The job''s capacity; NULL: the database default (settings.default_max_items)';
COMMENT ON COLUMN jobs.item_count IS 'Counter: the job''s items';
COMMENT ON COLUMN jobs.eligible_count IS 'Counter: the job''s items with reprocess_eligible = 1';
COMMENT ON COLUMN jobs.manual_review_count IS 'Counter: the job''s items with manual_review_required = 1';
COMMENT ON COLUMN jobs.failure_count_sum IS 'Counter: the sum of the job''s items'' failure_count';

-- ----------------------------------------------------------------------
-- One row per dead-lettered work item (job_id, item_id unique). The
-- whole failure history is in failure_history. failure_count is the
-- source's count of failures (it can exceed the attempts kept);
-- first_attempt and last_attempt are the earliest and latest the copies
-- of the item said; error_signature, item_data and the flags come from
-- the copy whose last attempt is latest, and last_error_type is the error
-- type of the last attempt: the one with the latest timestamp (ties: the
-- higher attempt_number). first_attempt and last_attempt hold the instant
-- to the microsecond, first_attempt_ns and last_attempt_ns the nanoseconds
-- below it. Foreign keys are checked at COMMIT (DEFERRABLE INITIALLY
-- DEFERRED), as in SQLite.

CREATE TABLE items (
    id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id                 text COLLATE "C" NOT NULL REFERENCES jobs (job_id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    item_id                text COLLATE "C" NOT NULL,
    -- The work item exactly as the source had it (JSON text, compact;
    -- item_data::jsonb gives the jsonb operators).
    item_data              json NOT NULL,
    first_attempt          timestamptz NOT NULL,
    first_attempt_ns       smallint NOT NULL DEFAULT 0 CHECK (first_attempt_ns BETWEEN 0 AND 999),
    last_attempt           timestamptz NOT NULL,
    last_attempt_ns        smallint NOT NULL DEFAULT 0 CHECK (last_attempt_ns BETWEEN 0 AND 999),
    failure_count          bigint NOT NULL CHECK (failure_count >= 0),
    error_signature        text COLLATE "C" NOT NULL,
    reprocess_eligible     smallint NOT NULL CHECK (reprocess_eligible IN (0, 1)),
    manual_review_required smallint NOT NULL CHECK (manual_review_required IN (0, 1)),
    -- The error_type of the last attempt (latest timestamp, then highest
    -- attempt_number), kept by dlq so stats and listings need no history lookup.
    last_error_type        text COLLATE "C",
    -- 1 when a person set the flag with `dlq mark`: merges then keep it.
    reprocess_eligible_marked     smallint NOT NULL DEFAULT 0 CHECK (reprocess_eligible_marked IN (0, 1)),
    manual_review_required_marked smallint NOT NULL DEFAULT 0 CHECK (manual_review_required_marked IN (0, 1)),
    -- Unknown top-level fields of the source file (JSON object), written back on export.
    extra                  json,
    -- Optional legacy fields the source left out (JSON array of names), when
    -- that differs from what the current legacy writer would omit.
    omitted_fields         json,
    -- Retry leases: a worker owns the item until lease_expires.
    lease_owner            text COLLATE "C",
    lease_expires          timestamptz,
    -- job_id first: a job's items are inserted next to each other.
    UNIQUE (job_id, item_id)
);
COMMENT ON TABLE items IS
    'One row per dead-lettered work item; its attempts are in failure_history (item_key = id)';
COMMENT ON COLUMN items.item_data IS 'The work item exactly as the source had it (JSON text; item_data::jsonb for jsonb operators)';
COMMENT ON COLUMN items.first_attempt IS 'The earliest attempt any copy of the item said, to the microsecond (first_attempt_ns: the nanoseconds below)';
COMMENT ON COLUMN items.first_attempt_ns IS 'Nanoseconds below first_attempt''s microsecond (0-999)';
COMMENT ON COLUMN items.last_attempt IS 'The latest attempt any copy of the item said, to the microsecond (last_attempt_ns: the nanoseconds below)';
COMMENT ON COLUMN items.last_attempt_ns IS 'Nanoseconds below last_attempt''s microsecond (0-999)';
COMMENT ON COLUMN items.failure_count IS 'The source''s count of failures (it can exceed the attempts kept)';
COMMENT ON COLUMN items.last_error_type IS 'The error_type of the last attempt (latest timestamp, then highest attempt_number)';
COMMENT ON COLUMN items.reprocess_eligible_marked IS '1 when a person set reprocess_eligible with `dlq mark`: merges then keep it';
COMMENT ON COLUMN items.manual_review_required_marked IS '1 when a person set manual_review_required with `dlq mark`: merges then keep it';
COMMENT ON COLUMN items.extra IS 'Unknown top-level fields of the source file (JSON object), written back on export';
COMMENT ON COLUMN items.omitted_fields IS 'Optional legacy fields the source left out (JSON array of names), when that differs from what the legacy writer would omit';
COMMENT ON COLUMN items.lease_owner IS 'Retry lease: the run (retry_runs.run_id) that owns the item until lease_expires';

-- Newest/oldest per job (list order, capacity eviction, purge per job). The
-- trailing id is what SQLite's indexes carry implicitly (the rowid): the
-- tie-break of dlq's orderings.
CREATE INDEX items_job_last_attempt ON items (job_id, last_attempt, last_attempt_ns, id);

-- Purge by age and listing across all jobs.
CREATE INDEX items_last_attempt ON items (last_attempt, last_attempt_ns, id);

-- Grouping and filtering by signature; covers analyze's first and last
-- occurrence per signature (no table lookups).
CREATE INDEX items_signature ON items (error_signature, job_id, first_attempt, last_attempt);

-- Oldest first attempt per job (stats).
CREATE INDEX items_job_first_attempt ON items (job_id, first_attempt, first_attempt_ns, id);

-- Renewing and releasing a run's leases.
CREATE INDEX items_lease_owner ON items (lease_owner) WHERE lease_owner IS NOT NULL;

-- The dashboard's sort by failure count, of one job and of all (V7).
CREATE INDEX items_job_failure_count ON items (job_id, failure_count, id);

CREATE INDEX items_failure_count ON items (failure_count, id);

-- The counters of jobs, signature_counts and error_type_counts, kept on
-- every UPDATE that sets a counted column and on every DELETE, including
-- those made by hand in psql (a job's cascade too). Row-level AFTER
-- triggers like SQLite's; the UPDATE trigger fires only when one of the
-- counted columns is in the statement's SET list. A bulk delete (purge,
-- clear) that adjusts the counters in a few set-based statements instead
-- sets the triggers aside for its own transaction only with
-- `SET LOCAL dlq.counter_triggers = 'off'`: no lock, and no other
-- connection ever sees them off (SQLite drops and recreates them instead).

CREATE FUNCTION dlq_items_counters_update() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF OLD.job_id = NEW.job_id THEN
        -- The same row twice in SQLite's two statements: one update.
        UPDATE jobs SET
            eligible_count = eligible_count - OLD.reprocess_eligible + NEW.reprocess_eligible,
            manual_review_count = manual_review_count - OLD.manual_review_required + NEW.manual_review_required,
            failure_count_sum = failure_count_sum - OLD.failure_count + NEW.failure_count
        WHERE job_id = OLD.job_id;
    ELSE
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
    END IF;
    UPDATE signature_counts SET item_count = item_count - 1
        WHERE job_id = OLD.job_id AND error_signature = OLD.error_signature;
    DELETE FROM signature_counts
        WHERE job_id = OLD.job_id AND error_signature = OLD.error_signature AND item_count <= 0;
    INSERT INTO signature_counts (job_id, error_signature, item_count)
        VALUES (NEW.job_id, NEW.error_signature, 1)
        ON CONFLICT (job_id, error_signature) DO UPDATE SET item_count = signature_counts.item_count + 1;
    UPDATE error_type_counts SET item_count = item_count - 1
        WHERE job_id = OLD.job_id AND error_type = COALESCE(OLD.last_error_type, '');
    DELETE FROM error_type_counts
        WHERE job_id = OLD.job_id AND error_type = COALESCE(OLD.last_error_type, '') AND item_count <= 0;
    INSERT INTO error_type_counts (job_id, error_type, item_count)
        VALUES (NEW.job_id, COALESCE(NEW.last_error_type, ''), 1)
        ON CONFLICT (job_id, error_type) DO UPDATE SET item_count = error_type_counts.item_count + 1;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION dlq_items_counters_update() IS
    'Trigger items_counters_update: moves an updated item between the counters of jobs, signature_counts and error_type_counts';

CREATE FUNCTION dlq_items_counters_delete() RETURNS trigger
LANGUAGE plpgsql
AS $$
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
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION dlq_items_counters_delete() IS
    'Trigger items_counters_delete: takes a deleted item out of the counters of jobs, signature_counts and error_type_counts';

CREATE TRIGGER items_counters_update
AFTER UPDATE OF job_id, reprocess_eligible, manual_review_required, failure_count, error_signature, last_error_type ON items
FOR EACH ROW
WHEN (current_setting('dlq.counter_triggers', true) IS DISTINCT FROM 'off')
EXECUTE FUNCTION dlq_items_counters_update();

CREATE TRIGGER items_counters_delete
AFTER DELETE ON items
FOR EACH ROW
WHEN (current_setting('dlq.counter_triggers', true) IS DISTINCT FROM 'off')
EXECUTE FUNCTION dlq_items_counters_delete();

-- ----------------------------------------------------------------------
-- Every attempt of every item, never overwritten: a merge adds the
-- attempts it did not have. item_key is items.id. timestamp holds the
-- attempt's instant to the microsecond, timestamp_ns the nanoseconds below.

CREATE TABLE failure_history (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_key          bigint NOT NULL REFERENCES items (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    attempt_number    bigint NOT NULL,
    timestamp         timestamptz NOT NULL,
    timestamp_ns      smallint NOT NULL DEFAULT 0 CHECK (timestamp_ns BETWEEN 0 AND 999),
    -- The error type's variant name: Timeout, CommandFailed, ... (any name is kept).
    error_type        text COLLATE "C" NOT NULL,
    -- Set when the error type carries an exit code (CommandFailed).
    exit_code         bigint,
    -- The error type as the source wrote it, when it says more than a name
    -- and an exit code (for example {"CommandFailed": {"command": "x", "exit_code": null}}).
    error_type_json   json,
    error_message     text COLLATE "C" NOT NULL,
    -- JSON array of strings, or NULL.
    error_context     json,
    stack_trace       text COLLATE "C",
    agent_id          text COLLATE "C" NOT NULL,
    step_failed       text COLLATE "C" NOT NULL,
    duration_ms       bigint NOT NULL,
    json_log_location text COLLATE "C",
    extra             json,
    omitted_fields    json,
    UNIQUE (item_key, attempt_number, timestamp, timestamp_ns)
);
COMMENT ON TABLE failure_history IS
    'Every attempt of every item (item_key = items.id), never overwritten: a merge adds the attempts it did not have';
COMMENT ON COLUMN failure_history.timestamp IS 'When the attempt failed, to the microsecond (timestamp_ns: the nanoseconds below)';
COMMENT ON COLUMN failure_history.timestamp_ns IS 'Nanoseconds below timestamp''s microsecond (0-999)';
COMMENT ON COLUMN failure_history.error_type IS 'The error type''s variant name: Timeout, CommandFailed, ... (any name is kept)';
COMMENT ON COLUMN failure_history.exit_code IS 'Set when the error type carries an exit code (CommandFailed)';
COMMENT ON COLUMN failure_history.error_type_json IS 'The error type as the source wrote it, when it says more than a name and an exit code';
COMMENT ON COLUMN failure_history.error_context IS 'JSON array of strings, or NULL';
COMMENT ON COLUMN failure_history.extra IS 'Unknown fields of the attempt (JSON object), written back on export';
COMMENT ON COLUMN failure_history.omitted_fields IS 'Optional legacy fields the source left out (JSON array of names)';

-- Serves "the last attempt of item K" with one seek (ORDER BY timestamp
-- DESC, timestamp_ns DESC, attempt_number DESC LIMIT 1); the UNIQUE index
-- on (item_key, attempt_number, timestamp, timestamp_ns) keeps
-- de-duplicating attempts.
CREATE INDEX failure_history_last ON failure_history (item_key, timestamp, timestamp_ns, attempt_number);

-- Counting the items with any attempt of an error type (V8).
CREATE INDEX failure_history_error_type ON failure_history (error_type, item_key);

-- ----------------------------------------------------------------------
-- The agent's worktree left behind by the item's last failure, if any.

CREATE TABLE worktree_artifacts (
    item_key            bigint NOT NULL PRIMARY KEY REFERENCES items (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    worktree_path       text COLLATE "C" NOT NULL,
    branch_name         text COLLATE "C" NOT NULL,
    uncommitted_changes text COLLATE "C",
    error_logs          text COLLATE "C",
    extra               json
);
COMMENT ON TABLE worktree_artifacts IS
    'The agent''s worktree left behind by the item''s last failure, if any (at most one per item)';

-- ----------------------------------------------------------------------
-- Counters: items per (job, error_signature), kept equal to a recount.

CREATE TABLE signature_counts (
    job_id          text COLLATE "C" NOT NULL,
    error_signature text COLLATE "C" NOT NULL,
    item_count      bigint NOT NULL,
    PRIMARY KEY (job_id, error_signature)
);
COMMENT ON TABLE signature_counts IS
    'Counters: items per (job, error_signature), kept equal to a recount of items';

-- ----------------------------------------------------------------------
-- Counters: items per (job, error type of the item's last attempt; ''
-- for an item without attempts), kept equal to a recount.

CREATE TABLE error_type_counts (
    job_id      text COLLATE "C" NOT NULL,
    error_type  text COLLATE "C" NOT NULL,
    item_count  bigint NOT NULL,
    PRIMARY KEY (job_id, error_type)
);
COMMENT ON TABLE error_type_counts IS
    'Counters: items per (job, error type of the item''s last attempt; '''' for an item without attempts), kept equal to a recount of items';

-- ----------------------------------------------------------------------
-- Failure categories: the category of each error type (an item's category
-- is that of its last attempt's error type; a type with no row here, and an
-- item without attempts, is 'unclassified'). Seeded with the agent failure
-- categories: transient failures clear up by themselves (retry with
-- backoff), conditionally recoverable ones need the input or the
-- environment changed first, permanent ones never succeed as they are.
-- `dlq categories set TYPE CATEGORY` changes or adds a row (or an UPDATE in
-- psql: nothing is cached, every reader looks the table up).

CREATE TABLE error_categories (
    error_type text COLLATE "C" NOT NULL PRIMARY KEY,
    category   text COLLATE "C" NOT NULL CHECK (category IN ('transient', 'conditionally_recoverable', 'permanent', 'unclassified'))
);
INSERT INTO error_categories (error_type, category) VALUES
    ('Timeout', 'transient'),
    ('ResourceExhausted', 'transient'),
    ('WorktreeError', 'transient'),
    ('CommandFailed', 'conditionally_recoverable'),
    ('CommitValidationFailed', 'conditionally_recoverable'),
    ('ValidationFailed', 'conditionally_recoverable'),
    ('MergeConflict', 'conditionally_recoverable'),
    ('PermissionError', 'permanent');
COMMENT ON TABLE error_categories IS
    'The failure category of each error type; a type with no row, and an item without attempts, is unclassified';

-- ----------------------------------------------------------------------
-- Retention policies (`dlq retention`): job_id / category NULL = any; the
-- most specific matching policy applies to an item ((job, category) over
-- (job, any) and (any, category), those over (any, any); of a matching
-- (job, any) and (any, category), the one that keeps longer); max_age_seconds
-- NULL keeps forever. `dlq retention apply` removes items whose last attempt is
-- older than their policy's age, with a `purged` event naming the policy.

CREATE TABLE retention_policies (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id          text COLLATE "C",
    category        text COLLATE "C" CHECK (category IS NULL OR category IN ('transient', 'conditionally_recoverable', 'permanent', 'unclassified')),
    max_age_seconds bigint CHECK (max_age_seconds IS NULL OR max_age_seconds > 0),
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
-- One policy per scope. NULLs are distinct in a UNIQUE index, so the scope
-- is spelled out: "any job" must not equal a job named ''.
CREATE UNIQUE INDEX retention_policies_scope ON retention_policies (
    (job_id IS NULL), COALESCE(job_id, ''), COALESCE(category, '')
);
COMMENT ON TABLE retention_policies IS
    'How long items are kept, by job and category (NULL: any); the most specific matching policy applies; max_age_seconds NULL keeps forever';

-- ----------------------------------------------------------------------
-- The audit log: one row per change to an item or a job (added, merged,
-- removed, evicted, purged, cleared, imported, marked, capacity_set,
-- job_created, retried_ok, retried_failed, requeued, job_removed); an
-- import also writes one `imported` row per job (item_id NULL) summing it
-- up. Nothing leaves the DLQ without a row here. detail is JSON.

CREATE TABLE events (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time    timestamptz NOT NULL,
    kind    text COLLATE "C" NOT NULL,
    job_id  text COLLATE "C",
    item_id text COLLATE "C",
    detail  jsonb
);
COMMENT ON TABLE events IS
    'The audit log: one row per change to an item or a job; nothing leaves the DLQ without a row here';
COMMENT ON COLUMN events.kind IS 'added, merged, removed, evicted, purged, cleared, imported, marked, capacity_set, job_created, retried_ok, retried_failed, requeued, job_removed';

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
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id        text COLLATE "C" NOT NULL UNIQUE,
    job_id        text COLLATE "C" NOT NULL,
    host          text COLLATE "C" NOT NULL,
    pid           bigint NOT NULL,
    started_at    timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL,
    ended_at      timestamptz,
    -- running, finished, interrupted (a status of crashed is worked out when
    -- read: running, but the process is gone or its heartbeat stopped)
    status        text COLLATE "C" NOT NULL,
    -- The command line parameters (command, parallel, filter, ...), JSON.
    parameters    jsonb NOT NULL,
    attempted     bigint NOT NULL DEFAULT 0,
    succeeded     bigint NOT NULL DEFAULT 0,
    failed        bigint NOT NULL DEFAULT 0,
    skipped       bigint NOT NULL DEFAULT 0,
    attempts      bigint NOT NULL DEFAULT 0
);
COMMENT ON TABLE retry_runs IS
    'One row per `dlq retry` run (and per library retry): who ran it, its parameters and counts';
COMMENT ON COLUMN retry_runs.status IS 'running, finished or interrupted (crashed is worked out when read: running, but the process is gone or its heartbeat stopped)';
COMMENT ON COLUMN retry_runs.parameters IS 'The command line parameters (command, parallel, filter, ...)';

CREATE INDEX retry_runs_job ON retry_runs (job_id, id);

-- ----------------------------------------------------------------------
-- What `dlq check --new-signature` saw at its last run, per check name
-- (V6): the check's scope and time, and the signatures present then.

CREATE TABLE checks (
    name       text COLLATE "C" NOT NULL PRIMARY KEY,
    -- The job the check looks at; NULL: every job. A check run with another
    -- scope under the same name starts a new baseline.
    job_id     text COLLATE "C",
    checked_at timestamptz NOT NULL
);
COMMENT ON TABLE checks IS
    'One row per named `dlq check --new-signature`: its scope and when it last ran';
COMMENT ON COLUMN checks.job_id IS 'The job the check looks at; NULL: every job (another scope under the same name starts a new baseline)';

-- The error signatures present at a check's last run. Each run writes only
-- the difference (signatures that appeared or went).
CREATE TABLE check_signatures (
    name            text COLLATE "C" NOT NULL REFERENCES checks (name) ON DELETE CASCADE,
    error_signature text COLLATE "C" NOT NULL,
    PRIMARY KEY (name, error_signature)
);
COMMENT ON TABLE check_signatures IS
    'The error signatures present at a check''s last run';

-- ----------------------------------------------------------------------
-- Views for reading: every attempt with its item (failure_log), and each
-- item with its last attempt and worktree (item_summary, with the category
-- of that attempt's error type).

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
COMMENT ON VIEW failure_log IS
    'One row per attempt, with the job and item it belongs to';

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
    COALESCE(c.category, 'unclassified') AS category
FROM items AS i
LEFT JOIN worktree_artifacts AS w ON w.item_key = i.id
LEFT JOIN failure_history AS f ON f.id = (
    SELECT l.id FROM failure_history AS l
    WHERE l.item_key = i.id
    ORDER BY l.timestamp DESC, l.timestamp_ns DESC, l.attempt_number DESC
    LIMIT 1
)
LEFT JOIN error_categories AS c ON c.error_type = f.error_type;
COMMENT ON VIEW item_summary IS
    'One row per item with its last attempt''s error (latest timestamp, then highest attempt_number), its worktree and that error''s category';
