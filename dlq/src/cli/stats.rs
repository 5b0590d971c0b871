//! `dlq stats`: the legacy DLQ statistics, for one job or all; the table
//! leads with the largest failure families.

use super::output::{Kind, Table};
use super::Context;
use anyhow::Result;
use dlqlite::rank::{ranking, TopN};
use dlqlite::store::{FamilyGroups, StatsHead, StatsPart};
use std::io::Write;
use std::process::ExitCode;

/// Show statistics: totals, families, flags, oldest and newest, signatures and types
///
/// Totals, the 10 largest failure families (items, error type, category,
/// template: see `dlq families`), eligibility, manual review, oldest and newest item, items per
/// error signature (with a representative message), items per error type of
/// their last attempt, and the average failure count.
///
/// With --json and a job: one object with the legacy keys (total_items,
/// eligible_for_reprocess, requiring_manual_review, oldest_item, newest_item,
/// error_categories) plus error_types and average_failure_count. Without a
/// job: the same keys over all jobs, plus `jobs`: job_id -> that job's
/// object.
///
/// Example: dlq stats --job-id mapreduce-20251123_194253 --json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Only this job
    #[arg(long, visible_alias = "workflow-id")]
    job_id: Option<String>,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    show(ctx, args.job_id.as_deref(), args.json)
}

/// Prints the statistics of one job or of all (shared with `dlq show`). Both
/// forms are written as the store hands the figures over: nothing grows
/// with the number of signatures but the table's top 20.
pub fn show(ctx: &Context, job_id: Option<&str>, json: bool) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    if json {
        let mut writer = JsonStats::new(std::io::BufWriter::new(std::io::stdout().lock()));
        dlq.stats_stream(job_id, true, |part| {
            writer
                .part(part)
                .map_err(|e| dlqlite::Error::io("stdout", e))
        })?;
        writer.finish()?;
    } else {
        let mut table = TableStats::default();
        let mut jobs = 0;
        dlq.stats_stream(job_id, false, |part| {
            table.part(part);
            Ok(())
        })?;
        if job_id.is_none() {
            jobs = dlq.jobs()?.len();
        }
        let title = match job_id {
            Some(job) => dlqlite::text::for_terminal(job).into_owned(),
            None => format!("all jobs ({jobs})"),
        };
        let families = dlq.top_families(job_id, TABLE_FAMILIES)?;
        table.print(&title, &dlq, job_id, &families)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes [`StatsPart`]s as the pretty JSON of [`dlqlite::store::Stats`] (the same text
/// serde_json's pretty printer gives the collected value), with `jobs`
/// nested in the all-jobs object.
struct JsonStats<W: Write> {
    out: W,
    /// Per open statistics object: its head, and which of its maps is open.
    frames: Vec<(StatsHead, Section)>,
    /// Per open JSON object: whether it has an entry yet.
    objects: Vec<bool>,
    /// Whether the outermost object is of all jobs (and so has `jobs`).
    all_jobs: bool,
}

/// Where a statistics object is, in its key order.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Section {
    Categories,
    Types,
    /// Past the average.
    Done,
    Jobs,
}

impl<W: Write> JsonStats<W> {
    fn new(out: W) -> Self {
        JsonStats {
            out,
            frames: Vec::new(),
            objects: Vec::new(),
            all_jobs: false,
        }
    }

    /// Starts an entry of the innermost object: `"key": `.
    fn key(&mut self, key: &str) -> std::io::Result<()> {
        let depth = self.objects.len();
        if let Some(has_entries) = self.objects.last_mut() {
            self.out
                .write_all(if *has_entries { b",\n" } else { b"\n" })?;
            *has_entries = true;
        }
        for _ in 0..depth {
            self.out.write_all(b"  ")?;
        }
        let key = serde_json::to_string(key)?;
        self.out
            .write_all(dlqlite::text::json_for_terminal(&key).as_bytes())?;
        self.out.write_all(b": ")
    }

    fn field(&mut self, key: &str, value: &impl serde::Serialize) -> std::io::Result<()> {
        self.key(key)?;
        let value = serde_json::to_string(value)?;
        self.out
            .write_all(dlqlite::text::json_for_terminal(&value).as_bytes())?;
        Ok(())
    }

    fn open(&mut self, key: Option<&str>) -> std::io::Result<()> {
        if let Some(key) = key {
            self.key(key)?;
        }
        self.objects.push(false);
        self.out.write_all(b"{")
    }

    fn close(&mut self) -> std::io::Result<()> {
        let had_entries = self.objects.pop().unwrap_or(false);
        if had_entries {
            self.out.write_all(b"\n")?;
            for _ in 0..self.objects.len() {
                self.out.write_all(b"  ")?;
            }
        }
        self.out.write_all(b"}")
    }

    /// Moves the innermost statistics object on to `to`: from its
    /// signatures to its error types, past them (writing the average), or
    /// into its `jobs` object; a map it had no entry for is still written.
    fn advance(&mut self, to: Section) -> std::io::Result<()> {
        while let Some(&(_, section)) = self.frames.last() {
            if section >= to {
                return Ok(());
            }
            match section {
                Section::Categories => {
                    self.close()?;
                    self.open(Some("error_types"))?;
                    self.set_section(Section::Types);
                }
                Section::Types => {
                    self.close()?;
                    let average = self.frames.last().map(|f| f.0.average_failure_count);
                    self.field("average_failure_count", &average.unwrap_or(0.0))?;
                    self.set_section(Section::Done);
                }
                Section::Done => {
                    self.open(Some("jobs"))?;
                    self.set_section(Section::Jobs);
                }
                Section::Jobs => return Ok(()),
            }
        }
        Ok(())
    }

    fn set_section(&mut self, section: Section) {
        if let Some(frame) = self.frames.last_mut() {
            frame.1 = section;
        }
    }

    fn part(&mut self, part: StatsPart<'_>) -> std::io::Result<()> {
        match part {
            StatsPart::Head { job_id, head } => {
                match job_id.filter(|_| !self.frames.is_empty()) {
                    Some(job) => {
                        self.advance(Section::Jobs)?;
                        self.open(Some(job))?;
                    }
                    None => {
                        self.all_jobs = job_id.is_none();
                        self.open(None)?
                    }
                }
                self.field("total_items", &head.total_items)?;
                self.field("eligible_for_reprocess", &head.eligible_for_reprocess)?;
                self.field("requiring_manual_review", &head.requiring_manual_review)?;
                self.field("oldest_item", &head.oldest_item)?;
                self.field("newest_item", &head.newest_item)?;
                self.open(Some("error_categories"))?;
                self.frames.push((head.clone(), Section::Categories));
            }
            StatsPart::Signature(key, n) => self.field(key, &n)?,
            StatsPart::ErrorType(key, n) => {
                self.advance(Section::Types)?;
                self.field(key, &n)?;
            }
            StatsPart::Close => {
                // The all-jobs object always has `jobs`, even with none.
                let all_jobs = self.frames.len() == 1 && self.all_jobs;
                self.advance(if all_jobs {
                    Section::Jobs
                } else {
                    Section::Done
                })?;
                if all_jobs {
                    self.close()?;
                }
                self.frames.pop();
                self.close()?;
            }
        }
        Ok(())
    }

    fn finish(mut self) -> std::io::Result<()> {
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

/// The largest families, and a line for what they leave out, so that the
/// table adds up to the items.
fn print_families(families: &FamilyGroups) -> Result<()> {
    super::families::print_family_table(&families.listed)?;
    let mut rest = Vec::new();
    if families.omitted.groups > 0 {
        rest.push(format!(
            "{} item(s) in {} smaller famil{}",
            families.omitted.items,
            families.omitted.groups,
            if families.omitted.groups == 1 {
                "y"
            } else {
                "ies"
            }
        ));
    }
    if families.items_without_family > 0 {
        rest.push(format!(
            "{} item(s) without a family (dlq families rebuild mines them)",
            families.items_without_family
        ));
    }
    if !rest.is_empty() {
        println!("... and {}: `dlq families` lists them", rest.join(", "));
    }
    Ok(())
}

/// A time as tables show it, or "-".
fn time_cell(time: Option<dlqlite::Timestamp>) -> String {
    time.map(|t| super::term::get().time(&t.to_string()))
        .unwrap_or_else(|| "-".to_string())
}

/// How many families the table lists (`dlq families` lists them all).
const TABLE_FAMILIES: usize = 10;

/// How many signatures the table lists (the JSON lists all).
const TABLE_SIGNATURES: usize = 20;

/// The table form: the head, every last error type, and the 20 largest
/// signatures with how many more there are.
struct TableStats {
    head: StatsHead,
    error_types: Vec<(String, i64)>,
    /// The largest signatures so far (at most TABLE_SIGNATURES).
    top: TopN<String>,
    signatures: usize,
}

impl Default for TableStats {
    fn default() -> Self {
        TableStats {
            head: StatsHead::default(),
            error_types: Vec::new(),
            top: TopN::new(TABLE_SIGNATURES),
            signatures: 0,
        }
    }
}

impl TableStats {
    fn part(&mut self, part: StatsPart<'_>) {
        match part {
            StatsPart::Head { head, .. } => self.head = head.clone(),
            StatsPart::Signature(key, n) => {
                self.signatures += 1;
                self.top.offer(key, n);
            }
            StatsPart::ErrorType(key, n) => self.error_types.push((key.to_string(), n)),
            StatsPart::Close => {}
        }
    }

    fn print(
        mut self,
        title: &str,
        dlq: &dlqlite::Dlq,
        job_id: Option<&str>,
        families: &FamilyGroups,
    ) -> Result<()> {
        let stats = &self.head;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{title}")?;
        writeln!(out, "  total items:             {}", stats.total_items)?;
        writeln!(
            out,
            "  eligible for reprocess:  {}",
            stats.eligible_for_reprocess
        )?;
        writeln!(
            out,
            "  requiring manual review: {}",
            stats.requiring_manual_review
        )?;
        writeln!(
            out,
            "  oldest item:             {}",
            time_cell(stats.oldest_item)
        )?;
        writeln!(
            out,
            "  newest item:             {}",
            time_cell(stats.newest_item)
        )?;
        writeln!(
            out,
            "  average failure count:   {}",
            stats.average_failure_count
        )?;
        if !self.error_types.is_empty() {
            self.error_types.sort_by(ranking);
            let listed: Vec<String> = self
                .error_types
                .iter()
                .map(|(t, n)| format!("{t} {n}"))
                .collect();
            let line = format!("  last error types:        {}", listed.join(", "));
            // Error types come from the database: escaped.
            writeln!(
                out,
                "{}",
                super::term::get().fit(&dlqlite::text::for_terminal(&line))
            )?;
        }
        // The first section: what keeps failing, one row per cause.
        if !families.listed.is_empty() {
            writeln!(out)?;
            writeln!(out, "Failure families (items, by last attempt)")?;
            out.flush()?;
            print_families(families)?;
        }
        if !self.top.is_empty() {
            writeln!(out)?;
            writeln!(out, "Error signatures")?;
            drop(out);
            let more = self.signatures - self.top.len();
            let top = self.top.into_sorted();
            let signatures: Vec<String> = top.iter().map(|(s, _)| s.clone()).collect();
            let samples = dlq.signature_samples(job_id, &signatures)?;
            let mut table = Table::new(&[
                ("ITEMS", Kind::Count),
                ("SIGNATURE", Kind::Text),
                ("TYPE", Kind::ErrorType),
                ("MESSAGE", Kind::Message),
            ]);
            for ((signature, count), sample) in top.into_iter().zip(samples) {
                table.push(vec![
                    count.to_string(),
                    signature,
                    sample.error_type.unwrap_or_default(),
                    sample.message.unwrap_or_default(),
                ]);
            }
            table.print()?;
            if more > 0 {
                println!("... and {more} more signature(s): `dlq stats --json` lists them all");
            }
        }
        Ok(())
    }
}
