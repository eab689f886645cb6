//! ConsumerGroupHeartbeat (68, KIP-848): a consumer group member joins, heartbeats, reconciles
//! and leaves through this one API; the coordinator answers its epoch and assignment.
//!
//! The request's shape is checked here as Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`
//! does (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR); the group's state machine does the rest
//! (`crate::group::consumer`). The member's subscriptions are resolved against every topic the
//! broker knows, handed to the coordinator with the request: the internal ones too
//! (`__consumer_offsets`, `__transaction_state`), as Kafka's `refreshRegularExpressions` matches a
//! regex against every topic of its metadata image and a name subscription resolves there too.

use rill_metadata::acl::Operation;
use rill_protocol::kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment, TopicPartitions,
};
use rill_protocol::kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use rill_protocol::ErrorCode;

use super::authz::Access;
use super::{message_bytes, str_bytes, Broker};
use crate::group::consumer::{compile_regex, Assignor, STATIC_LEAVE_EPOCH};
use crate::group::ops::{ConsumerHeartbeatArgs, ConsumerHeartbeatResult, TopicInfo};
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: ConsumerGroupHeartbeatRequest,
) -> super::Answer {
    let host = super::client_host(cx.session);
    let access = super::authz::access(broker, cx.session);
    super::Answer::body(handle(broker, &access, cx.version, cx.client_id, &host, request).await)
}

/// Answer ConsumerGroupHeartbeat. `client_host` is the connection's peer as Kafka writes it
/// ("/127.0.0.1"; ConsumerGroupDescribe shows it); `access` decides which topics a regex may
/// match.
pub async fn handle<B: Broker>(
    broker: &B,
    access: &Access<'_>,
    version: i16,
    client_id: &str,
    client_host: &str,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let result = match check(broker, version, &req) {
        Err(refused) => refused,
        Ok(()) => {
            let group_id = req.group_id.0.to_string();
            let args = args(broker, access, version, client_id, client_host, req);
            match broker
                .group(&group_id, GroupOp::ConsumerHeartbeat(Box::new(args)))
                .await
            {
                GroupReply::ConsumerHeartbeat(r) => r,
                GroupReply::Unavailable(code) => {
                    ConsumerHeartbeatResult::error(code, "the coordinator is not available here")
                }
                other => unreachable!("consumer heartbeat answered with {other:?}"),
            }
        }
    };
    ConsumerGroupHeartbeatResponse::default()
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
fn check<B: Broker>(
    broker: &B,
    version: i16,
    req: &ConsumerGroupHeartbeatRequest,
) -> Result<(), ConsumerHeartbeatResult> {
    let invalid = |m: &str| Err(ConsumerHeartbeatResult::error(ErrorCode::InvalidRequest, m));
    if req.group_id.0.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.instance_id.as_ref().is_some_and(|s| s.is_empty()) {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_ref().is_some_and(|s| s.is_empty()) {
        return invalid("RackId can't be empty.");
    }
    if (version >= 1 || req.member_epoch != 0) && req.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    match req.member_epoch {
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                );
            }
        }
        STATIC_LEAVE_EPOCH if req.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        e if e < STATIC_LEAVE_EPOCH => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    if let Some(regex) = req
        .subscribed_topic_regex
        .as_ref()
        .filter(|r| !r.is_empty())
    {
        if let Err(e) = compile_regex(regex) {
            return Err(ConsumerHeartbeatResult::error(
                ErrorCode::InvalidRegularExpression,
                format!("SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}."),
            ));
        }
    }
    if let Some(name) = req.server_assignor.as_ref().filter(|a| !a.is_empty()) {
        let configured = broker.config().group.consumer.assignors;
        let known = Assignor::from_name(name).is_some_and(|a| configured.contains(&Some(a)));
        if !known {
            let names: Vec<&str> = configured.iter().flatten().map(|a| a.name()).collect();
            return Err(ConsumerHeartbeatResult::error(
                ErrorCode::UnsupportedAssignor,
                format!(
                    "ServerAssignor {name} is not supported. Supported assignors: {}.",
                    names.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The request as the group's state machine takes it, with every topic to resolve against
/// (registered and internal: a regex naming `__consumer_offsets` is assigned it, as in Kafka)
/// that the member's principal may DESCRIBE: Kafka's `filterTopicDescribeAuthorizedTopics`,
/// applied with the context of the heartbeat that resolves the group's subscriptions.
fn args<B: Broker>(
    broker: &B,
    access: &Access<'_>,
    version: i16,
    client_id: &str,
    client_host: &str,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerHeartbeatArgs {
    let topics = broker
        .topics()
        .list()
        .into_iter()
        .chain(broker.internal_topics())
        .filter(|(name, _)| access.topic(Operation::Describe, name))
        .map(|(name, meta)| TopicInfo {
            name,
            id: meta.id,
            partitions: meta.partitions,
        })
        .collect();
    ConsumerHeartbeatArgs {
        version,
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|s| s.to_string()),
        rack_id: req.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: req.server_assignor.map(|s| s.to_string()),
        owned: req.topic_partitions.map(|tps| {
            tps.into_iter()
                .map(|tp| (tp.topic_id, tp.partitions))
                .collect()
        }),
        client_id: client_id.to_string(),
        client_host: client_host.to_string(),
        topics,
    }
}
