//! An in-memory [`Broker`] for handler unit tests: real topic registry (in a temp dir), partitions
//! as vectors of batches, a virtual clock whose timer returns at once after moving the clock on.
//! No runtime, no sockets.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rill_protocol::ErrorCode;

use super::Broker;
use crate::config::BrokerConfig;
use crate::group::coordinator::GroupCoordinator;
use crate::group::journal::MemJournal;
use crate::group::ops::GroupListing;
use crate::group::{GroupOp, GroupReply};
use crate::partition::ops::{PartitionOp, PartitionReply};
use crate::topics::TopicRegistry;
use crate::txn::coordinator::TxnCoordinator;
use crate::txn::journal::MemTxnJournal;
use crate::txn::ops::{TxnListFilter, TxnListing, TxnOp, TxnReply};
use rill_engine::Positions;
use rill_types::batch::RecordBatchHeader;
use rill_types::{Offset, TimestampMs, TopicPartition, TopicPartitionRef};

pub use crate::test_batches::batch;

/// Each partition's batches with their base offsets.
type Logs = HashMap<TopicPartition, Vec<(i64, Bytes)>>;

/// In-memory broker.
pub struct FakeBroker {
    config: BrokerConfig,
    topics: Arc<TopicRegistry>,
    _dir: tempfile::TempDir,
    logs: RefCell<Logs>,
    /// Log starts moved by DeleteRecords (0 otherwise).
    log_starts: RefCell<HashMap<TopicPartition, i64>>,
    /// Group coordinator over an in-memory journal (one shard owns every group).
    pub groups: GroupCoordinator<MemJournal>,
    /// The virtual clock: `clock_origin` plus the time slept so far.
    clock_origin: Instant,
    slept: Cell<Duration>,
    /// Transaction coordinator over an in-memory journal (one shard owns every id).
    pub txns: TxnCoordinator<MemTxnJournal>,
    /// Where each appended batch's bytes were when the owner got them (to tell copies apart).
    pub appended_at: RefCell<Vec<usize>>,
    /// The Fetch budget (`rill.shard.fetch.bytes.max`), if a test sets one.
    pub fetch_budget: Option<crate::memory_budget::ByteBudget>,
    /// Topic settings parsed per config change, as a shard's partition table caches them.
    pub settings: crate::config::topic::cache::SettingsCache,
}

impl Default for FakeBroker {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeBroker {
    /// Defaults, empty registry.
    pub fn new() -> Self {
        Self::with_config(|_| {})
    }

    /// Defaults adjusted by `edit`.
    pub fn with_config(edit: impl FnOnce(&mut BrokerConfig)) -> Self {
        Self::with_journals(edit, MemJournal::default(), MemTxnJournal::default())
    }

    /// Defaults, with coordinators that write what a cluster node's write: group membership
    /// too, and every offset, membership and transaction record encoded as the on-disk logs
    /// hold them (and decoded back), so a value no record can hold fails here as it would on
    /// disk. What the request-path fuzz targets run against.
    pub fn writing_records() -> Self {
        let journal = MemJournal::default();
        journal.membership.set(true);
        journal.encodes.set(true);
        let txn_journal = MemTxnJournal::default();
        txn_journal.encodes.set(true);
        Self::with_journals(|_| {}, journal, txn_journal)
    }

    fn with_journals(
        edit: impl FnOnce(&mut BrokerConfig),
        journal: MemJournal,
        txn_journal: MemTxnJournal,
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = BrokerConfig::defaults();
        config.data_dir = dir.path().to_path_buf(); // where free disk space is checked
                                                    // Rebalances complete as soon as every member joined (group unit tests cover the delay).
        config.group.initial_rebalance_delay_ms = 0;
        edit(&mut config);
        let group_config = config.group;
        Self {
            config,
            topics: Arc::new(TopicRegistry::open(dir.path()).expect("registry")),
            _dir: dir,
            logs: RefCell::new(HashMap::new()),
            log_starts: RefCell::new(HashMap::new()),
            groups: GroupCoordinator::new(
                journal,
                std::rc::Rc::new(rill_engine::io::SystemClock),
                group_config,
                Vec::new(),
            ),
            clock_origin: Instant::now(),
            slept: Cell::new(Duration::ZERO),
            appended_at: RefCell::default(),
            fetch_budget: None,
            settings: Default::default(),
            txns: TxnCoordinator::new(
                txn_journal,
                std::rc::Rc::new(rill_engine::io::SystemClock),
                config_txn(),
                Vec::new(),
            ),
        }
    }

    /// Whole batches from `from` up to `max_bytes`, at least one (as the engine reads).
    fn read(
        &self,
        tp: TopicPartitionRef<'_>,
        from: Offset,
        max_bytes: usize,
        positions: Positions,
    ) -> PartitionReply {
        if from < positions.log_start() || from > positions.log_end() {
            return PartitionReply::Error(ErrorCode::OffsetOutOfRange);
        }
        let logs = self.logs.borrow();
        let mut total = 0usize;
        let chunks = logs
            .get(tp.key())
            .map(|l| {
                l.iter()
                    .filter(|(b, batch)| b + last_delta(batch) >= from.0)
                    .take_while(|(_, batch)| {
                        let first = total == 0;
                        total += batch.len();
                        first || total <= max_bytes
                    })
                    .map(|(_, batch)| batch.clone())
                    .collect()
            })
            .unwrap_or_default();
        PartitionReply::Read {
            positions,
            chunks,
            aborted: Vec::new(),
        }
    }

    /// Append directly (test setup).
    pub fn append(&self, tp: TopicPartitionRef<'_>, batch: Bytes) -> i64 {
        let mut logs = self.logs.borrow_mut();
        let log = logs.entry(tp.owned()).or_default();
        let base = log.last().map_or(0, |(b, batch)| b + 1 + last_delta(batch));
        let mut owned = BytesMut::from(&batch[..]);
        header_mut(&mut owned).base_offset.set(base);
        log.push((base, owned.freeze()));
        base
    }

    /// Bytes of a partition's batches.
    pub fn log_bytes(&self, tp: TopicPartitionRef<'_>) -> u64 {
        let logs = self.logs.borrow();
        logs.get(tp.key())
            .map_or(0, |l| l.iter().map(|(_, batch)| batch.len() as u64).sum())
    }

    /// Next offset of a partition.
    pub fn log_end(&self, tp: TopicPartitionRef<'_>) -> i64 {
        let logs = self.logs.borrow();
        logs.get(tp.key())
            .and_then(|l| l.last())
            .map_or(0, |(b, batch)| b + 1 + last_delta(batch))
    }

    fn positions(&self, tp: TopicPartitionRef<'_>) -> Positions {
        let end = Offset(self.log_end(tp));
        let start = Offset(self.log_starts.borrow().get(tp.key()).copied().unwrap_or(0));
        // Everything appended is visible and durable at once.
        Positions::recovered(start, end, true)
    }

    /// ListOffsets by timestamp: the first batch whose max timestamp reaches `timestamp`.
    fn offset_for_timestamp(
        &self,
        tp: TopicPartitionRef<'_>,
        timestamp: TimestampMs,
        positions: Positions,
    ) -> PartitionReply {
        let logs = self.logs.borrow();
        let found = logs.get(tp.key()).and_then(|l| {
            l.iter()
                .find(|(_, batch)| max_timestamp(batch) >= timestamp.0)
                .map(|(b, batch)| (Offset(*b), TimestampMs(max_timestamp(batch))))
        });
        PartitionReply::OffsetForTimestamp(found, positions)
    }

    /// ListOffsets -3: the first record holding the largest timestamp.
    fn max_timestamp(&self, tp: TopicPartitionRef<'_>, positions: Positions) -> PartitionReply {
        let logs = self.logs.borrow();
        let found = logs.get(tp.key()).and_then(|l| {
            let max = l.iter().map(|(_, batch)| max_timestamp(batch)).max()?;
            let (_, batch) = l.iter().find(|(_, batch)| max_timestamp(batch) == max)?;
            crate::partition::timestamp_lookup::first_record_at_or_after(batch, TimestampMs(max))
        });
        PartitionReply::OffsetForTimestamp(found, positions)
    }

    /// DeleteRecords: moves the log start (never backwards) within the log end.
    fn delete_records(&self, tp: TopicPartitionRef<'_>, before: Offset) -> PartitionReply {
        let positions = self.positions(tp);
        let end = positions.log_end();
        let target = if before.0 == -1 { end } else { before };
        if target.0 < 0 || target > end {
            return PartitionReply::Error(ErrorCode::OffsetOutOfRange);
        }
        let start = target.max(positions.log_start());
        self.log_starts.borrow_mut().insert(tp.owned(), start.0);
        PartitionReply::Offsets(self.positions(tp))
    }
}

fn header(batch: &[u8]) -> &RecordBatchHeader {
    RecordBatchHeader::view(batch).expect("test batches hold a header")
}

fn header_mut(batch: &mut [u8]) -> &mut RecordBatchHeader {
    RecordBatchHeader::view_mut(batch).expect("test batches hold a header")
}

fn last_delta(batch: &[u8]) -> i64 {
    i64::from(header(batch).last_offset_delta.get())
}

fn max_timestamp(batch: &[u8]) -> i64 {
    header(batch).max_ts().0
}

impl Broker for FakeBroker {
    fn config(&self) -> &BrokerConfig {
        &self.config
    }

    fn topics(&self) -> &Arc<TopicRegistry> {
        &self.topics
    }

    fn fetch_budget(&self) -> Option<&crate::memory_budget::ByteBudget> {
        self.fetch_budget.as_ref()
    }

    fn topic_settings(
        &self,
        name: &str,
        meta: &Arc<crate::topics::TopicMeta>,
    ) -> crate::config::topic::cache::Settled {
        let parse = || {
            crate::config::topic::TopicSettings::of_topic(&self.config, &self.topics, &meta.configs)
        };
        self.settings.settings(&self.topics, name, meta, parse)
    }

    async fn partition(&self, tp: TopicPartitionRef<'_>, op: PartitionOp) -> PartitionReply {
        let positions = self.positions(tp);
        match op {
            PartitionOp::Append { batch, .. } => {
                let at = batch.as_bytes().as_ptr() as usize;
                self.appended_at.borrow_mut().push(at);
                let base = self.append(tp, batch.freeze());
                PartitionReply::Appended {
                    base_offset: Offset(base),
                    log_append_time: TimestampMs::NONE,
                    log_start_offset: Offset(0),
                }
            }
            PartitionOp::Read {
                from, max_bytes, ..
            } => self.read(tp, from, max_bytes, positions),
            PartitionOp::Offsets => PartitionReply::Offsets(positions),
            PartitionOp::TierOffsets => PartitionReply::TierOffsets {
                local_log_start: positions.log_start(),
                highest_tiered: None,
            },
            PartitionOp::LogSize => PartitionReply::LogSize {
                bytes: self.log_bytes(tp),
                positions,
            },
            PartitionOp::OffsetForTimestamp { timestamp } => {
                self.offset_for_timestamp(tp, timestamp, positions)
            }
            PartitionOp::MaxTimestamp => self.max_timestamp(tp, positions),
            PartitionOp::DeleteRecords { before } => self.delete_records(tp, before),
            // Nothing appends while a request runs here: a wait always lasts its whole time.
            PartitionOp::WaitForData { wait_ms, .. } => {
                self.sleep(Duration::from_millis(wait_ms)).await;
                PartitionReply::Waited
            }
            PartitionOp::Release => PartitionReply::Released,
            PartitionOp::WriteTxnMarker(marker) => {
                let now = TimestampMs(0);
                let bytes = rill_engine::control::encode_marker_batch(&marker, now);
                self.append(tp, Bytes::from(bytes));
                PartitionReply::MarkerWritten
            }
            PartitionOp::DescribeProducers => PartitionReply::Producers(Vec::new()),
            PartitionOp::Delete => {
                self.logs.borrow_mut().remove(tp.key());
                PartitionReply::Deleted
            }
            other => unreplicated(&other, positions),
        }
    }

    fn now(&self) -> Instant {
        self.clock_origin + self.slept.get()
    }

    async fn sleep(&self, duration: Duration) {
        self.slept.set(self.slept.get() + duration);
    }

    async fn group(&self, group_id: &str, op: GroupOp) -> GroupReply {
        self.groups.handle(group_id, op).await
    }

    async fn list_groups(&self) -> Vec<GroupListing> {
        self.groups.list()
    }

    async fn txn(&self, transactional_id: &str, op: TxnOp) -> TxnReply {
        self.txns.handle(transactional_id, op, self).await
    }

    async fn list_txns(&self, filter: TxnListFilter) -> Vec<TxnListing> {
        self.txns.list(&filter)
    }
}

/// The fake's transaction settings: Kafka's defaults.
fn config_txn() -> crate::txn::TxnConfig {
    crate::txn::TxnConfig::default()
}

/// A single unreplicated node's answer to replication's ops: no epochs recorded, no followers.
fn unreplicated(op: &PartitionOp, positions: rill_engine::Positions) -> PartitionReply {
    match op {
        PartitionOp::EndOffsetForEpoch { .. } => PartitionReply::EpochEnd(None, positions),
        _ => PartitionReply::Error(ErrorCode::NotLeaderOrFollower),
    }
}
