//! `dlq report --html` through the real binary: the time axis is
//! proportional to time and has labelled axes, the all-jobs report lists
//! every job as `dlq jobs` does, times never wrap, messages take the
//! remaining width, and hostile ids stay inert.

use crate::common::*;
use std::path::Path;

/// The report of `db` (of one job, with `job`), as text.
fn report(db: &Path, job: Option<&str>) -> String {
    let mut command = dlq(db);
    command.args(["report", "--html", "-"]);
    if let Some(job) = job {
        command.args(["--job-id", job]);
    }
    ok(&mut command)
}

/// Each `<name ...>` tag of `html` from its `<` to its `>`, with what
/// follows it up to the next tag.
fn tags<'a>(html: &'a str, name: &str) -> Vec<(&'a str, &'a str)> {
    let open = format!("<{name} ");
    let mut found = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        rest = &rest[at..];
        let end = rest.find('>').expect("tag closes");
        let after = &rest[end + 1..];
        let text = &after[..after.find('<').unwrap_or(after.len())];
        found.push((&rest[..=end], text));
        rest = &rest[end + 1..];
    }
    found
}

/// The value of attribute `name` in `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    Some(&tag[start..start + tag[start..].find('"')?])
}

/// The section of the page from heading `title` to the end of the next
/// table.
fn section<'a>(html: &'a str, title: &str) -> &'a str {
    let start = html
        .find(&format!("<h2>{title}</h2>"))
        .unwrap_or_else(|| panic!("no section {title}"));
    let rest = &html[start..];
    &rest[..rest.find("</table>").expect("a table") + "</table>".len()]
}

/// The cells of each data row of the first table in `html`.
fn rows(html: &str) -> Vec<Vec<String>> {
    html.split("<tr>")
        .skip(1)
        .filter(|row| row.contains("<td"))
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let body = &cell[cell.find('>').unwrap() + 1..];
                    body[..body.find("</td>").unwrap()].to_string()
                })
                .collect()
        })
        .collect()
}

/// `item` with its flags set.
fn flagged(id: &str, ts: &str, eligible: bool, manual: bool) -> serde_json::Value {
    let mut value = item(id, 1, ts, "cargo test failed");
    value["reprocess_eligible"] = eligible.into();
    value["manual_review_required"] = manual.into();
    value
}

#[test]
fn time_axis_is_proportional_to_time_with_labelled_axes() {
    let dir = TempDir::new("report-axis");
    let db = dir.join("dlq.db");
    // Two adjacent days, then two more five months later; the counts 1, 2,
    // 4, 1 per day.
    let days = [
        ("2025-01-01", 1),
        ("2025-01-02", 2),
        ("2025-06-01", 4),
        ("2025-06-02", 1),
    ];
    let items = days.iter().flat_map(|(day, n)| {
        (0..*n).map(move |i| item(&format!("{day}-{i}"), 1, &format!("{day}T12:00:00Z"), "x"))
    });
    add_lines(&db, "j", items);
    let html = report(&db, None);

    // Each bar is a rect whose tooltip names its bucket.
    let bars: Vec<(String, f64, f64)> = tags(&html, "rect")
        .into_iter()
        .filter_map(|(tag, _)| {
            let tail = &html[html.find(tag).unwrap() + tag.len()..];
            let title = tail.strip_prefix("<title>")?;
            let bucket = title[..title.find(':')?].to_string();
            let x: f64 = attr(tag, "x")?.parse().ok()?;
            let height: f64 = attr(tag, "height")?.parse().ok()?;
            Some((bucket, x, height))
        })
        .filter(|(bucket, ..)| bucket.starts_with("2025-"))
        .collect();
    let x = |day: &str| {
        bars.iter()
            .find(|b| b.0 == day)
            .unwrap_or_else(|| panic!("no bar for {day} in {bars:?}"))
            .1
    };
    let per_day_adjacent = x("2025-01-02") - x("2025-01-01");
    let per_day_far = (x("2025-06-01") - x("2025-01-01")) / 151.0;
    let per_day_last = (x("2025-06-02") - x("2025-01-02")) / 151.0;
    assert!(per_day_adjacent > 0.0, "{bars:?}");
    for far in [per_day_far, per_day_last] {
        assert!(
            (far / per_day_adjacent - 1.0).abs() < 0.01,
            "a day is {per_day_adjacent} px between adjacent days, {far} px across the gap: {bars:?}"
        );
    }
    // Heights are proportional to the counts, from a common base.
    let height = |day: &str| bars.iter().find(|b| b.0 == day).unwrap().2;
    assert!((height("2025-06-01") / height("2025-01-01") - 4.0).abs() < 0.01);
    assert!((height("2025-01-02") / height("2025-06-02") - 2.0).abs() < 0.01);

    // The y axis counts from 0 at the bottom up to at least the largest
    // count; the x axis is labelled with dates.
    let y_labels: Vec<(i64, f64)> = tags(&html, "text")
        .into_iter()
        .filter(|(tag, _)| attr(tag, "class") == Some("ytick"))
        .map(|(tag, text)| {
            (
                text.parse().unwrap(),
                attr(tag, "y").unwrap().parse().unwrap(),
            )
        })
        .collect();
    let zero = y_labels
        .iter()
        .find(|l| l.0 == 0)
        .expect("a 0 on the y axis");
    let top = y_labels.iter().max_by_key(|l| l.0).unwrap();
    assert!(top.0 >= 4 && top.1 < zero.1, "{y_labels:?}");
    let x_labels: Vec<&str> = tags(&html, "text")
        .into_iter()
        .filter(|(tag, _)| attr(tag, "class") == Some("xtick"))
        .map(|(_, text)| text)
        .collect();
    assert!(x_labels.len() >= 2, "{x_labels:?}");
    assert!(
        x_labels.iter().all(|l| l.starts_with("2025-")),
        "{x_labels:?}"
    );
}

#[test]
fn all_jobs_report_lists_every_job_as_dlq_jobs_does() {
    let dir = TempDir::new("report-jobs");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "alpha",
        [
            flagged("a1", "2025-03-01T08:00:00.5Z", true, false),
            flagged("a2", "2025-03-04T09:10:11Z", false, true),
            flagged("a3", "2025-03-02T00:00:00Z", true, true),
        ],
    );
    add_lines(
        &db,
        "beta",
        [flagged("b1", "2024-12-31T23:59:59Z", false, false)],
    );
    // A job whose items were all cleared.
    add_lines(
        &db,
        "empty",
        [flagged("e1", "2025-01-01T00:00:00Z", true, false)],
    );
    ok(dlq(&db).args(["clear", "empty", "--yes"]));
    let html = report(&db, None);
    let table = rows(section(&html, "Jobs"));
    let jobs = json(&ok(dlq(&db).args(["jobs", "--json"])));
    let jobs = jobs.as_array().unwrap();
    assert_eq!(table.len(), jobs.len(), "{table:?}");
    for (row, job) in table.iter().zip(jobs) {
        let expected = [
            job["job_id"].as_str().unwrap().to_string(),
            job["item_count"].to_string(),
            job["eligible_count"].to_string(),
            job["manual_review_count"].to_string(),
        ];
        assert_eq!(row[..4], expected, "{row:?} vs {job}");
    }
    // Oldest and newest item of each job, to the second in UTC.
    assert_eq!(
        table[0][4..],
        ["2025-03-01 08:00:00Z", "2025-03-04 09:10:11Z"]
    );
    assert_eq!(
        table[1][4..],
        ["2024-12-31 23:59:59Z", "2024-12-31 23:59:59Z"]
    );
    assert_eq!(table[2][..2], ["empty", "0"]);
    // A one-job report has no jobs table.
    assert!(!report(&db, Some("alpha")).contains("<h2>Jobs</h2>"));
}

#[test]
fn times_never_wrap_and_messages_take_the_rest() {
    let dir = TempDir::new("report-cells");
    let db = dir.join("dlq.db");
    let message = "\n  \nerror[E0308]: mismatched types in a message long enough to need wrapping\n  --> src/lib.rs:10:5";
    add_lines(
        &db,
        "j",
        [item("i1", 1, "2025-11-23T19:42:53.902113845Z", message)],
    );
    let html = report(&db, None);
    // The style keeps time cells on one line and lets messages wrap.
    let style = &html[html.find("<style>").unwrap()..html.find("</style>").unwrap()];
    let rule = |selector: &str| {
        let at = style
            .find(&format!("{selector}{{"))
            .unwrap_or_else(|| panic!("no rule for {selector}"));
        &style[at..at + style[at..].find('}').unwrap()]
    };
    assert!(rule("td.t").contains("white-space:nowrap"));
    assert!(rule("td.msg").contains("width:100%"));
    assert!(!rule("td.msg").contains("nowrap"));
    // Every time in a table is such a cell, to the second, in UTC.
    let times: Vec<&str> = tags(&html, "td")
        .into_iter()
        .filter(|(tag, _)| attr(tag, "class") == Some("t"))
        .map(|(_, text)| text)
        .collect();
    // First and last of the pattern group, oldest and newest of the job.
    assert_eq!(times, ["2025-11-23 19:42:53Z"; 4]);
    assert!(!html.contains("19:42:53.9"), "no fractions anywhere");
    // The message cell shows the first line that says something.
    let groups = rows(section(&html, "Top pattern groups"));
    let cell = groups[0].last().unwrap();
    assert!(
        cell.contains("error[E0308]: mismatched types in a message")
            && !cell[cell.find('>').unwrap()..].contains("src/lib.rs:10:5"),
        "{cell}"
    );
    assert!(html.contains(r#"<td class="msg">"#));
}

#[test]
fn hostile_ids_stay_inert() {
    let dir = TempDir::new("report-hostile");
    let db = dir.join("dlq.db");
    let evil = "<script>alert(\"x\")</script></svg>'\u{202e}";
    add_lines(
        &db,
        evil,
        [item(
            evil,
            1,
            "2025-11-23T19:42:53Z",
            "</svg><script>boom</script>",
        )],
    );
    for html in [report(&db, None), report(&db, Some(evil))] {
        assert!(!html.contains("<script"), "no raw script tag");
        assert!(!html.contains('\u{202e}'), "no raw bidi override");
        assert!(!html.contains("alert(\"x\")"), "no raw quote");
        // Every svg the page opens is closed once: none was closed early.
        assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
        assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;/svg&gt;&#39;"));
    }
    // The all-jobs report names the job in its jobs table, escaped.
    let html = report(&db, None);
    let table = rows(section(&html, "Jobs"));
    assert_eq!(
        table[0][0],
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;/svg&gt;&#39;\\u{202e}"
    );
}
