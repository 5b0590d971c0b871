//! The connections under the routes: accepting them, serving each with
//! hyper's HTTP/1, and the limits that keep a few clients from holding the
//! server. `axum::serve` has none of these, so this file drives hyper
//! itself:
//!
//! - a header-read timeout: a connection that has not sent a whole request
//!   head in time (half a request, or nothing at all, including an idle
//!   keep-alive connection) is closed;
//! - a cap on open connections: one more is answered 503 and closed at once,
//!   instead of waiting in the kernel's queue or taking file descriptors
//!   until there are none;
//! - a stop with a deadline: no new connections, idle ones closed, requests
//!   in flight get until the deadline to finish, and whatever is left then
//!   is dropped, so a client cannot keep `dlq serve` from exiting.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// From the stop signal to the exit: requests in flight may finish within
/// it (and the store's work for them on the blocking pool); then they are
/// abandoned.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long accepting pauses after an error that is not one connection's
/// (out of file descriptors, mostly): the error would come straight back.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// What one connection may do.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Time to send a request head, from the connection's opening or the
    /// end of its previous answer (hyper starts the clock when it starts
    /// reading a head, not at the first byte).
    pub header_timeout: Duration,
    /// Connections open at once.
    pub max_connections: u32,
}

/// How the server stopped.
pub struct Stopped {
    /// When everything this server started must be done: the stop signal
    /// plus [`SHUTDOWN_GRACE`].
    pub deadline: Instant,
    /// Connections still open at the deadline (dropped with the runtime).
    pub abandoned: u32,
}

/// Serves `router` on `listener` within `limits` until `stop` resolves,
/// then for at most [`SHUTDOWN_GRACE`] while connections finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: impl Future<Output = ()>,
) -> Stopped {
    // A permit per open connection: held by its task, so the permits
    // available are the connections that may still open.
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    let (closing, closing_rx) = watch::channel(false);
    let mut told = false;
    let mut stop = std::pin::pin!(stop);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // The client gave up before we took it: nothing to do.
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                if !told {
                    told = true;
                    eprintln!(
                        "dlq serve: cannot accept connections ({e}); if it says too many open \
                         files, raise `ulimit -n` or lower --max-connections"
                    );
                }
                tokio::select! {
                    biased;
                    () = &mut stop => break,
                    () = tokio::time::sleep(ACCEPT_PAUSE) => continue,
                }
            }
        };
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => {
                tokio::spawn(connection(
                    stream,
                    router.clone(),
                    limits.header_timeout,
                    closing_rx.clone(),
                    slot,
                ));
            }
            Err(_) => refuse(&stream),
        }
    }
    let deadline = Instant::now() + SHUTDOWN_GRACE;
    // Refuse new connections from now on (the kernel would otherwise queue
    // them until the exit).
    drop(listener);
    let _ = closing.send(true);
    // Every permit back means every connection closed.
    let all =
        tokio::time::timeout_at(deadline.into(), slots.acquire_many(limits.max_connections)).await;
    let abandoned = match all {
        Ok(_) => 0,
        Err(_) => limits.max_connections - slots.available_permits() as u32,
    };
    Stopped {
        deadline,
        abandoned,
    }
}

/// One connection until it ends, holding `slot` until then. On `closing`
/// it ends after the request in flight (at once if there is none).
async fn connection(
    stream: TcpStream,
    router: Router,
    header_timeout: Duration,
    mut closing: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) {
    let service = TowerToHyperService::new(router);
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The timeout needs hyper's timer: without one it is silently off.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        // An error is the client's doing (a reset, a bad or slow request
        // head, which hyper answers itself where it can); nothing to report.
        _ = connection.as_mut() => return,
        _ = closing.wait_for(|closing| *closing) => connection.as_mut().graceful_shutdown(),
    }
    let _ = connection.await;
}

/// A connection over the cap: a 503 if the socket takes it now (it has
/// just been opened, so its send buffer is empty), then closed. Never
/// waits: a client that does not read must not hold the accepting loop.
fn refuse(stream: &TcpStream) {
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
        content-type: text/plain; charset=utf-8\r\n\
        retry-after: 1\r\n\
        connection: close\r\n\
        content-length: 26\r\n\r\n\
        too many connections open\n";
    let _ = stream.try_write(BUSY);
}

/// An error that ends one connection before it was accepted, not the
/// listener's.
fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    )
}
