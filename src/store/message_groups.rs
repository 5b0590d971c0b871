//! Message groups for `analyze`: every item grouped by the normalised
//! message of its last attempt (see [`super::normalise_message`]), so the
//! groups cover every item, also when each item has a signature of its own.
//!
//! Built in two steps that read no row twice:
//! 1. During analyze's one scan of the attempts ([`LastAttempts::offer`]),
//!    each item keeps which of its attempts is last so far, by the rule
//!    of `counters::last_attempt_order` (latest timestamp, then highest
//!    attempt_number) applied in memory to a packed key, and that
//!    attempt's pattern. A message is normalised once:
//!    its pattern is cached by the message's hash.
//! 2. One pass over the items in signature order ([`group_items`], on the
//!    covering index `items_signature`) counts items per pattern and the
//!    distinct signatures in each, and the items of each signature (for
//!    the pattern groups: the largest are kept, the rest only counted).
//!
//! Memory: 16 bytes per item of the scanned range (per scanning thread),
//! plus the distinct patterns; never the messages themselves.

use super::analysis::FxBuild;
use super::columns::columns;
use super::normalise_message;
use super::sql::{vals, Conn};
use crate::error::Result;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// No pattern (the item has no attempt in the scan).
const NONE: u32 = u32::MAX;
/// Cached message hashes before the cache starts again: bounds its memory
/// when every message differs.
const CACHE_LIMIT: usize = 200_000;

/// An item's last attempt so far.
#[derive(Clone, Copy)]
struct Best {
    /// The attempt's timestamp in nanoseconds (see [`time_key`]).
    time: i64,
    attempt: u32,
    pattern: u32,
}

const EMPTY: Best = Best {
    time: i64::MIN,
    attempt: 0,
    pattern: NONE,
};

impl Best {
    fn beaten_by(&self, attempt: u32, time: i64) -> bool {
        self.pattern == NONE || (time, attempt) > (self.time, self.attempt)
    }
}

/// Per item: a vector over the row keys `first..` when they are dense, and
/// a map for the keys outside it (all of them when the keys are sparse,
/// after many deletes; or an item added while the scan ran).
struct Slots {
    first: i64,
    dense: Vec<Best>,
    sparse: HashMap<i64, Best, FxBuild>,
}

impl Slots {
    fn index(&self, key: i64) -> Option<usize> {
        usize::try_from(key.checked_sub(self.first)?)
            .ok()
            .filter(|index| *index < self.dense.len())
    }

    fn get_mut(&mut self, key: i64) -> &mut Best {
        match self.index(key) {
            Some(index) => &mut self.dense[index],
            None => self.sparse.entry(key).or_insert(EMPTY),
        }
    }

    fn get(&self, key: i64) -> Best {
        match self.index(key) {
            Some(index) => self.dense[index],
            None => self.sparse.get(&key).copied().unwrap_or(EMPTY),
        }
    }

    /// Renumbers the patterns (after their table was merged into another).
    fn remap(&mut self, to: &[u32]) {
        for best in self.dense.iter_mut().chain(self.sparse.values_mut()) {
            if best.pattern != NONE {
                best.pattern = to[best.pattern as usize];
            }
        }
    }
}

/// The distinct patterns seen, by id.
#[derive(Default)]
struct Patterns {
    names: Vec<String>,
    ids: HashMap<String, u32, FxBuild>,
}

impl Patterns {
    fn intern(&mut self, pattern: String) -> u32 {
        if let Some(id) = self.ids.get(&pattern) {
            return *id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(NONE - 1);
        self.names.push(pattern.clone());
        self.ids.insert(pattern, id);
        id
    }
}

/// The last attempt of each item seen by one scanning thread (`slots`), and
/// by the others merged in (`more`: each covers its own range of row keys
/// densely, so they are kept side by side, not copied into one).
pub(super) struct LastAttempts {
    slots: Slots,
    more: Vec<Slots>,
    patterns: Patterns,
    /// Message hash -> pattern id.
    cache: HashMap<u64, u32, FxBuild>,
}

impl LastAttempts {
    /// For items whose row keys lie in `first..=last`, of which there are
    /// `count`.
    pub(super) fn new(first: i64, last: i64, count: i64) -> Self {
        let span = last.saturating_sub(first).saturating_add(1).max(0);
        // Dense when at least a quarter of the range is live.
        let dense = if span <= count.saturating_mul(4).saturating_add(1024) {
            vec![EMPTY; usize::try_from(span).unwrap_or(0)]
        } else {
            Vec::new()
        };
        let slots = Slots {
            first,
            dense,
            sparse: HashMap::default(),
        };
        LastAttempts {
            slots,
            more: Vec::new(),
            patterns: Patterns::default(),
            cache: HashMap::default(),
        }
    }

    /// One attempt of item `key`.
    pub(super) fn offer(&mut self, key: i64, attempt: u32, timestamp: &[u8], message: &[u8]) {
        let time = time_key(timestamp);
        if !self.slots.get_mut(key).beaten_by(attempt, time) {
            return;
        }
        let pattern = self.pattern_of(message);
        *self.slots.get_mut(key) = Best {
            time,
            attempt,
            pattern,
        };
    }

    fn pattern_of(&mut self, message: &[u8]) -> u32 {
        let mut hasher = FxBuild::default().build_hasher();
        hasher.write(message);
        hasher.write_usize(message.len());
        let hash = hasher.finish();
        if let Some(id) = self.cache.get(&hash) {
            return *id;
        }
        if self.cache.len() >= CACHE_LIMIT {
            self.cache.clear();
        }
        let id = self
            .patterns
            .intern(normalise_message(&String::from_utf8_lossy(message)));
        self.cache.insert(hash, id);
        id
    }

    /// Takes in what another thread saw (of other attempts of the same
    /// items, or of other items).
    pub(super) fn merge(&mut self, other: LastAttempts) {
        let remap: Vec<u32> = other
            .patterns
            .names
            .into_iter()
            .map(|name| self.patterns.intern(name))
            .collect();
        for mut slots in std::iter::once(other.slots).chain(other.more) {
            slots.remap(&remap);
            self.more.push(slots);
        }
    }

    /// Item `key`'s last attempt over everything merged.
    fn get(&self, key: i64) -> Best {
        let mut best = self.slots.get(key);
        for slots in &self.more {
            let other = slots.get(key);
            if other.pattern != NONE && best.beaten_by(other.attempt, other.time) {
                best = other;
            }
        }
        best
    }
}

/// A group of items whose last messages normalise alike.
pub(super) struct Group {
    pub pattern: String,
    pub items: i64,
    pub signatures: usize,
    pub sample_signatures: Vec<String>,
    /// An item of the group, for its message.
    pub sample_item: i64,
}

/// The signatures of one job or all: how many items they hold, how many
/// there are, and the largest (most first, ties by signature).
pub(super) struct SignatureCounts {
    pub total: i64,
    pub distinct: usize,
    pub largest: Vec<(String, i64)>,
}

/// Keeps the `top` largest signatures as they come by (in signature order),
/// and counts them all: nothing grows with the number of signatures but
/// what is kept.
pub(super) struct Largest {
    kept: crate::rank::TopN<String>,
    total: i64,
    distinct: usize,
}

impl Largest {
    pub(super) fn new(top: usize) -> Self {
        Largest {
            kept: crate::rank::TopN::new(top),
            total: 0,
            distinct: 0,
        }
    }

    pub(super) fn offer(&mut self, signature: &[u8], count: i64) {
        self.total += count;
        self.distinct += 1;
        self.kept
            .offer(String::from_utf8_lossy(signature).as_ref(), count);
    }

    pub(super) fn finish(self) -> SignatureCounts {
        SignatureCounts {
            total: self.total,
            distinct: self.distinct,
            largest: self.kept.into_sorted(),
        }
    }
}

/// The pattern shown for items with no attempt at all.
pub(super) const NO_ATTEMPTS: &str = "(no attempts)";

columns! {
    /// The columns of `items` that [`group_items`] reads.
    mod signature_columns {
        ERROR_SIGNATURE = "error_signature",
        KEY = "id",
    }
}

/// Groups the items (of one job, or all) by the pattern of their last
/// attempt: one pass over the signature index, so each signature's items
/// come together and distinct signatures are counted without a set.
pub(super) fn group_items(
    conn: Conn<'_>,
    job_id: Option<&str>,
    mut last: LastAttempts,
    top_signatures: usize,
) -> Result<(Vec<Group>, SignatureCounts)> {
    use signature_columns as c;
    let mut largest = Largest::new(top_signatures);
    // Items of the current signature so far.
    let mut run: i64 = 0;
    let no_attempts = last.patterns.intern(NO_ATTEMPTS.to_string());
    let mut names = std::mem::take(&mut last.patterns.names);
    let mut groups: Vec<Option<Group>> = Vec::new();
    groups.resize_with(names.len(), || None);
    let _cache = conn.scan_cache(super::analysis::SCAN_CACHE_KIB)?;
    // SQLite is told the index that gives the signature order; PostgreSQL
    // picks its own plan for the ORDER BY.
    let indexed = conn.backend().indexed_by("items_signature");
    let sql = match job_id {
        Some(_) => format!(
            "SELECT {} FROM items{indexed} WHERE job_id = ?1 ORDER BY error_signature",
            c::LIST
        ),
        None => format!(
            "SELECT {} FROM items{indexed} WHERE CAST(?1 AS TEXT) IS NULL ORDER BY error_signature",
            c::LIST
        ),
    };
    let mut signature: Vec<u8> = Vec::new();
    // The patterns the current signature's items have shown so far
    // (nearly always one).
    let mut seen: Vec<u32> = Vec::new();
    conn.each(&sql, vals![job_id], |row| {
        let this = row.bytes(c::ERROR_SIGNATURE)?;
        let key = row.i64(c::KEY)?;
        if this != signature.as_slice() {
            if run > 0 {
                largest.offer(&signature, run);
            }
            run = 0;
            signature.clear();
            signature.extend_from_slice(this);
            seen.clear();
        }
        run += 1;
        let pattern = match last.get(key).pattern {
            NONE => no_attempts,
            id => id,
        };
        let group = groups[pattern as usize].get_or_insert_with(|| Group {
            pattern: std::mem::take(&mut names[pattern as usize]),
            items: 0,
            signatures: 0,
            sample_signatures: Vec::new(),
            sample_item: key,
        });
        group.items += 1;
        if !seen.contains(&pattern) {
            seen.push(pattern);
            group.signatures += 1;
            if group.sample_signatures.len() < 5 {
                group
                    .sample_signatures
                    .push(String::from_utf8_lossy(&signature).into_owned());
            }
        }
        Ok(())
    })?;
    if run > 0 {
        largest.offer(&signature, run);
    }
    Ok((groups.into_iter().flatten().collect(), largest.finish()))
}

/// An attempt's timestamp as nanoseconds since 1970, read from the stored
/// form (`2025-11-23T19:42:53.902113845Z`) digit by digit: the same order as
/// the text, without a date parser in the scan's inner loop. Text in
/// another form (only a hand edit makes one) orders by its digits.
fn time_key(text: &[u8]) -> i64 {
    let digits = |range: std::ops::Range<usize>| -> i64 {
        text.get(range)
            .map(|bytes| {
                bytes
                    .iter()
                    .filter(|b| b.is_ascii_digit())
                    .fold(0i64, |n, b| n * 10 + i64::from(b - b'0'))
            })
            .unwrap_or(0)
    };
    if text.len() == 39 {
        // A leap second's storage form: the last nanosecond of its minute
        // (see Timestamp::to_storage).
        let mut last = text[..29].to_vec();
        last.push(b'Z');
        return time_key(&last);
    }
    if text.len() != 30 {
        return digits(0..text.len().min(18));
    }
    let (year, month, day) = (digits(0..4), digits(5..7), digits(8..10));
    // Days from 1970-01-01 to the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + digits(11..13) * 3600 + digits(14..16) * 60 + digits(17..19);
    seconds
        .saturating_mul(1_000_000_000)
        .saturating_add(digits(20..29))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    #[test]
    fn time_keys_order_like_the_instants() {
        let samples = [
            "1970-01-01T00:00:00Z",
            "1999-12-31T23:59:59.999999999Z",
            "2000-02-29T12:00:00Z",
            "2025-11-23T19:42:53.902113845Z",
            "2025-11-23T19:42:53.902113846Z",
            "2100-03-01T00:00:00Z",
        ];
        let keys: Vec<i64> = samples
            .iter()
            .map(|s| time_key(Timestamp::parse(s).unwrap().to_storage().as_bytes()))
            .collect();
        for (text, key) in samples.iter().zip(&keys) {
            let t = Timestamp::parse(text).unwrap().datetime();
            assert_eq!(*key, t.timestamp_nanos_opt().unwrap(), "{text}");
        }
    }

    #[test]
    fn the_latest_time_wins_then_the_highest_attempt() {
        let mut last = LastAttempts::new(1, 3, 3);
        let t = |s: &str| Timestamp::parse(s).unwrap().to_storage();
        last.offer(1, 2, t("2025-01-01T00:00:00Z").as_bytes(), b"second 2");
        last.offer(1, 1, t("2025-06-01T00:00:00Z").as_bytes(), b"first /a");
        last.offer(1, 3, t("2025-01-02T00:00:00Z").as_bytes(), b"third 7");
        let best = last.get(1);
        assert_eq!(last.patterns.names[best.pattern as usize], "first <path>");
        // Same time: the higher attempt number.
        last.offer(1, 0, t("2025-06-01T00:00:00Z").as_bytes(), b"zero 1");
        last.offer(1, 4, t("2025-06-01T00:00:00Z").as_bytes(), b"four 9");
        let best = last.get(1);
        assert_eq!(last.patterns.names[best.pattern as usize], "four <n>");
        assert_eq!(last.get(2).pattern, NONE);
    }
}
