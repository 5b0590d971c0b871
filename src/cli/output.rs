//! Output helpers shared by the subcommands: JSON to stdout, and plain
//! column-aligned tables for people. Write errors (a closed pipe) propagate
//! so `main` can exit quietly.

use anyhow::Result;
use dlqlite::text::for_terminal;
use serde::Serialize;
use std::io::Write;

/// Writes one JSON value (pretty) and a newline to stdout. Buffered: stdout
/// alone flushes at every newline, a write call per line of pretty JSON.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// A table printed with aligned columns.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: AsRef<str>>(headers: &[S]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.as_ref().to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn print(&self) -> Result<()> {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        self.write(&mut out)?;
        out.flush()?;
        Ok(())
    }

    pub fn write(&self, out: &mut impl Write) -> Result<()> {
        let widths = self.widths();
        write_row(out, &self.headers, &widths)?;
        for row in &self.rows {
            write_row(out, row, &widths)?;
        }
        Ok(())
    }

    /// The column widths that fit the headers and the rows so far.
    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self
            .headers
            .iter()
            .map(|h| for_terminal(h).chars().count())
            .collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(width) = widths.get_mut(i) {
                    *width = (*width).max(for_terminal(cell).chars().count());
                }
            }
        }
        widths
    }
}

fn write_row(out: &mut impl Write, cells: &[String], widths: &[usize]) -> Result<()> {
    let last = cells.len().saturating_sub(1);
    let mut line = String::new();
    for (i, cell) in cells.iter().enumerate() {
        // Control and bidi characters written visibly (see dlqlite::text).
        let clean = for_terminal(cell);
        line.push_str(&clean);
        if i < last {
            let pad = widths
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(clean.chars().count());
            line.push_str(&" ".repeat(pad + 2));
        }
    }
    writeln!(out, "{}", line.trim_end())?;
    Ok(())
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

/// Rows a table collects to size its columns before it starts to stream.
const TABLE_SAMPLE: usize = 1_000;

/// Writes rows in one of the [`Format`]s. JSON, JSON lines and CSV stream;
/// the table sizes its columns on the first [`TABLE_SAMPLE`] rows, then
/// streams the rest with those widths, so memory stays flat in the number
/// of rows (cells are cut at 60 characters, so no column grows far).
pub struct RowWriter {
    format: Format,
    columns: Vec<String>,
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    table: Table,
    /// Set once the table streams.
    widths: Option<Vec<usize>>,
    rows: usize,
    /// Column widths cap for the table (long messages are cut).
    max_cell: usize,
    /// How many leading columns the table shows (machine formats: all).
    table_columns: usize,
}

/// Whether CSV cells go out raw (`--raw-csv`); otherwise cells a
/// spreadsheet would run as formulas are neutralised (dlqlite::text).
pub static RAW_CSV: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A CSV cell as written.
pub fn csv_cell(cell: &str) -> std::borrow::Cow<'_, str> {
    if RAW_CSV.load(std::sync::atomic::Ordering::Relaxed) {
        std::borrow::Cow::Borrowed(cell)
    } else {
        dlqlite::text::for_csv(cell)
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

impl RowWriter {
    pub fn new(format: Format, columns: &[&str]) -> Result<Self> {
        let mut writer = RowWriter {
            format,
            columns: columns.iter().map(|c| c.to_string()).collect(),
            out: std::io::BufWriter::new(std::io::stdout().lock()),
            table: Table::new(&columns.iter().map(|c| c.to_uppercase()).collect::<Vec<_>>()),
            widths: None,
            rows: 0,
            max_cell: 60,
            table_columns: columns.len(),
        };
        match format {
            Format::Csv => {
                let mut csv = csv::Writer::from_writer(Vec::new());
                csv.write_record(columns)?;
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

    /// Shows only the first `n` columns in a table (people get the ones that
    /// matter; machine formats keep every column).
    pub fn table_columns(mut self, n: usize) -> Self {
        self.table_columns = n.min(self.columns.len());
        let headers: Vec<String> = self.columns[..self.table_columns]
            .iter()
            .map(|c| c.to_uppercase())
            .collect();
        self.table = Table::new(&headers);
        self
    }

    pub fn row(&mut self, values: Vec<serde_json::Value>) -> Result<()> {
        match self.format {
            Format::Table => {
                let cells = values
                    .iter()
                    .take(self.table_columns)
                    .map(|v| {
                        let text = cell_text(v);
                        if text.chars().count() > self.max_cell {
                            let cut: String = text.chars().take(self.max_cell - 1).collect();
                            format!("{cut}…")
                        } else {
                            text
                        }
                    })
                    .collect::<Vec<String>>();
                match &self.widths {
                    Some(widths) => write_row(&mut self.out, &cells, widths)?,
                    None => {
                        self.table.row(cells);
                        if self.table.rows.len() >= TABLE_SAMPLE {
                            self.table.write(&mut self.out)?;
                            self.widths = Some(self.table.widths());
                            self.table.rows = Vec::new();
                        }
                    }
                }
            }
            Format::Json | Format::Jsonl => {
                let object: serde_json::Map<String, serde_json::Value> =
                    self.columns.iter().cloned().zip(values).collect();
                if self.format == Format::Json {
                    self.out
                        .write_all(if self.rows == 0 { b"\n" } else { b",\n" })?;
                }
                serde_json::to_writer(&mut self.out, &object)?;
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

    pub fn finish(mut self) -> Result<usize> {
        match self.format {
            Format::Table if self.widths.is_none() => self.table.write(&mut self.out)?,
            Format::Json => self.out.write_all(b"\n]\n")?,
            _ => {}
        }
        self.out.flush()?;
        Ok(self.rows)
    }
}

/// Asks before something destructive. `--yes` skips the question; without a
/// terminal to ask on, it refuses rather than guess.
pub fn confirm(question: &str, yes: bool) -> Result<bool> {
    use std::io::IsTerminal;
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("{question}: refusing without confirmation; pass --yes");
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES"))
}

/// Parses a --filter argument; the error says where it went wrong.
pub fn parse_filter(text: Option<&str>) -> Result<Option<dlqlite::filter::Expr>> {
    match text {
        None => Ok(None),
        Some(text) => dlqlite::filter::parse(text).map(Some).map_err(|e| {
            // A long filter is quoted by its start: the column says where.
            let shown: String = text.chars().take(80).collect();
            let more = if shown.len() < text.len() { "..." } else { "" };
            anyhow::anyhow!("invalid --filter {shown:?}{more}: {e}")
        }),
    }
}
