//! JoinGroup (11): become (or stay) a member; the answer waits until the rebalance completes.

use rill_protocol::kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use rill_protocol::kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use super::{str_bytes, Broker};
use crate::group::ops::{JoinArgs, JoinResult};
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::JoinGroupRequest,
) -> super::Answer {
    let host = super::client_host(cx.session);
    super::Answer::body(handle_from(broker, cx.version, cx.client_id, &host, &request).await)
}

/// Answer JoinGroup from an unknown address (in-process callers).
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    client_id: &str,
    req: &JoinGroupRequest,
) -> JoinGroupResponse {
    handle_from(broker, version, client_id, "", req).await
}

/// Answer JoinGroup. `client_id` is the request header's and `client_host` the connection's
/// peer as Kafka writes it ("/127.0.0.1"): DescribeGroups shows both.
pub async fn handle_from<B: Broker>(
    broker: &B,
    version: i16,
    client_id: &str,
    client_host: &str,
    req: &JoinGroupRequest,
) -> JoinGroupResponse {
    let args = JoinArgs {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: client_id.to_string(),
        client_host: client_host.to_string(),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let result = match broker.group(&req.group_id.0, GroupOp::Join(args)).await {
        GroupReply::Join(result) => result,
        GroupReply::Unavailable(code) => JoinResult::error(code, &req.member_id),
        other => unreachable!("join answered with {other:?}"),
    };
    response(version, result)
}

/// The wire form of a join result at `version`.
pub fn response(version: i16, r: JoinResult) -> JoinGroupResponse {
    let members = r
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_group_instance_id(if version >= 5 {
                    m.group_instance_id.as_deref().map(str_bytes)
                } else {
                    None
                })
                .with_metadata(m.metadata)
        })
        .collect();
    let protocol_name = match (version >= 7, r.protocol_name) {
        (_, Some(name)) => Some(str_bytes(&name)),
        // Before v7 the field is not nullable: "" stands for none.
        (false, None) => Some(str_bytes("")),
        (true, None) => None,
    };
    JoinGroupResponse::default()
        .with_error_code(r.error_code.code())
        .with_generation_id(r.generation_id)
        .with_protocol_type(if version >= 7 {
            r.protocol_type.as_deref().map(str_bytes)
        } else {
            None
        })
        .with_protocol_name(protocol_name)
        .with_leader(str_bytes(&r.leader))
        .with_member_id(str_bytes(&r.member_id))
        .with_members(members)
}
