//! The `records` field of a Produce: valid v2 batches (plain, idempotent or transactional, any
//! codec) most of the time in valid mode, and in hostile mode the batch-level lies a producer can
//! tell: a wrong CRC, batch length or record count, an old magic, two batches, a torn tail,
//! a control bit, garbage.

use bytes::{Bytes, BytesMut};
use rill_protocol::kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::entropy::Entropy;
use crate::state::Producer;
use crate::values::Mode;

/// What a Produce's batch claims about its producer.
#[derive(Clone, Debug, Default)]
pub struct BatchProducer {
    /// -1 for none.
    pub producer_id: i64,
    /// -1 for none.
    pub epoch: i16,
    /// Base sequence (-1 for none).
    pub sequence: i32,
    /// The transactional bit.
    pub transactional: bool,
}

impl BatchProducer {
    /// A batch without a producer id.
    pub fn none() -> Self {
        BatchProducer {
            producer_id: -1,
            epoch: -1,
            sequence: -1,
            transactional: false,
        }
    }

    /// The batch of a learned producer.
    pub fn of(p: &Producer, transactional: bool) -> Self {
        BatchProducer {
            producer_id: p.producer_id,
            epoch: p.epoch,
            sequence: p.sequence,
            transactional,
        }
    }
}

/// The bytes of a `records` field (None is null). `budget` bounds the bytes written.
pub fn records_value<E: Entropy>(
    e: &mut E,
    mode: Mode,
    producer: &BatchProducer,
    budget: usize,
) -> Option<Vec<u8>> {
    let batch = valid_batch(e, producer, budget);
    if mode == Mode::Valid || e.chance(40) {
        return Some(batch);
    }
    match e.below(9) {
        0 => None,
        1 => Some(Vec::new()),
        2 => {
            let n = 1 + e.below(100);
            Some(e.bytes(n))
        }
        3 => Some(corrupt_at(e, batch, 17)), // the CRC
        4 => Some(corrupt_at(e, batch, 8)),  // the batch length
        5 => Some(corrupt_at(e, batch, 57)), // the record count
        6 => {
            let mut b = batch;
            b[16] = e.pick(&[0, 1, 3]); // magic
            Some(b)
        }
        7 => {
            let mut two = batch.clone();
            two.extend_from_slice(&batch);
            Some(two)
        }
        _ => {
            let cut = e.below(batch.len());
            Some(batch[..cut].to_vec())
        }
    }
}

/// One valid v2 batch of 1-10 records.
fn valid_batch<E: Entropy>(e: &mut E, producer: &BatchProducer, budget: usize) -> Vec<u8> {
    let count = 1 + e.below(10);
    let value_len = match e.weighted(&[50, 35, 12, 3]) {
        0 => e.below(16),
        1 => e.below(512),
        2 => e.below(8192),
        _ => 64 * 1024 + e.below(64 * 1024),
    }
    .min(budget / count.max(1));
    let compression = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ][e.weighted(&[60, 10, 10, 10, 10])];
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: producer.transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: producer.producer_id,
            producer_epoch: producer.epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if producer.sequence < 0 {
                -1
            } else {
                producer.sequence.wrapping_add(i as i32)
            },
            timestamp: 1_700_000_000_000 + i as i64,
            key: e
                .chance(30)
                .then(|| Bytes::from(format!("k{}", e.below(100)))),
            value: Some(Bytes::from(vec![b'v'; value_len])),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encoding into memory");
    buf.to_vec()
}

/// `batch` with a few bytes from `at` replaced by arbitrary ones (when the batch reaches it).
fn corrupt_at<E: Entropy>(e: &mut E, mut batch: Vec<u8>, at: usize) -> Vec<u8> {
    for i in at..(at + 4).min(batch.len()) {
        batch[i] = e.take(1) as u8;
    }
    batch
}
