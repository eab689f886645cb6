//! LeaveGroup (13): members leave at once instead of waiting for their session to expire
//! (v0-2: one member; v3+: a batch, static members by instance id).

use rill_protocol::kafka_protocol::messages::leave_group_response::MemberResponse;
use rill_protocol::kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use rill_protocol::ErrorCode;

use super::Broker;
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::LeaveGroupRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer LeaveGroup.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &LeaveGroupRequest,
) -> LeaveGroupResponse {
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let (top, errors) = match broker
        .group(&req.group_id.0, GroupOp::Leave(members.clone()))
        .await
    {
        GroupReply::Leave(top, errors) => (top, errors),
        GroupReply::Unavailable(code) => (code, vec![code; members.len()]),
        other => unreachable!("leave answered with {other:?}"),
    };
    if version < 3 {
        let code = if top != ErrorCode::None {
            top
        } else {
            errors.first().copied().unwrap_or(ErrorCode::None)
        };
        return LeaveGroupResponse::default().with_error_code(code.code());
    }
    let members = req
        .members
        .iter()
        .zip(errors)
        .map(|(m, code)| {
            MemberResponse::default()
                .with_member_id(m.member_id.clone())
                .with_group_instance_id(m.group_instance_id.clone())
                .with_error_code(code.code())
        })
        .collect();
    LeaveGroupResponse::default()
        .with_error_code(top.code())
        .with_members(members)
}
