//! Any bytes through the legacy item reader: an item or an error, never a
//! panic; and an item that reads must write and read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(item) = dlqlite::DeadLetteredItem::from_json_slice(data) {
        let written = item.to_legacy_json_pretty().expect("an item that read must write");
        let again = dlqlite::DeadLetteredItem::from_json_str(&written).expect("and read back");
        assert_eq!(again.to_legacy_json_pretty().expect("write"), written);
    }
});
