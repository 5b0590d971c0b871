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
/// none around punctuation. (No definition here has "--" in a string.)
fn normalise(sql: &str) -> String {
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
