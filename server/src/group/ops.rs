//! What a handler asks a group's coordinator, and its answers. All `Send`: a request that arrives
//! on one shard for a group coordinated by another crosses cores in the group channel mesh.

use bytes::Bytes;
use rill_protocol::ErrorCode;
use rill_types::ProducerId;

use super::offsets::CommittedOffset;

pub mod share;

/// JoinGroup, wire-independent.
#[derive(Debug, Clone, Default)]
pub struct JoinArgs {
    /// "" for a member joining for the first time.
    pub member_id: String,
    /// `group.instance.id` (static membership).
    pub group_instance_id: Option<String>,
    /// The request header's client id (DescribeGroups shows it).
    pub client_id: String,
    /// Where the member connects from (DescribeGroups shows it).
    pub client_host: String,
    /// The member is removed when it sends no heartbeat for this long.
    pub session_timeout_ms: i32,
    /// How long a rebalance waits for this member to rejoin.
    pub rebalance_timeout_ms: i32,
    /// e.g. "consumer".
    pub protocol_type: String,
    /// (assignor name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: an unknown member first gets MEMBER_ID_REQUIRED with its new id.
    pub require_known_member_id: bool,
}

/// One member as the leader sees it in its JoinGroup answer.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinedMember {
    /// Member id.
    pub member_id: String,
    /// Static instance id, if any.
    pub group_instance_id: Option<String>,
    /// The member's metadata for the selected protocol.
    pub metadata: Bytes,
}

/// JoinGroup's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JoinResult {
    /// Kafka error code.
    pub error_code: ErrorCode,
    /// The new generation.
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The selected assignor.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// The member's id (new members learn it here).
    pub member_id: String,
    /// Every member, for the leader only.
    pub members: Vec<JoinedMember>,
}

impl JoinResult {
    /// An error answer that still tells the member its id.
    pub fn error(error_code: ErrorCode, member_id: &str) -> Self {
        JoinResult {
            error_code,
            generation_id: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

/// SyncGroup, wire-independent.
#[derive(Debug, Clone, Default)]
pub struct SyncArgs {
    /// Member id.
    pub member_id: String,
    /// Static instance id, if any.
    pub group_instance_id: Option<String>,
    /// Generation the member joined.
    pub generation_id: i32,
    /// v5: must match the group's.
    pub protocol_type: Option<String>,
    /// v5: must match the group's.
    pub protocol_name: Option<String>,
    /// The leader's assignment per member (empty for followers).
    pub assignments: Vec<(String, Bytes)>,
}

/// SyncGroup's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncResult {
    /// Kafka error code.
    pub error_code: ErrorCode,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The selected assignor.
    pub protocol_name: Option<String>,
    /// This member's assignment.
    pub assignment: Bytes,
}

impl SyncResult {
    /// An error answer.
    pub fn error(error_code: ErrorCode) -> Self {
        SyncResult {
            error_code,
            ..Default::default()
        }
    }
}

/// Heartbeat (and the member identity other requests carry).
#[derive(Debug, Clone, Default)]
pub struct MemberRef {
    /// Member id.
    pub member_id: String,
    /// Static instance id, if any.
    pub group_instance_id: Option<String>,
    /// Generation the member believes is current.
    pub generation_id: i32,
}

/// Partitions of one topic.
pub type TopicPartitions = (String, Vec<i32>);

/// One group as DescribeGroups shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupDescription {
    /// Kafka error code.
    pub error_code: ErrorCode,
    /// "Empty", "PreparingRebalance", "CompletingRebalance", "Stable" or "Dead".
    pub state: String,
    /// e.g. "consumer".
    pub protocol_type: String,
    /// The selected assignor when Stable.
    pub protocol_data: String,
    /// Members.
    pub members: Vec<MemberDescription>,
}

/// One member as DescribeGroups shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberDescription {
    /// Member id.
    pub member_id: String,
    /// Static instance id.
    pub group_instance_id: Option<String>,
    /// Client id from the JoinGroup request header.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Metadata for the selected protocol (Stable only).
    pub metadata: Bytes,
    /// Current assignment (Stable only).
    pub assignment: Bytes,
}

/// One group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupListing {
    /// Group id.
    pub group_id: String,
    /// e.g. "consumer" ("" for offsets-only groups).
    pub protocol_type: String,
    /// State name.
    pub state: String,
    /// "classic", "consumer" or "share" (ListGroups v5).
    pub group_type: &'static str,
}

/// A topic as a consumer group's heartbeat sees it: the group's subscriptions are resolved
/// against these (handed in by the handler from the broker's topic registry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// Topic id.
    pub id: uuid::Uuid,
    /// Partition count.
    pub partitions: i32,
}

/// Partitions by topic id, as ConsumerGroupHeartbeat carries them.
pub type TopicIdPartitions = Vec<(uuid::Uuid, Vec<i32>)>;

/// ConsumerGroupHeartbeat (KIP-848), wire-independent; `None` fields did not change.
#[derive(Debug, Clone, Default)]
pub struct ConsumerHeartbeatArgs {
    /// The request's version (v1: the client makes its member id).
    pub version: i16,
    /// Member id ("" on a v0 join: the coordinator makes one).
    pub member_id: String,
    /// 0 joins, -1 leaves, -2 leaves as a static member that will come back.
    pub member_epoch: i32,
    /// `group.instance.id` (static membership).
    pub instance_id: Option<String>,
    /// Rack.
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Subscribed topic regex (RE2 syntax, whole-name match).
    pub subscribed_topic_regex: Option<String>,
    /// `group.remote.assignor`.
    pub server_assignor: Option<String>,
    /// The partitions the member owns now.
    pub owned: Option<TopicIdPartitions>,
    /// The request header's client id.
    pub client_id: String,
    /// Where the member connects from.
    pub client_host: String,
    /// Every (non-internal) topic, to resolve subscriptions against.
    pub topics: Vec<TopicInfo>,
}

/// ConsumerGroupHeartbeat's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsumerHeartbeatResult {
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
    /// What the member is to own now (`None`: unchanged).
    pub assignment: Option<TopicIdPartitions>,
}

impl ConsumerHeartbeatResult {
    /// An error answer.
    pub fn error(error_code: ErrorCode, message: impl Into<String>) -> Self {
        // Kafka answers errors with epoch 0 and no member id.
        ConsumerHeartbeatResult {
            error_code,
            error_message: Some(message.into()),
            ..Default::default()
        }
    }
}

/// One consumer group as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsumerGroupView {
    /// GROUP_ID_NOT_FOUND for no such consumer group.
    pub error_code: ErrorCode,
    /// Why, for the client.
    pub error_message: Option<String>,
    /// "Empty", "Assigning", "Reconciling" or "Stable".
    pub state: String,
    /// The group epoch.
    pub group_epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// The assignor in use.
    pub assignor_name: String,
    /// Members.
    pub members: Vec<ConsumerMemberView>,
}

/// One member of a consumer group as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsumerMemberView {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
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
    /// Subscribed regex.
    pub subscribed_topic_regex: Option<String>,
    /// What it owns.
    pub assignment: TopicIdPartitions,
    /// What it is to own.
    pub target_assignment: TopicIdPartitions,
}

/// An operation on one group, run on its coordinator shard.
#[derive(Debug)]
pub enum GroupOp {
    /// JoinGroup.
    Join(JoinArgs),
    /// SyncGroup.
    Sync(SyncArgs),
    /// Heartbeat.
    Heartbeat(MemberRef),
    /// LeaveGroup: (member id, instance id) pairs.
    Leave(Vec<(String, Option<String>)>),
    /// OffsetCommit: who commits, and (topic, partition, offset) triples.
    Commit(MemberRef, Vec<(String, i32, CommittedOffset)>),
    /// OffsetFetch: `None` = every committed partition.
    Fetch(Option<Vec<TopicPartitions>>),
    /// OffsetDelete.
    DeleteOffsets(Vec<TopicPartitions>),
    /// DescribeGroups (one group).
    Describe,
    /// DeleteGroups (one group).
    Delete,
    /// ListGroups: every group on the receiving shard (the group id is ignored).
    List,
    /// TxnOffsetCommit (already checked against the transaction): offsets pending in the
    /// producer's transaction.
    TxnCommit {
        /// The transactional producer.
        producer_id: ProducerId,
        /// Who commits (generation -1 and no member id: not checked, as Kafka).
        member: MemberRef,
        /// (topic, partition, offset) triples.
        offsets: Vec<(String, i32, CommittedOffset)>,
    },
    /// The producer's transaction ended: its pending offsets become committed, or are dropped.
    TxnEnd {
        /// The transactional producer.
        producer_id: ProducerId,
        /// Commit (true) or abort.
        commit: bool,
    },
    /// Which of these partitions (`None`: any) have offsets pending in an open transaction
    /// (OffsetFetch with `require_stable`, KIP-447).
    PendingTxn(Option<Vec<TopicPartitions>>),
    /// ConsumerGroupHeartbeat.
    ConsumerHeartbeat(Box<ConsumerHeartbeatArgs>),
    /// ConsumerGroupDescribe (one group).
    ConsumerDescribe,
    /// OffsetFetch v9+ from a member: (member id, member epoch) checked against the group.
    CheckFetcher(String, i32),
    /// ShareGroupHeartbeat.
    ShareHeartbeat(Box<share::ShareHeartbeatArgs>),
    /// ShareGroupDescribe (one group).
    ShareDescribe,
    /// The share-session part of a ShareFetch or ShareAcknowledge.
    ShareSession(Box<share::ShareSessionArgs>),
    /// Where a member's ShareFetch reads each share-partition from: (member id, its session's
    /// share-partitions). The member is put in line for them (`crate::group::share::waiters`).
    SharePlan(String, Vec<share::ShareKey>),
    /// Acquire fetched records for a member: (member id, max records, fetched parts).
    ShareAcquire(String, usize, Vec<share::ShareAcquirePart>),
    /// The group config `share.auto.offset.reset` (IncrementalAlterConfigs on a GROUP).
    ShareSetReset(share::AutoOffsetReset),
    /// DescribeShareGroupOffsets: these share-partitions' start offsets (`None`: every one with
    /// state).
    ShareOffsets(Option<Vec<share::ShareKey>>),
    /// AlterShareGroupOffsets: new start offsets (the group must have no members).
    ShareAlterOffsets(Vec<(share::ShareKey, rill_types::Offset)>),
    /// DeleteShareGroupOffsets: forget these topics' share-partitions (no members either).
    ShareDeleteOffsets(Vec<uuid::Uuid>),
}

/// The answer to a [`GroupOp`] (same variant order).
#[derive(Debug, PartialEq)]
pub enum GroupReply {
    /// JoinGroup.
    Join(JoinResult),
    /// SyncGroup.
    Sync(SyncResult),
    /// Heartbeat error code.
    Heartbeat(ErrorCode),
    /// LeaveGroup: top-level error, then one error per member in request order.
    Leave(ErrorCode, Vec<ErrorCode>),
    /// OffsetCommit: one error per partition in request order.
    Commit(Vec<ErrorCode>),
    /// OffsetFetch: group error, then (topic, partition, committed or None).
    Fetch(ErrorCode, Vec<(String, i32, Option<CommittedOffset>)>),
    /// OffsetDelete: group error, then one error per partition in request order.
    DeleteOffsets(ErrorCode, Vec<ErrorCode>),
    /// DescribeGroups.
    Describe(GroupDescription),
    /// DeleteGroups error code.
    Delete(ErrorCode),
    /// ListGroups.
    List(Vec<GroupListing>),
    /// TxnEnd error code.
    TxnEnd(ErrorCode),
    /// PendingTxn: the partitions with pending transactional offsets.
    PendingTxn(Vec<(String, i32)>),
    /// ConsumerGroupHeartbeat.
    ConsumerHeartbeat(ConsumerHeartbeatResult),
    /// ConsumerGroupDescribe.
    ConsumerDescribe(ConsumerGroupView),
    /// CheckFetcher: NONE, UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH.
    CheckFetcher(ErrorCode),
    /// ShareGroupHeartbeat.
    ShareHeartbeat(share::ShareHeartbeatResult),
    /// ShareGroupDescribe.
    ShareDescribe(share::ShareGroupView),
    /// ShareSession.
    ShareSession(share::ShareSessionResult),
    /// SharePlan: a group error (GROUP_ID_NOT_FOUND), else where to read each.
    SharePlan(ErrorCode, Vec<(share::ShareKey, share::FetchFrom)>),
    /// ShareAcquire: the acquired ranges by share-partition.
    ShareAcquire(Vec<(share::ShareKey, Vec<share::Acquired>)>),
    /// ShareSetReset: NONE, or GROUP_MAX_SIZE_REACHED past `rill.shard.groups.max`.
    ShareSetReset(ErrorCode),
    /// ShareOffsets: a group error, else each share-partition's start (`None`: no state).
    ShareOffsets(
        ErrorCode,
        Vec<(share::ShareKey, Option<rill_types::Offset>)>,
    ),
    /// ShareAlterOffsets and ShareDeleteOffsets: the group's error (NON_EMPTY_GROUP with
    /// members, GROUP_ID_NOT_FOUND for no share group).
    ShareOffsetsChanged(ErrorCode),
    /// The coordinator could not be reached (shard gone): this Kafka error for everything.
    Unavailable(ErrorCode),
}

/// An operation on one group, as it crosses to the coordinating shard.
#[derive(Debug)]
pub struct GroupCall {
    /// The group ("" for [`GroupOp::List`]).
    pub group_id: String,
    /// What to do.
    pub op: GroupOp,
}
