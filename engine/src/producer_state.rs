//! [`ProducerState`]: idempotent-producer bookkeeping (Kafka's ProducerStateManager, minimal).
//!
//! Per producer id: the current epoch and the last [`BATCHES_KEPT`] batches' sequence ranges and
//! offsets. A batch from producer `pid` with epoch `e` and sequences `[first, last]` is:
//! - fenced (`InvalidProducerEpoch`) if `e` is older than the current epoch;
//! - a duplicate (`DuplicateSequence` with the original offsets) if it matches a kept batch;
//! - accepted if `pid` is unknown (any sequence: its history may have been deleted), if `e` is
//!   newer and `first == 0`, or if `first` follows the last sequence (wrapping at `i32::MAX`);
//! - otherwise `OutOfOrderSequence`.
//!
//! Snapshot file `producer.snapshot` (written at roll, close and each index checkpoint of the
//! active segment, replaced by rename):
//! `[u32 crc32c BE of the rest][i64 offset BE][u32 producer count BE]` then per producer
//! `[i64 pid][i16 epoch][u8 n]` and `n` x `[i32 first seq][i32 last seq][i64 base][i64 last]`.
//! It is the state as of `offset`; recovery replays batch headers from there to the log end.
//! [`ProducerState::record`] ignores a batch at or below the last one it holds for that
//! producer, so a replay that overlaps the snapshot can never regress the state.

use crate::batch::BatchMeta;
use crate::error::EngineError;
use crate::types::Offset;
use std::collections::{HashMap, VecDeque};

/// Batches remembered per producer for duplicate detection (Kafka keeps 5).
pub const BATCHES_KEPT: usize = 5;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct BatchSeq {
    first_seq: i32,
    last_seq: i32,
    base: Offset,
    last: Offset,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchSeq>,
}

/// Idempotent-producer state of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerState {
    producers: HashMap<i64, ProducerEntry>,
}

/// The sequence after `seq`, wrapping like Kafka.
fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

/// The last sequence of a batch starting at `first` spanning `delta` more records.
fn last_seq(first: i32, delta: i64) -> i32 {
    ((i64::from(first) + delta) % (i64::from(i32::MAX) + 1)) as i32
}

impl ProducerState {
    /// Checks a batch before it is appended (no state change).
    pub fn check(&self, meta: &BatchMeta) -> Result<(), EngineError> {
        if meta.producer_id < 0 {
            return Ok(());
        }
        let Some(entry) = self.producers.get(&meta.producer_id) else {
            return Ok(());
        };
        let (epoch, first) = (meta.producer_epoch, meta.base_sequence);
        if epoch < entry.epoch {
            return Err(EngineError::InvalidProducerEpoch {
                current: entry.epoch,
                received: epoch,
            });
        }
        if epoch > entry.epoch {
            return if first == 0 {
                Ok(())
            } else {
                Err(EngineError::OutOfOrderSequence {
                    expected: 0,
                    received: first,
                })
            };
        }
        let last = last_seq(first, meta.last_offset.0 - meta.base_offset.0);
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == first && b.last_seq == last)
        {
            return Err(EngineError::DuplicateSequence {
                base_offset: dup.base,
                last_offset: dup.last,
            });
        }
        let expected = entry.batches.back().map_or(first, |b| next_seq(b.last_seq));
        if first != expected {
            return Err(EngineError::OutOfOrderSequence {
                expected,
                received: first,
            });
        }
        Ok(())
    }

    /// Records an appended batch (offsets assigned).
    pub fn record(&mut self, meta: &BatchMeta) {
        if meta.producer_id < 0 {
            return;
        }
        let seq = BatchSeq {
            first_seq: meta.base_sequence,
            last_seq: last_seq(meta.base_sequence, meta.last_offset.0 - meta.base_offset.0),
            base: meta.base_offset,
            last: meta.last_offset,
        };
        let entry = self
            .producers
            .entry(meta.producer_id)
            .or_insert(ProducerEntry {
                epoch: meta.producer_epoch,
                batches: VecDeque::new(),
            });
        if entry
            .batches
            .back()
            .is_some_and(|b| b.last >= meta.base_offset)
        {
            // Already recorded (recovery replay overlapping a snapshot): offsets only grow, so
            // recording it again would duplicate it or, across an epoch bump, regress the state.
            return;
        }
        if meta.producer_epoch != entry.epoch {
            entry.epoch = meta.producer_epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(seq);
        if entry.batches.len() > BATCHES_KEPT {
            entry.batches.pop_front();
        }
        assert!(entry.batches.len() <= BATCHES_KEPT);
    }

    /// Heap estimate: per producer its map slot and its kept batches.
    pub fn heap_bytes(&self) -> usize {
        let per_producer = std::mem::size_of::<(i64, ProducerEntry)>() + 1;
        let batches: usize = self
            .producers
            .values()
            .map(|e| e.batches.capacity() * std::mem::size_of::<BatchSeq>())
            .sum();
        self.producers.capacity() * per_producer + batches
    }

    /// Number of producers known.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is known.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Snapshot bytes of the state as of `offset`.
    pub fn encode(&self, offset: Offset) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&offset.0.to_be_bytes());
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        let mut pids: Vec<_> = self.producers.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            let e = &self.producers[&pid];
            body.extend_from_slice(&pid.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.push(e.batches.len() as u8);
            for b in &e.batches {
                body.extend_from_slice(&b.first_seq.to_be_bytes());
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.base.0.to_be_bytes());
                body.extend_from_slice(&b.last.0.to_be_bytes());
            }
        }
        let mut out = crc32c::crc32c(&body).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    /// Parses snapshot bytes (trailing zero padding allowed); `None` if damaged.
    pub fn decode(bytes: &[u8]) -> Option<(Offset, ProducerState)> {
        let mut r = Reader { bytes, pos: 0 };
        let crc = r.u32()?;
        let start = r.pos;
        let offset = Offset(r.i64()?);
        let count = r.u32()?;
        let mut state = ProducerState::default();
        for _ in 0..count {
            let (pid, entry) = decode_entry(&mut r)?;
            state.producers.insert(pid, entry);
        }
        (crc32c::crc32c(&bytes[start..r.pos]) == crc).then_some((offset, state))
    }
}

fn decode_entry(r: &mut Reader<'_>) -> Option<(i64, ProducerEntry)> {
    let pid = r.i64()?;
    let epoch = r.i16()?;
    let n = r.u8()? as usize;
    if n > BATCHES_KEPT {
        return None;
    }
    let mut batches = VecDeque::with_capacity(n);
    for _ in 0..n {
        let (first_seq, last_seq) = (r.i32()?, r.i32()?);
        let (base, last) = (Offset(r.i64()?), Offset(r.i64()?));
        batches.push_back(BatchSeq {
            first_seq,
            last_seq,
            base,
            last,
        });
    }
    Some((pid, ProducerEntry { epoch, batches }))
}

/// A bounds-checked big-endian reader.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let chunk = self.bytes.get(self.pos..self.pos + N)?;
        self.pos += N;
        chunk.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    fn i16(&mut self) -> Option<i16> {
        self.take().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Option<i32> {
        self.take().map(i32::from_be_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TimestampMs;

    fn meta(pid: i64, epoch: i16, seq: i32, base: i64, records: i64) -> BatchMeta {
        BatchMeta {
            base_offset: Offset(base),
            last_offset: Offset(base + records - 1),
            max_timestamp: TimestampMs(0),
            total_bytes: 100,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
        }
    }

    #[test]
    fn sequence_rules() {
        let mut s = ProducerState::default();
        s.check(&meta(1, 0, 0, 0, 3)).unwrap();
        s.record(&meta(1, 0, 0, 0, 3));
        assert!(matches!(
            s.check(&meta(1, 0, 0, 9, 3)),
            Err(EngineError::DuplicateSequence {
                base_offset: Offset(0),
                last_offset: Offset(2)
            })
        ));
        assert!(matches!(
            s.check(&meta(1, 0, 5, 3, 1)),
            Err(EngineError::OutOfOrderSequence { expected: 3, .. })
        ));
        s.check(&meta(1, 0, 3, 3, 1)).unwrap();
        assert!(matches!(
            s.check(&meta(1, 1, 7, 3, 1)),
            Err(EngineError::OutOfOrderSequence { expected: 0, .. })
        ));
        s.record(&meta(1, 1, 0, 3, 1));
        assert!(matches!(
            s.check(&meta(1, 0, 4, 4, 1)),
            Err(EngineError::InvalidProducerEpoch {
                current: 1,
                received: 0
            })
        ));
        s.check(&meta(2, 0, 77, 4, 1)).unwrap();
        s.check(&meta(-1, -1, -1, 4, 1)).unwrap();
    }

    #[test]
    fn keeps_five_and_wraps_sequences() {
        let mut s = ProducerState::default();
        for i in 0..7 {
            s.record(&meta(1, 0, i, i64::from(i), 1));
        }
        assert!(
            s.check(&meta(1, 0, 0, 9, 1)).is_err(),
            "seq 0 forgotten: out of order, not duplicate"
        );
        assert!(matches!(
            s.check(&meta(1, 0, 6, 9, 1)),
            Err(EngineError::DuplicateSequence { .. })
        ));
        assert_eq!(last_seq(i32::MAX, 1), 0);
        assert_eq!(next_seq(i32::MAX), 0);
    }

    #[test]
    fn replaying_a_recorded_batch_never_regresses_the_state() {
        let mut s = ProducerState::default();
        s.record(&meta(1, 0, 0, 0, 2));
        s.record(&meta(1, 1, 0, 2, 1));
        let before = s.clone();
        s.record(&meta(1, 0, 0, 0, 2)); // older epoch, already covered
        s.record(&meta(1, 1, 0, 2, 1)); // the same batch again
        assert_eq!(s, before);
        assert!(matches!(
            s.check(&meta(1, 0, 2, 3, 1)),
            Err(EngineError::InvalidProducerEpoch { current: 1, .. })
        ));
    }

    #[test]
    fn snapshot_round_trip_and_damage() {
        let mut s = ProducerState::default();
        s.record(&meta(1, 0, 0, 0, 3));
        s.record(&meta(9, 2, 0, 3, 1));
        let mut bytes = s.encode(Offset(4));
        bytes.extend_from_slice(&[0; 100]);
        assert_eq!(ProducerState::decode(&bytes), Some((Offset(4), s)));
        bytes[10] ^= 1;
        assert_eq!(ProducerState::decode(&bytes), None);
        assert_eq!(ProducerState::decode(&[]), None);
    }
}
