//! [`TxnIndex`]: a segment's aborted transactions (Kafka's `.txnindex`), what read_committed
//! consumers need to skip aborted records.
//!
//! On-disk contract of `<20-digit base offset>.txnindex`, Kafka's own layout, no header:
//! ```text
//! entry (34 bytes, big-endian): [i16 version = 0][i64 producer id][i64 first offset]
//!                               [i64 last offset][i64 last stable offset]
//! ```
//! One entry per ABORT marker written in the segment: `last offset` is the marker's offset (so
//! it lies in the segment), `first offset` the producer's first record of that transaction
//! (possibly in an earlier segment), `last stable offset` the partition's LSO right after the
//! abort. Entries are in marker order. The file exists only when the segment has an entry; it
//! carries no checksum (like `.index`), so a load checks that every entry is plausible for its
//! segment and treats a file that is not as damaged (recovery rebuilds it from the log).
//!
//! A fetch at offset `from` returning records up to (not including) `upper` needs every
//! entry with `last_offset >= from` and `first_offset < upper`, from the segment holding `from`
//! onward: a transaction that started before `upper` may have been aborted in any later
//! segment. [`TxnIndex::first_offset_min`] lets a search skip the segments that cannot hold one.

use crate::types::Offset;
use rill_types::ProducerId;

/// Bytes per entry.
pub const ENTRY_BYTES: usize = 34;
/// The only entry version Kafka defines.
const VERSION: i16 = 0;

/// One aborted transaction.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    /// The producer whose transaction was aborted.
    pub producer_id: ProducerId,
    /// Its first record in this partition.
    pub first_offset: Offset,
    /// The ABORT marker's offset.
    pub last_offset: Offset,
    /// The partition's last stable offset right after the abort.
    pub last_stable_offset: Offset,
}

/// The aborted transactions whose markers lie in one segment, in marker order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnIndex {
    entries: Vec<AbortedTxn>,
}

impl TxnIndex {
    /// Adds the entry of an ABORT marker written after every entry already held.
    pub fn push(&mut self, entry: AbortedTxn) {
        assert!(entry.first_offset <= entry.last_offset);
        assert!(
            self.entries
                .last()
                .is_none_or(|e| e.last_offset < entry.last_offset),
            "markers are appended in offset order"
        );
        self.entries.push(entry);
    }

    /// The entries, in marker order.
    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Smallest first offset of any entry: a fetch whose records end below it needs nothing
    /// from this segment.
    pub fn first_offset_min(&self) -> Option<Offset> {
        self.entries.iter().map(|e| e.first_offset).min()
    }

    /// Drops the entries whose marker is at or after `offset` (recovery re-derives them).
    pub fn truncate_from(&mut self, offset: Offset) {
        self.entries.retain(|e| e.last_offset < offset);
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<AbortedTxn>()
    }

    /// The entries that matter to a read of `[from, upper)`.
    pub fn overlapping(
        &self,
        from: Offset,
        upper: Offset,
    ) -> impl Iterator<Item = AbortedTxn> + '_ {
        self.entries
            .iter()
            .filter(move |e| e.last_offset >= from && e.first_offset < upper)
            .copied()
    }

    /// The file bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * ENTRY_BYTES);
        for e in &self.entries {
            out.extend_from_slice(&VERSION.to_be_bytes());
            out.extend_from_slice(&e.producer_id.0.to_be_bytes());
            out.extend_from_slice(&e.first_offset.0.to_be_bytes());
            out.extend_from_slice(&e.last_offset.0.to_be_bytes());
            out.extend_from_slice(&e.last_stable_offset.0.to_be_bytes());
        }
        out
    }

    /// Parses a segment's file: `None` if it is not whole entries of version 0, each with its
    /// marker in `[base, next)`, `first <= last`, in marker order.
    pub fn decode(bytes: &[u8], base: Offset, next: Offset) -> Option<TxnIndex> {
        if !bytes.len().is_multiple_of(ENTRY_BYTES) {
            return None;
        }
        let mut index = TxnIndex::default();
        for chunk in bytes.chunks_exact(ENTRY_BYTES) {
            let i64_at = |at: usize| i64::from_be_bytes(chunk[at..at + 8].try_into().expect("8"));
            if i16::from_be_bytes([chunk[0], chunk[1]]) != VERSION {
                return None;
            }
            let entry = AbortedTxn {
                producer_id: ProducerId(i64_at(2)),
                first_offset: Offset(i64_at(10)),
                last_offset: Offset(i64_at(18)),
                last_stable_offset: Offset(i64_at(26)),
            };
            let in_segment = entry.last_offset >= base && entry.last_offset < next;
            let ordered = index
                .entries
                .last()
                .is_none_or(|e| e.last_offset < entry.last_offset);
            if !in_segment || !ordered || entry.first_offset > entry.last_offset {
                return None;
            }
            if !entry.producer_id.is_some() || entry.first_offset.0 < 0 {
                return None;
            }
            index.entries.push(entry);
        }
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: ProducerId(pid),
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(last + 1),
        }
    }

    #[test]
    fn round_trip_and_kafka_entry_size() {
        let mut t = TxnIndex::default();
        t.push(entry(1, 3, 10));
        t.push(entry(2, 0, 12));
        let bytes = t.encode();
        assert_eq!(bytes.len(), 2 * ENTRY_BYTES);
        assert_eq!(
            TxnIndex::decode(&bytes, Offset(10), Offset(20)),
            Some(t.clone())
        );
        assert_eq!(t.first_offset_min(), Some(Offset(0)));
    }

    #[test]
    fn implausible_files_are_refused() {
        let mut t = TxnIndex::default();
        t.push(entry(1, 3, 10));
        let bytes = t.encode();
        assert!(TxnIndex::decode(&bytes[..33], Offset(0), Offset(20)).is_none());
        assert!(
            TxnIndex::decode(&bytes, Offset(11), Offset(20)).is_none(),
            "marker below base"
        );
        assert!(
            TxnIndex::decode(&bytes, Offset(0), Offset(10)).is_none(),
            "marker past next"
        );
        let mut bad = bytes.clone();
        bad[1] = 1;
        assert!(
            TxnIndex::decode(&bad, Offset(0), Offset(20)).is_none(),
            "version"
        );
        let mut twice = bytes.clone();
        twice.extend_from_slice(&bytes);
        assert!(
            TxnIndex::decode(&twice, Offset(0), Offset(20)).is_none(),
            "order"
        );
        assert_eq!(
            TxnIndex::decode(&[], Offset(0), Offset(0)),
            Some(TxnIndex::default())
        );
    }

    #[test]
    fn overlap_and_truncation() {
        let mut t = TxnIndex::default();
        t.push(entry(1, 3, 10));
        t.push(entry(2, 11, 12));
        let hits: Vec<_> = t.overlapping(Offset(10), Offset(11)).collect();
        assert_eq!(
            hits,
            vec![entry(1, 3, 10)],
            "second starts at the upper bound"
        );
        assert_eq!(t.overlapping(Offset(13), Offset(99)).count(), 0);
        t.truncate_from(Offset(12));
        assert_eq!(t.entries(), &[entry(1, 3, 10)]);
    }
}
