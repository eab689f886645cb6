//! A view over one whole record batch v2 in a byte buffer: header fields in place, validation
//! (length, magic, CRC-32C), and the two rewrites a broker makes at append time.

use zerocopy::FromBytes;

use super::attributes::{Attributes, Compression};
use super::compression::decompress;
use super::header::{
    RecordBatchHeader, BATCH_HEADER_BYTES, BATCH_LENGTH_OFFSET, BATCH_LENGTH_OVERHEAD_BYTES,
    CRC_START, MAGIC_OFFSET, MAGIC_V2,
};
use super::records::RecordIter;
use crate::ErrorCode;

/// Why bytes are not a valid record batch. Each maps to the Kafka code a broker answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Fewer bytes than a header, or than batchLength announces.
    #[error("batch truncated: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the header says the batch spans.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// batchLength too small for a header, or negative.
    #[error("invalid batchLength {batch_length}")]
    InvalidLength {
        /// As read.
        batch_length: i32,
    },
    /// More bytes than batchLength announces (a view must cover exactly one batch).
    #[error("{extra} bytes after the end of the batch")]
    TrailingBytes {
        /// Bytes beyond the batch.
        extra: usize,
    },
    /// Not a v2 batch.
    #[error("unsupported magic {magic}")]
    UnsupportedMagic {
        /// As read.
        magic: i8,
    },
    /// Stored CRC does not match the bytes.
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// In the header.
        stored: u32,
        /// Over attributes..end.
        computed: u32,
    },
    /// Compression code 5-7.
    #[error("unknown compression code {code}")]
    UnknownCompression {
        /// The 3-bit code.
        code: u8,
    },
    /// The compressed records do not decompress, or exceed the size cap.
    #[error("decompression failed: {reason}")]
    Decompression {
        /// What the codec said.
        reason: String,
    },
    /// A record inside the batch is malformed or the count is wrong.
    #[error("invalid record: {reason}")]
    InvalidRecord {
        /// What is wrong.
        reason: String,
    },
}

impl BatchError {
    /// The Kafka error code a Produce partition response carries for this failure.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            BatchError::UnknownCompression { .. } => ErrorCode::UnsupportedCompressionType,
            BatchError::InvalidRecord { .. } => ErrorCode::InvalidRecord,
            BatchError::UnsupportedMagic { .. } => ErrorCode::UnsupportedForMessageFormat,
            _ => ErrorCode::CorruptMessage,
        }
    }
}

/// Total bytes of the batch starting at `buf[0]`, read from its batchLength, without checking
/// that they are all present. Errors only when the prefix itself is unusable.
pub fn batch_size_bytes(buf: &[u8]) -> Result<usize, BatchError> {
    let Some(length) = buf.get(BATCH_LENGTH_OFFSET..BATCH_LENGTH_OVERHEAD_BYTES) else {
        let needed = BATCH_LENGTH_OVERHEAD_BYTES;
        return Err(BatchError::Truncated {
            needed,
            available: buf.len(),
        });
    };
    let batch_length = i32::from_be_bytes(length.try_into().expect("4 bytes"));
    let min = (BATCH_HEADER_BYTES - BATCH_LENGTH_OVERHEAD_BYTES) as i32;
    if batch_length < min {
        return Err(BatchError::InvalidLength { batch_length });
    }
    Ok(batch_length as usize + BATCH_LENGTH_OVERHEAD_BYTES)
}

/// One whole v2 record batch, viewed in place. `B` is any byte buffer (`&[u8]`, `Bytes`,
/// `BytesMut`, `Vec<u8>`); the setters need a mutable one.
#[derive(Debug, Clone)]
pub struct RecordBatchView<B> {
    buf: B,
}

impl<B: AsRef<[u8]>> RecordBatchView<B> {
    /// Wraps `buf`, which must hold exactly one batch: checks size and magic (not the CRC).
    pub fn new(buf: B) -> Result<Self, BatchError> {
        let bytes = buf.as_ref();
        let size = batch_size_bytes(bytes)?;
        if bytes.len() < size {
            return Err(BatchError::Truncated {
                needed: size,
                available: bytes.len(),
            });
        }
        if bytes.len() > size {
            return Err(BatchError::TrailingBytes {
                extra: bytes.len() - size,
            });
        }
        let magic = bytes[MAGIC_OFFSET] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic { magic });
        }
        assert!(bytes.len() >= BATCH_HEADER_BYTES);
        Ok(RecordBatchView { buf })
    }

    /// [`new`](Self::new) plus the CRC check: what a broker runs before appending.
    pub fn validate(buf: B) -> Result<Self, BatchError> {
        let view = Self::new(buf)?;
        view.check_crc()?;
        view.attributes()
            .compression()
            .map_err(|code| BatchError::UnknownCompression { code })?;
        Ok(view)
    }

    /// The header, read in place.
    pub fn header(&self) -> &RecordBatchHeader {
        let (header, _) =
            RecordBatchHeader::ref_from_prefix(self.buf.as_ref()).expect("checked in new");
        header
    }

    /// The whole batch's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> B {
        self.buf
    }

    /// Bytes on the wire/disk: batchLength + 12.
    pub fn size_bytes(&self) -> usize {
        self.buf.as_ref().len()
    }

    /// Recomputes CRC-32C over attributes..end and compares with the stored one.
    pub fn check_crc(&self) -> Result<(), BatchError> {
        let stored = self.header().crc.get();
        let computed = crc32c::crc32c(&self.buf.as_ref()[CRC_START..]);
        if stored != computed {
            return Err(BatchError::CrcMismatch { stored, computed });
        }
        Ok(())
    }

    /// First offset.
    pub fn base_offset(&self) -> i64 {
        self.header().base_offset.get()
    }

    /// Last offset: base_offset + lastOffsetDelta.
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + i64::from(self.last_offset_delta())
    }

    /// lastOffsetDelta.
    pub fn last_offset_delta(&self) -> i32 {
        self.header().last_offset_delta.get()
    }

    /// partitionLeaderEpoch.
    pub fn partition_leader_epoch(&self) -> i32 {
        self.header().partition_leader_epoch.get()
    }

    /// Decoded attributes.
    pub fn attributes(&self) -> Attributes {
        Attributes(self.header().attributes.get())
    }

    /// baseTimestamp (ms).
    pub fn base_timestamp(&self) -> i64 {
        self.header().base_timestamp.get()
    }

    /// maxTimestamp (ms).
    pub fn max_timestamp(&self) -> i64 {
        self.header().max_timestamp.get()
    }

    /// producerId (-1 if not idempotent).
    pub fn producer_id(&self) -> i64 {
        self.header().producer_id.get()
    }

    /// producerEpoch.
    pub fn producer_epoch(&self) -> i16 {
        self.header().producer_epoch.get()
    }

    /// baseSequence.
    pub fn base_sequence(&self) -> i32 {
        self.header().base_sequence.get()
    }

    /// recordCount.
    pub fn record_count(&self) -> i32 {
        self.header().record_count.get()
    }

    /// The records section (compressed when attributes say so).
    pub fn records_bytes(&self) -> &[u8] {
        &self.buf.as_ref()[BATCH_HEADER_BYTES..]
    }

    /// Iterates the records of an uncompressed batch in place; for compressed batches use
    /// [`decompressed_records`](Self::decompressed_records) and [`RecordIter::new`].
    pub fn records(&self) -> Result<RecordIter<'_>, BatchError> {
        match self.attributes().compression() {
            Ok(Compression::None) => Ok(RecordIter::new(self.records_bytes(), self.record_count())),
            Ok(_) => Err(BatchError::InvalidRecord {
                reason: "batch is compressed".into(),
            }),
            Err(code) => Err(BatchError::UnknownCompression { code }),
        }
    }

    /// The records section decompressed (validation only: never on the append path), at most
    /// `decompressed_bytes_max` bytes.
    pub fn decompressed_records(
        &self,
        decompressed_bytes_max: usize,
    ) -> Result<Vec<u8>, BatchError> {
        let codec = self
            .attributes()
            .compression()
            .map_err(|code| BatchError::UnknownCompression { code })?;
        decompress(codec, self.records_bytes(), decompressed_bytes_max)
            .map_err(|reason| BatchError::Decompression { reason })
    }

    /// Full content check: decompress if needed and parse every record, checking the count
    /// and offset deltas. Costly (`O(records)`); for validation, tests and tools.
    pub fn validate_records(&self, decompressed_bytes_max: usize) -> Result<(), BatchError> {
        let decompressed;
        let records = match self.attributes().compression() {
            Ok(Compression::None) => self.records_bytes(),
            _ => {
                decompressed = self.decompressed_records(decompressed_bytes_max)?;
                &decompressed[..]
            }
        };
        let mut last_delta = -1;
        for record in RecordIter::new(records, self.record_count()) {
            let record = record?;
            if record.offset_delta <= last_delta || record.offset_delta > self.last_offset_delta() {
                let reason = format!("offset delta {} out of order", record.offset_delta);
                return Err(BatchError::InvalidRecord { reason });
            }
            last_delta = record.offset_delta;
        }
        Ok(())
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> RecordBatchView<B> {
    fn header_mut(&mut self) -> &mut RecordBatchHeader {
        let (header, _) =
            RecordBatchHeader::mut_from_prefix(self.buf.as_mut()).expect("checked in new");
        header
    }

    /// Assigns the batch's first offset (the broker's one write at append). CRC unaffected.
    pub fn set_base_offset(&mut self, base_offset: i64) {
        assert!(base_offset >= 0, "offsets are non-negative");
        self.header_mut().base_offset.set(base_offset);
    }

    /// Stamps the leader epoch. CRC unaffected.
    pub fn set_partition_leader_epoch(&mut self, epoch: i32) {
        self.header_mut().partition_leader_epoch.set(epoch);
    }
}
