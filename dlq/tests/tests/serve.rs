//! `dlq serve` through HTTP: the real binary on a free port on a temporary
//! database.

use super::common::*;
use super::http::Server;

#[test]
fn every_request_needs_the_token() {
    let dir = TempDir::new("serve-token");
    let db = dir.path().join("dlq.db");
    add_lines(&db, "job", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let server = Server::start(&db, &[]);
    for path in ["/", "/items", "/static/dlq.js", "/api/jobs", "/api/items"] {
        assert_eq!(server.get_anonymous(path).status, 401, "{path}");
        assert_eq!(server.get(path).status, 200, "{path}");
    }
    // The refusal is a styled page: its stylesheet, which holds no data,
    // is the one thing served without the token.
    let refusal = server.get_anonymous("/items");
    assert!(
        refusal.body.contains(r#"href="/static/dlq.css""#),
        "{}",
        refusal.body
    );
    let css = server.get_anonymous("/static/dlq.css");
    assert_eq!(css.status, 200);
    let head = request(&server.address, "HEAD", "/static/dlq.css", &[], b"");
    assert_eq!(head.status, 200);
    assert!(css.body.contains('{'), "{}", css.body);
}

#[test]
fn a_dry_run_counts_what_an_action_would_touch() {
    let dir = TempDir::new("serve-dry-run");
    let db = dir.path().join("dlq.db");
    add_lines(
        &db,
        "job",
        [
            item("a", 1, "2025-01-01T00:00:00Z", "boom"),
            item("b", 1, "2025-01-01T00:00:00Z", "bang"),
        ],
    );
    let server = Server::start(&db, &[]);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    let page = server.get("/");
    assert!(page
        .header("content-security-policy")
        .is_some_and(|csp| csp.contains("default-src 'none'")));
    assert!(page.body.contains("job"));
    let answer = server.post_json(
        "/api/actions",
        &serde_json::json!({"action": "delete", "filter": "error_message == \"boom\"", "job_id": "job", "dry_run": true}),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["count"], 1);
}

// ---------------------------------------------------------------------------
// Helpers: a database of several jobs with a mix of flags, and SQL oracles.

use super::http::{enc, request, Response};
use std::collections::BTreeSet;
use std::path::Path;

/// An item with `attempts` failures (the last one's message is `message`),
/// and the flags given.
fn rich_item(
    id: &str,
    attempts: u32,
    minute: u32,
    message: &str,
    eligible: bool,
    review: bool,
) -> serde_json::Value {
    let at = |n: u32| {
        format!(
            "2025-01-01T{:02}:{:02}:00Z",
            (minute + n) / 60,
            (minute + n) % 60
        )
    };
    let mut value = item(id, 1, &at(0), message);
    let first = value["failure_history"][0].clone();
    let history: Vec<serde_json::Value> = (1..=attempts)
        .map(|n| {
            let mut attempt = first.clone();
            attempt["attempt_number"] = n.into();
            attempt["timestamp"] = at(n - 1).into();
            attempt
        })
        .collect();
    value["failure_history"] = history.into();
    value["failure_count"] = attempts.into();
    value["last_attempt"] = at(attempts - 1).into();
    value["reprocess_eligible"] = eligible.into();
    value["manual_review_required"] = review.into();
    value
}

/// Three jobs, 130 + 70 + 9 items, with flags, failure counts and messages
/// mixed so that every filter below picks a different subset.
fn mixed(db: &Path) {
    let messages = ["boom", "disk full", "timeout after 30s", "bang"];
    for (job, n) in [("alpha", 130), ("beta", 70), ("gamma", 9)] {
        add_lines(
            db,
            job,
            (0..n).map(|i| {
                rich_item(
                    &format!("{job}-{i:03}"),
                    (i % 4 + 1) as u32,
                    // Some equal times, so the keyset cursor must break ties.
                    (i / 3) as u32,
                    messages[i % messages.len()],
                    i % 3 != 0,
                    i % 5 == 0,
                )
            }),
        );
    }
}

type Keys = BTreeSet<(String, String)>;

/// (job_id, item_id) of every row a query over `items` returns.
fn sql_keys(db: &Path, query: &str) -> Keys {
    rows_as::<(String, String)>(db, query).into_iter().collect()
}

/// Every item `/api/items?QUERY` lists, walking the `next` cursors; fails
/// on a duplicate or a count that disagrees with the rows.
fn walk(server: &Server, query: &str) -> Keys {
    let mut keys = Keys::new();
    let mut cursor: Option<String> = None;
    let mut count = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/items?{query}&cursor={}", enc(c)),
            None => format!("/api/items?{query}"),
        };
        let answer = server.get(&path);
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        let page = answer.json();
        count.get_or_insert(page["count"].as_u64().unwrap());
        for row in page["items"].as_array().unwrap() {
            let key = (
                row["job_id"].as_str().unwrap().to_string(),
                row["item_id"].as_str().unwrap().to_string(),
            );
            assert!(keys.insert(key.clone()), "{query}: {key:?} twice");
        }
        pages += 1;
        assert!(pages < 1000, "{query}: the cursors never end");
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(count, Some(keys.len() as u64), "{query}: count vs rows");
    keys
}

fn keys(pairs: &[(&str, &str)]) -> Keys {
    pairs
        .iter()
        .map(|(j, i)| (j.to_string(), i.to_string()))
        .collect()
}

/// The value of the hidden `csrf` field of a page's forms.
fn csrf_of(page: &Response) -> String {
    let at = page
        .body
        .find("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no csrf field in {}", page.body));
    let rest = &page.body[at + "name=\"csrf\" value=\"".len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// The hidden fields of the page's first POST form, in order.
fn hidden_fields(page: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(at) = rest.find("type=\"hidden\" name=\"") {
        rest = &rest[at + "type=\"hidden\" name=\"".len()..];
        let name = rest[..rest.find('"').unwrap()].to_string();
        let at = rest.find("value=\"").unwrap();
        rest = &rest[at + "value=\"".len()..];
        let value = rest[..rest.find('"').unwrap()]
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        out.push((name, value));
    }
    out
}

fn post_action(server: &Server, body: serde_json::Value) -> Response {
    server.post_json("/api/actions", &body)
}

// ---------------------------------------------------------------------------
// Access: the token, the cookie, CSRF.

#[test]
fn the_url_token_becomes_a_strict_http_only_cookie_and_changes_need_csrf() {
    let dir = TempDir::new("serve-cookie");
    let db = dir.path().join("dlq.db");
    mixed(&db);
    let server = Server::start(&db, &[]);
    let before = dump(&db);

    // Refused without a token, and with a wrong one, in every place but
    // the stylesheet (see `every_request_needs_the_token`).
    for path in [
        "/",
        "/items",
        "/item?job=alpha&id=alpha-000",
        "/patterns",
        "/events",
        "/runs",
        "/static/dlq.js",
        "/api/jobs",
        "/api/items",
        "/api/item?job=alpha&id=alpha-000",
        "/api/stats",
        "/api/analyze",
        "/api/events",
        "/api/runs",
        "/api/live",
        "/nowhere",
    ] {
        assert_eq!(server.get_anonymous(path).status, 401, "{path}");
        let wrong = request(
            &server.address,
            "GET",
            path,
            &[("Authorization", "Bearer 0123456789abcdef0123")],
            b"",
        );
        assert_eq!(wrong.status, 401, "{path}");
        let wrong = request(
            &server.address,
            "GET",
            path,
            &[("Cookie", "dlq_token_1=0123456789abcdef0123")],
            b"",
        );
        assert_eq!(wrong.status, 401, "{path}");
    }
    assert_eq!(
        server.get_anonymous("/?token=0123456789abcdef0123").status,
        401
    );
    let anonymous = request(&server.address, "POST", "/api/actions", &[], b"{}");
    assert_eq!(anonymous.status, 401);
    assert!(anonymous.json()["error"]
        .as_str()
        .unwrap()
        .contains("token"));

    // The URL's token: a redirect that drops it, and the cookie.
    let answer = server.get_anonymous(&format!("/items?job=alpha&token={}", server.token));
    assert_eq!(answer.status, 303);
    assert_eq!(answer.header("location"), Some("/items?job=alpha"));
    let set = answer.header("set-cookie").unwrap();
    let attributes: Vec<&str> = set.split(';').map(str::trim).collect();
    assert!(attributes.contains(&"HttpOnly"), "{set}");
    assert!(attributes.contains(&"SameSite=Strict"), "{set}");
    assert!(
        attributes[0].ends_with(&format!("={}", server.token)),
        "{set}"
    );
    // The token in the URL of a POST is refused.
    let posted = request(
        &server.address,
        "POST",
        &format!("/api/actions?token={}", server.token),
        &[],
        b"{}",
    );
    assert_eq!(posted.status, 400, "{}", posted.body);

    // The cookie opens every page.
    for path in ["/", "/items", "/patterns", "/events", "/runs", "/api/jobs"] {
        let page = server.get_cookie(path);
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert!(
            page.header("content-security-policy")
                .is_some_and(|c| c.contains("default-src 'none'")),
            "{path}"
        );
        assert_eq!(page.header("x-frame-options"), Some("DENY"), "{path}");
    }

    // With the cookie, a change needs the CSRF token, from the same site.
    let cookie = server.cookie();
    let csrf = csrf_of(&server.get_cookie("/items?job=alpha"));
    let mark = serde_json::json!({"action": "mark", "items": [["alpha", "alpha-000"]], "reprocess_eligible": true}).to_string();
    let json_post = |extra: &[(&str, &str)]| {
        let mut headers = vec![
            ("Cookie", cookie.as_str()),
            ("Content-Type", "application/json"),
        ];
        headers.extend_from_slice(extra);
        request(
            &server.address,
            "POST",
            "/api/actions",
            &headers,
            mark.as_bytes(),
        )
    };
    for refused in [
        json_post(&[]),
        json_post(&[("X-CSRF-Token", "nope")]),
        json_post(&[("X-CSRF-Token", &csrf), ("Sec-Fetch-Site", "cross-site")]),
    ] {
        assert_eq!(refused.status, 403, "{}", refused.body);
        assert!(refused.json()["error"].as_str().unwrap().len() > 10);
    }
    for refused in [
        server.post_form(
            "/action",
            &[
                ("do", "eligible:selected"),
                ("item", "[\"alpha\",\"alpha-000\"]"),
            ],
        ),
        server.post_form(
            "/action",
            &[
                ("do", "eligible:selected"),
                ("item", "[\"alpha\",\"alpha-000\"]"),
                ("csrf", "nope"),
            ],
        ),
    ] {
        assert_eq!(refused.status, 403, "{}", refused.body);
        assert!(refused.body.contains("CSRF"), "{}", refused.body);
    }
    assert_eq!(dump(&db), before, "a refused change changed something");

    let accepted = json_post(&[("X-CSRF-Token", &csrf)]);
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    assert_eq!(accepted.json()["count"], 1);
    assert_eq!(
        count(
            &db,
            "SELECT reprocess_eligible FROM items WHERE item_id = 'alpha-000'"
        ),
        1
    );
    let form = server.post_form(
        "/action",
        &[
            ("do", "review:selected"),
            ("item", "[\"alpha\",\"alpha-003\"]"),
            ("csrf", &csrf),
            ("back", "/items?job=alpha"),
        ],
    );
    assert_eq!(form.status, 303, "{}", form.body);
    assert!(
        form.header("location")
            .unwrap()
            .starts_with("/items?job=alpha&note="),
        "{form:?}"
    );
    assert_eq!(
        count(
            &db,
            "SELECT manual_review_required FROM items WHERE item_id = 'alpha-003'"
        ),
        1
    );
    // Somewhere else to go back to is not followed.
    let form = server.post_form(
        "/action",
        &[
            ("do", "review:selected"),
            ("item", "[\"alpha\",\"alpha-004\"]"),
            ("csrf", &csrf),
            ("back", "//evil.example/"),
        ],
    );
    assert_eq!(form.status, 303);
    assert!(
        form.header("location").unwrap().starts_with("/?note="),
        "{form:?}"
    );
}

#[test]
fn a_get_never_changes_anything() {
    let dir = TempDir::new("serve-get");
    let db = dir.path().join("dlq.db");
    mixed(&db);
    let server = Server::start(&db, &["--exec", "exit 0"]);
    let csrf = csrf_of(&server.get("/items"));
    let before = dump(&db);
    let events = count(&db, "SELECT COUNT(*) FROM events");
    let query = format!(
        "do=delete:all&job=alpha&confirm=1&csrf={csrf}&item=%5B%22alpha%22%2C%22alpha-001%22%5D"
    );
    for path in [
        format!("/action?{query}"),
        format!("/api/actions?{query}"),
        format!("/?{query}"),
        format!("/items?{query}"),
        format!("/item?job=alpha&id=alpha-001&{query}"),
        format!("/runs?{query}"),
        format!("/events?{query}"),
        format!("/patterns?{query}"),
    ] {
        let answer = server.get(&path);
        assert!(
            answer.status == 200 || answer.status == 405,
            "{path}: {}",
            answer.status
        );
        let answer = server.get_cookie(&path);
        assert!(
            answer.status == 200 || answer.status == 405,
            "{path}: {}",
            answer.status
        );
    }
    for method in ["PUT", "DELETE", "PATCH"] {
        let answer = server.send(
            method,
            "/api/actions",
            &[("Content-Type", "application/json")],
            br#"{"action": "delete", "filter": ""}"#,
        );
        assert_eq!(answer.status, 405, "{method}");
    }
    assert_eq!(dump(&db), before);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM events"), events);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM retry_runs"), 0);
}

// ---------------------------------------------------------------------------
// The API against SQL.

#[test]
fn the_api_answers_match_sql() {
    let dir = TempDir::new("serve-oracle");
    let db = dir.path().join("dlq.db");
    mixed(&db);
    ok(dlq(&db).args(["mark", "alpha-007", "--job-id", "alpha", "--manual-review"]));
    let server = Server::start(&db, &[]);

    // Jobs and their counters.
    let jobs = server.get("/api/jobs").json();
    let listed: Vec<(String, i64, i64, i64)> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["job_id"].as_str().unwrap().to_string(),
                j["items"].as_i64().unwrap(),
                j["eligible"].as_i64().unwrap(),
                j["manual_review"].as_i64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, i64, i64, i64)> = rows_as(
        &db,
        "SELECT job_id, COUNT(*), CAST(SUM(reprocess_eligible) AS BIGINT),
             CAST(SUM(manual_review_required) AS BIGINT)
         FROM items GROUP BY job_id ORDER BY job_id",
    );
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, expected);

    // Stats, whole and per job.
    for (scope, condition) in [("", "1 = 1"), ("?job=beta", "job_id = 'beta'")] {
        let stats = server.get(&format!("/api/stats{scope}")).json();
        assert_eq!(
            stats["total_items"],
            count(
                &db,
                &format!("SELECT COUNT(*) FROM items WHERE {condition}")
            ),
            "{scope}"
        );
        assert_eq!(
            stats["eligible_for_reprocess"],
            count(
                &db,
                &format!("SELECT COUNT(*) FROM items WHERE {condition} AND reprocess_eligible = 1")
            ),
            "{scope}"
        );
        assert_eq!(
            stats["requiring_manual_review"],
            count(
                &db,
                &format!(
                    "SELECT COUNT(*) FROM items WHERE {condition} AND manual_review_required = 1"
                )
            ),
            "{scope}"
        );
        let by_type: i64 = stats["error_types"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_i64().unwrap())
            .sum();
        assert_eq!(by_type, stats["total_items"].as_i64().unwrap(), "{scope}");
    }

    // Listings: every page walked, with small and large pages, both sorts,
    // against the same search in SQL.
    let cases: [(&str, &str); 7] = [
        ("", "1 = 1"),
        ("job=alpha", "job_id = 'alpha'"),
        ("job=beta&filter=failure_count >= 3", "job_id = 'beta' AND failure_count >= 3"),
        ("filter=reprocess_eligible and not manual_review_required",
         "reprocess_eligible = 1 AND manual_review_required = 0"),
        ("filter=error_message contains \"disk\" || failure_count == 1",
         "(EXISTS (SELECT 1 FROM failure_history f WHERE f.item_key = items.id AND instr(f.error_message, 'disk') > 0)
           OR failure_count = 1)"),
        ("job=gamma&filter=item_id == \"gamma-004\"", "job_id = 'gamma' AND item_id = 'gamma-004'"),
        ("filter=last_attempt >= \"2025-01-01T00:20:00Z\" and job_id != \"alpha\"",
         "last_attempt >= '2025-01-01T00:20:00.000000000Z' AND job_id != 'alpha'"),
    ];
    for (query, condition) in cases {
        // PostgreSQL spells SQLite's instr() strpos().
        let condition = if on_postgres() {
            condition.replace("instr(", "strpos(")
        } else {
            condition.to_string()
        };
        let expected = sql_keys(
            &db,
            &format!("SELECT job_id, item_id FROM items WHERE {condition}"),
        );
        assert!(
            !expected.is_empty(),
            "{query}: the oracle must pick something"
        );
        let query: String = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap();
                format!("{k}={}", enc(v))
            })
            .collect::<Vec<_>>()
            .join("&");
        for extra in [
            "&limit=7",
            "&limit=1000",
            "&sort=failure_count&limit=13",
            "",
        ] {
            let got = walk(&server, &format!("{query}{extra}"));
            assert_eq!(got, expected, "{query}{extra}");
        }
    }
    // The order of the pages: newest last attempt first; most failures first.
    let page = server
        .get("/api/items?job=alpha&sort=failure_count&limit=1000")
        .json();
    let counts: Vec<i64> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["failure_count"].as_i64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    let page = server.get("/api/items?job=alpha&limit=1000").json();
    let times: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["last_attempt"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    // A row's fields are the stored ones.
    for row in page["items"].as_array().unwrap() {
        let id = row["item_id"].as_str().unwrap();
        // Generated ids: nothing to quote.
        let (fc, eligible, review): (i64, bool, bool) = row_as(
            &db,
            &format!(
                "SELECT failure_count, reprocess_eligible, manual_review_required FROM items
                 WHERE job_id = 'alpha' AND item_id = '{id}'"
            ),
        );
        assert_eq!(
            (
                row["failure_count"].as_i64().unwrap(),
                row["reprocess_eligible"].as_bool().unwrap(),
                row["manual_review_required"].as_bool().unwrap()
            ),
            (fc, eligible, review),
            "{id}"
        );
    }

    // One item: the whole stored item.
    let one = server.get("/api/item?job=beta&id=beta-006").json();
    assert_eq!(one["item"]["item_id"], "beta-006");
    assert_eq!(one["item"]["failure_count"], 3);
    let history: Vec<i64> = one["item"]["failure_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["attempt_number"].as_i64().unwrap())
        .collect();
    let stored: Vec<String> = strings(&db, "SELECT CAST(f.attempt_number AS TEXT) FROM failure_history f JOIN items i ON i.id = f.item_key
                                             WHERE i.job_id = 'beta' AND i.item_id = 'beta-006' ORDER BY f.attempt_number");
    assert_eq!(
        history.iter().map(i64::to_string).collect::<Vec<_>>(),
        stored
    );

    // Events: every page, against SQL.
    let walk_events = |query: &str| -> BTreeSet<i64> {
        let mut ids = BTreeSet::new();
        let mut before: Option<i64> = None;
        loop {
            let path = match before {
                Some(b) => format!("/api/events?{query}&before={b}"),
                None => format!("/api/events?{query}"),
            };
            let page = server.get(&path);
            assert_eq!(page.status, 200, "{path}: {}", page.body);
            let page = page.json();
            for event in page["events"].as_array().unwrap() {
                assert!(
                    ids.insert(event["id"].as_i64().unwrap()),
                    "{query}: event twice"
                );
            }
            match page["next"].as_i64() {
                Some(n) => before = Some(n),
                None => return ids,
            }
        }
    };
    let set = |q: &str| -> BTreeSet<i64> {
        strings(&db, &q.replace("SELECT id", "SELECT CAST(id AS TEXT)"))
            .iter()
            .map(|s| s.parse().unwrap())
            .collect()
    };
    assert_eq!(walk_events("limit=17"), set("SELECT id FROM events"));
    assert_eq!(
        walk_events("job=beta&limit=9"),
        set("SELECT id FROM events WHERE job_id = 'beta'")
    );
    assert_eq!(
        walk_events("kind=marked"),
        set("SELECT id FROM events WHERE kind = 'marked'")
    );
    assert_eq!(
        walk_events("job=alpha&item=alpha-007"),
        set("SELECT id FROM events WHERE job_id = 'alpha' AND item_id = 'alpha-007'")
    );
    let live = server.get("/api/live").json();
    assert_eq!(
        live["last_event_id"],
        count(&db, "SELECT MAX(id) FROM events")
    );
    assert_eq!(live["items"], count(&db, "SELECT COUNT(*) FROM items"));
}

#[test]
fn bad_requests_get_a_4xx_with_a_one_line_reason() {
    let dir = TempDir::new("serve-bad");
    let db = dir.path().join("dlq.db");
    mixed(&db);
    let server = Server::start(&db, &[]);
    let check = |answer: Response, status: u16, says: &str| {
        assert_eq!(answer.status, status, "{says}: {}", answer.body);
        let error = answer.json()["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", answer.body))
            .to_string();
        assert!(!error.contains('\n'), "{error}");
        assert!(error.contains(says), "{error:?} should say {says:?}");
    };
    // An invalid filter names where it went wrong.
    check(
        server.get(&format!("/api/items?filter={}", enc("failure_count >= "))),
        400,
        "column 18",
    );
    check(
        server.get(&format!("/api/items?filter={}", enc("nosuch == 1"))),
        400,
        "nosuch",
    );
    check(server.get("/api/items?job=nosuch"), 404, "nosuch");
    check(server.get("/api/items?sort=sideways"), 400, "sideways");
    check(server.get("/api/items?limit=0"), 400, "limit");
    check(server.get("/api/items?limit=many"), 400, "limit");
    check(server.get("/api/items?cursor=garbage"), 400, "cursor");
    check(server.get("/api/item?job=alpha&id=nosuch"), 404, "nosuch");
    check(
        server.get("/api/item?job=nosuch&id=alpha-001"),
        404,
        "nosuch",
    );
    check(server.get("/api/item?job=alpha"), 400, "which item");
    check(server.get("/api/stats?job=nosuch"), 404, "nosuch");
    check(server.get("/api/analyze?job=nosuch"), 404, "nosuch");
    check(server.get("/api/events?before=yesterday"), 400, "before");
    check(server.get("/api/events?kind=exploded"), 400, "exploded");
    check(server.get("/api/runs?limit=1001"), 400, "limit");
    add_lines(
        &db,
        "beta",
        [item("alpha-001", 1, "2025-01-01T00:00:00Z", "twin")],
    );
    check(server.get("/api/item?id=alpha-001"), 400, "several jobs");
    check(server.get("/api/nosuch"), 404, "/api/nosuch");
    let post = |body: &str| {
        server.send(
            "POST",
            "/api/actions",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
    };
    check(post("{not json"), 400, "malformed JSON");
    check(post(""), 400, "malformed JSON");
    check(
        post(r#"{"action": "explode", "filter": ""}"#),
        400,
        "explode",
    );
    check(
        post(r#"{"action": "delete", "filter": "", "surprise": 1}"#),
        400,
        "surprise",
    );
    check(post(r#"{"action": "delete"}"#), 400, "which items");
    check(
        post(r#"{"action": "delete", "filter": "", "items": []}"#),
        400,
        "not both",
    );
    check(
        post(r#"{"action": "mark", "filter": ""}"#),
        400,
        "mark what",
    );
    check(
        post(r#"{"action": "delete", "filter": "", "reprocess_eligible": true}"#),
        400,
        "mark",
    );
    check(
        post(r#"{"action": "delete", "filter": "failure_count >>= 2"}"#),
        400,
        "column",
    );
    check(
        post(r#"{"action": "delete", "filter": "", "job_id": "nosuch"}"#),
        404,
        "nosuch",
    );
    check(
        post(r#"{"action": "delete", "filter": "", "selection": "forged"}"#),
        400,
        "selection",
    );
    check(
        post(r#"{"action": "retry", "filter": "", "dry_run": true}"#),
        400,
        "one job",
    );
    let named: Vec<(String, String)> = (0..10_001)
        .map(|n| ("alpha".to_string(), n.to_string()))
        .collect();
    let too_many =
        serde_json::json!({"action": "delete", "items": named, "dry_run": true}).to_string();
    check(post(&too_many), 400, "at most 10000");
    // Oversized: more than the body limit.
    let huge = format!(
        r#"{{"action": "delete", "filter": "{}"}}"#,
        "x".repeat(5 << 20)
    );
    let answer = post(&huge);
    assert_eq!(
        answer.status,
        413,
        "{}",
        &answer.body[..answer.body.len().min(200)]
    );
    // Pages say what too, as a page.
    for (path, status, says) in [
        ("/item?job=alpha&id=nosuch", 404, "nosuch"),
        ("/items?job=nosuch", 404, "nosuch"),
        ("/items?q=failure_count%20%3E%3D", 400, "column"),
        ("/nowhere", 404, "/nowhere"),
    ] {
        let page = server.get(path);
        assert_eq!(page.status, status, "{path}: {}", page.body);
        assert!(page.body.contains(says), "{path}: {}", page.body);
        assert!(
            page.header("content-type")
                .unwrap()
                .starts_with("text/html"),
            "{path}"
        );
    }
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind NOT IN ('added', 'job_created')"
        ),
        0,
        "a bad request changed something"
    );
}

// ---------------------------------------------------------------------------
// Actions.

#[test]
fn actions_change_exactly_the_counted_rows_and_write_events() {
    let dir = TempDir::new("serve-actions");
    let db = dir.path().join("dlq.db");
    mixed(&db);
    let server = Server::start(&db, &[]);

    // Mark through a search: the dry run counts the SQL set, the action
    // with its selection changes exactly it, with a `marked` event each.
    let filter = "failure_count >= 3 && !manual_review_required";
    let target = sql_keys(&db, "SELECT job_id, item_id FROM items WHERE job_id = 'alpha' AND failure_count >= 3 AND manual_review_required = 0");
    let dry = post_action(
        &server,
        serde_json::json!({"action": "mark", "filter": filter, "job_id": "alpha",
        "manual_review_required": true, "dry_run": true}),
    );
    assert_eq!(dry.status, 200, "{}", dry.body);
    let dry = dry.json();
    assert_eq!(dry["count"], target.len());
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'marked'"),
        0,
        "a dry run wrote"
    );
    let flagged_before = sql_keys(
        &db,
        "SELECT job_id, item_id FROM items WHERE manual_review_required = 1",
    );
    let done = post_action(
        &server,
        serde_json::json!({"action": "mark", "filter": filter, "job_id": "alpha",
        "manual_review_required": true, "selection": dry["selection"]}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.json()["count"], target.len());
    let flagged_after = sql_keys(
        &db,
        "SELECT job_id, item_id FROM items WHERE manual_review_required = 1",
    );
    assert_eq!(
        flagged_after,
        flagged_before.union(&target).cloned().collect::<Keys>()
    );
    assert_eq!(
        sql_keys(
            &db,
            "SELECT job_id, item_id FROM events WHERE kind = 'marked'"
        ),
        target
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'marked'"),
        target.len() as i64
    );
    // The counters follow.
    let stats = server.get("/api/stats?job=alpha").json();
    assert_eq!(
        stats["requiring_manual_review"],
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE job_id = 'alpha' AND manual_review_required = 1"
        )
    );

    // Named items, a missing one among them: only those that exist.
    let named = serde_json::json!({"action": "mark", "reprocess_eligible": false,
        "items": [["beta", "beta-001"], ["gamma", "gamma-002"], ["beta", "nosuch"], ["nosuch", "beta-002"]]});
    let done = post_action(&server, named);
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.json()["count"], 2);
    assert_eq!(
        sql_keys(
            &db,
            "SELECT job_id, item_id FROM events WHERE kind = 'marked' AND job_id != 'alpha'"
        ),
        keys(&[("beta", "beta-001"), ("gamma", "gamma-002")])
    );

    // A delete on a search over every job: a `removed` event each, the
    // rest stays.
    let doomed = sql_keys(
        &db,
        "SELECT job_id, item_id FROM items WHERE failure_count = 2 AND reprocess_eligible = 1",
    );
    let kept = sql_keys(
        &db,
        "SELECT job_id, item_id FROM items WHERE NOT (failure_count = 2 AND reprocess_eligible = 1)",
    );
    let dry = post_action(&server, serde_json::json!({"action": "delete", "filter": "failure_count == 2 && reprocess_eligible", "dry_run": true})).json();
    assert_eq!(dry["count"], doomed.len());
    let done = post_action(
        &server,
        serde_json::json!({"action": "delete", "filter": "failure_count == 2 && reprocess_eligible",
        "selection": dry["selection"]}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.json()["count"], doomed.len());
    assert_eq!(sql_keys(&db, "SELECT job_id, item_id FROM items"), kept);
    assert_eq!(
        sql_keys(
            &db,
            "SELECT job_id, item_id FROM events WHERE kind = 'removed'"
        ),
        doomed
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM failure_history f WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.id = f.item_key)"), 0);
    let jobs = server.get("/api/jobs").json();
    for job in jobs["jobs"].as_array().unwrap() {
        let id = job["job_id"].as_str().unwrap();
        assert_eq!(
            job["items"],
            count(
                &db,
                &format!("SELECT COUNT(*) FROM items WHERE job_id = '{id}'")
            ),
            "{id}"
        );
    }

    // The rows changed between the count and the action: 409, nothing done.
    let dry = post_action(&server, serde_json::json!({"action": "delete", "filter": "error_message == \"bang\"", "job_id": "gamma", "dry_run": true})).json();
    add_lines(
        &db,
        "gamma",
        [item("gamma-new", 1, "2025-02-01T00:00:00Z", "bang")],
    );
    let before = dump(&db);
    let stale = post_action(
        &server,
        serde_json::json!({"action": "delete", "filter": "error_message == \"bang\"", "job_id": "gamma",
        "selection": dry["selection"]}),
    );
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert!(!stale.json()["error"].as_str().unwrap().contains('\n'));
    assert_eq!(dump(&db), before, "a refused action changed something");
    // Counted again, it goes through.
    let dry = post_action(&server, serde_json::json!({"action": "delete", "filter": "error_message == \"bang\"", "job_id": "gamma", "dry_run": true})).json();
    let expected = sql_keys(
        &db,
        "SELECT i.job_id, i.item_id FROM items i WHERE job_id = 'gamma' AND EXISTS
        (SELECT 1 FROM failure_history f WHERE f.item_key = i.id AND f.error_message = 'bang')",
    );
    assert_eq!(dry["count"], expected.len());
    assert!(expected.contains(&("gamma".to_string(), "gamma-new".to_string())));
    let done = post_action(
        &server,
        serde_json::json!({"action": "delete", "filter": "error_message == \"bang\"", "job_id": "gamma",
        "selection": dry["selection"]}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(sql_keys(&db, "SELECT job_id, item_id FROM items").is_disjoint(&expected));

    // An item swapped for another (same count) is a change too.
    let dry = post_action(&server, serde_json::json!({"action": "mark", "reprocess_eligible": true, "filter": "item_id == \"beta-010\" || item_id == \"beta-011\"", "job_id": "beta", "dry_run": true})).json();
    assert_eq!(dry["count"], 2);
    let gone = post_action(
        &server,
        serde_json::json!({"action": "delete", "items": [["beta", "beta-010"]]}),
    );
    assert_eq!(gone.json()["count"], 1);
    add_lines(
        &db,
        "beta",
        [item("beta-010", 1, "2025-02-01T00:00:00Z", "new")],
    );
    let stale = post_action(
        &server,
        serde_json::json!({"action": "mark", "reprocess_eligible": true, "filter": "item_id == \"beta-010\" || item_id == \"beta-011\"", "job_id": "beta",
        "selection": dry["selection"]}),
    );
    assert_eq!(stale.status, 409, "{}", stale.body);
}

#[test]
fn the_forms_confirm_a_search_action_and_apply_it_to_the_rows_counted() {
    let dir = TempDir::new("serve-form");
    let db = dir.path().join("dlq.db");
    mixed(&db);
    let server = Server::start(&db, &[]);
    let csrf = csrf_of(&server.get_cookie("/items?job=beta"));
    let q = "error_message == \"boom\"";
    let target = sql_keys(
        &db,
        "SELECT i.job_id, i.item_id FROM items i WHERE job_id = 'beta' AND EXISTS
        (SELECT 1 FROM failure_history f WHERE f.item_key = i.id AND f.error_message = 'boom')",
    );
    // The first post only counts, and asks.
    let page = server.post_form(
        "/action",
        &[
            ("csrf", &csrf),
            ("do", "delete:all"),
            ("job", "beta"),
            ("q", q),
            ("back", "/items?job=beta"),
        ],
    );
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains(&format!("{} items", target.len())),
        "{}",
        page.body
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'removed'"),
        0
    );
    let fields = hidden_fields(&page.body);
    assert!(
        fields.iter().any(|(k, v)| k == "confirm" && v == "1"),
        "{fields:?}"
    );
    assert!(fields.iter().any(|(k, _)| k == "selection"), "{fields:?}");
    // Confirmed: exactly those rows.
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let done = server.post_form("/action", &pairs);
    assert_eq!(done.status, 303, "{}", done.body);
    assert!(done
        .header("location")
        .unwrap()
        .starts_with("/items?job=beta&note="));
    assert_eq!(
        sql_keys(
            &db,
            "SELECT job_id, item_id FROM events WHERE kind = 'removed'"
        ),
        target
    );

    // A confirmation after the rows changed counts again and asks again.
    let page = server.post_form(
        "/action",
        &[
            ("csrf", &csrf),
            ("do", "review:all"),
            ("job", "gamma"),
            ("q", ""),
        ],
    );
    let fields = hidden_fields(&page.body);
    add_lines(
        &db,
        "gamma",
        [item("gamma-late", 1, "2025-02-01T00:00:00Z", "late")],
    );
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let again = server.post_form("/action", &pairs);
    assert_eq!(again.status, 200, "{}", again.body);
    assert!(again.body.contains("10 items"), "{}", again.body);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'marked'"),
        0
    );
}

// ---------------------------------------------------------------------------
// Read-only.

#[test]
fn read_only_refuses_every_change_but_still_counts() {
    let dir = TempDir::new("serve-read-only");
    let db = dir.path().join("dlq.db");
    mixed(&db);
    // The CSRF token of a writable server with the same access token (a
    // page open from before a restart), so the forms below pass that check.
    let token = "read-only-test-token-0123456789";
    let csrf = csrf_of(&Server::start(&db, &["--token", token]).get_cookie("/items"));
    let server = Server::start(&db, &["--read-only", "--token", token]);
    let before = dump(&db);
    let events = count(&db, "SELECT COUNT(*) FROM events");
    for body in [
        serde_json::json!({"action": "delete", "filter": ""}),
        serde_json::json!({"action": "delete", "items": [["alpha", "alpha-001"]]}),
        serde_json::json!({"action": "mark", "filter": "", "job_id": "beta", "reprocess_eligible": false}),
        serde_json::json!({"action": "mark", "items": [["alpha", "alpha-001"]], "manual_review_required": true}),
        serde_json::json!({"action": "retry", "filter": "", "job_id": "alpha"}),
    ] {
        let answer = post_action(&server, body.clone());
        assert_eq!(answer.status, 403, "{body}: {}", answer.body);
        assert!(
            answer.json()["error"]
                .as_str()
                .unwrap()
                .contains("read-only"),
            "{}",
            answer.body
        );
    }
    let dry = post_action(
        &server,
        serde_json::json!({"action": "delete", "filter": "", "job_id": "beta", "dry_run": true}),
    );
    assert_eq!(dry.status, 200, "{}", dry.body);
    assert_eq!(dry.json()["count"], 70);
    for form in [
        vec![
            ("csrf", csrf.as_str()),
            ("do", "eligible:selected"),
            ("item", "[\"alpha\",\"alpha-000\"]"),
        ],
        vec![
            ("csrf", csrf.as_str()),
            ("do", "delete:all"),
            ("job", "beta"),
            ("q", ""),
            ("confirm", "1"),
        ],
        vec![
            ("csrf", csrf.as_str()),
            ("do", "delete:all"),
            ("job", "beta"),
            ("q", ""),
        ],
    ] {
        let answer = server.post_form("/action", &form);
        assert_eq!(answer.status, 403, "{form:?}: {}", answer.body);
    }
    for path in [
        "/",
        "/items",
        "/items?job=alpha",
        "/item?job=alpha&id=alpha-001",
    ] {
        let page = server.get(path);
        assert_eq!(page.status, 200, "{path}");
        assert!(
            !page.body.contains("name=\"do\""),
            "{path} has action buttons"
        );
    }
    assert_eq!(dump(&db), before);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM events"), events);
}

// ---------------------------------------------------------------------------
// Hostile text.

const HOSTILE: [&str; 6] = [
    "<script>alert(1)</script>",
    "\"'><img src=x onerror=alert(1)>",
    "</svg><script>alert(2)</script>",
    "evil\u{202E}gnp.exe",
    "line\u{2028}sep\u{2029}par",
    "bell\u{7}esc\u{1b}[31mred\u{8}\u{7f}",
];

/// What must never appear raw in a page: markup anywhere; invisible or
/// reordering characters in the text shown (inside a tag, as an attribute
/// value a form sends back, they are data, not display).
fn assert_escaped(path: &str, page: &Response) {
    for raw in [
        "<script>alert",
        "<img src=x",
        "</svg><script>",
        "onerror=alert(1)>",
    ] {
        assert!(
            !page.body.contains(raw),
            "{path} shows {raw:?} raw:\n{}",
            page.body
        );
    }
    let mut shown = String::new();
    let mut in_tag = false;
    for c in page.body.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => shown.push(c),
            _ => {}
        }
    }
    for raw in [
        '\u{202E}', '\u{2028}', '\u{2029}', '\u{1b}', '\u{7}', '\u{8}', '\u{7f}',
    ] {
        assert!(
            !shown.contains(raw),
            "{path} shows {raw:?} raw:\n{}",
            page.body
        );
    }
}

#[test]
fn hostile_ids_and_messages_come_back_escaped_in_pages_and_exact_in_json() {
    let dir = TempDir::new("serve-hostile");
    let db = dir.path().join("dlq.db");
    let job = format!("job{}", HOSTILE.concat());
    let mut items = Vec::new();
    for (n, text) in HOSTILE.iter().enumerate() {
        let id = format!("{n}{text}");
        let mut value = item(&id, 1, "2025-01-01T00:00:00Z", &format!("failed: {text}"));
        value["item_data"]["note"] = (*text).into();
        value["item_data"][*text] = "key".into();
        value["failure_history"][0]["agent_id"] = format!("agent{text}").into();
        value["failure_history"][0]["stack_trace"] = format!("at {text}").into();
        value["failure_history"][0]["step_failed"] = (*text).into();
        value["worktree_artifacts"]["branch_name"] = format!("b{text}").into();
        value["error_signature"] =
            dlqlite::classify::error_signature(&format!("failed: {text}")).into();
        items.push(value);
    }
    add_lines(&db, &job, items.clone());
    ok(dlq(&db).args([
        "mark",
        &format!("0{}", HOSTILE[0]),
        "--job-id",
        &job,
        "--manual-review",
    ]));
    // A retry run of the hostile job, for the Runs page.
    let output = run(dlq(&db).args(["retry", &job, "--exec", "exit 1", "--max-retries", "1"]));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM retry_runs"), 1);
    let server = Server::start(&db, &[]);

    let mut paths = vec![
        "/".to_string(),
        "/items".to_string(),
        format!("/items?job={}", enc(&job)),
        format!(
            "/items?job={}&q={}",
            enc(&job),
            enc("error_message contains \"<\"")
        ),
        "/patterns".to_string(),
        format!("/patterns?job={}", enc(&job)),
        "/events".to_string(),
        format!("/events?job={}", enc(&job)),
        "/runs".to_string(),
    ];
    for (n, text) in HOSTILE.iter().enumerate() {
        paths.push(format!(
            "/item?job={}&id={}",
            enc(&job),
            enc(&format!("{n}{text}"))
        ));
        // A search that fails on hostile text shows it escaped too.
        paths.push(format!("/items?q={}", enc(&format!("{text} == 1"))));
    }
    // The Patterns page computes in the background: wait until it shows
    // figures, then check it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.get("/api/analyze").json().get("computing").is_some() {
        assert!(std::time::Instant::now() < deadline, "no analysis in 60 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for path in &paths {
        let page = server.get(path);
        if path.starts_with("/items?q=") {
            assert_eq!(page.status, 400, "{path}");
            assert_escaped(path, &page);
            continue;
        }
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert_escaped(path, &page);
    }
    // The Item page shows the text (escaped), not nothing.
    let page = server.get(&format!(
        "/item?job={}&id={}",
        enc(&job),
        enc(&format!("0{}", HOSTILE[0]))
    ));
    assert!(
        page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        page.body
    );

    // So does the Runs page, with the run of the hostile job.
    let page = server.get("/runs");
    assert!(
        page.body.contains("job&lt;script&gt;alert(1)"),
        "{}",
        page.body
    );

    // The JSON API gives every byte back.
    for (n, (text, stored)) in HOSTILE.iter().zip(&items).enumerate() {
        let id = format!("{n}{text}");
        let answer = server.get(&format!("/api/item?job={}&id={}", enc(&job), enc(&id)));
        assert_eq!(answer.status, 200, "{id:?}: {}", answer.body);
        let got = answer.json();
        assert_eq!(got["job_id"], job.as_str());
        let item = &got["item"];
        assert_eq!(item["item_id"], id.as_str());
        assert_eq!(item["item_data"], stored["item_data"], "{id:?}");
        assert_eq!(
            item["failure_history"][0]["error_message"],
            stored["failure_history"][0]["error_message"]
        );
        assert_eq!(
            item["failure_history"][0]["agent_id"],
            stored["failure_history"][0]["agent_id"]
        );
        assert_eq!(
            item["failure_history"][0]["stack_trace"],
            stored["failure_history"][0]["stack_trace"]
        );
        assert_eq!(
            item["worktree_artifacts"]["branch_name"],
            stored["worktree_artifacts"]["branch_name"]
        );
    }
    let listed = walk(&server, &format!("job={}&limit=2", enc(&job)));
    let expected: Keys = HOSTILE
        .iter()
        .enumerate()
        .map(|(n, t)| (job.clone(), format!("{n}{t}")))
        .collect();
    assert_eq!(listed, expected);
    let found = walk(
        &server,
        &format!(
            "filter={}",
            enc(&format!(
                "item_id == {}",
                serde_json::json!(format!("1{}", HOSTILE[1]))
            ))
        ),
    );
    assert_eq!(found, keys(&[(&job, &format!("1{}", HOSTILE[1]))]));
    let jobs = server.get("/api/jobs").json();
    assert_eq!(jobs["jobs"][0]["job_id"], job.as_str());
    let events = server
        .get(&format!("/api/events?job={}&kind=marked", enc(&job)))
        .json();
    assert_eq!(
        events["events"][0]["item_id"],
        format!("0{}", HOSTILE[0]).as_str()
    );
    // The actions take hostile names as they are.
    let id = format!("2{}", HOSTILE[2]);
    let done = post_action(
        &server,
        serde_json::json!({"action": "delete", "items": [[job, id]]}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.json()["count"], 1);
    assert_eq!(
        strings(&db, "SELECT item_id FROM events WHERE kind = 'removed'"),
        vec![id]
    );
}

// ---------------------------------------------------------------------------
// Retry.

#[test]
fn a_retry_runs_through_the_engine_and_is_recorded() {
    let dir = TempDir::new("serve-retry");
    let db = dir.path().join("dlq.db");
    add_lines(
        &db,
        "j",
        (0..12).map(|i| {
            let id = if i % 3 == 0 {
                format!("ok-{i}")
            } else {
                format!("bad-{i}")
            };
            item(&id, 1, "2025-01-01T00:00:00Z", "boom")
        }),
    );
    add_lines(
        &db,
        "other",
        [item("ok-other", 1, "2025-01-01T00:00:00Z", "boom")],
    );
    ok(dlq(&db).args(["mark", "ok-3", "--job-id", "j", "--ineligible"]));

    // Without --exec: refused, saying how to turn it on; a dry run counts.
    {
        let server = Server::start(&db, &[]);
        let refused = post_action(
            &server,
            serde_json::json!({"action": "retry", "filter": "", "job_id": "j"}),
        );
        assert_eq!(refused.status, 403, "{}", refused.body);
        assert!(
            refused.json()["error"].as_str().unwrap().contains("--exec"),
            "{}",
            refused.body
        );
        let dry = post_action(
            &server,
            serde_json::json!({"action": "retry", "filter": "", "job_id": "j", "dry_run": true}),
        );
        assert_eq!(dry.json()["count"], 11, "the eligible ones");
        assert_eq!(count(&db, "SELECT COUNT(*) FROM retry_runs"), 0);
    }

    // The item's JSON on stdin; succeed for ok-*, fail for the others.
    let script = dir.join("process.sh");
    std::fs::write(&script, "#!/bin/sh\ncat > /dev/null\ncase \"$DLQ_ITEM_ID\" in ok-*) exit 0;; *) echo \"no luck\" >&2; exit 1;; esac\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::start(
        &db,
        &["--exec", script.to_str().unwrap(), "--parallel", "3"],
    );
    let history_before: Vec<String> = strings(&db, "SELECT i.item_id || ':' || COUNT(*) FROM items i JOIN failure_history f ON f.item_key = i.id GROUP BY i.id ORDER BY 1");
    let started = post_action(
        &server,
        serde_json::json!({"action": "retry", "filter": "", "job_id": "j"}),
    );
    assert_eq!(started.status, 200, "{}", started.body);
    let started = started.json();
    assert_eq!(started["count"], 11);
    let runs = started["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{started}");
    let run_id = runs[0]["run_id"].as_str().unwrap().to_string();

    // Wait until the run has ended (no timing assert: a generous deadline).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let list = server.get("/api/runs").json();
        let run = list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == run_id.as_str())
            .cloned();
        if let Some(run) = run {
            if run["status"] != "running" {
                assert_eq!(run["status"], "finished", "{run}");
                break;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not end in 120 s: {list}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let live = server.get("/api/live").json();
    assert_eq!(live["runs_running"], 0, "{live}");

    // Succeeded: gone, with `retried_ok`; failed: one more attempt.
    assert_eq!(
        sql_keys(
            &db,
            "SELECT job_id, item_id FROM events WHERE kind = 'retried_ok'"
        ),
        keys(&[("j", "ok-0"), ("j", "ok-6"), ("j", "ok-9")])
    );
    assert_eq!(
        sql_keys(&db, "SELECT job_id, item_id FROM items"),
        keys(&[
            ("j", "ok-3"),
            ("j", "bad-1"),
            ("j", "bad-2"),
            ("j", "bad-4"),
            ("j", "bad-5"),
            ("j", "bad-7"),
            ("j", "bad-8"),
            ("j", "bad-10"),
            ("j", "bad-11"),
            ("other", "ok-other")
        ])
    );
    let history_after: Vec<String> = strings(&db, "SELECT i.item_id || ':' || COUNT(*) FROM items i JOIN failure_history f ON f.item_key = i.id GROUP BY i.id ORDER BY 1");
    let expected: Vec<String> = history_before
        .iter()
        .filter(|h| !["ok-0:", "ok-6:", "ok-9:"].iter().any(|p| h.starts_with(p)))
        // Three attempts in the run, as `dlq retry` makes by default.
        .map(|h| {
            if h.starts_with("bad-") {
                h.replace(":1", ":4")
            } else {
                h.clone()
            }
        })
        .collect();
    assert_eq!(history_after, expected);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM failure_history f JOIN items i ON i.id = f.item_key
                           WHERE i.item_id LIKE 'bad-%' AND f.attempt_number > 1 AND f.error_message = 'no luck'"), 24);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'retried_failed'"
        ),
        24,
        "one per attempt"
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL"
        ),
        0,
        "leases released"
    );
    let (job, status, attempted): (String, String, i64) = row_as(
        &db,
        &format!("SELECT job_id, status, attempted FROM retry_runs WHERE run_id = '{run_id}'"),
    );
    assert_eq!(
        (job.as_str(), status.as_str(), attempted),
        ("j", "finished", 11)
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM retry_runs"), 1);
    // The Runs page shows it.
    let page = server.get("/runs");
    assert!(page.body.contains(&run_id), "{}", page.body);

    // Named items of two jobs: a run per job.
    let started = post_action(
        &server,
        serde_json::json!({"action": "retry", "items": [["j", "bad-1"], ["other", "ok-other"], ["j", "ok-3"]]}),
    );
    assert_eq!(started.status, 200, "{}", started.body);
    let started = started.json();
    assert_eq!(started["count"], 2, "ok-3 is not eligible: {started}");
    assert_eq!(started["runs"].as_array().unwrap().len(), 2, "{started}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    // One query: two (running, then all) could see no run running before
    // the new runs were recorded, and three runs after.
    while count(
        &db,
        "SELECT COUNT(*) FROM retry_runs WHERE status <> 'running'",
    ) < 3
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the runs did not end in 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE item_id = 'ok-other'"),
        0,
        "runs: {:?}",
        table_rows(
            &db,
            "SELECT run_id, job_id, status, attempted, succeeded, failed FROM retry_runs"
        )
    );
    assert_eq!(
        count(
            &db,
            "SELECT failure_count FROM items WHERE item_id = 'bad-1'"
        ),
        7
    );
    assert_eq!(
        count(
            &db,
            "SELECT failure_count FROM items WHERE item_id = 'ok-3'"
        ),
        1
    );
}

// ---------------------------------------------------------------------------
// Startup: where it binds, which tokens it takes, a broken database.

#[test]
fn a_non_loopback_bind_needs_a_good_explicit_token() {
    let dir = TempDir::new("serve-bind");
    let db = dir.path().join("dlq.db");
    add_lines(&db, "job", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let refused = |args: &[&str], says: &str| {
        let output = run(dlq(&db).arg("serve").args(args).env_remove("DLQ_TOKEN"));
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?} printed a URL");
    };
    refused(&["--bind", "0.0.0.0:0"], "token");
    refused(&["--bind", "[::]:0"], "token");
    refused(&["--bind", "0.0.0.0:0", "--token", "abc"], "--token");
    refused(&["--bind", "127.0.0.1:0", "--token", "abc"], "--token");
    refused(
        &["--bind", "127.0.0.1:0", "--token", "sixteen chars ok?"],
        "--token",
    );
    refused(
        &["--bind", "127.0.0.1:0", "--token", &"x".repeat(257)],
        "--token",
    );
    refused(&["--bind", "nowhere"], "--bind");
    // A token from the environment counts as explicit, and is checked too.
    let output = run(dlq(&db)
        .args(["serve", "--bind", "0.0.0.0:0"])
        .env("DLQ_TOKEN", "short"));
    assert_eq!(output.status.code(), Some(2));

    // With a good token it serves, on every address, and wants that token.
    let token = "a-Good_token.0123~";
    let mut child = dlq(&db)
        .args(["serve", "--bind", "0.0.0.0:0", "--token", token])
        .env_remove("DLQ_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let url = line.trim().to_string();
    let address = url
        .strip_prefix("http://")
        .and_then(|r| r.split_once('/'))
        .map(|(a, _)| a.to_string());
    let result = std::panic::catch_unwind(|| {
        // A token given explicitly is not printed (stdout goes to logs).
        assert!(url.ends_with('/') && !url.contains(token), "{url}");
        let address = address.unwrap();
        assert_eq!(request(&address, "GET", "/api/jobs", &[], b"").status, 401);
        let auth = format!("Bearer {token}");
        assert_eq!(
            request(
                &address,
                "GET",
                "/api/jobs",
                &[("Authorization", &auth)],
                b""
            )
            .status,
            200
        );
    });
    let _ = child.kill();
    let _ = child.wait();
    result.unwrap();
}

/// `--token-file` keeps one token across restarts, so bookmarks survive:
/// made and written 0600 on the first start, read on the next. A file
/// others may read, a link, or a bad token in it is refused with one line
/// and no URL.
#[test]
fn a_token_file_keeps_the_token_across_restarts() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("serve-token-file");
    let db = dir.path().join("dlq.db");
    add_lines(&db, "job", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let file = dir.path().join("token");
    let path = file.to_str().unwrap();
    let first = Server::start(&db, &["--token-file", path]);
    assert!(!first.url.contains("token="), "{}", first.url);
    assert_eq!(first.get("/api/jobs").status, 200);
    assert_eq!(first.get_anonymous("/api/jobs").status, 401);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let token = first.token.clone();
    assert!(token.len() >= 16, "{token}");
    drop(first);
    let second = Server::start(&db, &["--token-file", path]);
    assert_eq!(second.token, token);
    assert_eq!(second.get("/api/jobs").status, 200);
    drop(second);

    let refused = |file: &Path, says: &str| {
        let output = run(dlq(&db)
            .args(["serve", "--bind", "127.0.0.1:0", "--token-file"])
            .arg(file)
            .env_remove("DLQ_TOKEN"));
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(!output.status.success(), "{file:?} served");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(output.stdout.is_empty(), "{file:?} printed a URL");
    };
    let open = dir.path().join("readable");
    std::fs::write(&open, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    refused(&open, "chmod 600");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    refused(&link, "link");
    // A trailing slash names a directory: refused, nothing created (a
    // file `new` made now would be refused on every later start).
    refused(
        Path::new(&format!("{}/", dir.path().join("new").display())),
        "ends with /",
    );
    assert!(!dir.path().join("new").exists());
    let bad = dir.path().join("bad");
    std::fs::write(&bad, "short\n").unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
    refused(&bad, "16 to 256");
    // The file kept its token through all that.
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
    let both = run(dlq(&db)
        .args(["serve", "--token", "a-Good_token.0123~", "--token-file"])
        .arg(&file));
    assert_eq!(both.status.code(), Some(2));
    let from_env = run(dlq(&db)
        .args(["serve", "--token-file"])
        .arg(&file)
        .env("DLQ_TOKEN", "a-Good_token.0123~"));
    assert_eq!(from_env.status.code(), Some(2));
    let said = String::from_utf8_lossy(&from_env.stderr);
    assert!(
        said.contains("DLQ_TOKEN") && said.trim_end().lines().count() == 1,
        "{said}"
    );
}

#[test]
fn a_broken_database_gives_a_500_that_says_what() {
    let dir = TempDir::new("serve-broken");
    let db = dir.path().join("dlq.db");
    mixed(&db);
    let server = Server::start(&db, &[]);
    assert_eq!(server.get("/events").status, 200);
    // The events table goes away under the server.
    exec(
        &db,
        if on_postgres() {
            "ALTER TABLE events RENAME TO events_gone"
        } else {
            "PRAGMA legacy_alter_table = ON; ALTER TABLE events RENAME TO events_gone;"
        },
    );
    let page = server.get("/events");
    assert_eq!(page.status, 500, "{}", page.body);
    assert!(page.body.contains("events"), "{}", page.body);
    let answer = server.get("/api/events");
    assert_eq!(answer.status, 500, "{}", answer.body);
    let error = answer.json()["error"].as_str().unwrap().to_string();
    assert!(error.contains("events") && !error.contains('\n'), "{error}");
    // Still serving.
    assert_eq!(server.get("/api/jobs").status, 200);
    assert_eq!(server.get("/items").status, 200);
}

#[test]
fn a_confirmation_is_refused_for_a_replaced_item_a_merge_or_a_grown_retry() {
    let dir = TempDir::new("serve-exact");
    let db = dir.path().join("dlq.db");
    add_lines(
        &db,
        "J",
        ["a", "b", "c"].map(|id| item(id, 1, "2025-01-01T00:00:00Z", "boom")),
    );
    let script = dir.join("ok.sh");
    std::fs::write(&script, "#!/bin/sh\ncat > /dev/null\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::start(&db, &["--exec", script.to_str().unwrap()]);
    let everything = serde_json::json!({"action": "delete", "job_id": "J", "filter": ""});
    let dry_run = |body: &serde_json::Value| {
        let mut body = body.clone();
        body["dry_run"] = true.into();
        post_action(&server, body).json()
    };
    let confirm = |body: &serde_json::Value, selection: &serde_json::Value| {
        let mut body = body.clone();
        body["selection"] = selection.clone();
        post_action(&server, body)
    };

    // The last row goes and a new item is stored: the count is as counted,
    // but the selection is not the same items. Row keys are never given
    // twice (SQLite V14, PostgreSQL's identity), so the new item has a new
    // key; refused.
    let counted = dry_run(&everything);
    assert_eq!(counted["count"], 3);
    post_action(
        &server,
        serde_json::json!({"action": "delete", "items": [["J", "c"]]}),
    );
    add_lines(&db, "J", [item("d", 1, "2025-01-01T00:00:00Z", "boom")]);
    assert_eq!(
        count(&db, "SELECT MAX(id) FROM items"),
        4,
        "the freed key was given again"
    );
    let before = dump(&db);
    let refused = confirm(&everything, &counted["selection"]);
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(dump(&db), before);

    // An item that failed again after it was counted (a merge) is not the
    // item that was confirmed.
    let mark = serde_json::json!({"action": "mark", "job_id": "J", "filter": "", "manual_review_required": true});
    let counted = dry_run(&mark);
    assert_eq!(counted["count"], 3);
    add_lines(
        &db,
        "J",
        [item("a", 2, "2025-03-01T00:00:00Z", "boom again")],
    );
    assert_eq!(
        count(&db, "SELECT failure_count FROM items WHERE item_id = 'a'"),
        2
    );
    let before = dump(&db);
    let refused = confirm(&mark, &counted["selection"]);
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(dump(&db), before);

    // An item removed and stored again under its name (same failure_count;
    // a new row key, as keys are never given twice) is not the one counted
    // either.
    let counted = dry_run(&mark);
    let old_key = count(&db, "SELECT id FROM items WHERE item_id = 'd'");
    post_action(
        &server,
        serde_json::json!({"action": "delete", "items": [["J", "d"]]}),
    );
    add_lines(
        &db,
        "J",
        [item("d", 1, "2025-04-01T00:00:00Z", "another boom")],
    );
    let new_key = count(&db, "SELECT id FROM items WHERE item_id = 'd'");
    assert!(
        new_key > old_key,
        "the key came back: {old_key} -> {new_key}"
    );
    let before = dump(&db);
    let refused = confirm(&mark, &counted["selection"]);
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(dump(&db), before);

    // A retry counted for three is refused once a fourth eligible item
    // arrived; counted again, it retries exactly the four it counted.
    let retry = serde_json::json!({"action": "retry", "job_id": "J", "filter": ""});
    let counted = dry_run(&retry);
    assert_eq!(counted["count"], 3);
    add_lines(&db, "J", [item("e", 1, "2025-01-01T00:00:00Z", "boom")]);
    let refused = confirm(&retry, &counted["selection"]);
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM retry_runs"),
        0,
        "no run started"
    );
    let counted = dry_run(&retry);
    assert_eq!(counted["count"], 4);
    let started = confirm(&retry, &counted["selection"]);
    assert_eq!(started.status, 200, "{}", started.body);
    assert_eq!(started.json()["count"], 4);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while count(
        &db,
        "SELECT COUNT(*) FROM retry_runs WHERE status != 'running'",
    ) == 0
    {
        assert!(std::time::Instant::now() < deadline, "the run did not end");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'retried_ok'"),
        4
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
}

#[test]
fn refusals_are_one_line_and_the_token_exchange_stays_on_this_site() {
    let dir = TempDir::new("serve-refusals");
    let db = dir.path().join("dlq.db");
    add_lines(&db, "J", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let server = Server::start(&db, &[]);
    // `//evil.example/x` would be another site to a browser.
    let path = format!("//evil.example/x?token={}", server.token);
    let answer = super::http::request(&server.address, "GET", &path, &[], b"");
    assert_eq!(answer.status, 303);
    assert_eq!(answer.header("location"), Some("/evil.example/x"));
    // The scheme is case-insensitive.
    let auth = format!("bearer {}", server.token);
    let answer = super::http::request(
        &server.address,
        "GET",
        "/api/jobs",
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    // axum's own refusals get the same one-line JSON as every failure.
    let big = vec![b' '; MAX_TEST_BODY];
    let auth = format!("Bearer {}", server.token);
    let answer = super::http::request(
        &server.address,
        "POST",
        "/api/actions",
        &[("Authorization", &auth)],
        &big,
    );
    assert_eq!(answer.status, 413);
    assert!(
        answer.json()["error"].as_str().unwrap().contains("MiB"),
        "{}",
        answer.body
    );
    let answer = server.get("/api/actions");
    assert_eq!(answer.status, 405);
    assert!(
        answer.json()["error"].as_str().unwrap().contains("POST"),
        "{}",
        answer.body
    );
    // A database file replaced under the server: said, not served from the
    // old copy.
    assert_eq!(server.get("/api/jobs").status, 200);
    if on_postgres() {
        // (No file to replace on a server.)
        return;
    }
    std::fs::rename(&db, dir.join("moved.db")).unwrap();
    let answer = server.get("/api/jobs");
    assert_eq!(answer.status, 500, "{}", answer.body);
    assert!(
        answer.json()["error"].as_str().unwrap().contains("removed"),
        "{}",
        answer.body
    );
    let page = server.get("/");
    assert_eq!(page.status, 500);
    assert!(page.body.contains("restart"), "{}", page.body);
}

/// More than the server takes (4 MiB).
pub const MAX_TEST_BODY: usize = (4 << 20) + 1;

#[test]
fn the_items_page_walks_every_match_by_its_next_links() {
    let dir = TempDir::new("serve-pages");
    let db = dir.path().join("dlq.db");
    mixed(&db);
    let server = Server::start(&db, &[]);
    for sort in ["last_attempt", "failure_count"] {
        let mut seen = Keys::new();
        let mut path = format!("/items?job=alpha&q=failure_count+%3E%3D+2&sort={sort}");
        let mut pages = 0;
        loop {
            let page = server.get(&path);
            assert_eq!(page.status, 200, "{path}: {}", page.body);
            // Each row's checkbox names its item.
            for chunk in page.body.split("name=\"item\" value=\"").skip(1) {
                let json = chunk.split('"').next().unwrap().replace("&quot;", "\"");
                let (job, item): (String, String) = serde_json::from_str(&json).unwrap();
                assert!(seen.insert((job, item)), "a row came twice ({sort})");
            }
            pages += 1;
            match page.body.split("class=\"next\" href=\"").nth(1) {
                Some(rest) => path = rest.split('"').next().unwrap().replace("&amp;", "&"),
                None => break,
            }
        }
        assert!(pages > 1, "more than one page");
        let expected = sql_keys(
            &db,
            "SELECT job_id, item_id FROM items WHERE job_id = 'alpha' AND failure_count >= 2",
        );
        assert_eq!(seen, expected, "{sort}");
    }
}

/// A confirmed retry takes exactly the items it counted: one marked
/// eligible while the run goes (by its own first command here) is left
/// alone, although it lies among the counted rows.
#[test]
fn a_confirmed_retry_takes_exactly_the_items_it_counted() {
    let dir = TempDir::new("serve-retry-exact");
    let db = dir.path().join("dlq.db");
    let ids = ["a", "x1", "x2", "x3", "b", "x4", "x5"];
    add_lines(
        &db,
        "J",
        ids.map(|id| item(id, 1, "2025-01-01T00:00:00Z", "boom")),
    );
    ok(dlq(&db).args(["mark", "b", "--job-id", "J", "--ineligible"]));
    let script = dir.join("mark-b.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat > /dev/null\nif [ \"$DLQ_ITEM_ID\" = a ]; then '{}' --db '{}' mark b --job-id J --eligible >/dev/null || exit 9; fi\nexit 0\n",
            env!("CARGO_BIN_EXE_dlq"),
            target(&db).display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = Server::start(
        &db,
        &["--exec", script.to_str().unwrap(), "--parallel", "1"],
    );
    let retry = serde_json::json!({"action": "retry", "job_id": "J", "filter": ""});
    let mut dry = retry.clone();
    dry["dry_run"] = true.into();
    let counted = post_action(&server, dry).json();
    assert_eq!(counted["count"], 6, "{counted}");
    let mut confirmed = retry.clone();
    confirmed["selection"] = counted["selection"].clone();
    let started = post_action(&server, confirmed);
    assert_eq!(started.status, 200, "{}", started.body);
    assert_eq!(started.json()["count"], 6);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while count(
        &db,
        "SELECT COUNT(*) FROM retry_runs WHERE status != 'running'",
    ) == 0
    {
        assert!(std::time::Instant::now() < deadline, "the run did not end");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(count(&db, "SELECT attempted FROM retry_runs"), 6);
    assert_eq!(strings(&db, "SELECT item_id FROM items"), ["b"]);
    assert_eq!(
        count(&db, "SELECT reprocess_eligible FROM items"),
        1,
        "the command marked it"
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE item_id = 'b' AND kind LIKE 'retri%'"
        ),
        0
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL"
        ),
        0
    );
}

/// An item removed and stored again with the same row key, times and
/// signature but other item_data (version 0 both times) is not the item
/// that was counted: the confirmation is refused.
#[test]
fn a_confirmation_is_refused_for_an_item_stored_again_with_other_data() {
    let dir = TempDir::new("serve-exact-data");
    let db = dir.path().join("dlq.db");
    add_lines(
        &db,
        "J",
        ["a", "b"].map(|id| item(id, 1, "2025-01-01T00:00:00Z", "boom")),
    );
    let server = Server::start(&db, &[]);
    let everything = serde_json::json!({"action": "delete", "job_id": "J", "filter": ""});
    let mut dry = everything.clone();
    dry["dry_run"] = true.into();
    let counted = post_action(&server, dry).json();
    assert_eq!(counted["count"], 2);
    post_action(
        &server,
        serde_json::json!({"action": "delete", "items": [["J", "b"]]}),
    );
    let mut again = item("b", 1, "2025-01-01T00:00:00Z", "boom");
    again["item_data"]["payload"] = "another fresh payload".into();
    add_lines(&db, "J", [again]);
    let before = dump(&db);
    let mut confirmed = everything.clone();
    confirmed["selection"] = counted["selection"].clone();
    let refused = post_action(&server, confirmed);
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(dump(&db), before);
}

/// The item page shows each attempt's message once (a retry's failure
/// keeps the stderr tail as message and stack trace both) and durations
/// as a person reads them, the milliseconds on hover.
#[test]
fn the_item_page_shows_a_message_once_and_durations_readably() {
    let dir = TempDir::new("serve-item-page");
    let db = dir.path().join("dlq.db");
    let mut value = item(
        "x",
        1,
        "2025-01-01T00:00:00Z",
        "exit 3: the build broke badly",
    );
    value["failure_history"][0]["stack_trace"] = "exit 3: the build broke badly\n".into();
    value["failure_history"][0]["duration_ms"] = 600_000.into();
    add_lines(&db, "J", [value]);
    let server = Server::start(&db, &[]);
    let page = server.get("/item?job=J&id=x");
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(
        page.body.matches("the build broke badly").count(),
        1,
        "{}",
        page.body
    );
    assert!(!page.body.contains("stack trace"), "{}", page.body);
    assert!(page.body.contains(">10m<"), "{}", page.body);
    assert!(page.body.contains("600000 ms"), "{}", page.body);
}
