//! `dlq watch`: follows the DLQ like `tail -f` (dlqlite::watch does the
//! following): prints each new dead letter, runs a hook per dead letter,
//! and keeps its place in a cursor file.

use super::output::{note, parse_filter};
use super::table::{self, Kind};
use super::{term, Context};
use anyhow::Result;
use dlqlite::store::{Event, ItemSummary};
use dlqlite::watch::{log_start, Cursor, Hook, HookOutcome, Notice, Seen, WatchOptions, Watcher};
use dlqlite::Dlq;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Follow new dead letters as they come (like tail -f)
///
/// Prints each dead letter as it is added, merged or imported, by any
/// process (with --events: every audit event), within a second; it polls
/// four times a second (one cheap check of the database). Without a cursor
/// it starts at the end of the log: only what comes next. A database file
/// removed or replaced while watched ends the watch with an error (exit 1).
///
/// --job-id and --filter select dead letters by the item as it is when its
/// event is handled (an item removed by then is skipped; with --events its
/// event is printed anyway, and events of other kinds are not filtered).
///
/// --exec CMD runs `/bin/sh -c CMD` once per dead letter, one at a time in
/// log order, with the item in the legacy JSON shape (as `dlq inspect`
/// prints it) on stdin and DLQ_JOB_ID, DLQ_ITEM_ID, DLQ_EVENT (added,
/// merged or imported) and DLQ_EVENT_ID in its environment; its stdout and
/// stderr go to stderr (escaped on a terminal). A hook that fails, or runs
/// past --exec-timeout and is killed, gets a warning on stderr; without a
/// cursor the watch goes on, with one the hook is run again (after 1 s,
/// doubling up to 60 s) until it succeeds, and with --once as well the
/// watch stops there (exit 1) so the next run starts with it. Hooks die
/// with dlq.
///
/// --since-cursor FILE keeps the id of the last event handled (printed and
/// its hook done), rewritten atomically after each: a watcher restarted
/// with the same FILE resumes after it, missing nothing and repeating
/// nothing, except that a watcher killed between a hook ending and the
/// cursor being written runs that one hook again (at least once). A
/// missing FILE is created at the starting point, an existing one is
/// rewritten at the start (a FILE that cannot be written stops the watch
/// before any hook runs); a FILE of another database is refused. When
/// `dlq retention apply` trimmed the audit log past FILE's place, or past
/// a running watch's, the watch stops (exit 1) and says so rather than
/// skip events; --from-start starts after the trimmed part.
///
/// Ctrl-C or SIGTERM stops it cleanly (exit 0; a running hook is killed and
/// runs again on the next start). With --once it handles what is there and
/// exits: 0, or 1 when a hook failed.
///
/// Examples:
///   dlq watch --once --from-start --job-id mapreduce-20251123_194253
///   dlq watch --once --from-start --format jsonl --filter 'failure_count >= 3'
///   dlq watch --once --since-cursor watch.cursor --exec 'jq -r .item_id'
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Only this job
    #[arg(long)]
    job_id: Option<String>,
    /// Only dead letters matching this expression (see `dlq list --help`)
    #[arg(long, value_name = "EXPR")]
    filter: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t = WatchFormat::Table)]
    format: WatchFormat,
    /// Every audit event, not only new dead letters
    #[arg(long)]
    events: bool,
    /// Run this command once per new dead letter (see above)
    #[arg(long, value_name = "CMD", value_parser = non_blank)]
    exec: Option<String>,
    /// Seconds a hook may run before its process group is killed (0: no
    /// limit)
    #[arg(long, value_name = "SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(0..=30 * 86_400))]
    exec_timeout: u64,
    /// Keep the last event handled in FILE and resume after it
    #[arg(long, value_name = "FILE")]
    since_cursor: Option<PathBuf>,
    /// Without a cursor yet: start at the first event, not at the end
    #[arg(long)]
    from_start: bool,
    /// Handle what is there, then exit
    #[arg(long)]
    once: bool,
}

/// `--format` of a stream: lines only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum WatchFormat {
    /// One line per dead letter, for people
    Table,
    /// One JSON object per line
    Jsonl,
}

fn non_blank(text: &str) -> std::result::Result<String, String> {
    if text.trim().is_empty() {
        Err("the command is empty".into())
    } else {
        Ok(text.to_string())
    }
}

/// How often an idle watcher looks: a new dead letter shows within this.
const POLL: Duration = Duration::from_millis(250);
/// The first wait before a failed hook is run again, doubling up to the
/// second.
const HOOK_BACKOFF_START: Duration = Duration::from_secs(1);
const HOOK_BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Sleeps `duration`, or less if a stop is asked for; false when stopped.
fn sleep_unless_stopped(duration: Duration, stop: &AtomicBool) -> bool {
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !stop.load(Ordering::Relaxed)
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    let filter = parse_filter(args.filter.as_deref())?;
    let dlq = ctx.open_existing()?;
    if dlq.is_snapshot() && !args.once {
        // It would print nothing ever again, without a word.
        anyhow::bail!(
            "cannot follow {}: it can only be read as it is now (read-only, in a directory \
             where SQLite cannot make its shared-memory file), so nothing added later would \
             show; run the watch as a user who can write that directory, or --once from cron",
            ctx.db_path().display()
        );
    }
    // The file opened: a watch that went on reading a database removed or
    // replaced under it would print nothing ever again.
    // (A database on a server has no file to be replaced.)
    let identity = dlqlite::db::file_id(ctx.db_path());
    let on_file = dlq.backend() == dlqlite::store::Backend::Sqlite;
    let cursor = match args.since_cursor.as_deref() {
        Some(path) => {
            let (cursor, notice) = Cursor::open(path, &dlq, ctx.db_path(), args.from_start)?;
            tell(notice, Some(path));
            Some(cursor)
        }
        None => None,
    };
    if let Some(job_id) = &args.job_id {
        if !job_has_anything(&dlq, job_id)? {
            // Not an error (the job may come later), but a typo must show.
            note(&format!(
                "dlq: note: job {job_id} has no dead letters yet; waiting for them"
            ));
        }
    }
    let start = match &cursor {
        Some(cursor) => cursor.position(),
        None if args.from_start => {
            let (start, notice) = log_start(&dlq)?;
            tell(notice, None);
            start
        }
        None => dlq.last_event_id()?,
    };
    let hook = args
        .exec
        .as_deref()
        .map(|command| {
            let timeout = (args.exec_timeout > 0).then(|| Duration::from_secs(args.exec_timeout));
            Hook::new(command, timeout)
        })
        .transpose()?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // Only watch sets a handler in this process.
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed));
    }
    let options = WatchOptions {
        job_id: args.job_id.clone(),
        filter,
        every_event: args.events,
    };
    let mut watcher = Watcher::new(&dlq, start, options)?;
    let mut printer = Printer {
        format: args.format,
        header_done: false,
    };
    let mut cursor = cursor;
    let mut hooks_failed = false;
    let mut identity_checked = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // A read that fails because the file was removed or replaced under
        // it (SQLite can meet a removed -shm as a disk I/O error) says so.
        let next = watcher.next_pending().map_err(|error| {
            match on_file.then(|| still_the_database(ctx.db_path(), identity)) {
                Some(Err(replaced)) => replaced,
                _ => error.into(),
            }
        });
        let Some(seen) = next? else {
            // Caught up (or stopped): events passed over still move the
            // cursor, so a restart does not read them again.
            if let Some(cursor) = &mut cursor {
                cursor.save(&dlq, watcher.position())?;
            }
            if args.once || stop.load(Ordering::Relaxed) {
                break;
            }
            // Idle: a stat of the path about once a second (the cursor, as
            // saved above, is consistent: the next run may use it).
            if identity_checked.elapsed() >= IDENTITY_CHECK {
                identity_checked = Instant::now();
                if on_file {
                    still_the_database(ctx.db_path(), identity)?;
                }
            }
            sleep_unless_stopped(POLL, &stop);
            continue;
        };
        printer.print(&seen)?;
        if let (Some(hook), Some(item)) = (&hook, &seen.item) {
            // With a cursor, delivery is the point: a failing hook (a
            // webhook that is down) is tried again, with backoff, before
            // the watch moves on; with --once the watch stops there, the
            // cursor before it, for the next run. Without a cursor nothing
            // is remembered anyway: warn and go on.
            let mut backoff = HOOK_BACKOFF_START;
            let handled = loop {
                match run_hook(hook, &dlq, &seen.event, item, &stop)? {
                    HookOutcome::Succeeded => break true,
                    HookOutcome::Stopped => break false,
                    HookOutcome::Failed(why) => {
                        hooks_failed = true;
                        let again = cursor.is_some() && !args.once;
                        note(&format!(
                            "dlq: warning: --exec for item {} of job {} (event {}) {why}{}",
                            item.item_id,
                            item.job_id,
                            seen.event.id,
                            if again {
                                format!("; trying again in {}s", backoff.as_secs())
                            } else if cursor.is_some() {
                                "; stopping here: the next run starts with it".to_string()
                            } else {
                                String::new()
                            }
                        ));
                        if cursor.is_none() {
                            break true;
                        }
                        if !again || !sleep_unless_stopped(backoff, &stop) {
                            break false;
                        }
                        // A hook retried for a database that is gone would
                        // go on for ever.
                        if on_file {
                            still_the_database(ctx.db_path(), identity)?;
                        }
                        backoff = (backoff * 2).min(HOOK_BACKOFF_MAX);
                    }
                }
            };
            // Not handled: the cursor stays before it.
            if !handled {
                break;
            }
        }
        if let Some(cursor) = &mut cursor {
            cursor.save(&dlq, seen.event.id)?;
        }
    }
    Ok(if args.once && hooks_failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// How often an idle watch checks that its database file is still the one
/// it opened.
const IDENTITY_CHECK: Duration = Duration::from_secs(1);

/// An error when the file at `path` is no longer the one watched (removed,
/// or another file moved over it).
fn still_the_database(path: &Path, identity: Option<(u64, u64)>) -> Result<()> {
    if identity.is_none() || dlqlite::db::file_id(path) != identity {
        anyhow::bail!(
            "database {} was removed or replaced while being watched; restart the watch",
            path.display()
        );
    }
    Ok(())
}

/// Whether the job has a dead letter or an event yet (one indexed lookup
/// each).
fn job_has_anything(dlq: &Dlq, job_id: &str) -> Result<bool> {
    if !dlq.events_after(0, Some(job_id), None, 1)?.is_empty() {
        return Ok(true);
    }
    let filter = dlqlite::ListFilter {
        job_id: Some(job_id.to_string()),
        ..dlqlite::ListFilter::default()
    };
    Ok(dlq.list(filter).next().transpose()?.is_some())
}

/// Runs the hook for one dead letter. An item removed since it was
/// checked has nothing to give the hook: passed over, as if gone before.
fn run_hook(
    hook: &Hook,
    dlq: &Dlq,
    event: &Event,
    item: &ItemSummary,
    stop: &AtomicBool,
) -> Result<HookOutcome> {
    let whole = match dlq.get(Some(&item.job_id), &item.item_id) {
        Ok(whole) => whole,
        Err(dlqlite::Error::ItemNotFound { .. }) => return Ok(HookOutcome::Succeeded),
        Err(e) => return Err(e.into()),
    };
    let input = whole.to_legacy_json_pretty()?;
    let env = [
        ("DLQ_JOB_ID", item.job_id.clone()),
        ("DLQ_ITEM_ID", item.item_id.clone()),
        ("DLQ_EVENT", event.kind.clone()),
        ("DLQ_EVENT_ID", event.id.to_string()),
    ];
    Ok(hook.run(&env, input.as_bytes(), stop))
}

/// Writes each event as it is handled, flushed at once (a reader at the
/// other end of a pipe sees it then).
struct Printer {
    format: WatchFormat,
    header_done: bool,
}

impl Printer {
    fn print(&mut self, seen: &Seen) -> Result<()> {
        let line = match self.format {
            WatchFormat::Jsonl => {
                let text = serde_json::to_string(&json_line(seen))?;
                dlqlite::text::json_for_terminal(&text).into_owned()
            }
            WatchFormat::Table => {
                let settings = term::get();
                let mut text = String::new();
                if !self.header_done {
                    self.header_done = true;
                    let header: Vec<String> = LINE
                        .iter()
                        .map(|(name, kind, width)| table::fixed_cell(name, *kind, *width))
                        .collect();
                    text.push_str(&settings.fit(&format!("{}  MESSAGE", header.join("  "))));
                    text.push('\n');
                }
                text.push_str(&settings.fit(&table_line(seen)));
                text
            }
        };
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")?;
        out.flush()?;
        Ok(())
    }
}

/// The columns of a table line before MESSAGE, with their widths: the
/// table is drawn a line at a time, so widths cannot follow the data.
const LINE: [(&str, Kind, usize); 6] = [
    ("TIME", Kind::Text, 20),
    ("EVENT", Kind::Text, 13),
    ("JOB", Kind::Id, 25),
    ("ITEM", Kind::Id, 16),
    ("FAILS", Kind::Count, 5),
    ("ERROR TYPE", Kind::Text, 22),
];

/// One line for people: time, event, job, item, fails, error type and the
/// message's headline, each escaped for the terminal and cut to its width.
fn table_line(seen: &Seen) -> String {
    let event = &seen.event;
    let time = term::get().time(&event.time.to_legacy());
    let (fails, error_type, message) = match &seen.item {
        Some(item) => (
            item.failure_count.to_string(),
            item.error_type.clone().unwrap_or_default(),
            dlqlite::text::headline(item.error_message.as_deref().unwrap_or("")).to_string(),
        ),
        None => (
            String::new(),
            String::new(),
            match &event.detail {
                serde_json::Value::Null => String::new(),
                detail => detail.to_string(),
            },
        ),
    };
    let values = [
        time,
        event.kind.clone(),
        event.job_id.clone().unwrap_or_default(),
        event.item_id.clone().unwrap_or_default(),
        fails,
        error_type,
    ];
    let cells: Vec<String> = LINE
        .iter()
        .zip(&values)
        .map(|((_, kind, width), value)| table::fixed_cell(value, *kind, *width))
        .collect();
    // Cut as `dlq list` cuts it: to the terminal (the whole line, by the
    // caller), else to MAX_CELL unless --wide; a pipe that wants whole
    // messages reads --format jsonl.
    let settings = term::get();
    let message = if settings.wide || settings.width.is_some() {
        dlqlite::text::for_terminal(&message).into_owned()
    } else {
        table::fixed_cell(&message, Kind::Message, term::MAX_CELL)
    };
    format!("{}  {}", cells.join("  "), message)
        .trim_end()
        .to_string()
}

/// One JSON object: the event, and the item's summary when it is a dead
/// letter (or the event's detail otherwise).
fn json_line(seen: &Seen) -> serde_json::Value {
    let event = &seen.event;
    let mut line = json!({
        "event_id": event.id,
        "event": event.kind,
        "time": event.time,
        "job_id": event.job_id,
        "item_id": event.item_id,
    });
    match (&seen.item, line.as_object_mut()) {
        (Some(item), Some(object)) => {
            if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(item) {
                for (key, value) in fields {
                    object.entry(key).or_insert(value);
                }
            }
        }
        (None, Some(object)) => {
            object.insert("detail".to_string(), event.detail.clone());
        }
        _ => {}
    }
    line
}

/// Says a cursor's notice on stderr.
fn tell(notice: Option<Notice>, cursor: Option<&Path>) {
    match notice {
        None => {}
        Some(Notice::StartsAfterTrim { through_id }) => note(&format!(
            "dlq: note: the audit log was trimmed by retention up to event {through_id}: \
             the watch starts after it"
        )),
        Some(Notice::CursorEventTrimmed {
            event_id,
            trimmed_at,
        }) => note(&format!(
            "dlq: note: cursor {}: its event {event_id} was trimmed from the audit log by \
             `dlq retention apply` ({}); nothing after it was",
            cursor
                .map(Path::display)
                .map(|d| d.to_string())
                .unwrap_or_default(),
            term::get().time(&trimmed_at.to_storage())
        )),
    }
}
