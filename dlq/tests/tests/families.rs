//! Failure families as stored: every write path gives an item the family
//! of its last attempt, handles in other processes mine on top of the same
//! families, the listing adds up, and items stored before families are
//! mined by `dlq families rebuild`.

use crate::common::*;
use dlqlite::Dlq;
use std::path::Path;

fn failure(id: &str, attempt: u32, day: u32, message: &str) -> serde_json::Value {
    item(id, attempt, &format!("2025-01-{day:02}T00:00:00Z"), message)
}

fn parse(value: &serde_json::Value) -> dlqlite::DeadLetteredItem {
    dlqlite::DeadLetteredItem::from_json_str(&value.to_string()).unwrap()
}

/// Every item's family, by item id.
fn families_of(db: &Path) -> Vec<(String, Option<i64>)> {
    rows_as(db, "SELECT item_id, family_id FROM items ORDER BY item_id")
}

/// The family of the item `id` (ids are unique in these tests).
fn family(db: &Path, id: &str) -> i64 {
    count(
        db,
        &format!("SELECT family_id FROM items WHERE item_id = '{id}'"),
    )
}

/// No item points at a family that is not there, and every item with an
/// attempt has one.
fn assert_sound(db: &Path) {
    assert_eq!(
        count(
            db,
            "SELECT COUNT(*) FROM items i WHERE i.family_id IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM families f WHERE f.id = i.family_id)"
        ),
        0
    );
    assert_eq!(
        count(
            db,
            "SELECT COUNT(*) FROM items i WHERE i.family_id IS NULL
             AND EXISTS (SELECT 1 FROM failure_history h WHERE h.item_key = i.id)"
        ),
        0,
        "an item with attempts has no family"
    );
}

#[test]
fn one_cause_is_one_family_across_jobs_and_variables() {
    let dir = TempDir::new("families-one-cause");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "job-a",
        (0..20).map(|n| {
            failure(
                &format!("a{n}"),
                1,
                1 + n % 9,
                &format!("connect ECONNREFUSED 10.0.0.{n}:5432 after {n}ms"),
            )
        }),
    );
    add_lines(
        &db,
        "job-b",
        (0..5).map(|n| {
            failure(
                &format!("b{n}"),
                1,
                2,
                &format!("connect ECONNREFUSED 10.1.2.{n}:6379 after {}ms", n * 7),
            )
        }),
    );
    add_lines(
        &db,
        "job-b",
        [failure("other", 1, 3, "npm install failed: 404 left-pad")],
    );
    assert_sound(&db);
    let ids: Vec<Option<i64>> = families_of(&db).into_iter().map(|(_, f)| f).collect();
    let refused = ids.iter().filter(|f| **f == ids[0]).count();
    assert_eq!(refused, 25, "{ids:?}");
    let listing = json(&ok(dlq(&db).args(["families", "--format", "json"])));
    let rows = listing.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{listing}");
    assert_eq!(rows[0]["items"], 25);
    assert_eq!(rows[0]["template"], "connect ECONNREFUSED <*> after <*>");
    assert_eq!(rows[1]["items"], 1);
    // The listing adds up to the items.
    let total: i64 = rows.iter().map(|r| r["items"].as_i64().unwrap()).sum();
    assert_eq!(total, count(&db, "SELECT COUNT(*) FROM items"));
    // `show` and `list` agree.
    let id = rows[0]["id"].as_i64().unwrap();
    let shown = json(&ok(dlq(&db).args([
        "families",
        "show",
        &id.to_string(),
        "--json",
    ])));
    assert_eq!(shown["items"], 25);
    assert_eq!(shown["error_type"], "CommandFailed");
    let listed = json(&ok(
        dlq(&db).args(["list", "--limit", "0", "--format", "json"])
    ));
    let in_family = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["family_id"] == id)
        .count();
    assert_eq!(in_family, 25);
    // The filter field selects exactly the family, for any command.
    let filter = format!("family == {id}");
    let listed = json(&ok(dlq(&db).args([
        "list", "--limit", "0", "--format", "json", "--filter", &filter,
    ])));
    assert_eq!(listed.as_array().unwrap().len(), 25);
    let purged = json(&ok(dlq(&db).args([
        "purge",
        "--older-than-days",
        "0",
        "--filter",
        &filter,
        "--yes",
        "--json",
    ])));
    assert_eq!(purged["items"], 25, "{purged}");
    assert_eq!(strings(&db, "SELECT item_id FROM items"), ["other"]);
    let err = fails(dlq(&db).args(["list", "--filter", "family == \"x\""]));
    assert!(err.contains("family"), "{err}");
}

#[test]
fn a_merge_and_a_failed_retry_move_an_item_to_its_last_attempts_family() {
    let dir = TempDir::new("families-merge");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [failure("x", 1, 1, "disk full on /var/data")]);
    add_lines(&db, "j", [failure("y", 1, 1, "timed out waiting for lock")]);
    let before = families_of(&db);
    // A later attempt with another cause: the item's family is the new one.
    add_lines(&db, "j", [failure("x", 2, 2, "timed out waiting for lock")]);
    let after = families_of(&db);
    assert_eq!(after[0].1, before[1].1, "{after:?}");
    // An older attempt merged in changes nothing.
    add_lines(&db, "j", [failure("x", 1, 1, "disk full on /var/data")]);
    assert_eq!(families_of(&db), after);
    // A retry that fails: its attempt is the last, with its own family.
    let output = run(dlq(&db).args([
        "retry",
        "j",
        "--exec",
        "echo 'quota exceeded for project 42' >&2; exit 3",
        "--max-retries",
        "1",
    ]));
    assert_eq!(output.status.code(), Some(1));
    let retried = families_of(&db);
    assert_ne!(retried[1].1, after[1].1, "{retried:?}");
    assert_eq!(
        retried[0].1, retried[1].1,
        "one cause, one family: {retried:?}"
    );
    assert_sound(&db);
}

#[test]
fn two_handles_mine_on_top_of_the_same_families() {
    if sqlite_only("two processes' caches on one file") {
        return;
    }
    let dir = TempDir::new("families-two-handles");
    let db = dir.join("dlq.db");
    let first = Dlq::open(&db).unwrap();
    let second = Dlq::open(&db).unwrap();
    first
        .add(
            "j",
            &parse(&failure("a", 1, 1, "upload of report-1 failed: HTTP 503")),
        )
        .unwrap();
    // The second handle has never seen it, and joins it all the same.
    second
        .add(
            "j",
            &parse(&failure("b", 1, 2, "upload of report-2 failed: HTTP 503")),
        )
        .unwrap();
    first
        .add(
            "j",
            &parse(&failure("c", 1, 3, "upload of report-3 failed: HTTP 503")),
        )
        .unwrap();
    let ids: Vec<Option<i64>> = families_of(&db).into_iter().map(|(_, f)| f).collect();
    assert_eq!(ids, vec![ids[0]; 3], "{ids:?}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM families"), 1);
    // The same failure with another status is another family.
    second
        .add(
            "j",
            &parse(&failure("d", 1, 3, "upload of report-4 failed: HTTP 502")),
        )
        .unwrap();
    assert_eq!(count(&db, "SELECT COUNT(*) FROM families"), 2);
    assert_sound(&db);
}

/// A handle reads the families of a part (error type, site, number of
/// words) when it first mines into it: what another handle made there
/// before or since is found all the same, in parts read before and after.
#[test]
fn a_handle_finds_other_handles_families_in_every_part() {
    if sqlite_only("two processes' caches on one file") {
        return;
    }
    let dir = TempDir::new("families-parts");
    let db = dir.join("dlq.db");
    let first = Dlq::open(&db).unwrap();
    let second = Dlq::open(&db).unwrap();
    let add = |handle: &Dlq, id: &str, message: &str| {
        handle
            .add("j", &parse(&failure(id, 1, 1, message)))
            .unwrap();
    };
    add(&first, "a1", "disk full on /var/lib/a");
    // The second reads the disk part, and makes a family in another.
    add(&second, "a2", "disk full on /var/lib/b");
    add(&second, "b1", "connection refused by db-1:5432");
    // The first reads that part only now, and finds it.
    add(&first, "b2", "connection refused by db-2:5432");
    // A part the first holds already (five words): a family the second
    // makes there after the first read it.
    add(
        &first,
        "d1",
        "certificate for registry.internal expired yesterday",
    );
    add(&second, "c1", "quota of project-9 exceeded today");
    add(&first, "c2", "quota of project-7 exceeded today");
    let fam = |id: &str| family(&db, id);
    assert_eq!(fam("a1"), fam("a2"));
    assert_eq!(fam("b1"), fam("b2"));
    assert_eq!(fam("c1"), fam("c2"));
    assert_ne!(fam("c1"), fam("d1"));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM families"), 4);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM families WHERE part IS NULL OR part = ''"
        ),
        0
    );
    assert_sound(&db);
}

/// The part the migration (SQLite V13, PostgreSQL V7) gives the families
/// of an older database is the part the miner gives them: an upgraded
/// database's families are found by the parts they are looked up by.
#[test]
fn the_migrations_part_is_the_miners() {
    let dir = TempDir::new("families-part");
    let db = dir.join("dlq.db");
    let mut traced = failure("t", 1, 2, "thread 'main' panicked at 'index out of bounds'");
    traced["failure_history"][0]["stack_trace"] =
        "   0: app::store::load\n             at src/store.rs:42\n   1: app::main\n".into();
    add_lines(
        &db,
        "j",
        [
            failure("a", 1, 1, "disk full on /var/lib/a"),
            failure("b", 1, 1, "connection refused by db-1:5432"),
            traced,
        ],
    );
    let migration = if super::common::on_postgres() {
        "json_array_length(state -> 'slots')::text || chr(31) || COALESCE(error_type, '')
         || chr(31) || COALESCE(site, '')"
    } else {
        "json_array_length(state, '$.slots') || char(31) || COALESCE(error_type, '')
         || char(31) || COALESCE(site, '')"
    };
    assert_eq!(count(&db, "SELECT COUNT(*) FROM families"), 3);
    assert_eq!(
        count(
            &db,
            &format!("SELECT COUNT(*) FROM families WHERE part = {migration}")
        ),
        3
    );
    assert!(count(&db, "SELECT COUNT(*) FROM families WHERE site IS NOT NULL") > 0);
}

#[test]
fn reimport_keeps_family_ids_and_rebuild_mines_items_without_one() {
    let dir = TempDir::new("families-rebuild");
    let db = dir.join("dlq.db");
    let tree = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy");
    run(dlq(&db).arg("import").arg(&tree));
    assert_sound(&db);
    let mined = families_of(&db);
    run(dlq(&db).arg("import").arg(&tree));
    assert_eq!(families_of(&db), mined, "a re-import moved families");
    // As a database made before families: no family anywhere.
    exec_by_hand(
        &db,
        "UPDATE items SET family_id = NULL; DELETE FROM families;",
    );
    let note = String::from_utf8(run(dlq(&db).arg("families")).stderr).unwrap();
    assert!(note.contains("dlq families rebuild"), "{note}");
    let rebuilt = json(&ok(dlq(&db).args(["families", "rebuild", "--json"])));
    assert_eq!(
        rebuilt["items_mined"].as_i64().unwrap(),
        count(
            &db,
            "SELECT COUNT(*) FROM items WHERE family_id IS NOT NULL"
        )
    );
    assert_sound(&db);
    // The same grouping as mined on the way in.
    let group = |rows: &[(String, Option<i64>)]| -> Vec<Vec<String>> {
        let mut by: std::collections::BTreeMap<Option<i64>, Vec<String>> = Default::default();
        for (item, family) in rows {
            by.entry(*family).or_default().push(item.clone());
        }
        let mut groups: Vec<Vec<String>> = by.into_values().collect();
        groups.sort();
        groups
    };
    assert_eq!(group(&families_of(&db)), group(&mined));
    // Nothing left to mine.
    let again = json(&ok(dlq(&db).args(["families", "rebuild", "--json"])));
    assert_eq!(again["items_mined"], 0);
}

/// A database whose families were mined by older rules (here: mined
/// before versions were recorded) says so under `dlq families`, until
/// `rebuild --all` mines every item with the current rules; a new
/// database, and a copy of a current one, never does.
#[test]
fn families_mined_with_older_rules_are_noted_until_a_full_rebuild() {
    let dir = TempDir::new("families-rules");
    let db = dir.join("dlq.db");
    let tree = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("examples/legacy");
    run(dlq(&db).arg("import").arg(&tree));
    let stderr = |db: &Path| String::from_utf8(run(dlq(db).arg("families")).stderr).unwrap();
    assert!(!stderr(&db).contains("rules"), "{}", stderr(&db));
    assert_eq!(
        strings(
            &db,
            "SELECT value FROM settings WHERE key = 'families_rules'"
        ),
        [dlqlite::families::RULES.to_string()]
    );
    let to = dir.join("to.db");
    copy_database(&dir, &db, &to);
    assert!(!stderr(&to).contains("rules"), "{}", stderr(&to));
    exec_by_hand(&db, "DELETE FROM settings WHERE key = 'families_rules'");
    let note = stderr(&db);
    assert!(
        note.contains("older rules (from before versions were recorded)")
            && note.contains("dlq families rebuild --all"),
        "{note}"
    );
    ok(dlq(&db).args(["families", "rebuild", "--all", "--json"]));
    assert!(!stderr(&db).contains("rules"), "{}", stderr(&db));
    assert_sound(&db);
}

/// `dlq copy` into a new database keeps every family id, also where
/// mining the copied items again would number them otherwise (the first
/// family's items are gone from the source); the copy goes on mining on
/// top of them.
#[test]
fn copy_keeps_family_ids() {
    let dir = TempDir::new("families-copy");
    let db = dir.join("from.db");
    add_lines(
        &db,
        "j",
        [
            failure("x", 1, 1, "alpha exploded in the reactor"),
            failure("y1", 1, 2, "could not connect to db-7 on port 5432"),
            failure("y2", 1, 3, "could not connect to db-9 on port 5432"),
        ],
    );
    Dlq::open(target(&db))
        .unwrap()
        .remove(Some("j"), "x")
        .unwrap();
    let before = families_of(&db);
    assert!(before.iter().all(|(_, f)| *f == Some(2)), "{before:?}");
    let to = dir.join("to.db");
    copy_database(&dir, &db, &to);
    assert_eq!(families_of(&to), before);
    assert_sound(&to);
    // The same cause added there later joins the kept family.
    add_lines(
        &to,
        "j",
        [failure(
            "y3",
            1,
            4,
            "could not connect to db-3 on port 5432",
        )],
    );
    assert_eq!(family(&to, "y3"), 2);
    assert_eq!(
        strings(&to, "SELECT template FROM families WHERE id = 2"),
        strings(&db, "SELECT template FROM families WHERE id = 2")
    );
}

/// A split part a person then merged into another family still takes only
/// its value after `rebuild --all`: a family nobody merged (a value no
/// part holds) keeps its id and its items.
#[test]
fn a_rebuild_keeps_a_merged_split_part_to_its_value() {
    let dir = TempDir::new("families-split-merge-rebuild");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        (0..10).map(|n| {
            let word = if n % 2 == 0 {
                "test_alpha"
            } else {
                "test_beta"
            };
            failure(
                &format!("t{n}"),
                1,
                1,
                &format!("test {word} failed on branch main"),
            )
        }),
    );
    let fam = |id: &str| family(&db, id);
    let first = fam("t0").to_string();
    ok(dlq(&db).args(["families", "split", &first, "--by", "2"]));
    let (alpha, beta) = (fam("t0"), fam("t1"));
    assert_ne!(alpha, beta);
    add_lines(
        &db,
        "j",
        (0..2).map(|n| {
            failure(
                &format!("d{n}"),
                1,
                2,
                "test test_delta failed on branch main",
            )
        }),
    );
    let delta = fam("d0");
    assert!(delta != alpha && delta != beta);
    ok(dlq(&db).args(["families", "merge", &alpha.to_string(), &beta.to_string()]));
    ok(dlq(&db).args(["families", "rebuild", "--all"]));
    assert_eq!((fam("t1"), fam("d0"), fam("d1")), (alpha, delta, delta));
    add_lines(
        &db,
        "j",
        [failure("e0", 1, 3, "test test_delta failed on branch main")],
    );
    assert_eq!(fam("e0"), delta);
    assert_sound(&db);
}

/// A merge of families of two error types goes through (a person may know
/// they are one cause) with a warning, and says which types it joined.
#[test]
fn a_merge_across_error_types_warns() {
    let dir = TempDir::new("families-merge-types");
    let db = dir.join("dlq.db");
    let mut timeout = failure("t1", 1, 2, "deadline exceeded calling the registry");
    timeout["failure_history"][0]["error_type"] = serde_json::json!("Timeout");
    add_lines(
        &db,
        "j",
        [
            failure("c1", 1, 1, "disk quota exceeded on /var/lib/runner"),
            failure("c2", 1, 1, "connection refused by db-1:5432"),
            timeout,
        ],
    );
    let fam = |id: &str| family(&db, id).to_string();
    let same = run(dlq(&db).args(["families", "merge", &fam("c1"), &fam("c2"), "--json"]));
    assert!(same.status.success());
    let stderr = String::from_utf8_lossy(&same.stderr);
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(
        json(&String::from_utf8_lossy(&same.stdout))["other_error_types"],
        serde_json::json!([])
    );
    let across = run(dlq(&db).args(["families", "merge", &fam("c1"), &fam("t1"), "--json"]));
    assert!(across.status.success());
    let stderr = String::from_utf8_lossy(&across.stderr);
    assert!(
        stderr.contains("warning") && stderr.contains("Timeout"),
        "{stderr}"
    );
    assert_eq!(
        json(&String::from_utf8_lossy(&across.stdout))["other_error_types"],
        serde_json::json!(["Timeout"])
    );
    assert_eq!(fam("t1"), fam("c1"));
    assert_sound(&db);
}

/// A merge moves every item of the merged family, records an event, sends
/// what the miner still finds in the merged family to the one it went into
/// (in another process too), and survives a full rebuild, which keeps ids.
#[test]
fn a_merge_moves_items_is_recorded_and_survives_a_rebuild() {
    let dir = TempDir::new("families-merge");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        [
            failure("a1", 1, 1, "connection refused by db-1:5432"),
            failure("a2", 1, 2, "connection refused by db-2:5432"),
            failure(
                "b1",
                1,
                3,
                "TLS handshake timed out after 30s talking to the primary",
            ),
            failure(
                "b2",
                1,
                4,
                "TLS handshake timed out after 31s talking to the primary",
            ),
            failure("c1", 1, 5, "disk quota exceeded on /var/lib/runner"),
        ],
    );
    let fam = |id: &str| family(&db, id);
    let (a, b, c) = (fam("a1"), fam("b1"), fam("c1"));
    assert!(a != b && b != c && a != c, "{a} {b} {c}");
    let out = json(&ok(dlq(&db).args([
        "families",
        "merge",
        &a.to_string(),
        &b.to_string(),
        "--json",
    ])));
    assert_eq!(out["items_moved"], 2, "{out}");
    assert_eq!((fam("b1"), fam("b2")), (a, a));
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'families_merged'"
        ),
        1
    );
    assert_sound(&db);
    // A new failure of b's cause, from another process: into a.
    add_lines(
        &db,
        "j",
        [failure(
            "b3",
            1,
            6,
            "TLS handshake timed out after 45s talking to the primary",
        )],
    );
    assert_eq!(fam("b3"), a);
    // The merged family's id selects the items where they are now, in the
    // family it went into (and `!=` leaves them out).
    let listed = |filter: String| -> Vec<String> {
        let rows = json(&ok(
            dlq(&db).args(["list", "--filter", &filter, "--format", "json"])
        ));
        let mut ids: Vec<String> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["item_id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    let in_a = ["a1", "a2", "b1", "b2", "b3"].map(String::from).to_vec();
    assert_eq!(listed(format!("family == {b}")), in_a);
    assert_eq!(listed(format!("family == {a}")), in_a);
    assert_eq!(listed(format!("family != {b}")), ["c1".to_string()]);
    // Merging into a merged family means the family it went into.
    let refused = fails(dlq(&db).args(["families", "merge", &a.to_string(), &b.to_string()]));
    assert!(refused.contains("already"), "{refused}");
    assert_eq!(refused.trim().lines().count(), 1, "{refused}");
    let refused = fails(dlq(&db).args(["families", "merge", &a.to_string(), "999"]));
    assert!(refused.contains("no family 999"), "{refused}");
    // A full rebuild keeps the ids and the merge.
    let before = families_of(&db);
    let rebuilt = json(&ok(
        dlq(&db).args(["families", "rebuild", "--all", "--json"])
    ));
    assert_eq!(rebuilt["items"], 6, "{rebuilt}");
    assert_eq!(families_of(&db), before, "{rebuilt}");
    assert_eq!(fam("c1"), c);
    assert_eq!(listed(format!("family == {b}")), in_a);
    // Again: the same families, and no new rows.
    let rows = count(&db, "SELECT COUNT(*) FROM families");
    ok(dlq(&db).args(["families", "rebuild", "--all"]));
    assert_eq!(families_of(&db), before);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM families"), rows);
    assert_sound(&db);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'families_rebuilt'"
        ),
        2
    );
    // And mining after the rebuild still lands in the kept families.
    add_lines(
        &db,
        "j",
        [
            failure("a3", 1, 7, "connection refused by db-3:5432"),
            failure(
                "b4",
                1,
                8,
                "TLS handshake timed out after 50s talking to the primary",
            ),
        ],
    );
    assert_eq!((fam("a3"), fam("b4")), (a, a));
    // A copy carries the merge: what is mined into b there goes to a too.
    let copy = dir.join("copy.db");
    copy_database(&dir, &db, &copy);
    add_lines(
        &copy,
        "j",
        [failure(
            "b5",
            1,
            9,
            "TLS handshake timed out after 55s talking to the primary",
        )],
    );
    assert_eq!(family(&copy, "b5"), a);
    let shown = ok(dlq(&db).args(["families", "show", &b.to_string()]));
    assert!(
        shown.contains(&format!("merged into family {a}")),
        "{shown}"
    );
}

/// A database of seven causes of 7, 6, ... 1 items over two jobs, and one
/// item whose family is unset (as if stored before families).
fn seven_causes(dir: &TempDir) -> std::path::PathBuf {
    let db = dir.join("dlq.db");
    let causes = [
        "connect ECONNREFUSED 10.0.0.<n>:5432",
        "npm ERR! code ERESOLVE while resolving pkg-<n>",
        "disk quota exceeded on volume vol<n>",
        "merge conflict in src/file<n>.rs",
        "permission denied: /etc/secret<n>",
        "out of memory after <n>ms",
        "HTTP 503 from upstream api<n>",
    ];
    for (rank, cause) in causes.iter().enumerate() {
        let items = (0..7 - rank).map(|n| {
            failure(
                &format!("c{rank}-{n}"),
                1,
                1 + n as u32,
                &cause.replace("<n>", &n.to_string()),
            )
        });
        add_lines(&db, if rank % 2 == 0 { "even" } else { "odd" }, items);
    }
    exec(
        &db,
        "UPDATE items SET family_id = NULL WHERE item_id = 'c0-0'",
    );
    db
}

#[test]
fn analyze_leads_with_families_and_its_json_adds_up() {
    let dir = TempDir::new("families-analyze");
    let db = seven_causes(&dir);
    for (top, job) in [
        ("3", None),
        ("0", None),
        ("1", Some("odd")),
        ("2", Some("even")),
    ] {
        let mut args = vec!["analyze", "--json", "--top", top];
        args.extend(job.map(|job| ["--job-id", job]).into_iter().flatten());
        let a = json(&ok(dlq(&db).args(&args)));
        let listed = a["families"].as_array().unwrap();
        let counts: Vec<i64> = listed
            .iter()
            .map(|f| f["count"].as_i64().unwrap())
            .collect();
        let sum = counts.iter().sum::<i64>()
            + a["families_omitted"]["items"].as_i64().unwrap()
            + a["items_without_family"].as_i64().unwrap();
        assert_eq!(sum, a["total_items"].as_i64().unwrap(), "{args:?}: {a}");
        let distinct = count(
            &db,
            &format!(
                "SELECT COUNT(DISTINCT family_id) FROM items WHERE {}",
                job.map_or("1 = 1".into(), |job| format!("job_id = '{job}'"))
            ),
        );
        assert_eq!(
            listed.len() as i64 + a["families_omitted"]["groups"].as_i64().unwrap(),
            distinct,
            "{args:?}"
        );
        // Largest first, each as counted by SQL, named by its template.
        assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
        for family in listed {
            let id = family["family_id"].as_i64().unwrap();
            let scope = job.map_or(String::new(), |job| format!(" AND job_id = '{job}'"));
            assert_eq!(
                family["count"].as_i64().unwrap(),
                count(
                    &db,
                    &format!("SELECT COUNT(*) FROM items WHERE family_id = {id}{scope}")
                )
            );
            assert_eq!(family["error_type"], "CommandFailed");
            assert_eq!(family["category"], "conditionally_recoverable");
        }
    }
    let all = json(&ok(dlq(&db).args(["analyze", "--json", "--top", "2"])));
    assert_eq!(all["total_items"], 28);
    assert_eq!(all["items_without_family"], 1);
    assert_eq!(all["families"][0]["count"], 6, "the 7th item has no family");
    assert!(
        all["families"][0]["template"]
            .as_str()
            .unwrap()
            .starts_with("connect ECONNREFUSED"),
        "{all}"
    );
    assert_eq!(all["families_omitted"]["groups"], 5);
    // The tables: families first, and lines for what they leave out.
    let text = ok(dlq(&db).args(["analyze", "--top", "2"]));
    let families = text.find("Failure families").expect(&text);
    assert!(families < text.find("Pattern groups").unwrap(), "{text}");
    assert!(
        text.contains("and 5 more group(s) holding 15 item(s)"),
        "{text}"
    );
    assert!(text.contains("and 1 item(s) without a family"), "{text}");
}

#[test]
fn stats_lead_with_the_largest_families() {
    let dir = TempDir::new("families-stats");
    let db = seven_causes(&dir);
    let text = ok(dlq(&db).arg("stats"));
    let families = text.find("Failure families").expect(&text);
    assert!(families < text.find("ITEMS  SIGNATURE").unwrap(), "{text}");
    let header = text.lines().find(|l| l.starts_with("FAMILY")).expect(&text);
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["FAMILY", "ITEMS", "TYPE", "CATEGORY", "TEMPLATE"]
    );
    assert!(
        text.contains("... and 1 item(s) without a family"),
        "{text}"
    );
    // One job's.
    let text = ok(dlq(&db).args(["stats", "--job-id", "odd"]));
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("FAMILY"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!(rows[0].split_whitespace().nth(1), Some("6"), "{text}");
}

/// A person who knows a family is several causes splits it at a word that
/// varies: one family per value, the largest keeping the id; new failures
/// go to their value's family in every process; a value no part holds
/// starts its own; a rebuild keeps it all, and bad splits are one line.
#[test]
fn a_split_makes_a_family_per_value_and_survives_a_rebuild() {
    let dir = TempDir::new("families-split");
    let db = dir.join("dlq.db");
    let hosts = [
        "db-1:5432",
        "db-1:5432",
        "db-1:5432",
        "db-2:5432",
        "db-2:5432",
        "cache-7:6379",
    ];
    add_lines(
        &db,
        "j",
        hosts.iter().enumerate().map(|(n, host)| {
            failure(
                &format!("i{n}"),
                1,
                n as u32 + 1,
                &format!("connection refused by {host} after retries"),
            )
        }),
    );
    let fam = |id: &str| family(&db, id);
    let whole = fam("i0");
    assert!((0..6).all(|n| fam(&format!("i{n}")) == whole));
    let shown = ok(dlq(&db).args(["families", "show", &whole.to_string()]));
    assert!(shown.contains("varies at: 4 <*>"), "{shown}");
    // Bad splits: a constant word, a word past the end, a missing family.
    for (by, id, says) in [
        ("2", whole.to_string(), "not a <*>"),
        ("9", whole.to_string(), "not a <*>"),
        ("4", "999".to_string(), "no family 999"),
        ("0", whole.to_string(), "0"),
    ] {
        let refused = fails(dlq(&db).args(["families", "split", &id, "--by", by]));
        assert!(refused.contains(says), "{by}: {refused}");
        assert_eq!(refused.trim().lines().count(), 1, "{refused}");
    }
    let out = json(&ok(dlq(&db).args([
        "families",
        "split",
        &whole.to_string(),
        "--by",
        "4",
        "--json",
    ])));
    let parts = out["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 3, "{out}");
    assert_eq!(parts[0]["id"], whole);
    assert_eq!(parts[0]["value"], "db-1:5432");
    assert_eq!(parts[0]["items"], 3);
    let (db2, cache) = (fam("i3"), fam("i5"));
    assert_eq!(fam("i4"), db2);
    assert!(db2 != whole && cache != whole && db2 != cache);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM events WHERE kind = 'families_split'"
        ),
        1
    );
    assert_sound(&db);
    // New failures, from another process: each to its value's family; a
    // new value to a family of its own.
    add_lines(
        &db,
        "j",
        [
            failure("n1", 1, 10, "connection refused by db-2:5432 after retries"),
            failure("n2", 1, 11, "connection refused by db-1:5432 after retries"),
            failure("n3", 1, 12, "connection refused by web-9:80 after retries"),
        ],
    );
    assert_eq!((fam("n1"), fam("n2")), (db2, whole));
    let other = fam("n3");
    assert!(![whole, db2, cache].contains(&other), "{other}");
    // A merged family is split where it went; a word a key keeps only the
    // start of is no word to split on.
    let long = |n: usize| format!("{}{n}", "W".repeat(70));
    add_lines(
        &db,
        "k",
        (0..2).map(|n| {
            failure(
                &format!("w{n}"),
                1,
                20 + n as u32,
                &format!("upstream timeout at {} port", long(n)),
            )
        }),
    );
    let wide = family(&db, "w0");
    let refused = fails(dlq(&db).args(["families", "split", &wide.to_string(), "--by", "4"]));
    assert!(refused.contains("64 bytes"), "{refused}");
    // Splitting the same word again: it is no longer a <*>.
    let refused = fails(dlq(&db).args(["families", "split", &whole.to_string(), "--by", "4"]));
    assert!(refused.contains("not a <*>"), "{refused}");
    // A full rebuild keeps the split, and mines the same families again.
    let before = families_of(&db);
    ok(dlq(&db).args(["families", "rebuild", "--all"]));
    assert_eq!(families_of(&db), before);
    let rows = count(&db, "SELECT COUNT(*) FROM families");
    ok(dlq(&db).args(["families", "rebuild", "--all"]));
    assert_eq!(families_of(&db), before);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM families"), rows);
    assert_sound(&db);
    // The listing adds up.
    let listed = json(&ok(dlq(&db).args(["families", "--format", "json"])));
    let total: i64 = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["items"].as_i64().unwrap())
        .sum();
    assert_eq!(total, 11, "{listed}");
    ok(dlq(&db).args(["families", "merge", &db2.to_string(), &cache.to_string()]));
    let refused = fails(dlq(&db).args(["families", "split", &cache.to_string(), "--by", "4"]));
    assert!(
        refused.contains(&format!("was merged into family {db2}")),
        "{refused}"
    );
}

/// `dlq copy --from DB --to TO`, run from a database of its own in `dir`.
fn copy_database(dir: &TempDir, db: &Path, to: &Path) {
    ok(dlq(&dir.join("unused.db"))
        .arg("copy")
        .arg("--from")
        .arg(target(db))
        .arg("--to")
        .arg(target(to)));
}
