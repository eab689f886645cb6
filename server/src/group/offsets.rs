//! Committed offsets and their records in the internal offsets log.
//!
//! A record's key is (group, topic, partition), its value the committed position; a tombstone
//! (no value) forgets it (OffsetDelete, DeleteGroups). Later records win, so replaying the log
//! in order rebuilds the map. Encodings carry a version byte so the format can evolve.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rill_protocol::kafka_protocol::records::RecordBatchDecoder;
use rill_protocol::record::{encode_plain_batch, PlainRecord};
use rill_types::batch::ValidatedBatch;
use rill_types::{LeaderEpoch, Offset};

/// Kafka's `offset.metadata.max.bytes` default: longer metadata gets OFFSET_METADATA_TOO_LARGE.
pub const METADATA_BYTES_MAX: usize = 4096;

const KEY_VERSION: u8 = 1;
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
    pub commit_time_ms: i64,
}

/// What a record is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffsetKey {
    /// Group id.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
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
pub enum DecodeError {
    /// The record batch did not parse.
    #[error("offsets log batch: {0}")]
    Batch(String),
    /// A key or value was truncated or carried an unknown version.
    #[error("offsets log record is malformed")]
    Record,
}

fn put_str(out: &mut BytesMut, s: &str) {
    let len = u16::try_from(s.len()).expect("group and topic names are short");
    out.put_u16(len);
    out.put_slice(s.as_bytes());
}

fn get_str(buf: &mut Bytes) -> Result<String, DecodeError> {
    if buf.remaining() < 2 {
        return Err(DecodeError::Record);
    }
    let len = buf.get_u16() as usize;
    if buf.remaining() < len {
        return Err(DecodeError::Record);
    }
    String::from_utf8(buf.split_to(len).to_vec()).map_err(|_| DecodeError::Record)
}

/// Key bytes: version, group, topic, partition.
pub fn encode_key(key: &OffsetKey) -> Bytes {
    let mut out = BytesMut::with_capacity(9 + key.group.len() + key.topic.len());
    out.put_u8(KEY_VERSION);
    put_str(&mut out, &key.group);
    put_str(&mut out, &key.topic);
    out.put_i32(key.partition);
    out.freeze()
}

/// Parse [`encode_key`]'s bytes.
pub fn decode_key(mut buf: Bytes) -> Result<OffsetKey, DecodeError> {
    if buf.remaining() < 1 || buf.get_u8() != KEY_VERSION {
        return Err(DecodeError::Record);
    }
    let group = get_str(&mut buf)?;
    let topic = get_str(&mut buf)?;
    if buf.remaining() != 4 {
        return Err(DecodeError::Record);
    }
    let partition = buf.get_i32();
    Ok(OffsetKey {
        group,
        topic,
        partition,
    })
}

/// Value bytes: version, offset, leader epoch, commit time, metadata (i32 length, -1 = null).
pub fn encode_value(value: &CommittedOffset) -> Bytes {
    let metadata = value.metadata.as_deref();
    let mut out = BytesMut::with_capacity(25 + metadata.map_or(0, str::len));
    out.put_u8(VALUE_VERSION);
    out.put_i64(value.offset.0);
    out.put_i32(value.leader_epoch.0);
    out.put_i64(value.commit_time_ms);
    match metadata {
        Some(m) => {
            out.put_i32(m.len() as i32);
            out.put_slice(m.as_bytes());
        }
        None => out.put_i32(-1),
    }
    out.freeze()
}

/// Parse [`encode_value`]'s bytes.
pub fn decode_value(mut buf: Bytes) -> Result<CommittedOffset, DecodeError> {
    if buf.remaining() < 25 || buf.get_u8() != VALUE_VERSION {
        return Err(DecodeError::Record);
    }
    let offset = Offset(buf.get_i64());
    let leader_epoch = LeaderEpoch(buf.get_i32());
    let commit_time_ms = buf.get_i64();
    let len = buf.get_i32();
    let metadata = if len < 0 {
        None
    } else if buf.remaining() == len as usize {
        Some(String::from_utf8(buf.to_vec()).map_err(|_| DecodeError::Record)?)
    } else {
        return Err(DecodeError::Record);
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
pub fn encode_batch(records: &[OffsetRecord], timestamp_ms: i64) -> ValidatedBatch {
    assert!(!records.is_empty());
    let bytes = encode_plain_batch(records.iter().map(|r| PlainRecord {
        key: Some(encode_key(&r.key)),
        value: r.value.as_ref().map(encode_value),
        timestamp_ms,
    }));
    ValidatedBatch::new(bytes, usize::MAX).expect("an encoded offsets batch is valid")
}

/// Every record in `chunk` (whole batches back to back), with its offset, in log order.
pub fn decode_chunk(chunk: Bytes) -> Result<Vec<(Offset, OffsetRecord)>, DecodeError> {
    let mut buf = chunk;
    let sets =
        RecordBatchDecoder::decode_all(&mut buf).map_err(|e| DecodeError::Batch(e.to_string()))?;
    let mut out = Vec::new();
    for set in sets {
        for record in set.records {
            let key = decode_key(record.key.ok_or(DecodeError::Record)?)?;
            let value = record.value.map(decode_value).transpose()?;
            out.push((Offset(record.offset), OffsetRecord { key, value }));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(group: &str, partition: i32, offset: Option<i64>) -> OffsetRecord {
        OffsetRecord {
            key: OffsetKey {
                group: group.into(),
                topic: "t".into(),
                partition,
            },
            value: offset.map(|offset| CommittedOffset {
                offset: Offset(offset),
                leader_epoch: LeaderEpoch(3),
                metadata: (offset % 2 == 0).then(|| format!("m{offset}")),
                commit_time_ms: 77,
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
        let batch = encode_batch(&records, 5).freeze();
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
}
