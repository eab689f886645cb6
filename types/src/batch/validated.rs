//! [`ValidatedBatch`]: a record batch a broker may append as it is.
//!
//! A producer's batch is checked exactly once, where it enters the broker (the Produce handler);
//! the storage engine takes only this type and never checks the bytes again. The checks, in the
//! order a failure is reported:
//!
//! | check                                                  | error (Kafka code)                  |
//! |--------------------------------------------------------|-------------------------------------|
//! | batchLength readable, ≥ a header, exactly the bytes    | Truncated / InvalidLength / TrailingBytes (CORRUPT_MESSAGE) |
//! | magic 2                                                | UnsupportedMagic (UNSUPPORTED_FOR_MESSAGE_FORMAT) |
//! | CRC-32C over attributes..end                           | CrcMismatch (CORRUPT_MESSAGE)       |
//! | compression code 0-4                                   | UnknownCompression (UNSUPPORTED_COMPRESSION_TYPE) |
//! | size ≤ `message_bytes_max`                             | TooLarge (MESSAGE_TOO_LARGE)        |
//! | lastOffsetDelta ≥ 0, baseOffset + delta + 1 fits i64   | OffsetsOutOfRange (CORRUPT_MESSAGE) |
//! | recordsCount ≥ 1 and = lastOffsetDelta + 1 (dense)     | InvalidRecord (INVALID_RECORD)      |
//!
//! Records themselves are not decoded (Kafka's broker does, to recompress or assign offsets per
//! record; Rill stores batches as they came). What holds afterwards, and what the engine relies
//! on: the bytes are exactly one whole v2 batch with a valid CRC, at least one record, and
//! `last()` cannot overflow. Only baseOffset and partitionLeaderEpoch (outside the CRC) may be
//! rewritten. A batch a follower copies ([`ValidatedBatch::from_leader`]) may hold fewer records
//! than offsets, or none: the leader's compaction removed them, as it does in its own log.

use bytes::{Bytes, BytesMut};

use super::check::{check_crc, check_shape};
use super::error::BatchError;
use super::header::{write_crc, RecordBatchHeader};
use crate::{LeaderEpoch, Offset, TimestampMs};

/// One whole v2 record batch that passed every check a broker makes before appending it.
#[derive(Debug)]
pub struct ValidatedBatch {
    bytes: BytesMut,
    /// Bytes of the allocation `bytes` keeps alive (at least its length): a batch received in
    /// a larger buffer (a Produce frame) pins all of it while anything keeps the batch.
    held_bytes: usize,
}

impl ValidatedBatch {
    /// Checks `bytes` (exactly one batch) against every rule in the module table.
    pub fn new(bytes: BytesMut, message_bytes_max: usize) -> Result<ValidatedBatch, BatchError> {
        let batch = Self::checked(bytes, message_bytes_max)?;
        check_records_count(batch.header())?;
        Ok(batch)
    }

    /// A batch a follower copies from its leader's log, as it is there: every rule of the
    /// module table but the last, which the leader's compaction relaxes. A cleaned batch keeps
    /// its offsets and lastOffsetDelta with records removed, down to none (a header kept for
    /// its producer's state), as Kafka's cleaner leaves them: 0 ≤ recordsCount ≤
    /// lastOffsetDelta + 1. No size bound: the leader took it.
    pub fn from_leader(bytes: BytesMut) -> Result<ValidatedBatch, BatchError> {
        let batch = Self::checked(bytes, usize::MAX)?;
        let header = batch.header();
        let records = i64::from(header.records_count.get());
        if records < 0 || records > i64::from(header.last_offset_delta.get()) + 1 {
            let reason = "recordsCount outside 0..=lastOffsetDelta + 1".into();
            return Err(BatchError::InvalidRecord { reason });
        }
        Ok(batch)
    }

    /// Every rule of the module table but the records count.
    fn checked(bytes: BytesMut, message_bytes_max: usize) -> Result<ValidatedBatch, BatchError> {
        let size = check_shape(&bytes)?;
        if bytes.len() > size {
            return Err(BatchError::TrailingBytes {
                extra: bytes.len() - size,
            });
        }
        check_crc(&bytes)?;
        let header = RecordBatchHeader::view(&bytes).expect("shape checked");
        header
            .attrs()
            .compression()
            .map_err(|code| BatchError::UnknownCompression { code })?;
        if size > message_bytes_max {
            let max = message_bytes_max;
            return Err(BatchError::TooLarge { size, max });
        }
        check_offsets(header)?;
        let held_bytes = bytes.len();
        Ok(ValidatedBatch { bytes, held_bytes })
    }

    /// The same batch, noted as keeping `bytes` of memory alive (the buffer it was received
    /// in), so the caches that keep it count what it really holds.
    pub fn holding(mut self, bytes: usize) -> ValidatedBatch {
        self.held_bytes = bytes.max(self.bytes.len());
        self
    }

    /// Bytes of the allocation the batch keeps alive (its length unless [`Self::holding`]).
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// The header, read in place.
    pub fn header(&self) -> &RecordBatchHeader {
        RecordBatchHeader::view(&self.bytes).expect("validated")
    }

    /// The whole batch.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Bytes of the whole batch.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true: a batch holds at least its header (for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Assigns the batch's first offset (the broker's one write at append). CRC unaffected.
    pub fn set_base_offset(&mut self, base: Offset) {
        assert!(base.0 >= 0, "offsets are non-negative");
        let delta = i64::from(self.header().last_offset_delta.get());
        assert!(base.0.checked_add(delta + 1).is_some(), "offset overflow");
        let header = RecordBatchHeader::view_mut(&mut self.bytes).expect("validated");
        header.base_offset.set(base.0);
    }

    /// Stamps the leader epoch. CRC unaffected.
    pub fn set_leader_epoch(&mut self, epoch: LeaderEpoch) {
        let header = RecordBatchHeader::view_mut(&mut self.bytes).expect("validated");
        header.partition_leader_epoch.set(epoch.0);
    }

    /// Stamps the broker's append time on a `LogAppendTime` topic: the timestamp-type bit and
    /// maxTimestamp (what consumers use for every record of the batch), then a new CRC.
    pub fn set_log_append_time(&mut self, now: TimestampMs) {
        let header = RecordBatchHeader::view_mut(&mut self.bytes).expect("validated");
        let attributes = header.attributes.get() | super::attributes::TIMESTAMP_TYPE_BIT;
        header.attributes.set(attributes);
        header.max_timestamp.set(now.0);
        write_crc(&mut self.bytes);
    }

    /// The bytes, ready to store and send.
    pub fn freeze(self) -> Bytes {
        self.bytes.freeze()
    }
}

/// lastOffsetDelta is not negative and the last offset (+1) fits an offset.
fn check_offsets(header: &RecordBatchHeader) -> Result<(), BatchError> {
    let last_offset_delta = header.last_offset_delta.get();
    let base_offset = header.base_offset.get();
    let fits = base_offset
        .checked_add(i64::from(last_offset_delta) + 1)
        .is_some();
    if last_offset_delta < 0 || !fits {
        return Err(BatchError::OffsetsOutOfRange {
            base_offset,
            last_offset_delta,
        });
    }
    Ok(())
}

/// At least one record, and one offset per record (recordsCount = lastOffsetDelta + 1).
fn check_records_count(header: &RecordBatchHeader) -> Result<(), BatchError> {
    let records = header.records_count.get();
    if records <= 0 {
        let reason = "batch has no records".into();
        return Err(BatchError::InvalidRecord { reason });
    }
    if i64::from(header.last_offset_delta.get()) + 1 != i64::from(records) {
        let reason = "lastOffsetDelta does not match recordsCount".into();
        return Err(BatchError::InvalidRecord { reason });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::header::{write_crc, BATCH_HEADER_BYTES, BATCH_LENGTH_OVERHEAD_BYTES};
    use crate::ErrorCode;

    /// A batch of `records` records (opaque payload: records are not decoded here).
    fn batch(records: i32, payload_bytes: usize) -> Vec<u8> {
        let mut buf = vec![7u8; BATCH_HEADER_BYTES + payload_bytes];
        let total = buf.len();
        let h = RecordBatchHeader::view_mut(&mut buf).unwrap();
        h.batch_length
            .set((total - BATCH_LENGTH_OVERHEAD_BYTES) as i32);
        h.magic = 2;
        h.attributes.set(0);
        h.base_offset.set(0);
        h.last_offset_delta.set(records - 1);
        h.records_count.set(records);
        write_crc(&mut buf);
        buf
    }

    fn check(bytes: &[u8], max: usize) -> Result<ValidatedBatch, BatchError> {
        ValidatedBatch::new(BytesMut::from(bytes), max)
    }

    fn code(bytes: &[u8], max: usize) -> ErrorCode {
        check(bytes, max).unwrap_err().error_code()
    }

    /// Edits the header, then reseals the CRC (so only the edited rule fails).
    fn edited(mut b: Vec<u8>, edit: impl FnOnce(&mut RecordBatchHeader)) -> Vec<u8> {
        edit(RecordBatchHeader::view_mut(&mut b).unwrap());
        write_crc(&mut b);
        b
    }

    #[test]
    fn a_batch_from_a_leader_may_hold_fewer_records_than_offsets_after_compaction() {
        let cleaned = edited(batch(3, 20), |h| h.records_count.set(1));
        assert_eq!(
            code(&cleaned, 1 << 20),
            ErrorCode::InvalidRecord,
            "not from a producer"
        );
        assert!(ValidatedBatch::from_leader(BytesMut::from(&cleaned[..])).is_ok());
        let emptied = edited(batch(3, 20), |h| h.records_count.set(0));
        assert!(ValidatedBatch::from_leader(BytesMut::from(&emptied[..])).is_ok());
        for bad in [4, -1] {
            let b = edited(batch(3, 20), |h| h.records_count.set(bad));
            assert!(
                ValidatedBatch::from_leader(BytesMut::from(&b[..])).is_err(),
                "{bad}"
            );
        }
        let mut crc = batch(3, 20);
        *crc.last_mut().unwrap() ^= 1;
        assert!(
            ValidatedBatch::from_leader(BytesMut::from(&crc[..])).is_err(),
            "CRC checked"
        );
    }

    #[test]
    fn a_valid_batch_passes_and_offsets_are_rewritten_outside_the_crc() {
        let mut v = check(&batch(3, 20), 1 << 20).unwrap();
        assert_eq!(v.len(), BATCH_HEADER_BYTES + 20);
        v.set_base_offset(Offset(40));
        v.set_leader_epoch(LeaderEpoch(5));
        assert_eq!(
            (v.header().base(), v.header().last()),
            (Offset(40), Offset(42))
        );
        assert_eq!(v.header().leader_epoch(), LeaderEpoch(5));
        let bytes = v.freeze();
        assert!(
            check(&bytes, 1 << 20).is_ok(),
            "CRC still valid after the rewrites"
        );
    }

    #[test]
    fn each_rule_answers_its_kafka_code() {
        let good = batch(2, 10);
        let mut flipped = good.clone();
        flipped[40] ^= 1;
        let mut trailing = good.clone();
        trailing.push(0);
        let cases = [
            (vec![0u8; 10], ErrorCode::CorruptMessage),
            (good[..good.len() - 1].to_vec(), ErrorCode::CorruptMessage),
            (trailing, ErrorCode::CorruptMessage),
            (flipped, ErrorCode::CorruptMessage),
            (
                edited(good.clone(), |h| h.magic = 1),
                ErrorCode::UnsupportedForMessageFormat,
            ),
            (
                edited(good.clone(), |h| h.attributes.set(5)),
                ErrorCode::UnsupportedCompressionType,
            ),
            (
                edited(good.clone(), |h| h.last_offset_delta.set(-1)),
                ErrorCode::CorruptMessage,
            ),
            (
                edited(good.clone(), |h| h.base_offset.set(i64::MAX - 1)),
                ErrorCode::CorruptMessage,
            ),
            (
                edited(good.clone(), |h| h.records_count.set(0)),
                ErrorCode::InvalidRecord,
            ),
            (
                edited(good.clone(), |h| h.records_count.set(5)),
                ErrorCode::InvalidRecord,
            ),
        ];
        for (i, (bytes, want)) in cases.into_iter().enumerate() {
            assert_eq!(code(&bytes, 1 << 20), want, "case {i}");
        }
        assert_eq!(code(&good, good.len() - 1), ErrorCode::MessageTooLarge);
        assert!(
            check(&good, good.len()).is_ok(),
            "the limit itself is allowed"
        );
    }

    #[test]
    fn a_corrupt_batch_is_corrupt_before_it_is_too_large() {
        let mut b = batch(1, 100);
        b[70] ^= 1;
        assert_eq!(code(&b, 10), ErrorCode::CorruptMessage);
    }

    #[test]
    fn truncated_at_every_byte_and_every_bit_flip_are_refused() {
        let b = batch(2, 30);
        for cut in 0..b.len() {
            assert!(check(&b[..cut], 1 << 20).is_err(), "cut at {cut} accepted");
        }
        for byte in crate::batch::CRC_START..b.len() {
            let mut c = b.clone();
            c[byte] ^= 0x10;
            assert!(check(&c, 1 << 20).is_err(), "flip at {byte} undetected");
        }
    }

    #[test]
    fn log_append_time_sets_the_bit_and_max_timestamp_and_keeps_the_crc_valid() {
        let bytes = BytesMut::from(&batch(3, 10)[..]);
        let mut batch = ValidatedBatch::new(bytes, 1 << 20).unwrap();
        batch.set_log_append_time(TimestampMs(12_345));
        assert_eq!(batch.header().max_ts(), TimestampMs(12_345));
        assert_eq!(
            batch.header().attrs().timestamp_type(),
            super::super::TimestampType::LogAppendTime
        );
        let again = BytesMut::from(batch.as_bytes());
        assert!(ValidatedBatch::new(again, 1 << 20).is_ok(), "CRC rewritten");
    }
}
