-- See SQLite's V13: the part of a family (words, error type and site,
-- joined by chr(31)), so a process that mines loads only the families of
-- the parts its failures fall in.
ALTER TABLE families ADD COLUMN part text COLLATE "C";
UPDATE families SET part =
    json_array_length(state -> 'slots')::text || chr(31) || COALESCE(error_type, '')
    || chr(31) || COALESCE(site, '');
CREATE INDEX families_part ON families (part);
