//! What the share-group handlers (KIP-932: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
//! ShareAcknowledge) ask a group's coordinator, and its answers; wire-independent and `Send`.

use rill_protocol::ErrorCode;
use rill_types::{Offset, PartitionIndex};
use uuid::Uuid;

use super::{TopicIdPartitions, TopicInfo};

/// `share.auto.offset.reset`: where a share-partition with no state starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    /// The high watermark: only records produced from now on (Kafka's default).
    #[default]
    Latest,
    /// The log start.
    Earliest,
}

impl AutoOffsetReset {
    /// The config value's reset; `None` for anything else.
    pub fn parse(value: &str) -> Option<AutoOffsetReset> {
        match value {
            "latest" => Some(AutoOffsetReset::Latest),
            "earliest" => Some(AutoOffsetReset::Earliest),
            _ => None,
        }
    }
}

/// A share-partition of a group: (topic id, partition).
pub type ShareKey = (Uuid, PartitionIndex);

/// An acknowledgement type as ShareFetch/ShareAcknowledge v1 carry it (RENEW, 4, is v2's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    /// 0: the offset held no record the client saw (compacted away, a control record).
    Gap,
    /// 1: processed.
    Accept,
    /// 2: give it back for another delivery.
    Release,
    /// 3: unprocessable: archive it.
    Reject,
}

impl AckType {
    /// The wire value's type; `None` for anything v1 does not define.
    pub fn from_wire(value: i8) -> Option<AckType> {
        match value {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release),
            3 => Some(AckType::Reject),
            _ => None,
        }
    }
}

/// One acknowledgement batch: offsets `first..=last`, one type for all or one per offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckBatch {
    /// First offset acknowledged.
    pub first: i64,
    /// Last offset acknowledged (inclusive).
    pub last: i64,
    /// One type for the whole range, or exactly one per offset.
    pub types: Vec<AckType>,
}

/// Offsets `first..=last` acquired together, delivered `delivery_count` times (this one
/// included): ShareFetch's AcquiredRecords.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// First offset.
    pub first: i64,
    /// Last offset (inclusive).
    pub last: i64,
    /// Deliveries so far, this one included.
    pub delivery_count: i16,
}

/// A fetched record batch as acquisition sees it: its offsets and whether it is a control
/// batch (a transaction marker, never delivered: archived as it is passed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchedBatch {
    /// Base offset.
    pub first: i64,
    /// Last offset (inclusive).
    pub last: i64,
    /// A control batch.
    pub control: bool,
}

/// ShareGroupHeartbeat, wire-independent; `None` fields did not change.
#[derive(Debug, Clone, Default)]
pub struct ShareHeartbeatArgs {
    /// The member's id (the client makes it).
    pub member_id: String,
    /// 0 joins, -1 leaves.
    pub member_epoch: i32,
    /// Rack.
    pub rack_id: Option<String>,
    /// Subscribed topic names.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// The request header's client id.
    pub client_id: String,
    /// Where the member connects from.
    pub client_host: String,
    /// Every (non-internal) topic, to resolve subscriptions against.
    pub topics: Vec<TopicInfo>,
}

/// ShareGroupHeartbeat's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareHeartbeatResult {
    /// Kafka error code.
    pub error_code: ErrorCode,
    /// Why, for the client.
    pub error_message: Option<String>,
    /// The member's id.
    pub member_id: Option<String>,
    /// The member's epoch now.
    pub member_epoch: i32,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The member's partitions now (`None`: unchanged).
    pub assignment: Option<TopicIdPartitions>,
}

impl ShareHeartbeatResult {
    /// An error answer (epoch 0, no member id, as Kafka).
    pub fn error(error_code: ErrorCode, message: impl Into<String>) -> Self {
        ShareHeartbeatResult {
            error_code,
            error_message: Some(message.into()),
            ..Default::default()
        }
    }
}

/// One share group as ShareGroupDescribe shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareGroupView {
    /// GROUP_ID_NOT_FOUND for no such share group.
    pub error_code: ErrorCode,
    /// Why, for the client.
    pub error_message: Option<String>,
    /// "Empty" or "Stable".
    pub state: String,
    /// The group epoch.
    pub group_epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// The assignor ("simple").
    pub assignor_name: String,
    /// Members.
    pub members: Vec<ShareMemberView>,
}

/// One member of a share group as ShareGroupDescribe shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareMemberView {
    /// Member id.
    pub member_id: String,
    /// Rack.
    pub rack_id: Option<String>,
    /// Member epoch.
    pub member_epoch: i32,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Subscribed topic names.
    pub subscribed_topic_names: Vec<String>,
    /// Its partitions.
    pub assignment: TopicIdPartitions,
}

/// The share-session part of a ShareFetch or ShareAcknowledge: the session's epoch, the
/// partitions the request adds to and removes from it, and the acknowledgements it carries.
#[derive(Debug, Clone, Default)]
pub struct ShareSessionArgs {
    /// The member.
    pub member_id: String,
    /// 0 opens a session, -1 closes it, else the session's next epoch.
    pub epoch: i32,
    /// A ShareFetch (adds and forgets partitions) rather than a ShareAcknowledge.
    pub fetch: bool,
    /// Partitions named in the request (a ShareFetch adds them to its session).
    pub add: Vec<ShareKey>,
    /// Partitions the request forgets.
    pub forget: Vec<ShareKey>,
    /// Acknowledgements by partition.
    pub acks: Vec<(ShareKey, Vec<AckBatch>)>,
}

/// The answer to [`ShareSessionArgs`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareSessionResult {
    /// A top-level error (the request is answered with it alone).
    pub error_code: ErrorCode,
    /// Why, for the client.
    pub error_message: Option<String>,
    /// The session's partitions to fetch (none for a ShareAcknowledge or a closing fetch).
    pub fetch: Vec<ShareKey>,
    /// Each acknowledged partition's outcome, in request order.
    pub acks: Vec<(ShareKey, ErrorCode)>,
    /// `group.share.record.lock.duration.ms` (ShareFetch answers it).
    pub lock_duration_ms: i32,
}

/// Where a share-partition's next fetch reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchFrom {
    /// Not started: the start comes from `share.auto.offset.reset` (the log start or the high
    /// watermark), handed to [`ShareAcquirePart::init`].
    Init {
        /// `share.auto.offset.reset=earliest`.
        earliest: bool,
    },
    /// From this offset.
    At(Offset),
    /// Nothing can be acquired now (the in-flight window is full of held records).
    Nothing,
}

/// Records fetched for one share-partition, to acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareAcquirePart {
    /// The share-partition.
    pub key: ShareKey,
    /// Where a share-partition not started yet starts.
    pub init: Option<Offset>,
    /// The log's start (records below it are gone).
    pub log_start: Offset,
    /// The fetched batches, in offset order.
    pub batches: Vec<FetchedBatch>,
}
