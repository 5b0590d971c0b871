//! `dlq categories`: the failure category of each error type (the
//! `error_categories` table), and changing it.

use super::output::{column, note, plural, print_json, Column, Format, Kind, RowWriter};
use super::Context;
use anyhow::Result;
use dlqlite::Category;
use serde_json::json;
use std::process::ExitCode;

/// Show or change which failure category each error type is in
///
/// An item's category is that of its last attempt's error type: transient
/// (retry with backoff), conditionally_recoverable (change something first),
/// permanent (a person must act) or unclassified (a type with no category).
/// It is a column of `dlq list` and of the item_summary view, a filter field
/// (`category == "transient"`), a `dlq retry --category`, an analyze
/// section, a metrics label and a retention key. A change applies at once
/// to every item, stored or to come, and is recorded as a `category_set`
/// event.
///
/// Examples:
///   dlq categories
///   dlq categories set QuotaExceeded transient
///   dlq categories set CommandFailed permanent --json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment, args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// Output format of the listing
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// List every error type with its category and how many items it
    /// classifies now (the default)
    List {
        /// Output format
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Put an error type in a category
    ///
    /// Example: dlq categories set QuotaExceeded transient
    #[command(verbatim_doc_comment)]
    Set {
        /// The error type, as attempts name it (Timeout, CommandFailed, a
        /// team's own QuotaExceeded, ...)
        error_type: String,
        /// transient, conditionally_recoverable, permanent or unclassified
        #[arg(value_parser = parse_category)]
        category: Category,
        /// Also print the change as JSON on stdout
        #[arg(long)]
        json: bool,
    },
}

/// A category by name, for clap: a misspelt one is a usage error that
/// names the closest category and lists them all.
pub fn parse_category(name: &str) -> std::result::Result<Category, String> {
    name.parse().map_err(|_| {
        let close = super::closest(name, Category::ALL.iter().map(|c| c.as_str()))
            .map(|c| format!("did you mean {c:?}? "))
            .unwrap_or_default();
        format!("{close}the categories are {}", Category::names())
    })
}

const COLUMNS: [Column; 3] = [
    column("error_type", "ERROR TYPE", Kind::ErrorType),
    column("category", "CATEGORY", Kind::Text),
    column("items", "ITEMS", Kind::Count),
];

pub fn run(args: Args, ctx: &Context) -> Result<ExitCode> {
    match args.action {
        None => list(args.format, ctx),
        Some(Action::List { format }) => list(format, ctx),
        Some(Action::Set {
            error_type,
            category,
            json,
        }) => set(&error_type, category, json, ctx),
    }
}

fn list(format: Format, ctx: &Context) -> Result<ExitCode> {
    let dlq = ctx.open_existing()?;
    let mut out = RowWriter::new(format, &COLUMNS)?;
    for rule in dlq.category_rules()? {
        out.row(vec![
            json!(rule.error_type),
            json!(rule.category),
            json!(rule.items),
        ])?;
    }
    out.finish("no error types")?;
    Ok(ExitCode::SUCCESS)
}

fn set(error_type: &str, category: Category, json: bool, ctx: &Context) -> Result<ExitCode> {
    // Not created: a mapping set in a new file at a mistyped --db would
    // never classify anything.
    let dlq = ctx.open_existing_to_write()?;
    let change = match dlq.set_category(error_type, category) {
        Err(e) if e.kind() == dlqlite::ErrorKind::InvalidInput => {
            return Err(super::Usage(e.to_string()).into())
        }
        other => other?,
    };
    let before = change.before.unwrap_or(Category::Unclassified);
    let items = plural(change.items, "item");
    if before == category {
        note(&format!("{error_type} was already {category} ({items})"));
    } else {
        note(&format!(
            "{error_type}: {before} -> {category} ({items} with it as last error)"
        ));
    }
    if json {
        print_json(&change)?;
    }
    Ok(ExitCode::SUCCESS)
}
