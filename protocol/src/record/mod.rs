//! Record batch v2: the unit a producer sends, the broker stores and a consumer fetches.
//!
//! - [`header`]: the 61-byte header layout, read in place with `zerocopy`.
//! - [`attributes`]: compression / timestamp type / transactional / control bits.
//! - [`batch`]: [`RecordBatchView`] over one whole batch: validate (length, magic 2,
//!   CRC-32C over attributes..end), rewrite baseOffset / partitionLeaderEpoch (CRC untouched).
//! - [`records`]: record iteration with `nom` (varints, key, value, headers).
//! - [`compression`]: capped decompression, for validation only.
//! - [`blob`]: split a Produce partition's records blob into validated batches.

pub mod attributes;
pub mod batch;
pub mod blob;
pub mod compression;
pub mod header;
pub mod plain_batch;
pub mod records;

pub use attributes::{Attributes, Compression, TimestampType};
pub use batch::{batch_size_bytes, BatchError, RecordBatchView};
pub use blob::{batches, single_batch, Batches};
pub use header::{RecordBatchHeader, BATCH_HEADER_BYTES, MAGIC_V2};
pub use plain_batch::{encode_plain_batch, PlainRecord};
pub use records::{Record, RecordHeader, RecordIter};

#[cfg(test)]
mod tests;
