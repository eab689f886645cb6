//! What the engine knows about a batch ([`BatchMeta`]) and how it checks batches read back
//! from disk ([`validate_prefix`]).
//!
//! The v2 header layout and its checks are defined once, in `rill-types`, for the wire and the
//! disk alike; the engine's short names for them are re-exported here. Appends take a
//! [`ValidatedBatch`], checked once where it entered the broker: the engine trusts it and only
//! copies its facts out. Bytes read back from storage are checked again (CRC after the read, as
//! before the write), because a disk can change them.
//!
//! All big-endian. The CRC does not cover baseOffset or partitionLeaderEpoch, which is why the
//! broker can assign offsets by rewriting baseOffset alone. The engine never decodes records.

use crate::control::{control_type, Control};
use crate::error::EngineError;
use crate::types::{Offset, TimestampMs};
use bytes::BytesMut;
use rill_types::batch::{check_prefix, write_crc};
use rill_types::{ProducerEpoch, ProducerId, Sequence};

/// The v2 record batch header, read in place (`rill_types::batch::RecordBatchHeader`).
pub use rill_types::batch::RecordBatchHeader as BatchHeader;
/// Bytes in a v2 batch header (`rill_types::batch::BATCH_HEADER_BYTES`).
pub use rill_types::batch::BATCH_HEADER_BYTES as HEADER_BYTES;
/// Bytes before `batchLength` counts: baseOffset + batchLength
/// (`rill_types::batch::BATCH_LENGTH_OVERHEAD_BYTES`).
pub use rill_types::batch::BATCH_LENGTH_OVERHEAD_BYTES as LOG_OVERHEAD_BYTES;
pub use rill_types::batch::{ValidatedBatch, CRC_START};

/// Facts about a batch that the log keeps, copied out of the header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    /// baseOffset as found in the bytes.
    pub base_offset: Offset,
    /// baseOffset + lastOffsetDelta.
    pub last_offset: Offset,
    /// maxTimestamp.
    pub max_timestamp: TimestampMs,
    /// Whole size in bytes.
    pub total_bytes: usize,
    /// Producer id ([`ProducerId::NONE`] if none).
    pub producer_id: ProducerId,
    /// Producer epoch.
    pub producer_epoch: ProducerEpoch,
    /// First sequence ([`Sequence::NONE`] if none).
    pub base_sequence: Sequence,
    /// The transactional attribute bit: the batch belongs to a transaction.
    pub transactional: bool,
    /// For a control batch (attribute bit 5), what it says; `None` for data batches.
    pub control: Option<Control>,
}

/// Checks the batch at the start of `buf` as read back from storage: whole, magic 2, CRC-32C,
/// offsets in range (lastOffsetDelta >= 0, baseOffset + delta + 1 fits). Returns its facts.
/// `buf` may continue past the batch.
pub fn validate_prefix(buf: &[u8]) -> Result<BatchMeta, EngineError> {
    let total = check_prefix(buf).map_err(|e| EngineError::CorruptBatch(e.to_string()))?;
    let header = BatchHeader::view(buf).expect("checked");
    if header.last_offset_delta.get() < 0 {
        return Err(corrupt("negative lastOffsetDelta"));
    }
    // baseOffset is outside the CRC: damage there must not overflow the offset arithmetic.
    let past_last = i64::from(header.last_offset_delta.get()) + 1;
    if header.base_offset.get().checked_add(past_last).is_none() {
        return Err(corrupt("baseOffset out of range"));
    }
    with_control(meta_of(header, total), &buf[..total])
}

/// The facts of a batch checked where it entered the broker (nothing is checked again; a
/// control batch's type is read, and refused as corrupt if it cannot be).
pub fn meta_of_validated(batch: &ValidatedBatch) -> Result<BatchMeta, EngineError> {
    with_control(meta_of(batch.header(), batch.len()), batch.as_bytes())
}

/// Adds what a control batch says to its facts.
fn with_control(mut meta: BatchMeta, batch: &[u8]) -> Result<BatchMeta, EngineError> {
    let header = BatchHeader::view(batch).expect("a checked batch holds a header");
    if header.attrs().is_control() {
        meta.control = Some(control_type(batch).map_err(corrupt)?);
    }
    Ok(meta)
}

/// Copies the facts out of a header already checked to be `total` bytes long.
fn meta_of(header: &BatchHeader, total: usize) -> BatchMeta {
    let (producer_id, producer_epoch, base_sequence) = header.producer();
    BatchMeta {
        base_offset: header.base(),
        last_offset: header.last(),
        max_timestamp: header.max_ts(),
        total_bytes: total,
        producer_id,
        producer_epoch,
        base_sequence,
        transactional: header.attrs().is_transactional(),
        control: None,
    }
}

/// Rewrites baseOffset in place (not covered by the CRC).
pub fn set_base_offset(buf: &mut [u8], base: Offset) {
    let header = BatchHeader::view_mut(buf).expect("buffer holds a header");
    header.base_offset.set(base.0);
}

fn corrupt(why: &str) -> EngineError {
    EngineError::CorruptBatch(why.to_string())
}

/// Builds a valid v2 batch for tests and benches: `records` records of opaque payload
/// (the engine never decodes records, so the payload need not be real records).
#[doc(hidden)]
pub fn build_test_batch(
    records: i32,
    payload_bytes: usize,
    max_ts: TimestampMs,
    producer: Option<(i64, i16, i32)>,
) -> Vec<u8> {
    assert!(records >= 1);
    let total = HEADER_BYTES + payload_bytes;
    let mut buf = vec![0u8; total];
    for (i, b) in buf[HEADER_BYTES..].iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let h = BatchHeader::view_mut(&mut buf).expect("sized");
    h.batch_length.set((total - LOG_OVERHEAD_BYTES) as i32);
    h.magic = 2;
    h.last_offset_delta.set(records - 1);
    h.base_timestamp.set(max_ts.0);
    h.max_timestamp.set(max_ts.0);
    h.producer_id.set(pid);
    h.producer_epoch.set(epoch);
    h.base_sequence.set(seq);
    h.records_count.set(records);
    write_crc(&mut buf);
    buf
}

/// `bytes` as a [`ValidatedBatch`] (any size); panics if they are not a valid batch. For tests
/// and benches, which play the Produce handler.
#[doc(hidden)]
pub fn validated(bytes: &[u8]) -> ValidatedBatch {
    ValidatedBatch::new(BytesMut::from(bytes), usize::MAX).expect("a valid batch")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_types::batch::BatchError;

    /// What the Produce handler does before the engine sees a batch.
    fn checked(bytes: &[u8], message_bytes_max: usize) -> Result<ValidatedBatch, BatchError> {
        ValidatedBatch::new(BytesMut::from(bytes), message_bytes_max)
    }

    #[test]
    fn valid_batch_round_trips() {
        let mut b = build_test_batch(3, 100, TimestampMs(7), None);
        let meta = meta_of_validated(&checked(&b, 1 << 20).unwrap()).unwrap();
        assert_eq!(meta.total_bytes, 161);
        assert_eq!(meta.last_offset, Offset(2));
        set_base_offset(&mut b, Offset(40));
        let meta = validate_prefix(&b).unwrap();
        assert_eq!(
            (meta.base_offset, meta.last_offset),
            (Offset(40), Offset(42))
        );
        assert_eq!(meta.max_timestamp, TimestampMs(7));
    }

    #[test]
    fn every_single_bit_flip_in_crc_region_is_caught() {
        let b = build_test_batch(1, 20, TimestampMs(1), None);
        for byte in CRC_START..b.len() {
            let mut c = b.clone();
            c[byte] ^= 0x10;
            assert!(validate_prefix(&c).is_err(), "flip at {byte} undetected");
        }
    }

    #[test]
    fn truncated_at_every_byte_is_rejected() {
        let b = build_test_batch(2, 30, TimestampMs(1), None);
        for cut in 0..b.len() {
            assert!(validate_prefix(&b[..cut]).is_err(), "cut at {cut} accepted");
        }
    }

    #[test]
    fn empty_batch_and_too_large_rejected() {
        let mut b = build_test_batch(1, 0, TimestampMs(1), None);
        BatchHeader::view_mut(&mut b).unwrap().records_count.set(0);
        write_crc(&mut b);
        assert!(matches!(
            checked(&b, 1 << 20),
            Err(BatchError::InvalidRecord { .. })
        ));
        let big = build_test_batch(1, 1000, TimestampMs(1), None);
        assert!(matches!(
            checked(&big, 100),
            Err(BatchError::TooLarge { .. })
        ));
    }

    #[test]
    fn a_base_offset_whose_last_offset_overflows_is_corrupt_not_a_panic() {
        let mut b = build_test_batch(3, 10, TimestampMs(1), None);
        set_base_offset(&mut b, Offset(i64::MAX - 2));
        assert!(validate_prefix(&b).is_err());
        set_base_offset(&mut b, Offset(i64::MAX - 3));
        assert_eq!(
            validate_prefix(&b).unwrap().last_offset,
            Offset(i64::MAX - 1)
        );
    }

    #[test]
    fn zero_bytes_are_not_a_batch() {
        assert!(validate_prefix(&[0u8; 200]).is_err());
    }
}
