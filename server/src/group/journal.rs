//! Where committed offsets become durable on a single node (a cluster writes them to the
//! replicated `__consumer_offsets` topic instead: [`super::replicated`]).
//!
//! [`LogJournal`] keeps one engine log per offsets partition this shard owns, under
//! `<data-dir>/__rill_groups/__consumer_offsets-<p>/`. An OffsetCommit is answered only after
//! its records are appended and fdatasync'ed (acks=all semantics). Commits that arrive while a
//! flush is in progress are appended together and share the next fdatasync (group commit).
//! Group membership is written there too, as Kafka writes it to `__consumer_offsets` on a
//! single broker as in a cluster: each classic group's completed rebalance
//! (`super::metadata_record`) and each KIP-848 group change (`super::consumer::records`), so
//! a restarted node keeps its groups' members and assignments.
//!
//! Startup replays each log from its log start. The logs are compacted like Kafka's
//! `__consumer_offsets` (`cleanup.policy=compact`, the engine's cleaner keyed by group, topic
//! and partition): every [`CLEAN_CHECK_AFTER_RECORDS`] appended records the journal runs a clean
//! if one is due, so a log holds about the live entries (twice, at the 0.5 dirty ratio) plus one
//! active segment ([`OFFSETS_SEGMENT_BYTES`]), and replay reads that much. Deleted offsets
//! (tombstones) go after [`TOMBSTONE_RETENTION_MS`]. Commits wait only while a cleaned segment
//! is swapped in, not while it is written.
//!
//! # The coordinators' logs
//! Four modules, one word each: `crate::group::journal` and `crate::txn::journal` are where
//! each coordinator's records go (the trait it writes through, a single node's private engine
//! log, an in-memory one for tests); each coordinator's `replicated` is that trait over a
//! cluster's replicated internal partition, whose loading and acks=all writes both share in
//! `crate::internal_topics::replicated`; `crate::internal_topics::single_node` lets clients read a single node's private
//! logs as the internal topics `__consumer_offsets` and `__transaction_state`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use crate::channel::local::oneshot;
use futures::lock::Mutex;
use rill_engine::cleaner::{CompactionConfig, Unpaced};
use rill_engine::io::{Clock, Storage};
use rill_engine::{FlushPolicy, LogConfig, LogManager, PartitionLog};

use super::metadata_record::GroupMetadata;
use super::offsets::{
    decode_chunk, decode_log_chunk, encode_batch, CommittedOffset, LogRecord, OffsetKey,
    OffsetRecord,
};
use super::{offsets_partition, OFFSETS_TOPIC};
use crate::compaction::KafkaRecords;
pub use crate::internal_topics::{OFFSETS_SEGMENT_BYTES, TOMBSTONE_RETENTION_MS};
use rill_protocol::ErrorCode;
use rill_types::batch::ValidatedBatch;
use rill_types::TimestampMs;
use rill_types::{PartitionIndex, TopicPartitionRef};

/// Records appended between two looks at whether a clean is due.
pub const CLEAN_CHECK_AFTER_RECORDS: u64 = 10_000;
/// Offset-map memory of a clean of an offsets log.
const CLEAN_MAP_BYTES: usize = 8 << 20;
/// Bytes read per step during replay.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// Durable storage of offset records.
#[allow(async_fn_in_trait)] // !Send futures are intended: thread-per-core.
pub trait Journal {
    /// Make `records` (all of `group_id`) durable; Err is a Kafka error code.
    async fn append(&self, group_id: &str, records: Vec<OffsetRecord>) -> Result<(), ErrorCode>;

    /// Whether `group_id`'s requests may be served here now: a replicated journal answers
    /// NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS (`crate::internal_topics::replicated`).
    fn ready(&self, _group_id: &str) -> Result<(), ErrorCode> {
        Ok(())
    }

    /// Whether group membership is written ([`Journal::append_group`]): both Rill's journals
    /// write it (a single node's and a cluster's); a test's may not.
    fn writes_membership(&self) -> bool {
        false
    }

    /// Make a KIP-848 consumer group's records durable (`super::consumer::records`); a
    /// journal that does not write membership keeps none.
    async fn append_consumer(
        &self,
        _group_id: &str,
        _records: Vec<super::consumer::records::RawRecord>,
    ) -> Result<(), ErrorCode> {
        Ok(())
    }

    /// Make `group_id`'s membership record durable (`None`: its tombstone).
    async fn append_group(
        &self,
        _group_id: &str,
        _value: Option<GroupMetadata>,
    ) -> Result<(), ErrorCode> {
        Ok(())
    }
}

/// A journal that keeps records in memory (unit tests): can be told to fail.
#[derive(Default)]
pub struct MemJournal {
    /// Everything appended, in order.
    pub records: RefCell<Vec<OffsetRecord>>,
    /// When set, appends fail with this code.
    pub fail_with: Cell<Option<ErrorCode>>,
    /// When set, membership is written too, into `groups`.
    pub membership: Cell<bool>,
    /// Membership records appended, in order.
    pub groups: RefCell<Vec<(String, Option<GroupMetadata>)>>,
    /// When set, every record is encoded (and offset records decoded back) as [`LogJournal`]
    /// and the replicated journal write them, so a value no record can hold fails here too
    /// (the request-path fuzz targets set it).
    pub encodes: Cell<bool>,
}

impl Journal for MemJournal {
    async fn append(&self, _group_id: &str, records: Vec<OffsetRecord>) -> Result<(), ErrorCode> {
        if let Some(code) = self.fail_with.get() {
            return Err(code);
        }
        if self.encodes.get() && !records.is_empty() {
            let batch = encode_batch(&records, TimestampMs(0)).freeze();
            let decoded: Vec<OffsetRecord> = decode_chunk(batch)
                .expect("an encoded offsets batch decodes")
                .into_iter()
                .map(|(_, record)| record)
                .collect();
            assert_eq!(decoded, records, "offset records round-trip");
        }
        self.records.borrow_mut().extend(records);
        Ok(())
    }

    fn writes_membership(&self) -> bool {
        self.membership.get()
    }

    async fn append_group(
        &self,
        group_id: &str,
        value: Option<GroupMetadata>,
    ) -> Result<(), ErrorCode> {
        if let Some(code) = self.fail_with.get() {
            return Err(code);
        }
        if self.encodes.get() {
            let _ = super::metadata_record::encode_group_batch(
                group_id,
                value.as_ref(),
                TimestampMs(0),
            );
        }
        self.groups.borrow_mut().push((group_id.to_string(), value));
        Ok(())
    }
}

/// The log configuration of an offsets partition: durable on every append, never deleted by
/// retention, small segments so compaction frees space.
pub fn offsets_log_config() -> LogConfig {
    LogConfig {
        segment_bytes_max: OFFSETS_SEGMENT_BYTES,
        segment_ms_max: None,
        flush: FlushPolicy::EveryAppend,
        retention_ms: None,
        retention_bytes: None,
        batch_cache_bytes_max: 1 << 20,
        message_bytes_max: 8 << 20,
        ..LogConfig::default()
    }
}

/// How an offsets partition is compacted.
pub fn offsets_compaction() -> CompactionConfig {
    CompactionConfig {
        delete_retention_ms: TOMBSTONE_RETENTION_MS,
        ..CompactionConfig::default()
    }
}

/// What one append writes: offset records (encoded at write time), or a batch of membership
/// records encoded by its writer (`super::metadata_record`, `super::consumer::records`).
enum Pending {
    Offsets(Vec<OffsetRecord>),
    Membership(ValidatedBatch),
}

impl Pending {
    fn records(&self) -> u64 {
        match self {
            Pending::Offsets(records) => records.len() as u64,
            Pending::Membership(_) => 1,
        }
    }
}

type Waiter = (Pending, oneshot::Sender<Result<(), ErrorCode>>);

/// The latest membership records of a replayed log (`None`: deleted): classic groups by id,
/// KIP-848 groups' records by key bytes.
#[derive(Debug, Default)]
pub struct Memberships {
    /// Each classic group's latest membership record.
    pub groups: HashMap<String, Option<GroupMetadata>>,
    /// Each KIP-848 record key's latest value.
    pub consumer: HashMap<bytes::Bytes, Option<bytes::Bytes>>,
}

/// One offsets partition's log with its group-commit queue and the live entries (for snapshots).
pub struct OffsetsLog<S: Storage> {
    partition: PartitionIndex,
    log: Mutex<Option<PartitionLog<S>>>,
    queue: RefCell<Vec<Waiter>>,
    live: RefCell<HashMap<OffsetKey, CommittedOffset>>,
    /// The memberships replayed at open, until the coordinator takes them.
    replayed: RefCell<Option<Memberships>>,
    /// Records appended since the journal last looked for a due clean.
    since_clean_check: Cell<u64>,
    /// Whether a clean is running (one at a time).
    cleaning: Cell<bool>,
    clock: Rc<dyn Clock>,
}

impl<S: Storage> OffsetsLog<S> {
    /// Open (recovering) the log and replay it: returns the log and the live entries.
    pub async fn open(
        manager: &LogManager<S>,
        partition: PartitionIndex,
        clock: Rc<dyn Clock>,
    ) -> Result<Self, rill_engine::EngineError> {
        let mut log = manager
            .open_partition(
                TopicPartitionRef::new(OFFSETS_TOPIC, partition),
                offsets_log_config(),
                clock.clone(),
            )
            .await?;
        let (live, memberships, records) = replay(&mut log, partition).await?;
        tracing::info!(
            partition = partition.0,
            records,
            live = live.len(),
            "offsets log replayed"
        );
        Ok(OffsetsLog {
            partition,
            log: Mutex::new(Some(log)),
            queue: RefCell::new(Vec::new()),
            live: RefCell::new(live),
            replayed: RefCell::new(Some(memberships)),
            since_clean_check: Cell::new(records),
            cleaning: Cell::new(false),
            clock,
        })
    }

    /// The engine log, for a single node's read-only view of it (`crate::internal_topics::single_node`).
    pub fn engine_log(&self) -> &Mutex<Option<PartitionLog<S>>> {
        &self.log
    }

    /// The live (latest, not deleted) entries.
    pub fn live(&self) -> Vec<(OffsetKey, CommittedOffset)> {
        self.live
            .borrow()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The memberships replayed at open (once; later calls get none).
    pub fn take_memberships(&self) -> Memberships {
        self.replayed.borrow_mut().take().unwrap_or_default()
    }

    /// Append `records` durably; concurrent callers share one fdatasync.
    pub async fn append(&self, records: Vec<OffsetRecord>) -> Result<(), ErrorCode> {
        if records.is_empty() {
            return Ok(());
        }
        self.append_pending(Pending::Offsets(records)).await
    }

    /// Append a batch of membership records durably (with the offsets' group commit).
    pub async fn append_membership(&self, batch: ValidatedBatch) -> Result<(), ErrorCode> {
        self.append_pending(Pending::Membership(batch)).await
    }

    async fn append_pending(&self, pending: Pending) -> Result<(), ErrorCode> {
        let (tx, rx) = oneshot::channel();
        self.queue.borrow_mut().push((pending, tx));
        {
            let mut guard = self.log.lock().await;
            let waiters = std::mem::take(&mut *self.queue.borrow_mut());
            if !waiters.is_empty() {
                match guard.as_mut() {
                    Some(log) => self.write(log, waiters).await,
                    None => fail(waiters),
                }
            }
        }
        let result = rx.await.unwrap_or(Err(ErrorCode::KafkaStorageError));
        if self.since_clean_check.get() >= CLEAN_CHECK_AFTER_RECORDS && !self.cleaning.get() {
            self.clean().await;
        }
        result
    }

    async fn write(&self, log: &mut PartitionLog<S>, waiters: Vec<Waiter>) {
        let now = self.clock.now();
        let mut appended = Vec::with_capacity(waiters.len());
        for (pending, tx) in waiters {
            let count = pending.records();
            let (batch, offsets) = match pending {
                Pending::Offsets(records) => (encode_batch(&records, now), records),
                Pending::Membership(batch) => (batch, Vec::new()),
            };
            match log.append(batch, now).await {
                Ok(_) => appended.push(((offsets, count), tx)),
                Err(e) => {
                    tracing::error!(partition = self.partition.0, error = %e, "offsets append failed");
                    let _ = tx.send(Err(e.kafka_error_code()));
                }
            }
        }
        if appended.is_empty() {
            return;
        }
        if let Err(e) = log.flush().await {
            tracing::error!(partition = self.partition.0, error = %e, "offsets flush failed");
            fail(appended);
            return;
        }
        for ((offsets, count), tx) in appended {
            self.since_clean_check
                .set(self.since_clean_check.get() + count);
            let mut live = self.live.borrow_mut();
            for record in offsets {
                apply(&mut live, record);
            }
            drop(live);
            let _ = tx.send(Ok(()));
        }
    }

    /// Runs a clean if one is due. The log is locked only to plan it and to swap each cleaned
    /// segment in; commits go on while the cleaned segments are written.
    async fn clean(&self) {
        self.cleaning.set(true);
        self.since_clean_check.set(0);
        if let Err(e) = self.clean_steps().await {
            tracing::warn!(partition = self.partition.0, error = %e, "offsets log clean failed");
        }
        self.cleaning.set(false);
    }

    async fn clean_steps(&self) -> Result<(), rill_engine::EngineError> {
        let (config, now) = (offsets_compaction(), self.clock.now());
        let planned = match self.log.lock().await.as_mut() {
            Some(log) => log.plan_clean(&config, now).await?,
            None => return Ok(()),
        };
        let Some(mut job) = planned else {
            return Ok(());
        };
        job.build_offset_map(&KafkaRecords, &Unpaced, CLEAN_MAP_BYTES)
            .await?;
        for g in 0..job.group_count() {
            let group = job.clean_group(g, &KafkaRecords, &Unpaced).await?;
            let mut guard = self.log.lock().await;
            let Some(log) = guard.as_mut() else {
                return Ok(());
            };
            if !log.install_cleaned(&group).await? {
                return Ok(());
            }
        }
        if let Some(log) = self.log.lock().await.as_mut() {
            log.finish_clean(job.checkpoint()).await?;
            tracing::info!(partition = self.partition.0, stats = ?job.stats(), bytes = log.size_bytes(), "offsets log cleaned");
        }
        Ok(())
    }

    /// The log's start offset (moves forward when the journal compacts).
    pub async fn log_start_offset(&self) -> Option<i64> {
        self.log
            .lock()
            .await
            .as_ref()
            .map(|l| l.log_start_offset().0)
    }

    /// Bytes of the log's segments (what a replay reads at most).
    pub async fn size_bytes(&self) -> Option<u64> {
        self.log.lock().await.as_ref().map(|l| l.size_bytes())
    }

    /// Flush and close the log (shutdown).
    pub async fn close(&self) {
        let mut guard = self.log.lock().await;
        if let Some(log) = guard.take() {
            if let Err(e) = log.close().await {
                tracing::error!(partition = self.partition.0, error = %e, "closing offsets log");
            }
        }
    }
}

/// What a replay found: the live offsets, the latest memberships, and how many records it read.
type Replayed = (HashMap<OffsetKey, CommittedOffset>, Memberships, u64);

/// Reads the log from its start: the live entries, the memberships and the records read.
async fn replay<S: Storage>(
    log: &mut PartitionLog<S>,
    partition: PartitionIndex,
) -> Result<Replayed, rill_engine::EngineError> {
    let mut live = HashMap::new();
    let mut memberships = Memberships::default();
    let mut records = 0u64;
    let mut from = log.log_start_offset();
    while from < log.high_watermark() {
        let read = log.read(from, REPLAY_READ_BYTES).await?;
        let mut next = from;
        for chunk in read.chunks {
            // A batch compaction emptied has no record but still moves the position on.
            for batch in rill_protocol::record::batches(chunk.clone()).map_while(Result::ok) {
                next = next.max(batch.last_offset().plus(1));
            }
            let decoded = decode_log_chunk(chunk).map_err(|e| {
                tracing::error!(partition = partition.0, error = %e, "offsets log record unreadable");
                rill_engine::EngineError::CorruptBatch(e.to_string())
            })?;
            for (offset, record) in decoded {
                if offset < from {
                    continue; // before the log start (inside the first batch read)
                }
                records += 1;
                match record {
                    LogRecord::Offset(record) => apply(&mut live, record),
                    LogRecord::Group(group, value) => {
                        memberships.groups.insert(group, value);
                    }
                    LogRecord::Consumer(key, value) => {
                        memberships.consumer.insert(key, value);
                    }
                }
            }
        }
        if next == from {
            break; // nothing more readable below the high watermark
        }
        from = next;
    }
    Ok((live, memberships, records))
}

/// Applies one record to the live entries (a null value deletes).
pub(super) fn apply(live: &mut HashMap<OffsetKey, CommittedOffset>, record: OffsetRecord) {
    match record.value {
        Some(value) => {
            live.insert(record.key, value);
        }
        None => {
            live.remove(&record.key);
        }
    }
}

fn fail<T>(waiters: Vec<(T, oneshot::Sender<Result<(), ErrorCode>>)>) {
    for (_, tx) in waiters {
        let _ = tx.send(Err(ErrorCode::KafkaStorageError));
    }
}

/// The offsets partitions one shard owns.
pub struct LogJournal<S: Storage> {
    logs: HashMap<PartitionIndex, Rc<OffsetsLog<S>>>,
}

impl<S: Storage> LogJournal<S> {
    /// Open and replay `partitions` under `manager`'s directory.
    pub async fn open(
        manager: &LogManager<S>,
        partitions: &[PartitionIndex],
        clock: Rc<dyn Clock>,
    ) -> Result<Self, rill_engine::EngineError> {
        let mut logs = HashMap::new();
        for &p in partitions {
            let log = OffsetsLog::open(manager, p, clock.clone()).await?;
            logs.insert(p, Rc::new(log));
        }
        Ok(LogJournal { logs })
    }

    /// Every live entry of every owned partition (to rebuild the groups).
    pub fn live(&self) -> Vec<(OffsetKey, CommittedOffset)> {
        self.logs.values().flat_map(|l| l.live()).collect()
    }

    /// Each owned partition's log.
    pub fn logs(&self) -> impl Iterator<Item = (PartitionIndex, &Rc<OffsetsLog<S>>)> {
        self.logs.iter().map(|(p, log)| (*p, log))
    }

    /// Close every log.
    pub async fn close(&self) {
        for log in self.logs.values() {
            log.close().await;
        }
    }
}

impl<S: Storage> LogJournal<S> {
    /// `group_id`'s offsets partition's log, if this shard owns it.
    fn log_of(&self, group_id: &str) -> Result<Rc<OffsetsLog<S>>, ErrorCode> {
        self.logs
            .get(&offsets_partition(group_id))
            .cloned()
            .ok_or_else(|| {
                // Routing sent a group here whose partition this shard does not own: a bug.
                tracing::error!(
                    group = group_id,
                    "offsets partition not owned by this shard"
                );
                ErrorCode::CoordinatorNotAvailable
            })
    }
}

impl<S: Storage> Journal for LogJournal<S> {
    async fn append(&self, group_id: &str, records: Vec<OffsetRecord>) -> Result<(), ErrorCode> {
        self.log_of(group_id)?.append(records).await
    }

    fn writes_membership(&self) -> bool {
        true
    }

    async fn append_group(
        &self,
        group_id: &str,
        value: Option<GroupMetadata>,
    ) -> Result<(), ErrorCode> {
        let log = self.log_of(group_id)?;
        let now = log.clock.now();
        let batch = super::metadata_record::encode_group_batch(group_id, value.as_ref(), now);
        log.append_membership(batch).await
    }

    async fn append_consumer(
        &self,
        group_id: &str,
        records: Vec<super::consumer::records::RawRecord>,
    ) -> Result<(), ErrorCode> {
        let log = self.log_of(group_id)?;
        let now = log.clock.now();
        match super::consumer::records::encode_batch(records, now) {
            Some(batch) => log.append_membership(batch).await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
