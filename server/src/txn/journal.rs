//! Where transaction metadata becomes durable on a single node (Kafka's `__transaction_state`;
//! a cluster writes it to that replicated topic instead: [`super::replicated`]).
//!
//! [`TxnStateLog`] keeps one engine log per state-log partition this shard owns, under
//! `<data-dir>/__rill_txn/__transaction_state-<p>/`. A transition is installed (and its
//! request answered) only after its record is appended and fdatasync'ed; records that arrive
//! while a flush is in progress share the next fdatasync (group commit).
//!
//! Start-up replays each log from its log start. To keep that short the log compacts: after
//! [`COMPACT_AFTER_RECORDS`] records it writes every live entry again as a snapshot, then moves
//! the log start to the snapshot (deleting the sealed segments below it).
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
use rill_engine::io::{Clock, Storage};
use rill_engine::{EngineError, FlushPolicy, LogConfig, LogManager, Offset, PartitionLog};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TimestampMs, TopicPartitionRef};

use super::record::{decode_chunk, encode_batch, TxnRecord};
use super::state::TxnMetadata;
use super::{txn_partition, TXN_TOPIC};

/// Records appended since the last snapshot before the log compacts.
pub const COMPACT_AFTER_RECORDS: u64 = 10_000;
/// Records per batch when writing a snapshot.
const SNAPSHOT_BATCH_RECORDS: usize = 500;
/// Bytes read per step during replay.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// Durable storage of transaction metadata.
#[allow(async_fn_in_trait)] // !Send futures are intended: thread-per-core.
pub trait TxnJournal {
    /// Make `record` durable; `Err` is the Kafka error to answer with.
    async fn append(&self, record: TxnRecord) -> Result<(), ErrorCode>;

    /// Whether `transactional_id`'s requests may be served here now: a replicated journal
    /// answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS (`crate::internal_topics::replicated`).
    fn ready(&self, _transactional_id: &str) -> Result<(), ErrorCode> {
        Ok(())
    }

    /// The coordinator epoch `transactional_id`'s markers carry, so that partitions refuse a
    /// deposed coordinator's: 0 on a single node, the state-log partition's leader epoch (as
    /// loaded) in a cluster.
    fn coordinator_epoch(&self, _transactional_id: &str) -> i32 {
        0
    }
}

/// A journal in memory (unit tests): can be told to fail.
#[derive(Default)]
pub struct MemTxnJournal {
    /// Everything appended, in order.
    pub records: RefCell<Vec<TxnRecord>>,
    /// When set, appends fail with this code.
    pub fail_with: Cell<Option<ErrorCode>>,
    /// When set, requests are refused with this code (a replicated journal not loaded here).
    pub not_ready: Cell<Option<ErrorCode>>,
    /// The coordinator epoch markers carry.
    pub epoch: Cell<i32>,
    /// When set, every record is encoded and decoded back as the state log writes and replays
    /// it, so a value no record can hold fails here too (the request-path fuzz targets set it).
    pub encodes: Cell<bool>,
}

impl TxnJournal for MemTxnJournal {
    async fn append(&self, record: TxnRecord) -> Result<(), ErrorCode> {
        if let Some(code) = self.fail_with.get() {
            return Err(code);
        }
        if self.encodes.get() {
            let batch = encode_batch(std::slice::from_ref(&record), TimestampMs(0)).freeze();
            let decoded = decode_chunk(batch).expect("an encoded txn batch decodes");
            assert_eq!(decoded.len(), 1, "one record in, one out");
            assert_eq!(decoded[0].1, record, "transaction records round-trip");
        }
        self.records.borrow_mut().push(record);
        Ok(())
    }

    fn ready(&self, _transactional_id: &str) -> Result<(), ErrorCode> {
        self.not_ready.get().map_or(Ok(()), Err)
    }

    fn coordinator_epoch(&self, _transactional_id: &str) -> i32 {
        self.epoch.get()
    }
}

/// The log configuration of a state-log partition: durable on every append, never deleted by
/// retention, small segments so compaction frees space.
pub fn txn_log_config() -> LogConfig {
    LogConfig {
        segment_bytes_max: crate::internal_topics::TXN_SEGMENT_BYTES,
        segment_ms_max: None,
        flush: FlushPolicy::EveryAppend,
        retention_ms: None,
        retention_bytes: None,
        batch_cache_bytes_max: 1 << 20,
        message_bytes_max: 8 << 20,
        ..LogConfig::default()
    }
}

type Waiter = (TxnRecord, oneshot::Sender<Result<(), ErrorCode>>);

/// One state-log partition: its engine log, the group-commit queue and the live entries.
pub struct TxnPartitionLog<S: Storage> {
    partition: PartitionIndex,
    log: Mutex<Option<PartitionLog<S>>>,
    queue: RefCell<Vec<Waiter>>,
    live: RefCell<HashMap<String, TxnMetadata>>,
    since_snapshot: Cell<u64>,
    clock: Rc<dyn Clock>,
}

impl<S: Storage> TxnPartitionLog<S> {
    /// Open (recovering) the log and replay it into the live entries.
    pub async fn open(
        manager: &LogManager<S>,
        partition: PartitionIndex,
        clock: Rc<dyn Clock>,
    ) -> Result<Self, EngineError> {
        let mut log = manager
            .open_partition(
                TopicPartitionRef::new(TXN_TOPIC, partition),
                txn_log_config(),
                clock.clone(),
            )
            .await?;
        let mut live = HashMap::new();
        let records = replay(&mut log, partition, &mut live).await?;
        tracing::info!(
            partition = partition.0,
            records,
            live = live.len(),
            "transaction state log replayed"
        );
        Ok(TxnPartitionLog {
            partition,
            log: Mutex::new(Some(log)),
            queue: RefCell::new(Vec::new()),
            live: RefCell::new(live),
            since_snapshot: Cell::new(records),
            clock,
        })
    }

    /// The engine log, for a single node's read-only view of it (`crate::internal_topics::single_node`).
    pub fn engine_log(&self) -> &Mutex<Option<PartitionLog<S>>> {
        &self.log
    }

    /// The live entries.
    pub fn live(&self) -> Vec<(String, TxnMetadata)> {
        let live = self.live.borrow();
        live.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Append `record` durably; concurrent callers share one fdatasync.
    pub async fn append(&self, record: TxnRecord) -> Result<(), ErrorCode> {
        let (tx, rx) = oneshot::channel();
        self.queue.borrow_mut().push((record, tx));
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
        let records: Vec<TxnRecord> = waiters.iter().map(|(r, _)| r.clone()).collect();
        let appended = log.append(encode_batch(&records, now), now).await;
        let flushed = match appended {
            Ok(_) => log.flush().await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = flushed {
            tracing::error!(partition = self.partition.0, error = %e, "transaction state log write failed");
            let code = e.kafka_error_code();
            for (_, tx) in waiters {
                let _ = tx.send(Err(code));
            }
            return;
        }
        self.since_snapshot
            .set(self.since_snapshot.get() + waiters.len() as u64);
        for (record, tx) in waiters {
            apply(&mut self.live.borrow_mut(), record);
            let _ = tx.send(Ok(()));
        }
        if self.since_snapshot.get() >= COMPACT_AFTER_RECORDS {
            if let Err(e) = self.compact(log).await {
                tracing::error!(partition = self.partition.0, error = %e, "transaction state log compaction failed");
            }
        }
    }

    /// Rewrite the live entries, then drop everything before them.
    async fn compact(&self, log: &mut PartitionLog<S>) -> Result<(), EngineError> {
        let now = self.clock.now();
        let snapshot_start = log.log_end_offset();
        let entries: Vec<TxnRecord> = self
            .live
            .borrow()
            .iter()
            .map(|(id, m)| TxnRecord {
                transactional_id: id.clone(),
                metadata: Some(m.clone()),
            })
            .collect();
        for chunk in entries.chunks(SNAPSHOT_BATCH_RECORDS) {
            log.append(encode_batch(chunk, now), now).await?;
        }
        log.flush().await?;
        let start = log.delete_records_before(snapshot_start).await?;
        self.since_snapshot.set(entries.len() as u64);
        tracing::info!(
            partition = self.partition.0,
            live = entries.len(),
            log_start = start.0,
            "transaction state log compacted"
        );
        Ok(())
    }

    /// Flush and close the log (shutdown).
    pub async fn close(&self) {
        let mut guard = self.log.lock().await;
        if let Some(log) = guard.take() {
            if let Err(e) = log.close().await {
                tracing::error!(partition = self.partition.0, error = %e, "closing transaction state log");
            }
        }
    }
}

/// Replays `log` from its start into `live`; returns the records read.
async fn replay<S: Storage>(
    log: &mut PartitionLog<S>,
    partition: PartitionIndex,
    live: &mut HashMap<String, TxnMetadata>,
) -> Result<u64, EngineError> {
    let mut records = 0u64;
    let mut from = log.log_start_offset().0;
    while from < log.high_watermark().0 {
        let read = log.read(Offset(from), REPLAY_READ_BYTES).await?;
        let mut next = from;
        for chunk in read.chunks {
            let decoded = decode_chunk(chunk).map_err(|e| {
                tracing::error!(partition = partition.0, error = %e, "transaction state log record unreadable");
                EngineError::CorruptBatch(e.to_string())
            })?;
            for (offset, record) in decoded {
                next = next.max(offset + 1);
                if offset >= from {
                    records += 1;
                    apply(live, record);
                }
            }
        }
        if next == from {
            break; // nothing more readable below the high watermark
        }
        from = next;
    }
    Ok(records)
}

/// Applies one record to the live entries (a null value deletes).
pub(super) fn apply(live: &mut HashMap<String, TxnMetadata>, record: TxnRecord) {
    match record.metadata {
        Some(m) => {
            live.insert(record.transactional_id, m);
        }
        None => {
            live.remove(&record.transactional_id);
        }
    }
}

fn fail(waiters: Vec<Waiter>) {
    for (_, tx) in waiters {
        let _ = tx.send(Err(ErrorCode::KafkaStorageError));
    }
}

/// The state-log partitions one shard owns.
pub struct TxnStateLog<S: Storage> {
    logs: HashMap<PartitionIndex, Rc<TxnPartitionLog<S>>>,
}

impl<S: Storage> TxnStateLog<S> {
    /// Open and replay `partitions` under `manager`'s directory.
    pub async fn open(
        manager: &LogManager<S>,
        partitions: &[PartitionIndex],
        clock: Rc<dyn Clock>,
    ) -> Result<Self, EngineError> {
        let mut logs = HashMap::new();
        for &p in partitions {
            let log = TxnPartitionLog::open(manager, p, clock.clone()).await?;
            logs.insert(p, Rc::new(log));
        }
        Ok(TxnStateLog { logs })
    }

    /// Every live entry of every owned partition.
    pub fn live(&self) -> Vec<(String, TxnMetadata)> {
        self.logs.values().flat_map(|l| l.live()).collect()
    }

    /// Each owned partition's log.
    pub fn logs(&self) -> impl Iterator<Item = (PartitionIndex, &Rc<TxnPartitionLog<S>>)> {
        self.logs.iter().map(|(p, log)| (*p, log))
    }

    /// Close every log.
    pub async fn close(&self) {
        for log in self.logs.values() {
            log.close().await;
        }
    }
}

impl<S: Storage> TxnJournal for TxnStateLog<S> {
    async fn append(&self, record: TxnRecord) -> Result<(), ErrorCode> {
        let partition = txn_partition(&record.transactional_id);
        let Some(log) = self.logs.get(&partition).cloned() else {
            // Routing sent an id here whose partition this shard does not own: a bug.
            tracing::error!(
                id = record.transactional_id,
                "state-log partition not owned by this shard"
            );
            return Err(ErrorCode::NotCoordinator);
        };
        log.append(record).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::state::TxnState;
    use crate::txn::{ProducerEpoch, ProducerId};
    use rill_engine::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
    use rill_types::TopicPartition;
    use std::path::PathBuf;

    fn metadata(epoch: i16) -> TxnMetadata {
        TxnMetadata {
            producer_id: ProducerId(7),
            last_producer_id: ProducerId::NONE,
            producer_epoch: ProducerEpoch(epoch),
            last_producer_epoch: ProducerEpoch::NONE,
            timeout_ms: 1000,
            state: TxnState::Ongoing,
            partitions: [TopicPartition::new("t", PartitionIndex(1))].into(),
            groups: Default::default(),
            start_ms: TimestampMs(5),
            last_update_ms: TimestampMs(6),
        }
    }

    fn record(id: &str, m: Option<TxnMetadata>) -> TxnRecord {
        TxnRecord {
            transactional_id: id.into(),
            metadata: m,
        }
    }

    #[test]
    fn appends_survive_a_crash_and_compaction_keeps_the_latest() {
        let storage = SimStorage::new(3, FaultConfig::default());
        let manager = LogManager::new(storage.clone(), PathBuf::from("/data/__rill_txn"));
        let clock: Rc<dyn Clock> = Rc::new(ManualClock::new(TimestampMs(1_000)));
        let log = block_on(TxnPartitionLog::open(
            &manager,
            PartitionIndex(0),
            clock.clone(),
        ))
        .unwrap();
        for epoch in 0..5 {
            block_on(log.append(record("a", Some(metadata(epoch))))).unwrap();
        }
        block_on(log.append(record("b", Some(metadata(0))))).unwrap();
        block_on(log.append(record("b", None))).unwrap();
        {
            let mut guard = block_on(log.log.lock());
            block_on(log.compact(guard.as_mut().unwrap())).unwrap();
        }
        block_on(log.append(record("c", Some(metadata(1))))).unwrap();
        drop(log);
        storage.crash();
        let log = block_on(TxnPartitionLog::open(&manager, PartitionIndex(0), clock)).unwrap();
        let mut live = log.live();
        live.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(
            live,
            vec![("a".into(), metadata(4)), ("c".into(), metadata(1))]
        );
        assert_eq!(log.since_snapshot.get(), 2, "replay starts at the snapshot");
    }
}
