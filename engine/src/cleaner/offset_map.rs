//! [`OffsetMap`]: the last offset of every key in the dirty part of a log, in fixed memory
//! (Kafka's `SkimpyOffsetMap`).
//!
//! Keys are not stored, only a 128-bit hash of each (xxh3-128): two keys collide with a
//! probability of about `n² / 2^129`, negligible for any map that fits in memory (Kafka relies
//! on MD5 the same way). A collision would make the older key look superseded, so the hash
//! must be wide; 64 bits would not do at billions of keys.
//!
//! Layout: open addressing with linear probing over `[hash_hi, hash_lo, offset + 1]` slots
//! (24 bytes), `offset + 1 == 0` marking a free slot. The map is full at
//! [`LOAD_FACTOR_PERCENT`] of its slots, so a probe always ends at a free slot quickly.

use crate::types::Offset;

/// Bytes per slot.
pub const SLOT_BYTES: usize = 24;
/// Fill limit in percent of the slots (Kafka's `log.cleaner.io.buffer.load.factor` is 0.9).
pub const LOAD_FACTOR_PERCENT: usize = 90;
/// Fewest slots a map has, however small its budget.
const SLOTS_MIN: usize = 64;

/// Key hash → latest offset, bounded in memory.
#[derive(Debug)]
pub struct OffsetMap {
    slots: Vec<[u64; 3]>,
    len: usize,
    limit: usize,
}

/// The 128-bit hash a key is stored under.
pub fn key_hash(key: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(key)
}

impl OffsetMap {
    /// A map using at most `bytes` of memory (and at least [`SLOTS_MIN`] slots).
    pub fn with_memory(bytes: usize) -> Self {
        let slots = (bytes / SLOT_BYTES).max(SLOTS_MIN);
        OffsetMap {
            slots: vec![[0; 3]; slots],
            len: 0,
            limit: slots * LOAD_FACTOR_PERCENT / 100,
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most keys the map takes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Heap bytes of the slot table.
    pub fn heap_bytes(&self) -> usize {
        self.slots.len() * SLOT_BYTES
    }

    /// Whether `keys` more distinct keys would certainly fit.
    pub fn has_room_for(&self, keys: usize) -> bool {
        self.len + keys <= self.limit
    }

    /// Records `offset` as the latest offset of `key` (offsets must not go back per key).
    /// Panics if the map is full: check [`Self::has_room_for`] first.
    pub fn insert(&mut self, key: &[u8], offset: Offset) {
        assert!(offset.0 >= 0);
        let hash = key_hash(key);
        let i = self.find(hash);
        let slot = &mut self.slots[i];
        if slot[2] == 0 {
            assert!(self.len < self.limit, "offset map full");
            self.len += 1;
            slot[0] = (hash >> 64) as u64;
            slot[1] = hash as u64;
        }
        debug_assert!(slot[2] <= offset.0 as u64 + 1, "offsets of a key only grow");
        slot[2] = offset.0 as u64 + 1;
    }

    /// The latest offset recorded for `key`.
    pub fn get(&self, key: &[u8]) -> Option<Offset> {
        let slot = self.slots[self.find(key_hash(key))];
        (slot[2] != 0).then(|| Offset(slot[2] as i64 - 1))
    }

    /// The slot holding `hash`, or the free slot where it would go.
    fn find(&self, hash: u128) -> usize {
        let (hi, lo) = ((hash >> 64) as u64, hash as u64);
        let n = self.slots.len();
        let mut i = (lo % n as u64) as usize;
        loop {
            let slot = &self.slots[i];
            if slot[2] == 0 || (slot[0] == hi && slot[1] == lo) {
                return i;
            }
            i = (i + 1) % n; // ends: the load factor leaves free slots
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_offset_wins_and_missing_keys_are_none() {
        let mut map = OffsetMap::with_memory(4096);
        map.insert(b"a", Offset(1));
        map.insert(b"b", Offset(2));
        map.insert(b"a", Offset(7));
        assert_eq!(map.get(b"a"), Some(Offset(7)));
        assert_eq!(map.get(b"b"), Some(Offset(2)));
        assert_eq!(map.get(b"c"), None);
        assert_eq!(map.get(b""), None);
        map.insert(b"", Offset(0));
        assert_eq!(
            map.get(b""),
            Some(Offset(0)),
            "offset 0 and the empty key are values"
        );
        assert_eq!(map.len(), 3);
    }

    #[test]
    fn fills_to_the_load_factor_and_no_further() {
        let mut map = OffsetMap::with_memory(100 * SLOT_BYTES);
        assert_eq!(map.limit(), 90);
        for i in 0..90u32 {
            assert!(map.has_room_for(1));
            map.insert(&i.to_be_bytes(), Offset(i64::from(i)));
        }
        assert!(!map.has_room_for(1));
        map.insert(&5u32.to_be_bytes(), Offset(100)); // an existing key still updates
        for i in 0..90u32 {
            let want = if i == 5 { 100 } else { i64::from(i) };
            assert_eq!(map.get(&i.to_be_bytes()), Some(Offset(want)));
        }
        assert_eq!(map.heap_bytes(), 100 * SLOT_BYTES);
    }

    #[test]
    #[should_panic(expected = "offset map full")]
    fn inserting_past_the_limit_is_a_bug() {
        let mut map = OffsetMap::with_memory(0);
        for i in 0..=SLOTS_MIN as u32 {
            map.insert(&i.to_be_bytes(), Offset(0));
        }
    }
}
