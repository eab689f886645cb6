//! One Kafka API per file: decode (done by rill-protocol) → plan → partitions → response.
//!
//! Handlers call the broker through [`crate::broker::Broker`] (re-exported here with its wire
//! helpers, so each handler names them as `super::`).

pub use crate::broker::{
    by_topic, str_bytes, topic_name, topic_or_auto_create, Broker, LEADER_EPOCH,
};

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod api_versions;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_transactions;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod partition_verdicts;
pub mod produce;
pub mod produce_txn;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

/// The in-memory broker: handler unit tests, and the request-path fuzz targets (server/fuzz).
#[cfg(any(test, feature = "fuzzing"))]
pub mod fake;
