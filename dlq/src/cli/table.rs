//! Tables for people, laid out and drawn by comfy-table. This module owns
//! what a cell of each kind looks like (times to the second or relative,
//! flags as yes/no, a message by its most useful line, counts to the
//! right, colour by failure category), how wide each column may be (the
//! table fits the terminal or `COLUMNS`, long cells are cut with `…`,
//! `--wide` cuts nothing) and streaming: a table sizes its columns on its
//! first [`SAMPLE`] rows, then draws the rest in chunks with those widths,
//! so memory stays flat in the number of rows.
//!
//! Every cell is escaped with [`dlqlite::text::for_terminal`] first: text
//! from the database never reaches the terminal as control characters.

use super::term;
use anyhow::Result;
use comfy_table::{
    Attribute, Cell, CellAlignment, Color, ColumnConstraint, ContentArrangement, Row, Width,
};
use dlqlite::Category;
use std::io::Write;
use unicode_width::UnicodeWidthStr;

/// What a column holds, which decides how its cells are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Shown as it is.
    Text,
    /// A job, item or run id: cut in the middle (`mapreduce-2…194253`),
    /// since ids of one table often share their start.
    Id,
    /// A number, right-aligned; never cut.
    Count,
    /// A stored time: see [`term::Term::time`]; never cut.
    Time,
    /// true/false as yes/no; "yes" in green.
    Flag,
    /// true/false as yes/no; "yes" in yellow (needs a person).
    Warning,
    /// An error type, coloured by its failure category.
    ErrorType,
    /// A message, shown by its most useful line ([`dlqlite::text::headline`]).
    Message,
}

impl Kind {
    /// Whether the layout may narrow this column to fit.
    fn shrinks(self) -> bool {
        matches!(
            self,
            Kind::Text | Kind::Id | Kind::ErrorType | Kind::Message
        )
    }
}

/// Rows a table collects to size its columns before it starts to stream.
pub const SAMPLE: usize = 1_000;
/// Rows drawn at a time once streaming.
const CHUNK: usize = 256;
/// The narrowest a shrinking column gets when nothing else makes a table
/// fit: its header, or two characters and the `…`.
const LAST_RESORT: usize = 3;
/// Spaces between columns.
const GAP: usize = 2;

/// A table being written to stdout.
pub struct Table {
    headers: Vec<String>,
    kinds: Vec<Kind>,
    /// Rows not drawn yet, as shown (escaped and formatted).
    pending: Vec<Vec<String>>,
    /// Column widths (`None`: left out), fixed once the first rows were
    /// drawn.
    widths: Option<Vec<Option<usize>>>,
    /// Columns to leave out on a narrow terminal, in order.
    leave_out: Vec<usize>,
}

impl Table {
    /// A table with these columns.
    pub fn new(columns: &[(&str, Kind)]) -> Self {
        Table {
            headers: columns.iter().map(|(h, _)| h.to_string()).collect(),
            kinds: columns.iter().map(|(_, k)| *k).collect(),
            pending: Vec::new(),
            widths: None,
            leave_out: Vec::new(),
        }
    }

    /// A table of text columns (`dlq sql`: nothing is known of them).
    pub fn text(headers: &[String]) -> Self {
        Table {
            headers: headers.to_vec(),
            kinds: vec![Kind::Text; headers.len()],
            pending: Vec::new(),
            widths: None,
            leave_out: Vec::new(),
        }
    }

    /// Adds a row of raw cell values, drawn by [`Table::print`] (small
    /// tables: every row takes part in the layout).
    pub fn push(&mut self, cells: Vec<String>) {
        let shown = cells
            .iter()
            .zip(&self.kinds)
            .map(|(cell, kind)| show(cell, *kind))
            .collect();
        self.pending.push(shown);
    }

    /// Adds a row of raw cell values to a streamed table; may draw rows to
    /// `out`.
    pub fn row(&mut self, cells: Vec<String>, out: &mut impl Write) -> Result<()> {
        self.push(cells);
        let due = match self.widths {
            None => self.pending.len() >= SAMPLE,
            Some(_) => self.pending.len() >= CHUNK,
        };
        if due {
            self.draw(out)?;
        }
        Ok(())
    }

    /// Draws what is left.
    pub fn finish(mut self, out: &mut impl Write) -> Result<()> {
        if !self.pending.is_empty() || self.widths.is_none() {
            self.draw(out)?;
        }
        Ok(())
    }

    /// Writes the whole table to stdout.
    pub fn print(self) -> Result<()> {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        self.finish(&mut out)?;
        out.flush()?;
        Ok(())
    }

    /// Draws the pending rows (with the header the first time).
    fn draw(&mut self, out: &mut impl Write) -> Result<()> {
        let header = self.widths.is_none();
        let widths = match &self.widths {
            Some(widths) => widths.clone(),
            None => {
                let widths = self.layout();
                self.widths = Some(widths.clone());
                widths
            }
        };
        let settings = term::get();
        let mut table = comfy_table::Table::new();
        table
            .load_style(comfy_table::presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_truncation_indicator("…");
        if settings.color {
            // Colour the text, not the padding: lines still end where
            // their text does.
            table.enforce_styling();
            table.style_text_only();
        } else {
            table.force_no_tty();
        }
        let shown = |index: &usize| widths[*index].is_some();
        let columns: Vec<usize> = (0..widths.len()).filter(shown).collect();
        if header {
            let cells = columns.iter().map(|&i| {
                let cell = Cell::new(dlqlite::text::for_terminal(&self.headers[i]));
                if settings.color {
                    cell.add_attribute(Attribute::Bold)
                } else {
                    cell
                }
            });
            let mut header = Row::from(cells);
            header.max_height(1);
            table.set_header(header);
        }
        for mut cells in self.pending.drain(..) {
            let mut row = Row::from(columns.iter().map(|&i| {
                let mut text = std::mem::take(&mut cells[i]);
                let width = widths[i].unwrap_or(usize::MAX);
                if self.kinds[i] == Kind::Id {
                    text = middle_cut(text, width);
                } else if text.len() > width && text.width() > width {
                    // Cut here, in one pass: the table's own cut of a long
                    // word takes time in the square of its length (a 200 KB
                    // message took 35 s to list).
                    let mut cut: String = within(text.chars(), width.saturating_sub(1)).collect();
                    cut.push('…');
                    text = cut;
                }
                styled(text, self.kinds[i], settings.color)
            }));
            row.max_height(1);
            table.add_row(row);
        }
        let last = columns.len().saturating_sub(1);
        for (position, column) in table.column_iter_mut().enumerate() {
            let index = columns[position];
            let gap = if position < last { GAP } else { 0 };
            column.set_padding((0, gap as u16));
            let width = widths[index].unwrap_or(1).max(1) + gap;
            column.set_constraint(ColumnConstraint::Absolute(Width::Fixed(
                u16::try_from(width).unwrap_or(u16::MAX),
            )));
            if self.kinds[index] == Kind::Count {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
        for line in table.lines() {
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }

    /// Column widths for the rows so far (`None`: the column is left
    /// out). Each column is as wide as its widest cell, cut at
    /// [`term::MAX_CELL`] when nothing else bounds the table and not at all
    /// with `--wide`. A table wider than the terminal first leaves out the
    /// columns named by [`Table::leave_out_first`], in that order, until
    /// the others fit at their narrowest ([`Table::floor`]); then the
    /// widest shrinking columns give up room to the same limit, and what
    /// the limit leaves unused goes to the message (or the last cut
    /// column), so the table uses the whole width.
    fn layout(&self) -> Vec<Option<usize>> {
        let settings = term::get();
        let mut natural: Vec<usize> = self.headers.iter().map(|h| h.width()).collect();
        for row in &self.pending {
            for (width, cell) in natural.iter_mut().zip(row) {
                *width = (*width).max(cell.width());
            }
        }
        if !settings.wide && settings.width.is_none() {
            for (width, kind) in natural.iter_mut().zip(&self.kinds) {
                if kind.shrinks() {
                    *width = (*width).min(term::MAX_CELL);
                }
            }
        }
        let Some(room) = settings.width else {
            return natural.into_iter().map(Some).collect();
        };
        let mut floor: Vec<usize> = (0..natural.len())
            .map(|i| natural[i].min(self.floor(i)))
            .collect();
        let mut shown = vec![true; natural.len()];
        let needed = |shown: &[bool], floor: &[usize], limit: usize| -> usize {
            let columns = shown.iter().filter(|&&s| s).count();
            (0..natural.len())
                .filter(|&i| shown[i])
                .map(|i| natural[i].min(limit.max(floor[i])))
                .sum::<usize>()
                + GAP * columns.saturating_sub(1)
        };
        for &column in &self.leave_out {
            if needed(&shown, &floor, 0) <= room {
                break;
            }
            shown[column] = false;
        }
        // Still too wide with every optional column left out: the
        // shrinking columns may go down to their header, then to a few
        // characters each (their headers cut too).
        for last_resort in [
            |header: usize| LAST_RESORT.max(header),
            |_header: usize| LAST_RESORT,
        ] {
            if needed(&shown, &floor, 0) <= room {
                break;
            }
            for (i, floor) in floor.iter_mut().enumerate() {
                if self.kinds[i].shrinks() {
                    *floor = natural[i].min(last_resort(self.headers[i].width()));
                }
            }
        }
        if needed(&shown, &floor, usize::MAX) <= room {
            return (0..natural.len())
                .map(|i| shown[i].then_some(natural[i]))
                .collect();
        }
        // The largest per-column limit that fits.
        let (mut low, mut high) = (0, natural.iter().copied().max().unwrap_or(0));
        while low < high {
            let mid = (low + high).div_ceil(2);
            if needed(&shown, &floor, mid) <= room {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        let mut widths: Vec<Option<usize>> = (0..natural.len())
            .map(|i| shown[i].then(|| natural[i].min(low.max(floor[i]))))
            .collect();
        let spare = room.saturating_sub(needed(&shown, &floor, low));
        let cut = |i: &usize| widths[*i].is_some_and(|w| w < natural[*i]);
        let receiver = (0..widths.len())
            .filter(cut)
            .find(|&i| self.kinds[i] == Kind::Message)
            .or_else(|| (0..widths.len()).rev().find(cut));
        if let Some(i) = receiver {
            widths[i] = widths[i].map(|w| (w + spare).min(natural[i]));
        }
        widths
    }

    /// The narrowest column `index` gets before columns are left out: ids
    /// and names stay recognisable, a message readable.
    fn floor(&self, index: usize) -> usize {
        let header = self.headers[index].width();
        match self.kinds[index] {
            Kind::Message => 24,
            Kind::Text | Kind::Id => header.max(12),
            Kind::ErrorType => header.max(10),
            _ => usize::MAX,
        }
    }

    /// Columns a narrow terminal may do without, the first to go first
    /// (by header; `--wide` or a machine format shows every column).
    pub fn leave_out_first(mut self, headers: &[&str]) -> Self {
        self.leave_out = headers
            .iter()
            .filter_map(|h| self.headers.iter().position(|x| x == h))
            .collect();
        self
    }
}

/// A raw cell as shown: formatted for its kind, then escaped.
fn show(raw: &str, kind: Kind) -> String {
    let text = match kind {
        Kind::Time if !raw.is_empty() => term::get().time(raw),
        Kind::Flag | Kind::Warning => match raw {
            "true" | "1" => "yes".to_string(),
            "false" | "0" => "no".to_string(),
            other => other.to_string(),
        },
        Kind::Message => dlqlite::text::headline(raw).to_string(),
        _ => raw.to_string(),
    };
    let text = if text.is_empty() && kind != Kind::Message {
        "-".to_string()
    } else {
        text
    };
    dlqlite::text::for_terminal(&text).into_owned()
}

/// A cell of a fixed-width line (a table drawn one row at a time, as `dlq
/// watch` does): shown as its kind shows it, cut to `width` columns (ids in
/// the middle, the rest at the end, with `…`) and padded to it (counts on
/// the right).
pub fn fixed_cell(raw: &str, kind: Kind, width: usize) -> String {
    let text = show(raw, kind);
    let text = if kind == Kind::Id {
        middle_cut(text, width)
    } else if text.width() > width {
        let mut cut: String = within(text.chars(), width.saturating_sub(1)).collect();
        cut.push('…');
        cut
    } else {
        text
    };
    let pad = " ".repeat(width.saturating_sub(text.width()));
    if kind == Kind::Count {
        pad + &text
    } else {
        text + &pad
    }
}

/// `text` cut to `width` columns in the middle, with `…` where the cut is.
fn middle_cut(text: String, width: usize) -> String {
    if text.width() <= width || width < 3 {
        return text;
    }
    let keep = width - 1;
    let head_room = keep.div_ceil(2);
    let mut head: String = within(text.chars(), head_room).collect();
    let tail: Vec<char> = within(text.chars().rev(), keep - head_room).collect();
    head.push('…');
    head.extend(tail.into_iter().rev());
    head
}

/// The leading `chars` that fit in `width` terminal columns (a wide
/// character that would cross the edge is left out whole).
pub fn within(chars: impl Iterator<Item = char>, width: usize) -> impl Iterator<Item = char> {
    use unicode_width::UnicodeWidthChar;
    let mut used = 0;
    chars.take_while(move |c| {
        used += c.width().unwrap_or(0);
        used <= width
    })
}

/// A shown cell with its colour (when colour is on).
fn styled(text: String, kind: Kind, color: bool) -> Cell {
    if !color {
        return Cell::new(text);
    }
    let colour = match kind {
        Kind::Flag if text == "yes" => Some(Color::Green),
        Kind::Warning if text == "yes" => Some(Color::Yellow),
        Kind::ErrorType => match term::category(&text) {
            Some(Category::Transient) => Some(Color::Yellow),
            Some(Category::ConditionallyRecoverable) => Some(Color::Magenta),
            Some(Category::Permanent) => Some(Color::Red),
            _ => None,
        },
        _ => None,
    };
    match colour {
        Some(colour) => Cell::new(text).fg(colour),
        None => Cell::new(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_cut_in_the_middle() {
        let cut = |s: &str, w| middle_cut(s.to_string(), w);
        assert_eq!(cut("mapreduce-20251123_194253", 12), "mapred…94253");
        assert_eq!(cut("mapreduce-20251123_194253", 12).width(), 12);
        assert_eq!(cut("short", 12), "short");
        // Wide characters are not split: at most the width, never over.
        assert_eq!(cut("日本語のジョブ名", 7), "日…名");
        assert_eq!(cut("日本語のジョブ名", 8), "日本…名");
    }

    #[test]
    fn cells_are_shown_for_their_kind_and_escaped() {
        assert_eq!(show("true", Kind::Flag), "yes");
        assert_eq!(show("false", Kind::Warning), "no");
        assert_eq!(show("", Kind::Count), "-");
        assert_eq!(show("", Kind::Message), "");
        assert_eq!(
            show("2025-11-23T19:42:53.5Z", Kind::Time),
            "2025-11-23T19:42:53Z"
        );
        assert_eq!(show("a\u{1b}[31mb", Kind::Text), "a\\e[31mb");
        assert_eq!(
            show("Compiling x\nerror: boom\n", Kind::Message),
            "error: boom"
        );
    }
}
