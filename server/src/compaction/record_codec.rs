//! [`KafkaRecords`]: the engine cleaner's view of Kafka's v2 record format.

use rill_engine::cleaner::{BatchKind, RecordCodec, RecordInfo, DECOMPRESSED_BYTES_MAX};
use rill_engine::{Offset, TimestampMs};
use rill_protocol::record::{for_each_record, retain_records, RecordBatchView};

/// Kafka record batches v2, decoded and rebuilt by `rill-protocol`.
#[derive(Copy, Clone, Debug, Default)]
pub struct KafkaRecords;

impl RecordCodec for KafkaRecords {
    fn batch_kind(&self, batch: &[u8]) -> BatchKind {
        let Ok(view) = RecordBatchView::new(batch) else {
            return BatchKind::default();
        };
        let attributes = view.attributes();
        BatchKind {
            control: attributes.is_control(),
            transactional: attributes.is_transactional(),
            delete_horizon: attributes
                .has_delete_horizon()
                .then(|| view.base_timestamp()),
        }
    }

    fn for_each_record(
        &self,
        batch: &[u8],
        each: &mut dyn FnMut(RecordInfo<'_>),
    ) -> Result<(), String> {
        for_each_record(batch, DECOMPRESSED_BYTES_MAX, |r| {
            each(RecordInfo {
                offset: r.offset,
                key: r.key,
                tombstone: r.tombstone,
            })
        })
        .map_err(|e| e.to_string())
    }

    fn retain(
        &self,
        batch: &[u8],
        keep: &dyn Fn(Offset) -> bool,
        delete_horizon: Option<TimestampMs>,
    ) -> Result<Vec<u8>, String> {
        retain_records(batch, keep, delete_horizon, DECOMPRESSED_BYTES_MAX)
            .map_err(|e| e.to_string())
    }
}
