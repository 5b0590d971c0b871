//! Every file dlq writes that holds item data (exports, reports, requeue
//! files, analyses, the legacy tree): mode 0600 whatever the umask (item
//! data and error logs can hold secrets, like the database), and never
//! written through a link, device or fifo it did not mean to.
//!
//! - [`OutputFile`]: one file, written beside its destination and renamed
//!   over it once complete and synced, so a failed write never leaves half a
//!   file. A destination that is a character device or a fifo (`/dev/null`,
//!   `/dev/stdout`, a named pipe) is written as a stream instead: renaming
//!   over it would replace the device with a regular file.
//! - [`Dir`]: for trees of files (the legacy export): a directory held by
//!   descriptor, in which sub-directories are opened and files created by
//!   name (`openat` with `O_NOFOLLOW`, files `O_CREAT|O_EXCL`), so a link
//!   planted inside the tree makes the write fail instead of landing outside
//!   it, and a level swapped for a link after it was opened is not followed
//!   either: what is written goes where the checked directory is.
//! - [`keep_secret`]: a small secret kept in a file of dlq's own (the
//!   dashboard's token), read when there, else made and created 0600.

use crate::error::{Error, Result};
use std::ffi::{CString, OsStr};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A file being written; see the module docs.
pub struct OutputFile {
    file: File,
    /// Where it goes when committed; `None` for a stream (device or fifo).
    rename: Option<Renaming>,
    /// What errors name.
    path: PathBuf,
}

/// A temporary file in the destination's directory, held open by
/// descriptor: created, renamed over the destination and removed by name
/// in that directory, so no component of the path is looked up again
/// after it was opened.
struct Renaming {
    dir: Dir,
    tmp: std::ffi::OsString,
    dest: std::ffi::OsString,
    /// The temporary file's path, for [`OutputFile::temp_path`].
    tmp_path: PathBuf,
}

fn new_file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}

impl OutputFile {
    /// Starts writing `path`. `-` is standard output. A link there is
    /// replaced, unless it leads to a device, a fifo or this process's own
    /// standard output (as `/dev/stdout` does), which are written as
    /// streams.
    pub fn create(path: &Path) -> Result<Self> {
        let stream = |file: File| OutputFile {
            file,
            rename: None,
            path: path.to_path_buf(),
        };
        if path.as_os_str() == "-" {
            // `-` is standard output for every file dlq writes.
            let fd = std::os::fd::AsFd::as_fd(&std::io::stdout())
                .try_clone_to_owned()
                .map_err(|e| Error::io(path, e))?;
            return Ok(stream(File::from(fd)));
        }
        if let Some(stdout) = stdout_if_same(path) {
            return Ok(stream(stdout));
        }
        if crate::db::is_opened_database_file(path) {
            // Renamed over, the database (or its -wal) would be gone with
            // every commit it held.
            return Err(Error::io(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "is the database (or its -wal or -shm); refusing to write over it",
                ),
            ));
        }
        match std::fs::metadata(path) {
            Ok(meta) if meta.file_type().is_char_device() || meta.file_type().is_fifo() => {
                let file = OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_CLOEXEC)
                    .open(path)
                    .map_err(|e| Error::io(path, e))?;
                // What was opened is what was looked at: a link swapped in
                // between (to a regular file) must not be written through.
                let opened = file.metadata().map_err(|e| Error::io(path, e))?;
                if !(opened.file_type().is_char_device() || opened.file_type().is_fifo()) {
                    return Err(Error::io(
                        path,
                        std::io::Error::other("changed while it was opened; not written"),
                    ));
                }
                return Ok(stream(file));
            }
            Ok(meta) if meta.is_dir() => {
                return Err(Error::io(
                    path,
                    std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory"),
                ))
            }
            Ok(meta) if !meta.is_file() => {
                return Err(Error::io(
                    path,
                    std::io::Error::other("not a regular file, device or fifo"),
                ))
            }
            _ => {}
        }
        let Some(dest) = path.file_name() else {
            return Err(Error::io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
            ));
        };
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // Errors name the destination, as the user wrote it.
        let dir = match Dir::open_root(parent) {
            Ok(Some(dir)) => dir,
            Ok(None) => {
                return Err(Error::io(
                    path,
                    std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
                ))
            }
            Err(Error::Io { source, .. }) => return Err(Error::io(path, source)),
            Err(e) => return Err(e),
        };
        for attempt in 0..100u32 {
            // Short, so a destination name at the length limit still works.
            let tmp =
                std::ffi::OsString::from(format!(".dlq-tmp-{}-{attempt}", std::process::id()));
            match dir.try_create_file(&tmp) {
                Ok(file) => {
                    return Ok(OutputFile {
                        file,
                        rename: Some(Renaming {
                            tmp_path: path.with_file_name(&tmp),
                            dir,
                            tmp,
                            dest: dest.to_os_string(),
                        }),
                        path: path.to_path_buf(),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::AlreadyExists, "no free temporary name"),
        ))
    }

    /// Whether this writes into a stream (a device, fifo or stdout) rather
    /// than a file that is renamed into place.
    pub fn is_stream(&self) -> bool {
        self.rename.is_none()
    }

    /// The file to write into (buffer it: this is the bare file).
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// The destination, for error messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file being written beside the destination, until committed
    /// (`None` for a stream): what an interrupted writer must remove.
    pub fn temp_path(&self) -> Option<&Path> {
        self.rename.as_ref().map(|r| r.tmp_path.as_path())
    }

    /// Finishes: syncs the file, renames it over the destination and syncs
    /// the directory, so the new content is there after a crash. A stream
    /// is only flushed.
    pub fn commit(mut self) -> Result<()> {
        self.file.flush().map_err(|e| Error::io(&self.path, e))?;
        let Some(renaming) = self.rename.take() else {
            return Ok(());
        };
        let result = (|| {
            self.file.sync_all()?;
            renaming.dir.rename(&renaming.tmp, &renaming.dest)?;
            renaming.dir.sync()
        })();
        if result.is_err() {
            let _ = renaming.dir.remove_file(&renaming.tmp);
        }
        result.map_err(|e: std::io::Error| Error::io(&self.path, e))
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // Not committed: the temporary file goes, the destination stays.
        if let Some(renaming) = self.rename.take() {
            let _ = renaming.dir.remove_file(&renaming.tmp);
        }
    }
}

/// When `path` names the very file this process's stdout is (a
/// `/dev/stdout` link, `/proc/self/fd/1`), a duplicate of stdout: renaming
/// over the link would put the output in a new file nobody reads.
fn stdout_if_same(path: &Path) -> Option<File> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let target = std::fs::metadata(path).ok()?;
    let stdout = std::io::stdout();
    let fd = stdout.as_fd().try_clone_to_owned().ok()?;
    let file = File::from(fd);
    let mine = file.metadata().ok()?;
    (mine.dev() == target.dev() && mine.ino() == target.ino()).then_some(file)
}

/// Writes `contents` to `path` as one [`OutputFile`].
pub fn write_file(path: &Path, contents: &[u8]) -> Result<()> {
    let mut out = OutputFile::create(path)?;
    out.file()
        .write_all(contents)
        .map_err(|e| Error::io(path, e))?;
    out.commit()
}

/// A directory held open by descriptor, for writing a tree of files (the
/// legacy export). Every name is looked up in the held directory
/// (`openat`, `mkdirat`, `unlinkat`), never as a path from the tree's root:
/// a level is checked once, when it is opened, and a racer who later swaps
/// it (or any level above it) for a link cannot redirect what is written
/// through it. Below the root no link is ever followed.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// What errors name (the path it was opened by; it may have moved since).
    path: PathBuf,
}

impl Dir {
    /// Opens the directory `path` if it exists (`None` if not). Links are
    /// followed here: the root of a tree, and the levels above it, are the
    /// caller's choice.
    pub fn open_root(path: &Path) -> Result<Option<Dir>> {
        let name = cstring(path.as_os_str()).map_err(|e| Error::io(path, e))?;
        // SAFETY: a valid NUL-terminated path; the descriptor returned is
        // owned by the Dir below.
        let fd = unsafe { libc::open(name.as_ptr(), DIR_FLAGS) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(None);
            }
            return Err(Error::io(path, e));
        }
        Ok(Some(Dir {
            // SAFETY: fd was just opened and is owned by nothing else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            path: path.to_path_buf(),
        }))
    }

    /// [`Dir::open_root`], creating `path` and its missing parents (0700)
    /// first.
    pub fn create_root(path: &Path) -> Result<Dir> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(|e| Error::io(path, e))?;
        Dir::open_root(path)?.ok_or_else(|| {
            Error::io(
                path,
                std::io::Error::new(std::io::ErrorKind::NotFound, "removed while opened"),
            )
        })
    }

    /// The path this directory was opened by, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sub-directory `name`, created (0700) if missing. A link there
    /// (to a directory or not) or anything but a directory is refused.
    pub fn create_dir(&self, name: &OsStr) -> Result<Dir> {
        let path = self.path.join(name);
        let c_name = self.entry_name(name)?;
        // SAFETY: a held directory descriptor and a NUL-terminated name.
        if unsafe { libc::mkdirat(self.fd.as_raw_fd(), c_name.as_ptr(), 0o700) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(Error::io(&path, e));
            }
        }
        // O_NOFOLLOW: what is opened is the entry itself, so a link
        // planted there (before or after mkdirat) fails here instead of
        // being followed.
        // SAFETY: as above; the descriptor is owned by the Dir below.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c_name.as_ptr(),
                DIR_FLAGS | libc::O_NOFOLLOW,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            // Linux says ENOTDIR for a link with O_NOFOLLOW | O_DIRECTORY
            // (ELOOP without O_DIRECTORY): look at the entry to say which.
            if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) {
                let why = if self.is_link(&c_name) {
                    "is a symbolic link; refusing to write through it"
                } else {
                    "exists and is not a directory"
                };
                return Err(Error::io(&path, std::io::Error::other(why)));
            }
            return Err(Error::io(&path, e));
        }
        Ok(Dir {
            // SAFETY: fd was just opened and is owned by nothing else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            path,
        })
    }

    /// Creates the new file `name` in this directory, mode 0600: never an
    /// existing file, never through a link (`O_CREAT|O_EXCL|O_NOFOLLOW`).
    pub fn create_file(&self, name: &OsStr) -> Result<File> {
        self.try_create_file(name)
            .map_err(|e| Error::io(self.path.join(name), e))
    }

    /// [`Dir::create_file`] with the bare I/O error (an existing name is
    /// `AlreadyExists`).
    fn try_create_file(&self, name: &OsStr) -> std::io::Result<File> {
        let c_name = self.plain_name(name)?;
        // SAFETY: a held directory descriptor and a NUL-terminated name;
        // the descriptor is owned by the File below.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c_name.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd was just opened and is owned by nothing else.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Renames the entry `from` to `to`, both in this directory (a `to`
    /// that exists, a link included, is replaced).
    fn rename(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
        let (from, to) = (self.plain_name(from)?, self.plain_name(to)?);
        let fd = self.fd.as_raw_fd();
        // SAFETY: a held directory descriptor and NUL-terminated names.
        if unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes the directory's entries durable (fsync of the directory).
    fn sync(&self) -> std::io::Result<()> {
        // SAFETY: fsync(2) on a held descriptor.
        if unsafe { libc::fsync(self.fd.as_raw_fd()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Removes the entry `name` (the name itself: a link is removed, never
    /// what it points to). A missing entry is not an error; a directory is.
    pub fn remove_file(&self, name: &OsStr) -> Result<()> {
        let c_name = self.entry_name(name)?;
        // SAFETY: a held directory descriptor and a NUL-terminated name.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), c_name.as_ptr(), 0) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(Error::io(self.path.join(name), e));
            }
        }
        Ok(())
    }

    /// Whether the directory has no entries (besides `.` and `..`).
    pub fn is_empty(&self) -> Result<bool> {
        let io = |e| Error::io(&self.path, e);
        // fdopendir takes the descriptor over (closedir closes it): give it
        // a duplicate, which shares the read position, so rewind first.
        let fd = self.fd.try_clone().map_err(io)?;
        // SAFETY: fd is a directory descriptor we own; on success the
        // stream owns it and closedir below closes it.
        let stream = unsafe { libc::fdopendir(fd.as_raw_fd()) };
        if stream.is_null() {
            return Err(io(std::io::Error::last_os_error()));
        }
        std::mem::forget(fd);
        // SAFETY: stream is a valid directory stream until closedir; each
        // entry's name is a NUL-terminated string inside it.
        let empty = unsafe {
            libc::rewinddir(stream);
            let mut empty = true;
            loop {
                let entry = libc::readdir(stream);
                if entry.is_null() {
                    break;
                }
                let name = std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()).to_bytes();
                if name != b"." && name != b".." {
                    empty = false;
                    break;
                }
            }
            libc::closedir(stream);
            empty
        };
        Ok(empty)
    }

    /// `name` as a C string, refused unless it is one plain entry name:
    /// a `/` or `..` would leave the held directory.
    fn entry_name(&self, name: &OsStr) -> Result<CString> {
        self.plain_name(name)
            .map_err(|e| Error::io(self.path.join(name), e))
    }

    /// [`Dir::entry_name`] with the bare I/O error.
    fn plain_name(&self, name: &OsStr) -> std::io::Result<CString> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a plain file name",
            ));
        }
        cstring(name)
    }

    /// Whether the entry `name` is a symbolic link (not followed).
    fn is_link(&self, name: &CString) -> bool {
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a held directory descriptor, a NUL-terminated name and
        // room for one stat, read only when the call succeeded.
        unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0
                && stat.assume_init().st_mode & libc::S_IFMT == libc::S_IFLNK
        }
    }
}

/// How every [`Dir`] is opened: read-only (fdopendir needs that), a
/// directory or nothing, not inherited by children.
const DIR_FLAGS: libc::c_int = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;

fn cstring(name: &OsStr) -> std::io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "contains NUL"))
}

/// A scratch file with no name, mode 0600, in `dir`: gone when closed or
/// when the process dies, and never reachable by another process through
/// the file system. Used to take a slow stream in full before a write
/// transaction starts (`dlq add` from a pipe), with memory flat in its size.
pub fn spool(dir: &Path) -> Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC);
    match options.open(dir) {
        Ok(file) => Ok(file),
        // Any other failure (no such directory, no permission, no space)
        // is the directory's: say so, rather than what the fallback met.
        Err(e)
            if !matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) =>
        {
            Err(Error::io(dir, e))
        }
        // Some file systems have no O_TMPFILE: an exclusive new name,
        // removed at once.
        Err(_) => {
            let unique = format!(
                ".dlq-spool-{}-{}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos())
            );
            let path = dir.join(unique);
            let file = new_file_options()
                .read(true)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
            Ok(file)
        }
    }
}

/// Largest secret file [`keep_secret`] reads.
const MAX_SECRET_BYTES: u64 = 4096;

/// A small secret dlq keeps in a file of its own (the dashboard's access
/// token, `dlq serve --token-file`): the file's text (trimmed) when it is
/// there, else `make`'s, written to a new file, mode 0600, created
/// exclusively in its directory (`O_CREAT|O_EXCL|O_NOFOLLOW`) and synced.
/// The flag says it was created. Two processes that start at once agree:
/// the one that did not create it reads what the other wrote.
///
/// A file there that is not a regular file, is a link, or can be read by
/// anyone but its owner (a secret others can read is not one) is refused.
pub fn keep_secret(path: &Path, make: impl FnOnce() -> Result<String>) -> Result<(String, bool)> {
    use std::os::unix::ffi::OsStrExt as _;
    if path.as_os_str().as_bytes().ends_with(b"/") {
        // `Path` drops a trailing slash: `tok/` would be created as the file
        // `tok`, then refused on every later start as not a directory.
        return Err(Error::invalid_argument(
            path.display().to_string(),
            "ends with /: name a file, not a directory",
        ));
    }
    if let Some(secret) = read_secret(path)? {
        return Ok((secret, false));
    }
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid_argument(path.display().to_string(), "not a file name"))?;
    let dir = Dir::open_root(parent)?.ok_or_else(|| {
        Error::io(
            parent,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        )
    })?;
    let secret = make()?;
    match dir.try_create_file(name) {
        Ok(mut file) => {
            file.write_all(format!("{secret}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .and_then(|()| dir.sync())
                .map_err(|e| Error::io(path, e))?;
            Ok((secret, true))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_secret(path)?
            .map(|secret| (secret, false))
            .ok_or_else(|| Error::io(path, e)),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// The trimmed text of the secret file `path`, `None` when there is none
/// (see [`keep_secret`]).
fn read_secret(path: &Path) -> Result<Option<String>> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let file = match crate::infile::open_regular(path, crate::infile::Links::Refuse) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
    let mode = file
        .metadata()
        .map_err(|e| Error::io(path, e))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(Error::invalid_argument(
            path.display().to_string(),
            format!(
                "mode {:o} lets others read it: a secret must be its owner's alone (chmod 600)",
                mode & 0o777
            ),
        ));
    }
    let mut text = String::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| Error::io(path, e))?;
    if text.len() as u64 > MAX_SECRET_BYTES {
        return Err(Error::invalid_argument(
            path.display().to_string(),
            format!("over {MAX_SECRET_BYTES} bytes: not a token file"),
        ));
    }
    let secret = text.trim();
    if secret.is_empty() {
        return Err(Error::invalid_argument(
            path.display().to_string(),
            "empty: remove it to have a new token made",
        ));
    }
    Ok(Some(secret.to_string()))
}
