//! dlqlite: a dead letter queue engine on embedded SQLite.
//!
//! Work items that keep failing are kept in one SQLite database with their
//! whole failure history, searchable with plain SQL, analysable, retryable,
//! and never silently lost. The legacy per-item JSON layout is read
//! losslessly by [`import`] and written back by [`export`].
//!
//! ```no_run
//! use dlqlite::{Dlq, DeadLetteredItem};
//! # fn main() -> dlqlite::Result<()> {
//! let dlq = Dlq::open("dlq.db")?;
//! let item = DeadLetteredItem::from_json_str(&std::fs::read_to_string("item.json").unwrap())?;
//! dlq.add("mapreduce-20251123_194253", &item)?;
//! let stats = dlq.job_stats("mapreduce-20251123_194253")?;
//! println!("{} items", stats.total_items);
//! # Ok(()) }
//! ```

#[cfg(feature = "tokio")]
pub mod asynchronous;
pub mod check;
pub mod classify;
#[cfg(feature = "prodigy")]
pub mod compat;
pub mod copy;
#[cfg(feature = "testing")]
pub mod corpus;
pub mod db;
pub mod error;
pub mod export;
pub mod families;
pub mod filter;
#[cfg(feature = "testing")]
pub mod generate;
pub mod import;
mod infile;
pub mod legacy;
pub mod metrics;
pub mod model;
pub mod outfile;
pub mod rank;
pub mod retry;
pub mod store;
pub mod text;
pub mod time;
pub mod watch;

#[cfg(feature = "tokio")]
pub use asynchronous::AsyncDlq;
pub use error::{Error, ErrorKind, NotDlqReason, Result};
pub use model::{DeadLetteredItem, ErrorType, FailureDetail, WorktreeArtifacts};
pub use store::{Category, Dlq, EventKind, JobOptions, ListFilter, OpenOptions, TakeOptions};
pub use time::Timestamp;

// Moved into `legacy`, still reachable at its old path.
pub use legacy::stream as input;

// docs/library.md's Rust examples run as doctests, so they cannot drift
// from the API they show.
#[cfg(doctest)]
#[doc = include_str!("../docs/library.md")]
pub struct LibraryDocDoctests;
