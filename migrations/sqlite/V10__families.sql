-- Failure families (docs/families.md): every item's cause, mined from its
-- last attempt when it is written. A family keeps its id as its template
-- generalises.
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
    rev         INTEGER NOT NULL
);
CREATE INDEX families_rev ON families (rev);

-- The family of the item's last attempt (NULL: not mined yet, see
-- `dlq families rebuild`). Families are never deleted, so no item points
-- at a missing one (dlq writes both; no foreign key, which SQLite would
-- check on every insert of an import).
ALTER TABLE items ADD COLUMN family_id INTEGER;
CREATE INDEX items_family ON items (family_id);

DROP VIEW item_summary;
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
