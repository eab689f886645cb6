//! [`PartitionLog`]: the durable, segmented log of one partition (append, flush, read).
//!
//! Segments are kept in a `Vec` sorted by base offset; the last one is the *active* segment,
//! the only one written. Opening and recovery live in `recovery.rs`, retention and
//! DeleteRecords in `retention.rs`, index checkpoints and memory release in
//! `index_lifecycle.rs`.
//!
//! Failure model: any write or sync error leaves the in-memory state ahead of the disk, so the
//! log marks itself failed and refuses every operation with [`EngineError::Failed`] until it is
//! reopened (recovery then finds the truth on disk). Read errors fail only that read.

use crate::batch::{self, BatchMeta, ValidatedBatch};
use crate::batch_cache::BatchCache;
use crate::config::{FlushPolicy, LogConfig};
use crate::error::EngineError;
use crate::io::{BlockFile, Clock, OpenMode, Storage};
use crate::positions::Positions;
use crate::prealloc::{Prealloc, PreallocBudget};
use crate::producer_state::ProducerState;
use crate::read_cache::{LogId, ReadCache};
use crate::segment::appender::Appender;
use crate::segment::cursor::BatchCursor;
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::segment::Segment;
use crate::small_file;
use crate::types::{Offset, RelativeOffset, TimestampMs};
use bytes::Bytes;
use std::path::PathBuf;
use std::rc::Rc;

/// File holding the idempotent-producer snapshot.
pub const PRODUCER_SNAPSHOT_FILE: &str = "producer.snapshot";
/// File holding the log start offset after DeleteRecords.
pub const LOG_START_FILE: &str = "log-start-offset";
/// Sealed segment files kept open at once per partition; older ones are closed and reopened on
/// demand, so open files stay bounded however long the log grows.
pub const OPEN_SEALED_FILES_MAX: usize = 4;
/// Flushed bytes of the active segment after which its `.index`/`.timeindex` and the producer
/// snapshot are checkpointed to disk (after the flush's fdatasync, so every entry points at
/// durable bytes); a quarter of the segment if that is less (see [`PartitionLog::checkpoint_bytes`]).
/// Bounds the crash-recovery scan to about this much plus one flush's worth. A checkpoint
/// rewrites both indexes and the snapshot with 3 atomic replacements (~9 fsyncs) and, at the
/// end of a 1 GiB segment, ~5 MiB: too frequent, it shows in sustained appends (the figures,
/// of both the scan and the checkpoint cost, are in `BENCHMARKS.md`, "Storage engine").
pub const CHECKPOINT_BYTES: u64 = 256 << 20;
/// A close or idle release leaves at most this much of the active segment past its on-disk
/// checkpoint for the next open to validate (well under a millisecond) instead of rewriting
/// its indexes and the producer snapshot (9 fsyncs: 10,000 partitions written once took over
/// a minute to shut down that way).
pub const CLOSE_SCAN_BYTES_MAX: u64 = 64 << 10;
/// Largest read-ahead of a disk read.
const READ_AHEAD_BYTES_MAX: usize = 8 << 20;

/// What an append did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset assigned to the batch's first record.
    pub base_offset: Offset,
    /// Offset of the batch's last record.
    pub last_offset: Offset,
    /// Broker append time for LogAppendTime topics; `TimestampMs::NONE` (CreateTime).
    pub log_append_time: TimestampMs,
    /// The log start offset after the append.
    pub log_start_offset: Offset,
}

/// Whole batches read from the log.
#[derive(Clone, Debug, Default)]
pub struct ReadBatches {
    /// Whole v2 record batches, in offset order, ready to be sent as they are.
    pub chunks: Vec<Bytes>,
    /// High watermark when the read was served.
    pub high_watermark: Offset,
    /// Log start offset when the read was served.
    pub log_start_offset: Offset,
}

impl ReadBatches {
    /// Total bytes of all chunks.
    pub fn bytes_len(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum()
    }
}

/// The durable, segmented log of one partition. Owned by one core; futures are `!Send`.
pub struct PartitionLog<S: Storage> {
    pub(crate) storage: Rc<S>,
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    pub(crate) clock: Rc<dyn Clock>,
    pub(crate) segments: Vec<Segment<S::File>>,
    pub(crate) positions: Positions,
    pub(crate) cache: BatchCache,
    pub(crate) producers: ProducerState,
    pub(crate) unflushed_messages: u64,
    pub(crate) last_flush_ms: TimestampMs,
    pub(crate) failed: bool,
    /// Base offsets of sealed segments with an open file, least recently opened first.
    pub(crate) open_sealed: std::collections::VecDeque<Offset>,
    /// Bytes of the active segment covered by its last on-disk index checkpoint.
    pub(crate) checkpointed_bytes: u64,
    /// What the recovery at open did (how much it scanned, what it dropped).
    pub(crate) recovery_stats: crate::recovery::RecoveryStats,
    /// The shard's bound on bytes allocated ahead of the data.
    pub(crate) prealloc_budget: Rc<PreallocBudget>,
    /// Preallocation step the next active segment starts from (the sealed one's).
    pub(crate) prealloc_step: u64,
    /// The files already say what [`Self::close`] would make them say: every batch flushed,
    /// the active `.log` trimmed to its data, its indexes and the producer snapshot as of the
    /// log end. Set by an open that found them so and by an idle release; cleared before any
    /// write. `close` then only closes files (10,000 idle partitions shut down in no time).
    pub(crate) clean_on_disk: bool,
    /// The log opened empty: its directory and `.log` may have been created (now or by an
    /// earlier process) without syncing their entries, which costs two fsyncs a partition.
    /// They are synced before the first write, so a partition that is never written never
    /// pays them, and any byte in its file has a durable path.
    pub(crate) dir_entries_unsynced: bool,
    /// Transactions closed by a marker at or above the high watermark, as (marker offset,
    /// first offset): the last stable offset stays at their first offset until the high
    /// watermark passes the marker (see `transactions.rs`).
    pub(crate) unstable_markers: std::collections::VecDeque<(Offset, Offset)>,
    /// The core's cache of cold extents (shared with its other logs) and this log's id in it.
    pub(crate) read_cache: Rc<ReadCache>,
    pub(crate) read_cache_log: LogId,
    /// One past the last offset the previous read returned: a read from here is sequential.
    pub(crate) last_read_end: Option<Offset>,
    /// Whether reads load only what they ask for, no read-ahead (see
    /// [`PartitionLog::hold_read_ahead`]).
    pub(crate) read_ahead_held: bool,
    /// Which leader epoch wrote which offsets (`leader-epoch-checkpoint`, see `leader_epochs.rs`).
    pub(crate) epochs: crate::leader_epochs::LeaderEpochs,
    /// The epoch this replica leads at: appends are stamped with it (`None`: appends keep the
    /// epoch the batch carries, as a single node and a follower do).
    pub(crate) stamp_epoch: Option<rill_types::LeaderEpoch>,
    /// Producers forgotten to stay within `producers_max` since the last
    /// [`Self::take_producers_evicted`].
    pub(crate) producers_evicted: u64,
    /// Tiered storage's gate on local retention (see `tiering.rs`): `Some(o)` deletes only
    /// segments below `o`, the end of what the remote tier holds durably.
    pub(crate) remote_copied_until: Option<Offset>,
}

impl<S: Storage> Drop for PartitionLog<S> {
    /// The cached extents of a closed (or failed and replaced) log are of no use to anyone.
    fn drop(&mut self) {
        self.read_cache.forget_log(self.read_cache_log);
    }
}

impl<S: Storage> PartitionLog<S> {
    /// Appends one v2 record batch, assigning offsets by rewriting its baseOffset only.
    /// The batch was checked where it entered the broker ([`ValidatedBatch`]); it is not checked
    /// again. The bytes are buffered; call [`Self::flush`] to make them durable (group commit).
    /// Control batches are refused: only [`Self::append_marker`] writes them.
    pub async fn append(
        &mut self,
        batch: ValidatedBatch,
        now: TimestampMs,
    ) -> Result<AppendInfo, EngineError> {
        self.check_usable()?;
        let sent = batch::meta_of_validated(&batch)?;
        if sent.control.is_some() {
            return Err(EngineError::InvalidRecord(
                "control batches are written by the broker only".into(),
            ));
        }
        self.producers.check(&sent)?;
        self.append_checked(batch, sent, now).await
    }

    /// Appends a batch whose producer checks passed (`sent` is its header as sent).
    pub(crate) async fn append_checked(
        &mut self,
        mut batch: ValidatedBatch,
        sent: BatchMeta,
        now: TimestampMs,
    ) -> Result<AppendInfo, EngineError> {
        self.clean_on_disk = false;
        if let Err(e) = self.ensure_active_writable().await {
            self.failed = true;
            return Err(e);
        }
        self.maybe_roll(batch.len(), now).await?;
        let base = self.positions.log_end();
        batch.set_base_offset(base);
        // A follower keeps the leader's bytes: its append time and epoch were set there.
        let follower = self.positions.is_replicated() && self.stamp_epoch.is_none();
        let log_append_time = if self.config.log_append_time && sent.control.is_none() && !follower
        {
            batch.set_log_append_time(now);
            now
        } else {
            TimestampMs::NONE
        };
        if let Some(epoch) = self.stamp_epoch {
            batch.set_leader_epoch(epoch);
        }
        self.note_epoch(batch.header().leader_epoch(), base).await?;
        let delta = sent.last_offset.0 - sent.base_offset.0;
        let meta = BatchMeta {
            base_offset: base,
            last_offset: base.plus(delta),
            max_timestamp: if log_append_time == TimestampMs::NONE {
                sent.max_timestamp
            } else {
                log_append_time
            },
            ..sent
        };
        let held = batch.held_bytes();
        let bytes = batch.freeze();
        if let Err(e) = self.write_to_active(&meta, &bytes, now).await {
            self.failed = true;
            return Err(e);
        }
        if let Some(completed) = self.producers.record(&meta) {
            self.note_completed_txn(completed);
        }
        let evicted = self.producers.evict_over(self.config.producers_max);
        self.producers_evicted += evicted as u64;
        // Batches leaving the tail cache stay readable from memory (write-through, no copy).
        let (read_cache, log) = (&self.read_cache, self.read_cache_log);
        let demote = |base, last, bytes, held| {
            read_cache.insert_written(log, (base, last), bytes, held);
        };
        let span = (meta.base_offset, meta.last_offset);
        self.cache.push(span, bytes, held, demote);
        self.positions.appended(meta.last_offset.plus(1));
        self.refresh_last_stable();
        self.unflushed_messages += (delta + 1) as u64;
        let log_start_offset = self.positions.log_start();
        Ok(AppendInfo {
            base_offset: meta.base_offset,
            last_offset: meta.last_offset,
            log_append_time,
            log_start_offset,
        })
    }

    /// Puts a batch into the active segment's buffer, writing full blocks out when it is large.
    async fn write_to_active(
        &mut self,
        meta: &BatchMeta,
        bytes: &[u8],
        now: TimestampMs,
    ) -> Result<(), EngineError> {
        let interval = self.config.index_interval_bytes;
        let active = self.active_mut();
        active.note_batch(meta, interval);
        active.first_append_ms.get_or_insert(now);
        let appender = active
            .appender
            .as_mut()
            .expect("active segment has an appender");
        let file = active.file.as_ref().expect("active segment is open");
        appender
            .append(file, bytes)
            .await
            .map_err(EngineError::from_io)?;
        assert_eq!(
            appender.end(),
            active.size_bytes,
            "appender and segment agree on the end"
        );
        Ok(())
    }

    /// Rolls to a new segment if this batch would overflow the active one or it is too old.
    async fn maybe_roll(
        &mut self,
        batch_bytes: usize,
        now: TimestampMs,
    ) -> Result<(), EngineError> {
        let active = self.active();
        if active.is_empty() {
            return Ok(());
        }
        let by_size = active.size_bytes + batch_bytes as u64 > self.config.segment_bytes_max;
        let age_ms = active
            .first_append_ms
            .map_or(0, |t| now.0.saturating_sub(t.0));
        let jitter_ms = segment_jitter_ms(active.base, self.config.segment_jitter_ms);
        let by_age = self
            .config
            .segment_ms_max
            .is_some_and(|max| age_ms >= max.saturating_sub(jitter_ms) as i64);
        let by_offsets = self.positions.log_end().0 - active.base.0 > i64::from(i32::MAX);
        // A full offset index rolls too (Kafka's `segment.index.bytes`): 8 bytes per entry.
        let by_index = (active.index.len() as u64 + 1) * 8 > self.config.index_bytes_max;
        if by_size || by_age || by_offsets || by_index {
            // Boxed: a roll is rare, and its state would otherwise be part of every append's future.
            let rolled = Box::pin(self.roll()).await;
            self.failed |= rolled.is_err();
            rolled?;
        }
        Ok(())
    }

    /// Seals the active segment (flushed, trimmed, indexes written) and starts a new one.
    pub(crate) async fn roll(&mut self) -> Result<(), EngineError> {
        let next = self.positions.log_end();
        self.roll_at(next).await
    }

    /// [`Self::roll`] with the new segment starting at `next` (at or past the log end): a
    /// follower copying a batch past its log end (a gap the leader's compaction left) starts a
    /// segment at it, as recovery finds a sealed segment's offsets end at the next one's base.
    pub(crate) async fn roll_at(&mut self, next: Offset) -> Result<(), EngineError> {
        assert!(
            next >= self.positions.log_end(),
            "a segment starts at or past the log end"
        );
        self.flush_inner().await?;
        self.seal_active().await?;
        self.active_mut().next_offset = next;
        self.write_producer_snapshot(next).await?;
        let segment = self.create_segment(next, OpenMode::CreateReadWrite).await?;
        self.segments.push(segment);
        self.checkpointed_bytes = 0;
        tracing::debug!(dir = %self.dir.display(), base = next.0, "rolled segment");
        Ok(())
    }

    /// Trims the active `.log` to its batches, writes its indexes and `.txnindex`, and closes
    /// it; the aborted transactions stay on disk only (the summary stays in memory).
    async fn seal_active(&mut self) -> Result<(), EngineError> {
        let active = self.segments.last_mut().expect("at least one segment");
        active.seal_time_index();
        if let Some(appender) = active.appender.take() {
            self.prealloc_step = appender.prealloc().step();
        }
        let file = active.file.take().expect("active segment is open");
        file.truncate(active.size_bytes).await?;
        file.sync().await?;
        file.close().await?;
        self.write_indexes(self.active()).await?;
        self.write_txn_index(self.active()).await?;
        let active = self.active_mut();
        assert_eq!(
            active.txn_first_offset_min,
            active.txn_index.first_offset_min()
        );
        active.txn_index = crate::segment::txn_index::TxnIndex::default();
        Ok(())
    }

    /// Writes the in-memory `.timeindex` and then `.index` of `segment`. In this order a crash
    /// between the two leaves a time index at least as new as the offset index, so the time
    /// entries up to any offset-index entry recovery resumes from are all there (their last one
    /// gives the running max timestamp up to that point).
    pub(crate) async fn write_indexes(
        &self,
        segment: &Segment<S::File>,
    ) -> Result<(), EngineError> {
        let storage = &*self.storage;
        small_file::write_atomic(
            storage,
            &self.dir,
            &segment_file_name(segment.base, FileKind::TimeIndex),
            &segment.time_index.encode(),
        )
        .await?;
        small_file::write_atomic(
            storage,
            &self.dir,
            &segment_file_name(segment.base, FileKind::Index),
            &segment.index.encode(),
        )
        .await?;
        Ok(())
    }

    /// Persists the producer state as of `offset`.
    pub(crate) async fn write_producer_snapshot(&self, offset: Offset) -> Result<(), EngineError> {
        let bytes = self.producers.encode(offset);
        small_file::write_atomic(&*self.storage, &self.dir, PRODUCER_SNAPSHOT_FILE, &bytes).await?;
        Ok(())
    }

    /// Creates an empty active segment at `base` (replacing any stale files of that name);
    /// `mode` says whether the new `.log`'s directory entry is durable at once.
    pub(crate) async fn create_segment(
        &self,
        base: Offset,
        mode: OpenMode,
    ) -> Result<Segment<S::File>, EngineError> {
        for kind in [FileKind::Index, FileKind::TimeIndex, FileKind::TxnIndex] {
            let path = self.dir.join(segment_file_name(base, kind));
            if self.storage.exists(&path).await? {
                self.storage.remove_file(&path).await?;
            }
        }
        let path = self.dir.join(segment_file_name(base, FileKind::Log));
        let file = self.storage.open(&path, mode).await?;
        file.truncate(0).await?;
        let mut segment = Segment::new(base);
        segment.appender = Some(Appender::new(
            0,
            &[],
            0,
            self.new_prealloc(),
            self.config.segment_bytes_max,
        ));
        segment.file = Some(file);
        Ok(segment)
    }

    /// Preallocation of a new appender: from the last sealed segment's step, on the shard's budget.
    pub(crate) fn new_prealloc(&self) -> Prealloc {
        Prealloc::new(
            self.prealloc_budget.clone(),
            self.clock.clone(),
            self.prealloc_step,
        )
    }

    /// Writes everything appended so far and fdatasyncs it once; returns the durable offset.
    /// Every [`CHECKPOINT_BYTES`] of flushed log it also checkpoints the active indexes.
    pub async fn flush(&mut self) -> Result<Offset, EngineError> {
        self.check_usable()?;
        let durable = self.flush_inner().await?;
        self.maybe_checkpoint().await;
        Ok(durable)
    }

    pub(crate) async fn flush_inner(&mut self) -> Result<Offset, EngineError> {
        if self.positions.durable() == self.positions.log_end() {
            return Ok(self.positions.durable());
        }
        let active = self.segments.last_mut().expect("at least one segment");
        let file = active.file.as_ref().expect("active segment is open");
        let appender = active
            .appender
            .as_mut()
            .expect("an appender while bytes are unflushed");
        // Held read-ahead loads wait behind it (see `FlushGate`).
        let _flushing = self.read_cache.flush_gate().flush_started();
        if let Err(e) = appender.flush(file).await {
            self.failed = true;
            return Err(EngineError::from_io(e));
        }
        self.positions.flushed();
        self.refresh_last_stable();
        self.unflushed_messages = 0;
        self.last_flush_ms = self.clock.now();
        Ok(self.positions.durable())
    }

    /// Whether the flush policy says a flush is owed at `now`.
    pub fn flush_due(&self, now: TimestampMs) -> bool {
        if self.positions.durable() == self.positions.log_end() {
            return false;
        }
        match self.config.flush {
            FlushPolicy::EveryAppend => true,
            FlushPolicy::Interval { messages, ms } => {
                let by_count = messages.is_some_and(|m| self.unflushed_messages >= m);
                let by_time =
                    ms.is_some_and(|ms| now.0.saturating_sub(self.last_flush_ms.0) >= ms as i64);
                by_count || by_time
            }
        }
    }

    /// Applies a changed configuration at once (a topic's configs altered while it is open):
    /// rolls, retention, flushes and appends follow the new values from the next operation.
    /// A switch to `EveryAppend` flushes first, so the high watermark never moves back.
    pub async fn reconfigure(&mut self, config: LogConfig) -> Result<(), EngineError> {
        self.check_usable()?;
        config.validate().map_err(EngineError::InvalidConfig)?;
        let every_append = config.flush == FlushPolicy::EveryAppend;
        if every_append && self.config.flush != FlushPolicy::EveryAppend {
            self.flush_inner().await?;
        }
        self.positions.set_hw_follows_durable(every_append);
        let (read_cache, log) = (&self.read_cache, self.read_cache_log);
        let demote = |base, last, bytes, held| {
            read_cache.insert_written(log, (base, last), bytes, held);
        };
        self.cache
            .set_bytes_max(config.batch_cache_bytes_max, demote);
        self.config = config;
        Ok(())
    }

    /// Forgets the producers idle for `expiration_ms` of the clock (`producer.id.expiration.ms`,
    /// see [`ProducerState::remove_expired`]); returns how many.
    pub fn expire_producers(&mut self, expiration_ms: rill_types::DurationMs) -> usize {
        let now = self.clock.now();
        self.producers.remove_expired(now, expiration_ms)
    }

    /// Producers forgotten to stay within the configured `producers_max` since the last call.
    pub fn take_producers_evicted(&mut self) -> u64 {
        std::mem::take(&mut self.producers_evicted)
    }

    /// The configuration in force.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> Offset {
        self.positions.log_start()
    }

    /// Next offset to be assigned.
    pub fn log_end_offset(&self) -> Offset {
        self.positions.log_end()
    }

    /// Every offset below this survives a crash.
    pub fn durable_offset(&self) -> Offset {
        self.positions.durable()
    }

    /// Consumers may read below this offset.
    pub fn high_watermark(&self) -> Offset {
        self.positions.high_watermark()
    }

    /// All named positions at once (log start, high watermark, durable, log end).
    pub fn positions(&self) -> Positions {
        self.positions
    }

    /// Flushed bytes between two index checkpoints: [`CHECKPOINT_BYTES`], or a quarter of
    /// `segment_bytes_max` for small segments (so they are checkpointed too).
    pub fn checkpoint_bytes(&self) -> u64 {
        CHECKPOINT_BYTES.min(self.config.segment_bytes_max / 4)
    }

    /// Bytes of whole batches in all segments (what the log holds, preallocation aside).
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size_bytes).sum()
    }

    /// Number of segments (sealed + active).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The partition directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    pub(crate) fn check_in_range(&self, from: Offset) -> Result<(), EngineError> {
        let (log_start, log_end) = (self.positions.log_start(), self.positions.log_end());
        if from < log_start || from > log_end {
            return Err(EngineError::OffsetOutOfRange {
                requested: from,
                log_start,
                log_end,
            });
        }
        Ok(())
    }

    /// Reads from the segment holding `from` without the read cache: sparse index, then a
    /// short forward scan (the unsettled tail of the active segment, and the fallback when an
    /// extent cannot be loaded: it reports the error, or rescans past a bad index entry).
    pub(crate) async fn read_from_segment(
        &mut self,
        from: Offset,
        hw: Offset,
        max_bytes: usize,
    ) -> Result<Vec<Bytes>, EngineError> {
        let i = self.segment_index_for(from);
        self.ensure_open(i).await?;
        let segment = &self.segments[i];
        let start = segment
            .index
            .lookup(RelativeOffset::between(from, segment.base));
        let read_ahead = max_bytes
            .saturating_add(self.config.index_interval_bytes as usize)
            .clamp(64 << 10, READ_AHEAD_BYTES_MAX);
        let (pos, expected) = start.map_or((0, segment.base), |(rel, pos)| {
            (u64::from(pos.0), rel.absolute(segment.base))
        });
        let cursor = BatchCursor::new(segment, pos, expected, read_ahead);
        match collect_batches(cursor, from, hw, max_bytes).await {
            Err(EngineError::CorruptBatch(why)) if pos != 0 => {
                tracing::warn!(dir = %self.dir.display(), %why, "index entry did not verify; scanning the segment");
                collect_batches(
                    BatchCursor::new(segment, 0, segment.base, read_ahead),
                    from,
                    hw,
                    max_bytes,
                )
                .await
            }
            other => other,
        }
    }

    /// Index of the segment whose range holds `offset` (binary search on base offsets).
    pub(crate) fn segment_index_for(&self, offset: Offset) -> usize {
        let n = self.segments.partition_point(|s| s.base <= offset);
        assert!(n > 0, "offset {offset} below the first segment");
        n - 1
    }

    /// Makes segment `i` readable: opens a sealed segment's `.log` read-only on first use
    /// (closing the least recently opened one beyond [`OPEN_SEALED_FILES_MAX`], whose indexes
    /// are dropped with it), reopens the active one after an idle release, and loads the
    /// segment's indexes if they are not in memory.
    pub(crate) async fn ensure_open(&mut self, i: usize) -> Result<(), EngineError> {
        if self.segments[i].file.is_none() {
            if i + 1 == self.segments.len() {
                self.reopen_active_file().await?;
            } else {
                self.open_sealed_file(i).await?;
            }
        }
        if !self.segments[i].indexes_loaded {
            self.load_indexes(i).await?;
        }
        Ok(())
    }

    async fn open_sealed_file(&mut self, i: usize) -> Result<(), EngineError> {
        assert!(i + 1 < self.segments.len(), "a sealed segment");
        let base = self.segments[i].base;
        let path = self.dir.join(segment_file_name(base, FileKind::Log));
        self.segments[i].file = Some(self.storage.open(&path, OpenMode::Read).await?);
        self.open_sealed.push_back(base);
        while self.open_sealed.len() > OPEN_SEALED_FILES_MAX {
            let oldest = self
                .open_sealed
                .pop_front()
                .expect("over the limit means non-empty");
            let Ok(j) = self.segments.binary_search_by_key(&oldest, |s| s.base) else {
                continue;
            };
            self.segments[j].drop_indexes();
            if let Some(file) = self.segments[j].file.take() {
                file.close().await?;
            }
        }
        assert!(self.open_sealed.len() <= OPEN_SEALED_FILES_MAX);
        Ok(())
    }

    /// First batch whose max timestamp is >= `ts` (ListOffsets by time): its base offset (at
    /// least the log start) and max timestamp. `None` if no visible batch is that new.
    pub async fn offset_for_timestamp(
        &mut self,
        ts: TimestampMs,
    ) -> Result<Option<(Offset, TimestampMs)>, EngineError> {
        self.check_usable()?;
        for i in 0..self.segments.len() {
            let max = self.segments[i].max_timestamp;
            if max == TimestampMs::NONE || max < ts {
                continue;
            }
            match self.find_timestamp_in(i, ts).await? {
                Found::Batch(offset, max_ts) => return Ok(Some((offset, max_ts))),
                Found::PastHighWatermark => return Ok(None),
                Found::NotHere => {}
            }
        }
        Ok(None)
    }

    /// The first batch holding the log's largest timestamp (ListOffsets -3, KIP-734): its base
    /// offset (at least the log start) and that timestamp. `None` if the log has no timestamps
    /// or that batch is not below the high watermark yet.
    pub async fn offset_of_max_timestamp(
        &mut self,
    ) -> Result<Option<(Offset, TimestampMs)>, EngineError> {
        self.check_usable()?;
        let max = self.segments.iter().map(|s| s.max_timestamp).max();
        let Some(max) = max.filter(|m| *m != TimestampMs::NONE) else {
            return Ok(None);
        };
        // The first segment holding it past the log start holds the first such batch.
        for i in 0..self.segments.len() {
            if self.segments[i].max_timestamp != max {
                continue;
            }
            match self.find_timestamp_in(i, max).await? {
                Found::Batch(offset, max_ts) => return Ok(Some((offset, max_ts))),
                Found::PastHighWatermark => return Ok(None),
                Found::NotHere => {}
            }
        }
        Ok(None)
    }

    /// Scans segment `i` from its time index entry for the first visible batch with max timestamp >= `ts`.
    async fn find_timestamp_in(&mut self, i: usize, ts: TimestampMs) -> Result<Found, EngineError> {
        self.ensure_open(i).await?;
        let segment = &self.segments[i];
        let rel = segment.time_index.last_older_than(ts).map(|(_, rel)| rel);
        let start = rel.and_then(|rel| segment.index.lookup(rel));
        let (pos, expected) = start.map_or((0, segment.base), |(rel, pos)| {
            (u64::from(pos.0), rel.absolute(segment.base))
        });
        let mut cursor = BatchCursor::new(segment, pos, expected, 64 << 10);
        let (hw, log_start) = (self.positions.high_watermark(), self.positions.log_start());
        while let Some((meta, _)) = cursor.next().await? {
            if meta.base_offset >= hw {
                return Ok(Found::PastHighWatermark);
            }
            if meta.max_timestamp >= ts && meta.last_offset >= log_start {
                return Ok(Found::Batch(
                    meta.base_offset.max(log_start),
                    meta.max_timestamp,
                ));
            }
        }
        Ok(Found::NotHere)
    }

    /// Flushes, trims preallocation so each `.log` is exactly its whole batches, writes the
    /// active segment's indexes and the producer snapshot unless the next open would scan at
    /// most [`CLOSE_SCAN_BYTES_MAX`] past its last checkpoint, and closes every file.
    pub async fn close(mut self) -> Result<(), EngineError> {
        self.check_usable()?;
        if self.clean_on_disk {
            return self.close_files().await;
        }
        self.flush_inner().await?;
        if self.past_checkpoint_bytes() <= CLOSE_SCAN_BYTES_MAX {
            // The next open scans this little: trimming the file is all close owes it.
            self.release_active_file().await?;
            return self.close_files().await;
        }
        let last = self.segments.len() - 1;
        self.ensure_open(last).await?;
        let log_end = self.positions.log_end();
        self.seal_active().await?;
        self.write_producer_snapshot(log_end).await?;
        self.close_files().await
    }

    /// Bytes of the active segment past its on-disk index checkpoint: what the next open scans.
    pub(crate) fn past_checkpoint_bytes(&self) -> u64 {
        self.active()
            .size_bytes
            .saturating_sub(self.checkpointed_bytes)
    }

    /// Closes every open file.
    pub(crate) async fn close_files(&mut self) -> Result<(), EngineError> {
        for segment in &mut self.segments {
            segment.appender = None;
            if let Some(file) = segment.file.take() {
                file.close().await?;
            }
        }
        Ok(())
    }

    /// True once a write or sync failed (e.g. ENOSPC): every operation is refused with
    /// [`EngineError::Failed`] until the owner reopens the partition, so it can tell when to.
    pub fn is_failed(&self) -> bool {
        self.failed
    }

    pub(crate) fn check_usable(&self) -> Result<(), EngineError> {
        if self.failed {
            return Err(EngineError::Failed);
        }
        Ok(())
    }

    pub(crate) fn active(&self) -> &Segment<S::File> {
        self.segments.last().expect("at least one segment")
    }

    pub(crate) fn active_mut(&mut self) -> &mut Segment<S::File> {
        self.segments.last_mut().expect("at least one segment")
    }
}

/// The part of `segment.jitter.ms` taken off `segment.ms` for the segment at `base`: spread
/// over `[0, jitter_ms)` by the base offset, so it is the same after a restart and differs
/// between partitions and segments (Kafka draws it at random per segment).
pub(crate) fn segment_jitter_ms(base: Offset, jitter_ms: u64) -> u64 {
    if jitter_ms == 0 {
        return 0;
    }
    let mixed = (base.0 as u64 ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (mixed >> 17) % jitter_ms
}

/// Outcome of a timestamp search in one segment.
enum Found {
    Batch(Offset, TimestampMs),
    PastHighWatermark,
    NotHere,
}

/// Takes whole batches from `cursor`: skips those ending before `from`, stops at `hw`, at
/// `max_bytes` (after at least one batch) or at the end of the segment.
async fn collect_batches<F: BlockFile>(
    mut cursor: BatchCursor<'_, F>,
    from: Offset,
    hw: Offset,
    max_bytes: usize,
) -> Result<Vec<Bytes>, EngineError> {
    let mut out = Vec::new();
    let mut total = 0usize;
    while let Some((meta, bytes)) = cursor.next().await? {
        if meta.last_offset < from {
            continue;
        }
        if meta.base_offset >= hw || (!out.is_empty() && total + bytes.len() > max_bytes) {
            break;
        }
        total += bytes.len();
        out.push(bytes);
    }
    Ok(out)
}
