//! Record batches: built for Produce requests, and read back out of Fetch responses as leaves.
//!
//! A fetched batch is compared by its v2 header fields and a hash of its records section (keys,
//! values, headers, deltas), not by its CRC: the CRC covers the producer id, which differs
//! between the brokers and is normalised like every other producer id.

use bytes::{Buf, Bytes, BytesMut};
use rill_protocol::kafka_protocol::indexmap::IndexMap;
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::tree::Leaf;

/// Size of a record batch v2 header.
const HEADER_BYTES: usize = 61;

/// What a produced batch carries besides its values.
#[derive(Debug, Clone, Copy)]
pub struct BatchSpec {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
    pub compression: Compression,
    /// CreateTime of every record (fixed, so both brokers store the same bytes).
    pub timestamp_ms: i64,
}

impl Default for BatchSpec {
    fn default() -> Self {
        BatchSpec {
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            compression: Compression::None,
            timestamp_ms: 1_700_000_000_000,
        }
    }
}

/// One batch of `values` (keys `k0`, `k1`, ..; one header on the first record).
pub fn batch(values: &[&[u8]], spec: BatchSpec) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let mut headers = IndexMap::new();
            if i == 0 {
                headers.insert(
                    StrBytes::from_static_str("h"),
                    Some(Bytes::from_static(b"v")),
                );
            }
            Record {
                transactional: spec.transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: spec.producer_id,
                producer_epoch: spec.producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // The codec keeps records in one batch while offset - sequence stays the same:
                // base sequence -1 (no producer) counts on from -1 too.
                sequence: spec.base_sequence + i as i32,
                timestamp: spec.timestamp_ms,
                key: Some(Bytes::from(format!("k{i}"))),
                value: Some(Bytes::copy_from_slice(value)),
                headers,
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: spec.compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encoding a test batch");
    buf.freeze()
}

/// The leaves of every batch in `records`, under `prefix.records[i]`.
pub fn batch_leaves(prefix: &str, records: &Bytes) -> Vec<Leaf> {
    let mut leaves = Vec::new();
    let mut rest = records.clone();
    let mut index = 0;
    while rest.len() >= 12 {
        let size = i32::from_be_bytes(rest[8..12].try_into().expect("4 bytes"));
        let total = usize::try_from(size).unwrap_or(0) + 12;
        let p = format!("{prefix}.records[{index}]");
        if total < HEADER_BYTES || total > rest.len() {
            // A partial batch at the end (a size limit cut it): its length is what a client sees.
            leaves.push((format!("{p}.partial_bytes"), rest.len().to_string()));
            break;
        }
        let batch = rest.split_to(total);
        leaves.extend(header_leaves(&p, &batch));
        index += 1;
    }
    if !rest.is_empty() && rest.len() < 12 {
        leaves.push((
            format!("{prefix}.records[{index}].partial_bytes"),
            rest.len().to_string(),
        ));
    }
    leaves.push((format!("{prefix}.records.batches"), index.to_string()));
    leaves
}

fn header_leaves(p: &str, batch: &Bytes) -> Vec<Leaf> {
    let mut b = batch.clone();
    let base_offset = b.get_i64();
    let _length = b.get_i32();
    let leader_epoch = b.get_i32();
    let magic = b.get_i8();
    let _crc = b.get_u32();
    let attributes = b.get_i16();
    let last_offset_delta = b.get_i32();
    let base_timestamp = b.get_i64();
    let max_timestamp = b.get_i64();
    let producer_id = b.get_i64();
    let producer_epoch = b.get_i16();
    let base_sequence = b.get_i32();
    let count = b.get_i32();
    let body_hash = fnv1a(&batch[HEADER_BYTES..]);
    [
        ("base_offset", base_offset.to_string()),
        ("partition_leader_epoch", leader_epoch.to_string()),
        ("magic", magic.to_string()),
        ("attributes", attributes.to_string()),
        ("last_offset_delta", last_offset_delta.to_string()),
        ("base_timestamp", base_timestamp.to_string()),
        ("max_timestamp", max_timestamp.to_string()),
        ("producer_id", producer_id.to_string()),
        ("producer_epoch", producer_epoch.to_string()),
        ("base_sequence", base_sequence.to_string()),
        ("record_count", count.to_string()),
        ("body_hash", format!("{body_hash:016x}")),
    ]
    .into_iter()
    .map(|(name, value)| (format!("{p}.{name}"), value))
    .collect()
}

/// FNV-1a, 64 bits: enough to tell two record sections apart in a test.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
