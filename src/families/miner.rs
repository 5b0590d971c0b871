//! Online template mining: every failure joins the family whose template
//! it matches best, and a family's template generalises, keeping its id,
//! when a failure that differs in a few words joins it.
//!
//! The search follows Drain (He et al., ICWS 2017): failures are first
//! split by what must be equal for two failures to be one cause (error
//! type, crash site, number of words), then by their first words in a
//! tree of fixed depth; only the families in one leaf are compared, word
//! by word. A failure joins the most similar family when at least
//! [`SIMILARITY`] of that family's constant words are equal to its own;
//! otherwise it starts a family. Words already variable in the template do
//! not count either way, so a family that has learned where its variables
//! are is not pushed away by them.
//!
//! Memory: a family holds at most [`super::key::MAX_WORDS`] words of at most
//! 64 bytes each (twice: what is compared and what is shown), so under
//! 7 KiB; a leaf keeps at most [`LEAF_FAMILIES`] families as candidates,
//! the most recently joined, comparing the [`LEAF_CANDIDATES`] most recent
//! first, which bounds the work per failure whatever the number of
//! families.

use super::key::{key_of, Key, Word};
use std::collections::HashMap;

/// The share of a template's constant words a failure must have to join
/// its family. One value for all data: it is not tuned per data set.
pub const SIMILARITY: f64 = 0.6;

/// How many leading words route a failure through the tree.
const ROUTING_WORDS: usize = 1;

/// Children of one tree node before further words share a `<*>` branch.
const MAX_CHILDREN: usize = 100;

/// Families compared first in one leaf: the most recently joined. The
/// older ones are compared only when none of these is similar enough.
pub const LEAF_CANDIDATES: usize = 64;

/// Families one leaf keeps as candidates at most, the most recently joined:
/// an older one stays a family but no longer attracts failures. This
/// bounds the work per failure (a failure that starts a family compares
/// them all).
pub const LEAF_FAMILIES: usize = 1024;

const WILDCARD: &str = "<*>";

/// One family as the miner knows it.
#[derive(Clone, Debug)]
pub struct Family {
    pub error_type: Option<Box<str>>,
    pub site: Option<Box<str>>,
    slots: Vec<Slot>,
    /// The tree's branches that lead to its leaf (decided by its first
    /// failure, kept as it generalises).
    route: Vec<Box<str>>,
    /// Failures that joined it in this miner.
    pub count: u64,
}

/// What a family's stored state holds ([`Family::state`]): enough to go on
/// mining it in another process.
#[derive(serde::Serialize, serde::Deserialize)]
struct State {
    route: Vec<Box<str>>,
    slots: Vec<Slot>,
}

/// One word position of a template.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Slot {
    /// What a failure's word must equal; `None` once the position varies.
    key: Option<Box<str>>,
    /// What the template shows: the word itself (`exact`), or what every
    /// value seen there began and ended with around `<*>`.
    prefix: Box<str>,
    suffix: Box<str>,
    exact: bool,
    /// A status: a failure whose word differs here never joins.
    pinned: bool,
    /// A position a person split the family at ([`Family::split_at`]):
    /// only a failure whose word here is exactly this value joins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    split: Option<Box<str>>,
}

impl Slot {
    fn new(word: &Word) -> Self {
        match word.key.as_deref() {
            Some(key) if key == &*word.raw => Slot {
                key: Some(word.raw.clone()),
                prefix: word.raw.clone(),
                suffix: "".into(),
                exact: true,
                pinned: word.pinned,
                split: None,
            },
            // A quoted name or command shows as it is until a second
            // value arrives: `Option::unwrap()` is not a detail to hide.
            None if super::key::is_quoted(&word.raw) => Slot {
                key: None,
                prefix: word.raw.clone(),
                suffix: "".into(),
                exact: true,
                pinned: false,
                split: None,
            },
            key => {
                // The wrappers around a bare variable still show: `(<*>)`.
                let raw: &str = &word.raw;
                let core = raw.trim_matches(super::key::is_wrapper);
                let start = raw.find(core).unwrap_or(0);
                let (prefix, suffix) = key
                    .and_then(|k| k.split_once(WILDCARD))
                    .unwrap_or((&raw[..start], &raw[start + core.len()..]));
                Slot {
                    key: word.key.clone(),
                    prefix: prefix.into(),
                    suffix: suffix.into(),
                    exact: false,
                    pinned: word.pinned,
                    split: None,
                }
            }
        }
    }

    /// Takes in a word of a failure that joined; true when the template
    /// changed.
    fn absorb(&mut self, word: &Word) -> bool {
        let mut changed = false;
        if self.key.is_some() && self.key != word.key {
            self.key = None;
            changed = true;
        }
        let raw: &str = &word.raw;
        if self.exact && &*self.prefix == raw {
            return changed;
        }
        let prefix = common_prefix(&self.prefix, raw);
        let rest = &raw[prefix.len()..];
        let old_suffix: &str = if self.exact {
            &self.prefix[prefix.len()..]
        } else {
            &self.suffix
        };
        let suffix = common_suffix(old_suffix, rest);
        let (prefix, suffix) = (prefix.to_string(), suffix.to_string());
        changed |= self.exact || *self.prefix != *prefix || *self.suffix != *suffix;
        self.prefix = prefix.into();
        self.suffix = suffix.into();
        self.exact = false;
        changed
    }

    fn shown(&self, out: &mut String) {
        out.push_str(&self.prefix);
        if !self.exact {
            out.push_str(WILDCARD);
            out.push_str(&self.suffix);
        }
    }
}

/// The longest common prefix, ending where a word part ends (a variable
/// shows as `test_<*>`, not `test_user_lo<*>`).
fn common_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let mut end = 0;
    for ((i, x), y) in a.char_indices().zip(b.chars()) {
        if x != y {
            break;
        }
        end = i + x.len_utf8();
    }
    if end < a.len().min(b.len()) || end < a.len() {
        // Cut back to the last separator, so no part of a value shows.
        let cut = a[..end]
            .rfind(|c: char| !c.is_alphanumeric())
            .map_or(0, |i| i + 1);
        end = cut;
    }
    &a[..end]
}

fn common_suffix<'a>(a: &'a str, b: &str) -> &'a str {
    let mut start = a.len();
    for ((i, x), y) in a.char_indices().rev().zip(b.chars().rev()) {
        if x != y {
            break;
        }
        start = i;
    }
    if start > 0 {
        let cut = a[start..]
            .find(|c: char| !c.is_alphanumeric())
            .map_or(a.len(), |i| start + i);
        start = cut;
    }
    &a[start..]
}

impl Family {
    /// The family's state as JSON, to store beside its template.
    pub fn state(&self) -> String {
        serde_json::to_string(&State {
            route: self.route.clone(),
            slots: self.slots.clone(),
        })
        .unwrap_or_default()
    }

    /// A family from a stored [`Family::state`].
    pub fn from_state(
        error_type: Option<&str>,
        site: Option<&str>,
        state: &str,
    ) -> Result<Family, serde_json::Error> {
        let State { route, slots } = serde_json::from_str(state)?;
        Ok(Family {
            error_type: error_type.map(Into::into),
            site: site.map(Into::into),
            slots,
            route,
            count: 0,
        })
    }

    /// The template: the words, with `<*>` where failures differ.
    pub fn template(&self) -> String {
        let mut out = String::new();
        for (i, slot) in self.slots.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            slot.shown(&mut out);
        }
        out
    }

    /// Whether the word at `position` (from 0) is a variable a person may
    /// split the family at: it varies, and is not split already.
    pub fn is_variable_at(&self, position: usize) -> bool {
        self.slots
            .get(position)
            .is_some_and(|slot| slot.key.is_none() && slot.split.is_none())
    }

    /// This family, narrowed to the failures whose word at `position`
    /// (from 0) is `value` (as written): what `dlq families split` makes
    /// of a family for each value. The position shows the value, and no
    /// failure with another value there ever joins.
    pub fn split_at(&self, position: usize, value: &str) -> Family {
        let mut family = self.clone();
        if let Some(slot) = family.slots.get_mut(position) {
            slot.key = None;
            slot.prefix = value.into();
            slot.suffix = "".into();
            slot.exact = true;
            slot.split = Some(value.into());
        }
        family
    }

    /// The words a person may split the family at: (position from 1, the
    /// word as the template shows it), for each [`Family::is_variable_at`].
    pub fn varying_words(&self) -> Vec<(usize, String)> {
        (0..self.slots.len())
            .filter(|&at| self.is_variable_at(at))
            .map(|at| {
                let mut shown = String::new();
                self.slots[at].shown(&mut shown);
                (at + 1, shown)
            })
            .collect()
    }

    /// Whether `other` sits where this family does in a miner's tree (the
    /// same part and route): only then can one replace the other in place.
    pub fn same_place(&self, other: &Family) -> bool {
        self.error_type == other.error_type
            && self.site == other.site
            && self.slots.len() == other.slots.len()
            && self.route == other.route
    }

    /// The [`part`] it falls in.
    pub fn part(&self) -> String {
        part(
            self.error_type.as_deref(),
            self.site.as_deref(),
            self.slots.len(),
        )
    }

    /// How many words its template has.
    pub fn word_count(&self) -> usize {
        self.slots.len()
    }

    /// Whether a person split this family ([`Family::split_at`]).
    pub fn is_split(&self) -> bool {
        self.slots.iter().any(|slot| slot.split.is_some())
    }

    /// The share of this family's constant words that `words` has.
    fn similarity(&self, words: &[Word]) -> f64 {
        let mut constant = 0usize;
        let mut equal = 0usize;
        for (slot, word) in self.slots.iter().zip(words) {
            if let Some(value) = &slot.split {
                if *word.raw != **value {
                    return 0.0;
                }
                continue;
            }
            match &slot.key {
                Some(key) => {
                    constant += 1;
                    if word.key.as_ref() == Some(key) {
                        equal += 1;
                    } else if slot.pinned || word.pinned {
                        return 0.0;
                    }
                }
                // A pinned word (a status, the step that failed) names the
                // cause: it never joins a position where the family's
                // failures differ, or which family it joins would depend
                // on the order failures came in.
                None if word.pinned => return 0.0,
                None => {}
            }
        }
        if constant == 0 {
            1.0
        } else {
            equal as f64 / constant as f64
        }
    }

    fn variables(&self) -> usize {
        self.slots.iter().filter(|s| s.key.is_none()).count()
    }
}

/// The part a family falls in, as stored in `families.part`: its number
/// of words, error type and crash site, joined by U+001F (an absent one
/// empty). Only families of one part can share a failure, so a process
/// loads those of the parts it mines into. Two parts with one text (an
/// absent error type and an empty one) are still kept apart by the miner.
pub fn part(error_type: Option<&str>, site: Option<&str>, words: usize) -> String {
    format!(
        "{words}\u{1f}{}\u{1f}{}",
        error_type.unwrap_or(""),
        site.unwrap_or("")
    )
}

/// [`part`] of a failure: its error type and key.
pub fn part_of(error_type: Option<&str>, key: &Key) -> String {
    let error_type = error_type.map(|t| super::key::cut_to(t, super::key::MAX_NAME_BYTES));
    part(error_type, key.site.as_deref(), key.words.len())
}

/// What must be equal for two failures to share a family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Partition {
    error_type: Option<Box<str>>,
    site: Option<Box<str>>,
    words: usize,
}

#[derive(Default, Debug)]
struct Node {
    children: HashMap<Box<str>, Node>,
    /// At the leaves: candidate families, most recently joined last.
    families: Vec<usize>,
}

/// Where a failure went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assigned {
    /// The family's index in this miner ([`Miner::family`]).
    pub family: usize,
    /// The failure started the family.
    pub new: bool,
    /// The family's template changed (it generalised).
    pub generalised: bool,
}

/// The miner: families and the tree that finds them.
#[derive(Default, Debug)]
pub struct Miner {
    roots: HashMap<Partition, Node>,
    families: Vec<Family>,
}

impl Miner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Assigns a failure to a family, starting one when none matches.
    pub fn assign(
        &mut self,
        error_type: Option<&str>,
        message: &str,
        stack_trace: Option<&str>,
    ) -> Assigned {
        let key = key_of(message, stack_trace);
        self.assign_key(error_type, key)
    }

    /// [`Miner::assign`] of a key taken already ([`key_of`]): for a
    /// caller that needs its [`part`] first.
    pub fn assign_key(&mut self, error_type: Option<&str>, key: Key) -> Assigned {
        let error_type = error_type.map(|t| super::key::cut_to(t, super::key::MAX_NAME_BYTES));
        let Key { words, site } = key;
        let partition = Partition {
            error_type: error_type.map(Into::into),
            site: site.map(Into::into),
            words: words.len(),
        };
        let mut node = self.roots.entry(partition.clone()).or_default();
        let mut route = Vec::with_capacity(ROUTING_WORDS);
        for word in words.iter().take(ROUTING_WORDS) {
            let branch: &str = match word.key.as_deref() {
                Some(key) if !key.contains(WILDCARD) => key,
                _ => WILDCARD,
            };
            let branch = if node.children.contains_key(branch) || node.children.len() < MAX_CHILDREN
            {
                branch
            } else {
                WILDCARD
            };
            route.push(Box::<str>::from(branch));
            node = node.children.entry(branch.into()).or_default();
        }
        let families = &mut self.families;
        // The most similar of the leaf's most recent families; when none
        // is similar enough, of the older ones (so a process that read the
        // families in another order than one that saw them join still
        // finds an old cause).
        let leaf = &node.families;
        let recent = leaf.len().saturating_sub(LEAF_CANDIDATES);
        let best_in = |from: usize, to: usize| {
            leaf[from..to]
                .iter()
                .enumerate()
                .map(|(at, &f)| (from + at, f, families[f].similarity(&words)))
                .filter(|(_, _, similarity)| *similarity >= SIMILARITY)
                .max_by(|a, b| {
                    a.2.total_cmp(&b.2)
                        .then(families[a.1].variables().cmp(&families[b.1].variables()))
                })
        };
        let best = best_in(recent, leaf.len()).or_else(|| best_in(0, recent));
        match best {
            Some((at, family, _)) => {
                let joined = &mut families[family];
                joined.count += 1;
                let mut generalised = false;
                for (slot, word) in joined.slots.iter_mut().zip(&words) {
                    generalised |= slot.absorb(word);
                }
                // Most recently joined last: the first to stay a candidate.
                node.families.remove(at);
                node.families.push(family);
                Assigned {
                    family,
                    new: false,
                    generalised,
                }
            }
            None => {
                let family = families.len();
                families.push(Family {
                    error_type: partition.error_type,
                    site: partition.site,
                    slots: words.iter().map(Slot::new).collect(),
                    route,
                    count: 1,
                });
                if node.families.len() >= LEAF_FAMILIES {
                    node.families.remove(0);
                }
                node.families.push(family);
                Assigned {
                    family,
                    new: true,
                    generalised: false,
                }
            }
        }
    }

    /// Takes in a family mined elsewhere (another process, an earlier
    /// run: [`Family::from_state`]) as a candidate for the failures that
    /// follow; returns its index here.
    pub fn restore(&mut self, family: Family) -> usize {
        let partition = Partition {
            error_type: family.error_type.clone(),
            site: family.site.clone(),
            words: family.slots.len(),
        };
        let mut node = self.roots.entry(partition).or_default();
        for branch in &family.route {
            node = node.children.entry(branch.clone()).or_default();
        }
        let index = self.families.len();
        self.families.push(family);
        if node.families.len() >= LEAF_FAMILIES {
            node.families.remove(0);
        }
        node.families.push(index);
        index
    }

    /// Replaces the template of the family at `index` with a newer state of
    /// it (another process generalised it).
    pub fn update(&mut self, index: usize, family: Family) {
        let count = self.families[index].count;
        self.families[index] = Family { count, ..family };
    }

    /// The family at `index` (from [`Assigned::family`]).
    pub fn family(&self, index: usize) -> &Family {
        &self.families[index]
    }

    /// Every family, in the order they started.
    pub fn families(&self) -> &[Family] {
        &self.families
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(miner: &mut Miner, message: &str) -> usize {
        miner.assign(None, message, None).family
    }

    #[test]
    fn a_restored_family_goes_on_where_it_stopped() {
        let mut first = Miner::new();
        let a = first.assign(Some("T"), "tests failed: test_a after 3 ms", None);
        first.assign(Some("T"), "tests failed: test_b after 9 ms", None);
        let family = first.family(a.family);
        let restored = Family::from_state(Some("T"), None, &family.state()).unwrap();
        assert_eq!(restored.template(), family.template());
        let mut second = Miner::new();
        let index = second.restore(restored);
        let next = second.assign(Some("T"), "tests failed: test_c after 1 ms", None);
        assert_eq!(next.family, index);
        assert!(!next.new && !next.generalised);
    }

    #[test]
    fn a_split_family_takes_only_its_value() {
        let mut miner = Miner::new();
        let whole = family(&mut miner, "deploy to host-1 failed");
        assert_eq!(family(&mut miner, "deploy to host-2 failed"), whole);
        let original = miner.family(whole).clone();
        assert!(original.is_variable_at(2) && !original.is_variable_at(0));
        let mut split = Miner::new();
        let one = split.restore(original.split_at(2, "host-1"));
        let two = split.restore(original.split_at(2, "host-2"));
        assert!(split.family(one).is_split());
        assert_eq!(split.family(two).template(), "deploy to host-2 failed");
        assert!(!split.family(two).is_variable_at(2));
        assert_eq!(family(&mut split, "deploy to host-2 failed"), two);
        assert_eq!(family(&mut split, "deploy to host-1 failed"), one);
        // A value neither holds starts a family; the parts stay as they were.
        let three = family(&mut split, "deploy to host-3 failed");
        assert!(three != one && three != two);
        assert_eq!(split.family(one).template(), "deploy to host-1 failed");
        // The split survives the stored state.
        let state = split.family(two).state();
        let back = Family::from_state(None, None, &state).unwrap();
        assert!(back.is_split());
    }

    #[test]
    fn identical_failures_share_a_family() {
        let mut miner = Miner::new();
        let a = family(&mut miner, "connection refused");
        assert_eq!(family(&mut miner, "connection refused"), a);
    }

    #[test]
    fn variables_generalise_in_place() {
        let mut miner = Miner::new();
        let a = family(
            &mut miner,
            "tests failed: test_login after 12 ms on branch feature/x",
        );
        let b = miner.assign(
            None,
            "tests failed: test_logout after 99 ms on branch main",
            None,
        );
        assert_eq!(b.family, a);
        assert!(b.generalised);
        assert_eq!(
            miner.family(a).template(),
            "tests failed: test_<*> after <*> ms on branch <*>"
        );
    }

    #[test]
    fn error_types_and_sites_keep_families_apart() {
        let mut miner = Miner::new();
        let a = miner.assign(Some("Timeout"), "gave up", None).family;
        let b = miner.assign(Some("Network"), "gave up", None).family;
        assert_ne!(a, b);
        let at = |file: &str| format!("boom\n  at run ({file}:1:2)");
        let c = family(&mut miner, &at("a.js"));
        let d = family(&mut miner, &at("b.js"));
        assert_ne!(c, d);
        assert_eq!(family(&mut miner, &at("a.js")), c);
    }

    #[test]
    fn templates_keep_labels_and_show_no_values() {
        let mut miner = Miner::new();
        let a = family(
            &mut miner,
            "PacketResponder 1 for block blk_-42 terminating",
        );
        family(&mut miner, "PacketResponder 2 for block blk_77 terminating");
        assert_eq!(
            miner.family(a).template(),
            "PacketResponder <*> for block blk_<*> terminating"
        );
    }

    #[test]
    fn a_full_leaf_still_assigns_every_failure() {
        let mut miner = Miner::new();
        for n in 0..1_000 {
            // Three different words each: no two of these are one family.
            let message = format!("same start w{} x{} y{} z", n * 7 % 13, n, n * 3);
            family(&mut miner, &message);
        }
        assert!(miner.families().len() <= 1_000);
        assert_eq!(miner.families().iter().map(|f| f.count).sum::<u64>(), 1_000);
    }
}

/// The near-misses a DLQ must keep apart, and the variables it must not
/// split on, each seen many times over (a family that has generalised is
/// where a near-miss would slip in).
#[cfg(test)]
mod grouping {
    use super::*;

    fn assign(miner: &mut Miner, error_type: &str, message: &str) -> usize {
        miner.assign(Some(error_type), message, None).family
    }

    /// Each of `a` and `b` over many variable values: every `a` in one
    /// family, every `b` in one other.
    fn stay_apart(error_type: &str, a: impl Fn(usize) -> String, b: impl Fn(usize) -> String) {
        let mut miner = Miner::new();
        let (mut fa, mut fb) = (Vec::new(), Vec::new());
        for n in 0..40 {
            fa.push(assign(&mut miner, error_type, &a(n)));
            fb.push(assign(&mut miner, error_type, &b(n)));
        }
        fa.dedup();
        fb.dedup();
        assert_eq!(fa.len(), 1, "{} split: {:?}", a(0), fa);
        assert_eq!(fb.len(), 1, "{} split: {:?}", b(0), fb);
        assert_ne!(fa, fb, "{} and {} merged", a(0), b(0));
    }

    const PACKAGES: &[&str] = &["left-pad", "@types/node", "react", "zod", "lodash.merge"];
    const TESTS: &[&str] = &[
        "test_login",
        "should render header",
        "parses_empty",
        "TestRetry",
    ];
    const BRANCHES: &[&str] = &["main", "feature/add-auth", "fix/issue-12", "release-2.1"];

    #[test]
    fn a_huge_error_type_is_cut_and_still_one_family() {
        let mut miner = Miner::new();
        let long = "E".repeat(1 << 20);
        let a = miner.assign(Some(&long), "boom at start", None);
        let b = miner.assign(Some(&long), "boom at start", None);
        assert_eq!(a.family, b.family);
        let family = miner.family(a.family);
        assert!(family.error_type.as_deref().unwrap().len() <= super::super::key::MAX_NAME_BYTES);
        assert!(family.part().len() < 400);
    }

    #[test]
    fn npm_test_and_npm_install_stay_apart() {
        stay_apart(
            "CommandFailed",
            |n| {
                format!(
                    "npm test failed: {} failed, {} passed\n  ✕ {}",
                    n % 7 + 1,
                    n * 3,
                    TESTS[n % 4]
                )
            },
            |n| {
                format!(
                    "npm install failed: {} failed, {} passed\nnpm ERR! 404 {}",
                    n % 7 + 1,
                    n * 3,
                    PACKAGES[n % 5]
                )
            },
        );
    }

    #[test]
    fn bare_npm_test_and_npm_install_stay_apart() {
        // Nothing but the headline, or the headline and output with no
        // error line of its own: two of three words are equal.
        stay_apart(
            "CommandFailed",
            |_| "npm test failed".into(),
            |_| "npm install failed".into(),
        );
        stay_apart(
            "CommandFailed",
            |n| format!("npm test failed: {} failed, {} passed", n % 7 + 1, n * 3),
            |n| format!("npm install failed: {} failed, {} passed", n % 7 + 1, n * 3),
        );
        stay_apart(
            "CommandFailed",
            |n| format!("git push failed\nremote: counting objects {n}"),
            |n| format!("git pull failed\nremote: counting objects {n}"),
        );
    }

    #[test]
    fn a_value_before_failed_further_into_the_line_generalises() {
        for (template, values) in [
            (
                "git push origin {} failed: exit code 1",
                ["main", "develop", "release"],
            ),
            (
                "pip install {} failed with exit code 1",
                ["numpy", "requests", "flask"],
            ),
            ("ssh login as {} failed", ["alice", "bob", "carol"]),
        ] {
            let mut miner = Miner::new();
            let families: std::collections::BTreeSet<usize> = values
                .iter()
                .map(|v| assign(&mut miner, "CommandFailed", &template.replace("{}", v)))
                .collect();
            assert_eq!(families.len(), 1, "{template}: {families:?}");
        }
    }

    #[test]
    fn steps_that_failed_part_the_same_way_in_any_order() {
        let messages = [
            "make test-unit failed",
            "make test-e2e failed",
            "make build failed",
            "make install failed",
        ];
        let partition = |order: &[usize]| {
            let mut miner = Miner::new();
            let mut family = [0usize; 4];
            for &i in order {
                family[i] = assign(&mut miner, "CommandFailed", messages[i]);
            }
            // Which messages share a family, whatever the ids.
            (0..4)
                .map(|i| {
                    (0..4)
                        .filter(|&j| family[j] == family[i])
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        };
        let forward = partition(&[0, 1, 2, 3]);
        assert_eq!(forward, partition(&[3, 2, 1, 0]));
        assert_eq!(forward, partition(&[2, 0, 3, 1]));
        assert_eq!(forward[0], [0, 1], "{forward:?}");
        assert_eq!(forward[2], [2]);
        assert_eq!(forward[3], [3]);
    }

    #[test]
    fn a_test_name_before_failed_still_generalises() {
        let mut miner = Miner::new();
        let families: std::collections::BTreeSet<usize> = TESTS
            .iter()
            .chain(["TestParse", "tests::queue::drains", "login-flow"].iter())
            .filter(|name| !name.contains(' '))
            .map(|name| assign(&mut miner, "TestFailure", &format!("test {name} failed")))
            .collect();
        assert_eq!(families.len(), 1, "{families:?}");
    }

    #[test]
    fn one_panic_message_at_two_call_sites_stays_two() {
        let panic = |file: &'static str| {
            move |n: usize| {
                format!(
                    "thread 'worker-{n}' panicked at {file}:{}:5:\ncalled `Option::unwrap()` on a `None` value\nnote: run with `RUST_BACKTRACE=1`",
                    40 + n % 3
                )
            }
        };
        stay_apart("Panic", panic("src/queue.rs"), panic("src/config.rs"));
    }

    #[test]
    fn the_reasons_an_api_body_quotes_stay_apart() {
        // One status (429), one client, one line: the JSON body's message
        // and type are what tell a rate limit from an exhausted quota.
        let body = |message: &str, kind: &str, n: usize| {
            format!(
                "openai.RateLimitError: Error code: 429 - {{'error': {{'message': '{message}', \
                 'type': '{kind}', 'param': None, 'code': '{kind}'}}, 'request_id': 'req_{n:08x}'}}"
            )
        };
        stay_apart(
            "AgentError",
            |n| {
                body(
                    &format!("Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used {n}, Requested 812. Please try again in {n}ms."),
                    "rate_limit_exceeded",
                    n,
                )
            },
            |n| {
                body(
                    "You exceeded your current quota, please check your plan and billing details.",
                    "insufficient_quota",
                    n,
                )
            },
        );
    }

    #[test]
    fn the_text_an_exception_was_raised_with_tells_causes_apart() {
        // pip's line for a certificate it could not verify: why is in the
        // quoted text SSLCertVerificationError was raised with.
        let pip = |reason: &str, n: usize| {
            let package = PACKAGES[n % PACKAGES.len()];
            format!(
                "Could not fetch URL https://pypi.org/simple/{package}/: There was a problem \
                 confirming the ssl certificate: HTTPSConnectionPool(host='pypi.org', port=443): \
                 Max retries exceeded with url: /simple/{package}/ (Caused by \
                 SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] \
                 certificate verify failed: {reason} (_ssl.c:{n})'))) - skipping"
            )
        };
        stay_apart(
            "CommandFailed",
            |n| pip("unable to get local issuer certificate", n),
            |n| pip("certificate has expired", n),
        );
    }

    #[test]
    fn the_root_cause_at_the_end_of_a_long_line_counts() {
        // Go wraps an error in its callers' context: the cause is last,
        // past the words a key keeps from the start of a line.
        let wrapped = |cause: &str, n: usize| {
            let context: Vec<String> = (0..50).map(|i| format!("step{i}")).collect();
            format!(
                "error: {} while syncing {}: dial tcp 10.0.{n}.7:5432: {cause}",
                context.join(" "),
                BRANCHES[n % BRANCHES.len()]
            )
        };
        stay_apart(
            "NetworkError",
            |n| wrapped("connect: connection refused", n),
            |n| wrapped("i/o timeout after deadline", n),
        );
    }

    #[test]
    fn http_502_and_503_from_one_host_stay_apart() {
        stay_apart(
            "NetworkError",
            |n| format!("POST https://api.example.com/v1/jobs/{n} returned HTTP 502 after {n}ms"),
            |n| format!("POST https://api.example.com/v1/jobs/{n} returned HTTP 503 after {n}ms"),
        );
    }

    #[test]
    fn http_statuses_after_other_words_stay_apart() {
        stay_apart(
            "NetworkError",
            |n| {
                format!("HTTP request failed: 502 Bad Gateway (PUT https://api.acme.dev/a/{n}.tar)")
            },
            |n| {
                format!(
                    "HTTP request failed: 503 Service Unavailable (PUT https://api.acme.dev/a/{n}.tar)"
                )
            },
        );
    }

    #[test]
    fn the_exception_in_the_output_beats_a_log_line_that_says_error() {
        let message = |n: usize, exception: &str| {
            format!(
                "Command `python run.py {n}` failed: exit code 1\n\
                 2025-01-0{} ERROR app.client: GET http://api:8000/v1/jobs/{n} failed\n{exception}",
                n % 9 + 1
            )
        };
        stay_apart(
            "NetworkError",
            |n| {
                message(n, "requests.exceptions.ConnectionError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))")
            },
            |n| {
                message(n, &format!("requests.exceptions.ConnectionError: HTTPConnectionPool(host='api', port=8000): Max retries exceeded with url: /v1/jobs/{n} (Caused by NewConnectionError('<conn at 0x7f{n:x}>: Failed to establish a new connection: [Errno 111] Connection refused'))"))
            },
        );
    }

    #[test]
    fn the_exception_of_a_trace_kept_apart_names_the_cause() {
        let trace = |exception: &str| {
            format!(
                "Traceback (most recent call last):\n  File \"/app/jobs.py\", line 12, in run\n    handle(item)\n{exception}"
            )
        };
        let mut miner = Miner::new();
        let mut families = std::collections::BTreeSet::new();
        for n in 0..20 {
            let message = format!("Command `python jobs.py {n}` failed: exit code 1");
            let a = miner.assign(
                Some("CommandFailed"),
                &message,
                Some(&trace(&format!("KeyError: 'user_{n}'"))),
            );
            let b = miner.assign(
                Some("CommandFailed"),
                &message,
                Some(&trace(&format!("ValueError: bad row {n}"))),
            );
            assert_ne!(a.family, b.family, "{message}");
            families.insert(a.family);
            families.insert(b.family);
        }
        assert_eq!(families.len(), 2, "{families:?}");
    }

    #[test]
    fn a_timeout_is_one_family_whatever_the_command() {
        const COMMANDS: &[&str] = &[
            "cargo test --workspace",
            "npm test",
            "docker build -t app .",
            "make check",
            "cargo clippy --all-targets -- -D warnings",
            "npm run build",
        ];
        stay_apart(
            "Timeout",
            |n| {
                format!(
                    "command timed out after {}s: {}\nlast output:\n{n} lines",
                    [300, 900][n % 2],
                    COMMANDS[n % COMMANDS.len()]
                )
            },
            |n| {
                format!(
                    "Command failed with exit code 2: {}",
                    COMMANDS[n * 5 % COMMANDS.len()]
                )
            },
        );
        // The near miss: one command line, exit code 1 against 2.
        stay_apart(
            "CommandFailed",
            |n| format!("Command failed with exit code 1: {}", COMMANDS[n % 6]),
            |n| format!("Command failed with exit code 2: {}", COMMANDS[n % 6]),
        );
    }

    #[test]
    fn a_diff_from_one_check_and_a_script_failing_silently_stay_apart() {
        stay_apart(
            "CommandFailed",
            |n| {
                format!(
                    "Command `cargo fmt --all -- --check` failed: process exited with exit code 1\nDiff in /app/src/{}.rs:{n}:\n-        let {} = 1;\n+        let {} =",
                    BRANCHES[n % 4].replace('/', "_"),
                    TESTS[n % 4].replace(' ', "_"),
                    TESTS[n % 4].replace(' ', "_")
                )
            },
            |n| {
                let mut message = String::from(
                    "Command `./scripts/ci-check.sh` failed: process exited with exit code 1",
                );
                for step in 0..n % 3 {
                    message.push_str(&format!("\n==> step {step}\nloaded {n} rows"));
                }
                message
            },
        );
    }

    #[test]
    fn exit_codes_1_and_2_stay_apart() {
        let command = |code: u32| {
            move |n: usize| {
                format!(
                    "Command `./scripts/check.sh --branch {}` failed: process exited with exit code {code}\nchecked {n} files",
                    BRANCHES[n % 4]
                )
            }
        };
        stay_apart("CommandFailed", command(1), command(2));
    }

    #[test]
    fn statuses_written_as_reports_stay_apart() {
        // curl, a proxy's log, requests and httpx name the status without
        // the word HTTP before it; make names a recipe's exit status.
        for (a, b) in [
            (
                "curl: (22) The requested URL returned error: 502",
                "curl: (22) The requested URL returned error: 503",
            ),
            ("Request failed: 502", "Request failed: 503"),
            ("upstream returned 502", "upstream returned 503"),
            (
                "502 Server Error: Bad Gateway for url: https://api.x.dev/v1/",
                "503 Server Error: Service Unavailable for url: https://api.x.dev/v1/",
            ),
            (
                "Server error '502 Bad Gateway' for url 'https://api.x.dev/v1/'",
                "Server error '503 Service Unavailable' for url 'https://api.x.dev/v1/'",
            ),
            (
                "make: *** [Makefile:12: build] Error 1",
                "make: *** [Makefile:12: build] Error 2",
            ),
        ] {
            // A request id after the line varies with each failure.
            stay_apart(
                "NetworkError",
                |n| format!("{a}\nrequest id req_{n:06x}"),
                |n| format!("{b}\nrequest id req_{n:06x}"),
            );
        }
    }

    #[test]
    fn a_step_named_with_words_between_stays_apart() {
        for (a, b) in [
            ("the lint step failed", "the test step failed"),
            ("cargo test has failed", "cargo build has failed"),
            ("npm test command failed", "npm install command failed"),
        ] {
            stay_apart("CommandFailed", |_| a.into(), |_| b.into());
        }
    }

    #[test]
    fn a_measure_on_a_line_about_http_is_a_value() {
        let mut miner = Miner::new();
        let families: std::collections::BTreeSet<usize> = [250, 310, 404, 599]
            .iter()
            .map(|ms| {
                let message = format!("HTTP request timed out after {ms} ms");
                assign(&mut miner, "Timeout", &message)
            })
            .collect();
        assert_eq!(families.len(), 1, "{families:?}");
    }

    #[test]
    fn an_id_before_words_like_a_reason_stays_a_value() {
        let mut miner = Miner::new();
        let families: std::collections::BTreeSet<usize> = [123, 377, 120, 598]
            .iter()
            .map(|id| assign(&mut miner, "NotFound", &format!("User {id} Not Found")))
            .collect();
        assert_eq!(families.len(), 1, "{families:?}");
    }

    #[test]
    fn one_crash_under_two_runners_is_one_family() {
        // A Go test's panic: `make test` exits 2, `go test` exits 1; the
        // test runner's FAIL line comes first.
        let go = |runner: &str, code: u32, test: &str, n: usize| {
            format!(
                "Command `{runner}` failed: process exited with exit code {code}\n\
                 === RUN   {test}\n--- FAIL: {test} (0.0{}s)\n\
                 panic: runtime error: index out of range [{n}] with length {n} [recovered]\n\
                 goroutine {} [running]:\n\
                 testing.tRunner.func1.2({{0x5d8c40, 0xc0000{n:x}}})\n\
                 /usr/local/go/src/testing/testing.go:1545 +0x238\n\
                 example.com/app/internal/text.splitLines(...)\n\
                 /app/internal/text/lines.go:{} +0x1d",
                n % 9,
                n + 6,
                20 + n % 4
            )
        };
        let mut miner = Miner::new();
        let families: std::collections::BTreeSet<usize> = (0..20)
            .map(|n| {
                let message = if n % 2 == 0 {
                    go("make test", 2, "TestRefreshInvoice", n)
                } else {
                    go("go test ./...", 1, "TestFetchProfile", n)
                };
                assign(&mut miner, "CommandFailed", &message)
            })
            .collect();
        assert_eq!(families.len(), 1, "{families:?}");
        // A Python import error through pytest (its own trace, an `E`
        // gutter) and through a worker: one family.
        let pytest =
            "Command `python -m pytest tests/api` failed: process exited with exit code 4\n\
             ImportError while loading conftest '/app/tests/conftest.py'.\n\
             tests/conftest.py:4: in <module>\n    from app import create_app\n\
             app/__init__.py:3: in <module>\n    from flask import Flask\n\
             E   ImportError: cannot import name 'url_quote' from 'werkzeug.urls' (/x/urls.py)";
        let worker = "Command `python -m app.worker` failed: process exited with exit code 1\n\
             Traceback (most recent call last):\n  File \"/app/app/worker.py\", line 5, in <module>\n\
             from app import create_app\n  File \"/app/app/__init__.py\", line 3, in <module>\n\
             from flask import Flask\n\
             ImportError: cannot import name 'url_quote' from 'werkzeug.urls' (/y/urls.py)";
        let mut miner = Miner::new();
        assert_eq!(
            assign(&mut miner, "CommandFailed", pytest),
            assign(&mut miner, "CommandFailed", worker)
        );
    }

    #[test]
    fn two_panics_under_one_runner_stay_apart() {
        let go = |panic: &'static str, file: &'static str| {
            move |n: usize| {
                format!(
                    "Command `go test ./...` failed: process exited with exit code 1\n\
                     --- FAIL: TestX{n} (0.01s)\npanic: {panic} [recovered]\n\
                     goroutine {n} [running]:\nexample.com/app.f(...)\n/app/{file}:{n} +0x1d"
                )
            }
        };
        stay_apart(
            "CommandFailed",
            go(
                "runtime error: index out of range [3] with length 3",
                "lines.go",
            ),
            go(
                "runtime error: invalid memory address or nil pointer dereference",
                "lines.go",
            ),
        );
    }

    #[test]
    fn variables_never_change_a_family() {
        // Numbers, paths, ids, hosts, test names, branches, package names,
        // durations, colour and line ends vary; the cause does not.
        let mut miner = Miner::new();
        let mut families = Vec::new();
        for n in 0..200usize {
            let message = format!(
                "{}Test {} failed on branch {} after {}.{}s{}\r\nassertion failed at /tmp/run-{n}/src/lib.rs:{}\nrequest id 7f3a{n:08x} package {}",
                if n % 3 == 0 { "\x1b[31m" } else { "" },
                TESTS[n % 4].replace(' ', "_"),
                BRANCHES[n % 4],
                n,
                n % 10,
                if n % 3 == 0 { "\x1b[0m" } else { "" },
                n * 7,
                PACKAGES[n % 5],
            );
            families.push(assign(&mut miner, "TestFailed", &message));
        }
        families.dedup();
        assert_eq!(
            families.len(),
            1,
            "{:?}",
            miner
                .families()
                .iter()
                .map(Family::template)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_crash_site_from_the_stack_trace_field_counts() {
        let mut miner = Miner::new();
        let trace = |file: &str, n: usize| {
            format!("Traceback (most recent call last):\n  File \"/app/{file}\", line {n}, in handle\n    x = d[k]\nKeyError: 'k{n}'")
        };
        let a = miner
            .assign(
                Some("KeyError"),
                "KeyError: 'user_id'",
                Some(&trace("orders.py", 3)),
            )
            .family;
        let b = miner
            .assign(
                Some("KeyError"),
                "KeyError: 'tenant'",
                Some(&trace("config.py", 3)),
            )
            .family;
        let a2 = miner
            .assign(
                Some("KeyError"),
                "KeyError: 'sku'",
                Some(&trace("orders.py", 9)),
            )
            .family;
        assert_ne!(a, b);
        assert_eq!(a, a2);
    }
}
