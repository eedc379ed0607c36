//! Entry ids as hash keys: [`IdMap`] (id → a value, such as an entry's
//! position) and [`IdSet`].
//!
//! Entry ids are 8 random lowercase hex digits (see `format`), so such an
//! id is kept as the number it spells: no heap copy of the id per entry and
//! a cheap hash, which matters for a session of 100,000 entries (the index
//! of the tree, the writer's set of known ids). Any other id (a file written
//! by another producer, a hand-edited one) is kept as a string beside them,
//! so every id still works. The hash of the numbers is not keyed: a file
//! made to collide costs time, never correctness.
//!
//! This module owns only the keys; it must not know what entries hold,
//! files or the tree's rules.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hex id as the number it spells: exactly 8 digits `0-9a-f` (upper case
/// is kept as a string, so `"ABCD0123"` and `"abcd0123"` stay two ids).
fn hex_key(id: &str) -> Option<u32> {
    let bytes = id.as_bytes();
    if bytes.len() != 8 {
        return None;
    }
    let mut value = 0u32;
    for b in bytes {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        value = (value << 4) | u32::from(digit);
    }
    Some(value)
}

/// Hashes a `u32` key by one multiplication (the keys are random already;
/// the multiplication spreads ids that are not).
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        let x = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 32);
    }
}

type KeyMap<V> = HashMap<u32, V, BuildHasherDefault<KeyHasher>>;

/// Entry id → `V`.
#[derive(Debug, Clone)]
pub(crate) struct IdMap<V> {
    hex: KeyMap<V>,
    other: HashMap<String, V>,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        Self {
            hex: KeyMap::default(),
            other: HashMap::new(),
        }
    }
}

impl<V> IdMap<V> {
    /// Room for `n` ids without rehashing.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            hex: KeyMap::with_capacity_and_hasher(n, BuildHasherDefault::default()),
            other: HashMap::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.hex.len() + self.other.len()
    }

    pub(crate) fn get(&self, id: &str) -> Option<&V> {
        match hex_key(id) {
            Some(key) => self.hex.get(&key),
            None => self.other.get(id),
        }
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.get(id).is_some()
    }

    /// Sets the value of `id`; returns the one it replaces.
    pub(crate) fn insert(&mut self, id: &str, value: V) -> Option<V> {
        match hex_key(id) {
            Some(key) => self.hex.insert(key, value),
            None => self.other.insert(id.to_owned(), value),
        }
    }

    /// The same ids, without their values.
    pub(crate) fn to_set(&self) -> IdSet {
        IdSet(IdMap {
            hex: self.hex.keys().map(|k| (*k, ())).collect(),
            other: self.other.keys().map(|k| (k.clone(), ())).collect(),
        })
    }
}

/// A set of entry ids.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdSet(IdMap<()>);

impl IdSet {
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    pub(crate) fn insert(&mut self, id: &str) {
        self.0.insert(id, ());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_other_ids_are_kept_apart_and_found() {
        let mut map = IdMap::default();
        for (i, id) in [
            "0a1b2c3d",
            "ABCDEF01",
            "abcdef01",
            "u1",
            "0a1b2c3",
            "0a1b2c3dd",
            "ffffffff",
            "00000000",
        ]
        .iter()
        .enumerate()
        {
            assert_eq!(map.insert(id, i), None, "{id}");
        }
        assert_eq!(map.len(), 8);
        assert_eq!(map.get("0a1b2c3d"), Some(&0));
        assert_eq!(map.get("ABCDEF01"), Some(&1));
        assert_eq!(map.get("abcdef01"), Some(&2));
        assert_eq!(map.get("u1"), Some(&3));
        assert_eq!(map.get("0a1b2c3"), Some(&4));
        assert_eq!(map.get("ffffffff"), Some(&6));
        assert_eq!(map.get("00000000"), Some(&7));
        assert_eq!(map.get("0a1b2c3e"), None);
        assert_eq!(map.get("Abcdef01"), None);
        assert_eq!(map.insert("0a1b2c3d", 9), Some(0));
        let set = map.to_set();
        for id in [
            "0a1b2c3d",
            "ABCDEF01",
            "abcdef01",
            "u1",
            "0a1b2c3",
            "0a1b2c3dd",
            "ffffffff",
            "00000000",
        ] {
            assert!(set.contains(id), "{id}");
        }
        assert!(!set.contains("x") && !set.contains("0a1b2c3e"));
        let mut set = IdSet::default();
        set.insert("zz");
        set.insert("0000abcd");
        assert!(set.contains("zz") && set.contains("0000abcd") && !set.contains("0000abce"));
    }
}
