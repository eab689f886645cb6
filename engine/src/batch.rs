//! The engine's own minimal reader of the 61-byte Kafka v2 record batch header.
//!
//! ```text
//! off size field                      off size field
//!   0   8  baseOffset                   27   8  baseTimestamp
//!   8   4  batchLength (bytes after it) 35   8  maxTimestamp
//!  12   4  partitionLeaderEpoch         43   8  producerId
//!  16   1  magic (= 2)                  51   2  producerEpoch
//!  17   4  crc (CRC-32C of 21..end)     53   4  baseSequence
//!  21   2  attributes                   57   4  recordsCount
//!  23   4  lastOffsetDelta              61      records...
//! ```
//! All big-endian. The CRC does not cover baseOffset or partitionLeaderEpoch, which is why the
//! broker can assign offsets by rewriting baseOffset alone. The engine never decodes records.

use crate::control::{control_type, Control, CONTROL_BIT, TRANSACTIONAL_BIT};
use crate::error::EngineError;
use crate::types::{Offset, TimestampMs};
use zerocopy::byteorder::big_endian::{I16, I32, I64, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Size of the v2 batch header.
pub const HEADER_BYTES: usize = 61;
/// Bytes before `batchLength` counts: baseOffset + batchLength.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// Where the CRC-covered region starts (attributes).
const CRC_START: usize = 21;

/// The v2 record batch header, read in place.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Debug)]
#[repr(C)]
pub struct BatchHeader {
    /// First offset of the batch.
    pub base_offset: I64,
    /// Length of the batch after this field.
    pub batch_length: I32,
    /// Leader epoch (not covered by the CRC).
    pub partition_leader_epoch: I32,
    /// Format version; 2.
    pub magic: i8,
    /// CRC-32C of bytes 21..end.
    pub crc: U32,
    /// Compression, timestamp type, transactional, control bits.
    pub attributes: I16,
    /// Offset of the last record relative to baseOffset.
    pub last_offset_delta: I32,
    /// Timestamp of the first record.
    pub base_timestamp: I64,
    /// Largest record timestamp.
    pub max_timestamp: I64,
    /// Idempotent producer id, or -1.
    pub producer_id: I64,
    /// Producer epoch, or -1.
    pub producer_epoch: I16,
    /// Sequence of the first record, or -1.
    pub base_sequence: I32,
    /// Number of records.
    pub records_count: I32,
}

const _: () = assert!(std::mem::size_of::<BatchHeader>() == HEADER_BYTES);

impl BatchHeader {
    /// Views the first 61 bytes of `buf` as a header, if there are that many.
    pub fn view(buf: &[u8]) -> Option<&BatchHeader> {
        BatchHeader::ref_from_prefix(buf).ok().map(|(h, _)| h)
    }

    /// Whole size of the batch on disk, from its batchLength (None if negative/overflowing).
    pub fn total_bytes(&self) -> Option<usize> {
        let len = usize::try_from(self.batch_length.get()).ok()?;
        len.checked_add(LOG_OVERHEAD_BYTES)
    }

    /// baseOffset as an [`Offset`].
    pub fn base(&self) -> Offset {
        Offset(self.base_offset.get())
    }

    /// The batch's last offset.
    pub fn last(&self) -> Offset {
        Offset(self.base_offset.get() + i64::from(self.last_offset_delta.get()))
    }

    /// maxTimestamp.
    pub fn max_ts(&self) -> TimestampMs {
        TimestampMs(self.max_timestamp.get())
    }
}

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
    /// Producer id (-1 if none).
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// First sequence (-1 if none).
    pub base_sequence: i32,
    /// The transactional attribute bit: the batch belongs to a transaction.
    pub transactional: bool,
    /// For a control batch (attribute bit 5), what it says; `None` for data batches.
    pub control: Option<Control>,
}

/// Validates the batch at the start of `buf`: header, length within `buf`, magic, CRC-32C.
/// Returns its facts. `buf` may continue past the batch.
pub fn validate_prefix(buf: &[u8]) -> Result<BatchMeta, EngineError> {
    let header = BatchHeader::view(buf).ok_or_else(|| corrupt("shorter than a batch header"))?;
    let total = header
        .total_bytes()
        .ok_or_else(|| corrupt("negative batch length"))?;
    if total < HEADER_BYTES {
        return Err(corrupt("batch length below header size"));
    }
    if total > buf.len() {
        return Err(corrupt("batch runs past the available bytes"));
    }
    if header.magic != 2 {
        return Err(corrupt("magic is not 2"));
    }
    if crc32c::crc32c(&buf[CRC_START..total]) != header.crc.get() {
        return Err(corrupt("CRC-32C mismatch"));
    }
    if header.last_offset_delta.get() < 0 {
        return Err(corrupt("negative lastOffsetDelta"));
    }
    // baseOffset is outside the CRC: damage there must not overflow the offset arithmetic.
    let past_last = i64::from(header.last_offset_delta.get()) + 1;
    if header.base_offset.get().checked_add(past_last).is_none() {
        return Err(corrupt("baseOffset out of range"));
    }
    let mut meta = meta_of(header, total);
    if header.attributes.get() & CONTROL_BIT != 0 {
        meta.control = Some(control_type(&buf[..total]).map_err(corrupt)?);
    }
    Ok(meta)
}

/// Copies the facts out of a header already validated to be `total` bytes long.
fn meta_of(header: &BatchHeader, total: usize) -> BatchMeta {
    BatchMeta {
        base_offset: header.base(),
        last_offset: header.last(),
        max_timestamp: header.max_ts(),
        total_bytes: total,
        producer_id: header.producer_id.get(),
        producer_epoch: header.producer_epoch.get(),
        base_sequence: header.base_sequence.get(),
        transactional: header.attributes.get() & TRANSACTIONAL_BIT != 0,
        control: None,
    }
}

/// Checks a producer batch for append: exactly one whole valid batch with at least one record and
/// dense offset deltas (records = lastOffsetDelta + 1).
pub fn validate_for_append(buf: &[u8], message_bytes_max: u32) -> Result<BatchMeta, EngineError> {
    if buf.len() > message_bytes_max as usize {
        return Err(EngineError::MessageTooLarge {
            size: buf.len(),
            max: message_bytes_max,
        });
    }
    let meta = validate_prefix(buf)?;
    if meta.total_bytes != buf.len() {
        return Err(corrupt("bytes after the batch"));
    }
    let header = BatchHeader::view(buf).expect("validated");
    let records = header.records_count.get();
    if records <= 0 {
        return Err(EngineError::InvalidRecord("batch has no records".into()));
    }
    if i64::from(header.last_offset_delta.get()) + 1 != i64::from(records) {
        return Err(EngineError::InvalidRecord(
            "lastOffsetDelta does not match recordsCount".into(),
        ));
    }
    Ok(meta)
}

/// Rewrites baseOffset in place (not covered by the CRC).
pub fn set_base_offset(buf: &mut [u8], base: Offset) {
    let (header, _) = BatchHeader::mut_from_prefix(buf).expect("buffer holds a header");
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
    let (h, _) = BatchHeader::mut_from_prefix(&mut buf).expect("sized");
    h.batch_length.set((total - LOG_OVERHEAD_BYTES) as i32);
    h.magic = 2;
    h.last_offset_delta.set(records - 1);
    h.base_timestamp.set(max_ts.0);
    h.max_timestamp.set(max_ts.0);
    h.producer_id.set(pid);
    h.producer_epoch.set(epoch);
    h.base_sequence.set(seq);
    h.records_count.set(records);
    let crc = crc32c::crc32c(&buf[CRC_START..]);
    BatchHeader::mut_from_prefix(&mut buf)
        .expect("sized")
        .0
        .crc
        .set(crc);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_batch_round_trips() {
        let mut b = build_test_batch(3, 100, TimestampMs(7), None);
        let meta = validate_for_append(&b, 1 << 20).unwrap();
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
        BatchHeader::mut_from_prefix(&mut b)
            .unwrap()
            .0
            .records_count
            .set(0);
        let crc = crc32c::crc32c(&b[CRC_START..]);
        BatchHeader::mut_from_prefix(&mut b).unwrap().0.crc.set(crc);
        assert!(matches!(
            validate_for_append(&b, 1 << 20),
            Err(EngineError::InvalidRecord(_))
        ));
        let big = build_test_batch(1, 1000, TimestampMs(1), None);
        assert!(matches!(
            validate_for_append(&big, 100),
            Err(EngineError::MessageTooLarge { .. })
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
