//! The legacy `error_type` field, both ways: externally tagged, so a unit
//! variant is a bare name and `CommandFailed` an object with one key. Any
//! name reads, and any form beyond the writer's own is kept as written.

use crate::model::{compact_raw, error_types, ErrorType};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;

/// Why an `error_type` did not read.
#[derive(Debug, thiserror::Error)]
pub enum ErrorTypeError {
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    #[error("expected a name or an object with one key")]
    Shape,
}

impl ErrorType {
    /// Reads any legacy error type: a bare name or an object with one key.
    pub fn from_raw(raw: &RawValue) -> Result<Self, ErrorTypeError> {
        let value: serde_json::Value =
            serde_json::from_str(raw.get()).map_err(ErrorTypeError::Json)?;
        match value {
            serde_json::Value::String(name) => Ok(ErrorType::named(name)),
            serde_json::Value::Object(map) if map.len() == 1 => {
                let Some((name, inner)) = map.into_iter().next() else {
                    return Err(ErrorTypeError::Shape);
                };
                let exit_code = inner.get("exit_code").and_then(|code| code.as_i64());
                // The current writer's only struct form is {"CommandFailed": {"exit_code": N}};
                // anything else keeps its JSON so it is written back as it was.
                let plain = name == error_types::COMMAND_FAILED
                    && exit_code.is_some()
                    && inner.as_object().is_some_and(|o| o.len() == 1);
                Ok(ErrorType {
                    name,
                    exit_code,
                    raw: if plain {
                        None
                    } else {
                        Some(compact_raw(raw.get()).map_err(ErrorTypeError::Json)?)
                    },
                })
            }
            _ => Err(ErrorTypeError::Shape),
        }
    }

    /// The raw JSON text of this error type, as written to a legacy file.
    pub fn to_json_text(&self) -> String {
        if let Some(raw) = &self.raw {
            return raw.get().to_string();
        }
        let value = match self.exit_code {
            Some(code) => serde_json::json!({ self.name.as_str(): {"exit_code": code} }),
            None => serde_json::Value::String(self.name.clone()),
        };
        value.to_string()
    }
}

impl Serialize for ErrorType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.raw {
            Some(raw) => raw.serialize(serializer),
            None => match self.exit_code {
                Some(code) => {
                    let mut map = serializer.serialize_map(Some(1))?;
                    map.serialize_entry(&self.name, &ExitCode { exit_code: code })?;
                    map.end()
                }
                None => serializer.serialize_str(&self.name),
            },
        }
    }
}

#[derive(Serialize)]
struct ExitCode {
    exit_code: i64,
}
