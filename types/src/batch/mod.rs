//! The Kafka v2 record batch as both the wire and the disk hold it, defined once.
//!
//! - [`header`]: the 61-byte header layout ([`RecordBatchHeader`], read and written in place with
//!   `zerocopy`), its offsets and typed getters, and [`write_crc`].
//! - [`attributes`]: the attributes bit field (compression, timestamp type, transactional,
//!   control).
//! - [`check`]: [`batch_size_bytes`] and [`check_prefix`] (length, magic, CRC-32C): the checks
//!   every reader of stored or received batches makes.
//! - [`validated`]: [`ValidatedBatch`], one batch that passed every check a broker makes before
//!   appending; the engine takes only this type and trusts it.
//! - [`error`]: [`BatchError`], why bytes are not an acceptable batch, with its Kafka code.
//!
//! Record-level decoding (varints, decompression) is the protocol crate's job; the engine never
//! decodes records.

pub mod attributes;
pub mod check;
pub mod error;
pub mod header;
pub mod validated;

pub use attributes::{Attributes, Compression, TimestampType};
pub use check::{batch_size_bytes, check_crc, check_prefix, check_shape};
pub use error::BatchError;
pub use header::{
    write_crc, RecordBatchHeader, BATCH_HEADER_BYTES, BATCH_LENGTH_OFFSET,
    BATCH_LENGTH_OVERHEAD_BYTES, CRC_START, MAGIC_OFFSET, MAGIC_V2,
};
pub use validated::ValidatedBatch;
