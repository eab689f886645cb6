//! The records blob of one Produce partition: one or more whole v2 batches back to back.
//!
//! [`batches`] splits it into zero-copy `Bytes` slices, validating each (length, magic, CRC,
//! compression code) as it goes. Kafka requires exactly one batch per partition for Produce
//! v3+ (answering INVALID_RECORD otherwise); [`single_batch`] enforces that.

use bytes::Bytes;

use super::batch::{batch_size_bytes, BatchError, RecordBatchView};

/// Iterator over validated batches in a records blob; stops after the first error.
#[derive(Debug, Clone)]
pub struct Batches {
    rest: Bytes,
    failed: bool,
}

/// Splits `records` into validated batches (each a slice of the same buffer, no copy).
pub fn batches(records: Bytes) -> Batches {
    Batches {
        rest: records,
        failed: false,
    }
}

impl Batches {
    fn next_batch(&mut self) -> Result<RecordBatchView<Bytes>, BatchError> {
        let size = batch_size_bytes(&self.rest)?;
        if size > self.rest.len() {
            return Err(BatchError::Truncated {
                needed: size,
                available: self.rest.len(),
            });
        }
        RecordBatchView::validate(self.rest.split_to(size))
    }
}

impl Iterator for Batches {
    type Item = Result<RecordBatchView<Bytes>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let batch = self.next_batch();
        self.failed = batch.is_err();
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
