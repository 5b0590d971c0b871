//! A child's stdin and stderr pipes, driven without blocking from the
//! thread that supervises the child: input fed as the pipe takes it, the
//! tail of stderr kept as it comes.
//!
//! Neither may ever hold the supervisor. A process that leaves the
//! command's process group (`setsid`) keeps whatever pipes it inherited
//! and is beyond dlq's reach: a blocking write into its stdin, or a
//! blocking read until its stderr closes, would wait for it forever (and a
//! scoped thread doing either would hold its scope just as long). So both
//! ends are non-blocking and only touched when poll(2) says they are ready,
//! and the supervisor decides when to stop caring about them.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

/// How much of the end of stderr is kept.
const TAIL: usize = 16 * 1024;

/// The pipes of one child.
pub(crate) struct Pipes<'a, W: Write + AsFd, R: Read + AsFd> {
    stdin: Option<(W, &'a [u8])>,
    stderr: Option<R>,
    tail: Vec<u8>,
}

impl<'a, W: Write + AsFd, R: Read + AsFd> Pipes<'a, W, R> {
    /// Takes over `stdin` (fed `input`, then closed) and `stderr` (read to
    /// its end); either may be absent.
    pub(crate) fn new(stdin: Option<W>, input: &'a [u8], stderr: Option<R>) -> Self {
        let stdin = stdin.filter(|w| set_nonblocking(w.as_fd()));
        let stderr = stderr.filter(|r| set_nonblocking(r.as_fd()));
        Pipes {
            stdin: stdin.map(|w| (w, input)),
            stderr,
            tail: Vec::new(),
        }
    }

    /// Waits up to `wait` for either pipe to be ready, then writes and
    /// reads what can be without blocking. A pipe whose other end is gone
    /// is closed (stdin also once all input is in: the command sees its
    /// end).
    pub(crate) fn pump(&mut self, wait: Duration) {
        if self.stdin.as_ref().is_some_and(|(_, left)| left.is_empty()) {
            self.stdin = None;
        }
        let mut fds = Vec::with_capacity(2);
        if let Some((writer, _)) = &self.stdin {
            fds.push(poll_fd(writer.as_fd(), libc::POLLOUT));
        }
        if let Some(reader) = &self.stderr {
            fds.push(poll_fd(reader.as_fd(), libc::POLLIN));
        }
        if fds.is_empty() {
            std::thread::sleep(wait);
            return;
        }
        let millis = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fds` is a live array of initialised pollfd structures
        // whose descriptors are owned by `self` for the whole call.
        unsafe {
            libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis);
        }
        self.feed();
        self.read();
    }

    /// Stops feeding stdin (the command is over: what did not go in is no
    /// longer wanted).
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Whether stderr reached its end (or was never there).
    pub(crate) fn stderr_done(&self) -> bool {
        self.stderr.is_none()
    }

    /// The tail of stderr read so far; the pipes are closed.
    pub(crate) fn into_tail(self) -> Vec<u8> {
        let mut tail = self.tail;
        if tail.len() > TAIL {
            tail.drain(..tail.len() - TAIL);
        }
        tail
    }

    fn feed(&mut self) {
        let Some((writer, left)) = self.stdin.as_mut() else {
            return;
        };
        while !left.is_empty() {
            match writer.write(left) {
                Ok(0) => break,
                Ok(n) => *left = &left[n..],
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                // EPIPE: the command closed its stdin; the rest is not
                // wanted.
                Err(_) => break,
            }
        }
        self.stdin = None;
    }

    fn read(&mut self) {
        let Some(reader) = self.stderr.as_mut() else {
            return;
        };
        let mut buffer = [0u8; 8192];
        loop {
            match reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    self.tail.extend_from_slice(&buffer[..n]);
                    if self.tail.len() > 2 * TAIL {
                        self.tail.drain(..self.tail.len() - TAIL);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        self.stderr = None;
    }
}

fn poll_fd(fd: BorrowedFd<'_>, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    }
}

/// Sets O_NONBLOCK on a pipe end this process owns; false if it cannot
/// (the pipe is then dropped rather than risk a blocking call).
fn set_nonblocking(fd: BorrowedFd<'_>) -> bool {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl(2) F_GETFL/F_SETFL on a descriptor owned by the caller
    // changes only its status flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
    }
}
