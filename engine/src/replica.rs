//! What replication asks of a partition log (Kafka's ISR protocol, KIP-101/279/320/595). The
//! engine knows nothing of brokers or the network; the server's replication layer decides who
//! leads and tells the log:
//!
//! | call                         | role     | what it does                                        |
//! |------------------------------|----------|-----------------------------------------------------|
//! | [`PartitionLog::lead`]       | leader   | stamp every append with this leader epoch           |
//! | [`PartitionLog::follow`]     | follower | stop stamping; copy the leader's batches as they are |
//! | [`PartitionLog::append_replica`] | follower | append a leader's batch at its own offsets       |
//! | [`PartitionLog::set_high_watermark`] | both | the high watermark replication computed        |
//! | [`PartitionLog::read_for_replica`] | leader | batches up to the log end (not the high watermark) |
//! | [`PartitionLog::end_offset_for_epoch`] | both | where an epoch ended (OffsetForLeaderEpoch) |
//! | [`PartitionLog::truncate_to`] | follower | cut a divergent tail (the log is closed; reopen it) |
//! | [`PartitionLog::truncate_fully_and_start_at`] | follower | empty the log below the leader's start (closed; reopen) |
//!
//! Once [`PartitionLog::lead`] or [`PartitionLog::follow`] was called the log is *replicated*:
//! the high watermark no longer follows the durable offset or the log end, and every batch's
//! leader epoch is recorded in `leader-epoch-checkpoint` ([`crate::leader_epochs`]).

use crate::batch::{self, ValidatedBatch};
use crate::cleaner::CLEANER_CHECKPOINT_FILE;
use crate::error::EngineError;
use crate::io::{BlockFile, OpenMode, Storage};
use crate::leader_epochs::{LeaderEpochs, LEADER_EPOCH_FILE};
use crate::partition_log::{
    AppendInfo, PartitionLog, ReadBatches, LOG_START_FILE, PRODUCER_SNAPSHOT_FILE,
};
use crate::producer_state::ProducerState;
use crate::segment::cursor::BatchCursor;
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::small_file;
use crate::types::{Offset, RelativeOffset, TimestampMs};
use rill_types::LeaderEpoch;

/// A replicated log's high watermark at its last clean close (Kafka's
/// `replication-offset-checkpoint`, kept per partition).
pub const HIGH_WATERMARK_FILE: &str = "high-watermark-checkpoint";

impl<S: Storage> PartitionLog<S> {
    /// This replica leads at `epoch`: appends are stamped with it. The first time, the high
    /// watermark starts at `high_watermark` (what this replica knew was replicated).
    pub fn lead(&mut self, epoch: LeaderEpoch, high_watermark: Offset) {
        assert!(epoch.0 >= 0, "a leader has a real epoch");
        self.make_replicated(high_watermark);
        self.stamp_epoch = Some(epoch);
    }

    /// This replica follows: batches are copied with the leader's offsets and epochs.
    pub fn follow(&mut self, high_watermark: Offset) {
        self.make_replicated(high_watermark);
        self.stamp_epoch = None;
    }

    fn make_replicated(&mut self, high_watermark: Offset) {
        if !self.positions.is_replicated() {
            self.positions.replicated(high_watermark);
            self.refresh_last_stable();
        }
    }

    /// Whether [`Self::lead`] or [`Self::follow`] made this log replicated.
    pub fn is_replicated(&self) -> bool {
        self.positions.is_replicated()
    }

    /// The high watermark replication computed; clamped into `[log start, log end]`.
    pub fn set_high_watermark(&mut self, high_watermark: Offset) {
        let hw = high_watermark
            .max(self.positions.log_start())
            .min(self.positions.log_end());
        self.positions.set_high_watermark(hw);
        self.refresh_last_stable();
    }

    /// Writes the high watermark of a replicated log to [`HIGH_WATERMARK_FILE`] (before a clean
    /// close), so a replica that leads as soon as it reopens exposes what was replicated then
    /// instead of nothing until its followers report.
    pub async fn checkpoint_high_watermark(&self) -> Result<(), EngineError> {
        if !self.positions.is_replicated() {
            return Ok(());
        }
        let bytes = small_file::encode_log_start(self.positions.high_watermark().0);
        small_file::write_atomic(&*self.storage, &self.dir, HIGH_WATERMARK_FILE, &bytes).await?;
        Ok(())
    }

    /// The high watermark of the last [`Self::checkpoint_high_watermark`], within
    /// `[log start, log end]` (a crash may have cut unflushed batches since); `None` without
    /// one. A cut (truncation, emptying) removes a checkpoint that names offsets it cut.
    pub async fn checkpointed_high_watermark(&self) -> Result<Option<Offset>, EngineError> {
        let path = self.dir.join(HIGH_WATERMARK_FILE);
        let bytes = small_file::read_whole(&*self.storage, &path).await?;
        let (start, end) = (self.positions.log_start(), self.positions.log_end());
        Ok(bytes
            .and_then(|b| small_file::decode_log_start(&b))
            .map(|hw| Offset(hw).max(start).min(end)))
    }

    /// The leader epochs of this log and where each started.
    pub fn leader_epochs(&self) -> &LeaderEpochs {
        &self.epochs
    }

    /// The latest epoch that wrote here (`None` if no replicated batch was ever written).
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.epochs.latest()
    }

    /// For the largest epoch `<= epoch` that wrote here: that epoch and where it ended (the log
    /// end for the latest); an `epoch` older than every one recorded ends where the first
    /// started (Kafka's answer). `None` for an undefined epoch or none recorded.
    pub fn end_offset_for_epoch(&self, epoch: LeaderEpoch) -> Option<(LeaderEpoch, Offset)> {
        self.epochs.end_offset_for(epoch, self.positions.log_end())
    }

    /// A follower copies one of its leader's batches: it must start at or past this log's end,
    /// and keeps its offsets and leader epoch. Past the end is a gap the leader's compaction
    /// left (Kafka's followers accept them): the active segment never has gaps, so the batch
    /// starts a new segment at its base offset, and the sealed one's offsets end there (as
    /// they do after a compaction, and as recovery reads them). Producer state is updated from
    /// it without sequence checks (the leader checked them), so it travels with the log: a
    /// follower that becomes leader refuses the duplicates its predecessor would have refused.
    /// Buffered; flush to make it durable.
    pub async fn append_replica(
        &mut self,
        batch: ValidatedBatch,
        now: TimestampMs,
    ) -> Result<AppendInfo, EngineError> {
        self.check_usable()?;
        assert!(self.stamp_epoch.is_none(), "a leader does not copy batches");
        let sent = batch::meta_of_validated(&batch)?;
        let log_end = self.positions.log_end();
        if sent.base_offset < log_end {
            return Err(EngineError::InvalidRecord(format!(
                "replicated batch starts at {}, below the log end {log_end}",
                sent.base_offset
            )));
        }
        if sent.base_offset > log_end {
            // Boxed: rare, and every follower append awaits this future.
            let rolled = Box::pin(self.roll_at(sent.base_offset)).await;
            self.failed |= rolled.is_err();
            rolled?;
            // Nothing lies between: the roll synced all below, so the gap is durable too. The
            // tail cache holds contiguous batches only: what it held is on disk now.
            self.positions.appended(sent.base_offset);
            self.positions.flushed();
            self.cache.clear();
        }
        self.append_checked(batch, sent, now).await
    }

    /// Batches from `from` up to the log end (a follower copies what is not replicated yet).
    pub async fn read_for_replica(
        &mut self,
        from: Offset,
        max_bytes: usize,
    ) -> Result<ReadBatches, EngineError> {
        let end = self.positions.log_end();
        self.read_below_end(from, max_bytes, end).await
    }

    /// Records that `epoch` wrote a batch starting at `start` (replicated logs only); a new
    /// epoch is written to `leader-epoch-checkpoint` before its first batch is.
    pub(crate) async fn note_epoch(
        &mut self,
        epoch: LeaderEpoch,
        start: Offset,
    ) -> Result<(), EngineError> {
        if !self.positions.is_replicated() || !self.epochs.assign(epoch, start) {
            return Ok(());
        }
        // Boxed: rare, and every append awaits this (see `ensure_active_writable`).
        let written = Box::pin(self.write_leader_epochs()).await;
        self.failed |= written.is_err(); // memory now says more than the disk
        written
    }

    async fn write_leader_epochs(&self) -> Result<(), EngineError> {
        let bytes = self.epochs.encode();
        small_file::write_atomic(&*self.storage, &self.dir, LEADER_EPOCH_FILE, &bytes).await?;
        Ok(())
    }

    /// At open: the checkpoint, less the epochs that started past the recovered log end (their
    /// first batch never became durable).
    pub(crate) async fn load_leader_epochs(&mut self) -> Result<(), EngineError> {
        let path = self.dir.join(LEADER_EPOCH_FILE);
        let Some(bytes) = small_file::read_whole(&*self.storage, &path).await? else {
            return Ok(());
        };
        self.epochs = LeaderEpochs::decode(&bytes).unwrap_or_else(|| {
            tracing::warn!(dir = %self.dir.display(), "leader-epoch-checkpoint does not decode; starting without epochs");
            LeaderEpochs::default()
        });
        self.epochs.truncate_from_end(self.positions.log_end());
        Ok(())
    }

    /// Cuts the log so that it ends before the batch holding `offset` (a follower's divergent
    /// tail, KIP-101/279), and closes it: reopen the partition to use it again (recovery then
    /// rebuilds indexes and producer state from what is left, and drops the leader epochs that
    /// started past the new end). Only offsets above the high watermark are ever cut: a batch
    /// below it is on every in-sync replica.
    ///
    /// Crash-safe in any order of completion: checkpoints describing the cut tail (a producer
    /// snapshot or cleaner checkpoint taken past the new end) are removed first; segments are
    /// removed newest first (what is left is always a prefix of the log); the cut is synced
    /// before the leader epochs are rewritten, and an open drops epochs past the log end
    /// anyway. A crash part way leaves a longer prefix of the old log, which the follower cuts
    /// again when it asks its leader.
    pub async fn truncate_to(mut self, offset: Offset) -> Result<(), EngineError> {
        self.check_usable()?;
        assert!(offset < self.positions.log_end(), "nothing to cut");
        if offset < self.positions.log_start() {
            return Err(EngineError::InvalidRecord(format!(
                "cannot cut the log at {offset}, below its start {}",
                self.positions.log_start()
            )));
        }
        self.flush_inner().await?;
        let i = self.segment_index_for(offset);
        self.ensure_open(i).await?;
        let (cut_at, new_end) = self.batch_start_at_or_before(i, offset).await?;
        let base = self.segments[i].base;
        self.close_files().await?;
        self.remove_checkpoints_past(new_end).await?;
        for j in (i + 1..self.segments.len()).rev() {
            self.remove_segment_files(self.segments[j].base).await?;
        }
        let path = self.dir.join(segment_file_name(base, FileKind::Log));
        let file = self.storage.open(&path, OpenMode::ReadWrite).await?;
        file.truncate(cut_at).await?;
        file.sync().await?;
        file.close().await?;
        if self.epochs.truncate_from_end(new_end) {
            self.write_leader_epochs().await?;
        }
        tracing::info!(dir = %self.dir.display(), offset = offset.0, new_end = new_end.0, "truncated log");
        Ok(())
    }

    /// Empties the log and makes it start at `start` (Kafka's `truncateFullyAndStartAt`): a
    /// follower whose log ends below its leader's log start (DeleteRecords or retention moved
    /// it while the follower was away) holds nothing the leader still serves. Closes the log:
    /// reopened, it is empty at `start`, with no leader epochs and no producer state.
    ///
    /// Crash-safe in any order of completion: the producer snapshot, cleaner checkpoint and
    /// leader epochs go first, then the segments newest first (what is left is a prefix of the
    /// old log, without epochs, still ending below `start`: the follower resets again), and
    /// the new log start is written last.
    pub async fn truncate_fully_and_start_at(mut self, start: Offset) -> Result<(), EngineError> {
        self.check_usable()?;
        assert!(start.0 >= 0, "a log starts at a real offset");
        self.close_files().await?;
        self.remove_checkpoints_past(Offset(-1)).await?;
        let epochs = self.dir.join(LEADER_EPOCH_FILE);
        if self.storage.exists(&epochs).await? {
            self.storage.remove_file(&epochs).await?;
        }
        for j in (0..self.segments.len()).rev() {
            self.remove_segment_files(self.segments[j].base).await?;
        }
        let bytes = small_file::encode_log_start(start.0);
        small_file::write_atomic(&*self.storage, &self.dir, LOG_START_FILE, &bytes).await?;
        tracing::info!(dir = %self.dir.display(), start = start.0, "emptied the log to start at the leader's log start");
        Ok(())
    }

    /// Removes the producer snapshot, the cleaner checkpoint and the high watermark checkpoint
    /// if they were taken past `end`: once the log grew back past their offset, they would
    /// describe batches that are gone.
    async fn remove_checkpoints_past(&self, end: Offset) -> Result<(), EngineError> {
        let hw = self.dir.join(HIGH_WATERMARK_FILE);
        let stale = small_file::read_whole(&*self.storage, &hw)
            .await?
            .is_some_and(|b| small_file::decode_log_start(&b).is_none_or(|o| o > end.0));
        if stale {
            self.storage.remove_file(&hw).await?;
        }
        let snapshot = self.dir.join(PRODUCER_SNAPSHOT_FILE);
        let stale = small_file::read_whole(&*self.storage, &snapshot)
            .await?
            .is_some_and(|b| ProducerState::decode(&b).is_none_or(|(o, _)| o > end));
        if stale {
            self.storage.remove_file(&snapshot).await?;
        }
        let cleaner = self.dir.join(CLEANER_CHECKPOINT_FILE);
        if self.storage.exists(&cleaner).await? {
            self.storage.remove_file(&cleaner).await?;
        }
        Ok(())
    }

    /// File position and base offset of the batch of segment `i` holding `offset` (or the
    /// first one after it, in a segment with gaps); the segment's end if there is none.
    async fn batch_start_at_or_before(
        &self,
        i: usize,
        offset: Offset,
    ) -> Result<(u64, Offset), EngineError> {
        let segment = &self.segments[i];
        let start = segment
            .index
            .lookup(RelativeOffset::between(offset, segment.base));
        let (pos, expected) = start.map_or((0, segment.base), |(rel, pos)| {
            (u64::from(pos.0), rel.absolute(segment.base))
        });
        let mut cursor = BatchCursor::new(segment, pos, expected, 1 << 20);
        loop {
            let at = cursor.position();
            match cursor.next().await? {
                Some((meta, _)) if meta.last_offset >= offset => {
                    return Ok((at, meta.base_offset));
                }
                Some(_) => {}
                None => return Ok((segment.size_bytes, segment.next_offset)),
            }
        }
    }
}
