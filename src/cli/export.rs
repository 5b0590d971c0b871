//! `dlq export`: write items out as the legacy tree, JSON or JSON lines.

use super::output::print_json;
use super::Context;
use anyhow::{bail, Context as _, Result};
use dlqlite::export::{export_legacy, write_items_json};
use dlqlite::ListFilter;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Export items.
///
/// `--format legacy` writes DIR in the legacy layout
/// (`DIR/dlq/<repo>/<job>/mapreduce/dlq/<job>/items/<item>.json` and
/// index.json), each file in the exact legacy shape: the rollback path.
/// `json` writes an array of legacy-shape items, `jsonl` one per line; both
/// read back with `dlq import`/`dlq add`. The format comes from the file's
/// extension when not given. `-` writes to stdout.
///
/// Examples:
///   dlq export backup --format legacy
///   dlq export items.jsonl --job-id mapreduce-20251123_194253
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output file, `-` for stdout, or a directory for --format legacy
    path: PathBuf,
    /// legacy, json or jsonl [default: from the extension]
    #[arg(long, value_parser = ["legacy", "json", "jsonl"])]
    format: Option<String>,
    /// Only this job
    #[arg(long)]
    job_id: Option<String>,
}

fn format_of(path: &Path) -> Result<&'static str> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => Ok("json"),
        Some("jsonl") | Some("ndjson") => Ok("jsonl"),
        _ => bail!(
            "cannot tell the format of {}: pass --format legacy|json|jsonl",
            path.display()
        ),
    }
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let format = match args.format.as_deref() {
        Some("legacy") => "legacy",
        Some("jsonl") => "jsonl",
        Some(_) => "json",
        None => format_of(&args.path)?,
    };
    let dlq = ctx.open()?;
    if let Some(job) = &args.job_id {
        dlq.job_stats(job)?;
    }
    let filter = ListFilter {
        job_id: args.job_id.clone(),
        ..ListFilter::default()
    };
    if format == "legacy" {
        let report = export_legacy(&dlq, &args.path, args.job_id.as_deref())?;
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let lines = format == "jsonl";
    if args.path.as_os_str() == "-" {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        write_items_json(&dlq, filter, &mut out, lines)?;
        return Ok(ExitCode::SUCCESS);
    }
    // Write beside the target and rename, so a failed export never leaves a
    // half-written file where a good one was.
    let tmp = args.path.with_extension("dlq-export-tmp");
    let file = std::fs::File::create(&tmp).with_context(|| tmp.display().to_string())?;
    let mut out = std::io::BufWriter::new(file);
    let written = write_items_json(&dlq, filter, &mut out, lines).and_then(|n| {
        out.flush().map_err(|e| dlqlite::Error::io(&tmp, e))?;
        Ok(n)
    });
    let count = match written {
        Ok(count) => count,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
    };
    std::fs::rename(&tmp, &args.path).with_context(|| args.path.display().to_string())?;
    writeln!(
        std::io::stderr(),
        "exported {count} item(s) to {}",
        args.path.display()
    )?;
    Ok(ExitCode::SUCCESS)
}
