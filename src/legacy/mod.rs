//! The legacy JSON dead letter queue format, end to end: everything that
//! knows how the old tool wrote its files lives here, and nothing about
//! them lives anywhere else. docs/legacy-format.md describes the format.
//!
//! - [`codec`]: one item's JSON, read (every historical variant) and
//!   written (the writer's exact shape).

pub mod codec;
