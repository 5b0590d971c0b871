//! Every example a user can copy runs: each command line of the `sh`
//! blocks of the user docs (README.md, SECURITY.md and docs/*.md), and each
//! example in every subcommand's `--help` (the lines of an `Examples:`
//! block and `Example: ...`). Each runs through `sh -c`
//! with the real `dlq` first on PATH, in a sandbox of its own: a copy of
//! the shipped samples (`examples/sample`, then `examples/legacy`)
//! imported into `demo.db` (also `DLQ_DB`), the files
//! the examples name (`item_7.json`, `failures.jsonl`, `process-item.sh`,
//! two hosts' `.prodigy` trees), and HOME inside it. The placeholder job `J` stands for the sample's
//! `mapreduce-20251123_194253`.
//!
//! An example passes when it exits 0; the few that exit 1 by design (an
//! import of the sample, which holds broken files on purpose) are listed
//! with the reason. A usage error (2), a crash or a timeout fails. Lines of
//! the docs that are not `dlq` examples (the test command itself, the
//! developer scripts, installs) are listed in [`NOT_RUN`] with the reason.

use crate::common::{subcommands, TempDir};
use std::path::{Path, PathBuf};
use std::process::Command;

const SAMPLE_JOB: &str = "mapreduce-20251123_194253";

/// Examples that exit 1 by design, and why.
const EXIT_ONE: &[(&str, &str)] = &[
    (
        "import examples/legacy",
        "the sample holds four broken files on purpose",
    ),
    (
        "import ~/.prodigy old-host/.prodigy",
        "the same sample's broken files, split over two hosts",
    ),
    (
        "families split 7 --by 4",
        "no family of the sample has items that differ in a word: nothing to split",
    ),
];

/// The PostgreSQL database the examples name: each example that names it
/// gets a fresh database on the test server instead (DLQ_TEST_PG_URL, see
/// dlq/tests/tests/postgres.rs).
const EXAMPLE_PG_URL: &str = "postgres://dlq@db.internal/dlq";

/// A fresh database on the test server for one example, holding the
/// sample as `demo.db` does (a copy of it).
#[cfg(feature = "postgres")]
fn example_pg_database(root: &Path) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let server = std::env::var("DLQ_TEST_PG_URL")
        .expect("DLQ_TEST_PG_URL (scripts/test sets it): the examples name a PostgreSQL database");
    let name = format!("example_{}_{n}", std::process::id());
    let mut admin = postgres::Client::connect(&server, postgres::NoTls).unwrap();
    // The name is this run's own; the cluster goes with the run.
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .unwrap();
    let at = server.rfind('/').unwrap();
    let url = format!("{}/{name}", &server[..at]);
    let copied = Command::new(env!("CARGO_BIN_EXE_dlq"))
        .args(["copy", "--from"])
        .arg(root.join("demo.db"))
        .args(["--to", &url])
        .output()
        .unwrap();
    assert!(
        copied.status.success(),
        "{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    url
}

#[cfg(not(feature = "postgres"))]
fn example_pg_database(_: &Path) -> String {
    panic!("an example names a PostgreSQL database: build with the `postgres` feature")
}

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A fresh sandbox (see the module docs): a copy of one made once per
/// test (importing the samples for every example took minutes).
fn sandbox(dir: &TempDir, name: &str) -> PathBuf {
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let template = dir.join("template");
    {
        let _one = MAKING.lock().unwrap_or_else(|e| e.into_inner());
        if !template.exists() {
            let making = dir.join("template.making");
            make_sandbox(&making);
            std::fs::rename(&making, &template).unwrap();
        }
    }
    let root = dir.join(name);
    copy_dir(&template, &root);
    root
}

/// Makes the sandbox at `root`.
fn make_sandbox(root: &Path) {
    let root = root.to_path_buf();
    copy_dir(&repo().join("examples"), &root.join("examples"));
    // Two hosts' PRODIGY_HOMEs, for the import example.
    copy_dir(
        &repo().join("examples/legacy/state"),
        &root.join("home/.prodigy/state"),
    );
    copy_dir(
        &repo().join("examples/legacy/dlq"),
        &root.join("old-host/.prodigy/dlq"),
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_dlq"));
    let db = root.join("demo.db");
    // The README's first command: the sample imports whole and exits 0.
    let sample = Command::new(bin)
        .arg("--db")
        .arg(&db)
        .args(["import", "examples/sample"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        sample.status.success(),
        "the sample imports cleanly: {}",
        String::from_utf8_lossy(&sample.stderr)
    );
    let said = String::from_utf8_lossy(&sample.stdout) + String::from_utf8_lossy(&sample.stderr);
    assert!(
        said.contains("360 new, 0 merged, 0 unchanged, 0 rejected, 0 index"),
        "{said}"
    );
    let status = Command::new(bin)
        .arg("--db")
        .arg(&db)
        .args(["import", "examples/legacy"])
        .current_dir(&root)
        .output()
        .unwrap()
        .status;
    assert_eq!(
        status.code(),
        Some(1),
        "the sample imports (rejecting its broken files)"
    );
    // The default database (~/.prodigy/dlq.db), for the examples that name
    // it rather than using DLQ_DB.
    std::fs::copy(&db, root.join("home/.prodigy/dlq.db")).unwrap();
    std::fs::copy(
        root.join(format!(
            "examples/legacy/dlq/prodigy/{SAMPLE_JOB}/mapreduce/dlq/{SAMPLE_JOB}/items/item_7.json"
        )),
        root.join("item_7.json"),
    )
    .unwrap();
    let export = Command::new(bin)
        .arg("--db")
        .arg(&db)
        .args(["export", "failures.jsonl"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(export.status.success());
    let script = root.join("process-item.sh");
    std::fs::write(&script, "#!/bin/sh\ncat >/dev/null\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `line` with the placeholder job filled in and `cargo run` as `dlq`.
fn concrete(line: &str) -> String {
    let line = line
        .trim()
        .replace("cargo run --release -- ", "dlq ")
        .replace("cargo run -- ", "dlq ");
    line.split(' ')
        .map(|word| if word == "J" { SAMPLE_JOB } else { word })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Subcommands whose examples run until stopped: each passes when it is
/// still running (it started, and found nothing wrong with its options)
/// after [`RUNNING_FOR`] seconds, when `timeout` sends SIGINT to its
/// process group, as Ctrl-C would, and answers 124.
const LONG_RUNNING: &[&str] = &["serve"];
const RUNNING_FOR: &str = "3";
/// One long-running example at a time: the README's and the help's
/// `dlq serve` both want the default port.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs one example in a sandbox of its own; returns what went wrong.
fn run_example(dir: &TempDir, index: usize, source: &str, line: &str) -> Option<String> {
    let root = sandbox(dir, &format!("example-{index}"));
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_dlq")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = concrete(line);
    if command.contains(EXAMPLE_PG_URL) {
        command = command.replace(EXAMPLE_PG_URL, &example_pg_database(&root));
    }
    // `dlq serve`, `dlq --db demo.db serve`, `DLQ_TOKEN=... dlq serve ...`.
    let words: Vec<&str> = command.split_whitespace().collect();
    let long_running = words
        .iter()
        .position(|word| *word == "dlq")
        .is_some_and(|at| {
            words[at + 1..]
                .iter()
                .any(|word| LONG_RUNNING.contains(word))
        });
    let limit: &[&str] = if long_running {
        &["-s", "INT", "-k", "10", RUNNING_FOR]
    } else {
        &["60"]
    };
    let _turn = long_running.then(|| ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner()));
    let output = Command::new("timeout")
        .args(limit)
        .args(["sh", "-c", &command])
        .current_dir(&root)
        .env("PATH", path)
        .env("HOME", root.join("home"))
        .env("DLQ_DB", root.join("demo.db"))
        .env_remove("DLQ_NOW")
        .env_remove("PRODIGY_HOME")
        .env_remove("COLUMNS")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let expected = if EXIT_ONE.iter().any(|(part, _)| command.contains(part)) {
        1
    } else if long_running {
        124
    } else {
        0
    };
    (output.status.code() != Some(expected)).then(|| {
        format!(
            "{source}: `{command}` exited {:?}, not {expected}: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).trim()
        )
    })
}

/// Lines of the docs' `sh` blocks that are not `dlq` examples, by how
/// they start, and why they do not run here.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "scripts/",
        "the developer scripts: the test command this is part of, mutation \
         testing and the Prodigy check run for minutes to hours",
    ),
    (
        "PRODIGY_CHECK_",
        "scripts/prodigy-check with settings: needs a Prodigy checkout",
    ),
    (
        "cargo install",
        "installs into ~/.cargo; the build under test is the binary",
    ),
    ("cargo test", "the test suite itself"),
];

/// The user docs whose `sh` blocks are examples: README.md, SECURITY.md
/// and every docs/*.md, in that order.
fn doc_files() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    let mut files = vec![repo().join("README.md"), repo().join("SECURITY.md")];
    files.extend(docs);
    files
}

/// The command lines of one doc's `sh` (or `bash`) blocks, each with what
/// NOT_RUN says about it (None: it runs).
fn sh_lines(file: &Path) -> Vec<(String, Option<&'static str>)> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut in_sh = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if let Some(fence) = line.strip_prefix("```") {
            in_sh = !in_sh && (fence == "sh" || fence == "bash");
            continue;
        }
        let line = line.trim();
        if in_sh && !line.is_empty() && !line.starts_with('#') {
            let skip = NOT_RUN
                .iter()
                .find(|(start, _)| line.starts_with(start))
                .map(|(start, _)| *start);
            lines.push((line.to_string(), skip));
        }
    }
    lines
}

/// The examples to run from one doc, with the doc's name.
fn doc_examples(file: &Path) -> Vec<(String, String)> {
    let name = file
        .strip_prefix(repo())
        .unwrap_or(file)
        .display()
        .to_string();
    sh_lines(file)
        .into_iter()
        .filter(|(_, skip)| skip.is_none())
        .map(|(line, _)| (name.clone(), line))
        .collect()
}

/// Runs examples on a few threads; returns what went wrong.
fn run_all(dir: &TempDir, examples: &[(String, String)]) -> Vec<String> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some((source, line)) = examples.get(i) else {
                    break;
                };
                if let Some(failure) = run_example(dir, i, source, line) {
                    failures.lock().unwrap().push(failure);
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    failures
}

/// The examples of every subcommand's help.
fn help_examples() -> Vec<(String, String)> {
    let bin = env!("CARGO_BIN_EXE_dlq");
    let top = Command::new(bin).arg("--help").output().unwrap();
    let top = String::from_utf8(top.stdout).unwrap();
    let commands = subcommands(&top);
    assert!(commands.len() >= 20, "{top}");
    // Each command's summary is one line of the list (none wraps onto a
    // line of its own, none is a paragraph).
    for line in top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
    {
        // `  name  summary`: a wrapped summary's next line would start
        // with more spaces.
        assert!(
            line.len() <= 100
                && !line[2..].starts_with(' ')
                && line.split_whitespace().nth(1).is_some(),
            "a summary that is not one short line: {line:?}"
        );
    }
    let mut examples = Vec::new();
    for command in commands {
        let help = Command::new(bin)
            .args([&command, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8(help.stdout).unwrap();
        let mut in_block = false;
        for line in help.lines() {
            if let Some(example) = line.strip_prefix("Example: ") {
                examples.push((command.clone(), example.to_string()));
            } else if line == "Examples:" {
                in_block = true;
            } else if in_block && line.starts_with("  dlq ") {
                examples.push((command.clone(), line.trim().to_string()));
            } else {
                in_block = false;
            }
        }
    }
    examples
}

#[test]
fn every_readme_example_runs() {
    let dir = TempDir::new("readme-examples");
    let examples = doc_examples(&repo().join("README.md"));
    assert!(examples.len() >= 8, "{examples:?}");
    let failures = run_all(&dir, &examples);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The other docs: the guide, the command reference, the dashboard,
/// PostgreSQL, the library, SECURITY.md and the rest of docs/.
#[test]
fn every_docs_example_runs() {
    let dir = TempDir::new("docs-examples");
    let files = doc_files();
    let examples: Vec<(String, String)> = files
        .iter()
        .filter(|file| !file.ends_with("README.md"))
        .flat_map(|file| doc_examples(file))
        .collect();
    // The guide and the command reference alone show dozens.
    assert!(examples.len() >= 60, "{examples:?}");
    for name in ["docs/guide.md", "docs/commands.md", "docs/postgres.md"] {
        assert!(
            examples.iter().any(|(source, _)| source == name),
            "no example of {name} runs"
        );
    }
    let failures = run_all(&dir, &examples);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Each line NOT_RUN leaves out is one it names, and each of its entries
/// still leaves out some line (a stale entry would hide a new example).
#[test]
fn the_examples_left_out_are_listed() {
    let mut used = std::collections::BTreeSet::new();
    for file in doc_files() {
        for (line, skip) in sh_lines(&file) {
            if let Some(start) = skip {
                used.insert(start);
            } else {
                // Every line that runs is a dlq command (or sets up one).
                let command = concrete(&line);
                assert!(
                    command.contains("dlq "),
                    "{}: `{line}` is neither a dlq example nor in NOT_RUN",
                    file.display()
                );
            }
        }
    }
    for (start, why) in NOT_RUN {
        assert!(
            used.contains(start),
            "NOT_RUN {start:?} ({why}) matches no line"
        );
    }
}

#[test]
fn every_help_example_runs() {
    let dir = TempDir::new("help-examples");
    let examples = help_examples();
    // Every subcommand but `help` shows at least one.
    assert!(examples.len() >= 30, "{examples:?}");
    let failures: Vec<String> = examples
        .iter()
        .enumerate()
        .filter_map(|(i, (command, line))| {
            run_example(&dir, i, &format!("dlq {command} --help"), line)
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
