//! Ranking counts: the `n` most counted keys, most first, ties by key. One
//! rule for every ranked list dlq shows (`analyze`'s top agents, steps,
//! signatures and message groups, the `dlq stats` table, the `dlq import`
//! summary), so they all order alike.
//!
//! [`TopN`] keeps the best `n` of a stream in a heap of `n` entries: with a
//! signature or an agent per item there are a million keys, and neither
//! collecting nor sorting them all is needed to show twenty.
//! [`first_n_by`] does the same for a vector already in memory, for values
//! ranked by a rule of their own.

use std::borrow::Borrow;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// The ranking order: the larger count first, then the smaller key.
pub fn ranking<K: Ord>(a: &(K, i64), b: &(K, i64)) -> Ordering {
    b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0))
}

/// The `n` first of `items` in `order`, in that order, without sorting the
/// rest.
pub fn first_n_by<T>(mut items: Vec<T>, n: usize, order: impl Fn(&T, &T) -> Ordering) -> Vec<T> {
    if n == 0 {
        return Vec::new();
    }
    if items.len() > n {
        items.select_nth_unstable_by(n - 1, &order);
        items.truncate(n);
    }
    items.sort_by(order);
    items
}

/// The `n` most counted of `counts`, most first, ties by key.
pub fn top_n<K: Ord>(counts: impl IntoIterator<Item = (K, i64)>, n: usize) -> Vec<(K, i64)> {
    let mut top = TopN::new(n);
    for (key, count) in counts {
        top.offer_owned(key, count);
    }
    top.into_sorted()
}

/// The best `n` (key, count) pairs offered so far; see the module docs.
pub struct TopN<K> {
    n: usize,
    /// A min-heap: the worst kept is on top, the first to go.
    kept: BinaryHeap<Reverse<Entry<K>>>,
}

/// Orders as ranks go: greater is better (more counted, then smaller key).
#[derive(PartialEq, Eq)]
struct Entry<K> {
    count: i64,
    key: K,
}

impl<K: Ord> Ord for Entry<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.count
            .cmp(&other.count)
            .then_with(|| other.key.cmp(&self.key))
    }
}

impl<K: Ord> PartialOrd for Entry<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord> TopN<K> {
    /// Keeps at most `n` (none when `n` is 0).
    pub fn new(n: usize) -> Self {
        TopN {
            n,
            kept: BinaryHeap::with_capacity(n.min(1024) + 1),
        }
    }

    /// Whether (key, count) would be kept now.
    fn beats_worst<Q>(&self, key: &Q, count: i64) -> bool
    where
        K: Borrow<Q>,
        Q: ?Sized + Ord,
    {
        if self.n == 0 {
            return false;
        }
        match self.kept.peek() {
            Some(Reverse(worst)) if self.kept.len() >= self.n => {
                count > worst.count || (count == worst.count && key < worst.key.borrow())
            }
            _ => true,
        }
    }

    fn keep(&mut self, key: K, count: i64) {
        if self.kept.len() >= self.n {
            self.kept.pop();
        }
        self.kept.push(Reverse(Entry { count, key }));
    }

    /// Offers a borrowed key; it is copied only when kept.
    pub fn offer<Q>(&mut self, key: &Q, count: i64)
    where
        K: Borrow<Q>,
        Q: ?Sized + Ord + ToOwned<Owned = K>,
    {
        if self.beats_worst(key, count) {
            self.keep(key.to_owned(), count);
        }
    }

    /// Offers a key already owned.
    pub fn offer_owned(&mut self, key: K, count: i64) {
        if self.beats_worst(&key, count) {
            self.keep(key, count);
        }
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// The kept pairs, most counted first, ties by key.
    pub fn into_sorted(self) -> Vec<(K, i64)> {
        // A min-heap's ascending order is the worst first.
        let mut sorted: Vec<(K, i64)> = self
            .kept
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(entry)| (entry.key, entry.count))
            .collect();
        sorted.sort_by(ranking);
        sorted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: sort everything, take n.
    fn by_sorting(counts: &[(String, i64)], n: usize) -> Vec<(String, i64)> {
        let mut all = counts.to_vec();
        all.sort_by(ranking);
        all.truncate(n);
        all
    }

    #[test]
    fn keeps_what_sorting_everything_would_keep() {
        // Many ties, keys offered in every order.
        let mut counts = Vec::new();
        let mut x: u64 = 7;
        for i in 0..500 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            counts.push((
                format!("k{:03}", (x >> 33) % 400),
                ((x >> 20) % 6) as i64 + i % 2,
            ));
        }
        counts.sort();
        counts.dedup_by(|a, b| a.0 == b.0);
        for n in [0, 1, 3, 20, 399, 1000] {
            let expected = by_sorting(&counts, n);
            assert_eq!(top_n(counts.clone(), n), expected, "owned, n = {n}");
            let mut reversed = TopN::new(n);
            for (key, count) in counts.iter().rev() {
                reversed.offer(key.as_str(), *count);
            }
            assert_eq!(reversed.len(), expected.len());
            assert_eq!(
                reversed.into_sorted(),
                expected,
                "borrowed, reversed, n = {n}"
            );
            let firsts = first_n_by(counts.clone(), n, ranking);
            assert_eq!(firsts, expected, "first_n_by, n = {n}");
        }
    }

    #[test]
    fn ties_go_to_the_smaller_key_whatever_the_order() {
        let mut top = TopN::new(2);
        for key in ["c", "a", "d", "b"] {
            top.offer(key, 5);
        }
        assert_eq!(
            top.into_sorted(),
            [("a".to_string(), 5), ("b".to_string(), 5)]
        );
    }
}
