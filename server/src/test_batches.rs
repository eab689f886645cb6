//! Record batches the unit tests write: below every module whose tests append one (the
//! partition actor's, the admin's shard metrics', the handlers').

use bytes::Bytes;
use rill_protocol::record::{encode_plain_batch, PlainRecord};

/// A valid v2 record batch of `records` records (timestamps 1000, 1001, ...).
pub fn batch(records: usize) -> Bytes {
    encode_plain_batch((0..records).map(|i| PlainRecord {
        key: None,
        value: Some(Bytes::from(format!("value-{i}"))),
        timestamp_ms: 1000 + i as i64,
    }))
    .freeze()
}
