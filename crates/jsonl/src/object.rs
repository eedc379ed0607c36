//! One frame's top-level JSON object, read strictly.
//!
//! Owns [`parse_object`]: the frame must be one JSON object, and no key may
//! be given twice (`{"method":"model/list","method":"fs/writeFile"}`): which
//! of the two would win is not something a host should have to guess, and
//! a check that saw one while the dispatcher ran the other would be a hole.
//! The `id` member is also kept as it was written ([`Object::raw_id`]), so
//! a response can echo it byte for byte. Both front-ends read their frames
//! through here; it must not know what the members mean.

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The member whose text is kept as written.
const ID: &str = "id";

/// A frame's top-level object.
#[derive(Debug)]
pub struct Object {
    /// The members, each key once.
    pub members: Map<String, Value>,
    /// The `id` member exactly as written, when there is one.
    pub raw_id: Option<Box<RawValue>>,
}

/// Why a frame is not one object with unique keys.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// Not JSON at all, or cut off.
    #[error("{0}")]
    Syntax(serde_json::Error),
    /// Valid JSON, but not an object; `found` names what it is.
    #[error("expected a JSON object, found {found}")]
    NotObject { found: &'static str },
    /// A key given twice. `raw_id` is the request's id when it was given
    /// once (so the refusal can be answered to it), else `None`.
    #[error("duplicate key {key:?}")]
    DuplicateKey {
        key: String,
        raw_id: Option<Box<RawValue>>,
    },
}

/// Reads `bytes` as one JSON object whose keys are unique; see the module
/// docs.
pub fn parse_object(bytes: &[u8]) -> Result<Object, ObjectError> {
    let read: Read = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_data() {
            // The visitor saw something other than a map.
            match serde_json::from_slice::<Value>(bytes) {
                Ok(v) => ObjectError::NotObject { found: kind_of(&v) },
                Err(e) => ObjectError::Syntax(e),
            }
        } else {
            ObjectError::Syntax(e)
        }
    })?;
    match read.duplicate {
        None => Ok(Object {
            members: read.members,
            raw_id: read.raw_id,
        }),
        Some(key) => Err(ObjectError::DuplicateKey {
            raw_id: if key == ID { None } else { read.raw_id },
            key,
        }),
    }
}

/// What JSON value `v` is, in words for an error message.
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The whole object is read even after a duplicate, so the id is known
/// wherever it stands.
struct Read {
    members: Map<String, Value>,
    raw_id: Option<Box<RawValue>>,
    duplicate: Option<String>,
}

impl<'de> de::Deserialize<'de> for Read {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ReadVisitor)
    }
}

struct ReadVisitor;

impl<'de> Visitor<'de> for ReadVisitor {
    type Value = Read;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Read, A::Error> {
        let mut read = Read {
            members: Map::new(),
            raw_id: None,
            duplicate: None,
        };
        while let Some(key) = map.next_key::<String>()? {
            if read.members.contains_key(&key) {
                map.next_value::<IgnoredAny>()?;
                read.duplicate.get_or_insert(key);
                continue;
            }
            let value = if key == ID {
                let raw: Box<RawValue> = map.next_value()?;
                let value = serde_json::from_str(raw.get()).map_err(de::Error::custom)?;
                read.raw_id = Some(raw);
                value
            } else {
                map.next_value()?
            };
            read.members.insert(key, value);
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_with_unique_keys_is_read_with_its_id_as_written() {
        let o = parse_object(br#"{"id":1e5,"type":"get_state","n":{"a":1}}"#).unwrap();
        assert_eq!(o.raw_id.unwrap().get(), "1e5");
        assert_eq!(o.members["type"], "get_state");
        assert_eq!(o.members["n"]["a"], 1);
    }

    #[test]
    fn a_key_given_twice_is_refused_and_the_id_kept_wherever_it_stands() {
        for frame in [
            r#"{"id":7,"method":"model/list","method":"fs/writeFile"}"#,
            r#"{"method":"model/list","method":"fs/writeFile","id":7}"#,
        ] {
            match parse_object(frame.as_bytes()) {
                Err(ObjectError::DuplicateKey { key, raw_id }) => {
                    assert_eq!(key, "method");
                    assert_eq!(raw_id.unwrap().get(), "7");
                }
                other => panic!("{frame}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_id_given_twice_has_no_id_to_answer() {
        match parse_object(br#"{"id":1,"id":2,"method":"x"}"#) {
            Err(ObjectError::DuplicateKey { key, raw_id }) => {
                assert_eq!(key, "id");
                assert!(raw_id.is_none());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nested_objects_may_repeat_what_the_top_level_has() {
        // Only the envelope is checked; params are the handler's to read.
        let o = parse_object(br#"{"method":"a","params":{"method":"b"}}"#).unwrap();
        assert_eq!(o.members["params"]["method"], "b");
    }

    #[test]
    fn what_is_not_an_object_says_what_it_is() {
        assert!(matches!(
            parse_object(b"[1,2]"),
            Err(ObjectError::NotObject { found: "an array" })
        ));
        assert!(matches!(
            parse_object(b"\"x\""),
            Err(ObjectError::NotObject { found: "a string" })
        ));
        assert!(matches!(
            parse_object(b"{\"a\":"),
            Err(ObjectError::Syntax(_))
        ));
    }
}
