//! The `dlq` binary: parse the command line, run the subcommand, and own the
//! exit codes — 0 on success (a closed stdout pipe counts as success), 1 on
//! an error (one line on stderr), 2 on a usage error (clap's, or a
//! [`cli::Usage`] found later: a bad filter, a missing flag, a confirmation
//! that cannot be asked).

mod cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    let parsed = cli::command()
        .try_get_matches()
        .and_then(|matches| <cli::Cli as clap::FromArgMatches>::from_arg_matches(&matches));
    let args = match parsed {
        Ok(args) => args,
        Err(error) => {
            use clap::error::ErrorKind;
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                error.exit();
            }
            // One line, as every other error: clap's first line (what was
            // wrong) without its usage block. It quotes what was typed,
            // which may hold escape sequences: made visible.
            let text = error.render().to_string();
            let body = text
                .split("\n\nUsage:")
                .next()
                .and_then(|t| t.split("\n\nFor more information").next())
                .unwrap_or("invalid arguments")
                .trim_end();
            let body = body.strip_prefix("error: ").unwrap_or(body);
            // clap's "did you mean" tip and its possible values stay, on
            // the same line.
            let body = body.replace("\n\n  tip: ", "; ");
            let body = body
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            say(&format!(
                "dlq: error: {} (see --help)",
                dlqlite::text::for_terminal(&body)
            ));
            return ExitCode::from(2);
        }
    };
    match cli::run(args) {
        Ok(code) => code,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) if error.downcast_ref::<cli::Usage>().is_some() => {
            say(&format!(
                "dlq: error: {}",
                dlqlite::text::for_terminal(&one_line(&error))
            ));
            ExitCode::from(2)
        }
        Err(error) => {
            // Paths, ids and messages in it may be anyone's.
            say(&format!(
                "dlq: error: {}",
                dlqlite::text::for_terminal(&one_line(&error))
            ));
            ExitCode::from(1)
        }
    }
}

/// Writes one line to stderr. A stderr that cannot be written (a full
/// disk, a closed pipe) must not turn an error exit into a panic (eprintln!
/// panics then): the exit code still says what happened.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
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

/// A reader that went away (`dlq analyze | head`) ends the output quietly,
/// as a returned broken-pipe error does: `print!` panics on it instead,
/// and every text a command prints must not need its own check.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.contains("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    let pipe = |kind: Option<std::io::ErrorKind>| kind == Some(std::io::ErrorKind::BrokenPipe);
    // The outermost cause that says what was written decides.
    for cause in error.chain() {
        match cause.downcast_ref::<dlqlite::Error>() {
            // Quiet only for our own stdout (`dlq ... | head`): a reader of
            // an export file or fifo that goes away early is a failure.
            Some(dlqlite::Error::Io { source, path }) => {
                return pipe(Some(source.kind()))
                    && (path.as_os_str() == "stdout" || path.as_os_str() == "output");
            }
            Some(dlqlite::Error::Json(e)) => return pipe(e.io_error_kind()),
            _ => {}
        }
        if let Some(e) = cause.downcast_ref::<std::io::Error>() {
            return pipe(Some(e.kind()));
        }
        if let Some(e) = cause.downcast_ref::<serde_json::Error>() {
            return pipe(e.io_error_kind());
        }
    }
    false
}
