//! `dlq metrics`: its text is read by a real parser (Python's
//! prometheus_client, both its Prometheus 0.0.4 and its OpenMetrics
//! parser), and every number equals plain SQL over items, failure_history,
//! events and retry_runs on the same database (never dlq's counter tables):
//! several jobs and error types, a remapped category, eligible and
//! manual-review mixes, evictions, purges, retries and crashed runs. Label
//! values with quotes, backslashes, line breaks and non-ASCII come back
//! whole. Then --job-id, --output (atomic, modes, links), read-only
//! databases and usage errors.

use crate::common::{
    add_lines, count, dlq, exec, fails, item, ok, on_postgres, run, sql, table_rows, with_stdin,
    FromCell, TempDir,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// "Now" for the ages, so they are exact.
const NOW: &str = "2026-01-01T00:00:00Z";

/// A job id and an error type that need every escape, and more.
const ODD_JOB: &str = "odd \"job\" \\ back\nslash\r\ttab é 日本 🚀 \u{2028}end";
const ODD_TYPE: &str = "Odd \"Type\" \\ é 日本";

/// The Python that has prometheus_client: Debian's (python3-prometheus-client,
/// which scripts/test installs) even when another python3 is first on PATH.
fn python() -> &'static str {
    for candidate in ["/usr/bin/python3", "python3"] {
        let found = Command::new(candidate)
            .args(["-c", "import prometheus_client"])
            .output()
            .is_ok_and(|o| o.status.success());
        if found {
            return candidate;
        }
    }
    panic!(
        "no python3 with prometheus_client: install python3-prometheus-client (scripts/test does)"
    );
}

/// One parsed sample: its name, labels and value.
#[derive(Clone, Debug, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed family: name, type and samples.
#[derive(Clone, Debug)]
struct Family {
    name: String,
    kind: String,
    samples: Vec<Sample>,
}

/// Parses `text` with prometheus_client's parser for the format; fails
/// the test with the parser's error if it refuses it.
fn parse(text: &str, openmetrics: bool) -> Vec<Family> {
    let module = if openmetrics {
        "prometheus_client.openmetrics.parser"
    } else {
        "prometheus_client.parser"
    };
    let script = format!(
        "import sys, json\n\
         from {module} import text_string_to_metric_families\n\
         text = sys.stdin.buffer.read().decode('utf-8')\n\
         out = []\n\
         for f in text_string_to_metric_families(text):\n\
         \x20   out.append({{'name': f.name, 'type': f.type,\n\
         \x20       'samples': [[s.name, s.labels, s.value] for s in f.samples]}})\n\
         print(json.dumps(out))\n"
    );
    let output = with_stdin(Command::new(python()).args(["-c", &script]), text);
    assert!(
        output.status.success(),
        "the {} parser refused the text: {}\n{text}",
        if openmetrics {
            "OpenMetrics"
        } else {
            "Prometheus"
        },
        String::from_utf8_lossy(&output.stderr)
    );
    let parsed: Value = serde_json::from_slice(&output.stdout).unwrap();
    parsed
        .as_array()
        .unwrap()
        .iter()
        .map(|f| Family {
            name: f["name"].as_str().unwrap().to_string(),
            kind: f["type"].as_str().unwrap().to_string(),
            samples: f["samples"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| Sample {
                    name: s[0].as_str().unwrap().to_string(),
                    labels: s[1]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                        .collect(),
                    value: s[2].as_f64().unwrap(),
                })
                .collect(),
        })
        .collect()
}

/// `dlq --now NOW metrics ARGS`: its stdout.
fn metrics(db: &Path, args: &[&str]) -> String {
    ok(dlq(db).args(["--now", NOW, "metrics"]).args(args))
}

/// The samples called `name`, as label values (in `keys` order) → value.
fn samples(families: &[Family], name: &str, keys: &[&str]) -> BTreeMap<Vec<String>, f64> {
    let mut found = BTreeMap::new();
    for sample in families.iter().flat_map(|f| &f.samples) {
        if sample.name != name {
            continue;
        }
        let mut names: Vec<&String> = sample.labels.keys().collect();
        names.sort();
        let mut wanted: Vec<&str> = keys.to_vec();
        wanted.sort();
        assert_eq!(names, wanted, "{name}'s labels");
        let key: Vec<String> = keys.iter().map(|k| sample.labels[*k].clone()).collect();
        assert!(
            found.insert(key.clone(), sample.value).is_none(),
            "{name} {key:?} twice"
        );
    }
    found
}

/// Rows of (text columns..., number) from plain SQL, keyed like
/// [`samples`].
fn oracle(db: &Path, query: &str) -> BTreeMap<Vec<String>, f64> {
    table_rows(db, query)
        .into_iter()
        .map(|mut row| {
            let value = row.pop().expect("a value column");
            let key = row.iter().map(String::from_cell).collect();
            (key, f64::from_cell(&value))
        })
        .collect()
}

/// `samples` without its zero values (counter rows kept at 0, statuses no
/// run is in), to compare with SQL that only finds what is there.
fn nonzero(map: BTreeMap<Vec<String>, f64>) -> BTreeMap<Vec<String>, f64> {
    map.into_iter().filter(|(_, v)| *v != 0.0).collect()
}

/// An item with one attempt of `error_type` (a name, as the legacy JSON
/// has it), the flags given, first failed at `time`.
fn typed(id: &str, time: &str, error_type: &str, eligible: bool, review: bool) -> Value {
    let mut value = item(id, 1, time, &format!("{error_type} failed"));
    value["failure_history"][0]["error_type"] = Value::String(error_type.to_string());
    value["reprocess_eligible"] = Value::Bool(eligible);
    value["manual_review_required"] = Value::Bool(review);
    value
}

/// This machine's name as dlq records it in retry runs.
fn hostname() -> String {
    dlqlite::retry::hostname()
}

/// The database every comparison runs on (see the module docs). Returns
/// it and the run ids whose process is known gone on this host.
fn busy_database(dir: &TempDir) -> PathBuf {
    let db = dir.join("dlq.db");
    // Job a: three error types, eligible and manual-review mixes, one item
    // with no attempts (error type ""), two attempts on one item whose
    // last is a Timeout.
    let mut twice = typed("a2", "2025-03-01T00:00:00Z", "CommandFailed", true, false);
    let mut second = twice["failure_history"][0].clone();
    second["attempt_number"] = 2.into();
    second["timestamp"] = "2025-03-02T00:00:00Z".into();
    second["error_type"] = "Timeout".into();
    twice["failure_history"]
        .as_array_mut()
        .unwrap()
        .push(second);
    twice["last_attempt"] = "2025-03-02T00:00:00Z".into();
    twice["failure_count"] = 2.into();
    let mut bare = typed("a5", "2025-03-05T00:00:00Z", "Timeout", false, true);
    bare["failure_history"] = Value::Array(vec![]);
    bare["failure_count"] = 0.into();
    add_lines(
        &db,
        "a",
        [
            typed("a1", "2025-03-01T12:00:00Z", "Timeout", true, false),
            twice,
            typed("a3", "2025-02-01T00:00:00Z", "PermissionError", false, true),
            typed("a4", "2025-04-01T00:00:00Z", "RateLimited", true, true),
            bare,
            typed("a6", "2025-04-02T00:00:00Z", ODD_TYPE, false, false),
        ],
    );
    // Job b: capacity 2, five adds: three evictions; a merge (the same
    // item added again).
    let b = |n: u32| {
        typed(
            &format!("b{n}"),
            &format!("2025-05-0{n}T00:00:00Z"),
            "MergeConflict",
            true,
            false,
        )
    };
    add_lines(&db, "b", [b(1), b(2)]);
    ok(dlq(&db).args(["capacity", "--job-id", "b", "--set", "2"]));
    add_lines(&db, "b", (3..=5).map(b));
    add_lines(
        &db,
        "b",
        [typed("b5", "2025-05-06T00:00:00Z", "Timeout", true, false)],
    );
    // Job c: old items purged, one left; then a retry that fails it.
    add_lines(
        &db,
        "c",
        [
            typed("c1", "2024-01-01T00:00:00Z", "Timeout", true, false),
            typed("c2", "2024-01-02T00:00:00Z", "Timeout", true, false),
            typed(
                "c3",
                "2025-12-01T00:00:00Z",
                "ValidationFailed",
                true,
                false,
            ),
        ],
    );
    ok(dlq(&db).args([
        "--now",
        NOW,
        "purge",
        "--older-than-days",
        "365",
        "--job-id",
        "c",
        "--yes",
    ]));
    // Exit 1: an item failed again.
    let failed = run(dlq(&db).args(["retry", "c", "--exec", "exit 3"]));
    assert_eq!(failed.status.code(), Some(1));
    // Job d: retried successfully, so it empties (a job without items).
    add_lines(
        &db,
        "d",
        [typed("d1", "2025-06-01T00:00:00Z", "Timeout", true, false)],
    );
    ok(dlq(&db).args(["retry", "d", "--exec", "true"]));
    // The odd job, with a manual-review mark.
    add_lines(
        &db,
        ODD_JOB,
        [typed("o1", "2025-07-01T00:00:00Z", ODD_TYPE, true, false)],
    );
    ok(dlq(&db).args(["mark", "o1", "--job-id", ODD_JOB, "--manual-review"]));
    // Categories: a seeded type moved, an unknown type and the odd type
    // given one.
    ok(dlq(&db).args(["categories", "set", "Timeout", "permanent"]));
    ok(dlq(&db).args(["categories", "set", "RateLimited", "transient"]));
    ok(dlq(&db).args(["categories", "set", ODD_TYPE, "conditionally_recoverable"]));
    // Runs recorded as running: one elsewhere with a fresh heartbeat
    // (running), one elsewhere whose heartbeat stopped (crashed), one here
    // whose process is gone (crashed).
    let gone = {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let now = dlqlite::Timestamp::now().to_storage();
    for (run_id, job, host, pid, heartbeat) in [
        ("fresh-there", "a", "elsewhere".to_string(), 1, now.as_str()),
        (
            "stale-there",
            "a",
            "elsewhere".to_string(),
            1,
            "2020-01-01T00:00:00Z",
        ),
        ("gone-here", "b", hostname(), gone, now.as_str()),
    ] {
        // Fixed names and a host name: nothing to quote.
        exec(
            &db,
            &format!(
                "INSERT INTO retry_runs (run_id, job_id, host, pid, started_at, heartbeat_at, status, parameters)
                 VALUES ('{run_id}', '{job}', '{host}', {pid}, '{heartbeat}', '{heartbeat}', 'running', '{{}}')"
            ),
        );
    }
    db
}

/// The last attempt's error type of item `i` ("" without attempts), from
/// failure_history (on PostgreSQL the nanoseconds break a tie of the
/// microsecond).
fn last_type() -> String {
    let ns = if on_postgres() {
        " f.timestamp_ns DESC,"
    } else {
        ""
    };
    format!(
        "COALESCE((SELECT f.error_type FROM failure_history AS f WHERE f.item_key = i.id
         ORDER BY f.timestamp DESC,{ns} f.attempt_number DESC LIMIT 1), '')"
    )
}

/// Whole seconds since 1970 of a time expression, as SQLite's
/// `strftime('%s', ...)` gives them (floored).
fn epoch_seconds(time: &str) -> String {
    if on_postgres() {
        format!("CAST(floor(EXTRACT(EPOCH FROM {time})) AS BIGINT)")
    } else {
        format!("CAST(strftime('%s', {time}) AS INTEGER)")
    }
}

/// Every metric equals SQL over the base tables, in both formats.
fn assert_matches_sql(db: &Path, families: &[Family]) {
    let last_type = last_type();
    let category = format!(
        "COALESCE((SELECT c.category FROM error_categories AS c WHERE c.error_type = {last_type}), 'unclassified')"
    );
    assert_eq!(
        nonzero(samples(
            families,
            "dlq_items",
            &["job_id", "error_type", "category"]
        )),
        oracle(
            db,
            &format!(
                "SELECT i.job_id, {last_type}, {category}, COUNT(*) FROM items AS i GROUP BY 1, 2, 3"
            )
        ),
        "dlq_items"
    );
    let per_job = |column: &str| {
        oracle(
            db,
            &format!(
                "SELECT j.job_id, (SELECT COALESCE({column}, 0) FROM items AS i WHERE i.job_id = j.job_id)
                 FROM jobs AS j"
            ),
        )
    };
    assert_eq!(
        samples(families, "dlq_job_items", &["job_id"]),
        per_job("COUNT(*)"),
        "dlq_job_items"
    );
    assert_eq!(
        samples(families, "dlq_items_eligible", &["job_id"]),
        per_job("SUM(reprocess_eligible)"),
        "dlq_items_eligible"
    );
    assert_eq!(
        samples(families, "dlq_items_manual_review", &["job_id"]),
        per_job("SUM(manual_review_required)"),
        "dlq_items_manual_review"
    );
    assert_eq!(
        samples(families, "dlq_oldest_item_age_seconds", &["job_id"]),
        oracle(
            db,
            &format!(
                "SELECT job_id, {} - {} FROM items GROUP BY job_id",
                epoch_seconds(&if on_postgres() {
                    format!("TIMESTAMPTZ '{NOW}'")
                } else {
                    format!("'{NOW}'")
                }),
                epoch_seconds("MIN(first_attempt)")
            )
        ),
        "dlq_oldest_item_age_seconds"
    );
    assert_eq!(
        samples(families, "dlq_oldest_item_timestamp_seconds", &["job_id"]),
        oracle(
            db,
            &format!(
                "SELECT job_id, {} FROM items GROUP BY job_id",
                epoch_seconds("MIN(first_attempt)")
            )
        ),
        "dlq_oldest_item_timestamp_seconds"
    );
    let events = samples(families, "dlq_events_total", &["kind"]);
    assert_eq!(
        nonzero(events.clone()),
        oracle(db, "SELECT kind, COUNT(*) FROM events GROUP BY kind"),
        "dlq_events_total"
    );
    // Every kind, 0 included.
    for kind in dlqlite::EventKind::ALL {
        assert!(
            events.contains_key(&vec![kind.as_str().to_string()]),
            "{kind}"
        );
    }
    let runs = samples(families, "dlq_retry_runs", &["job_id", "status"]);
    assert_eq!(
        nonzero(runs.clone()),
        oracle(
            db,
            &format!(
                "SELECT job_id, CASE
                     WHEN status = 'running' AND (run_id = 'gone-here' OR heartbeat_at < {})
                     THEN 'crashed' ELSE status END, COUNT(*)
                 FROM retry_runs GROUP BY 1, 2",
                if on_postgres() {
                    "now() - interval '120 seconds'"
                } else {
                    "strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-120 seconds')"
                }
            )
        ),
        "dlq_retry_runs"
    );
    // Each job with runs has every status, 0 included.
    assert_eq!(runs.len() % 4, 0, "{runs:?}");
    assert_eq!(
        samples(families, "dlq_jobs", &[]),
        oracle(db, "SELECT COUNT(*) FROM jobs")
            .into_values()
            .map(|v| (vec![], v))
            .collect(),
        "dlq_jobs"
    );
}

#[test]
fn every_number_equals_sql_in_both_formats() {
    let dir = TempDir::new("metrics-sql");
    let db = busy_database(&dir);
    // The database has what the comparison needs to mean something.
    let count = |query: &str| -> i64 { count(&db, query) };
    for kind in [
        "evicted",
        "purged",
        "merged",
        "retried_ok",
        "retried_failed",
    ] {
        assert!(
            count(&format!(
                "SELECT COUNT(*) FROM events WHERE kind = '{kind}'"
            )) > 0,
            "{kind}"
        );
    }
    assert_eq!(count("SELECT COUNT(*) FROM items WHERE job_id = 'd'"), 0);
    for openmetrics in [false, true] {
        let args: &[&str] = if openmetrics {
            &["--format", "openmetrics"]
        } else {
            &[]
        };
        let text = metrics(&db, args);
        let families = parse(&text, openmetrics);
        assert_matches_sql(&db, &families);
        // The remapped categories show, and the odd labels came back whole.
        let items = samples(
            &families,
            "dlq_items",
            &["job_id", "error_type", "category"],
        );
        let key = |job: &str, t: &str, c: &str| vec![job.to_string(), t.to_string(), c.to_string()];
        assert_eq!(items.get(&key("a", "Timeout", "permanent")), Some(&2.0));
        assert_eq!(items.get(&key("a", "RateLimited", "transient")), Some(&1.0));
        assert_eq!(items.get(&key("a", "", "unclassified")), Some(&1.0));
        assert_eq!(
            items.get(&key(ODD_JOB, ODD_TYPE, "conditionally_recoverable")),
            Some(&1.0),
            "{items:?}"
        );
        // Types and help for every family.
        let kinds: BTreeMap<&str, &str> = families
            .iter()
            .map(|f| (f.name.as_str(), f.kind.as_str()))
            .collect();
        assert_eq!(kinds.get("dlq_events"), Some(&"counter"), "{kinds:?}");
        assert_eq!(kinds.get("dlq_items"), Some(&"gauge"));
        assert_eq!(kinds.get("dlq_oldest_item_age_seconds"), Some(&"gauge"));
        if openmetrics {
            assert!(text.ends_with("# EOF\n"));
            assert!(text.contains("# UNIT dlq_oldest_item_age_seconds seconds\n"));
        } else {
            assert!(!text.contains("# EOF"));
        }
    }
    // A category changed again shows at once: nothing is cached.
    ok(dlq(&db).args(["categories", "set", "Timeout", "transient"]));
    let families = parse(&metrics(&db, &[]), false);
    assert_matches_sql(&db, &families);
}

#[test]
fn one_job_is_that_jobs_items_events_and_runs() {
    let dir = TempDir::new("metrics-job");
    let db = busy_database(&dir);
    for job in ["a", "b", ODD_JOB] {
        let families = parse(&metrics(&db, &["--job-id", job]), false);
        let jobs_in = |name: &str, keys: &[&str]| -> Vec<String> {
            let mut jobs: Vec<String> = samples(&families, name, keys)
                .keys()
                .map(|k| k[0].clone())
                .collect();
            jobs.dedup();
            jobs
        };
        assert_eq!(jobs_in("dlq_job_items", &["job_id"]), [job]);
        assert_eq!(
            jobs_in("dlq_items", &["job_id", "error_type", "category"]),
            [job]
        );
        assert_eq!(samples(&families, "dlq_jobs", &[])[&vec![]], 1.0);
        let events = samples(&families, "dlq_events_total", &["job_id", "kind"]);
        let expected = oracle(
            &db,
            &format!(
                "SELECT job_id, kind, COUNT(*) FROM events WHERE job_id = '{job}' GROUP BY 1, 2"
            ),
        );
        assert_eq!(nonzero(events), expected, "{job}");
        let runs = samples(&families, "dlq_retry_runs", &["job_id", "status"]);
        assert!(runs.keys().all(|k| k[0] == job), "{runs:?}");
    }
    // The same counts for a job as in the whole text.
    let all = parse(&metrics(&db, &[]), false);
    let one = parse(&metrics(&db, &["--job-id", "a"]), false);
    for name in [
        "dlq_job_items",
        "dlq_items_eligible",
        "dlq_oldest_item_age_seconds",
    ] {
        let a = |f: &[Family]| {
            samples(f, name, &["job_id"])
                .into_iter()
                .filter(|(k, _)| k[0] == "a")
                .collect::<Vec<_>>()
        };
        assert_eq!(a(&all), a(&one), "{name}");
    }
    // An unknown job is "not there": exit 1, one line, a close name.
    let output = run(dlq(&db).args(["metrics", "--job-id", "bb"]));
    assert_eq!(output.status.code(), Some(1));
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("\"bb\" not found"), "{said}");
    assert!(output.stdout.is_empty());
}

#[test]
fn output_is_written_atomically_with_its_mode_and_never_through_a_link() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("metrics-output");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let printed = metrics(&db, &[]);
    let out = dir.join("collector");
    std::fs::create_dir(&out).unwrap();
    let prom = out.join("dlq.prom");
    let written = run(dlq(&db)
        .args(["--now", NOW, "metrics", "--output"])
        .arg(&prom));
    assert!(written.status.success());
    // Silent on success (cron mails nothing) but for --now's warning.
    assert!(written.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&prom).unwrap(), printed);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&prom), 0o600);
    // --mode for a collector running as another user; a rewrite replaces
    // the file, and leaves nothing else in the directory.
    ok(dlq(&db)
        .args(["--now", NOW, "metrics", "--mode", "0644", "-o"])
        .arg(&prom));
    assert_eq!(mode(&prom), 0o644);
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["dlq.prom"]);
    // OpenMetrics into the file parses too.
    ok(dlq(&db)
        .args(["metrics", "--format", "openmetrics", "-o"])
        .arg(&prom));
    parse(&std::fs::read_to_string(&prom).unwrap(), true);
    // A link at the destination is replaced, its target left alone.
    let target = dir.join("target.txt");
    std::fs::write(&target, "keep me").unwrap();
    let link = out.join("linked.prom");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    ok(dlq(&db).args(["metrics", "-o"]).arg(&link));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    assert!(!std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    parse(&std::fs::read_to_string(&link).unwrap(), false);
    // A directory that is not there: one line, exit 1.
    let said = fails(
        dlq(&db)
            .args(["metrics", "-o"])
            .arg(dir.join("no/such/dir.prom")),
    );
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("no/such/dir.prom"), "{said}");
}

#[test]
fn usage_errors_exit_two_in_one_line() {
    let dir = TempDir::new("metrics-usage");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    for args in [
        &["--mode", "0644"][..],
        &["--mode", "0755", "-o", "x.prom"],
        &["--mode", "rw", "-o", "x.prom"],
        &["--mode", "", "-o", "x.prom"],
        &["--format", "json"],
    ] {
        let output = run(dlq(&db).arg("metrics").args(args).current_dir(dir.path()));
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(
            said.starts_with("error:") || said.starts_with("dlq: error:"),
            "{said}"
        );
        assert!(!dir.join("x.prom").exists());
    }
    // No database: exit 1, none created.
    let missing = dir.join("missing.db");
    let said = fails(dlq(&missing).arg("metrics"));
    assert!(said.contains("no database"), "{said}");
    assert!(!missing.exists());
}

#[test]
fn a_read_only_database_is_measured() {
    if crate::common::sqlite_only("an immutable database file") {
        return;
    }
    let dir = TempDir::new("metrics-ro");
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    let db = home.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    sql(&db)
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let before = metrics(&db, &[]);
    // chattr +i: root ignores file modes.
    let made = Command::new("chattr")
        .arg("+i")
        .arg(&db)
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("skipped: chattr +i is not available here");
        return;
    }
    struct Undo(PathBuf);
    impl Drop for Undo {
        fn drop(&mut self) {
            let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
        }
    }
    let _undo = Undo(db.clone());
    let output = run(dlq(&db).args(["--now", NOW, "metrics"]));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8(output.stdout).unwrap(), before);
    let families = parse(&before, false);
    assert_eq!(
        samples(&families, "dlq_job_items", &["job_id"])[&vec!["j".to_string()]],
        1.0
    );
}

/// Every family the text has is in the table of docs/guide.md, with its
/// type.
#[test]
fn the_readme_documents_every_metric() {
    let readme = std::fs::read_to_string(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("docs/guide.md"),
    )
    .unwrap();
    let section = readme
        .split("### Metrics for Prometheus")
        .nth(1)
        .expect("a docs/guide.md section \"Metrics for Prometheus\"");
    let section = section.split("\n## ").next().unwrap();
    let dir = TempDir::new("metrics-readme");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let text = metrics(&db, &[]);
    let mut documented = 0;
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let mut words = line.split(' ').skip(2);
        let (name, kind) = (words.next().unwrap(), words.next().unwrap());
        assert!(
            section.contains(&format!("| `{name}` | {kind} |")),
            "{name} ({kind}) is not in the table of docs/guide.md"
        );
        documented += 1;
    }
    assert_eq!(documented, dlqlite::metrics::FAMILIES.len());
}

/// Items per failure family: the 10 largest families and one "other"
/// series, whatever the number of families, summing to the items; each
/// listed family's count and template as the tables hold them, the
/// template escaped and read back whole by the real parser.
#[test]
fn family_series_are_bounded_and_sum_to_the_items() {
    let dir = TempDir::new("metrics-families");
    let db = dir.join("dlq.db");
    // 14 causes (error types keep them apart) of 14 to 1 items, and a
    // cause whose template needs every escape.
    for cause in 0..14u32 {
        let items = (0..14 - cause).map(|n| {
            let time = format!("2025-01-01T00:{:02}:{:02}Z", cause, n);
            let mut value = item(&format!("c{cause}-{n}"), 1, &time, "the build failed");
            value["failure_history"][0]["error_type"] = format!("Cause{cause}").into();
            value
        });
        add_lines(&db, if cause % 2 == 0 { "a" } else { "b" }, items);
    }
    let odd = "say \"hi\" \\ back\nslash";
    add_lines(
        &db,
        "b",
        (0..20).map(|n| item(&format!("odd{n}"), 1, "2025-02-01T00:00:00Z", odd)),
    );
    // An item with no family (stored before families).
    exec(
        &db,
        "UPDATE items SET family_id = NULL WHERE item_id = 'c0-0'",
    );
    let total = count(&db, "SELECT COUNT(*) FROM items");
    for openmetrics in [false, true] {
        let args: &[&str] = if openmetrics {
            &["--format", "openmetrics"]
        } else {
            &[]
        };
        let families = parse(&metrics(&db, args), openmetrics);
        let series = samples(
            &families,
            "dlq_failure_family_items",
            &["family", "template"],
        );
        assert_eq!(series.len(), 11, "{series:?}");
        assert_eq!(series.values().sum::<f64>(), total as f64, "{series:?}");
        let mut listed = 0.0;
        for (key, value) in &series {
            let (family, template) = (&key[0], &key[1]);
            if family == "other" {
                assert_eq!(template, "");
                continue;
            }
            listed += value;
            let expected = oracle(
                &db,
                &format!(
                    "SELECT f.template, COUNT(*) FROM items AS i JOIN families AS f
                     ON f.id = i.family_id WHERE f.id = {family} GROUP BY f.template"
                ),
            );
            assert_eq!(
                expected,
                BTreeMap::from([(vec![template.clone()], *value)]),
                "family {family}"
            );
        }
        // The largest 10: 20 (the odd one), 13 twice (the 14-item cause
        // lost the item without a family), 12 down to 6; the rest are
        // "other", the item without a family among them.
        assert_eq!(
            listed,
            (20 + 13 + (6..=13).sum::<i32>()) as f64,
            "{series:?}"
        );
        assert!(
            series.keys().any(|k| k[1].contains("say \"hi\" \\ back")),
            "the odd template came back whole: {series:?}"
        );
    }
    // One job: the job's items, labelled with it.
    let families = parse(&metrics(&db, &["--job-id", "a"]), false);
    let series = samples(
        &families,
        "dlq_failure_family_items",
        &["job_id", "family", "template"],
    );
    assert_eq!(series.len(), 8, "7 families and other: {series:?}");
    assert_eq!(
        series.values().sum::<f64>(),
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'a'") as f64
    );
}
