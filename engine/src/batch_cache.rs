//! [`BatchCache`]: the most recent batches of a partition, in memory, so consumers at the tail
//! never touch the disk (the role of Redpanda's batch cache). Bounded in bytes; always a
//! contiguous run of batches ending at the log end (older ones are evicted first). An evicted
//! batch is handed to the caller (who keeps it in the shard's read cache: write-through); one
//! dropped because its bytes changed (compaction, [`BatchCache::drop_below`]) is not.

use crate::types::Offset;
use bytes::Bytes;
use std::collections::VecDeque;

/// A bounded, contiguous tail of batches.
#[derive(Debug, Default)]
pub struct BatchCache {
    batches: VecDeque<(Offset, Offset, Bytes)>,
    bytes: usize,
    bytes_max: usize,
}

impl BatchCache {
    /// An empty cache holding at most `bytes_max` bytes.
    pub fn new(bytes_max: usize) -> Self {
        BatchCache {
            batches: VecDeque::new(),
            bytes: 0,
            bytes_max,
        }
    }

    /// Adds the batch `[base, last]` that was just appended after the cached ones; the
    /// oldest batches past the bound go to `evicted`, oldest first.
    pub fn push(
        &mut self,
        base: Offset,
        last: Offset,
        batch: Bytes,
        evicted: impl FnMut(Offset, Offset, Bytes),
    ) {
        if let Some(&(_, prev_last, _)) = self.batches.back() {
            assert_eq!(prev_last.plus(1), base, "cache must stay contiguous");
        }
        self.bytes += batch.len();
        self.batches.push_back((base, last, batch));
        self.evict_past_bound(evicted);
    }

    /// Evicts the oldest batches until the bound holds, handing each to `evicted`.
    fn evict_past_bound(&mut self, mut evicted: impl FnMut(Offset, Offset, Bytes)) {
        while self.bytes > self.bytes_max {
            let (base, last, batch) = self.batches.pop_front().expect("bytes > 0 means non-empty");
            self.bytes -= batch.len();
            evicted(base, last, batch);
        }
    }

    /// Whether the cache holds the batch containing `offset` (and all after it).
    pub fn covers(&self, offset: Offset) -> bool {
        self.batches
            .front()
            .is_some_and(|&(base, _, _)| base <= offset)
    }

    /// Whole batches from the one containing `from`, base below `limit`, up to `max_bytes`
    /// (at least one). Call only if [`Self::covers`] `from`.
    pub fn read(&self, from: Offset, limit: Offset, max_bytes: usize) -> Vec<Bytes> {
        assert!(self.covers(from));
        let first = self.batches.partition_point(|&(_, last, _)| last < from);
        let mut out = Vec::new();
        let mut total = 0;
        for (base, _, batch) in self.batches.range(first..) {
            if *base >= limit || (!out.is_empty() && total + batch.len() > max_bytes) {
                break;
            }
            total += batch.len();
            out.push(batch.clone());
        }
        out
    }

    /// Drops the batches that start below `offset` (compaction rewrote those offsets); the
    /// rest stays a contiguous tail.
    pub fn drop_below(&mut self, offset: Offset) {
        while let Some(&(base, _, _)) = self.batches.front() {
            if base >= offset {
                break;
            }
            let (_, _, dropped) = self.batches.pop_front().expect("front exists");
            self.bytes -= dropped.len();
        }
    }

    /// Changes the bound; the oldest batches past it go to `evicted`.
    pub fn set_bytes_max(&mut self, bytes_max: usize, evicted: impl FnMut(Offset, Offset, Bytes)) {
        self.bytes_max = bytes_max;
        self.evict_past_bound(evicted);
    }

    /// Drops everything (after a failure or truncation).
    pub fn clear(&mut self) {
        self.batches.clear();
        self.bytes = 0;
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Heap estimate: the batches plus the queue's slots.
    pub fn heap_bytes(&self) -> usize {
        self.bytes + self.batches.capacity() * std::mem::size_of::<(Offset, Offset, Bytes)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_oldest_and_reads_whole_batches() {
        let mut c = BatchCache::new(250);
        let mut evicted = Vec::new();
        for i in 0..5 {
            c.push(
                Offset(i * 2),
                Offset(i * 2 + 1),
                Bytes::from(vec![i as u8; 100]),
                |base, last, b| evicted.push((base, last, b[0])),
            );
        }
        assert_eq!(c.bytes(), 200);
        let handed = [
            (Offset(0), Offset(1), 0),
            (Offset(2), Offset(3), 1),
            (Offset(4), Offset(5), 2),
        ];
        assert_eq!(evicted, handed, "evicted oldest first, each handed on");
        c.drop_below(Offset(8));
        assert_eq!(c.bytes(), 100, "dropped, not handed on");
        c.set_bytes_max(0, |base, _, _| evicted.push((base, base, 9)));
        assert_eq!((c.bytes(), evicted.len()), (0, 4));
        for i in 0..2 {
            c.set_bytes_max(250, |_, _, _| unreachable!());
            c.push(
                Offset(10 + i * 2),
                Offset(11 + i * 2),
                Bytes::from(vec![3 + i as u8; 100]),
                |_, _, _| unreachable!(),
            );
        }
        assert_eq!(c.bytes(), 200);
        assert!(!c.covers(Offset(9)));
        assert!(c.covers(Offset(11)));
        let got = c.read(Offset(11), Offset(14), 1);
        assert_eq!(got.len(), 1, "at least one batch even over max_bytes");
        assert_eq!(got[0][0], 3);
        assert_eq!(
            c.read(Offset(10), Offset(12), 1000).len(),
            1,
            "limit excludes batch at 12"
        );
    }
}
