//! Committed offsets and their records in the internal offsets log.
//!
//! A record's key is (group, topic, partition), its value the committed position; a tombstone
//! (no value) forgets it (OffsetDelete, DeleteGroups). Later records win, so replaying the log
//! in order rebuilds the map. Encodings carry a version byte so the format can evolve.
//!
//! Transactions: an offset committed inside a producer's transaction (TxnOffsetCommit) is
//! stored under a *pending* key that also names the producer. When the transaction ends, one
//! batch (atomic) tombstones the pending keys and, for a commit, writes the same offsets under
//! the committed keys; so the log stays a plain keyed map, and replay or compaction need no
//! notion of transactions.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rill_protocol::kafka_protocol::records::RecordBatchDecoder;
use rill_protocol::record::{encode_plain_batch, PlainRecord};
use rill_types::batch::ValidatedBatch;
use rill_types::{
    LeaderEpoch, Offset, PartitionIndex, ProducerId, TimestampMs, TopicPartition, TopicPartitionRef,
};

use crate::record_fields::{get_str, put_str, Malformed};

use super::metadata_record::{
    decode_group_key, decode_group_value, GroupMetadata, GROUP_KEY_VERSION,
};

/// Kafka's `offset.metadata.max.bytes` default: longer metadata gets OFFSET_METADATA_TOO_LARGE
/// (a row of the limits table).
pub use rill_types::limits::OFFSET_METADATA_BYTES_MAX as METADATA_BYTES_MAX;

const KEY_VERSION: u8 = 1;
const PENDING_KEY_VERSION: u8 = 2;
const VALUE_VERSION: u8 = 1;

/// One committed position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset the group will consume.
    pub offset: Offset,
    /// Leader epoch of the last consumed record (`LeaderEpoch::NONE` when unknown).
    pub leader_epoch: LeaderEpoch,
    /// Client-supplied metadata.
    pub metadata: Option<String>,
    /// When the broker accepted the commit (ms since the epoch).
    pub commit_time_ms: TimestampMs,
}

/// What a record is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffsetKey {
    /// Group id.
    pub group: String,
    /// The partition whose position it is.
    pub tp: TopicPartition,
    /// `Some(producer)`: an offset committed inside that producer's transaction (TxnOffsetCommit),
    /// pending until the transaction ends; `None`: the group's committed offset.
    pub pending_for: Option<ProducerId>,
}

impl OffsetKey {
    /// The key of `group`'s committed offset for a partition.
    pub fn committed(group: &str, tp: TopicPartitionRef<'_>) -> OffsetKey {
        OffsetKey {
            group: group.to_string(),
            tp: tp.owned(),
            pending_for: None,
        }
    }

    /// The key of an offset pending in `producer`'s transaction.
    pub fn pending(group: &str, tp: TopicPartitionRef<'_>, producer: ProducerId) -> OffsetKey {
        OffsetKey {
            pending_for: Some(producer),
            ..OffsetKey::committed(group, tp)
        }
    }
}

/// One record of the offsets log: a commit, or a tombstone when `value` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetRecord {
    /// Whose offset.
    pub key: OffsetKey,
    /// The committed position; `None` deletes it.
    pub value: Option<CommittedOffset>,
}

/// Why stored bytes could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum OffsetRecordError {
    /// The record batch did not parse.
    #[error("offsets log batch: {0}")]
    Batch(String),
    /// A key or value was truncated or carried an unknown version.
    #[error("offsets log record is malformed")]
    Record,
}

impl From<Malformed> for OffsetRecordError {
    fn from(_: Malformed) -> Self {
        OffsetRecordError::Record
    }
}

/// Key bytes: version 1 (committed) `[group][topic][i32 partition]`, or version 2 (pending in a
/// transaction) with the producer id after them.
pub fn encode_key(key: &OffsetKey) -> Bytes {
    let mut out = BytesMut::with_capacity(17 + key.group.len() + key.tp.topic.len());
    out.put_u8(match key.pending_for {
        None => KEY_VERSION,
        Some(_) => PENDING_KEY_VERSION,
    });
    put_str(&mut out, &key.group);
    put_str(&mut out, &key.tp.topic);
    out.put_i32(key.tp.partition.0);
    if let Some(producer) = key.pending_for {
        out.put_i64(producer.0);
    }
    out.freeze()
}

/// Parse [`encode_key`]'s bytes.
pub fn decode_key(mut buf: Bytes) -> Result<OffsetKey, OffsetRecordError> {
    if buf.remaining() < 1 {
        return Err(OffsetRecordError::Record);
    }
    let tail = match buf.get_u8() {
        KEY_VERSION => 4,
        PENDING_KEY_VERSION => 12,
        _ => return Err(OffsetRecordError::Record),
    };
    let group = get_str(&mut buf)?;
    let topic = get_str(&mut buf)?;
    if buf.remaining() != tail {
        return Err(OffsetRecordError::Record);
    }
    let partition = PartitionIndex(buf.get_i32());
    let pending_for = (tail == 12).then(|| ProducerId(buf.get_i64()));
    Ok(OffsetKey {
        group,
        tp: TopicPartition::new(topic, partition),
        pending_for,
    })
}

/// Value bytes: version, offset, leader epoch, commit time, metadata (i32 length, -1 = null).
pub fn encode_value(value: &CommittedOffset) -> Bytes {
    let metadata = value.metadata.as_deref();
    let mut out = BytesMut::with_capacity(25 + metadata.map_or(0, str::len));
    out.put_u8(VALUE_VERSION);
    out.put_i64(value.offset.0);
    out.put_i32(value.leader_epoch.0);
    out.put_i64(value.commit_time_ms.0);
    match metadata {
        Some(m) => {
            // A wire STRING (at most 32767 bytes, rill_types::limits): fits the i32.
            out.put_i32(m.len() as i32);
            out.put_slice(m.as_bytes());
        }
        None => out.put_i32(-1),
    }
    out.freeze()
}

/// Parse [`encode_value`]'s bytes.
pub fn decode_value(mut buf: Bytes) -> Result<CommittedOffset, OffsetRecordError> {
    if buf.remaining() < 25 || buf.get_u8() != VALUE_VERSION {
        return Err(OffsetRecordError::Record);
    }
    let offset = Offset(buf.get_i64());
    let leader_epoch = LeaderEpoch(buf.get_i32());
    let commit_time_ms = TimestampMs(buf.get_i64());
    let len = buf.get_i32();
    let metadata = if len < 0 {
        None
    } else if buf.remaining() == len as usize {
        Some(String::from_utf8(buf.to_vec()).map_err(|_| OffsetRecordError::Record)?)
    } else {
        return Err(OffsetRecordError::Record);
    };
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_time_ms,
    })
}

/// One v2 record batch holding `records` (uncompressed: they are small and replayed often),
/// ready to append (the journal is its own producer: the batch is checked as any would be).
pub fn encode_batch(records: &[OffsetRecord], timestamp_ms: TimestampMs) -> ValidatedBatch {
    assert!(!records.is_empty());
    let bytes = encode_plain_batch(records.iter().map(|r| PlainRecord {
        key: Some(encode_key(&r.key)),
        value: r.value.as_ref().map(encode_value),
        timestamp_ms: timestamp_ms.0,
    }));
    ValidatedBatch::new(bytes, usize::MAX).expect("an encoded offsets batch is valid")
}

/// One record of the offsets log: a committed offset, or a group's membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRecord {
    /// A committed offset (or its tombstone).
    Offset(OffsetRecord),
    /// A group's membership (`None`: the group was deleted), `super::metadata_record`.
    Group(String, Option<GroupMetadata>),
    /// A KIP-848 consumer group's record in Kafka's format (key first byte 0x00): key and
    /// value bytes, parsed when the group loads (`crate::group::consumer::records`).
    Consumer(Bytes, Option<Bytes>),
}

/// The offset records in `chunk` (whole batches back to back), with their offsets, in log
/// order; group membership records are skipped (a single node never writes them).
pub fn decode_chunk(chunk: Bytes) -> Result<Vec<(Offset, OffsetRecord)>, OffsetRecordError> {
    let records = decode_log_chunk(chunk)?.into_iter();
    Ok(records
        .filter_map(|(offset, record)| match record {
            LogRecord::Offset(r) => Some((offset, r)),
            LogRecord::Group(..) | LogRecord::Consumer(..) => None,
        })
        .collect())
}

/// Every record in `chunk` (whole batches back to back), with its offset, in log order.
pub fn decode_log_chunk(chunk: Bytes) -> Result<Vec<(Offset, LogRecord)>, OffsetRecordError> {
    let mut buf = chunk;
    let sets = RecordBatchDecoder::decode_all(&mut buf)
        .map_err(|e| OffsetRecordError::Batch(e.to_string()))?;
    let mut out = Vec::new();
    for set in sets {
        for record in set.records {
            let key = record.key.ok_or(OffsetRecordError::Record)?;
            let decoded = if key.first() == Some(&0) {
                LogRecord::Consumer(key, record.value)
            } else if key.first() == Some(&GROUP_KEY_VERSION) {
                let group = decode_group_key(key)?;
                let value = record.value.map(decode_group_value).transpose()?;
                LogRecord::Group(group, value)
            } else {
                let key = decode_key(key)?;
                let value = record.value.map(decode_value).transpose()?;
                LogRecord::Offset(OffsetRecord { key, value })
            };
            out.push((Offset(record.offset), decoded));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(topic: &str, partition: i32) -> TopicPartitionRef<'_> {
        TopicPartitionRef::new(topic, PartitionIndex(partition))
    }

    fn rec(group: &str, partition: i32, offset: Option<i64>) -> OffsetRecord {
        OffsetRecord {
            key: OffsetKey::committed(group, at("t", partition)),
            value: offset.map(|offset| CommittedOffset {
                offset: Offset(offset),
                leader_epoch: LeaderEpoch(3),
                metadata: (offset % 2 == 0).then(|| format!("m{offset}")),
                commit_time_ms: TimestampMs(77),
            }),
        }
    }

    #[test]
    fn batch_round_trip_with_tombstones_and_null_metadata() {
        let records = vec![
            rec("g", 0, Some(10)),
            rec("g", 1, Some(11)),
            rec("h", 0, None),
        ];
        let batch = encode_batch(&records, TimestampMs(5)).freeze();
        let back = decode_chunk(batch).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(
            back.iter().map(|(o, _)| o.0).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(
            back.into_iter().map(|(_, r)| r).collect::<Vec<_>>(),
            records
        );
    }

    #[test]
    fn pending_keys_round_trip_and_differ_from_committed_ones() {
        let pending = OffsetKey::pending("g", at("t", 4), ProducerId(77));
        let back = decode_key(encode_key(&pending)).unwrap();
        assert_eq!(back, pending);
        let committed = decode_key(encode_key(&OffsetKey::committed("g", at("t", 4)))).unwrap();
        assert_eq!(committed.pending_for, None);
        assert_ne!(encode_key(&pending), encode_key(&committed));
        let key = encode_key(&pending);
        for cut in 0..key.len() {
            assert!(decode_key(key.slice(..cut)).is_err());
        }
    }

    #[test]
    fn keys_keep_their_bytes() {
        let committed = encode_key(&OffsetKey::committed("g", at("t", 4)));
        assert_eq!(committed[..], [1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 4]);
        let pending = encode_key(&OffsetKey::pending("g", at("t", -2), ProducerId(0x0102)));
        let mut expected = vec![2, 0, 1, b'g', 0, 1, b't', 0xff, 0xff, 0xff, 0xfe];
        expected.extend_from_slice(&0x0102i64.to_be_bytes());
        assert_eq!(pending[..], expected[..]);
    }

    #[test]
    fn truncated_records_are_errors_not_panics() {
        let key = encode_key(&rec("g", 0, None).key);
        for cut in 0..key.len() {
            assert!(decode_key(key.slice(..cut)).is_err());
        }
        let value = encode_value(&rec("g", 0, Some(2)).value.unwrap());
        for cut in 0..value.len() {
            assert!(decode_value(value.slice(..cut)).is_err());
        }
        assert!(decode_chunk(Bytes::from_static(b"garbage-garbage")).is_err());
    }

    #[test]
    fn the_commit_time_and_the_batch_timestamp_keep_their_bytes() {
        let value = CommittedOffset {
            commit_time_ms: TimestampMs(1_700_000_000_123),
            ..rec("g", 0, Some(1)).value.unwrap()
        };
        let bytes = encode_value(&value);
        let at = 1 + 8 + 4; // after the version, the offset and the leader epoch
        assert_eq!(bytes[at..at + 8], 1_700_000_000_123i64.to_be_bytes());
        assert_eq!(decode_value(bytes).unwrap(), value);
        let none = CommittedOffset {
            commit_time_ms: TimestampMs::NONE,
            ..value
        };
        assert_eq!(encode_value(&none)[at..at + 8], (-1i64).to_be_bytes());
        let batch = encode_batch(&[rec("g", 0, Some(1))], TimestampMs(42));
        assert_eq!(batch.header().base_ts(), TimestampMs(42));
        assert_eq!(batch.header().max_ts(), TimestampMs(42));
    }
}
