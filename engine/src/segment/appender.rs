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
//! Files are preallocated ahead of the data in steps that follow the write rate ([`Prealloc`]),
//! so most writes of a busy partition do not allocate extents; the file length therefore
//! exceeds the logical end until the segment is sealed, closed or released idle, and recovery
//! finds the end by validating batches (zeros are never a valid batch).

use crate::io::{align_down, align_up, BlockFile, WriteBuffer, BLOCK_BYTES};
use crate::prealloc::{Prealloc, PREALLOC_STEP_MAX};
use std::io;

/// Largest write buffer: once this much is pending, its full blocks go out without a flush.
pub const WRITE_BYTES_MAX: usize = 1 << 20;
/// Smallest write buffer; buffers grow towards [`WRITE_BYTES_MAX`] while appends stream in and
/// shrink back when flushes come sooner, so a partition that flushes small batches holds little.
pub const WRITE_BYTES_MIN: usize = 64 << 10;

/// Buffered tail of the active segment.
///
/// The pending bytes live in a buffer lent by the file (DMA memory on the real disk), so a batch
/// is copied once, into the buffer that is then written. Between writes, when no buffer is
/// held, the partial tail block waits in `tail` (< one block): an idle partition holds no
/// write buffer.
#[derive(Debug)]
pub struct Appender<B> {
    tail_start: u64,
    /// The pending bytes `[tail_start, end)` are `buf[..len]`, or `tail` while `buf` is `None`.
    buf: Option<B>,
    tail: Vec<u8>,
    len: usize,
    /// Size of the next buffer to borrow.
    buf_bytes: usize,
    /// The file length as far as the appender knows: past it, a write allocates.
    allocated_bytes: u64,
    prealloc: Prealloc,
    allocated_bytes_max: u64,
}

impl<B: WriteBuffer> Appender<B> {
    /// An appender for a log whose logical end is `end`; `tail_block` holds the bytes
    /// `[align_down(end), end)` already in the file, `file_bytes` is the current file length;
    /// `prealloc` decides how far ahead of the data the file is allocated.
    pub fn new(
        end: u64,
        tail_block: &[u8],
        file_bytes: u64,
        prealloc: Prealloc,
        segment_bytes_max: u64,
    ) -> Self {
        let tail_start = align_down(end);
        assert_eq!(tail_block.len() as u64, end - tail_start);
        let allocated_bytes_max = align_up(segment_bytes_max);
        Appender {
            tail_start,
            buf: None,
            tail: tail_block.to_vec(),
            len: tail_block.len(),
            buf_bytes: WRITE_BYTES_MIN,
            allocated_bytes: file_bytes,
            prealloc,
            allocated_bytes_max,
        }
    }

    /// The logical end of the log: every byte appended so far.
    pub fn end(&self) -> u64 {
        self.tail_start + self.len as u64
    }

    /// Everything below this (aligned) position has been written to the file.
    pub fn tail_start(&self) -> u64 {
        self.tail_start
    }

    /// The bytes from `tail_start` to the logical end.
    pub fn pending(&self) -> &[u8] {
        match &self.buf {
            Some(buf) => &buf.bytes()[..self.len],
            None => &self.tail,
        }
    }

    /// Heap bytes held (write buffer and tail block).
    pub fn resident_bytes(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.bytes().len()) + self.tail.capacity()
    }

    /// Appends `bytes`, copying them into the write buffer; each time the buffer fills, its full
    /// blocks are written in the background (no sync) while the next buffer fills.
    pub async fn append<F: BlockFile<Buffer = B>>(
        &mut self,
        file: &F,
        mut bytes: &[u8],
    ) -> io::Result<()> {
        while !bytes.is_empty() {
            let len = self.len;
            let buf = self.borrow_buffer(file);
            let capacity = buf.len();
            let n = (capacity - len).min(bytes.len());
            buf[len..len + n].copy_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
            if self.len == capacity {
                self.buf_bytes = (self.buf_bytes * 2).min(WRITE_BYTES_MAX);
                // Boxed: once per buffer, while every append's future would carry its state.
                Box::pin(self.write_full_blocks(file)).await?;
            }
        }
        Ok(())
    }

    /// The write buffer, borrowing one from the file (with the tail block copied in) if none is held.
    fn borrow_buffer<F: BlockFile<Buffer = B>>(&mut self, file: &F) -> &mut [u8] {
        if self.buf.is_none() {
            debug_assert_eq!(self.tail.len(), self.len);
            let mut buf = file.alloc_buffer(self.buf_bytes);
            assert!(
                buf.bytes().len() > self.len,
                "a buffer holds the tail block"
            );
            buf.bytes_mut()[..self.len].copy_from_slice(&self.tail);
            self.tail.clear();
            self.buf = Some(buf);
        }
        self.buf.as_mut().expect("just borrowed").bytes_mut()
    }

    /// Hands the buffer over for writing at the returned position: its partial last block stays
    /// behind as the tail, and the whole blocks before it count as written.
    fn take_buffer(&mut self) -> (u64, B) {
        let buf = self.buf.take().expect("a buffer to hand over");
        let keep_from = align_down(self.len as u64) as usize;
        self.tail.clear();
        self.tail
            .extend_from_slice(&buf.bytes()[keep_from..self.len]);
        let start = self.tail_start;
        self.tail_start += keep_from as u64;
        self.len -= keep_from;
        (start, buf)
    }

    /// Writes the full blocks of the buffer (no sync), keeping the partial tail block.
    pub async fn write_full_blocks<F: BlockFile<Buffer = B>>(
        &mut self,
        file: &F,
    ) -> io::Result<()> {
        let full = align_down(self.len as u64) as usize;
        if full == 0 || self.buf.is_none() {
            return Ok(());
        }
        self.ensure_allocated(file, self.tail_start + full as u64)
            .await?;
        let (start, buf) = self.take_buffer();
        // In the background: the next appends fill a new buffer while this write is in flight.
        file.write_buffer_background(start, buf, full).await
    }

    /// Writes everything buffered (tail block zero-padded) in one write and fdatasyncs once.
    pub async fn flush<F: BlockFile<Buffer = B>>(&mut self, file: &F) -> io::Result<()> {
        if self.len > 0 {
            let padded = align_up(self.len as u64) as usize;
            self.ensure_allocated(file, self.tail_start + padded as u64)
                .await?;
            let len = self.len;
            let buf = self.borrow_buffer(file);
            buf[len..padded].fill(0);
            if padded * 4 < buf.len() {
                self.buf_bytes = (self.buf_bytes / 2).max(WRITE_BYTES_MIN);
            }
            let (start, buf) = self.take_buffer();
            file.write_buffer_at(start, buf, padded).await?;
        }
        file.sync().await?;
        assert!(self.len < BLOCK_BYTES as usize);
        assert!(self.buf.is_none());
        Ok(())
    }

    /// The file length as far as the appender knows (data plus preallocation).
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_bytes
    }

    /// The preallocation step and the budget this segment holds.
    pub fn prealloc(&self) -> &Prealloc {
        &self.prealloc
    }

    /// Grows the file ahead of writes up to `end` so that most writes land in allocated
    /// extents. Without a grant (a slow partition, or the shard's budget spent) nothing is
    /// allocated: the write itself extends the file.
    async fn ensure_allocated<F: BlockFile>(&mut self, file: &F, end: u64) -> io::Result<()> {
        if end <= self.allocated_bytes {
            return Ok(());
        }
        let needed = align_up(end);
        let logical_end = self.end();
        let target =
            self.prealloc
                .extent_end(needed, logical_end, self.allocated_bytes_max.max(needed));
        if target > needed {
            if self.allocated_bytes == 0 {
                allocate_first(file, target, self.allocated_bytes_max).await?;
            } else {
                file.allocate(target).await?;
            }
        }
        self.allocated_bytes = target;
        Ok(())
    }
}

/// Allocates an empty file's first grant, `[0, target)`, at the start of room for a whole
/// largest step (at most `allocated_max`), whose rest is given back at once: ext4 places a large
/// allocation in a large free area and a small one in whatever gap fits it, so this way the
/// next grants can follow the first one and the file stays in few extents (see
/// [`crate::prealloc`]). Without that room (a full disk) the grant alone is allocated.
async fn allocate_first<F: BlockFile>(file: &F, target: u64, allocated_max: u64) -> io::Result<()> {
    let room = PREALLOC_STEP_MAX.min(allocated_max);
    if room > target {
        if file.allocate(room).await.is_ok() {
            return file.truncate(target).await;
        }
        file.truncate(0).await?; // whatever the attempt left: the file held no data
    }
    file.allocate(target).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
    use crate::io::{OpenMode, Storage};
    use crate::prealloc::PreallocBudget;
    use crate::types::TimestampMs;
    use std::path::Path;
    use std::rc::Rc;

    /// A preallocation whose first step is `step`, on an unlimited budget.
    fn prealloc(step: u64) -> Prealloc {
        let clock = Rc::new(ManualClock::new(TimestampMs(1_000)));
        Prealloc::new(PreallocBudget::new(u64::MAX), clock, step)
    }

    fn setup() -> (SimStorage, crate::io::sim::SimFile) {
        let s = SimStorage::new(3, FaultConfig::default());
        block_on(s.create_dir_all(Path::new("/p"))).unwrap();
        let f = block_on(s.open(Path::new("/p/x.log"), OpenMode::CreateReadWrite)).unwrap();
        (s, f)
    }

    #[test]
    fn one_byte_tail_block_is_rewritten_in_place() {
        let (s, f) = setup();
        let mut a = Appender::new(0, &[], 0, prealloc(8192), 1 << 20);
        block_on(a.append(&f, &[7])).unwrap();
        block_on(a.flush(&f)).unwrap();
        assert_eq!((a.tail_start(), a.end()), (0, 1));
        block_on(a.append(&f, &[8u8; 4096])).unwrap();
        block_on(a.flush(&f)).unwrap();
        assert_eq!((a.tail_start(), a.end()), (4096, 4097));
        let bytes = s.file_bytes(Path::new("/p/x.log")).unwrap();
        assert_eq!(
            bytes.len(),
            crate::prealloc::PREALLOC_STEP_MIN as usize,
            "a first step, the written blocks included"
        );
        assert_eq!(bytes[0], 7);
        assert!(bytes[1..4097].iter().all(|&b| b == 8));
        assert!(bytes[4097..].iter().all(|&b| b == 0));
    }

    #[test]
    fn resumes_from_a_partial_tail_block() {
        let (s, f) = setup();
        let mut a = Appender::new(4100, &[1, 2, 3, 4], 4100, prealloc(4096), 1 << 20);
        block_on(a.append(&f, &[5])).unwrap();
        block_on(a.flush(&f)).unwrap();
        let bytes = s.file_bytes(Path::new("/p/x.log")).unwrap();
        assert_eq!(&bytes[4096..4101], &[1, 2, 3, 4, 5]);
        assert_eq!(a.end(), 4101);
    }

    #[test]
    fn full_buffers_go_out_without_sync_and_the_tail_stays() {
        let (s, f) = setup();
        let mut a = Appender::new(0, &[], 0, prealloc(4096), 1 << 20);
        let data: Vec<u8> = (0..WRITE_BYTES_MAX * 2 + 10).map(|i| i as u8).collect();
        block_on(a.append(&f, &data)).unwrap();
        assert_eq!(a.end(), data.len() as u64);
        assert!(a.tail_start() > 0, "full buffers were written");
        let written = s.file_bytes(Path::new("/p/x.log")).unwrap();
        let tail_start = a.tail_start() as usize;
        assert_eq!(&written[..tail_start], &data[..tail_start]);
        assert_eq!(a.pending(), &data[tail_start..]);
        block_on(a.write_full_blocks(&f)).unwrap();
        assert_eq!(a.pending().len(), data.len() % 4096);
        assert!(a.resident_bytes() < 4096, "no write buffer held");
        block_on(a.flush(&f)).unwrap();
        let written = s.file_bytes(Path::new("/p/x.log")).unwrap();
        assert_eq!(&written[..data.len()], &data[..]);
        assert!(
            written[data.len()..].iter().all(|&b| b == 0),
            "padding is zeros, not buffer garbage"
        );
    }

    #[test]
    fn buffers_grow_while_streaming_and_shrink_under_small_flushes() {
        let (_s, f) = setup();
        let mut a = Appender::new(0, &[], 0, prealloc(4096), 1 << 30);
        block_on(a.append(&f, &vec![1u8; 4 * WRITE_BYTES_MAX])).unwrap();
        assert_eq!(a.buf_bytes, WRITE_BYTES_MAX);
        for _ in 0..8 {
            block_on(a.append(&f, &[2u8; 100])).unwrap();
            block_on(a.flush(&f)).unwrap();
        }
        assert_eq!(a.buf_bytes, WRITE_BYTES_MIN);
        assert!(a.resident_bytes() < 4096);
    }

    #[test]
    fn a_batch_ending_on_a_block_boundary_leaves_no_tail() {
        let (_s, f) = setup();
        let mut a = Appender::new(0, &[], 0, prealloc(4096), 1 << 20);
        block_on(a.append(&f, &[3u8; 8192])).unwrap();
        block_on(a.flush(&f)).unwrap();
        assert_eq!((a.tail_start(), a.end()), (8192, 8192));
        assert!(a.pending().is_empty());
    }
}
