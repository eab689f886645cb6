//! [`BatchCache`]: the most recent batches of a partition, in memory, so consumers at the tail
//! never touch the disk (the role of Redpanda's batch cache). Bounded in bytes; always a
//! contiguous run of batches ending at the log end (older ones are evicted first).

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

    /// Adds the batch `[base, last]` that was just appended after the cached ones.
    pub fn push(&mut self, base: Offset, last: Offset, batch: Bytes) {
        if let Some(&(_, prev_last, _)) = self.batches.back() {
            assert_eq!(prev_last.plus(1), base, "cache must stay contiguous");
        }
        self.bytes += batch.len();
        self.batches.push_back((base, last, batch));
        while self.bytes > self.bytes_max {
            let (_, _, evicted) = self.batches.pop_front().expect("bytes > 0 means non-empty");
            self.bytes -= evicted.len();
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

    /// Changes the bound, evicting the oldest batches past it.
    pub fn set_bytes_max(&mut self, bytes_max: usize) {
        self.bytes_max = bytes_max;
        while self.bytes > self.bytes_max {
            let (_, _, evicted) = self.batches.pop_front().expect("bytes > 0 means non-empty");
            self.bytes -= evicted.len();
        }
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
        for i in 0..5 {
            c.push(
                Offset(i * 2),
                Offset(i * 2 + 1),
                Bytes::from(vec![i as u8; 100]),
            );
        }
        assert_eq!(c.bytes(), 200);
        assert!(!c.covers(Offset(5)));
        assert!(c.covers(Offset(7)));
        let got = c.read(Offset(7), Offset(10), 1);
        assert_eq!(got.len(), 1, "at least one batch even over max_bytes");
        assert_eq!(got[0][0], 3);
        assert_eq!(
            c.read(Offset(6), Offset(8), 1000).len(),
            1,
            "limit excludes batch at 8"
        );
    }
}
