//! [`Appender`]: the write path of the active segment's `.log`.
//!
//! O_DIRECT writes whole aligned blocks, but batches end anywhere. The appender keeps every byte
//! from the start of the last partial block (`tail_start`, aligned) to the logical end in memory.
//! A flush writes those bytes (zero-padded to a whole block) in ONE write and syncs once, then
//! keeps only the still-partial last block, which the next flush rewrites with more bytes after it.
//! Rewriting the same block is safe: its durable prefix is rewritten with identical bytes.
//!
//! ```text
//!   disk:   |  block  |  block  | tail block (partial)|
//!                               ^tail_start           ^end (logical)
//!   memory:                     [ buf ............... ]
//! ```
//! Files are preallocated in steps (`prealloc_bytes`) so most writes do not allocate extents; the
//! file length therefore exceeds the logical end until the segment is sealed or closed, and
//! recovery finds the end by validating batches (zeros are never a valid batch).

use crate::io::{align_down, align_up, BlockFile};
use std::io;

/// Bytes buffered before full blocks are written out without waiting for a flush.
pub const WRITE_BYTES_MAX: usize = 1 << 20;

/// Buffered tail of the active segment.
#[derive(Debug)]
pub struct Appender {
    tail_start: u64,
    buf: Vec<u8>,
    allocated_bytes: u64,
    prealloc_bytes: u64,
    allocated_bytes_max: u64,
}

impl Appender {
    /// An appender for a log whose logical end is `end`; `tail_block` holds the bytes
    /// `[align_down(end), end)` already in the file, `file_bytes` is the current file length.
    pub fn new(
        end: u64,
        tail_block: &[u8],
        file_bytes: u64,
        prealloc_bytes: u64,
        segment_bytes_max: u64,
    ) -> Self {
        let tail_start = align_down(end);
        assert_eq!(tail_block.len() as u64, end - tail_start);
        assert!(prealloc_bytes.is_multiple_of(crate::io::BLOCK_BYTES));
        let mut buf = Vec::with_capacity(64 * 1024);
        buf.extend_from_slice(tail_block);
        let allocated_bytes_max = align_up(segment_bytes_max);
        Appender {
            tail_start,
            buf,
            allocated_bytes: file_bytes,
            prealloc_bytes,
            allocated_bytes_max,
        }
    }

    /// The logical end of the log: every byte appended so far.
    pub fn end(&self) -> u64 {
        self.tail_start + self.buf.len() as u64
    }

    /// Everything below this (aligned) position has been written to the file.
    pub fn tail_start(&self) -> u64 {
        self.tail_start
    }

    /// The bytes from `tail_start` to the logical end.
    pub fn pending(&self) -> &[u8] {
        &self.buf
    }

    /// Appends bytes to the buffer (no I/O).
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Whether enough is buffered that full blocks should be written out now.
    pub fn over_write_limit(&self) -> bool {
        self.buf.len() >= WRITE_BYTES_MAX
    }

    /// Writes the full blocks of the buffer (no sync), keeping the partial tail block.
    pub async fn write_full_blocks<F: BlockFile>(&mut self, file: &F) -> io::Result<()> {
        let full = align_down(self.buf.len() as u64) as usize;
        if full == 0 {
            return Ok(());
        }
        self.ensure_allocated(file, self.tail_start + full as u64)
            .await?;
        // In the background: the next appends fill the buffer while this write is in flight.
        file.write_at_background(self.tail_start, &self.buf[..full])
            .await?;
        self.buf.drain(..full);
        self.tail_start += full as u64;
        Ok(())
    }

    /// Writes everything buffered (tail block zero-padded) in one write and fdatasyncs once.
    pub async fn flush<F: BlockFile>(&mut self, file: &F) -> io::Result<()> {
        let len = self.buf.len();
        if len > 0 {
            let padded = align_up(len as u64) as usize;
            self.ensure_allocated(file, self.tail_start + padded as u64)
                .await?;
            self.buf.resize(padded, 0);
            let written = file.write_at(self.tail_start, &self.buf).await;
            self.buf.truncate(len);
            written?;
        }
        file.sync().await?;
        let keep_from = align_down(len as u64) as usize;
        self.buf.drain(..keep_from);
        self.tail_start += keep_from as u64;
        assert!(self.buf.len() < crate::io::BLOCK_BYTES as usize);
        Ok(())
    }

    /// Grows the file ahead of writes so that most writes land in allocated extents.
    async fn ensure_allocated<F: BlockFile>(&mut self, file: &F, end: u64) -> io::Result<()> {
        if end <= self.allocated_bytes {
            return Ok(());
        }
        let step = (self.allocated_bytes + self.prealloc_bytes).min(self.allocated_bytes_max);
        let target = step.max(align_up(end));
        file.allocate(target).await?;
        self.allocated_bytes = target;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sim::{block_on, FaultConfig, SimStorage};
    use crate::io::{OpenMode, Storage};
    use std::path::Path;

    fn setup() -> (SimStorage, crate::io::sim::SimFile) {
        let s = SimStorage::new(3, FaultConfig::default());
        block_on(s.create_dir_all(Path::new("/p"))).unwrap();
        let f = block_on(s.open(Path::new("/p/x.log"), OpenMode::CreateReadWrite)).unwrap();
        (s, f)
    }

    #[test]
    fn one_byte_tail_block_is_rewritten_in_place() {
        let (s, f) = setup();
        let mut a = Appender::new(0, &[], 0, 8192, 1 << 20);
        a.push(&[7]);
        block_on(a.flush(&f)).unwrap();
        assert_eq!((a.tail_start(), a.end()), (0, 1));
        a.push(&[8u8; 4096]);
        block_on(a.flush(&f)).unwrap();
        assert_eq!((a.tail_start(), a.end()), (4096, 4097));
        let bytes = s.file_bytes(Path::new("/p/x.log")).unwrap();
        assert_eq!(bytes.len(), 8192, "preallocated");
        assert_eq!(bytes[0], 7);
        assert!(bytes[1..4097].iter().all(|&b| b == 8));
        assert!(bytes[4097..].iter().all(|&b| b == 0));
    }

    #[test]
    fn resumes_from_a_partial_tail_block() {
        let (s, f) = setup();
        let mut a = Appender::new(4100, &[1, 2, 3, 4], 4100, 4096, 1 << 20);
        a.push(&[5]);
        block_on(a.flush(&f)).unwrap();
        let bytes = s.file_bytes(Path::new("/p/x.log")).unwrap();
        assert_eq!(&bytes[4096..4101], &[1, 2, 3, 4, 5]);
        assert_eq!(a.end(), 4101);
    }

    #[test]
    fn full_blocks_go_out_without_sync() {
        let (_s, f) = setup();
        let mut a = Appender::new(0, &[], 0, 4096, 1 << 20);
        a.push(&vec![9u8; WRITE_BYTES_MAX + 10]);
        assert!(a.over_write_limit());
        block_on(a.write_full_blocks(&f)).unwrap();
        assert_eq!(a.pending().len(), (WRITE_BYTES_MAX + 10) % 4096);
        assert_eq!(a.end(), WRITE_BYTES_MAX as u64 + 10);
    }
}
