//! `dlq export`: write items out as the legacy tree, JSON, JSON lines or CSV.

use super::output::{note, parse_filter, plural, print_json};
use super::progress::Bar;
use super::Context;
use anyhow::Result;
use dlqlite::export::{
    export_legacy_with_progress, write_items_with_progress, ItemFormat, Progress,
};
use dlqlite::outfile::OutputFile;
use dlqlite::ListFilter;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

/// Export items
///
/// `--format legacy` writes DIR in the legacy layout
/// (`DIR/dlq/<repo>/<job>/mapreduce/dlq/<job>/items/<item>.json` and
/// index.json), each file in the exact legacy shape: the rollback path.
/// `json` writes an array of legacy-shape items and `jsonl` one per line,
/// each with a `job_id` key added (legacy readers ignore it; `dlq add` and
/// `dlq import` use it). `csv` writes one row per item with the header
/// job_id, item_id, item_data (JSON text), first_attempt, last_attempt,
/// failure_count, error_signature, reprocess_eligible,
/// manual_review_required, worktree_path, branch_name, and the last attempt
/// as last_attempt_number, last_error_type, last_exit_code,
/// last_error_message, last_agent_id, last_step_failed, last_duration_ms,
/// last_json_log_location, and its failure category (category, as in
/// `dlq list --format csv`). The format comes from the extension when not
/// given; `-` writes to stdout.
///
/// Examples:
///   dlq export backup --format legacy
///   dlq export failures.csv --filter 'error_type == "Timeout"'
///   dlq export - --format jsonl --job-id mapreduce-20251123_194253
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Output file, `-` for stdout, or a directory for --format legacy
    path: PathBuf,
    /// The format [default: from the extension]
    #[arg(long, value_enum)]
    format: Option<ExportFormat>,
    /// Only this job
    #[arg(long)]
    job_id: Option<String>,
    /// Only items matching this expression (see `dlq list --help`); not with legacy
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    /// Legacy: export into a directory that is not empty (files of the same
    /// names are replaced; other stale files stay and would come back on the
    /// next import)
    #[arg(long)]
    force: bool,
    /// Also print what was written as JSON on stdout ({"items", "path"};
    /// legacy: {"jobs", "items", "job_dirs"}); not with `-`
    #[arg(long)]
    json: bool,
}

/// What `dlq export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    /// The legacy per-item tree (a directory)
    Legacy,
    /// One JSON array of legacy-shape items
    Json,
    /// One legacy-shape item per line
    Jsonl,
    /// One row per item
    Csv,
}

fn format_of(path: &Path) -> Result<ExportFormat> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => Ok(ExportFormat::Json),
        Some("jsonl") | Some("ndjson") => Ok(ExportFormat::Jsonl),
        Some("csv") => Ok(ExportFormat::Csv),
        _ => super::usage!(
            "cannot tell the format of {}: pass --format legacy|json|jsonl|csv",
            path.display()
        ),
    }
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let format = match args.format {
        Some(format) => format,
        None => format_of(&args.path)?,
    };
    let expression = parse_filter(args.filter.as_deref())?;
    let to_stdout = args.path.as_os_str() == "-";
    if to_stdout && args.json {
        super::usage!("--json does not go with `-`: the items are what stdout holds");
    }
    let dlq = ctx.open_existing()?;
    if let Some(job) = &args.job_id {
        dlq.require_job(job)?;
    }
    if format == ExportFormat::Legacy {
        if args.path.as_os_str() == "-" {
            super::usage!(
                "--format legacy writes a directory tree, which stdout (`-`) cannot hold: name a directory"
            );
        }
        if expression.is_some() {
            super::usage!(
                "--filter does not go with --format legacy: a legacy tree holds whole jobs"
            );
        }
        let destination = args.path.clone();
        on_interrupt(move || {
            format!(
                "interrupted: {} holds a partial export; remove it, or export again with --force",
                destination.display()
            )
        });
        let bar = Bar::new("export", "items", None);
        if bar.is_visible() {
            // The jobs' own counters: no query over the items.
            let total: i64 = dlq
                .jobs()?
                .iter()
                .filter(|job| args.job_id.as_ref().is_none_or(|id| *id == job.job_id))
                .map(|job| job.item_count)
                .sum();
            bar.set_total("items", u64::try_from(total).unwrap_or(0));
        }
        let report = export_legacy_with_progress(
            &dlq,
            &args.path,
            args.job_id.as_deref(),
            args.force,
            |p| show(&bar, p),
        );
        bar.clear();
        let report = report?;
        if args.json {
            print_json(&report)?;
        }
        note(&format!(
            "exported {} of {} to {}",
            plural(report.items, "item"),
            plural(report.jobs, "job"),
            args.path.display()
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let item_format = match format {
        ExportFormat::Jsonl => ItemFormat::Jsonl,
        ExportFormat::Csv if super::output::RAW_CSV.load(std::sync::atomic::Ordering::Relaxed) => {
            ItemFormat::CsvRaw
        }
        ExportFormat::Csv => ItemFormat::Csv,
        ExportFormat::Json | ExportFormat::Legacy => ItemFormat::Json,
    };
    let filter = ListFilter {
        job_id: args.job_id.clone(),
        expression,
        ..ListFilter::default()
    };
    // Items going to the terminal the bar would be drawn on: no bar.
    let bar = if to_stdout && std::io::stdout().is_terminal() {
        Bar::hidden()
    } else {
        Bar::new("export", "items", None)
    };
    if bar.is_visible() {
        bar.set_total("items", dlq.count_matching(&filter)?);
    }
    if to_stdout {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let written =
            write_items_with_progress(&dlq, filter, &mut out, item_format, |p| show(&bar, p));
        bar.clear();
        written?;
        return Ok(ExitCode::SUCCESS);
    }
    // Written beside the target and renamed (or streamed into a device or
    // fifo), mode 0600: see dlqlite::outfile.
    // Ctrl-C (or SIGTERM) kills the process before any destructor runs:
    // the half-written file beside the destination, which holds item data,
    // goes first. The handler is in place before the file exists (a signal
    // in between would otherwise kill the process and leave the file).
    let temp: Arc<Mutex<Option<PathBuf>>> = Arc::default();
    let destination = args.path.clone();
    let to_remove = Arc::clone(&temp);
    on_interrupt(move || {
        if let Some(temp) = to_remove.lock().ok().and_then(|t| t.clone()) {
            let _ = std::fs::remove_file(temp);
        }
        format!("interrupted: nothing written to {}", destination.display())
    });
    // Held while the file is made, so a handler running meanwhile waits
    // for its name.
    let mut slot = temp.lock().unwrap_or_else(|e| e.into_inner());
    let mut file = OutputFile::create(&args.path)?;
    *slot = file.temp_path().map(Path::to_path_buf);
    drop(slot);
    let count = {
        let mut out = std::io::BufWriter::new(file.file());
        // Errors name the destination (write_items says "output").
        let written =
            write_items_with_progress(&dlq, filter, &mut out, item_format, |p| show(&bar, p));
        bar.clear();
        let count = written.map_err(|e| match e {
            dlqlite::Error::Io { source, .. } => dlqlite::Error::io(&args.path, source),
            dlqlite::Error::Json(e) => match e.io_error_kind() {
                Some(kind) => dlqlite::Error::io(&args.path, std::io::Error::new(kind, e)),
                None => dlqlite::Error::Json(e),
            },
            other => other,
        })?;
        out.flush().map_err(|e| dlqlite::Error::io(&args.path, e))?;
        count
    };
    file.commit()?;
    if args.json {
        print_json(&serde_json::json!({"items": count, "path": args.path}))?;
    }
    note(&format!(
        "exported {} to {}",
        plural(count, "item"),
        args.path.display()
    ));
    Ok(ExitCode::SUCCESS)
}

/// On Ctrl-C or SIGTERM: runs `cleanup`, says what it returns on stderr (on
/// a line of its own, below a progress bar) and exits 130.
fn on_interrupt(cleanup: impl Fn() -> String + Send + 'static) {
    // Only export sets a handler in this process; if one could not be set,
    // the export still runs (and an interruption leaves what it leaves).
    let _ = ctrlc::set_handler(move || {
        let said = cleanup();
        let _ = writeln!(
            std::io::stderr(),
            "\ndlq: {}",
            dlqlite::text::for_terminal(&said)
        );
        std::process::exit(130);
    });
}

fn show(bar: &Bar, p: &Progress) {
    bar.set_done(p.items_written as u64);
}
