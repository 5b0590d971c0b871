//! The async API (feature `tokio`): [`AsyncDlq`], the same methods as
//! [`Dlq`] for code running on a tokio runtime. Each call runs the blocking
//! one on tokio's blocking pool (`spawn_blocking`), so no runtime worker
//! waits on SQLite; [`AsyncDlq::retry`] replays with an async handler.

use crate::error::{Error, ErrorKind, Result};
use crate::model::DeadLetteredItem;
use crate::retry::{Attempt, Outcome, RetryOptions, RetrySummary, RunControl};
use crate::store::{
    AddReport, Analysis, CapacityInfo, Event, EvictedItem, ItemSummary, JobInfo, JobItem,
    JobOptions, ListFilter, MarkRequest, Page, PageCursor, PurgeReport, Stats, TakeOptions,
    TakenItem,
};
use crate::{Dlq, EventKind, OpenOptions};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A [`Dlq`] for async code. Cheap to clone; clones share one database
/// handle (and its group commit: adds from many tasks share commits).
///
/// ```
/// # fn main() -> dlqlite::Result<()> {
/// # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// # runtime.block_on(async {
/// use dlqlite::AsyncDlq;
/// let dlq = AsyncDlq::from(dlqlite::Dlq::open_in_memory()?);
/// let item = dlqlite::DeadLetteredItem::builder("item-1", serde_json::json!({}))
///     .attempt(dlqlite::FailureDetail::new(
///         1,
///         dlqlite::Timestamp::now(),
///         dlqlite::ErrorType::named("Timeout"),
///         "timed out",
///     ))
///     .build()?;
/// dlq.add("job", item).await?;
/// assert_eq!(dlq.job_stats("job").await?.total_items, 1);
/// # Ok(()) })
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct AsyncDlq {
    dlq: std::mem::ManuallyDrop<Dlq>,
}

impl Drop for AsyncDlq {
    /// Closing the last handle blocks: SQLite's final checkpoint and close
    /// (tens to hundreds of milliseconds after many writes), a PostgreSQL
    /// client's close on its own runtime. On a runtime that would stall a
    /// worker, or the only thread of a current-thread runtime, so there the
    /// handle goes to the blocking pool to be dropped; dropping the runtime
    /// waits for it, so the close still completes.
    fn drop(&mut self) {
        // SAFETY: `dlq` is never used again (this is its owner's drop).
        let dlq = unsafe { std::mem::ManuallyDrop::take(&mut self.dlq) };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || drop(dlq))),
            Err(_) => drop(dlq),
        }
    }
}

/// What an async retry handler gets for one attempt (owned: the future may
/// outlive the call that made it).
#[derive(Clone, Debug)]
pub struct AsyncAttempt {
    pub item: JobItem,
    /// 1-based, within this run.
    pub number: u32,
}

impl From<Dlq> for AsyncDlq {
    fn from(dlq: Dlq) -> Self {
        AsyncDlq {
            dlq: std::mem::ManuallyDrop::new(dlq),
        }
    }
}

impl AsyncDlq {
    /// Opens (creating as needed) the database at `path`.
    pub async fn open(path: impl Into<PathBuf>) -> Result<Self> {
        AsyncDlq::open_with(OpenOptions::new(), path).await
    }

    /// Opens the database at `path` with `options`.
    pub async fn open_with(options: OpenOptions, path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        blocking(move || options.open(&path))
            .await
            .map(AsyncDlq::from)
    }

    /// The blocking handle (same database, same pool).
    pub fn blocking(&self) -> &Dlq {
        &self.dlq
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Dlq) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        // A plain clone (a ManuallyDrop one would never close its share).
        let dlq: Dlq = Dlq::clone(&self.dlq);
        blocking(move || f(&dlq)).await
    }

    /// See [`Dlq::add`].
    pub async fn add(
        &self,
        job_id: impl Into<String>,
        item: DeadLetteredItem,
    ) -> Result<AddReport> {
        let job_id = job_id.into();
        self.run(move |dlq| dlq.add(&job_id, &item)).await
    }

    /// See [`Dlq::add_many`].
    pub async fn add_many(
        &self,
        job_id: impl Into<String>,
        items: Vec<DeadLetteredItem>,
    ) -> Result<Vec<AddReport>> {
        let job_id = job_id.into();
        self.run(move |dlq| dlq.add_many(&job_id, &items)).await
    }

    /// See [`Dlq::add_timeout`].
    pub async fn add_timeout(
        &self,
        job_id: impl Into<String>,
        item: DeadLetteredItem,
        timeout: Duration,
    ) -> Result<AddReport> {
        let job_id = job_id.into();
        self.run(move |dlq| dlq.add_timeout(&job_id, &item, timeout))
            .await
    }

    /// See [`Dlq::get`].
    pub async fn get(
        &self,
        job_id: Option<String>,
        item_id: impl Into<String>,
    ) -> Result<DeadLetteredItem> {
        let item_id = item_id.into();
        self.run(move |dlq| dlq.get(job_id.as_deref(), &item_id))
            .await
    }

    /// One page of a listing, newest last_attempt first (see
    /// [`Dlq::list_page`]); pass the page's `next` for the one after.
    pub async fn list_page(
        &self,
        filter: ListFilter,
        after: Option<PageCursor>,
        limit: usize,
    ) -> Result<Page<ItemSummary>> {
        self.run(move |dlq| dlq.list_page(&filter, after.as_ref(), limit))
            .await
    }

    /// See [`Dlq::jobs`].
    pub async fn jobs(&self) -> Result<Vec<JobInfo>> {
        self.run(|dlq| dlq.jobs()).await
    }

    /// See [`Dlq::job_stats`].
    pub async fn job_stats(&self, job_id: impl Into<String>) -> Result<Stats> {
        let job_id = job_id.into();
        self.run(move |dlq| dlq.job_stats(&job_id)).await
    }

    /// See [`Dlq::analyze`].
    pub async fn analyze(&self, job_id: Option<String>) -> Result<Analysis> {
        self.run(move |dlq| dlq.analyze(job_id.as_deref())).await
    }

    /// See [`Dlq::events`].
    pub async fn events(
        &self,
        job_id: Option<String>,
        kind: Option<EventKind>,
        limit: usize,
    ) -> Result<Vec<Event>> {
        self.run(move |dlq| dlq.events(job_id.as_deref(), kind, limit))
            .await
    }

    /// See [`Dlq::remove`].
    pub async fn remove(&self, job_id: Option<String>, item_id: impl Into<String>) -> Result<()> {
        let item_id = item_id.into();
        self.run(move |dlq| dlq.remove(job_id.as_deref(), &item_id))
            .await
    }

    /// See [`Dlq::mark`].
    pub async fn mark(
        &self,
        job_id: Option<String>,
        item_id: impl Into<String>,
        request: MarkRequest,
    ) -> Result<crate::store::Marked> {
        let item_id = item_id.into();
        self.run(move |dlq| dlq.mark(job_id.as_deref(), &item_id, &request))
            .await
    }

    /// See [`Dlq::clear_job`].
    pub async fn clear_job(&self, job_id: impl Into<String>) -> Result<usize> {
        let job_id = job_id.into();
        self.run(move |dlq| dlq.clear_job(&job_id)).await
    }

    /// See [`Dlq::purge`].
    pub async fn purge(
        &self,
        older_than_days: u32,
        filter: ListFilter,
        dry_run: bool,
    ) -> Result<PurgeReport> {
        self.run(move |dlq| dlq.purge(older_than_days, &filter, dry_run))
            .await
    }

    /// See [`Dlq::capacity`].
    pub async fn capacity(&self, job_id: Option<String>) -> Result<CapacityInfo> {
        self.run(move |dlq| dlq.capacity(job_id.as_deref())).await
    }

    /// See [`Dlq::set_capacity`].
    pub async fn set_capacity(
        &self,
        job_id: Option<String>,
        max_items: Option<i64>,
    ) -> Result<Vec<EvictedItem>> {
        self.run(move |dlq| dlq.set_capacity(job_id.as_deref(), max_items))
            .await
    }

    /// See [`Dlq::ensure_job`].
    pub async fn ensure_job(
        &self,
        job_id: impl Into<String>,
        options: JobOptions,
    ) -> Result<Vec<EvictedItem>> {
        let job_id = job_id.into();
        self.run(move |dlq| dlq.ensure_job(&job_id, &options)).await
    }

    /// See [`Dlq::take_eligible`].
    pub async fn take_eligible(
        &self,
        job_id: impl Into<String>,
        options: TakeOptions,
    ) -> Result<Vec<TakenItem>> {
        let job_id = job_id.into();
        self.run(move |dlq| dlq.take_eligible(&job_id, &options))
            .await
    }

    /// Replays a job's items through an async `handler` (see
    /// [`crate::retry::retry`]): the run's workers are blocking-pool
    /// threads, each waiting on one handler future at a time, so up to
    /// `options.parallel` futures run at once. `control` stops the run from
    /// elsewhere (its `stop`, then `kill`).
    pub async fn retry<F, Fut>(
        &self,
        options: RetryOptions,
        control: Arc<RunControl>,
        handler: F,
    ) -> Result<RetrySummary>
    where
        F: Fn(AsyncAttempt) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send,
    {
        let runtime = tokio::runtime::Handle::current();
        self.run(move |dlq| {
            let replay = |attempt: &Attempt<'_>| {
                runtime.block_on(handler(AsyncAttempt {
                    item: attempt.item.clone(),
                    number: attempt.number,
                }))
            };
            crate::retry::retry(dlq, &options, &replay, &control, |_| {})
        })
        .await
    }
}

/// Runs `f` on tokio's blocking pool; a panic in it carries on here.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(Error::storage(ErrorKind::Other, None, e)),
    }
}
