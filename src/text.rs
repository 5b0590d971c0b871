//! Text from the database or the file system (ids, paths, messages) on its
//! way to a terminal, an HTML page or a spreadsheet. Any of it can be chosen
//! by someone careless or malicious: a file named `bad\e[31m\nforged` must
//! not colour a terminal or forge a second line, a right-to-left override
//! must not reorder what a person reads, and a CSV cell `=cmd|...` must not
//! become a formula.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal or a page as itself: C0 controls
/// (newlines and tabs included: one value is one line), DEL, C1 controls,
/// the Unicode bidirectional controls, and the invisible ones that make two
/// different ids look the same (zero-width space, joiners, byte order mark,
/// line and paragraph separators).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{061c}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{feff}'
        )
}

/// `text` with every unsafe character written visibly: `\n`, `\t`, `\r`,
/// `\e`, `\xNN` for other C0, DEL and C1, `\u{NNNN}` for bidi controls.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_unsafe(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{1b}' => out.push_str("\\e"),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// JSON text with the unsafe characters that JSON leaves raw (DEL, C1
/// controls, bidi and invisible ones: everything [`is_unsafe`] above
/// ASCII; serde_json already escapes C0) written as `\uXXXX` escapes. The
/// JSON means the same (those characters can only stand inside strings),
/// but a terminal showing it acts on none of them.
pub fn json_for_terminal(json: &str) -> Cow<'_, str> {
    let risky = |c: char| (c as u32) >= 0x7f && is_unsafe(c);
    if !json.chars().any(risky) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if risky(c) {
            // Every unsafe character is in the Basic Multilingual Plane.
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` for HTML element content or a quoted attribute: the five markup
/// characters as entities, and unsafe characters (see [`is_unsafe`]) written
/// visibly as in [`for_terminal`], except newlines and tabs, which HTML
/// shows as spaces anyway.
pub fn for_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if is_unsafe(c) => {
                let mut buffer = [0u8; 4];
                out.push_str(&for_terminal(c.encode_utf8(&mut buffer)));
            }
            c => out.push(c),
        }
    }
    out
}

/// A CSV cell that a spreadsheet would run as a formula (it starts with
/// `=`, `+`, `-`, `@`, a tab or a carriage return, and is not a plain
/// number) gets a leading `'`, which spreadsheets show as text. `--raw-csv`
/// turns this off.
pub fn for_csv(cell: &str) -> Cow<'_, str> {
    let risky = cell
        .chars()
        .next()
        .is_some_and(|c| matches!(c, '=' | '+' | '-' | '@' | '\t' | '\r'));
    if risky && cell.parse::<f64>().is_err() {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// The line of a message that says most about the failure, for places
/// with room for one line (tables, the report). A message of several lines
/// is often a command's stderr tail (`dlq retry` stores its last lines),
/// whose first lines are preamble ("Compiling ...", "running 12 tests"):
/// the first line that reads like an error wins, else the last non-blank
/// line, where a tool's final complaint usually is.
pub fn headline(message: &str) -> &str {
    const MARKERS: [&str; 12] = [
        "error",
        "fail",
        "panic",
        "exception",
        "fatal",
        "denied",
        "refused",
        "timed out",
        "timeout",
        "not found",
        "cannot",
        "invalid",
    ];
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(first) = lines.next() else {
        return message.trim();
    };
    let reads_like_error = |line: &str| {
        let lower = line.to_ascii_lowercase();
        MARKERS.iter().any(|m| lower.contains(m))
    };
    if reads_like_error(first) {
        return first;
    }
    let mut last = first;
    for line in lines {
        if reads_like_error(line) {
            return line;
        }
        last = line;
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminals_see_escapes_not_controls() {
        assert_eq!(for_terminal("plain/path.json"), "plain/path.json");
        assert_eq!(
            for_terminal("bad\u{1b}[31mname\nrejected: forged.json"),
            "bad\\e[31mname\\nrejected: forged.json"
        );
        assert_eq!(
            for_terminal("a\u{202e}b\u{7f}c\u{85}"),
            "a\\u{202e}b\\x7fc\\x85"
        );
        assert_eq!(for_terminal("\0"), "\\x00");
    }

    #[test]
    fn json_keeps_its_meaning_and_loses_what_terminals_act_on() {
        let value = serde_json::json!({"id": "a\u{9b}31m\u{202e}b\u{7f}\u{200b}", "n": "ok"});
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let safe = json_for_terminal(&pretty);
        assert!(safe.contains(r"a\u009b31m\u202eb\u007f\u200b"), "{safe}");
        assert!(safe.contains('\n'), "structure stays: {safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
        assert!(matches!(
            json_for_terminal("{\"a\": \"é\"}"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn html_escapes_markup_and_controls() {
        assert_eq!(
            for_html("<a href='x'>&\u{1b}\u{202e}\0</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;\\e\\u{202e}\\x00&lt;/a&gt;"
        );
    }

    #[test]
    fn a_message_is_shown_by_its_most_useful_line() {
        assert_eq!(
            headline("cargo test failed with exit code 101"),
            "cargo test failed with exit code 101"
        );
        assert_eq!(headline("  one line  "), "one line");
        assert_eq!(headline(""), "");
        assert_eq!(headline("\n\n"), "");
        // A stderr tail: preamble first, the complaint after it.
        assert_eq!(
            headline("   Compiling foo v0.1.0\nrunning 3 tests\nthread 'main' panicked at src/lib.rs:3\nnote: run with RUST_BACKTRACE=1"),
            "thread 'main' panicked at src/lib.rs:3"
        );
        // The first error-like line, not a later one.
        assert_eq!(
            headline("Error: quota\ncaused by: permission denied"),
            "Error: quota"
        );
        // Nothing reads like an error: the last line.
        assert_eq!(
            headline("step 1\nstep 2\n\nwent wrong here\n"),
            "went wrong here"
        );
    }

    #[test]
    fn formulas_are_neutralised_numbers_are_not() {
        assert_eq!(for_csv("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(for_csv("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(for_csv("+1+1"), "'+1+1");
        assert_eq!(for_csv("-1"), "-1");
        assert_eq!(for_csv("-2.5e3"), "-2.5e3");
        assert_eq!(for_csv("timeout"), "timeout");
        assert_eq!(for_csv(""), "");
    }
}
