//! The command line's conventions, through the real binary: tables that
//! fit (COLUMNS, --wide), times and messages as tables show them, what a
//! cut or empty listing says, one human line on stderr (and --json on
//! stdout) from every command that changes something, and one error
//! convention (exit 1 for what is not there, with a close name; exit 2 for
//! usage).

use crate::common::{add_lines, dlq, item, json, ok, on_postgres, run, TempDir};
use std::path::{Path, PathBuf};
use std::process::Output;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A database with `n` items in job "j", the first one with a long
/// multi-line message whose useful line is not the first.
fn items(dir: &TempDir, n: usize) -> PathBuf {
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "mapreduce-20251123_194253",
        (0..n).map(|i| {
            let message = if i == 0 {
                format!(
                    "   Compiling foo v0.1.0\nerror: the build failed {}\nnote: see above",
                    "because of a very long reason ".repeat(6)
                )
            } else {
                format!("timed out after {i}s")
            };
            item(
                &format!("item_{i}"),
                1,
                &format!("2025-11-01T00:{:02}:{:02}.123456789Z", i / 60, i % 60),
                &message,
            )
        }),
    );
    db
}

fn output(db: &Path, args: &[&str]) -> Output {
    run(dlq(db).args(args))
}

#[test]
fn tables_fit_the_width_they_are_given_and_wide_cuts_nothing() {
    let dir = TempDir::new("conv-width");
    let db = items(&dir, 3);
    let narrow = text(
        &dlq(&db)
            .env("COLUMNS", "80")
            .arg("list")
            .output()
            .unwrap()
            .stdout,
    );
    assert_eq!(narrow.lines().count(), 4, "{narrow}");
    for line in narrow.lines() {
        assert!(
            line.chars().count() <= 80,
            "{} > 80: {line}",
            line.chars().count()
        );
    }
    assert!(narrow.contains('…'), "long cells are cut with …: {narrow}");
    // The message is shown by its useful line, not the compiler preamble.
    assert!(narrow.contains("error: the build failed"), "{narrow}");
    assert!(!narrow.contains("Compiling"), "{narrow}");
    // Times to the second, UTC, as filters take them.
    assert!(narrow.contains("2025-11-01T00:00:00Z"), "{narrow}");
    assert!(!narrow.contains(".123"), "{narrow}");

    let wide = text(
        &dlq(&db)
            .env("COLUMNS", "80")
            .args(["list", "--wide"])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(wide.lines().any(|line| line.chars().count() > 80), "{wide}");
    assert!(!wide.contains('…'), "{wide}");
    assert!(
        wide.contains("ELIGIBLE") && wide.contains("REVIEW"),
        "{wide}"
    );
    assert!(wide.contains(
        &"because of a very long reason "
            .repeat(6)
            .trim_end()
            .to_string()
    ));

    let relative = ok(dlq(&db).args(["list", "--relative"]));
    assert!(relative.contains(" ago"), "{relative}");
    assert!(!relative.contains("2025-11-01T"), "{relative}");
}

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    let dir = TempDir::new("conv-colour");
    let db = items(&dir, 2);
    // Into a pipe: none, unless --color always.
    let plain = ok(dlq(&db).arg("list"));
    assert!(!plain.contains('\x1b'), "{plain:?}");
    let forced = ok(dlq(&db).args(["list", "--color", "always"]));
    assert!(forced.contains("\x1b["), "{forced:?}");
    // An explicit --color always wins over NO_COLOR (no-color.org).
    let over = ok(dlq(&db)
        .env("NO_COLOR", "1")
        .args(["list", "--color", "always"]));
    assert!(over.contains("\x1b[38;5;"), "{over:?}");
    let never = ok(dlq(&db).args(["list", "--color", "never"]));
    assert!(!never.contains('\x1b'), "{never:?}");
    // Machine formats never.
    let csv = ok(dlq(&db).args(["list", "--color", "always", "--format", "csv"]));
    assert!(!csv.contains('\x1b'), "{csv:?}");
}

#[test]
fn a_cut_or_empty_listing_says_so() {
    let dir = TempDir::new("conv-cut");
    let db = items(&dir, 60);
    let out = output(&db, &["list"]);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout).lines().count(), 51);
    assert_eq!(
        text(&out.stderr),
        "showing 50 of 60 items (--limit 0 for all)\n"
    );
    let all = output(&db, &["list", "--limit", "0"]);
    assert_eq!(text(&all.stdout).lines().count(), 61);
    assert_eq!(text(&all.stderr), "");
    let filtered = output(
        &db,
        &[
            "list",
            "--limit",
            "5",
            "--filter",
            "item_id contains \"item_1\"",
        ],
    );
    // item_1 and item_10..item_19: 11 match.
    assert_eq!(
        text(&filtered.stderr),
        "showing 5 of 11 items (--limit 0 for all)\n"
    );

    let none = output(&db, &["list", "--filter", "item_id == \"nope\""]);
    assert!(none.status.success());
    assert_eq!(text(&none.stdout), "", "no bare header");
    assert_eq!(text(&none.stderr), "no items match\n");
    // Machine formats stay well formed.
    let empty = ok(dlq(&db).args([
        "list",
        "--format",
        "json",
        "--filter",
        "item_id == \"nope\"",
    ]));
    assert_eq!(json(&empty), serde_json::json!([]));

    let events = output(&db, &["events", "--limit", "3"]);
    assert_eq!(text(&events.stdout).lines().count(), 4);
    assert_eq!(
        text(&events.stderr),
        "showing the newest 3 events (--limit 0 for all)\n"
    );

    // analyze on an empty database says so once.
    let empty_dir = TempDir::new("conv-empty");
    let empty_db = empty_dir.join("dlq.db");
    ok(dlq(&empty_db).args(["capacity", "--set", "10", "--yes"]));
    let analysis = output(&empty_db, &["analyze"]);
    assert!(analysis.status.success());
    assert_eq!(text(&analysis.stdout), "");
    assert_eq!(
        text(&analysis.stderr),
        "the database holds no items: nothing to analyse\n"
    );
}

#[test]
fn jobs_take_every_listing_format() {
    let dir = TempDir::new("conv-jobs");
    let db = items(&dir, 2);
    let csv = ok(dlq(&db).args(["jobs", "--format", "csv"]));
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "job_id,repo,item_count,eligible_count,manual_review_count,max_items,updated_at,created_at"
    );
    assert!(lines
        .next()
        .unwrap()
        .starts_with("mapreduce-20251123_194253,,2,2,0,,"));
    let old = json(&ok(dlq(&db).args(["jobs", "--json"])));
    let new = json(&ok(dlq(&db).args(["jobs", "--format", "json"])));
    assert_eq!(old, new);
    assert_eq!(new[0]["item_count"], 2);
    let lines = ok(dlq(&db).args(["jobs", "--format", "jsonl"]));
    assert_eq!(
        json(lines.lines().next().unwrap())["job_id"],
        "mapreduce-20251123_194253"
    );
}

#[test]
fn commands_that_change_something_say_what_on_stderr_and_json_on_request() {
    let dir = TempDir::new("conv-actions");
    let db = items(&dir, 4);
    let job = "mapreduce-20251123_194253";

    let mark = output(&db, &["mark", "item_1", "--ineligible", "--manual-review"]);
    assert!(mark.status.success());
    assert_eq!(text(&mark.stdout), "");
    assert_eq!(
        text(&mark.stderr),
        format!("marked item_1 of job {job}: not eligible, needs manual review\n")
    );
    let marked = json(&ok(dlq(&db).args([
        "mark",
        "item_1",
        "--eligible",
        "--json",
    ])));
    assert_eq!(marked["reprocess_eligible"], true);
    assert_eq!(marked["manual_review_required"], true);

    let capacity = output(&db, &["capacity", "--job-id", job, "--set", "3", "--yes"]);
    assert_eq!(text(&capacity.stdout), "");
    assert_eq!(
        text(&capacity.stderr),
        format!(
            "capacity of job {job}: 3 (was 10000, the default); evicted 1 item over it (see `dlq events --kind evicted`)\n"
        )
    );

    let out = dir.join("requeue.json");
    let requeue = output(&db, &["requeue", job, "-o", out.to_str().unwrap()]);
    assert_eq!(text(&requeue.stdout), "");
    assert_eq!(
        text(&requeue.stderr),
        format!("wrote 3 items to {}\n", out.display())
    );

    let export = dir.join("all.jsonl");
    let exported = output(&db, &["export", export.to_str().unwrap()]);
    assert_eq!(text(&exported.stdout), "");
    assert_eq!(
        text(&exported.stderr),
        format!("exported 3 items to {}\n", export.display())
    );
    let legacy = dir.join("legacy");
    let tree = output(
        &db,
        &["export", legacy.to_str().unwrap(), "--format", "legacy"],
    );
    assert_eq!(text(&tree.stdout), "", "no JSON unless --json");
    assert_eq!(
        text(&tree.stderr),
        format!("exported 3 items of 1 job to {}\n", legacy.display())
    );

    let purge = output(
        &db,
        &[
            "--now",
            "2025-11-02T00:00:00Z",
            "purge",
            "--older-than-days",
            "1",
            "--yes",
            "--json",
        ],
    );
    assert!(purge.status.success());
    assert_eq!(json(&text(&purge.stdout))["items"], 0);
    assert!(
        text(&purge.stderr).ends_with("removed 0 items last failed before 2025-11-01T00:00:00Z\n"),
        "{}",
        text(&purge.stderr)
    );

    let clear = output(&db, &["clear", job, "--yes"]);
    assert_eq!(text(&clear.stdout), "");
    assert_eq!(
        text(&clear.stderr),
        format!("removed 3 items of job {job}\n")
    );
}

#[test]
fn json_summaries_keep_the_line_for_people() {
    let dir = TempDir::new("conv-json");
    let db = items(&dir, 2);
    let file = dir.join("two.jsonl");
    ok(dlq(&db).arg("export").arg(&file));
    let other = dir.join("other.db");
    for args in [vec!["add", "--json"], vec!["import", "--json"]] {
        let out = run(dlq(&other).args(&args).arg(&file));
        assert!(out.status.success(), "{args:?}");
        assert!(json(&text(&out.stdout)).is_object(), "{args:?}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("2 unchanged") || err.contains("2 new"),
            "{args:?}: {err}"
        );
    }
    // A usage error with clap's possible values: one line.
    let out = output(&db, &["list", "--format", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "dlq: error: invalid value 'xml' for '--format <FORMAT>' [possible values: table, json, jsonl, csv] (see --help)\n"
    );
}

#[test]
fn one_error_convention() {
    let dir = TempDir::new("conv-errors");
    let db = items(&dir, 2);
    let job = "mapreduce-20251123_194253";
    let refused = |args: &[&str]| {
        let out = output(&db, args);
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        (out.status.code(), err)
    };
    // Not there: exit 1, with the close name.
    for args in [
        vec!["list", "--job-id", "mapreduce-20251123_194235"],
        vec!["stats", "--job-id", "MAPREDUCE-20251123_194253"],
        vec!["events", "--job-id", "mapreduce-20251123_19425"],
        vec!["clear", "mapreduce-2025112_194253", "--yes"],
    ] {
        let (code, err) = refused(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!("did you mean \"{job}\"?")),
            "{args:?}: {err}"
        );
    }
    let (code, err) = refused(&["list", "--job-id", "nosuch"]);
    assert_eq!(code, Some(1));
    assert_eq!(err, "dlq: error: job \"nosuch\" not found\n");
    let (code, _) = refused(&["inspect", "nosuch"]);
    assert_eq!(code, Some(1));
    let (code, err) = refused(&["retry", "--status", "mapreduce-20251123_19425"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("did you mean"), "{err}");
    let none = output(&db, &["retry", "--status"]);
    assert!(none.status.success());
    assert_eq!(text(&none.stdout), "");
    assert_eq!(text(&none.stderr), "no retry runs recorded\n");

    // Usage: exit 2.
    let (code, err) = refused(&["mark", "item_1"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = refused(&["list", "--filter", "failure_count > \"x\""]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("column 17") && err.contains("failure_count is a number"),
        "{err}"
    );
    // An unknown kind is not there, as an unknown job: exit 1.
    let (code, err) = refused(&["events", "--kind", "evictd"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("did you mean \"evicted\"?") && err.contains("job_removed"),
        "{err}"
    );
    let (code, err) = refused(&["purge", "--older-than-days", "0"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.split(" last failed before ").next().unwrap(),
        "dlq: error: will not remove 2 items"
    );
    assert!(
        err.ends_with("without confirmation, and there is no terminal to ask on: pass --yes\n"),
        "{err}"
    );
    let (code, err) = refused(&["clear", job]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "will not remove all 2 items of job {job} without confirmation"
        )),
        "{err}"
    );
    assert_eq!(
        crate::common::count(&db, "SELECT COUNT(*) FROM items"),
        2,
        "nothing removed"
    );
}

#[test]
fn stats_name_each_top_signature_by_type_and_message() {
    let dir = TempDir::new("conv-stats");
    let db = items(&dir, 3);
    let stats = ok(dlq(&db).arg("stats"));
    let header = stats.lines().find(|l| l.starts_with("ITEMS")).unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["ITEMS", "SIGNATURE", "TYPE", "MESSAGE"]
    );
    assert!(
        stats.contains("timed out after 2s") || stats.contains("timed out after 1s"),
        "{stats}"
    );
    assert!(stats.contains("error: the build failed"), "{stats}");
}

#[test]
fn an_interrupted_export_leaves_no_half_file() {
    let dir = TempDir::new("conv-interrupt");
    let db = dir.join("dlq.db");
    ok(dlq(&db).args(["capacity", "--set", "0", "--yes"]));
    let big = "x".repeat(2_000);
    // Enough that the export is still writing when the interrupt comes;
    // PostgreSQL hands the rows over more slowly (and loads them 20x more
    // slowly), so fewer do.
    let items = if on_postgres() { 4_000 } else { 20_000 };
    add_lines(
        &db,
        "j",
        (0..items).map(|i| {
            let mut value = item(&format!("i{i}"), 1, "2025-01-01T00:00:00Z", "boom");
            value["item_data"] = serde_json::json!({ "blob": big });
            value
        }),
    );
    let out_dir = dir.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let mut child = dlq(&db)
        .arg("export")
        .arg(out_dir.join("all.json"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the file beside the destination exists.
    let started = std::time::Instant::now();
    let mut interrupted = false;
    while started.elapsed() < std::time::Duration::from_secs(30) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::fs::read_dir(&out_dir).unwrap().next().is_some() {
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            interrupted = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let output = child.wait_with_output().unwrap();
    if !interrupted || output.status.code() == Some(0) {
        // The export won the race: nothing to check.
        return;
    }
    assert_eq!(output.status.code(), Some(130));
    assert!(
        text(&output.stderr).contains("interrupted: nothing written to"),
        "{}",
        text(&output.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn json_output_escapes_what_a_terminal_would_act_on_and_means_the_same() {
    let dir = TempDir::new("conv-json-escape");
    let db = dir.join("dlq.db");
    let id = "bad\u{9b}31m\u{202e}id\u{7f}";
    add_lines(
        &db,
        "j",
        [item(id, 1, "2025-01-01T00:00:00Z", "boom\u{2066}")],
    );
    for args in [
        vec!["list", "--format", "json"],
        vec!["list", "--format", "jsonl"],
        vec!["inspect", id],
        vec!["stats", "--json"],
        vec!["analyze", "--json"],
    ] {
        let out = ok(dlq(&db).args(&args));
        assert!(
            !out.chars()
                .any(|c| matches!(c, '\u{9b}' | '\u{202e}' | '\u{7f}' | '\u{2066}')),
            "{args:?}: {out:?}"
        );
        let first = if args.contains(&"jsonl") {
            out.lines().next().unwrap().to_string()
        } else {
            out.clone()
        };
        // Still JSON.
        json(&first);
    }
    let listed = json(&ok(dlq(&db).args(["list", "--format", "json"])));
    assert_eq!(listed[0]["item_id"], id, "the same id once parsed");
}

/// Lowering a capacity evicts at once: like every command that removes
/// items, it asks first, and without a terminal it needs --yes. A capacity
/// that evicts nothing needs no confirmation.
#[test]
fn a_capacity_that_evicts_asks_first() {
    let dir = TempDir::new("capacity-confirm");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "J",
        (0..5).map(|i| {
            item(
                &format!("i{i}"),
                1,
                &format!("2025-01-0{}T00:00:00Z", i + 1),
                "x",
            )
        }),
    );
    let evicted =
        || crate::common::count(&db, "SELECT COUNT(*) FROM events WHERE kind = 'evicted'");
    let refused = output(&db, &["capacity", "--job-id", "J", "--set", "2"]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = text(&refused.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("evict 3 items of job J") && stderr.contains("--yes"),
        "{stderr}"
    );
    assert_eq!(crate::common::count(&db, "SELECT COUNT(*) FROM items"), 5);
    assert_eq!(evicted(), 0);
    // Raising it, or a default no job follows, evicts nothing: no question.
    ok(dlq(&db).args(["capacity", "--job-id", "J", "--set", "10"]));
    ok(dlq(&db).args(["capacity", "--set", "1"]));
    assert_eq!(crate::common::count(&db, "SELECT COUNT(*) FROM items"), 5);
    // The default binds a job without an override: --unset would evict.
    let refused = output(&db, &["capacity", "--job-id", "J", "--unset"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    ok(dlq(&db).args(["capacity", "--job-id", "J", "--set", "2", "--yes"]));
    assert_eq!(crate::common::count(&db, "SELECT COUNT(*) FROM items"), 2);
    assert_eq!(evicted(), 3);
    // The two newest stay.
    assert_eq!(
        crate::common::strings(&db, "SELECT item_id FROM items ORDER BY item_id"),
        ["i3", "i4"]
    );
}

/// The operations commands refuse, as usage errors, what they would not
/// act on, and the ones that set something do not create a database at a
/// mistyped path (where the setting would never apply to anything).
#[test]
fn operations_commands_refuse_what_they_would_not_act_on() {
    let dir = TempDir::new("ops-refusals");
    let db = items(&dir, 3);
    for args in [
        // A filter that would narrow nothing.
        &[
            "check",
            "--max-new",
            "1",
            "--per",
            "1h",
            "--filter",
            "failure_count > 1",
        ][..],
        &["check", "--max-items", "1", "--name", &"n".repeat(201)],
        &["retention", "set", "--job-id", " ", "--max-age", "7d"],
        &["categories", "set", "", "transient"],
        &["metrics", "--output", "m.prom", "--mode", "0"],
        &["metrics", "--output", "m.prom", "--mode", "0755"],
    ] {
        let output = output(&db, args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&output.stderr)
        );
        assert_eq!(text(&output.stderr).lines().count(), 1, "{args:?}");
    }
    let missing = dir.join("typo.db");
    for args in [
        &["categories", "set", "QuotaExceeded", "transient"][..],
        &["retention", "set", "--max-age", "7d"],
        &["retention", "apply"],
    ] {
        let output = output(&missing, args);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            text(&output.stderr)
        );
        assert!(text(&output.stderr).contains("no database"), "{args:?}");
        assert!(!missing.exists(), "{args:?} created {}", missing.display());
    }
}
