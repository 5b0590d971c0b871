//! Failure families: every dead letter grouped by its cause, the way the
//! best log parsers group log lines into templates.
//!
//! [`key`] takes what decides a family out of a failure (its error line,
//! the words that name the cause, its crash site); [`miner`] mines
//! templates from those keys online, so a family is known the moment a
//! failure is written and keeps its id as its template generalises.
//! docs/families.md says how it works, what it is measured on, and where it
//! still fails.

pub mod key;
pub mod miner;

pub use miner::{Assigned, Family, Miner};
