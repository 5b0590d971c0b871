//! `dlq serve` in a real browser: headless Chromium driven over W3C
//! WebDriver (chromedriver, spoken to with the std-only client in http.rs)
//! does what a person does — opens the printed URL, searches, opens an
//! item, marks it, deletes ticked rows after confirming — and the database
//! is checked with SQL afterwards. Every page is saved as a PNG under
//! target/dashboard-screenshots/ for a person to look at (the README's
//! screenshots come from there).
//!
//! Chromium and chromedriver are Debian's `chromium` and `chromium-driver`,
//! which scripts/test installs; without them this test fails (it never
//! passes without having run).

use super::common::*;
use super::http::{request, Response, Server};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long any wait for the page may take: generous, for a loaded
/// 2-core machine; a wait ends as soon as its condition holds.
const DEADLINE: Duration = Duration::from_secs(60);

const CHROMIUM: &str = "/usr/bin/chromium";

/// The W3C name of an element reference in WebDriver answers.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// chromedriver running on a free loopback port with one Chromium session;
/// both end when this is dropped (and chromedriver dies with the test
/// thread, as `dlq()` children do).
struct Browser {
    driver: Child,
    address: String,
    session: String,
    log: PathBuf,
}

impl Browser {
    fn start(dir: &Path) -> Browser {
        let driver_bin = on_path("chromedriver");
        assert!(
            driver_bin.is_some() && Path::new(CHROMIUM).is_file(),
            "the browser test needs chromedriver on PATH and {CHROMIUM} \
             (Debian's chromium-driver and chromium): run scripts/test, which installs them"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = dir.join("chromedriver.log");
        let mut command = Command::new(driver_bin.unwrap());
        command
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: setpgid(2) and prctl(2) are async-signal-safe, as
            // pre_exec requires. Its own process group, so that dropping
            // it ends Chromium too; the death signal, so that a test killed
            // on a timeout leaves no driver running.
            unsafe {
                command.pre_exec(|| {
                    libc::setpgid(0, 0);
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        let driver = command.spawn().expect("start chromedriver");
        let mut browser = Browser {
            driver,
            address: format!("127.0.0.1:{port}"),
            session: String::new(),
            log,
        };
        browser.wait("chromedriver to listen", |b| {
            std::net::TcpStream::connect(&b.address).is_ok()
        });
        let profile = dir.join("chromium-profile");
        let answer = browser.call(
            "POST",
            "/session",
            serde_json::json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": CHROMIUM,
                    "args": [
                        "--headless=new", "--no-sandbox", "--disable-gpu",
                        "--window-size=1400,1000", "--hide-scrollbars",
                        "--force-device-scale-factor=1",
                        format!("--user-data-dir={}", profile.display()),
                    ],
                },
            }}}),
        );
        browser.session = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_string();
        browser
    }

    /// One WebDriver command; its `value`, or a failure of the test with
    /// the driver's error.
    fn call(&self, method: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
        let answer = self.raw(method, path, body);
        assert_eq!(
            answer.status,
            200,
            "WebDriver {method} {path}: {}\n(chromedriver log: {})",
            answer.body,
            self.log.display()
        );
        answer.json()["value"].clone()
    }

    fn raw(&self, method: &str, path: &str, body: serde_json::Value) -> Response {
        let body = if method == "GET" || method == "DELETE" {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        request(
            &self.address,
            method,
            path,
            &[("Content-Type", "application/json; charset=utf-8")],
            &body,
        )
    }

    fn session_call(&self, method: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    /// Waits until `check` holds, failing the test after [`DEADLINE`].
    fn wait(&self, what: &str, mut check: impl FnMut(&Browser) -> bool) {
        let end = Instant::now() + DEADLINE;
        while !check(self) {
            assert!(Instant::now() < end, "waited {DEADLINE:?} for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn go(&self, url: &str) {
        self.session_call("POST", "/url", serde_json::json!({ "url": url }));
    }

    fn url(&self) -> String {
        self.session_call("GET", "/url", serde_json::Value::Null)
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The elements `css` finds now (none is not an error).
    fn all(&self, css: &str) -> Vec<String> {
        let found = self.session_call(
            "POST",
            "/elements",
            serde_json::json!({"using": "css selector", "value": css}),
        );
        found
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e[ELEMENT].as_str().unwrap().to_string())
            .collect()
    }

    /// The first element `css` finds, waiting for it to appear.
    fn find(&self, css: &str) -> String {
        let mut found = None;
        self.wait(&format!("an element {css:?} on {}", self.url()), |b| {
            found = b.all(css).into_iter().next();
            found.is_some()
        });
        found.unwrap()
    }

    /// Runs `act` on the element `css` finds; again on a fresh one when the
    /// page's live update replaced it in between (a stale reference).
    fn on(&self, css: &str, act: &str, body: serde_json::Value) -> serde_json::Value {
        let end = Instant::now() + DEADLINE;
        loop {
            let element = self.find(css);
            let path = format!("/session/{}/element/{element}{act}", self.session);
            let method = if body.is_null() { "GET" } else { "POST" };
            let answer = self.raw(method, &path, body.clone());
            if answer.status == 200 {
                return answer.json()["value"].clone();
            }
            let stale = answer.body.contains("stale element reference");
            assert!(
                stale && Instant::now() < end,
                "WebDriver {act} on {css:?}: {}",
                answer.body
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn text(&self, css: &str) -> String {
        self.on(css, "/text", serde_json::Value::Null)
            .as_str()
            .unwrap()
            .to_string()
    }

    fn attribute(&self, css: &str, name: &str) -> String {
        self.on(css, &format!("/attribute/{name}"), serde_json::Value::Null)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn click(&self, css: &str) {
        self.on(css, "/click", serde_json::json!({}));
    }

    fn type_into(&self, css: &str, text: &str) {
        self.on(css, "/clear", serde_json::json!({}));
        self.on(css, "/value", serde_json::json!({ "text": text }));
    }

    /// Waits for the page at `path_prefix` (after a click or a redirect)
    /// to have loaded its footer.
    fn wait_for_page(&self, path_prefix: &str) {
        self.wait(&format!("a page at {path_prefix}"), |b| {
            b.url()
                .split_once("127.0.0.1:")
                .and_then(|(_, rest)| rest.split_once('/'))
                .is_some_and(|(_, path)| format!("/{path}").starts_with(path_prefix))
                && !b.all("footer").is_empty()
        });
    }

    /// Saves the page as target/dashboard-screenshots/NAME.png.
    fn screenshot(&self, name: &str) {
        let png = base64(
            self.session_call("GET", "/screenshot", serde_json::Value::Null)
                .as_str()
                .unwrap(),
        );
        assert!(png.starts_with(b"\x89PNG"), "the screenshot is no PNG");
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("target/dashboard-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.raw(
                "DELETE",
                &format!("/session/{}", self.session),
                serde_json::Value::Null,
            );
        }
        // SAFETY: kill(2) on the driver's own process group (its id is
        // the driver's pid, from setpgid(0, 0) above).
        unsafe {
            libc::kill(-(self.driver.id() as libc::pid_t), libc::SIGKILL);
        }
        let _ = self.driver.wait();
    }
}

/// Standard base64 (a screenshot), without a crate for it.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c:?}"),
        }
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut bits = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            bits |= value(*c) << (18 - 6 * i);
        }
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

/// A realistic dead letter: several jobs, error types and attempts, some
/// long multi-line messages, arrivals over the last two weeks.
fn sample_item(n: usize, now: chrono::DateTime<chrono::Utc>) -> serde_json::Value {
    let kinds: [(serde_json::Value, &str); 6] = [
        (
            serde_json::json!("Timeout"),
            "Agent execution timed out after 600s while running `cargo test --workspace`; \
             the last output was 9 minutes earlier (`Compiling cook v0.4.2`)",
        ),
        (
            serde_json::json!({"CommandFailed": {"exit_code": 101}}),
            "cargo test failed with exit code 101\n\
             ---- cook::execution::mapreduce::tests::resumes_after_crash stdout ----\n\
             thread 'cook::execution::mapreduce::tests::resumes_after_crash' panicked at \
             src/cook/execution/mapreduce.rs:412:9:\nassertion `left == right` failed\n  left: 3\n right: 4",
        ),
        (
            serde_json::json!("MergeConflict"),
            "merge conflict in src/cook/orchestrator.rs: both the agent branch and the \
             parent changed lines 88-131 (fn run_map_phase); resolve by hand",
        ),
        (
            serde_json::json!("ResourceExhausted"),
            "429 Too Many Requests: rate limited by provider (retry after 37s)",
        ),
        (
            serde_json::json!("ValidationFailed"),
            "validation failed: output schema mismatch at $.items[3].path: expected string, found null",
        ),
        (
            serde_json::json!({"CommandFailed": {"exit_code": 1}}),
            "error[E0308]: mismatched types\n --> src/config/loader.rs:57:21\n   |\n57 |     let depth: u32 = \
             settings.get(\"depth\");\n   |                ---   ^^^^^^^^^^^^^^^^^^^^^ expected `u32`, found `Option<&Value>`",
        ),
    ];
    let (error_type, message) = kinds[(n * 7 + n / 5) % kinds.len()].clone();
    let attempts = 1 + (n * 13) % 3;
    let last = now - chrono::Duration::minutes(((n * 97) % (14 * 24 * 60)) as i64);
    let history: Vec<serde_json::Value> = (1..=attempts)
        .map(|attempt| {
            let at = last - chrono::Duration::minutes(((attempts - attempt) * 45) as i64);
            serde_json::json!({
                "attempt_number": attempt,
                "timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                "error_type": error_type,
                "error_message": message,
                "error_context": [format!("Processing work item 'item-{n}'"), "Executing agent command"],
                "stack_trace": null,
                "agent_id": format!("agent-{n}-{attempt}"),
                "step_failed": if n.is_multiple_of(4) { "shell: cargo test" } else { "claude: /refactor" },
                "duration_ms": 1000 + (n * 7919) % 600_000,
                "json_log_location": format!("/home/ci/.claude/projects/cook/{n:08x}.jsonl")
            })
        })
        .collect();
    let first = &history[0]["timestamp"];
    serde_json::json!({
        "item_id": format!("item-{n}"),
        "item_data": {"path": format!("src/module_{}/file_{n}.rs", n % 23), "priority": n % 10},
        "first_attempt": first,
        "last_attempt": last.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "failure_count": attempts,
        "failure_history": history,
        "error_signature": dlqlite::classify::error_signature(message),
        "worktree_artifacts": {
            "worktree_path": format!("/home/ci/.prodigy/worktrees/cook/agent-{n}"),
            "branch_name": format!("agent-{n}"),
            "uncommitted_changes": if n.is_multiple_of(5) { serde_json::json!(" M src/lib.rs\n?? notes.md") } else { serde_json::Value::Null },
            "error_logs": null
        },
        "reprocess_eligible": n % 6 != 3,
        "manual_review_required": n.is_multiple_of(11)
    })
}

/// A search typed into the box, and the same by SQL.
const SEARCH: &str = "failure_count >= 3 && reprocess_eligible";
const SEARCH_SQL: &str =
    "SELECT count(*) FROM items WHERE failure_count >= 3 AND reprocess_eligible = 1";

/// `text` as an SQL string literal.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn item_exists(db: &Path, job: &str, item: &str) -> bool {
    count(
        db,
        &format!(
            "SELECT count(*) FROM items WHERE job_id = {} AND item_id = {}",
            quoted(job),
            quoted(item)
        ),
    ) == 1
}

fn events_of(db: &Path, kind: &str, job: &str, item: &str) -> i64 {
    count(
        db,
        &format!(
            "SELECT count(*) FROM events WHERE kind = {} AND job_id = {} AND item_id = {}",
            quoted(kind),
            quoted(job),
            quoted(item)
        ),
    )
}

/// The (job, item) a link to /item?job=J&id=I names, or a ticked box's
/// value `["J","I"]` holds.
fn link_pair(href: &str) -> (String, String) {
    let query = href.split_once('?').expect("a query").1;
    let mut job = None;
    let mut id = None;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "job" => job = Some(value.to_string()),
            "id" => id = Some(value.to_string()),
            _ => {}
        }
    }
    (job.expect("job="), id.expect("id="))
}

#[test]
fn a_person_searches_marks_and_deletes_in_a_real_browser() {
    let dir = TempDir::new("browser");
    let db = dir.join("dlq.db");
    // The shipped sample (which holds broken files on purpose, so the
    // import says so and exits 1), then a few hundred more in three jobs.
    let sample = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy");
    run(dlq(&db).arg("import").arg(&sample));
    assert!(
        count(&db, "SELECT count(*) FROM items") > 0,
        "the sample imported nothing"
    );
    let now = chrono::Utc::now();
    for (job, range) in [
        ("nightly-refactor-20261123", 0..180),
        ("docs-sweep-20261120", 180..260),
        ("api-migration-20261118", 260..330),
    ] {
        add_lines(&db, job, range.map(|n| sample_item(n, now)));
    }
    let total = count(&db, "SELECT count(*) FROM items");

    let server = Server::start(&db, &[]);
    let browser = Browser::start(dir.path());
    let base = format!("http://{}", server.address);

    // The printed URL: the token is traded for a cookie and leaves the
    // address bar.
    browser.go(&server.url);
    browser.wait_for_page("/");
    assert!(!browser.url().contains("token="), "{}", browser.url());
    assert_eq!(browser.text("#total-items"), total.to_string());
    browser.wait("the arrivals chart", |b| b.all("#computing").is_empty());
    // The page's script runs (the Content-Security-Policy lets it) and its
    // poll of /api/live gets through with the cookie: the light turns on.
    browser.wait("the live light", |b| !b.all("#live.on").is_empty());
    browser.screenshot("overview");

    // Items: a search typed into the box, its count checked against SQL.
    browser.click("nav a[href='/items']");
    browser.wait_for_page("/items");
    browser.type_into("#q", SEARCH);
    browser.click("form.search button[type=submit]");
    browser.wait("the search to run", |b| b.url().contains("q=failure_count"));
    let expected = count(&db, SEARCH_SQL);
    assert!(expected >= 3, "the sample has too few matches: {expected}");
    assert_eq!(
        browser.text("#match-count"),
        format!("{expected} items match")
    );
    let search_url = browser.url();
    browser.screenshot("items-search");

    // An item: opened from the results, then marked.
    let first_link = "#items-form tbody tr td a[href^='/item?']";
    let (job, id) = link_pair(&browser.attribute(first_link, "href"));
    browser.click(first_link);
    browser.wait_for_page("/item?");
    assert!(browser.text("h1").contains(&id));
    browser.screenshot("item");
    // The page offers the mark that changes something: eligible when it
    // is not, else review when it is not flagged, else "not eligible".
    let (button, column, value) = [
        ("button[value='eligible:selected']", "reprocess_eligible", 1),
        (
            "button[value='review:selected']",
            "manual_review_required",
            1,
        ),
        (
            "button[value='ineligible:selected']",
            "reprocess_eligible",
            0,
        ),
    ]
    .into_iter()
    .find(|(css, _, _)| !browser.all(css).is_empty())
    .expect("a mark button on the item page");
    let marks_before = events_of(&db, "marked", &job, &id);
    browser.click(button);
    browser.wait("the mark's note", |b| !b.all("p.note").is_empty());
    let marked = count(
        &db,
        &format!(
            "SELECT {column} FROM items WHERE job_id = {} AND item_id = {}",
            quoted(&job),
            quoted(&id)
        ),
    );
    assert_eq!(marked, value, "{column} of {job}/{id} after the click");
    assert_eq!(events_of(&db, "marked", &job, &id), marks_before + 1);

    // Back to the search: two rows ticked, deleted after the confirmation.
    browser.go(&search_url);
    browser.wait_for_page("/items");
    let boxes = "#items-form tbody input[name=item]";
    browser.find(boxes);
    let mut chosen = Vec::new();
    for n in [1, 3] {
        let css = format!("#items-form tbody tr:nth-child({n}) input[name=item]");
        let pair: (String, String) =
            serde_json::from_str(&browser.attribute(&css, "value")).unwrap();
        browser.click(&css);
        chosen.push(pair);
    }
    browser.click("button[value='delete:selected']");
    browser.wait_for_page("/action");
    assert_eq!(browser.text("#confirm-count"), "2 items");
    for (job, item) in &chosen {
        assert!(
            item_exists(&db, job, item),
            "{job}/{item} went before the confirmation"
        );
    }
    browser.screenshot("confirm-delete");
    browser.click("#confirm");
    browser.wait("the delete's note", |b| !b.all("p.note").is_empty());
    assert_eq!(count(&db, "SELECT count(*) FROM items"), total - 2);
    for (job, item) in &chosen {
        assert!(!item_exists(&db, job, item), "{job}/{item} is still there");
        assert_eq!(events_of(&db, "removed", job, item), 1, "{job}/{item}");
    }
    assert_eq!(
        count(&db, "SELECT count(*) FROM events WHERE kind = 'removed'"),
        2
    );
    // The mark may have added the item to the search: count again.
    assert_eq!(
        browser.text("#match-count"),
        format!("{} items match", count(&db, SEARCH_SQL))
    );

    // The other pages, for a person to look at.
    for (path, name) in [
        ("/patterns", "patterns"),
        ("/events", "events"),
        ("/runs", "runs"),
    ] {
        browser.go(&format!("{base}{path}"));
        browser.wait_for_page(path);
        browser.wait(&format!("{path} to be computed"), |b| {
            b.all("#computing").is_empty()
        });
        browser.screenshot(name);
    }
}

/// The reprocess_eligible flag of each item of `job`, by item id.
fn eligibility(db: &Path) -> Vec<(String, String, i64)> {
    table_rows(
        db,
        "SELECT job_id, item_id, CAST(reprocess_eligible AS INTEGER) FROM items ORDER BY job_id, item_id",
    )
    .into_iter()
    .map(|row| {
        (
            row[0].as_str().unwrap().to_string(),
            row[1].as_str().unwrap().to_string(),
            row[2].as_i64().unwrap(),
        )
    })
    .collect()
}

/// The Patterns page's bulk action on one failure family, followed as a
/// person does: chosen in the family's row, counted, confirmed; then SQL
/// shows that exactly that family's items of the page's job changed (not
/// its items in another job, not another family's).
#[test]
fn a_bulk_action_on_one_family_changes_exactly_its_items() {
    let dir = TempDir::new("browser-family");
    let db = dir.join("dlq.db");
    let failing = |id: &str, error_type: &str, message: &str| {
        let mut value = item(id, 1, "2025-01-01T00:00:00Z", message);
        value["failure_history"][0]["error_type"] = error_type.into();
        value
    };
    // Job j1: four timeouts of one cause (ports differ: one family), three
    // of another; job j2: two more of the first cause, two of a third.
    let timeout = |n: usize| format!("connect to db-{n}.internal:5432 timed out after 30s");
    add_lines(
        &db,
        "j1",
        (0..4)
            .map(|n| failing(&format!("t{n}"), "Timeout", &timeout(n)))
            .chain(
                (0..3).map(|n| failing(&format!("v{n}"), "ValidationFailed", "schema mismatch")),
            ),
    );
    add_lines(
        &db,
        "j2",
        (4..6)
            .map(|n| failing(&format!("t{n}"), "Timeout", &timeout(n)))
            .chain((0..2).map(|n| failing(&format!("o{n}"), "OutOfMemory", "heap exhausted"))),
    );
    let family = count(&db, "SELECT family_id FROM items WHERE item_id = 't0'");
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM items WHERE family_id = {family}")
        ),
        6,
        "the timeouts are not one family"
    );
    let before = eligibility(&db);
    assert!(before.iter().all(|(_, _, eligible)| *eligible == 1));

    let server = Server::start(&db, &[]);
    let browser = Browser::start(dir.path());
    browser.go(&server.url);
    browser.wait_for_page("/");
    browser.go(&format!("http://{}/patterns?job=j1", server.address));
    browser.wait_for_page("/patterns");
    browser.wait("the patterns to be computed", |b| {
        b.all("#computing").is_empty()
    });
    let row = format!("tr.family[data-family='{family}']");
    assert_eq!(browser.text(&format!("{row} a.family-items")), "4");
    assert_eq!(browser.all("tr.family").len(), 2, "j1 has two families");
    browser.screenshot("patterns-families");

    // The family's action: chosen, then counted and shown before anything
    // changes.
    browser.click(&format!("{row} option[value='ineligible:all']"));
    browser.click(&format!("{row} form.row-action button[type=submit]"));
    browser.wait_for_page("/action");
    assert_eq!(browser.text("#confirm-count"), "4 items");
    assert_eq!(eligibility(&db), before, "changed before the confirmation");
    browser.click("#confirm");
    browser.wait_for_page("/patterns");
    browser.wait("the action's note", |b| !b.all("p.note").is_empty());

    // Exactly the family's items in j1 are no longer eligible.
    let after = eligibility(&db);
    for ((job, item, was), (_, _, now)) in before.iter().zip(&after) {
        let chosen = job == "j1" && item.starts_with('t');
        assert_eq!(*now, if chosen { 0 } else { *was }, "{job}/{item}");
    }
    assert_eq!(
        count(&db, "SELECT count(*) FROM events WHERE kind = 'marked'"),
        4
    );
}
