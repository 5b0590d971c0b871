-- dlqlite schema, version 6: what `dlq check --new-signature` saw last.
--
-- A check run from cron on one host must see what a check run on another
-- host (or as another user) saw, so its state lives here, keyed by the
-- check's name (`--name`, default "default") so that two different checks
-- do not take each other's news.

-- One row per named check: its scope and when it last ran.
CREATE TABLE checks (
    name       TEXT PRIMARY KEY NOT NULL,
    -- The job the check looks at; NULL: every job. A check run with another
    -- scope under the same name starts a new baseline.
    job_id     TEXT,
    checked_at TEXT NOT NULL
);

-- The error signatures present at a check's last run. Each run writes only
-- the difference (signatures that appeared or went), so a DLQ with 100,000
-- signatures costs one pass over two sorted indexes, not 100,000 writes.
CREATE TABLE check_signatures (
    name            TEXT NOT NULL REFERENCES checks (name) ON DELETE CASCADE,
    error_signature TEXT NOT NULL,
    PRIMARY KEY (name, error_signature)
) WITHOUT ROWID;
