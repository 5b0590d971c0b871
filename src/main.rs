//! The `dlq` binary: parse the command line, run the subcommand, and own the
//! exit codes — 0 on success (a closed stdout pipe counts as success), 1 on
//! an error (one line on stderr), 2 on a usage error (clap's own).

mod cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = <cli::Cli as clap::Parser>::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            // Paths, ids and messages in it may be anyone's.
            eprintln!(
                "dlq: error: {}",
                dlqlite::text::for_terminal(&one_line(&error))
            );
            ExitCode::from(1)
        }
    }
}

/// The error and its causes on one line, without repeating a cause whose
/// text the outer message already contains.
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    let pipe = |kind: Option<std::io::ErrorKind>| kind == Some(std::io::ErrorKind::BrokenPipe);
    error.chain().any(|cause| {
        pipe(
            cause
                .downcast_ref::<std::io::Error>()
                .map(std::io::Error::kind),
        ) || pipe(
            cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind),
        ) || match cause.downcast_ref::<dlqlite::Error>() {
            Some(dlqlite::Error::Io { source, .. }) => pipe(Some(source.kind())),
            Some(dlqlite::Error::Json(e)) => pipe(e.io_error_kind()),
            _ => false,
        }
    })
}
