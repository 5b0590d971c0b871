//! Read-only databases and files that are not dlq databases, through the
//! real binary: reads work on a database dlq may not write, writes fail in
//! one line naming the file and why, and an empty file, another
//! application's SQLite database or a file that is not SQLite is refused and
//! left as it was.

use crate::common::*;
use std::path::{Path, PathBuf};

/// Each file of `dir` with its bytes and mtime.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let meta = std::fs::metadata(&p).unwrap();
            (
                p.clone(),
                std::fs::read(&p).unwrap(),
                meta.modified().unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// The one line a command wrote on stderr (the test fails on more).
fn one_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr).into_owned();
    assert_eq!(text.lines().count(), 1, "not one line: {text:?}");
    text.trim_end().to_string()
}

/// `chattr +i` on `paths` (root ignores file modes); false where the
/// flag cannot be set (no chattr, a file system without it).
fn immutable(paths: &[&Path]) -> bool {
    std::process::Command::new("chattr")
        .arg("+i")
        .args(paths)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Takes the flag off again when dropped, so a failing test still cleans up.
struct Mutable(Vec<PathBuf>);

impl Drop for Mutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .args(&self.0)
            .status();
    }
}

/// A database with one item in `dir`, checkpointed and closed, so only
/// the `.db` file is left (as after a clean close by the sqlite3 shell).
fn closed_database(dir: &Path) -> PathBuf {
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let conn = sql(&db);
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    assert!(!dir.join("dlq.db-wal").exists());
    db
}

const READS: &[&[&str]] = &[
    &["list"],
    &["stats"],
    &["inspect", "--job-id", "j", "a"],
    &["analyze", "--job-id", "j"],
    &["events"],
    &["jobs"],
    &["db"],
    &["capacity"],
    &["sql", "SELECT count(*) FROM items"],
    &["retry", "j", "--dry-run"],
];

/// Runs every read command: exit 0, nothing on stderr but the one
/// `warning` line when given.
fn reads_work(db: &Path, warning: Option<&str>) {
    for args in READS {
        let output = run(dlq(db).args(*args));
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        match warning {
            None => assert!(
                output.stderr.is_empty(),
                "{args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            ),
            Some(text) => {
                let line = one_line(&output.stderr);
                assert!(line.contains("warning") && line.contains(text), "{line}");
            }
        }
    }
    let listed = ok(dlq(db).args(["list", "--format", "json"]));
    assert!(listed.contains("\"a\""), "{listed}");
    // A copy only reads its source (it was opened for writing, and failed),
    // but refuses one whose WAL it cannot read: it would miss what is there.
    let copied = db.parent().unwrap().parent().unwrap().join("copied.db");
    remove_db(&copied);
    let mut copy = dlq(db);
    copy.arg("copy")
        .arg("--from")
        .arg(db)
        .arg("--to")
        .arg(&copied);
    if warning.is_some() {
        let stderr = fails(&mut copy);
        assert!(
            stderr.contains("cannot be read") && stderr.trim().lines().count() == 1,
            "{stderr}"
        );
    } else {
        ok(&mut copy);
        assert_eq!(
            count(&copied, "SELECT COUNT(*) FROM items WHERE item_id = 'a'"),
            1
        );
    }
    // A dry-run import reads the database into memory: a read too.
    let sample = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy");
    let dry = run(dlq(db).args(["import", "--dry-run"]).arg(sample));
    let said = String::from_utf8_lossy(&dry.stderr);
    assert!(
        said.contains("dry run, nothing written: 3 job(s)"),
        "{said}"
    );
    assert_eq!(
        dry.status.code(),
        Some(1),
        "the sample's rejected files: {said}"
    );
}

/// Every write command fails: exit 1, one line naming the file and `why`.
fn writes_fail(db: &Path, input: &Path, why: &str) {
    for args in [
        vec!["add", "--job-id", "j", input.to_str().unwrap()],
        vec!["import", input.to_str().unwrap()],
        vec!["mark", "a", "--job-id", "j", "--manual-review"],
        vec!["purge", "--older-than-days", "0", "--yes"],
        vec!["clear", "j", "--yes"],
        vec!["capacity", "--set", "5"],
        vec!["db", "--recount"],
    ] {
        let output = run(dlq(db).args(&args));
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let line = one_line(&output.stderr);
        assert_eq!(
            line,
            format!("dlq: error: cannot write {}: {why}", db.display()),
            "{args:?}"
        );
    }
}

/// A WAL database alone in a read-only directory (no -wal, no -shm, none
/// can be made): SQLite cannot open it read-only unless told it is
/// immutable. Reads work, writes name the directory, nothing changes.
#[test]
fn a_database_in_a_read_only_directory_is_read_and_not_written() {
    if crate::common::sqlite_only("a read-only directory") {
        return;
    }
    let dir = TempDir::new("ro-dir");
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    let db = closed_database(&home);
    let input = write_json(
        dir.path(),
        "b.json",
        &item("b", 1, "2025-01-02T00:00:00Z", "x"),
    );
    if !immutable(&[&home]) {
        eprintln!("skipped: chattr +i is not available here");
        return;
    }
    let _undo = Mutable(vec![home.clone()]);
    let before = snapshot(&home);
    reads_work(&db, None);
    writes_fail(
        &db,
        &input,
        &format!("the directory {} is read-only", home.display()),
    );
    assert_eq!(snapshot(&home), before);
}

/// The same with a WAL that holds data but no -shm: the reader cannot see
/// the WAL, and says so once per command.
#[test]
fn an_unreadable_wal_is_one_warning() {
    if crate::common::sqlite_only("SQLite's WAL") {
        return;
    }
    let dir = TempDir::new("ro-wal");
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    let db = closed_database(&home);
    add_lines(&db, "k", [item("b", 1, "2025-01-02T00:00:00Z", "x")]);
    std::fs::remove_file(home.join("dlq.db-shm")).unwrap();
    assert!(std::fs::metadata(home.join("dlq.db-wal")).unwrap().len() > 0);
    if !immutable(&[&home]) {
        eprintln!("skipped: chattr +i is not available here");
        return;
    }
    let _undo = Mutable(vec![home.clone()]);
    let before = snapshot(&home);
    reads_work(&db, Some("dlq.db-wal"));
    assert_eq!(snapshot(&home), before);
}

/// A read-only database file in a writable directory: reads work (SQLite
/// makes its -wal and -shm beside it), writes name the file.
#[test]
fn a_read_only_file_is_read_and_not_written() {
    if crate::common::sqlite_only("a read-only database file") {
        return;
    }
    let dir = TempDir::new("ro-file");
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    let db = closed_database(&home);
    let input = write_json(
        dir.path(),
        "b.json",
        &item("b", 1, "2025-01-02T00:00:00Z", "x"),
    );
    if !immutable(&[&db]) {
        eprintln!("skipped: chattr +i is not available here");
        return;
    }
    let _undo = Mutable(vec![db.clone()]);
    let bytes = std::fs::read(&db).unwrap();
    let mtime = std::fs::metadata(&db).unwrap().modified().unwrap();
    reads_work(&db, None);
    writes_fail(&db, &input, "the file is read-only");
    assert_eq!(std::fs::read(&db).unwrap(), bytes);
    assert_eq!(std::fs::metadata(&db).unwrap().modified().unwrap(), mtime);
}

/// Files that are not dlq databases are refused by reads and writes
/// alike, in one line, and left unchanged: an empty file (dlq makes its
/// own, so an empty one is someone's `touch`), another application's
/// SQLite database, a file that is not SQLite.
#[test]
fn files_that_are_not_dlq_databases_are_refused_unchanged() {
    if crate::common::sqlite_only("SQLite files that are not dlq databases") {
        return;
    }
    let dir = TempDir::new("not-dlq");
    let input = write_json(
        dir.path(),
        "b.json",
        &item("b", 1, "2025-01-02T00:00:00Z", "x"),
    );
    let empty = dir.join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let foreign = dir.join("app.db");
    sql(&foreign)
        .execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me');")
        .unwrap();
    let text = dir.join("notes.txt");
    std::fs::write(&text, "not a database at all\n").unwrap();
    for (file, why) in [
        (&empty, "(empty file)"),
        (&foreign, "(a SQLite database without the dlq schema)"),
        (&text, "(not a SQLite database)"),
    ] {
        let before = snapshot(dir.path());
        let commands: Vec<Vec<&str>> = vec![
            vec!["list"],
            vec!["stats"],
            vec!["db"],
            vec!["capacity"],
            vec!["add", "--job-id", "j", input.to_str().unwrap()],
            vec!["import", input.to_str().unwrap()],
            vec!["capacity", "--set", "5"],
        ];
        for args in commands {
            let output = run(dlq(file).args(&args));
            assert_eq!(output.status.code(), Some(1), "{args:?} on {file:?}");
            let line = one_line(&output.stderr);
            assert_eq!(
                line,
                format!("dlq: error: {} is not a dlq database {why}", file.display()),
                "{args:?}"
            );
        }
        assert_eq!(
            snapshot(dir.path()),
            before,
            "{file:?} or a file beside it changed"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&empty).unwrap().permissions().mode() & 0o777,
        0o644
    );
}

/// A SQLite file without any table is not a dlq database for a read (a
/// read would have to migrate it); a write makes it one.
#[test]
fn a_blank_sqlite_file_is_refused_by_reads() {
    if crate::common::sqlite_only("a blank SQLite file") {
        return;
    }
    let dir = TempDir::new("blank-sqlite");
    let db = dir.join("blank.db");
    sql(&db).execute_batch("PRAGMA user_version = 7;").unwrap();
    let before = std::fs::read(&db).unwrap();
    let line = one_line(&run(dlq(&db).arg("list")).stderr);
    assert!(
        line.ends_with("(a SQLite database without the dlq schema)"),
        "{line}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

/// A database dlq creates is 0600, and no temporary file is left beside it.
#[test]
fn a_new_database_is_private_and_alone() {
    if crate::common::sqlite_only("the database file's mode") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("new-db");
    let db = dir.join("sub").join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    assert_eq!(
        std::fs::metadata(&db).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(
        names
            .iter()
            .all(|n| n == "dlq.db" || n == "dlq.db-wal" || n == "dlq.db-shm"),
        "{names:?}"
    );
}

/// Another user, who may write neither the database nor its directory,
/// reads a WAL database with no -shm (as `sqlite3` leaves one when it
/// closes): SQLite says "attempt to write a readonly database" there rather
/// than "unable to open", and the read commands, check and metrics must
/// still work. As root the commands run as `nobody` (setpriv); otherwise
/// as this user with the modes taken away.
#[test]
fn another_user_reads_a_database_they_may_not_write() {
    if crate::common::sqlite_only("file permissions") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("ro-user");
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    let db = closed_database(&home);
    assert!(!home.join("dlq.db-shm").exists());
    // A copy of dlq that the other user can run.
    let binary = dir.join("dlq");
    std::fs::copy(env!("CARGO_BIN_EXE_dlq"), &binary).unwrap();
    let root = unsafe { libc::geteuid() } == 0;
    let set_mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    for path in [dir.path(), home.as_path(), binary.as_path()] {
        set_mode(path, 0o755);
    }
    set_mode(&db, 0o644);
    if !root {
        set_mode(&home, 0o555);
        set_mode(&db, 0o444);
    }
    // dlq --db DB, as the other user.
    let other_user = || {
        let mut command = if root {
            let mut c = std::process::Command::new("setpriv");
            c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                .arg(&binary);
            c
        } else {
            std::process::Command::new(&binary)
        };
        command.env_remove("DLQ_DB").arg("--db").arg(&db);
        command
    };
    let before = snapshot(&home);
    for args in [
        &["list"][..],
        &["stats"],
        &["check", "--max-items", "5"],
        &["metrics"],
        &["watch", "--once", "--from-start"],
    ] {
        // The copied binary can be briefly "busy": another test thread that
        // forked while the copy was open for writing holds it until its
        // child execs (ETXTBSY). Waiting it out is the known remedy.
        let mut output = run(other_user().args(args));
        for _ in 0..50 {
            if !String::from_utf8_lossy(&output.stderr).contains("Text file busy") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            output = run(other_user().args(args));
        }
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // A long-running watch could never see what comes later there: it
    // says so and stops, instead of printing nothing for ever.
    let mut command = other_user();
    command.arg("watch");
    let output = run(&mut command);
    assert_eq!(output.status.code(), Some(1));
    assert!(one_line(&output.stderr).contains("cannot follow"));
    assert_eq!(snapshot(&home), before);
    set_mode(&home, 0o755);
}
