//! The library's typed error. Every variant says what went wrong and names the
//! path, item or position it is about; the cause stays reachable through
//! `source()`. [`Error::kind`] sorts every error into an [`ErrorKind`], so a
//! caller can tell busy from disk-full from corrupt without depending on the
//! storage crates: none of their types is part of this API (the conversions
//! from them are for `?` inside dlqlite and hidden from the docs).
//!
//! Storage errors carry the database's path: the store notes which database
//! each thread is working on while it holds a connection (`DbScope`), and
//! the conversion from a SQLite error reads it.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Result with the library error as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of failure an [`Error`] is: what a caller can act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Another connection held the lock past the busy timeout, or every
    /// pooled connection stayed in use. Trying again later can succeed.
    Busy,
    /// The disk (or a quota, or a file-size limit) is full.
    DiskFull,
    /// The database, its directory or the file system cannot be written,
    /// or the handle was opened read-only.
    ReadOnly,
    /// The file is not a dlqlite database, or it is damaged.
    Corrupt,
    /// The database was written by a newer dlqlite.
    SchemaTooNew,
    /// A job, item or file that does not exist.
    NotFound,
    /// Input that is not valid: an item, a filter, an argument, an id.
    InvalidInput,
    /// Reading or writing a file failed otherwise.
    Io,
    /// The items an action was confirmed for changed before it ran
    /// ([`Error::SelectionChanged`]): count again and confirm again.
    Conflict,
    /// What the database's backend cannot do (yet): PostgreSQL does not
    /// have every operation SQLite has ([`Error::Unsupported`]).
    Unsupported,
    /// A read stopped because its thread's time budget ran out or was
    /// cancelled ([`crate::store::Budget`]): nothing changed.
    Interrupted,
    /// Anything else (a bug, or an error SQLite does not classify).
    Other,
}

impl ErrorKind {
    /// Whether the same call can succeed if tried again unchanged.
    pub fn is_transient(self) -> bool {
        matches!(self, ErrorKind::Busy)
    }
}

/// A storage engine error, kept as the `source()` of [`Error::Storage`]
/// without naming the engine's types.
#[derive(Debug)]
pub struct StorageError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let inner = self.0.source()?;
        // rusqlite's error repeats SQLite's message under its code ("Error
        // code 8: attempt to write a readonly database"): nothing new, and
        // a one-line report would say it twice.
        let text = inner.to_string();
        let repeated = text
            .strip_prefix("Error code ")
            .and_then(|rest| rest.split_once(": "))
            .is_some_and(|(_, message)| self.0.to_string().contains(message));
        (!repeated).then_some(inner)
    }
}

/// Everything that can go wrong inside dlqlite.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database failed a statement: busy past the timeout, disk full,
    /// read-only, corrupt, ... ([`Error::kind`] says which).
    #[error("database {}: {source}", path_or_memory(.path))]
    Storage {
        kind: ErrorKind,
        /// The database file (`None` in memory or when not known).
        path: Option<PathBuf>,
        #[source]
        source: StorageError,
    },

    /// The database could not be opened or prepared.
    #[error("cannot open database {path}: {reason}")]
    Open {
        path: PathBuf,
        reason: String,
        kind: ErrorKind,
    },

    /// The file is not a dlqlite database: dlqlite refuses to read it or
    /// to turn it into one.
    #[error("{} is not a dlq database ({what})", .path.display())]
    NotDlq { path: PathBuf, what: NotDlqReason },

    /// A write was asked of a database that cannot be written; nothing
    /// changed.
    #[error("cannot write {}: {reason}", .path.display())]
    ReadOnly { path: PathBuf, reason: String },

    /// The database was written by a newer dlqlite.
    #[error(
        "database {path} has schema version {found}, newer than this dlq supports ({supported}); upgrade dlq"
    )]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },

    /// Applying the schema migrations failed.
    #[error("migrating database {path}: {reason}")]
    Migration { path: PathBuf, reason: String },

    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A dead-letter item (or a field of it) is not valid.
    #[error("{context}: {reason}")]
    InvalidItem { context: String, reason: String },

    /// A value given by the caller is out of range or malformed.
    #[error("invalid {what}: {reason}")]
    InvalidArgument { what: String, reason: String },

    /// A follower's cursor file ([`crate::watch::Cursor`]) cannot be read,
    /// written, or used with this database.
    #[error("cursor {}: {reason}", .path.display())]
    Cursor { path: PathBuf, reason: String },

    /// The item does not exist.
    #[error("item {item_id:?} not found{}", job_hint(.job_id))]
    ItemNotFound {
        job_id: Option<String>,
        item_id: String,
    },

    /// The item id exists in several jobs and no job was given.
    #[error("item {item_id:?} exists in several jobs ({}); pass --job-id", .jobs.join(", "))]
    AmbiguousItem { item_id: String, jobs: Vec<String> },

    /// The job does not exist.
    #[error("job {0:?} not found")]
    JobNotFound(String),

    /// No retention policy has this scope (`dlq retention unset`).
    #[error("no retention policy for {scope}")]
    RetentionPolicyNotFound { scope: String },

    /// A follower of the audit log fell behind its retention: the events
    /// after its position up to `through_id` were trimmed before it read
    /// them (`dlq watch`).
    #[error(
        "the audit log was trimmed by retention up to event {through_id} while this watch was at event {position}: the events between are gone; to go on from the oldest event kept, start it again with --from-start (after removing its --since-cursor file)"
    )]
    EventsTrimmed { position: i64, through_id: i64 },

    /// The items of a counted selection changed before the action on them
    /// ran (added, removed or merged into or out of the search).
    #[error(
        "the items changed since they were counted ({counted} counted, {now} match now; added, removed or failed again meanwhile): count again"
    )]
    SelectionChanged { counted: u64, now: u64 },

    /// A retry run could not renew its leases (another writer held the
    /// database too long): it killed its commands and stopped before the
    /// leases ran out, so no other run can have started an item it was
    /// still running.
    #[error(
        "the run's leases went unrenewed for {unrenewed:.1}s ({reason}); {}: run it again",
        lapse_outcome(*running)
    )]
    LeasesLapsing {
        unrenewed: f64,
        reason: String,
        /// Commands (or closures) running when the run stopped.
        running: u64,
    },

    /// The operation is not available on this database's backend
    /// (`backend`: its name, as [`crate::store::Backend`] spells it).
    #[error("{what} is not available on {backend} yet")]
    Unsupported { what: String, backend: String },

    /// dlqlite itself failed (a thread of it panicked): a bug. Nothing of
    /// the operation was kept.
    #[error("{what}: an internal error (a bug in dlqlite; nothing of it was stored)")]
    Internal { what: String },

    /// A JSON value could not be produced or read.
    #[error("json error: {0}")]
    Json(#[from] serde_json::Error),

    /// A filter expression is not valid.
    #[error("invalid filter: {0}")]
    Filter(#[from] crate::filter::FilterError),
}

/// Why a file is not a dlqlite database ([`Error::NotDlq`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotDlqReason {
    /// Zero bytes (say, made by `touch`): dlqlite creates its files itself.
    EmptyFile,
    /// A SQLite database without dlqlite's schema (another application's).
    ForeignSqlite,
    /// Not a SQLite database at all.
    NotSqlite,
    /// A PostgreSQL database without the dlq schema: empty (and a command
    /// that only reads must not create it), or another application's.
    NoDlqSchema,
}

impl std::fmt::Display for NotDlqReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotDlqReason::EmptyFile => "empty file",
            NotDlqReason::ForeignSqlite => "a SQLite database without the dlq schema",
            NotDlqReason::NotSqlite => "not a SQLite database",
            NotDlqReason::NoDlqSchema => "a PostgreSQL database without the dlq schema",
        })
    }
}

fn lapse_outcome(running: u64) -> String {
    if running == 0 {
        "it stopped before they ran out (no command was running)".to_string()
    } else {
        format!(
            "its {running} running command(s) were killed before the leases ran out, so none runs twice"
        )
    }
}

fn path_or_memory(path: &Option<PathBuf>) -> String {
    match path {
        Some(path) => path.display().to_string(),
        None => "error".to_string(),
    }
}

fn job_hint(job_id: &Option<String>) -> String {
    match job_id {
        Some(job) => format!(" in job {job:?}"),
        None => String::new(),
    }
}

impl Error {
    /// An I/O error about `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// An invalid-item error with a context (file, position) and a reason.
    pub fn invalid_item(context: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidItem {
            context: context.into(),
            reason: reason.into(),
        }
    }

    /// An operation `backend` does not have.
    pub fn unsupported(what: impl Into<String>, backend: impl Into<String>) -> Self {
        Error::Unsupported {
            what: what.into(),
            backend: backend.into(),
        }
    }

    /// An [`Error::Internal`]: `what` failed inside dlqlite.
    pub(crate) fn internal(what: impl Into<String>) -> Self {
        Error::Internal { what: what.into() }
    }

    /// Stored data this build cannot read (a column of another type than
    /// the schema's): a damaged database, or one written around dlq.
    pub(crate) fn damaged(reason: impl Into<String>) -> Self {
        Error::storage(
            ErrorKind::Corrupt,
            DbScope::current(),
            std::io::Error::other(reason.into()),
        )
    }

    /// An invalid-argument error.
    pub fn invalid_argument(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Storage { kind, .. } | Error::Open { kind, .. } => *kind,
            Error::SchemaTooNew { .. } => ErrorKind::SchemaTooNew,
            Error::NotDlq { what, .. } => match what {
                NotDlqReason::NotSqlite => ErrorKind::Corrupt,
                NotDlqReason::EmptyFile
                | NotDlqReason::ForeignSqlite
                | NotDlqReason::NoDlqSchema => ErrorKind::InvalidInput,
            },
            Error::ReadOnly { .. } => ErrorKind::ReadOnly,
            Error::Migration { .. } => ErrorKind::Other,
            Error::Io { source, .. } => io_kind(source),
            Error::InvalidItem { .. }
            | Error::InvalidArgument { .. }
            | Error::Cursor { .. }
            | Error::AmbiguousItem { .. }
            | Error::Filter(_) => ErrorKind::InvalidInput,
            Error::ItemNotFound { .. }
            | Error::JobNotFound(_)
            | Error::RetentionPolicyNotFound { .. }
            | Error::EventsTrimmed { .. } => ErrorKind::NotFound,
            Error::SelectionChanged { .. } => ErrorKind::Conflict,
            Error::LeasesLapsing { .. } => ErrorKind::Busy,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::Internal { .. } => ErrorKind::Other,
            Error::Json(e) => match e.io_error_kind() {
                Some(io) => io_kind(&std::io::Error::from(io)),
                None => ErrorKind::InvalidInput,
            },
        }
    }

    /// Whether the same call can succeed if tried again unchanged (another
    /// writer held the lock too long).
    pub fn is_transient(&self) -> bool {
        self.kind().is_transient()
    }

    /// A storage error of `kind` about the database at `path`.
    pub(crate) fn storage(
        kind: ErrorKind,
        path: Option<PathBuf>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Storage {
            kind,
            path,
            source: StorageError(Box::new(source)),
        }
    }
}

fn io_kind(error: &std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as Io;
    match error.kind() {
        Io::NotFound => ErrorKind::NotFound,
        Io::StorageFull | Io::QuotaExceeded | Io::FileTooLarge => ErrorKind::DiskFull,
        Io::ReadOnlyFilesystem | Io::PermissionDenied => ErrorKind::ReadOnly,
        Io::InvalidInput | Io::InvalidData | Io::InvalidFilename => ErrorKind::InvalidInput,
        _ => match error.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => ErrorKind::DiskFull,
            _ => ErrorKind::Io,
        },
    }
}

/// The kind of a SQLite error.
pub(crate) fn sqlite_kind(error: &rusqlite::Error) -> ErrorKind {
    use rusqlite::ErrorCode as Code;
    match error.sqlite_error_code() {
        Some(Code::DatabaseBusy | Code::DatabaseLocked) => ErrorKind::Busy,
        Some(Code::DiskFull) => ErrorKind::DiskFull,
        // A string or blob past SQLite's limit: the value, not the disk.
        Some(Code::TooBig) => ErrorKind::InvalidInput,
        Some(Code::ReadOnly | Code::PermissionDenied) => ErrorKind::ReadOnly,
        Some(Code::DatabaseCorrupt | Code::NotADatabase) => ErrorKind::Corrupt,
        Some(Code::CannotOpen) => ErrorKind::NotFound,
        Some(Code::SystemIoFailure) => ErrorKind::Io,
        Some(Code::ConstraintViolation) => ErrorKind::InvalidInput,
        Some(Code::OperationInterrupted) => ErrorKind::Interrupted,
        _ => ErrorKind::Other,
    }
}

thread_local! {
    /// The databases this thread holds connections to, innermost last
    /// (`None`: an in-memory one).
    static SCOPES: RefCell<Vec<(u64, Option<Arc<Path>>)>> = const { RefCell::new(Vec::new()) };
}

/// While alive, SQLite errors raised on this thread name `path`. The store
/// holds one with every connection it takes from its pool, so each `?` on a
/// SQLite result becomes an [`Error::Storage`] with the path, without every
/// call site passing it.
pub(crate) struct DbScope(u64);

impl DbScope {
    /// Enters the database at `path` (`None`: in memory, whose errors name
    /// no file even inside another database's scope).
    pub(crate) fn enter(path: Option<&Arc<Path>>) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        SCOPES.with(|scopes| scopes.borrow_mut().push((id, path.cloned())));
        DbScope(id)
    }

    pub(crate) fn current() -> Option<PathBuf> {
        SCOPES.with(|scopes| {
            scopes
                .borrow()
                .last()
                .and_then(|(_, path)| path.as_deref().map(Path::to_path_buf))
        })
    }
}

impl Drop for DbScope {
    fn drop(&mut self) {
        // Usually the last one; an iterator kept past a later call can end
        // out of order.
        SCOPES.with(|scopes| {
            let mut scopes = scopes.borrow_mut();
            if let Some(at) = scopes.iter().rposition(|(other, _)| *other == self.0) {
                scopes.remove(at);
            }
        });
    }
}

#[cfg(feature = "postgres")]
/// The kind of a PostgreSQL error, by its SQLSTATE class.
pub(crate) fn pg_kind(error: &postgres::Error) -> ErrorKind {
    let Some(code) = error.code() else {
        // No SQLSTATE: the connection failed or closed.
        return ErrorKind::Io;
    };
    let code = code.code();
    match code {
        // serialization_failure, deadlock_detected, lock_not_available,
        // query_canceled (lock_timeout / statement_timeout).
        "40001" | "40P01" | "55P03" | "57014" => ErrorKind::Busy,
        "53100" => ErrorKind::DiskFull,
        "25006" => ErrorKind::ReadOnly,
        _ if code.starts_with("42501") => ErrorKind::ReadOnly,
        _ if code.starts_with("23") || code.starts_with("22") => ErrorKind::InvalidInput,
        _ if code.starts_with("08") || code.starts_with("57") => ErrorKind::Io,
        _ if code.starts_with("XX") => ErrorKind::Corrupt,
        _ => ErrorKind::Other,
    }
}

#[doc(hidden)]
impl From<rusqlite::Error> for Error {
    fn from(error: rusqlite::Error) -> Self {
        Error::storage(sqlite_kind(&error), DbScope::current(), error)
    }
}

#[cfg(feature = "postgres")]
#[doc(hidden)]
impl From<postgres::Error> for Error {
    fn from(error: postgres::Error) -> Self {
        Error::storage(pg_kind(&error), DbScope::current(), PgError(error))
    }
}

/// A PostgreSQL client error that says the server's message (the client's
/// own Display is only "db error").
#[cfg(feature = "postgres")]
#[derive(Debug)]
struct PgError(postgres::Error);

#[cfg(feature = "postgres")]
impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_db_error() {
            Some(db) => write!(f, "{} (SQLSTATE {})", db.message(), db.code().code()),
            None => self.0.fmt(f),
        }
    }
}

/// The whole reason of a PostgreSQL client error on one line: the server's
/// message and SQLSTATE, or the client's words and each cause under them
/// (the client's Display alone says "db error", "invalid configuration",
/// "error connecting to server" and keeps the why in `source()`).
/// Any error whose causes include one (refinery's, r2d2's) is told the same
/// way, the server's message in place of "db error".
#[cfg(feature = "postgres")]
pub(crate) fn pg_reason(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut next = Some(error);
    while let Some(cause) = next {
        let server = cause
            .downcast_ref::<postgres::Error>()
            .and_then(postgres::Error::as_db_error);
        let more = match server {
            Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
            None => cause.to_string(),
        };
        if !more.is_empty() && !text.contains(&more) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&more);
        }
        if server.is_some() {
            break;
        }
        next = cause.source();
    }
    text
}

#[cfg(feature = "postgres")]
impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The server's error is already the message.
        if self.0.as_db_error().is_some() {
            None
        } else {
            self.0.source()
        }
    }
}
