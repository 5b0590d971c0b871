//! The legacy JSON dead letter queue format, end to end: how the old tool
//! laid out, named and wrote its files lives here. Two rules of its writer
//! live with what they decide: which optional fields a new item leaves
//! out (`model`, `writer_omitted`) and the error signature (`classify`).
//! docs/legacy-format.md describes
//! the format; what the rest of the crate does with it (importing into the
//! database, exporting back out, requeueing) is in [`crate::import`],
//! [`crate::export`] and [`crate::retry::requeue`].
//!
//! - [`codec`]: one item's JSON, read (every historical variant) and
//!   written (the writer's exact shape).
//! - [`layout`]: where a tree keeps job directories, items and index.json.
//! - [`names`]: safe file names for ids.
//! - [`discover`]: walking a tree for its job directories and item files.
//! - [`index`]: a job's index.json, and where it disagrees with the files.
//! - [`read`]: one item file from disk.
//! - [`write`](mod@write): writing a tree.
//! - [`stream`]: items from a stream (one, a JSON array, or JSON lines).
//! - [`items_file`]: the `{"items": [...]}` file a resumed map phase reads.

pub mod codec;
pub mod discover;
pub mod index;
pub mod items_file;
pub mod layout;
pub mod names;
pub mod read;
pub mod stream;
pub mod write;

/// The most one item may take, in a file or in a stream: more is not an
/// item the old writer made, and reading it whole could take gigabytes (a
/// 300 MB item took 2.1 GB of memory).
pub const MAX_ITEM_BYTES: u64 = 64 << 20;
