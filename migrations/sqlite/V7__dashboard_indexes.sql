-- An item's audit trail (the dashboard's item page, `events --item-id`):
-- one index seek instead of a walk of the whole log.
CREATE INDEX events_item ON events (item_id, id);

-- The dashboard sorts items by failure_count, of one job or of all, a page
-- at a time.
CREATE INDEX items_job_failure_count ON items (job_id, failure_count);
CREATE INDEX items_failure_count ON items (failure_count);
