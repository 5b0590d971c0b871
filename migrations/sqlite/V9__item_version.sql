-- A per-item change counter. Whatever acts on an item it counted or
-- claimed earlier (a retry that succeeded, a confirmed delete or mark, a
-- take) checks that the version is still the one it saw, so an item that
-- changed meanwhile (a merge, a mark, a hand edit) is never removed on the
-- strength of an older look at it.
--
-- dlq's writers bump it themselves (a merge may add only an attempt row
-- and leave the item row's values as they were); the trigger bumps it for
-- any other update that changes what the item is (the sqlite3 shell),
-- and stays out of the way of leases, which are not changes to the item.
ALTER TABLE items ADD COLUMN version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER items_version
AFTER UPDATE OF job_id, item_id, item_data, first_attempt, last_attempt, failure_count,
    error_signature, reprocess_eligible, manual_review_required, extra, omitted_fields ON items
WHEN NEW.version = OLD.version AND (
    NEW.job_id IS NOT OLD.job_id OR NEW.item_id IS NOT OLD.item_id
    OR NEW.item_data IS NOT OLD.item_data
    OR NEW.first_attempt IS NOT OLD.first_attempt OR NEW.last_attempt IS NOT OLD.last_attempt
    OR NEW.failure_count IS NOT OLD.failure_count OR NEW.error_signature IS NOT OLD.error_signature
    OR NEW.reprocess_eligible IS NOT OLD.reprocess_eligible
    OR NEW.manual_review_required IS NOT OLD.manual_review_required
    OR NEW.extra IS NOT OLD.extra OR NEW.omitted_fields IS NOT OLD.omitted_fields)
BEGIN
    UPDATE items SET version = OLD.version + 1 WHERE id = NEW.id;
END;
