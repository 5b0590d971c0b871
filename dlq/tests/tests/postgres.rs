//! The PostgreSQL backend against a real server: the test script
//! (scripts/test) starts a throwaway cluster and passes its URL in
//! DLQ_TEST_PG_URL; each test gets a database of its own. Oracles are SQL
//! on the server itself (recounts) and the SQLite dump of a copy back.

use super::common::pg::{server_url, with_dbname};
use super::common::{add_lines, dlq, dump, fails, item, json, ok, with_stdin, TempDir};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// True when the whole suite runs against PostgreSQL: these tests put
/// SQLite files and PostgreSQL databases side by side, and run in the
/// SQLite pass (which has the server too).
fn both_backends_already() -> bool {
    super::common::sqlite_only("a test of SQLite and PostgreSQL side by side")
}

/// A fresh database on the test server, dropped with the value.
struct PgDb {
    url: String,
    name: String,
}

impl PgDb {
    fn new(label: &str) -> PgDb {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let name = format!("t_{}_{n}_{label}", std::process::id());
        let mut admin = postgres::Client::connect(&server_url(), postgres::NoTls).unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .unwrap();
        PgDb {
            url: with_dbname(&server_url(), &name),
            name,
        }
    }

    fn url(&self) -> &Path {
        Path::new(&self.url)
    }

    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).unwrap()
    }

    fn count(&self, query: &str) -> i64 {
        self.client().query_one(query, &[]).unwrap().get(0)
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&server_url(), postgres::NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// `dlq add --job-id JOB` with `lines` on stdin, started.
fn spawn_add(db: &Path, job: &str, lines: String) -> std::process::Child {
    spawn_add_to(db, Some(job), lines)
}

/// `dlq add` with `lines` on stdin, started: into `job`, or (None) each
/// item into the job it names.
fn spawn_add_to(db: &Path, job: Option<&str>, lines: String) -> std::process::Child {
    let mut command = dlq(db);
    command.arg("add");
    if let Some(job) = job {
        command.args(["--job-id", job]);
    }
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(lines.as_bytes()).unwrap();
    });
    child
}

/// Waits for every child; each must succeed.
fn wait_all(children: Vec<std::process::Child>) {
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn copy(from: &Path, to: &Path) -> String {
    let scratch = TempDir::new("pg-copy");
    let mut command = dlq(&scratch.join("unused.db"));
    command
        .arg("copy")
        .arg("--from")
        .arg(from)
        .arg("--to")
        .arg(to);
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "copy failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stderr).unwrap()
}

/// Every counter equals a recount of the rows (jobs, signature and
/// error-type counts).
fn assert_counters_exact(db: &PgDb) {
    let drift = db.count(
        "SELECT (SELECT COUNT(*) FROM jobs j WHERE item_count <> (SELECT COUNT(*) FROM items i WHERE i.job_id = j.job_id)
                 OR eligible_count <> (SELECT COALESCE(SUM(reprocess_eligible), 0) FROM items i WHERE i.job_id = j.job_id)
                 OR manual_review_count <> (SELECT COALESCE(SUM(manual_review_required), 0) FROM items i WHERE i.job_id = j.job_id)
                 OR failure_count_sum <> (SELECT COALESCE(SUM(failure_count), 0) FROM items i WHERE i.job_id = j.job_id))
              + (SELECT COUNT(*) FROM (
                   SELECT job_id, error_signature, COUNT(*) AS n FROM items GROUP BY 1, 2) r
                 FULL JOIN signature_counts s USING (job_id, error_signature)
                 WHERE r.n IS DISTINCT FROM s.item_count)
              + (SELECT COUNT(*) FROM (
                   SELECT job_id, COALESCE(last_error_type, '') AS error_type, COUNT(*) AS n FROM items GROUP BY 1, 2) r
                 FULL JOIN error_type_counts e USING (job_id, error_type)
                 WHERE r.n IS DISTINCT FROM e.item_count)",
    );
    assert_eq!(drift, 0, "counters differ from a recount");
}

/// Items with what PostgreSQL must keep exactly: nanoseconds, key order
/// and duplicate keys in item_data, unicode, a long history.
fn awkward_items() -> Vec<serde_json::Value> {
    let mut items = Vec::new();
    for n in 0..20 {
        let mut value = item(
            &format!("w{n}"),
            1,
            &format!("2025-11-23T19:42:{:02}.{:09}Z", n, 902_113_845 + n),
            &format!("error {n}: ünïcödé ✓"),
        );
        value["item_data"] = serde_json::json!({"z": n, "a": [1, 2, {"y": null}], "m": "x"});
        items.push(value);
    }
    let mut long = item("long", 1, "2025-01-01T00:00:00.000000001Z", "first");
    let history: Vec<serde_json::Value> = (1..=60)
        .map(|a| {
            let mut attempt = long["failure_history"][0].clone();
            attempt["attempt_number"] = a.into();
            attempt["timestamp"] =
                format!("2025-01-01T00:{:02}:00.00000000{}Z", a % 60, a % 10).into();
            attempt["error_message"] = format!("attempt {a}").into();
            attempt
        })
        .collect();
    long["failure_count"] = 60.into();
    long["failure_history"] = history.into();
    long["last_attempt"] = "2025-01-01T00:59:00.000000009Z".into();
    items.push(long);
    items
}

#[test]
fn a_copy_through_postgres_and_back_is_identical() {
    if both_backends_already() {
        return;
    }
    let dir = TempDir::new("pg-roundtrip");
    let (a, b) = (dir.join("a.db"), dir.join("b.db"));
    let examples = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy");
    // The sample tree has four broken files: import says so and exits 1.
    let _ = dlq(&a).arg("import").arg(&examples).output().unwrap();
    add_lines(&a, "awkward", awkward_items());
    // A duplicate key in item_data, as text: JSON parsers differ on it.
    let raw = r#"{"item_id":"dup","item_data":{"k":1,"k":2},"first_attempt":"2025-01-01T00:00:00Z","last_attempt":"2025-01-01T00:00:00Z","failure_count":0,"failure_history":[],"error_signature":"s","worktree_artifacts":null,"reprocess_eligible":false,"manual_review_required":true}"#;
    let added = with_stdin(
        dlq(&a).args(["add", "--job-id", "awkward"]),
        &format!("{raw}\n"),
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );

    // Flags a person marked: a copy keeps them marked, so a later merge
    // keeps them too (they were lost, and the merge undid the decision).
    ok(dlq(&a).args(["mark", "dup", "--job-id", "awkward", "--eligible"]));
    ok(dlq(&a).args([
        "mark",
        "item_3",
        "--job-id",
        "mapreduce-20251123_194253",
        "--ineligible",
    ]));

    let pg = PgDb::new("roundtrip");
    let said = copy(&a, pg.url());
    assert!(said.contains("0 merged, 0 unchanged"), "{said}");
    assert_eq!(
        pg.count("SELECT COUNT(*) FROM items WHERE reprocess_eligible_marked = 1"),
        2
    );
    assert_counters_exact(&pg);
    // Copying again changes nothing (the merge rule).
    let again = copy(&a, pg.url());
    assert!(again.contains(" 0 new, 0 merged,"), "{again}");
    let items_in_a = super::common::count(&a, "SELECT COUNT(*) FROM items");
    assert_eq!(pg.count("SELECT COUNT(*) FROM items"), items_in_a);

    copy(pg.url(), &b);
    assert_eq!(dump(&a), dump(&b));
    // And the export from PostgreSQL is byte for byte the export from SQLite.
    let from_sqlite = ok(dlq(&a).args(["export", "-", "--format", "jsonl", "--job-id", "awkward"]));
    let from_pg =
        ok(dlq(pg.url()).args(["export", "-", "--format", "jsonl", "--job-id", "awkward"]));
    assert_eq!(from_sqlite, from_pg);
    assert!(from_pg.contains(r#"{"k":1,"k":2}"#), "{from_pg}");
    assert!(from_pg.contains("19:42:03.902113848Z"), "{from_pg}");
    // The statistics agree, all jobs and one, as JSON and as the table.
    for args in [
        &["stats", "--json"][..],
        &["stats"],
        &["show", "awkward", "--json"],
        &["stats", "--job-id", "mapreduce-20251123_194253"],
    ] {
        assert_eq!(
            ok(dlq(pg.url()).args(args)),
            ok(dlq(&a).args(args)),
            "{args:?}"
        );
    }
}

#[test]
fn a_legacy_tree_imports_straight_into_postgres() {
    if both_backends_already() {
        return;
    }
    let dir = TempDir::new("pg-import");
    let (lite, back) = (dir.join("lite.db"), dir.join("back.db"));
    let examples = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy");
    let pg = PgDb::new("import");
    let into_pg = dlq(pg.url()).arg("import").arg(&examples).output().unwrap();
    let into_lite = dlq(&lite).arg("import").arg(&examples).output().unwrap();
    // The same verdict (the broken files), the same summary line.
    assert_eq!(into_pg.status.code(), into_lite.status.code());
    let last_line = |out: &[u8]| {
        String::from_utf8_lossy(out)
            .lines()
            .last()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(last_line(&into_pg.stderr), last_line(&into_lite.stderr));
    assert_counters_exact(&pg);
    // Every item that import wrote has its `imported` event (two copies of
    // an item that merged: two).
    assert_eq!(
        pg.count(
            "SELECT COUNT(*) FROM (SELECT DISTINCT job_id, item_id FROM events
             WHERE kind = 'imported' AND item_id IS NOT NULL) AS e"
        ),
        pg.count("SELECT COUNT(*) FROM items")
    );
    copy(pg.url(), &back);
    assert_eq!(dump(&lite), dump(&back));
}

/// Eight `dlq add` processes on one job at once, half of their items
/// shared (racing merges): every item is there once with every attempt,
/// and the counters equal a recount.
#[test]
fn eight_writers_on_one_job_lose_nothing() {
    if both_backends_already() {
        return;
    }
    let pg = PgDb::new("writers");
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let lines: String = (0..60)
                .map(|n| {
                    // Items 0..29 are every writer's (each adds its own
                    // attempt); 30..59 are this writer's alone.
                    let id = if n < 30 {
                        format!("shared-{n}")
                    } else {
                        format!("own-{w}-{n}")
                    };
                    let ts = format!("2025-06-01T00:{:02}:{:02}.123456789Z", w, n % 60);
                    let mut value = item(&id, w + 1, &ts, &format!("writer {w} failed"));
                    value["failure_count"] = 1.into();
                    value.to_string() + "\n"
                })
                .collect();
            spawn_add(pg.url(), "j", lines)
        })
        .collect();
    wait_all(writers);
    assert_eq!(pg.count("SELECT COUNT(*) FROM items"), 30 + 8 * 30);
    // Each shared item holds all eight writers' attempts.
    assert_eq!(
        pg.count(
            "SELECT COUNT(*) FROM failure_history f JOIN items i ON i.id = f.item_key
             WHERE i.item_id LIKE 'shared-%'"
        ),
        30 * 8
    );
    assert_counters_exact(&pg);
    assert_eq!(
        pg.count("SELECT COUNT(*) FROM events WHERE kind = 'added'"),
        30 + 8 * 30
    );
}

/// A capacity holds exactly while eight processes add to the job at once;
/// each eviction is in the audit log.
#[test]
fn capacity_stays_exact_under_concurrent_adds() {
    if both_backends_already() {
        return;
    }
    let pg = PgDb::new("capacity");
    let dlq_handle = dlqlite::Dlq::open(pg.url()).unwrap();
    dlq_handle
        .ensure_job(
            "capped",
            &dlqlite::JobOptions {
                max_items: Some(25),
            },
        )
        .unwrap();
    let children: Vec<_> = (0..8)
        .map(|w| {
            let lines: String = (0..40)
                .map(|n| {
                    let ts = format!("2025-06-01T{w:02}:00:{n:02}Z");
                    item(&format!("c-{w}-{n}"), 1, &ts, "boom").to_string() + "\n"
                })
                .collect();
            spawn_add(pg.url(), "capped", lines)
        })
        .collect();
    wait_all(children);
    assert_eq!(pg.count("SELECT COUNT(*) FROM items"), 25);
    assert_eq!(
        pg.count("SELECT COUNT(*) FROM events WHERE kind = 'evicted'"),
        8 * 40 - 25
    );
    // The 25 kept are the newest, but for the last item of the writer that
    // committed last: an add keeps the item it adds, however old.
    assert!(
        pg.count("SELECT COUNT(*) FROM items WHERE last_attempt >= '2025-06-01T07:00:15Z'") >= 24
    );
    assert_counters_exact(&pg);
}

/// Two `dlq add`s of items that carry their jobs, naming the same two jobs
/// in opposite orders, at once and again: each locks the jobs it names in
/// job order before its first add, so neither holds one the other waits
/// for (no deadlock, 40P01), and nothing is lost.
#[test]
fn multi_job_adds_in_opposite_orders_never_deadlock() {
    if both_backends_already() {
        return;
    }
    let pg = PgDb::new("job-order");
    let lines = |first: &str, second: &str, round: usize, who: &str| -> String {
        [first, second]
            .iter()
            .flat_map(|job| {
                (0..300).map(move |n| {
                    let mut value = item(
                        &format!("{who}-{round}-{n}"),
                        1,
                        "2025-06-01T00:00:00Z",
                        "boom",
                    );
                    value["job_id"] = (*job).into();
                    value.to_string() + "\n"
                })
            })
            .collect()
    };
    for round in 0..6 {
        let children = vec![
            spawn_add_to(pg.url(), None, lines("alpha", "beta", round, "a")),
            spawn_add_to(pg.url(), None, lines("beta", "alpha", round, "b")),
        ];
        wait_all(children);
    }
    assert_eq!(pg.count("SELECT COUNT(*) FROM items"), 6 * 2 * 600);
    assert_counters_exact(&pg);
}

/// Writers in several processes (here handles, each with a miner of its
/// own) that meet a new cause at the same moment make one family of it,
/// as one writer would: PostgreSQL commits them at once, so without taking
/// turns each would start its own.
#[test]
fn writers_meeting_a_new_cause_at_once_make_one_family() {
    if both_backends_already() {
        return;
    }
    let pg = PgDb::new("families-race");
    let (writers, rounds) = (6, 8);
    // Round r's cause: r + 1 words, so no two rounds' causes can be one
    // family, whatever the miner generalises.
    let item_of = |writer: usize, round: usize| {
        let message = vec!["boom"; round + 1].join(" ");
        let value = item(
            &format!("w{writer}-r{round}"),
            1,
            "2025-06-01T00:00:00Z",
            &message,
        );
        dlqlite::DeadLetteredItem::from_json_str(&value.to_string()).unwrap()
    };
    let barrier = std::sync::Barrier::new(writers);
    std::thread::scope(|scope| {
        for writer in 0..writers {
            let (barrier, pg) = (&barrier, &pg);
            scope.spawn(move || {
                let handle = dlqlite::Dlq::open(pg.url()).unwrap();
                for round in 0..rounds {
                    let item = item_of(writer, round);
                    barrier.wait();
                    handle
                        .write(|tx| tx.add(&format!("j{writer}"), None, &item).map(|_| ()))
                        .unwrap();
                }
            });
        }
    });
    // The same items from one writer, one after another.
    let dir = TempDir::new("families-race");
    let alone = dlqlite::Dlq::open(dir.join("alone.db")).unwrap();
    for round in 0..rounds {
        for writer in 0..writers {
            let item = item_of(writer, round);
            alone
                .write(|tx| tx.add(&format!("j{writer}"), None, &item).map(|_| ()))
                .unwrap();
        }
    }
    let alone_families = alone.families(None).unwrap().families.len() as i64;
    assert_eq!(alone_families, rounds as i64);
    assert_eq!(
        pg.count("SELECT COUNT(*) FROM families"),
        alone_families,
        "a family made twice"
    );
    assert_eq!(
        pg.count("SELECT COUNT(DISTINCT family_id) FROM items"),
        alone_families
    );
}

#[test]
fn the_library_opens_a_url_and_keeps_nanoseconds() {
    if both_backends_already() {
        return;
    }
    let pg = PgDb::new("library");
    let handle = dlqlite::Dlq::open(pg.url()).unwrap();
    assert_eq!(handle.backend(), dlqlite::store::Backend::Postgres);
    let value = item("n1", 3, "2025-03-04T05:06:07.000000999Z", "x");
    let parsed = dlqlite::DeadLetteredItem::from_json_str(&value.to_string()).unwrap();
    handle
        .write(|tx| tx.add("job", Some("repo"), &parsed).map(|_| ()))
        .unwrap();
    let back = handle.get(Some("job"), "n1").unwrap();
    assert_eq!(
        back.last_attempt.to_storage(),
        "2025-03-04T05:06:07.000000999Z"
    );
    assert_eq!(
        serde_json::to_string(&back).unwrap(),
        serde_json::to_string(&parsed.normalised()).unwrap()
    );
    // psql sees a real timestamptz, and the nanoseconds beside it.
    let mut client = pg.client();
    let row = client
        .query_one(
            "SELECT to_char(last_attempt AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), last_attempt_ns,
                    pg_typeof(last_attempt)::text, pg_typeof(item_data)::text
             FROM items",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "2025-03-04 05:06:07.000000");
    assert_eq!(row.get::<_, i16>(1), 999);
    assert_eq!(row.get::<_, String>(2), "timestamp with time zone");
    assert_eq!(row.get::<_, String>(3), "json");
}

#[test]
fn a_dry_run_on_postgres_reports_and_changes_nothing() {
    if both_backends_already() {
        return;
    }
    let pg = PgDb::new("dry_run");
    add_lines(pg.url(), "j", [item("a", 1, "2025-01-01T00:00:00Z", "x")]);
    let before = (
        pg.count("SELECT COUNT(*) FROM items"),
        pg.count("SELECT COUNT(*) FROM events"),
    );
    let dir = TempDir::new("pg-dry-run");
    let file = dir.join("new.jsonl");
    let mut line = item("b", 1, "2025-01-02T00:00:00Z", "y");
    line["job_id"] = serde_json::json!("j2");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let output = dlq(pg.url())
        .args(["import", "--dry-run", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["items_new"], 1, "{report}");
    assert_eq!(
        (
            pg.count("SELECT COUNT(*) FROM items"),
            pg.count("SELECT COUNT(*) FROM events")
        ),
        before
    );
}

#[test]
fn a_password_is_never_printed() {
    if both_backends_already() {
        return;
    }
    let dir = TempDir::new("pg-password");
    // Nothing listens on port 1: the connection fails and says where.
    let url = "postgres://someone:hunter2-secret@127.0.0.1:1/dlq";
    for args in [&["list"][..], &["add", "--job-id", "j"]] {
        let stderr = fails(dlq(Path::new(url)).args(args));
        assert!(!stderr.contains("hunter2"), "{stderr}");
        assert!(stderr.contains("someone:***@127.0.0.1:1/dlq"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    let stderr = fails(
        dlq(&dir.join("x.db"))
            .args(["copy", "--from"])
            .arg(dir.join("missing.db"))
            .args(["--to", url]),
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

/// `n` eligible items in job "j" of a fresh database.
fn retry_job(label: &str, n: usize) -> PgDb {
    let pg = PgDb::new(label);
    add_lines(
        pg.url(),
        "j",
        (0..n).map(|i| item(&format!("i{i:03}"), 1, "2025-01-01T00:00:00Z", "boom")),
    );
    pg
}

/// Retry workers in four processes at once on one job: every item runs
/// exactly once, none twice at the same time, and each leaves the DLQ once.
#[test]
fn retry_workers_in_several_processes_never_overlap() {
    if both_backends_already() {
        return;
    }
    use super::retry::{assert_no_overlap, intervals, logging_command};
    let dir = TempDir::new("pg-retry-workers");
    let pg = retry_job("retryworkers", 40);
    let log = dir.join("log");
    let command = logging_command(&log, "0.2");
    let workers: Vec<_> = (0..4)
        .map(|_| {
            dlq(pg.url())
                .args([
                    "retry",
                    "j",
                    "--parallel",
                    "3",
                    "--json",
                    "--exec",
                    &command,
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut succeeded = 0;
    let mut busy = 0;
    for worker in workers {
        let output = worker.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let summary = super::common::json(&String::from_utf8(output.stdout).unwrap());
        let n = summary["succeeded"].as_u64().unwrap();
        succeeded += n;
        busy += u64::from(n > 0);
    }
    assert_eq!(succeeded, 40);
    assert!(busy >= 2, "one worker did everything");
    let intervals = intervals(&std::fs::read_to_string(&log).unwrap(), None);
    assert_eq!(intervals.len(), 40);
    assert!(
        intervals.values().all(|runs| runs.len() == 1),
        "an item ran twice"
    );
    assert_no_overlap(&intervals);
    assert_eq!(pg.count("SELECT COUNT(*) FROM items"), 0);
    assert_eq!(
        pg.count("SELECT COUNT(*) FROM events WHERE kind = 'retried_ok'"),
        40
    );
    // `dlq events` reads the same log.
    let events = ok(dlq(pg.url()).args([
        "events",
        "--kind",
        "retried_ok",
        "--limit",
        "0",
        "--format",
        "json",
    ]));
    let events = super::common::json(&events);
    assert_eq!(events.as_array().map(Vec::len), Some(40), "{events}");
    assert!(events[0]["detail"]["run_id"].is_string(), "{events}");
    assert_counters_exact(&pg);
}

/// A worker killed with SIGKILL mid-run: its items stay (nothing lost),
/// another worker leaves them alone while the dead one's leases last and
/// takes them after; every item ran, never two at once.
#[test]
fn a_killed_retry_worker_loses_nothing() {
    if both_backends_already() {
        return;
    }
    use super::retry::{assert_no_overlap, intervals, logging_command, now_nanos};
    let dir = TempDir::new("pg-retry-kill");
    let pg = retry_job("retrykill", 24);
    let log = dir.join("log");
    let command = logging_command(&log, "0.3");
    let mut child = dlq(pg.url())
        .args([
            "retry",
            "j",
            "--parallel",
            "4",
            "--lease",
            "3",
            "--exec",
            &command,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    super::common::wait_for_lines(&log, 6);
    child.kill().unwrap();
    let killed_at = now_nanos();
    child.wait().unwrap();
    let held = pg.count(
        "SELECT COUNT(*) FROM items WHERE lease_owner IS NOT NULL AND lease_expires > now()",
    );
    assert!(held > 0, "the kill should land while commands run");
    let runs = super::common::json(&ok(dlq(pg.url()).args(["retry", "--status", "--json"])));
    assert_eq!(runs[0]["status"], "crashed", "{runs}");
    // While the dead worker's leases last, another takes every other item.
    let early =
        ok(dlq(pg.url()).args(["retry", "j", "--lease", "3", "--json", "--exec", &command]));
    let early = super::common::json(&early);
    let left = pg.count("SELECT COUNT(*) FROM items");
    assert_eq!(left, held, "exactly the held items are left: {early}");
    // After they expire, everything completes.
    std::thread::sleep(std::time::Duration::from_millis(3200));
    ok(dlq(pg.url()).args([
        "retry",
        "j",
        "--parallel",
        "4",
        "--json",
        "--exec",
        &command,
    ]));
    assert_eq!(pg.count("SELECT COUNT(*) FROM items"), 0);
    let intervals = intervals(&std::fs::read_to_string(&log).unwrap(), Some(killed_at));
    assert_eq!(intervals.len(), 24, "every item ran");
    assert_no_overlap(&intervals);
    assert_eq!(
        pg.count("SELECT COUNT(*) FROM events WHERE kind = 'retried_ok'"),
        24
    );
    assert_counters_exact(&pg);
}

/// The ids of the items `filter` selects, by `dlq export` (stdout, JSON lines).
fn selected(db: &Path, filter: &str) -> Vec<String> {
    let out = ok(dlq(db).args(["export", "-", "--format", "jsonl", "--filter", filter]));
    let mut ids: Vec<String> = out
        .lines()
        .map(|line| {
            super::common::json(line)["item_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    ids.sort();
    ids
}

/// The filter language selects the same items on PostgreSQL as on SQLite
/// (the oracle: the SQLite database the PostgreSQL one was copied from),
/// over item_data of every JSON type, attempt fields, flags and times.
#[test]
fn filters_select_the_same_items_on_both_backends() {
    if both_backends_already() {
        return;
    }
    let dir = TempDir::new("pg-filters");
    let lite = dir.join("lite.db");
    let data = [
        serde_json::json!({"priority": 5, "name": "alpha", "flag": true, "nested": {"k": "v"}, "tags": ["a"]}),
        serde_json::json!({"priority": 3, "name": "beta", "flag": false, "nested": {"k": "w"}, "tags": []}),
        serde_json::json!({"priority": 7.5, "name": "", "flag": 1, "missing": null}),
        serde_json::json!({"priority": 0, "name": "gamma", "nested": {}}),
        serde_json::json!({"name": "alp", "flag": "yes", "dotted.key": 2}),
        serde_json::json!({"priority": 12, "flag": 0, "nested": {"k": "v", "deep": {"n": 1}}}),
    ];
    let types = [
        "Timeout",
        "CommandFailed",
        "PermissionError",
        "MergeConflict",
    ];
    let items: Vec<serde_json::Value> = data
        .iter()
        .enumerate()
        .map(|(n, value)| {
            let ts = format!("2025-01-0{}T00:00:00.00000000{}Z", n + 1, n);
            let mut it = item(&format!("f{n}"), 1, &ts, &format!("boom number {n}"));
            it["item_data"] = value.clone();
            it["reprocess_eligible"] = (n % 2 == 0).into();
            it["failure_history"][0]["error_type"] = match types[n % 4] {
                "CommandFailed" => serde_json::json!({"CommandFailed": {"exit_code": 100 + n}}),
                other => other.into(),
            };
            if n % 3 == 0 {
                let mut second = it["failure_history"][0].clone();
                second["attempt_number"] = 2.into();
                second["timestamp"] = format!("2025-02-0{}T00:00:00Z", n + 1).into();
                second["error_type"] = "Timeout".into();
                second["error_message"] = "timed out".into();
                it["failure_history"].as_array_mut().unwrap().push(second);
                it["failure_count"] = 2.into();
                it["last_attempt"] = format!("2025-02-0{}T00:00:00Z", n + 1).into();
            }
            it
        })
        .collect();
    add_lines(&lite, "j", items);
    let pg = PgDb::new("filters");
    copy(&lite, pg.url());
    let filters = [
        "item.priority >= 5",
        "item.priority == 3",
        "item.priority < 7.5",
        "item.name == \"alpha\"",
        "item.name != \"alpha\"",
        "item.name contains \"lp\"",
        "item.flag",
        "!item.flag",
        "item.flag == true",
        "item.flag == false",
        "item.missing == null",
        "item.missing != null",
        "item.nested.k == \"v\"",
        "item.nested.deep.n == 1",
        "item.tags",
        "item.nested",
        "error_type == \"Timeout\"",
        "last.error_type == \"Timeout\"",
        "last.error_type == \"CommandFailed\"",
        "exit_code == 101",
        "exit_code > 100",
        "error_message contains \"number 3\"",
        "failure_count > 1 && reprocess_eligible",
        "last_attempt > \"2025-01-03T00:00:00Z\"",
        "first_attempt <= \"2025-01-03T00:00:00.000000002Z\"",
        "last_attempt < now - 1d",
        "category == \"transient\"",
        "category != \"permanent\"",
        "job_id == \"j\" and item_id contains \"3\"",
        "not (item.priority < 3 or item.name == \"beta\")",
        "manual_review_required || last.error_type == \"PermissionError\"",
    ];
    for filter in filters {
        let expected = selected(&lite, filter);
        assert_eq!(selected(pg.url(), filter), expected, "{filter}");
        // ... and counts the same (dlq list's count of all matches).
        let listed = |db: &Path| {
            let out = ok(dlq(db).args(["list", "--filter", filter, "--format", "json"]));
            super::common::json(&out).as_array().map_or(0, Vec::len)
        };
        assert_eq!(listed(pg.url()), expected.len(), "{filter}");
    }
}

/// What the client library reads as a password (with `/`, `?` or `@` in
/// it, or as a query parameter under an encoded name) never shows: not in
/// errors, not in `--help` (DLQ_DB), not in a copy's events.
#[test]
fn a_password_never_shows_however_it_is_spelt() {
    if both_backends_already() {
        return;
    }
    let dir = TempDir::new("pg-password-spelt");
    for url in [
        "postgres://app:SECRET/x?y@127.0.0.1:1/db",
        "postgres://app:SE@CRET@127.0.0.1:1/db",
        "postgres://app@127.0.0.1:1/db?passwor%64=SECRET",
    ] {
        let stderr = fails(dlq(Path::new(url)).arg("jobs"));
        assert!(!stderr.contains("SECRET"), "{stderr}");
    }
    let help = ok(dlq(&dir.join("x.db"))
        .env("DLQ_DB", "postgres://app:SECRET@h/db")
        .args(["list", "--help"]));
    assert!(!help.contains("SECRET"), "{help}");
    // A libpq connection string is refused, not taken as a file name.
    let conninfo = dir.join("host=127.0.0.1 dbname=x password=SECRET");
    let stderr = fails(dlq(&conninfo).arg("jobs"));
    assert!(
        !stderr.contains("SECRET") && stderr.contains("postgres://"),
        "{stderr}"
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "a file was made"
    );
}

/// A PostgreSQL database without the dlq schema is not made one by a
/// command that reads (nor by copying from it), and another application's
/// database is refused even by one that writes.
#[test]
fn a_database_without_the_schema_is_left_alone() {
    if both_backends_already() {
        return;
    }
    let dir = TempDir::new("pg-foreign");
    let empty = PgDb::new("empty");
    for args in [
        &["list"][..],
        &["stats"],
        &["export", "-", "--format", "jsonl"],
    ] {
        // As a missing file: nothing there yet.
        let stderr = fails(dlq(empty.url()).args(args));
        assert!(
            stderr.contains("no database here yet") && stderr.contains("import or add items first"),
            "{stderr}"
        );
    }
    let stderr = fails(
        dlq(&dir.join("x.db"))
            .args(["copy", "--from"])
            .arg(empty.url())
            .arg("--to")
            .arg(dir.join("to.db")),
    );
    assert!(stderr.contains("no database here yet"), "{stderr}");
    assert_eq!(
        empty.count("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'"),
        0
    );
    let other = PgDb::new("other");
    other
        .client()
        .batch_execute("CREATE TABLE customers (id int)")
        .unwrap();
    let stderr = fails(
        dlq(other.url())
            .args(["add", "--job-id", "j"])
            .stdin(std::process::Stdio::null()),
    );
    assert!(stderr.contains("without the dlq schema"), "{stderr}");
    assert_eq!(
        other.count("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'"),
        1
    );
}

/// A job that followed its database's default capacity keeps that
/// capacity in a copy to a database whose default differs (as its own
/// override), either way; where the defaults agree it keeps following.
#[test]
fn a_copy_keeps_each_jobs_capacity_whatever_the_defaults() {
    if both_backends_already() {
        return;
    }
    let dir = TempDir::new("copy-capacity");
    let sqlite = dir.join("source.db");
    let pg = PgDb::new("copy_capacity");
    let back = dir.join("back.db");
    let item = |id: &str| {
        let value = serde_json::json!({
            "item_id": id, "item_data": {}, "first_attempt": "2025-06-01T00:00:00Z",
            "last_attempt": "2025-06-01T00:00:00Z", "failure_count": 1,
            "failure_history": [], "error_signature": "s", "worktree_artifacts": null,
            "reprocess_eligible": true, "manual_review_required": false
        });
        dlqlite::DeadLetteredItem::from_json_str(&value.to_string()).unwrap()
    };
    {
        let source = dlqlite::Dlq::open(&sqlite).unwrap();
        // Unlimited by default.
        source.set_capacity(None, Some(0)).unwrap();
        for n in 0..5 {
            source.add("follows", &item(&format!("f{n}"))).unwrap();
        }
    }
    let _ = copy(&sqlite, pg.url());
    let copied = dlqlite::Dlq::open(pg.url()).unwrap();
    // The destination's default is dlq's (10,000); the job keeps 0.
    assert_ne!(copied.capacity(None).unwrap().default_max_items, 0);
    assert_eq!(
        copied
            .capacity(Some("follows"))
            .unwrap()
            .effective_max_items,
        0
    );
    // Back into a database whose default is unlimited as well: the job
    // keeps its override from the copy before, and a job of the server
    // that follows the server's default gets that default as its own.
    copied.add("server-job", &item("s0")).unwrap();
    let server_default = copied.capacity(None).unwrap().default_max_items;
    drop(copied);
    {
        let dest = dlqlite::Dlq::open(&back).unwrap();
        dest.set_capacity(None, Some(0)).unwrap();
    }
    let _ = copy(pg.url(), &back);
    let dest = dlqlite::Dlq::open(&back).unwrap();
    assert_eq!(
        dest.capacity(Some("server-job"))
            .unwrap()
            .effective_max_items,
        server_default
    );
    assert_eq!(
        dest.capacity(Some("follows")).unwrap().effective_max_items,
        0
    );
    // Same defaults: a job that follows the default still does.
    dest.add("local", &item("l0")).unwrap();
    drop(dest);
    let same = dir.join("same.db");
    dlqlite::Dlq::open(&same)
        .unwrap()
        .set_capacity(None, Some(0))
        .unwrap();
    let _ = copy(&back, &same);
    let same = dlqlite::Dlq::open(&same).unwrap();
    assert_eq!(same.capacity(Some("local")).unwrap().job_max_items, None);
    assert_eq!(
        same.capacity(Some("follows")).unwrap().job_max_items,
        Some(0)
    );
}

/// A server that refuses the connection says why, in one line: the
/// server's message and SQLSTATE, or the client's reason and its cause
/// (the client library's own words are only "db error" or "error
/// connecting to server").
#[test]
fn a_refused_connection_says_why() {
    if both_backends_already() {
        return;
    }
    let server = server_url();
    let nobody = server.replacen("://", "://nobody_here@", 1);
    let nobody = match server
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
    {
        // The URL names a user already: swap it.
        Some((user, _)) => server.replacen(&format!("{user}@"), "nobody_here@", 1),
        None => nobody,
    };
    for (url, says) in [
        (
            with_dbname(&server, "no_such_db"),
            "database \"no_such_db\" does not exist (SQLSTATE 3D000)",
        ),
        (
            nobody,
            "role \"nobody_here\" does not exist (SQLSTATE 28000)",
        ),
        (
            "postgres://u@127.0.0.1:1/dlq".to_string(),
            "error connecting to server: Connection refused",
        ),
        (
            "postgres://u@/var/run/postgresql/dlq".to_string(),
            "a Unix socket directory goes percent-encoded in the host",
        ),
        (
            "postgres://u@127.0.0.1:1".to_string(),
            "the URL names no database",
        ),
    ] {
        let stderr = fails(dlq(Path::new(&url)).arg("stats"));
        assert!(stderr.contains(says), "{url}: {stderr}");
        assert!(!stderr.contains("db error"), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}

/// `dlq sql` on PostgreSQL shows every type as psql would: numbers and
/// JSON typed, dates, intervals, bytea, arrays and money as the server's
/// text (they came out as garbage bytes), numbers of any size (10^50
/// overflowed), and a repeated column name keeps both values in JSON.
#[test]
fn sql_shows_every_type_as_the_server_writes_it() {
    if both_backends_already() {
        return;
    }
    let db = PgDb::new("sqltypes");
    add_lines(
        db.url(),
        "j",
        [item("i", 1, "2025-01-02T03:04:05Z", "boom")],
    );
    let out = ok(dlq(db.url()).args([
        "sql",
        "--format",
        "jsonl",
        "SELECT date '2025-01-02' AS day, interval '1 day 2 hours' AS i, '\\xdead'::bytea AS b, \
         ARRAY[1,2] AS a, 10::numeric ^ 50 AS big, 123.45::numeric AS n, 2 AS a, \
         '00000000-0000-0000-0000-000000000001'::uuid AS u;",
    ]));
    assert_eq!(
        json(&out),
        serde_json::json!({"day": "2025-01-02", "i": "1 day 02:00:00", "b": "\\xdead",
            "a": "{1,2}", "big": 1e50, "n": 123.45, "a_2": 2,
            "u": "00000000-0000-0000-0000-000000000001"})
    );
    // The docs' per-day query (docs/postgres.md).
    let out = ok(dlq(db.url()).args([
        "sql",
        "--format",
        "csv",
        "SELECT timestamp::date AS day, error_type, COUNT(*) FROM failure_log GROUP BY 1, 2 ORDER BY 1",
    ]));
    assert!(out.contains("2025-01-02,"), "{out}");
    // A closing `;` with a comment after it, or a `;` in a string.
    for query in [
        "SELECT date '2025-01-02' AS d; -- why",
        "SELECT ';--' AS s, date '2025-01-02' AS d",
    ] {
        let out = ok(dlq(db.url()).args(["sql", "--format", "csv", query]));
        assert!(out.contains("2025-01-02"), "{query}: {out}");
    }
    // A statement that cannot be a subquery still runs; a column it
    // cannot read says to cast it.
    let out = ok(dlq(db.url()).args(["sql", "EXPLAIN SELECT date '2025-01-01'"]));
    assert!(out.contains("Result"), "{out}");
}

/// The statements of the docs' `sql` blocks: the sqlite3 one of
/// docs/guide.md ("Query with SQL") first, then the psql one of
/// docs/postgres.md.
fn readme_queries() -> Vec<Vec<String>> {
    let docs = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("docs");
    ["guide.md", "postgres.md"]
        .iter()
        .flat_map(|name| {
            let blocks = sql_blocks(&std::fs::read_to_string(docs.join(name)).unwrap());
            assert_eq!(blocks.len(), 1, "docs/{name} has one sql block");
            blocks
        })
        .collect()
}

/// The statements of each `sql` block of a markdown text.
fn sql_blocks(readme: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match (&mut current, line) {
            (None, "```sql") => current = Some(String::new()),
            (Some(_), "```") => {
                let text = current.take().unwrap();
                blocks.push(
                    text.split(';')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect(),
                );
            }
            (Some(text), line) if !line.trim_start().starts_with("--") => {
                text.push_str(line);
                text.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

/// Every query the docs show for sqlite3 and for psql runs on the
/// sample (with an item whose priority is a word, which made the psql
/// priority query fail), through `dlq sql` on each backend.
#[test]
fn the_readmes_queries_run_on_both_backends() {
    if both_backends_already() {
        return;
    }
    let dir = TempDir::new("pg-readme-sql");
    let file = dir.join("sample.db");
    let sample = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy");
    let _ = super::common::run(dlq(&file).arg("import").arg(&sample));
    let mut word = item("worded", 1, "2025-01-02T03:04:05Z", "boom");
    word["item_data"] = serde_json::json!({"priority": "high", "path": "a.rs"});
    let mut number = item("numbered", 1, "2025-01-02T03:04:05Z", "boom");
    number["item_data"] = serde_json::json!({"priority": 7, "path": "b.rs"});
    add_lines(&file, "j", [word, number]);
    let db = PgDb::new("readme");
    copy(&file, db.url());
    let blocks = readme_queries();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    for (target, queries) in [(file.as_path(), &blocks[0]), (db.url(), &blocks[1])] {
        assert!(queries.len() >= 5, "{queries:?}");
        for query in queries {
            let out = ok(dlq(target).args(["sql", "--format", "csv", query]));
            if query.contains("priority") {
                assert!(
                    out.contains("numbered") && !out.contains("worded"),
                    "{query}: {out}"
                );
            }
        }
    }
}

/// Message searches on PostgreSQL: the migration made the pg_trgm index
/// (the extension is there on the test server), and without it (a server
/// where pg_trgm could not be created) a search reads every message and
/// finds the same items.
#[test]
fn message_searches_find_the_same_items_with_and_without_pg_trgm() {
    if both_backends_already() {
        return;
    }
    let pg = PgDb::new("search");
    add_lines(
        pg.url(),
        "j",
        [
            item(
                "a",
                1,
                "2025-01-01T00:00:00Z",
                "Connection refused at db:5432",
            ),
            item("b", 1, "2025-01-02T00:00:00Z", "connection REFUSED"),
            item("c", 1, "2025-01-03T00:00:00Z", "50% done_x"),
            item("d", 1, "2025-01-04T00:00:00Z", "all good"),
        ],
    );
    assert_eq!(
        pg.count(
            "SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'failure_history_message_trgm'"
        ),
        1
    );
    let filters = [
        "error_message contains \"refused\"",
        "error_message contains \"Connection\"",
        "error_message matches \"REFUSED connection\"",
        "error_message matches \"db:5432 refused\"",
        "error_message contains \"50% done_\"",
        "error_message contains \"0% d\"",
        "last.error_message matches \"GOOD\"",
        "!(error_message contains \"refused\")",
    ];
    let listed = |filter: &str| -> String {
        let out = dlq(pg.url())
            .args([
                "list", "--filter", filter, "--format", "csv", "--limit", "0",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{filter}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let with: Vec<String> = filters.iter().map(|f| listed(f)).collect();
    assert!(
        with[0].contains(",a,") && !with[0].contains(",b,"),
        "{}",
        with[0]
    );
    assert!(
        with[2].contains(",a,") && with[2].contains(",b,"),
        "{}",
        with[2]
    );
    assert!(with[4].contains(",c,"), "{}", with[4]);
    pg.client()
        .batch_execute("DROP INDEX failure_history_message_trgm; DROP EXTENSION pg_trgm")
        .unwrap();
    let without: Vec<String> = filters.iter().map(|f| listed(f)).collect();
    assert_eq!(with, without);
}
