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
//!   loaded by the broker leading each partition (`crate::coordinator_log`).
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
//! ([`crate::routing::owner_shard`]). The partition
//! count is fixed so that a restart with another shard count still finds every group's offsets.

pub mod consumer;
pub mod coordinator;
pub mod journal;
pub mod metadata_record;
pub mod offsets;
pub mod ops;
pub mod replicated;
pub mod runtime;
pub mod share;
pub mod state;
mod txn_offsets;

pub use crate::internal_topics::{
    offsets_partition, OFFSETS_DIR, OFFSETS_PARTITIONS, OFFSETS_TOPIC,
};
pub use ops::{GroupCall, GroupOp, GroupReply};

/// Kafka's `group.*` broker settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`: the first rebalance of an Empty group waits this long
    /// for more members (and again while members keep arriving, within the rebalance timeout),
    /// so that consumers started together land in one generation instead of two.
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size`: members of one group, and member ids one group hands out pending
    /// their rejoin; a JoinGroup past it gets GROUP_MAX_SIZE_REACHED.
    pub max_size: usize,
    /// `rill.shard.groups.max`: groups one shard coordinates; a request that would create one
    /// more gets GROUP_MAX_SIZE_REACHED (groups loaded from the log always load).
    pub shard_groups_max: usize,
    /// `group.min.session.timeout.ms` / `group.max.session.timeout.ms`: a classic JoinGroup's
    /// session timeout outside them gets INVALID_SESSION_TIMEOUT, as Kafka answers.
    pub session_timeout_ms_min: i32,
    /// See `session_timeout_ms_min`.
    pub session_timeout_ms_max: i32,
    /// `offsets.retention.check.interval.ms`: how often groups left with nothing (no members,
    /// no offsets) are forgotten; until then they stay Empty and listed, as in Kafka.
    pub cleanup_interval_ms: rill_types::DurationMs,
    /// `group.consumer.*`: KIP-848 consumer groups.
    pub consumer: consumer::ConsumerConfig,
    /// `group.share.*`: KIP-932 share groups.
    pub share: share::ShareConfig,
}

/// The default `group.max.size`. Kafka's is unbounded for classic groups; each member holds its
/// JoinGroup metadata (up to a whole request), the leader's JoinGroup answer carries every
/// member's, and every rebalance of the classic protocol stops the whole group: a thousand
/// members is past what a classic group rebalances well, and keeps one group's memory bounded.
pub const GROUP_MAX_SIZE_DEFAULT: usize = 1_000;

/// The default `rill.shard.groups.max`: far more groups than a broker's consumers form, a
/// bounded map for clients that invent group ids (Kafka bounds neither).
pub const SHARD_GROUPS_MAX_DEFAULT: usize = 50_000;

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay_ms: 3_000,
            max_size: GROUP_MAX_SIZE_DEFAULT,
            shard_groups_max: SHARD_GROUPS_MAX_DEFAULT,
            session_timeout_ms_min: 6_000,
            session_timeout_ms_max: 1_800_000,
            cleanup_interval_ms: rill_types::DurationMs(600_000),
            consumer: consumer::ConsumerConfig::default(),
            share: share::ShareConfig::default(),
        }
    }
}

/// The shard that coordinates `group_id`: the one owning its offsets partition in the
/// partition table (in a cluster the coordinator writes through it, `crate::coordinator_log`).
pub fn coordinator_shard(group_id: &str, shards: usize) -> usize {
    crate::routing::owner_shard(OFFSETS_TOPIC, offsets_partition(group_id), shards)
}

/// The offsets partitions shard `shard` of `shards` owns.
pub fn owned_offsets_partitions(shard: usize, shards: usize) -> Vec<i32> {
    (0..OFFSETS_PARTITIONS)
        .filter(|p| crate::routing::owner_shard(OFFSETS_TOPIC, *p, shards) == shard)
        .collect()
}

#[cfg(test)]
mod wire_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_has_exactly_one_owner() {
        for shards in 1..12 {
            let mut all: Vec<i32> = (0..shards)
                .flat_map(|s| owned_offsets_partitions(s, shards))
                .collect();
            all.sort_unstable();
            assert_eq!(all, (0..OFFSETS_PARTITIONS).collect::<Vec<_>>());
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
