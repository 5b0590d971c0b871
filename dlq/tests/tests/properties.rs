//! Property tests (quickcheck): the item model round-trips, the timestamp
//! storage form sorts like the instants, and the filter language never
//! panics and never lets text become SQL.

use dlqlite::model::DeadLetteredItem;
use dlqlite::Timestamp;
use quickcheck::{Arbitrary, Gen, QuickCheck};

fn text(g: &mut Gen) -> String {
    // Plain, escaped and unicode characters alike.
    let pool = [
        'a',
        'Z',
        '0',
        ' ',
        '"',
        '\\',
        '\n',
        '\t',
        '/',
        '{',
        '}',
        'é',
        '✓',
        '\u{1F600}',
        '\u{0}',
    ];
    let len = usize::arbitrary(g) % 12;
    (0..len).map(|_| *g.choose(&pool).unwrap_or(&'a')).collect()
}

fn timestamp(g: &mut Gen) -> String {
    let seconds = 1_500_000_000 + (u32::arbitrary(g) % 400_000_000) as i64;
    let nanos = match u8::arbitrary(g) % 4 {
        0 => 0,
        1 => (u32::arbitrary(g) % 1000) * 1_000_000,
        2 => (u32::arbitrary(g) % 1_000_000) * 1000,
        _ => u32::arbitrary(g) % 1_000_000_000,
    };
    let time = chrono::DateTime::from_timestamp(seconds, nanos).unwrap_or_default();
    match u8::arbitrary(g) % 3 {
        0 => time.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        1 => time
            .with_timezone(&chrono::FixedOffset::west_opt(7 * 3600).unwrap())
            .to_rfc3339(),
        _ => time.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
    }
}

fn optional(
    g: &mut Gen,
    object: &mut serde_json::Map<String, serde_json::Value>,
    key: &str,
    value: serde_json::Value,
) {
    match u8::arbitrary(g) % 3 {
        0 => {}
        1 => {
            object.insert(key.into(), serde_json::Value::Null);
        }
        _ => {
            object.insert(key.into(), value);
        }
    }
}

/// A random legacy item as JSON text, in any of the shapes the files took.
#[derive(Clone, Debug)]
struct LegacyItem(String);

impl Arbitrary for LegacyItem {
    fn arbitrary(g: &mut Gen) -> Self {
        let types = [
            serde_json::json!("Timeout"),
            serde_json::json!({"CommandFailed": {"exit_code": i32::arbitrary(g)}}),
            serde_json::json!({"CommandFailed": {"command": text(g), "exit_code": null}}),
            serde_json::json!({"PermissionError": null}),
            serde_json::json!(text(g) + "X"),
        ];
        let mut history = Vec::new();
        for n in 0..(usize::arbitrary(g) % 4) {
            let mut entry = serde_json::Map::new();
            entry.insert("attempt_number".into(), (n as u32 + 1).into());
            entry.insert("timestamp".into(), timestamp(g).into());
            entry.insert(
                "error_type".into(),
                g.choose(&types).cloned().unwrap_or_default(),
            );
            entry.insert("error_message".into(), text(g).into());
            {
                let value = serde_json::json!([text(g), text(g)]);
                optional(g, &mut entry, "error_context", value);
            }
            {
                let value = text(g).into();
                optional(g, &mut entry, "stack_trace", value);
            }
            entry.insert("agent_id".into(), text(g).into());
            entry.insert("step_failed".into(), text(g).into());
            entry.insert("duration_ms".into(), u32::arbitrary(g).into());
            {
                let value = text(g).into();
                optional(g, &mut entry, "json_log_location", value);
            }
            if bool::arbitrary(g) {
                entry.insert(
                    format!("x_{}", u8::arbitrary(g)),
                    serde_json::json!([text(g), 1.5, null]),
                );
            }
            history.push(serde_json::Value::Object(entry));
        }
        let mut item = serde_json::Map::new();
        item.insert(
            "item_id".into(),
            format!("i{}", text(g).replace('\0', "")).into(),
        );
        item.insert(
            "item_data".into(),
            serde_json::json!({"path": text(g), "n": i64::arbitrary(g), "f": 0.25, "nested": [text(g), {"k": bool::arbitrary(g)}]}),
        );
        item.insert("first_attempt".into(), timestamp(g).into());
        item.insert("last_attempt".into(), timestamp(g).into());
        item.insert("failure_count".into(), (u32::arbitrary(g) % 10).into());
        item.insert("failure_history".into(), serde_json::Value::Array(history));
        item.insert("error_signature".into(), text(g).into());
        let mut artifacts = serde_json::Map::new();
        artifacts.insert("worktree_path".into(), text(g).into());
        artifacts.insert("branch_name".into(), text(g).into());
        {
            let value = text(g).into();
            optional(g, &mut artifacts, "uncommitted_changes", value);
        }
        {
            let value = text(g).into();
            optional(g, &mut artifacts, "error_logs", value);
        }
        {
            let value = serde_json::Value::Object(artifacts);
            optional(g, &mut item, "worktree_artifacts", value);
        }
        item.insert("reprocess_eligible".into(), bool::arbitrary(g).into());
        item.insert("manual_review_required".into(), bool::arbitrary(g).into());
        if bool::arbitrary(g) {
            item.insert("unknown_field".into(), serde_json::json!({"kept": text(g)}));
        }
        let value = serde_json::Value::Object(item);
        LegacyItem(if bool::arbitrary(g) {
            serde_json::to_string_pretty(&value).unwrap_or_default()
        } else {
            value.to_string()
        })
    }
}

fn instants_equal(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a, b) {
        (serde_json::Value::String(x), serde_json::Value::String(y)) if x != y => {
            matches!((Timestamp::parse(x), Timestamp::parse(y)), (Ok(p), Ok(q)) if p == q)
        }
        (serde_json::Value::Array(x), serde_json::Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| instants_equal(p, q))
        }
        (serde_json::Value::Object(x), serde_json::Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| instants_equal(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn parse_serialise_parse_is_identity() {
    fn property(input: LegacyItem) -> bool {
        let Ok(first) = DeadLetteredItem::from_json_str(&input.0) else {
            return false;
        };
        let written = first.to_legacy_json_pretty().unwrap_or_default();
        let Ok(second) = DeadLetteredItem::from_json_str(&written) else {
            return false;
        };
        let source: serde_json::Value = serde_json::from_str(&input.0).unwrap_or_default();
        // Same text when written again, and the same item as the source,
        // field for field (timestamps compared as instants).
        second.to_legacy_json_pretty().unwrap_or_default() == written
            && instants_equal(&serde_json::from_str(&written).unwrap_or_default(), &source)
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(property as fn(LegacyItem) -> bool);
}

#[test]
fn storage_order_is_instant_order() {
    fn property(a: (u32, u32, u8), b: (u32, u32, u8)) -> bool {
        let make = |(secs, nanos, offset): (u32, u32, u8)| {
            let time = chrono::DateTime::from_timestamp(i64::from(secs), nanos % 1_000_000_000)
                .unwrap_or_default();
            let zone = chrono::FixedOffset::east_opt((i32::from(offset) - 128) * 60)
                .unwrap_or(chrono::FixedOffset::east_opt(0).unwrap());
            Timestamp::parse(&time.with_timezone(&zone).to_rfc3339()).map(|t| (t, time))
        };
        let (Ok((ta, ia)), Ok((tb, ib))) = (make(a), make(b)) else {
            return false;
        };
        ta.to_storage().cmp(&tb.to_storage()) == ia.cmp(&ib)
            && Timestamp::parse(&ta.to_storage()) == Ok(ta)
            && Timestamp::parse(&ta.to_legacy()) == Ok(ta)
    }
    QuickCheck::new()
        .tests(2000)
        .quickcheck(property as fn((u32, u32, u8), (u32, u32, u8)) -> bool);
}

/// Random text made of the filter language's own pieces and SQL fragments.
#[derive(Clone, Debug)]
struct FilterText(String);

impl Arbitrary for FilterText {
    fn arbitrary(g: &mut Gen) -> Self {
        let pieces = [
            "item.priority",
            "failure_count",
            "error_type",
            "last.exit_code",
            "item_id",
            "job_id",
            "reprocess_eligible",
            "last_attempt",
            "==",
            "!=",
            ">=",
            "<",
            "contains",
            "&&",
            "||",
            "and",
            "or",
            "not",
            "!",
            "(",
            ")",
            "5",
            "-3",
            "1.5",
            "true",
            "null",
            "now - 7d",
            "\"x\"",
            "'y'",
            "\"'; DROP TABLE items; --\"",
            "'\" OR 1=1 --'",
            "; DELETE FROM items",
            "/*",
            "*/",
            "--",
            "\"unterminated",
            "item.a.b",
            "@",
            "item.",
        ];
        let len = 1 + usize::arbitrary(g) % 10;
        let text = (0..len)
            .map(|_| *g.choose(&pieces).unwrap_or(&"x"))
            .collect::<Vec<_>>()
            .join(" ");
        // Depth: around the limits of nesting (50) and of tests (200), and
        // far past them, so the parser's caps and SQLite's expression depth
        // limit (1,000) are both reached.
        let depth = match u8::arbitrary(g) % 4 {
            0 => 0,
            1 => 40 + usize::arbitrary(g) % 20,
            2 => 190 + usize::arbitrary(g) % 20,
            _ => usize::arbitrary(g) % 3_000,
        };
        FilterText(match u8::arbitrary(g) % 3 {
            0 => format!("{}{text}", "!".repeat(depth)),
            1 => format!("{}{text}{}", "(".repeat(depth), ")".repeat(depth)),
            _ => vec!["item_id != \"x\""; depth.max(1)].join(" && ") + " && " + &text,
        })
    }
}

thread_local! {
    /// A tiny items / failure_history pair to run compiled filters against.
    static FILTER_DB: rusqlite::Connection = {
        let conn = rusqlite::Connection::open_in_memory().expect("in-memory db");
        conn.execute_batch(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, job_id TEXT, item_id TEXT, item_data TEXT, failure_count INT,
                 error_signature TEXT, reprocess_eligible INT, manual_review_required INT, first_attempt TEXT, last_attempt TEXT);
             CREATE TABLE failure_history (id INTEGER PRIMARY KEY, item_key INT, attempt_number INT, timestamp TEXT,
                 error_type TEXT, exit_code INT, error_message TEXT, agent_id TEXT, step_failed TEXT);
             INSERT INTO items VALUES (1, 'j', 'a', '{\"priority\": 5, \"a\": {\"b\": 1}}', 2, 's', 1, 0, '2025-01-01', '2025-01-02');
             INSERT INTO failure_history VALUES (1, 1, 1, '2025-01-01', 'Timeout', NULL, 'm', 'agent', 'step');",
        )
        .expect("schema");
        conn
    };
}

#[test]
fn random_filters_never_panic_and_never_run_injected_sql() {
    fn property(input: FilterText) -> bool {
        let holds = holds(&input);
        if !holds {
            // quickcheck names the input only when a shrunk one fails too.
            eprintln!("filter property fails for: {:?}", input.0);
        }
        holds
    }
    fn holds(input: &FilterText) -> bool {
        match dlqlite::filter::parse(&input.0) {
            Err(e) => e.column >= 1 && e.column <= input.0.chars().count() + 1,
            Ok(expr) => FILTER_DB.with(|conn| {
                let condition = expr.to_sql(Timestamp::now());
                let sql = format!("SELECT COUNT(*) FROM items i WHERE {}", condition.sql);
                let counted = conn.query_row(
                    &sql,
                    rusqlite::params_from_iter(condition.values.iter().map(to_rusqlite)),
                    |r| r.get::<_, i64>(0),
                );
                let intact: i64 = conn
                    .query_row("SELECT COUNT(*) FROM items", [], |r| r.get(0))
                    .unwrap_or(-1);
                counted.is_ok() && intact == 1
            }),
        }
    }
    QuickCheck::new()
        .tests(3000)
        .quickcheck(property as fn(FilterText) -> bool);
    // And text that is not even made of the language's pieces.
    fn any_text(s: String) -> bool {
        let _ = dlqlite::filter::parse(&s);
        true
    }
    QuickCheck::new()
        .tests(3000)
        .quickcheck(any_text as fn(String) -> bool);
}

/// The one quoting function the dashboard's links and suggested filters
/// use: any text quoted, then parsed, is that text again (controls, quotes,
/// backslashes and all).
#[test]
fn any_text_quoted_for_a_filter_parses_back_to_itself() {
    use dlqlite::filter::{parse, quote, Column, Expr, Field, Literal, Op};
    fn property(text: String) -> bool {
        let parsed = parse(&format!("item_id == {}", quote(&text)));
        let holds = parsed
            == Ok(Expr::Compare {
                field: Field::Column(Column::ItemId),
                op: Op::Eq,
                value: Literal::Text(text.clone()),
            });
        if !holds {
            eprintln!("quote does not round-trip {text:?}: {parsed:?}");
        }
        holds
    }
    for text in [
        "",
        "\u{1}",
        "a\rb",
        "\\u0001",
        "say \"hi\"",
        "\\",
        "tab\there",
        "\u{7f}\u{202e}",
    ] {
        assert!(property(text.to_string()), "{text:?}");
    }
    QuickCheck::new()
        .tests(5000)
        .quickcheck(property as fn(String) -> bool);
}

/// A compiled filter's value, bound with rusqlite by hand.
fn to_rusqlite(value: &dlqlite::store::SqlValue) -> rusqlite::types::Value {
    use dlqlite::store::SqlValue;
    use rusqlite::types::Value;
    match value {
        SqlValue::Null => Value::Null,
        SqlValue::Integer(v) => Value::Integer(*v),
        SqlValue::Real(v) => Value::Real(*v),
        SqlValue::Text(v) => Value::Text(v.clone()),
    }
}
