//! The ONE table of APIs Rill knows and the version ranges it advertises in ApiVersions.
//!
//! Every range was chosen against what real clients send (librdkafka, kafka-python, aiokafka, kafkajs) and what
//! the `kafka_protocol` 0.18 codec decodes (Kafka 4.x specs):
//!
//! | API (key)                | advertised | why the edges                                                      |
//! |--------------------------|-----------:|--------------------------------------------------------------------|
//! | Produce (0)              |   0..=11   | min 0 keeps librdkafka's compression on (KAFKA-18659); v0-2 are *advertised only* and rejected as UnsupportedVersion, as Kafka 4 does; v3 = MsgVer2 check; v13 needs topic ids |
//! | Fetch (1)                |   4..=12   | v4 = librdkafka MsgVer2 check; v13+ names topics by id             |
//! | ListOffsets (2)          |   1..=10   | v1 = librdkafka offsets-for-times check; v8 = Java earliestLocal   |
//! | Metadata (3)             |   0..=12   | every client                                                       |
//! | OffsetCommit (8)         |   2..=9    | overlaps librdkafka's 1-2 check at 2; aiokafka 2-3                 |
//! | OffsetFetch (9)          |   1..=9    | v1 = librdkafka check and aiokafka/kafkajs minimum                 |
//! | FindCoordinator (10)     |   0..=4    | v0 = librdkafka group/LZ4 checks                                   |
//! | JoinGroup (11)           |   0..=7    | v0 = librdkafka check; v8+ only adds `reason`/KIP-848 bits         |
//! | Heartbeat (12)           |   0..=4    | v0 = librdkafka check                                              |
//! | LeaveGroup (13)          |   0..=5    | v0 = librdkafka check; v3+ batch leave                             |
//! | SyncGroup (14)           |   0..=5    | v0 = librdkafka check                                              |
//! | DescribeGroups (15)      |   0..=6    | v6 = GROUP_ID_NOT_FOUND for a missing group (KIP-1043)             |
//! | ListGroups (16)          |   0..=5    | v4 state filter (KIP-518), v5 type filter (KIP-848): every group is "classic" |
//! | SaslHandshake (17)       |   0..=1    | librdkafka 2.0.2 enables SASL only if v0 is in the range (then sends v1); a v0 handshake on a SASL listener is answered UNSUPPORTED_VERSION and closed (v0's raw tokens are not served), elsewhere ILLEGAL_SASL_STATE as Kafka |
//! | ApiVersions (18)         |   0..=4    | aiokafka speaks only v0; kafka-python tries v4 first              |
//! | CreateTopics (19)        |   2..=7    | codec minimum 2                                                    |
//! | DeleteTopics (20)        |   1..=6    | codec minimum 1                                                    |
//! | DeleteRecords (21)       |   0..=2    | confluent-kafka, kafka-python and kafkajs admin                    |
//! | InitProducerId (22)      |   0..=4    | v0 = librdkafka idempotence check and aiokafka's only version      |
//! | OffsetForLeaderEpoch (23)|   2..=4    | codec minimum 2 (librdkafka 2.0.2 sends v2)                        |
//! | AddPartitionsToTxn (24)  |   0..=5    | clients send 0-3 (librdkafka 0, kafkajs 0-1, kafka-python 3); 4-5 are the brokers' batched / verify-only form (KIP-890) |
//! | AddOffsetsToTxn (25)     |   0..=4    | librdkafka and aiokafka 0, kafkajs 1, kafka-python 3               |
//! | EndTxn (26)              |   0..=4    | v5 bumps the epoch per transaction (KIP-890 part 2): not offered   |
//! | WriteTxnMarkers (27)     |   1..=1    | brokers (a coordinator to partition leaders) and admin tools aborting a hanging transaction; v0 is gone in Kafka 4, v2 is transactions V2 |
//! | TxnOffsetCommit (28)     |   0..=4    | librdkafka 3 (KIP-447 member fields); v5 is KIP-890 part 2         |
//! | DescribeAcls (29)        |   1..=3    | Kafka 4's range (v0 removed, KIP-896); v3 adds the USER resource type |
//! | CreateAcls (30)          |   1..=3    | Kafka 4's range                                                    |
//! | DeleteAcls (31)          |   1..=3    | Kafka 4's range                                                    |
//! | DescribeConfigs (32)     |   1..=4    | codec minimum 1                                                    |
//! | AlterConfigs (33)        |   0..=2    | kafkajs and kafka-python's non-incremental path                    |
//! | AlterReplicaLogDirs (34) |   1..=2    | Kafka 4's range; one data directory: moving a replica where it is answers NONE |
//! | DescribeLogDirs (35)     |   1..=4    | codec minimum 1; v4 adds the directory's total and usable bytes    |
//! | SaslAuthenticate (36)    |   0..=2    | Kafka 4's range; v1 adds the session lifetime (always 0: no re-authentication) |
//! | CreatePartitions (37)    |   0..=3    |                                                                    |
//! | DeleteGroups (42)        |   0..=2    |                                                                    |
//! | ElectLeaders (43)        |   0..=2    | v1 adds the election type and a top-level error                    |
//! | AlterPartitionReassignments (45) | 0..=0 | v1 (KIP-860 replication factor change) is past the pinned specs |
//! | ListPartitionReassignments (46)  | 0..=0 |                                                           |
//! | IncrementalAlterConfigs (44) | 0..=1  | confluent-kafka and kafka-python                                   |
//! | OffsetDelete (47)        |   0..=0    |                                                                    |
//! | DescribeClientQuotas (48) |  0..=1    | KIP-546; Kafka 4.4's range                                          |
//! | AlterClientQuotas (49)   |   0..=1    | KIP-546; Kafka 4.4's range                                         |
//! | DescribeUserScramCredentials (50) | 0..=0 | KIP-554                                             |
//! | AlterUserScramCredentials (51)    | 0..=0 | KIP-554                                             |
//! | DescribeCluster (60)     |   0..=1    | v2 only adds fenced-broker listing                                 |
//! | DescribeProducers (61)   |   0..=0    |                                                                    |
//! | DescribeTransactions (65)|   0..=0    |                                                                    |
//! | ListTransactions (66)    |   0..=1    | v1 adds the duration filter; v2's id pattern is not offered        |
//! | ConsumerGroupHeartbeat (68) | 0..=1   | KIP-848; v1: the client makes its member id (KIP-1082), as Kafka 4 |
//! | ConsumerGroupDescribe (69)  | 0..=1   | v1 adds the member type (KIP-1099)                                 |
//! | DescribeTopicPartitions (75) | 0..=0 | Kafka's only version; the Java AdminClient's describeTopics asks it first |
//! | ShareGroupHeartbeat (76) | 1..=1     | KIP-932; v0 was 4.0's early access, gone in 4.1                    |
//! | ShareGroupDescribe (77)  | 1..=1     |                                                                    |
//! | ShareFetch (78)          | 1..=1     | v2 (acquire modes, RENEW: KIP-1206/1222) is past the codec         |
//! | ShareAcknowledge (79)    | 1..=1     | v2 (RENEW) is past the codec                                       |
//! | DescribeShareGroupOffsets (90) | 0..=0 | v1 (lag) is past the codec                                    |
//! | AlterShareGroupOffsets (91)    | 0..=0 |                                                               |
//! | DeleteShareGroupOffsets (92)   | 0..=0 |                                                               |
//!
//! The rows themselves are [`for_each_api!`]: each names its versions and the server's handler,
//! so adding an API is one row there plus one handler file.

use crate::kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use crate::kafka_protocol::messages::ApiKey;
use crate::ErrorCode;

/// One API Rill knows: the range it advertises and the lowest version it can actually decode.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ApiEntry {
    /// The API.
    pub api_key: ApiKey,
    /// Lowest version advertised in ApiVersions (may be below `decodable_min`, see Produce).
    pub advertised_min: i16,
    /// Highest version advertised and decoded.
    pub advertised_max: i16,
    /// Lowest version the codec decodes; lower advertised versions answer UnsupportedVersion.
    pub decodable_min: i16,
}

impl ApiEntry {
    /// Whether `version` is advertised AND decodable.
    pub const fn decodes(&self, version: i16) -> bool {
        version >= self.decodable_min && version <= self.advertised_max
    }
}

/// The registry, written once: every other list of APIs is derived from it (the entries
/// below, the pinned specs in `rill_protocol::schema`, and in rill-server the dispatch match and the
/// handler each row names). `for_each_api!(m)` calls the macro `m` with the rows:
///
/// `Name min..=max [decodes from..] => handler,`
///
/// - `Name`: the `ApiKey`, `RequestKind` and `ResponseKind` variant, and the pinned spec
///   `specs/{Name}Request.json`;
/// - `min..=max`: the versions advertised in ApiVersions (the table in the module doc says why);
/// - `decodes from..`: the lowest version decoded, where it is above `min` (Produce);
/// - `handler`: the module `rill_server::handler::handler`, whose `serve` answers the API.
///
/// Rows are sorted by api key (ApiVersions lists keys in this order).
#[macro_export]
macro_rules! for_each_api {
    ($then:ident) => {
        $then! {
            // Produce v0-2: advertised so librdkafka keeps compression (KAFKA-18659), never decoded.
            Produce 0..=11 decodes 3.. => produce,
            Fetch 4..=12 => fetch,
            ListOffsets 1..=10 => list_offsets,
            Metadata 0..=12 => metadata,
            OffsetCommit 2..=9 => offset_commit,
            OffsetFetch 1..=9 => offset_fetch,
            FindCoordinator 0..=4 => find_coordinator,
            JoinGroup 0..=7 => join_group,
            Heartbeat 0..=4 => heartbeat,
            LeaveGroup 0..=5 => leave_group,
            SyncGroup 0..=5 => sync_group,
            DescribeGroups 0..=6 => describe_groups,
            ListGroups 0..=5 => list_groups,
            // v0 on a SASL listener is answered UNSUPPORTED_VERSION (its raw tokens are not served).
            SaslHandshake 0..=1 => sasl_handshake,
            ApiVersions 0..=4 => api_versions,
            CreateTopics 2..=7 => create_topics,
            DeleteTopics 1..=6 => delete_topics,
            DeleteRecords 0..=2 => delete_records,
            InitProducerId 0..=4 => init_producer_id,
            OffsetForLeaderEpoch 2..=4 => offset_for_leader_epoch,
            AddPartitionsToTxn 0..=5 => add_partitions_to_txn,
            AddOffsetsToTxn 0..=4 => add_offsets_to_txn,
            EndTxn 0..=4 => end_txn,
            WriteTxnMarkers 1..=1 => write_txn_markers,
            TxnOffsetCommit 0..=4 => txn_offset_commit,
            DescribeAcls 1..=3 => describe_acls,
            CreateAcls 1..=3 => create_acls,
            DeleteAcls 1..=3 => delete_acls,
            DescribeConfigs 1..=4 => describe_configs,
            AlterConfigs 0..=2 => alter_configs,
            AlterReplicaLogDirs 1..=2 => alter_replica_log_dirs,
            DescribeLogDirs 1..=4 => describe_log_dirs,
            SaslAuthenticate 0..=2 => sasl_authenticate,
            CreatePartitions 0..=3 => create_partitions,
            DeleteGroups 0..=2 => delete_groups,
            ElectLeaders 0..=2 => elect_leaders,
            IncrementalAlterConfigs 0..=1 => incremental_alter_configs,
            AlterPartitionReassignments 0..=0 => alter_partition_reassignments,
            ListPartitionReassignments 0..=0 => list_partition_reassignments,
            OffsetDelete 0..=0 => offset_delete,
            DescribeClientQuotas 0..=1 => describe_client_quotas,
            AlterClientQuotas 0..=1 => alter_client_quotas,
            DescribeUserScramCredentials 0..=0 => describe_user_scram_credentials,
            AlterUserScramCredentials 0..=0 => alter_user_scram_credentials,
            DescribeCluster 0..=1 => describe_cluster,
            DescribeProducers 0..=0 => describe_producers,
            DescribeTransactions 0..=0 => describe_transactions,
            ListTransactions 0..=1 => list_transactions,
            ConsumerGroupHeartbeat 0..=1 => consumer_group_heartbeat,
            ConsumerGroupDescribe 0..=1 => consumer_group_describe,
            DescribeTopicPartitions 0..=0 => describe_topic_partitions,
            ShareGroupHeartbeat 1..=1 => share_group_heartbeat,
            ShareGroupDescribe 1..=1 => share_group_describe,
            ShareFetch 1..=1 => share_fetch,
            ShareAcknowledge 1..=1 => share_acknowledge,
            DescribeShareGroupOffsets 0..=0 => describe_share_group_offsets,
            AlterShareGroupOffsets 0..=0 => alter_share_group_offsets,
            DeleteShareGroupOffsets 0..=0 => delete_share_group_offsets,
        }
    };
}

/// [`ENTRIES`] from the rows of [`for_each_api!`].
macro_rules! registry_entries {
    ($($name:ident $min:literal ..= $max:literal $(decodes $from:literal ..)? => $handler:ident,)*) => {
        /// Every API Rill serves, sorted by api key (see [`for_each_api!`]).
        pub const ENTRIES: &[ApiEntry] = &[$(ApiEntry {
            api_key: ApiKey::$name,
            advertised_min: $min,
            advertised_max: $max,
            decodable_min: registry_entries!(@from $($from)? ; $min),
        },)*];
    };
    (@from $from:literal ; $min:literal) => { $from };
    (@from ; $min:literal) => { $min };
}

for_each_api!(registry_entries);

/// All registry entries (for listing, docs and tests).
pub fn entries() -> &'static [ApiEntry] {
    ENTRIES
}

/// The registry entry for `api_key`, if Rill knows the API.
pub fn entry(api_key: ApiKey) -> Option<&'static ApiEntry> {
    ENTRIES.iter().find(|e| e.api_key == api_key)
}

/// The advertised `(min, max)` version range of `api_key`, if Rill knows the API.
pub fn supported_range(api_key: ApiKey) -> Option<(i16, i16)> {
    entry(api_key).map(|e| (e.advertised_min, e.advertised_max))
}

/// An ApiVersions response listing every registry entry.
///
/// `version` is the version the response will be encoded at (fields absent below it are left
/// at defaults); for an unsupported request version pass 0 and `ErrorCode::UnsupportedVersion`.
pub fn api_versions_response(version: i16, error: ErrorCode) -> ApiVersionsResponse {
    api_versions_response_for(version, error, |_| true)
}

/// An ApiVersions response listing only the entries for which `implemented` returns true.
pub fn api_versions_response_for(
    version: i16,
    error: ErrorCode,
    implemented: impl Fn(ApiKey) -> bool,
) -> ApiVersionsResponse {
    assert!(
        version >= 0,
        "ApiVersions response version must be non-negative"
    );
    let api_keys = ENTRIES
        .iter()
        .filter(|e| implemented(e.api_key))
        .map(|e| {
            ApiVersion::default()
                .with_api_key(e.api_key as i16)
                .with_min_version(e.advertised_min)
                .with_max_version(e.advertised_max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error.code())
        .with_api_keys(api_keys)
        .with_throttle_time_ms(0)
        // -1: no finalized features (what a single-node broker without KRaft features says).
        .with_finalized_features_epoch(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_sorted_unique_and_within_codec() {
        for pair in ENTRIES.windows(2) {
            assert!((pair[0].api_key as i16) < (pair[1].api_key as i16));
        }
        for e in ENTRIES {
            let codec = e.api_key.valid_versions();
            assert!(e.advertised_min <= e.decodable_min, "{:?}", e.api_key);
            assert!(e.decodable_min <= e.advertised_max, "{:?}", e.api_key);
            assert!(
                e.decodable_min >= codec.min,
                "{:?} below codec {codec}",
                e.api_key
            );
            assert!(
                e.advertised_max <= codec.max,
                "{:?} above codec {codec}",
                e.api_key
            );
        }
    }

    /// librdkafka 2.0.2 enables features only if these exact versions overlap our ranges.
    #[test]
    fn librdkafka_feature_checks_pass() {
        let needs = [
            (ApiKey::Produce, 0, 0), // compression codec check (KAFKA-18659)
            (ApiKey::Produce, 3, 3),
            (ApiKey::Fetch, 4, 4),
            (ApiKey::Produce, 7, 7), // ZSTD
            (ApiKey::Fetch, 10, 10),
            (ApiKey::ListOffsets, 1, 1),
            (ApiKey::InitProducerId, 0, 0),
            (ApiKey::FindCoordinator, 0, 0),
            (ApiKey::OffsetCommit, 1, 2),
            (ApiKey::OffsetFetch, 1, 1),
            (ApiKey::JoinGroup, 0, 0),
            (ApiKey::SyncGroup, 0, 0),
            (ApiKey::Heartbeat, 0, 0),
            (ApiKey::LeaveGroup, 0, 0),
            (ApiKey::ApiVersions, 0, 0),
            (ApiKey::SaslHandshake, 0, 0), // RD_KAFKA_FEATURE_SASL_HANDSHAKE
            (ApiKey::SaslHandshake, 1, 1), // RD_KAFKA_FEATURE_SASL_AUTH_REQ
            (ApiKey::SaslAuthenticate, 0, 0),
        ];
        for (key, min, max) in needs {
            let (lo, hi) = supported_range(key).expect("registered");
            assert!(min <= hi && lo <= max, "{key:?} {min}..{max} vs {lo}..{hi}");
        }
    }

    #[test]
    fn fetch_capped_below_topic_ids_and_aiokafka_versions_decodable() {
        assert_eq!(supported_range(ApiKey::Fetch).map(|r| r.1), Some(12));
        assert!(entry(ApiKey::ApiVersions).is_some_and(|e| e.decodes(0)));
        assert!(entry(ApiKey::InitProducerId).is_some_and(|e| e.decodes(0)));
        assert!(!entry(ApiKey::Produce).is_some_and(|e| e.decodes(2)));
        assert!(entry(ApiKey::Produce).is_some_and(|e| e.decodes(3)));
    }

    #[test]
    fn response_lists_filtered_entries() {
        let all = api_versions_response(3, ErrorCode::None);
        assert_eq!(all.api_keys.len(), ENTRIES.len());
        let some = api_versions_response_for(0, ErrorCode::UnsupportedVersion, |k| {
            k == ApiKey::ApiVersions || k == ApiKey::Metadata
        });
        assert_eq!(some.error_code, 35);
        assert_eq!(some.api_keys.len(), 2);
        assert_eq!(some.api_keys[1].api_key, ApiKey::ApiVersions as i16);
    }
}
