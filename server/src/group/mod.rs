//! Consumer groups (issue 5): the classic group protocol's coordinator and durable committed
//! offsets.
//!
//! - [`state`]: one group's state machine (Empty → PreparingRebalance → CompletingRebalance →
//!   Stable, Dead), pure and runtime-free: callers pass `now` and get answers through oneshots.
//! - [`offsets`]: committed offsets and their record encoding in the internal offsets log.
//! - [`metadata_record`]: a group's membership as a record of that log (Kafka's GroupMetadata).
//! - [`journal`]: where commits become durable — an engine log per offsets partition with group
//!   commit, replay on start and snapshot compaction; an in-memory journal for unit tests.
//! - [`replicated`]: in a cluster, the journal is the replicated `__consumer_offsets` topic,
//!   loaded by the broker leading each partition (`crate::internal_topics::replicated`).
//! - [`consumer`]: one KIP-848 consumer group's state machine (member and group epochs,
//!   server-side assignors, incremental reconciliation), pure and runtime-free like [`state`];
//!   its records in Kafka's coordinator record types (`consumer::records`), written by a
//!   cluster's journal and restored by the next coordinator.
//! - [`share`]: one KIP-932 share group (membership, the simple assignor, share sessions) and
//!   its share-partitions' delivery state (`share::partition`), runtime-free; the starts written through the journal (`share::durable`).
//! - [`coordinator`]: one shard's groups, answering [`GroupOp`]s.
//! - `txn_offsets`: offsets committed inside transactions, pending until the transaction ends.
//! - [`runtime`]: starting a shard's coordinator with the storage and clock handed in; other
//!   shards reach it through the shard's generic router ([`crate::shard::router`]).
//!
//! Placement: a group lives in offsets partition `crc32c(group) % OFFSETS_PARTITIONS`, and that
//! partition (its log and all of its groups) lives on the shard that owns it as a partition
//! ([`crate::shard::owner::owner_shard`]). The partition
//! count is fixed so that a restart with another shard count still finds every group's offsets.

pub mod consumer;
pub mod coordinator;
pub mod journal;
pub mod metadata_record;
pub mod offsets;
pub mod ops;
pub mod replicated;
pub mod runtime;
pub mod settings;
pub mod share;
pub mod state;
mod txn_offsets;

pub use crate::internal_topics::{
    offsets_partition, OFFSETS_DIR, OFFSETS_PARTITIONS, OFFSETS_TOPIC,
};
pub use ops::{GroupCall, GroupOp, GroupReply};
pub use settings::{GroupConfig, GROUP_MAX_SIZE_DEFAULT, SHARD_GROUPS_MAX_DEFAULT};

use rill_types::{PartitionIndex, TopicPartitionRef};

/// The shard that coordinates `group_id`: the one owning its offsets partition in the
/// partition table (in a cluster the coordinator writes through it, `crate::internal_topics::replicated`).
pub fn coordinator_shard(group_id: &str, shards: usize) -> usize {
    let partition = offsets_partition(group_id);
    crate::shard::owner::owner_shard(TopicPartitionRef::new(OFFSETS_TOPIC, partition), shards)
}

/// The offsets partitions shard `shard` of `shards` owns.
pub fn owned_offsets_partitions(shard: usize, shards: usize) -> Vec<PartitionIndex> {
    crate::internal_topics::owned_partitions(OFFSETS_TOPIC, OFFSETS_PARTITIONS, shard, shards)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_has_exactly_one_owner() {
        for shards in 1..12 {
            let mut all: Vec<PartitionIndex> = (0..shards)
                .flat_map(|s| owned_offsets_partitions(s, shards))
                .collect();
            all.sort_unstable();
            assert_eq!(
                all,
                PartitionIndex::all(OFFSETS_PARTITIONS).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn a_group_lives_where_its_partition_lives() {
        for g in ["a", "orders", "grp-17", ""] {
            let p = offsets_partition(g);
            for shards in 1..5 {
                assert!(
                    owned_offsets_partitions(coordinator_shard(g, shards), shards).contains(&p)
                );
            }
        }
    }
}
