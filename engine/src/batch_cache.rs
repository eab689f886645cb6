//! [`BatchCache`]: the most recent batches of a partition, in memory, so consumers at the tail
//! never touch the disk (the role of Redpanda's batch cache). Bounded in the bytes its batches
//! keep alive (a batch received in a larger buffer counts all of it); always a
//! contiguous run of batches ending at the log end (older ones are evicted first). An evicted
//! batch is handed to the caller (who keeps it in the shard's read cache: write-through); one
//! dropped because its bytes changed (compaction, [`BatchCache::drop_below`]) is not.

use crate::types::Offset;
use bytes::Bytes;
use std::collections::VecDeque;

/// One cached batch: first and last offset, its bytes, and the bytes of memory they keep alive.
type Cached = (Offset, Offset, Bytes, usize);

/// A bounded, contiguous tail of batches.
#[derive(Debug, Default)]
pub struct BatchCache {
    batches: VecDeque<Cached>,
    /// Memory the batches keep alive (their `held` sizes).
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

    /// Adds the batch `[base, last]` that was just appended after the cached ones, keeping
    /// `held` bytes of memory alive (at least its length); the oldest batches past the bound
    /// go to `evicted` (with their held sizes), oldest first.
    pub fn push(
        &mut self,
        (base, last): (Offset, Offset),
        batch: Bytes,
        held: usize,
        evicted: impl FnMut(Offset, Offset, Bytes, usize),
    ) {
        if let Some(&(_, prev_last, _, _)) = self.batches.back() {
            assert_eq!(prev_last.plus(1), base, "cache must stay contiguous");
        }
        let held = held.max(batch.len());
        self.bytes += held;
        self.batches.push_back((base, last, batch, held));
        self.evict_past_bound(evicted);
    }

    /// Evicts the oldest batches until the bound holds, handing each to `evicted`.
    fn evict_past_bound(&mut self, mut evicted: impl FnMut(Offset, Offset, Bytes, usize)) {
        while self.bytes > self.bytes_max {
            let (base, last, batch, held) =
                self.batches.pop_front().expect("bytes > 0 means non-empty");
            self.bytes -= held;
            evicted(base, last, batch, held);
        }
    }

    /// Whether the cache holds the batch containing `offset` (and all after it).
    pub fn covers(&self, offset: Offset) -> bool {
        self.batches
            .front()
            .is_some_and(|&(base, _, _, _)| base <= offset)
    }

    /// Whole batches from the one containing `from`, base below `limit`, up to `max_bytes`
    /// (at least one). Call only if [`Self::covers`] `from`.
    pub fn read(&self, from: Offset, limit: Offset, max_bytes: usize) -> Vec<Bytes> {
        assert!(self.covers(from));
        let first = self.batches.partition_point(|&(_, last, _, _)| last < from);
        let mut out = Vec::new();
        let mut total = 0;
        for (base, _, batch, _) in self.batches.range(first..) {
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
        while let Some(&(base, _, _, _)) = self.batches.front() {
            if base >= offset {
                break;
            }
            let (_, _, _, held) = self.batches.pop_front().expect("front exists");
            self.bytes -= held;
        }
    }

    /// Changes the bound; the oldest batches past it go to `evicted`.
    pub fn set_bytes_max(
        &mut self,
        bytes_max: usize,
        evicted: impl FnMut(Offset, Offset, Bytes, usize),
    ) {
        self.bytes_max = bytes_max;
        self.evict_past_bound(evicted);
    }

    /// Drops everything (after a failure or truncation).
    pub fn clear(&mut self) {
        self.batches.clear();
        self.bytes = 0;
    }

    /// Memory the cached batches keep alive.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Heap estimate: the batches plus the queue's slots.
    pub fn heap_bytes(&self) -> usize {
        self.bytes + self.batches.capacity() * std::mem::size_of::<Cached>()
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
            let span = (Offset(i * 2), Offset(i * 2 + 1));
            let batch = Bytes::from(vec![i as u8; 100]);
            c.push(span, batch, 0, |base, last, b, held| {
                evicted.push((base, last, b[0], held))
            });
        }
        assert_eq!(c.bytes(), 200);
        let handed = [
            (Offset(0), Offset(1), 0, 100),
            (Offset(2), Offset(3), 1, 100),
            (Offset(4), Offset(5), 2, 100),
        ];
        assert_eq!(evicted, handed, "evicted oldest first, each handed on");
        c.drop_below(Offset(8));
        assert_eq!(c.bytes(), 100, "dropped, not handed on");
        c.set_bytes_max(0, |base, _, _, _| evicted.push((base, base, 9, 0)));
        assert_eq!((c.bytes(), evicted.len()), (0, 4));
        c.set_bytes_max(250, |_, _, _, _| unreachable!());
        for i in 0..2 {
            let span = (Offset(10 + i * 2), Offset(11 + i * 2));
            let batch = Bytes::from(vec![3 + i as u8; 100]);
            c.push(span, batch, 0, |_, _, _, _| unreachable!());
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

    #[test]
    fn a_batch_counts_the_memory_it_keeps_alive() {
        let mut c = BatchCache::new(1000);
        let mut evicted = Vec::new();
        let span = (Offset(0), Offset(0));
        c.push(span, Bytes::from(vec![0; 100]), 700, |_, _, _, _| {});
        assert_eq!(c.bytes(), 700, "a batch received in a 700-byte frame");
        let span = (Offset(1), Offset(1));
        c.push(span, Bytes::from(vec![1; 100]), 400, |base, _, _, held| {
            evicted.push((base, held))
        });
        assert_eq!(evicted, [(Offset(0), 700)], "1,100 > 1,000: the first goes");
        assert_eq!(c.bytes(), 400);
    }
}
