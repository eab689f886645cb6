//! Records of the transaction state log: key = transactional id, value = its [`TxnMetadata`];
//! a tombstone (no value) forgets the id (expiration). Later records win, so replaying the log
//! in order rebuilds the map.
//!
//! ```text
//! key:   [u8 version = 1][u16 len][transactional id]
//! value: [u8 version = 1][i64 producer id][i64 last producer id][i16 epoch][i16 last epoch]
//!        [i32 timeout ms][u8 state][i64 start ms][i64 last update ms]
//!        [u32 n][n x ([u16 len][topic][i32 partition])][u32 m][m x ([u16 len][group])]
//! ```
//! Stored as uncompressed v2 record batches (one per append), like the group offsets log.

use std::collections::BTreeSet;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rill_protocol::kafka_protocol::records::RecordBatchDecoder;
use rill_protocol::record::{encode_plain_batch, PlainRecord};

use super::state::{TxnMetadata, TxnState};
use super::{ProducerEpoch, ProducerId};
use crate::record_fields::{get_str, need, put_str, Malformed};
use rill_types::batch::ValidatedBatch;
use rill_types::{PartitionIndex, TimestampMs, TopicPartition};

const KEY_VERSION: u8 = 1;
const VALUE_VERSION: u8 = 1;

/// One record: the id's metadata, or `None` to forget it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRecord {
    /// The transactional id.
    pub transactional_id: String,
    /// Its metadata; `None` deletes it.
    pub metadata: Option<TxnMetadata>,
}

/// Why stored bytes could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum TxnRecordError {
    /// The record batch did not parse.
    #[error("transaction state log batch: {0}")]
    Batch(String),
    /// A key or value was truncated or carried an unknown version.
    #[error("transaction state log record is malformed")]
    Record,
}

impl From<Malformed> for TxnRecordError {
    fn from(_: Malformed) -> Self {
        TxnRecordError::Record
    }
}

/// Key bytes.
pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(3 + transactional_id.len());
    out.put_u8(KEY_VERSION);
    put_str(&mut out, transactional_id);
    out.freeze()
}

/// Parse [`encode_key`]'s bytes.
pub fn decode_key(mut buf: Bytes) -> Result<String, TxnRecordError> {
    need(&buf, 1)?;
    if buf.get_u8() != KEY_VERSION {
        return Err(TxnRecordError::Record);
    }
    let id = get_str(&mut buf)?;
    if buf.has_remaining() {
        return Err(TxnRecordError::Record);
    }
    Ok(id)
}

/// Value bytes.
pub fn encode_value(m: &TxnMetadata) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.put_u8(VALUE_VERSION);
    out.put_i64(m.producer_id.0);
    out.put_i64(m.last_producer_id.0);
    out.put_i16(m.producer_epoch.0);
    out.put_i16(m.last_producer_epoch.0);
    out.put_i32(m.timeout_ms);
    let state = TxnState::ALL
        .iter()
        .position(|s| *s == m.state)
        .expect("listed");
    out.put_u8(state as u8);
    out.put_i64(m.start_ms.0);
    out.put_i64(m.last_update_ms.0);
    out.put_u32(m.partitions.len() as u32);
    for tp in &m.partitions {
        put_str(&mut out, &tp.topic);
        out.put_i32(tp.partition.0);
    }
    out.put_u32(m.groups.len() as u32);
    for group in &m.groups {
        put_str(&mut out, group);
    }
    out.freeze()
}

/// Parse [`encode_value`]'s bytes.
pub fn decode_value(mut buf: Bytes) -> Result<TxnMetadata, TxnRecordError> {
    need(&buf, 1 + 8 + 8 + 2 + 2 + 4 + 1 + 8 + 8 + 4)?;
    if buf.get_u8() != VALUE_VERSION {
        return Err(TxnRecordError::Record);
    }
    let producer_id = ProducerId(buf.get_i64());
    let last_producer_id = ProducerId(buf.get_i64());
    let producer_epoch = ProducerEpoch(buf.get_i16());
    let last_producer_epoch = ProducerEpoch(buf.get_i16());
    let timeout_ms = buf.get_i32();
    let state = *TxnState::ALL
        .get(buf.get_u8() as usize)
        .ok_or(TxnRecordError::Record)?;
    let start_ms = TimestampMs(buf.get_i64());
    let last_update_ms = TimestampMs(buf.get_i64());
    let mut partitions = BTreeSet::new();
    for _ in 0..buf.get_u32() {
        let topic = get_str(&mut buf)?;
        need(&buf, 4)?;
        partitions.insert(TopicPartition::new(topic, PartitionIndex(buf.get_i32())));
    }
    need(&buf, 4)?;
    let mut groups = BTreeSet::new();
    for _ in 0..buf.get_u32() {
        groups.insert(get_str(&mut buf)?);
    }
    if buf.has_remaining() {
        return Err(TxnRecordError::Record);
    }
    Ok(TxnMetadata {
        producer_id,
        last_producer_id,
        producer_epoch,
        last_producer_epoch,
        timeout_ms,
        state,
        partitions,
        groups,
        start_ms,
        last_update_ms,
    })
}

/// One v2 record batch holding `records`.
pub fn encode_batch(records: &[TxnRecord], timestamp_ms: TimestampMs) -> ValidatedBatch {
    assert!(!records.is_empty());
    let bytes = encode_plain_batch(records.iter().map(|r| PlainRecord {
        key: Some(encode_key(&r.transactional_id)),
        value: r.metadata.as_ref().map(encode_value),
        timestamp_ms: timestamp_ms.0,
    }));
    // The log is its own producer: its batch is checked as any other before the engine takes it.
    ValidatedBatch::new(bytes, usize::MAX).expect("an encoded transaction-log batch is valid")
}

/// Every record in `chunk` (whole batches back to back), with its offset, in log order.
pub fn decode_chunk(chunk: Bytes) -> Result<Vec<(i64, TxnRecord)>, TxnRecordError> {
    let mut buf = chunk;
    let sets = RecordBatchDecoder::decode_all(&mut buf)
        .map_err(|e| TxnRecordError::Batch(e.to_string()))?;
    let mut out = Vec::new();
    for set in sets {
        for record in set.records {
            let transactional_id = decode_key(record.key.ok_or(TxnRecordError::Record)?)?;
            let metadata = record.value.map(decode_value).transpose()?;
            out.push((
                record.offset,
                TxnRecord {
                    transactional_id,
                    metadata,
                },
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> TxnMetadata {
        TxnMetadata {
            producer_id: ProducerId(42),
            last_producer_id: ProducerId(-1),
            producer_epoch: ProducerEpoch(3),
            last_producer_epoch: ProducerEpoch(2),
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: [
                TopicPartition::new("t", PartitionIndex(0)),
                TopicPartition::new("u", PartitionIndex(7)),
            ]
            .into(),
            groups: ["g".to_string()].into(),
            start_ms: TimestampMs(100),
            last_update_ms: TimestampMs(200),
        }
    }

    #[test]
    fn batch_round_trip_with_tombstones() {
        let records = vec![
            TxnRecord {
                transactional_id: "a".into(),
                metadata: Some(metadata()),
            },
            TxnRecord {
                transactional_id: "b".into(),
                metadata: None,
            },
        ];
        let back = decode_chunk(encode_batch(&records, TimestampMs(5)).freeze()).unwrap();
        assert_eq!(back.iter().map(|(o, _)| *o).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(
            back.into_iter().map(|(_, r)| r).collect::<Vec<_>>(),
            records
        );
    }

    #[test]
    fn the_instants_are_stored_as_big_endian_epoch_millis() {
        // The bytes the untyped `i64` fields wrote: typing them changed no byte on disk.
        let at = 1 + 8 + 8 + 2 + 2 + 4 + 1;
        let value = encode_value(&metadata());
        assert_eq!(value[at..at + 8], 100i64.to_be_bytes());
        assert_eq!(value[at + 8..at + 16], 200i64.to_be_bytes());
        let none = TxnMetadata {
            start_ms: TimestampMs::NONE,
            ..metadata()
        };
        let value = encode_value(&none);
        assert_eq!(value[at..at + 8], (-1i64).to_be_bytes());
        assert_eq!(decode_value(value).unwrap(), none);
    }

    #[test]
    fn truncated_and_padded_records_are_errors_not_panics() {
        let value = encode_value(&metadata());
        for cut in 0..value.len() {
            assert!(decode_value(value.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut padded = value.to_vec();
        padded.push(0);
        assert!(decode_value(Bytes::from(padded)).is_err());
        let key = encode_key("tx");
        for cut in 0..key.len() {
            assert!(decode_key(key.slice(..cut)).is_err());
        }
        let mut bad_state = value.to_vec();
        bad_state[1 + 8 + 8 + 2 + 2 + 4] = 99;
        assert!(decode_value(Bytes::from(bad_state)).is_err());
    }
}
