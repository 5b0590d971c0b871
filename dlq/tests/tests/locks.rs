//! A process's POSIX locks on the database survive whatever else the
//! process does: closing any descriptor of a file drops every lock the
//! process holds on it (POSIX), and a `sqlite3` that then exits believes it
//! is the last user, checkpoints, and deletes the `-wal` the first handle is
//! still committing into. These tests open second handles of every kind
//! beside a live one, let a real `sqlite3` run and exit, and then check that
//! every add acknowledged afterwards is still there after a reopen.

use crate::common::*;
use dlqlite::{Dlq, OpenOptions};
use std::path::Path;
use std::process::Command;

fn one_item(id: &str) -> dlqlite::DeadLetteredItem {
    dlqlite::DeadLetteredItem::from_json_str(
        &item(id, 1, "2025-01-01T00:00:00Z", "boom").to_string(),
    )
    .unwrap()
}

/// A real `sqlite3` process reads the database (as README "Querying with
/// sqlite3" suggests) and exits.
fn sqlite3_reads_and_exits(db: &Path) {
    let out = Command::new("sqlite3")
        .arg(db)
        .arg("SELECT count(*) FROM items;")
        .output()
        .expect("sqlite3 runs (scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Adds through `first` after `second` was opened (and maybe dropped) and
/// a `sqlite3` came and went; then every acknowledged item must be there
/// in a fresh process-wide open.
fn acknowledged_adds_survive(label: &str, second: impl FnOnce(&Path) -> Box<dyn std::any::Any>) {
    let dir = TempDir::new(label);
    let db = dir.join("dlq.db");
    let first = Dlq::open(&db).unwrap();
    first.add("j", &one_item("before")).unwrap();
    let other = second(&db);
    sqlite3_reads_and_exits(&db);
    for n in 0..20 {
        first.add("j", &one_item(&format!("after-{n}"))).unwrap();
    }
    sqlite3_reads_and_exits(&db);
    first.add("j", &one_item("last")).unwrap();
    drop(other);
    drop(first);
    let reopened = Dlq::open_existing(&db).unwrap();
    assert_eq!(
        reopened.job_stats("j").unwrap().total_items,
        22,
        "{label}: acknowledged adds were lost"
    );
    reopened.get(Some("j"), "last").unwrap();
    assert_eq!(count(&db, "SELECT count(*) FROM items"), 22, "{label}");
}

#[test]
fn a_second_handle_and_a_sqlite3_shell_lose_no_acknowledged_add() {
    if sqlite_only("the POSIX locks on the SQLite file") {
        return;
    }
    acknowledged_adds_survive("second-open", |db| Box::new(Dlq::open(db).unwrap()));
    acknowledged_adds_survive("second-open-dropped", |db| {
        drop(Dlq::open(db).unwrap());
        Box::new(())
    });
    acknowledged_adds_survive("open-existing", |db| {
        Box::new(Dlq::open_existing(db).unwrap())
    });
    acknowledged_adds_survive("read-only", |db| {
        Box::new(OpenOptions::new().read_only(true).open(db).unwrap())
    });
    acknowledged_adds_survive("scratch-copy", |db| {
        Box::new(OpenOptions::new().open_scratch_copy(db).unwrap())
    });
}

#[test]
fn the_database_is_refused_as_input_under_any_name() {
    if sqlite_only("the SQLite file's own names") {
        return;
    }
    let dir = TempDir::new("own-files");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let before = dump(&db);
    let link = dir.join("items.jsonl");
    std::fs::hard_link(&db, &link).unwrap();
    for input in [&db, &link] {
        let err = fails(dlq(&db).arg("add").arg("--job-id").arg("j").arg(input));
        assert!(err.contains("is the database itself"), "{err}");
        let err = fails(dlq(&db).arg("import").arg(input));
        assert!(err.contains("is the database itself"), "{err}");
    }
    assert_eq!(dump(&db), before);
}

/// The database (or its -wal) lying in an imported tree under an item's
/// name, hard-linked there: the import must not open it (its close would
/// drop the process's locks, as `check_file` once did). It is reported as
/// not read.
#[test]
fn an_import_never_opens_the_database_it_finds_in_its_tree() {
    if sqlite_only("a server database has no file to find") {
        return;
    }
    acknowledged_adds_survive("locks-import-tree", |db| {
        let items = db.parent().unwrap().join("tree/mapreduce/dlq/j/items");
        std::fs::create_dir_all(&items).unwrap();
        std::fs::hard_link(db, items.join("db.json")).unwrap();
        std::fs::hard_link(db.with_file_name("dlq.db-wal"), items.join("wal.json")).unwrap();
        let second = Dlq::open(db).unwrap();
        let report = dlqlite::import::import(
            &second,
            &[db.parent().unwrap().join("tree")],
            &Default::default(),
            |_| {},
        )
        .unwrap();
        let reasons: Vec<&str> = report
            .files_rejected
            .iter()
            .map(|r| r.error.as_str())
            .collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(
            reasons
                .iter()
                .all(|r| r.contains("is the database being written")),
            "{reasons:?}"
        );
        Box::new(second)
    });
}
