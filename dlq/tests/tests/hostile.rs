//! The reproductions of the hostile-input review, each run against the real
//! binary: careless or malicious commands, filters, files and environments
//! get one clear error and no damage.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A database with `n` items in job "j".
fn job(label: &str, n: usize) -> (TempDir, PathBuf) {
    let dir = TempDir::new(label);
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        (0..n).map(|i| item(&format!("i{i:02}"), 1, "2025-01-01T00:00:00Z", "boom")),
    );
    (dir, db)
}

/// The exit code and stderr of a command that must fail.
fn refused(command: &mut Command) -> (i32, String) {
    let output = run(command);
    assert!(!output.status.success(), "{command:?} succeeded");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Makes a named pipe at `path`.
fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

fn alive(pattern: &str) -> usize {
    let output = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).lines().count()
}

#[test]
fn an_empty_command_is_a_usage_error_and_removes_nothing() {
    let (_dir, db) = job("empty-exec", 3);
    for exec in ["", "   ", "\t\n"] {
        let (code, err) = refused(dlq(&db).args(["retry", "j", "--exec", exec]));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("--exec") && err.contains("empty"), "{err}");
    }
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
    // The library refuses it too.
    let tmp = std::env::temp_dir();
    assert!(dlqlite::retry::command::CommandHandler::new(" ", None, &tmp).is_err());
}

#[test]
fn out_of_range_numbers_are_usage_errors_naming_the_flag_or_variable() {
    let (_dir, db) = job("ranges", 1);
    for (args, env, named) in [
        (
            vec!["retry", "j", "--exec", "true", "--timeout", "2e19"],
            None,
            "--timeout",
        ),
        (
            vec!["retry", "j", "--exec", "true", "--timeout=-1"],
            None,
            "--timeout",
        ),
        (
            vec!["retry", "j", "--exec", "true", "--max-retries", "0"],
            None,
            "--max-retries",
        ),
        (
            vec!["retry", "j", "--exec", "true", "--rate", "nan"],
            None,
            "--rate",
        ),
        (vec!["stats"], Some("2147483648"), "busy-timeout-ms"),
        (vec!["stats"], Some("soon"), "busy-timeout-ms"),
    ] {
        let mut command = dlq(&db);
        command.args(&args);
        if let Some(value) = env {
            command.env("DLQ_BUSY_TIMEOUT_MS", value);
        }
        let (code, err) = refused(&mut command);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 1);
}

#[test]
fn time_fields_compare_only_with_times() {
    let (_dir, db) = job("time-text", 4);
    for filter in [
        "last_attempt < \"yesterday\"",
        "last_attempt < \"2025-01-01T00:00:00+25:00\"",
        "first_attempt > 5",
        "failure_count > now - 1d",
    ] {
        for args in [
            vec!["list", "--filter", filter],
            vec![
                "purge",
                "--older-than-days",
                "0",
                "--yes",
                "--filter",
                filter,
            ],
            vec!["retry", "j", "--exec", "true", "--filter", filter],
        ] {
            let (code, err) = refused(dlq(&db).args(&args));
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(err.contains("filter column"), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 4);
    // Real times and `now` still work.
    let listed = ok(dlq(&db).args([
        "list",
        "--format",
        "jsonl",
        "--filter",
        "last_attempt < \"2025-06-01T00:00:00+02:00\" && first_attempt > now - 100000d",
    ]));
    assert_eq!(listed.lines().count(), 4);
}

#[test]
fn deep_filters_are_parse_errors_not_crashes() {
    let (_dir, db) = job("deep-filter", 1);
    for filter in [
        format!("{}item_id == \"x\"", "!".repeat(20_000)),
        format!("{}item_id == \"x\"{}", "(".repeat(5_000), ")".repeat(5_000)),
        vec!["item_id != \"x\""; 5_000].join(" && "),
    ] {
        let (code, err) = refused(dlq(&db).args(["list", "--filter", &filter]));
        // A bad filter is a usage error.
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("filter column"), "{err}");
        assert!(err.len() < 400, "the filter is not echoed whole: {err}");
    }
    // At the limits, a filter still runs.
    let nested = format!("{}item_id != \"x\"{}", "(".repeat(40), ")".repeat(40));
    let chain = vec!["item_id != \"x\""; 200].join(" && ");
    for filter in [nested, chain] {
        let out = ok(dlq(&db).args(["list", "--format", "jsonl", "--filter", &filter]));
        assert_eq!(out.lines().count(), 1);
    }
}

fn nested_item(id: &str, depth: usize) -> String {
    let data = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    item(id, 1, "2025-01-01T00:00:00Z", "deep")
        .to_string()
        .replace(
            &format!("{{\"path\":\"src/{id}.rs\",\"priority\":1}}"),
            &data,
        )
}

#[test]
fn deeply_nested_item_data_is_refused_before_it_reaches_the_database() {
    let dir = TempDir::new("deep-data");
    let db = dir.join("dlq.db");
    let deep = nested_item("deep", 1_500);
    assert!(deep.contains("[[[["), "the template changed: {deep}");
    let lines = format!("{}\n{deep}\n", item("fine", 1, "2025-01-01T00:00:00Z", "x"));
    let output = with_stdin(dlq(&db).args(["add", "--job-id", "j"]), &lines);
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("item 2") && err.contains("item_data") && err.contains("nested"),
        "{err}"
    );
    // One transaction: nothing added.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);

    // Import: that file is rejected with its path and reason, the rest
    // import, into an empty database (one transaction) too.
    let tree = dir.join("tree/mapreduce/dlq/j/items");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("deep.json"), &deep).unwrap();
    std::fs::write(tree.join("almost.json"), nested_item("almost", 800)).unwrap();
    write_json(
        &tree,
        "fine.json",
        &item("fine", 1, "2025-01-01T00:00:00Z", "x"),
    );
    let db2 = dir.join("import.db");
    let output = run(dlq(&db2).args(["import", "--json"]).arg(dir.join("tree")));
    assert_eq!(output.status.code(), Some(1));
    let report = json(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(report["items_new"], 2, "{report}");
    let rejected = report["files_rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 1);
    assert!(rejected[0]["path"].as_str().unwrap().ends_with("deep.json"));
    assert!(rejected[0]["error"].as_str().unwrap().contains("item_data"));
}

#[test]
fn a_background_child_holding_stderr_does_not_outlive_the_timeout() {
    let (_dir, db) = job("bg-child", 2);
    let started = Instant::now();
    let output = run(dlq(&db).args([
        "retry",
        "j",
        "--exec",
        "(trap '' TERM; sleep 301) & sleep 302 & exit 1",
        "--timeout",
        "1",
        "--max-retries",
        "1",
        "--json",
    ]));
    let elapsed = started.elapsed();
    assert_eq!(output.status.code(), Some(1));
    // The timeout (1 s) plus the TERM grace (2 s) and start-up, not 300 s.
    assert!(elapsed < Duration::from_secs(60), "{elapsed:?}");
    assert_eq!(
        strings(
            &db,
            "SELECT error_type FROM failure_history WHERE attempt_number = 2"
        ),
        ["Timeout", "Timeout"]
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive("sleep 30[12]") > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(alive("sleep 30[12]"), 0, "background children survived");
}

#[test]
fn kill_9_of_retry_takes_the_commands_grandchildren_with_it() {
    let (dir, db) = job("kill-grandchildren", 3);
    let marker = dir.join("started");
    let script = format!(
        "echo x >> {}; sleep 311 & sleep 312; true",
        marker.display()
    );
    let mut child = dlq(&db)
        .args(["retry", "j", "--parallel", "3", "--exec", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_lines(&marker, 3);
    assert!(alive("sleep 31[12]") >= 6, "the commands did not start");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive("sleep 31[12]") > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(alive("sleep 31[12]"), 0, "grandchildren outlived dlq");
}

#[cfg(unix)]
#[test]
fn the_item_file_is_private_and_never_a_planted_link() {
    let (dir, db) = job("item-file", 2);
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // The old, predictable names, planted as links to a victim.
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    for n in 0..4 {
        let _ = std::os::unix::fs::symlink(&victim, tmp.join(format!("dlq-item-1-{n}.json")));
    }
    // A stale scratch directory of a process that is gone.
    let stale = tmp.join("dlq-retry-999999999-00000000");
    std::fs::create_dir_all(&stale).unwrap();
    let seen = dir.join("seen");
    let script = format!(
        "stat -c '%a %n' \"$DLQ_ITEM_FILE\" \"$(dirname \"$DLQ_ITEM_FILE\")\" >> {}; \
         jq -e .item_id \"$DLQ_ITEM_FILE\" >/dev/null 2>&1 || grep -q item_id \"$DLQ_ITEM_FILE\"",
        seen.display()
    );
    ok(dlq(&db)
        .env("TMPDIR", &tmp)
        .args(["retry", "j", "--exec", &script]));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let seen = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines.len(), 4, "{seen}");
    for pair in lines.chunks(2) {
        assert!(pair[0].starts_with("600 "), "{seen}");
        assert!(pair[1].starts_with("700 "), "{seen}");
        assert!(pair[1].contains("/dlq-retry-"), "{seen}");
    }
    // Nothing left behind, and the dead run's directory swept.
    let left: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("dlq-retry-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_closed_pipe_is_quiet_for_every_sql_format() {
    let (_dir, db) = job("sql-pipe", 1);
    let query = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) SELECT x FROM c";
    for format in ["jsonl", "json", "csv", "table"] {
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "\"$0\" --db \"$1\" sql --format {format} \"$2\" | head -1 >/dev/null; echo ${{PIPESTATUS:-}}"
            ))
            .arg(env!("CARGO_BIN_EXE_dlq"))
            .arg(target(&db))
            .arg(query)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.is_empty(), "{format}: {err}");
    }
}

#[test]
fn odd_paths_and_inputs_are_one_clear_error() {
    let (dir, db) = job("odd-inputs", 1);
    // An empty query.
    let (code, err) = refused(dlq(&db).args(["sql", "  "]));
    assert_eq!(code, 1);
    assert!(err.contains("empty"), "{err}");
    // Devices and fifos are not trees or export files.
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    for path in [Path::new("/dev/zero"), fifo.as_path()] {
        let (code, err) = refused(dlq(&db).arg("import").arg(path));
        assert_eq!(code, 1);
        assert!(err.contains("not a directory or a regular file"), "{err}");
    }
    // A fifo inside items/ is reported, not silently passed over (nor read).
    let items = dir.join("tree/mapreduce/dlq/j/items");
    std::fs::create_dir_all(&items).unwrap();
    mkfifo(&items.join("stuck.json"));
    let output = run(dlq(&db).args(["import", "--json"]).arg(dir.join("tree")));
    let report = json(&String::from_utf8_lossy(&output.stdout));
    let skipped = report["paths_skipped"].as_array().unwrap();
    assert!(
        skipped
            .iter()
            .any(|s| s["path"].as_str().unwrap().ends_with("stuck.json")),
        "{report}"
    );
    // An item over 64 MiB is refused, naming its position.
    let mut huge = item("huge", 1, "2025-01-01T00:00:00Z", "x");
    huge["item_data"]["blob"] = "y".repeat(65 << 20).into();
    let path = dir.join("huge.json");
    std::fs::write(&path, huge.to_string()).unwrap();
    let (code, err) = refused(dlq(&db).args(["add", "--job-id", "j"]).arg(&path));
    assert_eq!(code, 1);
    assert!(err.contains("item 1") && err.contains("64 MiB"), "{err}");
    // A relative HOME is refused, not used below the working directory.
    let (code, err) = refused(
        Command::new(env!("CARGO_BIN_EXE_dlq"))
            .current_dir(dir.path())
            .env_remove("DLQ_DB")
            .env_remove("PRODIGY_HOME")
            .env("HOME", "relative-home")
            .arg("stats"),
    );
    assert_eq!(code, 1);
    assert!(err.contains("HOME"), "{err}");
    assert!(!dir.join("relative-home").exists());
}

#[test]
fn exports_never_replace_devices_or_write_through_links() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let (dir, db) = job("export-targets", 3);
    // /dev/null stays a device.
    ok(dlq(&db).args(["export", "/dev/null", "--format", "jsonl"]));
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // A fifo is written as a stream (and stays a fifo).
    let fifo = dir.join("pipe.jsonl");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    ok(dlq(&db).arg("export").arg(&fifo));
    assert_eq!(reader.join().unwrap().lines().count(), 3);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // Files are 0600 whatever the umask.
    let out = dir.join("all.json");
    let status = Command::new("sh")
        .arg("-c")
        .arg("umask 000; exec \"$0\" --db \"$1\" export \"$2\"")
        .arg(env!("CARGO_BIN_EXE_dlq"))
        .arg(target(&db))
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The legacy export refuses a non-empty directory, and a link planted
    // inside the tree is never written through, even with --force.
    let tree = dir.join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("stale"), "x").unwrap();
    let (code, err) = refused(
        dlq(&db)
            .arg("export")
            .arg(&tree)
            .args(["--format", "legacy"]),
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("not empty") && err.contains("--force"),
        "{err}"
    );
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, tree.join("dlq")).unwrap();
    let (_, err) = refused(
        dlq(&db)
            .arg("export")
            .arg(&tree)
            .args(["--format", "legacy", "--force"]),
    );
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    // Into an empty directory it works, and every file is 0600.
    let clean = dir.join("clean");
    ok(dlq(&db)
        .arg("export")
        .arg(&clean)
        .args(["--format", "legacy"]));
    let mut files = 0;
    let mut stack = vec![clean];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(d).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                files += 1;
                assert_eq!(meta.permissions().mode() & 0o777, 0o600);
            }
        }
    }
    assert_eq!(files, 4, "three items and an index");
}

#[test]
fn names_and_messages_cannot_drive_the_terminal_or_a_spreadsheet() {
    let dir = TempDir::new("escapes");
    let db = dir.join("dlq.db");
    // A broken file whose name would colour the terminal and forge a line.
    let items = dir.join("tree/mapreduce/dlq/j/items");
    std::fs::create_dir_all(&items).unwrap();
    std::fs::write(items.join("bad\u{1b}[31mname\nrejected: forged.json"), "{").unwrap();
    write_json(
        &items,
        "ok.json",
        &item(
            "=cmd|' /C calc'!A0",
            1,
            "2025-01-01T00:00:00Z",
            "boom \u{202e}gnp.exe\u{1b}[0m",
        ),
    );
    // index.json is a link out of the tree: not read.
    std::os::unix::fs::symlink("/etc/passwd", dir.join("tree/mapreduce/dlq/j/index.json")).unwrap();
    let output = run(dlq(&db).arg("import").arg(dir.join("tree")));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!err.contains('\u{1b}'), "{err:?}");
    let rejected: Vec<&str> = err.lines().filter(|l| l.starts_with("rejected:")).collect();
    assert_eq!(rejected.len(), 1, "{err}");
    assert!(
        rejected[0].contains("bad\\e[31mname\\nrejected: forged.json"),
        "{err}"
    );
    assert!(err.contains("index.json of j: index unreadable"), "{err}");
    // Tables show the escapes, not the characters.
    let table = ok(dlq(&db).arg("list"));
    assert!(
        !table.contains('\u{1b}') && !table.contains('\u{202e}'),
        "{table:?}"
    );
    // CSV neutralises the formula (and --raw-csv does not).
    let csv = ok(dlq(&db).args(["list", "--format", "csv"]));
    assert!(csv.contains(",'=cmd|"), "{csv}");
    let raw = ok(dlq(&db).args(["list", "--format", "csv", "--raw-csv"]));
    assert!(raw.contains(",=cmd|"), "{raw}");
    let export = dir.join("x.csv");
    ok(dlq(&db).arg("export").arg(&export));
    assert!(std::fs::read_to_string(&export)
        .unwrap()
        .contains(",'=cmd|"));
    // HTML: no raw escape or bidi override reaches the page.
    let page = dir.join("r.html");
    ok(dlq(&db).args(["report", "--html"]).arg(&page));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains('\u{1b}') && !html.contains('\u{202e}'));
}

/// A table streams after sizing its columns on a sample: an endless query
/// shown as a table and cut by `head` ends at once instead of collecting
/// rows until memory runs out.
#[test]
fn tables_stream_after_a_sample() {
    let (_dir, db) = job("table-stream", 1);
    let query = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x, 'row ' || x AS label FROM c";
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" --db \"$1\" sql \"$2\" | head -1500 | tail -1")
        .arg(env!("CARGO_BIN_EXE_dlq"))
        .arg(target(&db))
        .arg(query)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = Command::new("pkill")
                .args(["-f", "WITH RECURSIVE c"])
                .status();
            panic!("the table did not stream: still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    let last = String::from_utf8_lossy(&output.stdout);
    // Row 1499 (after the header), aligned like the first ones.
    assert!(last.starts_with("1499  "), "{last:?}");
    assert!(String::from_utf8_lossy(&output.stderr).is_empty());
}

/// Items purged while a retry holds them are accounted for: attempted is
/// always succeeded + failed + lost.
#[test]
fn a_retry_summary_adds_up_when_items_are_purged_under_it() {
    let (dir, db) = job("purged-under-retry", 3);
    let marker = dir.join("started");
    let script = format!("echo x >> {}; sleep 2; exit 1", marker.display());
    let child = dlq(&db)
        .args([
            "retry",
            "j",
            "--json",
            "--max-retries",
            "1",
            "--exec",
            &script,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_lines(&marker, 3);
    ok(dlq(&db).args(["purge", "--older-than-days", "0", "--yes"]));
    let output = child.wait_with_output().unwrap();
    let summary = json(&String::from_utf8_lossy(&output.stdout));
    let n = |key: &str| summary[key].as_u64().unwrap();
    assert_eq!(n("attempted"), 3, "{summary}");
    assert_eq!(n("lost"), 3, "{summary}");
    assert_eq!(
        n("attempted"),
        n("succeeded") + n("failed") + n("lost"),
        "{summary}"
    );
    assert_eq!(n("remaining"), 0);
}

/// Another process plants links while dlq runs: at every name it could
/// guess in the temp directory and inside an export tree. Nothing outside
/// is ever written.
#[test]
fn a_racing_link_planter_writes_nothing_outside() {
    let (dir, db) = job("link-race", 20);
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let tmp = dir.join("tmp");
    let export = dir.join("export");
    std::fs::create_dir_all(&tmp).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let planter = {
        let (stop, victim, tmp, export) =
            (stop.clone(), victim.clone(), tmp.clone(), export.clone());
        std::thread::spawn(move || {
            let mut planted = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Links at the names a careless writer would use, in every
                // directory that exists right now.
                let mut dirs = vec![tmp.clone(), export.clone()];
                let mut i = 0;
                while i < dirs.len() {
                    if let Ok(entries) = std::fs::read_dir(&dirs[i]) {
                        for entry in entries.flatten() {
                            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                                dirs.push(entry.path());
                            }
                        }
                    }
                    i += 1;
                }
                for d in &dirs {
                    for name in [
                        "index.json",
                        "i00.json",
                        "i01.json",
                        "item-0.json",
                        "item-1.json",
                    ] {
                        if std::os::unix::fs::symlink(&victim, d.join(name)).is_ok() {
                            planted += 1;
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            planted
        })
    };
    for _ in 0..5 {
        let _ = run(dlq(&db).env("TMPDIR", &tmp).args([
            "retry",
            "j",
            "--max-retries",
            "1",
            "--exec",
            "cat \"$DLQ_ITEM_FILE\" >/dev/null; exit 1",
        ]));
        let _ = std::fs::remove_dir_all(&export);
        let _ = run(dlq(&db)
            .arg("export")
            .arg(&export)
            .args(["--format", "legacy"]));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let planted = planter.join().unwrap();
    assert!(planted > 0, "the planter never planted");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 20);
}

/// Findings of the second hostile pass, each reproduced.
#[test]
fn far_future_now_and_odd_ids_and_flags() {
    let (dir, db) = job("second-pass", 3);
    // `now + N` past the year 9999 matches nothing, not everything.
    let out = ok(dlq(&db).args([
        "list",
        "--format",
        "jsonl",
        "--filter",
        "last_attempt > now + 3000000d",
    ]));
    assert_eq!(out.lines().count(), 0);
    let taken = dir.join("taken.json");
    ok(dlq(&db)
        .args([
            "requeue",
            "j",
            "--take",
            "--filter",
            "last_attempt > now + 3000000d",
            "-o",
        ])
        .arg(&taken));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
    // Flags that would exhaust threads or overflow time are usage errors.
    for args in [
        vec!["retry", "j", "--exec", "true", "--parallel", "20000"],
        vec!["retry", "j", "--exec", "true", "--rate", "1e-300"],
        vec!["retry", "j", "--exec", "true", "--parallel", "0"],
    ] {
        let (code, err) = refused(dlq(&db).args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
    }
    // Ids no command line could name are refused.
    let (_, err) = refused(dlq(&db).args(["add", "--job-id", ""]).arg(write_json(
        dir.path(),
        "a.json",
        &item("a", 1, "2025-01-01T00:00:00Z", "x"),
    )));
    assert!(err.contains("job id") && err.contains("empty"), "{err}");
    let mut nul = item("a\u{0}b", 1, "2025-01-01T00:00:00Z", "x");
    nul["job_id"] = "j".into();
    let output = with_stdin(dlq(&db).arg("add"), &nul.to_string());
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("NUL"));
    // Usage errors quoting escape sequences do not pass them on.
    let output = run(dlq(&db).args(["list", "--limit", "\u{1b}]0;pwned\u{7}"]));
    assert_eq!(output.status.code(), Some(2));
    assert!(!output.stderr.contains(&0x1b));
    // New database directories are private whatever the umask.
    let nested = dir.join("new/sub/u.db");
    let status = Command::new("sh")
        .arg("-c")
        .arg("umask 000; exec \"$0\" --db \"$1\" capacity")
        .arg(env!("CARGO_BIN_EXE_dlq"))
        .arg(&nested)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    use std::os::unix::fs::PermissionsExt;
    for d in [dir.join("new"), dir.join("new/sub")] {
        assert_eq!(
            std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }
}

#[test]
fn export_destinations_that_are_links_pipes_or_stdout() {
    let (dir, db) = job("export-dests", 30);
    // A link to our own stdout (as /dev/stdout is) writes to stdout.
    let link = dir.join("out-link.jsonl");
    std::os::unix::fs::symlink("/proc/self/fd/1", &link).unwrap();
    let captured = dir.join("captured.jsonl");
    let status = Command::new(env!("CARGO_BIN_EXE_dlq"))
        .arg("--db")
        .arg(target(&db))
        .arg("export")
        .arg(&link)
        .stdout(std::fs::File::create(&captured).unwrap())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::read_to_string(&captured).unwrap().lines().count(),
        30
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // A fifo whose reader goes away early: a failure, not a quiet success,
    // and requeue --take then takes nothing.
    let fifo = dir.join("early.jsonl");
    mkfifo(&fifo);
    let mut big = Vec::new();
    for i in 0..200 {
        let mut value = item(&format!("b{i}"), 1, "2025-01-01T00:00:00Z", "x");
        value["item_data"]["blob"] = "z".repeat(2_000).into();
        big.push(value);
    }
    add_lines(&db, "j", big);
    for args in [
        vec!["export".to_string(), fifo.display().to_string()],
        vec![
            "requeue".to_string(),
            "j".to_string(),
            "--take".to_string(),
            "-o".to_string(),
            fifo.display().to_string(),
        ],
    ] {
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                use std::io::Read;
                let mut first = [0u8; 100];
                let mut file = std::fs::File::open(fifo).unwrap();
                let _ = file.read(&mut first);
            })
        };
        let (code, err) = refused(dlq(&db).args(&args));
        reader.join().unwrap();
        assert_eq!(code, 1, "{args:?}");
        assert!(err.contains("Broken pipe"), "{err}");
    }
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 230);
}

/// Ctrl-C while commands wait for the rate limit: nothing more starts.
#[test]
fn ctrl_c_stops_commands_waiting_for_the_rate_limit() {
    let (dir, db) = job("rate-ctrl-c", 3);
    let marker = dir.join("started");
    let script = format!("echo x >> {}; exit 1", marker.display());
    let child = dlq(&db)
        .args([
            "retry",
            "j",
            "--parallel",
            "3",
            "--rate",
            "0.2",
            "--max-retries",
            "1",
            "--exec",
            &script,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_lines(&marker, 1);
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait_with_output().unwrap().status;
    assert_eq!(status.code(), Some(1), "interrupted");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().lines().count(),
        1,
        "commands started after Ctrl-C"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
}

/// The rest of the first pass: commands run with /bin/sh whatever PATH
/// says; reports and requeue files are 0600; an index.json that is a fifo
/// is not read (the import does not hang).
#[test]
fn path_hijack_modes_and_a_fifo_index() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, db) = job("path-modes-fifo", 2);
    // A fake `sh` first on PATH that would leave a marker.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let marker = dir.join("hijacked");
    std::fs::write(
        bin.join("sh"),
        format!("#!/bin/sh\necho hijacked > {}\nexit 0\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(bin.join("sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let _ = run(dlq(&db).env("PATH", path).args([
        "retry",
        "j",
        "--max-retries",
        "1",
        "--exec",
        "exit 4",
    ]));
    assert!(!marker.exists(), "the command ran through PATH's sh");
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM failure_history WHERE exit_code = 4"
        ),
        2
    );
    // Reports, analyses and requeue files are private under umask 000.
    let report = dir.join("r.html");
    let analysis = dir.join("a.json");
    let requeued = dir.join("q.json");
    let script = "umask 000; \"$0\" --db \"$1\" report --html \"$2\" 2>/dev/null && \
                  \"$0\" --db \"$1\" analyze --export \"$3\" >/dev/null && \
                  \"$0\" --db \"$1\" requeue j --force -o \"$4\" >/dev/null 2>&1 || \
                  \"$0\" --db \"$1\" requeue j -o \"$4\" >/dev/null";
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_dlq"))
        .arg(target(&db))
        .arg(&report)
        .arg(&analysis)
        .arg(&requeued)
        .status()
        .unwrap();
    assert!(status.success());
    for file in [&report, &analysis, &requeued] {
        assert_eq!(
            std::fs::metadata(file).unwrap().permissions().mode() & 0o777,
            0o600,
            "{}",
            file.display()
        );
    }
    // index.json as a fifo: reported, never opened, the items import.
    let job_dir = dir.join("tree/mapreduce/dlq/k");
    std::fs::create_dir_all(job_dir.join("items")).unwrap();
    write_json(
        &job_dir.join("items"),
        "x.json",
        &item("x", 1, "2025-01-01T00:00:00Z", "m"),
    );
    mkfifo(&job_dir.join("index.json"));
    let started = Instant::now();
    let output = run(dlq(&db).args(["import", "--json"]).arg(dir.join("tree")));
    assert!(started.elapsed() < Duration::from_secs(30));
    let report = json(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(report["items_new"], 1, "{report}");
    assert!(report["index_mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["kind"] == "index_unreadable"));
}

/// `DLQ_NOW` (or `--now`) moves "now" for age selection only: it cannot
/// make another run's live leases look expired, and events keep real times.
#[test]
fn a_chosen_now_cannot_take_items_on_a_live_lease() {
    let (dir, db) = job("now-leases", 4);
    let marker = dir.join("started");
    let script = format!("echo x >> {}; sleep 4; exit 1", marker.display());
    let holder = dlq(&db)
        .args([
            "retry",
            "j",
            "--parallel",
            "4",
            "--max-retries",
            "1",
            "--exec",
            &script,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_lines(&marker, 4);
    let second = dir.join("second");
    let output = run(dlq(&db)
        .env("DLQ_NOW", "2100-01-01T00:00:00Z")
        .args(["retry", "j", "--json", "--exec"])
        .arg(format!("echo x >> {}; true", second.display())));
    let summary = json(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(summary["attempted"], 0, "{summary}");
    assert!(
        !second.exists(),
        "a command ran on an item held by another run"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("warning"));
    holder.wait_with_output().unwrap();
    let future = count(
        &db,
        "SELECT COUNT(*) FROM events WHERE time >= '2100-01-01T00:00:00Z'",
    );
    assert_eq!(future, 0, "events stamped with the chosen now");
    // Age selection does take it: with "now" in 2100 every item is old.
    let dry = ok(dlq(&db).env("DLQ_NOW", "2100-01-01T00:00:00Z").args([
        "purge",
        "--older-than-days",
        "30",
        "--dry-run",
        "--json",
    ]));
    assert_eq!(json(&dry)["items"], 4);
}

/// An error that cannot be written to stderr (a full disk) still exits with
/// its code; it must not become a panic (exit 101).
#[test]
fn an_unwritable_stderr_keeps_the_exit_code() {
    let dir = TempDir::new("stderr-full");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "x")]);
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let status = dlq(&db)
        .args(["list", "--job-id", "nosuch"])
        .stderr(full())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1), "an error");
    let status = dlq(&db)
        .args(["list", "--filter", "("])
        .stderr(full())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2), "a usage error found after parsing");
    let status = dlq(&db)
        .args(["list", "--bogus-flag"])
        .stderr(full())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2), "a usage error");
}

/// `dlq copy` between two names of one file (a hard link, a path with `..`)
/// is refused before anything is opened: SQLite keys its WAL and locks by
/// name, so writing one file through two names at once corrupts it.
#[test]
fn a_copy_between_two_names_of_one_file_is_refused() {
    if sqlite_only("hard links of a database file") {
        return;
    }
    let dir = TempDir::new("copy-same-file");
    let db = dir.join("a.db");
    add_lines(&db, "j", [item("i1", 1, "2025-01-01T00:00:00Z", "boom")]);
    let link = dir.join("b.db");
    std::fs::hard_link(&db, &link).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let dotted = dir.join("sub/../a.db");
    let before = dump(&db);
    for to in [&link, &dotted] {
        let err = fails(
            dlq(&dir.join("unused.db"))
                .arg("copy")
                .arg("--from")
                .arg(&db)
                .arg("--to")
                .arg(to),
        );
        assert!(err.contains("are the same database"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert_eq!(dump(&db), before);
}

/// A `--db` that looks like a URL of another scheme, or a misspelt one, is
/// refused in one line and creates nothing (it used to become a SQLite file
/// named `postgress:/...`); `./` makes such a name a file.
#[test]
fn a_misspelt_url_is_refused_not_made_a_file() {
    let dir = TempDir::new("lookalike");
    let input = write_json(
        dir.path(),
        "i.json",
        &item("i", 1, "2025-01-01T00:00:00Z", "x"),
    );
    for (target, says) in [
        (
            "postgress://me:hunter2@localhost/dlq",
            "is not a URL dlq takes",
        ),
        ("postgres:/me@localhost/dlq", "is not a URL dlq takes"),
        ("sqlite:///tmp/x.db", "is not a URL dlq takes"),
        (" postgres://me:hunter2@localhost/dlq", "spaces around it"),
        ("file:x.db", "SQLite would read it as a URI"),
    ] {
        let stderr = fails(
            std::process::Command::new(env!("CARGO_BIN_EXE_dlq"))
                .current_dir(dir.path())
                .args(["--db", target, "add", "--job-id", "j"])
                .arg(&input),
        );
        assert!(stderr.contains(says), "{target}: {stderr}");
        assert!(!stderr.contains("hunter2"), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        // The same as a copy's end, never echoing a password.
        let stderr = fails(
            std::process::Command::new(env!("CARGO_BIN_EXE_dlq"))
                .current_dir(dir.path())
                .args(["copy", "--from", "nothere.db", "--to", target]),
        );
        assert!(!stderr.contains("hunter2"), "{stderr}");
    }
    let stderr = fails(
        std::process::Command::new(env!("CARGO_BIN_EXE_dlq"))
            .current_dir(dir.path())
            .args(["copy", "--from", "a.db", "--to"])
            .arg("host=/tmp user=me password=hunter2 dbname=x"),
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    let made: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(made, [std::ffi::OsString::from("i.json")]);
    // The library refuses it too.
    let err = dlqlite::Dlq::open("sqlite:/x.db").unwrap_err();
    assert_eq!(err.kind(), dlqlite::ErrorKind::InvalidInput, "{err}");
}

/// A database file that is not there gets the same one line from every
/// command that reads, `dlq sql` included (it said "No such file or
/// directory"), and nothing is created.
#[test]
fn a_missing_database_is_one_line_for_every_reader() {
    if sqlite_only("a missing database file") {
        return;
    }
    let dir = TempDir::new("missing-db");
    let db = dir.join("nothere.db");
    for args in [&["list"][..], &["stats"], &["events"], &["sql", "SELECT 1"]] {
        let stderr = fails(dlq(&db).args(args));
        assert!(
            stderr.contains("no database at") && stderr.contains("import or add items first"),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    assert!(!db.exists());
}

/// A duration no database column keeps exactly (a valid u64 above i64's
/// range) is refused with one line, never stored changed.
#[test]
fn a_duration_beyond_what_is_kept_is_refused_not_changed() {
    let dir = TempDir::new("huge-duration");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("ok", 1, "2025-01-01T00:00:00Z", "boom")]);
    let before = dump(&db);
    let mut huge = item("huge", 1, "2025-01-01T00:00:00Z", "boom");
    huge["failure_history"][0]["duration_ms"] = serde_json::json!(u64::MAX);
    let output = with_stdin(dlq(&db).args(["add", "--job-id", "j"]), &huge.to_string());
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("duration_ms 18446744073709551615 is more than the database keeps"),
        "{stderr}"
    );
    assert_eq!(dump(&db), before);
    // Exactly i64::MAX is kept exactly.
    let mut largest = item("largest", 1, "2025-01-01T00:00:00Z", "boom");
    largest["failure_history"][0]["duration_ms"] = serde_json::json!(i64::MAX);
    add_lines(&db, "j", [largest]);
    let out = ok(dlq(&db).args(["export", "-", "--format", "jsonl", "--job-id", "j"]));
    assert!(out.contains("\"duration_ms\":9223372036854775807"), "{out}");
}

/// A requeue --take that writes its file and then cannot take (another
/// writer holds the database past the busy timeout) says exactly that:
/// the file is there, and every item is still in the DLQ.
#[test]
fn a_requeue_take_that_cannot_take_says_the_file_is_written_and_nothing_taken() {
    let dir = TempDir::new("requeue-busy");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        (0..3).map(|i| item(&format!("i{i}"), 1, "2025-01-01T00:00:00Z", "boom")),
    );
    let out = dir.join("out.json");
    let lock = hold_write_lock(&db);
    let err = fails(
        dlq(&db)
            .args(["--busy-timeout-ms", "300", "requeue", "j", "--take", "-o"])
            .arg(&out),
    );
    drop(lock);
    assert!(
        err.contains(&format!(
            "wrote 3 items to {}, but took none out of the DLQ",
            out.display()
        )) && err.contains("all are still there"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(out.exists());
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 3);
}

/// Where `dlq export --format legacy DIR` puts job "j" (no repo), level by
/// level below DIR.
const LEGACY_LEVELS: [&str; 7] = ["dlq", "imported", "j", "mapreduce", "dlq", "j", "items"];

/// A directory an export must never write into: an index.json and an empty
/// items/, as a job directory of someone else's would hold.
fn victim_dir(dir: &TempDir) -> PathBuf {
    let victim = dir.join("victim");
    std::fs::create_dir_all(victim.join("items")).unwrap();
    std::fs::write(victim.join("index.json"), "precious").unwrap();
    victim
}

fn assert_untouched(victim: &Path) {
    let index = std::fs::read_to_string(victim.join("index.json")).unwrap();
    assert!(
        index == "precious",
        "the victim's index.json was replaced ({} bytes now)",
        index.len()
    );
    let written = |dir: &Path, kept: &[&str]| {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| !kept.contains(&name.as_str()))
            .collect::<Vec<_>>()
    };
    for (dir, kept) in [
        (victim.to_path_buf(), &["index.json", "items"][..]),
        (victim.join("items"), &[]),
    ] {
        let written = written(&dir, kept);
        assert!(
            written.is_empty(),
            "{} files written into {}, such as {:?}",
            written.len(),
            dir.display(),
            &written[..written.len().min(3)]
        );
    }
}

/// A link planted at any level of the legacy tree, before the export
/// starts, is refused with one line naming it, `--force` or not, and
/// nothing reaches where it points. A link at index.json is replaced with
/// `--force` (the link, not what it points to).
#[test]
fn a_link_at_any_level_of_a_legacy_tree_is_refused() {
    let (dir, db) = job("legacy-levels", 3);
    let victim = victim_dir(&dir);
    for depth in 0..LEGACY_LEVELS.len() {
        for force in [false, true] {
            let out = dir.join(&format!("out-{depth}-{force}"));
            let mut level = out.clone();
            for name in &LEGACY_LEVELS[..depth] {
                level.push(name);
            }
            std::fs::create_dir_all(&level).unwrap();
            level.push(LEGACY_LEVELS[depth]);
            std::os::unix::fs::symlink(&victim, &level).unwrap();
            let mut command = dlq(&db);
            command.arg("export").arg(&out).args(["--format", "legacy"]);
            if force {
                command.arg("--force");
            }
            let (code, err) = refused(&mut command);
            assert_eq!(code, 1, "{err}");
            if force {
                assert_eq!(err.lines().count(), 1, "{err}");
                assert!(
                    err.contains("symbolic link") && err.contains(&*level.to_string_lossy()),
                    "{err}"
                );
            } else {
                // Not empty: refused before any level is looked at.
                assert!(err.contains("not empty"), "{err}");
            }
            assert_untouched(&victim);
        }
    }
    let out = dir.join("out-index");
    let job_dir = LEGACY_LEVELS[..6]
        .iter()
        .fold(out.clone(), |path, name| path.join(name));
    std::fs::create_dir_all(&job_dir).unwrap();
    std::os::unix::fs::symlink(victim.join("index.json"), job_dir.join("index.json")).unwrap();
    ok(dlq(&db)
        .arg("export")
        .arg(&out)
        .args(["--format", "legacy", "--force"]));
    assert!(std::fs::symlink_metadata(job_dir.join("index.json"))
        .unwrap()
        .is_file());
    assert_untouched(&victim);
}

/// A level of the tree swapped for a link while the export writes into it
/// (the swap made from the progress callback, between two item files, so
/// it is not left to a race): the files after it still go to the directory
/// that was checked, and with `force` the victim's index.json stays.
#[test]
fn a_level_swapped_for_a_link_mid_export_is_not_followed() {
    let dir = TempDir::new("legacy-swap");
    let dlq = dlqlite::Dlq::open(target(&dir.join("dlq.db"))).unwrap();
    // Enough items that the progress callback (every 100 ms) runs before
    // the last one is written (a job holds at most 10,000 by default).
    const ITEMS: usize = 5_000;
    let items: Vec<_> = (0..ITEMS)
        .map(|i| {
            dlqlite::DeadLetteredItem::from_json_str(
                &item(&format!("i{i:05}"), 1, "2025-01-01T00:00:00Z", "boom").to_string(),
            )
            .unwrap()
        })
        .collect();
    dlq.add_many("j", &items).unwrap();
    // The job directory (whose index.json `force` replaces), and the
    // items directory below it.
    for swapped_depth in [6, 7] {
        let victim = victim_dir(&dir);
        let out = dir.join(&format!("out-{swapped_depth}"));
        let level = LEGACY_LEVELS[..swapped_depth]
            .iter()
            .fold(out.clone(), |path, name| path.join(name));
        let moved = level.with_file_name("moved");
        let mut swapped_at = None;
        let report = dlqlite::export::export_legacy_with_progress(&dlq, &out, None, true, |p| {
            if swapped_at.is_none() && p.items_written < ITEMS {
                std::fs::rename(&level, &moved).unwrap();
                std::os::unix::fs::symlink(&victim, &level).unwrap();
                swapped_at = Some(p.items_written);
            }
        })
        .unwrap();
        let swapped_at = swapped_at.expect("the export ended before the first progress call");
        assert!(swapped_at > 0);
        eprintln!("swapped after {swapped_at} of {ITEMS} items");
        assert_untouched(&victim);
        assert_eq!(report.items, ITEMS);
        // Every file is where the checked directory went.
        let items_dir = if swapped_depth == 7 {
            moved.clone()
        } else {
            moved.join("items")
        };
        assert_eq!(std::fs::read_dir(&items_dir).unwrap().count(), ITEMS);
        if swapped_depth == 6 {
            assert!(moved.join("index.json").is_file());
        }
        std::fs::remove_dir_all(&victim).unwrap();
    }
}

/// The same through the real binary, with a racer instead of a hook: as
/// soon as the items directory exists it is renamed away and a link to the
/// victim put in its place. Whether the export then fails or finishes, not
/// one file lands in the victim.
#[test]
fn a_racer_swapping_the_items_directory_writes_nothing_outside() {
    let (dir, db) = job("legacy-race", 0);
    add_lines(
        &db,
        "j",
        (0..3000).map(|i| item(&format!("i{i:04}"), 1, "2025-01-01T00:00:00Z", "boom")),
    );
    let victim = victim_dir(&dir);
    let out = dir.join("out");
    let items = LEGACY_LEVELS
        .iter()
        .fold(out.clone(), |path, name| path.join(name));
    let racer = {
        let (items, victim) = (items.clone(), victim.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                if std::fs::symlink_metadata(&items).is_ok_and(|m| m.is_dir())
                    && std::fs::rename(&items, items.with_file_name("moved")).is_ok()
                {
                    std::os::unix::fs::symlink(&victim, &items).unwrap();
                    return true;
                }
                std::thread::yield_now();
            }
            false
        })
    };
    let output = run(dlq(&db)
        .arg("export")
        .arg(&out)
        .args(["--format", "legacy", "--force"]));
    assert!(racer.join().unwrap(), "the racer never swapped");
    if !output.status.success() {
        // The swap came between the items directory's creation and its
        // opening: refused as a link.
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.contains("symbolic link"), "{err}");
    }
    assert_untouched(&victim);
}

/// A leap-second attempt is stored in a form SQLite's date functions read
/// (they read `23:59:60` as NULL, so the README's per-day query dropped
/// it), and comes back out exactly as it came in.
#[test]
fn a_leap_second_attempt_is_counted_per_day_and_exported_as_it_came() {
    if sqlite_only("the stored text form is SQLite's") {
        return;
    }
    let dir = TempDir::new("leap-second");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        [item("leap", 1, "2016-12-31T23:59:60.5Z", "boom")],
    );
    let days = ok(dlq(&db).args([
        "sql",
        "SELECT date(timestamp) AS day, julianday(timestamp) IS NOT NULL AS known, COUNT(*) AS n FROM failure_log GROUP BY day",
        "--format",
        "csv",
    ]));
    assert_eq!(days.lines().nth(1), Some("2016-12-31,1,1"), "{days}");
    let exported = ok(dlq(&db).args(["export", "-", "--format", "jsonl"]));
    let value = json(exported.lines().next().unwrap());
    assert_eq!(
        value["failure_history"][0]["timestamp"], "2016-12-31T23:59:60.500Z",
        "{value}"
    );
    assert_eq!(value["last_attempt"], "2016-12-31T23:59:60.500Z", "{value}");
}

/// A single output file (`--output`, `export FILE`, reports) is written
/// into the directory it was started in, held by descriptor: that
/// directory swapped for a link to another before the commit does not
/// move the file there.
#[test]
fn an_output_file_lands_in_the_directory_it_started_in() {
    use std::io::Write;
    let dir = TempDir::new("outfile-swap");
    let out = dir.join("out");
    let victim = dir.join("victim");
    std::fs::create_dir(&out).unwrap();
    std::fs::create_dir(&victim).unwrap();
    let mut file = dlqlite::outfile::OutputFile::create(&out.join("report.json")).unwrap();
    file.file().write_all(b"{}").unwrap();
    std::fs::rename(&out, dir.join("moved")).unwrap();
    std::os::unix::fs::symlink(&victim, &out).unwrap();
    file.commit().unwrap();
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    assert_eq!(std::fs::read(dir.join("moved/report.json")).unwrap(), b"{}");
}

/// No output flag may replace the database, its -wal or its -shm (under
/// any name): renamed over, they took every commit with them.
#[test]
fn an_output_never_replaces_the_database_or_its_wal() {
    if sqlite_only("a server database has no file") {
        return;
    }
    let dir = TempDir::new("output-over-db");
    let db = dir.join("e.db");
    add_lines(
        &db,
        "J",
        (0..5).map(|n| item(&format!("i{n}"), 1, "2025-01-01T00:00:00Z", "boom")),
    );
    let link = dir.join("alias.db");
    std::fs::hard_link(&db, &link).unwrap();
    let before = dump(&db);
    let wal = dir.join("e.db-wal");
    // The WAL exists while a handle holds the database open.
    let _held = dlqlite::Dlq::open(&db).unwrap();
    assert!(wal.exists());
    for args in [
        vec![
            "metrics".to_string(),
            "--output".into(),
            wal.display().to_string(),
        ],
        vec![
            "export".into(),
            db.display().to_string(),
            "--format".into(),
            "json".into(),
        ],
        vec![
            "export".into(),
            link.display().to_string(),
            "--format".into(),
            "json".into(),
        ],
        vec!["report".into(), "--html".into(), db.display().to_string()],
        vec![
            "analyze".into(),
            "--export".into(),
            db.display().to_string(),
        ],
    ] {
        let error = fails(dlq(&db).args(&args));
        assert!(
            error.contains("refusing to write over it"),
            "{args:?}: {error}"
        );
        assert_eq!(error.trim().lines().count(), 1, "{error}");
    }
    drop(_held);
    assert_eq!(dump(&db), before);
}

/// `-` is stdout, which a legacy tree cannot go to: refused in one line,
/// no directory named `-` made. A watch cursor that is the database is
/// refused before it is opened.
#[test]
fn a_legacy_export_to_stdout_and_a_cursor_that_is_the_database_are_refused() {
    let dir = TempDir::new("legacy-dash");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2025-01-01T00:00:00Z", "boom")]);
    let output = run(dlq(&db)
        .current_dir(dir.path())
        .args(["export", "-", "--format", "legacy"]));
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("stdout"), "{error}");
    assert_eq!(error.trim().lines().count(), 1, "{error}");
    assert!(!dir.join("-").exists());
    if !on_postgres() {
        let error = fails(
            dlq(&db)
                .args(["watch", "--once", "--since-cursor"])
                .arg(&db),
        );
        assert!(error.contains("is the database"), "{error}");
    }
}

/// A reader that goes away ends every command's output quietly: no panic
/// from a text report (analyze, stats, families show printed with
/// `println!` and panicked on the broken pipe, exit 101).
#[test]
fn a_closed_stdout_ends_every_text_report_quietly() {
    let dir = TempDir::new("closed-stdout");
    let db = dir.join("dlq.db");
    add_lines(
        &db,
        "j",
        (0..50).map(|n| {
            item(
                &format!("i{n}"),
                1,
                "2025-01-01T00:00:00Z",
                &format!("cause {n} happened"),
            )
        }),
    );
    for args in [
        vec!["analyze"],
        vec!["stats"],
        vec!["families", "show", "1"],
        vec!["families"],
    ] {
        let mut child = dlq(&db)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(output.status.success(), "{args:?}: {output:?}");
    }
}
