//! Failure families: every dead letter grouped by its cause, the way the
//! best log parsers group log lines into templates.
//!
//! [`key`] takes what decides a family out of a failure (its error line,
//! the words that name the cause, its crash site); [`miner`] mines
//! templates from those keys online, so a family is known the moment a
//! failure is written and keeps its id as its template generalises.
//! docs/families.md says how it works, what it is measured on, and where it
//! still fails.

/// The version of the rules that decide a failure's family (the key and
/// the miner), bumped when a change gives some failures another family:
/// a failure written after the change would not join a family its cause
/// got before it. A database records the version its families were mined
/// with; `dlq families` says when that is older, and `dlq families rebuild
/// --all` mines every item again with the current rules, keeping ids and
/// merges. 3: 2026-11-28 (quoted error text in API bodies and exceptions
/// read as words; the last words of a long line kept); 2: 2026-11-28 (a
/// crash without its runner's exit status, sites by their last two path
/// parts); 1: unrecorded, everything before.
pub const RULES: u32 = 3;

pub mod key;
pub mod miner;

pub use miner::{Assigned, Family, Miner};
