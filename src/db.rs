//! Opening the database: file creation (mode 0600), the connection pool, the
//! per-connection PRAGMAs and the schema migrations. The one place that knows
//! how SQLite is set up.

use crate::error::{Error, ErrorKind, NotDlqReason, Result};
use r2d2::Pool;
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod embedded {
    refinery::embed_migrations!("migrations/sqlite");
}

/// The pool type every store function takes its connections from.
pub(crate) type DbPool = pool::Pool<SqliteConnectionManager>;

/// How long a connection waits for another writer before giving up, unless
/// [`crate::OpenOptions::busy_timeout`] says otherwise.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections a file database's pool holds at most, unless
/// [`crate::OpenOptions::pool_size`] says otherwise.
pub const DEFAULT_POOL_SIZE: u32 = 8;

/// How connections are opened: what [`crate::OpenOptions`] decides, in the
/// form the functions below take.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setup {
    /// Create the file (and its parent directories) when missing.
    pub create: bool,
    /// Open read-only: no migration, no checkpoints, every write refused.
    pub read_only: bool,
    /// How long a statement waits for another connection's lock.
    pub busy_timeout: Duration,
    /// The most connections the pool holds.
    pub pool_size: u32,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            create: true,
            read_only: false,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            pool_size: DEFAULT_POOL_SIZE,
        }
    }
}

/// A busy timeout SQLite can take (at most 2^31-1 ms).
pub(crate) fn clamp_timeout(timeout: Duration) -> Duration {
    timeout.min(Duration::from_millis(i32::MAX as u64))
}

/// The schema version this build creates and understands.
pub fn supported_schema_version() -> i64 {
    embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| i64::from(m.version()))
        .max()
        .unwrap_or(0)
}

/// Process-wide SQLite settings, applied once before the first connection.
/// Memory statistics put a global mutex around every allocation SQLite
/// makes; dlqlite never reads them, and turning them off is a measured
/// ~10% on bulk writes.
fn configure_sqlite_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: sqlite3_config is called before this process opens any
        // connection through dlqlite; if SQLite was already initialised by
        // someone else it returns SQLITE_MISUSE and changes nothing, which
        // is harmless, so the result is ignored.
        unsafe {
            rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0);
        }
    });
}

/// The SQL functions dlqlite's own queries use (not part of the schema: a
/// `sqlite3` session does not have them, and nothing stored needs them).
/// `dlq_key_hash(text, ...)`: FNV-1a of its text arguments, 32 bits, for
/// the fingerprint of a counted selection (store/selection.rs): row keys
/// alone can come back (a deleted last row's key is given to the next
/// item), an item's identity and state cannot be mistaken for another's.
fn register_functions(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        "dlq_key_hash",
        -1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for n in 0..ctx.len() {
                let text = ctx.get_raw(n).as_str().unwrap_or("");
                for byte in text.bytes().chain(std::iter::once(0xff)) {
                    hash ^= u64::from(byte);
                    hash = hash.wrapping_mul(0x0100_0000_01b3);
                }
            }
            Ok(i64::try_from(hash >> 32).unwrap_or(0))
        },
    )
}

/// PRAGMAs every connection needs. They are per connection (foreign_keys,
/// busy_timeout) or must run outside a transaction (journal_mode), which is
/// why they live here and not in a migration.
fn configure(conn: &mut Connection, read_only: bool, busy: Duration) -> rusqlite::Result<()> {
    conn.busy_timeout(clamp_timeout(busy))?;
    register_functions(conn)?;
    if !read_only {
        // Only takes effect on a new, empty database (before WAL is set).
        // 4 KiB: a WAL frame is a whole page, and an add touches about 11
        // pages (the item, its history and event rows, and their indexes),
        // so the page size decides what each commit writes and syncs.
        // Measured (dlq/benches/wal.rs, 10,000 adds of ~2 KB items) against
        // 8 KiB: 8 threads 2,032 against 1,609 adds/s, p50 3.4 against
        // 4.5 ms; 1 thread p50 0.84 against 1.14 ms. At 100,000 items
        // analyze and stats took the same time, a bulk add 7% longer.
        // (16 KiB wrote twice the WAL of 8 KiB.)
        conn.pragma_update(None, "page_size", 4096)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // FULL: every commit syncs the WAL before it returns, so a dead
        // letter that was added survives a power cut or an OS crash (under
        // NORMAL, SQLite may lose the last commits then). One fsync per
        // commit, measured ~0.2 ms here.
        conn.pragma_update(None, "synchronous", "FULL")?;
        // Commits never checkpoint: the Checkpointer does it off the write
        // path (a checkpoint inside a commit was every slow add's cause).
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        // Each commit reports the WAL's frame count to the checkpointer
        // (set after wal_autocheckpoint, which would replace it).
        conn.wal_hook(Some(note_wal_frames));
        // When the WAL starts over, a file left larger than this by a
        // burst (or a reader that pinned it) is cut back to it.
        conn.pragma_update(None, "journal_size_limit", WAL_BOUND_BYTES)?;
    }
    // Closing the last connection would checkpoint and sync the database
    // file (four more fsyncs for a one-item `dlq add`); the Checkpointer and
    // the next process see to it instead, once the WAL is worth it.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "cache_size", -32_000)?;
    Ok(())
}

/// `configure` for the first connection of a process, which may be turning a
/// new file into a WAL database while another process does the same. The
/// switch needs an exclusive lock, and SQLite answers busy at once, without
/// waiting, when two connections that both read the file ask for it; so wait
/// here, up to the busy timeout.
fn configure_new(conn: &mut Connection, busy: Duration) -> rusqlite::Result<()> {
    let deadline = Instant::now() + clamp_timeout(busy);
    loop {
        match configure(conn, false, busy) {
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// Creates the database at `path` (and its parent directories), mode 0600
/// as item data and error logs can hold secrets; SQLite gives the -wal and
/// -shm files the same mode. The database is built, migrated, under a
/// temporary name beside it and then linked into place, so no process ever
/// sees a half-made one: an empty file at `path` is always someone else's
/// (`touch`), never a dlq that is still creating it, and is refused. Another
/// process that creates it first wins; this one then opens theirs.
fn create_database(path: &Path, busy: Duration) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        // Directories it creates are 0700 whatever the umask: under a
        // world-writable one another user could swap the database.
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| Error::io(parent, e))?;
        }
        #[cfg(not(unix))]
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = sibling(path, &format!(".new-{}-{n}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = options.open(&temp).map_err(|e| Error::io(path, e))?;
    let built = new_image(file, &temp, busy).and_then(|()| {
        match std::fs::hard_link(&temp, path) {
            // The directory entry too must survive a power cut: the first
            // add's commit syncs the WAL, not the directory.
            Ok(()) => sync_dir(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            // A file system without hard links: a rename, which could
            // replace a database another process made meanwhile, so only
            // when there is still none.
            Err(_) if !path.exists() => std::fs::rename(&temp, path)
                .map_err(|e| Error::io(path, e))
                .and_then(|()| sync_dir(path)),
            Err(_) => Ok(()),
        }
    });
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(sibling(&temp, suffix));
    }
    built
}

/// The bytes of a new, migrated, closed database, kept from the first one
/// this process built: every new database starts identical, so the next
/// ones are a copy (a new queue per temporary directory, as Prodigy's tests
/// make them, then costs a write and a sync, not a migration).
static NEW_IMAGE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

/// Makes the empty file `file` at `temp` a migrated WAL database, synced:
/// a copy of [`NEW_IMAGE`], or built (and kept as the image).
fn new_image(mut file: std::fs::File, temp: &Path, busy: Duration) -> Result<()> {
    use std::io::Write;
    if let Some(image) = NEW_IMAGE.get() {
        return file
            .write_all(image)
            .and_then(|()| file.sync_all())
            .map_err(|e| Error::io(temp, e));
    }
    drop(file);
    build_new(temp, busy)?;
    // The file is this process's alone and closed by SQLite: reading it
    // drops no lock of anyone's. A new database is a few hundred KiB.
    if let Ok(image) = std::fs::read(temp) {
        if image.len() <= 4 << 20 {
            let _ = NEW_IMAGE.set(image);
        }
    }
    Ok(())
}

/// Syncs the directory that holds `path`, so a name just made there stays.
fn sync_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Makes the empty file at `temp` a migrated WAL database, closed.
fn build_new(temp: &Path, busy: Duration) -> Result<()> {
    let mut conn = Connection::open_with_flags(
        temp,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(temp, e))?;
    conn.pragma_update(None, "page_size", 4096)
        .map_err(|e| open_error(temp, e))?;
    // Before the first table, the only time it can be set without a
    // VACUUM: pages freed by deletes can then be given back to the file
    // system as they go (store/space.rs runs `PRAGMA incremental_vacuum`
    // after purges and retention), so a purged DLQ does not keep its size.
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
        .map_err(|e| open_error(temp, e))?;
    // The file is this process's own until it is linked into place: a
    // crash leaves a stray temporary file, never a half-made database. So
    // it is built without a journal or a sync per step (a new queue cost
    // 10 ms here and 40-190 ms on slower disks, Prodigy making one per
    // test), and synced once, whole, before the link publishes it.
    conn.pragma_update(None, "synchronous", "OFF")
        .map_err(|e| open_error(temp, e))?;
    conn.pragma_update(None, "journal_mode", "MEMORY")
        .map_err(|e| open_error(temp, e))?;
    migrate(&mut conn, temp, busy)?;
    // Last: it writes the header in place and leaves no -wal behind once
    // closed.
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| open_error(temp, e))?;
    conn.close().map_err(|(_, e)| open_error(temp, e))?;
    // No connection has it open now (and no other process knows its
    // name), so opening and closing it here drops no lock of anyone's.
    std::fs::File::open(temp)
        .and_then(|file| file.sync_all())
        .map_err(|e| Error::io(temp, e))
}

/// Refuses an existing file that is not a SQLite database, or is empty,
/// before SQLite opens it for writing (that would make an empty file a
/// database).
///
/// Never through `std::fs`: closing any descriptor of a file drops every
/// POSIX lock the process holds on it, including those of this process's
/// live connections to it, and a `sqlite3` that exits next then believes
/// it is the last user and deletes the `-wal` they still commit into
/// (SQLite's "How To Corrupt An SQLite Database File", 2.2). The size
/// comes from `stat`, which opens nothing; the header is read by SQLite,
/// whose VFS shares one descriptor per file across connections and defers
/// closing it while any lock is held.
fn check_file(path: &Path) -> Result<()> {
    let size = std::fs::metadata(path)
        .map_err(|e| Error::io(path, e))?
        .len();
    let what = if size == 0 {
        // SQLite writes a new database's first page into the file itself
        // (switching to WAL does); pages only in a WAL would still be a
        // database, so look before calling it empty.
        if std::fs::metadata(sibling(path, "-wal")).map_or(0, |m| m.len()) > 0 {
            return Ok(());
        }
        NotDlqReason::EmptyFile
    } else if is_not_a_database(path) {
        NotDlqReason::NotSqlite
    } else {
        return Ok(());
    };
    Err(Error::NotDlq {
        path: path.to_path_buf(),
        what,
    })
}

/// Whether SQLite says the non-empty file at `path` is no database (its
/// header is not SQLite's). Any other failure to read it is left to the
/// open that follows, which says what it is.
fn is_not_a_database(path: &Path) -> bool {
    let Ok(conn) = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) else {
        return false;
    };
    // Reading the schema cookie reads page 1, where the header is checked.
    let read = conn.query_row("PRAGMA schema_version", [], |row| row.get::<_, i64>(0));
    matches!(read, Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase))
}

/// Why the database at `path` cannot be written, if it is the file or its
/// directory: SQLite only says "readonly" or "unable to open". Asked with
/// access(2), never by opening the file (see [`check_file`]).
fn why_read_only(path: &Path) -> Option<String> {
    match access_error(path) {
        None => {}
        Some(e) if e == libc::EROFS => return Some("the file system is read-only".to_string()),
        Some(e) if e == libc::EACCES || e == libc::EPERM => {
            return Some("the file is read-only".to_string())
        }
        Some(_) => return None,
    }
    let dir = directory_of(path);
    (!dir_writable(&dir)).then(|| format!("the directory {} is read-only", dir.display()))
}

/// The directory holding `path` (`.` for a bare file name).
fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether `file` is the SQLite database at `db`, its `-wal` or its
/// `-shm` under any name (device and inode). Reading one of them as input
/// would open and close it beside this process's connections, which drops
/// their locks (see `check_file`); callers refuse it instead.
pub fn is_database_file(db: &Path, file: &Path) -> bool {
    let ids = database_file_ids(db);
    !ids.is_empty() && file_id(file).is_some_and(|id| ids.contains(&id))
}

/// The SQLite databases this process has opened: what no file it writes
/// may replace (an output named after one of them, or its -wal or -shm,
/// would destroy committed data).
static OPENED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn note_opened(path: &Path) {
    let mut opened = lock_ignoring_poison(&OPENED);
    if !opened.iter().any(|p| p == path) {
        opened.push(path.to_path_buf());
    }
}

/// Whether `file` is a database this process opened, or its -wal or -shm,
/// under any name (device and inode, asked with stat): an output must not
/// replace it.
pub fn is_opened_database_file(file: &Path) -> bool {
    let Some(id) = file_id(file) else {
        return false;
    };
    lock_ignoring_poison(&OPENED)
        .iter()
        .any(|db| database_file_ids(db).contains(&id))
}

/// The (device, inode) of the database at `db` and of its `-wal`, `-shm`
/// and `-journal`, those that exist (none for a server URL): the files nothing in
/// dlqlite may open and close outside SQLite (see `check_file`).
pub fn database_file_ids(db: &Path) -> Vec<(u64, u64)> {
    if db.to_str().is_some_and(is_url) {
        return Vec::new();
    }
    // A rollback journal exists only for a moment (dlqlite keeps WAL),
    // but one that is there is as much the database's as the WAL.
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .filter_map(|suffix| file_id(&sibling(db, suffix)))
        .collect()
}

/// A file's (device, inode), by stat: the file is not opened.
pub fn file_id(file: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(file).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether this process may create files in `dir`.
fn dir_writable(dir: &Path) -> bool {
    access_error(dir).is_none()
}

/// Why this process may not write `path`, as access(2) says (an errno),
/// or `None` when it may. access(2) also honours the immutable flag and
/// read-only mounts for root, and opens nothing.
fn access_error(path: &Path) -> Option<i32> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        // SAFETY: `name` is a valid NUL-terminated string for the call.
        if unsafe { libc::access(name.as_ptr(), libc::W_OK) } == 0 {
            return None;
        }
        std::io::Error::last_os_error().raw_os_error()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The WAL of the database at `path` when a reader cannot see it: it holds
/// data, and there is no -shm index and none can be made (a read-only
/// directory). SQLite then refuses to open the database at all; a read-only
/// handle opens it as `immutable`, reading the database file alone, and
/// misses what the WAL holds. Gives the WAL's path and size.
pub fn unreadable_wal(path: &Path) -> Option<(PathBuf, u64)> {
    let wal = sibling(path, "-wal");
    let size = std::fs::metadata(&wal).ok()?.len();
    (size > 0 && !sibling(path, "-shm").exists() && !dir_writable(&directory_of(path)))
        .then_some((wal, size))
}

/// A read-only handle's error when the database cannot be written (the
/// SQLite error otherwise).
fn read_only_or(path: &Path, error: rusqlite::Error) -> Error {
    let kind = crate::error::sqlite_kind(&error);
    let cant_open = error.sqlite_error_code() == Some(rusqlite::ErrorCode::CannotOpen);
    if kind == ErrorKind::ReadOnly || cant_open {
        if let Some(reason) = why_read_only(path) {
            return Error::ReadOnly {
                path: path.to_path_buf(),
                reason,
            };
        }
    }
    open_error(path, error)
}

/// `file:` URI of `path` opened `immutable`: every byte but unreserved ones
/// and `/` percent-encoded, as SQLite decodes them.
fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    for byte in bytes {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// Opens the database at `path` as `setup` says: created if missing (when
/// allowed), migrated to the current schema (read-write only), behind a
/// connection pool.
/// The pool, and whether it reads the file `immutable` (see
/// [`open_read_only_with`]): such a handle sees nothing committed later.
pub(crate) fn open_pool(path: &Path, setup: Setup) -> Result<(DbPool, bool)> {
    configure_sqlite_once();
    if path.is_dir() {
        return Err(Error::Open {
            path: path.to_path_buf(),
            reason: "is a directory".to_string(),
            kind: ErrorKind::InvalidInput,
        });
    }
    if let Ok(meta) = std::fs::metadata(path) {
        // A fifo would block the open forever, a device is no database.
        if !meta.is_file() {
            return Err(Error::Open {
                path: path.to_path_buf(),
                reason: "is not a regular file".to_string(),
                kind: ErrorKind::InvalidInput,
            });
        }
    }
    let busy = setup.busy_timeout;
    if !path.exists() {
        if !setup.create || setup.read_only {
            return Err(Error::Open {
                path: path.to_path_buf(),
                reason: "no such database file".to_string(),
                kind: ErrorKind::NotFound,
            });
        }
        create_database(path, busy)?;
    }
    check_file(path)?;
    let read_only = setup.read_only;
    // Configure and migrate on a connection of our own first, so a file that
    // is not SQLite or a newer schema fails at once instead of inside the
    // pool's retry loop.
    let (conn, target) = if read_only {
        let (conn, found, target) = open_read_only_with(path, busy)?;
        // A read-only handle cannot migrate: it needs the schema this build
        // reads.
        let supported = supported_schema_version();
        match found {
            None => {
                return Err(Error::NotDlq {
                    path: path.to_path_buf(),
                    what: NotDlqReason::ForeignSqlite,
                })
            }
            Some(found) if found != supported => {
                return Err(Error::Open {
                    path: path.to_path_buf(),
                    reason: format!(
                        "schema version {found} is older than this dlq's ({supported}); open it read-write once to upgrade it"
                    ),
                    kind: ErrorKind::ReadOnly,
                })
            }
            Some(_) => {}
        }
        (conn, target)
    } else {
        let target = Target::plain(path, false);
        let mut conn =
            Connection::open_with_flags(path, target.flags).map_err(|e| read_only_or(path, e))?;
        // SQLite opens a file it may not write read-only without a word:
        // say so now, not as "attempt to write a readonly database" at the
        // first write.
        if conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
            return Err(Error::ReadOnly {
                path: path.to_path_buf(),
                reason: why_read_only(path)
                    .unwrap_or_else(|| "SQLite opened it read-only".to_string()),
            });
        }
        // Before configure_new, which would switch it to WAL.
        // Its first read is where a directory without room for the -shm
        // shows ("unable to open database file").
        refuse_foreign(&conn, path).map_err(|e| {
            let cannot_open = matches!(e, Error::Open { .. })
                && matches!(
                    e.kind(),
                    ErrorKind::Io | ErrorKind::NotFound | ErrorKind::ReadOnly
                );
            match why_read_only(path).filter(|_| cannot_open) {
                Some(reason) => Error::ReadOnly {
                    path: path.to_path_buf(),
                    reason,
                },
                None => e,
            }
        })?;
        if !setup.create && applied_schema_version(&conn)?.is_none() {
            // Opening an existing database: a SQLite file without any
            // table is not one (yet) either.
            return Err(Error::NotDlq {
                path: path.to_path_buf(),
                what: NotDlqReason::ForeignSqlite,
            });
        }
        configure_new(&mut conn, busy).map_err(|e| read_only_or(path, e))?;
        migrate(&mut conn, path, busy)?;
        (conn, target)
    };
    drop(conn);
    note_opened(path);
    let immutable = target.flags.contains(OpenFlags::SQLITE_OPEN_URI);
    let manager = SqliteConnectionManager::file(&target.name)
        .with_flags(target.flags)
        .with_init(move |conn| configure(conn, read_only, busy));
    let builder = Pool::builder()
        .max_size(setup.pool_size.max(1))
        .min_idle(Some(0))
        // Past 2^31-1 ms r2d2's wait for a connection never ends (measured:
        // a busy timeout of Duration::MAX hung the first add).
        .connection_timeout(clamp_timeout(busy.saturating_add(Duration::from_secs(5))));
    Ok((
        pool::Pool::new(builder, manager, crate::error::sqlite_kind),
        immutable,
    ))
}

/// What SQLite is asked to open: the file's name (or an `immutable` URI)
/// and the flags.
struct Target {
    name: PathBuf,
    flags: OpenFlags,
}

impl Target {
    fn plain(path: &Path, read_only: bool) -> Self {
        let access = if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
        };
        Target {
            name: path.to_path_buf(),
            flags: access | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        }
    }

    /// The file alone, its WAL ignored: see [`unreadable_wal`].
    fn immutable(path: &Path) -> Self {
        Target {
            name: PathBuf::from(immutable_uri(path)),
            flags: OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        }
    }

    fn open(&self, path: &Path, busy: Duration) -> Result<(Connection, Option<i64>)> {
        let mut conn =
            Connection::open_with_flags(&self.name, self.flags).map_err(|e| open_error(path, e))?;
        configure(&mut conn, true, busy).map_err(|e| open_error(path, e))?;
        let found = check_not_newer(&conn, path)?;
        Ok((conn, found))
    }
}

/// Opens an existing database read-only (for ad-hoc queries, and to check
/// the source of a scratch copy). Refuses a database whose schema is newer
/// than this build; an older one, or another application's, is read as it
/// is.
pub(crate) fn open_read_only(path: &Path) -> Result<Connection> {
    check_file(path)?;
    open_read_only_with(path, DEFAULT_BUSY_TIMEOUT).map(|(conn, _, _)| conn)
}

/// [`open_read_only`] with a busy timeout; also gives the schema version
/// found (`None`: not a dlqlite database) and what was opened. The read-only
/// pool starts here.
fn open_read_only_with(path: &Path, busy: Duration) -> Result<(Connection, Option<i64>, Target)> {
    configure_sqlite_once();
    if !path.is_file() {
        return Err(Error::Open {
            path: path.to_path_buf(),
            reason: "no such database file".to_string(),
            kind: ErrorKind::NotFound,
        });
    }
    let plain = Target::plain(path, true);
    match plain.open(path, busy) {
        Ok((conn, found)) => Ok((conn, found, plain)),
        // A WAL database in a directory where no -shm can be made: SQLite
        // cannot open it read-only ("unable to open database file") unless
        // told that nothing changes it, which holds there (a writer could
        // not make its -wal either). What a WAL left in it holds stays
        // unseen: see unreadable_wal.
        // A user who may not write the directory gets "attempt to write a
        // readonly database" instead (SQLite would make the -shm): the same
        // case.
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::Io | ErrorKind::NotFound | ErrorKind::ReadOnly
            ) =>
        {
            if dir_writable(&directory_of(path)) {
                return Err(e);
            }
            let immutable = Target::immutable(path);
            let (conn, found) = immutable.open(path, busy)?;
            Ok((conn, found, immutable))
        }
        Err(e) => Err(e),
    }
}

/// An in-memory database behind a pool of one connection (each SQLite
/// in-memory connection is its own database). With `from`, it starts as a
/// copy of that database file: a dry run works on the copy.
pub(crate) fn open_memory_pool(from: Option<&Path>) -> Result<DbPool> {
    configure_sqlite_once();
    let source = from.map(Path::to_path_buf);
    let manager = SqliteConnectionManager::memory()
        .with_flags(
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_URI,
        )
        .with_init(move |conn| {
            if let Some(source) = &source {
                // Opened as every reader opens it: read-only, and
                // `immutable` in a directory where no -shm can be made
                // (a dry run on a read-only database).
                let from = open_read_only(source)
                    .map_err(|_| rusqlite::Error::InvalidPath(source.clone()))?;
                rusqlite::backup::Backup::new(&from, conn)?.run_to_completion(
                    1 << 16,
                    Duration::ZERO,
                    None,
                )?;
            }
            configure(conn, false, DEFAULT_BUSY_TIMEOUT)
        });
    let label = from
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(":memory:"));
    if let Some(source) = from {
        // Surface a bad or too-new source here, not inside the pool.
        open_read_only(source)?;
    }
    let builder = Pool::builder()
        .max_size(1)
        .connection_timeout(DEFAULT_BUSY_TIMEOUT + Duration::from_secs(5));
    let pool = pool::Pool::new(builder, manager, crate::error::sqlite_kind);
    let mut conn = pool.get().map_err(|e| open_error(&label, e))?;
    migrate(&mut conn, &label, DEFAULT_BUSY_TIMEOUT)?;
    drop(conn);
    Ok(pool)
}

fn open_error(path: &Path, error: impl OpenCause) -> Error {
    let mut kind = error.kind();
    // SQLite says "unable to open" both for a missing file and for one it
    // may not open (permissions, a read-only file system).
    if kind == ErrorKind::NotFound && path.exists() {
        kind = ErrorKind::Io;
    }
    let mut reason = error.to_string();
    // r2d2 wraps the SQLite message; keep the part a person can act on.
    if let Some(rest) = reason.strip_prefix("timed out waiting for connection: ") {
        reason = rest.to_string();
    }
    Error::Open {
        path: path.to_path_buf(),
        reason,
        kind,
    }
}

/// What can stop a database from opening, and its [`ErrorKind`].
trait OpenCause: std::fmt::Display {
    fn kind(&self) -> ErrorKind;
}

impl OpenCause for rusqlite::Error {
    fn kind(&self) -> ErrorKind {
        crate::error::sqlite_kind(self)
    }
}

impl OpenCause for Error {
    fn kind(&self) -> ErrorKind {
        Error::kind(self)
    }
}

/// The highest migration version recorded in the database, if any.
pub(crate) fn applied_schema_version(conn: &Connection) -> Result<Option<i64>> {
    let has_table: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'refinery_schema_history')",
        [],
        |row| row.get(0),
    )?;
    if !has_table {
        return Ok(None);
    }
    let version: Option<i64> = conn.query_row(
        "SELECT MAX(CAST(version AS INTEGER)) FROM refinery_schema_history",
        [],
        |row| row.get(0),
    )?;
    Ok(version)
}

fn check_not_newer(conn: &Connection, path: &Path) -> Result<Option<i64>> {
    let applied = applied_schema_version(conn).map_err(|e| open_error(path, e))?;
    let supported = supported_schema_version();
    match applied {
        Some(found) if found > supported => Err(Error::SchemaTooNew {
            path: path.to_path_buf(),
            found,
            supported,
        }),
        other => Ok(other),
    }
}

/// Applies pending migrations. Two processes opening a new database at once
/// may race here. refinery reads the applied versions before it opens its
/// (grouped, all-or-nothing) transaction, so the loser either fails as busy
/// or, having read a stale version, fails on `CREATE TABLE` of a table the
/// winner just made. Either way its transaction rolled back; when the applied
/// version has moved meanwhile it looks again, and finds nothing left to do.
fn migrate(conn: &mut Connection, path: &Path, busy: Duration) -> Result<()> {
    // Off while migrating: a migration that makes a table again (V14) drops
    // the old one, and with foreign keys on that would first delete its
    // rows and, by cascade, theirs. (A PRAGMA inside refinery's
    // transaction would do nothing, so it is set here, around it.)
    let foreign_keys: bool = conn
        .query_row("PRAGMA foreign_keys", [], |row| row.get(0))
        .map_err(|e| open_error(path, e))?;
    conn.pragma_update(None, "foreign_keys", "OFF")
        .map_err(|e| open_error(path, e))?;
    let migrated = migrate_pending(conn, path, busy);
    if foreign_keys {
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| open_error(path, e))?;
    }
    migrated
}

fn migrate_pending(conn: &mut Connection, path: &Path, busy: Duration) -> Result<()> {
    let deadline = Instant::now() + clamp_timeout(busy);
    loop {
        let before = check_not_newer(conn, path)?;
        if before == Some(supported_schema_version()) {
            return Ok(());
        }
        if before.is_none() {
            refuse_foreign(conn, path)?;
        }
        match embedded::migrations::runner().set_grouped(true).run(conn) {
            Ok(_) => return Ok(()),
            Err(e) => {
                let text = e.to_string();
                let busy = text.contains("database is locked") || text.contains("busy");
                let raced = check_not_newer(conn, path)? != before;
                if (busy || raced) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                return Err(Error::Migration {
                    path: path.to_path_buf(),
                    reason: text,
                });
            }
        }
    }
}

/// Refuses another application's database (a mistyped `--db`): it has
/// tables but no dlqlite schema, and adding ours (or switching it to WAL)
/// would change it.
fn refuse_foreign(conn: &Connection, path: &Path) -> Result<()> {
    if has_foreign_tables(conn).map_err(|e| open_error(path, e))? {
        return Err(Error::NotDlq {
            path: path.to_path_buf(),
            what: NotDlqReason::ForeignSqlite,
        });
    }
    Ok(())
}

/// Whether the database has tables but not dlqlite's migration history
/// (which another process creating this database may have made, still
/// empty, a moment before its migrations commit).
fn has_foreign_tables(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT NOT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'refinery_schema_history')
            AND EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\')",
        [],
        |row| row.get(0),
    )
}

/// This process's turn to write. Every writer of a [`crate::Dlq`] (and the
/// checkpointer's reset) takes it before asking SQLite for the write lock:
/// SQLite's busy handler waits by sleeping (1, 2, 5, 10 ms...), which made
/// eight retry workers 10x slower than the commands they run, while this
/// hands the turn over at once. Unlike a plain mutex it can be waited for
/// with a deadline (a group commit bounds its wait with the earliest
/// deadline of the adds in it). Other processes still meet in SQLite.
#[derive(Debug, Default)]
pub(crate) struct WriteTurn {
    held: std::sync::Mutex<bool>,
    freed: std::sync::Condvar,
}

/// Holding the write turn; dropping it hands the turn on.
pub(crate) struct TurnGuard<'a>(&'a WriteTurn);

impl WriteTurn {
    /// Waits for the turn as long as it takes.
    pub(crate) fn take(&self) -> TurnGuard<'_> {
        let mut held = lock_ignoring_poison(&self.held);
        while *held {
            held = match self.freed.wait(held) {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
        *held = true;
        TurnGuard(self)
    }

    /// Waits for the turn until `deadline`; `None` when it passed first.
    pub(crate) fn take_until(&self, deadline: Instant) -> Option<TurnGuard<'_>> {
        let mut held = lock_ignoring_poison(&self.held);
        while *held {
            let left = deadline.checked_duration_since(Instant::now())?;
            held = match self.freed.wait_timeout(held, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        *held = true;
        Some(TurnGuard(self))
    }
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        *lock_ignoring_poison(&self.0.held) = false;
        self.0.freed.notify_one();
    }
}

/// Locks a mutex whose holder may have panicked: everything guarded here
/// is a flag or a queue that a panic cannot leave half-changed.
pub(crate) fn lock_ignoring_poison<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The file beside the database at `path` whose name adds `suffix`
/// (`-wal`).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A page cache size set on one connection for the length of one operation,
/// and set back (also on an early return or an error) when dropped, before
/// the connection goes back to the pool.
pub(crate) struct CacheSize<'c> {
    conn: &'c Connection,
    schema: &'static str,
    previous: i64,
}

impl<'c> CacheSize<'c> {
    /// Sets the cache of `schema` (`main` or `temp`) to `kib` KiB.
    pub(crate) fn set(conn: &'c Connection, schema: &'static str, kib: i64) -> Result<Self> {
        let previous: i64 =
            conn.query_row(&format!("PRAGMA {schema}.cache_size"), [], |row| row.get(0))?;
        conn.pragma_update(Some(schema), "cache_size", -kib)?;
        Ok(CacheSize {
            conn,
            schema,
            previous,
        })
    }
}

impl Drop for CacheSize<'_> {
    fn drop(&mut self) {
        let _ = self
            .conn
            .pragma_update(Some(self.schema), "cache_size", self.previous);
    }
}

/// Whether `target` names a PostgreSQL database (`postgres://` or
/// `postgresql://`) rather than a SQLite file.
pub fn is_url(target: &str) -> bool {
    let lower = target.get(..13).unwrap_or(target).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// The URL with any password replaced by `***`: what errors and `dlq db`
/// show.
pub fn redacted_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let mut out = format!("{scheme}://");
    // The client library reads everything up to the last `@` as the user
    // and password (a password may hold `/`, `?` or `@`): all of it but
    // the user name goes.
    let host_and_tail = match rest.rsplit_once('@') {
        Some((userinfo, after)) => {
            let user = userinfo.split([':', '/', '?']).next().unwrap_or_default();
            out.push_str(user);
            if user.len() < userinfo.len() {
                out.push_str(":***");
            }
            out.push('@');
            after
        }
        None => rest,
    };
    // A password can also come as a query parameter (under a
    // percent-encoded name, too): every value goes but those of options
    // known to hold no secret, named plainly (`sslmode=require` stays
    // readable; `pass%77ord=...` does not).
    const PLAIN: [&str; 6] = [
        "sslmode",
        "connect_timeout",
        "application_name",
        "target_session_attrs",
        "keepalives",
        "keepalives_idle",
    ];
    match host_and_tail.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if PLAIN.contains(&key) => pair.to_string(),
                    Some((key, _)) => format!("{key}=***"),
                    None => pair.to_string(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(host_and_tail),
    }
    out
}

/// Refuses a target that would otherwise become a SQLite file by mistake:
/// a libpq connection string, or a URL of another scheme or a misspelt one
/// (`postgress://`, `postgres:/`, `sqlite://`). A file of such a name is
/// still reachable as `./name`.
pub fn refuse_lookalike(target: &str) -> crate::error::Result<()> {
    if is_url(target) {
        return Ok(());
    }
    // ` postgres://...` (a stray space from a copy and paste) would be a
    // file in a directory named " postgres:".
    if target.trim() != target && (is_url(target.trim()) || target.trim().contains("://")) {
        return Err(crate::error::Error::invalid_argument(
            "database",
            "the URL has spaces around it: give it without them",
        ));
    }
    // SQLite reads a name that starts with `file:` as a URI (with options
    // of its own), not as that file.
    if target
        .get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("file:"))
    {
        return Err(crate::error::Error::invalid_argument(
            "database",
            "a name starting with `file:` is not taken (SQLite would read it as a URI): \
             give a path (./file:... for a file of that name)",
        ));
    }
    if is_conninfo(target) {
        return Err(crate::error::Error::invalid_argument(
            "database",
            "it looks like a libpq connection string (host=... dbname=...); \
             give a postgres://user@host:port/dbname URL",
        ));
    }
    // RFC 3986 scheme: a letter, then letters, digits, `+`, `-`, `.`; two
    // characters at least, so a Windows-style `C:/` is not one.
    if let Some((scheme, _)) = target.split_once(":/") {
        let is_scheme = scheme.len() >= 2
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if is_scheme {
            return Err(crate::error::Error::invalid_argument(
                "database",
                format!(
                    "`{}:` is not a URL dlq takes: give postgres://user@host:port/dbname \
                     (or postgresql://), or a file path (starting with ./ for a file of \
                     that name)",
                    crate::text::for_terminal(scheme),
                ),
            ));
        }
    }
    Ok(())
}

/// Whether `target` looks like a libpq connection string
/// (`host=... dbname=...`), which `--db` does not take (it would be a file
/// name): a URL is what it takes.
pub fn is_conninfo(target: &str) -> bool {
    target.split_whitespace().any(|word| {
        word.split_once('=').is_some_and(|(key, _)| {
            matches!(
                key,
                "host" | "hostaddr" | "port" | "dbname" | "user" | "password" | "sslmode"
            )
        })
    })
}

mod checkpoint;
pub(crate) mod pool;
pub(crate) use checkpoint::{note_wal_frames, take_wal_frames, Checkpointer};
pub use checkpoint::{
    CHECKPOINT_AT_BYTES, CHECKPOINT_INTERVAL, RESET_AT_BYTES, URGENT_AT_BYTES, WAL_BOUND_BYTES,
};
#[cfg(feature = "postgres")]
pub(crate) mod postgres;

/// The schema version this build creates and understands on PostgreSQL.
#[cfg(feature = "postgres")]
pub fn supported_postgres_schema_version() -> i64 {
    postgres::supported_schema_version()
}
