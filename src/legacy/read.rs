//! Reading one item file of a legacy tree: whole, refused when its size is
//! over the cap before reading (the old writer's files are small; anything
//! huge is not one of them), parsed by
//! the codec. The old writer overwrote files in place, so truncated and
//! empty files are expected: each fails alone with a one-line reason.

use super::codec::{self, ItemError};
use crate::model::DeadLetteredItem;
use std::io::Read;
use std::path::Path;

/// Why an item file did not read. The text is the one-line reason an
/// import reports for the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read: {0}")]
    Io(#[source] std::io::Error),
    #[error("file too large ({0} bytes)")]
    TooLarge(u64),
    #[error(transparent)]
    Item(#[from] ItemError),
}

/// Reads and parses the item file at `path`.
pub fn read_item(path: &Path) -> Result<DeadLetteredItem, ReadError> {
    let mut file = std::fs::File::open(path).map_err(ReadError::Io)?;
    let len = file.metadata().map_err(ReadError::Io)?.len();
    if len > super::MAX_ITEM_BYTES {
        return Err(ReadError::TooLarge(len));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0) + 1);
    file.read_to_end(&mut bytes).map_err(ReadError::Io)?;
    Ok(codec::parse_slice(&bytes)?)
}
