//! What `dlq` does differently on a terminal: the progress bars of import,
//! export, purge and retry (drawn on a pseudo-terminal, never into a pipe or
//! a file), coloured tables (unless NO_COLOR or --color never), and the
//! stdin hint of `dlq add`. The pseudo-terminal comes from
//! `script` (util-linux; Debian's bsdutils, which scripts/test installs if
//! missing).

use crate::common::{add_lines, count, dlq, item, ok, run, target, with_stdin, TempDir};
use std::path::Path;
use std::process::{Command, Stdio};

/// `arg` quoted for sh.
fn quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// Runs `dlq --db DB ARGS` with its stdin, stdout and stderr on a
/// pseudo-terminal (stdout into `stdout` instead, when given), feeding it
/// `input`; returns its exit status and what the terminal showed.
fn on_pty_status(
    db: &Path,
    args: &[&str],
    stdout: Option<&Path>,
    input: &str,
) -> (Option<i32>, String) {
    on_pty_env(db, args, stdout, input, &[])
}

/// [`on_pty_status`] with variables set in dlq's environment.
fn on_pty_env(
    db: &Path,
    args: &[&str],
    stdout: Option<&Path>,
    input: &str,
    vars: &[(&str, &str)],
) -> (Option<i32>, String) {
    use std::io::Write;
    let mut line = String::from("exec env");
    for (name, value) in vars {
        line += &format!(" {}", quote(&format!("{name}={value}")));
    }
    line += &format!(
        " {} --db {}",
        quote(env!("CARGO_BIN_EXE_dlq")),
        quote(&target(db).display().to_string())
    );
    for arg in args {
        line += " ";
        line += &quote(arg);
    }
    if let Some(path) = stdout {
        line += " > ";
        line += &quote(&path.display().to_string());
    }
    let mut child = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .env("TERM", "xterm")
        .env_remove("DLQ_DB")
        .env_remove("DLQ_NOW")
        .env_remove("NO_COLOR")
        .env("PRODIGY_HOME", db.parent().unwrap().join("prodigy-home"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    // script passes its stdin on to the terminal, and its end as an EOF.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    // With -e, script exits with the command's status.
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// [`on_pty_status`] of a command that succeeds.
fn on_pty(db: &Path, args: &[&str], stdout: Option<&Path>, input: &str) -> String {
    let (status, screen) = on_pty_status(db, args, stdout, input);
    assert_eq!(status, Some(0), "{screen:?}");
    screen
}

/// A bar was drawn: its heading, and the line clearing indicatif does
/// between frames.
fn assert_bar(screen: &str, heading: &str) {
    assert!(
        screen.contains(heading) && screen.contains("\x1b[2K"),
        "no {heading:?} progress bar on the terminal: {screen:?}"
    );
}

/// Text for a pipe or a file: no bar, no carriage return, no escape code.
fn assert_plain(stderr: &[u8]) {
    let text = String::from_utf8_lossy(stderr);
    assert!(
        !text.contains('\r') && !text.contains('\x1b'),
        "terminal control in redirected stderr: {text:?}"
    );
}

/// The terminal's lines as they are left on it (script turns \n into
/// \r\n): what follows the last line clearing of each.
fn screen_lines(screen: &str) -> Vec<&str> {
    screen
        .split("\r\n")
        .map(|line| line.rsplit("\x1b[2K").next().unwrap_or(line))
        .collect()
}

fn tree(dir: &TempDir) -> std::path::PathBuf {
    let tree = dir.join("tree");
    let spec = dlqlite::generate::TreeSpec {
        jobs: 2,
        items_per_job: 150,
        attempt: 1,
        seed: 7,
    };
    assert_eq!(dlqlite::generate::write_tree(&tree, &spec).unwrap(), 300);
    tree
}

fn three_items(db: &Path) {
    add_lines(
        db,
        "J",
        (0..3).map(|n| item(&format!("i{n}"), 1, "2025-01-01T00:00:00Z", "boom")),
    );
}

#[test]
fn import_draws_a_bar_on_a_terminal_and_none_into_a_pipe() {
    let dir = TempDir::new("pty-import");
    let tree = tree(&dir);
    let tree = tree.to_str().unwrap();

    let screen = on_pty(&dir.join("a.db"), &["import", tree], None, "");
    assert_bar(&screen, "import: ");
    // The bar is gone before the summary: its line is whole and clean.
    assert!(
        screen_lines(&screen).contains(
            &"2 job(s), 300 file(s): 300 new, 0 merged, 0 unchanged, 0 rejected, 0 index mismatch(es)"
        ),
        "{screen:?}"
    );

    // --json on a terminal prints what it prints into a pipe.
    let on_terminal = dir.join("pty.json");
    let screen = on_pty(
        &dir.join("b.db"),
        &["import", "--json", tree],
        Some(&on_terminal),
        "",
    );
    assert_bar(&screen, "import: ");
    let piped = run(dlq(&dir.join("c.db")).args(["import", "--json", tree]));
    assert!(piped.status.success());
    assert_plain(&piped.stderr);
    // Only the summary line for people.
    assert_eq!(
        String::from_utf8_lossy(&piped.stderr),
        "2 job(s), 300 file(s): 300 new, 0 merged, 0 unchanged, 0 rejected, 0 index mismatch(es)\n"
    );
    assert_eq!(std::fs::read(&on_terminal).unwrap(), piped.stdout);
}

#[test]
fn retry_bar_counts_done_of_total_on_a_terminal_only() {
    let dir = TempDir::new("pty-retry");
    let db = dir.join("r.db");
    three_items(&db);
    // One at a time and a little slow, so the bar is redrawn with the
    // run's total while it goes.
    let args = [
        "retry",
        "J",
        "--exec",
        "sleep 0.3; exit 1",
        "--parallel",
        "1",
        "--max-retries",
        "1",
    ];
    let (status, screen) = on_pty_status(&db, &args, None, "");
    assert_eq!(status, Some(1), "{screen:?}");
    assert_bar(&screen, "retry: ");
    assert!(screen.contains("/3 items"), "no total in {screen:?}");
    assert!(
        screen_lines(&screen).contains(
            &"J: 3 item(s) tried (3 attempt(s)): 0 succeeded and removed, 3 failed again, 0 skipped as not eligible; 3 remaining"
        ),
        "{screen:?}"
    );

    let piped = run(dlq(&db).args(args));
    assert_eq!(piped.status.code(), Some(1));
    assert_plain(&piped.stderr);
    assert!(String::from_utf8_lossy(&piped.stderr).starts_with("J: 3 item(s) tried"));
}

#[test]
fn export_bar_on_a_terminal_none_into_a_pipe_or_over_its_own_output() {
    let dir = TempDir::new("pty-export");
    let db = dir.join("e.db");
    let tree = tree(&dir);
    assert!(run(dlq(&db).arg("import").arg(&tree)).status.success());

    let out = dir.join("pty.jsonl");
    let screen = on_pty(&db, &["export", out.to_str().unwrap()], None, "");
    assert_bar(&screen, "export: ");
    let done = format!("exported 300 items to {}", out.display());
    assert!(screen_lines(&screen).contains(&done.as_str()), "{screen:?}");

    let piped_out = dir.join("piped.jsonl");
    let piped = run(dlq(&db).arg("export").arg(&piped_out));
    assert!(piped.status.success());
    assert_plain(&piped.stderr);
    assert_eq!(
        String::from_utf8_lossy(&piped.stderr),
        format!("exported 300 items to {}\n", piped_out.display())
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(&piped_out).unwrap()
    );

    // The legacy tree too (its report is JSON on stdout).
    let screen = on_pty(
        &db,
        &[
            "export",
            dir.join("legacy").to_str().unwrap(),
            "--format",
            "legacy",
        ],
        Some(&dir.join("report.json")),
        "",
    );
    assert_bar(&screen, "export: ");

    // Items going to the terminal itself: no bar drawn over them.
    let screen = on_pty(&db, &["export", "-", "--format", "jsonl"], None, "");
    assert!(!screen.contains("export: "), "{screen:?}");
    assert!(!screen.contains('\x1b'), "{screen:?}");
    assert_eq!(
        screen_lines(&screen)
            .iter()
            .filter(|l| l.starts_with('{'))
            .count(),
        300
    );
}

#[test]
fn purge_bar_on_a_terminal_only() {
    let dir = TempDir::new("pty-purge");
    let db = dir.join("p.db");
    three_items(&db);
    let screen = on_pty(&db, &["purge", "--older-than-days", "1", "--yes"], None, "");
    assert_bar(&screen, "purge: ");
    assert!(
        screen_lines(&screen)
            .iter()
            .any(|line| line.starts_with("removed 3 items last failed before ")),
        "{screen:?}"
    );

    three_items(&db);
    let piped = run(dlq(&db).args(["purge", "--older-than-days", "1", "--yes"]));
    assert!(piped.status.success());
    assert_plain(&piped.stderr);
    assert!(String::from_utf8_lossy(&piped.stderr).starts_with("removed 3 items"));
}

#[test]
fn add_says_it_reads_stdin_on_a_terminal_only() {
    const HINT: &str = "dlq: reading items from stdin (JSON or JSON lines; Ctrl-D to end)";
    let dir = TempDir::new("pty-add");
    let db = dir.join("a.db");
    let line = item("x", 1, "2025-01-01T00:00:00Z", "boom").to_string() + "\n";

    let screen = on_pty(&db, &["add", "--job-id", "J"], None, &line);
    assert!(screen_lines(&screen).contains(&HINT), "{screen:?}");
    assert!(
        screen_lines(&screen).contains(&"J: 1 read, 1 new, 0 merged, 0 unchanged"),
        "{screen:?}"
    );

    let piped = with_stdin(dlq(&db).args(["add", "--job-id", "J"]), &line);
    assert!(piped.status.success());
    // No stdin hint into a pipe: only the summary line, on stderr.
    assert!(piped.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&piped.stderr),
        "J: 1 read, 0 new, 0 merged, 1 unchanged\n"
    );
}

#[test]
fn tables_are_coloured_on_a_terminal_unless_no_color() {
    let dir = TempDir::new("pty-colour");
    let db = dir.join("c.db");
    three_items(&db);
    let (status, screen) = on_pty_env(&db, &["list"], None, "", &[]);
    assert_eq!(status, Some(0));
    // Bold headers, and the error type in its category's colour.
    assert!(screen.contains("\x1b[1m"), "{screen:?}");
    assert!(screen.contains("\x1b[38;5;"), "{screen:?}");
    for (vars, args) in [
        (vec![("NO_COLOR", "1")], vec!["list"]),
        (vec![], vec!["list", "--color", "never"]),
        (vec![("TERM", "dumb")], vec!["list"]),
    ] {
        let (status, screen) = on_pty_env(&db, &args, None, "", &vars);
        assert_eq!(status, Some(0));
        assert!(!screen.contains('\x1b'), "{vars:?} {args:?}: {screen:?}");
        assert!(
            screen.contains("item_") || screen.contains("i0"),
            "{screen:?}"
        );
    }
    // Into a pipe: no colour.
    let piped = run(dlq(&db).arg("list"));
    assert!(!String::from_utf8_lossy(&piped.stdout).contains('\x1b'));
}

#[test]
fn csv_on_a_terminal_shows_controls_escaped_and_into_a_pipe_as_they_are() {
    let dir = TempDir::new("pty-csv");
    let db = dir.join("c.db");
    add_lines(
        &db,
        "J",
        [item(
            "bad\u{1b}]0;pwned\u{7}id",
            1,
            "2025-01-01T00:00:00Z",
            "boom",
        )],
    );
    let (status, screen) = on_pty_env(&db, &["list", "--format", "csv"], None, "", &[]);
    assert_eq!(status, Some(0));
    assert!(screen.contains("bad\\e]0;pwned\\x07id"), "{screen:?}");
    assert!(!screen.contains('\u{7}'), "{screen:?}");
    let piped = run(dlq(&db).args(["list", "--format", "csv"]));
    assert!(String::from_utf8_lossy(&piped.stdout).contains("bad\u{1b}]0;pwned\u{7}id"));
}

/// `retention apply` asks on a terminal as purge does (no answers no), and
/// its help says so instead of "it asks nothing".
#[test]
fn retention_apply_asks_on_a_terminal() {
    let dir = TempDir::new("pty-retention");
    let db = dir.join("dlq.db");
    add_lines(&db, "j", [item("a", 1, "2020-01-01T00:00:00Z", "boom")]);
    ok(dlq(&db).args(["retention", "set", "--max-age", "30d"]));
    let (status, screen) = on_pty_status(&db, &["retention", "apply"], None, "n\n");
    assert_eq!(status, Some(1), "{screen:?}");
    assert!(
        screen.contains("Remove 1 item older than their retention policies allow? [y/N]")
            && screen.contains("nothing removed"),
        "{screen:?}"
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 1);
    let screen = on_pty(&db, &["retention", "apply"], None, "y\n");
    assert!(screen.contains("removed 1 item in all"), "{screen:?}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM items"), 0);
    let help = ok(dlq(&db).args(["retention", "--help"]));
    assert!(
        help.contains("asks on a terminal") && !help.contains("It asks nothing"),
        "{help}"
    );
}
