//! SyncGroup (14): the leader hands in the assignment; every member gets its own share.

use rill_protocol::kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use super::{str_bytes, Broker};
use crate::group::ops::{SyncArgs, SyncResult};
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::SyncGroupRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer SyncGroup (followers wait for the leader's assignment).
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &SyncGroupRequest,
) -> SyncGroupResponse {
    let args = SyncArgs {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id,
        protocol_type: req.protocol_type.as_ref().map(|s| s.to_string()),
        protocol_name: req.protocol_name.as_ref().map(|s| s.to_string()),
        assignments: req
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    let result = match broker.group(&req.group_id.0, GroupOp::Sync(args)).await {
        GroupReply::Sync(result) => result,
        GroupReply::Unavailable(code) => SyncResult::error(code),
        other => unreachable!("sync answered with {other:?}"),
    };
    response(version, result)
}

/// The wire form of a sync result at `version`.
pub fn response(version: i16, r: SyncResult) -> SyncGroupResponse {
    let v5 = version >= 5;
    SyncGroupResponse::default()
        .with_error_code(r.error_code.code())
        .with_protocol_type(r.protocol_type.as_deref().filter(|_| v5).map(str_bytes))
        .with_protocol_name(r.protocol_name.as_deref().filter(|_| v5).map(str_bytes))
        .with_assignment(r.assignment)
}
