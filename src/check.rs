//! Threshold checks (what `dlq check` runs from cron, CI or monitoring):
//! which of a set of thresholds a database breaches now. This module owns
//! the rules (what each threshold counts, per job, and where its limit
//! lies); the store answers the counts, and a caller only says what to
//! check and shows the [`Breach`]es.

use crate::error::{Error, Result};
use crate::filter::Expr;
use crate::store::{Dlq, ListFilter, NewFamily, NewSignature, SignatureSample};
use crate::time::Timestamp;

/// What to check. Every threshold given is tested, whatever the others
/// found; one that is `None` (or false) is not.
#[derive(Clone, Debug, Default)]
pub struct Thresholds {
    /// Only this job (which must exist); every job when `None`.
    pub job_id: Option<String>,
    /// Only items matching this count toward `max_items` and `max_age`
    /// (arrivals and news count every item).
    pub filter: Option<Expr>,
    /// Breach: a job holds more than this many items.
    pub max_items: Option<u64>,
    /// Breach: a job's oldest item first failed more than this many
    /// seconds ago (exactly at the limit holds).
    pub max_age: Option<u64>,
    /// Breach: more than `limit` items arrived in a job within the last
    /// `per` seconds.
    pub max_new: Option<MaxNew>,
    /// Breach: a signature present now was not at this check's last run.
    pub new_signature: bool,
    /// Breach: a family with items now had none at this check's last run.
    pub new_family: bool,
    /// The name the news thresholds keep what they saw under (checks of
    /// different names each see their own news). Printable text, at most
    /// [`MAX_NAME_BYTES`] bytes; needed only with `new_signature` or
    /// `new_family`.
    pub name: String,
}

/// The arrivals threshold: more than `limit` items within `per` seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxNew {
    pub limit: u64,
    pub per: u64,
}

/// The longest check name.
pub const MAX_NAME_BYTES: usize = 200;

/// One threshold that does not hold.
#[derive(Clone, Debug, PartialEq)]
pub enum Breach {
    /// A job holds more items than the limit.
    MaxItems {
        job_id: String,
        items: u64,
        limit: u64,
    },
    /// A job's oldest item has been a dead letter longer than the limit.
    MaxAge {
        job_id: String,
        item_id: String,
        first_attempt: Timestamp,
        /// Its age in seconds.
        age: u64,
        limit: u64,
    },
    /// More items arrived in a job within the window than the limit.
    MaxNew {
        job_id: String,
        arrived: u64,
        per: u64,
        limit: u64,
    },
    /// A signature that was not there at the last run, with its newest
    /// item's error type and message.
    NewSignature {
        signature: NewSignature,
        sample: SignatureSample,
    },
    /// A family that had no items at the last run.
    NewFamily(NewFamily),
}

impl Breach {
    /// The threshold's name, as `dlq check --json` writes it.
    pub fn check(&self) -> &'static str {
        match self {
            Breach::MaxItems { .. } => "max_items",
            Breach::MaxAge { .. } => "max_age",
            Breach::MaxNew { .. } => "max_new",
            Breach::NewSignature { .. } => "new_signature",
            Breach::NewFamily(_) => "new_family",
        }
    }
}

/// What a check found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckReport {
    /// Every breach, in the order of [`Thresholds`]' fields.
    pub breaches: Vec<Breach>,
    /// `Some(n)` when this was the first run of the signature news under
    /// its name and scope: the `n` signatures present were recorded as the
    /// baseline, and none is reported new.
    pub signature_baseline: Option<usize>,
    /// The same for the family news.
    pub family_baseline: Option<usize>,
}

impl Thresholds {
    /// Whether the thresholds can be checked: at least one is given, the
    /// news thresholds have a printable name of at most
    /// [`MAX_NAME_BYTES`], and a filter has a threshold it narrows.
    pub fn validate(&self) -> Result<()> {
        let invalid = |why: &str| Err(Error::invalid_argument("check", why));
        if self.max_items.is_none()
            && self.max_age.is_none()
            && self.max_new.is_none()
            && !self.new_signature
            && !self.new_family
        {
            return invalid("no threshold to check");
        }
        if self.max_new.is_some_and(|m| m.per == 0) {
            return invalid("the arrivals window is empty");
        }
        // The name matters only to the news thresholds, which keep their
        // state under it.
        if self.new_signature || self.new_family {
            if self.name.is_empty() {
                return invalid("the check's name is empty");
            }
            if self.name.len() > MAX_NAME_BYTES {
                return invalid("the check's name is over 200 bytes");
            }
            // U+001F names each check's family state (store/check.rs).
            if self.name.chars().any(char::is_control) {
                return invalid("the check's name has a control character");
            }
        }
        if self.filter.is_some() && self.max_items.is_none() && self.max_age.is_none() {
            // Arrivals and news count every item: a filter that narrows
            // nothing must not look as if it did.
            return invalid("a filter narrows max_items and max_age only, and neither was given");
        }
        Ok(())
    }
}

impl Dlq {
    /// Tests every threshold given and returns what breaches. The news
    /// thresholds record what they saw under the check's name (so the
    /// handle must be writable for them); the others only read.
    pub fn check(&self, thresholds: &Thresholds) -> Result<CheckReport> {
        thresholds.validate()?;
        let job_id = thresholds.job_id.as_deref();
        if let Some(job) = job_id {
            self.require_job(job)?;
        }
        let now = self.age_now();
        let mut report = CheckReport::default();
        let only = |job: &str| ListFilter {
            job_id: Some(job.to_string()),
            expression: thresholds.filter.clone(),
            ..ListFilter::default()
        };
        let in_scope = |job: &str| job_id.is_none_or(|wanted| wanted == job);
        if let Some(limit) = thresholds.max_items {
            for job in self.jobs()? {
                if !in_scope(&job.job_id) {
                    continue;
                }
                let items = match thresholds.filter {
                    // The job's counter: no items read.
                    None => u64::try_from(job.item_count).unwrap_or(0),
                    Some(_) => self.count_matching(&only(&job.job_id))?,
                };
                if items > limit {
                    report.breaches.push(Breach::MaxItems {
                        job_id: job.job_id,
                        items,
                        limit,
                    });
                }
            }
        }
        if let Some(limit) = thresholds.max_age {
            let oldest = match thresholds.filter {
                None => self.oldest_items(job_id)?,
                Some(_) => {
                    let mut oldest = Vec::new();
                    for job in self.jobs()? {
                        if in_scope(&job.job_id) {
                            oldest.extend(self.oldest_matching(&only(&job.job_id))?);
                        }
                    }
                    oldest
                }
            };
            for item in oldest {
                // To the second: an item exactly at the limit holds.
                let age = (now.datetime() - item.first_attempt.datetime())
                    .num_seconds()
                    .max(0)
                    .unsigned_abs();
                if age > limit {
                    report.breaches.push(Breach::MaxAge {
                        job_id: item.job_id,
                        item_id: item.item_id,
                        first_attempt: item.first_attempt,
                        age,
                        limit,
                    });
                }
            }
        }
        if let Some(MaxNew { limit, per }) = thresholds.max_new {
            let since = now.minus_seconds(i64::try_from(per).unwrap_or(i64::MAX));
            for (job_id, arrived) in self.arrivals_since(since, job_id)? {
                if arrived > limit {
                    report.breaches.push(Breach::MaxNew {
                        job_id,
                        arrived,
                        per,
                        limit,
                    });
                }
            }
        }
        if thresholds.new_signature {
            let news = self.new_signatures(&thresholds.name, job_id)?;
            if news.baseline {
                report.signature_baseline = Some(news.recorded);
            }
            let signatures: Vec<String> =
                news.new.iter().map(|s| s.error_signature.clone()).collect();
            let samples = self.signature_samples(job_id, &signatures)?;
            report.breaches.extend(
                news.new
                    .into_iter()
                    .zip(samples)
                    .map(|(signature, sample)| Breach::NewSignature { signature, sample }),
            );
        }
        if thresholds.new_family {
            let news = self.new_families(&thresholds.name, job_id)?;
            if news.baseline {
                report.family_baseline = Some(news.recorded);
            }
            report
                .breaches
                .extend(news.new.into_iter().map(Breach::NewFamily));
        }
        Ok(report)
    }
}
