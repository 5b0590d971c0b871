//! Any text through the filter parser: an expression or an error with a
//! column inside the text, never a panic; an expression compiles to SQL.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match dlqlite::filter::parse(text) {
            Ok(expr) => {
                let _ = expr.to_sql(dlqlite::Timestamp::now());
            }
            Err(e) => assert!(e.column >= 1 && e.column <= text.chars().count() + 1),
        }
    }
});
