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
    for path in [
        "/",
        "/items",
        "/static/dlq.css",
        "/static/dlq.js",
        "/api/jobs",
        "/api/items",
    ] {
        assert_eq!(server.get_anonymous(path).status, 401, "{path}");
        assert_eq!(server.get(path).status, 200, "{path}");
    }
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
