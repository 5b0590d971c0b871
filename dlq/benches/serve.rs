//! `dlq serve` on 1,000,000 items: every page and API call, server side
//! (the `Server-Timing: app;dur=MS` header the server sets) and the client
//! round trip, per shape; and the server's peak RSS.
//!
//! `cargo bench --bench serve` builds (once, kept under target/bench-data
//! as serve-shape-S-N.db) each shape's database with the real `dlq import`
//! of the shapes benchmark's JSON lines file (generated if missing), then
//! starts the real `dlq serve --bind 127.0.0.1:0` on it, with DLQ_NOW at
//! the end of the generated time span (2026-11-01) so `now - 1d` selects a
//! day of items. `/patterns` is timed first (its first call starts the
//! background analysis) and again once the analysis is done; every other
//! call is warmed up once, then timed DLQ_BENCH_RUNS times (default 10;
//! 3 for a call whose warm-up took over a second): median and max.
//!
//! Shapes (DLQ_BENCH_SHAPES, default "abcdej"; DLQ_BENCH_ITEMS, default
//! 1,000,000), as in dlq/benches/shapes.rs: a 1,000 jobs; b one job; c a
//! signature per item; d an agent per attempt; e 20 attempts per item (a
//! tenth of the items); f 100 KB of item_data on 1%; r as a in random time
//! order; j 10,000 jobs.
//!
//! The tables go to stdout and, README-ready, to
//! target/bench-data/serve-bench-N.md.

use dlqlite::generate::job_id;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/mod.rs"]
mod support;

use support::{bench_dir, env_usize, remove_db, shape_file};

/// "now" for the server: the end of the generated span.
const NOW: &str = "2026-11-01T00:00:00Z";

/// The shape's database, built once with `dlq import` and kept.
fn database(shape: char, items: usize) -> PathBuf {
    let db = bench_dir().join(format!("serve-shape-{shape}-{items}.db"));
    let done = PathBuf::from(format!("{}.complete", db.display()));
    if done.exists() {
        return db;
    }
    // The shapes benchmark's file: the same name, the same content.
    let file = shape_file(shape, items);
    remove_db(&db);
    let started = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_dlq"))
        .arg("--db")
        .arg(&db)
        .arg("import")
        .arg(&file)
        .env_remove("DLQ_NOW")
        .stdout(Stdio::null())
        .status()
        .expect("dlq import");
    assert!(status.success(), "dlq import of {}", file.display());
    eprintln!(
        "imported {} in {:.1}s",
        db.display(),
        started.elapsed().as_secs_f64()
    );
    std::fs::write(&done, "").expect("marker");
    db
}

/// An answer: status, the server's own time, the round trip, the body.
struct Answer {
    status: u16,
    server_ms: f64,
    client_ms: f64,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// A running `dlq serve`, killed when dropped.
struct Server {
    child: Child,
    address: String,
    token: String,
}

impl Server {
    fn start(db: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dlq"))
            .arg("--db")
            .arg(db)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .env("DLQ_NOW", NOW)
            .env_remove("DLQ_TOKEN")
            .stdout(Stdio::piped())
            // Its warnings and any failure show in the benchmark's output.
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start dlq serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the URL");
        let rest = line
            .trim()
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("dlq serve printed no URL: {line:?}"));
        let (address, token) = rest.split_once("/?token=").expect("URL with a token");
        Server {
            address: address.to_string(),
            token: token.to_string(),
            child,
        }
    }

    /// The server's peak RSS so far, MB.
    fn peak_rss_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    }

    fn request(&self, method: &str, path: &str, body: &str) -> Answer {
        let started = Instant::now();
        let mut stream = TcpStream::connect(&self.address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(600)))
            .expect("timeout");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
             Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            self.address,
            self.token,
            body.len()
        );
        stream.write_all(head.as_bytes()).expect("send");
        stream.write_all(body.as_bytes()).expect("send");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read");
        let client_ms = started.elapsed().as_secs_f64() * 1e3;
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("HTTP head");
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status");
        let mut server_ms = f64::NAN;
        let mut chunked = false;
        for line in head.split("\r\n").skip(1) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "server-timing" {
                server_ms = value
                    .split("dur=")
                    .nth(1)
                    .and_then(|v| v.split([';', ',']).next())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(f64::NAN);
            }
            if name == "transfer-encoding" && value.contains("chunked") {
                chunked = true;
            }
        }
        let mut body = raw[split + 4..].to_vec();
        if chunked {
            body = dechunk(&body);
        }
        Answer {
            status,
            server_ms,
            client_ms,
            body: String::from_utf8_lossy(&body).to_string(),
        }
    }

    fn get(&self, path: &str) -> Answer {
        self.request("GET", path, "")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = data.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&data[..end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = end + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

/// Percent-encodes a query value.
fn enc(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// One measured call: median and max, server side and round trip.
struct Figure {
    what: String,
    server_median: f64,
    server_max: f64,
    client_median: f64,
    client_max: f64,
    note: String,
}

fn median_max(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(|a, b| a.total_cmp(b));
    (values[values.len() / 2], values[values.len() - 1])
}

/// Warms `call` up once, then times it `runs` times (3 if the warm-up
/// took over a second).
fn measure(what: &str, runs: usize, mut call: impl FnMut() -> Answer) -> Figure {
    let warm = call();
    assert!(
        warm.status < 400,
        "{what}: HTTP {}: {}",
        warm.status,
        warm.body.chars().take(300).collect::<String>()
    );
    let runs = if warm.client_ms > 1000.0 {
        runs.min(3)
    } else {
        runs
    };
    let (mut server, mut client) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let answer = call();
        assert!(answer.status < 400, "{what}: HTTP {}", answer.status);
        server.push(answer.server_ms);
        client.push(answer.client_ms);
    }
    let (server_median, server_max) = median_max(server);
    let (client_median, client_max) = median_max(client);
    Figure {
        what: what.to_string(),
        server_median,
        server_max,
        client_median,
        client_max,
        note: format!("{runs} runs"),
    }
}

/// A figure from single answers (no warm-up: the first call is the point).
fn once(what: &str, answer: &Answer, note: &str) -> Figure {
    Figure {
        what: what.to_string(),
        server_median: answer.server_ms,
        server_max: answer.server_ms,
        client_median: answer.client_ms,
        client_max: answer.client_ms,
        note: note.to_string(),
    }
}

/// The `cursor=` query of the Items page's next link.
fn next_link(page: &str) -> String {
    let start = page
        .find("cursor=")
        .unwrap_or_else(|| panic!("no next link on the Items page"));
    let rest = &page[start..];
    let end = rest.find('"').expect("end of the link");
    rest[..end].replace("&amp;", "&")
}

struct ShapeResult {
    shape: char,
    figures: Vec<Figure>,
    rss_mb: f64,
    analysis_s: f64,
    items: i64,
}

fn shape_figures(shape: char, items: usize, runs: usize) -> ShapeResult {
    let db = database(shape, items);
    let server = Server::start(&db);
    let mut figures = Vec::new();

    // The first /patterns starts the analysis; time it, then wait for the
    // figures (nothing else is timed meanwhile: it takes a core).
    let first = server.get("/patterns");
    assert!(first.status < 400, "/patterns: HTTP {}", first.status);
    figures.push(once(
        "`/patterns` (first: starts the analysis)",
        &first,
        "1 run",
    ));
    let started = Instant::now();
    let first_api = server.get("/api/analyze");
    figures.push(once(
        "`/api/analyze` (while computing)",
        &first_api,
        "1 run",
    ));
    loop {
        let answer = server.get("/api/analyze");
        let value = answer.json();
        if value.get("analysis").is_some() && value["stale"] != json!(true) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "the analysis never finished"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let analysis_s = started.elapsed().as_secs_f64();

    let job = job_id(0);
    let ej = enc(&job);
    let stats = server.get("/api/stats").json();
    let total = stats["total_items"].as_i64().expect("total_items");
    let sample = server.get("/api/items?limit=100").json();
    let named: Vec<(String, String)> = sample["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["job_id"].as_str().expect("job_id").to_string(),
                i["item_id"].as_str().expect("item_id").to_string(),
            )
        })
        .collect();
    let (item_job, item_id) = named[0].clone();
    let (eij, eii) = (enc(&item_job), enc(&item_id));
    let cursor = sample["next"].as_str().map(enc).unwrap_or_default();
    let next = next_link(&server.get("/items").body);
    let timeout = enc(r#"error_type == "Timeout""#);
    let recent = enc("last_attempt > now - 1d");
    let contains = enc(r#"error_message contains "timed out""#);

    let gets: Vec<(String, String)> = vec![
        ("`/` (Overview)".into(), "/".into()),
        ("`/items`".into(), "/items".into()),
        ("`/items?job=`".into(), format!("/items?job={ej}")),
        (
            "`/items?q=error_type == \"Timeout\"`".into(),
            format!("/items?q={timeout}"),
        ),
        (
            "`/items?q=last_attempt > now - 1d`".into(),
            format!("/items?q={recent}"),
        ),
        (
            "`/items?q=error_message contains \"timed out\"`".into(),
            format!("/items?q={contains}"),
        ),
        (
            "`/items?sort=failure_count`".into(),
            "/items?sort=failure_count".into(),
        ),
        (
            "`/items` page 2 (next link)".into(),
            format!("/items?{next}"),
        ),
        (
            "`/item?job=&id=`".into(),
            format!("/item?job={eij}&id={eii}"),
        ),
        ("`/patterns` (computed)".into(), "/patterns".into()),
        ("`/events`".into(), "/events".into()),
        ("`/events?job=`".into(), format!("/events?job={ej}")),
        (
            "`/events?kind=imported`".into(),
            "/events?kind=imported".into(),
        ),
        ("`/events?item=`".into(), format!("/events?item={eii}")),
        ("`/runs`".into(), "/runs".into()),
        ("`/api/jobs`".into(), "/api/jobs".into()),
        ("`/api/items`".into(), "/api/items".into()),
        ("`/api/items?job=`".into(), format!("/api/items?job={ej}")),
        (
            "`/api/items?filter=error_type == \"Timeout\"`".into(),
            format!("/api/items?filter={timeout}"),
        ),
        (
            "`/api/items?filter=last_attempt > now - 1d`".into(),
            format!("/api/items?filter={recent}"),
        ),
        (
            "`/api/items?sort=failure_count`".into(),
            "/api/items?sort=failure_count".into(),
        ),
        (
            "`/api/items?cursor=` (page 2)".into(),
            format!("/api/items?cursor={cursor}"),
        ),
        (
            "`/api/item?job=&id=`".into(),
            format!("/api/item?job={eij}&id={eii}"),
        ),
        ("`/api/stats`".into(), "/api/stats".into()),
        ("`/api/stats?job=`".into(), format!("/api/stats?job={ej}")),
        ("`/api/analyze` (computed)".into(), "/api/analyze".into()),
        ("`/api/events`".into(), "/api/events".into()),
        ("`/api/events?job=`".into(), format!("/api/events?job={ej}")),
        (
            "`/api/events?kind=imported`".into(),
            "/api/events?kind=imported".into(),
        ),
        (
            "`/api/events?item=`".into(),
            format!("/api/events?item={eii}"),
        ),
        ("`/api/runs`".into(), "/api/runs".into()),
        ("`/api/live`".into(), "/api/live".into()),
    ];
    for (what, path) in &gets {
        figures.push(measure(what, runs, || server.get(path)));
    }
    let filter_plan = json!({
        "action": "mark", "reprocess_eligible": false, "dry_run": true,
        "filter": "error_type == \"Timeout\"",
    })
    .to_string();
    figures.push(measure(
        "`POST /api/actions` dry run, filter `error_type == \"Timeout\"`",
        runs,
        || server.request("POST", "/api/actions", &filter_plan),
    ));
    let all_plan = json!({
        "action": "mark", "reprocess_eligible": false, "dry_run": true, "filter": "",
    })
    .to_string();
    figures.push(measure(
        "`POST /api/actions` dry run, every item (filter `\"\"`)",
        runs,
        || server.request("POST", "/api/actions", &all_plan),
    ));
    let named_plan = json!({
        "action": "delete", "dry_run": true, "items": named,
    })
    .to_string();
    figures.push(measure(
        "`POST /api/actions` dry run, 100 named items",
        runs,
        || server.request("POST", "/api/actions", &named_plan),
    ));
    let rss_mb = server.peak_rss_mb();
    ShapeResult {
        shape,
        figures,
        rss_mb,
        analysis_s,
        items: total,
    }
}

fn cell(median: f64, max: f64) -> String {
    let flag = if median >= 100.0 { " **!**" } else { "" };
    format!("{median:.1} / {max:.1}{flag}")
}

fn main() {
    let items = env_usize("DLQ_BENCH_ITEMS", 1_000_000);
    let runs = env_usize("DLQ_BENCH_RUNS", 10).max(1);
    let shapes = std::env::var("DLQ_BENCH_SHAPES").unwrap_or_else(|_| "abcdej".into());
    std::fs::create_dir_all(bench_dir()).expect("bench dir");
    let mut results = Vec::new();
    for shape in shapes.chars().filter(|c| "abcdefrj".contains(*c)) {
        let result = shape_figures(shape, items, runs);
        println!(
            "\nshape {shape}: {} items, server peak RSS {:.0} MB, analysis {:.1} s",
            result.items, result.rss_mb, result.analysis_s
        );
        println!("| call | server median / max ms | round trip median / max ms | runs |");
        println!("|---|---|---|---|");
        for f in &result.figures {
            println!(
                "| {} | {} | {} | {} |",
                f.what,
                cell(f.server_median, f.server_max),
                cell(f.client_median, f.client_max),
                f.note
            );
        }
        results.push(result);
    }
    if results.is_empty() {
        return;
    }
    // One README-ready table: a row per call, a column per shape.
    let mut md = String::new();
    let header: Vec<String> = results
        .iter()
        .map(|r| format!("{} ({} items)", r.shape, r.items))
        .collect();
    let _ = writeln!(md, "| call | {} |", header.join(" | "));
    let _ = writeln!(md, "|---|{}", "---|".repeat(results.len()));
    for (n, figure) in results[0].figures.iter().enumerate() {
        let cells: Vec<String> = results
            .iter()
            .map(|r| {
                let f = &r.figures[n];
                cell(f.server_median, f.server_max)
            })
            .collect();
        let _ = writeln!(md, "| {} | {} |", figure.what, cells.join(" | "));
    }
    let rss: Vec<String> = results
        .iter()
        .map(|r| format!("{:.0} MB", r.rss_mb))
        .collect();
    let _ = writeln!(md, "| server peak RSS (VmHWM) | {} |", rss.join(" | "));
    let analysis: Vec<String> = results
        .iter()
        .map(|r| format!("{:.1} s", r.analysis_s))
        .collect();
    let _ = writeln!(
        md,
        "| background analysis, first call to figures | {} |",
        analysis.join(" | ")
    );
    let _ = writeln!(md, "\nRound trip (client, median / max ms):\n");
    let _ = writeln!(md, "| call | {} |", header.join(" | "));
    let _ = writeln!(md, "|---|{}", "---|".repeat(results.len()));
    for (n, figure) in results[0].figures.iter().enumerate() {
        let cells: Vec<String> = results
            .iter()
            .map(|r| {
                let f = &r.figures[n];
                cell(f.client_median, f.client_max)
            })
            .collect();
        let _ = writeln!(md, "| {} | {} |", figure.what, cells.join(" | "));
    }
    let out = bench_dir().join(format!("serve-bench-{items}.md"));
    std::fs::write(&out, &md).expect("write the table");
    println!("\n{md}\nwritten to {}", out.display());
}
