-- The dashboard's Patterns page of one job counts its items per failure
-- family from this index (SQLite's V11).
CREATE INDEX items_job_family ON items (job_id, family_id);
