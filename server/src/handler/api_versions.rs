//! ApiVersions (18): the versions Rill serves, straight from rill-protocol's registry.
//!
//! An unsupported *request* version never reaches here: the dispatcher answers it with error 35
//! and a v0 body, using [`unsupported_version_response`].

use rill_protocol::api_registry::api_versions_response_for;
use rill_protocol::kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use rill_protocol::ErrorCode;

/// The APIs this broker implements (the registry may list more, e.g. group APIs of a later
/// issue; advertising an API we cannot answer would make clients use it).
pub fn implemented(api_key: ApiKey) -> bool {
    matches!(
        api_key,
        ApiKey::Produce
            | ApiKey::Fetch
            | ApiKey::ListOffsets
            | ApiKey::DeleteRecords
            | ApiKey::Metadata
            | ApiKey::ApiVersions
            | ApiKey::CreateTopics
            | ApiKey::DeleteTopics
            | ApiKey::InitProducerId
            | ApiKey::OffsetForLeaderEpoch
            | ApiKey::DescribeConfigs
            | ApiKey::AlterConfigs
            | ApiKey::IncrementalAlterConfigs
            | ApiKey::CreatePartitions
            | ApiKey::DescribeCluster
            | ApiKey::DescribeLogDirs
            | ApiKey::ElectLeaders
            | ApiKey::AlterPartitionReassignments
            | ApiKey::ListPartitionReassignments
            | ApiKey::FindCoordinator
            | ApiKey::JoinGroup
            | ApiKey::SyncGroup
            | ApiKey::Heartbeat
            | ApiKey::LeaveGroup
            | ApiKey::OffsetCommit
            | ApiKey::OffsetFetch
            | ApiKey::OffsetDelete
            | ApiKey::ListGroups
            | ApiKey::DescribeGroups
            | ApiKey::DeleteGroups
            | ApiKey::AddPartitionsToTxn
            | ApiKey::AddOffsetsToTxn
            | ApiKey::EndTxn
            | ApiKey::WriteTxnMarkers
            | ApiKey::TxnOffsetCommit
            | ApiKey::DescribeProducers
            | ApiKey::DescribeTransactions
            | ApiKey::ListTransactions
    )
}

/// The answer to a supported ApiVersions request.
pub fn handle(version: i16) -> ApiVersionsResponse {
    api_versions_response_for(version, ErrorCode::None, implemented)
}

/// The answer to an ApiVersions request at a version we do not speak: error 35, v0 body.
pub fn unsupported_version_response() -> ApiVersionsResponse {
    api_versions_response_for(0, ErrorCode::UnsupportedVersion, implemented)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_produce_and_fetch_ranges_librdkafka_needs() {
        let r = handle(3);
        assert_eq!(r.error_code, 0);
        let range = |k: ApiKey| {
            let v = r.api_keys.iter().find(|v| v.api_key == k as i16).unwrap();
            (v.min_version, v.max_version)
        };
        let (min, max) = range(ApiKey::Produce);
        assert!(
            min <= 3 && max >= 7,
            "Produce v3..7 needed for record batches v2"
        );
        let (min, max) = range(ApiKey::Fetch);
        assert!(min <= 4 && max >= 11);
        assert!(r
            .api_keys
            .iter()
            .all(|v| implemented(ApiKey::try_from(v.api_key).unwrap())));
    }

    #[test]
    fn unsupported_version_gets_error_35() {
        let r = unsupported_version_response();
        assert_eq!(r.error_code, 35);
        assert!(!r.api_keys.is_empty());
    }
}
