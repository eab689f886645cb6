//! [`BatchError`]: why bytes are not an acceptable record batch.

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
    /// The batch is larger than the topic's `max.message.bytes`.
    #[error("record batch of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Batch size in bytes.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// lastOffsetDelta is negative, or baseOffset + lastOffsetDelta overflows an offset.
    #[error("offsets out of range: baseOffset {base_offset}, lastOffsetDelta {last_offset_delta}")]
    OffsetsOutOfRange {
        /// As read.
        base_offset: i64,
        /// As read.
        last_offset_delta: i32,
    },
}

impl BatchError {
    /// The Kafka error code a Produce partition response carries for this failure.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            BatchError::UnknownCompression { .. } => ErrorCode::UnsupportedCompressionType,
            BatchError::InvalidRecord { .. } => ErrorCode::InvalidRecord,
            BatchError::UnsupportedMagic { .. } => ErrorCode::UnsupportedForMessageFormat,
            BatchError::TooLarge { .. } => ErrorCode::MessageTooLarge,
            _ => ErrorCode::CorruptMessage,
        }
    }
}
