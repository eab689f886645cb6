//! What brokers ask of the active controller, and its answers (KIP-631's broker-to-controller
//! RPCs, plus the admin requests a broker forwards). Serialized as JSON on the controller
//! listener, where an [`ErrorCode`] is written as its wire number (`i16`); typed everywhere else.

use std::collections::BTreeMap;

use rill_types::{ErrorCode, LeaderEpoch, ProducerId};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::record::BrokerIdentity;
use crate::types::{BrokerEpoch, LogIndex, NodeId, PartitionEpoch};

/// A topic to create.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTopic {
    /// Name (the broker validated it).
    pub name: String,
    /// Partition count (the broker resolved -1 to `num.partitions`).
    pub partitions: u32,
    /// Replicas per partition; `None` = the controller's `default.replication.factor`.
    pub replication_factor: Option<u16>,
    /// Topic config overrides (the broker validated them).
    pub configs: BTreeMap<String, String>,
    /// Internal topics are hidden from clients (`__consumer_offsets`).
    pub internal: bool,
}

/// A topic named by name or id (DeleteTopics v6+ takes either).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TopicRef {
    /// By name.
    Name(String),
    /// By id.
    Id(Uuid),
}

/// A request to the controller.
///
/// Externally tagged (serde's default): an internally tagged enum buffers its content, and the
/// buffer cannot give back the image's integer-keyed maps (JSON keys are strings).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// A broker starts (KIP-631 BrokerRegistration).
    RegisterBroker(BrokerIdentity),
    /// A registered broker is alive (KIP-631 BrokerHeartbeat).
    BrokerHeartbeat {
        /// Its `node.id`.
        node_id: NodeId,
        /// Its registration.
        broker_epoch: BrokerEpoch,
        /// How far it has applied the metadata log: it is unfenced once past its registration.
        applied_index: LogIndex,
        /// Controlled shutdown: fence me now.
        want_shut_down: bool,
    },
    /// CreateTopics.
    CreateTopics {
        /// The topics.
        topics: Vec<NewTopic>,
        /// Check only.
        validate_only: bool,
    },
    /// DeleteTopics.
    DeleteTopics {
        /// The topics.
        topics: Vec<TopicRef>,
    },
    /// CreatePartitions.
    CreatePartitions {
        /// (name, new total count).
        topics: Vec<(String, u32)>,
        /// Check only.
        validate_only: bool,
    },
    /// Set or remove topic config overrides (IncrementalAlterConfigs / AlterConfigs).
    AlterTopicConfigs {
        /// The topic.
        topic: String,
        /// Changes by Kafka name; `None` removes the override.
        changes: BTreeMap<String, Option<String>>,
    },
    /// A block of producer ids (KIP-730 AllocateProducerIds).
    AllocateProducerIds {
        /// The broker asking.
        node_id: NodeId,
    },
    /// A partition's leader changes its ISR (KIP-497 AlterPartition): followers that caught
    /// up join, followers that fell behind leave. Issue 14's leaders send it.
    AlterPartition(AlterPartition),
    /// ElectLeaders (KIP-460): `partitions` by topic name, `None` for every partition.
    ElectLeaders {
        /// Preferred or unclean.
        election: ElectionType,
        /// (topic, partition indexes).
        partitions: Option<Vec<(String, Vec<i32>)>>,
    },
    /// AlterPartitionReassignments (KIP-455): per topic, (partition, target replicas or `None`
    /// to cancel).
    AlterPartitionReassignments {
        /// The topics.
        topics: Vec<(String, Vec<crate::reassign::Target>)>,
    },
    /// AlterUserScramCredentials (KIP-554), the keys derived by the broker that took it
    /// ([`crate::scram::decide_alter`] decides).
    AlterUserScramCredentials {
        /// As the client sent them.
        deletions: Vec<crate::scram::ScramDeletion>,
        /// As the client sent them, with derived keys.
        upsertions: Vec<crate::scram::ScramUpsertion>,
    },
    /// CreateAcls: bindings the broker validated ([`crate::acl::decide_create`] keeps the new).
    CreateAcls {
        /// The bindings.
        bindings: Vec<crate::acl::AclBinding>,
    },
    /// DeleteAcls: the bindings the filters match go ([`crate::acl::decide_delete`]).
    DeleteAcls {
        /// The filters, validated by the broker.
        filters: Vec<crate::acl::AclFilter>,
    },
    /// AlterClientQuotas, decided by [`crate::client_quota::decide_alter`].
    AlterClientQuotas {
        /// The entries as the client sent them.
        alterations: Vec<crate::client_quota::Alteration>,
        /// Decide and answer, but change nothing.
        validate_only: bool,
    },
    /// A broker that is not a voter (an observer) follows the metadata: the applied image, if
    /// the controller's is newer than `applied_index`.
    FetchImage {
        /// What the broker has applied.
        applied_index: LogIndex,
    },
}

/// An AlterPartition request: what the leader saw and the ISR it wants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartition {
    /// The leader asking.
    pub node_id: NodeId,
    /// Its registration.
    pub broker_epoch: BrokerEpoch,
    /// The topic.
    pub topic_id: Uuid,
    /// The partition.
    pub partition: u32,
    /// The epoch it leads at.
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch its view of the ISR is from.
    pub partition_epoch: PartitionEpoch,
    /// The ISR it wants (the leader among them).
    pub new_isr: Vec<NodeId>,
}

/// Which leader an ElectLeaders asks for (Kafka's `ElectionType`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// The first replica, if it is live and in the ISR (wire 0).
    Preferred,
    /// Any live replica when no ISR member is live (wire 1), if unclean elections are enabled.
    Unclean,
}

impl ElectionType {
    /// The wire value (0 preferred, 1 unclean); `None` for anything else.
    pub fn from_wire(value: i8) -> Option<ElectionType> {
        match value {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }
}

/// The outcome for one partition (an election, a reassignment).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionResult {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Kafka error code (`None` = done).
    #[serde(with = "wire_code")]
    pub error_code: ErrorCode,
    /// Why, for the client.
    pub message: Option<String>,
}

impl PartitionResult {
    /// Done.
    pub fn ok(topic: &str, partition: i32) -> Self {
        Self {
            topic: topic.to_string(),
            partition,
            error_code: ErrorCode::None,
            message: None,
        }
    }

    /// Not done, and why.
    pub fn failed(
        topic: &str,
        partition: i32,
        code: ErrorCode,
        message: impl Into<String>,
    ) -> Self {
        Self {
            topic: topic.to_string(),
            partition,
            error_code: code,
            message: Some(message.into()),
        }
    }
}

/// The outcome for one topic of a CreateTopics / DeleteTopics / CreatePartitions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicResult {
    /// The topic as the request named it.
    pub name: String,
    /// Its id (nil when unknown or failed).
    pub topic_id: Uuid,
    /// Kafka error code (`None` = success).
    #[serde(with = "wire_code")]
    pub error_code: ErrorCode,
    /// Why, for the client.
    pub message: Option<String>,
}

impl TopicResult {
    /// A success.
    pub fn ok(name: &str, topic_id: Uuid) -> Self {
        Self {
            name: name.to_string(),
            topic_id,
            error_code: ErrorCode::None,
            message: None,
        }
    }

    /// A failure.
    pub fn failed(name: &str, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            name: name.to_string(),
            topic_id: Uuid::nil(),
            error_code: code,
            message: Some(message.into()),
        }
    }

    /// The error as a typed code.
    pub fn error(&self) -> ErrorCode {
        self.error_code
    }
}

/// The controller's answer (externally tagged, as [`ControllerRequest`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerResponse {
    /// Ask the node named instead (`None`: no leader known right now; retry shortly).
    NotController {
        /// The active controller, if known.
        leader: Option<NodeId>,
    },
    /// Registered; heartbeat with this epoch.
    Registered {
        /// The registration's epoch.
        broker_epoch: BrokerEpoch,
    },
    /// A heartbeat's answer.
    Heartbeat {
        /// Still fenced (not caught up yet, or being shut down).
        fenced: bool,
        /// Controlled shutdown may proceed.
        should_shut_down: bool,
    },
    /// Per-topic outcomes; the change is in the log at `index`: a broker that applied up to it
    /// sees it.
    Topics {
        /// One per requested topic, in request order.
        results: Vec<TopicResult>,
        /// Log index of the change (0 when nothing was written).
        index: LogIndex,
    },
    /// Producer ids `first..first + count` belong to the asking broker.
    ProducerIds {
        /// First id.
        first: ProducerId,
        /// How many.
        count: i64,
    },
    /// A partition's state after an AlterPartition.
    Partition {
        /// Its leader.
        leader: Option<NodeId>,
        /// Its leader epoch.
        leader_epoch: LeaderEpoch,
        /// Its partition epoch (the leader's next AlterPartition names it).
        partition_epoch: PartitionEpoch,
        /// Its ISR.
        isr: Vec<NodeId>,
    },
    /// One result per partition (ElectLeaders, AlterPartitionReassignments); the changes are in
    /// the log at `index`.
    PartitionResults {
        /// In request order (every partition when the request named none).
        results: Vec<PartitionResult>,
        /// Log index of the changes (0 when nothing was written).
        index: LogIndex,
    },
    /// One result per user of an AlterUserScramCredentials; the changes are in the log at
    /// `index` (0 when nothing was written).
    Scram {
        /// Deletions, upsertions, then failures.
        results: Vec<crate::scram::ScramResult>,
        /// Log index of the changes.
        index: LogIndex,
    },
    /// AlterClientQuotas decided: each entity's outcome; the changes are in the log at `index`
    /// (0 when nothing was written).
    ClientQuotas {
        /// Per distinct entity, its outcome.
        results: crate::client_quota::AlterResults,
        /// Log index of the changes.
        index: LogIndex,
    },
    /// CreateAcls or DeleteAcls done: per DeleteAcls filter the bindings it matched (empty for
    /// CreateAcls); the changes are in the log at `index` (0 when nothing was written).
    Acls {
        /// Per filter, its matches.
        matched: Vec<Vec<crate::acl::AclBinding>>,
        /// Log index of the changes.
        index: LogIndex,
    },
    /// The controller's applied image (`None`: not newer than the broker's).
    Image {
        /// The image.
        image: Option<Box<crate::image::MetadataImage>>,
    },
    /// The request as a whole was refused.
    Error {
        /// Kafka error code.
        #[serde(with = "wire_code")]
        error_code: ErrorCode,
        /// Why.
        message: String,
    },
}

impl ControllerResponse {
    /// A whole-request refusal.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        ControllerResponse::Error {
            error_code: code,
            message: message.into(),
        }
    }
}

/// An [`ErrorCode`] on the controller listener: its wire number, as the JSON always carried it.
/// A number this build does not know (a newer peer's) reads as `UNKNOWN_SERVER_ERROR`.
pub(crate) mod wire_code {
    use rill_types::ErrorCode;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(code: &ErrorCode, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i16(code.code())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ErrorCode, D::Error> {
        let code = i16::deserialize(d)?;
        Ok(ErrorCode::try_from(code).unwrap_or(ErrorCode::UnknownServerError))
    }
}

#[cfg(test)]
mod wire_code_tests {
    use super::*;

    #[test]
    fn an_error_code_is_its_wire_number_in_the_json() {
        let result = TopicResult::failed("t", ErrorCode::TopicAlreadyExists, "exists");
        let json = serde_json::to_string(&result).unwrap();
        assert!(json.contains(r#""error_code":36"#), "{json}");
        let back: TopicResult = serde_json::from_str(&json).unwrap();
        assert_eq!(back, result);
        let unknown = json.replace(r#""error_code":36"#, r#""error_code":-999"#);
        let read: TopicResult = serde_json::from_str(&unknown).unwrap();
        assert_eq!(read.error_code, ErrorCode::UnknownServerError);
    }
}
