//! ShareGroupHeartbeat (76, KIP-932): a share group member joins (epoch 0), heartbeats and
//! leaves (epoch -1) through this one API; the coordinator answers its epoch and assignment
//! (`crate::group::share`). The request's shape is checked here as Kafka's
//! `throwIfShareGroupHeartbeatRequestIsInvalid` does (INVALID_REQUEST).

use rill_protocol::kafka_protocol::messages::share_group_heartbeat_response::{
    Assignment, TopicPartitions,
};
use rill_protocol::kafka_protocol::messages::{
    ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use rill_protocol::ErrorCode;

use super::{message_bytes, str_bytes, Broker};
use crate::group::ops::share::{ShareHeartbeatArgs, ShareHeartbeatResult};
use crate::group::ops::TopicInfo;
use crate::group::share::LEAVE_EPOCH;
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: ShareGroupHeartbeatRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.client_id, request).await)
}

/// Answer ShareGroupHeartbeat.
pub async fn handle<B: Broker>(
    broker: &B,
    client_id: &str,
    req: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let result = match check(&req) {
        Err(refused) => refused,
        Ok(()) => {
            let group_id = req.group_id.0.to_string();
            let topics = broker
                .topics()
                .list()
                .into_iter()
                .map(|(name, meta)| TopicInfo {
                    name,
                    id: meta.id,
                    partitions: meta.partitions,
                })
                .collect();
            let args = ShareHeartbeatArgs {
                member_id: req.member_id.to_string(),
                member_epoch: req.member_epoch,
                rack_id: req.rack_id.map(|s| s.to_string()),
                subscribed_topic_names: req
                    .subscribed_topic_names
                    .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
                client_id: client_id.to_string(),
                client_host: String::new(),
                topics,
            };
            match broker
                .group(&group_id, GroupOp::ShareHeartbeat(Box::new(args)))
                .await
            {
                GroupReply::ShareHeartbeat(r) => r,
                GroupReply::Unavailable(code) => {
                    ShareHeartbeatResult::error(code, "the coordinator is not available here")
                }
                other => unreachable!("share heartbeat answered with {other:?}"),
            }
        }
    };
    ShareGroupHeartbeatResponse::default()
        .with_error_code(result.error_code.code())
        .with_error_message(result.error_message.as_deref().map(message_bytes))
        .with_member_id(result.member_id.as_deref().map(str_bytes))
        .with_member_epoch(result.member_epoch)
        .with_heartbeat_interval_ms(result.heartbeat_interval_ms)
        .with_assignment(result.assignment.map(|a| {
            Assignment::default().with_topic_partitions(
                a.into_iter()
                    .map(|(id, partitions)| {
                        TopicPartitions::default()
                            .with_topic_id(id)
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
        }))
}

/// The request's shape, as Kafka checks it before the group is looked at.
fn check(req: &ShareGroupHeartbeatRequest) -> Result<(), ShareHeartbeatResult> {
    let invalid = |m: &str| Err(ShareHeartbeatResult::error(ErrorCode::InvalidRequest, m));
    if req.group_id.0.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.rack_id.as_ref().is_some_and(|s| s.is_empty()) {
        return invalid("RackId can't be empty.");
    }
    if req.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    match req.member_epoch {
        0 if req
            .subscribed_topic_names
            .as_ref()
            .is_none_or(|t| t.is_empty()) =>
        {
            invalid("SubscribedTopicNames must be set in first request.")
        }
        e if e < LEAVE_EPOCH => invalid("MemberEpoch is invalid."),
        _ => Ok(()),
    }
}
