//! The handler behind `dlq retry --exec CMD`: one `sh -c CMD` per attempt,
//! in its own process group, with the item's item_data on stdin and
//! DLQ_JOB_ID, DLQ_ITEM_ID, DLQ_ATTEMPT, DLQ_ITEM_FILE (the whole item in
//! the legacy shape) and DLQ_RESULT_FILE (an empty file of its own) in its
//! environment. Exit 0 is success; anything else is a CommandFailed attempt
//! with the tail of stderr, unless the command wrote
//! `{"error_type": ..., "error_message": ...}` to DLQ_RESULT_FILE, which
//! then names the failure; past the timeout the whole process group is
//! killed and the attempt is a Timeout.

use super::pipes::Pipes;
use super::{Attempt, AttemptFailure, Handler, Outcome, RunControl};
use crate::model::{error_types, ErrorType};
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the supervisor waits on the pipes between looks at the child.
pub(crate) const POLL: Duration = Duration::from_millis(10);
/// How often a command's process group is looked up in /proc while only
/// its stderr is waited for.
const GROUP_LOOK: Duration = Duration::from_millis(100);
/// How many of its last lines make the error_message.
const MESSAGE_LINES: usize = 3;

/// Runs a shell command per attempt.
pub struct CommandHandler {
    command: String,
    timeout: Option<Duration>,
    /// Where DLQ_ITEM_FILE files are written: a directory of this run's
    /// own (mode 0700), removed when the handler is dropped.
    scratch: ScratchDir,
    /// Kills the commands' process groups if this process dies.
    guard: GroupGuard,
}

impl CommandHandler {
    /// A handler for `command` (refused when empty: it would succeed for
    /// every item and remove them all) with an optional timeout. Creates
    /// the run's private scratch directory under `tmp` (the system's temp
    /// directory normally), after removing those of runs that died.
    pub fn new(
        command: &str,
        timeout: Option<Duration>,
        tmp: &std::path::Path,
    ) -> crate::error::Result<Self> {
        if command.trim().is_empty() {
            return Err(crate::error::Error::invalid_argument(
                "command",
                "it is empty (an empty command would succeed and remove every item)",
            ));
        }
        Ok(CommandHandler {
            command: command.to_string(),
            timeout,
            scratch: ScratchDir::create(tmp)?,
            guard: GroupGuard::start().map_err(|e| crate::error::Error::io("/bin/sh", e))?,
        })
    }
}

/// A small `/bin/sh` process, in a process group of its own, told on a pipe
/// which process groups the running commands have (`+PGID`, `-PGID` when
/// one ends). When the pipe closes (dlq ended, even by SIGKILL) it sends
/// SIGTERM, then SIGKILL, to every group still listed. PR_SET_PDEATHSIG on
/// each shell reaches only the shell: the commands it started (and theirs)
/// would run on, without a lease, while a resumed run starts them again.
/// A process that leaves its group (setsid) escapes this; see SECURITY.md.
pub(crate) struct GroupGuard {
    pipe: Mutex<Option<std::process::ChildStdin>>,
    child: std::process::Child,
}

const GUARD_SCRIPT: &str = r#"
groups=""
while read -r line; do
  case "$line" in
    +*) groups="$groups ${line#+}" ;;
    -*) gone=${line#-}; kept=""
        for g in $groups; do [ "$g" = "$gone" ] || kept="$kept $g"; done
        groups=$kept ;;
  esac
done
[ -z "$groups" ] && exit 0
for g in $groups; do kill -s TERM -- "-$g" 2>/dev/null; done
sleep 2
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
exit 0
"#;

impl GroupGuard {
    pub(crate) fn start() -> std::io::Result<Self> {
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(GUARD_SCRIPT)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group: Ctrl-C at the terminal must not end it first.
            .process_group(0)
            .spawn()?;
        Ok(GroupGuard {
            pipe: Mutex::new(child.stdin.take()),
            child,
        })
    }

    pub(crate) fn tell(&self, line: String) {
        let mut pipe = match self.pipe.lock() {
            Ok(pipe) => pipe,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(writer) = pipe.as_mut() {
            let _ = writer.write_all(line.as_bytes());
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        match self.pipe.lock() {
            Ok(mut pipe) => drop(pipe.take()),
            Err(poisoned) => drop(poisoned.into_inner().take()),
        }
        let _ = self.child.wait();
    }
}

/// A directory only this process can enter (created with mkdir, 0700, so
/// an existing name or a planted symlink makes the creation fail, not get
/// followed), removed with its files when dropped. Stale ones of dead
/// processes are swept at creation.
struct ScratchDir(std::path::PathBuf);

const SCRATCH_PREFIX: &str = "dlq-retry-";

impl ScratchDir {
    fn create(tmp: &std::path::Path) -> crate::error::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        sweep_stale(tmp);
        let pid = std::process::id();
        for attempt in 0..100u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let path = tmp.join(format!(
                "{SCRATCH_PREFIX}{pid}-{:08x}",
                nanos ^ attempt.wrapping_mul(0x9e37_79b9)
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(ScratchDir(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(crate::error::Error::io(&path, e)),
            }
        }
        Err(crate::error::Error::io(
            tmp,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "no free name for a scratch directory",
            ),
        ))
    }

    /// Writes `contents` to a new file `name` in the directory: created
    /// exclusively, never through a symlink, mode 0600.
    fn write_new(&self, name: &str, contents: &[u8]) -> std::io::Result<std::path::PathBuf> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.0.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        file.write_all(contents)?;
        Ok(path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes the scratch directories of `dlq retry` runs whose process is
/// gone (killed before they could clean up). Only directories owned by this
/// user, never through a symlink.
fn sweep_stale(tmp: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me {
            continue;
        }
        // SAFETY: kill(2) with signal 0 only checks whether the process
        // exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
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

pub(crate) fn kill_group(group: i32) {
    // SAFETY: kill(2) with a negative pid signals that process group; it has
    // no memory effects on this process.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
}

/// Ends what is left of a process group: SIGTERM, up to two seconds to
/// go, then SIGKILL.
pub(crate) fn terminate_group(group: i32) {
    if group <= 0 {
        return;
    }
    let alive = || group_alive(group);
    if !alive() {
        return;
    }
    unsafe {
        libc::kill(-group, libc::SIGTERM);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_group(group);
}

/// Whether a process of the group still runs. kill(-group, 0) also finds
/// zombies, and the orphans of a killed shell stay zombies for as long as
/// the process that inherits them does not reap them (some containers' init
/// never does), so /proc has the last word.
fn group_alive(group: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks whether the group exists.
    if unsafe { libc::kill(-group, 0) } != 0 {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
        pgrp == Some(group) && state != Some("Z")
    })
}

fn failure(error_type: ErrorType, message: String, stderr: &str, step: &str) -> Outcome {
    Outcome::Failure(AttemptFailure {
        error_type,
        error_message: message,
        error_context: None,
        stack_trace: if stderr.is_empty() {
            None
        } else {
            Some(stderr.to_string())
        },
        step_failed: step.to_string(),
    })
}

impl CommandHandler {
    /// One attempt: the item to a scratch file and the command's stdin, the
    /// command run in a process group of its own, its outcome read from its
    /// exit status (or the timeout).
    fn run(&self, attempt: &Attempt<'_>) -> std::io::Result<Outcome> {
        let step = format!("exec: {}", self.command);
        let item = &attempt.item.item;
        let item_file = self.scratch.write_new(
            &format!("item-{:x}.json", rand_suffix()),
            item.to_legacy_json_pretty()
                .map_err(std::io::Error::other)?
                .as_bytes(),
        )?;
        let _cleanup = RemoveOnDrop(&item_file);
        // Empty, 0600, in the run's private directory: the command may say
        // there why it failed.
        let result_file = self
            .scratch
            .write_new(&format!("result-{:x}.json", rand_suffix()), b"")?;
        let _cleanup_result = RemoveOnDrop(&result_file);
        let (child, group) = self.spawn(attempt, &item_file, &result_file)?;
        let ended = self.supervise(attempt, child, group, item.item_data.get().as_bytes());
        if let Ok(mut running) = attempt.control.running.lock() {
            running.retain(|g| *g != group);
        }
        let Ended {
            status,
            stderr,
            timed_out,
        } = ended;
        let status = status?;
        let stderr = String::from_utf8_lossy(&stderr).into_owned();
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
        let (error_type, message) = exit_failure(status, &stderr);
        let mut outcome = failure(error_type, message, &stderr, &step);
        if let Outcome::Failure(failed) = &mut outcome {
            match read_result_file(&result_file) {
                ResultFile::Empty => {}
                ResultFile::Reported {
                    error_type,
                    error_message,
                } => {
                    failed.error_type = match (error_type.as_str(), status.code()) {
                        (error_types::COMMAND_FAILED, Some(code)) => {
                            ErrorType::command_failed(i64::from(code))
                        }
                        _ => ErrorType::named(error_type),
                    };
                    if let Some(message) = error_message {
                        failed.error_message = message;
                    }
                }
                ResultFile::Ignored(why) => {
                    failed.error_context = Some(vec![format!("DLQ_RESULT_FILE ignored: {why}")]);
                }
            }
        }
        Ok(outcome)
    }

    /// Starts the command for `attempt` in a process group of its own, which
    /// the guard and the run know about (a run being killed kills it at
    /// once). Returns the child and its group.
    fn spawn(
        &self,
        attempt: &Attempt<'_>,
        item_file: &std::path::Path,
        result_file: &std::path::Path,
    ) -> std::io::Result<(Child, i32)> {
        let item = &attempt.item.item;
        // /bin/sh, not whatever `sh` a PATH finds first.
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(&self.command)
            .env("DLQ_JOB_ID", &attempt.item.job_id)
            .env("DLQ_ITEM_ID", &item.item_id)
            .env("DLQ_ATTEMPT", attempt.number.to_string())
            .env("DLQ_ITEM_FILE", item_file)
            .env("DLQ_RESULT_FILE", result_file)
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
        let child = command.spawn()?;
        let group = i32::try_from(child.id()).unwrap_or(0);
        self.guard.tell(format!("+{group}\n"));
        if let Ok(mut running) = attempt.control.running.lock() {
            running.push(group);
        }
        if attempt.control.killing() {
            kill_group(group);
        }
        Ok((child, group))
    }

    /// Feeds `data` to the child's stdin, keeps the tail of its stderr,
    /// waits for it (killing its group at the timeout, or when the run is
    /// killed), and leaves nothing of its group running. Never waits for a
    /// process that left the group (see `pipes`).
    fn supervise(&self, attempt: &Attempt<'_>, mut child: Child, group: i32, data: &[u8]) -> Ended {
        let mut pipes = Pipes::new(child.stdin.take(), data, child.stderr.take());
        let started = Instant::now();
        let past_timeout = || self.timeout.is_some_and(|t| started.elapsed() >= t);
        let mut timed_out = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            let killed = attempt.control.killing();
            if killed || past_timeout() {
                timed_out = !killed;
                kill_group(group);
                break child.wait();
            }
            pipes.pump(POLL);
        };
        pipes.close_stdin();
        // The shell is gone, but what it started in the background may
        // still hold stderr open: that is still the attempt, and the
        // timeout covers it too. Once nothing of the group is left, whoever
        // still holds the pipe left the group; its output is not waited for.
        let mut looked = Instant::now();
        while !pipes.stderr_done() && !attempt.control.killing() {
            if past_timeout() {
                timed_out = true;
                terminate_group(group);
                pipes.pump(Duration::ZERO);
                break;
            }
            if looked.elapsed() >= GROUP_LOOK {
                looked = Instant::now();
                if !group_alive(group) {
                    pipes.pump(Duration::ZERO);
                    break;
                }
            }
            pipes.pump(POLL);
        }
        // Nothing of the attempt outlives it: a leftover would run on
        // without a lease.
        terminate_group(group);
        self.guard.tell(format!("-{group}\n"));
        Ended {
            status,
            stderr: pipes.into_tail(),
            timed_out,
        }
    }
}

/// How an attempt's command ended.
struct Ended {
    status: std::io::Result<std::process::ExitStatus>,
    /// The tail of its stderr.
    stderr: Vec<u8>,
    timed_out: bool,
}

/// The error type and message of a command that did not succeed: its exit
/// code and the last lines of its stderr, or the signal that killed it.
fn exit_failure(status: std::process::ExitStatus, stderr: &str) -> (ErrorType, String) {
    let last_lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let message_tail = last_lines[last_lines.len().saturating_sub(MESSAGE_LINES)..].join("\n");
    match (status.code(), status.signal()) {
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

/// The most of a result file that is read: a reason, not a log.
pub const MAX_RESULT_FILE: u64 = 64 * 1024;
/// The longest error type a result file may name (as `categories set`).
const MAX_RESULT_TYPE: usize = 200;

/// What a failed command left in its DLQ_RESULT_FILE.
#[derive(Debug, PartialEq, Eq)]
enum ResultFile {
    /// Nothing (or only white space): the exit status and stderr stand.
    Empty,
    /// `{"error_type": "...", "error_message": "..."}`.
    Reported {
        error_type: String,
        error_message: Option<String>,
    },
    /// Something that is not such an object, and why.
    Ignored(String),
}

/// Reads the result file the command may have written: never through a
/// symlink, never blocking on a fifo put in its place, at most
/// [`MAX_RESULT_FILE`] bytes.
fn read_result_file(path: &std::path::Path) -> ResultFile {
    use std::io::Read;
    let file = match crate::infile::open_regular(path, crate::infile::Links::Refuse) {
        Ok(file) => file,
        // Removed by the command: it reported nothing.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ResultFile::Empty,
        Err(e) => return ResultFile::Ignored(format!("cannot open it: {e}")),
    };
    let mut bytes = Vec::new();
    if let Err(e) = file.take(MAX_RESULT_FILE + 1).read_to_end(&mut bytes) {
        return ResultFile::Ignored(format!("cannot read it: {e}"));
    }
    parse_result(&bytes)
}

fn parse_result(bytes: &[u8]) -> ResultFile {
    if bytes.len() as u64 > MAX_RESULT_FILE {
        return ResultFile::Ignored(format!("larger than {} KiB", MAX_RESULT_FILE / 1024));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return ResultFile::Empty;
    }
    let value: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(e) => return ResultFile::Ignored(format!("not JSON: {e}")),
    };
    let Some(object) = value.as_object() else {
        return ResultFile::Ignored(
            "not a JSON object {\"error_type\": ..., \"error_message\": ...}".into(),
        );
    };
    let error_type = match object.get("error_type") {
        Some(serde_json::Value::String(name)) if name.trim().is_empty() => {
            return ResultFile::Ignored("error_type is empty".into())
        }
        Some(serde_json::Value::String(name)) if name.len() > MAX_RESULT_TYPE => {
            return ResultFile::Ignored(format!(
                "error_type is {} bytes long (at most {MAX_RESULT_TYPE})",
                name.len()
            ))
        }
        Some(serde_json::Value::String(name)) => name.clone(),
        Some(_) => return ResultFile::Ignored("error_type is not a string".into()),
        None => return ResultFile::Ignored("no error_type".into()),
    };
    let error_message = match object.get("error_message") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(message)) => Some(message.clone()),
        Some(_) => return ResultFile::Ignored("error_message is not a string".into()),
    };
    ResultFile::Reported {
        error_type,
        error_message,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_file_names_the_failure_or_is_ignored_with_why() {
        assert_eq!(parse_result(b""), ResultFile::Empty);
        assert_eq!(parse_result(b" \n"), ResultFile::Empty);
        assert_eq!(
            parse_result(br#"{"error_type": "RateLimited", "error_message": "429"}"#),
            ResultFile::Reported {
                error_type: "RateLimited".into(),
                error_message: Some("429".into())
            }
        );
        assert_eq!(
            parse_result(br#"{"error_type": "RateLimited"}"#),
            ResultFile::Reported {
                error_type: "RateLimited".into(),
                error_message: None
            }
        );
        for (bytes, why) in [
            (&b"{nope"[..], "not JSON"),
            (b"[1]", "not a JSON object"),
            (br#"{"error_message": "x"}"#, "no error_type"),
            (br#"{"error_type": 5}"#, "not a string"),
            (br#"{"error_type": " "}"#, "empty"),
            (
                br#"{"error_type": "T", "error_message": 5}"#,
                "not a string",
            ),
        ] {
            match parse_result(bytes) {
                ResultFile::Ignored(said) => assert!(said.contains(why), "{said}"),
                other => panic!("{other:?}"),
            }
        }
        let long = format!(r#"{{"error_type": "{}"}}"#, "T".repeat(201));
        assert!(matches!(
            parse_result(long.as_bytes()),
            ResultFile::Ignored(_)
        ));
        let huge = vec![b' '; MAX_RESULT_FILE as usize + 1];
        match parse_result(&huge) {
            ResultFile::Ignored(said) => assert!(said.contains("64 KiB"), "{said}"),
            other => panic!("{other:?}"),
        }
    }
}
