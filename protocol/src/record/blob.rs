//! The records blob of one Produce partition: one or more whole v2 batches back to back.
//!
//! [`split`] cuts it into zero-copy parts of one whole batch each (`Bytes` slices, or disjoint
//! `BytesMut` parts), by batchLength alone; [`batches`] also validates each (length, magic,
//! CRC, compression code) as it goes. Kafka requires exactly one batch per partition for
//! Produce v3+ (`ProduceRequest.validateRecords`, INVALID_RECORD otherwise): [`single_batch`]
//! is that rule, read the way Kafka's batch reader reads the bytes, and the Produce handler
//! checks the one batch it yields once as a [`rill_types::batch::ValidatedBatch`].

use std::ops::Deref;

use bytes::{Bytes, BytesMut};

use super::batch::{batch_size_bytes, BatchError, RecordBatchView};
use super::header::{BATCH_LENGTH_OFFSET, BATCH_LENGTH_OVERHEAD_BYTES, MAGIC_OFFSET, MAGIC_V2};

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
    /// Bytes, but no whole batch in them: fewer than a batch's length and magic, or than its
    /// batchLength announces. Kafka's batch reader finds no batch there (INVALID_RECORD).
    #[error("no whole record batch in {available} bytes")]
    Cut {
        /// Bytes present.
        available: usize,
    },
    /// A whole batch, then a second whole batch.
    #[error("more than one record batch")]
    MoreThanOne,
    /// A whole batch, then bytes that are not a whole batch. Kafka's reader stops before them
    /// and Kafka appends the batch without them; Rill refuses rather than drop bytes unsaid.
    #[error("{extra} bytes after the record batch")]
    Trailing {
        /// Bytes after the batch.
        extra: usize,
    },
    /// A batch Kafka's reader (or, for the first batch, `validateRecords`) refuses outright:
    /// batchLength below 14, a magic outside 0..=2, or (first batch) a magic other than 2.
    #[error(transparent)]
    Malformed(#[from] BatchError),
}

/// Kafka's smallest batchLength (`LegacyRecord.RECORD_OVERHEAD_V0`): its batch reader throws
/// CorruptRecordException below it, before looking further.
const KAFKA_BATCH_LENGTH_MIN: i32 = 14;

/// What Kafka's batch reader (`ByteBufferLogInputStream.nextBatchSize`, then `nextBatch`)
/// finds at the start of `buf`, checking in its order: the size of a whole batch; `None` where
/// it finds no batch (fewer bytes than batchLength's end, than the magic byte, or than
/// batchLength announces); an error where it throws (batchLength below 14, magic outside
/// 0..=2).
fn kafka_next_batch(buf: &[u8]) -> Result<Option<usize>, BatchError> {
    let Some(length) = buf.get(BATCH_LENGTH_OFFSET..BATCH_LENGTH_OVERHEAD_BYTES) else {
        return Ok(None);
    };
    let batch_length = i32::from_be_bytes(length.try_into().expect("4 bytes"));
    if batch_length < KAFKA_BATCH_LENGTH_MIN {
        return Err(BatchError::InvalidLength { batch_length });
    }
    let Some(&magic) = buf.get(MAGIC_OFFSET) else {
        return Ok(None);
    };
    let magic = magic as i8;
    if !(0..=MAGIC_V2).contains(&magic) {
        return Err(BatchError::UnsupportedMagic { magic });
    }
    let size = batch_length as usize + BATCH_LENGTH_OVERHEAD_BYTES;
    Ok((size <= buf.len()).then_some(size))
}

/// The one whole batch of a Produce v3+ partition's records (the same buffer, no copy), as
/// Kafka's `ProduceRequest.validateRecords` reads them: the first batch must be whole and v2,
/// then nothing may follow it. Only the batch's length and magic are looked at: the caller
/// validates the rest (Kafka counts the batches before it looks into one, so two batches are
/// [`NotOneBatch::MoreThanOne`] whatever is in them).
pub fn single_batch<B: SplitBuf>(records: B) -> Result<B, NotOneBatch> {
    if records.is_empty() {
        return Err(NotOneBatch::Empty);
    }
    let Some(size) = kafka_next_batch(&records)? else {
        return Err(NotOneBatch::Cut {
            available: records.len(),
        });
    };
    let magic = records[MAGIC_OFFSET] as i8;
    if magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic { magic }.into());
    }
    let rest = &records[size..];
    if rest.is_empty() {
        return Ok(records);
    }
    Err(match kafka_next_batch(rest)? {
        Some(_) => NotOneBatch::MoreThanOne,
        None => NotOneBatch::Trailing { extra: rest.len() },
    })
}
