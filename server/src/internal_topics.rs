//! Kafka's two internal topics, by name: `__consumer_offsets` (the group coordinators' log) and
//! `__transaction_state` (the transaction coordinators'), their fixed partition counts, which
//! partition holds a group or a transactional id, and where a single node keeps them on disk.
//! Plain values below everything that names them (the cluster view, the broker facade, the
//! coordinators, which re-export them).

/// Partitions of the internal offsets log (fixed forever: group → partition must not change).
pub const OFFSETS_PARTITIONS: i32 = 8;

/// Name of the internal offsets log. On a single node its directory lives under
/// [`OFFSETS_DIR`], outside the topic registry; in a cluster it is a replicated internal topic
/// (`crate::coordinator_log`) that Metadata lists with `is_internal` and clients cannot write.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Subdirectory of the data dir that holds the offsets log partitions.
pub const OFFSETS_DIR: &str = "__rill_groups";

/// The offsets partition that holds `group_id`'s offsets.
pub fn offsets_partition(group_id: &str) -> i32 {
    (crc32c::crc32c(group_id.as_bytes()) % OFFSETS_PARTITIONS as u32) as i32
}

/// Partitions of the transaction state log (fixed forever: id → partition must not change).
pub const TXN_PARTITIONS: i32 = 8;

/// Name of the transaction state log (its directory lives under [`TXN_DIR`], never in the
/// topic registry: clients can neither see, produce to nor delete it).
pub const TXN_TOPIC: &str = "__transaction_state";

/// Subdirectory of the data dir that holds the state-log partitions.
pub const TXN_DIR: &str = "__rill_txn";

/// The state-log partition that holds `transactional_id`.
pub fn txn_partition(transactional_id: &str) -> i32 {
    (crc32c::crc32c(transactional_id.as_bytes()) % TXN_PARTITIONS as u32) as i32
}

/// The KRaft metadata log's topic name (Kafka's `Topic.CLUSTER_METADATA_TOPIC_NAME`). A
/// client may never create it (Kafka: INVALID_REQUEST, "Creation of internal topic
/// __cluster_metadata is prohibited."): its partition 0 would be the directory a cluster node
/// keeps its metadata log in (`crate::cluster::quorum_loop::METADATA_DIR`), and deleting it
/// would remove that log.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// Whether `name` is one of Kafka's internal topics (`Topic.isInternal`), which Metadata marks.
pub fn is_internal(name: &str) -> bool {
    name == OFFSETS_TOPIC || name == TXN_TOPIC
}
