//! Kafka's two internal topics, by name: `__consumer_offsets` (the group coordinators' log) and
//! `__transaction_state` (the transaction coordinators'), their fixed partition counts, which
//! partition holds a group or a transactional id, and where a single node keeps them on disk
//! (and where a cluster node keeps its metadata log).
//! Plain values below everything that names them (the cluster view, the broker facade, the
//! coordinators, which re-export them).
//!
//! How the coordinators keep them stands on the coordinators' floor (`server/LAYERS.md`):
//! [`replicated`] in a cluster, [`single_node`] on a single node.

use std::collections::BTreeMap;

use rill_types::{PartitionIndex, TopicPartitionRef};

pub mod replicated;
pub mod single_node;

/// Partitions of the internal offsets log (fixed forever: group → partition must not change).
pub const OFFSETS_PARTITIONS: i32 = 8;

/// Name of the internal offsets log. On a single node its directory lives under
/// [`OFFSETS_DIR`], outside the topic registry; in a cluster it is a replicated internal topic
/// (`crate::internal_topics::replicated`) that Metadata lists with `is_internal` and clients cannot write.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Subdirectory of the data dir that holds the offsets log partitions.
pub const OFFSETS_DIR: &str = "__rill_groups";

/// Segment size of an offsets log: what stays uncompacted at most (Kafka's
/// `offsets.topic.segment.bytes` is 100 MiB; these logs hold one shard's share of small records).
pub const OFFSETS_SEGMENT_BYTES: u64 = 1 << 20;
/// How long an OffsetDelete/DeleteGroups tombstone stays (Kafka's `delete.retention.ms`).
pub const TOMBSTONE_RETENTION_MS: u64 = 24 * 60 * 60 * 1000;

/// The offsets partition that holds `group_id`'s offsets.
pub fn offsets_partition(group_id: &str) -> PartitionIndex {
    partition_of(group_id, OFFSETS_PARTITIONS)
}

/// Partitions of the transaction state log (fixed forever: id → partition must not change).
pub const TXN_PARTITIONS: i32 = 8;

/// Name of the transaction state log (its directory lives under [`TXN_DIR`], never in the
/// topic registry: clients can neither see, produce to nor delete it).
pub const TXN_TOPIC: &str = "__transaction_state";

/// Subdirectory of the data dir that holds the state-log partitions.
pub const TXN_DIR: &str = "__rill_txn";

/// Segment size of a state-log partition: small, so compaction frees space.
pub const TXN_SEGMENT_BYTES: u64 = 8 << 20;

/// The state-log partition that holds `transactional_id`.
pub fn txn_partition(transactional_id: &str) -> PartitionIndex {
    partition_of(transactional_id, TXN_PARTITIONS)
}

/// The partition of a topic with `count` partitions that holds `key`: crc32c(key) % count, the
/// placement both internal topics have always used (it must never change).
fn partition_of(key: &str, count: i32) -> PartitionIndex {
    assert!(count > 0, "an internal topic has partitions");
    let index = PartitionIndex((crc32c::crc32c(key.as_bytes()) % count as u32) as i32);
    debug_assert!(index.is_within(count));
    index
}

/// The partitions of the internal topic `topic` (`count` of them) that shard `shard` of
/// `shards` owns: where that shard's coordinator keeps its state.
pub fn owned_partitions(
    topic: &str,
    count: i32,
    shard: usize,
    shards: usize,
) -> Vec<PartitionIndex> {
    let owner = |p| crate::shard::owner::owner_shard(TopicPartitionRef::new(topic, p), shards);
    PartitionIndex::all(count)
        .filter(|&p| owner(p) == shard)
        .collect()
}

/// The KRaft metadata log's topic name (Kafka's `Topic.CLUSTER_METADATA_TOPIC_NAME`). A
/// client may never create it (Kafka: INVALID_REQUEST, "Creation of internal topic
/// __cluster_metadata is prohibited."): its partition 0 would be the directory a cluster node
/// keeps its metadata log in ([`METADATA_DIR`]), and deleting it would remove that log.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// The metadata log's directory under the data dir: partition 0 of Kafka's metadata topic
/// ([`METADATA_TOPIC`], which no client may create for that reason).
pub const METADATA_DIR: &str = "__cluster_metadata-0";

/// Topic configs of `__consumer_offsets` (Kafka creates it compacted, too).
pub fn offsets_topic_configs() -> BTreeMap<String, String> {
    compacted(OFFSETS_SEGMENT_BYTES, TOMBSTONE_RETENTION_MS)
}

/// Topic configs of `__transaction_state`: compacted, and `min_isr`
/// (`transaction.state.log.min.isr`) as its `min.insync.replicas`.
pub fn txn_topic_configs(min_isr: u16) -> BTreeMap<String, String> {
    let mut configs = compacted(TXN_SEGMENT_BYTES, TOMBSTONE_RETENTION_MS);
    configs.insert("min.insync.replicas".to_string(), min_isr.to_string());
    configs
}

fn compacted(segment_bytes: u64, delete_retention_ms: u64) -> BTreeMap<String, String> {
    [
        ("cleanup.policy", "compact".to_string()),
        ("segment.bytes", segment_bytes.to_string()),
        ("delete.retention.ms", delete_retention_ms.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Whether `name` is one of Kafka's internal topics (`Topic.isInternal`), which Metadata marks.
pub fn is_internal(name: &str) -> bool {
    name == OFFSETS_TOPIC || name == TXN_TOPIC
}
