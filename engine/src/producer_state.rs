//! [`ProducerState`]: idempotent and transactional producer bookkeeping (Kafka's
//! ProducerStateManager, minimal).
//!
//! Per producer id: the current epoch, the last [`BATCHES_KEPT`] batches' sequence ranges and
//! offsets, and the first offset of its open transaction in this partition, if any. A data batch
//! from producer `pid` with epoch `e` and sequences `[first, last]` is:
//! - fenced (`InvalidProducerEpoch`) if `e` is older than the current epoch;
//! - refused (`InvalidTxnState`) if it is not transactional while `pid` has an open transaction;
//! - a duplicate (`DuplicateSequence` with the original offsets) if it matches a kept batch
//!   (for a transactional batch: one of the transaction open here, never of an ended one);
//! - accepted if `pid` is unknown (any sequence: its history may have been deleted), if `e` is
//!   newer and `first == 0`, or if `first` follows the last sequence (wrapping at `i32::MAX`);
//! - otherwise `OutOfOrderSequence`.
//!
//! Transactions: the first transactional batch of `pid` opens a transaction at its base offset;
//! a COMMIT or ABORT marker closes it and is reported as a [`CompletedTxn`]. A marker may carry
//! a newer epoch than the producer's (the coordinator fenced it): the epoch moves up and the
//! sequence history is dropped. Markers from an older producer epoch or an older coordinator
//! epoch are refused. The smallest first offset of the open transactions bounds the last stable
//! offset ([`ProducerState::first_open_txn_offset`]).
//!
//! Snapshot file `producer.snapshot` (written at roll, close and each index checkpoint of the
//! active segment, replaced by rename), version 2:
//! `[u32 crc32c BE of the rest][u8 version = 2][i64 offset BE][u32 producer count BE]` then per
//! producer `[i64 pid][i16 epoch][i32 coordinator epoch][i64 open txn first offset, -1 none]`
//! `[i64 last offset][i64 last timestamp][u8 n]` and `n` x
//! `[i32 first seq][i32 last seq][i64 base][i64 last]`. Version 1 (before transactions) had no
//! version byte (its byte 4 is the high byte of the offset, 0) and per producer only
//! `[i64 pid][i16 epoch][u8 n]` plus the batches; it still decodes.
//! It is the state as of `offset`; recovery replays batch headers from there to the log end.
//! [`ProducerState::record`] ignores a batch at or below the last offset it holds for that
//! producer, so a replay that overlaps the snapshot can never regress the state.

use crate::batch::BatchMeta;
use crate::control::{ControlType, TxnMarker};
use crate::error::EngineError;
use crate::types::{Offset, TimestampMs};
use rill_types::{DurationMs, ProducerEpoch, ProducerId, Sequence};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Batches remembered per producer for duplicate detection (Kafka keeps 5).
pub const BATCHES_KEPT: usize = 5;
/// Snapshot format written now.
const SNAPSHOT_VERSION: u8 = 2;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct BatchSeq {
    first_seq: Sequence,
    last_seq: Sequence,
    base: Offset,
    last: Offset,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ProducerEntry {
    epoch: ProducerEpoch,
    batches: VecDeque<BatchSeq>,
    /// First offset of the producer's open transaction in this partition.
    txn_first_offset: Option<Offset>,
    /// Coordinator epoch of the last marker written for this producer (-1: none).
    coordinator_epoch: i32,
    /// Highest offset of any batch or marker recorded (-1: none); replays at or below it are
    /// ignored.
    last_offset: Offset,
    /// Max timestamp of the last data batch (DescribeProducers).
    last_timestamp: TimestampMs,
}

impl ProducerEntry {
    fn new(epoch: ProducerEpoch) -> Self {
        ProducerEntry {
            epoch,
            batches: VecDeque::new(),
            txn_first_offset: None,
            coordinator_epoch: -1,
            last_offset: Offset(-1),
            last_timestamp: TimestampMs::NONE,
        }
    }
}

/// A transaction a marker closed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    /// The producer.
    pub producer_id: ProducerId,
    /// Its first record in this partition.
    pub first_offset: Offset,
    /// The marker's offset.
    pub last_offset: Offset,
    /// Whether the marker was an ABORT.
    pub aborted: bool,
}

/// One producer as DescribeProducers shows it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ProducerView {
    /// Producer id.
    pub producer_id: ProducerId,
    /// Current epoch.
    pub producer_epoch: ProducerEpoch,
    /// Last sequence written ([`Sequence::NONE`]: none since the last epoch change).
    pub last_sequence: Sequence,
    /// Max timestamp of its last batch (-1: none).
    pub last_timestamp: TimestampMs,
    /// Coordinator epoch of its last marker (-1: none).
    pub coordinator_epoch: i32,
    /// First offset of its open transaction, if one is open.
    pub txn_first_offset: Option<Offset>,
}

/// Idempotent and transactional producer state of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerState {
    producers: HashMap<ProducerId, ProducerEntry>,
    /// Open transactions by first offset (each offset belongs to one producer's batch).
    open_txns: BTreeMap<Offset, ProducerId>,
}

/// The sequence after `seq`, wrapping like Kafka.
fn next_seq(seq: Sequence) -> Sequence {
    if seq.0 == i32::MAX {
        Sequence(0)
    } else {
        Sequence(seq.0 + 1)
    }
}

/// The last sequence of a batch starting at `first` spanning `delta` more records.
fn last_seq(first: Sequence, delta: i64) -> Sequence {
    Sequence(((i64::from(first.0) + delta) % (i64::from(i32::MAX) + 1)) as i32)
}

impl ProducerState {
    /// Checks a data batch before it is appended (no state change).
    pub fn check(&self, meta: &BatchMeta) -> Result<(), EngineError> {
        assert!(
            meta.control.is_none(),
            "markers are checked by check_marker"
        );
        if !meta.producer_id.is_some() {
            if meta.transactional {
                return Err(EngineError::InvalidRecord(
                    "transactional batch without a producer id".into(),
                ));
            }
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
        if !meta.transactional && entry.txn_first_offset.is_some() {
            return Err(EngineError::InvalidTxnState(
                "a non-transactional batch from a producer with an open transaction".into(),
            ));
        }
        if epoch > entry.epoch {
            return if first == Sequence(0) {
                Ok(())
            } else {
                Err(EngineError::OutOfOrderSequence {
                    expected: Sequence(0),
                    received: first,
                })
            };
        }
        let last = last_seq(first, meta.last_offset.0 - meta.base_offset.0);
        // A transactional batch can only be a retry of a batch of the transaction still open
        // here: one that ended (its marker written) had every batch answered first. A match
        // from an ended transaction is a client reusing the sequence of a batch it took for
        // unwritten (NOT_LEADER on a leader change, then an abort): acknowledging it as a
        // duplicate would drop the new records from a transaction that then commits
        // (tests/jepsen seed 303). It falls to the ordering check instead.
        let retry_of = |b: &BatchSeq| {
            !meta.transactional || entry.txn_first_offset.is_some_and(|open| b.base >= open)
        };
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == first && b.last_seq == last && retry_of(b))
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

    /// Checks a transaction marker before it is appended: neither an older producer epoch nor
    /// an older coordinator epoch than the last marker's.
    pub fn check_marker(&self, marker: &TxnMarker) -> Result<(), EngineError> {
        let Some(entry) = self.producers.get(&marker.producer_id) else {
            return Ok(());
        };
        if marker.producer_epoch < entry.epoch {
            return Err(EngineError::InvalidProducerEpoch {
                current: entry.epoch,
                received: marker.producer_epoch,
            });
        }
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return Err(EngineError::CoordinatorFenced {
                current: entry.coordinator_epoch,
                received: marker.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records an appended batch or marker (offsets assigned). Returns the transaction a
    /// marker closed, if the producer had one open here.
    pub fn record(&mut self, meta: &BatchMeta) -> Option<CompletedTxn> {
        if !meta.producer_id.is_some() {
            return None;
        }
        let entry = self
            .producers
            .entry(meta.producer_id)
            .or_insert_with(|| ProducerEntry::new(meta.producer_epoch));
        if entry.last_offset >= meta.base_offset {
            // Already recorded (recovery replay overlapping a snapshot): offsets only grow, so
            // recording it again would duplicate it or, across an epoch bump, regress the state.
            return None;
        }
        entry.last_offset = meta.last_offset;
        if meta.producer_epoch > entry.epoch
            || (meta.control.is_none() && meta.producer_epoch != entry.epoch)
        {
            entry.epoch = meta.producer_epoch;
            entry.batches.clear();
        }
        match meta.control {
            Some(control) => {
                entry.coordinator_epoch = entry.coordinator_epoch.max(control.coordinator_epoch);
                // A marker is activity too (Kafka's producer expiration counts from it).
                entry.last_timestamp = entry.last_timestamp.max(meta.max_timestamp);
                let aborted = match control.kind {
                    ControlType::Abort => true,
                    ControlType::Commit => false,
                    ControlType::Other(_) => return None,
                };
                let first = entry.txn_first_offset.take()?;
                let removed = self.open_txns.remove(&first);
                assert_eq!(removed, Some(meta.producer_id), "open txn index agrees");
                Some(CompletedTxn {
                    producer_id: meta.producer_id,
                    first_offset: first,
                    last_offset: meta.base_offset,
                    aborted,
                })
            }
            None => {
                record_data(entry, meta);
                if meta.transactional && entry.txn_first_offset.is_none() {
                    entry.txn_first_offset = Some(meta.base_offset);
                    self.open_txns.insert(meta.base_offset, meta.producer_id);
                }
                None
            }
        }
    }

    /// First offset of the earliest open transaction: the last stable offset never passes it.
    pub fn first_open_txn_offset(&self) -> Option<Offset> {
        self.open_txns.keys().next().copied()
    }

    /// Whether `producer_id` has an open transaction in this partition.
    pub fn has_open_txn(&self, producer_id: ProducerId) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.txn_first_offset.is_some())
    }

    /// Every known producer (DescribeProducers), by producer id.
    pub fn views(&self) -> Vec<ProducerView> {
        let mut out: Vec<ProducerView> = self
            .producers
            .iter()
            .map(|(&producer_id, e)| ProducerView {
                producer_id,
                producer_epoch: e.epoch,
                last_sequence: e.batches.back().map_or(Sequence::NONE, |b| b.last_seq),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
                txn_first_offset: e.txn_first_offset,
            })
            .collect();
        out.sort_unstable_by_key(|v| v.producer_id);
        out
    }

    /// Heap estimate: per producer its map slot and its kept batches, plus open transactions.
    pub fn heap_bytes(&self) -> usize {
        let per_producer = std::mem::size_of::<(ProducerId, ProducerEntry)>() + 1;
        let batches: usize = self
            .producers
            .values()
            .map(|e| e.batches.capacity() * std::mem::size_of::<BatchSeq>())
            .sum();
        let open = self.open_txns.len() * (std::mem::size_of::<(Offset, ProducerId)>() + 16);
        self.producers.capacity() * per_producer + batches + open
    }

    /// The last offset of every producer's last batch (the cleaner keeps those batches).
    pub fn last_offsets(&self) -> HashMap<ProducerId, Offset> {
        self.producers
            .iter()
            .filter_map(|(&pid, e)| e.batches.back().map(|b| (pid, b.last)))
            .collect()
    }

    /// Forgets the producers idle for `expiration_ms` with no open transaction, as Kafka's
    /// `removeExpiredProducers` (`producer.id.expiration.ms`): idle since the timestamp of their
    /// last batch or marker. One with no timestamp yet (from a version 1 snapshot) is given
    /// `now`, so it has a whole period before it expires. Returns how many were forgotten.
    pub fn remove_expired(&mut self, now: TimestampMs, expiration_ms: DurationMs) -> usize {
        assert!(
            expiration_ms > DurationMs::ZERO,
            "an expiration is a positive time"
        );
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            if e.last_timestamp == TimestampMs::NONE {
                e.last_timestamp = now;
            }
            e.txn_first_offset.is_some() || now.saturating_since(e.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    /// Keeps at most `max` producers: past it, forgets the least recently written ones (by
    /// the offset of their last batch) that have no open transaction, down to
    /// [`evict_target`] of `max` at once so that a stream of new producers evicts in batches,
    /// not one scan per producer. Producers with open transactions are never forgotten (the
    /// last stable offset waits on them); their number is bounded by the transactional ids.
    /// Returns how many were forgotten.
    pub fn evict_over(&mut self, max: usize) -> usize {
        assert!(max > 0, "a bound keeps a producer");
        if self.producers.len() <= max {
            return 0;
        }
        let mut idle: Vec<(Offset, ProducerId)> = self
            .producers
            .iter()
            .filter(|(_, e)| e.txn_first_offset.is_none())
            .map(|(&pid, e)| (e.last_offset, pid))
            .collect();
        let excess = (self.producers.len() - evict_target(max)).min(idle.len());
        if excess == 0 {
            return 0;
        }
        idle.select_nth_unstable(excess - 1);
        for (_, pid) in &idle[..excess] {
            self.producers.remove(pid);
        }
        excess
    }

    /// Number of producers known.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is known.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Snapshot bytes (version 2) of the state as of `offset`.
    pub fn encode(&self, offset: Offset) -> Vec<u8> {
        let mut body = vec![SNAPSHOT_VERSION];
        body.extend_from_slice(&offset.0.to_be_bytes());
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        let mut pids: Vec<_> = self.producers.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            let e = &self.producers[&pid];
            body.extend_from_slice(&pid.0.to_be_bytes());
            body.extend_from_slice(&e.epoch.0.to_be_bytes());
            body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            let first = e.txn_first_offset.map_or(-1, |o| o.0);
            body.extend_from_slice(&first.to_be_bytes());
            body.extend_from_slice(&e.last_offset.0.to_be_bytes());
            body.extend_from_slice(&e.last_timestamp.0.to_be_bytes());
            body.push(e.batches.len() as u8);
            for b in &e.batches {
                body.extend_from_slice(&b.first_seq.0.to_be_bytes());
                body.extend_from_slice(&b.last_seq.0.to_be_bytes());
                body.extend_from_slice(&b.base.0.to_be_bytes());
                body.extend_from_slice(&b.last.0.to_be_bytes());
            }
        }
        let mut out = crc32c::crc32c(&body).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    /// Parses snapshot bytes of version 1 or 2 (trailing zero padding allowed); `None` if
    /// damaged.
    pub fn decode(bytes: &[u8]) -> Option<(Offset, ProducerState)> {
        let mut r = Reader { bytes, pos: 0 };
        let crc = r.u32()?;
        let start = r.pos;
        let version = match *bytes.get(start)? {
            0 => 1, // a version 1 snapshot: the high byte of its offset
            SNAPSHOT_VERSION => {
                r.pos += 1;
                SNAPSHOT_VERSION
            }
            _ => return None,
        };
        let offset = Offset(r.i64()?);
        let count = r.u32()?;
        let mut state = ProducerState::default();
        for _ in 0..count {
            let (pid, entry) = decode_entry(&mut r, version)?;
            if let Some(first) = entry.txn_first_offset {
                state.open_txns.insert(first, pid);
            }
            state.producers.insert(pid, entry);
        }
        (crc32c::crc32c(&bytes[start..r.pos]) == crc).then_some((offset, state))
    }
}

/// How many producers [`ProducerState::evict_over`] leaves of `max`: a sixteenth less, so the
/// next evictions are that many new producers away.
pub fn evict_target(max: usize) -> usize {
    max - max / 16
}

/// Notes a data batch in the producer's sequence history.
fn record_data(entry: &mut ProducerEntry, meta: &BatchMeta) {
    entry.batches.push_back(BatchSeq {
        first_seq: meta.base_sequence,
        last_seq: last_seq(meta.base_sequence, meta.last_offset.0 - meta.base_offset.0),
        base: meta.base_offset,
        last: meta.last_offset,
    });
    if entry.batches.len() > BATCHES_KEPT {
        entry.batches.pop_front();
    }
    assert!(entry.batches.len() <= BATCHES_KEPT);
    entry.last_timestamp = meta.max_timestamp;
}

fn decode_entry(r: &mut Reader<'_>, version: u8) -> Option<(ProducerId, ProducerEntry)> {
    let pid = ProducerId(r.i64()?);
    let mut entry = ProducerEntry::new(ProducerEpoch(r.i16()?));
    if version >= 2 {
        entry.coordinator_epoch = r.i32()?;
        let first = r.i64()?;
        entry.txn_first_offset = (first >= 0).then_some(Offset(first));
        entry.last_offset = Offset(r.i64()?);
        entry.last_timestamp = TimestampMs(r.i64()?);
    }
    let n = r.u8()? as usize;
    if n > BATCHES_KEPT {
        return None;
    }
    for _ in 0..n {
        let (first_seq, last_seq) = (Sequence(r.i32()?), Sequence(r.i32()?));
        let (base, last) = (Offset(r.i64()?), Offset(r.i64()?));
        entry.batches.push_back(BatchSeq {
            first_seq,
            last_seq,
            base,
            last,
        });
    }
    if version < 2 {
        entry.last_offset = entry.batches.back().map_or(Offset(-1), |b| b.last);
    }
    Some((pid, entry))
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
#[path = "producer_state_tests.rs"]
mod tests;
