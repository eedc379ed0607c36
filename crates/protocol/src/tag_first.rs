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
        // Keys and tags are borrowed from the input when it allows it (no
        // escapes): no allocation for either on the common path.
        let Some(first) = map.next_key::<Str<'de>>()? else {
            return Err(de::Error::missing_field(T::TAG));
        };
        if first.as_str() == T::TAG {
            let tag: Str<'de> = map.next_value()?;
            return match T::variant(tag.as_str(), MapAccessDeserializer::new(map)) {
                Some(result) => result,
                None => Err(de::Error::unknown_variant(tag.as_str(), T::VARIANTS)),
            };
        }
        let mut object = Map::new();
        object.insert(first.into_owned(), map.next_value::<Value>()?);
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

/// A string read from the input: borrowed when the input holds it as is,
/// owned when it had to be unescaped (or the input is not borrowable).
enum Str<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Str<'_> {
    fn as_str(&self) -> &str {
        match self {
            Str::Borrowed(s) => s,
            Str::Owned(s) => s,
        }
    }

    fn into_owned(self) -> String {
        match self {
            Str::Borrowed(s) => s.to_owned(),
            Str::Owned(s) => s,
        }
    }
}

impl<'de> de::Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(StrVisitor)
    }
}

struct StrVisitor;

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Str<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Str<'de>, E> {
        Ok(Str::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Str<'de>, E> {
        Ok(Str::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Str<'de>, E> {
        Ok(Str::Owned(v))
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
