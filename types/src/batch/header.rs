//! The 61-byte record batch v2 header, read and written in place with `zerocopy`.
//!
//! On-the-wire (and on-disk) layout, big-endian, no padding:
//!
//! | offset | size | field                 | covered by CRC |
//! |-------:|-----:|-----------------------|:--------------:|
//! |      0 |    8 | baseOffset            | no (broker rewrites it) |
//! |      8 |    4 | batchLength           | no             |
//! |     12 |    4 | partitionLeaderEpoch  | no (broker rewrites it) |
//! |     16 |    1 | magic (= 2)           | no             |
//! |     17 |    4 | crc (CRC-32C)         | -              |
//! |     21 |    2 | attributes            | yes            |
//! |     23 |    4 | lastOffsetDelta       | yes            |
//! |     27 |    8 | baseTimestamp         | yes            |
//! |     35 |    8 | maxTimestamp          | yes            |
//! |     43 |    8 | producerId            | yes            |
//! |     51 |    2 | producerEpoch         | yes            |
//! |     53 |    4 | baseSequence          | yes            |
//! |     57 |    4 | recordsCount          | yes            |
//! |     61 |    … | records               | yes            |
//!
//! A batch occupies `batchLength + 12` bytes (baseOffset and batchLength precede the count).
//! The CRC covers neither baseOffset nor partitionLeaderEpoch, which is why a broker assigns
//! offsets by rewriting baseOffset alone.

use zerocopy::byteorder::big_endian::{I16, I32, I64, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::attributes::Attributes;
use crate::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence, TimestampMs};

/// Bytes in a v2 batch header.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Bytes before `batchLength` starts counting (baseOffset + batchLength).
pub const BATCH_LENGTH_OVERHEAD_BYTES: usize = 12;
/// Offset of the first byte covered by the CRC (attributes).
pub const CRC_START: usize = 21;
/// Offset of the batchLength field.
pub const BATCH_LENGTH_OFFSET: usize = 8;
/// Offset of the magic byte.
pub const MAGIC_OFFSET: usize = 16;
/// The only record batch format Rill accepts.
pub const MAGIC_V2: i8 = 2;

/// The batch header as it lies in the buffer: every field big-endian and unaligned. Fields are
/// the raw wire values (read with `.get()`, written with `.set()`); the methods give them typed.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RecordBatchHeader {
    /// Offset of the first record; assigned by the broker on append.
    pub base_offset: I64,
    /// Bytes after this field to the end of the batch.
    pub batch_length: I32,
    /// Leader epoch at append; assigned by the broker.
    pub partition_leader_epoch: I32,
    /// Format version; 2 for record batches.
    pub magic: i8,
    /// CRC-32C of attributes..end of batch.
    pub crc: U32,
    /// Compression, timestamp type, transactional and control bits.
    pub attributes: I16,
    /// Offset of the last record relative to base_offset.
    pub last_offset_delta: I32,
    /// Timestamp of the first record (ms).
    pub base_timestamp: I64,
    /// Largest timestamp in the batch (ms); LogAppendTime batches carry the append time.
    pub max_timestamp: I64,
    /// Idempotent/transactional producer id, -1 if none.
    pub producer_id: I64,
    /// Producer epoch, -1 if none.
    pub producer_epoch: I16,
    /// Sequence of the first record, -1 if none.
    pub base_sequence: I32,
    /// Number of records in the batch.
    pub records_count: I32,
}

const _: () = assert!(size_of::<RecordBatchHeader>() == BATCH_HEADER_BYTES);
const _: () = assert!(std::mem::offset_of!(RecordBatchHeader, attributes) == CRC_START);
const _: () = assert!(std::mem::offset_of!(RecordBatchHeader, magic) == MAGIC_OFFSET);
const _: () = assert!(std::mem::offset_of!(RecordBatchHeader, batch_length) == BATCH_LENGTH_OFFSET);

impl RecordBatchHeader {
    /// Views the first 61 bytes of `buf` as a header, if there are that many (nothing checked).
    pub fn view(buf: &[u8]) -> Option<&RecordBatchHeader> {
        RecordBatchHeader::ref_from_prefix(buf).ok().map(|(h, _)| h)
    }

    /// Views the first 61 bytes of `buf` as a header to write, if there are that many.
    pub fn view_mut(buf: &mut [u8]) -> Option<&mut RecordBatchHeader> {
        RecordBatchHeader::mut_from_prefix(buf).ok().map(|(h, _)| h)
    }

    /// Whole size of the batch from its batchLength (`None` if negative or overflowing).
    pub fn total_bytes(&self) -> Option<usize> {
        let len = usize::try_from(self.batch_length.get()).ok()?;
        len.checked_add(BATCH_LENGTH_OVERHEAD_BYTES)
    }

    /// baseOffset.
    pub fn base(&self) -> Offset {
        Offset(self.base_offset.get())
    }

    /// The batch's last offset: baseOffset + lastOffsetDelta. Checked batches cannot overflow
    /// here; on unchecked bytes this panics rather than wrap.
    pub fn last(&self) -> Offset {
        let delta = i64::from(self.last_offset_delta.get());
        Offset(
            self.base_offset
                .get()
                .checked_add(delta)
                .expect("last offset overflow"),
        )
    }

    /// partitionLeaderEpoch.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        LeaderEpoch(self.partition_leader_epoch.get())
    }

    /// Decoded attributes.
    pub fn attrs(&self) -> Attributes {
        Attributes(self.attributes.get())
    }

    /// baseTimestamp.
    pub fn base_ts(&self) -> TimestampMs {
        TimestampMs(self.base_timestamp.get())
    }

    /// maxTimestamp.
    pub fn max_ts(&self) -> TimestampMs {
        TimestampMs(self.max_timestamp.get())
    }

    /// The producer fields: id, epoch and the first record's sequence (all -1 when none).
    pub fn producer(&self) -> (ProducerId, ProducerEpoch, Sequence) {
        (
            ProducerId(self.producer_id.get()),
            ProducerEpoch(self.producer_epoch.get()),
            Sequence(self.base_sequence.get()),
        )
    }
}

/// Computes the CRC-32C of a whole batch (attributes..end) and stores it in its header: the last
/// step of building a batch, or of changing a CRC-covered field.
pub fn write_crc(batch: &mut [u8]) {
    assert!(batch.len() >= BATCH_HEADER_BYTES, "a batch holds a header");
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    RecordBatchHeader::view_mut(batch)
        .expect("checked above")
        .crc
        .set(crc);
}
