//! The records of the replicated metadata log, named after KRaft's (KIP-631), and their encoding.
//!
//! One raft entry carries one [`EntryPayload`]: the records one controller decision produced (a
//! fence and the partition changes it implies, or every topic of one CreateTopics), applied in
//! order. Each record is applied or rejected on its own ([`crate::image`]), deterministically,
//! so every node that applies the same log reaches the same image.
//!
//! Encoding: JSON (`{"v":1,"records":[...]}`). Metadata changes are rare and small; a readable,
//! self-describing format costs nothing measurable here and keeps `rill dump`-style inspection
//! trivial. Decoding is bounded by [`PAYLOAD_BYTES_MAX`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::types::{BrokerEpoch, Endpoint, NodeId, PartitionEpoch};
use rill_types::{LeaderEpoch, ProducerId};

/// Format version of [`EntryPayload`]; a node refuses entries of a version it does not know.
pub const PAYLOAD_VERSION: u32 = 1;

/// Largest encoded entry accepted (a CreateTopics of many large topics stays far below this).
pub const PAYLOAD_BYTES_MAX: usize = 16 << 20;

/// Who a broker is: what it registers with (the RegisterBroker request and record).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerIdentity {
    /// Its `node.id`.
    pub node_id: NodeId,
    /// Random per process start.
    pub incarnation_id: Uuid,
    /// Stable per data directory (KIP-858's directory id): the same broker restarting presents
    /// the same one, a second process with the same `node.id` cannot.
    pub log_dir_id: Uuid,
    /// Its advertised inter-broker listener (`inter.broker.listener.name`): where other
    /// brokers reach it (and clients, in records written before `listeners` existed).
    pub endpoint: Endpoint,
    /// Every advertised listener by (upper-case) name: a client is given the brokers'
    /// endpoints of the listener it connected on, as Kafka does. Empty in older records.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub listeners: BTreeMap<String, Endpoint>,
    /// `broker.rack`, if set.
    pub rack: Option<String>,
    /// The SHA-256 (hex) of a secret the broker draws at each start and keeps to itself: its
    /// follower Fetches present the secret, and a leader checks it against this digest
    /// (`server/src/handler/fetch.rs`), so reading the metadata log tells nobody the secret.
    /// `None` in records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_secret_sha256: Option<String>,
}

/// One partition as a `Topic` or `Partitions` record creates it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionAssignment {
    /// Replicas in preference order; the first is the preferred leader.
    pub replicas: Vec<NodeId>,
    /// The in-sync replicas at creation.
    pub isr: Vec<NodeId>,
    /// The first leader (`None` if no replica was alive).
    pub leader: Option<NodeId>,
}

/// A change of the metadata, as the active controller decided it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum MetadataRecord {
    /// The cluster's id, written once by the first controller (Kafka writes it at format time).
    ClusterInit {
        /// Reported by Metadata v2+ and DescribeCluster.
        cluster_id: String,
    },
    /// A broker (re)registers; its epoch is this record's log index. Starts fenced.
    RegisterBroker(BrokerIdentity),
    /// The broker missed its session (or shut down): clients must not be sent to it.
    FenceBroker {
        /// The broker.
        node_id: NodeId,
        /// The registration this applies to (a stale one is ignored).
        broker_epoch: BrokerEpoch,
    },
    /// The broker caught up with the metadata log and heartbeats: it may lead partitions.
    UnfenceBroker {
        /// The broker.
        node_id: NodeId,
        /// The registration this applies to (a stale one is ignored).
        broker_epoch: BrokerEpoch,
    },
    /// A new topic with all of its partitions (KRaft's TopicRecord + PartitionRecords).
    Topic {
        /// Topic name (validated by the broker that asked).
        name: String,
        /// Stable id (Metadata v10+, Fetch v13+), chosen by the controller.
        topic_id: Uuid,
        /// Internal topics (`__consumer_offsets`) are hidden from clients' topic lists.
        internal: bool,
        /// Topic-level config overrides by Kafka name.
        configs: BTreeMap<String, String>,
        /// Partitions 0..n.
        partitions: Vec<PartitionAssignment>,
    },
    /// The topic and its partitions are gone (KRaft's RemoveTopicRecord).
    RemoveTopic {
        /// The topic.
        topic_id: Uuid,
    },
    /// More partitions for a topic (CreatePartitions); numbered after the existing ones.
    Partitions {
        /// The topic.
        topic_id: Uuid,
        /// The partition count the topic had when the controller decided (a stale decision is
        /// rejected, so two concurrent CreatePartitions cannot both apply).
        expected_count: u32,
        /// The new partitions, in order.
        partitions: Vec<PartitionAssignment>,
    },
    /// Set (`Some`) or remove (`None`) topic config overrides (KRaft's ConfigRecord).
    TopicConfigs {
        /// The topic.
        topic_id: Uuid,
        /// Changes by Kafka name.
        changes: BTreeMap<String, Option<String>>,
    },
    /// A new leader and/or ISR for one partition (KRaft's PartitionChangeRecord). Rejected unless
    /// the partition is still at `expected_leader_epoch`, so a decision made on a stale image
    /// never overwrites a newer one.
    PartitionChange {
        /// The topic.
        topic_id: Uuid,
        /// The partition.
        partition: u32,
        /// The leader epoch the controller saw when it decided.
        expected_leader_epoch: LeaderEpoch,
        /// The partition epoch the change was asked against (AlterPartition checks it; the
        /// controller's own leader elections leave it out).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected_partition_epoch: Option<PartitionEpoch>,
        /// The new leader (`None`: no eligible replica is alive).
        leader: Option<NodeId>,
        /// The new in-sync replica set.
        isr: Vec<NodeId>,
    },
    /// A partition's replicas change (KIP-455 reassignment: started, replaced, completed or
    /// cancelled). Rejected unless the partition is still at both expected epochs.
    PartitionReassignment(PartitionReassignment),
    /// A block of producer ids handed to one broker (KIP-730), never handed out again.
    ProducerIds {
        /// The broker that asked.
        node_id: NodeId,
        /// First id of the block; must equal the image's next free id.
        first: ProducerId,
        /// Ids in the block.
        count: i64,
    },
    /// A user's SCRAM credential for one mechanism, new or replacing (KRaft's
    /// UserScramCredentialRecord).
    UserScramCredential {
        /// The user.
        name: String,
        /// The mechanism.
        mechanism: crate::scram::ScramMechanism,
        /// Salt, stored key, server key, iterations.
        credential: crate::scram::ScramCredential,
    },
    /// A user's SCRAM credential for one mechanism is gone (KRaft's
    /// RemoveUserScramCredentialRecord).
    RemoveUserScramCredential {
        /// The user.
        name: String,
        /// The mechanism.
        mechanism: crate::scram::ScramMechanism,
    },
    /// An ACL binding (KRaft's AccessControlEntryRecord; the binding is its own key).
    AccessControlEntry {
        /// The binding.
        binding: crate::acl::AclBinding,
    },
    /// An ACL binding is gone (KRaft's RemoveAccessControlEntryRecord).
    RemoveAccessControlEntry {
        /// The binding.
        binding: crate::acl::AclBinding,
    },
    /// A client quota set or removed (KRaft's ClientQuotaRecord).
    ClientQuota(crate::client_quota::QuotaChange),
}

/// A partition's whole placement after a reassignment step (KRaft writes these fields in its
/// PartitionChangeRecord; a record of its own keeps the leader/ISR changes unchanged).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionReassignment {
    /// The topic.
    pub topic_id: Uuid,
    /// The partition.
    pub partition: u32,
    /// The leader epoch the controller decided on.
    pub expected_leader_epoch: LeaderEpoch,
    /// The partition epoch the controller decided on.
    pub expected_partition_epoch: PartitionEpoch,
    /// Replicas: the target first, then those being removed.
    pub replicas: Vec<NodeId>,
    /// Replicas being added (not yet caught up).
    pub adding: Vec<NodeId>,
    /// Replicas being removed once the target is in sync.
    pub removing: Vec<NodeId>,
    /// The leader.
    pub leader: Option<NodeId>,
    /// The ISR.
    pub isr: Vec<NodeId>,
}

/// What one raft entry carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryPayload {
    /// [`PAYLOAD_VERSION`].
    pub v: u32,
    /// Applied in order.
    pub records: Vec<MetadataRecord>,
}

/// An entry that cannot be decoded: the log is from a newer Rill, or damaged.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// Larger than [`PAYLOAD_BYTES_MAX`].
    #[error("metadata entry of {0} bytes exceeds the maximum")]
    TooLarge(usize),
    /// Not a payload of a version this node knows.
    #[error("metadata entry is not readable: {0}")]
    Malformed(String),
}

impl EntryPayload {
    /// A payload of the current version.
    pub fn new(records: Vec<MetadataRecord>) -> Self {
        Self {
            v: PAYLOAD_VERSION,
            records,
        }
    }

    /// The bytes of a raft entry.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("metadata records always serialize")
    }

    /// Parse a raft entry's bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, PayloadError> {
        if bytes.len() > PAYLOAD_BYTES_MAX {
            return Err(PayloadError::TooLarge(bytes.len()));
        }
        let payload: EntryPayload =
            serde_json::from_slice(bytes).map_err(|e| PayloadError::Malformed(e.to_string()))?;
        if payload.v != PAYLOAD_VERSION {
            return Err(PayloadError::Malformed(format!(
                "unknown payload version {}",
                payload.v
            )));
        }
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_record_kind() {
        let topic_id = Uuid::from_u128(7);
        let records = vec![
            MetadataRecord::ClusterInit {
                cluster_id: "c".into(),
            },
            MetadataRecord::RegisterBroker(BrokerIdentity {
                node_id: NodeId(1),
                incarnation_id: Uuid::from_u128(9),
                log_dir_id: Uuid::from_u128(10),
                endpoint: Endpoint {
                    host: "127.0.0.1".into(),
                    port: 9092,
                },
                rack: None,
                replica_secret_sha256: None,
                listeners: Default::default(),
            }),
            MetadataRecord::FenceBroker {
                node_id: NodeId(1),
                broker_epoch: BrokerEpoch(3),
            },
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id,
                internal: false,
                configs: BTreeMap::from([("retention.ms".into(), "1".into())]),
                partitions: vec![PartitionAssignment {
                    replicas: vec![NodeId(1), NodeId(2)],
                    isr: vec![NodeId(1)],
                    leader: Some(NodeId(1)),
                }],
            },
            MetadataRecord::PartitionChange {
                topic_id,
                partition: 0,
                expected_leader_epoch: LeaderEpoch(0),
                expected_partition_epoch: None,
                leader: None,
                isr: vec![NodeId(1)],
            },
            MetadataRecord::TopicConfigs {
                topic_id,
                changes: BTreeMap::from([("retention.ms".into(), None)]),
            },
        ];
        let payload = EntryPayload::new(records);
        assert_eq!(EntryPayload::decode(&payload.encode()).unwrap(), payload);
    }

    #[test]
    fn refuses_garbage_unknown_versions_and_oversize() {
        assert!(EntryPayload::decode(b"{not json").is_err());
        assert!(EntryPayload::decode(br#"{"v":2,"records":[]}"#).is_err());
        assert!(EntryPayload::decode(br#"{"v":1,"records":[{"type":"Nope"}]}"#).is_err());
        let big = vec![b' '; PAYLOAD_BYTES_MAX + 1];
        assert!(matches!(
            EntryPayload::decode(&big),
            Err(PayloadError::TooLarge(_))
        ));
    }
}
