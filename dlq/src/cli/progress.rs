//! The progress bar of the long commands (import, export, purge, retry):
//! one look for all four, drawn on stderr only when stderr is a terminal
//! (a pipe or a file gets nothing, not even a carriage return), and
//! cleared before the command prints its own final lines.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressState, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// How often a visible bar redraws on its own, so the elapsed time, the
/// rate and the time left move while one long SQL statement runs.
const STEADY_TICK: Duration = Duration::from_millis(200);

/// A progress bar on stderr, hidden unless stderr is a terminal. Clones
/// share one bar (the retry's Ctrl-C handler prints through a clone).
#[derive(Clone)]
pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar headed `what` ("import", "export", ...), counting `unit`
    /// ("files", "items"), with `total` when it is known already.
    pub fn new(what: &'static str, unit: &'static str, total: Option<u64>) -> Bar {
        Bar::start(what, total, Bar::style(unit, total.is_some()))
    }

    /// A spinner headed `what` for work that cannot be counted as it goes
    /// (one SQL statement over many rows): the message says what is
    /// running, and the time so far.
    pub fn working(what: &'static str) -> Bar {
        let style = ProgressStyle::with_template("{spinner} {prefix}: {wide_msg} ({elapsed})")
            .expect("a fixed template");
        Bar::start(what, None, style)
    }

    fn start(what: &'static str, total: Option<u64>, style: ProgressStyle) -> Bar {
        let bar = if std::io::stderr().is_terminal() {
            ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        // A command that fails half way drops its bar: cleared, so the
        // error line does not land after it.
        let bar = bar
            .with_style(style)
            .with_prefix(what)
            .with_finish(ProgressFinish::AndClear);
        // Drawn at once, so even a command that ends before the first tick
        // shows what it was doing; then kept moving.
        bar.tick();
        bar.enable_steady_tick(STEADY_TICK);
        Bar { bar }
    }

    /// A bar that is never drawn (where the output itself goes to the
    /// terminal).
    pub fn hidden() -> Bar {
        Bar {
            bar: ProgressBar::hidden(),
        }
    }

    /// With a total: a bar, done/total, the rate and the time left.
    /// Without: a spinner, the count, the rate and the time so far.
    fn style(unit: &'static str, with_total: bool) -> ProgressStyle {
        let template = if with_total {
            format!(
                "{{prefix}}: [{{bar:16}}] {{human_pos}}/{{human_len}} {unit} \
                 ({{rate}}, {{eta}} left) {{wide_msg}}"
            )
        } else {
            format!(
                "{{spinner}} {{prefix}}: {{human_pos}} {unit} ({{rate}}, {{elapsed}}) {{wide_msg}}"
            )
        };
        ProgressStyle::with_template(&template)
            .expect("a fixed template")
            // indicatif's own per_sec prints four decimals.
            .with_key(
                "rate",
                |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                    let rate = state.per_sec();
                    // A retry of slow commands runs at a fraction of one a second.
                    let _ = if rate < 10.0 {
                        write!(out, "{rate:.1}/s")
                    } else {
                        write!(out, "{rate:.0}/s")
                    };
                },
            )
            .progress_chars("=> ")
    }

    /// The total became known (or changed): from now on a bar with the time
    /// left.
    pub fn set_total(&self, unit: &'static str, total: u64) {
        if self.bar.length().is_none() {
            self.bar.set_style(Bar::style(unit, true));
        }
        self.bar.set_length(total);
    }

    /// Whether it is drawn (stderr is a terminal): work done only for the
    /// bar can be skipped when it is not.
    pub fn is_visible(&self) -> bool {
        !self.bar.is_hidden()
    }

    /// How far it is.
    pub fn set_done(&self, done: u64) {
        self.bar.set_position(done);
    }

    /// The text after the counts (what else is going on).
    pub fn set_message(&self, message: impl Into<std::borrow::Cow<'static, str>>) {
        self.bar.set_message(message);
    }

    /// Runs `f` (which prints to stderr) with the bar out of the way, then
    /// draws it again.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Takes the bar off the screen for good, before the final lines.
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }
}
