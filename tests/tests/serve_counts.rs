//! The counts `dlq serve` shows for an error type (`error_type == "X"`,
//! any attempt, from the V8 index; `last.error_type == "X"`, from the
//! counters) are those of the same test evaluated item by item.

use super::common::*;
use super::http::Server;

/// An item whose attempts have these error types, oldest first.
fn attempts(id: &str, types: &[&str]) -> serde_json::Value {
    let mut value = item(id, 1, "2025-01-01T00:00:00Z", "boom");
    let history: Vec<serde_json::Value> = types
        .iter()
        .enumerate()
        .map(|(n, error_type)| {
            let mut attempt = value["failure_history"][0].clone();
            attempt["attempt_number"] = (n + 1).into();
            attempt["timestamp"] = format!("2025-01-01T00:0{n}:00Z").into();
            attempt["error_type"] = (*error_type).into();
            attempt
        })
        .collect();
    value["last_attempt"] = history.last().unwrap()["timestamp"].clone();
    value["failure_count"] = types.len().into();
    value["failure_history"] = history.into();
    value
}

/// The count `/api/items` answers for `filter` (in `job`, if any).
fn count(server: &Server, job: Option<&str>, filter: &str) -> i64 {
    let mut path = format!("/api/items?limit=1&filter={}", encode(filter));
    if let Some(job) = job {
        path.push_str(&format!("&job={}", encode(job)));
    }
    let answer = server.get(&path);
    assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    answer.json()["count"].as_i64().expect("count")
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[test]
fn error_type_counts_match_the_filter_item_by_item() {
    let dir = TempDir::new("serve-type-counts");
    let db = dir.path().join("dlq.db");
    let mut big: Vec<serde_json::Value> = (0..4)
        .map(|n| attempts(&format!("t{n}"), &["Timeout"]))
        .collect();
    big.push(attempts("tc", &["Timeout", "CommandFailed"]));
    big.push(attempts("c", &["CommandFailed"]));
    big.push(attempts("vt", &["ValidationFailed", "Timeout"]));
    add_lines(&db, "big", big);
    add_lines(
        &db,
        "small",
        [attempts("ct", &["CommandFailed", "Timeout"])],
    );
    add_lines(
        &db,
        "other",
        (0..3).map(|n| attempts(&format!("v{n}"), &["ValidationFailed"])),
    );
    let server = Server::start(&db, &[]);
    // (filter, job, expected): every way count_any_error_type can go (a
    // job smaller and larger than the matches) and the counters.
    for (filter, job, expected) in [
        (r#"error_type == "Timeout""#, None, 7),
        (r#"error_type == "Timeout""#, Some("big"), 6),
        (r#"error_type == "Timeout""#, Some("small"), 1),
        (r#"error_type == "Timeout""#, Some("other"), 0),
        (r#"error_type == "ValidationFailed""#, Some("big"), 1),
        (r#"error_type == "ValidationFailed""#, None, 4),
        (r#"error_type == "Nope""#, None, 0),
        (r#"last.error_type == "Timeout""#, None, 6),
        (r#"last.error_type == "Timeout""#, Some("big"), 5),
        (r#"last.error_type == "CommandFailed""#, None, 2),
        (r#"last.error_type == "CommandFailed""#, Some("small"), 0),
        (r#"last.error_type == "ValidationFailed""#, Some("other"), 3),
    ] {
        assert_eq!(count(&server, job, filter), expected, "{filter} in {job:?}");
        // The same test, which no fast path takes: evaluated item by item.
        let slow = format!("{filter} && failure_count >= 0");
        assert_eq!(count(&server, job, &slow), expected, "{slow} in {job:?}");
    }
}

#[test]
fn an_error_type_count_in_the_only_job_is_every_match() {
    let dir = TempDir::new("serve-type-counts-one-job");
    let db = dir.path().join("dlq.db");
    add_lines(
        &db,
        "solo",
        [
            attempts("a", &["Timeout"]),
            attempts("b", &["CommandFailed", "Timeout"]),
            attempts("c", &["CommandFailed"]),
        ],
    );
    let server = Server::start(&db, &[]);
    assert_eq!(
        count(&server, Some("solo"), r#"error_type == "Timeout""#),
        2
    );
    assert_eq!(
        count(&server, Some("solo"), r#"error_type == "CommandFailed""#),
        2
    );
    assert_eq!(
        count(&server, None, r#"last.error_type == "CommandFailed""#),
        1
    );
}
