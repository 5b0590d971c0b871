//! `dlq families`: what keeps failing, one row per cause (the `families`
//! table), and mining the items stored before families existed.

use super::output::{column, note, plural, print_json, Column, Format, Kind, RowWriter};
use super::Context;
use anyhow::Result;
use serde_json::json;
use std::process::ExitCode;

/// What keeps failing: every failure family, largest first
///
/// A family is one cause: the items whose last attempt has the same error
/// type, crash site and error line once the parts that vary (numbers, ids,
/// paths, names, durations, output) are set aside. Each item gets its
/// family when it is written (add, import, merge, retry); the template
/// shows `<*>` where the family's failures differ. docs/families.md says
/// how families are found.
///
/// `dlq families merge INTO FROM...` puts causes a person knows are one
/// together; `dlq families split ID --by N` makes one family per value of
/// the template's Nth word (both kept when families are rebuilt).
/// `dlq families rebuild` mines
/// the items stored before families existed; `--all` mines every item
/// again, keeping ids.
///
/// Examples:
///   dlq families
///   dlq families show 3 --json
///   dlq list --filter 'family == 3'
///   dlq families merge 3 4
///   dlq families split 7 --by 4
///   dlq families rebuild
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment, args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// How many families at most (0 = all)
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Output format of the listing
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// List the families with items, largest first (the default)
    List {
        /// How many families at most (0 = all)
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Output format
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// One family: its template, error type, crash site, items, first and
    /// last seen, and a sample item
    Show {
        /// The family's id (the FAMILY column of `dlq list`)
        id: i64,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Merge families a person knows are one cause: the items of FROM move
    /// to INTO, and what the miner still finds in FROM goes to INTO too
    /// (a `families_merged` event; kept by `rebuild --all`)
    Merge {
        /// The family that stays
        into: i64,
        /// The families merged into it
        #[arg(required = true)]
        from: Vec<i64>,
        /// Also print what was done as JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// Split a family a person knows is several causes: one family per
    /// value of the template's word N (a `<*>`), the most common value
    /// keeping the id (a `families_split` event; kept by `rebuild --all`)
    Split {
        /// The family to split
        id: i64,
        /// The word to split at, counted from 1 in the template (`dlq
        /// families show ID` numbers the words that vary)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        by: u16,
        /// Also print what was done as JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// Mine a family for every item that has none (items stored before
    /// this version); resumable: an interrupted run goes on where it
    /// stopped. With --all, every item is mined again from scratch in one
    /// transaction, each new family keeping the id of the family that held
    /// most of its items, and merges kept
    Rebuild {
        /// Mine every item again, not only those without a family
        #[arg(long)]
        all: bool,
        /// Also print what was done as JSON on stdout
        #[arg(long)]
        json: bool,
    },
}

const COLUMNS: [Column; 7] = [
    column("id", "FAMILY", Kind::Count),
    column("items", "ITEMS", Kind::Count),
    column("error_type", "ERROR TYPE", Kind::ErrorType),
    column("template", "TEMPLATE", Kind::Message),
    column("site", "SITE", Kind::Text),
    column("last_seen", "LAST SEEN", Kind::Time),
    column("first_seen", "FIRST SEEN", Kind::Time),
];

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    match args.action {
        None => list(args.limit, args.format, ctx),
        Some(Action::List { limit, format }) => list(limit, format, ctx),
        Some(Action::Show { id, json }) => show(id, json, ctx),
        Some(Action::Merge { into, from, json }) => merge(into, &from, json, ctx),
        Some(Action::Split { id, by, json }) => split(id, usize::from(by), json, ctx),
        Some(Action::Rebuild { all, json }) => rebuild(all, json, ctx),
    }
}

fn list(limit: usize, format: Format, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    let families = dlq.families((limit > 0).then_some(limit))?;
    let mut out = RowWriter::new(format, &COLUMNS)?.table_columns(6);
    for family in &families.families {
        out.row(vec![
            json!(family.id),
            json!(family.items),
            json!(family.error_type),
            json!(family.template),
            json!(family.site),
            json!(family.last_seen),
            json!(family.first_seen),
        ])?;
    }
    out.finish("no families: no items yet")?;
    // What the rows do not hold, so that the listing adds up.
    let rest = families.more_items;
    if rest > 0 {
        note(&format!(
            "and {} in smaller families (--limit 0 lists all)",
            plural(rest, "more item")
        ));
    }
    if families.items_without_family > 0 {
        note(&format!(
            "{} without a family (stored before families, or with no attempt): dlq families rebuild mines them",
            plural(families.items_without_family, "item")
        ));
    }
    // Families mined with older rules: a failure written now may not join
    // the family its cause got then.
    let current = dlqlite::families::RULES;
    match dlq.families_rules()? {
        Some(version) if version == current => {}
        Some(version) if version > current => note(&format!(
            "these families were mined with newer rules (version {version}) than this dlq's (version {current})"
        )),
        older => note(&format!(
            "these families were mined with older rules ({}): dlq families rebuild --all mines every item again with the current ones (version {current}), keeping ids and merges",
            older.map_or("from before versions were recorded".to_string(), |v| format!("version {v}")),
        )),
    }
    Ok(ExitCode::SUCCESS)
}

fn show(id: i64, json: bool, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    let family = match dlq.family(id) {
        Err(e) if e.kind() == dlqlite::ErrorKind::InvalidInput => {
            anyhow::bail!("{e}")
        }
        other => other?,
    };
    if json {
        print_json(&family)?;
        return Ok(ExitCode::SUCCESS);
    }
    let text = dlqlite::text::for_terminal;
    println!(
        "family {}: {}",
        family.id,
        plural(u64::try_from(family.items).unwrap_or(0), "item")
    );
    if let Some(into) = family.merged_into {
        println!("merged into family {into} (its items are there: dlq families show {into})");
    }
    println!("template:   {}", text(&family.template));
    let varying: Vec<String> = family
        .varying_words
        .iter()
        .map(|(n, word)| format!("{n} {}", text(word)))
        .collect();
    if !varying.is_empty() {
        println!(
            "varies at: {} (dlq families split {} --by N)",
            varying.join(", "),
            family.id
        );
    }
    println!(
        "error type: {}",
        text(family.error_type.as_deref().unwrap_or("-"))
    );
    println!(
        "site:       {}",
        text(family.site.as_deref().unwrap_or("-"))
    );
    // As the tables show times (to the second; --relative as the flag says).
    let time = |t: &dlqlite::Timestamp| super::term::get().time(&t.to_string());
    println!("first seen: {}", time(&family.first_seen));
    println!("last seen:  {}", time(&family.last_seen));
    if let Some((job, item)) = &family.sample {
        println!(
            "sample:     dlq inspect {} --job-id {}",
            text(item),
            text(job)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn merge(into: i64, from: &[i64], json: bool, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing_to_write()?;
    let merge = match dlq.merge_families(into, from) {
        Err(e) if e.kind() == dlqlite::ErrorKind::InvalidInput => anyhow::bail!("{e}"),
        other => other?,
    };
    let merged: Vec<String> = merge
        .merged
        .iter()
        .map(|id| format!("family {id}"))
        .collect();
    note(&format!(
        "merged {} into family {}: {} moved",
        merged.join(", "),
        merge.into,
        plural(merge.items_moved, "item")
    ));
    if !merge.other_error_types.is_empty() {
        note(&format!(
            "warning: family {} now holds failures of another error type too ({}): the miner never joins two error types, so check that they are one cause",
            merge.into,
            merge.other_error_types.join(", ")
        ));
    }
    if json {
        print_json(&merge)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn split(id: i64, position: usize, json: bool, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing_to_write()?;
    let split = match dlq.split_family(id, position) {
        Err(e) if e.kind() == dlqlite::ErrorKind::InvalidInput => anyhow::bail!("{e}"),
        other => other?,
    };
    let parts: Vec<String> = split
        .parts
        .iter()
        .map(|p| {
            format!(
                "family {} ({}): {}",
                p.id,
                plural(p.items, "item"),
                dlqlite::text::for_terminal(&p.value)
            )
        })
        .collect();
    note(&format!(
        "split family {} at word {} into {}",
        split.family,
        split.position,
        parts.join("; ")
    ));
    if json {
        print_json(&split)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn rebuild(all: bool, json: bool, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing_to_write()?;
    if all {
        let report = dlq.rebuild_families(|_| {})?;
        note(&format!(
            "mined {} again into {} ({} kept their id, {} joined a family merged by hand, {} new; {} old retired into the family that took their items)",
            plural(report.items, "item"),
            if report.families == 1 {
                "1 family".to_string()
            } else {
                format!("{} families", report.families)
            },
            report.kept_ids,
            report.aliases,
            report.families - report.kept_ids - report.aliases,
            report.retired
        ));
        if json {
            print_json(&report)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mined = dlq.mine_missing_families(|_| {})?;
    note(&format!("mined a family for {}", plural(mined, "item")));
    if json {
        print_json(&json!({ "items_mined": mined }))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The family rows `dlq analyze` and `dlq stats` lead with: family first,
/// as `dlq families` lists them.
pub(super) fn print_family_table(families: &[dlqlite::store::FamilyGroup]) -> Result<()> {
    let mut table = super::output::Table::new(&[
        ("FAMILY", Kind::Count),
        ("ITEMS", Kind::Count),
        ("TYPE", Kind::ErrorType),
        ("CATEGORY", Kind::Text),
        ("TEMPLATE", Kind::Text),
    ]);
    for f in families {
        table.push(vec![
            f.family_id.to_string(),
            f.count.to_string(),
            f.error_type.clone().unwrap_or_default(),
            f.category
                .map(|c| c.as_str().to_string())
                .unwrap_or_default(),
            f.template.clone(),
        ]);
    }
    table.print()
}
