//! docs/schema.sql is the schema a fresh database gets: the same tables,
//! indexes, triggers and views with the same definitions (comments and
//! layout aside).

use crate::common::TempDir;
use rusqlite::Connection;
use std::collections::BTreeMap;

/// (type, name) -> (table, definition without comments or layout).
fn objects(conn: &Connection) -> BTreeMap<(String, String), (String, String)> {
    let mut stmt = conn
        .prepare("SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master")
        .unwrap();
    stmt.query_map([], |row| {
        Ok((
            (row.get(0)?, row.get(1)?),
            (row.get(2)?, normalise(&row.get::<_, String>(3)?)),
        ))
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

/// SQL without `--` comments, with runs of whitespace made one space and
/// none around punctuation, and without the quotes SQLite puts around a
/// renamed table's name (V14 made `items` again under another name). No
/// definition here has "--" or a double quote in a string.
fn normalise(sql: &str) -> String {
    let sql = sql.replace('"', "");
    let code: Vec<&str> = sql
        .lines()
        .map(|line| line.split("--").next().unwrap_or(""))
        .collect();
    let words = code.join(" ");
    let words: Vec<&str> = words.split_whitespace().collect();
    let mut text = words.join(" ");
    for p in ["(", ")", ",", ";"] {
        text = text
            .replace(&format!(" {p}"), p)
            .replace(&format!("{p} "), p);
    }
    text
}

#[test]
fn docs_schema_sql_is_the_schema_of_a_fresh_database() {
    if crate::common::sqlite_only("docs/schema.sql is SQLite's schema") {
        return;
    }
    let dir = TempDir::new("schema");
    let db = dir.join("dlq.db");
    drop(dlqlite::Dlq::open(super::common::target(&db)).unwrap());
    let migrated = objects(&Connection::open(&db).unwrap());

    let documented = Connection::open_in_memory().unwrap();
    let text = std::fs::read_to_string(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("docs/schema.sql"),
    )
    .unwrap();
    documented.execute_batch(&text).unwrap();
    let documented = objects(&documented);

    let names =
        |m: &BTreeMap<(String, String), (String, String)>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&documented), names(&migrated), "the same objects");
    for (key, definition) in &migrated {
        assert_eq!(&documented[key], definition, "{key:?} differs");
    }
}

/// An upgrade to V14 (items made again with AUTOINCREMENT) keeps every
/// item with its id, version and family, every attempt and artifact, and
/// the counters; and the ids it hands out after never repeat one. The
/// database before V14 is made by hand from a fresh one: the table's
/// definition without AUTOINCREMENT and the migration's record removed, so
/// the next open applies V14 to a database full of items.
#[test]
fn the_upgrade_to_never_reused_ids_keeps_every_item_and_attempt() {
    if crate::common::sqlite_only("V14 is SQLite's migration") {
        return;
    }
    use crate::common::{add_lines, count, dlq, item, ok, strings};
    let dir = TempDir::new("schema-v14");
    let db = dir.join("dlq.db");
    let mut two = item("b", 2, "2025-01-02T00:00:00Z", "boom twice");
    two["failure_history"]
        .as_array_mut()
        .unwrap()
        .push(item("b", 1, "2025-01-01T00:00:00Z", "boom once")["failure_history"][0].clone());
    add_lines(
        &db,
        "j",
        [
            item("a", 1, "2025-01-01T00:00:00Z", "boom"),
            two,
            item("c", 1, "2025-01-03T00:00:00Z", "boom"),
        ],
    );
    add_lines(&db, "k", [item("x", 1, "2025-01-04T00:00:00Z", "boom")]);
    // "x" held the highest id; it goes before the upgrade, while a process
    // may still hold a read of it.
    let removed = count(&db, "SELECT id FROM items WHERE item_id = 'x'");
    crate::common::exec_by_hand(&db, "DELETE FROM items WHERE item_id = 'x'");
    let before_items = strings(
        &db,
        "SELECT id || ' ' || job_id || ' ' || item_id || ' ' || version || ' ' || COALESCE(family_id, '') FROM items ORDER BY id",
    );
    let before_attempts = count(&db, "SELECT COUNT(*) FROM failure_history");
    let before_jobs = strings(
        &db,
        "SELECT job_id || ' ' || item_count || ' ' || failure_count_sum FROM jobs ORDER BY job_id",
    );
    {
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(
            "PRAGMA writable_schema = ON;
             UPDATE sqlite_master SET sql = replace(sql, 'AUTOINCREMENT', '')
                 WHERE type = 'table' AND name = 'items';
             PRAGMA writable_schema = OFF;
             DELETE FROM sqlite_sequence;
             DROP TRIGGER failure_text_insert;
             DROP TRIGGER failure_text_delete;
             DROP TRIGGER failure_text_update;
             DROP TABLE failure_text;
             DELETE FROM refinery_schema_history WHERE version >= 14;",
        )
        .unwrap();
    }
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'items' AND sql LIKE '%AUTOINCREMENT%'"),
        0
    );
    let top = count(&db, "SELECT MAX(id) FROM items");
    assert!(top > 0);
    ok(dlq(&db).arg("stats"));
    assert_eq!(
        count(&db, "SELECT MAX(version) FROM refinery_schema_history"),
        crate::common::supported_schema_version()
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'items' AND sql LIKE '%AUTOINCREMENT%'"),
        1
    );
    assert_eq!(
        strings(
            &db,
            "SELECT id || ' ' || job_id || ' ' || item_id || ' ' || version || ' ' || COALESCE(family_id, '') FROM items ORDER BY id",
        ),
        before_items
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM failure_history"),
        before_attempts
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM failure_history f WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.id = f.item_key)"
        ),
        0
    );
    assert_eq!(
        strings(
            &db,
            "SELECT job_id || ' ' || item_count || ' ' || failure_count_sum FROM jobs ORDER BY job_id",
        ),
        before_jobs
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM item_summary"),
        before_items.len() as i64
    );
    // An item stored after the upgrade never gets the id of one removed
    // before it (which no table remembers).
    add_lines(&db, "k", [item("x", 1, "2025-01-04T00:00:00Z", "boom")]);
    assert!(count(&db, "SELECT id FROM items WHERE item_id = 'x'") > removed);
    // The highest item goes and comes back: a new id, above every one used.
    crate::common::exec_by_hand(&db, "DELETE FROM items WHERE item_id = 'c'");
    add_lines(&db, "j", [item("c", 1, "2025-01-03T00:00:00Z", "boom")]);
    assert!(count(&db, "SELECT id FROM items WHERE item_id = 'c'") > top);
    // The triggers came back with the table: a hand edit bumps the version
    // and moves the counters.
    crate::common::exec_by_hand(
        &db,
        "UPDATE items SET failure_count = 7 WHERE item_id = 'c'",
    );
    assert_eq!(
        count(&db, "SELECT version FROM items WHERE item_id = 'c'"),
        1
    );
    assert_eq!(
        count(&db, "SELECT failure_count_sum FROM jobs WHERE job_id = 'j'"),
        count(
            &db,
            "SELECT SUM(failure_count) FROM items WHERE job_id = 'j'"
        )
    );
    assert_eq!(
        count(
            &db,
            "SELECT SUM(failure_count) FROM items WHERE job_id = 'j'"
        ),
        1 + 2 + 7
    );
}

/// An upgrade to V15 (the message search index) indexes the attempts
/// already stored, and searches then find what a scan finds. The database
/// before V15 is a fresh one with the index and its record removed.
#[test]
fn the_upgrade_to_message_search_indexes_the_attempts_already_stored() {
    if crate::common::sqlite_only("V15 is SQLite's migration") {
        return;
    }
    use crate::common::{add_lines, count, dlq, item, ok};
    let dir = TempDir::new("schema-v15");
    let db = dir.join("dlq.db");
    let mut two = item(
        "b",
        2,
        "2025-01-02T00:00:00Z",
        "Connection refused at db:5432",
    );
    two["failure_history"].as_array_mut().unwrap().push(
        item("b", 1, "2025-01-01T00:00:00Z", "timeout reading /var/x")["failure_history"][0]
            .clone(),
    );
    add_lines(
        &db,
        "j",
        [
            item("a", 1, "2025-01-01T00:00:00Z", "connection REFUSED"),
            two,
            item("c", 1, "2025-01-03T00:00:00Z", "all good"),
        ],
    );
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "DROP TRIGGER failure_text_insert;
             DROP TRIGGER failure_text_delete;
             DROP TRIGGER failure_text_update;
             DROP TABLE failure_text;
             DELETE FROM refinery_schema_history WHERE version = 15;",
        )
        .unwrap();
    ok(dlq(&db).arg("stats"));
    assert_eq!(
        count(&db, "SELECT MAX(version) FROM refinery_schema_history"),
        15
    );
    assert!(crate::counters::search_index_drift(&db).is_empty());
    let listed = |filter: &str| -> Vec<String> {
        let out = dlq(&db)
            .args(["list", "--filter", filter, "--format", "json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{filter}: {out:?}");
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut ids: Vec<String> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["item_id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(listed("error_message contains \"refused\""), ["b"]);
    assert_eq!(
        listed("error_message matches \"REFUSED connection\""),
        ["a", "b"]
    );
    assert_eq!(listed("error_message contains \"/var/x\""), ["b"]);
    assert!(listed("last.error_message contains \"/var/x\"").is_empty());
    assert_eq!(listed("last.error_message matches \"db:5432\""), ["b"]);
}
