//! Building one uncompressed v2 record batch from plain records: what the broker needs for its own
//! internal logs (group offsets) and what tests need to play a producer. Clients' batches are never
//! rebuilt: they are stored as sent.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// One record to put in a [`encode_plain_batch`] batch.
#[derive(Debug, Clone, Default)]
pub struct PlainRecord {
    /// Record key (None = null key).
    pub key: Option<Bytes>,
    /// Record value (None = null value, a tombstone).
    pub value: Option<Bytes>,
    /// CreateTime timestamp in milliseconds.
    pub timestamp_ms: i64,
}

/// Encode `records` as ONE uncompressed v2 batch with relative offsets 0..n, no producer id.
pub fn encode_plain_batch(records: impl IntoIterator<Item = PlainRecord>) -> BytesMut {
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // offset - sequence must be constant for the encoder to keep one batch.
            sequence: i as i32,
            timestamp: r.timestamp_ms,
            key: r.key,
            value: r.value,
            headers: Default::default(),
        })
        .collect();
    assert!(
        !records.is_empty(),
        "a record batch holds at least one record"
    );
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encoding into memory");
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordBatchView;

    #[test]
    fn plain_batch_is_one_valid_batch_with_every_record() {
        let batch = encode_plain_batch((0..3).map(|i| PlainRecord {
            key: None,
            value: Some(Bytes::from(format!("v{i}"))),
            timestamp_ms: 1000 + i,
        }));
        let view = RecordBatchView::validate(batch.freeze()).expect("valid batch");
        assert_eq!(view.record_count(), 3);
        assert_eq!(view.last_offset_delta(), 2);
        assert_eq!(view.max_timestamp().0, 1002);
    }
}
