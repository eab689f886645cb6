//! `.index`: the sparse offset index of one segment.
//!
//! Layout: a packed array of 8-byte entries `[u32 relative offset BE][u32 file position BE]`,
//! strictly increasing in both fields. An entry says "the batch whose baseOffset is
//! `segment base + relative offset` starts at `file position`". One entry is added when at least
//! `index.interval.bytes` of log were appended since the previous one (the first batch of a
//! segment always gets one). The file carries no checksum: recovery verifies each entry points
//! inside the log and drops the index if not; lookups verify the batch they land on.

use crate::types::{FilePosition, RelativeOffset};

/// Bytes per entry.
pub const ENTRY_BYTES: usize = 8;

/// The in-memory offset index of one segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<(RelativeOffset, FilePosition)>,
}

impl OffsetIndex {
    /// Adds an entry; both fields must exceed the previous entry's.
    pub fn push(&mut self, rel: RelativeOffset, pos: FilePosition) {
        if let Some(&(last_rel, last_pos)) = self.entries.last() {
            assert!(rel > last_rel, "index offsets must increase");
            assert!(pos > last_pos, "index positions must increase");
        }
        self.entries.push((rel, pos));
    }

    /// The last entry at or below `rel`: where to start scanning for it.
    pub fn lookup(&self, rel: RelativeOffset) -> Option<(RelativeOffset, FilePosition)> {
        let n = self.entries.partition_point(|&(r, _)| r <= rel);
        n.checked_sub(1).map(|i| self.entries[i])
    }

    /// The last entry whose position is at or below `pos` (positions increase too).
    pub fn last_at_or_below_position(
        &self,
        pos: FilePosition,
    ) -> Option<(RelativeOffset, FilePosition)> {
        let n = self.entries.partition_point(|&(_, p)| p <= pos);
        n.checked_sub(1).map(|i| self.entries[i])
    }

    /// The first entry whose position is past `pos`.
    pub fn first_after_position(
        &self,
        pos: FilePosition,
    ) -> Option<(RelativeOffset, FilePosition)> {
        let n = self.entries.partition_point(|&(_, p)| p <= pos);
        self.entries.get(n).copied()
    }

    /// The last entry.
    pub fn last(&self) -> Option<(RelativeOffset, FilePosition)> {
        self.entries.last().copied()
    }

    /// Every entry, in order (offset and position both increasing).
    pub fn entries(&self) -> &[(RelativeOffset, FilePosition)] {
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

    /// Drops entries whose position is at or past `pos` (after cutting the log there).
    pub fn truncate_from_position(&mut self, pos: FilePosition) {
        self.entries.retain(|&(_, p)| p < pos);
    }

    /// Drops the last entry (recovery: it pointed at a batch that did not verify).
    pub fn pop(&mut self) {
        self.entries.pop();
    }

    /// Heap bytes held (capacity, not length: what the allocator really gave us).
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<(RelativeOffset, FilePosition)>()
    }

    /// The file bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * ENTRY_BYTES);
        for &(rel, pos) in &self.entries {
            out.extend_from_slice(&rel.0.to_be_bytes());
            out.extend_from_slice(&pos.0.to_be_bytes());
        }
        out
    }

    /// Parses file bytes; `None` if they are not a well-formed index for a log of `log_bytes`.
    pub fn decode(bytes: &[u8], log_bytes: u64) -> Option<OffsetIndex> {
        if !bytes.len().is_multiple_of(ENTRY_BYTES) {
            return None;
        }
        let mut index = OffsetIndex::default();
        for chunk in bytes.chunks_exact(ENTRY_BYTES) {
            let rel = RelativeOffset(u32::from_be_bytes(chunk[..4].try_into().expect("4 bytes")));
            let pos = FilePosition(u32::from_be_bytes(chunk[4..].try_into().expect("4 bytes")));
            let increasing = index.last().is_none_or(|(r, p)| rel > r && pos > p);
            if !increasing || u64::from(pos.0) >= log_bytes {
                return None;
            }
            index.entries.push((rel, pos));
        }
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> OffsetIndex {
        let mut i = OffsetIndex::default();
        i.push(RelativeOffset(0), FilePosition(0));
        i.push(RelativeOffset(10), FilePosition(5000));
        i.push(RelativeOffset(25), FilePosition(9000));
        i
    }

    #[test]
    fn position_lookups() {
        let i = sample();
        let at = |p| {
            i.last_at_or_below_position(FilePosition(p))
                .map(|(_, p)| p.0)
        };
        let after = |p| i.first_after_position(FilePosition(p)).map(|(_, p)| p.0);
        assert_eq!(
            (at(0), at(4999), at(5000), at(u32::MAX)),
            (Some(0), Some(0), Some(5000), Some(9000))
        );
        assert_eq!(
            (after(0), after(5000), after(9000)),
            (Some(5000), Some(9000), None)
        );
    }

    #[test]
    fn lookup_finds_entry_at_or_below() {
        let i = sample();
        assert_eq!(
            i.lookup(RelativeOffset(0)),
            Some((RelativeOffset(0), FilePosition(0)))
        );
        assert_eq!(
            i.lookup(RelativeOffset(9)),
            Some((RelativeOffset(0), FilePosition(0)))
        );
        assert_eq!(
            i.lookup(RelativeOffset(10)),
            Some((RelativeOffset(10), FilePosition(5000)))
        );
        assert_eq!(
            i.lookup(RelativeOffset(1000)),
            Some((RelativeOffset(25), FilePosition(9000)))
        );
        assert_eq!(OffsetIndex::default().lookup(RelativeOffset(3)), None);
    }

    #[test]
    fn encode_decode_and_reject_damage() {
        let i = sample();
        let bytes = i.encode();
        assert_eq!(bytes.len(), 24);
        assert_eq!(OffsetIndex::decode(&bytes, 10_000), Some(i));
        assert_eq!(
            OffsetIndex::decode(&bytes, 9000),
            None,
            "entry past the log end"
        );
        assert_eq!(
            OffsetIndex::decode(&bytes[..23], 10_000),
            None,
            "partial entry"
        );
        let mut swapped = bytes.clone();
        swapped[8..16].copy_from_slice(&bytes[16..24]);
        assert_eq!(
            OffsetIndex::decode(&swapped, 10_000),
            None,
            "not increasing"
        );
        assert_eq!(OffsetIndex::decode(&[], 0), Some(OffsetIndex::default()));
    }

    #[test]
    fn truncate_drops_entries_at_or_after_cut() {
        let mut i = sample();
        i.truncate_from_position(FilePosition(5000));
        assert_eq!(i.len(), 1);
    }
}
