//! Output helpers shared by the subcommands: JSON to stdout, and plain
//! column-aligned tables for people. Write errors (a closed pipe) propagate
//! so `main` can exit quietly.

use anyhow::Result;
use serde::Serialize;
use std::io::Write;

/// Writes one JSON value (pretty) and a newline to stdout.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    let mut out = std::io::stdout().lock();
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
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn print(&self) -> Result<()> {
        let mut out = std::io::stdout().lock();
        self.write(&mut out)?;
        out.flush()?;
        Ok(())
    }

    pub fn write(&self, out: &mut impl Write) -> Result<()> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(width) = widths.get_mut(i) {
                    *width = (*width).max(cell.chars().count());
                }
            }
        }
        write_row(out, &self.headers, &widths)?;
        for row in &self.rows {
            write_row(out, row, &widths)?;
        }
        Ok(())
    }
}

fn write_row(out: &mut impl Write, cells: &[String], widths: &[usize]) -> Result<()> {
    let last = cells.len().saturating_sub(1);
    let mut line = String::new();
    for (i, cell) in cells.iter().enumerate() {
        let clean: String = cell
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
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
