//! `analyze`: the largest failure families, failure patterns by signature
//! and by normalised message, the distribution of error types, failures
//! over time, failure categories, and the agents and steps that fail most.
//! The families' counts ([`family_groups`], also what `stats` and
//! `metrics` list) are read from the items_family index with the item
//! count, so that they add up to it. One pass over the attempts feeds
//! everything that needs them; counts per signature and per last error type
//! come from the counter tables; a few lookups follow for what is shown
//! (sample items and messages of the listed groups, and the top agents or
//! steps by SQL when there were too many to count in memory).

use super::columns::columns;
use super::message_groups::LastAttempts;
use super::sql::{vals, Conn};
use super::{Category, Dlq};
use crate::error::Result;
use crate::time::Timestamp;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// The page cache of a connection while it scans (KiB): pages are read
/// once, so the pool's usual 32 MB would only be memory held (three of them
/// made analyze's peak RSS 150 MB at 1,000,000 items).
pub(super) const SCAN_CACHE_KIB: i64 = 2_048;

/// Distinct agents (or steps) counted in memory during the scan; past this
/// they are counted by SQLite after it, whose sorter spills to disk.
const MAX_TALLY_KEYS: usize = 100_000;

/// How many agents and steps are listed, and pattern and message groups
/// unless [`AnalyzeOptions::top`] says otherwise.
const TOP: usize = 20;

/// What [`Dlq::analyze_with`] lists.
#[derive(Clone, Debug)]
pub struct AnalyzeOptions {
    /// Pattern groups and message groups listed, the largest first (0: all).
    /// The rest are summed up in `*_omitted`.
    pub top: usize,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions { top: TOP }
    }
}

/// The groups left out of a listing, and the items they hold: with them,
/// the listed counts add up to `total_items`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Omitted {
    pub groups: usize,
    pub items: i64,
}

/// One failure family (docs/families.md) as `stats`, `analyze` and
/// `metrics` list it: its items within the scope (one job or all).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FamilyGroup {
    pub family_id: i64,
    /// Items of the scope whose last attempt is of this family.
    pub count: i64,
    /// The words of its failures' error line, `<*>` where they differ.
    pub template: String,
    /// The last attempt's error type its failures share.
    pub error_type: Option<String>,
    /// That error type's failure category (none without an error type).
    pub category: Option<Category>,
}

/// The largest families of a scope and what the listing leaves out: the
/// listed counts, `omitted.items` and `items_without_family` add up to
/// `total_items`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FamilyGroups {
    /// Largest first, ties by id.
    pub listed: Vec<FamilyGroup>,
    /// The smaller families, and their items.
    pub omitted: Omitted,
    /// Items with no family (stored before families were mined, or with
    /// no attempt).
    pub items_without_family: i64,
    /// Items of the scope, counted by the same statement as the families.
    pub total_items: i64,
}

/// Items per family of one job (`?1`) or of all (`?1` NULL): two
/// statements rather than `?1 IS NULL OR job_id = ?1`, with which SQLite
/// can use neither index.
fn family_count_sql(one_job: bool) -> &'static str {
    if one_job {
        "SELECT family_id, COUNT(*) FROM items WHERE job_id = ?1 GROUP BY family_id"
    } else {
        "SELECT family_id, COUNT(*) FROM items WHERE CAST(?1 AS TEXT) IS NULL
         GROUP BY family_id"
    }
}

/// The `top` largest families of one job or all (`usize::MAX`: every
/// one), counted when asked (counts are not stored, see
/// store/families.rs). Over all jobs: one pass over the covering index
/// items_family, no sort. For one job: its rows through a job index, the
/// family of each read from its row, grouped in a temporary b-tree (the
/// cost of the job's items, not of the table's). Then one primary-key
/// lookup per listed family.
pub(super) fn family_groups(
    conn: Conn<'_>,
    job_id: Option<&str>,
    top: usize,
) -> Result<FamilyGroups> {
    let sql = family_count_sql(job_id.is_some());
    let mut groups = FamilyGroups::default();
    let mut families: Vec<(i64, i64)> = Vec::new();
    conn.each(sql, vals![job_id], |row| {
        let items = row.i64(1)?;
        groups.total_items += items;
        match row.opt_i64(0)? {
            Some(id) => families.push((id, items)),
            None => groups.items_without_family += items,
        }
        Ok(())
    })?;
    let all = families.len();
    let all_items: i64 = families.iter().map(|(_, n)| n).sum();
    let families = crate::rank::first_n_by(families, top, |a, b| {
        b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0))
    });
    for (id, count) in families {
        let row = conn.row(
            "SELECT f.template, f.error_type, c.category FROM families AS f
             LEFT JOIN error_categories AS c ON c.error_type = f.error_type
             WHERE f.id = ?1",
            vals![id],
            |row| Ok((row.text(0)?, row.opt_text(1)?, row.opt_text(2)?)),
        )?;
        // Families are never deleted; a row missing all the same is listed
        // by its id, so that the counts still add up.
        let (template, error_type, category) = row.unwrap_or_default();
        let category = match (&error_type, category) {
            (_, Some(category)) => Some(category.parse()?),
            (Some(_), None) => Some(Category::Unclassified),
            (None, None) => None,
        };
        groups.listed.push(FamilyGroup {
            family_id: id,
            count,
            template,
            error_type,
            category,
        });
    }
    groups.omitted = Omitted {
        groups: all - groups.listed.len(),
        items: all_items - groups.listed.iter().map(|g| g.count).sum::<i64>(),
    };
    Ok(groups)
}

/// Failures grouped by exact error signature.
#[derive(Clone, Debug, Serialize)]
pub struct PatternGroup {
    pub error_signature: String,
    pub count: i64,
    pub first_occurrence: Option<Timestamp>,
    pub last_occurrence: Option<Timestamp>,
    pub sample_items: Vec<String>,
    pub representative_message: Option<String>,
    pub error_type: Option<String>,
}

/// Items whose last attempts' messages differ only in numbers, paths, hex
/// ids, uuids or durations.
#[derive(Clone, Debug, Serialize)]
pub struct MessageGroup {
    /// The message with the varying parts replaced (`<n>`, `<path>`, ...);
    /// `(no attempts)` for items without an attempt.
    pub pattern: String,
    /// Items in the group.
    pub count: i64,
    /// Distinct error signatures among them.
    pub signatures: usize,
    /// Up to five of those signatures.
    pub sample_signatures: Vec<String>,
    /// The last message of one of the items.
    pub sample_message: String,
}

/// Error types over all attempts and over each item's last attempt.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ErrorDistribution {
    pub all_attempts: BTreeMap<String, i64>,
    pub last_attempts: BTreeMap<String, i64>,
    /// The failure category of each error type above (`error_categories`).
    pub categories: BTreeMap<String, Category>,
}

/// Attempts per hour or per day.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TemporalDistribution {
    /// `hour` or `day`.
    pub bucket: String,
    /// Bucket start (`2025-11-23T19` or `2025-11-23`) and attempts, in time
    /// order.
    pub counts: Vec<(String, i64)>,
}

/// A name and how often it failed.
#[derive(Clone, Debug, Serialize)]
pub struct Ranked {
    pub name: String,
    pub failures: i64,
}

/// The whole analysis.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub job_id: Option<String>,
    pub total_items: i64,
    pub total_attempts: i64,
    /// The largest failure families, first: what keeps failing, one entry
    /// per cause.
    pub families: Vec<FamilyGroup>,
    /// The families not in `families`, and their items.
    pub families_omitted: Omitted,
    /// Items with no family yet (`dlq families rebuild` mines them). With
    /// `families` and `families_omitted` they add up to `total_items`.
    pub items_without_family: i64,
    pub pattern_groups: Vec<PatternGroup>,
    /// The signatures not in `pattern_groups`, and their items.
    pub pattern_groups_omitted: Omitted,
    pub message_groups: Vec<MessageGroup>,
    /// The message groups not in `message_groups`, and their items.
    pub message_groups_omitted: Omitted,
    pub error_distribution: ErrorDistribution,
    pub temporal_distribution: TemporalDistribution,
    /// Items per failure category of their last attempt's error type.
    pub failure_categories: BTreeMap<String, i64>,
    pub top_agents: Vec<Ranked>,
    pub top_failing_steps: Vec<Ranked>,
}

impl Analysis {
    /// Whether some agent failed more than once. When none did (data from
    /// the JSON layout names each item's agent `agent-<item_id>`), a list
    /// of "top" agents ranks nothing, and is better left out.
    pub fn agents_repeat(&self) -> bool {
        self.top_agents.iter().any(|agent| agent.failures > 1)
    }
}

/// What to show instead of the top agents when none failed twice.
pub const AGENTS_DO_NOT_REPEAT: &str =
    "no agent failed more than once (each item had its own agent), so none stands out";

/// Replaces the parts of a message that vary between occurrences of one
/// failure: uuids, paths, hex ids, durations and other numbers.
pub fn normalise_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for (index, word) in message.split(' ').enumerate() {
        if index > 0 {
            out.push(' ');
        }
        let trimmed = word.trim_matches(|c: char| {
            matches!(
                c,
                ',' | ';' | ':' | '(' | ')' | '[' | ']' | '\'' | '"' | '`'
            )
        });
        let start = word.find(trimmed).unwrap_or(0);
        let (prefix, rest) = word.split_at(start);
        let suffix = &rest[trimmed.len()..];
        out.push_str(prefix);
        out.push_str(&normalise_word(trimmed));
        out.push_str(suffix);
    }
    out
}

fn normalise_word(word: &str) -> String {
    if word.is_empty() {
        return String::new();
    }
    if word.contains('/') || word.contains('\\') {
        return "<path>".into();
    }
    if is_uuid(word) {
        return "<uuid>".into();
    }
    let hex = word.strip_prefix("0x").unwrap_or(word);
    if hex.len() >= 7
        && hex.chars().all(|c| c.is_ascii_hexdigit())
        && hex.chars().any(|c| c.is_ascii_digit())
    {
        return "<hex>".into();
    }
    if is_duration(word) {
        return "<duration>".into();
    }
    // Any other run of digits (with a decimal part) becomes <n>.
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|d| d.is_ascii_digit() || *d == '.')
            {
                chars.next();
            }
            out.push_str("<n>");
        } else {
            out.push(c);
        }
    }
    out
}

fn is_uuid(word: &str) -> bool {
    let parts: Vec<&str> = word.split('-').collect();
    parts.len() == 5
        && [8, 4, 4, 4, 12]
            .iter()
            .zip(&parts)
            .all(|(len, part)| part.len() == *len && part.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_duration(word: &str) -> bool {
    let digits = word
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(word.len());
    if digits == 0 || !word.as_bytes()[0].is_ascii_digit() {
        return false;
    }
    matches!(
        &word[digits..],
        "ms" | "s"
            | "m"
            | "h"
            | "d"
            | "us"
            | "ns"
            | "sec"
            | "secs"
            | "second"
            | "seconds"
            | "min"
            | "mins"
            | "minute"
            | "minutes"
            | "hour"
            | "hours"
    )
}

/// Counts per key, keyed by the column's bytes: the scan counts four
/// columns of every attempt, and checking UTF-8 and hashing with SipHash
/// there took a third of analyze's time (perf, 1,000,000 attempts).
type Tally = HashMap<Box<[u8]>, i64, BuildHasherDefault<FxHasher>>;

fn bump(tally: &mut Tally, key: &[u8]) {
    match tally.get_mut(key) {
        Some(count) => *count += 1,
        None => {
            tally.insert(key.into(), 1);
        }
    }
}

/// The multiply-rotate hash of rustc (FxHash): a few cycles per word. The
/// keys are the database's own short column values, counted once by a
/// command that ends, so flooding resistance buys nothing here.
#[derive(Default)]
pub(super) struct FxHasher(u64);

/// Hash maps keyed by the database's own values (see [`FxHasher`]).
pub(super) type FxBuild = BuildHasherDefault<FxHasher>;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // The multiply leaves the low bits depending on the low input bits
        // only, and the table picks buckets by the low bits: fold the high
        // bits down (timestamps differ in their last bytes; without this
        // the hour tally collided into few buckets).
        let hash = self.0;
        (hash ^ (hash >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (hash >> 29)
    }
}

/// A tally's keys as text (the columns are TEXT; bytes that are not UTF-8
/// show as U+FFFD).
fn into_text(tally: Tally) -> impl Iterator<Item = (String, i64)> {
    tally
        .into_iter()
        .map(|(key, count)| (String::from_utf8_lossy(&key).into_owned(), count))
}

/// The `TOP` most counted keys, most first, ties by name.
fn top_ranked(tally: Tally) -> Vec<Ranked> {
    crate::rank::top_n(tally, TOP)
        .into_iter()
        .map(|(name, failures)| Ranked {
            name: String::from_utf8_lossy(&name).into_owned(),
            failures,
        })
        .collect()
}

impl Dlq {
    /// Analyses one job, or all jobs, listing the 20 largest groups.
    pub fn analyze(&self, job_id: Option<&str>) -> Result<Analysis> {
        self.analyze_with(job_id, &AnalyzeOptions::default())
    }

    /// Analyses one job, or all jobs.
    pub fn analyze_with(&self, job_id: Option<&str>, options: &AnalyzeOptions) -> Result<Analysis> {
        if let Some(job) = job_id {
            // An unknown job is an error, not an empty report.
            self.require_job(job)?;
        }
        let top = if options.top == 0 {
            usize::MAX
        } else {
            options.top
        };
        // Each part takes its own connection and gives it back: the
        // parallel parts need two at once, and an in-memory database has a
        // pool of one (holding one here made them wait out the pool's
        // timeout and fail).
        let (item_count, last_attempts, families) = self.read(|conn| {
            let items = conn
                .row(
                    "SELECT CAST(COALESCE(SUM(item_count), 0) AS BIGINT) FROM jobs
                     WHERE CAST(?1 AS TEXT) IS NULL OR job_id = ?1",
                    vals![job_id],
                    |row| row.i64(0),
                )?
                .unwrap_or(0);
            // In the snapshot of the item count: with it, the families'
            // counts add up to the items.
            let families = family_groups(conn, job_id, top)?;
            Ok((items, last_error_types(conn, job_id)?, families))
        })?;
        // Looked up now, not cached: a `dlq categories set` shows at once.
        let category_map = self.category_map()?;
        let category_of = |error_type: &str| {
            category_map
                .get(error_type)
                .copied()
                .unwrap_or(Category::Unclassified)
        };
        let mut failure_categories: BTreeMap<String, i64> = BTreeMap::new();
        for (error_type, count) in &last_attempts {
            *failure_categories
                .entry(category_of(error_type).to_string())
                .or_insert(0) += count;
        }

        let mut scan = scan_attempts_parallel(self, job_id, item_count)?;
        let last = std::mem::replace(&mut scan.last, LastAttempts::new(0, -1, 0));
        // One pass over the items in signature order: the message groups,
        // and the signatures' counts (the largest kept, the rest counted).
        let (groups, signatures) =
            self.read(|conn| super::message_groups::group_items(conn, job_id, last, top))?;

        let samples = samples(self, job_id, &signatures.largest)?;
        let mut pattern_groups = Vec::with_capacity(signatures.largest.len());
        for ((signature, count), sample) in signatures.largest.iter().zip(samples) {
            pattern_groups.push(PatternGroup {
                error_signature: signature.clone(),
                count: *count,
                first_occurrence: sample.first,
                last_occurrence: sample.last,
                sample_items: sample.items,
                representative_message: sample.message,
                error_type: sample.error_type,
            });
        }
        let pattern_groups_omitted = Omitted {
            groups: signatures.distinct - pattern_groups.len(),
            items: signatures.total - pattern_groups.iter().map(|g| g.count).sum::<i64>(),
        };

        let (message_groups, message_groups_omitted) = self.read(|conn| {
            let all = groups.len();
            let items: i64 = groups.iter().map(|g| g.items).sum();
            let order = |a: &super::message_groups::Group, b: &super::message_groups::Group| {
                b.items
                    .cmp(&a.items)
                    .then_with(|| a.pattern.cmp(&b.pattern))
            };
            let groups = crate::rank::first_n_by(groups, top, order);
            let listed: i64 = groups.iter().map(|g| g.items).sum();
            let mut message_groups = Vec::with_capacity(groups.len());
            for group in groups {
                message_groups.push(MessageGroup {
                    sample_message: last_message(conn, group.sample_item)?,
                    pattern: group.pattern,
                    count: group.items,
                    signatures: group.signatures,
                    sample_signatures: group.sample_signatures,
                });
            }
            let omitted = Omitted {
                groups: all - message_groups.len(),
                items: items - listed,
            };
            Ok((message_groups, omitted))
        })?;

        Ok(Analysis {
            job_id: job_id.map(str::to_string),
            total_items: signatures.total,
            total_attempts: scan.attempts,
            families: families.listed,
            families_omitted: families.omitted,
            items_without_family: families.items_without_family,
            pattern_groups,
            pattern_groups_omitted,
            message_groups,
            message_groups_omitted,
            error_distribution: {
                let all_attempts: BTreeMap<String, i64> = into_text(scan.error_types).collect();
                let categories = all_attempts
                    .keys()
                    .chain(last_attempts.keys())
                    .map(|name| (name.clone(), category_of(name)))
                    .collect();
                ErrorDistribution {
                    all_attempts,
                    last_attempts,
                    categories,
                }
            },
            temporal_distribution: scan.temporal,
            failure_categories,
            top_agents: if scan.agents_overflow {
                top_by_sql(self, job_id, "agent_id")?
            } else {
                top_ranked(scan.agents)
            },
            top_failing_steps: if scan.steps_overflow {
                top_by_sql(self, job_id, "step_failed")?
            } else {
                top_ranked(scan.steps)
            },
        })
    }
}

/// The `TOP` values of an attempt column that fail most, counted by SQLite
/// (grouped in its sorter, which spills to disk) when there were too many
/// to count in memory. `column` is one of the fixed names above.
fn top_by_sql(dlq: &Dlq, job_id: Option<&str>, column: &str) -> Result<Vec<Ranked>> {
    let sql = if job_id.is_some() {
        format!(
            "SELECT {column} AS name, COUNT(*) AS failures FROM failure_history
             WHERE item_key IN (SELECT id FROM items WHERE job_id = ?1) GROUP BY {column}"
        )
    } else {
        format!(
            "SELECT {column} AS name, COUNT(*) AS failures FROM failure_history
             WHERE CAST(?1 AS TEXT) IS NULL GROUP BY {column}"
        )
    };
    let mut largest = super::message_groups::Largest::new(TOP);
    dlq.read(|conn| {
        let _cache = conn.scan_cache(SCAN_CACHE_KIB)?;
        conn.each(&sql, vals![job_id], |row| {
            largest.offer(row.bytes(0)?, row.i64(1)?);
            Ok(())
        })
    })?;
    Ok(largest
        .finish()
        .largest
        .into_iter()
        .map(|(name, failures)| Ranked { name, failures })
        .collect())
}

/// The message of an item's last attempt ('' when it has none).
fn last_message(conn: Conn<'_>, item_key: i64) -> Result<String> {
    let sql = format!(
        "SELECT {}",
        super::counters::last_attempt_select(conn.backend(), "error_message", "?1")
    );
    let message = conn.row(&sql, vals![item_key], |row| row.opt_text(0))?;
    Ok(message.flatten().unwrap_or_default())
}

fn last_error_types(conn: Conn<'_>, job_id: Option<&str>) -> Result<BTreeMap<String, i64>> {
    let mut rows = BTreeMap::new();
    conn.each(
        "SELECT error_type, CAST(SUM(item_count) AS BIGINT) AS items FROM error_type_counts
         WHERE CAST(?1 AS TEXT) IS NULL OR job_id = ?1 GROUP BY error_type",
        vals![job_id],
        |row| {
            rows.insert(row.text(0)?, row.i64(1)?);
            Ok(())
        },
    )?;
    Ok(rows)
}

/// A signature as a listing names it: the error type and message of its
/// newest item's last attempt (the representative message of analyze's
/// pattern groups).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SignatureSample {
    pub error_type: Option<String>,
    pub message: Option<String>,
}

impl Dlq {
    /// The error type and representative message of each signature, in the
    /// order given, within one job or all: what `dlq stats` shows beside
    /// its top signatures. Each walks its signature's range of an index.
    pub fn signature_samples(
        &self,
        job_id: Option<&str>,
        signatures: &[String],
    ) -> Result<Vec<SignatureSample>> {
        self.read(|conn| {
            signatures
                .iter()
                .map(|signature| {
                    if conn.backend() == super::Backend::Postgres {
                        return pg_signature_sample(conn, job_id, signature);
                    }
                    let sample = sample_of(conn, job_id, signature)?;
                    Ok(SignatureSample {
                        error_type: sample.error_type,
                        message: sample.message,
                    })
                })
                .collect()
        })
    }
}

/// [`Dlq::signature_samples`] of one signature on PostgreSQL: the last
/// attempt of the signature's newest item (ties: the later insert), as
/// [`sample_of`] picks it.
fn pg_signature_sample(
    conn: super::sql::Conn<'_>,
    job_id: Option<&str>,
    signature: &str,
) -> Result<SignatureSample> {
    let found = conn.row(
        "SELECT f.error_type, f.error_message FROM items i
         LEFT JOIN LATERAL (SELECT error_type, error_message FROM failure_history l
             WHERE l.item_key = i.id
             ORDER BY l.timestamp DESC, l.timestamp_ns DESC, l.attempt_number DESC LIMIT 1) f ON TRUE
         WHERE i.error_signature = ?1 AND (CAST(?2 AS TEXT) IS NULL OR i.job_id = ?2)
         ORDER BY i.last_attempt DESC, i.last_attempt_ns DESC, i.id DESC LIMIT 1",
        super::sql::vals![signature, job_id],
        |row| Ok((row.opt_text(0)?, row.opt_text(1)?)),
    )?;
    let (error_type, message) = found.unwrap_or((None, None));
    Ok(SignatureSample {
        error_type,
        message,
    })
}

struct Sample {
    items: Vec<String>,
    message: Option<String>,
    error_type: Option<String>,
    first: Option<Timestamp>,
    last: Option<Timestamp>,
}

/// The samples of the listed signatures, in rank order, taken on two
/// connections (alternate ranks each): after the attempt scan this was
/// analyze's serial tail when it sampled 10,000 signatures.
fn samples(dlq: &Dlq, job_id: Option<&str>, signatures: &[(String, i64)]) -> Result<Vec<Sample>> {
    let ranked: Vec<(usize, &str)> = signatures
        .iter()
        .enumerate()
        .map(|(rank, (signature, _))| (rank, signature.as_str()))
        .collect();
    let share = |parity: usize| -> Result<Vec<(usize, Sample)>> {
        dlq.read(|conn| {
            // Each sample walks its signature's range of an index once.
            let _cache = conn.scan_cache(SCAN_CACHE_KIB)?;
            ranked
                .iter()
                .filter(|(rank, _)| rank % 2 == parity)
                .map(|&(rank, signature)| Ok((rank, sample_of(conn, job_id, signature)?)))
                .collect()
        })
    };
    let (mut all, odd) = on_two_connections(dlq, || share(0), || share(1))?;
    all.extend(odd);
    all.sort_by_key(|(rank, _)| *rank);
    Ok(all.into_iter().map(|(_, sample)| sample).collect())
}

columns! {
    /// The columns of `items` that [`sample_of`] reads.
    mod sample_columns {
        KEY = "id",
        FIRST_ATTEMPT = "first_attempt" pg "dlq_ts_text(first_attempt, first_attempt_ns)",
        LAST_ATTEMPT = "last_attempt" pg "dlq_ts_text(last_attempt, last_attempt_ns)",
    }
}

columns! {
    /// The columns of `failure_history` that [`sample_of`] reads from the
    /// newest item's last attempt.
    mod sample_message_columns {
        ERROR_MESSAGE = "error_message",
        ERROR_TYPE = "error_type",
    }
}

/// A signature's three newest items, their representative (newest) message,
/// and its first and last occurrence. One pass over the signature's range of the covering
/// index items_signature does it all: ordering by last_attempt in SQL made
/// SQLite read every row of the range from the table, and the span took a
/// second pass.
fn sample_of(conn: Conn<'_>, job_id: Option<&str>, signature: &str) -> Result<Sample> {
    use sample_columns as c;
    use sample_message_columns as m;
    let wanted = 3;
    let list = c::list(conn.backend());
    // Two statements rather than `(?2 IS NULL OR job_id = ?2)`: with the OR,
    // SQLite cannot narrow the range to the job.
    let sql = match job_id {
        Some(_) => format!("SELECT {list} FROM items WHERE error_signature = ?1 AND job_id = ?2"),
        None => format!(
            "SELECT {list} FROM items WHERE error_signature = ?1 AND CAST(?2 AS TEXT) IS NULL"
        ),
    };
    let mut first: Option<String> = None;
    let mut last: Option<String> = None;
    // The newest (last_attempt, id) pairs, newest first; ties go to the
    // later insert.
    let mut newest: Vec<(String, i64)> = Vec::with_capacity(wanted + 1);
    conn.each(&sql, vals![signature, job_id], |row| {
        let id = row.i64(c::KEY)?;
        let first_attempt = std::str::from_utf8(row.bytes(c::FIRST_ATTEMPT)?).unwrap_or("");
        let last_attempt = std::str::from_utf8(row.bytes(c::LAST_ATTEMPT)?).unwrap_or("");
        if first.as_deref().is_none_or(|f| first_attempt < f) {
            first = Some(first_attempt.to_string());
        }
        if last.as_deref().is_none_or(|l| last_attempt > l) {
            last = Some(last_attempt.to_string());
        }
        let newer = |(at, key): &(String, i64)| (at.as_str(), *key) > (last_attempt, id);
        let place = newest.iter().take_while(|pair| newer(pair)).count();
        if place < wanted {
            newest.insert(place, (last_attempt.to_string(), id));
            newest.truncate(wanted);
        }
        Ok(())
    })?;
    let mut items = Vec::with_capacity(newest.len());
    for (_, id) in &newest {
        let item_id = conn.row(
            "SELECT item_id FROM items WHERE id = ?1",
            vals![*id],
            |row| row.text(0),
        )?;
        items.extend(item_id);
    }
    let order = super::counters::last_attempt_order(conn.backend(), "");
    let (message, error_type) = match newest.first() {
        Some((_, key)) => conn
            .row(
                &format!(
                    "SELECT {} FROM failure_history WHERE item_key = ?1 ORDER BY {order} LIMIT 1",
                    m::LIST,
                ),
                vals![*key],
                |row| {
                    Ok((
                        Some(row.text(m::ERROR_MESSAGE)?),
                        Some(row.text(m::ERROR_TYPE)?),
                    ))
                },
            )?
            .unwrap_or((None, None)),
        None => (None, None),
    };
    let parse = |text: Option<String>| -> Result<Option<Timestamp>> {
        text.map(|text| {
            Timestamp::parse(&text).map_err(|e| {
                crate::error::Error::invalid_argument(format!("signature {signature}"), e)
            })
        })
        .transpose()
    };
    Ok(Sample {
        items,
        message,
        error_type,
        first: parse(first)?,
        last: parse(last)?,
    })
}

struct AttemptScan {
    agents_overflow: bool,
    steps_overflow: bool,
    last: LastAttempts,
    attempts: i64,
    error_types: Tally,
    agents: Tally,
    steps: Tally,
    temporal: TemporalDistribution,
}

/// One pass over the attempts (of one job, or all), split by row range over
/// two connections on two threads: the pass is most of analyze's time, and
/// SQLite reads in parallel happily under WAL.
fn scan_attempts_parallel(dlq: &Dlq, job_id: Option<&str>, item_count: i64) -> Result<AttemptScan> {
    let ((low, high), (first_item, last_item)) = dlq.read(|conn| {
        let attempts = conn
            .row(
                "SELECT MIN(id) AS low, MAX(id) AS high FROM failure_history",
                &[],
                |row| Ok((row.opt_i64(0)?, row.opt_i64(1)?)),
            )?
            .unwrap_or((None, None));
        let item_keys = conn
            .row(
                "SELECT COALESCE(MIN(id), 0) AS low, COALESCE(MAX(id), -1) AS high FROM items",
                &[],
                |row| Ok((row.i64(0)?, row.i64(1)?)),
            )?
            .unwrap_or((0, -1));
        Ok((attempts, item_keys))
    })?;
    let (Some(low), Some(high)) = (low, high) else {
        let none = LastAttempts::new(first_item, last_item, item_count);
        return Ok(finish_scan(AttemptCounts::new(none)));
    };
    let middle = low + (high - low) / 2;
    // Attempts are mostly stored next to their item's other attempts, in
    // item order: each half keeps a dense slot per item of the items its
    // half of the attempts belongs to (the item of the middle attempt
    // divides them), and a map for any other.
    let boundary: i64 = dlq
        .read(|conn| {
            conn.row(
                "SELECT item_key FROM failure_history WHERE id >= ?1 ORDER BY id LIMIT 1",
                vals![middle],
                |row| row.i64(0),
            )
        })?
        .unwrap_or(last_item)
        .clamp(first_item, last_item.max(first_item));
    let half = |low: i64, high: i64, items: (i64, i64)| -> Result<AttemptCounts> {
        // Dense only where the keys are (the items of a job may be spread
        // over the whole table, and many rows may have been deleted).
        let last = LastAttempts::new(items.0, items.1, item_count / 2);
        dlq.read(|conn| scan_range(conn, job_id, low, high, AttemptCounts::new(last)))
    };
    let (mut counts, second) = on_two_connections(
        dlq,
        || half(low, middle, (first_item, boundary)),
        || half(middle + 1, high, (boundary + 1, last_item)),
    )?;
    counts.merge(second);
    Ok(finish_scan(counts))
}

/// Runs `first` here and `second` on a thread of its own, each taking its
/// own connection; or both here, one after the other, when the pool cannot
/// lend two at once (an in-memory database).
fn on_two_connections<A, B: Send>(
    dlq: &Dlq,
    first: impl FnOnce() -> Result<A>,
    second: impl FnOnce() -> Result<B> + Send,
) -> Result<(A, B)> {
    if !dlq.parallel_reads() {
        return Ok((first()?, second()?));
    }
    std::thread::scope(|scope| {
        let other = scope.spawn(second);
        let mine = first();
        let theirs = other
            .join()
            .map_err(|_| crate::error::Error::internal("analyze's second reading thread"))?;
        Ok((mine?, theirs?))
    })
}

struct AttemptCounts {
    attempts: i64,
    error_types: Tally,
    agents: Tally,
    steps: Tally,
    /// The agents or steps outgrew [`MAX_TALLY_KEYS`]: they are counted by
    /// SQL after the scan instead.
    agents_overflow: bool,
    steps_overflow: bool,
    /// Attempts per `YYYY-MM-DDTHH` prefix of their timestamp.
    hours: Tally,
    /// Each item's last attempt and its message's pattern.
    last: LastAttempts,
}

impl AttemptCounts {
    fn new(last: LastAttempts) -> Self {
        AttemptCounts {
            attempts: 0,
            error_types: Tally::default(),
            agents: Tally::default(),
            steps: Tally::default(),
            agents_overflow: false,
            steps_overflow: false,
            hours: Tally::default(),
            last,
        }
    }

    fn merge(&mut self, mut other: AttemptCounts) {
        self.attempts += other.attempts;
        for (overflow, mine, theirs, their_overflow) in [
            (
                &mut self.agents_overflow,
                &mut self.agents,
                &mut other.agents,
                other.agents_overflow,
            ),
            (
                &mut self.steps_overflow,
                &mut self.steps,
                &mut other.steps,
                other.steps_overflow,
            ),
        ] {
            *overflow |= their_overflow;
            if *overflow {
                *mine = Tally::default();
                *theirs = Tally::default();
            }
        }
        self.last.merge(other.last);
        for (into, from) in [
            (&mut self.error_types, other.error_types),
            (&mut self.agents, other.agents),
            (&mut self.steps, other.steps),
            (&mut self.hours, other.hours),
        ] {
            // Into the larger of the two: fewer inserts and no regrowth.
            let mut from = from;
            if from.len() > into.len() {
                std::mem::swap(into, &mut from);
            }
            for (key, count) in from {
                *into.entry(key).or_insert(0) += count;
            }
        }
    }
}

columns! {
    /// The columns of `failure_history` that [`scan_range`] reads.
    mod attempt_columns {
        TIMESTAMP = "timestamp" pg "dlq_ts_text(timestamp, timestamp_ns)",
        ERROR_TYPE = "error_type",
        AGENT_ID = "agent_id",
        STEP_FAILED = "step_failed",
        ITEM_KEY = "item_key",
        ATTEMPT_NUMBER = "attempt_number",
        ERROR_MESSAGE = "error_message",
    }
}

fn scan_range(
    conn: Conn<'_>,
    job_id: Option<&str>,
    low: i64,
    high: i64,
    mut counts: AttemptCounts,
) -> Result<AttemptCounts> {
    use attempt_columns as c;
    let list = c::list(conn.backend());
    let sql = if job_id.is_some() {
        format!(
            "SELECT {list} FROM failure_history
             WHERE id BETWEEN ?2 AND ?3 AND item_key IN (SELECT id FROM items WHERE job_id = ?1)"
        )
    } else {
        format!(
            "SELECT {list} FROM failure_history
             WHERE id BETWEEN ?2 AND ?3 AND CAST(?1 AS TEXT) IS NULL"
        )
    };
    let _cache = conn.scan_cache(SCAN_CACHE_KIB)?;
    conn.each(&sql, vals![job_id, low, high], |row| {
        counts.attempts += 1;
        let timestamp = row.bytes(c::TIMESTAMP)?;
        bump(&mut counts.hours, timestamp.get(..13).unwrap_or(timestamp));
        bump(&mut counts.error_types, row.bytes(c::ERROR_TYPE)?);
        for (tally, overflow, column) in [
            (&mut counts.agents, &mut counts.agents_overflow, c::AGENT_ID),
            (
                &mut counts.steps,
                &mut counts.steps_overflow,
                c::STEP_FAILED,
            ),
        ] {
            if *overflow {
                continue;
            }
            bump(tally, row.bytes(column)?);
            if tally.len() > MAX_TALLY_KEYS {
                // A distinct agent id per attempt (the legacy writer uses
                // agent-<item_id>): a million keys here were 250 MB.
                *overflow = true;
                *tally = Tally::default();
            }
        }
        counts.last.offer(
            row.i64(c::ITEM_KEY)?,
            // Stored attempt numbers are u32 (checked on the way in).
            u32::try_from(row.i64(c::ATTEMPT_NUMBER)?.max(0)).unwrap_or(u32::MAX),
            timestamp,
            row.bytes(c::ERROR_MESSAGE)?,
        );
        Ok(())
    })?;
    Ok(counts)
}

/// Turns the counts into the scan result: hours, rolled up to days when the
/// span is longer than 3 days.
fn finish_scan(counts: AttemptCounts) -> AttemptScan {
    let hours: BTreeMap<String, i64> = into_text(counts.hours).collect();
    let span_days = match (hours.keys().next(), hours.keys().next_back()) {
        (Some(first), Some(last)) => {
            let parse = |h: &str| Timestamp::parse(&format!("{h}:00:00Z")).ok();
            match (parse(first), parse(last)) {
                (Some(a), Some(b)) => (b.datetime() - a.datetime()).num_hours() / 24,
                _ => 0,
            }
        }
        _ => 0,
    };
    let temporal = if span_days > 3 {
        let mut days: BTreeMap<String, i64> = BTreeMap::new();
        for (hour, count) in hours {
            *days
                .entry(hour.get(..10).unwrap_or(&hour).to_string())
                .or_insert(0) += count;
        }
        TemporalDistribution {
            bucket: "day".into(),
            counts: days.into_iter().collect(),
        }
    } else {
        TemporalDistribution {
            bucket: "hour".into(),
            counts: hours.into_iter().collect(),
        }
    };
    AttemptScan {
        agents_overflow: counts.agents_overflow,
        steps_overflow: counts.steps_overflow,
        last: counts.last,
        attempts: counts.attempts,
        error_types: counts.error_types,
        agents: counts.agents,
        steps: counts.steps,
        temporal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_keeps_the_most_counted_most_first_ties_by_name() {
        let mut tally = Tally::default();
        // 1,000 agents failing once, then three that fail more.
        for i in 0..1000 {
            bump(&mut tally, format!("agent-{i:04}").as_bytes());
        }
        for (agent, extra) in [("agent-0500", 4), ("agent-0007", 2), ("agent-0999", 2)] {
            for _ in 0..extra {
                bump(&mut tally, agent.as_bytes());
            }
        }
        let ranked = top_ranked(tally);
        assert_eq!(ranked.len(), TOP);
        let names: Vec<&str> = ranked.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names[..5],
            [
                "agent-0500",
                "agent-0007",
                "agent-0999",
                "agent-0000",
                "agent-0001"
            ]
        );
        assert_eq!(ranked[0].failures, 5);
        assert_eq!(ranked[19].name, "agent-0017");
        assert!(top_ranked(Tally::default()).is_empty());
    }

    /// Families are counted on an index: over all jobs the covering
    /// items_family index in its order (no sort), for one job its range of
    /// items_job_family (schema V11), also without a sort.
    #[test]
    fn families_are_counted_on_an_index() {
        let dlq = Dlq::open_in_memory().unwrap();
        let conn = dlq.conn().unwrap();
        let plan = |sql: &str, job: Option<&str>| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows: Vec<String> = stmt
                .query_map([job], |row| row.get::<_, String>(3))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            rows.join("; ")
        };
        let all = plan(family_count_sql(false), None);
        assert!(all.contains("COVERING INDEX items_family"), "{all}");
        assert!(!all.contains("TEMP B-TREE"), "{all}");
        let one = plan(family_count_sql(true), Some("j"));
        assert!(
            one.contains("COVERING INDEX items_job_family (job_id=?)"),
            "{one}"
        );
        assert!(!one.contains("TEMP B-TREE"), "{one}");
    }

    #[test]
    fn normalising_joins_what_only_numbers_tell_apart() {
        assert_eq!(
            normalise_message("timed out after 30s"),
            normalise_message("timed out after 31s")
        );
        assert_eq!(
            normalise_message("timed out after 30s"),
            "timed out after <duration>"
        );
        assert_eq!(
            normalise_message("cannot read /tmp/a/b.json: exit code 101"),
            "cannot read <path>: exit code <n>"
        );
        assert_eq!(
            normalise_message("session 4f1c2a9e-1234-4abc-8def-0123456789ab failed at 0xdeadbeef7"),
            "session <uuid> failed at <hex>"
        );
        assert_eq!(
            normalise_message("item_7 failed (attempt 3)"),
            "item_<n> failed (attempt <n>)"
        );
        assert_ne!(
            normalise_message("merge conflict"),
            normalise_message("permission denied")
        );
    }

    /// The SQL count used past MAX_TALLY_KEYS agrees with the scan's tally.
    #[test]
    fn agents_counted_by_sql_equal_the_scan() {
        let dlq = Dlq::open_in_memory().unwrap();
        dlq.write(|tx| {
            for n in 0..300 {
                // Agent k fails k % 37 + 1 times over the items.
                let agent = format!("agent-{}", n % 37 + (n % 5) * 100);
                let item = crate::model::DeadLetteredItem::from_json_str(&format!(
                    r#"{{"item_id": "i{n}", "item_data": {{}}, "first_attempt": "2025-01-01T00:00:00Z",
                        "last_attempt": "2025-01-01T00:00:00Z", "failure_count": 1,
                        "failure_history": [{{"attempt_number": 1, "timestamp": "2025-01-01T00:00:00Z",
                          "error_type": "Timeout", "error_message": "m", "agent_id": "{agent}",
                          "step_failed": "s{}", "duration_ms": 1}}],
                        "error_signature": "s", "worktree_artifacts": null,
                        "reprocess_eligible": true, "manual_review_required": false}}"#,
                    n % 3
                ))?;
                tx.add(if n % 2 == 0 { "a" } else { "b" }, None, &item)?;
            }
            Ok(())
        })
        .unwrap();
        let names = |ranked: &[Ranked]| -> Vec<(String, i64)> {
            ranked
                .iter()
                .map(|r| (r.name.clone(), r.failures))
                .collect()
        };
        for job in [None, Some("a")] {
            let analysis = dlq.analyze(job).unwrap();
            assert_eq!(
                names(&top_by_sql(&dlq, job, "agent_id").unwrap()),
                names(&analysis.top_agents)
            );
            assert_eq!(
                names(&top_by_sql(&dlq, job, "step_failed").unwrap()),
                names(&analysis.top_failing_steps)
            );
            assert_eq!(analysis.top_agents.len(), TOP);
        }
    }
}
