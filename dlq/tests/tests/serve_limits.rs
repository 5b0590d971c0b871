//! `dlq serve` against clients that do not play along: half-sent requests,
//! idle connections by the hundred, a stop while they hang on. The real
//! binary on a free port; the clients are raw sockets.

use super::common::*;
use super::http::request;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A `dlq serve` on a free port, started here (the tests signal it, so they
/// need its process), killed when dropped.
struct Serving {
    child: Child,
    /// `127.0.0.1:PORT`.
    address: String,
    token: String,
}

impl Serving {
    /// `dlq serve --bind 127.0.0.1:0 ARGS` with at most `files` open file
    /// descriptors (when given), once it has printed its URL.
    fn start(db: &Path, args: &[&str], files: Option<u64>) -> Serving {
        let mut command = dlq(db);
        command
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(args)
            .env_remove("DLQ_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(files) = files {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit(2) is async-signal-safe, as pre_exec
            // requires.
            unsafe {
                command.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: files,
                        rlim_max: files,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = command.spawn().expect("start dlq serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let (address, token) = line
            .trim()
            .strip_prefix("http://")
            .and_then(|rest| rest.split_once("/?token="))
            .unwrap_or_else(|| panic!("no URL with a token printed: {line:?}"));
        Serving {
            address: address.to_string(),
            token: token.to_string(),
            child,
        }
    }

    fn get(&self, path: &str) -> u16 {
        let auth = format!("Bearer {}", self.token);
        request(&self.address, "GET", path, &[("Authorization", &auth)], b"").status
    }

    /// The status of a GET with the token, or None when the connection was
    /// closed without one.
    fn status(&self, path: &str) -> Option<u16> {
        let mut stream = self.hang(
            format!(
                "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
                 Connection: close\r\n\r\n",
                self.token
            )
            .as_bytes(),
        );
        let got = closed_within(&mut stream, Duration::from_secs(10))?;
        got.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
    }

    /// A connection that has sent `bytes` and nothing more.
    fn hang(&self, bytes: &[u8]) -> TcpStream {
        let address = self.address.parse().unwrap();
        // A server that stops accepting leaves connects to time out in the
        // kernel's queue (after minutes): 5 s says enough.
        let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect: {e} (is the server still accepting?)"));
        stream.write_all(bytes).unwrap();
        stream
    }

    /// SIGTERM, then how long until it exited (None: not within `limit`).
    fn terminate(&mut self, limit: Duration) -> Option<Duration> {
        let sent = Instant::now();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        while sent.elapsed() < limit {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "dlq serve exited with {status}");
                return Some(sent.elapsed());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the server did with a connection within `limit`: `Some(text)` it
/// sent before closing (empty for a plain close or a reset), `None` if it
/// kept it open all that time.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<String> {
    let until = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(n) => got.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // A reset is a close too.
            Err(_) => return Some(String::from_utf8_lossy(&got).into_owned()),
        }
    }
}

fn database(label: &str) -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new(label);
    let db = dir.path().join("dlq.db");
    add_lines(&db, "job", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    (dir, db)
}

#[test]
fn sigterm_stops_the_server_while_clients_hold_half_sent_requests() {
    let (_dir, db) = database("serve-limits-stop");
    let mut server = Serving::start(&db, &[], None);
    assert_eq!(server.get("/api/jobs"), 200);
    // Half a request head; a whole head and half its body; a connection
    // that sent nothing. None of them needs the token to be held open.
    let _head = server.hang(b"GET /api/jobs HTTP/1.1\r\nHost: x\r\n");
    let _body = server.hang(
        b"POST /api/actions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
          Content-Length: 1000\r\n\r\n{\"action\":",
    );
    let _idle = server.hang(b"");
    // Give the server the time to read what was sent.
    std::thread::sleep(Duration::from_millis(300));
    let took = server.terminate(Duration::from_secs(15));
    // The grace is 5 s; this only tells a stop from none.
    assert!(
        took.is_some_and(|t| t < Duration::from_secs(10)),
        "dlq serve did not exit within 10 s of SIGTERM ({took:?})"
    );
}

#[test]
fn a_connection_that_does_not_send_its_request_head_in_time_is_closed() {
    let (_dir, db) = database("serve-limits-header");
    let server = Serving::start(&db, &["--header-timeout", "1"], None);
    let started = Instant::now();
    let mut half = server.hang(b"GET /api/jobs HTTP/1.1\r\nHost: x\r\nAccept: ");
    let mut idle = server.hang(b"");
    for (name, stream) in [("half a head", &mut half), ("nothing", &mut idle)] {
        let got = closed_within(stream, Duration::from_secs(8))
            .unwrap_or_else(|| panic!("a connection that sent {name} is still open after 8 s"));
        assert_eq!(got, "", "{name}: no answer, only the close");
    }
    assert!(started.elapsed() >= Duration::from_millis(900));
    // A whole request within the timeout is served as ever.
    assert_eq!(server.get("/api/jobs"), 200);
}

#[test]
fn connections_over_the_cap_are_refused_at_once_and_the_server_serves_after() {
    let (_dir, db) = database("serve-limits-cap");
    const CAP: usize = 8;
    // Fewer file descriptors than the connections thrown at it: the cap
    // must keep it from running out.
    let server = Serving::start(
        &db,
        &["--max-connections", "8", "--header-timeout", "60"],
        Some(128),
    );
    assert_eq!(server.get("/api/jobs"), 200);
    let mut held: Vec<TcpStream> = (0..CAP).map(|_| server.hang(b"")).collect();
    // Let the server take them all before the next ones come.
    std::thread::sleep(Duration::from_millis(300));
    let mut over: Vec<TcpStream> = (0..300).map(|_| server.hang(b"")).collect();
    for (i, stream) in over.iter_mut().enumerate() {
        let got = closed_within(stream, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("connection {i} over the cap is still open after 5 s"));
        // A refusal says why when the socket took the answer.
        assert!(
            got.is_empty() || got.starts_with("HTTP/1.1 503"),
            "connection {i}: {got:?}"
        );
    }
    drop(over);
    // A request while the cap is full is refused too, not queued.
    let mut asking = server.hang(b"GET /api/jobs HTTP/1.1\r\nHost: x\r\n\r\n");
    let got = closed_within(&mut asking, Duration::from_secs(5))
        .expect("a request over the cap waited instead of being refused");
    assert!(got.is_empty() || got.starts_with("HTTP/1.1 503"), "{got:?}");
    // The held ones are still open: the cap refused the rest, not them.
    for stream in &mut held {
        assert_eq!(closed_within(stream, Duration::from_millis(50)), None);
    }
    drop(held);
    // Once they are gone, it serves again (their closes reach it soon).
    let until = Instant::now() + Duration::from_secs(5);
    while server.status("/api/jobs") != Some(200) {
        assert!(
            Instant::now() < until,
            "still refusing 5 s after the held connections closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..3 * CAP {
        assert_eq!(server.get("/api/jobs"), 200);
    }
}

/// A search that runs past `--request-timeout` is interrupted inside
/// SQLite and answered 503; the server goes on answering.
#[test]
fn a_search_past_its_time_budget_is_interrupted() {
    if crate::common::sqlite_only("PostgreSQL reads are bounded by statement_timeout") {
        return;
    }
    let dir = crate::common::TempDir::new("serve-request-budget");
    let db = dir.path().join("dlq.db");
    let filler = "abcdefghij".repeat(400);
    crate::common::add_lines(
        &db,
        "j",
        (0..5000).map(|n| {
            crate::common::item(
                &format!("i{n}"),
                1,
                "2025-01-01T00:00:00Z",
                &format!("{filler} {n}"),
            )
        }),
    );
    // 200 tests that each scan every message to its end.
    let filter = (0..200)
        .map(|n| format!("error_message contains \"zz{n}\""))
        .collect::<Vec<_>>()
        .join(" || ");
    let server = crate::http::Server::start(&db, &["--request-timeout", "0.2"]);
    let started = std::time::Instant::now();
    let answer = server.get(&format!(
        "/api/items?job=j&filter={}",
        crate::http::enc(&filter)
    ));
    let took = started.elapsed();
    assert_eq!(answer.status, 503, "{took:?}: {}", answer.body);
    assert!(answer.body.contains("interrupted"), "{}", answer.body);
    // A light request still gets its answer.
    assert_eq!(server.get("/api/items?job=j&limit=1").status, 200);
}

/// A client refused for its token gets `Connection: close` and the
/// connection closed: without a token it cannot keep a slot of
/// --max-connections by asking again and again.
#[test]
fn a_refused_client_does_not_keep_its_connection() {
    use std::io::{Read, Write};
    let dir = crate::common::TempDir::new("serve-refused-close");
    let db = dir.path().join("dlq.db");
    crate::common::add_lines(
        &db,
        "j",
        [crate::common::item("a", 1, "2025-01-01T00:00:00Z", "boom")],
    );
    let server = crate::http::Server::start(&db, &[]);
    let mut stream = std::net::TcpStream::connect(&server.address).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(b"GET /api/live HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    // Read to the end: the server closes after its 401.
    let read = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(read.is_ok(), "still open: {read:?} {text}");
    assert!(text.starts_with("HTTP/1.1 401"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
}

/// A request whose body trickles in (its head whole, so the header timeout
/// is over) is answered 408 and closed once --request-timeout has passed,
/// instead of holding its connection for as long as the client likes.
#[test]
fn a_request_body_sent_too_slowly_is_cut_off_at_the_request_timeout() {
    let (_dir, db) = database("serve-limits-body");
    let server = Serving::start(&db, &["--request-timeout", "1"], None);
    let started = Instant::now();
    let mut slow = server.hang(
        format!(
            "POST /api/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"action\":",
            server.token
        )
        .as_bytes(),
    );
    let got = closed_within(&mut slow, Duration::from_secs(8))
        .expect("a request with a trickling body is still open after 8 s");
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(server.get("/api/jobs"), 200);
}

/// A retry the dashboard started does not keep `dlq serve` from stopping:
/// on SIGTERM its commands get the grace, then are killed, and the item
/// stays with no failure recorded for the kill.
#[test]
fn sigterm_stops_the_server_and_its_retry_commands_within_the_grace() {
    let dir = TempDir::new("serve-limits-retry-stop");
    let db = dir.path().join("dlq.db");
    add_lines(&db, "J", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let marker = dir.path().join("still-running");
    let script = dir.path().join("slow.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat > /dev/null\nsleep 30\ntouch '{}'\n",
            marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut server = Serving::start(&db, &["--exec", script.to_str().unwrap()], None);
    let auth = format!("Bearer {}", server.token);
    let post = |body: serde_json::Value| {
        request(
            &server.address,
            "POST",
            "/api/actions",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.to_string().as_bytes(),
        )
    };
    let dry =
        post(serde_json::json!({"action": "retry", "job_id": "J", "filter": "", "dry_run": true}));
    assert_eq!(dry.status, 200, "{}", dry.body);
    let started = post(serde_json::json!({
        "action": "retry", "job_id": "J", "filter": "", "selection": dry.json()["selection"]
    }));
    assert_eq!(started.status, 200, "{}", started.body);
    let until = Instant::now() + Duration::from_secs(20);
    while count(
        &db,
        "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL",
    ) == 0
    {
        assert!(Instant::now() < until, "the run never claimed the item");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let took = server.terminate(Duration::from_secs(20));
    assert!(
        took.is_some_and(|t| t < Duration::from_secs(10)),
        "dlq serve did not exit within 10 s of SIGTERM with a retry running ({took:?})"
    );
    // The command was killed, not left to finish.
    std::thread::sleep(Duration::from_secs(1));
    assert!(!marker.exists());
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 1);
    assert_eq!(count(&db, "SELECT failure_count FROM items"), 1);
}
