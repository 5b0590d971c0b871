//! The filter language shared by list, export (not the legacy tree), purge,
//! retry and requeue: its grammar,
//! lexer and parser, which turn an expression into an [`Expr`]. The store
//! compiles an `Expr` to SQL (store/filter_sql.rs: only bound parameters,
//! never text from the expression). An invalid expression is an error
//! naming the column where it went wrong — never "match everything", as the
//! legacy evaluator did.
//!
//! ```text
//! expr     := or
//! or       := and (("||" | "or") and)*
//! and      := unary (("&&" | "and") unary)*
//! unary    := ("!" | "not") unary | "(" expr ")" | test
//! test     := field (op value)?          a bare field must be a boolean one
//! op       := == | != | > | >= | < | <= | contains | matches
//! value    := "string" | 'string' | number | true | false | null
//!           | now | now - N(s|m|h|d|w) | now + N(s|m|h|d|w)
//! field    := job_id | item_id | failure_count | error_signature
//!           | reprocess_eligible | manual_review_required
//!           | first_attempt | last_attempt | category
//!           | error_type | exit_code | error_message | agent_id | step_failed
//!                                        true when any attempt matches
//!           | last.error_type | last.exit_code | ...   the last attempt only
//!           | item.failure_count | item.reprocess_eligible | item.error_signature
//!                                        the DLQ fields (legacy spelling)
//!           | item.<name>(.<name>)*      a path into item_data
//! ```

use crate::time::Timestamp;
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
    /// The text holds the string, exactly (case and all).
    Contains,
    /// The text holds every word of the string (split at white space), in
    /// any order, ignoring the case of A-Z: a search box's semantics. Each
    /// word is a `contains` of its own, compared with ASCII letters folded
    /// to lower case on both sides (the one folding SQLite and PostgreSQL
    /// share; other letters compare as written).
    Matches,
}

/// The words a `matches` looks for: its string split at white space.
pub fn match_words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

/// The most words one `matches` may hold (each is a bound parameter or
/// two).
pub const MAX_MATCH_WORDS: usize = 32;

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
    /// The failure category of the last attempt's error type (a lookup in
    /// `error_categories`, not a stored column).
    Category,
    /// The failure family of the last attempt (`items.family_id`; `dlq
    /// families`).
    Family,
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

impl Expr {
    /// `category == "<category>"`: what `--category C` options mean.
    pub fn category_is(category: crate::Category) -> Expr {
        Expr::Compare {
            field: Field::Column(Column::Category),
            op: Op::Eq,
            value: Literal::Text(category.as_str().to_string()),
        }
    }

    /// Both this and `other`.
    pub fn and(self, other: Expr) -> Expr {
        Expr::And(Box::new(self), Box::new(other))
    }
}

impl Column {
    fn is_bool(self) -> bool {
        matches!(
            self,
            Column::ReprocessEligible | Column::ManualReviewRequired
        )
    }

    pub(crate) fn is_time(self) -> bool {
        matches!(self, Column::FirstAttempt | Column::LastAttempt)
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
        "category" => Column::Category,
        "family" | "family_id" => Column::Family,
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
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let (token, next) = if let Some((token, width)) = symbol(&chars[i..]) {
            (token, i + width)
        } else if c == '"' || c == '\'' {
            let (text, next) = string(&chars, i)?;
            (Token::Text(text), next)
        } else if c.is_ascii_digit() || c == '-' {
            // A '-' before a digit (a '-' before anything else is a symbol).
            let end = scan(&chars, i + 1, |d| d.is_ascii_alphanumeric() || d == '.');
            (Token::Number(chars[i..end].iter().collect()), end)
        } else if c.is_alphabetic() || c == '_' {
            let end = scan(&chars, i, |d| {
                d.is_alphanumeric() || matches!(d, '_' | '-' | '.')
            });
            (word(chars[i..end].iter().collect()), end)
        } else {
            return Err(FilterError {
                column,
                message: format!("unexpected character {c:?}"),
            });
        };
        out.push(Lexed { token, column });
        i = next;
    }
    Ok(out)
}

/// The operator or punctuation `rest` starts with, and its width.
fn symbol(rest: &[char]) -> Option<(Token, usize)> {
    const TWO: [(&str, Token); 6] = [
        ("&&", Token::And),
        ("||", Token::Or),
        ("==", Token::Op(Op::Eq)),
        ("!=", Token::Op(Op::Ne)),
        (">=", Token::Op(Op::Ge)),
        ("<=", Token::Op(Op::Le)),
    ];
    if let [a, b, ..] = rest {
        for (text, token) in TWO {
            if text.chars().eq([*a, *b]) {
                return Some((token, 2));
            }
        }
    }
    let token = match rest.first()? {
        '=' => Token::Op(Op::Eq),
        '>' => Token::Op(Op::Gt),
        '<' => Token::Op(Op::Lt),
        '!' => Token::Not,
        '(' => Token::Open,
        ')' => Token::Close,
        '+' => Token::Plus,
        '-' if !rest.get(1).is_some_and(|d| d.is_ascii_digit()) => Token::Minus,
        _ => return None,
    };
    Some((token, 1))
}

/// The quoted string starting at `start` (its quote, ' or "), with `\n`,
/// `\t` and `\<any>` escapes; and where the text after it starts.
fn string(chars: &[char], start: usize) -> Result<(String, usize), FilterError> {
    let quote = chars[start];
    let unterminated = |column: usize| FilterError {
        column,
        message: "unterminated string".into(),
    };
    let mut text = String::new();
    let mut i = start + 1;
    loop {
        match chars.get(i) {
            None => return Err(unterminated(start + 1)),
            Some('\\') => {
                let escaped = chars.get(i + 1).ok_or_else(|| unterminated(i + 1))?;
                text.push(match escaped {
                    'n' => '\n',
                    't' => '\t',
                    other => *other,
                });
                i += 2;
            }
            Some(ch) if *ch == quote => return Ok((text, i + 1)),
            Some(ch) => {
                text.push(*ch);
                i += 1;
            }
        }
    }
}

/// The end of the run of characters from `from` that `take` accepts.
fn scan(chars: &[char], from: usize, take: impl Fn(char) -> bool) -> usize {
    let mut end = from;
    while chars.get(end).is_some_and(|c| take(*c)) {
        end += 1;
    }
    end
}

/// A word: a keyword (either case) or a name.
fn word(word: String) -> Token {
    match word.as_str() {
        "and" | "AND" => Token::And,
        "or" | "OR" => Token::Or,
        "not" | "NOT" => Token::Not,
        "contains" | "CONTAINS" => Token::Op(Op::Contains),
        "matches" | "MATCHES" => Token::Op(Op::Matches),
        _ => Token::Name(word),
    }
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
        // The test under the last level is a call too: MAX_DEPTH levels of
        // '!' and '(' make MAX_DEPTH + 1 calls.
        if self.depth > MAX_DEPTH + 1 {
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
        if op == Op::Matches {
            let Literal::Text(text) = &value else {
                return self.error_at(column, "'matches' needs a string");
            };
            let words = match_words(text).len();
            if words == 0 {
                return self.error_at(value_column, "'matches' needs a word to look for");
            }
            if words > MAX_MATCH_WORDS {
                return self.error_at(
                    value_column,
                    &format!("'matches' takes at most {MAX_MATCH_WORDS} words, not {words}"),
                );
            }
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
        if let Some(message) = type_mismatch(&name, &field, op, &value) {
            // `failure_count > "x"` would be compared by SQLite's type
            // order and quietly match nothing (or everything).
            let at = if matches!(op, Op::Contains | Op::Matches) {
                column
            } else {
                value_column
            };
            return self.error_at(at, &message);
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

/// Why `field op value` compares values of different types, if it does:
/// numbers with numbers, flags with true/false, and `contains` on text.
/// item_data paths are untyped and take anything.
fn type_mismatch(name: &str, field: &Field, op: Op, value: &Literal) -> Option<String> {
    let numeric = matches!(
        field,
        Field::Column(Column::FailureCount | Column::Family)
            | Field::Attempt {
                column: AttemptColumn::ExitCode,
                ..
            }
    );
    let flag = matches!(field, Field::Column(c) if c.is_bool());
    let text = matches!(
        field,
        Field::Column(Column::JobId | Column::ItemId | Column::ErrorSignature | Column::Category)
            | Field::Attempt {
                column: AttemptColumn::ErrorType
                    | AttemptColumn::ErrorMessage
                    | AttemptColumn::AgentId
                    | AttemptColumn::StepFailed,
                ..
            }
    );
    let ordering = matches!(op, Op::Lt | Op::Le | Op::Gt | Op::Ge);
    if let (Field::Column(Column::Category), Op::Eq | Op::Ne, Literal::Text(text)) =
        (field, op, value)
    {
        // The categories are a closed set: a misspelt one would quietly
        // match nothing (or, with !=, everything).
        if text.parse::<crate::Category>().is_err() {
            return Some(format!(
                "{name} is one of {}, not {text:?}",
                crate::Category::names()
            ));
        }
    }
    if text && ordering && matches!(value, Literal::Integer(_) | Literal::Real(_)) {
        // `error_message > 5` would compare text with "5" letter by letter
        // and match nearly everything; `item_id == 42` (an id that is a
        // number) stays.
        return Some(format!(
            "{name} is text: order it against a quoted string, not a number"
        ));
    }
    if let (Field::Data(_), true, Literal::Text(text)) = (field, ordering, value) {
        // item_data is untyped, and SQLite orders every number before every
        // string: `item.priority >= "5"` matched no item whose priority is
        // the number 7, and on a string field it would order "10" before
        // "5". A quoted number in an ordering comparison is taken for a
        // mistake; equality with one stays (`item.zip == "02134"`).
        if let Some(number) = parse_number(text) {
            let unquoted = match number {
                Literal::Integer(n) => n.to_string(),
                _ => text.clone(),
            };
            return Some(format!(
                "{name} is ordered against the string {text:?}, which matches no JSON number \
                 (every number sorts before every string): write {unquoted} without quotes \
                 to compare numbers"
            ));
        }
    }
    if matches!(op, Op::Contains | Op::Matches) && (numeric || flag) {
        let op = if op == Op::Contains {
            "contains"
        } else {
            "matches"
        };
        return Some(format!("'{op}' needs a text field; {name} is not one"));
    }
    match value {
        Literal::Text(_) | Literal::Bool(_) if numeric => Some(format!(
            "{name} is a number: compare it with a number (no quotes)"
        )),
        Literal::Text(_) | Literal::Integer(_) | Literal::Real(_) | Literal::Null if flag => Some(
            format!("{name} is true or false: compare it with true or false"),
        ),
        _ => None,
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

/// A duration as filters write it (`30s`, `15m`, `12h`, `7d`, `2w`: a whole
/// number and one unit) in seconds; `None` for anything else or a number
/// too large. The sign is the caller's to check. `dlq check` and `dlq
/// retention set --max-age` take their durations the same way.
pub fn parse_duration(text: &str) -> Option<i64> {
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

/// `text` as a string literal of the filter language, the one way to put a
/// value into a filter (the dashboard's links, suggested commands): only
/// `\\`, `"`, newline and tab are escaped, as [`parse`] reads them back,
/// and every other character (controls included) stands as itself, so
/// parsing the literal gives `text` back exactly.
pub fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for ch in text.chars() {
        match ch {
            '\\' => quoted.push_str("\\\\"),
            '"' => quoted.push_str("\\\""),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn error(input: &str) -> FilterError {
        parse(input).expect_err(input)
    }

    #[test]
    fn fifty_levels_are_allowed_and_fifty_one_are_not() {
        let nested = |n: usize| format!("{}item_id == 'a'{}", "(".repeat(n), ")".repeat(n));
        assert!(parse(&nested(MAX_DEPTH)).is_ok());
        assert!(parse(&format!("{}reprocess_eligible", "!".repeat(MAX_DEPTH))).is_ok());
        let e = error(&nested(MAX_DEPTH + 1));
        assert!(e.message.contains("nested more than 50"), "{e}");
    }

    #[test]
    fn values_of_the_wrong_type_are_errors_at_their_column() {
        let e = error(r#"failure_count > "x""#);
        assert_eq!(e.column, 17, "{e}");
        assert!(e.message.contains("failure_count is a number"), "{e}");
        let e = error("exit_code == true");
        assert!(e.message.contains("exit_code is a number"), "{e}");
        let e = error(r#"reprocess_eligible == "yes""#);
        assert!(e.message.contains("true or false"), "{e}");
        let e = error("error_message > 5");
        assert!(e.message.contains("error_message is text"), "{e}");
        assert_eq!(e.column, 17, "{e}");
        // A quoted number ordered against an untyped item_data path would
        // match no JSON number: said, with the number to write instead.
        let e = error(r#"item.priority >= "5""#);
        assert_eq!(e.column, 18, "{e}");
        assert!(e.message.contains("item.priority"), "{e}");
        assert!(e.message.contains("write 5 without quotes"), "{e}");
        let e = error(r#"item.a.b < '2.5'"#);
        assert!(e.message.contains("item.a.b"), "{e}");
        let e = error(r#"item.a == 1 && failure_count contains "1""#);
        assert_eq!(e.column, 16, "{e}");
        assert!(e.message.contains("'contains' needs a text field"), "{e}");
        // What stays legal: numbers, null exit codes, untyped item_data.
        for ok in [
            "failure_count >= 3",
            "failure_count > 1.5",
            "exit_code == null",
            "last.exit_code != 0",
            "reprocess_eligible == false",
            r#"item.priority == "high""#,
            r#"item.zip == "02134""#,
            r#"item.priority != "5""#,
            r#"item.name > "m""#,
            r#"item.version >= "1.2.3""#,
            "item.priority > 3",
            "item_id == 42",
            r#"error_message > "m""#,
        ] {
            parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
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
        let e = error("error_message matches '  '");
        assert_eq!(e.column, 23, "{e}");
        assert!(e.message.contains("needs a word"), "{e}");
        assert!(error("error_message matches 5")
            .message
            .contains("'matches' needs a string"));
        assert!(error("exit_code matches 'x'")
            .message
            .contains("'matches' needs a text field"));
        let many = vec!["w"; MAX_MATCH_WORDS + 1].join(" ");
        assert!(error(&format!("error_message matches '{many}'"))
            .message
            .contains("at most 32 words"));
        assert!(parse("error_message MATCHES 'a b' && last.error_message matches \"c\"").is_ok());
    }
}
