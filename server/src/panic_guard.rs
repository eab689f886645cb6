//! The last line of defence: a panic while a request is served (decode, handler, encode) is
//! caught in the request's own task, logged with its API and version, counted in `/metrics`
//! (`rill_request_panics_total`), and answered as Kafka answers an unexpected exception:
//! UNKNOWN_SERVER_ERROR. The shard goes on.
//!
//! | the response has                               | the client gets                          |
//! |------------------------------------------------|------------------------------------------|
//! | a top-level error code at that version         | that response, error -1, all else default |
//! | only per-topic/partition/group errors (Produce, Fetch, Metadata, OffsetCommit, ...) | the connection closed |
//!
//! Kafka builds per-partition errors from the request there (`getErrorResponse`); the request
//! is gone once its handler panicked, and an answer naming none of its partitions would read as
//! "no such partitions". A closed connection makes the client retry on a new one.
//!
//! Why catching is sound here: glommio 0.9 lets a panic out of `Task::run` into its executor
//! loop, which unwinds the whole shard thread (every connection, partition and group on it).
//! Caught inside the task instead, the unwinding drops the handler's future and with it every
//! `RefCell` guard it held, so no borrow is left behind (the project rule is that none is held
//! across an `.await`, so none spans two polls of another task either). What a panicking handler
//! leaves half-done is in-memory state of one request; durable state only changes through the
//! partition actors and the coordinators' journals, whose writes are whole records.

use std::any::Any;
use std::ops::RangeInclusive;

use rill_protocol::kafka_protocol::messages::*;
use rill_protocol::ErrorCode;

/// The API, version and correlation id at the start of a request frame body, read before any
/// decoding (so a panic in the decoder can still be answered).
#[derive(Debug, Clone, Copy)]
pub struct RequestHead {
    /// The API key as sent.
    pub api_key: i16,
    /// Its version.
    pub version: i16,
    /// The client's correlation id.
    pub correlation_id: i32,
}

impl RequestHead {
    /// The head of `frame_body`, if it is long enough to have one.
    pub fn peek(frame_body: &[u8]) -> Option<Self> {
        let head = frame_body.get(..8)?;
        Some(RequestHead {
            api_key: i16::from_be_bytes([head[0], head[1]]),
            version: i16::from_be_bytes([head[2], head[3]]),
            correlation_id: i32::from_be_bytes([head[4], head[5], head[6], head[7]]),
        })
    }
}

/// The panic's message, for the log.
pub fn message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&'static str>() {
        return s;
    }
    panic
        .downcast_ref::<String>()
        .map_or("(no message)", String::as_str)
}

/// The APIs whose response has a top-level error code, and at which versions (the `ErrorCode`
/// field of Kafka's response specs; the codec would silently drop it at another version).
const TOP_LEVEL_ERROR_CODE: &[(ApiKey, RangeInclusive<i16>)] = &[
    (ApiKey::AddOffsetsToTxn, 0..=i16::MAX),
    (ApiKey::AddPartitionsToTxn, 4..=i16::MAX),
    (ApiKey::AlterPartitionReassignments, 0..=i16::MAX),
    (ApiKey::ApiVersions, 0..=i16::MAX),
    (ApiKey::DescribeClientQuotas, 0..=i16::MAX),
    (ApiKey::DescribeCluster, 0..=i16::MAX),
    (ApiKey::DescribeLogDirs, 3..=i16::MAX),
    (ApiKey::ElectLeaders, 1..=i16::MAX),
    (ApiKey::EndTxn, 0..=i16::MAX),
    (ApiKey::FindCoordinator, 0..=3),
    (ApiKey::Heartbeat, 0..=i16::MAX),
    (ApiKey::InitProducerId, 0..=i16::MAX),
    (ApiKey::JoinGroup, 0..=i16::MAX),
    (ApiKey::LeaveGroup, 0..=i16::MAX),
    (ApiKey::ListGroups, 0..=i16::MAX),
    (ApiKey::ListPartitionReassignments, 0..=i16::MAX),
    (ApiKey::ListTransactions, 0..=i16::MAX),
    (ApiKey::OffsetDelete, 0..=i16::MAX),
    (ApiKey::OffsetFetch, 2..=7),
    (ApiKey::SyncGroup, 0..=i16::MAX),
];

/// A response of `api_key` v`version` carrying only a top-level `code`, where it has one
/// ([`TOP_LEVEL_ERROR_CODE`]); `None` elsewhere.
pub fn error_body(api_key: ApiKey, version: i16, code: ErrorCode) -> Option<ResponseKind> {
    let has_one = TOP_LEVEL_ERROR_CODE
        .iter()
        .any(|(api, versions)| *api == api_key && versions.contains(&version));
    if !has_one {
        return None;
    }
    let c = code.code();
    Some(match api_key {
        ApiKey::ApiVersions => {
            ResponseKind::ApiVersions(ApiVersionsResponse::default().with_error_code(c))
        }
        ApiKey::InitProducerId => {
            ResponseKind::InitProducerId(InitProducerIdResponse::default().with_error_code(c))
        }
        ApiKey::FindCoordinator => {
            ResponseKind::FindCoordinator(FindCoordinatorResponse::default().with_error_code(c))
        }
        ApiKey::JoinGroup => {
            ResponseKind::JoinGroup(JoinGroupResponse::default().with_error_code(c))
        }
        ApiKey::SyncGroup => {
            ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(c))
        }
        ApiKey::Heartbeat => {
            ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(c))
        }
        ApiKey::LeaveGroup => {
            ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(c))
        }
        ApiKey::ListGroups => {
            ResponseKind::ListGroups(ListGroupsResponse::default().with_error_code(c))
        }
        ApiKey::OffsetFetch => {
            ResponseKind::OffsetFetch(OffsetFetchResponse::default().with_error_code(c))
        }
        ApiKey::OffsetDelete => {
            ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_error_code(c))
        }
        other => return error_body_admin(other, c),
    })
}

/// [`error_body`] for the transaction and admin APIs.
fn error_body_admin(api_key: ApiKey, c: i16) -> Option<ResponseKind> {
    Some(match api_key {
        ApiKey::AddOffsetsToTxn => {
            ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(c))
        }
        ApiKey::AddPartitionsToTxn => ResponseKind::AddPartitionsToTxn(
            AddPartitionsToTxnResponse::default().with_error_code(c),
        ),
        ApiKey::EndTxn => ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(c)),
        ApiKey::ListTransactions => {
            ResponseKind::ListTransactions(ListTransactionsResponse::default().with_error_code(c))
        }
        ApiKey::DescribeCluster => {
            ResponseKind::DescribeCluster(DescribeClusterResponse::default().with_error_code(c))
        }
        ApiKey::DescribeClientQuotas => ResponseKind::DescribeClientQuotas(
            DescribeClientQuotasResponse::default()
                .with_error_code(c)
                .with_entries(None),
        ),
        ApiKey::DescribeLogDirs => {
            ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_error_code(c))
        }
        ApiKey::ElectLeaders => {
            ResponseKind::ElectLeaders(ElectLeadersResponse::default().with_error_code(c))
        }
        ApiKey::AlterPartitionReassignments => ResponseKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsResponse::default().with_error_code(c),
        ),
        ApiKey::ListPartitionReassignments => ResponseKind::ListPartitionReassignments(
            ListPartitionReassignmentsResponse::default().with_error_code(c),
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use rill_protocol::api_registry::entry;
    use rill_protocol::response::encode_response;

    /// Every API the table names has a body, which encodes at every advertised version where
    /// it has the field.
    #[test]
    fn every_listed_api_has_an_error_body_that_encodes() {
        for (api, versions) in TOP_LEVEL_ERROR_CODE {
            let e = entry(*api).expect("an advertised API");
            let code = ErrorCode::UnknownServerError;
            for v in (e.decodable_min..=e.advertised_max).filter(|v| versions.contains(v)) {
                let body = error_body(*api, v, code).unwrap_or_else(|| panic!("{api:?} v{v}"));
                encode_response(&mut BytesMut::new(), 1, *api, v, &body)
                    .unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"));
            }
        }
    }
}
