//! Opening a partition log: find the segments, trust what was sealed, and recover the active
//! segment by validating batches from its last checkpointed index entry (the log is the truth).
//!
//! Steps:
//! 1. Finish or undo a compaction swap a crash interrupted (see `cleaner/swap.rs`); list the
//!    directory; delete `*.tmp` leftovers and index files without a `.log`.
//! 2. Read the log start checkpoint; delete segments wholly below it.
//! 3. Sealed segments (all but the last) were synced and trimmed when rolled: verify that their
//!    indexes decode (or rebuild them by scanning), keep only a summary (base, next offset,
//!    size, max timestamp); their indexes are loaded again when a read opens the segment.
//! 4. The active segment may hold a torn or corrupt tail. Its `.index`/`.timeindex` are
//!    checkpointed every [`CHECKPOINT_BYTES`](crate::partition_log::CHECKPOINT_BYTES) (or a quarter segment) of flushed log (after the fdatasync, so every
//!    entry points at durable bytes). Recovery loads them and checks that the last entry points
//!    at a batch that validates (length, magic, CRC-32C, the expected baseOffset); entries that
//!    do not (a stale, damaged or truncated index) are dropped, falling back to earlier ones and
//!    at worst to position 0. From there it validates batch by batch to the end, cuts the file
//!    at the first batch that fails (preallocated zeros fail too) and rebuilds the index entries
//!    as it goes. The scan is thus about `CHECKPOINT_BYTES` plus one flush's worth of bytes,
//!    not the whole segment. Time index entries carry the running max timestamp, so the kept
//!    prefix gives the segment's max timestamp up to the resume point.
//! 5. Producer state: load the snapshot (checkpointed with the indexes, so its offset is at or
//!    after the scan start) and apply the scanned batches after its offset; if the snapshot is
//!    older than the scan start, the gap is replayed by reading the log. Batches the snapshot
//!    already covers are never applied again. Aborted transactions: sealed segments keep their
//!    `.txnindex` (only a summary in memory; a file that does not decode forces a replay from
//!    the log start that rebuilds it); the active segment keeps its checkpointed entries below
//!    the replay start and re-derives the others from the markers replayed.
//! 6. If the scan was long (>= the checkpoint interval) or index entries were dropped, the log is
//!    synced and a fresh checkpoint written, so a crash loop does not rescan the same bytes.
//!
//! [`RecoveryStats`] says what happened (bytes scanned, entries dropped), for tests and metrics.

use crate::batch::{validate_prefix, BatchMeta};
use crate::batch_cache::BatchCache;
use crate::config::{FlushPolicy, LogConfig};
use crate::error::EngineError;
use crate::io::{align_down, BlockFile, Clock, OpenMode, Storage};
use crate::partition_log::{PartitionLog, LOG_START_FILE, PRODUCER_SNAPSHOT_FILE};
use crate::positions::Positions;
use crate::prealloc::PreallocBudget;
use crate::producer_state::ProducerState;
use crate::segment::appender::Appender;
use crate::segment::cursor::BatchCursor;
use crate::segment::file_name::{is_leftover, log_bases, segment_file_name, FileKind};
use crate::segment::offset_index::OffsetIndex;
use crate::segment::time_index::TimeIndex;
use crate::segment::txn_index::TxnIndex;
use crate::segment::Segment;
use crate::small_file;
use crate::types::{FilePosition, Offset, RelativeOffset, TimestampMs};
use std::path::PathBuf;
use std::rc::Rc;

/// Batches validated per borrow of the segment during a recovery scan.
const SCAN_BATCHES_PER_STEP: usize = 4096;
/// Read-ahead of recovery scans.
const SCAN_READ_AHEAD_BYTES: usize = 1 << 20;
/// Index entries of the active segment tried (last first) before scanning it from position 0.
const INDEX_ENTRIES_TRIED_MAX: u32 = 64;
/// Read-ahead of the probe that checks one index entry.
const PROBE_READ_AHEAD_BYTES: usize = 64 << 10;

/// What the recovery at open did; see [`PartitionLog::recovery_stats`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// File position in the active segment where the validating scan started.
    pub active_scan_from_bytes: u64,
    /// Bytes of the active segment the scan validated (its end minus where it started).
    pub active_scanned_bytes: u64,
    /// Bytes cut from the end of the active `.log` (torn tail and preallocation).
    pub active_cut_bytes: u64,
    /// Active index entries dropped because the batch they point at did not validate.
    pub index_entries_dropped: u32,
    /// Sealed segments whose indexes were missing or damaged and were rebuilt by a scan.
    pub sealed_indexes_rebuilt: u32,
    /// Bytes of log re-read to replay producer state older than the scan start.
    pub producer_replay_read_bytes: u64,
    /// Whether recovery wrote a fresh index checkpoint (long scan or dropped entries).
    pub checkpoint_written: bool,
    /// Whether the active segment's index files already held every entry the scan found (as a
    /// clean close or an idle release leaves them): nothing to checkpoint.
    pub active_indexes_current: bool,
    /// Whether the producer snapshot was taken at the log end (or the log is empty).
    pub producer_snapshot_current: bool,
}

impl<S: Storage> PartitionLog<S> {
    /// Opens or creates the log in `dir`, recovering it after a crash. Its active segment
    /// preallocates within `prealloc_budget` and its cold reads go through `read_cache`, both
    /// shared by the partitions of one shard.
    pub async fn open(
        storage: Rc<S>,
        dir: PathBuf,
        config: LogConfig,
        clock: Rc<dyn Clock>,
        prealloc_budget: Rc<PreallocBudget>,
        read_cache: Rc<crate::read_cache::ReadCache>,
    ) -> Result<Self, EngineError> {
        config.validate().map_err(EngineError::InvalidConfig)?;
        if let Some(parent) = dir.parent() {
            storage.create_dir_all(parent).await?;
        }
        // Not durable yet: see `dir_entries_unsynced`.
        storage.create_dir(&dir).await?;
        let hw_follows_durable = config.flush == FlushPolicy::EveryAppend;
        let now = clock.now();
        let mut log = PartitionLog {
            storage,
            dir,
            cache: BatchCache::new(config.batch_cache_bytes_max),
            config,
            clock,
            segments: Vec::new(),
            positions: Positions::recovered(Offset(0), Offset(0), hw_follows_durable),
            producers: ProducerState::default(),
            unflushed_messages: 0,
            last_flush_ms: now,
            failed: false,
            open_sealed: std::collections::VecDeque::new(),
            checkpointed_bytes: 0,
            recovery_stats: RecoveryStats::default(),
            prealloc_budget,
            prealloc_step: 0,
            clean_on_disk: false,
            dir_entries_unsynced: false,
            unstable_markers: std::collections::VecDeque::new(),
            read_cache_log: read_cache.register(),
            read_cache,
            last_read_end: None,
            read_ahead_held: false,
            epochs: crate::leader_epochs::LeaderEpochs::default(),
            stamp_epoch: None,
            producers_evicted: 0,
            remote_copied_until: None,
        };
        let (bases, checkpoint) = log.clean_directory().await?;
        let tail = log
            .load_segments(&bases, checkpoint.unwrap_or(Offset(0)))
            .await?;
        let log_end = log.active().next_offset;
        let log_start = checkpoint
            .unwrap_or(Offset(0))
            .max(log.segments[0].base)
            .min(log_end);
        if checkpoint.is_some_and(|cp| cp > log_end) {
            // DeleteRecords past what survived (interval flush policy): the start follows the end.
            let bytes = small_file::encode_log_start(log_start.0);
            small_file::write_atomic(&*log.storage, &log.dir, LOG_START_FILE, &bytes).await?;
        }
        log.positions = Positions::recovered(log_start, log_end, hw_follows_durable);
        log.load_leader_epochs().await?;
        log.recover_producers(tail).await?;
        log.refresh_last_stable();
        log.checkpoint_after_recovery().await?;
        log.dir_entries_unsynced = log.segments.len() == 1 && log.active().size_bytes == 0;
        let stats = log.recovery_stats;
        if stats.checkpoint_written
            || (stats.active_indexes_current && stats.producer_snapshot_current)
        {
            // The files are as close would leave them: an idle release or a close has
            // nothing to write for this log until it changes.
            log.checkpointed_bytes = log.active().size_bytes;
            log.clean_on_disk = true;
        }
        tracing::debug!(dir = %log.dir.display(), log_start = log_start.0, log_end = log_end.0, segments = log.segments.len(), "opened partition log");
        Ok(log)
    }

    /// Deletes leftovers and segments below the checkpoint; returns the segment bases and checkpoint.
    async fn clean_directory(&self) -> Result<(Vec<Offset>, Option<Offset>), EngineError> {
        self.recover_interrupted_swap().await?;
        let names = self.storage.list_dir(&self.dir).await?;
        let mut bases = log_bases(&names);
        for name in &names {
            if is_leftover(name, &bases) {
                self.storage.remove_file(&self.dir.join(name)).await?;
            }
        }
        let bytes = small_file::read_whole(&*self.storage, &self.dir.join(LOG_START_FILE)).await?;
        let checkpoint = bytes
            .and_then(|b| small_file::decode_log_start(&b))
            .map(Offset);
        while let (Some(cp), true) = (checkpoint, bases.len() > 1) {
            if bases[1] > cp {
                break;
            }
            self.remove_segment_files(bases.remove(0)).await?;
        }
        Ok((bases, checkpoint))
    }

    /// Removes the files of the segment at `base` (`.log` first: orphans are cleaned on open).
    pub(crate) async fn remove_segment_files(&self, base: Offset) -> Result<(), EngineError> {
        for kind in FileKind::ALL {
            let path = self.dir.join(segment_file_name(base, kind));
            if self.storage.exists(&path).await? {
                self.storage.remove_file(&path).await?;
            }
        }
        Ok(())
    }

    /// Loads sealed segments and recovers the active one (creating it for a new log).
    async fn load_segments(
        &mut self,
        bases: &[Offset],
        checkpoint: Offset,
    ) -> Result<ScannedTail, EngineError> {
        let Some((&active_base, sealed)) = bases.split_last() else {
            let segment = self
                .create_segment(checkpoint, OpenMode::CreateReadWriteUnsynced)
                .await?;
            self.segments.push(segment);
            self.recovery_stats.active_indexes_current = true; // empty, exact
            return Ok(ScannedTail {
                from: checkpoint,
                producer_batches: Vec::new(),
                damaged_txn_indexes: Vec::new(),
            });
        };
        let mut damaged_txn_indexes = Vec::new();
        for (i, &base) in sealed.iter().enumerate() {
            let mut segment = self.load_sealed(base, bases[i + 1]).await?;
            match self.read_txn_summary(base, bases[i + 1]).await? {
                Some(min) => segment.txn_first_offset_min = min,
                None => damaged_txn_indexes.push(base),
            }
            self.segments.push(segment);
        }
        let (active, mut tail) = self.recover_active(active_base).await?;
        self.segments.push(active);
        tail.damaged_txn_indexes = damaged_txn_indexes;
        Ok(tail)
    }

    /// A sealed segment's summary: sizes from the file, max timestamp from its time index
    /// (rebuilt by a scan if the indexes are missing or damaged). Indexes and file are not kept.
    async fn load_sealed(
        &mut self,
        base: Offset,
        next_base: Offset,
    ) -> Result<Segment<S::File>, EngineError> {
        let path = self.dir.join(segment_file_name(base, FileKind::Log));
        let file = self.storage.open(&path, OpenMode::Read).await?;
        let size = file.size_bytes().await?;
        let mut segment = Segment::new(base);
        segment.may_have_gaps = true; // compaction may have rewritten any sealed segment
        if size == 0 {
            // Emptied by compaction: no batch, no index entry, the range still its own.
            segment.next_offset = next_base;
            segment.drop_indexes();
            file.close().await?;
            return Ok(segment);
        }
        let loaded = self
            .read_index_files(base, size, (next_base.0 - base.0) as u64)
            .await?
            .filter(|(index, time_index)| !index.is_empty() && !time_index.is_empty());
        if let Some((_, time_index)) = loaded {
            segment.max_timestamp = time_index.last().expect("non-empty").0;
            (segment.size_bytes, segment.next_offset) = (size, next_base);
            segment.drop_indexes();
            file.close().await?;
            return Ok(segment);
        }
        tracing::warn!(dir = %self.dir.display(), base = base.0, "rebuilding indexes of a sealed segment");
        self.recovery_stats.sealed_indexes_rebuilt += 1;
        segment.file = Some(file);
        let (end, _) = self.scan(&mut segment, 0, base, size).await?;
        if end != size || segment.next_offset > next_base {
            return Err(EngineError::Layout(format!(
                "sealed segment {base} does not verify: ends at {end} of {size} bytes, offset {}",
                segment.next_offset
            )));
        }
        segment.next_offset = next_base; // batches compaction removed may end it early
        segment.seal_time_index();
        self.write_indexes(&segment).await?;
        segment.drop_indexes();
        segment.file.take().expect("opened above").close().await?;
        Ok(segment)
    }

    /// Reads and decodes the two index files of a segment; `None` if either is missing or
    /// malformed (entries past `log_bytes` / `offsets`, not increasing).
    pub(crate) async fn read_index_files(
        &self,
        base: Offset,
        log_bytes: u64,
        offsets: u64,
    ) -> Result<Option<(OffsetIndex, TimeIndex)>, EngineError> {
        let storage = &*self.storage;
        let index = small_file::read_whole(
            storage,
            &self.dir.join(segment_file_name(base, FileKind::Index)),
        )
        .await?;
        let time = small_file::read_whole(
            storage,
            &self.dir.join(segment_file_name(base, FileKind::TimeIndex)),
        )
        .await?;
        let index = index.and_then(|b| OffsetIndex::decode(&b, log_bytes));
        let time = time.and_then(|b| TimeIndex::decode(&b, offsets));
        Ok(index.zip(time))
    }

    /// The active segment: resume from its last index entry that validates, validate to the
    /// end, cut the rest.
    async fn recover_active(
        &mut self,
        base: Offset,
    ) -> Result<(Segment<S::File>, ScannedTail), EngineError> {
        let path = self.dir.join(segment_file_name(base, FileKind::Log));
        let file = self.storage.open(&path, OpenMode::ReadWrite).await?;
        let file_bytes = file.size_bytes().await?;
        let (mut index, mut time_index) = self
            .read_index_files(base, u64::MAX, u64::from(u32::MAX) + 1)
            .await?
            .unwrap_or_default();
        // Entries past the end of the file point at nothing: drop them without reading.
        let listed = index.len();
        index.truncate_from_position(FilePosition(u32::try_from(file_bytes).unwrap_or(u32::MAX)));
        let mut dropped = (listed - index.len()) as u32;
        let mut probes_failed = 0;
        let mut segment = Segment::new(base);
        segment.file = Some(file);
        let (rel, pos) = loop {
            let (rel, pos) = index.last().unwrap_or((RelativeOffset(0), FilePosition(0)));
            let (pos_bytes, expected) = (u64::from(pos.0), rel.absolute(base));
            if index.is_empty()
                || batch_verifies(&mut segment, pos_bytes, expected, file_bytes).await?
            {
                break (rel, pos_bytes);
            }
            index.pop();
            dropped += 1;
            probes_failed += 1;
            if probes_failed >= INDEX_ENTRIES_TRIED_MAX {
                // Too many bad entries: trust none of the file.
                index = OffsetIndex::default();
            }
        };
        if dropped > 0 {
            tracing::warn!(dir = %self.dir.display(), base = base.0, dropped, "active index entries did not verify; dropped");
        }
        install_resume_point(&mut segment, index, &mut time_index, rel, pos);
        segment.txn_index = self.read_active_txn_index(base).await?;
        segment.time_index = time_index;
        let expected = segment.next_offset;
        let (end, batches) = self.scan(&mut segment, pos, expected, file_bytes).await?;
        // The scan re-adds the entry it resumed from; any further one is news to the files.
        self.recovery_stats.active_indexes_current = dropped == 0 && segment.index.len() == listed;
        self.recovery_stats.active_scan_from_bytes = pos;
        self.recovery_stats.active_scanned_bytes = end - pos;
        self.recovery_stats.active_cut_bytes = file_bytes - end;
        self.recovery_stats.index_entries_dropped = dropped;
        let tail = ScannedTail {
            from: expected,
            producer_batches: batches,
            damaged_txn_indexes: Vec::new(),
        };
        Ok((self.cut_and_resume(segment, end, file_bytes).await?, tail))
    }

    /// Cuts the file at `end` (torn tail, preallocation) and attaches an appender.
    async fn cut_and_resume(
        &self,
        mut segment: Segment<S::File>,
        end: u64,
        file_bytes: u64,
    ) -> Result<Segment<S::File>, EngineError> {
        assert_eq!(segment.size_bytes, end);
        let file = segment.file.as_ref().expect("active segment is open");
        if end != file_bytes {
            tracing::info!(dir = %self.dir.display(), base = segment.base.0, end, file_bytes, "cut log tail");
            file.truncate(end).await?;
            file.sync().await?;
        }
        let tail_start = align_down(end);
        let tail = segment
            .read_range(tail_start, (end - tail_start) as usize)
            .await?;
        let appender = Appender::new(
            end,
            &tail,
            end,
            self.new_prealloc(),
            self.config.segment_bytes_max,
        );
        segment.appender = Some(appender);
        Ok(segment)
    }

    /// Validates batches from `pos` (whose baseOffset must be `expected`) up to `file_bytes`,
    /// noting each in the segment; returns where the valid batches end. I/O errors propagate.
    pub(crate) async fn scan(
        &self,
        segment: &mut Segment<S::File>,
        pos: u64,
        expected: Offset,
        file_bytes: u64,
    ) -> Result<(u64, Vec<BatchMeta>), EngineError> {
        assert_eq!(segment.size_bytes, pos);
        assert_eq!(segment.next_offset, expected);
        let mut producer_batches = Vec::new();
        loop {
            let (metas, done) = scan_step(segment, file_bytes).await?;
            for meta in &metas {
                segment.note_batch(meta, self.config.index_interval_bytes);
            }
            producer_batches.extend(metas.into_iter().filter(|m| m.producer_id.is_some()));
            if done {
                return Ok((segment.size_bytes, producer_batches));
            }
        }
    }

    /// Producer state from the snapshot, plus batches after it replayed from the log.
    /// Batches between the snapshot and the scanned tail are replayed by reading the log; the
    /// tail's producer batches were collected by the recovery scan, so the common case (a
    /// checkpointed snapshot at or after the scan start) reads nothing twice. Batches at or
    /// before the snapshot offset are skipped: applying them again could regress the state.
    ///
    /// Aborted transactions: the active segment keeps its checkpointed `.txnindex` entries
    /// below the replay start and gets the rest from the markers replayed. A sealed `.txnindex`
    /// that did not decode forces a replay from the log start, which rebuilds it.
    async fn recover_producers(&mut self, tail: ScannedTail) -> Result<(), EngineError> {
        let path = self.dir.join(PRODUCER_SNAPSHOT_FILE);
        let bytes = small_file::read_whole(&*self.storage, &path).await?;
        let (log_start, log_end) = (self.positions.log_start(), self.positions.log_end());
        let rebuild_sealed = !tail.damaged_txn_indexes.is_empty();
        let snapshot = bytes
            .and_then(|b| ProducerState::decode(&b))
            .filter(|(o, _)| *o >= log_start && *o <= log_end && !rebuild_sealed);
        let from = snapshot.as_ref().map_or(log_start, |(o, _)| *o);
        self.recovery_stats.producer_snapshot_current = from == log_end;
        self.producers = snapshot.map(|(_, s)| s).unwrap_or_default();
        let active_base = self.active().base;
        let mut derived = DerivedAborts {
            active_from: from.max(active_base),
            sealed: tail
                .damaged_txn_indexes
                .iter()
                .map(|&b| (b, TxnIndex::default()))
                .collect(),
        };
        self.active_mut()
            .txn_index
            .truncate_from(derived.active_from);
        self.replay_producers(from, tail.from.min(log_end), &mut derived)
            .await?;
        // A snapshot offset is a batch boundary; a log start may fall inside a batch, which
        // is then still partly in the log and counts.
        for meta in tail
            .producer_batches
            .iter()
            .filter(|m| m.last_offset >= from)
        {
            self.record_replayed(meta, &mut derived);
        }
        let active = self.active_mut();
        active.txn_first_offset_min = active.txn_index.first_offset_min();
        self.write_rebuilt_txn_indexes(derived.sealed).await
    }

    /// Records the producer batches with base offsets in `[from, until)` by reading the log.
    async fn replay_producers(
        &mut self,
        mut from: Offset,
        until: Offset,
        derived: &mut DerivedAborts,
    ) -> Result<(), EngineError> {
        while from < until {
            let read = self.read(from, 1 << 20).await?;
            if read.chunks.is_empty() {
                break;
            }
            self.recovery_stats.producer_replay_read_bytes += read.bytes_len() as u64;
            // A chunk holds whole batches back to back.
            for chunk in &read.chunks {
                let mut rest = &chunk[..];
                while !rest.is_empty() {
                    let meta = validate_prefix(rest)?;
                    if meta.base_offset < until && meta.producer_id.is_some() {
                        self.record_replayed(&meta, derived);
                    }
                    from = meta.last_offset.plus(1);
                    rest = &rest[meta.total_bytes..];
                }
            }
        }
        Ok(())
    }

    /// Records one replayed batch; an abort it completes goes to the `.txnindex` being derived
    /// for its segment (the active one from `active_from` on, or a damaged sealed one).
    fn record_replayed(&mut self, meta: &BatchMeta, derived: &mut DerivedAborts) {
        let Some(done) = self.producers.record(meta) else {
            return;
        };
        if !done.aborted {
            return;
        }
        let entry = self.aborted_entry(&done);
        let i = self.segment_index_for(done.last_offset);
        let base = self.segments[i].base;
        if i + 1 == self.segments.len() {
            if done.last_offset >= derived.active_from {
                self.active_mut().txn_index.push(entry);
            }
        } else if let Some((_, index)) = derived.sealed.iter_mut().find(|(b, _)| *b == base) {
            index.push(entry);
        }
    }

    /// Rewrites the sealed `.txnindex` files rebuilt by a replay from the log start.
    async fn write_rebuilt_txn_indexes(
        &mut self,
        rebuilt: Vec<(Offset, TxnIndex)>,
    ) -> Result<(), EngineError> {
        for (base, index) in rebuilt {
            let i = self.segment_index_for(base);
            assert_eq!(self.segments[i].base, base);
            tracing::warn!(dir = %self.dir.display(), base = base.0, entries = index.entries().len(), "rebuilt a damaged .txnindex");
            self.segments[i].txn_first_offset_min = index.first_offset_min();
            self.segments[i].txn_index = index;
            self.write_txn_index(&self.segments[i]).await?;
            self.segments[i].txn_index = TxnIndex::default();
        }
        Ok(())
    }

    /// A sealed segment's aborted-transaction summary from its `.txnindex`: `Some(None)` when it
    /// has none, `None` when the file is there but does not decode (damaged).
    async fn read_txn_summary(
        &self,
        base: Offset,
        next: Offset,
    ) -> Result<Option<Option<Offset>>, EngineError> {
        let path = self.dir.join(segment_file_name(base, FileKind::TxnIndex));
        let Some(bytes) = small_file::read_whole(&*self.storage, &path).await? else {
            return Ok(Some(None));
        };
        let decoded = TxnIndex::decode(&bytes, base, next);
        if decoded.is_none() {
            tracing::warn!(dir = %self.dir.display(), base = base.0, "a .txnindex does not decode; rebuilding it from the log");
        }
        Ok(decoded.map(|index| index.first_offset_min()))
    }

    /// The active segment's checkpointed aborted transactions (empty when missing or damaged:
    /// recovery then re-derives them from the log).
    async fn read_active_txn_index(&self, base: Offset) -> Result<TxnIndex, EngineError> {
        let path = self.dir.join(segment_file_name(base, FileKind::TxnIndex));
        let bytes = small_file::read_whole(&*self.storage, &path).await?;
        Ok(bytes
            .and_then(|b| TxnIndex::decode(&b, base, Offset(i64::MAX)))
            .unwrap_or_default())
    }
}

impl<S: Storage> PartitionLog<S> {
    /// After a long scan or dropped index entries, makes the recovered bytes durable and
    /// checkpoints the active indexes and producer state, so the next crash scans little.
    async fn checkpoint_after_recovery(&mut self) -> Result<(), EngineError> {
        let stats = self.recovery_stats;
        self.checkpointed_bytes = stats.active_scan_from_bytes;
        let long = stats.active_scanned_bytes >= self.checkpoint_bytes();
        if !long && stats.index_entries_dropped == 0 {
            return Ok(());
        }
        let active = self.active();
        active
            .file
            .as_ref()
            .expect("active segment is open")
            .sync()
            .await?;
        self.write_checkpoint().await?;
        self.recovery_stats.checkpoint_written = true;
        Ok(())
    }

    /// What the recovery at open did: where the active segment's scan started, how many bytes
    /// it validated, index entries dropped, sealed indexes rebuilt.
    pub fn recovery_stats(&self) -> RecoveryStats {
        self.recovery_stats
    }
}

/// What the recovery scan of the active segment saw: where it started and the idempotent
/// producers' batches from there to the end; and the sealed segments whose `.txnindex` is damaged.
struct ScannedTail {
    from: Offset,
    producer_batches: Vec<BatchMeta>,
    damaged_txn_indexes: Vec<Offset>,
}

/// Aborted transactions being re-derived by a producer-state replay.
struct DerivedAborts {
    /// Markers of the active segment at or after this offset are re-derived (the checkpointed
    /// entries below it are kept).
    active_from: Offset,
    /// Damaged sealed `.txnindex` files being rebuilt, by segment base.
    sealed: Vec<(Offset, TxnIndex)>,
}

/// Sets the segment up to scan from the batch at `pos` (offset `base + rel`): the offset
/// index keeps the entries before it (the scan re-adds the entry for `pos`), the time index
/// those at or before it, whose last timestamp is the running max up to that batch.
fn install_resume_point<F: BlockFile>(
    segment: &mut Segment<F>,
    mut index: OffsetIndex,
    time_index: &mut TimeIndex,
    rel: RelativeOffset,
    pos: u64,
) {
    if index.is_empty() {
        // Scanning the whole segment: nothing from the index files is trusted.
        *time_index = TimeIndex::default();
    } else {
        assert_eq!(index.last().map(|(_, p)| u64::from(p.0)), Some(pos));
        index.pop();
        time_index.truncate_from(RelativeOffset(rel.0 + 1));
        // The scan adds an entry at `pos` whatever the bytes since the previous one.
        segment.bytes_since_index = u64::MAX / 2;
    }
    segment.max_timestamp = time_index.last().map_or(TimestampMs::NONE, |(ts, _)| ts);
    segment.index = index;
    segment.size_bytes = pos;
    segment.next_offset = rel.absolute(segment.base);
}

/// Whether a whole valid batch with baseOffset `expected` starts at `pos` (read past the
/// segment's known end up to `file_bytes`). I/O errors propagate.
async fn batch_verifies<F: BlockFile>(
    segment: &mut Segment<F>,
    pos: u64,
    expected: Offset,
    file_bytes: u64,
) -> Result<bool, EngineError> {
    let known = segment.size_bytes;
    segment.size_bytes = file_bytes;
    let found = BatchCursor::new(segment, pos, expected, PROBE_READ_AHEAD_BYTES)
        .next()
        .await;
    segment.size_bytes = known;
    match found {
        Ok(found) => Ok(found.is_some()),
        Err(EngineError::CorruptBatch(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Validates up to [`SCAN_BATCHES_PER_STEP`] batches after the segment's current end.
/// Returns them and whether the scan is done (end of file or first invalid batch).
async fn scan_step<F: BlockFile>(
    segment: &mut Segment<F>,
    file_bytes: u64,
) -> Result<(Vec<BatchMeta>, bool), EngineError> {
    let (pos, expected) = (segment.size_bytes, segment.next_offset);
    segment.size_bytes = file_bytes; // let the cursor read past the known end
    let mut metas = Vec::new();
    let mut cursor = BatchCursor::new(segment, pos, expected, SCAN_READ_AHEAD_BYTES);
    let done = loop {
        if metas.len() == SCAN_BATCHES_PER_STEP {
            break false;
        }
        match cursor.next().await {
            Ok(Some((meta, _))) => metas.push(meta),
            Ok(None) | Err(EngineError::CorruptBatch(_)) => break true,
            Err(e) => {
                segment.size_bytes = pos;
                return Err(e);
            }
        }
    };
    segment.size_bytes = pos;
    Ok((metas, done))
}
