//! The filter language's SQL: a parsed [`Expr`] (crate::filter owns the
//! language and its parser) compiled to a parameterised condition on
//! `items AS i`, the alias every item query in this module's siblings uses.
//! No text from the expression ever becomes SQL: fields map to the fixed
//! column expressions below, and every literal (and every path into
//! item_data) is a bound parameter.

use super::sql::SqlValue as Value;
use super::Backend;
use crate::filter::{AttemptColumn, Column, Expr, Field, Literal, Op};
use crate::time::Timestamp;

impl Column {
    /// The column's expression in an item query.
    fn sql(self) -> &'static str {
        match self {
            Column::JobId => "i.job_id",
            Column::ItemId => "i.item_id",
            Column::FailureCount => "i.failure_count",
            Column::ErrorSignature => "i.error_signature",
            Column::ReprocessEligible => "i.reprocess_eligible",
            Column::ManualReviewRequired => "i.manual_review_required",
            Column::FirstAttempt => "i.first_attempt",
            Column::LastAttempt => "i.last_attempt",
            Column::Category => super::categories::ITEM_CATEGORY_SQL,
            Column::Family => "i.family_id",
        }
    }
}

impl Column {
    /// Whether the column holds text (PostgreSQL compares by type).
    fn is_text(self) -> bool {
        matches!(
            self,
            Column::JobId | Column::ItemId | Column::ErrorSignature | Column::Category
        )
    }
}

impl AttemptColumn {
    /// The column's expression in a query on `failure_history AS f`.
    fn sql(self) -> &'static str {
        match self {
            AttemptColumn::ErrorType => "f.error_type",
            AttemptColumn::ExitCode => "f.exit_code",
            AttemptColumn::ErrorMessage => "f.error_message",
            AttemptColumn::AgentId => "f.agent_id",
            AttemptColumn::StepFailed => "f.step_failed",
        }
    }
}

/// The most candidates (attempts) a message search reads through the
/// search index in a query that takes a page (a listing's, an export's,
/// a retry's claim). Reading candidates costs per candidate (its row, the
/// exact test, its item: about 9 us each at 1,000,000 items), and a query
/// of pages reads them all for each page; testing items one by one as a
/// page walks them costs per item walked, and a page walks few items when
/// many match. So a rare text reads the index, and a common one is tested
/// item by item, as before the index. A query that takes every match (a
/// count, a purge, a selection) always reads the index: it reads every
/// candidate once instead of every item.
pub(crate) const MAX_INDEX_CANDIDATES: i64 = 5_000;

/// The most index terms (trigrams) one search reads: each costs a read of
/// its list of attempts, as long as the attempts that have it, and a few
/// rare ones narrow the candidates as well as all of them.
const MAX_TERMS: usize = 4;

/// What a query does with the matches it finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Takes {
    /// A page of them (ORDER BY ... LIMIT).
    Page,
    /// All of them (a count, a delete, a selection).
    Every,
}

/// How the message searches of a filter are run. Every plan selects the
/// same rows (the exact test decides); only the time differs.
#[derive(Clone, Debug, Default)]
pub(crate) struct SearchPlan {
    /// Every search the index can serve reads it, with all its terms.
    everywhere: bool,
    /// The searches, as (fold, text), that read the index, each with the
    /// terms to read (empty: all, or the backend's own choice).
    reading: Vec<(bool, String, Vec<String>)>,
}

impl SearchPlan {
    /// Every search the index can serve reads its candidates.
    pub(crate) fn everywhere() -> SearchPlan {
        SearchPlan {
            everywhere: true,
            reading: Vec::new(),
        }
    }

    /// The plan for `expr` on `conn`, for a query that `takes` a page of
    /// the matches or every one. Each term of a search is counted in the
    /// index up to [`MAX_INDEX_CANDIDATES`] + 1 (a common one costs little
    /// to count): a search reads its rarest terms (at most [`MAX_TERMS`])
    /// when one is rare; otherwise a few spread over the text, and then a
    /// page's query reads them only if they have few candidates together.
    pub(crate) fn for_expr(
        conn: super::sql::Conn<'_>,
        expr: &Expr,
        takes: Takes,
    ) -> crate::error::Result<SearchPlan> {
        let mut searches = Vec::new();
        expr.message_searches(&mut searches);
        let mut plan = SearchPlan::default();
        let count = |statement: &str, values: &[Value]| -> crate::error::Result<i64> {
            let mut bound: Vec<super::sql::Val<'_>> =
                values.iter().map(super::sql::Val::from_value).collect();
            bound.push(super::sql::Val::Int(MAX_INDEX_CANDIDATES + 1));
            Ok(conn.row(statement, &bound, |row| row.i64(0))?.unwrap_or(0))
        };
        for (fold, text) in searches {
            let words = if fold {
                crate::filter::match_words(text)
            } else {
                vec![text]
            };
            let Some(candidates) = conn.backend().message_candidates(&words, fold) else {
                continue;
            };
            let mut rare = Vec::new();
            for term in &candidates.terms {
                let n = count(&candidates.count, &[Value::Text(term.clone())])?;
                if n <= MAX_INDEX_CANDIDATES {
                    rare.push((n, term.clone()));
                }
            }
            rare.sort();
            let terms: Vec<String> = if rare.is_empty() {
                let all = &candidates.terms;
                (0..MAX_TERMS.min(all.len()))
                    .map(|k| all[k * (all.len() - 1) / (MAX_TERMS - 1).max(1)].clone())
                    .collect()
            } else {
                rare.into_iter().take(MAX_TERMS).map(|(_, t)| t).collect()
            };
            let candidates = candidates.with_terms(&terms);
            let reads = takes == Takes::Every
                || count(&candidates.count, &candidates.values)? <= MAX_INDEX_CANDIDATES;
            if reads {
                plan.reading.push((fold, text.to_string(), terms));
            }
        }
        Ok(plan)
    }

    /// Whether the search (`fold`, `text`) reads the index, and with which
    /// of its terms (empty: all).
    fn reads_index(&self, fold: bool, text: &str) -> Option<&[String]> {
        if self.everywhere {
            return Some(&[]);
        }
        self.reading
            .iter()
            .find(|(f, t, _)| *f == fold && t == text)
            .map(|(_, _, terms)| terms.as_slice())
    }
}

/// A compiled condition: fixed SQL text with `?` placeholders, and values.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub sql: String,
    pub values: Vec<Value>,
}

impl Expr {
    /// Compiles to a SQL condition on `items AS i`; `now` is the time that
    /// `now` in the expression means.
    pub fn to_sql(&self, now: Timestamp) -> Condition {
        self.to_sql_on(Backend::Sqlite, now)
    }

    /// [`Expr::to_sql`] for either backend's SQL. Every message search
    /// that the search index can serve reads its candidates
    /// (the plan that takes every match: `SearchPlan::everywhere`).
    pub fn to_sql_on(&self, backend: Backend, now: Timestamp) -> Condition {
        self.to_sql_planned(backend, now, &SearchPlan::everywhere())
    }

    /// [`Expr::to_sql_on`], with the message searches read through the
    /// search index where `plan` says.
    pub(crate) fn to_sql_planned(
        &self,
        backend: Backend,
        now: Timestamp,
        plan: &SearchPlan,
    ) -> Condition {
        let mut condition = Condition {
            sql: String::new(),
            values: Vec::new(),
        };
        self.write_sql(backend, now, plan, &mut condition);
        condition
    }

    /// The message searches (`error_message` and `last.error_message`
    /// with `contains` or `matches`) in this expression: (fold, text).
    fn message_searches<'a>(&'a self, out: &mut Vec<(bool, &'a str)>) {
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => {
                a.message_searches(out);
                b.message_searches(out);
            }
            Expr::Not(inner) => inner.message_searches(out),
            Expr::Compare {
                field:
                    Field::Attempt {
                        column: AttemptColumn::ErrorMessage,
                        ..
                    },
                op: op @ (Op::Contains | Op::Matches),
                value: Literal::Text(text),
            } => out.push((*op == Op::Matches, text)),
            Expr::Compare { .. } | Expr::IsTrue(_) => {}
        }
    }

    fn write_sql(&self, backend: Backend, now: Timestamp, plan: &SearchPlan, out: &mut Condition) {
        let pg = backend == Backend::Postgres;
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => {
                out.sql.push('(');
                a.write_sql(backend, now, plan, out);
                out.sql.push_str(if matches!(self, Expr::Or(..)) {
                    " OR "
                } else {
                    " AND "
                });
                b.write_sql(backend, now, plan, out);
                out.sql.push(')');
            }
            Expr::Not(inner) => {
                // NOT of an unknown (NULL) comparison is still not a match.
                out.sql.push_str("(NOT COALESCE(");
                inner.write_sql(backend, now, plan, out);
                out.sql.push_str(if pg { ", FALSE))" } else { ", 0))" });
            }
            Expr::IsTrue(field) => {
                let kind = if pg {
                    FieldKind::of(field)
                } else {
                    FieldKind::Sqlite
                };
                write_field_test(field, backend, Reader::Truth, out, |lhs, out| {
                    out.sql.push_str(&match kind {
                        FieldKind::Sqlite => format!("COALESCE({lhs}, 0) NOT IN (0, '')"),
                        FieldKind::Text => format!("COALESCE({lhs}, '') <> ''"),
                        FieldKind::Number => format!("COALESCE({lhs}, 0) <> 0"),
                        FieldKind::Time => format!("{lhs} IS NOT NULL"),
                        FieldKind::Json => format!("COALESCE(dlq_json_truthy({lhs}), FALSE)"),
                    });
                });
            }
            Expr::Compare {
                field: Field::Column(column),
                op,
                value,
            } if pg && column.is_time() && !matches!(value, Literal::Null) => {
                // To the nanosecond: the time and the nanoseconds beside it
                // (PostgreSQL keeps microseconds in the timestamptz).
                let bound = bind_value(&Field::Column(*column), value, now);
                out.sql.push_str(&pg_time_comparison(column.sql(), *op));
                out.values.push(bound.clone());
                out.values.push(bound);
            }
            Expr::Compare {
                field: Field::Column(Column::Family),
                op: op @ (Op::Eq | Op::Ne),
                value: Literal::Integer(id),
            } => {
                // A family merged into another is an alias of it (`dlq
                // families merge`): its items moved there, so its id selects
                // them where they are now. Merges point every alias at the
                // end of the chain, so one step is enough.
                out.sql.push_str(if matches!(op, Op::Eq) {
                    "i.family_id = "
                } else {
                    "i.family_id != "
                });
                out.sql
                    .push_str("COALESCE((SELECT merged_into FROM families WHERE id = ?), ?)");
                out.values.push(Value::Integer(*id));
                out.values.push(Value::Integer(*id));
            }
            Expr::Compare {
                field,
                op: op @ (Op::Contains | Op::Matches),
                value: Literal::Text(text),
            } => write_search(field, *op, text, backend, plan, out),
            Expr::Compare { field, op, value } => {
                let bound = bind_value(field, value, now);
                let reader = match (op, value) {
                    (Op::Contains | Op::Matches, _) | (_, Literal::Null) => Reader::Any,
                    (_, Literal::Integer(_) | Literal::Real(_) | Literal::Bool(_)) => {
                        Reader::Number
                    }
                    _ => Reader::Text,
                };
                write_field_test(field, backend, reader, out, |lhs, out| {
                    write_comparison(lhs, *op, &bound, pg, out)
                });
            }
        }
    }
}

/// A comparison of a source timestamp column (`i.first_attempt`,
/// `i.last_attempt`) with a bound storage-form time, on PostgreSQL: the
/// column and its nanoseconds against the time cut the same way. Binds the
/// time twice.
pub(crate) fn pg_time_comparison(column: &str, op: Op) -> String {
    let sign = match op {
        Op::Eq => "=",
        Op::Ne => "<>",
        Op::Gt => ">",
        Op::Ge => ">=",
        Op::Lt => "<",
        Op::Le => "<=",
        // The parser allows `contains` and `matches` only on text fields.
        Op::Contains | Op::Matches => "=",
    };
    format!("({column}, {column}_ns) {sign} (dlq_ts(CAST(? AS TEXT)), dlq_ns(CAST(? AS TEXT)))")
}

/// Appends ` AND <column> <op> ?` for a source timestamp column
/// (`i.first_attempt`, `i.last_attempt`) and `time`, in `backend`'s SQL
/// (to the nanosecond on both).
pub(crate) fn push_time_bound(
    backend: Backend,
    column: &str,
    op: Op,
    time: crate::time::Timestamp,
    sql: &mut String,
    values: &mut Vec<Value>,
) {
    let text = Value::Text(time.to_storage());
    sql.push_str(" AND ");
    match backend {
        Backend::Postgres => {
            sql.push_str(&pg_time_comparison(column, op));
            values.push(text.clone());
        }
        Backend::Sqlite => {
            let sign = match op {
                Op::Ge => ">=",
                Op::Gt => ">",
                Op::Le => "<=",
                Op::Ne => "<>",
                Op::Lt => "<",
                Op::Eq | Op::Contains | Op::Matches => "=",
            };
            sql.push_str(&format!("{column} {sign} ?"));
        }
    }
    values.push(text);
}

/// How PostgreSQL tests a field (it compares by type where SQLite
/// converts): [`FieldKind::Sqlite`] on SQLite.
#[derive(Clone, Copy)]
enum FieldKind {
    Sqlite,
    Text,
    Number,
    Time,
    /// A value inside item_data: tested with the dlq_json_* functions.
    Json,
}

impl FieldKind {
    fn of(field: &Field) -> FieldKind {
        match field {
            Field::Column(c) if c.is_time() => FieldKind::Time,
            Field::Column(c) if c.is_text() => FieldKind::Text,
            Field::Column(_) => FieldKind::Number,
            Field::Attempt { column, .. } => match column {
                AttemptColumn::ExitCode => FieldKind::Number,
                _ => FieldKind::Text,
            },
            Field::Data(_) => FieldKind::Json,
        }
    }
}

/// The value to bind, in the form stored in the column (timestamps in the
/// storage form, booleans as 0/1).
fn bind_value(field: &Field, literal: &Literal, now: Timestamp) -> Value {
    let is_time = matches!(field, Field::Column(c) if c.is_time());
    match literal {
        Literal::Text(text) if is_time => match Timestamp::parse(text) {
            Ok(ts) => Value::Text(ts.to_storage()),
            Err(_) => Value::Text(text.clone()),
        },
        Literal::Text(text) => Value::Text(text.clone()),
        Literal::Integer(n) => Value::Integer(*n),
        Literal::Real(f) => Value::Real(*f),
        Literal::Bool(b) => Value::Integer(i64::from(*b)),
        Literal::Null => Value::Null,
        Literal::Now(offset) => {
            let time = if *offset < 0 {
                now.minus_seconds(-offset)
            } else {
                now.plus_millis(offset.saturating_mul(1000))
            };
            Value::Text(time.clamped_to_storage_range().to_storage())
        }
    }
}

fn write_comparison(lhs: &str, op: Op, value: &Value, pg: bool, out: &mut Condition) {
    if matches!(value, Value::Null) {
        let sql = match op {
            Op::Eq => format!("{lhs} IS NULL"),
            Op::Ne => format!("{lhs} IS NOT NULL"),
            // Ordering against null matches nothing, as in SQL: written out
            // (not as a constant) because `lhs` may hold a bound parameter.
            Op::Gt => format!("{lhs} > NULL"),
            Op::Ge => format!("{lhs} >= NULL"),
            Op::Lt => format!("{lhs} < NULL"),
            Op::Le => format!("{lhs} <= NULL"),
            // The parser gives `contains` and `matches` a string only.
            Op::Contains | Op::Matches if pg => format!("strpos(CAST({lhs} AS TEXT), NULL) > 0"),
            Op::Contains | Op::Matches => format!("instr({lhs}, NULL) > 0"),
        };
        out.sql.push_str(&sql);
        return;
    }
    let sql = match op {
        Op::Eq => format!("{lhs} = ?"),
        Op::Ne => format!("{lhs} != ?"),
        Op::Gt => format!("{lhs} > ?"),
        Op::Ge => format!("{lhs} >= ?"),
        Op::Lt => format!("{lhs} < ?"),
        Op::Le => format!("{lhs} <= ?"),
        Op::Contains | Op::Matches => {
            let backend = if pg {
                Backend::Postgres
            } else {
                Backend::Sqlite
            };
            backend.contains_test(lhs, op == Op::Matches)
        }
    };
    out.sql.push_str(&sql);
    out.values.push(value.clone());
}

/// `field contains "text"` or `field matches "words"`. Each word (the
/// one text of a `contains`) is an exact test ([`Backend::contains_test`]).
/// On error_message, when the search index can narrow the attempts to
/// read ([`Backend::message_candidates`]), the test runs on its
/// candidates only, in `i.id IN (...)`: the planner then reads the
/// matching items by key instead of testing every item, so a rare text
/// is found at once at any size. The exact test still decides, so the
/// results are those of the scan it replaces.
fn write_search(
    field: &Field,
    op: Op,
    text: &str,
    backend: Backend,
    plan: &SearchPlan,
    out: &mut Condition,
) {
    let fold = op == Op::Matches;
    let words = if fold {
        crate::filter::match_words(text)
    } else {
        vec![text]
    };
    let exact = |lhs: &str, out: &mut Condition| {
        let many = words.len() > 1;
        if many {
            out.sql.push('(');
        }
        for (n, word) in words.iter().enumerate() {
            if n > 0 {
                out.sql.push_str(" AND ");
            }
            out.sql.push_str(&backend.contains_test(lhs, fold));
            out.values.push(Value::Text((*word).to_string()));
        }
        if many {
            out.sql.push(')');
        }
    };
    if let Field::Attempt {
        column: AttemptColumn::ErrorMessage,
        last,
    } = field
    {
        let candidates = plan.reads_index(fold, text).and_then(|terms| {
            backend
                .message_candidates(&words, fold)
                .map(|c| c.with_terms(terms))
        });
        if let Some(candidates) = candidates {
            out.sql
                .push_str("i.id IN (SELECT f.item_key FROM failure_history f WHERE ");
            out.sql.push_str(&candidates.condition);
            out.values.extend(candidates.values);
            out.sql.push_str(" AND ");
            exact("f.error_message", out);
            if *last {
                // The last attempt holds it: one of the attempts that do
                // is the item's last.
                out.sql.push_str(" AND f.id = ");
                out.sql.push_str(&super::counters::last_attempt_select(
                    backend,
                    "id",
                    "f.item_key",
                ));
            }
            out.sql.push(')');
            return;
        }
    }
    write_field_test(field, backend, Reader::Any, out, |lhs, out| exact(lhs, out));
}

/// How PostgreSQL reads a value inside item_data for a test (see
/// migrations/postgres/V2): the JSON itself (truth tests), a number (a
/// number or boolean literal: true and false read as 1 and 0, as SQLite's
/// json_extract gives them), a string (a text literal: strings, and
/// objects and arrays as their JSON text), or any value as text (`null`
/// tests and `contains`).
#[derive(Clone, Copy)]
enum Reader {
    Truth,
    Number,
    Text,
    Any,
}

/// Writes the test for one field: `lhs` is the field's SQL expression.
/// On PostgreSQL a path into item_data reads the value as the literal it
/// is compared with asks (a number, text, or the JSON for a truth test):
/// SQLite's json_extract gives SQL values that compare across types,
/// PostgreSQL's JSON does not.
fn write_field_test(
    field: &Field,
    backend: Backend,
    reader: Reader,
    out: &mut Condition,
    test: impl FnOnce(&str, &mut Condition),
) {
    let pg = backend == Backend::Postgres;
    match field {
        Field::Column(column) => test(column.sql(), out),
        Field::Data(path) if pg => {
            // The path is a bound parameter, a JSON array of its keys.
            out.values.push(Value::Text(
                serde_json::to_string(path).unwrap_or_else(|_| "[]".into()),
            ));
            let reader = match reader {
                Reader::Truth => "dlq_json_at",
                Reader::Number => "dlq_json_number",
                Reader::Text => "dlq_json_string",
                Reader::Any => "dlq_json_scalar",
            };
            test(&format!("{reader}(i.item_data, CAST(? AS TEXT))"), out);
        }
        Field::Data(path) => {
            // The path is a bound parameter too; it only ever names keys.
            let mut json_path = String::from("$");
            for part in path {
                json_path.push_str(".\"");
                json_path.push_str(part);
                json_path.push('"');
            }
            out.values.push(Value::Text(json_path));
            test("json_extract(i.item_data, ?)", out);
        }
        Field::Attempt {
            column,
            last: false,
        } => {
            out.sql
                .push_str("EXISTS (SELECT 1 FROM failure_history f WHERE f.item_key = i.id AND ");
            test(column.sql(), out);
            out.sql.push(')');
        }
        Field::Attempt { column, last: true } => {
            let name = column.sql().trim_start_matches("f.");
            test(
                &super::counters::last_attempt_select(backend, name, "i.id"),
                out,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::parse;

    fn now() -> Timestamp {
        Timestamp::parse("2025-06-01T00:00:00Z").unwrap()
    }

    fn sql(input: &str) -> Condition {
        parse(input)
            .unwrap_or_else(|e| panic!("{input}: {e}"))
            .to_sql(now())
    }

    #[test]
    fn ordering_against_null_matches_nothing_and_keeps_its_parameters() {
        // A path into item_data is a bound parameter of its own: the SQL
        // must still hold its placeholder (this once compiled to "0" and
        // failed with "wrong number of parameters").
        let c = sql("item.priority >= null");
        assert_eq!(c.sql, "json_extract(i.item_data, ?) >= NULL");
        assert_eq!(c.values, [Value::Text("$.\"priority\"".into())]);
        assert_eq!(sql("failure_count < null").sql, "i.failure_count < NULL");
    }

    #[test]
    fn only_time_fields_read_text_as_a_time() {
        let text = "2025-01-01T01:00:00+01:00";
        let c = sql(&format!("item_id == \"{text}\""));
        assert_eq!(
            c.values,
            [Value::Text(text.into())],
            "an id is compared as written"
        );
        let c = sql(&format!("last_attempt == \"{text}\""));
        assert_eq!(
            c.values,
            [Value::Text("2025-01-01T00:00:00.000000000Z".into())],
            "a time in the stored form"
        );
    }

    #[test]
    fn now_offsets_move_the_right_way_even_at_the_ends_of_time() {
        let bound = |text: &str| match sql(text).values.as_slice() {
            [Value::Text(t)] => t.clone(),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(
            bound("last_attempt > now"),
            "2025-06-01T00:00:00.000000000Z"
        );
        assert_eq!(
            bound("last_attempt > now - 1d"),
            "2025-05-31T00:00:00.000000000Z"
        );
        assert_eq!(
            bound("last_attempt > now + 1h"),
            "2025-06-01T01:00:00.000000000Z"
        );
        // Past the years 0000-9999: clamped, on the side the sign says.
        for far in ["100000000000d", "9223372036854775807s"] {
            assert_eq!(
                bound(&format!("last_attempt > now - {far}")),
                "0000-01-01T00:00:00.000000000Z"
            );
            assert_eq!(
                bound(&format!("last_attempt > now + {far}")),
                "9999-12-31T23:59:59.999999999Z"
            );
        }
    }

    #[test]
    fn every_operator() {
        for (op, sql_op) in [
            ("==", "="),
            ("!=", "!="),
            (">", ">"),
            (">=", ">="),
            ("<", "<"),
            ("<=", "<="),
        ] {
            let c = sql(&format!("failure_count {op} 2"));
            assert_eq!(c.sql, format!("i.failure_count {sql_op} ?"));
            assert_eq!(c.values, [Value::Integer(2)]);
        }
        let c = sql("error_signature contains \"abc\"");
        assert_eq!(c.sql, "instr(i.error_signature, ?) > 0");
        assert_eq!(sql("item_id = 'x'").values, [Value::Text("x".into())]);
    }

    #[test]
    fn legacy_expressions_keep_their_meaning() {
        let c = sql("item.priority >= 5");
        assert_eq!(c.sql, "json_extract(i.item_data, ?) >= ?");
        assert_eq!(
            c.values,
            [Value::Text("$.\"priority\"".into()), Value::Integer(5)]
        );
        assert_eq!(sql("item.failure_count > 2").sql, "i.failure_count > ?");
        let c = sql("item.reprocess_eligible == true");
        assert_eq!(c.sql, "i.reprocess_eligible = ?");
        assert_eq!(c.values, [Value::Integer(1)]);
        assert_eq!(
            sql("item.error_signature contains \"abc\"").sql,
            "instr(i.error_signature, ?) > 0"
        );
        let c =
            sql("item.priority >= 5 && item.failure_count > 2 || item.reprocess_eligible == true");
        assert_eq!(
            c.sql,
            "((json_extract(i.item_data, ?) >= ? AND i.failure_count > ?) OR i.reprocess_eligible = ?)"
        );
        assert_eq!(
            sql("item.a.b == 'x'").values[0],
            Value::Text("$.\"a\".\"b\"".into())
        );
    }

    #[test]
    fn precedence_and_grouping() {
        assert_eq!(
            sql("failure_count > 1 or failure_count < 0 and reprocess_eligible").sql,
            "(i.failure_count > ? OR (i.failure_count < ? AND COALESCE(i.reprocess_eligible, 0) NOT IN (0, '')))"
        );
        assert_eq!(
            sql("(failure_count > 1 or failure_count < 0) and not manual_review_required").sql,
            "((i.failure_count > ? OR i.failure_count < ?) AND (NOT COALESCE(COALESCE(i.manual_review_required, 0) NOT IN (0, ''), 0)))"
        );
        assert_eq!(
            sql("!(item_id == 'a')").sql,
            "(NOT COALESCE(i.item_id = ?, 0))"
        );
    }

    #[test]
    fn attempts_nulls_and_time() {
        assert_eq!(
            sql("error_type == \"Timeout\"").sql,
            "EXISTS (SELECT 1 FROM failure_history f WHERE f.item_key = i.id AND f.error_type = ?)"
        );
        assert!(sql("last.exit_code == 101")
            .sql
            .starts_with("(SELECT last_f.exit_code FROM failure_history AS last_f"));
        assert_eq!(sql("exit_code == null").sql, "EXISTS (SELECT 1 FROM failure_history f WHERE f.item_key = i.id AND f.exit_code IS NULL)");
        assert_eq!(
            sql("item.x != null").sql,
            "json_extract(i.item_data, ?) IS NOT NULL"
        );
        let c = sql("last_attempt < now - 7d");
        assert_eq!(
            c.values,
            [Value::Text("2025-05-25T00:00:00.000000000Z".into())]
        );
        let c = sql("first_attempt >= \"2025-01-01T00:00:00-01:00\"");
        assert_eq!(
            c.values,
            [Value::Text("2025-01-01T01:00:00.000000000Z".into())]
        );
        assert_eq!(
            sql("last_attempt > now").values,
            [Value::Text(now().to_storage())]
        );
    }

    #[test]
    fn message_searches_read_the_index_candidates_then_test_exactly() {
        // Three characters or more: the trigram index's candidates, each
        // tested with the same instr() a scan uses.
        let c = sql("error_message contains \"abcd\"");
        assert_eq!(
            c.sql,
            "i.id IN (SELECT f.item_key FROM failure_history f WHERE \
             f.id IN (SELECT rowid FROM failure_text WHERE failure_text MATCH ?) \
             AND instr(f.error_message, ?) > 0)"
        );
        assert_eq!(
            c.values,
            [
                Value::Text("\"abc\" AND \"bcd\"".into()),
                Value::Text("abcd".into())
            ]
        );
        // The last attempt: one of the attempts found is the item's last.
        let c = sql("last.error_message contains \"abc\"");
        assert!(
            c.sql.ends_with("AND instr(f.error_message, ?) > 0 AND f.id = (SELECT last_f.id FROM failure_history AS last_f WHERE last_f.item_key = f.item_key ORDER BY last_f.timestamp DESC, last_f.attempt_number DESC LIMIT 1))"),
            "{}",
            c.sql
        );
        // Under three characters there is no trigram: the scan, as before.
        assert_eq!(
            sql("error_message contains \"ab\"").sql,
            "EXISTS (SELECT 1 FROM failure_history f WHERE f.item_key = i.id AND instr(f.error_message, ?) > 0)"
        );
        // Other fields have no index.
        assert_eq!(
            sql("agent_id contains \"abcd\"").sql,
            "EXISTS (SELECT 1 FROM failure_history f WHERE f.item_key = i.id AND instr(f.agent_id, ?) > 0)"
        );
    }

    #[test]
    fn matches_asks_for_every_word_ignoring_case() {
        let c = sql("error_message matches \"Refused  at 5432\"");
        assert_eq!(
            c.sql,
            "i.id IN (SELECT f.item_key FROM failure_history f WHERE \
             f.id IN (SELECT rowid FROM failure_text WHERE failure_text MATCH ?) \
             AND (instr(lower(f.error_message), lower(?)) > 0 \
             AND instr(lower(f.error_message), lower(?)) > 0 \
             AND instr(lower(f.error_message), lower(?)) > 0))"
        );
        // "at" has no trigram: only the exact test looks for it.
        assert_eq!(
            c.values[0],
            Value::Text(
                "\"Ref\" AND \"efu\" AND \"fus\" AND \"use\" AND \"sed\" AND \"543\" AND \"432\""
                    .into()
            )
        );
        assert_eq!(
            c.values[1..],
            [
                Value::Text("Refused".into()),
                Value::Text("at".into()),
                Value::Text("5432".into())
            ]
        );
        assert_eq!(
            sql("job_id matches 'a b'").sql,
            "(instr(lower(i.job_id), lower(?)) > 0 AND instr(lower(i.job_id), lower(?)) > 0)"
        );
        let c = Expr::to_sql_on(
            &parse("last.error_message matches \"50% off_\"").unwrap(),
            Backend::Postgres,
            now(),
        );
        assert!(c.sql.starts_with(
            "i.id IN (SELECT f.item_key FROM failure_history f WHERE f.error_message ILIKE ? ESCAPE '\\' \
             AND f.error_message ILIKE ? ESCAPE '\\' AND (strpos(translate("
        ), "{}", c.sql);
        assert_eq!(c.values[0], Value::Text("%50\\%%".into()));
        assert_eq!(c.values[1], Value::Text("%off\\_%".into()));
    }

    #[test]
    fn search_text_is_never_fts5_syntax() {
        // Quotes, operators, stars, column filters and NEAR: each trigram
        // is one FTS5 string, "" its only escape.
        let c = sql(r#"error_message contains "a\"b OR c*:NEAR(""#);
        let Value::Text(query) = &c.values[0] else {
            panic!("{:?}", c.values)
        };
        assert!(
            query.starts_with(r#""a""b" AND """b " AND "b O""#),
            "{query}"
        );
        // A long text asks for at most 16 trigrams, its ends included.
        let long = "x".repeat(5) + &"abcdefghij".repeat(10) + "yz!";
        let c = sql(&format!("error_message contains \"{long}\""));
        let Value::Text(query) = &c.values[0] else {
            panic!()
        };
        assert!(query.split(" AND ").count() <= 16, "{query}");
        assert!(query.starts_with("\"xxx\""), "{query}");
        assert!(query.ends_with("\"yz!\""), "{query}");
    }

    #[test]
    fn injection_is_matched_literally_or_refused() {
        for hostile in [
            "x'; DROP TABLE items; --",
            "\" OR 1=1 --",
            "a\") OR (\"1\"=\"1",
            "/* comment */",
            "'; DELETE FROM items WHERE '1'='1",
        ] {
            // Inside a string it is just a value.
            let quoted = format!("item_id == \"{}\"", hostile.replace('"', "\\\""));
            let c = sql(&quoted);
            assert_eq!(c.sql, "i.item_id = ?");
            assert_eq!(c.values, [Value::Text(hostile.to_string())]);
        }
        // Outside a string it does not parse.
        for hostile in [
            "item_id == 'a'; DROP TABLE items",
            "item_id == 'a' -- comment",
            "item_id == 'a' /* x */",
            "1=1",
            "item.priority) OR 1=1 OR (item.priority == 1",
        ] {
            assert!(parse(hostile).is_err(), "{hostile}");
        }
        // A path segment is bound, never written into the SQL.
        let c = sql("item.a-b_c == 1");
        assert_eq!(c.sql, "json_extract(i.item_data, ?) = ?");
    }
}
