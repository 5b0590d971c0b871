-- dlqlite schema, version 2: retry runs and lease lookups.
--
-- Every `dlq retry` run is recorded here. A run holds leases on the items it
-- works on (items.lease_owner = run_id, items.lease_expires) and renews them,
-- with heartbeat_at, while it is alive; a run whose process is gone shows as
-- crashed, and its leases simply expire.
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

-- Renewing and releasing a run's leases.
CREATE INDEX items_lease_owner ON items (lease_owner) WHERE lease_owner IS NOT NULL;
