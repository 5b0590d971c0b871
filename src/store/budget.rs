//! Time budgets for the store reads of one thread ([`Budget::enter`]).
//! The dashboard gives each request one, so a search whose client left, or
//! that ran past its time, or that a stopping server no longer waits for,
//! is interrupted inside SQLite (a progress handler, checked every 1,000
//! virtual-machine steps) instead of holding a pooled connection to its
//! end. The read then fails with [`crate::ErrorKind::Interrupted`].
//! PostgreSQL reads are not interrupted (the server's `statement_timeout`
//! is the tool there).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

thread_local! {
    static CURRENT: RefCell<Option<Budget>> = const { RefCell::new(None) };
}

/// A deadline and the flags that cancel it.
#[derive(Clone, Debug, Default)]
pub struct Budget {
    deadline: Option<Instant>,
    cancelled_by: Vec<Arc<AtomicBool>>,
}

/// While alive, this thread's reads are bounded by its budget.
#[must_use = "the budget holds only while the guard lives"]
pub struct BudgetGuard(Option<Budget>);

impl Budget {
    /// A budget that ends at `deadline` (`None`: only when cancelled).
    pub fn until(deadline: Option<Instant>) -> Self {
        Budget {
            deadline,
            cancelled_by: Vec::new(),
        }
    }

    /// Also ends once `flag` is set.
    pub fn cancelled_by(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancelled_by.push(flag);
        self
    }

    /// Bounds the reads this thread makes through any [`crate::Dlq`] until
    /// the guard is dropped (the budget in force before comes back then).
    pub fn enter(self) -> BudgetGuard {
        BudgetGuard(CURRENT.with(|current| current.borrow_mut().replace(self)))
    }

    /// Whether the budget is used up.
    pub fn spent(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
            || self.cancelled_by.iter().any(|f| f.load(Ordering::Relaxed))
    }
}

impl Drop for BudgetGuard {
    fn drop(&mut self) {
        let before = self.0.take();
        CURRENT.with(|current| *current.borrow_mut() = before);
    }
}

/// The budget in force on this thread.
pub(crate) fn current() -> Option<Budget> {
    CURRENT.with(|current| current.borrow().clone())
}

/// Runs `f` with `conn` interrupted once this thread's budget is spent.
pub(crate) fn bounded<T>(
    conn: &rusqlite::Connection,
    f: impl FnOnce() -> crate::error::Result<T>,
) -> crate::error::Result<T> {
    let Some(budget) = current() else {
        return f();
    };
    conn.progress_handler(1000, Some(move || budget.spent()))?;
    let value = f();
    // Pooled: the next user of the connection has its own budget, or none.
    conn.progress_handler(0, None::<fn() -> bool>)?;
    value
}
