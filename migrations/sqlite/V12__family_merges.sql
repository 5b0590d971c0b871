-- A family merged into another by a person (`dlq families merge`): its
-- items moved there, and a failure the miner still finds in it goes there
-- too. NULL for a family of its own. A rebuild that retires a family
-- points it here at the family that took its items, so nothing is left
-- pointing at a family that no longer gathers anything.
ALTER TABLE families ADD COLUMN merged_into INTEGER;
