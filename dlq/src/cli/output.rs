//! Output helpers shared by the subcommands: the listing formats
//! (`--format table|json|jsonl|csv`) and their row writer, JSON to stdout,
//! CSV cells, confirmation and `--filter` parsing. Tables themselves are
//! [`super::table`]'s. Write errors (a closed pipe) propagate so `main` can
//! exit quietly.

pub use super::table::{Kind, Table};
use anyhow::Result;
use serde::Serialize;
use std::io::Write;

/// Writes one JSON value (pretty) and a newline to stdout. Buffered: stdout
/// alone flushes at every newline, a write call per line of pretty JSON.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let text = serde_json::to_string_pretty(value)?;
    writeln!(out, "{}", dlqlite::text::json_for_terminal(&text))?;
    out.flush()?;
    Ok(())
}

/// A line for people on stderr (what was left out, what was done).
/// Ids and paths in it are escaped; a stderr that cannot be written is
/// ignored, as in `main`.
pub fn note(line: &str) {
    let _ = writeln!(
        std::io::stderr().lock(),
        "{}",
        dlqlite::text::for_terminal(line)
    );
}

/// A count as people read it: 90000 as "90,000".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// "1 item", "9,000 items": a count with its noun, as people write it.
pub fn plural(n: impl TryInto<u64>, noun: &str) -> String {
    let n: u64 = n.try_into().unwrap_or(0);
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", thousands(n))
    }
}

/// An optional value for a table cell.
pub fn cell<T: ToString>(value: Option<T>) -> String {
    value
        .map(|v| v.to_string())
        .unwrap_or_else(|| "-".to_string())
}

/// Machine and human output formats for row listings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for people
    Table,
    /// One JSON array of objects
    Json,
    /// One JSON object per line
    Jsonl,
    /// A header line, then one row per record
    Csv,
}

/// A column of a listing: its name in machine formats, its header and
/// kind in a table.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub name: &'static str,
    pub header: &'static str,
    pub kind: Kind,
}

/// Shorthand for a [`Column`].
pub const fn column(name: &'static str, header: &'static str, kind: Kind) -> Column {
    Column { name, header, kind }
}

/// Writes rows in one of the [`Format`]s, streaming: JSON, JSON lines and
/// CSV row by row, the table as [`super::table`] draws it. A table shows
/// only its first `table_columns` columns (people get the ones that
/// matter; machine formats keep every column).
pub struct RowWriter {
    format: Format,
    names: Vec<String>,
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    table: Table,
    /// The typed columns (empty for [`RowWriter::with_names`]).
    columns: Vec<Column>,
    table_columns: usize,
    rows: usize,
}

/// Whether CSV cells go out raw (`--raw-csv`); otherwise cells a
/// spreadsheet would run as formulas are neutralised (dlqlite::text).
pub static RAW_CSV: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A CSV cell as written. Into a terminal (someone reading CSV on screen),
/// control and bidi characters are made visible as in tables: CSV has no
/// escapes of its own, and a cell holding `ESC]0;...` would retitle the
/// window or clear the screen.
pub fn csv_cell(cell: &str) -> std::borrow::Cow<'_, str> {
    let cell = if super::term::get().stdout_is_terminal {
        dlqlite::text::for_terminal(cell)
    } else {
        std::borrow::Cow::Borrowed(cell)
    };
    if RAW_CSV.load(std::sync::atomic::Ordering::Relaxed) {
        cell
    } else {
        match dlqlite::text::for_csv(&cell) {
            std::borrow::Cow::Borrowed(_) => cell,
            std::borrow::Cow::Owned(owned) => std::borrow::Cow::Owned(owned),
        }
    }
}

/// A cell as text: strings as they are, null as empty, the rest as JSON.
pub fn cell_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn table_of(columns: &[Column]) -> Table {
    Table::new(
        &columns
            .iter()
            .map(|c| (c.header, c.kind))
            .collect::<Vec<_>>(),
    )
}

impl RowWriter {
    /// A writer of rows with these columns.
    pub fn new(format: Format, columns: &[Column]) -> Result<Self> {
        let names = columns.iter().map(|c| c.name.to_string()).collect();
        let mut writer = Self::start(format, names, table_of(columns))?;
        writer.columns = columns.to_vec();
        Ok(writer)
    }

    /// A writer of rows whose columns are only known by name (`dlq sql`).
    pub fn with_names(format: Format, names: Vec<String>) -> Result<Self> {
        let table = Table::text(&names);
        Self::start(format, names, table)
    }

    fn start(format: Format, names: Vec<String>, table: Table) -> Result<Self> {
        let mut writer = RowWriter {
            format,
            table_columns: names.len(),
            names,
            out: std::io::BufWriter::new(std::io::stdout().lock()),
            table,
            columns: Vec::new(),
            rows: 0,
        };
        match format {
            Format::Csv => {
                let mut csv = csv::Writer::from_writer(Vec::new());
                csv.write_record(&writer.names)?;
                writer.out.write_all(
                    &csv.into_inner()
                        .map_err(|e| anyhow::anyhow!(e.to_string()))?,
                )?;
            }
            Format::Json => writer.out.write_all(b"[")?,
            _ => {}
        }
        Ok(writer)
    }

    /// Shows only the first `n` columns in a table.
    pub fn table_columns(mut self, n: usize) -> Self {
        self.table_columns = n.min(self.columns.len());
        self.table = table_of(&self.columns[..self.table_columns]);
        self
    }

    /// Columns a narrow terminal's table may do without, the first to go
    /// first (see [`Table::leave_out_first`]).
    pub fn leave_out_first(mut self, headers: &[&str]) -> Self {
        self.table = self.table.leave_out_first(headers);
        self
    }

    pub fn row(&mut self, values: Vec<serde_json::Value>) -> Result<()> {
        match self.format {
            Format::Table => {
                let cells = values
                    .iter()
                    .take(self.table_columns)
                    .map(cell_text)
                    .collect::<Vec<String>>();
                self.table.row(cells, &mut self.out)?;
            }
            Format::Json | Format::Jsonl => {
                let object: serde_json::Map<String, serde_json::Value> =
                    self.names.iter().cloned().zip(values).collect();
                if self.format == Format::Json {
                    self.out
                        .write_all(if self.rows == 0 { b"\n" } else { b",\n" })?;
                }
                let text = serde_json::to_string(&object)?;
                self.out
                    .write_all(dlqlite::text::json_for_terminal(&text).as_bytes())?;
                if self.format == Format::Jsonl {
                    self.out.write_all(b"\n")?;
                }
            }
            Format::Csv => {
                let mut csv = csv::Writer::from_writer(Vec::new());
                let cells: Vec<String> = values.iter().map(cell_text).collect();
                csv.write_record(cells.iter().map(|c| csv_cell(c).into_owned()))?;
                self.out.write_all(
                    &csv.into_inner()
                        .map_err(|e| anyhow::anyhow!(e.to_string()))?,
                )?;
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// Ends the output and returns how many rows it had. An empty table
    /// prints nothing on stdout and `empty` on stderr instead of a bare
    /// header (machine formats stay well-formed: `[]`, a CSV header).
    pub fn finish(mut self, empty: &str) -> Result<usize> {
        match self.format {
            Format::Table if self.rows == 0 => {
                note(empty);
            }
            Format::Table => self.table.finish(&mut self.out)?,
            Format::Json => self.out.write_all(b"\n]\n")?,
            _ => {}
        }
        self.out.flush()?;
        Ok(self.rows)
    }
}

/// Asks before something destructive: `action` is what would be done
/// ("remove 9 items of job J"). `--yes` skips the question; without a
/// terminal to ask on, it refuses (a usage error) rather than guess.
pub fn confirm(action: &str, yes: bool) -> Result<bool> {
    use std::io::IsTerminal;
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(super::Usage(format!(
            "will not {action} without confirmation, and there is no terminal to ask on: pass --yes"
        ))
        .into());
    }
    let mut prompt = action.to_string();
    if let Some(first) = prompt.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    eprint!("{}? [y/N] ", dlqlite::text::for_terminal(&prompt));
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

/// Parses a --filter argument; the error says where it went wrong.
pub fn parse_filter(text: Option<&str>) -> Result<Option<dlqlite::filter::Expr>> {
    match text {
        None => Ok(None),
        Some(text) => dlqlite::filter::parse(text).map(Some).map_err(|e| {
            // A long filter is quoted by its start: the column says where.
            let shown: String = text.chars().take(80).collect();
            let more = if shown.len() < text.len() { "..." } else { "" };
            super::Usage(format!("invalid --filter {shown:?}{more}: {e}")).into()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_people_write_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(90_000), "90,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(plural(1u64, "item"), "1 item");
        assert_eq!(plural(0u64, "item"), "0 items");
        assert_eq!(plural(12_000usize, "job"), "12,000 jobs");
        assert_eq!(plural(-1i64, "item"), "0 items");
    }
}
