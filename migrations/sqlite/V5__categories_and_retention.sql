-- dlqlite schema, version 5: failure categories and retention policies.
--
-- An item's category follows from the error type of its last attempt
-- (items.last_error_type) through error_categories. A team classifies its
-- own error names with `dlq categories set TYPE CATEGORY` (or an UPDATE in
-- sqlite3: nothing is cached, every reader looks the table up). A type with
-- no row here, and an item with no attempts, is 'unclassified'.
CREATE TABLE error_categories (
    error_type TEXT PRIMARY KEY NOT NULL,
    category   TEXT NOT NULL CHECK (category IN ('transient', 'conditionally_recoverable', 'permanent', 'unclassified'))
) WITHOUT ROWID;
-- The agent failure categories: transient failures clear up by themselves
-- (retry with backoff), conditionally recoverable ones need the input or the
-- environment changed first, permanent ones never succeed as they are.
INSERT INTO error_categories (error_type, category) VALUES
    ('Timeout', 'transient'),
    ('ResourceExhausted', 'transient'),
    ('WorktreeError', 'transient'),
    ('CommandFailed', 'conditionally_recoverable'),
    ('CommitValidationFailed', 'conditionally_recoverable'),
    ('ValidationFailed', 'conditionally_recoverable'),
    ('MergeConflict', 'conditionally_recoverable'),
    ('PermissionError', 'permanent');

-- How long items are kept, by job and category (`dlq retention`). NULL in
-- job_id or category means any. For each item the most specific policy
-- that matches applies: (job, category) over (job, any) and (any,
-- category), and those over (any, any); where a (job, any) and an (any,
-- category) policy both match, the one that keeps longer applies
-- (keep-forever is longest; equal ages: the job's), so nothing is removed
-- that a matching policy means to keep. max_age_seconds NULL keeps matching items
-- forever; otherwise `dlq retention apply` removes items whose last attempt
-- is older, each with a `purged` event naming the policy. No rows, the
-- default, removes nothing.
CREATE TABLE retention_policies (
    id              INTEGER PRIMARY KEY,
    job_id          TEXT,
    category        TEXT CHECK (category IS NULL OR category IN ('transient', 'conditionally_recoverable', 'permanent', 'unclassified')),
    max_age_seconds INTEGER CHECK (max_age_seconds IS NULL OR max_age_seconds > 0),
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
-- One policy per scope. NULLs are distinct in a UNIQUE index, so the scope
-- is spelled out: "any job" must not equal a job named ''.
CREATE UNIQUE INDEX retention_policies_scope ON retention_policies (
    job_id IS NULL, COALESCE(job_id, ''), COALESCE(category, '')
);

DROP VIEW item_summary;
-- One row per item with its last attempt's error and that error's category,
-- without surrogate keys.
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
    ORDER BY l.timestamp DESC, l.attempt_number DESC
    LIMIT 1
)
LEFT JOIN error_categories AS c ON c.error_type = f.error_type;
