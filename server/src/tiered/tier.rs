//! One tiered partition's part in the remote tier, driven by its actor: what to copy or delete
//! next, the metadata transitions around each job, the local-retention gate, remote reads.
//!
//! One job at a time per partition, in offset order (copies never leave a hole); the shard
//! bounds the object-store requests of all its partitions ([`super::store::RemoteStore`]).
//! A job runs as a future the actor polls beside its mailbox, so appends, flushes and local
//! reads go on while objects move. Every metadata write happens on the actor, before the job
//! starts and after it ends (see `metadata.rs` for the order).
//!
//! | job                 | before                     | after (success)                          | after (failure)            |
//! |---------------------|----------------------------|------------------------------------------|----------------------------|
//! | copy a segment      | COPY_STARTED written       | COPY_FINISHED written, gate moved        | backoff; cleanup next      |
//! | delete a copy       | DELETE_STARTED written     | DELETE_FINISHED (record dropped)         | backoff; retried           |
//!
//! A failure backs off `rill.remote.retry.backoff.ms`, doubling up to
//! `rill.remote.retry.backoff.max.ms`; a success resets it.

use std::rc::Rc;

use bytes::Bytes;
use futures::future::LocalBoxFuture;
use futures::FutureExt;
use rill_engine::io::Storage;
use rill_engine::segment::txn_index::TxnIndex;
use rill_engine::tiering::{SealedSegment, SegmentFiles};
use rill_engine::{AbortedTxn, EngineError, PartitionLog};
use rill_types::{DurationMs, Offset, TimestampMs};

use super::keys::{ObjectKind, PartitionKeys};
use super::metadata::{epochs_of, RemoteLogMetadata, RemoteSegment, SegmentState, METADATA_FILE};
use super::metrics::TIER;
use super::pacer::CopyPacer;
use super::reader::{read_segment, IndexCache};
use super::settings::RemoteStorageSettings;
use super::store::{RemoteError, RemoteStore};

/// A shard's share of tiered storage: its object-store handle and remote index cache.
pub struct ShardTier {
    /// The object store (this shard's requests bounded).
    pub store: Rc<RemoteStore>,
    /// Remote offset indexes read lately.
    pub indexes: IndexCache,
    /// The broker's settings.
    pub settings: RemoteStorageSettings,
    /// The shard's copy bandwidth bound.
    pub pacer: CopyPacer,
}

/// What a tiered partition is given when it opens.
#[derive(Clone)]
pub struct TierSetup {
    /// The shard's tier.
    pub shard: Rc<ShardTier>,
    /// The partition's keys.
    pub keys: PartitionKeys,
    /// Total retention (`retention.ms`, `retention.bytes`): remote copies past it are deleted.
    pub retention_ms: Option<u64>,
    /// See `retention_ms`.
    pub retention_bytes: Option<u64>,
}

/// A job's end, as the actor receives it.
pub enum TierEvent {
    /// A copy ended (the objects put, or why not).
    Copied(RemoteSegment, Result<Copied, RemoteError>),
    /// A delete ended.
    Deleted(RemoteSegment, Result<(), RemoteError>),
}

/// One partition's tier state.
pub struct PartitionTier {
    setup: TierSetup,
    meta: RemoteLogMetadata,
    /// The job in flight.
    job: Option<LocalBoxFuture<'static, TierEvent>>,
    /// Consecutive failures (backoff doubles with each).
    failures: u32,
    /// No new job before this.
    retry_at_ms: TimestampMs,
    /// What this partition adds to the upload-lag gauges.
    lag: (i64, i64),
}

impl Drop for PartitionTier {
    fn drop(&mut self) {
        TIER.upload_lag_bytes.sub(self.lag.0);
        TIER.upload_lag_segments.sub(self.lag.1);
    }
}

impl PartitionTier {
    /// Loads the partition's metadata and sets the log's local-retention gate from it.
    pub async fn open<S: Storage>(
        setup: TierSetup,
        log: &mut PartitionLog<S>,
    ) -> Result<Self, EngineError> {
        let bytes = log.read_side_file(METADATA_FILE).await?;
        let mut meta =
            RemoteLogMetadata::decode(bytes.as_deref()).map_err(EngineError::InvalidConfig)?;
        meta.set_keys_dir(setup.keys.dir());
        let tier = PartitionTier {
            setup,
            meta,
            job: None,
            failures: 0,
            retry_at_ms: TimestampMs(0),
            lag: (0, 0),
        };
        let unfinished = tier.meta.unfinished().len();
        if unfinished > 0 {
            tracing::info!(dir = %log.dir().display(), unfinished, "remote copies or deletes left unfinished: their objects are deleted first");
        }
        tier.apply_gate(log);
        Ok(tier)
    }

    /// Sets `log`'s local-retention gate (a log reopened after a failure needs it again).
    pub fn apply_gate<S: Storage>(&self, log: &mut PartitionLog<S>) {
        log.set_remote_copied_until(Some(self.gate()));
    }

    /// The local-retention gate: local segments below it are durable remotely.
    fn gate(&self) -> Offset {
        self.meta.copied_until().unwrap_or(Offset(0))
    }

    /// Total retention changed (AlterConfigs).
    pub fn set_retention(&mut self, retention_ms: Option<u64>, retention_bytes: Option<u64>) {
        self.setup.retention_ms = retention_ms;
        self.setup.retention_bytes = retention_bytes;
    }

    /// The first offset of the remote tier, if it holds any.
    pub fn earliest_offset(&self) -> Option<Offset> {
        self.meta.earliest_offset()
    }

    /// DeleteRecords reached the remote tier: records below `offset` are never read again,
    /// and copies wholly below it are deleted by the next jobs. Durable on return.
    pub async fn advance_log_start<S: Storage>(
        &mut self,
        log: &PartitionLog<S>,
        offset: Offset,
    ) -> Result<(), EngineError> {
        let before = self.meta.clone();
        if !self.meta.advance_log_start(offset) {
            return Ok(());
        }
        if let Err(e) = self.write(log).await {
            self.meta = before;
            return Err(e);
        }
        Ok(())
    }

    /// Deletes every object of the partition (its topic is being deleted), as a detached
    /// task: the directory's deletion does not wait on the store. What fails stays in the
    /// bucket (logged).
    pub fn delete_everything(&self) {
        let (store, keys) = (self.setup.shard.store.clone(), self.setup.keys.clone());
        let task = async move {
            let prefix = format!("{}/", keys.dir());
            let deleted = async {
                let objects = store.list(prefix.clone()).await?;
                for (key, _) in &objects {
                    store.delete(key.clone()).await?;
                }
                Ok::<usize, RemoteError>(objects.len())
            };
            match deleted.await {
                Ok(n) => tracing::info!(
                    prefix,
                    objects = n,
                    "deleted the partition's remote objects"
                ),
                Err(e) => {
                    tracing::warn!(prefix, error = %e, "deleting the partition's remote objects failed; they stay in the bucket")
                }
            }
        };
        glommio::spawn_local(task).detach();
    }

    /// The remote tier's extent: finished copies and their `.log` bytes (the status page).
    pub fn extent(&self) -> (u64, u64) {
        let finished = self
            .meta
            .segments()
            .iter()
            .filter(|s| s.state == SegmentState::CopyFinished);
        let (n, bytes) = finished.fold((0, 0), |(n, b), s| (n + 1, b + s.size_bytes));
        (n, bytes)
    }

    /// The highest offset the remote tier holds (ListOffsets -5).
    pub fn highest_offset(&self) -> Option<Offset> {
        self.meta.highest_offset()
    }

    /// The job in flight, for the actor to poll (pending forever when there is none).
    pub async fn next_event(&mut self) -> TierEvent {
        match self.job.as_mut() {
            Some(job) => {
                let event = job.await;
                self.job = None;
                event
            }
            None => std::future::pending().await,
        }
    }

    /// Starts the next job if none runs and the backoff allows: cleanup of unfinished
    /// records first, then total retention, then the next copy.
    pub async fn start_next<S: Storage>(&mut self, log: &mut PartitionLog<S>, now: TimestampMs) {
        self.publish_lag(log);
        if self.job.is_some() || now < self.retry_at_ms || log.is_failed() {
            return;
        }
        if let Some(unfinished) = self.meta.unfinished().into_iter().next() {
            return self.start_delete(log, unfinished).await;
        }
        let local_above = log
            .size_bytes()
            .saturating_sub(self.local_bytes_copied(log));
        let (ms, bytes) = (self.setup.retention_ms, self.setup.retention_bytes);
        if let Some(expired) = self
            .meta
            .expired(now, ms, bytes, local_above)
            .into_iter()
            .next()
        {
            return self.start_delete(log, expired).await;
        }
        let copyable = log.copyable_segments();
        if let Some(segment) = self.meta.next_to_copy(&copyable) {
            self.start_copy(log, segment).await;
        }
    }

    /// Bytes of the local log that the remote tier also holds (below the gate).
    fn local_bytes_copied<S: Storage>(&self, log: &PartitionLog<S>) -> u64 {
        let gate = self.gate();
        log.copyable_segments()
            .iter()
            .filter(|s| s.next_offset <= gate)
            .map(|s| s.size_bytes)
            .sum()
    }

    /// Publishes this partition's upload lag: sealed segments below the high watermark and
    /// past what the remote tier holds.
    fn publish_lag<S: Storage>(&mut self, log: &PartitionLog<S>) {
        let gate = self.gate();
        let pending: Vec<SealedSegment> = log
            .copyable_segments()
            .into_iter()
            .filter(|s| s.next_offset > gate)
            .collect();
        let lag = (
            pending.iter().map(|s| s.size_bytes as i64).sum::<i64>(),
            pending.len() as i64,
        );
        TIER.upload_lag_bytes.add(lag.0 - self.lag.0);
        TIER.upload_lag_segments.add(lag.1 - self.lag.1);
        self.lag = lag;
    }

    async fn write<S: Storage>(&self, log: &PartitionLog<S>) -> Result<(), EngineError> {
        log.write_side_file(METADATA_FILE, &self.meta.encode())
            .await
    }

    async fn start_copy<S: Storage>(&mut self, log: &mut PartitionLog<S>, segment: SealedSegment) {
        let entries: Vec<(i32, i64)> = log
            .leader_epochs()
            .entries()
            .iter()
            .map(|(e, o)| (e.0, o.0))
            .collect();
        let epochs = epochs_of(&entries, segment.base, segment.next_offset);
        let mut record = RemoteSegment::started(&segment, epochs);
        record.objects = OBJECTS.iter().map(|(kind, _)| *kind).collect();
        self.meta.put(record.clone());
        if let Err(e) = self.write(log).await {
            tracing::error!(dir = %log.dir().display(), error = %e, "writing COPY_STARTED failed");
            self.meta.put(RemoteSegment {
                state: SegmentState::DeleteFinished,
                ..record
            });
            self.back_off();
            return;
        }
        let files = log.segment_files(segment.base);
        let (shard, keys) = (self.setup.shard.clone(), self.setup.keys.clone());
        let job = async move {
            let put = copy_objects(&shard, &keys, &record, &files).await;
            TierEvent::Copied(record, put)
        };
        self.job = Some(job.boxed_local());
    }

    async fn start_delete<S: Storage>(
        &mut self,
        log: &mut PartitionLog<S>,
        segment: RemoteSegment,
    ) {
        let record = RemoteSegment {
            state: SegmentState::DeleteStarted,
            ..segment
        };
        self.meta.put(record.clone());
        if let Err(e) = self.write(log).await {
            tracing::error!(dir = %log.dir().display(), error = %e, "writing DELETE_STARTED failed");
            self.back_off();
            return;
        }
        // The gate only moves forward: a deleted copy's local segment is gone or goes anyway.
        let (store, keys) = (self.setup.shard.store.clone(), self.setup.keys.clone());
        let job = async move {
            let deleted = delete_objects(&store, &keys, &record).await;
            TierEvent::Deleted(record, deleted)
        };
        self.job = Some(job.boxed_local());
    }

    /// Records a job's end; the actor then calls [`Self::start_next`].
    pub async fn on_event<S: Storage>(&mut self, log: &mut PartitionLog<S>, event: TierEvent) {
        let dir = log.dir().display().to_string();
        match event {
            TierEvent::Copied(record, Ok(copied)) => {
                let bytes = copied.bytes;
                // The record now names what exists (a reader looks for `.txnindex` by it).
                self.meta.put(RemoteSegment {
                    state: SegmentState::CopyFinished,
                    objects: copied.objects,
                    ..record.clone()
                });
                if let Err(e) = self.write(log).await {
                    tracing::error!(dir, error = %e, "writing COPY_FINISHED failed");
                    self.meta.put(record); // still COPY_STARTED: cleaned up, copied again
                    return self.back_off();
                }
                // Only now, with COPY_FINISHED durable, may local retention delete it.
                let gate = self.gate();
                if log.remote_copied_until().is_some_and(|g| gate > g) {
                    log.set_remote_copied_until(Some(gate));
                }
                TIER.copy_segments.inc();
                TIER.copy_bytes.inc_by(bytes);
                self.failures = 0;
                tracing::debug!(
                    dir,
                    base = record.base_offset,
                    end = record.end_offset,
                    bytes,
                    "segment copied to the remote tier"
                );
            }
            TierEvent::Copied(record, Err(e)) => {
                TIER.copy_errors.inc();
                tracing::warn!(dir, base = record.base_offset, error = %e, "copying a segment failed; retried");
                // Its record stays COPY_STARTED: the next job deletes what was put.
                self.back_off();
            }
            TierEvent::Deleted(record, Ok(())) => {
                self.meta.put(RemoteSegment {
                    state: SegmentState::DeleteFinished,
                    ..record
                });
                if let Err(e) = self.write(log).await {
                    tracing::error!(dir, error = %e, "writing DELETE_FINISHED failed");
                    return self.back_off();
                }
                TIER.delete_segments.inc();
                self.failures = 0;
            }
            TierEvent::Deleted(record, Err(e)) => {
                tracing::warn!(dir, base = record.base_offset, error = %e, "deleting a remote segment failed; retried");
                self.back_off();
            }
        }
    }

    fn back_off(&mut self) {
        let settings = &self.setup.shard.settings;
        let factor = 1u64 << self.failures.min(16);
        let pause = settings
            .retry_backoff_ms
            .saturating_mul(factor)
            .min(settings.retry_backoff_max_ms);
        self.failures += 1;
        self.retry_at_ms = now_ms() + DurationMs(pause as i64);
    }

    /// The end of the copy a remote read of `from` would read (`None`: the remote tier does
    /// not serve `from`).
    pub fn remote_read_end(&self, from: Offset) -> Option<Offset> {
        self.meta.segment_for(from).map(RemoteSegment::next_offset)
    }

    /// The remote read of `from` if the remote tier holds it: a future the caller runs apart
    /// from the actor (it borrows nothing of the partition). Only a copy wholly below
    /// `visible_end` (the high watermark, or the last stable offset of a read_committed
    /// reader) is read. `committed` (a read_committed reader's) holds the local log's aborted
    /// transactions for the read; the `.txnindex` objects of the remote copies from the one
    /// read onward add theirs before them (marker order).
    pub fn remote_read(
        &self,
        from: Offset,
        max_bytes: usize,
        visible_end: Offset,
        committed: Option<Vec<AbortedTxn>>,
    ) -> Option<LocalBoxFuture<'static, Result<RemoteRead, RemoteError>>> {
        let segment = self.meta.segment_for(from)?.clone();
        if segment.next_offset() > visible_end {
            return None;
        }
        let with_txns = |s: &&RemoteSegment| {
            s.state == SegmentState::CopyFinished
                && s.base_offset >= segment.base_offset
                && s.objects.contains(&ObjectKind::TxnIndex)
        };
        let later: Vec<RemoteSegment> = self
            .meta
            .segments()
            .iter()
            .filter(with_txns)
            .cloned()
            .collect();
        let (shard, keys) = (self.setup.shard.clone(), self.setup.keys.clone());
        let read = async move {
            TIER.fetch_requests.inc();
            let started = std::time::Instant::now();
            let store = &shard.store;
            let read = async {
                let chunks =
                    read_segment(store, &shard.indexes, &keys, &segment, from, max_bytes).await?;
                let aborted = match committed {
                    None => Vec::new(),
                    Some(local) => {
                        let upper = segment.next_offset();
                        let mut aborted = remote_aborted(store, &keys, &later, from, upper).await?;
                        aborted.extend(local);
                        aborted
                    }
                };
                Ok(RemoteRead { chunks, aborted })
            };
            let read = read.await;
            TIER.fetch_duration.observe(started.elapsed().as_secs_f64());
            match &read {
                Ok(r) => TIER
                    .fetch_bytes
                    .inc_by(r.chunks.iter().map(|c| c.len() as u64).sum()),
                Err(_) => TIER.fetch_errors.inc(),
            }
            read
        };
        Some(read.boxed_local())
    }
}

/// What a remote read returns.
pub struct RemoteRead {
    /// Whole batches.
    pub chunks: Vec<Bytes>,
    /// A read_committed reader's aborted transactions overlapping the read.
    pub aborted: Vec<AbortedTxn>,
}

/// The aborted transactions of `copies`' `.txnindex` objects overlapping `[from, upper)`.
async fn remote_aborted(
    store: &RemoteStore,
    keys: &PartitionKeys,
    copies: &[RemoteSegment],
    from: Offset,
    upper: Offset,
) -> Result<Vec<AbortedTxn>, RemoteError> {
    let mut out = Vec::new();
    for copy in copies {
        let base = Offset(copy.base_offset);
        let bytes = store
            .get(keys.object(base, copy.id, ObjectKind::TxnIndex))
            .await?;
        let index = TxnIndex::decode(&bytes, base, copy.next_offset()).ok_or_else(|| {
            RemoteError::Other(format!(
                "the remote .txnindex of {} does not decode",
                base.0
            ))
        })?;
        out.extend(index.overlapping(from, upper));
    }
    Ok(out)
}

/// The wall clock, for backoff only (the log's injected clock drives everything else).
fn now_ms() -> TimestampMs {
    rill_engine::io::SystemClock.now()
}

use rill_engine::io::Clock;

/// Each object of a copy and whether the copy needs its file (optional ones may not exist).
const OBJECTS: [(ObjectKind, bool); 6] = [
    (ObjectKind::Log, true),
    (ObjectKind::Index, true),
    (ObjectKind::TimeIndex, true),
    (ObjectKind::TxnIndex, false),
    (ObjectKind::ProducerSnapshot, false),
    (ObjectKind::LeaderEpochs, false),
];

fn path_of(files: &SegmentFiles, kind: ObjectKind) -> std::path::PathBuf {
    match kind {
        ObjectKind::Log => files.log.clone(),
        ObjectKind::Index => files.index.clone(),
        ObjectKind::TimeIndex => files.time_index.clone(),
        ObjectKind::TxnIndex => files.txn_index.clone(),
        ObjectKind::ProducerSnapshot => files.producer_snapshot.clone(),
        ObjectKind::LeaderEpochs => files.leader_epochs.clone(),
    }
}

/// What a copy put: its bytes, and the objects (optional files that did not exist are not).
pub struct Copied {
    /// Bytes put.
    pub bytes: u64,
    /// The objects put.
    pub objects: Vec<ObjectKind>,
}

/// Puts every object of a copy, `.log` last (its presence is no promise: COPY_FINISHED is).
async fn copy_objects(
    shard: &ShardTier,
    keys: &PartitionKeys,
    record: &RemoteSegment,
    files: &SegmentFiles,
) -> Result<Copied, RemoteError> {
    let base = Offset(record.base_offset);
    let mut copied = Copied {
        bytes: 0,
        objects: Vec::new(),
    };
    for (kind, needed) in OBJECTS.iter().rev() {
        let key = keys.object(base, record.id, *kind);
        match shard.store.put_file(key, path_of(files, *kind)).await {
            Ok(bytes) => {
                copied.bytes += bytes;
                copied.objects.push(*kind);
                shard.pacer.pace(bytes).await;
            }
            Err(RemoteError::LocalGone(_)) if !needed => {}
            Err(e) => return Err(e),
        }
    }
    Ok(copied)
}

/// Deletes every object a record names (missing ones are no error).
async fn delete_objects(
    store: &RemoteStore,
    keys: &PartitionKeys,
    record: &RemoteSegment,
) -> Result<(), RemoteError> {
    let base = Offset(record.base_offset);
    for kind in &record.objects {
        store.delete(keys.object(base, record.id, *kind)).await?;
    }
    Ok(())
}
