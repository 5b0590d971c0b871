-- dlqlite schema, version 15: a full-text index of every attempt's
-- error_message, so that `error_message contains "x"` and `matches` in a
-- filter read the attempts whose message may hold the text instead of
-- every message (0.6-1.4 s at 1,000,000 items).
--
-- What it is: an FTS5 table of trigrams (every run of three characters,
-- case folded) over failure_history.error_message, one row per attempt
-- under the attempt's id. It keeps no copy of the text (content=
-- failure_history) and no positions (detail=none: a third of the size):
-- a search asks for every trigram of the text sought, which some messages
-- have without holding the text in one piece, so the engine checks each
-- candidate with the exact test (instr(), as before the index) and the
-- results are exactly those of a scan. Text under three characters has
-- no trigram: those searches read every message, as before.
--
-- Every attempt, not only each item's last: `error_message` in a filter
-- means any attempt, and the last one changes under merges. The triggers
-- below keep the index equal to the rows for every change, dlq's and a
-- person's in the sqlite3 shell alike (that shell needs FTS5, which
-- Debian's and the bundled SQLite have). `INSERT INTO failure_text
-- (failure_text, rank) VALUES ('integrity-check', 1)` checks it against
-- the rows; `INSERT INTO failure_text (failure_text) VALUES ('rebuild')`
-- makes it again from them.
CREATE VIRTUAL TABLE failure_text USING fts5(
    error_message,
    content = 'failure_history',
    content_rowid = 'id',
    tokenize = 'trigram',
    detail = none,
    columnsize = 0
);

CREATE TRIGGER failure_text_insert AFTER INSERT ON failure_history
BEGIN
    INSERT INTO failure_text (rowid, error_message) VALUES (NEW.id, NEW.error_message);
END;

-- The index forgets a row by being told its old text ('delete').
CREATE TRIGGER failure_text_delete AFTER DELETE ON failure_history
BEGIN
    INSERT INTO failure_text (failure_text, rowid, error_message)
    VALUES ('delete', OLD.id, OLD.error_message);
END;

CREATE TRIGGER failure_text_update AFTER UPDATE OF id, error_message ON failure_history
BEGIN
    INSERT INTO failure_text (failure_text, rowid, error_message)
    VALUES ('delete', OLD.id, OLD.error_message);
    INSERT INTO failure_text (rowid, error_message) VALUES (NEW.id, NEW.error_message);
END;

-- The attempts already stored.
INSERT INTO failure_text (failure_text) VALUES ('rebuild');
