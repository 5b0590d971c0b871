//! Connection pools (r2d2) whose failures say why. r2d2 reports a pool
//! that gave no connection in time with its own error, which keeps only the
//! text of the last failure to connect. So each pool records the kind of
//! every failure to connect as it happens (classified from the storage
//! crate's own error, not its words), and a timeout is reported as that
//! kind: a corrupt or unreadable database never reads as busy. A pool that
//! has connected since forgets it; with no failure recorded, a timeout is
//! every connection staying in use ([`ErrorKind::Busy`]).

use crate::error::{DbScope, Error, ErrorKind, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The kind of the last failure to connect, while it stands.
#[derive(Debug, Default)]
struct Failures {
    any: AtomicBool,
    last: Mutex<Option<ErrorKind>>,
}

impl Failures {
    fn record(&self, kind: ErrorKind) {
        *super::lock_ignoring_poison(&self.last) = Some(kind);
        self.any.store(true, Ordering::Release);
    }

    fn clear(&self) {
        if self.any.swap(false, Ordering::AcqRel) {
            *super::lock_ignoring_poison(&self.last) = None;
        }
    }

    fn kind(&self) -> ErrorKind {
        super::lock_ignoring_poison(&self.last).unwrap_or(ErrorKind::Busy)
    }
}

/// r2d2's error handler: records each failure's kind.
struct Recorder<E> {
    failures: Arc<Failures>,
    classify: fn(&E) -> ErrorKind,
}

impl<E> std::fmt::Debug for Recorder<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

impl<E: 'static> r2d2::HandleError<E> for Recorder<E> {
    fn handle_error(&self, error: E) {
        self.failures.record((self.classify)(&error));
    }
}

/// A pool of `M`'s connections.
pub(crate) struct Pool<M: r2d2::ManageConnection> {
    inner: r2d2::Pool<M>,
    failures: Arc<Failures>,
}

impl<M: r2d2::ManageConnection> Clone for Pool<M> {
    fn clone(&self) -> Self {
        Pool {
            inner: self.inner.clone(),
            failures: Arc::clone(&self.failures),
        }
    }
}

impl<M: r2d2::ManageConnection> std::fmt::Debug for Pool<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("max_size", &self.inner.max_size())
            .finish_non_exhaustive()
    }
}

impl<M: r2d2::ManageConnection> Pool<M> {
    /// The pool `builder` makes, connecting only when asked; `classify`
    /// tells the kind of a failure to connect.
    pub(crate) fn new(
        builder: r2d2::Builder<M>,
        manager: M,
        classify: fn(&M::Error) -> ErrorKind,
    ) -> Self {
        let failures = Arc::new(Failures::default());
        let inner = builder
            .error_handler(Box::new(Recorder {
                failures: Arc::clone(&failures),
                classify,
            }))
            .build_unchecked(manager);
        Pool { inner, failures }
    }

    /// A connection, waiting up to the pool's connection timeout.
    pub(crate) fn get(&self) -> Result<r2d2::PooledConnection<M>> {
        self.taken(self.inner.get())
    }

    /// A connection, waiting up to `timeout`.
    pub(crate) fn get_timeout(&self, timeout: Duration) -> Result<r2d2::PooledConnection<M>> {
        self.taken(self.inner.get_timeout(timeout))
    }

    pub(crate) fn max_size(&self) -> u32 {
        self.inner.max_size()
    }

    fn taken(
        &self,
        got: std::result::Result<r2d2::PooledConnection<M>, r2d2::Error>,
    ) -> Result<r2d2::PooledConnection<M>> {
        match got {
            Ok(conn) => {
                self.failures.clear();
                Ok(conn)
            }
            Err(timeout) => Err(Error::storage(
                self.failures.kind(),
                DbScope::current(),
                timeout,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[derive(Debug)]
    struct Refused;

    impl std::fmt::Display for Refused {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("refused")
        }
    }

    impl std::error::Error for Refused {}

    /// Connects, or fails while `refuse` is set.
    struct Manager {
        refuse: Arc<AtomicBool>,
    }

    impl r2d2::ManageConnection for Manager {
        type Connection = ();
        type Error = Refused;

        fn connect(&self) -> std::result::Result<(), Refused> {
            if self.refuse.load(Ordering::SeqCst) {
                Err(Refused)
            } else {
                Ok(())
            }
        }

        fn is_valid(&self, _: &mut ()) -> std::result::Result<(), Refused> {
            Ok(())
        }

        fn has_broken(&self, _: &mut ()) -> bool {
            false
        }
    }

    #[test]
    fn a_timeout_is_the_kind_of_the_failure_behind_it_or_busy() {
        let refuse = Arc::new(AtomicBool::new(true));
        let builder = r2d2::Pool::builder()
            .max_size(1)
            .min_idle(Some(0))
            .connection_timeout(Duration::from_millis(200));
        let pool = Pool::new(
            builder,
            Manager {
                refuse: Arc::clone(&refuse),
            },
            |_| ErrorKind::Corrupt,
        );
        // Every connection refused: the timeout says why.
        let err = pool.get().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        // Connected since: the failure is forgotten, and a timeout with the
        // one connection in use is busy.
        refuse.store(false, Ordering::SeqCst);
        let held = pool.get().unwrap();
        let err = pool.get_timeout(Duration::from_millis(100)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
        assert!(err.is_transient());
        drop(held);
    }
}
