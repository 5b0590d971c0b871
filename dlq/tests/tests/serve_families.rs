//! The Patterns page's failure families: one row per family, largest
//! first, whose counts, with the note on the families not shown and the
//! items without one, add up to the items of the page's job (or of all);
//! the same numbers in `/api/analyze`; templates escaped with their
//! variable slots marked; each row's link finds exactly its items.

use super::common::*;
use super::http::{enc, Server};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The rows the page shows (FAMILIES_SHOWN in dlq/src/cli/serve/insight.rs).
const SHOWN: usize = 50;

/// An item whose one attempt has this error type and message.
fn failing(id: &str, error_type: &str, message: &str) -> serde_json::Value {
    let mut value = item(id, 1, "2025-01-01T00:00:00Z", message);
    value["failure_history"][0]["error_type"] = error_type.into();
    value
}

/// Waits until `/api/analyze?job=` has figures for the database as it is.
fn settled(server: &Server, job: Option<&str>) -> serde_json::Value {
    let path = match job {
        Some(job) => format!("/api/analyze?job={}", enc(job)),
        None => "/api/analyze".to_string(),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = server.get(&path).json();
        if answer.get("computing").is_none() && answer["stale"] == false {
            return answer;
        }
        assert!(Instant::now() < deadline, "no analysis in 60 s: {answer}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Items per family id of `job` (or of all), from SQL.
fn counts(db: &std::path::Path, job: Option<&str>) -> BTreeMap<i64, i64> {
    let scope = job.map_or(String::new(), |j| format!("AND job_id = '{j}'"));
    table_rows(
        db,
        &format!(
            "SELECT family_id, COUNT(*) FROM items WHERE family_id IS NOT NULL {scope} GROUP BY family_id"
        ),
    )
    .into_iter()
    .map(|row| (row[0].as_i64().unwrap(), row[1].as_i64().unwrap()))
    .collect()
}

/// The page's rows: (family id, items, the row's HTML).
fn rows(page: &str) -> Vec<(i64, i64, String)> {
    page.split("<tr class=\"family\" data-family=\"")
        .skip(1)
        .map(|rest| {
            let row = &rest[..rest.find("</tr>").expect("a row's end")];
            let id = row[..row.find('"').unwrap()].parse().unwrap();
            let link = &row[row.find("class=\"family-items\"").expect("a count link")..];
            let n = &link[link.find('>').unwrap() + 1..link.find("</a>").unwrap()];
            (id, n.parse().unwrap(), row.to_string())
        })
        .collect()
}

/// The number a note (`<p ... id="ID">N items ...`) starts with; 0 when
/// the page has no such note.
fn note(page: &str, id: &str) -> i64 {
    let Some(at) = page.find(&format!("id=\"{id}\">")) else {
        return 0;
    };
    let text = &page[at + id.len() + 6..];
    text[..text.find(' ').unwrap()].parse().unwrap()
}

#[test]
fn the_patterns_page_has_one_row_per_family_adding_up_to_the_total() {
    let dir = TempDir::new("serve-families");
    let db = dir.path().join("dlq.db");
    // Job a: 55 causes (one error type each) of 1 to 5 items, more than the
    // page shows; one cause whose messages differ in a number and carry
    // markup (its template is `parse error <<*>> at offset <*>`); one item whose family is cleared (as before families).
    let mut a: Vec<serde_json::Value> = Vec::new();
    for n in 0..55 {
        for k in 0..1 + (n * 7) % 5 {
            a.push(failing(&format!("a{n}-{k}"), &format!("Kind{n}"), "boom"));
        }
    }
    for k in 0..3 {
        a.push(failing(
            &format!("m{k}"),
            "Markup",
            &format!("parse error <b>bold</b> at offset {}", 100 + k * 37),
        ));
    }
    add_lines(&db, "a", a);
    // Job b: more of job a's largest causes, and one of its own: the
    // page of job a must not count them.
    add_lines(
        &db,
        "b",
        (0..4)
            .map(|k| failing(&format!("b{k}"), "Kind1", "boom"))
            .chain([failing("b-own", "OnlyB", "boom")]),
    );
    exec(
        &db,
        "UPDATE items SET family_id = NULL WHERE item_id = 'a0-0'",
    );

    let server = Server::start(&db, &[]);
    for job in [Some("a"), None] {
        let api = settled(&server, job);
        let path = match job {
            Some(job) => format!("/patterns?job={job}"),
            None => "/patterns".to_string(),
        };
        let page = server.get(&path);
        assert_eq!(page.status, 200, "{}", page.body);
        let page = page.body;
        let expected = counts(&db, job);
        let total = count(
            &db,
            &format!(
                "SELECT COUNT(*) FROM items {}",
                job.map_or(String::new(), |j| format!("WHERE job_id = '{j}'"))
            ),
        );
        let shown = rows(&page);

        // One row per family, the largest first (ties by id), each with its
        // count in this scope.
        let mut by_size: Vec<(i64, i64)> = expected.iter().map(|(id, n)| (*id, *n)).collect();
        by_size.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        assert!(by_size.len() > SHOWN, "{} families", by_size.len());
        let listed: Vec<(i64, i64)> = shown.iter().map(|(id, n, _)| (*id, *n)).collect();
        assert_eq!(listed, by_size[..SHOWN], "{path}");

        // The notes make the numbers add up.
        let more: i64 = by_size[SHOWN..].iter().map(|(_, n)| n).sum();
        assert_eq!(note(&page, "families-more"), more, "{path}");
        assert!(page.contains(&format!(
            "in {} smaller families not shown",
            by_size.len() - SHOWN
        )));
        let without = note(&page, "families-without");
        assert_eq!(without, 1, "{path}");
        assert_eq!(note(&page, "families-total"), total, "{path}");
        let listed_items: i64 = listed.iter().map(|(_, n)| n).sum();
        assert_eq!(listed_items + more + without, total, "{path}");

        // /api/analyze has the same families and numbers.
        let families = &api["families"];
        let from_api: Vec<(i64, i64)> = families["families"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["id"].as_i64().unwrap(), f["items"].as_i64().unwrap()))
            .collect();
        assert_eq!(from_api, listed, "{path}");
        assert_eq!(families["more_items"], more);
        assert_eq!(families["more_families"], by_size.len() - SHOWN);
        assert_eq!(families["items_without_family"], without);
        assert_eq!(families["total_items"], total);

        // The template: escaped, its variable slot marked.
        let markup = shown
            .iter()
            .find(|(_, _, row)| row.contains("parse error"))
            .expect("the markup family is shown");
        let cell = &markup.2[markup.2.find("<code>").unwrap()..markup.2.find("</code>").unwrap()];
        assert!(
            cell.contains("parse error &lt;") && !cell.contains("<b"),
            "{cell}"
        );
        assert!(
            markup.2.contains("<span class=\"slot\""),
            "no slot marked: {}",
            markup.2
        );

        // Each row's link and action are on exactly its family, in this
        // scope.
        for (id, n, row) in shown.iter().take(3) {
            let filter = format!("family == {id}");
            assert!(
                row.contains(&format!("name=\"q\" value=\"{filter}\"")),
                "{row}"
            );
            assert!(row.contains("value=\"delete:all\""), "{row}");
            assert_eq!(
                row.contains("name=\"job\" value=\"a\""),
                job.is_some(),
                "{row}"
            );
            let mut items = format!("/items?q={}", enc(&filter));
            if let Some(job) = job {
                items.push_str(&format!("&job={job}"));
            }
            let listing = server.get(&items);
            assert!(
                listing.body.contains(&format!(
                    "id=\"match-count\">{n} item{}",
                    if *n == 1 { "" } else { "s" }
                )),
                "{items}"
            );
        }
    }
}
