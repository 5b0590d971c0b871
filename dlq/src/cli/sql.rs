//! `dlq sql`: an ad-hoc read-only query.

use super::output::{Format, RowWriter};
use super::Context;
use anyhow::Result;
use std::cell::RefCell;
use std::process::ExitCode;

/// Run one read-only SQL statement on the database
///
/// SELECT, WITH or a read-only PRAGMA. A statement that would write is
/// refused and changes nothing; use the sqlite3 shell to change data. The
/// schema is in docs/guide.md ("Query with SQL") and docs/schema.sql.
///
/// Example: dlq sql "SELECT error_type, COUNT(*) FROM failure_log GROUP BY 1" --format csv
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The statement
    query: String,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    // The same line as every other command for a file that is not there.
    ctx.require_existing()?;
    let writer: RefCell<Option<RowWriter>> = RefCell::new(None);
    let mut failure: Option<anyhow::Error> = None;
    let result = dlqlite::store::adhoc::query_read_only(
        ctx.db_path(),
        &args.query,
        |columns| {
            let names = match args.format {
                Format::Json | Format::Jsonl => unique_names(columns),
                Format::Table | Format::Csv => columns.to_vec(),
            };
            match RowWriter::with_names(args.format, names) {
                Ok(w) => *writer.borrow_mut() = Some(w),
                Err(e) => failure = Some(e),
            }
            Ok(())
        },
        |row| {
            if let Some(w) = writer.borrow_mut().as_mut() {
                if let Err(e) = w.row(row) {
                    // Keep the kind, so a closed pipe still ends quietly.
                    let kind = e
                        .chain()
                        .find_map(|cause| {
                            cause
                                .downcast_ref::<std::io::Error>()
                                .map(std::io::Error::kind)
                                .or_else(|| {
                                    cause
                                        .downcast_ref::<serde_json::Error>()
                                        .and_then(serde_json::Error::io_error_kind)
                                })
                        })
                        .unwrap_or(std::io::ErrorKind::Other);
                    return Err(dlqlite::Error::io(
                        "stdout",
                        std::io::Error::new(kind, e.to_string()),
                    ));
                }
            }
            Ok(())
        },
    );
    if let Some(e) = failure {
        return Err(e);
    }
    ctx.warn_unreadable_wal();
    result?;
    if let Some(w) = writer.into_inner() {
        w.finish("no rows")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Column names made unique for JSON objects, where a repeated key would
/// hide all its values but one (`SELECT 1 AS a, 2 AS a`): the second `a`
/// becomes `a_2`, and so on, skipping names the query already has.
fn unique_names(columns: &[String]) -> Vec<String> {
    let mut taken: std::collections::HashSet<String> = columns.iter().cloned().collect();
    let mut seen = std::collections::HashSet::new();
    columns
        .iter()
        .map(|name| {
            if seen.insert(name.clone()) {
                return name.clone();
            }
            let mut n = 2;
            loop {
                let candidate = format!("{name}_{n}");
                if taken.insert(candidate.clone()) {
                    return candidate;
                }
                n += 1;
            }
        })
        .collect()
}
