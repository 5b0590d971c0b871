//! Shared test helpers: temporary directories, running `dlq`, and legacy
//! item JSON.
//!
//! One switch runs the suite against PostgreSQL: `DLQ_TEST_DB=postgres`
//! (with `DLQ_TEST_PG_URL` naming a server, as scripts/test sets it). Tests
//! keep naming their database by a path in a temp dir; [`target`] turns
//! that path into a fresh database of its own on the server (created on
//! first use, dropped with the temp dir), and [`dlq`], [`count`],
//! [`strings`] and [`dump`] go there. Tests about the SQLite file itself
//! (permissions, WAL, corruption, PRAGMAs) ask [`sqlite_only`] and return.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let path =
            std::env::temp_dir().join(format!("dlqlite-test-{}-{label}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        pg::drop_under(&self.0);
    }
}

/// True when the suite runs against PostgreSQL (`DLQ_TEST_DB=postgres`).
pub fn on_postgres() -> bool {
    std::env::var("DLQ_TEST_DB").is_ok_and(|v| v == "postgres")
}

/// True (and a note on stderr) when the suite runs against PostgreSQL and
/// the calling test is about the SQLite file itself: the test returns.
pub fn sqlite_only(why: &str) -> bool {
    if on_postgres() {
        eprintln!("skipped on PostgreSQL: {why}");
    }
    on_postgres()
}

/// How many cases a property that opens a database per case runs: a
/// quarter on PostgreSQL, where each is a CREATE DATABASE and the
/// migrations on the server.
pub fn cases_with_a_database_each(on_sqlite: u64) -> u64 {
    if on_postgres() {
        (on_sqlite / 4).max(10)
    } else {
        on_sqlite
    }
}

/// What `--db` and `Dlq::open` get for the database a test names by
/// `path`: the path itself, or on PostgreSQL the URL of a database of its
/// own (created on first use).
pub fn target(path: &Path) -> PathBuf {
    if on_postgres() {
        PathBuf::from(pg::url_for(path))
    } else {
        path.to_path_buf()
    }
}

/// The PostgreSQL side of the switch: one database per test path.
pub mod pg {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    static DATABASES: Mutex<Option<HashMap<PathBuf, String>>> = Mutex::new(None);

    pub fn server_url() -> String {
        std::env::var("DLQ_TEST_PG_URL").unwrap_or_else(|_| {
            panic!(
                "DLQ_TEST_PG_URL is not set: run the tests with scripts/test, which starts a \
                 throwaway PostgreSQL cluster (scripts/pg start DIR prints a URL to set by hand)"
            )
        })
    }

    /// `url` with its database name replaced by `name`.
    pub fn with_dbname(url: &str, name: &str) -> String {
        let (head, query) = match url.split_once('?') {
            Some((head, query)) => (head, format!("?{query}")),
            None => (url, String::new()),
        };
        let at = head.rfind('/').expect("a URL with a database name");
        format!("{}/{name}{query}", &head[..at])
    }

    pub fn admin() -> postgres::Client {
        postgres::Client::connect(&server_url(), postgres::NoTls).unwrap()
    }

    /// The URL of the database standing for `path`, created empty on first
    /// use (the first writing command creates the schema, as for a file).
    pub fn url_for(path: &Path) -> String {
        let mut guard = DATABASES.lock().unwrap_or_else(|e| e.into_inner());
        let map = guard.get_or_insert_with(HashMap::new);
        if let Some(name) = map.get(path) {
            return with_dbname(&server_url(), name);
        }
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("s_{}_{n}", std::process::id());
        // FILE_COPY (PostgreSQL 15 on) takes a third of the default's time
        // for a small template; older servers take the plain form.
        let mut admin = admin();
        if admin
            .batch_execute(&format!("CREATE DATABASE \"{name}\" STRATEGY FILE_COPY"))
            .is_err()
        {
            admin
                .batch_execute(&format!("CREATE DATABASE \"{name}\""))
                .unwrap();
        }
        map.insert(path.to_path_buf(), name.clone());
        with_dbname(&server_url(), &name)
    }

    /// The name of the database standing for `path`.
    fn name_of(path: &Path) -> String {
        let url = url_for(path);
        url.rsplit_once('/').unwrap().1.to_string()
    }

    /// Makes `to`'s database anew: empty, or with `from` a copy of `from`'s
    /// (CREATE DATABASE ... TEMPLATE, which needs no one connected to
    /// `from`: a dlq that just exited may still be leaving, so that is
    /// waited out).
    pub fn recreate(to: &Path, from: Option<&Path>) {
        let to = name_of(to);
        let template = from.map(|from| format!(" TEMPLATE \"{}\"", name_of(from)));
        let mut admin = admin();
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{to}\" WITH (FORCE)"))
            .unwrap();
        let started = std::time::Instant::now();
        loop {
            match admin.batch_execute(&format!(
                "CREATE DATABASE \"{to}\"{} STRATEGY FILE_COPY",
                template.as_deref().unwrap_or("")
            )) {
                Ok(()) => return,
                Err(e)
                    if e.to_string().contains("being accessed by other users")
                        && started.elapsed() < std::time::Duration::from_secs(10) =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("CREATE DATABASE {to}: {e}"),
            }
        }
    }

    /// Drops the databases of every path under `dir`.
    pub fn drop_under(dir: &Path) {
        let mut guard = DATABASES.lock().unwrap_or_else(|e| e.into_inner());
        let Some(map) = guard.as_mut() else { return };
        let gone: Vec<PathBuf> = map.keys().filter(|p| p.starts_with(dir)).cloned().collect();
        if gone.is_empty() {
            return;
        }
        let Ok(mut admin) = postgres::Client::connect(&server_url(), postgres::NoTls) else {
            return;
        };
        for path in gone {
            let name = map.remove(&path).unwrap();
            let _ =
                admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"));
        }
    }

    pub fn client(path: &Path) -> postgres::Client {
        postgres::Client::connect(&url_for(path), postgres::NoTls).unwrap()
    }
}

/// Removes the database `db` names (on SQLite its file, WAL and
/// shared-memory file; on PostgreSQL, leaving an empty database in its
/// place, as a missing file is where the next command makes one).
pub fn remove_db(db: &Path) {
    if on_postgres() {
        pg::recreate(db, None);
        return;
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut path = db.as_os_str().to_owned();
        path.push(suffix);
        let _ = std::fs::remove_file(path);
    }
}

/// Makes `to` a copy of the database `from` (nothing may have it open).
pub fn copy_db(from: &Path, to: &Path) {
    if on_postgres() {
        pg::recreate(to, Some(from));
    } else {
        remove_db(to);
        std::fs::copy(from, to).unwrap();
    }
}

/// The `dlq` binary with a clean environment pointing at `db`. It dies
/// with the test thread that started it: a test killed on a timeout (as
/// cargo-mutants does to a mutant that hangs) leaves no `dlq` running.
pub fn dlq(db: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(env!("CARGO_BIN_EXE_dlq"));
    // SAFETY: prctl(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    command
        .arg("--db")
        .arg(target(db))
        .env_remove("DLQ_DB")
        .env_remove("DLQ_NOW")
        // Tables must not depend on the terminal the tests run in.
        .env_remove("COLUMNS")
        .env_remove("NO_COLOR")
        .env(
            "PRODIGY_HOME",
            db.parent().unwrap_or(Path::new(".")).join("prodigy-home"),
        )
        .stdin(Stdio::null());
    command
}

/// Waits (up to 20 s) until the file at `path` has `n` lines, as when a
/// background run has started its commands; fails the test otherwise.
pub fn wait_for_lines(path: &Path, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::read_to_string(path).map_or(0, |t| t.lines().count()) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{} did not reach {n} lines in 20 s",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs a command and returns its output.
pub fn run(command: &mut Command) -> Output {
    command.output().expect("run dlq")
}

/// Runs a command that must end within `limit`: past it, the command is
/// killed and the test fails. Its output must be small (it is read only at
/// the end).
pub fn run_within(command: &mut Command, limit: std::time::Duration) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run dlq");
    let started = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().expect("wait");
            panic!(
                "{command:?} still ran after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().expect("wait")
}

/// Kills the processes whose pids are the lines of `file` (processes a
/// test let escape dlq's reach on purpose).
pub fn kill_listed(file: &Path) {
    for pid in std::fs::read_to_string(file).unwrap_or_default().lines() {
        let _ = Command::new("kill").arg(pid.trim()).status();
    }
}

/// Runs a command that must succeed; returns stdout.
pub fn ok(command: &mut Command) -> String {
    let output = run(command);
    assert!(
        output.status.success(),
        "command failed: {:?}\nstdout: {}\nstderr: {}",
        command,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs a command that must fail; returns stderr.
pub fn fails(command: &mut Command) -> String {
    let output = run(command);
    assert!(!output.status.success(), "command succeeded: {command:?}");
    String::from_utf8(output.stderr).unwrap()
}

/// Runs a command with `input` on stdin.
pub fn with_stdin(command: &mut Command, input: &str) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Every stored row without its surrogate keys, as JSON arrays in a fixed
/// order: items (with `last_error_type`), attempts, artifacts, job
/// counters, signature and error-type counts, and the `item_summary` view.
/// Two databases holding the same items dump equal.
pub fn dump(db: &Path) -> Vec<String> {
    if on_postgres() {
        return dump_postgres(db);
    }
    let conn = sql(db);
    let mut rows = Vec::new();
    for query in [
        "SELECT json_array(job_id, item_id, item_data, first_attempt, last_attempt, failure_count, error_signature,
             reprocess_eligible, manual_review_required, extra, omitted_fields, last_error_type,
             reprocess_eligible_marked, manual_review_required_marked) FROM items ORDER BY job_id, item_id",
        "SELECT json_array(i.job_id, i.item_id, f.attempt_number, f.timestamp, f.error_type, f.exit_code, f.error_type_json,
             f.error_message, f.error_context, f.stack_trace, f.agent_id, f.step_failed, f.duration_ms,
             f.json_log_location, f.extra, f.omitted_fields)
         FROM failure_history f JOIN items i ON i.id = f.item_key ORDER BY 1",
        "SELECT json_array(i.job_id, i.item_id, w.worktree_path, w.branch_name, w.uncommitted_changes, w.error_logs, w.extra)
         FROM worktree_artifacts w JOIN items i ON i.id = w.item_key ORDER BY 1",
        "SELECT json_array(job_id, repo, item_count, eligible_count, manual_review_count, failure_count_sum, max_items) FROM jobs ORDER BY job_id",
        "SELECT json_array('signature', job_id, error_signature, item_count) FROM signature_counts ORDER BY 1",
        "SELECT json_array('error_type', job_id, error_type, item_count) FROM error_type_counts ORDER BY 1",
        "SELECT json_array('summary', job_id, item_id, error_type, exit_code, error_message) FROM item_summary ORDER BY 1",
    ] {
        let mut stmt = conn.prepare(query).unwrap();
        let found: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        rows.extend(found);
    }
    rows
}

/// [`dump`] on PostgreSQL: the same rows with the same text (timestamps
/// through `dlq_ts_text`, JSON columns as their text, flags as 0/1), each
/// row re-serialised so both backends spell it alike.
fn dump_postgres(db: &Path) -> Vec<String> {
    let mut client = pg::client(db);
    let mut rows = Vec::new();
    for query in [
        "SELECT json_build_array(job_id, item_id, item_data::text, dlq_ts_text(first_attempt, first_attempt_ns),
             dlq_ts_text(last_attempt, last_attempt_ns), failure_count, error_signature,
             reprocess_eligible, manual_review_required, extra::text, omitted_fields::text, last_error_type,
             reprocess_eligible_marked, manual_review_required_marked)::text
         FROM items ORDER BY job_id, item_id",
        "SELECT json_build_array(i.job_id, i.item_id, f.attempt_number, dlq_ts_text(f.timestamp, f.timestamp_ns), f.error_type,
             f.exit_code, f.error_type_json::text, f.error_message, f.error_context::text, f.stack_trace, f.agent_id,
             f.step_failed, f.duration_ms, f.json_log_location, f.extra::text, f.omitted_fields::text)::text
         FROM failure_history f JOIN items i ON i.id = f.item_key",
        "SELECT json_build_array(i.job_id, i.item_id, w.worktree_path, w.branch_name, w.uncommitted_changes, w.error_logs, w.extra::text)::text
         FROM worktree_artifacts w JOIN items i ON i.id = w.item_key",
        "SELECT json_build_array(job_id, repo, item_count, eligible_count, manual_review_count, failure_count_sum, max_items)::text FROM jobs ORDER BY job_id",
        "SELECT json_build_array('signature', job_id, error_signature, item_count)::text FROM signature_counts",
        "SELECT json_build_array('error_type', job_id, error_type, item_count)::text FROM error_type_counts",
        "SELECT json_build_array('summary', job_id, item_id, error_type, exit_code, error_message)::text FROM item_summary",
    ] {
        let mut found: Vec<String> = client
            .query(query, &[])
            .unwrap()
            .iter()
            .map(|row| json(row.get::<_, &str>(0)).to_string())
            .collect();
        if !query.contains("ORDER BY") {
            // SQLite orders these by the row's JSON text.
            found.sort();
        }
        rows.extend(found);
    }
    rows
}

/// A current-format legacy item with one attempt.
pub fn item(id: &str, attempt: u32, timestamp: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "item_id": id,
        "item_data": {"path": format!("src/{id}.rs"), "priority": attempt},
        "first_attempt": timestamp,
        "last_attempt": timestamp,
        "failure_count": 1,
        "failure_history": [{
            "attempt_number": attempt,
            "timestamp": timestamp,
            "error_type": {"CommandFailed": {"exit_code": 101}},
            "error_message": message,
            "stack_trace": null,
            "agent_id": format!("agent-{id}"),
            "step_failed": "agent_execution",
            "duration_ms": 1000,
            "json_log_location": "/logs/x.jsonl"
        }],
        "error_signature": dlqlite::classify::error_signature(message),
        "worktree_artifacts": {
            "worktree_path": format!("/wt/{id}"),
            "branch_name": format!("agent-{id}"),
            "uncommitted_changes": null,
            "error_logs": null
        },
        "reprocess_eligible": true,
        "manual_review_required": false
    })
}

/// Adds `items` to `job` through `dlq add`, as JSON lines on stdin; fails
/// the test with dlq's stderr if the command fails.
pub fn add_lines(db: &Path, job: &str, items: impl IntoIterator<Item = serde_json::Value>) {
    let lines: String = items
        .into_iter()
        .map(|value| value.to_string() + "\n")
        .collect();
    let output = with_stdin(dlq(db).args(["add", "--job-id", job]), &lines);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Writes `value` to `dir/name` and returns the path.
pub fn write_json(dir: &Path, name: &str, value: &serde_json::Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path
}

/// Opens the database directly (for checks the CLI does not show).
pub fn sql(db: &Path) -> rusqlite::Connection {
    assert!(
        !on_postgres(),
        "common::sql opens the SQLite file: on PostgreSQL use count/strings/pg::client, or sqlite_only()"
    );
    rusqlite::Connection::open(db).unwrap()
}

/// A timestamp column in dlq's storage text, for queries that read it on
/// either backend: as it is on SQLite; on PostgreSQL `dlq_ts_text` of the
/// column and, for the source times of items and attempts (`ns`), its
/// nanoseconds column.
pub fn ts(column: &str, ns: bool) -> String {
    match (on_postgres(), ns) {
        (false, _) => column.to_string(),
        (true, true) => format!("dlq_ts_text({column}, {column}_ns)"),
        (true, false) => format!("dlq_ts_text({column}, 0)"),
    }
}

/// SQL for the value at `path` (dotted: `a.b`) inside JSON column
/// `column`, as text (`number`: as a number), on either backend.
pub fn json_at(column: &str, path: &str, number: bool) -> String {
    if on_postgres() {
        let keys = path.replace('.', ",");
        let cast = if number { "::numeric" } else { "" };
        format!("(CAST({column} AS jsonb) #>> '{{{keys}}}'){cast}")
    } else {
        format!("json_extract({column}, '$.{path}')")
    }
}

/// The newest schema version this build has for the backend under test.
pub fn supported_schema_version() -> i64 {
    if on_postgres() {
        dlqlite::db::supported_postgres_schema_version()
    } else {
        dlqlite::db::supported_schema_version()
    }
}

/// Another connection holding what every write needs, until dropped: on
/// SQLite the write lock (BEGIN IMMEDIATE); on PostgreSQL a lock on
/// `jobs` that every add's job upsert waits for.
pub enum WriteLock {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

pub fn hold_write_lock(db: &Path) -> WriteLock {
    if on_postgres() {
        let mut client = pg::client(db);
        client
            .batch_execute("BEGIN; LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE")
            .unwrap();
        WriteLock::Postgres(client)
    } else {
        let conn = sql(db);
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        WriteLock::Sqlite(conn)
    }
}

/// Whether a dlq database is at `db`: the file, or on PostgreSQL any
/// table in its database.
pub fn database_exists(db: &Path) -> bool {
    if on_postgres() {
        count(
            db,
            "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()",
        ) > 0
    } else {
        db.exists()
    }
}

/// Runs statements that change the database (as a person would in
/// sqlite3 or psql), on either backend.
pub fn exec(db: &Path, statements: &str) {
    if on_postgres() {
        pg::client(db).batch_execute(statements).unwrap();
    } else {
        sql(db).execute_batch(statements).unwrap();
    }
}

/// Statements typed by a person in the sqlite3 shell (with foreign keys
/// on, as `.dlq` users are told to) or in psql (always on).
pub fn exec_by_hand(db: &Path, statements: &str) {
    if on_postgres() {
        exec(db, statements);
    } else {
        exec(db, &format!("PRAGMA foreign_keys = ON; {statements}"));
    }
}

/// The first column of the first row of `query`, an integer (on
/// PostgreSQL whatever numeric type the query gives is cast to bigint).
pub fn count(db: &Path, query: &str) -> i64 {
    if on_postgres() {
        let wrapped = format!("SELECT (c)::bigint FROM ({query}) AS q(c) LIMIT 1");
        return pg::client(db).query_one(&wrapped, &[]).unwrap().get(0);
    }
    sql(db).query_row(query, [], |row| row.get(0)).unwrap()
}

/// Every row of `query`, each as its column values in order, as JSON:
/// integers and reals as numbers, text as strings, NULL as null (on
/// PostgreSQL booleans stay booleans and timestamps are ISO text: compare
/// what both backends spell alike, or cast in the query).
pub fn table_rows(db: &Path, query: &str) -> Vec<Vec<serde_json::Value>> {
    if on_postgres() {
        let wrapped = format!("SELECT row_to_json(q)::text FROM ({query}) AS q");
        return pg::client(db)
            .query(&wrapped, &[])
            .unwrap()
            .iter()
            .map(|row| {
                let text: &str = row.get(0);
                serde_json::from_str::<InOrder>(text).unwrap().0
            })
            .collect();
    }
    let conn = sql(db);
    let mut stmt = conn.prepare(query).unwrap();
    let columns = stmt.column_count();
    stmt.query_map([], |row| {
        (0..columns)
            .map(|i| {
                use rusqlite::types::ValueRef;
                Ok(match row.get_ref(i)? {
                    ValueRef::Null => serde_json::Value::Null,
                    ValueRef::Integer(v) => v.into(),
                    ValueRef::Real(v) => v.into(),
                    ValueRef::Text(v) | ValueRef::Blob(v) => {
                        String::from_utf8_lossy(v).into_owned().into()
                    }
                })
            })
            .collect()
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// A column value of [`table_rows`] as a Rust value.
pub trait FromCell: Sized {
    fn from_cell(value: &serde_json::Value) -> Self;
}

impl FromCell for String {
    fn from_cell(value: &serde_json::Value) -> Self {
        match value {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }
}

impl FromCell for i64 {
    fn from_cell(value: &serde_json::Value) -> Self {
        match value {
            serde_json::Value::Bool(b) => i64::from(*b),
            other => other
                .as_i64()
                .unwrap_or_else(|| panic!("not an integer: {other}")),
        }
    }
}

impl FromCell for bool {
    fn from_cell(value: &serde_json::Value) -> Self {
        i64::from_cell(value) != 0
    }
}

impl FromCell for f64 {
    fn from_cell(value: &serde_json::Value) -> Self {
        value
            .as_f64()
            .unwrap_or_else(|| panic!("not a number: {value}"))
    }
}

impl<T: FromCell> FromCell for Option<T> {
    fn from_cell(value: &serde_json::Value) -> Self {
        (!value.is_null()).then(|| T::from_cell(value))
    }
}

/// A row of [`table_rows`] as a tuple.
pub trait FromRow: Sized {
    fn from_row(row: &[serde_json::Value]) -> Self;
}

macro_rules! from_row {
    ($($t:ident $i:tt),+) => {
        impl<$($t: FromCell),+> FromRow for ($($t,)+) {
            fn from_row(row: &[serde_json::Value]) -> Self {
                ($($t::from_cell(&row[$i]),)+)
            }
        }
    };
}
from_row!(A 0);
from_row!(A 0, B 1);
from_row!(A 0, B 1, C 2);
from_row!(A 0, B 1, C 2, D 3);
from_row!(A 0, B 1, C 2, D 3, E 4);
from_row!(A 0, B 1, C 2, D 3, E 4, F 5);
from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// Every row of `query` as a tuple, on either backend.
pub fn rows_as<T: FromRow>(db: &Path, query: &str) -> Vec<T> {
    table_rows(db, query)
        .iter()
        .map(|row| T::from_row(row))
        .collect()
}

/// The one row of `query` as a tuple (panics unless there is exactly one).
pub fn row_as<T: FromRow>(db: &Path, query: &str) -> T {
    let mut all = rows_as(db, query);
    assert_eq!(all.len(), 1, "{query}");
    all.remove(0)
}

/// A JSON object's values in the order its text has them.
struct InOrder(Vec<serde_json::Value>);

impl<'de> serde::Deserialize<'de> for InOrder {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = InOrder;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<InOrder, A::Error> {
                let mut values = Vec::new();
                while let Some((_, value)) = map.next_entry::<String, serde_json::Value>()? {
                    values.push(value);
                }
                Ok(InOrder(values))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// The first column of every row of a query, as text.
pub fn strings(db: &Path, query: &str) -> Vec<String> {
    if on_postgres() {
        let wrapped = format!("SELECT (c)::text FROM ({query}) AS q(c)");
        return pg::client(db)
            .query(&wrapped, &[])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
    }
    sql(db)
        .prepare(query)
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The subcommands a help page lists under `Commands:` (but `help`).
pub fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}
