//! A segment: one `.log` file with its sparse `.index` and `.timeindex`, named by its base offset.
//!
//! - [`file_name`]: `<20-digit base offset>.{log,index,timeindex}`.
//! - [`offset_index`], [`time_index`]: the sparse indexes. In memory only while needed: the
//!   active segment's while it is written (checkpointed to disk every `CHECKPOINT_BYTES` of
//!   flushed log, written whole when sealed), a sealed segment's while its file is open.
//! - [`appender`]: buffered, block-aligned write path of the active segment.
//! - [`cursor`]: walks whole batches from a position, validating each.
//! - [`txn_index`]: the aborted transactions whose ABORT marker is in the segment (`.txnindex`),
//!   in memory for the active segment; a sealed segment keeps only their smallest first offset
//!   and reads its file when a read_committed fetch needs it.
//!
//! Invariants of a segment: batches are in offset order (each baseOffset is above the previous
//! batch's lastOffset) and, unless the segment [may have gaps](Segment::may_have_gaps),
//! contiguous (each baseOffset is the previous lastOffset + 1, the first is the segment base);
//! `size_bytes` is the sum of whole batches, and every index entry points at the start of a
//! batch below `size_bytes`. Segments themselves always cover contiguous offset ranges: a
//! segment spans `[base, next_offset)` and the next one starts at `next_offset`.

pub mod appender;
pub mod cursor;
pub mod file_name;
pub mod offset_index;
pub mod time_index;
pub mod txn_index;

use crate::batch::BatchMeta;
use crate::io::{align_down, align_up, BlockFile};
use crate::types::{FilePosition, Offset, RelativeOffset, TimestampMs};
use appender::Appender;
use bytes::{Bytes, BytesMut};
use offset_index::OffsetIndex;
use std::io;
use time_index::TimeIndex;
use txn_index::TxnIndex;

/// One segment of a partition log.
#[derive(Debug)]
pub struct Segment<F: BlockFile> {
    /// Offset of the first batch (also the file name).
    pub base: Offset,
    /// One past the last offset held.
    pub next_offset: Offset,
    /// Bytes of whole batches.
    pub size_bytes: u64,
    /// Largest batch max timestamp, `NONE` while empty.
    pub max_timestamp: TimestampMs,
    /// When the first batch was appended in this process (drives `segment.ms`).
    pub first_append_ms: Option<TimestampMs>,
    /// Sparse offset index.
    pub index: OffsetIndex,
    /// Sparse time index.
    pub time_index: TimeIndex,
    /// Whether `index` and `time_index` are in memory. When false they are empty and the
    /// segment's `.index`/`.timeindex` files are current: sealed segments keep only their
    /// summary (base, next offset, size, max timestamp) until opened for a read.
    pub indexes_loaded: bool,
    /// Log bytes since the last index entry.
    pub bytes_since_index: u64,
    /// The open `.log`, if open (sealed segments open lazily).
    pub file: Option<F>,
    /// The write path; `Some` only for the active segment.
    pub appender: Option<Appender<F::Buffer>>,
    /// baseOffset of the last batch (the segment base while empty).
    pub last_batch_base: Offset,
    /// Aborted transactions of this segment: complete for the active segment, empty for a
    /// sealed one (its `.txnindex` is current and read on demand).
    pub txn_index: TxnIndex,
    /// Smallest first offset of this segment's aborted transactions (`None`: it has none), kept
    /// for every segment so read_committed fetches skip segments without reading their file.
    pub txn_first_offset_min: Option<Offset>,
    /// Whether batches may leave offsets out (a sealed segment that compaction may have
    /// rewritten). The active segment never has gaps, so its reads and recovery check that
    /// each batch starts exactly where the previous one ended.
    pub may_have_gaps: bool,
}

impl<F: BlockFile> Segment<F> {
    /// An empty segment starting at `base`.
    pub fn new(base: Offset) -> Self {
        Segment {
            base,
            next_offset: base,
            size_bytes: 0,
            max_timestamp: TimestampMs::NONE,
            first_append_ms: None,
            index: OffsetIndex::default(),
            time_index: TimeIndex::default(),
            indexes_loaded: true,
            bytes_since_index: 0,
            file: None,
            appender: None,
            last_batch_base: base,
            txn_index: TxnIndex::default(),
            txn_first_offset_min: None,
            may_have_gaps: false,
        }
    }

    /// Whether the segment holds no batch.
    pub fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }

    /// Frees the in-memory indexes (their files must be current); reload before using them.
    pub fn drop_indexes(&mut self) {
        self.index = OffsetIndex::default();
        self.time_index = TimeIndex::default();
        self.indexes_loaded = false;
    }

    /// Heap bytes of the in-memory indexes.
    pub fn index_heap_bytes(&self) -> usize {
        self.index.heap_bytes() + self.time_index.heap_bytes()
    }

    /// Records a batch placed at `size_bytes`: indexes, sizes, offsets. No I/O.
    pub fn note_batch(&mut self, meta: &BatchMeta, index_interval_bytes: u32) {
        assert!(self.indexes_loaded, "indexes loaded before noting a batch");
        if self.may_have_gaps {
            assert!(
                meta.base_offset >= self.next_offset,
                "batches in offset order"
            );
        } else {
            assert_eq!(
                meta.base_offset, self.next_offset,
                "batches must be contiguous"
            );
        }
        assert!(meta.last_offset >= meta.base_offset);
        let rel = RelativeOffset::between(meta.base_offset, self.base);
        let pos = FilePosition(u32::try_from(self.size_bytes).expect("segment < 4 GiB"));
        self.max_timestamp = self.max_timestamp.max(meta.max_timestamp);
        if self.index.is_empty() || self.bytes_since_index >= u64::from(index_interval_bytes) {
            self.index.push(rel, pos);
            self.time_index.maybe_push(self.max_timestamp, rel);
            self.bytes_since_index = 0;
        }
        self.size_bytes += meta.total_bytes as u64;
        self.bytes_since_index += meta.total_bytes as u64;
        self.next_offset = meta.last_offset.plus(1);
        self.last_batch_base = meta.base_offset;
    }

    /// Adds the final time index entry so its last entry is the segment's max timestamp.
    pub fn seal_time_index(&mut self) {
        assert!(self.indexes_loaded, "indexes loaded before sealing");
        if self.max_timestamp != TimestampMs::NONE {
            self.time_index.maybe_push(
                self.max_timestamp,
                RelativeOffset::between(self.last_batch_base, self.base),
            );
        }
    }

    /// Bytes `[pos, pos + len)` of the log (clamped to `size_bytes`), from disk and/or the appender.
    pub async fn read_range(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let end = (pos + len as u64).min(self.size_bytes);
        if pos >= end {
            return Ok(Bytes::new());
        }
        let mem_start = self.appender.as_ref().map_or(u64::MAX, |a| a.tail_start());
        if pos >= mem_start {
            return Ok(self.read_memory(pos, end));
        }
        let disk = self.read_disk(pos, end.min(mem_start)).await?;
        if end <= mem_start {
            return Ok(disk);
        }
        let mut joined = BytesMut::with_capacity((end - pos) as usize);
        joined.extend_from_slice(&disk);
        joined.extend_from_slice(&self.read_memory(mem_start, end));
        Ok(joined.freeze())
    }

    fn read_memory(&self, pos: u64, end: u64) -> Bytes {
        let appender = self
            .appender
            .as_ref()
            .expect("memory range only on the active segment");
        let start = (pos - appender.tail_start()) as usize;
        let stop = (end - appender.tail_start()) as usize;
        Bytes::copy_from_slice(&appender.pending()[start..stop])
    }

    /// Aligned O_DIRECT read covering `[pos, end)`, sliced to it (no copy of the slice).
    async fn read_disk(&self, pos: u64, end: u64) -> io::Result<Bytes> {
        let file = self
            .file
            .as_ref()
            .expect("segment file open before reading");
        let start = align_down(pos);
        let bytes = file
            .read_at(start, (align_up(end) - start) as usize)
            .await?;
        let want = (end - start) as usize;
        if bytes.len() < want {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment shorter than its size",
            ));
        }
        Ok(bytes.slice((pos - start) as usize..want))
    }
}
