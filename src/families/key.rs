//! What a failure's family is decided by, taken out of its raw text: the
//! words of its error line(s), each reduced to the part that names the
//! cause, and the crash site, when a stack trace locates one.
//!
//! A failure message is often a headline followed by output: a test
//! runner's report, a compiler's notes, a stack trace. The output varies
//! from one occurrence to the next and says little about the cause, so the
//! key reads only the headline (and the line it introduces, when it ends
//! with a colon), the exception line of a trace, and the top application
//! frame: the function and file that failed, without the line number,
//! which moves with every edit (Sentry groups crash sites the same way).

use std::borrow::Cow;

/// At most this many words of a message take part in its key: the words
/// past it are output, not the cause, and a 10 KB line must not cost a
/// 10 KB template.
pub const MAX_WORDS: usize = 48;

/// Lines of output searched for an error line: past them, output is
/// output.
const MAX_LINES_SEARCHED: usize = 400;

/// Lines of a message read at all: the first half of these and the last
/// half (a Python trace's exception is its last line, after every frame).
const MAX_LINES_READ: usize = 2_000;

/// Lines between an error line and its trace, or between two frames of
/// one trace (a Go trace's function and file lines, a signal line).
const FRAME_GAP: usize = 4;

/// Longest word kept as it is; a longer one (minified JSON, base64) is a
/// variable whatever it holds.
pub const MAX_WORD_BYTES: usize = 64;

/// The key of one failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    /// The words, each with the text a template shows for it.
    pub words: Vec<Word>,
    /// The top application frame (`file:function`), when a trace names one.
    pub site: Option<String>,
}

/// One word of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    /// What is compared: the word itself, the word with its variable part
    /// replaced by `<*>` (`uid=<*>`, `blk_<*>`), or `None` when the whole
    /// word is a variable.
    pub key: Option<Box<str>>,
    /// The word as written (cut at 64 bytes).
    pub raw: Box<str>,
    /// A status (`2` in `exit code 2`, `E404` in `code E404`): failures
    /// that differ here are never one family.
    pub pinned: bool,
}

/// The key of a failure from its message and stack trace.
pub fn key_of(message: &str, stack_trace: Option<&str>) -> Key {
    let message = clean(message);
    // Room for the lines of most messages, so the list is not regrown.
    let mut lines = Vec::with_capacity(64);
    let mut rest = message
        .split('\n')
        .map(|l| without_timestamp(trim(l)))
        .filter(|l| !l.is_empty());
    lines.extend(rest.by_ref().take(MAX_LINES_READ / 2));
    let mut tail = std::collections::VecDeque::new();
    for line in rest {
        if tail.len() == MAX_LINES_READ / 2 {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    lines.extend(tail);
    let mut words = Vec::new();
    let mut site = None;
    let mut frames = Vec::new();
    let mut headline = None;
    let mut first_line = None;
    let mut in_group = false;
    let mut after_trace = None;
    let mut skip_source = false;
    let mut in_python_trace = false;
    for (index, line) in lines.iter().enumerate() {
        if let Some(frame) = frame_of(line) {
            skip_source = frame.python;
            in_python_trace = frame.python;
            frames.push((index, frame));
            continue;
        }
        if std::mem::take(&mut skip_source) {
            // The source line Python prints under each frame.
            continue;
        }
        if is_trace_header(line) {
            continue;
        }
        if std::mem::take(&mut in_python_trace) {
            // The line after a Python trace: its exception.
            after_trace = Some(index);
        }
        if first_line.is_none() {
            first_line = Some(index);
        }
        // GitHub's echo of a step (its script, `shell:`, `env:`) runs from
        // `##[group]` to `##[endgroup]`.
        if line.starts_with("##[group]") {
            in_group = true;
        } else if line.starts_with("##[endgroup]") {
            in_group = false;
            continue;
        }
        if headline.is_none() && !in_group && !is_chatter(line) {
            headline = Some(index);
        }
    }
    // Only a runner's echo of its command or routine log lines: the first
    // of them, as before.
    let headline = headline.or(first_line);
    // The error line: a Python trace's exception, else a line that starts
    // with an exception (`pkg.mod.ConnectionError: ...`: the most specific
    // thing output says), else the first line that says it is an error,
    // else the headline.
    let searched = || {
        lines
            .iter()
            .enumerate()
            .skip(headline.unwrap_or(0))
            .take(MAX_LINES_SEARCHED)
    };
    // Among lines that say they are errors, the one a trace follows
    // closely (`panic: ...` then `goroutine 7 [running]:` and frames,
    // under a test runner's `--- FAIL: TestX`) is the crash the rest
    // reports: the last error line before the first frame, at most
    // `2 * FRAME_GAP` lines above it.
    let heads_trace = frames
        .iter()
        .map(|&(at, _)| at)
        .find(|&at| at > headline.unwrap_or(0))
        .and_then(|first_frame| {
            searched()
                .take_while(|&(i, _)| i < first_frame)
                .filter(|&(i, l)| {
                    first_frame - i <= 2 * FRAME_GAP
                        && is_error_line(l)
                        && frame_of(l).is_none()
                        && !is_chatter(l)
                })
                .last()
                .map(|(i, _)| i)
        });
    let exception = searched()
        .find(|(_, l)| starts_with_exception(l))
        .map(|(i, _)| i);
    let error = after_trace.or(exception).or(heads_trace).or_else(|| {
        searched()
            .find(|&(i, l)| {
                is_error_line(l)
                    && frame_of(l).is_none()
                    && !is_chatter(l)
                    && (Some(i) == headline || !is_bare_status(l))
            })
            .map(|(i, _)| i)
    });
    // A crash (an exception, a Go panic) is named by itself and its site, as in Sentry's grouping: the exit
    // status of what ran it is the runner's (`make test` exits 2 where
    // `go test` exits 1 for the same panic).
    let crash = after_trace.is_some() || error.is_some_and(|e| names_a_crash(lines[e]));
    // No error line in the message, but the stack_trace field has one (a
    // headline such as "command X failed" over a trace kept apart): the
    // exception names the cause, as in Sentry's grouping, and the headline
    // adds its statuses.
    let trace_error = match (error, stack_trace) {
        (None, Some(trace)) => exception_line(trace),
        _ => None,
    };
    if let Some(exception) = &trace_error {
        if let Some(h) = headline {
            push_statuses(&mut words, lines[h]);
        }
        push_words(&mut words, exception);
    }
    if let (Some(h), Some(e)) = (headline, error) {
        if h != e && !crash {
            // A headline that only wraps the error ("command X failed:
            // exit code 2") adds its statuses, not its variable words; so
            // does a runner's last line (`ERROR: Job failed: exit code
            // 1`, `Error: Process completed with exit code 1.`). Each
            // exit status once, under one name, whichever line and words
            // the runner gave it: one failure reported by two CI systems
            // is one cause.
            let mut exits = Vec::new();
            let trailer = lines.len().saturating_sub(TRAILER_LINES);
            for (i, line) in lines.iter().enumerate() {
                if i == e || (i != h && (i < trailer || !is_bare_status(line))) {
                    continue;
                }
                if i == h && !is_bare_status(line) {
                    push_statuses(&mut words, line);
                    continue;
                }
                push_exit_statuses(&mut exits, line);
            }
            for exit in exits {
                if words.len() + 2 <= MAX_WORDS {
                    words.push(word("exit", None));
                    words.push(Word {
                        key: Some(exit.into()),
                        raw: exit.into(),
                        pinned: true,
                    });
                }
            }
        }
    }
    if let Some(e) = error.or(headline).filter(|_| trace_error.is_none()) {
        if error.is_none() && is_diff(&lines[e + 1..]) {
            // No line says why, and the output is a diff: the code the
            // headline quotes is read as words (see `push_spelled`).
            push_spelled(&mut words, lines[e]);
        } else if starts_with_exception(lines[e]) {
            push_words(&mut words, without_gutter(lines[e]));
        } else {
            push_words(&mut words, lines[e]);
        }
        // A line that ends with a colon introduces its cause ("thread
        // 'main' panicked at src/lib.rs:4:5:" then the panic message).
        if lines[e].ends_with(':') {
            if let Some(next) = lines[e + 1..]
                .iter()
                .find(|l| frame_of(l).is_none() && !is_trace_header(l))
            {
                push_words(&mut words, next);
            }
        }
        site = panic_site(lines[e]).or_else(|| {
            headline
                .filter(|&h| h != e)
                .and_then(|h| panic_site(lines[h]))
        });
    }
    if site.is_none() {
        site = top_frame(&trace_of(
            &frames,
            error.or(headline),
            after_trace.is_some(),
        ));
    }
    if site.is_none() {
        if let Some(trace) = stack_trace.map(clean) {
            let frames: Vec<Frame> = trace
                .split('\n')
                .take(MAX_LINES_READ)
                .map(trim)
                .filter_map(frame_of)
                .collect();
            site = top_frame(&frames);
        }
    }
    if words.is_empty() {
        // Nothing above took a word (a message that is only a log level,
        // a trace header, times): its first line's words as written, so it
        // is not one family with every other such message.
        if let Some(first) = message.split('\n').map(trim).find(|l| !l.is_empty()) {
            let mut previous = None;
            for raw in split_words(first).take(MAX_WORDS) {
                words.push(word(raw, previous));
                previous = Some(raw);
            }
        }
    }
    words.truncate(MAX_WORDS);
    // A site is a path and a function: a longer one (a pasted blob after
    // "panicked at") is cut, so a family's row stays small.
    let site = site.map(|site| cut_to(&site, MAX_NAME_BYTES).to_string());
    Key { words, site }
}

/// The longest crash site or error type a family keeps: longer ones are
/// cut (and two that share this much are one).
pub const MAX_NAME_BYTES: usize = 256;

/// The error line of a stack trace kept apart from the message: its first
/// line that says it is an error and is not a frame.
fn exception_line(trace: &str) -> Option<String> {
    let trace = clean(trace);
    trace
        .split('\n')
        .take(MAX_LINES_SEARCHED)
        .map(trim)
        .find(|l| !l.is_empty() && is_error_line(l) && frame_of(l).is_none() && !is_trace_header(l))
        .map(str::to_string)
}

/// The frames of the error line's own trace: a Python trace's frames
/// before its exception line; for the others, the block of frames that
/// follows the error line (a test runner's output holds the traces of
/// many failures, and only the error's own locates it).
fn trace_of<'a>(
    frames: &[(usize, Frame<'a>)],
    error: Option<usize>,
    python: bool,
) -> Vec<Frame<'a>> {
    let Some(error) = error else {
        return Vec::new();
    };
    if python {
        return frames
            .iter()
            .filter(|(at, f)| f.python && *at < error)
            .map(|(_, f)| *f)
            .collect();
    }
    let mut block = Vec::new();
    let mut last = error;
    for (at, frame) in frames.iter().filter(|(at, _)| *at > error) {
        if *at > last + FRAME_GAP {
            break;
        }
        block.push(*frame);
        last = *at;
    }
    block
}

/// The message without terminal escapes and with `\n` line ends.
fn clean(text: &str) -> Cow<'_, str> {
    // Most messages have neither, and pay one quick pass: 64 bytes at a
    // time, each chunk's bytes tested without branching, which the
    // compiler vectorises (an `any` per byte is not, and two `contains`
    // read the text twice).
    let special = |b: u8| u8::from(b == b'\x1b') | u8::from(b == b'\r');
    if !text
        .as_bytes()
        .chunks(64)
        .any(|chunk| chunk.iter().fold(0, |seen, &b| seen | special(b)) != 0)
    {
        return Cow::Borrowed(text);
    }
    // The text between escapes is copied a run at a time. Every byte this
    // looks at is ASCII, so every cut is at a character boundary.
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    while let Some(found) = bytes[copied..].iter().position(|&b| special(b) != 0) {
        let at = copied + found;
        out.push_str(&text[copied..at]);
        copied = match bytes[at] {
            // CR and CRLF: one line end.
            b'\r' => {
                out.push('\n');
                match bytes.get(at + 1) {
                    Some(b'\n') => at + 2,
                    _ => at + 1,
                }
            }
            _ => match bytes.get(at + 1) {
                // CSI: parameters, then one final byte in @..~.
                Some(b'[') => bytes[at + 2..]
                    .iter()
                    .position(|b| (b'@'..=b'~').contains(b))
                    .map_or(bytes.len(), |end| at + 2 + end + 1),
                // OSC: up to BEL or ESC \.
                Some(b']') => (at + 2..bytes.len())
                    .find_map(|i| match bytes[i] {
                        b'\x07' => Some(i + 1),
                        b'\x1b' if bytes.get(i + 1) == Some(&b'\\') => Some(i + 2),
                        _ => None,
                    })
                    .unwrap_or(bytes.len()),
                // Any other escape drops the character after it.
                Some(_) => text[at + 1..]
                    .chars()
                    .next()
                    .map_or(bytes.len(), |c| at + 1 + c.len_utf8()),
                None => bytes.len(),
            },
        };
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Whether a line says it reports an error: one of its first words is an
/// error marker (`error:`, `ERROR`, `FAILED`, `npm ERR!`, `panic:`,
/// `KeyError:`, `Caused by:` ...), the way compilers, test runners,
/// package managers, runtimes and loggers start the lines that matter.
fn is_error_line(line: &str) -> bool {
    starts_with_location(line)
        || split_whitespace(line)
            .take(4)
            .any(|w| is_error_marker(core_of(w)))
}

/// Whether a line starts with an exception and its message (maybe after a
/// one-character gutter): a type named `...Error` or `...Exception`, maybe
/// qualified (`requests.exceptions.
/// ConnectionError:`, `java.lang.IllegalStateException:`), then a colon.
fn starts_with_exception(line: &str) -> bool {
    let Some(first) = split_whitespace(without_gutter(line)).next() else {
        return false;
    };
    let Some(name) = first.strip_suffix(':') else {
        return false;
    };
    let last = name.rsplit('.').next().unwrap_or(name);
    (last.ends_with("Error") || last.ends_with("Exception"))
        && last.len() > 5
        && last.starts_with(|c: char| c.is_ascii_uppercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'$')
}

/// A line without the gutter of one character a tool may put before an
/// error (pytest's `E   ValueError: ...`, a `>` or `|` of quoted
/// output), when a word follows it.
fn without_gutter(line: &str) -> &str {
    match find_space(line) {
        Some(1) => trim_start(&line[1..]),
        _ => line,
    }
}

/// Whether an error line names a crash: an exception (`ValueError: ...`)
/// or a Go panic (`panic: runtime error: ...`).
fn names_a_crash(line: &str) -> bool {
    starts_with_exception(line) || without_gutter(line).starts_with("panic: ")
}

/// The words that mark an error line.
const ERROR_MARKERS: &[&str] = &[
    "error",
    "Error",
    "ERROR",
    "ERR!",
    "fatal",
    "Fatal",
    "FATAL",
    "panic",
    "FAIL",
    "FAILED",
    "CONFLICT",
    "Killed",
    "Exception",
    "rejected",
];

/// Whether a word (without its wrappers) marks an error line: it is an
/// error marker or names an error type (`KeyError`), followed by nothing
/// or by `[...]` or `(...)` (`error[E0308]`).
fn is_error_marker(word: &str) -> bool {
    // A checklist's verdict after its dot leader (pre-commit's
    // `black.....Failed`, `test_x ... FAILED`), a logger's level after its
    // channel or field name (`production.ERROR`, `level=error`).
    // Looked for only behind a `.` or `=` (one byte read), as this runs on
    // the first words of every line.
    let bytes = word.as_bytes();
    let verdict_last = [
        "Failed", "FAILED", "ERROR", "CRITICAL", "FATAL", "error", "Error",
    ]
    .iter()
    .any(|v| {
        bytes.len() > v.len()
            && matches!(bytes[bytes.len() - v.len() - 1], b'.' | b'=')
            && word.ends_with(v)
    });
    if let Some(at) = word.rfind(['.', '=']).filter(|_| verdict_last) {
        let verdict = &word[at + 1..];
        let leader = word[..at].ends_with('.');
        if (leader && (verdict == "Failed" || verdict == "FAILED"))
            || (word.as_bytes()[at] == b'='
                && word[..at].eq_ignore_ascii_case("level")
                && verdict.eq_ignore_ascii_case("error"))
            || (word.as_bytes()[at] == b'.'
                && !leader
                && matches!(verdict, "ERROR" | "CRITICAL" | "FATAL"))
        {
            return true;
        }
    }
    // Its first letter rules out most words before their head is looked
    // for: it must be a marker's first letter, or a capital.
    let Some(&first) = word.as_bytes().first() else {
        return false;
    };
    if !first.is_ascii_uppercase() && !ERROR_MARKERS.iter().any(|m| m.as_bytes()[0] == first) {
        return false;
    }
    let head = word
        .bytes()
        .position(|b| matches!(b, b'[' | b'('))
        .map_or(word, |end| &word[..end]);
    ERROR_MARKERS.contains(&head)
        || ((head.ends_with("Error") || head.ends_with("Exception"))
            && head.len() > 5
            && head.starts_with(|c: char| c.is_ascii_uppercase()))
}

/// Whether a line starts the way compilers and checkers report an error
/// (`file.go:12:5: message`, the GNU format): a file name with an
/// extension, a line number, an optional column, a colon, then text.
fn starts_with_location(line: &str) -> bool {
    let Some((place, message)) = split_once(line, ": ") else {
        return false;
    };
    // Both shapes end with a line number: this rules out most lines before
    // the place is split.
    if !place.ends_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    let mut parts = place.rsplitn(3, ':');
    let (Some(last), Some(middle)) = (parts.next(), parts.next()) else {
        return false;
    };
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let file = match parts.next() {
        Some(file) if numeric(last) && numeric(middle) => file,
        _ if numeric(last) => middle,
        _ => return false,
    };
    !message.trim().is_empty()
        && !file.contains(char::is_whitespace)
        && file
            .rsplit_once('.')
            .is_some_and(|(stem, ext)| !stem.is_empty() && (1..=5).contains(&ext.len()))
}

/// A line's start without the time a logger or a CI runner put before it
/// (`2025-09-16T20:15:34.4846282Z`, `[2025-12-17 05:36:52]`, `2025-12-24
/// 14:38:26,838`): the same line at another time is the same line.
fn without_timestamp(line: &str) -> &str {
    if !line.starts_with(|c: char| c.is_ascii_digit() || c == '[' || c == '#') {
        return line;
    }
    let mut rest = line;
    for _ in 0..2 {
        let end = find_space(rest).unwrap_or(rest.len());
        let word = rest[..end].trim_matches(['[', ']']);
        let bytes = word.as_bytes();
        let is_time = bytes.first().is_some_and(u8::is_ascii_digit)
            && bytes.iter().all(|b| {
                b.is_ascii_digit() || matches!(b, b'-' | b':' | b'.' | b',' | b'T' | b'Z' | b'+')
            })
            && (bytes.iter().filter(|&&b| b == b'-').count() == 2
                || bytes.iter().filter(|&&b| b == b':').count() == 2);
        if !is_time {
            break;
        }
        rest = trim_start(&rest[end..]);
    }
    // GitHub's annotations (`##[error]Process completed with exit code
    // 1.`): the text is the line. (Its `##[group]` and `##[endgroup]` stay:
    // they tell where a step's echo ends, see `key_of`.)
    for marker in ["##[error]", "##[warning]", "##[notice]"] {
        if let Some(after) = rest.strip_prefix(marker) {
            return trim_start(after);
        }
    }
    rest
}

/// Whether a line is a runner's or a logger's chatter, never the line that
/// says what failed: a command echoed before it runs (`$ npm test`, `+
/// make`, GitHub's `Run npm test`, `[command]/usr/bin/git`), or a log
/// line at a routine level (`INFO`, `DEBUG`, `[debug]`, `level=info`,
/// `"level":"info"`, `production.DEBUG:`).
fn is_chatter(line: &str) -> bool {
    let mut words = split_whitespace(line);
    let Some(first) = words.next() else {
        return false;
    };
    if matches!(first, "$" | "+" | "++") || first.starts_with("[command]") {
        return true;
    }
    if first == "Run" && !is_error_line(line) && !line.contains("failed") {
        return true;
    }
    if first.starts_with('{') {
        // A JSON log line: its "level" field.
        return ["\"level\"", "\"severity\""].iter().any(|field| {
            split_once(line, field).is_some_and(|(_, rest)| {
                let value = rest.trim_start_matches([':', ' ', '"']);
                let end = value.find(['"', ',', '}', ' ']).unwrap_or(value.len());
                is_routine_level(&format!("level={}", &value[..end]))
            })
        });
    }
    std::iter::once(first)
        .chain(words.take(3))
        .any(is_routine_level)
}

/// Whether a word gives a log line's level as a routine one: `INFO`,
/// `DEBUG`, `TRACE` in capitals, any case in brackets (`[debug]`), as a
/// field (`level=info`, `"level":"debug"`, pino's `"level":30`) or after
/// an environment (Laravel's `production.INFO:`).
fn is_routine_level(raw: &str) -> bool {
    const LEVELS: &[&str] = &["info", "debug", "trace"];
    let named = |w: &str| LEVELS.iter().any(|l| w.eq_ignore_ascii_case(l));
    let word = raw.trim_matches([',', '{', '}', ':']);
    if let Some(inner) = word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
        return named(inner);
    }
    if let Some(at) = word.rfind(['=', ':']) {
        let key = word[..at].trim_matches('"');
        let value = word[at + 1..].trim_matches('"');
        return ["level", "lvl", "severity", "loglevel"]
            .iter()
            .any(|k| key.eq_ignore_ascii_case(k))
            && (named(value) || matches!(value, "10" | "20" | "30"));
    }
    let level = word.rsplit('.').next().unwrap_or(word);
    named(level) && level.bytes().all(|b| b.is_ascii_uppercase())
}

/// Whether a line only reports that something exited with a status: every
/// word is a runner's word for it (`ERROR: Job failed: exit code 1`,
/// `Error: Process completed with exit code 1.`, ``step failed: `x`
/// exited with status 1``, `script returned exit code 1`), a status, or
/// a value (the command). It says no more than the status does.
fn is_bare_status(line: &str) -> bool {
    const WORDS: &[&str] = &[
        "error",
        "failed",
        "fail",
        "failure",
        "job",
        "step",
        "process",
        "completed",
        "command",
        "script",
        "returned",
        "exited",
        "exit",
        "with",
        "code",
        "status",
        "non-zero",
        "nonzero",
        "the",
        "a",
        "has",
        "run",
        "task",
        "stage",
        "finished",
        "terminated",
        "cmd",
    ];
    let mut previous: Option<&str> = None;
    let mut status = false;
    for raw in split_words(line) {
        let core = core_of(raw);
        if is_status(previous, raw) {
            status = true;
        } else if !(core.is_empty()
            || is_quoted(raw)
            || is_variable(core)
            || WORDS.iter().any(|w| core.eq_ignore_ascii_case(w)))
        {
            return false;
        }
        previous = Some(raw);
    }
    status
}

/// The exit statuses a runner's line names (`exit code 1`, `status 2`,
/// `rc=1`), each once.
fn push_exit_statuses<'a>(exits: &mut Vec<&'a str>, line: &'a str) {
    let mut previous: Option<&str> = None;
    for raw in split_whitespace(line) {
        if is_status(previous, raw) {
            let value = core_of(raw);
            if !exits.contains(&value) {
                exits.push(value);
            }
        }
        previous = Some(raw);
    }
}

/// Last lines of a message where a runner reports the status its command
/// exited with.
const TRAILER_LINES: usize = 3;

/// The statuses a line names (`exit code 2`, `HTTP 503`): the status
/// word and the word after it.
fn push_statuses(words: &mut Vec<Word>, line: &str) {
    let mut previous: Option<&str> = None;
    for raw in split_whitespace(line) {
        if is_status(previous, raw) && words.len() + 2 <= MAX_WORDS {
            words.push(word(previous.unwrap_or_default(), None));
            words.push(word(raw, previous));
        }
        previous = Some(raw);
    }
}

fn push_words(words: &mut Vec<Word>, line: &str) {
    // A command line that ends the line is one value, whatever its number
    // of words (see `command_tail`).
    let (line, command) = match command_tail(line) {
        Some(at) => (&line[..at], Some(trim(&line[at..]))),
        None => (line, None),
    };
    push_line_words(words, line);
    if let Some(command) = command {
        if words.len() < MAX_WORDS {
            words.push(Word {
                key: None,
                raw: cut(command).into(),
                pinned: false,
            });
        }
    }
}

/// Whether output lines are a diff: some removed (`-x`) and some added
/// (`+x`) lines, not rules of dashes (`-----`).
fn is_diff(output: &[&str]) -> bool {
    let marked = |sign: u8| {
        output.iter().take(MAX_LINES_SEARCHED).any(|l| {
            let b = l.as_bytes();
            b.first() == Some(&sign) && b.get(1).is_some_and(|&c| c != sign)
        })
    };
    marked(b'-') && marked(b'+')
}

/// The words of a headline over output that is a diff and has no error
/// line, with each span in backticks read as its words: ``Command `cargo
/// fmt --all -- --check` failed: exit code 1`` over a diff is keyed as
/// `Command cargo fmt --all -- --check failed: ...`.
///
/// Why: a check that prints only a diff (a formatter's `--check`, a
/// snapshot or golden-file test, `git diff --exit-code`) failed because
/// what it checks differs from what it expects, and says so in no line:
/// the command that printed the diff is what names the check. Backticks
/// quote code, here that command. Elsewhere the command stays one
/// variable: when a line names the cause (``Command `npm run build`
/// failed`` over `error TS2322` is the TS2322 failure whatever ran it),
/// and when the output says why in words of its own (`permission denied
/// while trying to connect to the Docker daemon socket` under any docker
/// command). Its words are reduced as any others (paths, numbers and ids
/// stay variables). Other quotes (`'x'`, `"x"`) quote values.
fn push_spelled(words: &mut Vec<Word>, line: &str) {
    let mut rest = line;
    while let Some(open) = rest.find('`') {
        let Some(close) = rest[open + 1..].find('`').map(|i| open + 1 + i) else {
            break;
        };
        push_words(words, &rest[..open]);
        push_words(words, &rest[open + 1..close]);
        rest = &rest[close + 1..];
    }
    push_words(words, rest);
}

/// Where a command line that ends `line` starts, when the line introduces
/// it: the words before the line's last colon name a command (`command`,
/// `cmd`: "command timed out after 900s: cargo test --workspace", "Command
/// failed with exit code 1: npm run build", "command not found: foo").
///
/// Why: a message that names a command and then a colon puts the command
/// line after the colon; a command line is what was run, not why it
/// failed, and one cause (a timeout, a missing program) hits any command,
/// with any number of words. As separate words it would split one cause
/// by the command's length (the miner's word-count partition) and by its
/// words. Not when the command was already given in quotes before the
/// colon (``Command `x` failed: <reason>``: the tail is the reason), nor
/// when the tail holds a status or an error marker, or an error marker
/// comes between the command's name and the colon (`command failed: exit
/// status 2`, `cmd failed: error: disk full`): then it says why.
fn command_tail(line: &str) -> Option<usize> {
    // Most lines name no command: one quick look before the words.
    let bytes = line.as_bytes();
    let mut from = 0;
    loop {
        let at = from + bytes[from..].iter().position(|&b| b | 0x20 == b'c')?;
        let rest = &bytes[at + 1..];
        let starts = |with: &[u8]| {
            rest.get(..with.len())
                .is_some_and(|r| r.eq_ignore_ascii_case(with))
        };
        if starts(b"ommand") || starts(b"md") {
            break;
        }
        from = at + 1;
    }
    let words: Vec<&str> = split_words(line).collect();
    let last = words
        .iter()
        .rposition(|w| w.ends_with(':') && !is_quoted(w))?;
    let (prefix, tail) = words.split_at(last + 1);
    let names_command = |w: &&str| {
        let core = core_of(w);
        core.eq_ignore_ascii_case("command") || core.eq_ignore_ascii_case("cmd")
    };
    let named = prefix.iter().position(names_command)?;
    if tail.is_empty()
        || prefix.iter().any(|w| is_quoted(w))
        || prefix[named + 1..]
            .iter()
            .any(|w| is_error_marker(core_of(w)))
    {
        return None;
    }
    let mut previous = prefix.last().copied();
    for raw in tail {
        if is_status(previous, raw) || is_error_marker(core_of(raw)) {
            return None;
        }
        previous = Some(raw);
    }
    let colon = prefix[last];
    Some(colon.as_ptr() as usize - line.as_ptr() as usize + colon.len())
}

fn push_line_words(words: &mut Vec<Word>, line: &str) {
    let room = MAX_WORDS.saturating_sub(words.len());
    // A line with more words than the key has room for gives its first
    // words and its last: an error that wraps another puts the root cause
    // last (`fetching x: dial tcp 10.0.0.7:443: connection refused`,
    // Python's `... (Caused by SSLError(...: certificate has expired))`),
    // and a long line cut after its first words would lose it. The words
    // past the head are kept in a ring, one read of the line.
    let tail = TAIL_WORDS.min(room / 2);
    let head_end = MAX_WORDS - tail;
    let mut state = LineState {
        first: words.len(),
        previous: None,
        http: false,
        // make's `*** [target] Error 2`: the number after `Error` is the
        // recipe's exit status.
        make: line.contains("*** "),
    };
    const RING: usize = TAIL_WORDS + 1;
    let mut ring = [""; RING];
    let mut past_head = 0usize;
    let mut raws = split_words(line).peekable();
    while let Some(raw) = raws.next() {
        if words.len() >= head_end {
            ring[past_head % RING] = raw;
            past_head += 1;
            continue;
        }
        let after = raws.peek().copied();
        push_raw(words, &mut state, raw, after);
    }
    // The last words: all of those past the head when they fit, else the
    // last `tail` of them, after the word before them (their `previous`).
    let from = past_head - past_head.min(tail + 1);
    for at in from..past_head {
        let raw = ring[at % RING];
        if past_head > tail && at == from {
            state.previous = Some(raw);
            continue;
        }
        if words.len() >= MAX_WORDS {
            break;
        }
        let after = (at + 1 < past_head).then(|| ring[(at + 1) % RING]);
        push_raw(words, &mut state, raw, after);
    }
}

/// One word of a line, as [`push_line_word`] reads it, with the shapes
/// that are two words or none.
fn push_raw<'a>(
    words: &mut Vec<Word>,
    state: &mut LineState<'a>,
    raw: &'a str,
    after: Option<&str>,
) {
    // Most words hold neither a dot nor `=`: one look spares them the two
    // checks below.
    if raw.bytes().any(|b| b == b'.' || b == b'=') {
        // A checklist's line (`black.....Failed`): its name and its
        // verdict, not one word the length of its dot leader.
        if let Some((name, verdict)) = split_leader(raw) {
            push_line_word(words, state, name, Some(verdict));
            // The check that failed names the cause, as a step before
            // `failed` does: `black.....Failed` and `ruff.....Failed` in
            // one pre-commit run are two.
            if is_error_marker(core_of(raw)) && is_plain_word(name) {
                if let Some(last) = words.last_mut() {
                    last.key = Some(last.raw.clone());
                    last.pinned = true;
                }
            }
            if words.len() < MAX_WORDS {
                push_line_word(words, state, verdict, after);
            }
            return;
        }
        if is_logger_level(raw) {
            // `production.ERROR:`, `level=error`: which logger channel or
            // which spelling says it is an error is not the error.
            state.previous = Some(raw);
            return;
        }
    }
    push_line_word(words, state, raw, after);
}

/// Whether a word is a logger's level written with its channel or field
/// name (`production.ERROR:`, `staging.WARNING:`, `level=error`).
fn is_logger_level(raw: &str) -> bool {
    const LEVELS: &[&str] = &[
        "ERROR",
        "WARNING",
        "WARN",
        "CRITICAL",
        "FATAL",
        "INFO",
        "DEBUG",
        "NOTICE",
        "ALERT",
        "EMERGENCY",
    ];
    let word = raw.trim_end_matches(':');
    match word.rsplit_once(['.', '=']) {
        Some((name, level)) if word.as_bytes()[name.len()] == b'=' => {
            name.eq_ignore_ascii_case("level")
                && LEVELS.iter().any(|l| l.eq_ignore_ascii_case(level))
        }
        Some((name, level)) => {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'-')
                && LEVELS.contains(&level)
        }
        None => false,
    }
}

/// A word made of a name, a dot leader and a verdict (`black.....Failed`,
/// `test_x......ok`): the name and the verdict.
fn split_leader(raw: &str) -> Option<(&str, &str)> {
    let start = raw.find("...")?;
    let end = start + raw[start..].bytes().take_while(|&b| b == b'.').count();
    (start > 0 && end < raw.len()).then(|| (&raw[..start], &raw[end..]))
}

/// Words kept from the end of a line too long for the key (see
/// [`push_line_words`]).
const TAIL_WORDS: usize = 12;

/// What reading one line has learned so far.
struct LineState<'a> {
    /// Where the line's words start in the key.
    first: usize,
    previous: Option<&'a str>,
    /// The line is about HTTP (see [`push_line_word`]).
    http: bool,
    /// The line is make's report of a recipe that failed.
    make: bool,
}

fn push_line_word<'a>(
    words: &mut Vec<Word>,
    state: &mut LineState<'a>,
    raw: &'a str,
    after: Option<&str>,
) {
    let previous = state.previous;
    state.previous = Some(raw);
    if let Some(inner) = quoted_message(previous, raw) {
        // Error text quoted inside error text is read as words: it says
        // why (see `quoted_message`).
        let mut inner_state = LineState {
            first: words.len(),
            previous: None,
            http: state.http,
            make: false,
        };
        let mut inner_raws = split_words(inner).take(QUOTE_WORDS).peekable();
        while let Some(inner_raw) = inner_raws.next() {
            if words.len() >= MAX_WORDS {
                break;
            }
            let inner_after = inner_raws.peek().copied();
            push_line_word(words, &mut inner_state, inner_raw, inner_after);
        }
        // Its constant words are the cause itself: two failures that
        // differ there are two, however much of the rest agrees (`unable
        // to get local issuer certificate` against `certificate has
        // expired`, in one long pip line).
        for word in &mut words[inner_state.first..] {
            if word.key.is_some() {
                word.pinned = true;
            }
        }
        state.http |= inner_state.http;
        return;
    }
    let core = core_of(raw);
    // On a line about HTTP, a bare three-digit number from 100 to 599 is
    // a status (`HTTP request failed: 502 Bad Gateway`): 502 and 503 from
    // one host are two causes. Not when a unit follows it (`timed out
    // after 250 ms`): that is a measure.
    state.http |= core.eq_ignore_ascii_case("http")
        || core
            .as_bytes()
            .get(..5)
            .is_some_and(|head| head.eq_ignore_ascii_case(b"http/"));
    let mut next = word(raw, previous);
    let status = is_http_status(core)
        && ((state.http && !after.is_some_and(|w| is_unit(core_of(w))))
            || after.is_some_and(|w| is_reason_of(core, core_of(w)))
            || (after.is_none() && reports_a_status(previous)))
        || (state.make
            && previous == Some("Error")
            && after.is_none()
            && !core.is_empty()
            && core.len() <= 3
            && core.bytes().all(|b| b.is_ascii_digit()));
    if status {
        next.key = Some(next.raw.clone());
        next.pinned = true;
    } else if let Some(code) = quoted_status(raw) {
        // httpx's `Server error '502 Bad Gateway' for url ...`: a
        // quoted status line is its status, not a value.
        next.key = Some(code.into());
        next.pinned = true;
    }
    // A line that starts `<command> <step> failed` (`npm test
    // failed`, `git push failed`, `cargo build failed: ...`), or with
    // a word such as `has`, `command` or `step` between (`cargo test
    // has failed`, `npm test command failed`, `the lint step failed`),
    // names the step that failed in its second word: two steps that
    // fail are two causes, though all other words agree. Only there,
    // and only a plain lower-case word: further into a line the word
    // before `failed` is as often a value (`git push origin main
    // failed`, `pip install numpy failed`), and test names, branches
    // and ids mostly carry `_`, `-`, `/`, capitals or digits.
    let first = state.first;
    if is_failed(core)
        && words.len() >= first + 2
        && words[first + 2..].iter().all(|w| is_step_word(&w.raw))
    {
        let step = &mut words[first + 1];
        if is_plain_word(&step.raw) {
            step.pinned = true;
        }
    }
    // A list of variables is one variable: lists of versions or ids
    // vary in length as well as in value.
    if next.key.is_none()
        && words
            .last()
            .is_some_and(|w| w.key.is_none() && w.raw.ends_with(','))
    {
        return;
    }
    words.push(next);
}

/// The text inside a quoted word that is error text rather than a value,
/// to be read as words: the value of a field that holds a message
/// (`"message": "Rate limit reached for ..."`, `'reason': 'Overloaded'`,
/// `error="certificate has expired"`), a field that holds an error class
/// when the value is one name (`"code": "insufficient_quota"`, `'type':
/// 'overloaded_error'`), or the text an exception was raised with, when it
/// is a phrase (`SSLCertVerificationError(1, '[SSL: ...] certificate verify
/// failed: certificate has expired (_ssl.c:1006)')`).
///
/// Why: quotes mostly hold values (a name, a path, a command), which vary
/// between occurrences of one cause, so a quoted word is a variable. But an
/// API's JSON error body and a nested exception quote the very words that
/// tell two causes apart: a rate limit from an exhausted quota (both 429),
/// an unknown certificate issuer from an expired certificate (one pip
/// line). A field's name or an exception's constructor says which kind of
/// quote it is, whatever the tool.
fn quoted_message<'a>(previous: Option<&str>, raw: &'a str) -> Option<&'a str> {
    const MESSAGE_FIELDS: &[&str] = &[
        "message",
        "msg",
        "error",
        "err",
        "reason",
        "detail",
        "details",
        "description",
        "error_message",
        "errormessage",
        "error_description",
        "cause",
    ];
    const CLASS_FIELDS: &[&str] = &[
        "code",
        "type",
        "kind",
        "status",
        "error_code",
        "errorcode",
        "error_type",
        "errortype",
    ];
    let previous = previous?;
    // The quoted text: from the opening quote to its closing one, with
    // only closing punctuation after (`"Overloaded"}},`).
    let quote = raw
        .chars()
        .next()
        .filter(|c| matches!(c, '`' | '"' | '\''))?;
    let end = raw.rfind(quote).filter(|&end| end > 0)?;
    if !raw[end + 1..]
        .bytes()
        .all(|b| matches!(b, b',' | b';' | b':' | b'.' | b')' | b']' | b'}'))
    {
        return None;
    }
    let inner = &raw[1..end];
    if inner.is_empty() || inner.len() > MAX_LINE_QUOTE {
        return None;
    }
    let one_name = !inner.bytes().any(|b| b.is_ascii_whitespace());
    let (lead, field, tail) = unwrap(previous);
    let (field, assigned) = match field.strip_suffix('=') {
        Some(field) => (field, true),
        None => (field, false),
    };
    let names = |list: &[&str]| list.iter().any(|name| field.eq_ignore_ascii_case(name));
    // A key of JSON or of a Python dict (`"message":`, `'type':`) or an
    // assignment (`reason=`): not a label a line starts with (`error:
    // 'x' is not defined` quotes a value).
    let quoted_key = lead.ends_with(['"', '\'']) && tail.starts_with(['"', '\'']);
    let is_field = (assigned || (quoted_key && tail.contains(':'))) && !lead.contains('(');
    if is_field && (names(MESSAGE_FIELDS) || (one_name && names(CLASS_FIELDS))) {
        return Some(inner);
    }
    // `SSLCertVerificationError(1, '...')`: the text a constructor got.
    let constructs = previous.contains("Error(") || previous.contains("Exception(");
    let raised = constructs && (previous.ends_with('(') || previous.ends_with(','));
    (raised && split_whitespace(inner).nth(2).is_some()).then_some(inner)
}

/// Words read of quoted error text (see [`quoted_message`]): its first
/// words name the cause (`Rate limit reached for ...`, `You exceeded your
/// current quota ...`, `certificate verify failed: certificate has
/// expired`); what follows is detail and advice, whose values vary in
/// length (`of 80,000 input tokens per minute`, `of 4,000 requests per
/// minute`) and would split one cause by its number of words.
const QUOTE_WORDS: usize = 8;

/// The longest quoted text read as words (see [`quoted_message`]): longer
/// is a payload, not a message.
const MAX_LINE_QUOTE: usize = 1_024;

/// Whether a word may stand between a step's name and `failed` (`cargo
/// test has failed`, `npm test command failed`, `the lint step failed`).
fn is_step_word(raw: &str) -> bool {
    const WORDS: &[&str] = &[
        "has", "have", "had", "was", "is", "command", "step", "stage", "phase", "job", "task",
        "run", "script", "hook", "check",
    ];
    WORDS.contains(&raw)
}

/// Whether a word is a unit of time or size: the number before it is a
/// measure, not a status.
fn is_unit(core: &str) -> bool {
    const UNITS: &[&str] = &[
        "ms",
        "s",
        "sec",
        "secs",
        "second",
        "seconds",
        "millis",
        "milliseconds",
        "us",
        "µs",
        "min",
        "mins",
        "minute",
        "minutes",
        "b",
        "bytes",
        "kb",
        "kib",
        "mb",
        "mib",
        "gb",
        "gib",
        "ns",
        "h",
        "hours",
        "tokens",
        "retries",
        "attempts",
        "times",
        "items",
        "rows",
        "lines",
    ];
    UNITS.iter().any(|unit| core.eq_ignore_ascii_case(unit))
}

/// Whether `next` starts the reason phrase HTTP gives status `code`
/// (`502 Bad Gateway`, `404 Not Found`): then the number is that status,
/// on any line, as is one before requests' `Server Error` (5xx) or
/// `Client Error` (4xx). The phrase must be that code's own, so an id
/// before similar words (`User 123 Not Found`) stays a value.
fn is_reason_of(code: &str, next: &str) -> bool {
    const REASONS: &[(&str, &str)] = &[
        ("400", "Bad"),
        ("401", "Unauthorized"),
        ("402", "Payment"),
        ("403", "Forbidden"),
        ("404", "Not"),
        ("405", "Method"),
        ("406", "Not"),
        ("407", "Proxy"),
        ("408", "Request"),
        ("409", "Conflict"),
        ("410", "Gone"),
        ("411", "Length"),
        ("412", "Precondition"),
        ("413", "Payload"),
        ("413", "Request"),
        ("414", "URI"),
        ("415", "Unsupported"),
        ("416", "Range"),
        ("417", "Expectation"),
        ("418", "I'm"),
        ("421", "Misdirected"),
        ("422", "Unprocessable"),
        ("423", "Locked"),
        ("424", "Failed"),
        ("425", "Too"),
        ("426", "Upgrade"),
        ("428", "Precondition"),
        ("429", "Too"),
        ("431", "Request"),
        ("451", "Unavailable"),
        ("500", "Internal"),
        ("501", "Not"),
        ("502", "Bad"),
        ("503", "Service"),
        ("504", "Gateway"),
        ("505", "HTTP"),
        ("507", "Insufficient"),
        ("508", "Loop"),
        ("511", "Network"),
        ("529", "Overloaded"),
        ("529", "Site"),
    ];
    // requests' `502 Server Error: Bad Gateway`.
    let class = match code.as_bytes().first() {
        Some(b'4') => "Client",
        Some(b'5') => "Server",
        _ => "",
    };
    next == class
        || REASONS
            .iter()
            .any(|&(c, word)| c == code && word.eq_ignore_ascii_case(next))
}

/// Whether the word before a number that ends a line reports a status
/// (`upstream returned 502`, `Request failed: 502`, curl's `returned
/// error: 502`).
fn reports_a_status(previous: Option<&str>) -> bool {
    previous.is_some_and(|w| {
        let core = core_of(w);
        ["returned", "error", "failed", "status"]
            .iter()
            .any(|name| core.eq_ignore_ascii_case(name))
    })
}

/// The status of a quoted HTTP status line (`'502 Bad Gateway'`), if the
/// word is one.
fn quoted_status(raw: &str) -> Option<&str> {
    if !is_quoted(raw) {
        return None;
    }
    let inner = core_of(raw);
    let (code, rest) = split_once(inner, " ")?;
    let reason = split_whitespace(rest).next()?;
    (is_http_status(code) && is_reason_of(code, reason)).then_some(code)
}

/// Whether a word says something failed (`failed`, `Failed:`).
fn is_failed(core: &str) -> bool {
    core.eq_ignore_ascii_case("failed")
}

/// Whether a word is plain lower-case letters, as a step's name is
/// (`test`, `install`, `push`), and not an identifier.
fn is_plain_word(raw: &str) -> bool {
    (2..=24).contains(&raw.len()) && raw.bytes().all(|b| b.is_ascii_lowercase())
}

/// Whether a word is an HTTP status number (three digits, 100 to 599).
fn is_http_status(core: &str) -> bool {
    core.len() == 3
        && core.bytes().all(|b| b.is_ascii_digit())
        && (b'1'..=b'5').contains(&core.as_bytes()[0])
}

/// The words of a line: split at white space, except that a quoted span
/// (`` `npm run build` ``, `"a b"`, `'x y'`) is one word.
fn split_words(line: &str) -> impl Iterator<Item = &str> {
    let mut rest = trim_start(line);
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = find_space(rest).unwrap_or(rest.len());
        if let Some(quote) = rest
            .chars()
            .next()
            .filter(|c| matches!(c, '`' | '"' | '\''))
        {
            let first = &rest[..end];
            if first.len() == 1 || !first[1..].contains(quote) {
                if let Some(close) = rest[1..].find(quote) {
                    let close = 1 + close + 1;
                    end = find_space(&rest[close..]).map_or(rest.len(), |i| close + i);
                }
            }
        }
        let word = &rest[..end];
        rest = trim_start(&rest[end..]);
        Some(word)
    })
}

/// Whether a word is quoted text: a name, a value, a command, which
/// varies between occurrences of one failure.
pub(super) fn is_quoted(raw: &str) -> bool {
    // Bytes, not characters: the quotes and the punctuation are ASCII.
    let raw = raw.as_bytes();
    let end = raw
        .iter()
        .rposition(|b| !matches!(b, b',' | b';' | b':' | b'.' | b')' | b']'))
        .map_or(0, |last| last + 1);
    match raw[..end] {
        [open, .., close] => open == close && matches!(open, b'`' | b'"' | b'\''),
        _ => false,
    }
}

/// Characters that wrap a word without being part of it.
pub(super) fn is_wrapper(c: char) -> bool {
    matches!(
        c,
        ',' | ';' | ':' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '\'' | '"' | '`' | '.'
    )
}

/// A word split into its leading wrappers, its core and its trailing
/// wrappers. The core is `word.trim_matches(is_wrapper)`; this reads bytes
/// rather than characters, as every wrapper is ASCII, and it runs on every
/// word.
fn unwrap(word: &str) -> (&str, &str, &str) {
    let bytes = word.as_bytes();
    let wrapper = |b: &u8| is_wrapper(char::from(*b));
    let start = bytes
        .iter()
        .position(|b| !wrapper(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !wrapper(b))
        .map_or(start, |last| last + 1);
    (&word[..start], &word[start..end], &word[end..])
}

/// A word without its wrappers: `word.trim_matches(is_wrapper)`.
fn core_of(word: &str) -> &str {
    unwrap(word).1
}

/// One word: kept, or reduced to its constant part.
fn word(raw: &str, previous: Option<&str>) -> Word {
    let shown: Box<str> = cut(raw).into();
    let (lead, core, tail) = unwrap(raw);
    let key = if core.is_empty() {
        Some(shown.clone())
    } else if raw.len() > MAX_WORD_BYTES || is_quoted(raw) {
        None
    } else if is_status(previous, raw) {
        // `exit code 2`, `HTTP 503`, `code E404`: it names the failure.
        return Word {
            key: Some(shown.clone()),
            raw: shown,
            pinned: true,
        };
    } else if is_glued_status(core) {
        // `rc=1`, `status=502`, `exit:2`: a status glued to its name.
        return Word {
            key: Some(shown.clone()),
            raw: shown,
            pinned: true,
        };
    } else if is_variable(core) {
        let label = label_of(core);
        // A labelled value (`uid=<*>`) is compared by its label; a bare
        // one, wrapped or not (`(<*>)`, `<*>:`), by nothing.
        (!label.is_empty()).then(|| [lead, label, "<*>", tail].concat().into())
    } else {
        Some(shown.clone())
    };
    Word {
        key,
        raw: shown,
        pinned: false,
    }
}

fn cut(raw: &str) -> &str {
    cut_to(raw, MAX_WORD_BYTES)
}

/// `raw`'s first `max` bytes at most, at a character boundary.
pub fn cut_to(raw: &str, max: usize) -> &str {
    if raw.len() <= max {
        return raw;
    }
    let mut end = max;
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    &raw[..end]
}

/// Whether `raw` is a status: a number, an error code or an errno name
/// (`ENOENT`, `ERESOLVE`) after a word that names statuses.
fn is_status(previous: Option<&str>, raw: &str) -> bool {
    if !names_a_status(previous) {
        return false;
    }
    let core = core_of(raw);
    !core.is_empty()
        && (core.bytes().all(|b| b.is_ascii_digit())
            || is_error_code(core.as_bytes())
            || (core.len() > 2
                && core.starts_with('E')
                && core
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())))
}

/// Whether `core` is a status glued to the word that names it (`rc=1`,
/// `status=502`, `exit_code:2`).
fn is_glued_status(core: &str) -> bool {
    let Some(at) = core.find(['=', ':']) else {
        return false;
    };
    let value = &core[at + 1..];
    !value.is_empty() && is_status(Some(&core[..at]), value)
}

/// Whether the word before a number says the number is a status: exit
/// codes, HTTP statuses, signals and errnos tell failures apart.
fn names_a_status(previous: Option<&str>) -> bool {
    const NAMES: &[&str] = &[
        "code",
        "status",
        "exit",
        "exitcode",
        "exit_code",
        "status_code",
        "http",
        "signal",
        "errno",
        "rc",
    ];
    let Some(previous) = previous else {
        return false;
    };
    let word = core_of(previous).trim_end_matches('=');
    // Any case: `HTTP`, `Status`, `EXIT`. Compared in place, as a lowercase
    // copy would cost an allocation per word.
    NAMES.iter().any(|name| word.eq_ignore_ascii_case(name))
        || word
            .as_bytes()
            .get(..5)
            .is_some_and(|head| head.eq_ignore_ascii_case(b"http/"))
}

/// Whether a word varies between occurrences of one failure: it holds a
/// digit (numbers, ids, times, addresses, versions), a path, or is a hex
/// string.
fn is_variable(core: &str) -> bool {
    // Bytes, not characters: a character that is not ASCII separates parts
    // either way, and its bytes make only empty parts, which hold no digit.
    let core = core.as_bytes();
    (core.len() > 1 && core.iter().any(|b| matches!(b, b'/' | b'\\')))
        || core
            .split(|b| !b.is_ascii_alphanumeric())
            .any(|part| part.iter().any(u8::is_ascii_digit) && !is_error_code(part))
}

/// An error code: one to three capitals and three to five digits (`E0308`,
/// `TS2322`, `E404`). It names a kind of failure, not an occurrence.
fn is_error_code(part: &[u8]) -> bool {
    let letters = part.iter().take_while(|b| b.is_ascii_uppercase()).count();
    let digits = part.len() - letters;
    (1..=3).contains(&letters)
        && (3..=5).contains(&digits)
        && part[letters..].iter().all(u8::is_ascii_digit)
}

/// The label before a variable's value: `uid=` in `uid=0`, `blk_` in
/// `blk_-42`, `user:` in `user:1234`. Letters then a separator; empty when
/// the word does not start that way.
fn label_of(core: &str) -> &str {
    let mut end = 0;
    for (i, c) in core.char_indices() {
        if c.is_ascii_alphabetic() {
            continue;
        }
        if matches!(c, '_' | '=' | ':' | '#') {
            end = i + 1;
            continue;
        }
        break;
    }
    let label = &core[..end];
    if label.bytes().any(|b| b.is_ascii_alphabetic()) {
        label
    } else {
        ""
    }
}

/// A stack frame: the file and function it names.
#[derive(Clone, Copy, Debug)]
struct Frame<'a> {
    file: &'a str,
    function: &'a str,
    /// The function as the trace wrote it (a Rust symbol keeps its hash
    /// here), which is what tells a library's frame apart.
    symbol: &'a str,
    /// Python lists frames outermost first, and prints a source line
    /// under each; the others list the innermost first.
    python: bool,
}

impl Frame<'_> {
    /// Whether the frame is application code (not the runtime's or a
    /// dependency's) that failed in a function: a Python module's top
    /// level (`<module>`) runs as it is imported, so it names which file
    /// imported what failed (any test file, any entry point), not where a
    /// function failed. Asked only of the frames [`top_frame`] looks at, not
    /// of every frame of every trace.
    fn is_app(&self) -> bool {
        !is_library(self.file) && !is_library(self.symbol) && self.function != "<module>"
    }
}

fn is_trace_header(line: &str) -> bool {
    line.starts_with("Traceback (most recent call last)")
        || line.eq_ignore_ascii_case("stack backtrace:")
        || line.eq_ignore_ascii_case("stack trace:")
        || line.eq_ignore_ascii_case("backtrace:")
        || line.starts_with("note: run with `RUST_BACKTRACE")
        || (line.starts_with("goroutine ") && line.ends_with(':'))
}

/// The frame a trace line names, in the shapes of Python, Java, JavaScript,
/// Rust and Go traces.
fn frame_of(line: &str) -> Option<Frame<'_>> {
    // Python: File "app/db.py", line 12, in connect
    if let Some(rest) = line.strip_prefix("File \"") {
        let (file, rest) = rest.split_once('"')?;
        let function = rest.rsplit_once(" in ").map_or("", |(_, f)| f.trim());
        return Some(frame(file, function, true));
    }
    // pytest's trace: tests/conftest.py:4: in <module>
    if let Some((place, function)) = split_once(line, ": in ") {
        let file = strip_position(place);
        if file.len() < place.len() && file.ends_with(".py") && !file.contains(' ') {
            return Some(frame(file, function.trim(), true));
        }
    }
    // Java / JavaScript: at com.x.Y.m(Y.java:12) / at fn (file.js:1:2)
    if let Some(rest) = line.strip_prefix("at ") {
        let mut rest = rest;
        while let Some(awaited) = rest.strip_prefix("async ") {
            rest = awaited;
        }
        return Some(match rest.split_once('(') {
            Some((function, place)) => {
                let place = place.split(')').next().unwrap_or(place);
                frame(strip_position(place), function.trim(), false)
            }
            None => frame(strip_position(rest), "", false),
        });
    }
    // Rust backtraces: "12: my_crate::module::function" then
    // "at ./src/lib.rs:10:5"; the numbered line names the function.
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 {
        if let Some(function) = line[digits..].strip_prefix(": ") {
            // Native frames start with their address: `0x1c231f node::f`.
            let function = match function.trim().split_once(' ') {
                Some((address, rest)) if address.starts_with("0x") => rest,
                _ => function.trim(),
            };
            return Some(Frame {
                file: "",
                function: strip_hash(function),
                symbol: function,
                python: false,
            });
        }
    }
    // Go: main.handler(0x1, ...) then "/app/main.go:42 +0x1d"
    if line.starts_with('/') && split_once(line, ".go:").is_some() {
        return Some(frame(strip_position(line.split(' ').next()?), "", false));
    }
    None
}

fn frame<'a>(file: &'a str, function: &'a str, python: bool) -> Frame<'a> {
    Frame {
        file,
        function,
        symbol: function,
        python,
    }
}

/// `file.js:1:2` → `file.js`; `Y.java:12` → `Y.java`.
fn strip_position(place: &str) -> &str {
    let mut place = place.trim();
    while let Some((head, tail)) = place.rsplit_once(':') {
        if tail.is_empty() || tail.bytes().all(|b| b.is_ascii_digit()) {
            place = head;
        } else {
            break;
        }
    }
    place
}

/// A Rust symbol without its `::h0123abcd` hash.
fn strip_hash(function: &str) -> &str {
    match function.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            head
        }
        _ => function,
    }
}

/// Code that is not the application's: runtimes, standard libraries and
/// installed dependencies.
fn is_library(place: &str) -> bool {
    const MARKS: &[&str] = &[
        "site-packages",
        "dist-packages",
        "node_modules",
        "node:",
        "internal/",
        "<frozen",
        "/rustc/",
        "/.cargo/registry",
        "std::",
        "core::",
        "alloc::",
        "<std",
        "<core",
        "java.",
        "javax.",
        "sun.",
        "jdk.",
        "kotlin.",
        "scala.",
        "/usr/lib/",
        "/usr/local/lib/",
        "runtime.",
        "runtime/",
        "testing.",
        "__rust_",
        "rust_begin_unwind",
        "tokio::",
    ];
    MARKS.iter().any(|mark| place.contains(mark))
}

/// The innermost application frame, as `file:function`.
fn top_frame(frames: &[Frame<'_>]) -> Option<String> {
    let python = frames.first()?.python;
    let mut app = frames.iter().filter(|f| f.is_app());
    let top = if python { app.next_back() } else { app.next() }?;
    Some(format!("{}:{}", path_tail(top.file), top.function))
}

/// A file's last two path parts (`app/__init__.py` of
/// `/app/app/__init__.py`): a trace names one file from where the
/// process ran (`/app/`, `/home/runner/work/x/`, or relative), and two
/// parts tell the files of one project apart.
fn path_tail(file: &str) -> &str {
    match file.rmatch_indices(['/', '\\']).nth(1) {
        Some((at, _)) => &file[at + 1..],
        None => file,
    }
}

/// The place a Rust panic names in its headline ("thread 'x' panicked at
/// src/lib.rs:12:5:"), without its line and column.
fn panic_site(headline: &str) -> Option<String> {
    let (_, place) = split_once(headline, " panicked at ")?;
    let place = place.trim_end_matches(':').trim_end_matches(',');
    let place = place.split_whitespace().next()?;
    Some(strip_position(core_of(place)).to_string())
}

/// Where the first white space character of `text` starts:
/// `text.find(char::is_whitespace)`, without decoding the printable ASCII
/// that most of any line is, which is never white space: it is skipped
/// in one tight loop.
fn find_space(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = 0;
    loop {
        at += bytes[at..]
            .iter()
            .position(|b| !(b'!'..=b'~').contains(b))?;
        // A character boundary: the bytes before it are ASCII.
        let c = text[at..].chars().next()?;
        if c.is_whitespace() {
            return Some(at);
        }
        at += c.len_utf8();
    }
}

/// The ASCII white space of `char::is_whitespace`, which unlike
/// `u8::is_ascii_whitespace` includes the vertical tab.
fn is_ascii_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// `text.trim_start()`, skipping ASCII white space a byte at a time.
fn trim_start(text: &str) -> &str {
    let start = text
        .bytes()
        .position(|b| !is_ascii_space(b))
        .unwrap_or(text.len());
    let text = &text[start..];
    match text.as_bytes().first() {
        // White space that is not ASCII may follow.
        Some(first) if !first.is_ascii() => text.trim_start(),
        _ => text,
    }
}

/// `text.trim()`, trimming ASCII white space a byte at a time.
fn trim(text: &str) -> &str {
    let text = trim_start(text);
    let bytes = text.as_bytes();
    let end = bytes
        .iter()
        .rposition(|&b| !is_ascii_space(b))
        .map_or(0, |last| last + 1);
    match bytes[..end].last() {
        // White space that is not ASCII may end it.
        Some(last) if !last.is_ascii() => text[..end].trim_end(),
        _ => &text[..end],
    }
}

/// `text.split_whitespace()`, through [`find_space`].
fn split_whitespace(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = trim_start(text);
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (word, tail) = rest.split_at(find_space(rest).unwrap_or(rest.len()));
        rest = trim_start(tail);
        Some(word)
    })
}

/// `text.split_once(needle)` for a short needle (not empty), which this
/// module looks for on every line: comparing at each byte costs less than
/// setting up `str`'s substring searcher for lines this short.
fn split_once<'a>(text: &'a str, needle: &str) -> Option<(&'a str, &'a str)> {
    let at = text
        .as_bytes()
        .windows(needle.len())
        .position(|here| here == needle.as_bytes())?;
    Some((&text[..at], &text[at + needle.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(message: &str) -> Vec<Option<String>> {
        key_of(message, None)
            .words
            .into_iter()
            .map(|w| w.key.map(String::from))
            .collect()
    }

    #[test]
    fn variables_keep_their_labels_and_wrappers() {
        let k = keys("block blk_-42 uid=0 (10.0.0.1) user=root");
        assert_eq!(
            k,
            [
                Some("block".into()),
                Some("blk_<*>".into()),
                Some("uid=<*>".into()),
                None,
                Some("user=root".into()),
            ]
        );
    }

    #[test]
    fn statuses_stay_numbers() {
        assert_ne!(
            keys("exited with exit code 1"),
            keys("exited with exit code 2")
        );
        assert_ne!(keys("HTTP 502 from api"), keys("HTTP 503 from api"));
        assert_eq!(keys("took 12 ms"), keys("took 900 ms"));
    }

    #[test]
    fn colour_and_crlf_do_not_count() {
        assert_eq!(
            key_of("\x1b[31merror\x1b[0m: build failed\r\nmore", None),
            key_of("error: build failed\nother", None)
        );
    }

    #[test]
    fn the_output_after_the_headline_does_not_count() {
        assert_eq!(
            keys("npm test failed: 3 failed\n  at foo\n  random 1\nline"),
            keys("npm test failed: 9 failed\nsomething else entirely")
        );
    }

    #[test]
    fn a_status_glued_to_its_name_is_pinned() {
        let keys = |message: &str| -> Vec<Option<Box<str>>> {
            key_of(message, None)
                .words
                .into_iter()
                .map(|w| w.key)
                .collect()
        };
        for (a, b) in [
            ("deploy failed rc=1", "deploy failed rc=2"),
            (
                "upstream answered status=502",
                "upstream answered status=503",
            ),
            ("runner stopped exit=1", "runner stopped exit=2"),
        ] {
            assert_ne!(keys(a), keys(b), "{a} / {b}");
        }
        // A value glued to another name is still a variable.
        assert_eq!(keys("job done uid=1"), keys("job done uid=2"));
    }

    #[test]
    fn a_deep_python_trace_keeps_its_exception() {
        let trace = |exception: &str| {
            let mut text = String::from("Traceback (most recent call last):\n");
            for n in 0..1_100 {
                text.push_str(&format!(
                    "  File \"/app/deep.py\", line {n}, in step\n    step()\n"
                ));
            }
            text.push_str(exception);
            text
        };
        let a = key_of(&trace("ValueError: bad value"), None);
        let b = key_of(&trace("KeyError: 'user'"), None);
        assert_ne!(a.words, b.words);
        assert!(a.words.iter().any(|w| &*w.raw == "ValueError:"), "{a:?}");
    }

    #[test]
    fn a_huge_site_is_cut() {
        let path = format!("src/{}.rs", "é".repeat(100_000));
        let key = key_of(
            &format!("thread 'main' panicked at {path}:3:9:\nboom"),
            None,
        );
        let site = key.site.expect("a site");
        assert!(
            site.len() <= MAX_NAME_BYTES && site.starts_with("src/é"),
            "{}",
            site.len()
        );
    }

    #[test]
    fn a_rust_panic_is_keyed_by_message_and_site() {
        let a = key_of(
            "thread 'main' panicked at src/a.rs:10:5:\ncalled `Option::unwrap()` on a `None` value",
            None,
        );
        let b = key_of(
            "thread 'w' panicked at src/b.rs:10:5:\ncalled `Option::unwrap()` on a `None` value",
            None,
        );
        let a2 = key_of(
            "thread 'x' panicked at src/a.rs:99:1:\ncalled `Option::unwrap()` on a `None` value",
            None,
        );
        assert_eq!(a.site.as_deref(), Some("src/a.rs"));
        assert_ne!(a.site, b.site);
        assert_eq!(a.site, a2.site);
        assert!(a.words.iter().any(|w| w.raw.as_ref() == "`None`"));
    }

    #[test]
    fn a_python_trace_gives_its_exception_line_and_innermost_app_frame() {
        let trace = "Traceback (most recent call last):\n  File \"/app/main.py\", line 3, in run\n    handle()\n  File \"/app/db.py\", line 9, in fetch\n    return rows[key]\n  File \"/usr/lib/python3/site-packages/x.py\", line 1, in get\n    pass\nKeyError: 'user_id'";
        let key = key_of(trace, None);
        assert_eq!(key.site.as_deref(), Some("app/db.py:fetch"));
        assert_eq!(key.words[0].raw.as_ref(), "KeyError:");
    }

    #[test]
    fn a_separate_stack_trace_names_the_site() {
        let key = key_of(
            "NullPointerException: x is null",
            Some("at java.util.Objects.requireNonNull(Objects.java:209)\nat com.acme.Orders.place(Orders.java:42)\nat com.acme.Main.main(Main.java:7)"),
        );
        assert_eq!(
            key.site.as_deref(),
            Some("Orders.java:com.acme.Orders.place")
        );
    }

    #[test]
    fn a_command_a_line_introduces_is_one_value() {
        // Any command, any number of words: one variable.
        assert_eq!(
            keys("command timed out after 900s: cargo test --workspace"),
            keys("command timed out after 300s: npm test")
        );
        assert_eq!(
            keys("Command failed with exit code 1: docker build -t app ."),
            keys("Command failed with exit code 1: make check")
        );
        // The status before the colon still counts.
        assert_ne!(
            keys("Command failed with exit code 1: npm run build"),
            keys("Command failed with exit code 2: npm run build")
        );
        // After a quoted command, the tail is the reason: it stays words.
        assert_ne!(
            keys("Command `npm ci` failed: permission denied"),
            keys("Command `npm ci` failed: no space left on device")
        );
        // A tail that holds a status or an error says why: it stays words.
        assert_ne!(
            keys("command failed: exit status 1"),
            keys("command failed: exit status 2")
        );
        assert_ne!(
            keys("cmd failed: error: disk full"),
            keys("cmd failed: error: bad input")
        );
        // No command named before the colon: the tail is not one.
        assert_ne!(
            keys("failed to open /srv/a: permission denied"),
            keys("failed to open /srv/a: no such file or directory")
        );
    }

    #[test]
    fn a_quoted_command_counts_only_when_no_line_says_why() {
        let diff = "\nDiff in /app/src/a.rs:12:\n-    let x = 1;\n+    let x =\n+        1;";
        let fmt = format!(
            "Command `cargo fmt --all -- --check` failed: process exited with exit code 1{diff}"
        );
        let script = "Command `./scripts/ci-check.sh` failed: process exited with exit code 1\n==> lint\n------\n- step one";
        assert_ne!(keys(&fmt), keys(script));
        // Over output that is not a diff, the command stays a variable.
        assert_eq!(
            keys("Command `docker ps` failed: exit code 1\npermission denied while trying to connect"),
            keys("Command `docker compose up -d` failed: exit code 1\npermission denied while trying to connect")
        );
        // Its arguments are reduced as any words: a path stays a variable.
        assert_eq!(
            keys(&format!(
                "Command `./fmt.sh /tmp/a` failed: exit code 1{diff}"
            )),
            keys(&format!(
                "Command `./fmt.sh /srv/b` failed: exit code 1{diff}"
            ))
        );
        // With an error line, the command is a detail again.
        assert_eq!(
            keys("Command `npx tsc` failed: exit code 2\nsrc/a.ts(1,2): error TS2322: Type 'a' is not assignable to type 'b'."),
            keys("Command `npm run typecheck` failed: exit code 2\nsrc/b.ts(9,2): error TS2322: Type 'a' is not assignable to type 'b'.")
        );
        // Other quotes are values.
        assert_eq!(
            keys("Failed to load 'alpha'"),
            keys("Failed to load 'beta'")
        );
    }

    #[test]
    fn a_message_of_only_chatter_keeps_its_words() {
        // Each is all a message says: none may key to nothing, which
        // would make them one family.
        let keys: Vec<Vec<Word>> = [
            "level=error",
            "production.ERROR:",
            "Traceback (most recent call last):",
            "$ make",
        ]
        .iter()
        .map(|m| key_of(m, None).words)
        .collect();
        for (i, a) in keys.iter().enumerate() {
            assert!(!a.is_empty(), "{i}");
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn long_lines_and_words_are_bounded() {
        let long = "x".repeat(10_000);
        let key = key_of(&format!("failed {long} {}", "word ".repeat(5_000)), None);
        assert!(key.words.len() <= MAX_WORDS);
        assert!(key.words.iter().all(|w| w.raw.len() <= MAX_WORD_BYTES));
        assert_eq!(key.words[1].key, None);
    }
}
