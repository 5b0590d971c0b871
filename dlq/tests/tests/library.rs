//! The library as an orchestrator embeds it: opening with `OpenOptions`,
//! jobs set up before their first item, and errors told apart by
//! `ErrorKind` alone (these tests name no rusqlite type in what they
//! assert; `common::sql` is only the "other process" holding a lock).

use crate::common::*;
use dlqlite::{Dlq, Error, ErrorKind, JobOptions, OpenOptions};
use std::time::{Duration, Instant};

fn one_item(id: &str) -> dlqlite::DeadLetteredItem {
    dlqlite::DeadLetteredItem::from_json_str(
        &item(id, 1, "2025-01-01T00:00:00Z", "boom").to_string(),
    )
    .unwrap()
}

/// Every item of `job` as read now: what a take later checks is unchanged.
fn read_job(dlq: &Dlq, job: &str) -> Vec<dlqlite::store::ReadItem> {
    dlq.items(dlqlite::ListFilter {
        job_id: Some(job.into()),
        ..Default::default()
    })
    .map(|entry| dlqlite::store::ReadItem::of(&entry.unwrap()))
    .collect()
}

/// Writes a legacy item file `<id>.json` into `items`, made first.
fn write_item_file(items: &std::path::Path, id: &str) {
    std::fs::create_dir_all(items).unwrap();
    std::fs::write(
        items.join(format!("{id}.json")),
        item(id, 1, "2025-01-01T00:00:00Z", "boom").to_string(),
    )
    .unwrap();
}

#[test]
fn open_existing_refuses_a_missing_path_and_creates_nothing() {
    let dir = TempDir::new("open-existing");
    let db = dir.join("typo/dlq.db");
    let err = OpenOptions::new()
        .open_existing(super::common::target(&db))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let named = super::common::target(&db).display().to_string();
    assert!(
        err.to_string().contains(named.trim_end_matches("/dlq.db")),
        "{err}"
    );
    let err = Dlq::open_existing(&db).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(!dir.join("typo").exists(), "a directory was created");
    // The same options create it when allowed, and open it after.
    OpenOptions::new()
        .open(super::common::target(&db))
        .unwrap()
        .add("j", &one_item("a"))
        .unwrap();
    let dlq = Dlq::open_existing(super::common::target(&db)).unwrap();
    assert_eq!(dlq.job_stats("j").unwrap().total_items, 1);
}

#[test]
fn a_read_only_handle_reads_and_refuses_every_write() {
    let dir = TempDir::new("read-only");
    let db = dir.join("dlq.db");
    Dlq::open(super::common::target(&db))
        .unwrap()
        .add("j", &one_item("a"))
        .unwrap();
    let before = dump(&db);
    let reader = OpenOptions::new()
        .read_only(true)
        .open(super::common::target(&db))
        .unwrap();
    assert_eq!(reader.stats().unwrap().0.total_items, 1);
    let err = reader.add("j", &one_item("b")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ReadOnly, "{err}");
    assert!(!err.is_transient());
    // The error names the database and keeps SQLite's reason as its source.
    assert!(
        err.to_string()
            .contains(&super::common::target(&db).display().to_string()),
        "{err}"
    );
    if !on_postgres() {
        assert!(std::error::Error::source(&err).is_some());
    }
    let err = reader.set_capacity(None, Some(5)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ReadOnly, "{err}");
    assert_eq!(dump(&db), before);
    // A missing file is not created read-only.
    let err = OpenOptions::new()
        .read_only(true)
        .open(super::common::target(&dir.join("none.db")))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(!dir.join("none.db").exists());
}

#[test]
fn a_held_lock_is_busy_after_the_timeout_and_transient() {
    let dir = TempDir::new("busy");
    let db = dir.join("dlq.db");
    let dlq = OpenOptions::new()
        .busy_timeout(Duration::from_millis(200))
        .open(super::common::target(&db))
        .unwrap();
    dlq.add("j", &one_item("a")).unwrap();
    // Another process holds the write lock.
    let other = hold_write_lock(&db);
    let started = Instant::now();
    let err = dlq.add("j", &one_item("b")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    assert!(err.is_transient());
    assert!(started.elapsed() >= Duration::from_millis(200));
    match &err {
        Error::Storage { path, .. } => {
            assert_eq!(path.as_deref(), Some(super::common::target(&db).as_path()))
        }
        other => panic!("not a storage error: {other:?}"),
    }
    drop(other);
    // Tried again, it succeeds.
    dlq.add("j", &one_item("b")).unwrap();
    assert_eq!(dlq.job_stats("j").unwrap().total_items, 2);
}

#[test]
fn add_timeout_bounds_the_wait_for_the_lock_and_stores_nothing_late() {
    let dir = TempDir::new("add-timeout");
    let db = dir.join("dlq.db");
    // The handle's own timeout is long: only the call's deadline can end
    // the wait this early.
    let dlq = OpenOptions::new()
        .busy_timeout(Duration::from_secs(60))
        .open(super::common::target(&db))
        .unwrap();
    dlq.add("j", &one_item("a")).unwrap();
    let other = hold_write_lock(&db);
    // One add waits for the lock, a second queues behind it: both end at
    // their own deadlines.
    let (first, second) = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let started = Instant::now();
            let result = dlq.add_timeout("j", &one_item("b"), Duration::from_millis(300));
            (result, started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        let queued = dlq.add_timeout("j", &one_item("c"), Duration::from_millis(150));
        (waiting.join().unwrap(), (queued, started.elapsed()))
    });
    for (result, waited, timeout) in [
        (first.0, first.1, Duration::from_millis(300)),
        (second.0, second.1, Duration::from_millis(150)),
    ] {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
        assert!(err.is_transient());
        assert!(
            waited >= timeout,
            "gave up after {waited:?}, before {timeout:?}"
        );
        assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    }
    drop(other);
    let stats = dlq.job_stats("j").unwrap();
    assert_eq!(stats.total_items, 1, "a timed-out add was stored");
    dlq.add_timeout("j", &one_item("b"), Duration::from_millis(300))
        .unwrap();
    assert_eq!(dlq.job_stats("j").unwrap().total_items, 2);
}

#[test]
fn add_many_is_all_or_nothing_with_one_report_per_item() {
    let dlq = Dlq::open_in_memory().unwrap();
    let items: Vec<_> = ["a", "b", "c"].iter().map(|id| one_item(id)).collect();
    let reports = dlq.add_many("j", &items).unwrap();
    assert_eq!(reports.len(), 3);
    assert!(reports
        .iter()
        .all(|r| r.outcome == dlqlite::store::AddOutcome::Inserted));
    // The same three again change nothing; a new one among them is the
    // only insert, in its place.
    let mut again = items.clone();
    again.insert(1, one_item("d"));
    let outcomes: Vec<_> = dlq
        .add_many("j", &again)
        .unwrap()
        .iter()
        .map(|r| r.outcome)
        .collect();
    use dlqlite::store::AddOutcome::{Inserted, Unchanged};
    assert_eq!(outcomes, [Unchanged, Inserted, Unchanged, Unchanged]);
    // One bad item: nothing of the call is stored.
    let mut bad = one_item("zero");
    bad.failure_history[0].attempt_number = 0;
    let err = dlq.add_many("j", &[one_item("e"), bad]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("attempt_number is 0"), "{err}");
    assert_eq!(dlq.job_stats("j").unwrap().total_items, 4);
    assert!(dlq.add_many("j", &[]).unwrap().is_empty());
}

#[test]
fn items_built_in_code_are_checked_before_they_are_stored() {
    let dlq = Dlq::open_in_memory().unwrap();
    let mut empty = one_item("x");
    empty.item_id = String::new();
    let err = dlq.add("j", &empty).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let mut zero = one_item("y");
    zero.failure_history[0].attempt_number = 0;
    let err = dlq.add("j", &zero).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // Inside a write transaction too.
    let err = dlq.write(|tx| tx.add("j", None, &zero)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let err = dlq.add("", &one_item("z")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(dlq.jobs().unwrap().is_empty());
}

/// Adds from many threads are committed in groups: every one stored once,
/// the counters equal a recount, and a bad add fails alone, not the
/// group it was committed with.
#[test]
fn concurrent_adds_share_commits_and_fail_alone() {
    let dir = TempDir::new("group-commit");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    dlq.set_capacity(None, Some(0)).unwrap();
    // Adds that pass every check before the transaction and fail inside
    // it, as a full disk or a constraint would.
    exec(
        &db,
        if on_postgres() {
            "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'poisoned item'; END $$;
             CREATE TRIGGER poison BEFORE INSERT ON items FOR EACH ROW
                 WHEN (NEW.item_id LIKE 'poison%') EXECUTE FUNCTION poison()"
        } else {
            "CREATE TRIGGER poison BEFORE INSERT ON items WHEN NEW.item_id LIKE 'poison%'
             BEGIN SELECT RAISE(ABORT, 'poisoned item'); END"
        },
    );
    let failures = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for t in 0..8 {
            let (dlq, failures) = (dlq.clone(), &failures);
            scope.spawn(move || {
                for n in 0..150 {
                    // Every tenth add of each thread fails.
                    let id = match n % 10 {
                        9 => format!("poison-t{t}-{n}"),
                        _ => format!("t{t}-{n}"),
                    };
                    match dlq.add(&format!("job-{}", t % 3), &one_item(&id)) {
                        Ok(report) => assert_eq!(report.new_attempts, 1, "{id}"),
                        Err(e) => {
                            assert!(id.starts_with("poison"), "{id}: {e}");
                            assert!(e.to_string().contains("poisoned item"), "{e}");
                            failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    assert_eq!(failures.into_inner(), 8 * 15);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 8 * 135);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM failure_history"), 8 * 135);
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'added'"),
        8 * 135
    );
    let before = dump(&db);
    dlq.recount().unwrap();
    assert_eq!(dump(&db), before, "counters drifted from a recount");
}

#[test]
fn every_error_kind_can_be_told_apart() {
    let dir = TempDir::new("kinds");
    // Not a database.
    let junk = dir.join("junk.db");
    std::fs::write(&junk, vec![b'x'; 8192]).unwrap();
    let err = Dlq::open(&junk).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    // A directory.
    let err = Dlq::open(dir.path()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // Written by a newer dlqlite.
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    dlq.add("j", &one_item("a")).unwrap();
    drop(dlq);
    exec(
        &db,
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
         VALUES (99, 'future', '2030-01-01T00:00:00Z', '1')",
    );
    let err = Dlq::open(super::common::target(&db)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaTooNew, "{err}");
    exec(
        &db,
        "DELETE FROM refinery_schema_history WHERE version = 99",
    );
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    // Not found: jobs and items.
    let err = dlq.job_stats("nosuch").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let err = dlq.get(Some("j"), "nosuch").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    // Invalid input: an id, a capacity, a filter (through `?`).
    let err = dlq.add("", &one_item("a")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let err = dlq.set_capacity(None, Some(-1)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    fn parse_in_app(text: &str) -> dlqlite::Result<dlqlite::filter::Expr> {
        Ok(dlqlite::filter::parse(text)?)
    }
    let err = parse_in_app("failure_count >").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(matches!(err, Error::Filter(_)));
    assert!(!err.is_transient());
}

#[test]
fn ensure_job_caps_a_job_before_its_first_item() {
    let dir = TempDir::new("ensure-job");
    let dlq = Dlq::open(super::common::target(&dir.join("dlq.db"))).unwrap();
    let evicted = dlq
        .ensure_job("new", &JobOptions { max_items: Some(2) })
        .unwrap();
    assert!(evicted.is_empty());
    let info = dlq.capacity(Some("new")).unwrap();
    assert_eq!((info.job_max_items, info.effective_max_items), (Some(2), 2));
    for i in 0..5 {
        let mut value = item(&format!("i{i}"), 1, "2025-01-01T00:00:00Z", "boom");
        value["last_attempt"] = format!("2025-01-0{}T00:00:00Z", i + 1).into();
        value["failure_history"][0]["timestamp"] = value["last_attempt"].clone();
        dlq.add(
            "new",
            &dlqlite::DeadLetteredItem::from_json_str(&value.to_string()).unwrap(),
        )
        .unwrap();
    }
    let kept: Vec<String> = dlq
        .list(dlqlite::ListFilter {
            job_id: Some("new".into()),
            ..Default::default()
        })
        .map(|item| item.unwrap().item_id)
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(kept.contains(&"i4".to_string()) && kept.contains(&"i3".to_string()));
    // The same options again change nothing and record nothing.
    let events = |dlq: &Dlq| dlq.events(None, None, usize::MAX).unwrap().len();
    let before = events(&dlq);
    dlq.ensure_job("new", &JobOptions { max_items: Some(2) })
        .unwrap();
    dlq.ensure_job("new", &JobOptions::default()).unwrap();
    assert_eq!(events(&dlq), before);
    // A lower cap trims at once, with the evictions returned and recorded.
    let evicted = dlq
        .ensure_job("new", &JobOptions { max_items: Some(1) })
        .unwrap();
    assert_eq!(evicted.len(), 1);
    assert_eq!(dlq.job_stats("new").unwrap().total_items, 1);
    // A new job without options follows the default; bad input is refused.
    dlq.ensure_job("plain", &JobOptions::default()).unwrap();
    assert_eq!(dlq.capacity(Some("plain")).unwrap().job_max_items, None);
    let err = dlq
        .ensure_job(
            "x",
            &JobOptions {
                max_items: Some(-3),
            },
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = dlq.ensure_job("", &JobOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    // set_capacity, unlike ensure_job, does not create a job.
    let err = dlq.set_capacity(Some("nosuch"), Some(3)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(dlq.capacity(Some("nosuch")).is_err());
}

#[test]
fn a_default_capacity_given_at_open_is_stored_once() {
    let dir = TempDir::new("open-capacity");
    let db = dir.join("dlq.db");
    let dlq = OpenOptions::new()
        .default_capacity(3)
        .open(super::common::target(&db))
        .unwrap();
    assert_eq!(dlq.capacity(None).unwrap().default_max_items, 3);
    drop(dlq);
    let capacity_events = || {
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'capacity_set'",
        )
    };
    assert_eq!(capacity_events(), 1);
    // Opening again with the same value records nothing more.
    OpenOptions::new()
        .default_capacity(3)
        .open(super::common::target(&db))
        .unwrap();
    assert_eq!(capacity_events(), 1);
    let err = OpenOptions::new()
        .default_capacity(-1)
        .open(super::common::target(&db))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[test]
fn lowering_the_default_capacity_trims_every_job_that_follows_it() {
    let dir = TempDir::new("lower-default");
    let dlq = Dlq::open(super::common::target(&dir.join("dlq.db"))).unwrap();
    for job in ["a", "b"] {
        for i in 0..5 {
            dlq.add(job, &one_item(&format!("{job}{i}"))).unwrap();
        }
    }
    dlq.ensure_job("b", &JobOptions { max_items: Some(0) })
        .unwrap();
    let evicted = dlq.set_capacity(None, Some(2)).unwrap();
    assert_eq!(evicted.len(), 3, "{evicted:?}");
    assert!(evicted.iter().all(|e| e.job_id == "a"));
    assert_eq!(dlq.job_stats("a").unwrap().total_items, 2);
    // b has its own capacity (unlimited) and keeps everything.
    assert_eq!(dlq.job_stats("b").unwrap().total_items, 5);
}

/// Back-to-back adds with a reader streaming `list()` the whole time: a
/// PASSIVE checkpoint alone let the WAL grow past 400 MB here; the reset
/// that takes the write turn keeps it under its documented bound.
#[test]
fn the_wal_stays_bounded_under_steady_adds_and_reads() {
    // Also when opened through a symlink: SQLite keeps the WAL beside the
    // real file, and the checkpointer once watched the link's name.
    for via_link in [false, true] {
        let dir = TempDir::new("wal-bound");
        let db = dir.join("dlq.db");
        let wal = dir.join("dlq.db-wal");
        let opened = if via_link {
            let link = dir.join("link.db");
            Dlq::open(super::common::target(&db)).unwrap();
            std::os::unix::fs::symlink(&db, &link).unwrap();
            link
        } else {
            db.clone()
        };
        let peak = storm_with_reader(&opened, &wal);
        assert!(
            peak <= dlqlite::db::WAL_BOUND_BYTES as u64,
            "via a link: {via_link}: the WAL reached {peak} bytes"
        );
    }
}

/// 1,500 adds of ~2 KB items with a reader streaming `list()` the whole
/// time; returns the WAL's peak size.
fn storm_with_reader(db: &std::path::Path, wal: &std::path::Path) -> u64 {
    let dlq = Dlq::open(super::common::target(db)).unwrap();
    dlq.set_capacity(None, Some(0)).unwrap();
    let padding = "x".repeat(1_500);
    let items: Vec<dlqlite::DeadLetteredItem> = (0..1_500)
        .map(|i| {
            let mut value = item(&format!("w{i}"), 1, "2025-01-01T00:00:00Z", "boom");
            value["item_data"]["padding"] = padding.clone().into();
            dlqlite::DeadLetteredItem::from_json_str(&value.to_string()).unwrap()
        })
        .collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    let peak = std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                for summary in dlq.list(dlqlite::ListFilter::default()) {
                    summary.unwrap();
                }
            }
        });
        let sampler = scope.spawn(|| {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        });
        for item in &items {
            dlq.add("j", item).unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap();
        sampler.join().unwrap()
    });
    assert_eq!(dlq.job_stats("j").unwrap().total_items, 1_500);
    peak
}

/// What is not a dlqlite database file is refused before SQLite touches
/// it: a fifo (opening one would block forever), a device, another
/// application's SQLite database (dlqlite would add its tables to it).
#[test]
fn files_that_are_not_dlqlite_databases_are_refused_unchanged() {
    if crate::common::sqlite_only("SQLite files that are not dlq databases") {
        return;
    }
    let dir = TempDir::new("not-ours");
    let fifo = dir.join("fifo.db");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for options in [
        OpenOptions::new(),
        OpenOptions::new().read_only(true).clone(),
    ] {
        let err = options.open(&fifo).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        let err = options.open("/dev/null").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    }
    let foreign = dir.join("app.sqlite");
    sql(&foreign)
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me');")
        .unwrap();
    let before = std::fs::read(&foreign).unwrap();
    for open in [Dlq::open, Dlq::open_existing] {
        let err = open(foreign.clone()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("without the dlq schema"), "{err}");
    }
    assert!(
        std::fs::read(&foreign).unwrap() == before,
        "the file changed"
    );
    assert!(!dir.join("app.sqlite-wal").exists());
}

/// An error names the database it happened in: a query on one database
/// inside another handle's callback, and an in-memory handle inside a file
/// one.
#[test]
fn errors_name_their_own_database() {
    let dir = TempDir::new("own-path");
    let (a, b) = (dir.join("a.db"), dir.join("b.db"));
    let dlq_a = Dlq::open(super::common::target(&a)).unwrap();
    dlq_a.add("j", &one_item("x")).unwrap();
    Dlq::open(super::common::target(&b))
        .unwrap()
        .add("j", &one_item("y"))
        .unwrap();
    let memory = Dlq::open_in_memory().unwrap();
    let mut inner = Vec::new();
    for summary in dlq_a.list(dlqlite::ListFilter::default()) {
        summary.unwrap();
        // Held: a's iterator; failing: b, then the in-memory handle.
        let err = dlqlite::store::adhoc::query_read_only(
            &b,
            "SELECT abs(-9223372036854775807 - 1)",
            |_| Ok(()),
            |_| Ok(()),
        );
        inner.push(err.unwrap_err().to_string());
        let err = memory.job_stats("nosuch").unwrap_err();
        inner.push(err.to_string());
        let err = memory.add("", &one_item("z")).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
    assert!(
        inner[0].contains("b.db") && !inner[0].contains("a.db"),
        "{inner:?}"
    );
    assert!(!inner[1].contains("a.db"), "{inner:?}");
}

/// `list()` walks on keys no merge changes: with merges making items
/// newer all the while (which moves them in last_attempt order), one walk
/// still sees every item exactly once, for one job and for all jobs.
#[test]
fn list_sees_every_item_once_while_merges_run() {
    let dir = TempDir::new("list-merges");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    dlq.set_capacity(None, Some(0)).unwrap();
    let n = 3_000;
    for job in ["a", "b"] {
        let items: Vec<_> = (0..n)
            .map(|i| {
                let at = format!(
                    "2025-01-01T{:02}:{:02}:{:02}Z",
                    i / 3600,
                    (i / 60) % 60,
                    i % 60
                );
                dlqlite::DeadLetteredItem::from_json_str(
                    &item(&format!("{job}-{i:05}"), 1, &at, "boom").to_string(),
                )
                .unwrap()
            })
            .collect();
        dlq.add_many(job, &items).unwrap();
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    // Merges so far: the walk waits for a few at each of its pauses, so
    // they land during the walk however loaded the machine is.
    let progress = std::sync::atomic::AtomicUsize::new(0);
    for filter in [
        dlqlite::ListFilter {
            job_id: Some("a".into()),
            ..Default::default()
        },
        dlqlite::ListFilter::default(),
    ] {
        let expected = if filter.job_id.is_some() { n } else { 2 * n };
        stop.store(false, std::sync::atomic::Ordering::Relaxed);
        let (seen, merged) = std::thread::scope(|scope| {
            let merger = scope.spawn(|| {
                // Oldest first: each merge moves an item the walk has not
                // reached yet (in last_attempt order) to the very front.
                let mut merged = 0;
                let mut attempt = 2;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for i in (0..n).step_by(7) {
                        let value = item(
                            &format!("a-{i:05}"),
                            attempt,
                            "2026-06-01T00:00:00Z",
                            "again",
                        );
                        let newer =
                            dlqlite::DeadLetteredItem::from_json_str(&value.to_string()).unwrap();
                        dlq.add("a", &newer).unwrap();
                        merged += 1;
                        progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                    }
                    attempt += 1;
                }
                merged
            });
            let mut seen = Vec::new();
            for summary in dlq.list(filter.clone()) {
                let summary = summary.unwrap();
                seen.push((summary.job_id, summary.item_id));
                // A slow consumer: merges land between pages.
                if seen.len() % 256 == 0 {
                    let before = progress.load(std::sync::atomic::Ordering::Relaxed);
                    let deadline = std::time::Instant::now() + Duration::from_secs(10);
                    while progress.load(std::sync::atomic::Ordering::Relaxed) < before + 3
                        && std::time::Instant::now() < deadline
                    {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            (seen, merger.join().unwrap())
        });
        assert!(merged > 20, "only {merged} merges ran during the walk");
        let total = seen.len();
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), total, "an item was listed twice");
        assert_eq!(
            total, expected,
            "the walk missed items ({merged} merges ran)"
        );
    }
}

/// The spec's conversion, as an orchestrator calls it: the same failure
/// converted and added twice (a retried DLQ write) changes nothing; the
/// next attempt adds one; agents and steps are the real ones.
#[test]
fn adding_a_converted_failure_twice_changes_nothing() {
    use dlqlite::classify::{agent_result_to_dlq_item, AgentResult};
    use dlqlite::store::AddOutcome;
    let dir = TempDir::new("convert-twice");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    let finished = dlqlite::Timestamp::parse("2025-11-23T19:42:53Z").unwrap();
    let result = AgentResult::failed("item-9", "cargo test failed")
        .agent_id("agent-4")
        .step("test")
        .exit_code(101)
        .finished_at(finished)
        .duration(Duration::from_millis(1200));
    let work = serde_json::json!({"path": "src/a.rs"});
    let first = agent_result_to_dlq_item(&result, &work, 1).unwrap();
    assert_eq!(dlq.add("j", &first).unwrap().outcome, AddOutcome::Inserted);
    let before = dump(&db);
    // Converted again later (the clock moved on): the same attempt.
    std::thread::sleep(Duration::from_millis(20));
    let again = agent_result_to_dlq_item(&result, &work, 1).unwrap();
    let report = dlq.add("j", &again).unwrap();
    assert_eq!(report.outcome, AddOutcome::Unchanged);
    assert_eq!(report.new_attempts, 0);
    assert_eq!(dump(&db), before);
    // The next attempt, by another agent, is one more.
    let second = AgentResult::timed_out("item-9")
        .agent_id("agent-5")
        .finished_at(dlqlite::Timestamp::parse("2025-11-23T20:00:00Z").unwrap());
    let next = agent_result_to_dlq_item(&second, &work, 2).unwrap();
    assert_eq!(dlq.add("j", &next).unwrap().new_attempts, 1);
    let stored = dlq.get(Some("j"), "item-9").unwrap();
    assert_eq!(stored.failure_count, 2);
    let attempts: Vec<_> = stored
        .failure_history
        .iter()
        .map(|a| {
            (
                a.attempt_number,
                a.agent_id.as_str(),
                a.step_failed.as_str(),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [(1, "agent-4", "test"), (2, "agent-5", "agent_execution")]
    );
    assert_eq!(stored.failure_history[0].error_type.exit_code, Some(101));
    let analysis = dlq.analyze(Some("j")).unwrap();
    let mut agents: Vec<_> = analysis.top_agents.iter().map(|r| r.name.clone()).collect();
    agents.sort();
    assert_eq!(agents, ["agent-4", "agent-5"]);
    // A success converts to nothing.
    assert!(agent_result_to_dlq_item(&AgentResult::succeeded("item-9"), &work, 3).is_none());
}

/// An item built in code is stored and read back as built, its attempts
/// in order whatever order they were given in, and bad ones are refused.
#[test]
fn built_items_round_trip_and_bad_ones_are_refused() {
    use dlqlite::{DeadLetteredItem, ErrorType, FailureDetail, Timestamp};
    let dlq = Dlq::open_in_memory().unwrap();
    let t = |s: &str| Timestamp::parse(s).unwrap();
    let built = DeadLetteredItem::builder("item-1", serde_json::json!({"n": 1}))
        .attempt(
            FailureDetail::new(
                2,
                t("2025-01-02T00:00:00Z"),
                ErrorType::command_failed(2),
                "second",
            )
            .agent_id("agent-b")
            .step("verify")
            .stack_trace("trace"),
        )
        .attempt(FailureDetail::new(
            1,
            t("2025-01-01T00:00:00Z"),
            ErrorType::named("Timeout"),
            "first",
        ))
        .worktree("/wt/1", "branch-1")
        .build()
        .unwrap();
    assert_eq!(built.failure_count, 2);
    assert_eq!(built.first_attempt, t("2025-01-01T00:00:00Z"));
    assert_eq!(built.last_attempt, t("2025-01-02T00:00:00Z"));
    assert_eq!(
        built.error_signature,
        dlqlite::classify::error_signature("second")
    );
    assert!(built.reprocess_eligible && !built.manual_review_required);
    dlq.add("j", &built).unwrap();
    let stored = dlq.get(Some("j"), "item-1").unwrap();
    assert_eq!(
        stored.to_json_value().unwrap(),
        built.to_json_value().unwrap()
    );
    let numbers: Vec<_> = stored
        .failure_history
        .iter()
        .map(|a| a.attempt_number)
        .collect();
    assert_eq!(numbers, [1, 2]);
    // No attempt, attempt 0, an empty id, data nested too deep.
    let at = t("2025-01-01T00:00:00Z");
    let attempt = |n| FailureDetail::new(n, at, ErrorType::named("Timeout"), "x");
    let mut deep = serde_json::json!(1);
    for _ in 0..1_000 {
        deep = serde_json::json!([deep]);
    }
    for bad in [
        DeadLetteredItem::builder("a", serde_json::json!({})).build(),
        DeadLetteredItem::builder("a", serde_json::json!({}))
            .attempt(attempt(0))
            .build(),
        DeadLetteredItem::builder("", serde_json::json!({}))
            .attempt(attempt(1))
            .build(),
        DeadLetteredItem::builder("a", deep)
            .attempt(attempt(1))
            .build(),
    ] {
        assert_eq!(bad.unwrap_err().kind(), ErrorKind::InvalidInput);
    }
}

/// Requeue in memory: exactly the eligible items come back and leave, in
/// one transaction; with keep_history an item that fails again goes on
/// counting.
#[test]
fn take_eligible_takes_exactly_the_eligible_items() {
    use dlqlite::store::{MarkRequest, TakeOptions};
    let dir = TempDir::new("take");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    let err = dlq
        .take_eligible("none", &TakeOptions::default())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let items: Vec<_> = (0..6).map(|i| one_item(&format!("i{i}"))).collect();
    dlq.add_many("j", &items).unwrap();
    dlq.add("other", &one_item("i0")).unwrap();
    let not_eligible = MarkRequest {
        reprocess_eligible: Some(false),
        ..Default::default()
    };
    dlq.mark(Some("j"), "i1", &not_eligible).unwrap();
    let ids = |taken: &[dlqlite::store::TakenItem]| -> Vec<String> {
        taken.iter().map(|t| t.item_id.clone()).collect()
    };
    // A filter and a limit narrow it.
    let taken = dlq
        .take_eligible(
            "j",
            &TakeOptions {
                filter: dlqlite::ListFilter {
                    expression: Some(dlqlite::filter::parse(r#"item_id != "i2""#).unwrap()),
                    ..Default::default()
                },
                limit: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(ids(&taken), ["i0", "i3"]);
    assert_eq!(
        taken[0].item_data,
        serde_json::json!({"path": "src/i0.rs", "priority": 1})
    );
    let taken = dlq.take_eligible("j", &TakeOptions::default()).unwrap();
    assert_eq!(ids(&taken), ["i2", "i4", "i5"]);
    assert!(dlq
        .take_eligible("j", &TakeOptions::default())
        .unwrap()
        .is_empty());
    // Left: the item marked not eligible, and the other job's.
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'j'"),
        1
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'other'"),
        1
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'requeued'"),
        5
    );
    let before = dump(&db);
    dlq.recount().unwrap();
    assert_eq!(dump(&db), before, "counters drifted");

    // keep_history: taken but kept; its next failure continues its count.
    dlq.add("k", &one_item("a")).unwrap();
    let keep = TakeOptions {
        keep_history: true,
        ..Default::default()
    };
    assert_eq!(ids(&dlq.take_eligible("k", &keep).unwrap()), ["a"]);
    assert!(
        dlq.take_eligible("k", &keep).unwrap().is_empty(),
        "taken twice"
    );
    let again = dlqlite::DeadLetteredItem::from_json_str(
        &item("a", 2, "2025-01-02T00:00:00Z", "boom again").to_string(),
    )
    .unwrap();
    dlq.add("k", &again).unwrap();
    let stored = dlq.get(Some("k"), "a").unwrap();
    assert_eq!(stored.failure_count, 2);
    assert!(stored.reprocess_eligible, "its new failure decides again");
    assert_eq!(
        ids(&dlq.take_eligible("k", &TakeOptions::default()).unwrap()),
        ["a"]
    );
    let before = dump(&db);
    dlq.recount().unwrap();
    assert_eq!(dump(&db), before, "counters drifted");
}

/// Waits too long for the clock are a very long wait, not a panic.
#[test]
fn huge_timeouts_do_not_panic() {
    let dir = TempDir::new("huge");
    let dlq = OpenOptions::new()
        .busy_timeout(Duration::MAX)
        .open(super::common::target(&dir.join("dlq.db")))
        .unwrap();
    dlq.add("j", &one_item("a")).unwrap();
    dlq.add_timeout("j", &one_item("b"), Duration::MAX).unwrap();
    dlq.add_timeout("j", &one_item("c"), Duration::ZERO)
        .unwrap();
    assert_eq!(dlq.job_stats("j").unwrap().total_items, 3);
}

/// A zero timeout means "do not wait", not "always fail": with nothing
/// else writing, the add goes through, on a fresh handle too.
#[test]
fn a_zero_timeout_adds_when_nothing_else_writes() {
    let dir = TempDir::new("zero");
    let dlq = OpenOptions::new()
        .busy_timeout(Duration::ZERO)
        .open(super::common::target(&dir.join("dlq.db")))
        .unwrap();
    dlq.add("j", &one_item("a")).unwrap();
    let fresh = Dlq::open(super::common::target(&dir.join("other.db"))).unwrap();
    fresh
        .add_timeout("j", &one_item("a"), Duration::ZERO)
        .unwrap();
}

/// Item data SQLite could not store is refused before the transaction,
/// naming the item; the conversion gives None for it, as documented.
#[test]
fn item_data_too_deep_is_refused_up_front() {
    let dlq = Dlq::open_in_memory().unwrap();
    let mut deep = serde_json::json!(1);
    for _ in 0..1_001 {
        deep = serde_json::json!([deep]);
    }
    let result = dlqlite::classify::AgentResult::failed("d", "x");
    assert!(dlqlite::classify::agent_result_to_dlq_item(&result, &deep, 1).is_none());
    let mut item = one_item("d");
    item.item_data = serde_json::value::to_raw_value(&deep).unwrap();
    let err = dlq.add("j", &item).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("item \"d\""), "{err}");
    assert!(err.to_string().contains("item_data"), "{err}");
}

/// A purge confirmed after its dry run removes what the dry run counted,
/// even when the clock moved on meanwhile (a person reading the question):
/// the confirmed purge runs at the dry run's `now`.
#[test]
fn a_purge_at_its_dry_runs_now_removes_what_was_counted() {
    use std::sync::atomic::{AtomicI64, Ordering};
    let dir = TempDir::new("purge-at");
    let db = dir.join("dlq.db");
    let t0 = dlqlite::Timestamp::parse("2025-06-02T00:00:00Z").unwrap();
    let later = std::sync::Arc::new(AtomicI64::new(0));
    let seconds = std::sync::Arc::clone(&later);
    let dlq = Dlq::open(super::common::target(&db))
        .unwrap()
        .with_clock(std::sync::Arc::new(move || {
            t0.plus_millis(seconds.load(Ordering::SeqCst) * 1000)
        }));
    for (id, at) in [
        ("old", "2025-05-30T00:00:00Z"),
        // Five seconds short of a day before t0.
        ("edge", "2025-06-01T00:00:05Z"),
    ] {
        let text = item(id, 1, at, "x").to_string();
        dlq.add(
            "j",
            &dlqlite::DeadLetteredItem::from_json_str(&text).unwrap(),
        )
        .unwrap();
    }
    let everything = dlqlite::ListFilter::default();
    let preview = dlq.purge(1, &everything, true).unwrap();
    assert_eq!(preview.items, 1);
    later.store(10, Ordering::SeqCst);
    assert_eq!(
        dlq.purge(1, &everything, true).unwrap().items,
        2,
        "ten seconds on, a fresh count takes the edge item too"
    );
    let done = dlq.purge_at(preview.now, 1, &everything, false).unwrap();
    assert_eq!(done.items, 1, "exactly what the dry run counted");
    assert_eq!(done.cutoff, preview.cutoff);
    assert!(dlq.get(Some("j"), "edge").is_ok());
    assert!(dlq.get(Some("j"), "old").is_err());
}

/// A load commits in batches, and each batch raises the capacity of a job
/// it filled past it: no committed state has a job over its capacity, so
/// neither an add from another process between two batches nor an add after
/// a load that failed half way evicts what the load brought in (before,
/// capacities were raised only at the end, and such an add evicted
/// everything over the old capacity).
#[test]
fn a_load_never_commits_a_job_over_its_capacity() {
    let dir = TempDir::new("load-capacity");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    dlq.set_capacity(None, Some(4)).unwrap();
    // Not empty: the batched path.
    dlq.add("other", &one_item("x")).unwrap();
    let options = dlqlite::store::LoadOptions {
        batch_size: 5,
        bulk_when_empty: true,
        once: None,
    };
    let err = dlq
        .load(0..100, &options, |load, i| {
            if i == 12 {
                return Err(Error::invalid_argument("test", "stop half way"));
            }
            load.item("j", None, &one_item(&format!("i{i:03}")))?;
            Ok(true)
        })
        .unwrap_err();
    assert!(err.to_string().contains("stop half way"), "{err}");
    // Two batches of five committed; the job's capacity fits them.
    assert_eq!(dlq.job_stats("j").unwrap().total_items, 10);
    let report = dlq.add("j", &one_item("new")).unwrap();
    assert_eq!(report.evicted.len(), 1, "{:?}", report.evicted);
    assert_eq!(dlq.job_stats("j").unwrap().total_items, 10);
    // A load that ends reports each raised job once: the capacity before
    // its first raise, the items after its last.
    let raised = dlq
        .load(0..23, &options, |load, i| {
            load.item("k", None, &one_item(&format!("i{i:03}")))?;
            Ok(true)
        })
        .unwrap()
        .into_raised();
    assert_eq!(raised.len(), 1, "{raised:?}");
    assert_eq!(
        (
            raised[0].job_id.as_str(),
            raised[0].previous_max_items,
            raised[0].items
        ),
        ("k", 4, 23)
    );
    assert_eq!(dlq.job_stats("k").unwrap().total_items, 23);
}

/// A confirmed delete never removes an item that changed after it was
/// counted, even by a merge that moves none of the fields a person sees in
/// a listing: an attempt between the first and the last, into an item whose
/// failure_count already counts more attempts than are stored (the normal
/// shape of legacy data).
#[test]
fn a_confirmed_delete_refuses_an_item_a_merge_changed_after_the_count() {
    let dir = TempDir::new("selection-merge");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    let attempt = |n: u32, day: u32| {
        item("a", n, &format!("2025-01-{day:02}T00:00:00Z"), "boom")["failure_history"][0].clone()
    };
    let mut legacy = item("a", 5, "2025-01-05T00:00:00Z", "boom");
    legacy["first_attempt"] = "2025-01-01T00:00:00Z".into();
    legacy["failure_count"] = 5.into();
    legacy["failure_history"] = serde_json::json!([attempt(1, 1), attempt(5, 5)]);
    let parse =
        |v: &serde_json::Value| dlqlite::DeadLetteredItem::from_json_str(&v.to_string()).unwrap();
    dlq.add("j", &parse(&legacy)).unwrap();
    let target = dlqlite::store::Target::Filter(dlqlite::ListFilter {
        job_id: Some("j".into()),
        ..Default::default()
    });
    let counted = dlq.select(&target).unwrap();
    assert_eq!(counted.count, 1);
    // Attempt 3 arrives: first, last, count and signature stay as they were.
    let mut middle = legacy.clone();
    middle["failure_history"] = serde_json::json!([attempt(3, 3)]);
    let report = dlq.add("j", &parse(&middle)).unwrap();
    assert_eq!(report.outcome, dlqlite::store::AddOutcome::Merged);
    let err = dlq
        .remove_selection(&target, Some(&counted.token))
        .unwrap_err();
    assert!(
        matches!(err, Error::SelectionChanged { counted: 1, now: 1 }),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM failure_history"), 3);
    // Counted again, it goes.
    let again = dlq.select(&target).unwrap();
    dlq.remove_selection(&target, Some(&again.token)).unwrap();
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
}

/// What `dlq requeue --take` does between writing its file and taking the
/// items: an item that a merge changed after it was read is not taken.
#[test]
fn a_take_of_items_read_earlier_leaves_the_ones_that_changed() {
    let dir = TempDir::new("take-unchanged");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    for id in ["a", "b"] {
        dlq.add("j", &one_item(id)).unwrap();
    }
    let read = read_job(&dlq, "j");
    assert_eq!(read.len(), 2);
    // "a" fails again after it was read.
    let again = dlqlite::DeadLetteredItem::from_json_str(
        &item("a", 2, "2025-01-02T00:00:00Z", "boom again").to_string(),
    )
    .unwrap();
    dlq.add("j", &again).unwrap();
    assert_eq!(dlq.take_unchanged(&read, "file.json").unwrap(), 1);
    assert_eq!(strings(&db, "SELECT item_id FROM items"), ["a"]);
    assert_eq!(count(&db, "SELECT failure_count FROM items"), 2);
    // By name alone (no version), it is taken.
    assert_eq!(
        dlq.take_items(&[("j".into(), "a".into())], "file.json")
            .unwrap(),
        1
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
}

/// What a purge counted is what it removes: an item merged into, or one
/// that came to match, after the count makes the purge refuse and remove
/// nothing (`dlq purge` confirms a count, then removes with it).
#[test]
fn a_counted_purge_refuses_when_the_counted_items_changed() {
    let dir = TempDir::new("purge-counted");
    let db = dir.join("dlq.db");
    let dlq = dlqlite::Dlq::open(target(&db)).unwrap();
    let add = |id: &str, at: &str, message: &str| {
        let text = item(id, 1, at, message).to_string();
        dlq.add(
            "j",
            &dlqlite::DeadLetteredItem::from_json_str(&text).unwrap(),
        )
        .unwrap();
    };
    for n in 0..5 {
        add(&format!("old{n}"), "2020-01-01T00:00:00Z", "boom");
    }
    let everything = dlqlite::ListFilter::default();
    // An old item arrives after the count.
    let counted = dlq.purge(30, &everything, true).unwrap();
    assert_eq!(counted.items, 5);
    add("late", "2020-02-01T00:00:00Z", "boom");
    let error = dlq
        .purge_counted(&counted, 30, &everything, |_| {})
        .unwrap_err();
    assert_eq!(error.kind(), dlqlite::ErrorKind::Conflict, "{error}");
    assert_eq!(dlq.count_matching(&everything).unwrap(), 6);
    // A counted item is merged into (a new failure, still old).
    let counted = dlq.purge(30, &everything, true).unwrap();
    let mut again = item("old0", 2, "2020-03-01T00:00:00Z", "boom again");
    again["failure_count"] = 2.into();
    dlq.add(
        "j",
        &dlqlite::DeadLetteredItem::from_json_str(&again.to_string()).unwrap(),
    )
    .unwrap();
    assert!(dlq
        .purge_counted(&counted, 30, &everything, |_| {})
        .is_err());
    // Counted again, it removes exactly those.
    let counted = dlq.purge(30, &everything, true).unwrap();
    let done = dlq
        .purge_counted(&counted, 30, &everything, |_| {})
        .unwrap();
    assert_eq!(done.items, 6);
}

/// `dlq clear` removes what it counted: an item added to the job, or one
/// merged into, after the count makes the clear refuse and remove nothing.
#[test]
fn a_counted_clear_refuses_when_the_job_changed() {
    let dir = TempDir::new("clear-counted");
    let db = dir.join("dlq.db");
    let dlq = dlqlite::Dlq::open(target(&db)).unwrap();
    let add = |id: &str, failures: u32, message: &str| {
        let mut value = item(id, failures, "2026-01-01T00:00:00Z", message);
        value["failure_count"] = failures.into();
        dlq.add(
            "j",
            &dlqlite::DeadLetteredItem::from_json_str(&value.to_string()).unwrap(),
        )
        .unwrap();
    };
    for n in 0..3 {
        add(&format!("a{n}"), 1, "boom");
    }
    let job = || {
        dlqlite::store::Target::Filter(dlqlite::ListFilter {
            job_id: Some("j".into()),
            ..Default::default()
        })
    };
    let counted = dlq.select(&job()).unwrap();
    assert_eq!(counted.count, 3);
    add("late", 1, "boom");
    let error = dlq
        .clear_job_counted("j", None, &counted.token)
        .unwrap_err();
    assert_eq!(error.kind(), dlqlite::ErrorKind::Conflict, "{error}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 4);
    // A counted item fails again: refused as well.
    let counted = dlq.select(&job()).unwrap();
    add("a0", 2, "boom again");
    assert!(dlq.clear_job_counted("j", None, &counted.token).is_err());
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 4);
    // Counted again, exactly those go, and with a host, the job too.
    let counted = dlq.select(&job()).unwrap();
    let removed = dlq
        .clear_job_counted("j", Some("this-host"), &counted.token)
        .unwrap();
    assert_eq!(removed, 4);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM jobs"), 0);
}

/// `dlq capacity --set` evicts what it asked about: adds after the count
/// (more to evict, or some when it counted none) make it refuse and change
/// nothing.
#[test]
fn a_counted_capacity_change_refuses_when_it_would_evict_more() {
    let dir = TempDir::new("capacity-counted");
    let db = dir.join("dlq.db");
    let dlq = dlqlite::Dlq::open(target(&db)).unwrap();
    let add = |id: &str| {
        let text = item(id, 1, "2026-01-01T00:00:00Z", "boom").to_string();
        dlq.add(
            "j",
            &dlqlite::DeadLetteredItem::from_json_str(&text).unwrap(),
        )
        .unwrap();
    };
    for n in 0..3 {
        add(&format!("a{n}"));
    }
    // Nothing to evict at the count; an add makes one.
    let counted = dlq.capacity_eviction_selection(Some("j"), Some(3)).unwrap();
    assert_eq!(counted.count, 0);
    add("a3");
    let error = dlq
        .set_capacity_counted(Some("j"), Some(3), &counted.token)
        .unwrap_err();
    assert_eq!(error.kind(), dlqlite::ErrorKind::Conflict, "{error}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 4);
    assert_eq!(
        count(&db, "SELECT COALESCE(max_items, -1) FROM jobs"),
        -1,
        "the capacity is unchanged"
    );
    // The default: counted over every job without an override.
    let counted = dlq.capacity_eviction_selection(None, Some(2)).unwrap();
    assert_eq!(counted.count, 2);
    assert_eq!(dlq.capacity_evictions(None, Some(2)).unwrap(), 2);
    add("a4");
    assert!(dlq
        .set_capacity_counted(None, Some(2), &counted.token)
        .is_err());
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 5);
    // The oldest item fails again after the count: as many to evict, but
    // not the same items in the same state.
    let counted = dlq.capacity_eviction_selection(None, Some(2)).unwrap();
    assert_eq!(counted.count, 3);
    let mut again = item("a0", 2, "2026-01-01T00:00:00Z", "boom again");
    again["failure_count"] = 2.into();
    dlq.add(
        "j",
        &dlqlite::DeadLetteredItem::from_json_str(&again.to_string()).unwrap(),
    )
    .unwrap();
    assert_eq!(dlq.capacity_evictions(None, Some(2)).unwrap(), 3);
    assert!(dlq
        .set_capacity_counted(None, Some(2), &counted.token)
        .is_err());
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 5);
    let counted = dlq.capacity_eviction_selection(None, Some(2)).unwrap();
    let evicted = dlq
        .set_capacity_counted(None, Some(2), &counted.token)
        .unwrap();
    assert_eq!(evicted.len(), 3);
}

/// An item removed and stored again under its name after it was read is
/// another item: `requeue --take` must not take it for the one it wrote
/// (a new item starts at version 0, as the one read may have been).
#[test]
fn a_take_of_items_read_earlier_leaves_an_item_stored_again_under_the_name() {
    let dir = TempDir::new("take-readded");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    dlq.add("j", &one_item("keep")).unwrap();
    dlq.add("j", &one_item("a")).unwrap();
    let read = read_job(&dlq, "j");
    assert!(read.iter().all(|r| r.version == 0));
    // "a" goes (a retry's success) and fails again: stored afresh.
    dlq.remove(Some("j"), "a").unwrap();
    dlq.add("j", &one_item("keep2")).unwrap();
    let again = dlqlite::DeadLetteredItem::from_json_str(
        &item("a", 1, "2025-03-01T00:00:00Z", "a new failure").to_string(),
    )
    .unwrap();
    dlq.add("j", &again).unwrap();
    assert_eq!(dlq.take_unchanged(&read, "file.json").unwrap(), 1);
    let mut left = strings(&db, "SELECT item_id FROM items ORDER BY item_id");
    left.sort();
    assert_eq!(left, ["a", "keep2"]);
}

/// The same when the item held the highest row id: SQLite gives a new row
/// the highest id plus one, so without AUTOINCREMENT (schema V14) the item
/// stored again came back with the id and the version (0) of the one read.
#[test]
fn a_take_of_items_read_earlier_leaves_an_item_stored_again_in_the_last_row() {
    let dir = TempDir::new("take-reused-row");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    dlq.add("j", &one_item("keep")).unwrap();
    dlq.add("j", &one_item("a")).unwrap();
    let read = read_job(&dlq, "j");
    dlq.remove(Some("j"), "a").unwrap();
    dlq.add("j", &one_item("a")).unwrap();
    assert_eq!(dlq.take_unchanged(&read, "file.json").unwrap(), 1);
    let mut left = strings(&db, "SELECT item_id FROM items");
    left.sort();
    assert_eq!(left, ["a"]);
}

/// An add into a full job keeps the item it adds, however old its last
/// attempt: the oldest other item makes room (as Prodigy's queue does),
/// and the report names it.
#[test]
fn an_add_into_a_full_job_keeps_the_item_it_adds() {
    let dir = TempDir::new("full-keeps-new");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    dlq.ensure_job("j", &dlqlite::JobOptions { max_items: Some(3) })
        .unwrap();
    let add = |id: &str, at: &str| {
        let text = item(id, 1, at, "boom").to_string();
        dlq.add(
            "j",
            &dlqlite::DeadLetteredItem::from_json_str(&text).unwrap(),
        )
        .unwrap()
    };
    add("feb", "2025-02-01T00:00:00Z");
    add("mar", "2025-03-01T00:00:00Z");
    add("apr", "2025-04-01T00:00:00Z");
    let report = add("old", "2025-01-01T00:00:00Z");
    assert_eq!(report.outcome, dlqlite::store::AddOutcome::Inserted);
    let evicted: Vec<&str> = report.evicted.iter().map(|e| e.item_id.as_str()).collect();
    assert_eq!(evicted, ["feb"]);
    let mut kept = strings(&db, "SELECT item_id FROM items");
    kept.sort();
    assert_eq!(kept, ["apr", "mar", "old"]);
    assert!(dlq.get(Some("j"), "old").is_ok());
    // The next add makes room again with the oldest other item: "old".
    let report = add("may", "2025-05-01T00:00:00Z");
    let evicted: Vec<&str> = report.evicted.iter().map(|e| e.item_id.as_str()).collect();
    assert_eq!(evicted, ["old"]);
}

/// `Dlq::adopt_legacy` imports a legacy JSON DLQ once per database: the
/// second call (or one in another process) imports nothing, and a root
/// with no legacy job is left alone.
#[test]
fn adopting_a_legacy_tree_imports_it_once() {
    let dir = TempDir::new("adopt-legacy");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(dlq.adopt_legacy(&empty).unwrap().is_none());
    let items = dir.join("home/mapreduce/dlq/job-1/items");
    for id in ["a", "b"] {
        write_item_file(&items, id);
    }
    // A legacy tree deeper below the root (a fixture, a copy) is not the
    // root's queue: only root/mapreduce/dlq/<job>/ is.
    let deeper = dir.join("home/fixtures/copy/mapreduce/dlq/job-9/items");
    write_item_file(&deeper, "z");
    let home = dir.join("home");
    let report = dlq.adopt_legacy(&home).unwrap().unwrap();
    assert_eq!(report.items_new, 2);
    let canonical = std::fs::canonicalize(&home).unwrap();
    assert!(dlq
        .legacy_adopted(&canonical.display().to_string())
        .unwrap()
        .is_some());
    assert!(dlq.adopt_legacy(&home).unwrap().is_none());
    // The same root spelled another way is adopted already.
    let slash = std::path::PathBuf::from(format!("{}/", home.display()));
    assert!(dlq.adopt_legacy(&slash).unwrap().is_none());
    assert!(dlq
        .adopt_legacy(&home.join("fixtures").join(".."))
        .unwrap()
        .is_none());
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 2);
    // Another root is adopted on its own.
    let other = dir.join("other/mapreduce/dlq/job-2/items");
    write_item_file(&other, "c");
    let report = dlq.adopt_legacy(&dir.join("other")).unwrap().unwrap();
    assert_eq!(report.items_new, 1);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
}

/// Two handles (as two processes) adopting the same tree at once import it
/// once: each looks for the adoption's record before it reads a file, but
/// the record that counts is claimed in the import's own transaction. (A
/// second import would bring back what the first one's caller had taken
/// meanwhile.)
#[test]
fn two_handles_adopting_at_once_import_once() {
    let dir = TempDir::new("adopt-race");
    let db = dir.join("dlq.db");
    drop(Dlq::open(super::common::target(&db)).unwrap());
    let items = dir.join("home/mapreduce/dlq/job-1/items");
    for id in ["a", "b", "c"] {
        write_item_file(&items, id);
    }
    let home = dir.join("home");
    // Both get past the quick look while the write lock is held elsewhere,
    // then queue for it.
    let lock = hold_write_lock(&db);
    let adopters: Vec<_> = (0..2)
        .map(|_| {
            let db = db.clone();
            let home = home.clone();
            std::thread::spawn(move || {
                let dlq = Dlq::open(super::common::target(&db)).unwrap();
                dlq.adopt_legacy(&home).unwrap().is_some()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    drop(lock);
    let imported: usize = adopters
        .into_iter()
        .map(|t| usize::from(t.join().unwrap()))
        .sum();
    assert_eq!(imported, 1, "one adoption imports, the other finds it done");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'imported' AND item_id IS NOT NULL"
        ),
        3
    );
}

/// A queue kept partly elsewhere through symlinks (a job directory, an
/// items directory, or `mapreduce/dlq` itself) is adopted whole: the
/// program that wrote it reads through those links, so adopting must too.
#[test]
fn adopting_follows_the_queues_own_symlinks() {
    let dir = TempDir::new("adopt-links");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    let write = write_item_file;
    // A job directory and an items directory kept elsewhere.
    let queue = dir.join("home/mapreduce/dlq");
    write(&queue.join("job-1/items"), "a");
    write(&dir.join("elsewhere/job-2/items"), "b");
    std::os::unix::fs::symlink(dir.join("elsewhere/job-2"), queue.join("job-2")).unwrap();
    std::fs::create_dir_all(queue.join("job-3")).unwrap();
    write(&dir.join("elsewhere/items-3"), "c");
    std::os::unix::fs::symlink(dir.join("elsewhere/items-3"), queue.join("job-3/items")).unwrap();
    let report = dlq.adopt_legacy(&dir.join("home")).unwrap().unwrap();
    assert_eq!(report.items_new, 3, "{report:?}");
    let jobs = strings(&db, "SELECT job_id || '/' || item_id FROM items ORDER BY 1");
    assert_eq!(jobs, ["job-1/a", "job-2/b", "job-3/c"]);
    // `mapreduce/dlq` itself a link to a directory named otherwise.
    write(&dir.join("stash/job-4/items"), "d");
    std::fs::create_dir_all(dir.join("home2/mapreduce")).unwrap();
    std::os::unix::fs::symlink(dir.join("stash"), dir.join("home2/mapreduce/dlq")).unwrap();
    let report = dlq.adopt_legacy(&dir.join("home2")).unwrap().unwrap();
    assert_eq!(report.items_new, 1, "{report:?}");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM items WHERE job_id = 'job-4'"),
        1
    );
    // An item whose id is empty (the legacy writer named its file `.json`)
    // is refused by name, not passed over in silence.
    std::fs::write(
        queue.join("job-1/items/.json"),
        item("", 1, "2025-01-01T00:00:00Z", "boom").to_string(),
    )
    .unwrap();
    let report =
        dlqlite::import::import(&dlq, &[dir.join("home")], &Default::default(), |_| {}).unwrap();
    assert_eq!(report.files_rejected.len(), 1, "{report:?}");
    assert!(
        report.files_rejected[0].error.contains("item_id"),
        "{report:?}"
    );
}

/// Each job directory is adopted on its own: a job whose directory was a
/// dangling link at the first adoption (or that appears later) is adopted
/// when it is there, while the jobs adopted before stay as they were taken.
#[test]
fn a_job_that_appears_after_the_adoption_is_adopted_then() {
    let dir = TempDir::new("adopt-later");
    let db = dir.join("dlq.db");
    let dlq = Dlq::open(super::common::target(&db)).unwrap();
    let queue = dir.join("home/mapreduce/dlq");
    let write = write_item_file;
    write(&queue.join("job-1/items"), "a");
    write(&queue.join("job-1/items"), "b");
    // job-2 is a link to a directory that is not there yet.
    std::os::unix::fs::symlink(dir.join("later/job-2"), queue.join("job-2")).unwrap();
    let home = dir.join("home");
    let report = dlq.adopt_legacy(&home).unwrap().unwrap();
    assert_eq!(report.items_new, 2, "{report:?}");
    // The caller takes "a"; adopting again brings nothing back.
    dlq.remove(Some("job-1"), "a").unwrap();
    assert!(dlq.adopt_legacy(&home).unwrap().is_none());
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 1);
    // The link's target appears: its job is adopted at the next open.
    write(&dir.join("later/job-2/items"), "c");
    let report = dlq.adopt_legacy(&home).unwrap().unwrap();
    assert_eq!(report.items_new, 1, "{report:?}");
    assert_eq!(
        strings(&db, "SELECT job_id || '/' || item_id FROM items ORDER BY 1"),
        ["job-1/b", "job-2/c"]
    );
    assert!(dlq.adopt_legacy(&home).unwrap().is_none());
}
