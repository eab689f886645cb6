//! `.timeindex`: the sparse time index of one segment.
//!
//! Layout: packed 12-byte entries `[i64 max timestamp BE][u32 relative offset BE]`, timestamps
//! strictly increasing, offsets non-decreasing. An entry `(t, r)` says "every batch up to and
//! including the one at relative offset `r` has max timestamp <= t, and `t` is reached there".
//! Entries are added beside offset-index entries when the running max timestamp grew, and once
//! more when the segment is sealed. To find the first batch with max timestamp >= T, start at the
//! last entry with `t < T` (everything up to it is older) and scan forward.

use crate::types::{RelativeOffset, TimestampMs};

/// Bytes per entry.
pub const ENTRY_BYTES: usize = 12;

/// The in-memory time index of one segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<(TimestampMs, RelativeOffset)>,
}

impl TimeIndex {
    /// Adds an entry if `ts` is newer than the last one.
    pub fn maybe_push(&mut self, ts: TimestampMs, rel: RelativeOffset) {
        if let Some(&(last_ts, last_rel)) = self.entries.last() {
            assert!(rel >= last_rel, "time index offsets must not go back");
            if ts <= last_ts {
                return;
            }
        }
        self.entries.push((ts, rel));
    }

    /// The last entry whose timestamp is below `ts`: everything up to it is older than `ts`.
    pub fn last_older_than(&self, ts: TimestampMs) -> Option<(TimestampMs, RelativeOffset)> {
        let n = self.entries.partition_point(|&(t, _)| t < ts);
        n.checked_sub(1).map(|i| self.entries[i])
    }

    /// The last entry (the segment's max timestamp once sealed).
    pub fn last(&self) -> Option<(TimestampMs, RelativeOffset)> {
        self.entries.last().copied()
    }

    /// Drops entries at or past `rel` (after cutting the log).
    pub fn truncate_from(&mut self, rel: RelativeOffset) {
        self.entries.retain(|&(_, r)| r < rel);
    }

    /// Heap bytes held (capacity, not length: what the allocator really gave us).
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<(TimestampMs, RelativeOffset)>()
    }

    /// Every entry, in order (timestamps increasing, offsets non-decreasing).
    pub fn entries(&self) -> &[(TimestampMs, RelativeOffset)] {
        &self.entries
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The file bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * ENTRY_BYTES);
        for &(ts, rel) in &self.entries {
            out.extend_from_slice(&ts.0.to_be_bytes());
            out.extend_from_slice(&rel.0.to_be_bytes());
        }
        out
    }

    /// Parses file bytes; `None` if malformed or referencing offsets at/after `rel_end`.
    pub fn decode(bytes: &[u8], rel_end: u64) -> Option<TimeIndex> {
        if !bytes.len().is_multiple_of(ENTRY_BYTES) {
            return None;
        }
        let mut index = TimeIndex::default();
        for chunk in bytes.chunks_exact(ENTRY_BYTES) {
            let ts = TimestampMs(i64::from_be_bytes(chunk[..8].try_into().expect("8 bytes")));
            let rel = RelativeOffset(u32::from_be_bytes(chunk[8..].try_into().expect("4 bytes")));
            let ordered = index.last().is_none_or(|(t, r)| ts > t && rel >= r);
            if !ordered || u64::from(rel.0) >= rel_end {
                return None;
            }
            index.entries.push((ts, rel));
        }
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_growing_timestamps_and_finds_older() {
        let mut t = TimeIndex::default();
        t.maybe_push(TimestampMs(100), RelativeOffset(0));
        t.maybe_push(TimestampMs(90), RelativeOffset(3));
        t.maybe_push(TimestampMs(200), RelativeOffset(7));
        assert_eq!(t.len(), 2);
        assert_eq!(t.last_older_than(TimestampMs(100)), None);
        assert_eq!(
            t.last_older_than(TimestampMs(101)),
            Some((TimestampMs(100), RelativeOffset(0)))
        );
        assert_eq!(
            t.last_older_than(TimestampMs(999)),
            Some((TimestampMs(200), RelativeOffset(7)))
        );
    }

    #[test]
    fn encode_decode_and_reject_damage() {
        let mut t = TimeIndex::default();
        t.maybe_push(TimestampMs(5), RelativeOffset(0));
        t.maybe_push(TimestampMs(9), RelativeOffset(4));
        let bytes = t.encode();
        assert_eq!(TimeIndex::decode(&bytes, 5), Some(t.clone()));
        assert_eq!(TimeIndex::decode(&bytes, 4), None);
        assert_eq!(TimeIndex::decode(&bytes[..13], 5), None);
        let mut t2 = t.clone();
        t2.truncate_from(RelativeOffset(4));
        assert_eq!(t2.len(), 1);
    }
}
