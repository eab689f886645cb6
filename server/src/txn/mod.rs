//! Transactions (issue 15): the transaction coordinator and its durable state log.
//!
//! - [`state`]: one transactional id's metadata and transitions (Kafka's TransactionMetadata),
//!   pure: handed the time, no I/O.
//! - [`record`]: the state log's records (transactional id → metadata) and their encoding.
//! - [`journal`]: what the coordinator writes through ([`journal::TxnJournal`], the word
//!   `crate::group::journal` uses too) and where the metadata becomes durable on a single node:
//!   an engine log per state-log partition with group commit, replay on start and snapshot
//!   compaction; an in-memory journal for tests.
//! - [`replicated`]: in a cluster, the replicated `__transaction_state` topic, loaded by the
//!   broker leading each partition (`crate::internal_topics::replicated`).
//! - [`coordinator`]: one shard's transactional ids: InitProducerId, AddPartitionsToTxn (and
//!   its verify-only form), AddOffsetsToTxn, TxnOffsetCommit, EndTxn, timeouts, expiration;
//!   markers through [`env::TxnEnv`].
//! - [`env`]: what the coordinator needs from the broker (producer ids, partitions, markers,
//!   group offsets) — the seam where a cluster routes markers to partition leaders.
//! - [`ops`]: the operations and answers that cross cores; [`runtime`]: starting a shard's
//!   coordinator and its timers; other shards reach it through the shard's generic router.
//! - [`remote`]: across brokers: markers and group ends sent as WriteTxnMarkers, verification
//!   asked of another broker's coordinator.
//!
//! Placement, as for groups: a transactional id lives in state-log partition
//! `crc32c(id) % TXN_PARTITIONS`, and that partition lives on the shard owning it as a
//! partition. In a cluster the coordinator is the broker leading that partition of the
//! `__transaction_state` topic in the metadata image (FindCoordinator names it on every broker;
//! the others answer NOT_COORDINATOR); the state is written to that replicated partition and
//! loaded by whichever broker leads it next ([`replicated`]).
//!
//! A transaction's life: InitProducerId fences older producers of the id and aborts what they
//! left open; AddPartitionsToTxn / AddOffsetsToTxn record what the transaction touches before
//! the producer writes there (partition leaders verify it before the first transactional
//! append); EndTxn makes the decision durable (Prepare), writes COMMIT/ABORT markers to every
//! partition and ends the offsets in every group, then records Complete. EndTxn is answered
//! once the markers are written, so a committed transaction is visible to read_committed
//! consumers and its offsets to the group when the producer learns of the commit. A decision
//! whose markers could not all be written (a crash, a partition unavailable) is completed by
//! the coordinator later (at start-up, then every tick).

pub mod coordinator;
pub mod env;
pub mod journal;
pub mod ops;
pub mod record;
pub mod remote;
pub mod replicated;
pub mod runtime;
pub mod settings;
pub mod state;

pub use crate::internal_topics::{txn_partition, TXN_DIR, TXN_PARTITIONS, TXN_TOPIC};
pub use rill_types::{ProducerEpoch, ProducerId};
pub use settings::{TxnConfig, SHARD_IDS_MAX_DEFAULT};

use rill_types::{PartitionIndex, TopicPartitionRef};

/// The shard that coordinates `transactional_id`: the one owning its state-log partition in
/// the partition table (in a cluster the coordinator writes through it,
/// `crate::internal_topics::replicated`).
pub fn coordinator_shard(transactional_id: &str, shards: usize) -> usize {
    let partition = txn_partition(transactional_id);
    crate::shard::owner::owner_shard(TopicPartitionRef::new(TXN_TOPIC, partition), shards)
}

/// The state-log partitions shard `shard` of `shards` owns.
pub fn owned_txn_partitions(shard: usize, shards: usize) -> Vec<PartitionIndex> {
    crate::internal_topics::owned_partitions(TXN_TOPIC, TXN_PARTITIONS, shard, shards)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_has_exactly_one_owner() {
        for shards in 1..12 {
            let mut all: Vec<PartitionIndex> = (0..shards)
                .flat_map(|s| owned_txn_partitions(s, shards))
                .collect();
            all.sort_unstable();
            assert_eq!(all, PartitionIndex::all(TXN_PARTITIONS).collect::<Vec<_>>());
        }
    }

    #[test]
    fn an_id_lives_where_its_partition_lives() {
        for id in ["a", "orders-tx", "t-17", ""] {
            let p = txn_partition(id);
            for shards in 1..5 {
                assert!(owned_txn_partitions(coordinator_shard(id, shards), shards).contains(&p));
            }
        }
    }
}
