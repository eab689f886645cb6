//! [`BatchCursor`]: walks whole batches of one segment forward from a known batch start,
//! validating each (length, magic, CRC-32C, offset continuity: contiguous, or only increasing in
//! a segment that [may have gaps](super::Segment::may_have_gaps)). Reads ahead in large aligned
//! chunks and hands out zero-copy slices of them.

use super::Segment;
use crate::batch::{validate_prefix, BatchHeader, BatchMeta, HEADER_BYTES};
use crate::error::EngineError;
use crate::io::BlockFile;
use crate::types::Offset;
use bytes::Bytes;

/// Default read-ahead of a cursor.
pub const READ_AHEAD_BYTES: usize = 256 * 1024;

/// A forward walk over the batches of a segment.
pub struct BatchCursor<'a, F: BlockFile> {
    segment: &'a Segment<F>,
    /// File position of the next batch.
    pos: u64,
    /// The offset the next batch must start at (at or after, in a segment with gaps).
    expected: Offset,
    /// Read-ahead bytes starting at `buf_pos`.
    buf: Bytes,
    buf_pos: u64,
    read_ahead_bytes: usize,
}

impl<'a, F: BlockFile> BatchCursor<'a, F> {
    /// A cursor at the batch starting at `pos` whose baseOffset must be `expected`.
    pub fn new(
        segment: &'a Segment<F>,
        pos: u64,
        expected: Offset,
        read_ahead_bytes: usize,
    ) -> Self {
        BatchCursor {
            segment,
            pos,
            expected,
            buf: Bytes::new(),
            buf_pos: pos,
            read_ahead_bytes,
        }
    }

    /// File position of the next batch.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The offset the next batch must start at.
    pub fn expected(&self) -> Offset {
        self.expected
    }

    /// The next whole batch, `Ok(None)` at the end of the segment, `Err(CorruptBatch)` if the
    /// bytes there are not the batch that must come next.
    pub async fn next(&mut self) -> Result<Option<(BatchMeta, Bytes)>, EngineError> {
        if self.pos + HEADER_BYTES as u64 > self.segment.size_bytes {
            return Ok(None);
        }
        let header = self.ensure(HEADER_BYTES).await?;
        let total = BatchHeader::view(&header)
            .and_then(|h| h.total_bytes())
            .filter(|&t| t >= HEADER_BYTES && self.pos + t as u64 <= self.segment.size_bytes)
            .ok_or_else(|| {
                EngineError::CorruptBatch(format!("bad batch length at {}", self.pos))
            })?;
        let bytes = self.ensure(total).await?;
        let meta = validate_prefix(&bytes)?;
        let in_order = if self.segment.may_have_gaps {
            meta.base_offset >= self.expected
        } else {
            meta.base_offset == self.expected
        };
        if !in_order {
            let why = format!(
                "batch at {} has base {} not {}",
                self.pos, meta.base_offset, self.expected
            );
            return Err(EngineError::CorruptBatch(why));
        }
        self.pos += total as u64;
        self.expected = meta.last_offset.plus(1);
        Ok(Some((meta, bytes.slice(..total))))
    }

    /// At least `len` bytes starting at `pos` (refilling the read-ahead if needed).
    async fn ensure(&mut self, len: usize) -> Result<Bytes, EngineError> {
        let in_buf = self.pos >= self.buf_pos
            && self.pos + len as u64 <= self.buf_pos + self.buf.len() as u64;
        if !in_buf {
            let want = len.max(self.read_ahead_bytes);
            self.buf = self
                .segment
                .read_range(self.pos, want)
                .await
                .map_err(EngineError::from_io)?;
            self.buf_pos = self.pos;
            if self.buf.len() < len {
                return Err(EngineError::CorruptBatch(format!(
                    "batch at {} runs past the segment",
                    self.pos
                )));
            }
        }
        let start = (self.pos - self.buf_pos) as usize;
        Ok(self.buf.slice(start..))
    }
}
