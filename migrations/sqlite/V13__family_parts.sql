-- What must be equal for two failures to share a family, as one text: the
-- number of words of the template, the error type and the crash site,
-- joined by char(31) (an absent error type or site is empty). A process
-- that mines loads only the families of the parts its failures fall in,
-- so one add into a database of 100,000 families reads a few, not all
-- (docs/families.md, "Several writers"). Two parts whose texts are equal
-- only look alike to this index: the miner compares the fields themselves.
ALTER TABLE families ADD COLUMN part TEXT;
UPDATE families SET part =
    json_array_length(state, '$.slots') || char(31) || COALESCE(error_type, '')
    || char(31) || COALESCE(site, '');
CREATE INDEX families_part ON families (part);
