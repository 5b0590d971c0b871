//! How output for people looks on this run: whether it is coloured
//! (`--color`, `NO_COLOR`), how wide tables may be (`COLUMNS`, the
//! terminal, `--wide`) and how times are shown (`--relative`). Set once from
//! the global options before a command runs; machine formats (JSON, JSON
//! lines, CSV) ignore all of it.

use chrono::{DateTime, Utc};
use dlqlite::{Category, Dlq};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::OnceLock;

/// `--color`: when tables use colour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// When stdout is a terminal and NO_COLOR is not set
    #[default]
    Auto,
    /// Always (even into a pipe)
    Always,
    /// Never
    Never,
}

/// The settings of this run.
#[derive(Debug)]
pub struct Term {
    /// Whether table cells are coloured.
    pub color: bool,
    /// The width tables fit in; `None`: no limit (cells are still cut at
    /// [`MAX_CELL`] unless `wide`).
    pub width: Option<usize>,
    /// `--wide`: no cell is cut.
    pub wide: bool,
    /// `--relative`: times as "3h 5m ago".
    pub relative: bool,
    /// Whether stdout is a terminal (machine formats escape what a
    /// terminal would act on).
    pub stdout_is_terminal: bool,
    /// What relative times count from.
    now: DateTime<Utc>,
}

/// How long a cell may be when nothing else bounds a table (output into a
/// pipe or a file, no `COLUMNS`): long messages stay readable in `less`.
pub const MAX_CELL: usize = 60;

static TERM: OnceLock<Term> = OnceLock::new();

/// Sets this run's settings from the global options and the environment.
pub fn init(color: ColorChoice, wide: bool, relative: bool) {
    let stdout_is_terminal = std::io::stdout().is_terminal();
    let color = match color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        // https://no-color.org: set and not empty turns colour off.
        ColorChoice::Auto => {
            stdout_is_terminal
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
        }
    };
    let width = if wide {
        None
    } else {
        columns_from_env().or_else(|| {
            if stdout_is_terminal {
                terminal_width()
            } else {
                None
            }
        })
    };
    if color {
        // crossterm, which draws comfy-table's colours, drops them when
        // NO_COLOR is set; an explicit --color always overrides it (as
        // no-color.org asks of command-line flags).
        crossterm::style::force_color_output(true);
    }
    let _ = TERM.set(Term {
        color,
        width,
        wide,
        relative,
        stdout_is_terminal,
        now: Utc::now(),
    });
}

/// The database's error type → category table, for colouring error types
/// (loaded when the database is opened and colour is on).
static CATEGORIES: OnceLock<HashMap<String, Category>> = OnceLock::new();

/// Keeps the category table of the opened database for [`category`]: only
/// when colour is on, the one thing it is for.
pub fn load_categories(dlq: &Dlq) {
    if get().color && CATEGORIES.get().is_none() {
        // A table that cannot be read costs the colours, not the command.
        if let Ok(map) = dlq.category_map() {
            let _ = CATEGORIES.set(map);
        }
    }
}

/// The category of an error type, when the table was loaded.
pub fn category(error_type: &str) -> Option<Category> {
    let map = CATEGORIES.get()?;
    Some(
        map.get(error_type)
            .copied()
            .unwrap_or(Category::Unclassified),
    )
}

/// This run's settings (plain ones if [`init`] was not called).
pub fn get() -> &'static Term {
    TERM.get_or_init(|| Term {
        color: false,
        width: None,
        wide: false,
        relative: false,
        stdout_is_terminal: false,
        now: Utc::now(),
    })
}

/// `COLUMNS`, the way shells and `ls` use it, when it is a sane number.
fn columns_from_env() -> Option<usize> {
    std::env::var("COLUMNS")
        .ok()?
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|&n| (10..=10_000).contains(&n))
}

/// The width of the terminal on stdout.
fn terminal_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we own.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col >= 10).then_some(usize::from(size.ws_col))
}

impl Term {
    /// A line of text cut to the table width (with `…`), when one is set.
    pub fn fit(&self, line: &str) -> String {
        let Some(width) = self.width else {
            return line.to_string();
        };
        if unicode_width::UnicodeWidthStr::width(line) <= width {
            return line.to_string();
        }
        let mut out: String = super::table::within(line.chars(), width.saturating_sub(1)).collect();
        out.push('…');
        out
    }

    /// A stored time (RFC 3339) as tables show it: to the second in UTC
    /// (`2025-11-23T19:42:53Z`, as filters and `--now` take it), or
    /// relative to now with `--relative`. Text that is not a time is shown
    /// as it is.
    pub fn time(&self, stored: &str) -> String {
        let Ok(time) = DateTime::parse_from_rfc3339(stored) else {
            return stored.to_string();
        };
        let time = time.with_timezone(&Utc);
        if self.relative {
            relative(time, self.now)
        } else {
            time.format("%Y-%m-%dT%H:%M:%SZ").to_string()
        }
    }
}

/// `then` from `now` in the two largest units: "45s ago", "3h 5m ago",
/// "4d 2h ago", "in 2m".
fn relative(then: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (now - then).num_seconds();
    let span = span(seconds.unsigned_abs());
    if seconds >= 0 {
        format!("{span} ago")
    } else {
        format!("in {span}")
    }
}

/// A number of seconds in the two largest units, as `--relative` shows an
/// age: "45s", "12m", "3h 5m", "4d 2h" (`dlq check` says ages this way).
pub fn span(magnitude: u64) -> String {
    if magnitude < 60 {
        format!("{magnitude}s")
    } else if magnitude < 3_600 {
        format!("{}m", magnitude / 60)
    } else if magnitude < 86_400 {
        two_units(magnitude / 3_600, "h", magnitude % 3_600 / 60, "m")
    } else {
        two_units(magnitude / 86_400, "d", magnitude % 86_400 / 3_600, "h")
    }
}

fn two_units(big: u64, big_unit: &str, small: u64, small_unit: &str) -> String {
    if small == 0 || big >= 100 {
        format!("{big}{big_unit}")
    } else {
        format!("{big}{big_unit} {small}{small_unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn relative_times_read_in_two_units() {
        let now = Utc.with_ymd_and_hms(2025, 11, 23, 12, 0, 0).unwrap();
        let ago = |s: i64| relative(now - chrono::Duration::seconds(s), now);
        assert_eq!(ago(0), "0s ago");
        assert_eq!(ago(45), "45s ago");
        assert_eq!(ago(12 * 60 + 5), "12m ago");
        assert_eq!(ago(3 * 3600 + 5 * 60), "3h 5m ago");
        assert_eq!(ago(3 * 3600), "3h ago");
        assert_eq!(ago(4 * 86_400 + 2 * 3600 + 59), "4d 2h ago");
        assert_eq!(ago(420 * 86_400 + 3600), "420d ago");
        assert_eq!(ago(-120), "in 2m");
    }

    #[test]
    fn lines_fit_the_width_with_an_ellipsis() {
        let term = Term {
            color: false,
            width: Some(10),
            wide: false,
            relative: false,
            stdout_is_terminal: false,
            now: Utc::now(),
        };
        assert_eq!(term.fit("short"), "short");
        assert_eq!(term.fit("0123456789"), "0123456789");
        assert_eq!(term.fit("0123456789abc"), "012345678…");
        assert_eq!(term.fit("日本語のジョブ名です"), "日本語の…");
        assert_eq!(
            get().fit("no width set, nothing cut"),
            "no width set, nothing cut"
        );
    }

    #[test]
    fn times_are_shown_to_the_second_in_utc() {
        let term = get();
        assert_eq!(
            term.time("2025-11-23T19:42:53.902113845Z"),
            "2025-11-23T19:42:53Z"
        );
        assert_eq!(
            term.time("2025-11-23T21:42:53+02:00"),
            "2025-11-23T19:42:53Z"
        );
        assert_eq!(term.time("not a time"), "not a time");
    }
}
