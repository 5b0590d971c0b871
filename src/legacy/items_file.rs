//! The items file a resumed map phase reads (docs/legacy-format.md, "The
//! items file"): `{"items": [...]}` holding each work item's `item_data`
//! exactly as stored, which the workflow's `json_path` `$.items[*]` walks.
//! Written a work item at a time, so any number of them takes flat memory.

use serde_json::value::RawValue;
use std::io::{Result, Write};

/// Writes an items file to `out`: [`ItemsFileWriter::push`] each work
/// item, then [`ItemsFileWriter::finish`].
pub struct ItemsFileWriter<W: Write> {
    out: W,
    count: usize,
}

impl<W: Write> ItemsFileWriter<W> {
    /// Starts the file.
    pub fn new(mut out: W) -> Result<Self> {
        out.write_all(b"{\"items\": [")?;
        Ok(ItemsFileWriter { out, count: 0 })
    }

    /// Adds one work item (an item's `item_data`).
    pub fn push(&mut self, item_data: &RawValue) -> Result<()> {
        self.out
            .write_all(if self.count == 0 { b"\n  " } else { b",\n  " })?;
        self.out.write_all(item_data.get().as_bytes())?;
        self.count += 1;
        Ok(())
    }

    /// Ends the file and flushes it; returns how many work items it holds.
    pub fn finish(mut self) -> Result<usize> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()?;
        Ok(self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(items: &[&str]) -> String {
        let mut out = Vec::new();
        let mut writer = ItemsFileWriter::new(&mut out).unwrap();
        for item in items {
            writer
                .push(&RawValue::from_string(item.to_string()).unwrap())
                .unwrap();
        }
        assert_eq!(writer.finish().unwrap(), items.len());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn items_as_stored_under_one_key() {
        assert_eq!(file(&[]), "{\"items\": [\n]}\n");
        assert_eq!(
            file(&[r#"{"b":1,"a":2.50}"#, "null"]),
            "{\"items\": [\n  {\"b\":1,\"a\":2.50},\n  null\n]}\n"
        );
        let parsed: serde_json::Value = serde_json::from_str(&file(&["1", "[2]"])).unwrap();
        assert_eq!(parsed, serde_json::json!({"items": [1, [2]]}));
    }
}
