//! Following the DLQ as it grows (`dlq watch`, and anything else that wants
//! new dead letters as they come): [`Watcher`] walks the audit log forward
//! from a position, a batch at a time, and checks each announced dead
//! letter against a job and a filter by the item's state when it is
//! handled; [`Hook`] runs a shell command per dead letter in a process
//! group that dies with this process.
//!
//! The log is the feed because nothing else records every arrival in
//! order: an add writes an `added` or `merged` event and an import one
//! `imported` event per item, in the writing transaction, and events commit
//! in id order (see `store/events.rs`). So a position is one event id, and a
//! follower that keeps it (a cursor file) misses nothing and repeats
//! nothing. Retention may trim the oldest events (a prefix of the log);
//! a watcher whose position falls inside the trimmed part stops with
//! [`Error::EventsTrimmed`] rather than skip what it never saw.

mod cursor;

pub use cursor::{log_start, Cursor, Notice};

use crate::error::{Error, Result};
use crate::filter::{Column, Expr, Field, Literal, Op};
use crate::retry::pipes::Pipes;
use crate::store::{ChangeProbe, Event, EventKind, ItemSummary};
use crate::{Dlq, ListFilter};
use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Events read from the log at a time.
const BATCH: usize = 256;

/// The kinds that announce a dead letter (see
/// [`EventKind::announces_dead_letter`]).
const DEAD_LETTER_KINDS: [EventKind; 3] =
    [EventKind::Added, EventKind::Merged, EventKind::Imported];

/// What a [`Watcher`] hands out.
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// Only events of this job.
    pub job_id: Option<String>,
    /// Only dead letters whose item matches this, as it is when its event
    /// is handled.
    pub filter: Option<Expr>,
    /// Every event, not only those announcing a dead letter (events of
    /// other kinds are not checked against `filter`).
    pub every_event: bool,
}

/// One event handed out by a [`Watcher`].
#[derive(Clone, Debug)]
pub struct Seen {
    pub event: Event,
    /// The dead letter the event announces, as it is now; `None` for an
    /// event of another kind, or (with [`WatchOptions::every_event`]) one
    /// whose item is gone or no longer matches.
    pub item: Option<ItemSummary>,
}

/// Follows the audit log forward from a position; see the module docs.
/// Reads are short (one batch of events, one item per dead letter) and hold
/// no transaction between calls, so a watcher never keeps writers waiting
/// or the WAL from being reset.
pub struct Watcher {
    dlq: Dlq,
    options: WatchOptions,
    /// The last event consumed (handed out or passed over).
    position: i64,
    /// Read but not handed out yet.
    pending: VecDeque<Event>,
    /// Where the position may move once `pending` is empty: the end of the
    /// log before the last short batch was read (everything up to it was
    /// read, matching or not).
    read_to: i64,
    /// The last batch was full: read again without asking the probe.
    more: bool,
    probe: ChangeProbe,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("position", &self.position)
            .field("options", &self.options)
            .finish()
    }
}

impl Watcher {
    /// A watcher handing out what comes after event `after` (0: the whole
    /// log, or in a log retention trimmed the through_id of
    /// [`Dlq::last_trim`]; [`Dlq::last_event_id`]: only what comes next).
    pub fn new(dlq: &Dlq, after: i64, options: WatchOptions) -> Result<Self> {
        Ok(Watcher {
            dlq: dlq.clone(),
            options,
            position: after,
            pending: VecDeque::new(),
            read_to: after,
            more: false,
            probe: dlq.change_probe()?,
        })
    }

    /// The id of the last event consumed: a resumed watcher starting
    /// after it misses nothing and repeats nothing.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// The next event to handle, without waiting: `None` once caught up.
    /// Idle, a call costs one `PRAGMA data_version`.
    pub fn next_pending(&mut self) -> Result<Option<Seen>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.position = event.id;
                if let Some(seen) = self.select(event)? {
                    return Ok(Some(seen));
                }
                continue;
            }
            self.position = self.position.max(self.read_to);
            // The probe is read before the log: a commit after it makes the
            // next probe say yes.
            if !self.more && !self.probe.changed()? {
                return Ok(None);
            }
            // One indexed lookup per batch (idle polls stop above).
            if let Some(trim) = self.dlq.last_trim()? {
                if self.position < trim.through_id {
                    return Err(Error::EventsTrimmed {
                        position: self.position,
                        through_id: trim.through_id,
                    });
                }
            }
            let end = self.dlq.last_event_id()?;
            let kinds = (!self.options.every_event).then_some(&DEAD_LETTER_KINDS[..]);
            let batch = self.dlq.events_after(
                self.position,
                self.options.job_id.as_deref(),
                kinds,
                BATCH,
            )?;
            self.more = batch.len() == BATCH;
            if !self.more {
                // A short batch holds every match up to the end read
                // before it: the events between that were not matches.
                self.read_to = end;
            }
            if batch.is_empty() {
                self.position = self.position.max(self.read_to);
                return Ok(None);
            }
            self.pending.extend(batch);
        }
    }

    /// Waits up to `poll` at a time, until an event comes or `stop` is set
    /// (then `None`).
    pub fn next(&mut self, poll: Duration, stop: &AtomicBool) -> Result<Option<Seen>> {
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if let Some(seen) = self.next_pending()? {
                return Ok(Some(seen));
            }
            sleep_unless(poll, stop);
        }
    }

    /// The event as handed out, or `None` to pass over it.
    fn select(&self, event: Event) -> Result<Option<Seen>> {
        let announces = event
            .kind
            .parse::<EventKind>()
            .is_ok_and(|kind| kind.announces_dead_letter());
        let item = match (&event.job_id, &event.item_id) {
            (Some(job_id), Some(item_id)) if announces => self.current(job_id, item_id)?,
            _ => None,
        };
        let wanted = item.is_some() || self.options.every_event;
        Ok(wanted.then_some(Seen { event, item }))
    }

    /// The item as it is now, if it is there and matches the filter: one
    /// lookup on the (job_id, item_id) index, the filter compiled as
    /// listings compile it.
    fn current(&self, job_id: &str, item_id: &str) -> Result<Option<ItemSummary>> {
        let this_item = Expr::Compare {
            field: Field::Column(Column::ItemId),
            op: Op::Eq,
            value: Literal::Text(item_id.to_string()),
        };
        let expression = match &self.options.filter {
            Some(filter) => Expr::And(Box::new(this_item), Box::new(filter.clone())),
            None => this_item,
        };
        let filter = ListFilter {
            job_id: Some(job_id.to_string()),
            expression: Some(expression),
            ..ListFilter::default()
        };
        self.dlq.list(filter).next().transpose()
    }
}

/// Sleeps `total`, waking early when `stop` is set.
fn sleep_unless(total: Duration, stop: &AtomicBool) {
    let deadline = Instant::now() + total;
    while !stop.load(Ordering::Relaxed) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// A shell command run once per dead letter (`dlq watch --exec`): `/bin/sh
/// -c CMD` in a process group of its own, which the retry guard kills if
/// this process dies (even by SIGKILL); its stdout and stderr go, through
/// one pipe, to this process's stderr (stdout is the watcher's output):
/// line by line and escaped when stderr is a terminal (a hook printing an
/// item's id must not be able to clear the screen), as they are otherwise
/// (a log keeps the bytes).
pub struct Hook {
    command: String,
    timeout: Option<Duration>,
    guard: crate::retry::command::GroupGuard,
}

/// How a [`Hook`] run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookOutcome {
    /// Exit status 0.
    Succeeded,
    /// Anything else, said for people ("exited with status 3").
    Failed(String),
    /// Stopped (and killed) because the caller's stop flag was set.
    Stopped,
}

impl Hook {
    /// A hook running `command` (not blank), killed past `timeout`.
    pub fn new(command: &str, timeout: Option<Duration>) -> Result<Self> {
        if command.trim().is_empty() {
            return Err(Error::invalid_argument("command", "it is empty"));
        }
        Ok(Hook {
            command: command.to_string(),
            timeout,
            guard: crate::retry::command::GroupGuard::start()
                .map_err(|e| Error::io("/bin/sh", e))?,
        })
    }

    /// Runs the command once with `input` on stdin and `env` added to its
    /// environment; waits for it (and for nothing of its process group to
    /// be left), killing it past the timeout or once `stop` is set.
    pub fn run(&self, env: &[(&str, String)], input: &[u8], stop: &AtomicBool) -> HookOutcome {
        match self.try_run(env, input, stop) {
            Ok(outcome) => outcome,
            Err(e) => HookOutcome::Failed(format!("cannot run it: {e}")),
        }
    }

    fn try_run(
        &self,
        env: &[(&str, String)],
        input: &[u8],
        stop: &AtomicBool,
    ) -> std::io::Result<HookOutcome> {
        let (output, output_writer) = std::io::pipe()?;
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(&self.command)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(output_writer.try_clone()?)
            .stderr(output_writer)
            .process_group(0);
        // SAFETY: the closure runs in the child between fork and exec and
        // only calls prctl(2), which is async-signal-safe: the shell dies
        // with this process; the guard takes care of what it started.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let spawned = command.spawn();
        // Our copies of the write end are gone (dropped with `command`):
        // the copier sees the end once the hook's group has let go of it.
        drop(command);
        let mut child = spawned?;
        let group = i32::try_from(child.id()).unwrap_or(0);
        self.guard.tell(format!("+{group}\n"));
        // Not a scoped thread: something that left the hook's process group
        // (setsid) may hold the pipe forever; the copier is waited for only
        // briefly after the group is gone, and otherwise left to end alone.
        let (copied, copied_receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            copy_to_stderr(output);
            let _ = copied.send(());
        });
        let started = Instant::now();
        // A hook that does not read its stdin, or hands it to something
        // that leaves its group, must not hold us: the input goes in only
        // as the pipe takes it, and is dropped once the hook has ended.
        let mut stdin = Pipes::new(child.stdin.take(), input, None::<std::process::ChildStderr>);
        let ended = loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    break Ok(if status.success() {
                        HookOutcome::Succeeded
                    } else if let Some(code) = status.code() {
                        HookOutcome::Failed(format!("exited with status {code}"))
                    } else {
                        HookOutcome::Failed(format!(
                            "killed by signal {}",
                            status.signal().unwrap_or(0)
                        ))
                    });
                }
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            if stop.load(Ordering::Relaxed) {
                crate::retry::command::kill_group(group);
                let _ = child.wait();
                break Ok(HookOutcome::Stopped);
            }
            if let Some(timeout) = self.timeout.filter(|t| started.elapsed() >= *t) {
                crate::retry::command::kill_group(group);
                let _ = child.wait();
                break Ok(HookOutcome::Failed(format!(
                    "timed out after {}s and was killed",
                    timeout.as_secs_f64()
                )));
            }
            stdin.pump(crate::retry::command::POLL);
        };
        drop(stdin);
        // Nothing of a hook outlives it (leftovers would pile up, one set
        // per dead letter).
        crate::retry::command::terminate_group(group);
        let outcome = ended;
        self.guard.tell(format!("-{group}\n"));
        // The group is gone: its output is in the pipe already, unless a
        // process that left the group holds the pipe, which is not waited
        // for (a moment, not a second per dead letter).
        let _ = copied_receiver.recv_timeout(Duration::from_millis(100));
        outcome
    }
}

/// Longest line kept whole when escaping: longer ones are cut into pieces of
/// this size (memory stays flat whatever a hook prints).
const HOOK_LINE: usize = 16 * 1024;

/// Copies a hook's output to stderr until its end: escaped line by line
/// (crate::text::for_terminal) when stderr is a terminal, raw otherwise.
fn copy_to_stderr(mut output: std::io::PipeReader) {
    use std::io::{IsTerminal, Read};
    if !std::io::stderr().is_terminal() {
        let _ = std::io::copy(&mut output, &mut std::io::stderr());
        return;
    }
    let show = |line: &[u8]| {
        let text = String::from_utf8_lossy(line);
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{}", crate::text::for_terminal(&text));
    };
    let mut pending = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match output.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => pending.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            show(&pending[..end]);
            pending.drain(..=end);
        }
        while pending.len() >= HOOK_LINE {
            show(&pending[..HOOK_LINE]);
            pending.drain(..HOOK_LINE);
        }
    }
    if !pending.is_empty() {
        show(&pending);
    }
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook")
            .field("command", &self.command)
            .field("timeout", &self.timeout)
            .finish()
    }
}
