//! Kafka error codes as a typed enum.
//!
//! The list mirrors `kafka_protocol::ResponseError` (itself generated from Kafka's
//! `Errors.java`), plus `None` (0), so a handler writes `ErrorCode::UnsupportedVersion` instead of
//! a bare `35`. A unit test in `rill-protocol` (which depends on `kafka_protocol`; this crate does
//! not) checks every code against that table so the two cannot drift.

/// A Kafka error code, as carried in `error_code` fields of responses.
///
/// `repr(i16)` makes the discriminant the wire value: `code()` is a plain cast. The default is
/// `None` (no error), as in Kafka's messages.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[repr(i16)]
#[non_exhaustive]
pub enum ErrorCode {
    /// No error.
    #[default]
    None = 0,
    /// The server experienced an unexpected error when processing the request.
    UnknownServerError = -1,
    /// The requested offset is not within the range of offsets maintained by the server.
    OffsetOutOfRange = 1,
    /// This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.
    CorruptMessage = 2,
    /// This server does not host this topic-partition.
    UnknownTopicOrPartition = 3,
    /// The requested fetch size is invalid.
    InvalidFetchSize = 4,
    /// There is no leader for this topic-partition as we are in the middle of a leadership election.
    LeaderNotAvailable = 5,
    /// For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.
    NotLeaderOrFollower = 6,
    /// The request timed out.
    RequestTimedOut = 7,
    /// The broker is not available.
    BrokerNotAvailable = 8,
    /// The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.
    ReplicaNotAvailable = 9,
    /// The request included a message larger than the max message size the server will accept.
    MessageTooLarge = 10,
    /// The controller moved to another broker.
    StaleControllerEpoch = 11,
    /// The metadata field of the offset request was too large.
    OffsetMetadataTooLarge = 12,
    /// The server disconnected before a response was received.
    NetworkException = 13,
    /// The coordinator is loading and hence can't process requests.
    CoordinatorLoadInProgress = 14,
    /// The coordinator is not available.
    CoordinatorNotAvailable = 15,
    /// This is not the correct coordinator.
    NotCoordinator = 16,
    /// The request attempted to perform an operation on an invalid topic.
    InvalidTopicException = 17,
    /// The request included message batch larger than the configured segment size on the server.
    RecordListTooLarge = 18,
    /// Messages are rejected since there are fewer in-sync replicas than required.
    NotEnoughReplicas = 19,
    /// Messages are written to the log, but to fewer in-sync replicas than required.
    NotEnoughReplicasAfterAppend = 20,
    /// Produce request specified an invalid value for required acks.
    InvalidRequiredAcks = 21,
    /// Specified group generation id is not valid.
    IllegalGeneration = 22,
    /// The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list.
    InconsistentGroupProtocol = 23,
    /// The configured groupId is invalid.
    InvalidGroupId = 24,
    /// The coordinator is not aware of this member.
    UnknownMemberId = 25,
    /// The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).
    InvalidSessionTimeout = 26,
    /// The group is rebalancing, so a rejoin is needed.
    RebalanceInProgress = 27,
    /// The committing offset data size is not valid.
    InvalidCommitOffsetSize = 28,
    /// Topic authorization failed.
    TopicAuthorizationFailed = 29,
    /// Group authorization failed.
    GroupAuthorizationFailed = 30,
    /// Cluster authorization failed.
    ClusterAuthorizationFailed = 31,
    /// The timestamp of the message is out of acceptable range.
    InvalidTimestamp = 32,
    /// The broker does not support the requested SASL mechanism.
    UnsupportedSaslMechanism = 33,
    /// Request is not valid given the current SASL state.
    IllegalSaslState = 34,
    /// The version of API is not supported.
    UnsupportedVersion = 35,
    /// Topic with this name already exists.
    TopicAlreadyExists = 36,
    /// Number of partitions is below 1.
    InvalidPartitions = 37,
    /// Replication factor is below 1 or larger than the number of available brokers.
    InvalidReplicationFactor = 38,
    /// Replica assignment is invalid.
    InvalidReplicaAssignment = 39,
    /// Configuration is invalid.
    InvalidConfig = 40,
    /// This is not the correct controller for this cluster.
    NotController = 41,
    /// This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.
    InvalidRequest = 42,
    /// The message format version on the broker does not support the request.
    UnsupportedForMessageFormat = 43,
    /// Request parameters do not satisfy the configured policy.
    PolicyViolation = 44,
    /// The broker received an out of order sequence number.
    OutOfOrderSequenceNumber = 45,
    /// The broker received a duplicate sequence number.
    DuplicateSequenceNumber = 46,
    /// Producer attempted to produce with an old epoch.
    InvalidProducerEpoch = 47,
    /// The producer attempted a transactional operation in an invalid state.
    InvalidTxnState = 48,
    /// The producer attempted to use a producer id which is not currently assigned to its transactional id.
    InvalidProducerIdMapping = 49,
    /// The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).
    InvalidTransactionTimeout = 50,
    /// The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.
    ConcurrentTransactions = 51,
    /// Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.
    TransactionCoordinatorFenced = 52,
    /// Transactional Id authorization failed.
    TransactionalIdAuthorizationFailed = 53,
    /// Security features are disabled.
    SecurityDisabled = 54,
    /// The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.
    OperationNotAttempted = 55,
    /// Disk error when trying to access log file on the disk.
    KafkaStorageError = 56,
    /// The user-specified log directory is not found in the broker config.
    LogDirNotFound = 57,
    /// SASL Authentication failed.
    SaslAuthenticationFailed = 58,
    /// This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception.
    UnknownProducerId = 59,
    /// A partition reassignment is in progress.
    ReassignmentInProgress = 60,
    /// Delegation Token feature is not enabled.
    DelegationTokenAuthDisabled = 61,
    /// Delegation Token is not found on server.
    DelegationTokenNotFound = 62,
    /// Specified Principal is not valid Owner/Renewer.
    DelegationTokenOwnerMismatch = 63,
    /// Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.
    DelegationTokenRequestNotAllowed = 64,
    /// Delegation Token authorization failed.
    DelegationTokenAuthorizationFailed = 65,
    /// Delegation Token is expired.
    DelegationTokenExpired = 66,
    /// Supplied principalType is not supported.
    InvalidPrincipalType = 67,
    /// The group is not empty.
    NonEmptyGroup = 68,
    /// The group id does not exist.
    GroupIdNotFound = 69,
    /// The fetch session ID was not found.
    FetchSessionIdNotFound = 70,
    /// The fetch session epoch is invalid.
    InvalidFetchSessionEpoch = 71,
    /// There is no listener on the leader broker that matches the listener on which metadata request was processed.
    ListenerNotFound = 72,
    /// Topic deletion is disabled.
    TopicDeletionDisabled = 73,
    /// The leader epoch in the request is older than the epoch on the broker.
    FencedLeaderEpoch = 74,
    /// The leader epoch in the request is newer than the epoch on the broker.
    UnknownLeaderEpoch = 75,
    /// The requesting client does not support the compression type of given partition.
    UnsupportedCompressionType = 76,
    /// Broker epoch has changed.
    StaleBrokerEpoch = 77,
    /// The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.
    OffsetNotAvailable = 78,
    /// The group member needs to have a valid member id before actually entering a consumer group.
    MemberIdRequired = 79,
    /// The preferred leader was not available.
    PreferredLeaderNotAvailable = 80,
    /// The consumer group has reached its max size.
    GroupMaxSizeReached = 81,
    /// The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.
    FencedInstanceId = 82,
    /// Eligible topic partition leaders are not available.
    EligibleLeadersNotAvailable = 83,
    /// Leader election not needed for topic partition.
    ElectionNotNeeded = 84,
    /// No partition reassignment is in progress.
    NoReassignmentInProgress = 85,
    /// Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.
    GroupSubscribedToTopic = 86,
    /// This record has failed the validation on broker and hence will be rejected.
    InvalidRecord = 87,
    /// There are unstable offsets that need to be cleared.
    UnstableOffsetCommit = 88,
    /// The throttling quota has been exceeded.
    ThrottlingQuotaExceeded = 89,
    /// There is a newer producer with the same transactionalId which fences the current one.
    ProducerFenced = 90,
    /// A request illegally referred to a resource that does not exist.
    ResourceNotFound = 91,
    /// A request illegally referred to the same resource twice.
    DuplicateResource = 92,
    /// Requested credential would not meet criteria for acceptability.
    UnacceptableCredential = 93,
    /// Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters
    InconsistentVoterSet = 94,
    /// The given update version was invalid.
    InvalidUpdateVersion = 95,
    /// Unable to update finalized features due to an unexpected server error.
    FeatureUpdateFailed = 96,
    /// Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.
    PrincipalDeserializationFailure = 97,
    /// Requested snapshot was not found
    SnapshotNotFound = 98,
    /// Requested position is not greater than or equal to zero, and less than the size of the snapshot.
    PositionOutOfRange = 99,
    /// This server does not host this topic ID.
    UnknownTopicId = 100,
    /// This broker ID is already in use.
    DuplicateBrokerRegistration = 101,
    /// The given broker ID was not registered.
    BrokerIdNotRegistered = 102,
    /// The log's topic ID did not match the topic ID in the request
    InconsistentTopicId = 103,
    /// The clusterId in the request does not match that found on the server
    InconsistentClusterId = 104,
    /// The transactionalId could not be found
    TransactionalIdNotFound = 105,
    /// The fetch session encountered inconsistent topic ID usage
    FetchSessionTopicIdError = 106,
    /// The new ISR contains at least one ineligible replica.
    IneligibleReplica = 107,
    /// The AlterPartition request successfully updated the partition state but the leader has changed.
    NewLeaderElected = 108,
    /// The requested offset is moved to tiered storage.
    OffsetMovedToTieredStorage = 109,
    /// The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.
    FencedMemberEpoch = 110,
    /// The instance ID is still used by another member in the consumer group. That member must leave first.
    UnreleasedInstanceId = 111,
    /// The assignor or its version range is not supported by the consumer group.
    UnsupportedAssignor = 112,
    /// The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.
    StaleMemberEpoch = 113,
    /// The request was sent to an endpoint of the wrong type.
    MismatchedEndpointType = 114,
    /// This endpoint type is not supported yet.
    UnsupportedEndpointType = 115,
    /// This controller ID is not known.
    UnknownControllerId = 116,
    /// Client sent a push telemetry request with an invalid or outdated subscription ID.
    UnknownSubscriptionId = 117,
    /// Client sent a push telemetry request larger than the maximum size the broker will accept.
    TelemetryTooLarge = 118,
    /// The controller has considered the broker registration to be invalid.
    InvalidRegistration = 119,
    /// The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.
    TransactionAbortable = 120,
    /// The record state is invalid. The acknowledgement of delivery could not be completed.
    InvalidRecordState = 121,
    /// The share session was not found.
    ShareSessionNotFound = 122,
    /// The share session epoch is invalid.
    InvalidShareSessionEpoch = 123,
    /// The share coordinator rejected the request because the share-group state epoch did not match.
    FencedStateEpoch = 124,
    /// The voter key doesn't match the receiving replica's key.
    InvalidVoterKey = 125,
    /// The voter is already part of the set of voters.
    DuplicateVoter = 126,
    /// The voter is not part of the set of voters.
    VoterNotFound = 127,
    /// The regular expression is not valid.
    InvalidRegularExpression = 128,
    /// Client metadata is stale, client should rebootstrap to obtain new metadata.
    RebootstrapRequired = 129,
    /// The supplied topology is invalid.
    StreamsInvalidTopology = 130,
    /// The supplied topology epoch is invalid.
    StreamsInvalidTopologyEpoch = 131,
    /// The supplied topology epoch is outdated.
    StreamsTopologyFenced = 132,
    /// The limit of share sessions has been reached.
    ShareSessionLimitReached = 133,
}

impl ErrorCode {
    /// Every known code, in wire order of the source table (used by `TryFrom<i16>` and tests).
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::None,
        ErrorCode::UnknownServerError,
        ErrorCode::OffsetOutOfRange,
        ErrorCode::CorruptMessage,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::InvalidFetchSize,
        ErrorCode::LeaderNotAvailable,
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::RequestTimedOut,
        ErrorCode::BrokerNotAvailable,
        ErrorCode::ReplicaNotAvailable,
        ErrorCode::MessageTooLarge,
        ErrorCode::StaleControllerEpoch,
        ErrorCode::OffsetMetadataTooLarge,
        ErrorCode::NetworkException,
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotCoordinator,
        ErrorCode::InvalidTopicException,
        ErrorCode::RecordListTooLarge,
        ErrorCode::NotEnoughReplicas,
        ErrorCode::NotEnoughReplicasAfterAppend,
        ErrorCode::InvalidRequiredAcks,
        ErrorCode::IllegalGeneration,
        ErrorCode::InconsistentGroupProtocol,
        ErrorCode::InvalidGroupId,
        ErrorCode::UnknownMemberId,
        ErrorCode::InvalidSessionTimeout,
        ErrorCode::RebalanceInProgress,
        ErrorCode::InvalidCommitOffsetSize,
        ErrorCode::TopicAuthorizationFailed,
        ErrorCode::GroupAuthorizationFailed,
        ErrorCode::ClusterAuthorizationFailed,
        ErrorCode::InvalidTimestamp,
        ErrorCode::UnsupportedSaslMechanism,
        ErrorCode::IllegalSaslState,
        ErrorCode::UnsupportedVersion,
        ErrorCode::TopicAlreadyExists,
        ErrorCode::InvalidPartitions,
        ErrorCode::InvalidReplicationFactor,
        ErrorCode::InvalidReplicaAssignment,
        ErrorCode::InvalidConfig,
        ErrorCode::NotController,
        ErrorCode::InvalidRequest,
        ErrorCode::UnsupportedForMessageFormat,
        ErrorCode::PolicyViolation,
        ErrorCode::OutOfOrderSequenceNumber,
        ErrorCode::DuplicateSequenceNumber,
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::InvalidTxnState,
        ErrorCode::InvalidProducerIdMapping,
        ErrorCode::InvalidTransactionTimeout,
        ErrorCode::ConcurrentTransactions,
        ErrorCode::TransactionCoordinatorFenced,
        ErrorCode::TransactionalIdAuthorizationFailed,
        ErrorCode::SecurityDisabled,
        ErrorCode::OperationNotAttempted,
        ErrorCode::KafkaStorageError,
        ErrorCode::LogDirNotFound,
        ErrorCode::SaslAuthenticationFailed,
        ErrorCode::UnknownProducerId,
        ErrorCode::ReassignmentInProgress,
        ErrorCode::DelegationTokenAuthDisabled,
        ErrorCode::DelegationTokenNotFound,
        ErrorCode::DelegationTokenOwnerMismatch,
        ErrorCode::DelegationTokenRequestNotAllowed,
        ErrorCode::DelegationTokenAuthorizationFailed,
        ErrorCode::DelegationTokenExpired,
        ErrorCode::InvalidPrincipalType,
        ErrorCode::NonEmptyGroup,
        ErrorCode::GroupIdNotFound,
        ErrorCode::FetchSessionIdNotFound,
        ErrorCode::InvalidFetchSessionEpoch,
        ErrorCode::ListenerNotFound,
        ErrorCode::TopicDeletionDisabled,
        ErrorCode::FencedLeaderEpoch,
        ErrorCode::UnknownLeaderEpoch,
        ErrorCode::UnsupportedCompressionType,
        ErrorCode::StaleBrokerEpoch,
        ErrorCode::OffsetNotAvailable,
        ErrorCode::MemberIdRequired,
        ErrorCode::PreferredLeaderNotAvailable,
        ErrorCode::GroupMaxSizeReached,
        ErrorCode::FencedInstanceId,
        ErrorCode::EligibleLeadersNotAvailable,
        ErrorCode::ElectionNotNeeded,
        ErrorCode::NoReassignmentInProgress,
        ErrorCode::GroupSubscribedToTopic,
        ErrorCode::InvalidRecord,
        ErrorCode::UnstableOffsetCommit,
        ErrorCode::ThrottlingQuotaExceeded,
        ErrorCode::ProducerFenced,
        ErrorCode::ResourceNotFound,
        ErrorCode::DuplicateResource,
        ErrorCode::UnacceptableCredential,
        ErrorCode::InconsistentVoterSet,
        ErrorCode::InvalidUpdateVersion,
        ErrorCode::FeatureUpdateFailed,
        ErrorCode::PrincipalDeserializationFailure,
        ErrorCode::SnapshotNotFound,
        ErrorCode::PositionOutOfRange,
        ErrorCode::UnknownTopicId,
        ErrorCode::DuplicateBrokerRegistration,
        ErrorCode::BrokerIdNotRegistered,
        ErrorCode::InconsistentTopicId,
        ErrorCode::InconsistentClusterId,
        ErrorCode::TransactionalIdNotFound,
        ErrorCode::FetchSessionTopicIdError,
        ErrorCode::IneligibleReplica,
        ErrorCode::NewLeaderElected,
        ErrorCode::OffsetMovedToTieredStorage,
        ErrorCode::FencedMemberEpoch,
        ErrorCode::UnreleasedInstanceId,
        ErrorCode::UnsupportedAssignor,
        ErrorCode::StaleMemberEpoch,
        ErrorCode::MismatchedEndpointType,
        ErrorCode::UnsupportedEndpointType,
        ErrorCode::UnknownControllerId,
        ErrorCode::UnknownSubscriptionId,
        ErrorCode::TelemetryTooLarge,
        ErrorCode::InvalidRegistration,
        ErrorCode::TransactionAbortable,
        ErrorCode::InvalidRecordState,
        ErrorCode::ShareSessionNotFound,
        ErrorCode::InvalidShareSessionEpoch,
        ErrorCode::FencedStateEpoch,
        ErrorCode::InvalidVoterKey,
        ErrorCode::DuplicateVoter,
        ErrorCode::VoterNotFound,
        ErrorCode::InvalidRegularExpression,
        ErrorCode::RebootstrapRequired,
        ErrorCode::StreamsInvalidTopology,
        ErrorCode::StreamsInvalidTopologyEpoch,
        ErrorCode::StreamsTopologyFenced,
        ErrorCode::ShareSessionLimitReached,
    ];

    /// The wire value of this code.
    pub const fn code(self) -> i16 {
        self as i16
    }

    /// True for `None` (0): the field says "no error".
    pub const fn is_ok(self) -> bool {
        matches!(self, ErrorCode::None)
    }
}

/// A code read off the wire that this table does not know.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown Kafka error code {0}")]
pub struct UnknownErrorCode(pub i16);

impl TryFrom<i16> for ErrorCode {
    type Error = UnknownErrorCode;

    fn try_from(code: i16) -> Result<Self, Self::Error> {
        ErrorCode::ALL
            .iter()
            .copied()
            .find(|known| known.code() == code)
            .ok_or(UnknownErrorCode(code))
    }
}

impl From<ErrorCode> for i16 {
    fn from(code: ErrorCode) -> i16 {
        code.code()
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ({})", self, self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i16_round_trip_and_unknown() {
        for &code in ErrorCode::ALL {
            assert_eq!(ErrorCode::try_from(code.code()), Ok(code));
        }
        assert_eq!(ErrorCode::try_from(-2), Err(UnknownErrorCode(-2)));
        assert_eq!(ErrorCode::UnsupportedVersion.code(), 35);
        assert!(ErrorCode::None.is_ok());
        assert!(!ErrorCode::CorruptMessage.is_ok());
    }
}
