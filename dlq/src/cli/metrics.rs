//! `dlq metrics`: the state as Prometheus or OpenMetrics text, on stdout or
//! written atomically to a file for node_exporter's textfile collector.
//! The text is `dlqlite::metrics::render`'s.

use super::Context;
use anyhow::Result;
use dlqlite::metrics::{Format, Options};
use dlqlite::outfile::OutputFile;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The state as Prometheus metrics (for node_exporter's textfile collector)
///
/// Prints, in the Prometheus text format 0.0.4 (or OpenMetrics 1.0 with
/// --format openmetrics): items per job, error type and failure category;
/// eligible and manual-review items and the oldest item's age per job;
/// events in the audit log by kind; retry runs by status; items of the 10
/// largest failure families and of all others. docs/guide.md's "Metrics for
/// Prometheus" lists every metric. It reads counters (and, for families,
/// the items_family index), never the items' rows, so it is cheap to run
/// often, and works on a read-only database.
///
/// --output FILE writes the file beside its destination and renames it into
/// place, so a collector never reads half of it; it is mode 0600 unless
/// --mode says otherwise (0644 lets node_exporter, running as another user,
/// read it). Nothing is printed on success, so cron mails nothing.
///
/// Examples:
///   dlq metrics
///   dlq metrics --job-id mapreduce-20251123_194253 --format openmetrics
///   dlq metrics --output dlq.prom --mode 0644
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Only this job (its items, events and retry runs)
    #[arg(long)]
    job_id: Option<String>,
    /// prometheus (text format 0.0.4) or openmetrics (OpenMetrics 1.0)
    #[arg(long, value_enum, default_value_t = MetricsFormat::Prometheus)]
    format: MetricsFormat,
    /// Write to FILE atomically (a temporary file beside it, renamed over
    /// it) instead of stdout
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// The permissions of --output's file, in octal (default 0600; at most
    /// 0666)
    #[arg(long, value_name = "OCTAL", requires = "output", value_parser = parse_mode)]
    mode: Option<u32>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum MetricsFormat {
    Prometheus,
    Openmetrics,
}

/// `--mode`: octal permission bits, read and write only (a metrics file is
/// never executable, setuid or sticky).
fn parse_mode(text: &str) -> std::result::Result<u32, String> {
    let digits = text.strip_prefix("0o").unwrap_or(text);
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if !digits.is_empty() && mode & 0o400 == 0 => Err(format!(
            "{text:?} leaves the file unreadable even to its owner: keep the owner's read bit (0400)"
        )),
        Ok(mode) if !digits.is_empty() && mode & !0o666 == 0 => Ok(mode),
        Ok(_) => Err(format!(
            "{text:?} sets more than read and write bits: give at most 0666 (e.g. 0644)"
        )),
        Err(_) => Err(format!(
            "{text:?} is not an octal mode: give one like 0644 or 0600"
        )),
    }
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    let format = match args.format {
        MetricsFormat::Prometheus => Format::Prometheus,
        MetricsFormat::Openmetrics => Format::OpenMetrics,
    };
    let options = Options {
        job_id: args.job_id.clone(),
        ..Options::default()
    };
    let text = dlqlite::metrics::render(&dlq, &options, format)?;
    match &args.output {
        None => {
            let mut out = std::io::stdout().lock();
            if super::term::get().stdout_is_terminal {
                // For a person: a label value's control characters (the
                // format keeps all but newlines as they are) are shown, not
                // acted on. Into a file or a pipe the text stays exact.
                for line in text.lines() {
                    writeln!(out, "{}", dlqlite::text::for_terminal(line))?;
                }
            } else {
                out.write_all(text.as_bytes())?;
            }
            out.flush()?;
        }
        Some(path) => {
            let mut file = OutputFile::create(path)?;
            if let (Some(mode), false) = (args.mode, file.is_stream()) {
                // On the open temporary file (never a path that could be
                // swapped for a link), before it is renamed into place:
                // the collector never sees it with other permissions.
                use std::os::unix::fs::PermissionsExt;
                file.file()
                    .set_permissions(std::fs::Permissions::from_mode(mode))
                    .map_err(|e| dlqlite::Error::io(path, e))?;
            }
            file.file()
                .write_all(text.as_bytes())
                .map_err(|e| dlqlite::Error::io(path, e))?;
            file.commit()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
