//! Reading internally tagged enums without buffering when the tag comes
//! first.
//!
//! serde's derived `#[serde(tag = "…")]` deserialisation reads the whole
//! object into an intermediate buffer before it knows the variant; for a
//! session file of 100,000 messages that buffering (twice: the message, then
//! each content block) is most of the time spent loading it. Everything keel
//! writes puts the tag first, so [`deserialize`] reads the first key: when it
//! is the tag, the rest of the object goes straight into the variant's
//! struct; otherwise (a hand-written object, another producer) the object is
//! read as a JSON value first and the variant is read from that, so the tag
//! may stand anywhere, as before.
//!
//! It owns no types: [`message`](crate::message) implements [`TagFirst`] for
//! `Message` and `ContentBlock`.

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

/// An enum read by [`deserialize`].
pub(crate) trait TagFirst: Sized {
    /// The tag's key.
    const TAG: &'static str;
    /// The tags, for the unknown-variant error.
    const VARIANTS: &'static [&'static str];

    /// Reads the variant named `tag` from the rest of the object; `None` for
    /// an unknown tag.
    fn variant<'de, D: Deserializer<'de>>(tag: &str, rest: D) -> Option<Result<Self, D::Error>>;
}

/// Deserialises `T` from an object, without buffering when its tag is the
/// first key.
pub(crate) fn deserialize<'de, T: TagFirst, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_map(TagFirstVisitor(std::marker::PhantomData))
}

struct TagFirstVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: TagFirst> Visitor<'de> for TagFirstVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an object tagged by {:?}", T::TAG)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Err(de::Error::missing_field(T::TAG));
        };
        if first == T::TAG {
            let tag: String = map.next_value()?;
            return match T::variant(&tag, MapAccessDeserializer::new(map)) {
                Some(result) => result,
                None => Err(de::Error::unknown_variant(&tag, T::VARIANTS)),
            };
        }
        let mut object = Map::new();
        object.insert(first, map.next_value::<Value>()?);
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            object.insert(key, value);
        }
        let tag = match object.remove(T::TAG) {
            Some(Value::String(tag)) => tag,
            Some(other) => {
                return Err(de::Error::invalid_type(unexpected(&other), &"a string tag"));
            }
            None => return Err(de::Error::missing_field(T::TAG)),
        };
        match T::variant(&tag, Value::Object(object)) {
            Some(result) => result.map_err(de::Error::custom),
            None => Err(de::Error::unknown_variant(&tag, T::VARIANTS)),
        }
    }
}

fn unexpected(v: &Value) -> de::Unexpected<'_> {
    match v {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(_) => de::Unexpected::Other("a number"),
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}
