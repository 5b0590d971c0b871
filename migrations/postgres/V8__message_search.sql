-- See SQLite's V15: an index that finds the attempts whose error_message
-- may hold a text, for `contains` and `matches` in filters. Here it is a
-- GIN index of pg_trgm's trigrams, which serves LIKE and ILIKE '%text%';
-- the engine checks each candidate with the exact test (strpos()), so the
-- results are those of a scan.
--
-- pg_trgm ships with PostgreSQL (contrib) and is a trusted extension
-- since PostgreSQL 13: a database owner may create it. Where it cannot be
-- created (not installed, or a role without the right), the schema is
-- the same without the index and searches read every message, as before
-- this version: slower, never different. `CREATE EXTENSION pg_trgm;`
-- and the CREATE INDEX below, run by hand later, add it.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm is not available (%): message searches will read every message', SQLERRM;
END
$$;

DO $$
DECLARE
    ops text;
BEGIN
    -- The operator class by its schema: the extension may live in one
    -- that is not on this connection's search_path.
    SELECT quote_ident(n.nspname) || '.gin_trgm_ops' INTO ops
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pg_trgm';
    IF ops IS NOT NULL THEN
        EXECUTE 'CREATE INDEX failure_history_message_trgm ON failure_history USING gin (error_message '
            || ops || ')';
    END IF;
END
$$;
