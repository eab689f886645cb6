//! The checks every reader of a stored or received batch makes: whole (batchLength within the
//! bytes), v2 (magic), intact (CRC-32C over attributes..end).

use super::error::BatchError;
use super::header::{
    RecordBatchHeader, BATCH_HEADER_BYTES, BATCH_LENGTH_OFFSET, BATCH_LENGTH_OVERHEAD_BYTES,
    CRC_START, MAGIC_V2,
};

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

/// Checks the batch at the start of `buf` (which may continue past it): whole, magic 2, CRC-32C
/// intact. Returns its size in bytes.
pub fn check_prefix(buf: &[u8]) -> Result<usize, BatchError> {
    let size = check_shape(buf)?;
    check_crc(&buf[..size])?;
    Ok(size)
}

/// [`check_prefix`] without the CRC (for views that only read the header): whole and magic 2.
/// Returns the size.
pub fn check_shape(buf: &[u8]) -> Result<usize, BatchError> {
    let size = batch_size_bytes(buf)?;
    if buf.len() < size {
        return Err(BatchError::Truncated {
            needed: size,
            available: buf.len(),
        });
    }
    let header = RecordBatchHeader::view(buf).expect("size covers a header");
    if header.magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic {
            magic: header.magic,
        });
    }
    Ok(size)
}

/// Recomputes CRC-32C over attributes..end of the whole `batch` and compares it with the stored one.
pub fn check_crc(batch: &[u8]) -> Result<(), BatchError> {
    let header = RecordBatchHeader::view(batch).ok_or(BatchError::Truncated {
        needed: BATCH_HEADER_BYTES,
        available: batch.len(),
    })?;
    let stored = header.crc.get();
    let computed = crc32c::crc32c(&batch[CRC_START..]);
    if stored != computed {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    Ok(())
}
