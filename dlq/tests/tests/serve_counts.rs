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

/// Every agent and step link on the Patterns page finds the items it was
/// counted for, also when the value holds control characters (the links
/// once quoted them as JSON, `\u0001`, which the filter language reads as
/// `u0001`: they found nothing, or other items).
#[test]
fn patterns_links_find_values_with_control_characters() {
    let dir = TempDir::new("serve-links-controls");
    let db = dir.path().join("dlq.db");
    let values = ["a\u{1}b", "a\\u0001b", "tab\there", "cr\rhere", "q\"uote\\"];
    let items: Vec<serde_json::Value> = values
        .iter()
        .enumerate()
        .map(|(n, text)| {
            let mut value = item(&format!("i{n}"), 1, "2025-01-01T00:00:00Z", "boom");
            value["failure_history"][0]["agent_id"] = format!("agent {text}").into();
            value["failure_history"][0]["step_failed"] = format!("step {text}").into();
            // Twice by the same agent: the page lists agents only where
            // some failed more than once.
            let mut again = value["failure_history"][0].clone();
            again["attempt_number"] = 2.into();
            again["timestamp"] = "2025-01-01T00:01:00Z".into();
            value["failure_history"].as_array_mut().unwrap().push(again);
            value["failure_count"] = 2.into();
            value["last_attempt"] = "2025-01-01T00:01:00Z".into();
            value
        })
        .collect();
    add_lines(&db, "j", items);
    let server = Server::start(&db, &[]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    // The job's analysis is cached apart from the whole database's: wait
    // for the job's own (a loaded machine outlasts the page's short wait).
    while server
        .get("/api/analyze?job=j")
        .json()
        .get("computing")
        .is_some()
    {
        assert!(std::time::Instant::now() < deadline, "no analysis in 60 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let page = server.get("/patterns?job=j");
    assert_eq!(page.status, 200, "{}", page.body);
    let mut followed = 0;
    for href in page.body.split("href=\"").skip(1) {
        let href = href[..href.find('"').unwrap()].replace("&amp;", "&");
        let Some(query) = href.strip_prefix("/items?") else {
            continue;
        };
        let params: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let filter = &params.iter().find(|(k, _)| k == "q").unwrap().1;
        if !(filter.starts_with("agent_id ==") || filter.starts_with("step_failed ==")) {
            continue;
        }
        assert_eq!(count(&server, Some("j"), filter), 1, "{filter:?}");
        followed += 1;
    }
    assert_eq!(followed, 2 * values.len(), "{}", page.body);
}
