//! Column lists read by position. A row read by column name looks the name
//! up among the statement's columns for every cell, too slow for scans over
//! every item or attempt; a bare index is free but silently reads the wrong
//! column once the SELECT changes. [`columns!`] gives the SELECT's column
//! list and each column's index from one definition, so they cannot
//! disagree.

/// `columns! { mod name { CONST = "sql expression", ... } }` declares the
/// module `name` with `LIST`, the expressions joined by ", " for a SELECT,
/// and for each column a `usize` const: its index in `LIST`. A column
/// written `CONST = "sql" pg "other"` reads `other` on PostgreSQL:
/// `PG_LIST` is the list with those.
macro_rules! columns {
    (
        $(#[$meta:meta])*
        mod $name:ident {
            $first:ident = $first_sql:literal $(pg $first_pg:literal)?
            $(, $column:ident = $sql:literal $(pg $pg:literal)?)* $(,)?
        }
    ) => {
        $(#[$meta])*
        mod $name {
            /// The columns, in index order, for a SELECT.
            pub(super) const LIST: &str = concat!($first_sql $(, ", ", $sql)*);
            /// [`LIST`] as PostgreSQL reads it.
            #[allow(dead_code)]
            pub(super) const PG_LIST: &str = concat!(
                $crate::store::columns::pick!($first_sql $(, $first_pg)?)
                $(, ", ", $crate::store::columns::pick!($sql $(, $pg)?))*
            );
            /// The list as `backend` reads it.
            #[allow(dead_code)]
            pub(super) fn list(backend: $crate::store::Backend) -> &'static str {
                match backend {
                    $crate::store::Backend::Sqlite => LIST,
                    $crate::store::Backend::Postgres => PG_LIST,
                }
            }
            // Variants count from 0 in the order of LIST: each one's value
            // is its column's index.
            #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
            enum Index {
                $first,
                $($column,)*
            }
            pub(super) const $first: usize = Index::$first as usize;
            $(pub(super) const $column: usize = Index::$column as usize;)*
        }
    };
}
pub(super) use columns;

/// The PostgreSQL form of a column when it has one (for [`columns!`]).
macro_rules! pick {
    ($sql:literal) => {
        $sql
    };
    ($sql:literal, $pg:literal) => {
        $pg
    };
}
pub(super) use pick;

/// `concat!` that takes `&str` constants such as a [`columns!`] `LIST`, not
/// only literals: a statement's SQL built at compile time. Formatting it
/// for every statement run instead cost 1.7% more instructions on an
/// export, which loads each item with three of them.
macro_rules! sql {
    ($($part:expr),+ $(,)?) => {{
        const PARTS: &[&str] = &[$($part),+];
        const BYTES: [u8; $crate::store::columns::total_len(PARTS)] =
            $crate::store::columns::join(PARTS);
        const SQL: &str = match std::str::from_utf8(&BYTES) {
            Ok(sql) => sql,
            Err(_) => panic!("the parts are str, so their bytes are UTF-8"),
        };
        SQL
    }};
}
pub(super) use sql;

/// The length of `parts` joined (for [`sql!`]).
pub(super) const fn total_len(parts: &[&str]) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < parts.len() {
        len += parts[i].len();
        i += 1;
    }
    len
}

/// The bytes of `parts` joined; `N` is their [`total_len`] (for [`sql!`]).
pub(super) const fn join<const N: usize>(parts: &[&str]) -> [u8; N] {
    let mut out = [0; N];
    let mut at = 0;
    let mut i = 0;
    while i < parts.len() {
        let bytes = parts[i].as_bytes();
        let mut j = 0;
        while j < bytes.len() {
            out[at] = bytes[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    out
}
