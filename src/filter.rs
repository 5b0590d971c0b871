//! The filter language shared by list, export, purge and retry: parsed into
//! an AST, then compiled to a parameterised SQL condition on `items AS i`.
//! No text from the expression ever becomes SQL: fields map to fixed column
//! expressions, and every literal (and every path into item_data) is a bound
//! parameter. An invalid expression is an error naming the column where it
//! went wrong — never "match everything", as the legacy evaluator did.
//!
//! ```text
//! expr     := or
//! or       := and (("||" | "or") and)*
//! and      := unary (("&&" | "and") unary)*
//! unary    := ("!" | "not") unary | "(" expr ")" | test
//! test     := field (op value)?          a bare field must be a boolean one
//! op       := == | != | > | >= | < | <= | contains
//! value    := "string" | 'string' | number | true | false | null
//!           | now | now - N(s|m|h|d|w) | now + N(s|m|h|d|w)
//! field    := job_id | item_id | failure_count | error_signature
//!           | reprocess_eligible | manual_review_required
//!           | first_attempt | last_attempt
//!           | error_type | exit_code | error_message | agent_id | step_failed
//!                                        true when any attempt matches
//!           | last.error_type | last.exit_code | ...   the last attempt only
//!           | item.failure_count | item.reprocess_eligible | item.error_signature
//!                                        the DLQ fields (legacy spelling)
//!           | item.<name>(.<name>)*      a path into item_data
//! ```

use crate::time::Timestamp;
use rusqlite::types::Value;
use std::fmt;

/// A parse error: what went wrong and where (1-based column).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    pub column: usize,
    pub message: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "filter column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for FilterError {}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Contains,
}

/// A literal value.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    Text(String),
    Integer(i64),
    Real(f64),
    Bool(bool),
    Null,
    /// `now` plus this many seconds (negative for `now - ...`).
    Now(i64),
}

/// A field of the item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field {
    /// A column of `items`.
    Column(Column),
    /// A column of `failure_history`: any attempt (false) or the last (true).
    Attempt { column: AttemptColumn, last: bool },
    /// A path into item_data.
    Data(Vec<String>),
}

/// The `items` columns a filter can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    JobId,
    ItemId,
    FailureCount,
    ErrorSignature,
    ReprocessEligible,
    ManualReviewRequired,
    FirstAttempt,
    LastAttempt,
}

/// The `failure_history` columns a filter can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptColumn {
    ErrorType,
    ExitCode,
    ErrorMessage,
    AgentId,
    StepFailed,
}

/// The parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Compare {
        field: Field,
        op: Op,
        value: Literal,
    },
    /// A boolean field on its own.
    IsTrue(Field),
}

impl Column {
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
        }
    }

    fn is_bool(self) -> bool {
        matches!(
            self,
            Column::ReprocessEligible | Column::ManualReviewRequired
        )
    }

    fn is_time(self) -> bool {
        matches!(self, Column::FirstAttempt | Column::LastAttempt)
    }
}

impl AttemptColumn {
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

fn column_named(name: &str) -> Option<Column> {
    Some(match name {
        "job_id" => Column::JobId,
        "item_id" => Column::ItemId,
        "failure_count" => Column::FailureCount,
        "error_signature" => Column::ErrorSignature,
        "reprocess_eligible" => Column::ReprocessEligible,
        "manual_review_required" => Column::ManualReviewRequired,
        "first_attempt" => Column::FirstAttempt,
        "last_attempt" => Column::LastAttempt,
        _ => return None,
    })
}

fn attempt_column_named(name: &str) -> Option<AttemptColumn> {
    Some(match name {
        "error_type" => AttemptColumn::ErrorType,
        "exit_code" => AttemptColumn::ExitCode,
        "error_message" => AttemptColumn::ErrorMessage,
        "agent_id" => AttemptColumn::AgentId,
        "step_failed" => AttemptColumn::StepFailed,
        _ => return None,
    })
}

// ---------------------------------------------------------------------------
// Lexer

#[derive(Clone, Debug, PartialEq)]
enum Token {
    /// A dotted name such as `item.priority` or `last.error_type`.
    Name(String),
    Text(String),
    Number(String),
    Op(Op),
    And,
    Or,
    Not,
    Open,
    Close,
    Plus,
    Minus,
}

struct Lexed {
    token: Token,
    column: usize,
}

fn lex(input: &str) -> Result<Vec<Lexed>, FilterError> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |column: usize, message: String| FilterError { column, message };
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        let two: String = chars[i..chars.len().min(i + 2)].iter().collect();
        let token = if c.is_whitespace() {
            i += 1;
            continue;
        } else if two == "&&" {
            i += 2;
            Token::And
        } else if two == "||" {
            i += 2;
            Token::Or
        } else if two == "==" {
            i += 2;
            Token::Op(Op::Eq)
        } else if two == "!=" {
            i += 2;
            Token::Op(Op::Ne)
        } else if two == ">=" {
            i += 2;
            Token::Op(Op::Ge)
        } else if two == "<=" {
            i += 2;
            Token::Op(Op::Le)
        } else if c == '=' {
            i += 1;
            Token::Op(Op::Eq)
        } else if c == '>' {
            i += 1;
            Token::Op(Op::Gt)
        } else if c == '<' {
            i += 1;
            Token::Op(Op::Lt)
        } else if c == '!' {
            i += 1;
            Token::Not
        } else if c == '(' {
            i += 1;
            Token::Open
        } else if c == ')' {
            i += 1;
            Token::Close
        } else if c == '+' {
            i += 1;
            Token::Plus
        } else if c == '-' && !chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
            i += 1;
            Token::Minus
        } else if c == '"' || c == '\'' {
            let quote = c;
            let mut text = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(err(column, "unterminated string".into())),
                    Some('\\') => {
                        let escaped = chars
                            .get(i + 1)
                            .ok_or_else(|| err(i + 1, "unterminated string".into()))?;
                        text.push(match escaped {
                            'n' => '\n',
                            't' => '\t',
                            other => *other,
                        });
                        i += 2;
                    }
                    Some(ch) if *ch == quote => {
                        i += 1;
                        break;
                    }
                    Some(ch) => {
                        text.push(*ch);
                        i += 1;
                    }
                }
            }
            Token::Text(text)
        } else if c.is_ascii_digit() || c == '-' {
            let start = i;
            i += 1;
            while chars
                .get(i)
                .is_some_and(|d| d.is_ascii_alphanumeric() || *d == '.')
            {
                i += 1;
            }
            Token::Number(chars[start..i].iter().collect())
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|d| d.is_alphanumeric() || matches!(d, '_' | '-' | '.'))
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match word.as_str() {
                "and" | "AND" => Token::And,
                "or" | "OR" => Token::Or,
                "not" | "NOT" => Token::Not,
                "contains" | "CONTAINS" => Token::Op(Op::Contains),
                _ => Token::Name(word),
            }
        } else {
            return Err(err(column, format!("unexpected character {c:?}")));
        };
        out.push(Lexed { token, column });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Parser

struct Parser {
    tokens: Vec<Lexed>,
    /// How deep `!` and `(` nest at this point.
    depth: usize,
    /// Tests parsed so far (`&&` and `||` chains are as deep as they are
    /// long in the tree).
    tests: usize,
    position: usize,
    end_column: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.position).map(|t| &t.token)
    }

    fn column(&self) -> usize {
        self.tokens
            .get(self.position)
            .map(|t| t.column)
            .unwrap_or(self.end_column)
    }

    fn error<T>(&self, message: impl Into<String>) -> Result<T, FilterError> {
        Err(FilterError {
            column: self.column(),
            message: message.into(),
        })
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.position).map(|t| t.token.clone());
        self.position += 1;
        token
    }

    fn describe(token: Option<&Token>) -> String {
        match token {
            None => "the end".to_string(),
            Some(Token::Name(name)) => format!("{name:?}"),
            Some(Token::Text(text)) => format!("string {text:?}"),
            Some(Token::Number(n)) => format!("number {n}"),
            Some(Token::Op(_)) => "an operator".to_string(),
            Some(Token::And) => "'&&'".to_string(),
            Some(Token::Or) => "'||'".to_string(),
            Some(Token::Not) => "'!'".to_string(),
            Some(Token::Open) => "'('".to_string(),
            Some(Token::Close) => "')'".to_string(),
            Some(Token::Plus) => "'+'".to_string(),
            Some(Token::Minus) => "'-'".to_string(),
        }
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.and()?;
        while self.peek() == Some(&Token::Or) {
            self.next();
            let right = self.and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.unary()?;
        while self.peek() == Some(&Token::And) {
            self.next();
            let right = self.unary()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        // Each `!` and `(` is a level of recursion here and in everything
        // that walks the tree: 20,000 of them overflowed the stack.
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.error(format!(
                "nested more than {MAX_DEPTH} levels deep ('!' and '(')"
            ));
        }
        let result = self.unary_inner();
        self.depth -= 1;
        result
    }

    fn unary_inner(&mut self) -> Result<Expr, FilterError> {
        match self.peek() {
            Some(Token::Not) => {
                self.next();
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some(Token::Open) => {
                self.next();
                let inner = self.or()?;
                if self.peek() != Some(&Token::Close) {
                    return self.error(format!(
                        "expected ')', found {}",
                        Self::describe(self.peek())
                    ));
                }
                self.next();
                Ok(inner)
            }
            _ => self.test(),
        }
    }

    fn test(&mut self) -> Result<Expr, FilterError> {
        let column = self.column();
        self.tests += 1;
        if self.tests > MAX_TESTS {
            return self.error(format!("more than {MAX_TESTS} tests in one filter"));
        }
        let name = match self.peek() {
            Some(Token::Name(name)) => name.clone(),
            other => {
                return self.error(format!("expected a field, found {}", Self::describe(other)))
            }
        };
        let field = resolve_field(&name).map_err(|message| FilterError { column, message })?;
        self.next();
        let op = match self.peek() {
            Some(Token::Op(op)) => *op,
            _ => {
                return match &field {
                    Field::Column(c) if c.is_bool() => Ok(Expr::IsTrue(field)),
                    Field::Data(_) => Ok(Expr::IsTrue(field)),
                    _ => self.error(format!(
                        "expected an operator after {name:?}, found {}",
                        Self::describe(self.peek())
                    )),
                }
            }
        };
        self.next();
        let value_column = self.column();
        let value = self.value()?;
        if op == Op::Contains && !matches!(value, Literal::Text(_)) {
            return self.error_at(column, "'contains' needs a string");
        }
        let time_field = matches!(&field, Field::Column(c) if c.is_time());
        match (&value, time_field) {
            // A time field compared with text that is not a time would be
            // compared as text: `last_attempt < "yesterday"` matched every
            // item, and `retry`, `purge` and `requeue --take` act on what
            // matches.
            (Literal::Text(text), true) => {
                if let Err(e) = Timestamp::parse(text) {
                    return self.error_at(
                        value_column,
                        &format!("{name} compares with an RFC 3339 time or `now - N`: {e}"),
                    );
                }
            }
            (Literal::Integer(_) | Literal::Real(_) | Literal::Bool(_), true) => {
                return self.error_at(
                    value_column,
                    &format!("{name} compares with an RFC 3339 time (quoted) or `now - N`"),
                );
            }
            (Literal::Now(_), false) => {
                return self.error_at(
                    value_column,
                    "`now` compares with first_attempt or last_attempt only",
                );
            }
            _ => {}
        }
        Ok(Expr::Compare { field, op, value })
    }

    fn error_at<T>(&self, column: usize, message: &str) -> Result<T, FilterError> {
        Err(FilterError {
            column,
            message: message.to_string(),
        })
    }

    fn value(&mut self) -> Result<Literal, FilterError> {
        let column = self.column();
        match self.next() {
            Some(Token::Text(text)) => Ok(Literal::Text(text)),
            Some(Token::Number(n)) => parse_number(&n).ok_or(FilterError {
                column,
                message: format!("{n:?} is not a number"),
            }),
            Some(Token::Name(word)) => match word.as_str() {
                "true" => Ok(Literal::Bool(true)),
                "false" => Ok(Literal::Bool(false)),
                "null" => Ok(Literal::Null),
                "now" => self.now_offset(),
                _ => Err(FilterError {
                    column,
                    message: format!("expected a value, found {word:?} (quote strings)"),
                }),
            },
            other => Err(FilterError {
                column,
                message: format!("expected a value, found {}", Self::describe(other.as_ref())),
            }),
        }
    }

    fn now_offset(&mut self) -> Result<Literal, FilterError> {
        let sign = match self.peek() {
            Some(Token::Plus) => 1,
            Some(Token::Minus) => -1,
            _ => return Ok(Literal::Now(0)),
        };
        self.next();
        let column = self.column();
        let Some(Token::Number(text)) = self.next() else {
            return Err(FilterError {
                column,
                message: "expected a duration such as 7d, 12h, 30m".into(),
            });
        };
        let seconds = parse_duration(&text).ok_or(FilterError {
            column,
            message: format!("{text:?} is not a duration (use s, m, h, d or w: 7d, 12h)"),
        })?;
        Ok(Literal::Now(sign * seconds))
    }
}

fn parse_number(text: &str) -> Option<Literal> {
    if let Ok(n) = text.parse::<i64>() {
        return Some(Literal::Integer(n));
    }
    text.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .map(Literal::Real)
}

fn parse_duration(text: &str) -> Option<i64> {
    let unit = text.chars().last()?;
    let scale = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        'w' => 604_800,
        _ => return None,
    };
    let number: i64 = text[..text.len() - 1].parse().ok()?;
    number.checked_mul(scale)
}

fn resolve_field(name: &str) -> Result<Field, String> {
    if let Some(column) = column_named(name) {
        return Ok(Field::Column(column));
    }
    if let Some(column) = attempt_column_named(name) {
        return Ok(Field::Attempt {
            column,
            last: false,
        });
    }
    if let Some(rest) = name.strip_prefix("last.") {
        return attempt_column_named(rest)
            .map(|column| Field::Attempt { column, last: true })
            .ok_or_else(|| format!("unknown attempt field {rest:?} after 'last.'"));
    }
    if let Some(rest) = name.strip_prefix("item.") {
        // The legacy evaluator read these three as the DLQ fields.
        match rest {
            "failure_count" => return Ok(Field::Column(Column::FailureCount)),
            "reprocess_eligible" => return Ok(Field::Column(Column::ReprocessEligible)),
            "error_signature" => return Ok(Field::Column(Column::ErrorSignature)),
            _ => {}
        }
        let parts: Vec<String> = rest.split('.').map(str::to_string).collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(format!("bad path {name:?}"));
        }
        return Ok(Field::Data(parts));
    }
    Err(format!(
        "unknown field {name:?} (item.<path> reads item_data; see `dlq list --help`)"
    ))
}

/// How deep `!` and parentheses may nest. With [`MAX_TESTS`] this keeps the
/// compiled SQL well inside SQLite's expression depth limit (1,000).
pub const MAX_DEPTH: usize = 50;
/// How many tests (`field op value`) one filter may hold.
pub const MAX_TESTS: usize = 200;

/// Parses a filter expression.
pub fn parse(input: &str) -> Result<Expr, FilterError> {
    let tokens = lex(input)?;
    if tokens.is_empty() {
        return Err(FilterError {
            column: 1,
            message: "empty filter".into(),
        });
    }
    let mut parser = Parser {
        tokens,
        depth: 0,
        tests: 0,
        position: 0,
        end_column: input.chars().count() + 1,
    };
    let expr = parser.or()?;
    if parser.position < parser.tokens.len() {
        return parser.error(format!(
            "unexpected {} (missing '&&' or '||'?)",
            Parser::describe(parser.peek())
        ));
    }
    Ok(expr)
}

// ---------------------------------------------------------------------------
// Compiling to SQL

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
        let mut condition = Condition {
            sql: String::new(),
            values: Vec::new(),
        };
        self.write_sql(now, &mut condition);
        condition
    }

    fn write_sql(&self, now: Timestamp, out: &mut Condition) {
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => {
                out.sql.push('(');
                a.write_sql(now, out);
                out.sql.push_str(if matches!(self, Expr::Or(..)) {
                    " OR "
                } else {
                    " AND "
                });
                b.write_sql(now, out);
                out.sql.push(')');
            }
            Expr::Not(inner) => {
                // NOT of an unknown (NULL) comparison is still not a match.
                out.sql.push_str("(NOT COALESCE(");
                inner.write_sql(now, out);
                out.sql.push_str(", 0))");
            }
            Expr::IsTrue(field) => {
                write_field_test(field, now, out, |lhs, out| {
                    out.sql
                        .push_str(&format!("COALESCE({lhs}, 0) NOT IN (0, '')"));
                });
            }
            Expr::Compare { field, op, value } => {
                let value = bind_value(field, value, now);
                write_field_test(field, now, out, |lhs, out| {
                    write_comparison(lhs, *op, &value, out)
                });
            }
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

fn write_comparison(lhs: &str, op: Op, value: &Value, out: &mut Condition) {
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
            Op::Contains => format!("instr({lhs}, NULL) > 0"),
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
        Op::Contains => format!("instr({lhs}, ?) > 0"),
    };
    out.sql.push_str(&sql);
    out.values.push(value.clone());
}

/// Writes the test for one field: `lhs` is the field's SQL expression.
fn write_field_test(
    field: &Field,
    _now: Timestamp,
    out: &mut Condition,
    test: impl FnOnce(&str, &mut Condition),
) {
    match field {
        Field::Column(column) => test(column.sql(), out),
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
            test(&crate::store::last_attempt_select(name, "i.id"), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::parse("2025-06-01T00:00:00Z").unwrap()
    }

    fn sql(input: &str) -> Condition {
        parse(input)
            .unwrap_or_else(|e| panic!("{input}: {e}"))
            .to_sql(now())
    }

    fn error(input: &str) -> FilterError {
        parse(input).expect_err(input)
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
    fn errors_say_where() {
        assert_eq!(error("failure_count >").column, 16);
        assert_eq!(error("failure_count > > 2").column, 17);
        assert_eq!(
            error("(failure_count > 2").message,
            "expected ')', found the end"
        );
        let e = error("nope == 1");
        assert_eq!(e.column, 1);
        assert!(e.message.contains("unknown field"), "{e}");
        assert_eq!(error("failure_count > 2 item_id == 'x'").column, 19);
        assert_eq!(error("item_id == 'open").column, 12);
        assert_eq!(error("").message, "empty filter");
        assert_eq!(error("item_id").column, 8);
        assert_eq!(error("last_attempt < now - 7y").column, 22);
        assert_eq!(error("item_id == bare").column, 12);
        assert!(error("item_id contains 5")
            .message
            .contains("needs a string"));
        assert_eq!(error("item_id == 'a' @").column, 16);
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
