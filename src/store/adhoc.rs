//! Ad-hoc SQL for `dlq sql`: one statement on a read-only connection. A
//! statement that would write is refused before it runs (SQLite says so for
//! each prepared statement), and the connection could not write anyway. On
//! SQLite the rows pass through a scratch file, so the statement's read
//! transaction never waits for the output's reader.

use crate::error::{Error, Result};
use rusqlite::types::ValueRef;
use std::path::Path;

/// Runs one read-only statement; gives the column names, then each row as
/// JSON values, to the callbacks. Returns the number of rows.
pub fn query_read_only(
    path: &Path,
    sql: &str,
    columns: impl FnMut(&[String]) -> Result<()>,
    row: impl FnMut(Vec<serde_json::Value>) -> Result<()>,
) -> Result<usize> {
    if sql.trim().trim_matches(';').trim().is_empty() {
        return Err(Error::invalid_argument(
            "query",
            "it is empty: give one SQL statement",
        ));
    }
    if let Some(target) = path.to_str() {
        crate::db::refuse_lookalike(target)?;
    }
    #[cfg(feature = "postgres")]
    if let Some(url) = path.to_str().filter(|p| crate::db::is_url(p)) {
        return query_postgres(url, sql, columns, row);
    }
    query_sqlite(path, sql, columns, row)
}

/// How far the spool may run ahead of its reader before the statement
/// waits for it (and then holds its read transaction): a result this large
/// read this slowly is the one case that can still pin the WAL.
const SPOOL_AHEAD: u64 = 256 * 1024 * 1024;
/// How long rows wait in the statement's buffer before the reader is given
/// them (when fewer than a buffer's worth came).
const SPOOL_FLUSH: std::time::Duration = std::time::Duration::from_millis(20);
const SPOOL_BUFFER: usize = 64 * 1024;

/// [`query_read_only`] on SQLite. The statement runs on a thread of its own
/// and writes its rows to a scratch file as fast as SQLite gives them; this
/// thread follows the file and hands the rows on. So the statement's read
/// transaction lasts as long as the statement, not as long as whoever reads
/// the output takes (a pager, a slow pipe), during which no checkpoint
/// could reset the WAL; and an endless query piped to `head` still ends as
/// soon as `head` does (the failed write stops the statement).
fn query_sqlite(
    path: &Path,
    sql: &str,
    mut columns: impl FnMut(&[String]) -> Result<()>,
    mut row: impl FnMut(Vec<serde_json::Value>) -> Result<()>,
) -> Result<usize> {
    let spool = Spool::create()?;
    let shared = Shared::default();
    let (names_tx, names_rx) = std::sync::mpsc::channel::<Vec<String>>();
    std::thread::scope(|scope| {
        let statement = scope.spawn(|| {
            let result = run_statement(path, sql, &spool, &shared, names_tx);
            shared.finish();
            result
        });
        let followed = match names_rx.recv() {
            Ok(names) => columns(&names).and_then(|()| spool.follow(&shared, &mut row)),
            // The statement failed before it had columns: its error says
            // why.
            Err(_) => Ok(()),
        };
        if followed.is_err() {
            shared.stop();
        }
        let counted = statement
            .join()
            .unwrap_or_else(|_| Err(Error::internal("the query's statement")));
        followed?;
        counted
    })
}

/// Prepares and runs the statement, sending its column names first, then
/// writing each row to the spool. Returns the number of rows.
fn run_statement(
    path: &Path,
    sql: &str,
    spool: &Spool,
    shared: &Shared,
    names: std::sync::mpsc::Sender<Vec<String>>,
) -> Result<usize> {
    // Errors of this connection name its database, not whatever other
    // handle this thread is using.
    let _scope = crate::error::DbScope::enter(Some(&std::sync::Arc::from(path)));
    let conn = crate::db::open_read_only(path)?;
    let mut stmt = conn.prepare(sql).map_err(|e| {
        // SQLite says "API misuse" for text with no statement in it (only
        // comments, say).
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ApiMisuse) {
            Error::invalid_argument("query", "it holds no SQL statement")
        } else {
            Error::invalid_argument("query", e.to_string())
        }
    })?;
    if !stmt.readonly() {
        return Err(Error::invalid_argument(
            "query",
            "it would change the database; dlq sql only reads (use sqlite3 to change data)",
        ));
    }
    let width = stmt.column_count();
    let _ = names.send(stmt.column_names().iter().map(|n| n.to_string()).collect());
    let mut rows = stmt.query([])?;
    let mut count = 0;
    let mut buffer = Vec::with_capacity(SPOOL_BUFFER);
    let mut flushed = std::time::Instant::now();
    while let Some(r) = rows.next()? {
        if shared.stopped() {
            break;
        }
        let mut values = Vec::with_capacity(width);
        for index in 0..width {
            values.push(match r.get_ref(index)? {
                ValueRef::Null => serde_json::Value::Null,
                ValueRef::Integer(n) => n.into(),
                ValueRef::Real(f) => serde_json::Number::from_f64(f)
                    .map(serde_json::Value::Number)
                    .unwrap_or(serde_json::Value::Null),
                ValueRef::Text(text) => String::from_utf8_lossy(text).into_owned().into(),
                ValueRef::Blob(bytes) => {
                    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                    format!("x'{hex}'").into()
                }
            });
        }
        serde_json::to_writer(&mut buffer, &values)?;
        buffer.push(b'\n');
        count += 1;
        if buffer.len() >= SPOOL_BUFFER || flushed.elapsed() >= SPOOL_FLUSH {
            spool.append(&buffer, shared)?;
            buffer.clear();
            flushed = std::time::Instant::now();
        }
    }
    spool.append(&buffer, shared)?;
    Ok(count)
}

/// What the statement's thread and the following one share: how much of
/// the spool is written and read, and whether either side is done.
#[derive(Default)]
struct Shared {
    state: std::sync::Mutex<SpoolState>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct SpoolState {
    written: u64,
    read: u64,
    finished: bool,
    stopped: bool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, SpoolState> {
        crate::db::lock_ignoring_poison(&self.state)
    }

    /// Waits while `blocked` holds of the state.
    fn wait_while(
        &self,
        mut blocked: impl FnMut(&SpoolState) -> bool,
    ) -> std::sync::MutexGuard<'_, SpoolState> {
        let mut state = self.lock();
        while blocked(&state) {
            state = match self.changed.wait(state) {
                Ok(state) => state,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
        state
    }

    fn update(&self, change: impl FnOnce(&mut SpoolState)) {
        change(&mut self.lock());
        self.changed.notify_all();
    }

    fn finish(&self) {
        self.update(|s| s.finished = true);
    }

    fn stop(&self) {
        self.update(|s| s.stopped = true);
    }

    fn stopped(&self) -> bool {
        self.lock().stopped
    }
}

/// A scratch file with no name ([`crate::outfile::spool`]) in the temporary
/// directory: the rows as JSON arrays, one per line. Memory stays flat
/// whatever the result's size.
struct Spool {
    /// Its directory, for messages.
    path: std::path::PathBuf,
    file: std::fs::File,
}

impl Spool {
    fn create() -> Result<Self> {
        let path = std::env::temp_dir();
        let file = crate::outfile::spool(&path)?;
        Ok(Spool { path, file })
    }

    /// Appends whole lines, once the reader is less than [`SPOOL_AHEAD`]
    /// behind.
    fn append(&self, lines: &[u8], shared: &Shared) -> Result<()> {
        use std::os::unix::fs::FileExt;
        if lines.is_empty() {
            return Ok(());
        }
        let at = shared
            .wait_while(|s| s.written - s.read > SPOOL_AHEAD && !s.stopped)
            .written;
        self.file
            .write_all_at(lines, at)
            .map_err(|e| Error::io(&self.path, e))?;
        shared.update(|s| s.written += lines.len() as u64);
        Ok(())
    }

    /// Hands each row to `row` as the statement writes it, until the
    /// statement is done and every row is read.
    fn follow(
        &self,
        shared: &Shared,
        row: &mut impl FnMut(Vec<serde_json::Value>) -> Result<()>,
    ) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let mut read = 0u64;
        let mut chunk = vec![0u8; SPOOL_BUFFER];
        let mut pending: Vec<u8> = Vec::new();
        loop {
            let (written, finished) = {
                let state = shared.wait_while(|s| s.written == read && !s.finished);
                (state.written, state.finished)
            };
            if written == read && finished {
                return Ok(());
            }
            let want = usize::try_from(written - read)
                .unwrap_or(usize::MAX)
                .min(chunk.len());
            let n = self
                .file
                .read_at(&mut chunk[..want], read)
                .map_err(|e| Error::io(&self.path, e))?;
            read += n as u64;
            shared.update(|s| s.read = read);
            pending.extend_from_slice(&chunk[..n]);
            let mut start = 0;
            while let Some(end) = pending[start..].iter().position(|b| *b == b'\n') {
                row(serde_json::from_slice(&pending[start..start + end])?)?;
                start += end + 1;
            }
            pending.drain(..start);
        }
    }
}

/// `sql` without its closing `;` and any comments after it (`SELECT 1; --
/// why`), which cannot stand inside a subquery. A `;` this misreads (one
/// in a string) only makes the wrapped statement fail to prepare, and the
/// statement runs as it is.
#[cfg(feature = "postgres")]
fn without_terminator(sql: &str) -> &str {
    let mut body = sql.trim_end();
    if let Some(at) = body.rfind(';') {
        let tail = body[at + 1..].trim();
        let only_comments = tail.lines().all(|line| {
            let line = line.trim();
            line.is_empty() || line.starts_with("--")
        }) || (tail.starts_with("/*") && tail.ends_with("*/"));
        if only_comments {
            body = &body[..at];
        }
    }
    body.trim_end().trim_end_matches(';')
}

/// [`query_read_only`] on PostgreSQL: the statement runs in a READ ONLY
/// transaction that is always rolled back, so a statement that would write
/// fails (and one that ends the transaction leaves nothing behind).
#[cfg(feature = "postgres")]
fn query_postgres(
    url: &str,
    sql: &str,
    mut columns: impl FnMut(&[String]) -> Result<()>,
    mut row: impl FnMut(Vec<serde_json::Value>) -> Result<()>,
) -> Result<usize> {
    use super::sql::Value;
    use postgres::fallible_iterator::FallibleIterator;
    let label = crate::db::redacted_url(url);
    let _scope = crate::error::DbScope::enter(Some(&std::sync::Arc::from(Path::new(&label))));
    let (_, mut client) = crate::db::postgres::connect(url, crate::db::DEFAULT_BUSY_TIMEOUT)?;
    // A dlq killed mid-query (Ctrl-C) closes the connection, but the
    // server notices only when it next sends a row: a long query with few
    // rows would run on. PostgreSQL 14 and later check the socket every
    // second while a query runs; an older server does not know the setting
    // (refused outside the transaction, harmlessly).
    let _ = client.batch_execute("SET client_connection_check_interval = 1000");
    client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
    let refused = |e: postgres::Error| {
        let code = e.code().map(|c| c.code().to_string());
        let text = e
            .as_db_error()
            .map_or_else(|| e.to_string(), |db| db.message().to_string());
        match code.as_deref() {
            // read_only_sql_transaction
            Some("25006") => Error::invalid_argument(
                "query",
                "it would change the database; dlq sql only reads (use psql to change data)",
            ),
            // A server error about the statement itself: the statement's
            // fault, said as the server says it.
            Some(code) if !code.starts_with("08") && !code.starts_with("57") => {
                Error::invalid_argument("query", text)
            }
            _ => e.into(),
        }
    };
    let mut statement = client.prepare(sql).map_err(refused)?;
    let names: Vec<String> = statement
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    // Columns of types read as they are (numbers, text, JSON, times) stay
    // typed; any other (date, interval, uuid, bytea, arrays, money...)
    // comes as the server's text of it, as psql shows it: the query runs as
    // a subquery whose columns are renamed by position (names may repeat
    // or need quoting) and cast. A statement that cannot be a subquery
    // (EXPLAIN, SHOW) runs as it is; a column that cannot be read then
    // says to cast it.
    if !statement
        .columns()
        .iter()
        .all(|c| super::sql::pg::decoded(c.type_()))
    {
        let select: Vec<String> = statement
            .columns()
            .iter()
            .enumerate()
            .map(|(i, c)| match super::sql::pg::decoded(c.type_()) {
                true => format!("c{i}"),
                false => format!("c{i}::text"),
            })
            .collect();
        let aliases: Vec<String> = (0..names.len()).map(|i| format!("c{i}")).collect();
        // Without what follows the last `;` if that is comments, else the
        // whole text (the `;` was in a string).
        let plain = sql.trim_end().trim_end_matches(';');
        let mut bodies = vec![without_terminator(sql)];
        if bodies[0] != plain {
            bodies.push(plain);
        }
        for body in bodies {
            let wrapped = format!(
                "SELECT {} FROM (\n{body}\n) AS dlq_sql ({})",
                select.join(", "),
                aliases.join(", ")
            );
            // A failed prepare would abort the transaction: in a savepoint.
            client.batch_execute("SAVEPOINT dlq_cast")?;
            match client.prepare(&wrapped) {
                Ok(cast) => {
                    statement = cast;
                    break;
                }
                Err(_) => client.batch_execute("ROLLBACK TO SAVEPOINT dlq_cast")?,
            }
        }
    }
    columns(&names)?;
    let mut count = 0;
    // A reader that stops early (a closed pipe) must stop the server too:
    // closing the connection would first drain every row still coming (a
    // query without end never ends).
    let cancel = client.cancel_token();
    let stopped = |error: Error| {
        let _ = cancel.cancel_query(postgres::NoTls);
        error
    };
    {
        let mut rows = client
            .query_raw(
                &statement,
                std::iter::empty::<&(dyn postgres::types::ToSql + Sync)>(),
            )
            .map_err(refused)?;
        while let Some(r) = rows.next().map_err(refused)? {
            let mut values = Vec::with_capacity(names.len());
            for index in 0..names.len() {
                let value = super::sql::Row::Postgres(&r)
                    .value(index)
                    .map_err(stopped)?;
                values.push(match value {
                    Value::Null => serde_json::Value::Null,
                    Value::Int(n) => n.into(),
                    Value::Real(f) => serde_json::Number::from_f64(f)
                        .map(serde_json::Value::Number)
                        .unwrap_or(serde_json::Value::Null),
                    Value::Text(text) => text.into(),
                    Value::Ts(ts) => ts.to_storage().into(),
                });
            }
            row(values).map_err(stopped)?;
            count += 1;
        }
    }
    let _ = client.batch_execute("ROLLBACK");
    Ok(count)
}
