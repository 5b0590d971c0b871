//! Reading legacy-shape items from a stream (`dlq add`, and the `dlq export`
//! JSON files an import reads): one item, a JSON array of them, or JSON
//! lines (any whitespace-separated sequence of objects). Items are handed
//! over one at a time, so input of any size is read in flat memory.

pub use super::MAX_ITEM_BYTES;
use crate::error::{Error, Result};
use crate::model::DeadLetteredItem;
use serde::de::{DeserializeSeed, Error as _, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::io::{BufRead, BufReader, Read};

/// Reads every item from `reader` and gives each to `sink` with its 1-based
/// position. A malformed item stops the read with an error naming `source`
/// and the position.
pub fn read_items<R: Read>(
    reader: R,
    source: &str,
    mut sink: impl FnMut(usize, DeadLetteredItem) -> Result<()>,
) -> Result<usize> {
    read_raw_items(reader, source, |position, raw| {
        let item = DeadLetteredItem::from_raw(raw).map_err(|reason| {
            Error::invalid_item(format!("{source}: item {position}"), reason.to_string())
        })?;
        sink(position, item)
    })
}

/// Like [`read_items`], but hands over each element unparsed, so a caller
/// can skip an item of the wrong shape and go on. JSON that is not well
/// formed still ends the read with an error naming the position.
pub fn read_raw_items<R: Read>(
    reader: R,
    source: &str,
    mut parse_and_sink: impl FnMut(usize, &RawValue) -> Result<()>,
) -> Result<usize> {
    // Bytes read since the last item was handed over: one item may not
    // take more than MAX_ITEM_BYTES (a 300 MB item took 2.1 GB of memory).
    let since_item = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let reader = Limited {
        inner: reader,
        since_item: std::rc::Rc::clone(&since_item),
    };
    let mut parse_and_sink = |position: usize, raw: &RawValue| {
        since_item.set(0);
        parse_and_sink(position, raw)
    };
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let first = first_significant_byte(&mut reader).map_err(|e| Error::io(source, e))?;
    match first {
        None => Ok(0),
        Some(b'[') => {
            let mut de = serde_json::Deserializer::from_reader(reader);
            let mut failure = None;
            let seed = ArraySeed {
                sink: &mut parse_and_sink,
                failure: &mut failure,
            };
            let result = seed
                .deserialize(&mut de)
                .and_then(|count| de.end().map(|_| count));
            match (result, failure) {
                (_, Some(error)) => Err(error),
                (Ok(count), None) => Ok(count),
                (Err(e), None) => Err(Error::invalid_item(
                    source,
                    format!("not a valid JSON array: {e}"),
                )),
            }
        }
        Some(_) => {
            let stream = serde_json::Deserializer::from_reader(reader).into_iter::<Box<RawValue>>();
            let mut count = 0;
            for raw in stream {
                let position = count + 1;
                let raw = raw.map_err(|e| {
                    Error::invalid_item(
                        format!("{source}: item {position}"),
                        format!("not valid JSON: {e}"),
                    )
                })?;
                parse_and_sink(position, &raw)?;
                count = position;
            }
            Ok(count)
        }
    }
}

/// A reader that fails once more than [`MAX_ITEM_BYTES`] were read since
/// the counter was last reset (when an item was handed over).
struct Limited<R> {
    inner: R,
    since_item: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let total = self.since_item.get() + n as u64;
        self.since_item.set(total);
        if total > MAX_ITEM_BYTES + (1 << 16) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("an item is larger than {} MiB", MAX_ITEM_BYTES >> 20),
            ));
        }
        Ok(n)
    }
}

fn first_significant_byte<R: BufRead>(reader: &mut R) -> std::io::Result<Option<u8>> {
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(None);
        }
        match buffer.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(index) => return Ok(Some(buffer[index])),
            None => {
                let len = buffer.len();
                reader.consume(len);
            }
        }
    }
}

type RawSink<'a> = dyn FnMut(usize, &RawValue) -> Result<()> + 'a;

/// Walks a top-level array element by element, handing each to the sink.
struct ArraySeed<'s, 'a> {
    sink: &'s mut RawSink<'a>,
    failure: &'s mut Option<Error>,
}

impl<'de> DeserializeSeed<'de> for ArraySeed<'_, '_> {
    type Value = usize;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> std::result::Result<usize, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ArraySeed<'_, '_> {
    type Value = usize;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<usize, A::Error> {
        let mut count = 0;
        while let Some(raw) = seq.next_element::<Box<RawValue>>()? {
            count += 1;
            if let Err(error) = (self.sink)(count, &raw) {
                *self.failure = Some(error);
                return Err(A::Error::custom("stopped"));
            }
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ITEM: &str = r#"{"item_id":"ID","item_data":{},"first_attempt":"2025-01-01T00:00:00Z","last_attempt":"2025-01-01T00:00:00Z","failure_count":1,"failure_history":[],"error_signature":"s","reprocess_eligible":true,"manual_review_required":false}"#;

    fn ids(input: &str) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        read_items(input.as_bytes(), "input", |_, item| {
            ids.push(item.item_id);
            Ok(())
        })?;
        Ok(ids)
    }

    #[test]
    fn single_array_and_lines() {
        assert_eq!(ids(&ITEM.replace("ID", "a")).unwrap(), ["a"]);
        let array = format!(
            " [ {}, {} ] ",
            ITEM.replace("ID", "a"),
            ITEM.replace("ID", "b")
        );
        assert_eq!(ids(&array).unwrap(), ["a", "b"]);
        let lines = format!("{}\n{}\n", ITEM.replace("ID", "a"), ITEM.replace("ID", "b"));
        assert_eq!(ids(&lines).unwrap(), ["a", "b"]);
        assert!(ids("  \n").unwrap().is_empty());
    }

    #[test]
    fn errors_name_the_position() {
        let lines = format!("{}\n{{\"item_id\": 1}}\n", ITEM);
        let err = ids(&lines).unwrap_err().to_string();
        assert!(err.starts_with("input: item 2"), "{err}");
        let array = format!("[{}, 5]", ITEM);
        let err = ids(&array).unwrap_err().to_string();
        assert!(err.starts_with("input: item 2"), "{err}");
        let err = ids(&format!("[{}", ITEM)).unwrap_err().to_string();
        assert!(err.contains("not a valid JSON array"), "{err}");
        assert!(ids("{\"a\"").is_err());
    }
}
