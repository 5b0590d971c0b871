//! `dlq completions`: shell completion scripts.

use anyhow::Result;
use clap::CommandFactory;
use std::process::ExitCode;

/// Print a completion script for a shell
///
/// Example: dlq completions bash > dlq.bash   # then `source dlq.bash` in ~/.bashrc
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The shell
    shell: clap_complete::Shell,
}

pub fn run(args: Args) -> Result<ExitCode> {
    use std::io::Write;
    let mut command = super::Cli::command();
    // Into memory first: clap_complete panics on a write error (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "dlq", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
