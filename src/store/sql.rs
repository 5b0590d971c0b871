//! The seam between the engine and its two backends, SQLite and
//! PostgreSQL: one connection type ([`Conn`]) that runs a statement, reads
//! one row or streams many, with parameters ([`Val`]) and row values
//! ([`Row`]) that mean the same on both. The engine's rules (merge,
//! counters, capacity, events) are written once against it; what differs
//! per backend is the SQL text of a few statements (chosen with
//! [`Conn::backend`]) and what only one backend has (SQLite's bulk
//! switches: [`Conn::sqlite`]).
//!
//! Statements are written with SQLite's numbered parameters (`?1`, `?2`);
//! on PostgreSQL they become `$1`, `$2`. Values are converted to the type
//! the server asks for (a `bigint`, `smallint`, `text`, `json`, `jsonb` or
//! `timestamptz` column takes the same [`Val`]), so the engine binds the
//! same values on both.

// Built without PostgreSQL, the seam has one arm: its matches and
// PostgreSQL-only values are then the one case there is.
#![cfg_attr(
    not(feature = "postgres"),
    allow(irrefutable_let_patterns, dead_code, unused_variables)
)]

use crate::error::{Error, Result};
use crate::time::Timestamp;

/// Which database a connection talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A pooled PostgreSQL connection.
#[cfg(feature = "postgres")]
pub(crate) type PgClient = r2d2::PooledConnection<crate::db::postgres::Manager>;

/// A connection inside the caller's transaction.
#[derive(Clone, Copy)]
pub(crate) enum Conn<'c> {
    Sqlite(&'c rusqlite::Connection),
    /// A RefCell: PostgreSQL's client needs `&mut` for every statement,
    /// and the engine shares one connection between its parts.
    #[cfg(feature = "postgres")]
    Postgres(&'c std::cell::RefCell<PgClient>),
}

/// A statement parameter.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Val<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Ts(Timestamp),
}

impl From<i64> for Val<'_> {
    fn from(v: i64) -> Self {
        Val::Int(v)
    }
}

impl From<u32> for Val<'_> {
    fn from(v: u32) -> Self {
        Val::Int(i64::from(v))
    }
}

impl From<bool> for Val<'_> {
    fn from(v: bool) -> Self {
        Val::Int(i64::from(v))
    }
}

impl From<f64> for Val<'_> {
    fn from(v: f64) -> Self {
        Val::Real(v)
    }
}

impl<'a> From<&'a str> for Val<'a> {
    fn from(v: &'a str) -> Self {
        Val::Text(v)
    }
}

impl<'a> From<&'a String> for Val<'a> {
    fn from(v: &'a String) -> Self {
        Val::Text(v)
    }
}

impl From<Timestamp> for Val<'_> {
    fn from(v: Timestamp) -> Self {
        Val::Ts(v)
    }
}

impl<'a, T: Into<Val<'a>>> From<Option<T>> for Val<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Val::Null, Into::into)
    }
}

/// Parameters from a list of values of mixed types.
macro_rules! vals {
    ($($v:expr),* $(,)?) => {
        &[$($crate::store::sql::Val::from($v)),*][..]
    };
}
pub(crate) use vals;

/// A value the filter compiler and the statements built at run time bind:
/// no backend's own type, so a compiled [`super::Condition`] can be read
/// (and run) without knowing which backend will run it.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
}

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        SqlValue::Integer(v)
    }
}

impl From<f64> for SqlValue {
    fn from(v: f64) -> Self {
        SqlValue::Real(v)
    }
}

impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        SqlValue::Text(v)
    }
}

impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        SqlValue::Text(v.to_string())
    }
}

impl<'a> Val<'a> {
    /// A value of the filter compiler's.
    pub fn from_value(value: &'a SqlValue) -> Self {
        match value {
            SqlValue::Null => Val::Null,
            SqlValue::Integer(v) => Val::Int(*v),
            SqlValue::Real(v) => Val::Real(*v),
            SqlValue::Text(v) => Val::Text(v),
        }
    }
}

impl rusqlite::ToSql for Val<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value, ValueRef};
        Ok(match self {
            Val::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Val::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Val::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Val::Text(v) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
            Val::Ts(v) => ToSqlOutput::Owned(Value::Text(v.to_storage())),
        })
    }
}

/// One result row.
pub(crate) enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    #[cfg(feature = "postgres")]
    Postgres(&'r postgres::Row),
}

/// A column value read from either backend.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Ts(Timestamp),
}

impl Row<'_> {
    /// The value of column `idx` (from 0).
    pub fn value(&self, idx: usize) -> Result<Value> {
        match self {
            Row::Sqlite(row) => {
                use rusqlite::types::ValueRef;
                Ok(match row.get_ref(idx)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(v) => Value::Int(v),
                    ValueRef::Real(v) => Value::Real(v),
                    ValueRef::Text(v) => Value::Text(String::from_utf8_lossy(v).into_owned()),
                    ValueRef::Blob(v) => Value::Text(String::from_utf8_lossy(v).into_owned()),
                })
            }
            #[cfg(feature = "postgres")]
            Row::Postgres(row) => Ok(row.try_get::<_, pg::Any>(idx)?.0),
        }
    }

    pub fn i64(&self, idx: usize) -> Result<i64> {
        self.opt_i64(idx)?
            .ok_or_else(|| bad_column(idx, "an integer", "NULL"))
    }

    pub fn opt_i64(&self, idx: usize) -> Result<Option<i64>> {
        if let Row::Sqlite(row) = self {
            return Ok(row.get(idx)?);
        }
        match self.value(idx)? {
            Value::Null => Ok(None),
            Value::Int(v) => Ok(Some(v)),
            other => Err(bad_column(idx, "an integer", &format!("{other:?}"))),
        }
    }

    pub fn text(&self, idx: usize) -> Result<String> {
        self.opt_text(idx)?
            .ok_or_else(|| bad_column(idx, "text", "NULL"))
    }

    pub fn opt_text(&self, idx: usize) -> Result<Option<String>> {
        if let Row::Sqlite(row) = self {
            return Ok(row.get(idx)?);
        }
        match self.value(idx)? {
            Value::Null => Ok(None),
            Value::Text(v) => Ok(Some(v)),
            Value::Ts(v) => Ok(Some(v.to_storage())),
            other => Err(bad_column(idx, "text", &format!("{other:?}"))),
        }
    }

    /// A text column borrowed from the row (no copy; NULL reads as empty),
    /// for scans that only count or compare.
    pub fn bytes(&self, idx: usize) -> Result<&[u8]> {
        match self {
            Row::Sqlite(row) => Ok(row.get_ref(idx)?.as_bytes().unwrap_or(b"")),
            #[cfg(feature = "postgres")]
            Row::Postgres(row) => Ok(row
                .try_get::<_, Option<&str>>(idx)?
                .map_or(&b""[..], str::as_bytes)),
        }
    }

    pub fn bool(&self, idx: usize) -> Result<bool> {
        Ok(self.i64(idx)? != 0)
    }

    /// A timestamp: storage text (SQLite, or PostgreSQL's `dlq_ts_text`
    /// of a source timestamp and its nanoseconds) or a `timestamptz`.
    pub fn ts(&self, idx: usize) -> Result<Timestamp> {
        self.opt_ts(idx)?
            .ok_or_else(|| bad_column(idx, "a timestamp", "NULL"))
    }

    pub fn opt_ts(&self, idx: usize) -> Result<Option<Timestamp>> {
        if let Row::Sqlite(row) = self {
            // Parsed in place, without a copy of the text.
            let text = row
                .get_ref(idx)?
                .as_str_or_null()
                .map_err(|e| bad_column(idx, "a timestamp", &e.to_string()))?;
            return text
                .map(Timestamp::parse)
                .transpose()
                .map_err(|e| bad_column(idx, "a timestamp", &e));
        }
        match self.value(idx)? {
            Value::Null => Ok(None),
            Value::Ts(v) => Ok(Some(v)),
            Value::Text(v) => Timestamp::parse(&v)
                .map(Some)
                .map_err(|e| bad_column(idx, "a timestamp", &e)),
            other => Err(bad_column(idx, "a timestamp", &format!("{other:?}"))),
        }
    }
}

fn bad_column(idx: usize, wanted: &str, found: &str) -> Error {
    Error::damaged(format!(
        "column {idx} of a row: expected {wanted}, found {found}"
    ))
}

/// The search index's candidates for a message search
/// ([`Backend::message_candidates`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MessageCandidates {
    /// A condition on `failure_history AS f`, with `values` bound.
    pub condition: String,
    /// A statement counting the candidates up to a bound: `values`, then
    /// the bound.
    pub count: String,
    pub values: Vec<SqlValue>,
    /// On SQLite, the index's terms the candidates must all have (each
    /// trigram as an FTS5 string): every one of them, or any few, is a
    /// condition every match meets, and the fewest and rarest are the
    /// quickest to read ([`MessageCandidates::with_terms`]). Empty on
    /// PostgreSQL, whose index picks its own.
    pub terms: Vec<String>,
}

impl MessageCandidates {
    /// The candidates that have `terms` (some of [`Self::terms`]; all of
    /// them when empty): fewer terms, more candidates, the same matches
    /// after the exact test.
    pub(crate) fn with_terms(mut self, terms: &[String]) -> MessageCandidates {
        if !terms.is_empty() && !self.terms.is_empty() {
            self.values = vec![SqlValue::Text(terms.join(" AND "))];
            self.terms = terms.to_vec();
        }
        self
    }
}

/// The most trigrams one word asks the index for: a long text's
/// trigrams past these narrow the candidates little, and each costs a
/// read of its list.
const MAX_TRIGRAMS_PER_WORD: usize = 16;

/// The trigrams (runs of three characters, as FTS5's trigram tokenizer
/// cuts text) of `word`, at most [`MAX_TRIGRAMS_PER_WORD`] of them spread
/// over its length, the first and the last included.
fn sampled_trigrams(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    let all: Vec<String> = chars.windows(3).map(|w| w.iter().collect()).collect();
    if all.len() <= MAX_TRIGRAMS_PER_WORD {
        return all;
    }
    let last = all.len() - 1;
    (0..MAX_TRIGRAMS_PER_WORD)
        .map(|k| all[k * last / (MAX_TRIGRAMS_PER_WORD - 1)].clone())
        .collect()
}

impl<'c> Conn<'c> {
    /// On SQLite, the page cache of `main` set to `kib` KiB until the value
    /// is dropped (a scan reads each page once: a big cache would only hold
    /// memory); PostgreSQL's server manages its own.
    pub fn scan_cache(&self, kib: i64) -> Result<Option<crate::db::CacheSize<'c>>> {
        match self {
            Conn::Sqlite(conn) => Ok(Some(crate::db::CacheSize::set(conn, "main", kib)?)),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => Ok(None),
        }
    }
}

impl Backend {
    /// Its name as people write it: "SQLite", "PostgreSQL".
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        }
    }

    /// An inner join whose left side is read first: SQLite's CROSS JOIN
    /// (which keeps its planner to that order); PostgreSQL plans joins
    /// itself and takes no ON after CROSS JOIN.
    pub fn ordered_join(self) -> &'static str {
        match self {
            Backend::Sqlite => "CROSS JOIN",
            Backend::Postgres => "JOIN",
        }
    }

    /// A source timestamp column (`i.first_attempt`, `last_attempt`,
    /// `timestamp`) in storage text: as it is on SQLite, joined with its
    /// nanoseconds column on PostgreSQL.
    pub fn ts_text(self, column: &str) -> String {
        match self {
            Backend::Sqlite => column.to_string(),
            Backend::Postgres => format!("dlq_ts_text({column}, {column}_ns)"),
        }
    }

    /// The statement that finds a job and, on PostgreSQL, locks its row
    /// until the transaction ends (`?1`: the job id): what a take or a
    /// clear reads first, so that an add to the job waits for it (see
    /// `WriteTx::lock_job`). SQLite's writer holds the whole database.
    pub fn find_job_locked(self) -> &'static str {
        match self {
            Backend::Sqlite => "SELECT 1 FROM jobs WHERE job_id = ?1",
            Backend::Postgres => "SELECT 1 FROM jobs WHERE job_id = ?1 FOR UPDATE",
        }
    }

    /// The UTC day (`YYYY-MM-DD`) of a source timestamp column.
    pub fn utc_day(self, column: &str) -> String {
        match self {
            Backend::Sqlite => format!("substr({column}, 1, 10)"),
            Backend::Postgres => {
                format!("to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD')")
            }
        }
    }

    /// Tells the planner which index to use where SQLite must be told
    /// (` INDEXED BY index`, after a table name); PostgreSQL picks its own
    /// plan.
    pub fn indexed_by(self, index: &str) -> String {
        match self {
            Backend::Sqlite => format!(" INDEXED BY {index}"),
            Backend::Postgres => String::new(),
        }
    }

    /// After rows were inserted with their ids given (`table.id`), the
    /// statement that moves the table's id generator past them, where the
    /// backend needs one: PostgreSQL's identity does not follow given ids
    /// (the next insert would take one of them); SQLite's rowid does.
    pub fn ids_given(self, table: &str) -> Option<String> {
        match self {
            Backend::Sqlite => None,
            Backend::Postgres => Some(format!(
                "SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))"
            )),
        }
    }

    /// A source timestamp column as an ORDER BY key, to the nanosecond
    /// (`desc`: newest first).
    pub fn ts_order(self, column: &str, desc: bool) -> String {
        let dir = if desc { " DESC" } else { "" };
        match self {
            Backend::Sqlite => format!("{column}{dir}"),
            Backend::Postgres => format!("{column}{dir}, {column}_ns{dir}"),
        }
    }

    /// A test that `text` (an SQL expression; a number reads as its text)
    /// holds the bound text `?`: exactly, or with A-Z folded to a-z on both
    /// sides (`fold`). Only A-Z: SQLite's lower() folds nothing else
    /// without ICU (the bundled build has none), and the same folding on
    /// both backends gives both the same answers.
    pub(crate) fn contains_test(self, text: &str, fold: bool) -> String {
        const UPPER: &str = "'ABCDEFGHIJKLMNOPQRSTUVWXYZ'";
        const LOWER: &str = "'abcdefghijklmnopqrstuvwxyz'";
        match (self, fold) {
            (Backend::Sqlite, false) => format!("instr({text}, ?) > 0"),
            (Backend::Sqlite, true) => format!("instr(lower({text}), lower(?)) > 0"),
            (Backend::Postgres, false) => {
                format!("strpos(CAST({text} AS TEXT), CAST(? AS TEXT)) > 0")
            }
            (Backend::Postgres, true) => format!(
                "strpos(translate(CAST({text} AS TEXT), {UPPER}, {LOWER}), \
                 translate(CAST(? AS TEXT), {UPPER}, {LOWER})) > 0"
            ),
        }
    }

    /// A condition on `failure_history AS f` that holds for every attempt
    /// whose error_message holds each of `words` (exactly, or ignoring
    /// case with `fold`), and for few others: the search index's
    /// candidates (schema V15 on SQLite, V8 on PostgreSQL), which the
    /// caller confirms with [`Backend::contains_test`]. `None` when the
    /// index cannot narrow the search: no word has three characters (a
    /// trigram). Words under three characters are left to the exact test.
    pub(crate) fn message_candidates(
        self,
        words: &[&str],
        fold: bool,
    ) -> Option<MessageCandidates> {
        let indexed: Vec<&str> = words
            .iter()
            .copied()
            .filter(|word| word.chars().nth(2).is_some() && !word.contains('\0'))
            .collect();
        if indexed.is_empty() {
            return None;
        }
        match self {
            Backend::Sqlite => {
                // Every trigram of every word (the table keeps no
                // positions, so a word is its trigrams, not a phrase),
                // each an FTS5 string: "" is the only escape inside one,
                // so no text can be an operator or a syntax error. The
                // index folds case itself, for `contains` too: the exact
                // test after it restores case.
                let mut terms: Vec<String> = Vec::new();
                for word in indexed {
                    for trigram in sampled_trigrams(word) {
                        let term = format!("\"{}\"", trigram.replace('"', "\"\""));
                        if !terms.contains(&term) {
                            terms.push(term);
                        }
                    }
                }
                Some(MessageCandidates {
                    condition:
                        "f.id IN (SELECT rowid FROM failure_text WHERE failure_text MATCH ?)".into(),
                    // The index alone: FTS5 stops reading at the LIMIT.
                    count: "SELECT COUNT(*) FROM (SELECT 1 FROM failure_text \
                            WHERE failure_text MATCH ? LIMIT ?) c"
                        .into(),
                    values: vec![SqlValue::Text(terms.join(" AND "))],
                    terms,
                })
            }
            Backend::Postgres => {
                // LIKE and ILIKE '%word%' are what pg_trgm's index serves
                // (without it, a scan of the same result).
                let like = if fold { "ILIKE" } else { "LIKE" };
                let sql = vec![format!("f.error_message {like} ? ESCAPE '\\'"); indexed.len()];
                let values = indexed
                    .iter()
                    .map(|word| {
                        let mut pattern = String::from("%");
                        for c in word.chars() {
                            if matches!(c, '\\' | '%' | '_') {
                                pattern.push('\\');
                            }
                            pattern.push(c);
                        }
                        pattern.push('%');
                        SqlValue::Text(pattern)
                    })
                    .collect();
                let condition = sql.join(" AND ");
                Some(MessageCandidates {
                    count: format!(
                        "SELECT COUNT(*) FROM (SELECT 1 FROM failure_history f \
                         WHERE {condition} LIMIT ?) c"
                    ),
                    condition,
                    values,
                    terms: Vec::new(),
                })
            }
        }
    }
}

impl<'c> Conn<'c> {
    /// Makes this transaction take turns, until it ends, with every other
    /// transaction that calls this with `key`: on PostgreSQL a
    /// transaction-scoped advisory lock. SQLite's writers take turns
    /// anyway, so there it does nothing. Take it before any row lock of the
    /// transaction, or two transactions can wait on each other.
    pub fn take_turns(&self, key: i64) -> Result<()> {
        match self {
            Conn::Sqlite(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => self
                .exec("SELECT pg_advisory_xact_lock(?1)", vals![key])
                .map(drop),
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            Conn::Sqlite(_) => Backend::Sqlite,
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => Backend::Postgres,
        }
    }

    /// The SQLite connection, for what only SQLite has (bulk switches,
    /// pragmas, its catalogue); on PostgreSQL an
    /// [`Error::Unsupported`] naming `what`.
    pub fn sqlite(&self, what: &str) -> Result<&'c rusqlite::Connection> {
        match self {
            Conn::Sqlite(conn) => Ok(conn),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => Err(Error::unsupported(what, Backend::Postgres.name())),
        }
    }

    /// Runs one statement; returns the rows it changed.
    pub fn exec(&self, sql: &str, params: &[Val<'_>]) -> Result<usize> {
        match self {
            Conn::Sqlite(conn) => Ok(conn
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(params))?),
            #[cfg(feature = "postgres")]
            Conn::Postgres(client) => {
                let sql = pg::numbered(sql);
                let params = pg::params(params);
                let mut client = pg::borrow(client)?;
                let statement = client.prepare_cached(&sql)?;
                let changed = client.client.execute(&statement, &params)?;
                Ok(usize::try_from(changed).unwrap_or(usize::MAX))
            }
        }
    }

    /// The first row of a query, read by `f`; `None` when there is none.
    pub fn row<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        match self {
            Conn::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
                match rows.next()? {
                    Some(row) => Ok(Some(f(&Row::Sqlite(row))?)),
                    None => Ok(None),
                }
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(client) => {
                let sql = pg::numbered(sql);
                let params = pg::params(params);
                let mut client = pg::borrow(client)?;
                let statement = client.prepare_cached(&sql)?;
                let row = client.client.query_opt(&statement, &params)?;
                row.map(|row| f(&Row::Postgres(&row))).transpose()
            }
        }
    }

    /// Calls `f` with every row of a query, streaming (on PostgreSQL the
    /// connection is busy meanwhile: `f` must not use it).
    pub fn each(
        &self,
        sql: &str,
        params: &[Val<'_>],
        mut f: impl FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        self.each_while(sql, params, |row| f(row).map(|()| true))
    }

    /// [`Conn::each`] until `f` returns false (the rest are not read).
    pub fn each_while(
        &self,
        sql: &str,
        params: &[Val<'_>],
        mut f: impl FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()> {
        match self {
            Conn::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
                while let Some(row) = rows.next()? {
                    if !f(&Row::Sqlite(row))? {
                        break;
                    }
                }
                Ok(())
            }
            #[cfg(feature = "postgres")]
            Conn::Postgres(client) => {
                use postgres::fallible_iterator::FallibleIterator;
                let sql = pg::numbered(sql);
                let params = pg::params(params);
                let mut client = pg::borrow(client)?;
                let statement = client.prepare_cached(&sql)?;
                let mut rows = client
                    .client
                    .query_raw(&statement, params.iter().copied())?;
                while let Some(row) = rows.next()? {
                    if !f(&Row::Postgres(&row))? {
                        break;
                    }
                }
                Ok(())
            }
        }
    }

    /// Every row of a query, each read by `f`.
    pub fn collect<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.each(sql, params, |row| {
            out.push(f(row)?);
            Ok(())
        })?;
        Ok(out)
    }
}

/// PostgreSQL's side of the seam: parameter numbering, value conversion
/// both ways, errors.
#[cfg(feature = "postgres")]
pub(crate) mod pg {
    use super::{Val, Value};
    use crate::error::{Error, Result};
    use crate::time::Timestamp;
    use bytes::BytesMut;
    use postgres::types::{FromSql, IsNull, ToSql, Type};
    use std::error::Error as StdError;

    type BoxError = Box<dyn StdError + Sync + Send>;

    pub(super) fn borrow(
        client: &std::cell::RefCell<super::PgClient>,
    ) -> Result<std::cell::RefMut<'_, super::PgClient>> {
        client.try_borrow_mut().map_err(|_| {
            Error::invalid_argument(
                "PostgreSQL statement",
                "the connection is still streaming another query's rows",
            )
        })
    }

    /// SQLite's `?N` (and bare `?`) parameters as PostgreSQL's `$N`,
    /// leaving quoted text and identifiers alone.
    pub fn numbered(sql: &str) -> String {
        let mut out = String::with_capacity(sql.len() + 8);
        let mut next = 1u32;
        let mut quote: Option<char> = None;
        let mut chars = sql.chars().peekable();
        while let Some(c) = chars.next() {
            match quote {
                Some(q) => {
                    out.push(c);
                    if c == q {
                        quote = None;
                    }
                }
                None if c == '\'' || c == '"' => {
                    quote = Some(c);
                    out.push(c);
                }
                None if c == '?' => {
                    out.push('$');
                    let mut digits = String::new();
                    while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                        digits.push(*d);
                        chars.next();
                    }
                    if digits.is_empty() {
                        out.push_str(&next.to_string());
                        next += 1;
                    } else {
                        out.push_str(&digits);
                    }
                }
                None => out.push(c),
            }
        }
        out
    }

    pub(super) fn params<'p>(params: &'p [Val<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
        params.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
    }

    /// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
    const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

    fn micros(ts: &Timestamp) -> i64 {
        let t = ts.datetime();
        // Floor, so the nanoseconds below are kept in the side column.
        t.timestamp_micros() - PG_EPOCH_MICROS
    }

    impl ToSql for Val<'_> {
        fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
            match (self, ty) {
                (Val::Null, _) => return Ok(IsNull::Yes),
                (Val::Int(v), &Type::INT8) => v.to_sql(ty, out)?,
                (Val::Int(v), &Type::INT4) => i32::try_from(*v)?.to_sql(ty, out)?,
                (Val::Int(v), &Type::INT2) => i16::try_from(*v)?.to_sql(ty, out)?,
                (Val::Int(v), &Type::FLOAT8) => (*v as f64).to_sql(ty, out)?,
                (Val::Int(v), &Type::BOOL) => (*v != 0).to_sql(ty, out)?,
                (Val::Int(v), &Type::NUMERIC) => return numeric_to_sql(*v, out),
                (Val::Int(v), t) if is_text(t) => v.to_string().as_str().to_sql(ty, out)?,
                (Val::Real(v), &Type::FLOAT8) => v.to_sql(ty, out)?,
                (Val::Real(v), &Type::FLOAT4) => (*v as f32).to_sql(ty, out)?,
                (Val::Text(v), t) if is_text(t) => v.to_sql(ty, out)?,
                (Val::Text(v), &Type::JSON) => {
                    out.extend_from_slice(v.as_bytes());
                    IsNull::No
                }
                (Val::Text(v), &Type::JSONB) => {
                    out.extend_from_slice(&[1]);
                    out.extend_from_slice(v.as_bytes());
                    IsNull::No
                }
                (Val::Ts(v), &Type::TIMESTAMPTZ | &Type::TIMESTAMP) => {
                    micros(v).to_sql(&Type::INT8, out)?
                }
                (Val::Ts(v), t) if is_text(t) => v.to_storage().as_str().to_sql(ty, out)?,
                // A time the filter compiler wrote as storage text.
                (Val::Text(v), &Type::TIMESTAMPTZ | &Type::TIMESTAMP) => {
                    micros(&Timestamp::parse(v)?).to_sql(&Type::INT8, out)?
                }
                (value, ty) => {
                    return Err(format!("cannot store {value:?} in a {ty} column").into())
                }
            };
            Ok(IsNull::No)
        }

        fn accepts(_: &Type) -> bool {
            true
        }

        postgres::types::to_sql_checked!();
    }

    fn is_text(ty: &Type) -> bool {
        matches!(
            *ty,
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
        )
    }

    /// An integer as PostgreSQL's binary `numeric`.
    fn numeric_to_sql(v: i64, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let mut digits = Vec::new();
        let mut rest = v.unsigned_abs();
        while rest > 0 {
            digits.push((rest % 10_000) as i16);
            rest /= 10_000;
        }
        digits.reverse();
        let weight = i16::try_from(digits.len()).unwrap_or(0) - 1;
        out.extend_from_slice(&i16::try_from(digits.len())?.to_be_bytes());
        out.extend_from_slice(&weight.to_be_bytes());
        out.extend_from_slice(&(if v < 0 { 0x4000u16 } else { 0 }).to_be_bytes());
        out.extend_from_slice(&0i16.to_be_bytes());
        for d in digits {
            out.extend_from_slice(&d.to_be_bytes());
        }
        Ok(IsNull::No)
    }

    /// Any column value, converted to the backend-neutral [`Value`].
    pub(super) struct Any(pub Value);

    impl<'a> FromSql<'a> for Any {
        fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
            Ok(Any(match *ty {
                Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
                Type::INT4 => Value::Int(i64::from(i32::from_sql(ty, raw)?)),
                Type::INT2 => Value::Int(i64::from(i16::from_sql(ty, raw)?)),
                Type::OID => Value::Int(i64::from(u32::from_sql(ty, raw)?)),
                Type::BOOL => Value::Int(i64::from(bool::from_sql(ty, raw)?)),
                Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
                Type::FLOAT4 => Value::Real(f64::from(f32::from_sql(ty, raw)?)),
                Type::NUMERIC => numeric_from_sql(raw)?,
                Type::JSON => Value::Text(std::str::from_utf8(raw)?.to_string()),
                Type::JSONB => match raw.split_first() {
                    Some((1, text)) => Value::Text(std::str::from_utf8(text)?.to_string()),
                    _ => return Err("unknown jsonb format".into()),
                },
                Type::TIMESTAMPTZ | Type::TIMESTAMP => {
                    let us = i64::from_sql(&Type::INT8, raw)? + PG_EPOCH_MICROS;
                    let time = chrono::DateTime::<chrono::Utc>::from_timestamp_micros(us)
                        .ok_or("timestamp out of range")?;
                    Value::Ts(Timestamp::from_datetime(time))
                }
                // Text-like types (text, varchar, char, name, citext...).
                _ if <String as FromSql>::accepts(ty) => Value::Text(String::from_sql(ty, raw)?),
                // Anything else is in a binary form of its own (date,
                // interval, uuid, bytea, arrays...): read as text it would
                // be garbage. `dlq sql` casts such columns to text first
                // (see `decoded`).
                _ => {
                    return Err(format!(
                        "a column of type {} cannot be read as it is: cast it to text (::text)",
                        ty.name()
                    )
                    .into())
                }
            }))
        }

        fn from_sql_null(_: &Type) -> Result<Self, BoxError> {
            Ok(Any(Value::Null))
        }

        fn accepts(_: &Type) -> bool {
            true
        }
    }

    /// Whether [`Any`] reads a column of type `ty` as it is (else `dlq sql`
    /// asks the server for its text).
    pub(crate) fn decoded(ty: &Type) -> bool {
        matches!(
            *ty,
            Type::INT8
                | Type::INT4
                | Type::INT2
                | Type::OID
                | Type::BOOL
                | Type::FLOAT8
                | Type::FLOAT4
                | Type::NUMERIC
                | Type::JSON
                | Type::JSONB
                | Type::TIMESTAMPTZ
                | Type::TIMESTAMP
        ) || <String as FromSql>::accepts(ty)
    }

    /// PostgreSQL's binary `numeric` (what SUM of a bigint gives): an
    /// integer when it is one that fits in 64 bits, else the nearest float
    /// (as SQLite stores a larger integer); NaN and the infinities as
    /// floats. Built as exact decimal text first, so no size of number
    /// overflows on the way (digits are base 10,000, `weight` the power of
    /// the first).
    fn numeric_from_sql(raw: &[u8]) -> Result<Value, BoxError> {
        let word = |at: usize| -> Result<i16, BoxError> {
            let bytes = raw.get(at..at + 2).ok_or("short numeric")?;
            Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
        };
        let ndigits = usize::try_from(word(0)?)?;
        let weight = i64::from(word(2)?);
        match word(4)? as u16 {
            0xC000 => return Ok(Value::Real(f64::NAN)),
            0xD000 => return Ok(Value::Real(f64::INFINITY)),
            0xF000 => return Ok(Value::Real(f64::NEG_INFINITY)),
            _ => {}
        }
        let negative = word(4)? as u16 == 0x4000;
        let mut int = String::new();
        let mut frac = String::new();
        for i in 0..ndigits {
            let digit = word(8 + 2 * i)?;
            if !(0..10_000).contains(&digit) {
                return Err("bad numeric digit".into());
            }
            let power = weight - i64::try_from(i)?;
            if power >= 0 {
                int.push_str(&format!("{digit:04}"));
            } else {
                // Zero groups between the point and a first digit far
                // below it.
                while frac.len() < usize::try_from(-power - 1)? * 4 {
                    frac.push_str("0000");
                }
                frac.push_str(&format!("{digit:04}"));
            }
        }
        // Groups of zeros after the last digit up to the point.
        if let Some(last) = ndigits.checked_sub(1) {
            let trailing = weight - i64::try_from(last)?;
            for _ in 0..trailing.max(0) {
                int.push_str("0000");
            }
        }
        let int = int.trim_start_matches('0');
        let frac = frac.trim_end_matches('0');
        let sign = if negative { "-" } else { "" };
        let int = if int.is_empty() { "0" } else { int };
        if frac.is_empty() {
            if let Ok(v) = format!("{sign}{int}").parse::<i64>() {
                return Ok(Value::Int(v));
            }
            return Ok(Value::Real(format!("{sign}{int}").parse()?));
        }
        Ok(Value::Real(format!("{sign}{int}.{frac}").parse()?))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn parameters_are_renumbered_outside_quotes() {
            assert_eq!(
                numbered("SELECT ?1, '?2', \"a?\" FROM t WHERE x = ?12 AND y = ?"),
                "SELECT $1, '?2', \"a?\" FROM t WHERE x = $12 AND y = $1"
            );
        }

        #[test]
        fn numerics_round_trip() {
            for v in [
                0i64,
                1,
                -1,
                9_999,
                10_000,
                123_456_789_012,
                i64::MAX,
                -i64::MAX,
            ] {
                let mut out = BytesMut::new();
                numeric_to_sql(v, &mut out).unwrap();
                assert_eq!(numeric_from_sql(&out).unwrap(), Value::Int(v), "{v}");
            }
        }

        /// Binary numeric of base-10,000 `digits`, the first at `weight`.
        fn numeric(weight: i16, sign: u16, digits: &[i16]) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&i16::try_from(digits.len()).unwrap().to_be_bytes());
            out.extend_from_slice(&weight.to_be_bytes());
            out.extend_from_slice(&sign.to_be_bytes());
            out.extend_from_slice(&0i16.to_be_bytes());
            for d in digits {
                out.extend_from_slice(&d.to_be_bytes());
            }
            out
        }

        #[test]
        fn numerics_of_any_size_or_kind_read_without_overflow() {
            let read = |weight, sign, digits: &[i16]| {
                numeric_from_sql(&numeric(weight, sign, digits)).unwrap()
            };
            // 10^40 and 10^400 (overflowed an i128 before).
            assert_eq!(read(10, 0, &[1]), Value::Real(1e40));
            assert_eq!(read(100, 0, &[1]), Value::Real(f64::INFINITY));
            assert_eq!(read(0, 0x4000, &[123, 4500]), Value::Real(-123.45));
            assert_eq!(read(-2, 0, &[1234]), Value::Real(0.00001234));
            assert_eq!(read(2, 0, &[1]), Value::Int(100_000_000));
            // i64::MAX + 1: the nearest float.
            assert_eq!(
                read(4, 0, &[922, 3372, 368, 5477, 5808]),
                Value::Real(9_223_372_036_854_775_808.0)
            );
            assert_eq!(read(0, 0, &[]), Value::Int(0));
            assert_eq!(read(0, 0xD000, &[]), Value::Real(f64::INFINITY));
            assert_eq!(read(0, 0xF000, &[]), Value::Real(f64::NEG_INFINITY));
            assert!(numeric_from_sql(&numeric(0, 0, &[10_000])).is_err());
        }
    }
}
