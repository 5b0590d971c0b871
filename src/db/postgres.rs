//! Opening a PostgreSQL database: the URL (a password in it is never
//! shown), the connection pool and the schema migrations
//! (migrations/postgres/). The one place that knows how PostgreSQL is set
//! up, as the rest of this module is for SQLite.

#[cfg(test)]
use super::is_url;
use super::redacted_url as redacted;
use crate::error::{Error, ErrorKind, Result};
use r2d2_postgres::PostgresConnectionManager;
use std::time::Duration;

mod embedded {
    refinery::embed_migrations!("migrations/postgres");
}

/// The pool of PostgreSQL connections.
pub(crate) type PgPool = super::pool::Pool<Manager>;

/// A pooled connection with its prepared statements: preparing costs a
/// round trip to the server, and an add runs a dozen statements
/// (measured: one writer's adds 254/s preparing each time).
pub struct PgConn {
    pub client: postgres::Client,
    statements: std::collections::HashMap<String, postgres::Statement>,
}

/// Statements a connection keeps prepared at most (filters compile to many
/// texts): past it the cache starts again.
const MAX_PREPARED: usize = 256;

impl PgConn {
    /// The statement for `sql`, prepared on this connection once.
    pub fn prepare_cached(&mut self, sql: &str) -> Result<postgres::Statement, postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        if self.statements.len() >= MAX_PREPARED {
            self.statements.clear();
        }
        self.statements.insert(sql.to_string(), statement.clone());
        Ok(statement)
    }
}

/// r2d2_postgres's manager, giving [`PgConn`]s.
#[derive(Debug)]
pub struct Manager(PostgresConnectionManager<postgres::NoTls>);

impl r2d2::ManageConnection for Manager {
    type Connection = PgConn;
    type Error = postgres::Error;

    fn connect(&self) -> Result<PgConn, postgres::Error> {
        Ok(PgConn {
            client: self.0.connect()?,
            statements: std::collections::HashMap::new(),
        })
    }

    fn is_valid(&self, conn: &mut PgConn) -> Result<(), postgres::Error> {
        self.0.is_valid(&mut conn.client)
    }

    fn has_broken(&self, conn: &mut PgConn) -> bool {
        self.0.has_broken(&mut conn.client)
    }
}

fn open_error(url: &str, reason: impl std::fmt::Display, kind: ErrorKind) -> Error {
    Error::Open {
        path: redacted(url).into(),
        reason: reason.to_string(),
        kind,
    }
}

/// The schema version this build creates and understands on PostgreSQL.
pub fn supported_schema_version() -> i64 {
    embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| i64::from(m.version()))
        .max()
        .unwrap_or(0)
}

/// Opens a pool on the database at `url` and brings its schema up to date
/// (unless `read_only` or `scratch`, which refuse a database without this
/// build's schema). A `scratch` pool is one connection inside one
/// transaction that is never committed (see `Scratch` below).
/// A password comes from the URL, else `PGPASSWORD`, else `~/.pgpass`.
pub(crate) fn open_pool(
    url: &str,
    create: bool,
    read_only: bool,
    scratch: bool,
    busy: Duration,
    size: u32,
) -> Result<PgPool> {
    let (config, mut client) = connect(url, busy)?;
    let applied = applied_version(&mut client).map_err(|e| open_error(url, &e, e.kind()))?;
    if applied.is_none() && (!create || read_only || scratch) {
        // A command that reads must not create the schema. A database
        // with no tables at all is where a dlq database would be made: as
        // a missing file, NotFound; one holding other tables is not ours.
        let empty = !client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema())",
                &[],
            )
            .map_err(|e| open_error(url, crate::error::pg_reason(&e), ErrorKind::Io))?
            .get::<_, bool>(0);
        if empty {
            return Err(open_error(
                url,
                "no database here yet (the first command that writes creates the dlq schema): \
                 import or add items first",
                ErrorKind::NotFound,
            ));
        }
        return Err(not_dlq(url));
    }
    let supported = supported_schema_version();
    match applied {
        Some(found) if found > supported => {
            return Err(Error::SchemaTooNew {
                path: redacted(url).into(),
                found,
                supported,
            })
        }
        Some(found) if found == supported => {}
        // Upgrading the schema would be a change a dry run must not make.
        _ if scratch => {
            return Err(open_error(
                url,
                "the database has an older dlq schema, which a dry run does not upgrade \
                 (any command that writes does)",
                ErrorKind::ReadOnly,
            ))
        }
        _ if read_only => {
            return Err(open_error(
                url,
                "the database has no dlq schema (or an older one) and the handle is read-only",
                ErrorKind::ReadOnly,
            ))
        }
        _ => migrate(&mut client, url)?,
    }
    drop(client);
    let manager = Manager(PostgresConnectionManager::new(config, postgres::NoTls));
    let builder = r2d2::Pool::builder()
        .min_idle(Some(0))
        // Capped at a year: r2d2 adds it to the clock (Duration::MAX
        // would overflow).
        .connection_timeout(busy.clamp(Duration::from_secs(1), Duration::from_secs(365 * 86_400)));
    let builder = if scratch {
        builder
            .max_size(1)
            // Its one connection holds everything written so far: never
            // closed for being idle or old.
            .idle_timeout(None)
            .max_lifetime(None)
            .connection_customizer(Box::new(Scratch::default()))
    } else {
        builder.max_size(size.max(1))
    };
    Ok(super::pool::Pool::new(
        builder,
        manager,
        |e: &postgres::Error| crate::error::pg_kind(e),
    ))
}

/// The connection of a scratch pool (`--dry-run` on PostgreSQL): it begins
/// a transaction as it is made, and the handle's writes and reads run in
/// savepoints inside it; nothing is ever committed (closing the connection
/// rolls it all back). A second connection would not see the first one's
/// writes, so if the first is lost the pool fails instead of making one.
#[derive(Debug, Default)]
struct Scratch {
    made: std::sync::atomic::AtomicBool,
}

impl r2d2::CustomizeConnection<PgConn, postgres::Error> for Scratch {
    fn on_acquire(&self, conn: &mut PgConn) -> Result<(), postgres::Error> {
        if self.made.swap(true, std::sync::atomic::Ordering::SeqCst) {
            // What the lost connection wrote is gone: the pool fails
            // rather than carry on without it.
            return conn.client.batch_execute(
                "DO $$ BEGIN RAISE EXCEPTION 'the dry run lost its connection to the server'; END $$",
            );
        }
        conn.client.batch_execute("BEGIN")
    }
}

/// One connection to the database at `url` (outside any pool: `dlq sql`),
/// with the configuration the pool's connections get.
pub fn connect(url: &str, busy: Duration) -> Result<(postgres::Config, postgres::Client)> {
    // `postgres://me@/var/run/postgresql/dlq`: an empty host and a database
    // name with slashes is a socket directory written as it is; the client
    // would try localhost and a database named "var/run/...".
    let after_scheme = url.split_once("://").map_or("", |(_, rest)| rest);
    let after_user = after_scheme
        .rsplit_once('@')
        .map_or(after_scheme, |(_, rest)| rest);
    // `postgres://me@host:5432` names no database: the client would take
    // the user's name as one, and the error would name a database nobody
    // asked for.
    let (location, query) = after_user.split_once('?').unwrap_or((after_user, ""));
    let named = location
        .split_once('/')
        .is_some_and(|(_, db)| !db.is_empty())
        || query.split('&').any(|pair| pair.starts_with("dbname="));
    if !named {
        return Err(open_error(
            url,
            "the URL names no database: postgres://user@host:port/dbname",
            ErrorKind::InvalidInput,
        ));
    }
    if let Some(path) = after_user.strip_prefix('/') {
        if path.split('?').next().unwrap_or_default().contains('/') {
            return Err(open_error(
                url,
                "a Unix socket directory goes percent-encoded in the host \
                 (postgres://me@%2Fvar%2Frun%2Fpostgresql/dbname)",
                ErrorKind::InvalidInput,
            ));
        }
    }
    let mut config: postgres::Config = url.parse().map_err(|e| {
        open_error(
            url,
            format!("not a PostgreSQL URL: {}", crate::error::pg_reason(&e)),
            ErrorKind::InvalidInput,
        )
    })?;
    if config.get_password().is_none() {
        if let Some(password) = password_from_env(&config) {
            config.password(password);
        }
    }
    config.application_name("dlq");
    config.connect_timeout(busy.min(Duration::from_secs(30)));
    // Every statement waits for locks at most the busy timeout, as SQLite's
    // busy_timeout does; past it the error is Busy (55P03).
    // At least 1 ms: PostgreSQL reads a lock_timeout of 0 as "wait forever".
    let lock_ms = busy.as_millis().clamp(1, i32::MAX as u128);
    config.options(&format!("-c lock_timeout={lock_ms} -c TimeZone=UTC"));
    // The first connection is made here, not by the pool: a server that is
    // down or a wrong password fails at once with the server's reason (the
    // pool would retry until its timeout).
    let client = config.connect(postgres::NoTls).map_err(|e| {
        let kind = crate::error::pg_kind(&e);
        let mut reason = crate::error::pg_reason(&e);
        if reason.contains("password missing") {
            reason.push_str(
                " (give it in the URL, postgres://user:password@host/db, or in PGPASSWORD or ~/.pgpass)",
            );
        } else if e.code() == Some(&postgres::error::SqlState::INVALID_CATALOG_NAME) {
            reason.push_str(" (create it first: createdb, or CREATE DATABASE in psql)");
        }
        open_error(
            url,
            reason,
            if kind == ErrorKind::Other {
                ErrorKind::Io
            } else {
                kind
            },
        )
    })?;
    Ok((config, client))
}

/// The password for `config` from PGPASSWORD or the password file
/// (PGPASSFILE or ~/.pgpass: host:port:database:user:password, `*` any).
fn password_from_env(config: &postgres::Config) -> Option<String> {
    if let Some(password) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
        return Some(password.to_string_lossy().into_owned());
    }
    let file = match std::env::var_os("PGPASSFILE") {
        Some(file) => std::path::PathBuf::from(file),
        None => std::path::PathBuf::from(std::env::var_os("HOME")?).join(".pgpass"),
    };
    // As libpq: a password file others may read is not used (and said).
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).ok()?.permissions().mode();
        if mode & 0o077 != 0 {
            eprintln!(
                "dlq: warning: password file {} has group or world access; it is not used \
                 (chmod 0600 it)",
                crate::text::for_terminal(&file.display().to_string())
            );
            return None;
        }
    }
    let text = std::fs::read_to_string(file).ok()?;
    let host = pgpass_host(config.get_hosts().first()?);
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let db = config.get_dbname().unwrap_or_default();
    let user = config.get_user().unwrap_or_default();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let fields = split_pgpass(line);
            let [h, p, d, u, password] = fields.as_slice() else {
                return None;
            };
            let fits = |field: &str, value: &str| field == "*" || field == value;
            (fits(h, &host) && fits(p, &port) && fits(d, db) && fits(u, user))
                .then(|| password.clone())
        })
}

/// The host field a password file line must have for `host`, as libpq
/// matches it: a socket in the default directory matches `localhost`, any
/// other socket its directory's path (the default is /var/run/postgresql
/// on Debian's builds, /tmp on upstream's).
fn pgpass_host(host: &postgres::config::Host) -> String {
    match host {
        postgres::config::Host::Tcp(host) => host.clone(),
        postgres::config::Host::Unix(dir) => {
            let dir = dir.to_string_lossy();
            let dir = dir.trim_end_matches('/');
            if matches!(dir, "/var/run/postgresql" | "/run/postgresql" | "/tmp") {
                "localhost".to_string()
            } else {
                dir.to_string()
            }
        }
    }
}

/// One ~/.pgpass line's fields (`\:` and `\\` are escapes).
fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(field)) = (chars.next(), fields.last_mut()) {
                    field.push(next);
                }
            }
            ':' => fields.push(String::new()),
            c => {
                if let Some(field) = fields.last_mut() {
                    field.push(c);
                }
            }
        }
    }
    fields
}

fn applied_version(client: &mut postgres::Client) -> Result<Option<i64>> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('refinery_schema_history') IS NOT NULL",
            &[],
        )?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let version: Option<i32> = client
        .query_one("SELECT MAX(version) FROM refinery_schema_history", &[])?
        .get(0);
    Ok(version.map(i64::from))
}

/// Applies pending migrations. Processes opening one new database at once
/// take turns on an advisory lock, so only the first creates the schema.
fn migrate(client: &mut postgres::Client, url: &str) -> Result<()> {
    // An arbitrary constant naming dlq's migration lock.
    const MIGRATION_LOCK: i64 = 0x0064_6c71_5f6d_6967;
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])?;
    // Only an empty database becomes a dlq database: another application's
    // tables are left alone. Looked at under the lock, after whoever
    // created the schema first has committed it.
    let foreign = match applied_version(client) {
        Ok(Some(_)) => Ok(false),
        Ok(None) => client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema()
                     AND tablename <> 'refinery_schema_history')",
                &[],
            )
            .map(|row| row.get::<_, bool>(0))
            .map_err(Error::from),
        Err(e) => Err(e),
    };
    let result = match foreign {
        Ok(true) => Err(not_dlq(url)),
        Ok(false) => embedded::migrations::runner()
            .set_grouped(true)
            .run(client)
            .map(|_| ())
            .map_err(|e| Error::Migration {
                path: redacted(url).into(),
                reason: crate::error::pg_reason(&e),
            }),
        Err(e) => Err(e),
    };
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])?;
    result
}

fn not_dlq(url: &str) -> Error {
    Error::NotDlq {
        path: redacted(url).into(),
        what: crate::error::NotDlqReason::NoDlqSchema,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_url("postgres://u@h/db"));
        assert!(is_url("PostgreSQL://u@h/db"));
        assert!(!is_url("postgres.db"));
        assert!(!is_url("./postgres://x"));
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redacted("postgres://me:secret@db.example:5432/dlq"),
            "postgres://me:***@db.example:5432/dlq"
        );
        assert_eq!(
            redacted("postgresql://me@h/dlq?sslmode=disable&password=x"),
            "postgresql://me@h/dlq?sslmode=disable&password=***"
        );
        assert_eq!(redacted("postgres://h/dlq"), "postgres://h/dlq");
        assert_eq!(redacted("postgres://a:b:c@h"), "postgres://a:***@h");
        // What the client library reads as a password holds / ? and @.
        assert_eq!(
            redacted("postgres://app:pa/ss?x@h:5432/db"),
            "postgres://app:***@h:5432/db"
        );
        assert_eq!(redacted("postgres://a:p@ss@h/db"), "postgres://a:***@h/db");
        assert_eq!(
            redacted("postgres://app@h/db?passwor%64=HIDDEN"),
            "postgres://app@h/db?passwor%64=***"
        );
        for url in [
            "postgres://u:SECRET@h/d",
            "postgres://u:SE/CRET@h/d",
            "postgres://u:SE?CRET@h/d",
            "postgres://u@h/d?password=SECRET",
            "postgres://u@h/d?x=1&%70assword=SECRET",
        ] {
            assert!(!redacted(url).contains("SECRET"), "{url}");
        }
    }

    #[test]
    fn a_socket_matches_pgpass_lines_as_libpq_does() {
        use postgres::config::Host;
        assert_eq!(pgpass_host(&Host::Tcp("db.example".into())), "db.example");
        for default in ["/var/run/postgresql", "/tmp/", "/run/postgresql"] {
            assert_eq!(pgpass_host(&Host::Unix(default.into())), "localhost");
        }
        assert_eq!(
            pgpass_host(&Host::Unix("/tmp/pgsuite".into())),
            "/tmp/pgsuite"
        );
    }

    #[test]
    fn pgpass_lines_split_with_escapes() {
        assert_eq!(
            split_pgpass(r"h:5432:db:u:pa\:ss\\"),
            ["h", "5432", "db", "u", r"pa:ss\"]
        );
    }
}
