//! The 61-byte record batch v2 header, read in place with `zerocopy`.
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
//! |     57 |    4 | recordCount           | yes            |
//! |     61 |    … | records               | yes            |
//!
//! A batch occupies `batchLength + 12` bytes (baseOffset and batchLength precede the count).

use zerocopy::byteorder::big_endian::{I16, I32, I64, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

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

/// The batch header as it lies in the buffer: every field big-endian and unaligned.
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
    pub record_count: I32,
}

const _: () = assert!(size_of::<RecordBatchHeader>() == BATCH_HEADER_BYTES);
const _: () = assert!(std::mem::offset_of!(RecordBatchHeader, attributes) == CRC_START);
const _: () = assert!(std::mem::offset_of!(RecordBatchHeader, magic) == MAGIC_OFFSET);
const _: () = assert!(std::mem::offset_of!(RecordBatchHeader, batch_length) == BATCH_LENGTH_OFFSET);
