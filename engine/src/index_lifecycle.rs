//! When a partition's indexes and buffers are in memory, and when they are on disk.
//!
//! - **Checkpoints**: every [`CHECKPOINT_BYTES`](crate::partition_log::CHECKPOINT_BYTES) of flushed log, the active segment's current
//!   `.index`/`.timeindex` and the producer snapshot are written (atomically, after the flush's
//!   fdatasync, so every entry points at durable bytes). Recovery then scans about that much
//!   instead of the whole active segment (see `recovery.rs`).
//! - **Lazy indexes**: a sealed segment keeps only its summary (base, next offset, size, max
//!   timestamp); its indexes are read from disk when a read opens its file and dropped when the
//!   file is closed (the LRU of `OPEN_SEALED_FILES_MAX`). An index file that no longer decodes
//!   is rebuilt by scanning the segment (the log is the truth).
//! - **Idle release**: [`PartitionLog::release_idle_memory`] drops the batch cache (its
//!   extents in the shard's read cache stay, within that cache's own bound, evicted least
//!   recently used like any others: a catch-up after the idle spell still reads memory), closes
//!   sealed files, checkpoints (unless at most
//!   `CLOSE_SCAN_BYTES_MAX` past the last checkpoint) and drops the active segment's indexes and
//!   its write buffer (the partial tail block is re-read from disk on the next append), trims the active `.log`'s preallocation and closes it, so an idle
//!   partition costs a few KiB of memory ([`PartitionLog::resident_bytes`]), no open file and
//!   no disk beyond its data. The active file is reopened read-write by the next read or append.

use crate::batch_cache::BatchCache;
use crate::error::EngineError;
use crate::io::{align_down, BlockFile, OpenMode, Storage};
use crate::partition_log::{PartitionLog, CLOSE_SCAN_BYTES_MAX};
use crate::segment::appender::Appender;
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::segment::Segment;
use std::mem::size_of;

impl<S: Storage> PartitionLog<S> {
    /// Checkpoints the active indexes if [`Self::checkpoint_bytes`] were flushed since the last one.
    /// Call only right after a successful flush. A failure is logged, not returned (the flushed
    /// bytes are durable either way, only the next recovery scans more); the next flush retries.
    pub(crate) async fn maybe_checkpoint(&mut self) {
        let size = self.active().size_bytes;
        if size.saturating_sub(self.checkpointed_bytes) < self.checkpoint_bytes() {
            return;
        }
        if let Err(e) = self.write_checkpoint().await {
            tracing::warn!(dir = %self.dir.display(), error = %e, "index checkpoint failed; recovery will scan more");
        }
    }

    /// Writes the active segment's indexes and the producer snapshot as of the log end.
    /// Everything appended must be durable (flushed): the files claim it is.
    pub(crate) async fn write_checkpoint(&mut self) -> Result<(), EngineError> {
        assert_eq!(
            self.positions.durable(),
            self.positions.log_end(),
            "checkpoint only what is durable"
        );
        let last = self.segments.len() - 1;
        self.ensure_open(last).await?;
        let active = self.active();
        let (base, size) = (active.base, active.size_bytes);
        self.write_indexes(active).await?;
        self.write_txn_index(active).await?;
        self.write_producer_snapshot(self.positions.log_end())
            .await?;
        self.checkpointed_bytes = size;
        tracing::debug!(dir = %self.dir.display(), base = base.0, size, "checkpointed active indexes");
        Ok(())
    }

    /// Loads segment `i`'s indexes from its files, rebuilding them by a scan if they do not
    /// decode for the segment's size and offsets.
    pub(crate) async fn load_indexes(&mut self, i: usize) -> Result<(), EngineError> {
        let segment = &self.segments[i];
        let (base, size) = (segment.base, segment.size_bytes);
        let offsets = (segment.next_offset.0 - base.0) as u64;
        let sealed = i + 1 < self.segments.len();
        if size == 0 {
            self.segments[i].indexes_loaded = true; // empty indexes are exact
            return Ok(());
        }
        let loaded = self.read_index_files(base, size, offsets).await?;
        match loaded {
            Some((index, time_index)) if !(sealed && index.is_empty()) => {
                let segment = &mut self.segments[i];
                (segment.index, segment.time_index) = (index, time_index);
                segment.indexes_loaded = true;
                Ok(())
            }
            _ => self.rebuild_indexes(i).await,
        }
    }

    /// Rebuilds segment `i`'s indexes by validating all of its batches (its file is open).
    /// Sealed segments get their files rewritten; the active one's next checkpoint does that.
    async fn rebuild_indexes(&mut self, i: usize) -> Result<(), EngineError> {
        let sealed = i + 1 < self.segments.len();
        let segment = &mut self.segments[i];
        tracing::warn!(dir = %self.dir.display(), base = segment.base.0, "index files do not verify; rebuilding");
        let (base, size, next) = (segment.base, segment.size_bytes, segment.next_offset);
        let mut scratch = Segment::new(base);
        scratch.may_have_gaps = segment.may_have_gaps;
        scratch.file = segment.file.take();
        scratch.appender = segment.appender.take();
        let scanned = self.scan(&mut scratch, 0, base, size).await;
        let segment = &mut self.segments[i];
        segment.file = scratch.file.take();
        segment.appender = scratch.appender.take();
        let (end, _) = scanned?;
        let offsets_fit = if scratch.may_have_gaps {
            scratch.next_offset <= next
        } else {
            scratch.next_offset == next
        };
        if end != size || !offsets_fit {
            return Err(EngineError::CorruptBatch(format!(
                "segment {} does not verify: ends at {end} of {size} bytes",
                segment.base
            )));
        }
        segment.max_timestamp = scratch.max_timestamp;
        if sealed {
            scratch.seal_time_index();
        }
        segment.index = scratch.index;
        segment.time_index = scratch.time_index;
        segment.bytes_since_index = scratch.bytes_since_index;
        segment.indexes_loaded = true;
        if sealed {
            self.write_indexes(&self.segments[i]).await?;
        }
        Ok(())
    }

    /// Makes the active segment ready for an append: indexes in memory and a write buffer
    /// holding the partial tail block (re-read from disk after an idle release).
    pub(crate) async fn ensure_active_writable(&mut self) -> Result<(), EngineError> {
        let active = self.active();
        let ready = active.appender.is_some() && active.file.is_some() && active.indexes_loaded;
        if ready && !self.dir_entries_unsynced {
            return Ok(());
        }
        // Boxed: every append awaits this, and an unboxed slow path (file opens, index loads)
        // would make each append's future, moved on every call, larger by its whole state.
        Box::pin(self.make_active_writable()).await
    }

    /// [`Self::ensure_active_writable`]'s slow path.
    async fn make_active_writable(&mut self) -> Result<(), EngineError> {
        let last = self.segments.len() - 1;
        self.ensure_open(last).await?;
        if self.dir_entries_unsynced {
            let storage = &*self.storage;
            storage.sync_dir(&self.dir).await?;
            if let Some(parent) = self.dir.parent() {
                storage.sync_dir(parent).await?;
            }
            self.dir_entries_unsynced = false;
        }
        if self.active().appender.is_some() {
            return Ok(());
        }
        let (prealloc, segment_max) = (self.new_prealloc(), self.config.segment_bytes_max);
        let active = self.active_mut();
        let end = active.size_bytes;
        let tail_start = align_down(end);
        let tail = active
            .read_range(tail_start, (end - tail_start) as usize)
            .await?;
        let file = active.file.as_ref().expect("active segment is open");
        let file_bytes = file.size_bytes().await?;
        active.appender = Some(Appender::new(end, &tail, file_bytes, prealloc, segment_max));
        Ok(())
    }

    /// Reopens the active `.log` (read-write) after an idle release closed it.
    pub(crate) async fn reopen_active_file(&mut self) -> Result<(), EngineError> {
        let active = self.active();
        assert!(active.file.is_none() && active.appender.is_none());
        let path = self.dir.join(segment_file_name(active.base, FileKind::Log));
        let file = self.storage.open(&path, OpenMode::ReadWrite).await?;
        self.active_mut().file = Some(file);
        Ok(())
    }

    /// Trims the active `.log` to exactly its batches (as close does, so the next open cuts
    /// nothing), giving its preallocation back to the disk and the shard's budget, drops its
    /// write path and closes it. Everything appended must be flushed.
    pub(crate) async fn release_active_file(&mut self) -> Result<(), EngineError> {
        assert_eq!(self.positions.durable(), self.positions.log_end());
        self.prealloc_step = 0; // idle: the next writes start slow
        let active = self.active_mut();
        let size = active.size_bytes;
        if let Some(appender) = active.appender.take() {
            if appender.allocated_bytes() > size {
                let file = active
                    .file
                    .as_ref()
                    .expect("an appender writes an open file");
                file.truncate(size).await?;
            }
        }
        if let Some(file) = active.file.take() {
            file.close().await?;
        }
        Ok(())
    }

    /// Frees what an idle partition does not need: the batch cache, open sealed files and
    /// their indexes, the active segment's indexes (checkpointed first if more than
    /// [`CLOSE_SCAN_BYTES_MAX`] past the last checkpoint), write buffer,
    /// preallocation and open file. Unflushed appends are flushed first. Everything is
    /// reloaded on the next use; calling it on a busy partition is correct, only slower. The
    /// server calls it after a partition has been idle for a while, or to keep its open files
    /// within a budget.
    pub async fn release_idle_memory(&mut self) -> Result<(), EngineError> {
        self.check_usable()?;
        if self.positions.durable() != self.positions.log_end() {
            self.flush().await?;
        }
        self.cache = BatchCache::new(self.config.batch_cache_bytes_max);
        let sealed = self.segments.len() - 1;
        for segment in &mut self.segments[..sealed] {
            segment.drop_indexes();
            if let Some(file) = segment.file.take() {
                file.close().await?;
            }
        }
        self.open_sealed = std::collections::VecDeque::new();
        let behind = self.past_checkpoint_bytes();
        if self.active().indexes_loaded && behind > CLOSE_SCAN_BYTES_MAX {
            self.write_checkpoint().await?;
        }
        self.release_active_file().await?;
        // Reloaded from the files on the next use: at most CLOSE_SCAN_BYTES_MAX short of what
        // was in memory (a sparser index over that tail, still correct).
        self.active_mut().drop_indexes();
        self.segments.shrink_to_fit();
        self.clean_on_disk = self.past_checkpoint_bytes() == 0;
        Ok(())
    }

    /// Files this log holds open (the active `.log` unless released, and sealed ones being read).
    pub fn open_files(&self) -> usize {
        self.segments.iter().filter(|s| s.file.is_some()).count()
    }

    /// Estimate of the heap this partition holds: indexes, batch cache, write buffer,
    /// producer state and the segment table. An idle partition after
    /// [`Self::release_idle_memory`] holds a few KiB.
    pub fn resident_bytes(&self) -> usize {
        let segments: usize = self
            .segments
            .iter()
            .map(|s| {
                let appender = s
                    .appender
                    .as_ref()
                    .map_or(0, |a| size_of_val(a) + a.resident_bytes());
                s.index_heap_bytes() + s.txn_index.heap_bytes() + appender
            })
            .sum();
        size_of::<Self>()
            + self.segments.capacity() * size_of::<Segment<S::File>>()
            + segments
            + self.cache.heap_bytes()
            + self.producers.heap_bytes()
            + self.open_sealed.capacity() * size_of::<crate::types::Offset>()
            + self.dir.capacity()
    }
}
