-- See SQLite's V12: the family a person merged this one into (or a
-- rebuild retired it into); NULL for a family of its own.
ALTER TABLE families ADD COLUMN merged_into bigint;
