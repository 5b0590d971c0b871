//! A real `dlq serve` for the tests, and the smallest HTTP/1.1 client that
//! can talk to it and to chromedriver (std only: no client crate to build).

use super::common::dlq;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

/// An HTTP answer.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// The first header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// One request to `address` (`host:port`), `Connection: close`.
pub fn request(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut stream =
        TcpStream::connect(address).unwrap_or_else(|e| panic!("connect {address}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // A server may answer (413) and close before a large body is all sent:
    // the answer is still there to read.
    let sent = stream.write_all(body);
    // Read to the end of the body its Content-Length gives, not to the end
    // of the stream: chromedriver answers `Connection: close` and keeps the
    // connection open all the same.
    let mut raw = Vec::new();
    let mut buffer = [0u8; 64 * 1024];
    loop {
        let n = match stream.read(&mut buffer) {
            Ok(n) => n,
            Err(e) if raw.is_empty() => {
                sent.unwrap_or_else(|e| panic!("send {method} {path}: {e}"));
                panic!("read {method} {path}: {e}");
            }
            Err(_) => 0,
        };
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buffer[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let length = String::from_utf8_lossy(&raw[..end])
                .split("\r\n")
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse::<usize>().ok());
            if length.is_some_and(|length| raw.len() >= end + 4 + length) {
                break;
            }
        }
    }
    if raw.is_empty() {
        sent.unwrap_or_else(|e| panic!("send {method} {path}: {e}"));
    }
    parse(&raw)
}

fn parse(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&data[..end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            return out;
        }
        let start = end + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
}

/// A running `dlq serve` on a free port, killed when dropped.
pub struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
    pub token: String,
    /// The URL it printed, token included.
    pub url: String,
}

impl Server {
    /// `dlq --db DB serve --bind 127.0.0.1:0 ARGS...`, once it has printed
    /// its URL.
    pub fn start(db: &Path, args: &[&str]) -> Server {
        let mut child = dlq(db)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(args)
            .env_remove("DLQ_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start dlq serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        if line.is_empty() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("dlq serve printed no URL: {err}");
        }
        let url = line.trim().to_string();
        let rest = url.strip_prefix("http://").expect("http URL");
        // A generated token is in the URL; one given with --token is not
        // printed.
        let given = args
            .iter()
            .position(|a| *a == "--token")
            .map(|i| args[i + 1].to_string())
            .or_else(|| {
                // One kept in a file (--token-file) is not printed either.
                let at = args.iter().position(|a| *a == "--token-file")?;
                Some(
                    std::fs::read_to_string(args[at + 1])
                        .ok()?
                        .trim()
                        .to_string(),
                )
            });
        let (address, token) = match (rest.split_once("/?token="), given) {
            (Some((address, query)), None) => (address.to_string(), query.to_string()),
            (None, Some(token)) => (rest.trim_end_matches('/').to_string(), token),
            _ => panic!("a printed token is not the given one, or none at all: {url}"),
        };
        Server {
            child,
            address,
            token,
            url,
        }
    }

    /// GET with the bearer token.
    pub fn get(&self, path: &str) -> Response {
        let auth = format!("Bearer {}", self.token);
        request(&self.address, "GET", path, &[("Authorization", &auth)], b"")
    }

    /// GET without any token.
    pub fn get_anonymous(&self, path: &str) -> Response {
        request(&self.address, "GET", path, &[], b"")
    }

    /// A request with the bearer token and more headers.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let auth = format!("Bearer {}", self.token);
        let mut all = vec![("Authorization", auth.as_str())];
        all.extend_from_slice(headers);
        request(&self.address, method, path, &all, body)
    }

    /// What a browser does with the printed URL: GET `/?token=T`, which
    /// answers a redirect setting the cookie; returns the `Set-Cookie`
    /// header (attributes included).
    pub fn login(&self) -> String {
        let answer = self.get_anonymous(&format!("/?token={}", self.token));
        assert_eq!(answer.status, 303, "{answer:?}");
        answer
            .header("set-cookie")
            .unwrap_or_else(|| panic!("no cookie: {answer:?}"))
            .to_string()
    }

    /// `name=value` of the login cookie, as a browser sends it back.
    pub fn cookie(&self) -> String {
        self.login().split(';').next().unwrap().trim().to_string()
    }

    /// GET with the cookie only (as a browser).
    pub fn get_cookie(&self, path: &str) -> Response {
        let cookie = self.cookie();
        request(&self.address, "GET", path, &[("Cookie", &cookie)], b"")
    }

    /// POST a form (`name=value` pairs, encoded here) with the cookie only,
    /// as a browser posts the dashboard's forms.
    pub fn post_form(&self, path: &str, pairs: &[(&str, &str)]) -> Response {
        let cookie = self.cookie();
        let body = form(pairs);
        request(
            &self.address,
            "POST",
            path,
            &[
                ("Cookie", &cookie),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            body.as_bytes(),
        )
    }

    /// POST a JSON body with the bearer token.
    pub fn post_json(&self, path: &str, body: &serde_json::Value) -> Response {
        let auth = format!("Bearer {}", self.token);
        request(
            &self.address,
            "POST",
            path,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.to_string().as_bytes(),
        )
    }
}

/// `pairs` form-encoded (also a query string).
pub fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// `text` percent-encoded for a query string or form body.
pub fn enc(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
