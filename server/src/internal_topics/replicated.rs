//! Coordinator state on a replicated internal partition (issue 14): Kafka's design for
//! `__consumer_offsets` and `__transaction_state` in a cluster.
//!
//! - **One replication path.** The internal topics are created (on the first FindCoordinator)
//!   with `offsets.topic.replication.factor` / `transaction.state.log.replication.factor`
//!   replicas and live in the partition table like any partition (`<data-dir>/<topic>-<p>/`):
//!   followers copy them with the follower Fetch, the leader keeps the ISR and the high
//!   watermark (`crate::replication`). Only the topic registry leaves them out: clients see
//!   them in Metadata (marked `is_internal`, as Kafka lists them) but cannot write them
//!   ([`crate::cluster::view::ClusterView::internal_topic`] gives the table, the follower Fetch and
//!   Metadata their metadata).
//! - **Writes.** A coordinator writes its records as one batch through the partition actor with
//!   acks=all: answered once fdatasync'ed here and covered by the high watermark (every ISR
//!   member holds it), with `min.insync.replicas` in the ISR. A refused write becomes the
//!   coordinator error Kafka answers ([`coordinator_error`]): NOT_COORDINATOR once this broker
//!   no longer leads, COORDINATOR_NOT_AVAILABLE while the ISR is too small.
//! - **Loading.** The coordinator of a partition is the broker leading it. Every coordinator
//!   tick compares, per partition it owns on this shard, what it loaded with what the metadata
//!   image says ([`step`]): a partition it now leads is read from its log start to its log end
//!   (everything the new leader holds will be committed: a leader is never truncated) and its
//!   state installed; until then requests get COORDINATOR_LOAD_IN_PROGRESS ([`ready`]). A
//!   partition it no longer leads is dropped from memory and its requests get NOT_COORDINATOR.
//!   A new leader epoch reloads (another broker may have written in between). The epoch a
//!   partition was loaded at is the coordinator epoch (transaction markers carry it).
//! - **Compaction.** The topics are created with `cleanup.policy=compact`, so the shard's
//!   cleaner compacts every replica by record key, as any compacted topic (the record formats
//!   key by group/topic/partition, group (its membership, `crate::group::metadata_record`) or
//!   transactional id, and delete with a null value).
//!
//! A single node keeps its private, unreplicated logs (`crate::group::journal`,
//! `crate::txn::journal`): there is no leadership to follow there. Clients read them as the same
//! internal topics (`crate::internal_topics::single_node`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use rill_engine::io::Storage;
use rill_protocol::ErrorCode;
use rill_types::batch::ValidatedBatch;
use rill_types::{LeaderEpoch, Offset, PartitionIndex, TopicPartitionRef};

use crate::cluster::view::ClusterView;
use crate::partition::ops::{Acks, Isolation, PartitionOp, PartitionReply, INTERNAL_ACK_TIMEOUT};
use crate::partition::table::PartitionTable;

/// Bytes read per step while loading.
const LOAD_READ_BYTES: usize = 1 << 20;

/// Where one partition's coordinator state stands on this broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// Being read, for this leader epoch.
    Loading(LeaderEpoch),
    /// In memory, as of this leader epoch.
    Loaded(LeaderEpoch),
}

/// What a coordinator does for one partition now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing changed (or a load is still running).
    Stay,
    /// Drop what is in memory and read the partition, leading at this epoch.
    Load(LeaderEpoch),
    /// This broker no longer leads it: drop its state.
    Unload,
}

/// The step for a partition with `load`, which this broker leads at `leading` (`None`: it does
/// not lead it).
pub fn step(load: Option<Load>, leading: Option<LeaderEpoch>) -> Step {
    match (load, leading) {
        (Some(Load::Loading(_)), _) => Step::Stay, // it finishes first, then looks again
        (Some(Load::Loaded(at)), Some(now)) if at == now => Step::Stay,
        (_, Some(now)) => Step::Load(now),
        (Some(Load::Loaded(_)), None) => Step::Unload,
        (None, None) => Step::Stay,
    }
}

/// Whether a partition's requests may be served: NOT_COORDINATOR if this broker does not lead
/// it, COORDINATOR_LOAD_IN_PROGRESS until its state is loaded at the current epoch.
pub fn ready(load: Option<Load>, leading: Option<LeaderEpoch>) -> Result<(), ErrorCode> {
    match (load, leading) {
        (_, None) => Err(ErrorCode::NotCoordinator),
        (Some(Load::Loaded(at)), Some(now)) if at == now => Ok(()),
        _ => Err(ErrorCode::CoordinatorLoadInProgress),
    }
}

/// What a coordinator answers when its write was refused (Kafka's GroupMetadataManager and
/// TransactionStateManager do the same): the client then looks for the coordinator again or
/// retries.
pub fn coordinator_error(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend
        | ErrorCode::RequestTimedOut => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower
        | ErrorCode::FencedLeaderEpoch
        | ErrorCode::KafkaStorageError
        | ErrorCode::LeaderNotAvailable => ErrorCode::NotCoordinator,
        other => other,
    }
}

/// The partitions of one internal topic that this shard's coordinator owns, written and read
/// through the shard's partition table (see the module doc).
pub struct ReplicatedLog<S: Storage> {
    topic: &'static str,
    partitions: Vec<PartitionIndex>,
    table: Rc<PartitionTable<S>>,
    view: Arc<ClusterView>,
    loads: RefCell<HashMap<PartitionIndex, Load>>,
}

/// One read of a load: where it started and the batches it returned (the first may begin
/// before that).
pub type LoadedChunk = (Offset, Bytes);

impl<S: Storage + 'static> ReplicatedLog<S> {
    /// `topic`'s `partitions` (those whose coordinator runs on this shard, which also owns them
    /// in the partition table).
    pub fn new(
        topic: &'static str,
        partitions: Vec<PartitionIndex>,
        table: Rc<PartitionTable<S>>,
        view: Arc<ClusterView>,
    ) -> Self {
        ReplicatedLog {
            topic,
            partitions,
            table,
            view,
            loads: RefCell::new(HashMap::new()),
        }
    }

    /// This log's topic's partition `partition`.
    fn tp(&self, partition: PartitionIndex) -> TopicPartitionRef<'static> {
        TopicPartitionRef::new(self.topic, partition)
    }

    /// The epoch this broker leads `partition` at now, if it does.
    fn leading(&self, partition: PartitionIndex) -> Option<LeaderEpoch> {
        self.view.leading_epoch(self.tp(partition))
    }

    /// Whether `partition`'s requests may be served now ([`ready`]).
    pub fn ready(&self, partition: PartitionIndex) -> Result<(), ErrorCode> {
        let load = self.loads.borrow().get(&partition).copied();
        ready(load, self.leading(partition))
    }

    /// The leader epoch `partition` was loaded at (the coordinator epoch), if loaded.
    pub fn loaded_epoch(&self, partition: PartitionIndex) -> Option<LeaderEpoch> {
        match self.loads.borrow().get(&partition) {
            Some(Load::Loaded(epoch)) => Some(*epoch),
            _ => None,
        }
    }

    /// Appends `batch` to `partition` with acks=all; `Err` is the coordinator's answer.
    pub async fn append(
        &self,
        partition: PartitionIndex,
        batch: ValidatedBatch,
    ) -> Result<(), ErrorCode> {
        self.ready(partition)?;
        let op = PartitionOp::Append {
            batch,
            acks: Acks::All,
            ack_timeout: INTERNAL_ACK_TIMEOUT,
            txn_guard: None,
        };
        match self.table.call(self.tp(partition), op).await {
            PartitionReply::Appended { .. } => Ok(()),
            other => {
                let code = other.error_code();
                tracing::warn!(
                    topic = self.topic,
                    partition = partition.0,
                    ?code,
                    "coordinator write refused"
                );
                Err(coordinator_error(code))
            }
        }
    }

    /// Follows leadership of every partition (see the module doc): `unload` drops a
    /// partition's state from memory; `install` replaces it with what the log holds (the
    /// reads of [`Self::read_all`]) and returns how many records it applied.
    pub async fn follow(
        &self,
        install: impl Fn(PartitionIndex, Vec<LoadedChunk>) -> Result<u64, String>,
        unload: impl Fn(PartitionIndex),
    ) {
        for &partition in &self.partitions {
            let load = self.loads.borrow().get(&partition).copied();
            match step(load, self.leading(partition)) {
                Step::Stay => {}
                Step::Unload => {
                    unload(partition);
                    self.loads.borrow_mut().remove(&partition);
                    tracing::info!(
                        topic = self.topic,
                        partition = partition.0,
                        "no longer the coordinator: state dropped"
                    );
                }
                Step::Load(epoch) => self.load(partition, epoch, &install, &unload).await,
            }
        }
    }

    async fn load(
        &self,
        partition: PartitionIndex,
        epoch: LeaderEpoch,
        install: &impl Fn(PartitionIndex, Vec<LoadedChunk>) -> Result<u64, String>,
        unload: &impl Fn(PartitionIndex),
    ) {
        unload(partition);
        let topic = self.topic;
        self.loads
            .borrow_mut()
            .insert(partition, Load::Loading(epoch));
        let read = self.read_all(partition).await;
        let loaded = match read {
            Ok(_) if self.leading(partition) != Some(epoch) => Err("leadership moved".to_string()),
            Ok(chunks) => install(partition, chunks),
            Err(code) => Err(format!("reading failed: {code:?}")),
        };
        let mut loads = self.loads.borrow_mut();
        match loaded {
            Ok(records) => {
                loads.insert(partition, Load::Loaded(epoch));
                tracing::info!(
                    topic,
                    partition = partition.0,
                    epoch = epoch.0,
                    records,
                    "coordinator state loaded"
                );
            }
            Err(why) => {
                // Looked at again on the next tick.
                loads.remove(&partition);
                drop(loads);
                unload(partition);
                tracing::info!(
                    topic,
                    partition = partition.0,
                    epoch = epoch.0,
                    why,
                    "coordinator state not loaded"
                );
            }
        }
    }

    /// Every batch of `partition` from its log start to its log end.
    async fn read_all(&self, partition: PartitionIndex) -> Result<Vec<LoadedChunk>, ErrorCode> {
        let mut from = match self
            .table
            .call(self.tp(partition), PartitionOp::Offsets)
            .await
        {
            PartitionReply::Offsets(positions) => positions.log_start(),
            other => return Err(other.error_code()),
        };
        let mut out = Vec::new();
        loop {
            let op = PartitionOp::Read {
                from,
                max_bytes: LOAD_READ_BYTES,
                isolation: Isolation::Replica,
            };
            let (positions, chunks) = match self.table.call(self.tp(partition), op).await {
                PartitionReply::Read {
                    positions, chunks, ..
                } => (positions, chunks),
                other => return Err(other.error_code()),
            };
            let mut next = from;
            for chunk in chunks {
                // A batch compaction emptied has no record but still moves the position on.
                for batch in rill_protocol::record::batches(chunk.clone()).map_while(Result::ok) {
                    next = next.max(batch.last_offset().plus(1));
                }
                out.push((from, chunk));
            }
            if next == from || next >= positions.log_end() {
                return Ok(out);
            }
            from = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::internal_topics::{offsets_topic_configs, txn_topic_configs};

    const E1: LeaderEpoch = LeaderEpoch(1);
    const E2: LeaderEpoch = LeaderEpoch(2);

    #[test]
    fn a_partition_loads_when_led_and_drops_when_not() {
        assert_eq!(step(None, None), Step::Stay);
        assert_eq!(step(None, Some(E1)), Step::Load(E1));
        assert_eq!(step(Some(Load::Loaded(E1)), Some(E1)), Step::Stay);
        assert_eq!(step(Some(Load::Loaded(E1)), None), Step::Unload);
        assert_eq!(
            step(Some(Load::Loaded(E1)), Some(E2)),
            Step::Load(E2),
            "another epoch: someone else may have written in between"
        );
        assert_eq!(step(Some(Load::Loading(E1)), None), Step::Stay);
        assert_eq!(step(Some(Load::Loading(E1)), Some(E2)), Step::Stay);
    }

    #[test]
    fn requests_wait_for_the_load_at_the_current_epoch() {
        let not = Err(ErrorCode::NotCoordinator);
        let loading = Err(ErrorCode::CoordinatorLoadInProgress);
        assert_eq!(ready(None, None), not);
        assert_eq!(ready(Some(Load::Loaded(E1)), None), not);
        assert_eq!(ready(None, Some(E1)), loading);
        assert_eq!(ready(Some(Load::Loading(E1)), Some(E1)), loading);
        assert_eq!(ready(Some(Load::Loaded(E1)), Some(E2)), loading);
        assert_eq!(ready(Some(Load::Loaded(E1)), Some(E1)), Ok(()));
    }

    #[test]
    fn the_internal_topics_are_compacted_with_small_segments() {
        use crate::config::topic::{ConfigLayers, TopicSettings};
        let empty = BTreeMap::new();
        for (configs, segment) in [
            (
                offsets_topic_configs(),
                crate::group::journal::OFFSETS_SEGMENT_BYTES,
            ),
            (txn_topic_configs(2), 8 << 20),
        ] {
            let settings = TopicSettings::from_layers(&ConfigLayers {
                topic: &configs,
                dynamic_broker: &empty,
                dynamic_default: &empty,
                static_broker: &empty,
            })
            .expect("valid topic configs");
            let compaction = settings.compaction.expect("compacted");
            assert_eq!(
                compaction.delete_retention_ms,
                crate::group::journal::TOMBSTONE_RETENTION_MS
            );
            assert_eq!(settings.log.segment_bytes_max, segment);
            assert_eq!(settings.log.retention_ms, None, "never deleted by age");
        }
    }

    #[test]
    fn refused_writes_become_coordinator_errors() {
        assert_eq!(
            coordinator_error(ErrorCode::NotEnoughReplicas),
            ErrorCode::CoordinatorNotAvailable
        );
        assert_eq!(
            coordinator_error(ErrorCode::RequestTimedOut),
            ErrorCode::CoordinatorNotAvailable
        );
        assert_eq!(
            coordinator_error(ErrorCode::NotLeaderOrFollower),
            ErrorCode::NotCoordinator
        );
        assert_eq!(
            coordinator_error(ErrorCode::InvalidRecord),
            ErrorCode::InvalidRecord
        );
    }
}
