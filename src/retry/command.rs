//! The handler behind `dlq retry --exec CMD`: one `sh -c CMD` per attempt,
//! in its own process group, with the item's item_data on stdin and
//! DLQ_JOB_ID, DLQ_ITEM_ID, DLQ_ATTEMPT and DLQ_ITEM_FILE (the whole item in
//! the legacy shape) in its environment. Exit 0 is success; anything else is
//! a CommandFailed attempt with the tail of stderr; past the timeout the
//! whole process group is killed and the attempt is a Timeout.

use super::{Attempt, AttemptFailure, Handler, Outcome, RunControl};
use crate::model::{error_types, ErrorType};
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// How much of the end of stderr is kept (as the attempt's stack_trace).
const STDERR_TAIL: usize = 16 * 1024;
/// What a pipe holds before a writer blocks (Linux's default).
const PIPE_CAPACITY: usize = 64 * 1024;
/// How many of its last lines make the error_message.
const MESSAGE_LINES: usize = 3;

/// Runs a shell command per attempt.
pub struct CommandHandler {
    pub command: String,
    pub timeout: Option<Duration>,
    /// Where DLQ_ITEM_FILE files are written.
    pub scratch_dir: std::path::PathBuf,
}

/// Kills every running command's process group.
pub fn kill_all(control: &RunControl) {
    let groups = match control.running.lock() {
        Ok(groups) => groups.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    for group in groups {
        kill_group(group);
    }
}

fn kill_group(group: i32) {
    // SAFETY: kill(2) with a negative pid signals that process group; it has
    // no memory effects on this process.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
}

/// Keeps the tail of a stream.
fn read_tail(mut stream: impl Read) -> Vec<u8> {
    let mut tail = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&buffer[..n]);
                if tail.len() > 2 * STDERR_TAIL {
                    tail.drain(..tail.len() - STDERR_TAIL);
                }
            }
        }
    }
    if tail.len() > STDERR_TAIL {
        tail.drain(..tail.len() - STDERR_TAIL);
    }
    tail
}

fn failure(error_type: ErrorType, message: String, stderr: &str, step: &str) -> Outcome {
    Outcome::Failure(AttemptFailure {
        error_type,
        error_message: message,
        stack_trace: if stderr.is_empty() {
            None
        } else {
            Some(stderr.to_string())
        },
        step_failed: step.to_string(),
    })
}

impl CommandHandler {
    fn run(&self, attempt: &Attempt<'_>) -> std::io::Result<Outcome> {
        let step = format!("exec: {}", self.command);
        let item = &attempt.item.item;
        let item_file = self.scratch_dir.join(format!(
            "dlq-item-{}-{:x}.json",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::write(
            &item_file,
            item.to_legacy_json_pretty()
                .map_err(std::io::Error::other)?,
        )?;
        let _cleanup = RemoveOnDrop(&item_file);

        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .env("DLQ_JOB_ID", &attempt.item.job_id)
            .env("DLQ_ITEM_ID", &item.item_id)
            .env("DLQ_ATTEMPT", attempt.number.to_string())
            .env("DLQ_ITEM_FILE", &item_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        // SAFETY: the closure runs in the child between fork and exec and
        // only calls prctl(2), which is async-signal-safe: if dlq dies (even
        // by SIGKILL) the shell is killed too instead of running on without
        // a lease.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        let group = i32::try_from(child.id()).unwrap_or(0);
        if let Ok(mut running) = attempt.control.running.lock() {
            running.push(group);
        }
        if attempt.control.killing() {
            kill_group(group);
        }

        let data = item.item_data.get().as_bytes();
        let mut stdin = child.stdin.take();
        let stderr = child.stderr.take();
        let finished = (Mutex::new(false), Condvar::new());
        // Data that fits the pipe's buffer goes in at once (a write that
        // cannot block); more goes through a thread, so a command that does
        // not read its stdin cannot block us.
        if data.len() <= PIPE_CAPACITY {
            if let Some(mut pipe) = stdin.take() {
                let _ = pipe.write_all(data);
            }
        }
        let (status, tail, timed_out) = std::thread::scope(|scope| {
            if let Some(mut pipe) = stdin.take() {
                scope.spawn(move || {
                    let _ = pipe.write_all(data);
                });
            }
            let reader = scope.spawn(move || stderr.map(read_tail).unwrap_or_default());
            let finished_ref = &finished;
            let watchdog = self.timeout.map(|timeout| {
                scope.spawn(move || {
                    let guard = match finished_ref.0.lock() {
                        Ok(guard) => guard,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    let (guard, result) =
                        match finished_ref
                            .1
                            .wait_timeout_while(guard, timeout, |done| !*done)
                        {
                            Ok(pair) => pair,
                            Err(poisoned) => poisoned.into_inner(),
                        };
                    if result.timed_out() && !*guard {
                        kill_group(group);
                        return true;
                    }
                    false
                })
            });
            let status = child.wait();
            {
                let mut done = match finished.0.lock() {
                    Ok(done) => done,
                    Err(poisoned) => poisoned.into_inner(),
                };
                *done = true;
                finished.1.notify_all();
            }
            let timed_out = watchdog.map(|w| w.join().unwrap_or(false)).unwrap_or(false);
            // The group may still hold the stderr pipe open (a background
            // child); make sure nothing of it survives the attempt.
            if timed_out || attempt.control.killing() {
                kill_group(group);
            }
            let tail = reader.join().unwrap_or_default();
            (status, tail, timed_out)
        });
        if let Ok(mut running) = attempt.control.running.lock() {
            running.retain(|g| *g != group);
        }
        let status = status?;
        let stderr = String::from_utf8_lossy(&tail).into_owned();
        if timed_out {
            let seconds = self.timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0);
            return Ok(failure(
                ErrorType::named(error_types::TIMEOUT),
                format!("command timed out after {seconds}s and was killed"),
                &stderr,
                &step,
            ));
        }
        if status.success() {
            return Ok(Outcome::Success);
        }
        let last_lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let message_tail = last_lines[last_lines.len().saturating_sub(MESSAGE_LINES)..].join("\n");
        let (error_type, message) = match (status.code(), status.signal()) {
            (Some(code), _) => (
                ErrorType::command_failed(i64::from(code)),
                if message_tail.is_empty() {
                    format!("command exited with status {code}")
                } else {
                    message_tail
                },
            ),
            (None, Some(signal)) => (
                ErrorType::named(error_types::COMMAND_FAILED),
                format!("command killed by signal {signal}"),
            ),
            (None, None) => (
                ErrorType::named(error_types::UNKNOWN),
                "command ended oddly".to_string(),
            ),
        };
        Ok(failure(error_type, message, &stderr, &step))
    }
}

impl Handler for CommandHandler {
    fn attempt(&self, attempt: &Attempt<'_>) -> Outcome {
        match self.run(attempt) {
            Ok(outcome) => outcome,
            Err(e) => failure(
                ErrorType::named(error_types::UNKNOWN),
                format!("cannot run the command: {e}"),
                "",
                &format!("exec: {}", self.command),
            ),
        }
    }
}

struct RemoveOnDrop<'a>(&'a std::path::Path);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// A per-call suffix for scratch files (no randomness needed, only
/// uniqueness within this process).
fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
