//! Where committed offsets become durable.
//!
//! [`LogJournal`] keeps one engine log per offsets partition this shard owns, under
//! `<data-dir>/__rill_groups/__consumer_offsets-<p>/`. An OffsetCommit is answered only after
//! its records are appended and fdatasync'ed (acks=all semantics). Commits that arrive while a
//! flush is in progress are appended together and share the next fdatasync (group commit).
//!
//! Startup replays each log from its log start. To keep that short the journal compacts: after
//! [`COMPACT_AFTER_RECORDS`] appended records it writes every live entry again as a snapshot,
//! then moves the log start to the snapshot (deleting the sealed segments below it), so replay
//! reads at most one snapshot plus what came after it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::lock::Mutex;
use rill_engine::io::{Clock, Storage};
use rill_engine::{FlushPolicy, LogConfig, LogManager, PartitionLog};

use super::offsets::{decode_chunk, encode_batch, CommittedOffset, OffsetKey, OffsetRecord};
use super::{offsets_partition, OFFSETS_TOPIC};
use rill_protocol::ErrorCode;

/// Records appended since the last snapshot before the journal compacts.
pub const COMPACT_AFTER_RECORDS: u64 = 10_000;
/// Records per batch when writing a snapshot.
const SNAPSHOT_BATCH_RECORDS: usize = 1_000;
/// Bytes read per step during replay.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// Durable storage of offset records.
#[allow(async_fn_in_trait)] // !Send futures are intended: thread-per-core.
pub trait Journal {
    /// Make `records` (all of `group_id`) durable; Err is a Kafka error code.
    async fn append(&self, group_id: &str, records: Vec<OffsetRecord>) -> Result<(), ErrorCode>;
}

/// A journal that keeps records in memory (unit tests): can be told to fail.
#[derive(Default)]
pub struct MemJournal {
    /// Everything appended, in order.
    pub records: RefCell<Vec<OffsetRecord>>,
    /// When set, appends fail with this code.
    pub fail_with: Cell<Option<ErrorCode>>,
}

impl Journal for MemJournal {
    async fn append(&self, _group_id: &str, records: Vec<OffsetRecord>) -> Result<(), ErrorCode> {
        if let Some(code) = self.fail_with.get() {
            return Err(code);
        }
        self.records.borrow_mut().extend(records);
        Ok(())
    }
}

/// The log configuration of an offsets partition: durable on every append, never deleted by
/// retention, small segments so compaction frees space.
pub fn offsets_log_config() -> LogConfig {
    LogConfig {
        segment_bytes_max: 8 << 20,
        segment_ms_max: None,
        flush: FlushPolicy::EveryAppend,
        retention_ms: None,
        retention_bytes: None,
        batch_cache_bytes_max: 1 << 20,
        message_bytes_max: 8 << 20,
        ..LogConfig::default()
    }
}

type Waiter = (Vec<OffsetRecord>, oneshot::Sender<Result<(), ErrorCode>>);

/// One offsets partition's log with its group-commit queue and the live entries (for snapshots).
pub struct OffsetsLog<S: Storage> {
    partition: i32,
    log: Mutex<Option<PartitionLog<S>>>,
    queue: RefCell<Vec<Waiter>>,
    live: RefCell<HashMap<OffsetKey, CommittedOffset>>,
    since_snapshot: Cell<u64>,
    clock: Rc<dyn Clock>,
}

impl<S: Storage> OffsetsLog<S> {
    /// Open (recovering) the log and replay it: returns the log and the live entries.
    pub async fn open(
        manager: &LogManager<S>,
        partition: i32,
        clock: Rc<dyn Clock>,
    ) -> Result<Self, rill_engine::EngineError> {
        let mut log = manager
            .open_partition(
                OFFSETS_TOPIC,
                partition,
                offsets_log_config(),
                clock.clone(),
            )
            .await?;
        let mut live = HashMap::new();
        let mut records = 0u64;
        let mut from = log.log_start_offset();
        while from < log.high_watermark() {
            let read = log.read(from, REPLAY_READ_BYTES).await?;
            let mut next = from;
            for chunk in read.chunks {
                let decoded = decode_chunk(chunk).map_err(|e| {
                    tracing::error!(partition, error = %e, "offsets log record unreadable");
                    rill_engine::EngineError::CorruptBatch(e.to_string())
                })?;
                for (offset, record) in decoded {
                    next = next.max(offset.plus(1));
                    if offset < from {
                        continue; // before the log start (inside the first batch read)
                    }
                    records += 1;
                    apply(&mut live, record);
                }
            }
            if next == from {
                break; // nothing more readable below the high watermark
            }
            from = next;
        }
        tracing::info!(
            partition,
            records,
            live = live.len(),
            "offsets log replayed"
        );
        Ok(OffsetsLog {
            partition,
            log: Mutex::new(Some(log)),
            queue: RefCell::new(Vec::new()),
            live: RefCell::new(live),
            since_snapshot: Cell::new(records),
            clock,
        })
    }

    /// The live (latest, not deleted) entries.
    pub fn live(&self) -> Vec<(OffsetKey, CommittedOffset)> {
        self.live
            .borrow()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Append `records` durably; concurrent callers share one fdatasync.
    pub async fn append(&self, records: Vec<OffsetRecord>) -> Result<(), ErrorCode> {
        if records.is_empty() {
            return Ok(());
        }
        let (tx, rx) = oneshot::channel();
        self.queue.borrow_mut().push((records, tx));
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
        rx.await.unwrap_or(Err(ErrorCode::KafkaStorageError))
    }

    async fn write(&self, log: &mut PartitionLog<S>, waiters: Vec<Waiter>) {
        let now = self.clock.now();
        let mut appended = Vec::with_capacity(waiters.len());
        for (records, tx) in waiters {
            let batch = encode_batch(&records, now.0);
            match log.append(batch, now).await {
                Ok(_) => appended.push((records, tx)),
                Err(e) => {
                    tracing::error!(partition = self.partition, error = %e, "offsets append failed");
                    let _ = tx.send(Err(e.kafka_error_code()));
                }
            }
        }
        if appended.is_empty() {
            return;
        }
        if let Err(e) = log.flush().await {
            tracing::error!(partition = self.partition, error = %e, "offsets flush failed");
            fail(appended);
            return;
        }
        for (records, tx) in appended {
            self.since_snapshot
                .set(self.since_snapshot.get() + records.len() as u64);
            let mut live = self.live.borrow_mut();
            for record in records {
                apply(&mut live, record);
            }
            drop(live);
            let _ = tx.send(Ok(()));
        }
        if self.since_snapshot.get() >= COMPACT_AFTER_RECORDS {
            if let Err(e) = self.compact(log).await {
                tracing::error!(partition = self.partition, error = %e, "offsets compaction failed");
            }
        }
    }

    /// Rewrite the live entries, then drop everything before them.
    async fn compact(&self, log: &mut PartitionLog<S>) -> Result<(), rill_engine::EngineError> {
        let now = self.clock.now();
        let snapshot_start = log.log_end_offset();
        let entries: Vec<OffsetRecord> = self
            .live
            .borrow()
            .iter()
            .map(|(key, value)| OffsetRecord {
                key: key.clone(),
                value: Some(value.clone()),
            })
            .collect();
        for chunk in entries.chunks(SNAPSHOT_BATCH_RECORDS) {
            log.append(encode_batch(chunk, now.0), now).await?;
        }
        log.flush().await?;
        let start = log.delete_records_before(snapshot_start).await?;
        self.since_snapshot.set(entries.len() as u64);
        tracing::info!(
            partition = self.partition,
            live = entries.len(),
            log_start = start.0,
            "offsets log compacted"
        );
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

    /// Records replayed at open or appended since the last snapshot.
    pub fn records_since_snapshot(&self) -> u64 {
        self.since_snapshot.get()
    }

    /// Flush and close the log (shutdown).
    pub async fn close(&self) {
        let mut guard = self.log.lock().await;
        if let Some(log) = guard.take() {
            if let Err(e) = log.close().await {
                tracing::error!(partition = self.partition, error = %e, "closing offsets log");
            }
        }
    }
}

fn apply(live: &mut HashMap<OffsetKey, CommittedOffset>, record: OffsetRecord) {
    match record.value {
        Some(value) => {
            live.insert(record.key, value);
        }
        None => {
            live.remove(&record.key);
        }
    }
}

fn fail(waiters: Vec<Waiter>) {
    for (_, tx) in waiters {
        let _ = tx.send(Err(ErrorCode::KafkaStorageError));
    }
}

/// The offsets partitions one shard owns.
pub struct LogJournal<S: Storage> {
    logs: HashMap<i32, Rc<OffsetsLog<S>>>,
}

impl<S: Storage> LogJournal<S> {
    /// Open and replay `partitions` under `manager`'s directory.
    pub async fn open(
        manager: &LogManager<S>,
        partitions: &[i32],
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

    /// Close every log.
    pub async fn close(&self) {
        for log in self.logs.values() {
            log.close().await;
        }
    }
}

impl<S: Storage> Journal for LogJournal<S> {
    async fn append(&self, group_id: &str, records: Vec<OffsetRecord>) -> Result<(), ErrorCode> {
        let Some(log) = self.logs.get(&offsets_partition(group_id)).cloned() else {
            // Routing sent a group here whose partition this shard does not own: a bug.
            tracing::error!(
                group = group_id,
                "offsets partition not owned by this shard"
            );
            return Err(ErrorCode::CoordinatorNotAvailable);
        };
        log.append(records).await
    }
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
