//! Heartbeat (12): keeps a member's session alive; REBALANCE_IN_PROGRESS asks it to rejoin.

use rill_protocol::kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::Broker;
use crate::group::ops::MemberRef;
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::HeartbeatRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer Heartbeat.
pub async fn handle<B: Broker>(broker: &B, req: &HeartbeatRequest) -> HeartbeatResponse {
    let who = MemberRef {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id,
    };
    let code = match broker.group(&req.group_id.0, GroupOp::Heartbeat(who)).await {
        GroupReply::Heartbeat(code) | GroupReply::Unavailable(code) => code,
        other => unreachable!("heartbeat answered with {other:?}"),
    };
    HeartbeatResponse::default().with_error_code(code.code())
}
