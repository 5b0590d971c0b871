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
    let file = open_without_waiting(path).map_err(ReadError::Io)?;
    let len = file.metadata().map_err(ReadError::Io)?.len();
    if len > super::MAX_ITEM_BYTES {
        return Err(ReadError::TooLarge(len));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0) + 1);
    // Bounded whatever the size said: /proc and device files say 0.
    file.take(super::MAX_ITEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > super::MAX_ITEM_BYTES {
        return Err(ReadError::TooLarge(bytes.len() as u64));
    }
    Ok(codec::parse_slice(&bytes)?)
}

/// Opens `path` for reading, refused unless it is a regular file, without
/// ever waiting (see `crate::infile`). Links are followed: a queue's
/// own trees hold them.
pub fn open_without_waiting(path: &Path) -> std::io::Result<std::fs::File> {
    crate::infile::open_regular(path, crate::infile::Links::Follow)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A fifo where an item file was (a racer swaps it in after the
    /// listing): refused at once, where a plain open waited for a writer
    /// that never came, and with it the import and every process queued
    /// for its write lock.
    #[test]
    fn a_fifo_is_refused_without_waiting() {
        let dir = std::env::temp_dir().join(format!("dlq-read-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("item.json");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let read = read_item(&fifo);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            matches!(&read, Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidInput),
            "{read:?}"
        );
    }

    /// A file whose size says 0 but never ends (/proc, devices behind a
    /// link) is read up to the cap and refused, not until memory runs out.
    #[test]
    fn a_file_that_says_it_is_empty_is_read_no_further_than_the_cap() {
        let read = read_item(Path::new("/proc/self/pagemap"));
        assert!(read.is_err(), "{read:?}");
    }
}
