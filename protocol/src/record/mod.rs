//! Record batch v2: the unit a producer sends, the broker stores and a consumer fetches.
//!
//! - [`header`], [`attributes`]: the 61-byte header layout and its attributes bits, defined once
//!   in `rill-types` (the engine reads the same definition) and re-exported here.
//! - [`batch`]: [`RecordBatchView`] over one whole batch: validate (length, magic 2,
//!   CRC-32C over attributes..end), rewrite baseOffset / partitionLeaderEpoch (CRC untouched).
//! - [`records`]: record iteration with `nom` (varints, key, value, headers).
//! - [`compression`]: capped decompression, and compression of rebuilt batches.
//! - [`blob`]: split a Produce partition's records blob into whole batches (validated views, or
//!   raw slices for [`rill_types::batch::ValidatedBatch`]).
//! - [`rebuild`]: a batch with only some of its records kept (log compaction).

pub mod batch;
pub mod blob;
pub mod compression;
pub mod plain_batch;
pub mod rebuild;
pub mod records;

pub use rill_types::batch::{attributes, header};

pub use attributes::{Attributes, Compression, TimestampType};
pub use batch::{batch_size_bytes, BatchError, RecordBatchView};
pub use blob::{batches, single_batch, split, Batches, NotOneBatch, Split, SplitBuf};
pub use header::{RecordBatchHeader, BATCH_HEADER_BYTES, MAGIC_V2};
pub use plain_batch::{encode_plain_batch, PlainRecord};
pub use rebuild::{for_each_record, recompress, retain_records, KeyedRecord};
pub use records::{Record, RecordHeader, RecordIter};
pub use rill_types::batch::ValidatedBatch;

#[cfg(test)]
mod tests;
