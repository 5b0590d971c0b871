//! Drop-in adapters: other projects' dead-letter APIs, stored through
//! dlqlite. Each lives behind its own cargo feature.
//!
//! - [`prodigy`] (feature `prodigy`): the `DeadLetterQueue` of Prodigy's
//!   `cook::execution::dlq` module, so that module can become a re-export
//!   (see docs/prodigy.md).

pub mod prodigy;
