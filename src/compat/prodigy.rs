//! Prodigy's `DeadLetterQueue` API (`prodigy::cook::execution::dlq`), kept
//! in one dlqlite database instead of one JSON file per item.
//!
//! The public types have Prodigy's names, fields, derives and serde shape,
//! so Prodigy's code and tests compile against them unchanged. Every method
//! converts Prodigy's item to [`crate::DeadLetteredItem`] (through the
//! legacy JSON shape, which both sides read and write) and calls the
//! blocking [`Dlq`] API on tokio's blocking pool.
//!
//! Prodigy's module becomes a re-export plus two lines of glue, because
//! dlqlite cannot name Prodigy's `EventLogger`:
//!
//! ```ignore
//! pub use dlqlite::compat::prodigy::*;
//! use super::events::EventLogger;
//!
//! pub type DeadLetterQueue = dlqlite::compat::prodigy::DeadLetterQueue<EventLogger>;
//!
//! impl DLQEventLogger for EventLogger {
//!     async fn log_dlq_event(&self, job_id: String, event: DLQEvent) -> anyhow::Result<()> {
//!         self.log_dlq_event_with_job(job_id, event).await
//!     }
//! }
//! ```
//!
//! Storage: one database per `base_path`, at [`database_path`]
//! (`<base_path>/mapreduce/dlq/dlq.db`), holding every job kept under that
//! base path; each queue works on its own `job_id` there. Nothing is
//! created until the first write: reads of a queue whose database does not
//! exist yet answer empty. docs/prodigy.md lists what is kept of Prodigy's
//! semantics and what changed.

use crate::error::Error as DlqError;
use crate::store::{Dlq, JobOptions, ListFilter, OpenOptions};
use crate::time::Timestamp;
use anyhow::{Context, Result};
use chrono::{DateTime, TimeDelta, Timelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

// ---------------------------------------------------------------------------
// Prodigy's types

/// One work item that kept failing, in Prodigy's shape.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeadLetteredItem {
    pub item_id: String,
    pub item_data: Value,
    pub first_attempt: DateTime<Utc>,
    pub last_attempt: DateTime<Utc>,
    pub failure_count: u32,
    pub failure_history: Vec<FailureDetail>,
    pub error_signature: String,
    pub worktree_artifacts: Option<WorktreeArtifacts>,
    pub reprocess_eligible: bool,
    pub manual_review_required: bool,
}

/// One failed attempt, in Prodigy's shape.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailureDetail {
    pub attempt_number: u32,
    pub timestamp: DateTime<Utc>,
    pub error_type: ErrorType,
    pub error_message: String,
    /// The chain of operations the error went through, outermost first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_context: Option<Vec<String>>,
    pub stack_trace: Option<String>,
    pub agent_id: String,
    pub step_failed: String,
    pub duration_ms: u64,
    /// The agent's Claude JSON log, for debugging.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json_log_location: Option<String>,
}

/// How an attempt failed, as Prodigy classifies it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum ErrorType {
    Timeout,
    CommandFailed {
        exit_code: i32,
    },
    /// The agent did not create a commit it was required to.
    CommitValidationFailed,
    WorktreeError,
    MergeConflict,
    ValidationFailed,
    ResourceExhausted,
    Unknown,
}

/// The worktree the failing agent ran in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorktreeArtifacts {
    pub worktree_path: PathBuf,
    pub branch_name: String,
    pub uncommitted_changes: Option<String>,
    pub error_logs: Option<String>,
}

/// What [`DeadLetterQueue::analyze_patterns`] finds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailureAnalysis {
    pub total_items: usize,
    pub pattern_groups: Vec<PatternGroup>,
    /// Attempts (not items) per error type, over every item's history.
    pub error_distribution: HashMap<ErrorType, usize>,
    /// Items per hour of their last attempt, in time order.
    pub temporal_distribution: Vec<(DateTime<Utc>, usize)>,
}

/// The items sharing one error signature.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PatternGroup {
    pub signature: String,
    pub count: usize,
    pub first_occurrence: Option<DateTime<Utc>>,
    pub last_occurrence: Option<DateTime<Utc>>,
    /// Up to three of the items, whole.
    pub sample_items: Vec<DeadLetteredItem>,
}

/// A request to take items out of the queue and run them again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReprocessRequest {
    pub item_ids: Vec<String>,
    pub max_retries: u32,
    pub delay_ms: u64,
    pub force: bool,
}

/// Which items [`DeadLetterQueue::list_items`] returns; `None` matches all.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DLQFilter {
    /// Items with at least one attempt of exactly this type.
    pub error_type: Option<ErrorType>,
    pub reprocess_eligible: Option<bool>,
    /// Items whose last attempt is at or after this.
    pub after: Option<DateTime<Utc>>,
    /// Items whose last attempt is at or before this.
    pub before: Option<DateTime<Utc>>,
    /// Items whose signature contains this text.
    pub error_signature: Option<String>,
}

/// What a queue reports to its event logger.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum DLQEvent {
    ItemAdded { item: Box<DeadLetteredItem> },
    ItemRemoved { item_id: String },
    ItemsReprocessed { count: usize },
    ItemsEvicted { count: usize },
    AnalysisGenerated { patterns: usize },
}

/// A queue's figures, as [`DeadLetterQueue::get_stats`] reports them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DLQStats {
    pub total_items: usize,
    pub eligible_for_reprocess: usize,
    pub requiring_manual_review: usize,
    /// The earliest first attempt.
    pub oldest_item: Option<DateTime<Utc>>,
    /// The latest last attempt.
    pub newest_item: Option<DateTime<Utc>>,
    /// Items per error signature.
    pub error_categories: HashMap<String, usize>,
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Prodigy's `DLQManager` trait. It is declared with the signatures
/// `#[async_trait::async_trait]` gives its `async fn`s, so an
/// `#[async_trait] impl DLQManager for ...` compiles against it, without
/// dlqlite depending on async-trait. Nothing in dlqlite implements it.
pub trait DLQManager: Send + Sync {
    /// Records a failure of an item.
    fn add_failed_item<'life0, 'async_trait>(
        &'life0 self,
        item_id: String,
        item_data: Value,
        failure: FailureDetail,
    ) -> BoxFuture<'async_trait, Result<()>>
    where
        'life0: 'async_trait,
        Self: 'async_trait;

    /// The items matching a filter.
    fn list_items<'life0, 'async_trait>(
        &'life0 self,
        filter: DLQFilter,
    ) -> BoxFuture<'async_trait, Result<Vec<DeadLetteredItem>>>
    where
        'life0: 'async_trait,
        Self: 'async_trait;

    /// One item, if it is there.
    fn get_item<'life0, 'life1, 'async_trait>(
        &'life0 self,
        item_id: &'life1 str,
    ) -> BoxFuture<'async_trait, Result<Option<DeadLetteredItem>>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait;

    /// Runs items again; returns how many.
    fn reprocess_items<'life0, 'async_trait>(
        &'life0 self,
        request: ReprocessRequest,
    ) -> BoxFuture<'async_trait, Result<usize>>
    where
        'life0: 'async_trait,
        Self: 'async_trait;

    /// Removes items last tried before a time; returns how many.
    fn purge_old_items<'life0, 'async_trait>(
        &'life0 self,
        older_than: DateTime<Utc>,
    ) -> BoxFuture<'async_trait, Result<usize>>
    where
        'life0: 'async_trait,
        Self: 'async_trait;

    /// Writes the items to a file.
    fn export_items<'life0, 'life1, 'async_trait>(
        &'life0 self,
        path: &'life1 Path,
    ) -> BoxFuture<'async_trait, Result<()>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait;

    /// The queue's figures.
    fn get_stats<'life0, 'async_trait>(&'life0 self) -> BoxFuture<'async_trait, Result<DLQStats>>
    where
        'life0: 'async_trait,
        Self: 'async_trait;
}

// ---------------------------------------------------------------------------
// The event logger seam

/// Where a queue reports its [`DLQEvent`]s. Prodigy implements it for its
/// `EventLogger` (a type dlqlite cannot name); an error from it fails the
/// queue call that logged, after the storage change is done, as in Prodigy.
pub trait DLQEventLogger: Send + Sync + 'static {
    /// Records one event of the queue of `job_id`.
    fn log_dlq_event(
        &self,
        job_id: String,
        event: DLQEvent,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// The logger of a queue that has none: it has no values, so only `None`
/// can be passed where it is the logger type.
#[derive(Debug)]
pub enum NoEventLogger {}

impl DLQEventLogger for NoEventLogger {
    async fn log_dlq_event(&self, _job_id: String, _event: DLQEvent) -> Result<()> {
        match *self {}
    }
}

// ---------------------------------------------------------------------------
// Storage

/// The database a queue with this `base_path` uses:
/// `<base_path>/mapreduce/dlq/dlq.db`, the directory Prodigy kept its item
/// files in (`<base_path>/mapreduce/dlq/<job_id>/items/`).
pub fn database_path(base_path: &Path) -> PathBuf {
    base_path.join("mapreduce").join("dlq").join("dlq.db")
}

/// A database handle opened on first use.
#[derive(Debug)]
struct LazyDb {
    /// The queue's `base_path`: where Prodigy's own JSON files may be.
    base: PathBuf,
    path: PathBuf,
    handle: Mutex<Option<Dlq>>,
}

impl LazyDb {
    /// The handle, opening the database (and creating it, with its parent
    /// directories, when missing). The first open of a base path that
    /// holds Prodigy's JSON DLQ files imports them, once per database
    /// ([`Dlq::adopt_legacy`]): a Prodigy that switches sees every dead
    /// letter it had.
    fn for_write(&self) -> crate::Result<Dlq> {
        let mut handle = self.handle.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(dlq) = handle.as_ref() {
            return Ok(dlq.clone());
        }
        let dlq = OpenOptions::new().open(&self.path)?;
        dlq.adopt_legacy(&self.base)?;
        *handle = Some(dlq.clone());
        Ok(dlq)
    }

    /// The handle, opening the database if it exists, or if there are
    /// JSON DLQ files to adopt; `None` otherwise: reading creates nothing
    /// that would hold nothing.
    fn for_read(&self) -> crate::Result<Option<Dlq>> {
        {
            let handle = self.handle.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(dlq) = handle.as_ref() {
                return Ok(Some(dlq.clone()));
            }
        }
        if !self.path.exists() && !crate::import::holds_legacy_jobs(&self.base) {
            return Ok(None);
        }
        self.for_write().map(Some)
    }
}

/// Runs blocking dlqlite work on tokio's blocking pool; a panic in it
/// carries on in the caller.
async fn blocking<T, F>(work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(anyhow::Error::new(e).context("dlqlite task cancelled")),
    }
}

/// Whether an error only says the job or item is not there.
fn is_absent(error: &DlqError) -> bool {
    matches!(
        error,
        DlqError::ItemNotFound { .. } | DlqError::JobNotFound(_)
    )
}

/// Prodigy's item as dlqlite's, through the legacy JSON shape both use.
fn to_engine(item: &DeadLetteredItem) -> Result<crate::DeadLetteredItem> {
    let text = serde_json::to_string(item)?;
    crate::DeadLetteredItem::from_json_str(&text)
        .with_context(|| format!("DLQ item {:?} cannot be stored", item.item_id))
}

/// dlqlite's item as Prodigy's.
fn from_engine(item: &crate::DeadLetteredItem) -> Result<DeadLetteredItem> {
    let text = serde_json::to_string(item)?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "DLQ item {:?} is not in Prodigy's shape (stored by another writer?)",
            item.item_id
        )
    })
}

fn job_filter(job_id: &str) -> ListFilter {
    ListFilter {
        job_id: Some(job_id.to_string()),
        ..ListFilter::default()
    }
}

/// Every item of a job, whole, in Prodigy's shape (item_id order).
fn job_items(dlq: &Dlq, filter: ListFilter) -> Result<Vec<DeadLetteredItem>> {
    dlq.items(filter)
        .map(|stored| from_engine(&stored?.item))
        .collect()
}

fn get_item(db: &LazyDb, job_id: &str, item_id: &str) -> Result<Option<DeadLetteredItem>> {
    let Some(dlq) = db.for_read()? else {
        return Ok(None);
    };
    match dlq.get(Some(job_id), item_id) {
        Ok(item) => Ok(Some(from_engine(&item)?)),
        Err(e) if is_absent(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes one item; false when it was not there.
fn remove_item(db: &LazyDb, job_id: &str, item_id: &str) -> Result<bool> {
    let Some(dlq) = db.for_read()? else {
        return Ok(false);
    };
    match dlq.remove(Some(job_id), item_id) {
        Ok(()) => Ok(true),
        Err(e) if is_absent(&e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Takes the reprocess-eligible ones of `item_ids` out of a job, in the
/// order asked: (item_id, item_data) of each one this call removed.
fn take_eligible(db: &LazyDb, job_id: &str, item_ids: Vec<String>) -> Result<Vec<(String, Value)>> {
    use crate::filter::{Column, Expr, Field, Literal, Op};
    let Some(dlq) = db.for_read()? else {
        return Ok(Vec::new());
    };
    let mut taken = Vec::new();
    for item_id in item_ids {
        let mut selection = job_filter(job_id);
        selection.eligible = Some(true);
        selection.expression = Some(Expr::Compare {
            field: Field::Column(Column::ItemId),
            op: Op::Eq,
            value: Literal::Text(item_id.clone()),
        });
        let Some(stored) = dlq.items(selection).next().transpose()? else {
            continue;
        };
        let read = crate::store::ReadItem::of(&stored);
        if dlq.take_unchanged(&[read], "reprocess")? == 1 {
            taken.push((item_id, from_engine(&stored.item)?.item_data));
        }
    }
    Ok(taken)
}

/// Prodigy's `DLQStorage`: the queue's persistence, here one dlqlite
/// database for every job under `base_path` (see [`database_path`]).
#[derive(Debug)]
pub struct DLQStorage {
    db: Arc<LazyDb>,
}

impl DLQStorage {
    /// Storage under `base_path`; nothing is opened or created yet.
    pub fn new(base_path: PathBuf) -> Result<Self> {
        Ok(DLQStorage {
            db: Arc::new(LazyDb {
                path: database_path(&base_path),
                base: base_path,
                handle: Mutex::new(None),
            }),
        })
    }

    /// The database file (which may not exist yet).
    pub fn database_path(&self) -> &Path {
        &self.db.path
    }

    /// Stores an item of a job: inserts it, or merges it into the stored
    /// copy (dlqlite's rule: histories unioned, the copy with the later
    /// last failure gives the rest). Creates the database on first use.
    pub async fn persist(&self, job_id: &str, item: &DeadLetteredItem) -> Result<()> {
        let item = to_engine(item)?;
        let db = Arc::clone(&self.db);
        let job_id = job_id.to_string();
        blocking(move || {
            db.for_write()?.add(&job_id, &item)?;
            Ok(())
        })
        .await
    }

    /// Removes an item of a job; an item that is not there is no error.
    pub async fn remove(&self, job_id: &str, item_id: &str) -> Result<()> {
        let db = Arc::clone(&self.db);
        let (job_id, item_id) = (job_id.to_string(), item_id.to_string());
        blocking(move || remove_item(&db, &job_id, &item_id).map(|_| ())).await
    }

    /// Every item of a job, by item_id.
    pub async fn load_all(&self, job_id: &str) -> Result<HashMap<String, DeadLetteredItem>> {
        let db = Arc::clone(&self.db);
        let job_id = job_id.to_string();
        blocking(move || {
            let Some(dlq) = db.for_read()? else {
                return Ok(HashMap::new());
            };
            Ok(job_items(&dlq, job_filter(&job_id))?
                .into_iter()
                .map(|item| (item.item_id.clone(), item))
                .collect())
        })
        .await
    }
}

// ---------------------------------------------------------------------------
// The queue

/// Prodigy's `DeadLetterQueue` for one job, stored in dlqlite. `L` is the
/// event logger type (Prodigy's `EventLogger`; see the module docs).
pub struct DeadLetterQueue<L = NoEventLogger> {
    pub job_id: String,
    storage: Arc<DLQStorage>,
    max_items: usize,
    event_logger: Option<Arc<L>>,
    /// Whether this queue has set its capacity on its job yet (done at its
    /// first write, so that reading creates nothing).
    capacity_set: AtomicBool,
}

impl<L> std::fmt::Debug for DeadLetterQueue<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadLetterQueue")
            .field("job_id", &self.job_id)
            .field("database", &self.storage.database_path())
            .field("max_items", &self.max_items)
            .finish()
    }
}

impl<L: DLQEventLogger> DeadLetterQueue<L> {
    /// A queue for `job_id` in the database under `base_path`. Opens and
    /// creates nothing: the database is created by the first write, and
    /// until then every read answers empty. `max_items` becomes the job's
    /// capacity in dlqlite at the first write (0 means unlimited there);
    /// `retention_days` is accepted and unused, as in Prodigy.
    pub async fn new(
        job_id: String,
        base_path: PathBuf,
        max_items: usize,
        retention_days: u32,
        event_logger: Option<Arc<L>>,
    ) -> Result<Self> {
        let _ = retention_days;
        Ok(DeadLetterQueue {
            job_id,
            storage: Arc::new(DLQStorage::new(base_path)?),
            max_items,
            event_logger,
            capacity_set: AtomicBool::new(false),
        })
    }

    /// A queue to read an existing job with (capacity 1000, no logger).
    pub async fn load(job_id: String, base_path: PathBuf) -> Result<Self> {
        Self::new(job_id, base_path, 1000, 30, None).await
    }

    /// The database file (which may not exist yet).
    pub fn database_path(&self) -> &Path {
        self.storage.database_path()
    }

    async fn log(&self, event: DLQEvent) -> Result<()> {
        match &self.event_logger {
            Some(logger) => logger.log_dlq_event(self.job_id.clone(), event).await,
            None => Ok(()),
        }
    }

    /// Adds a failed item: inserts it, or merges it into the stored copy
    /// (see docs/prodigy.md). When that puts the job over `max_items`, its
    /// items with the oldest last attempt are evicted in the same
    /// transaction; each is logged as removed, then the eviction count.
    pub async fn add(&self, item: DeadLetteredItem) -> Result<()> {
        let stored = to_engine(&item)?;
        let db = Arc::clone(&self.storage.db);
        let job_id = self.job_id.clone();
        let capacity = if self.capacity_set.load(Ordering::Acquire) {
            None
        } else {
            Some(i64::try_from(self.max_items).unwrap_or(i64::MAX))
        };
        let evicted = blocking(move || {
            let dlq = db.for_write()?;
            let mut evicted = Vec::new();
            if let Some(max_items) = capacity {
                let options = JobOptions {
                    max_items: Some(max_items),
                };
                evicted.extend(dlq.ensure_job(&job_id, &options)?);
            }
            evicted.extend(dlq.add(&job_id, &stored)?.evicted);
            Ok(evicted)
        })
        .await?;
        self.capacity_set.store(true, Ordering::Release);
        if !evicted.is_empty() {
            let count = evicted.len();
            for gone in evicted {
                self.log(DLQEvent::ItemRemoved {
                    item_id: gone.item_id,
                })
                .await?;
            }
            self.log(DLQEvent::ItemsEvicted { count }).await?;
        }
        self.log(DLQEvent::ItemAdded {
            item: Box::new(item),
        })
        .await
    }

    /// Takes the reprocess-eligible ones of `item_ids` out of the queue and
    /// returns their data; the others (and ids not there) stay as they are.
    ///
    /// Each item is taken only if it is still the one read (a failure
    /// merged into it meanwhile, or another queue taking it first, leaves
    /// it out), so two queues reprocessing at once hand out an item once.
    pub async fn reprocess(&self, item_ids: Vec<String>) -> Result<Vec<Value>> {
        let db = Arc::clone(&self.storage.db);
        let job_id = self.job_id.clone();
        let taken = blocking(move || take_eligible(&db, &job_id, item_ids)).await?;
        let mut data = Vec::with_capacity(taken.len());
        for (item_id, item_data) in taken {
            self.log(DLQEvent::ItemRemoved { item_id }).await?;
            data.push(item_data);
        }
        self.log(DLQEvent::ItemsReprocessed { count: data.len() })
            .await?;
        Ok(data)
    }

    /// Removes an item. An item that is not there is no error (and is
    /// logged as removed all the same, as in Prodigy).
    pub async fn remove(&self, item_id: &str) -> Result<()> {
        self.storage.remove(&self.job_id, item_id).await?;
        self.log(DLQEvent::ItemRemoved {
            item_id: item_id.to_string(),
        })
        .await
    }

    /// The job's items matching `filter`, the latest last attempt first.
    pub async fn list_items(&self, filter: DLQFilter) -> Result<Vec<DeadLetteredItem>> {
        let db = Arc::clone(&self.storage.db);
        let job_id = self.job_id.clone();
        blocking(move || {
            let Some(dlq) = db.for_read()? else {
                return Ok(Vec::new());
            };
            // What dlqlite can select goes to the query; the error type's
            // exit code and the signature's substring match are checked here.
            let mut selection = job_filter(&job_id);
            selection.eligible = filter.reprocess_eligible;
            selection.expression =
                filter
                    .error_type
                    .as_ref()
                    .map(|error_type| crate::filter::Expr::Compare {
                        field: crate::filter::Field::Attempt {
                            column: crate::filter::AttemptColumn::ErrorType,
                            last: false,
                        },
                        op: crate::filter::Op::Eq,
                        value: crate::filter::Literal::Text(variant_name(error_type).to_string()),
                    });
            selection.since = filter.after.map(Timestamp::from_datetime);
            selection.until = filter
                .before
                .and_then(|before| before.checked_add_signed(TimeDelta::nanoseconds(1)))
                .map(Timestamp::from_datetime);
            let mut items: Vec<DeadLetteredItem> = job_items(&dlq, selection)?
                .into_iter()
                .filter(|item| {
                    filter.error_type.as_ref().is_none_or(|wanted| {
                        item.failure_history
                            .iter()
                            .any(|attempt| &attempt.error_type == wanted)
                    }) && filter
                        .error_signature
                        .as_deref()
                        .is_none_or(|part| item.error_signature.contains(part))
                })
                .collect();
            items.sort_by_key(|item| std::cmp::Reverse(item.last_attempt));
            Ok(items)
        })
        .await
    }

    /// One item of the job, if it is there.
    pub async fn get_item(&self, item_id: &str) -> Result<Option<DeadLetteredItem>> {
        let db = Arc::clone(&self.storage.db);
        let (job_id, item_id) = (self.job_id.clone(), item_id.to_string());
        blocking(move || get_item(&db, &job_id, &item_id)).await
    }

    /// Groups the job's items by exact error signature (largest group
    /// first, three sample items each), counts attempts per error type and
    /// items per hour of their last attempt. Logs how many groups.
    pub async fn analyze_patterns(&self) -> Result<FailureAnalysis> {
        let db = Arc::clone(&self.storage.db);
        let job_id = self.job_id.clone();
        let analysis = blocking(move || {
            let mut analysis = FailureAnalysis {
                total_items: 0,
                pattern_groups: Vec::new(),
                error_distribution: HashMap::new(),
                temporal_distribution: Vec::new(),
            };
            let Some(dlq) = db.for_read()? else {
                return Ok(analysis);
            };
            let mut groups: BTreeMap<String, PatternGroup> = BTreeMap::new();
            let mut hours: BTreeMap<DateTime<Utc>, usize> = BTreeMap::new();
            // One pass over the stream: only three items per signature are
            // held, not the job.
            for stored in dlq.items(job_filter(&job_id)) {
                let item = from_engine(&stored?.item)?;
                analysis.total_items += 1;
                for attempt in &item.failure_history {
                    *analysis
                        .error_distribution
                        .entry(attempt.error_type.clone())
                        .or_insert(0) += 1;
                }
                *hours.entry(hour_of(item.last_attempt)).or_insert(0) += 1;
                let group = groups
                    .entry(item.error_signature.clone())
                    .or_insert_with(|| PatternGroup {
                        signature: item.error_signature.clone(),
                        count: 0,
                        first_occurrence: None,
                        last_occurrence: None,
                        sample_items: Vec::new(),
                    });
                group.count += 1;
                group.first_occurrence = Some(
                    group
                        .first_occurrence
                        .map_or(item.first_attempt, |t| t.min(item.first_attempt)),
                );
                group.last_occurrence = Some(
                    group
                        .last_occurrence
                        .map_or(item.last_attempt, |t| t.max(item.last_attempt)),
                );
                if group.sample_items.len() < 3 {
                    group.sample_items.push(item);
                }
            }
            analysis.pattern_groups = groups.into_values().collect();
            analysis
                .pattern_groups
                .sort_by(|a, b| b.count.cmp(&a.count).then(a.signature.cmp(&b.signature)));
            analysis.temporal_distribution = hours.into_iter().collect();
            Ok(analysis)
        })
        .await?;
        self.log(DLQEvent::AnalysisGenerated {
            patterns: analysis.pattern_groups.len(),
        })
        .await?;
        Ok(analysis)
    }

    /// Writes the job's items to `path` as a pretty JSON array (by item_id).
    pub async fn export_items(&self, path: &Path) -> Result<()> {
        let db = Arc::clone(&self.storage.db);
        let job_id = self.job_id.clone();
        let path = path.to_path_buf();
        blocking(move || {
            let items = match db.for_read()? {
                Some(dlq) => job_items(&dlq, job_filter(&job_id))?,
                None => Vec::new(),
            };
            let json = serde_json::to_string_pretty(&items)?;
            std::fs::write(&path, json)
                .with_context(|| format!("cannot write DLQ export {}", path.display()))
        })
        .await
    }

    /// Removes the job's items whose last attempt is before `older_than`,
    /// each logged as removed; returns how many.
    pub async fn purge_old_items(&self, older_than: DateTime<Utc>) -> Result<usize> {
        let db = Arc::clone(&self.storage.db);
        let job_id = self.job_id.clone();
        let removed = blocking(move || {
            let Some(dlq) = db.for_read()? else {
                return Ok(Vec::new());
            };
            let mut old = job_filter(&job_id);
            old.until = Some(Timestamp::from_datetime(older_than));
            let ids = dlq
                .list(old)
                .map(|summary| summary.map(|s| s.item_id))
                .collect::<crate::Result<Vec<_>>>()?;
            let mut removed = Vec::with_capacity(ids.len());
            for item_id in ids {
                if remove_item(&db, &job_id, &item_id)? {
                    removed.push(item_id);
                }
            }
            Ok(removed)
        })
        .await?;
        let count = removed.len();
        for item_id in removed {
            self.log(DLQEvent::ItemRemoved { item_id }).await?;
        }
        Ok(count)
    }

    /// `<error type>::<message>` with the message cut to its first ten
    /// words that are neither paths (holding `/`) nor numbers.
    pub fn create_error_signature(error_type: &ErrorType, error_message: &str) -> String {
        let mut words: Vec<&str> = Vec::new();
        for word in error_message.split_whitespace() {
            if words.len() == 10 {
                break;
            }
            let is_path = word.contains('/');
            let is_number = word.chars().all(char::is_numeric);
            if !is_path && !is_number {
                words.push(word);
            }
        }
        format!("{error_type:?}::{}", words.join(" "))
    }

    /// Whether an item that failed `failure_count` times has used up
    /// `max_retries` retries.
    pub fn should_move_to_dlq(failure_count: u32, max_retries: u32) -> bool {
        failure_count > max_retries
    }

    /// The job's figures (all zero before its first item).
    pub async fn get_stats(&self) -> Result<DLQStats> {
        let db = Arc::clone(&self.storage.db);
        let job_id = self.job_id.clone();
        blocking(move || {
            let stats = match db.for_read()? {
                None => crate::store::Stats::default(),
                Some(dlq) => match dlq.job_stats(&job_id) {
                    Ok(stats) => stats,
                    Err(e) if is_absent(&e) => crate::store::Stats::default(),
                    Err(e) => return Err(e.into()),
                },
            };
            let count = |n: i64| usize::try_from(n).unwrap_or(0);
            Ok(DLQStats {
                total_items: count(stats.total_items),
                eligible_for_reprocess: count(stats.eligible_for_reprocess),
                requiring_manual_review: count(stats.requiring_manual_review),
                oldest_item: stats.oldest_item.map(|t| t.datetime()),
                newest_item: stats.newest_item.map(|t| t.datetime()),
                error_categories: stats
                    .error_categories
                    .into_iter()
                    .map(|(signature, n)| (signature, count(n)))
                    .collect(),
            })
        })
        .await
    }
}

/// The variant name, as dlqlite stores it in the error_type column.
fn variant_name(error_type: &ErrorType) -> &'static str {
    match error_type {
        ErrorType::Timeout => "Timeout",
        ErrorType::CommandFailed { .. } => "CommandFailed",
        ErrorType::CommitValidationFailed => "CommitValidationFailed",
        ErrorType::WorktreeError => "WorktreeError",
        ErrorType::MergeConflict => "MergeConflict",
        ErrorType::ValidationFailed => "ValidationFailed",
        ErrorType::ResourceExhausted => "ResourceExhausted",
        ErrorType::Unknown => "Unknown",
    }
}

/// The start of the hour `time` falls in.
fn hour_of(time: DateTime<Utc>) -> DateTime<Utc> {
    time.with_nanosecond(0)
        .and_then(|t| t.with_second(0))
        .and_then(|t| t.with_minute(0))
        .unwrap_or(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_type_names_match_the_serde_tag() {
        for error_type in [
            ErrorType::Timeout,
            ErrorType::CommandFailed { exit_code: 3 },
            ErrorType::CommitValidationFailed,
            ErrorType::WorktreeError,
            ErrorType::MergeConflict,
            ErrorType::ValidationFailed,
            ErrorType::ResourceExhausted,
            ErrorType::Unknown,
        ] {
            let json = serde_json::to_value(&error_type).unwrap();
            let tag = match &json {
                Value::String(name) => name.clone(),
                Value::Object(map) => map.keys().next().unwrap().clone(),
                other => panic!("{other}"),
            };
            assert_eq!(variant_name(&error_type), tag);
        }
    }

    #[test]
    fn hours_start_on_the_hour() {
        let t = DateTime::parse_from_rfc3339("2025-11-23T19:42:53.9Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(hour_of(t).to_rfc3339(), "2025-11-23T19:00:00+00:00");
    }
}
