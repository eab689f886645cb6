//! The records blob of one Produce partition: one or more whole v2 batches back to back.
//!
//! [`split`] cuts it into zero-copy parts of one whole batch each (`Bytes` slices, or disjoint
//! `BytesMut` parts), by batchLength alone; [`batches`] also validates each (length, magic,
//! CRC, compression code) as it goes. The Produce handler splits its `BytesMut`, then checks
//! each part once as a [`rill_types::batch::ValidatedBatch`]. Kafka requires exactly one batch per partition for
//! Produce v3+ (answering INVALID_RECORD otherwise): the handler refuses a second part, and
//! [`single_batch`] is the same rule for a `Bytes` blob.

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

/// The one validated batch of a Produce v3+ partition; zero or several batches are an
/// `InvalidRecord` error, as in Kafka.
pub fn single_batch(records: Bytes) -> Result<RecordBatchView<Bytes>, BatchError> {
    let mut all = batches(records);
    let first = all.next().unwrap_or_else(|| {
        Err(BatchError::InvalidRecord {
            reason: "no record batch".into(),
        })
    })?;
    if all.next().is_some() {
        return Err(BatchError::InvalidRecord {
            reason: "more than one record batch".into(),
        });
    }
    Ok(first)
}
