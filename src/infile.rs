//! Opening a file to read that someone else may have put there (an item
//! file, a watch cursor, a retry command's result file): only a regular
//! file, never waiting, and, when asked, never through a symbolic link.
//!
//! A fifo (listed as a file, or swapped in after a listing) would block a
//! plain open until a writer came, and a file such as /proc/kmsg blocks
//! its reads: opened non-blocking, the fifo opens at once and is refused
//! here, and such a read fails (EAGAIN) instead of hanging dlq and every
//! process waiting for its write lock. Regular files read as usual.
//! Reads stay the caller's, bounded by what it expects (`Read::take`).

use std::fs::File;
use std::path::Path;

/// Whether the last part of the path may be a symbolic link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Links {
    /// Followed: a legacy queue's own trees hold links.
    Follow,
    /// Refused (`O_NOFOLLOW`): a file dlq reads for itself, where a link
    /// would be a redirection someone else planted.
    Refuse,
}

/// Opens `path` for reading, refused unless it is a regular file
/// (`InvalidInput`), without ever waiting.
pub(crate) fn open_regular(path: &Path, links: Links) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let no_follow = match links {
            Links::Follow => 0,
            Links::Refuse => libc::O_NOFOLLOW,
        };
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | no_follow);
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if links == Links::Refuse && e.raw_os_error() == Some(libc::ELOOP) {
            return std::io::Error::other("is a symbolic link; refusing to follow it");
        }
        e
    })?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a fifo, socket or device)",
        ));
    }
    Ok(file)
}
