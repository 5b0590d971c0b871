//! The library's typed error. Every variant says what went wrong and names the
//! path, item or position it is about; the cause stays reachable through
//! `source()`.

use std::path::PathBuf;

/// Result with the library error as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong inside dlqlite.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite reported an error.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),

    /// The connection pool could not hand out a connection.
    #[error("database pool error: {0}")]
    Pool(#[from] r2d2::Error),

    /// The database could not be opened or prepared.
    #[error("cannot open database {path}: {reason}")]
    Open { path: PathBuf, reason: String },

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

    /// A JSON value could not be produced or read.
    #[error("json error: {0}")]
    Json(#[from] serde_json::Error),
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

    /// An invalid-argument error.
    pub fn invalid_argument(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            what: what.into(),
            reason: reason.into(),
        }
    }
}
