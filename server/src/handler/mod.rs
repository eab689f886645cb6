//! One Kafka API per file: decode (done by rill-protocol) → plan → partitions → response.
//!
//! Each API's file is named by its row in the registry (`rill_protocol::for_each_api!`) and
//! answers through its `serve`, which the dispatcher's match (generated from the same rows)
//! calls. Handlers call the broker through [`crate::broker::Broker`] (re-exported here with its
//! wire helpers, so each handler names them as `super::`).

use bytes::Bytes;
use rill_protocol::kafka_protocol::messages::ResponseKind;

pub use crate::broker::{
    by_topic, message_bytes, str_bytes, topic_name, topic_or_auto_create, Broker, LEADER_EPOCH,
};

/// What a handler's `serve` is given beside the decoded request body.
#[derive(Clone, Debug)]
pub struct RequestContext<'a> {
    /// The request's API version.
    pub version: i16,
    /// The client id of its header ("" when absent).
    pub client_id: &'a str,
    /// The frame body the request was decoded from (Produce takes its record bytes from it).
    pub frame: Bytes,
    /// The connection it came on: its listener and peer.
    pub session: &'a crate::security::session::Session,
}

/// A connection's peer as Kafka writes a group member's `client_host` (`InetAddress.toString`:
/// "/127.0.0.1"), "" when the socket did not know it.
pub fn client_host(session: &crate::security::session::Session) -> String {
    session
        .peer
        .map_or_else(String::new, |peer| format!("/{}", peer.ip()))
}

/// What a handler answered.
#[derive(Debug)]
pub enum Answer {
    /// A response body, encoded whole.
    Body(ResponseKind),
    /// A Fetch response without record bytes, each partition's record chunks in response
    /// order (spliced in uncopied by the vectored encoder), and the budget they hold.
    Fetch(fetch::Fetched),
    /// No response (Produce with acks=0).
    Silent,
    /// Close the connection (Produce with acks=0 that failed somewhere, as Kafka does).
    Close,
    /// A response body, then close the connection (a failed SASL exchange, as Kafka does).
    Final(ResponseKind),
}

impl Answer {
    /// A whole response body.
    pub fn body(response: impl Into<ResponseKind>) -> Self {
        Answer::Body(response.into())
    }
}

pub mod acl_store;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod alter_share_group_offsets;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod authz;
pub mod authz_admin;
pub mod authz_filter;
pub mod authz_guard;
pub mod authz_share;
pub mod client_throttle;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod controller_change;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_share_group_offsets;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_share_group_offsets;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
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
pub mod mutation_quota;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod partition_verdicts;
pub mod produce;
pub mod produce_txn;
pub mod quota_store;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

#[cfg(test)]
mod group_wire_tests;
#[cfg(test)]
mod share_tests;

/// The in-memory broker: handler unit tests, and the request-path fuzz targets (server/fuzz).
#[cfg(any(test, feature = "fuzzing"))]
pub mod fake;
