//! The records blob of one Produce partition: one or more whole v2 batches back to back.
//!
//! [`split`] cuts it into zero-copy parts of one whole batch each (`Bytes` slices, or disjoint
//! `BytesMut` parts), by batchLength alone; [`batches`] also validates each (length, magic,
//! CRC, compression code) as it goes. Kafka requires exactly one batch per partition for
//! Produce v3+ (`ProduceRequest.validateRecords`, INVALID_RECORD otherwise): [`single_batch`]
//! is that rule, and the Produce handler checks the one part it yields once as a
//! [`rill_types::batch::ValidatedBatch`].

use std::ops::Deref;

use bytes::{Bytes, BytesMut};

use super::batch::{batch_size_bytes, BatchError, RecordBatchView};

/// A buffer that splits into parts of the same memory without copying: `Bytes` (shared,
/// read-only slices) or `BytesMut` (disjoint, each writable).
pub trait SplitBuf: Deref<Target = [u8]> + Sized {
    /// The first `at` bytes; `self` keeps the rest.
    fn split_to(&mut self, at: usize) -> Self;
}

impl SplitBuf for Bytes {
    fn split_to(&mut self, at: usize) -> Self {
        Bytes::split_to(self, at)
    }
}

impl SplitBuf for BytesMut {
    fn split_to(&mut self, at: usize) -> Self {
        BytesMut::split_to(self, at)
    }
}

/// Iterator over the whole batches of a records blob, unchecked beyond their length; stops
/// after the first error.
#[derive(Debug, Clone)]
pub struct Split<B = Bytes> {
    rest: B,
    failed: bool,
}

/// Splits `records` into whole batches by their batchLength (each a part of the same buffer,
/// no copy; nothing else checked).
pub fn split<B: SplitBuf>(records: B) -> Split<B> {
    Split {
        rest: records,
        failed: false,
    }
}

impl<B: SplitBuf> Split<B> {
    fn next_slice(&mut self) -> Result<B, BatchError> {
        let size = batch_size_bytes(&self.rest)?;
        if size > self.rest.len() {
            return Err(BatchError::Truncated {
                needed: size,
                available: self.rest.len(),
            });
        }
        Ok(self.rest.split_to(size))
    }
}

impl<B: SplitBuf> Iterator for Split<B> {
    type Item = Result<B, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let slice = self.next_slice();
        self.failed = slice.is_err();
        Some(slice)
    }
}

/// Iterator over validated batches in a records blob; stops after the first error.
#[derive(Debug, Clone)]
pub struct Batches {
    split: Split,
}

/// Splits `records` into validated batches (each a slice of the same buffer, no copy).
pub fn batches(records: Bytes) -> Batches {
    Batches {
        split: split(records),
    }
}

impl Iterator for Batches {
    type Item = Result<RecordBatchView<Bytes>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = self.split.next()?.and_then(RecordBatchView::validate);
        self.split.failed |= batch.is_err();
        Some(batch)
    }
}

/// Why a Produce v3+ partition's records are not exactly one whole batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOneBatch {
    /// No batch at all: the records field is absent or empty.
    #[error("no record batch")]
    Empty,
    /// A whole batch, then a second whole batch.
    #[error("more than one record batch")]
    MoreThanOne,
    /// The bytes do not split into whole batches (a batchLength wrong, or a batch cut short).
    #[error(transparent)]
    Malformed(#[from] BatchError),
}

/// The one whole batch of a Produce v3+ partition's records, as a part of the same buffer
/// (no copy), checked for its length only: the caller validates it (Kafka counts the batches
/// before it looks into one, so two batches are [`NotOneBatch::MoreThanOne`] whatever is in
/// them). A cut batch after a whole one is [`NotOneBatch::Malformed`].
pub fn single_batch<B: SplitBuf>(records: B) -> Result<B, NotOneBatch> {
    let mut parts = split(records);
    let first = parts.next().ok_or(NotOneBatch::Empty)??;
    match parts.next() {
        None => Ok(first),
        Some(Err(e)) => Err(e.into()),
        Some(Ok(_)) => Err(NotOneBatch::MoreThanOne),
    }
}
