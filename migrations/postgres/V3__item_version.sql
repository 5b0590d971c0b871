-- A per-item change counter (SQLite's V9 says why). dlq's writers bump it
-- themselves; the trigger bumps it for any other update that changes what
-- the item is (psql), and not for leases.
ALTER TABLE items ADD COLUMN version bigint NOT NULL DEFAULT 0;

CREATE FUNCTION dlq_items_version() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.version = OLD.version AND (
        NEW.job_id, NEW.item_id, NEW.item_data::text, NEW.first_attempt, NEW.first_attempt_ns,
        NEW.last_attempt, NEW.last_attempt_ns, NEW.failure_count, NEW.error_signature,
        NEW.reprocess_eligible, NEW.manual_review_required, NEW.extra::text, NEW.omitted_fields::text
    ) IS DISTINCT FROM (
        OLD.job_id, OLD.item_id, OLD.item_data::text, OLD.first_attempt, OLD.first_attempt_ns,
        OLD.last_attempt, OLD.last_attempt_ns, OLD.failure_count, OLD.error_signature,
        OLD.reprocess_eligible, OLD.manual_review_required, OLD.extra::text, OLD.omitted_fields::text
    ) THEN
        NEW.version := OLD.version + 1;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER items_version BEFORE UPDATE ON items
FOR EACH ROW EXECUTE FUNCTION dlq_items_version();
