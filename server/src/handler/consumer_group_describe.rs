//! ConsumerGroupDescribe (69, KIP-848): epochs, assignor and members (with their current and
//! target assignments) of each asked consumer group; GROUP_ID_NOT_FOUND for a group that is
//! not one.

use rill_protocol::kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use rill_protocol::kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
};

use super::{message_bytes, str_bytes, topic_name, Broker};
use crate::group::ops::{ConsumerGroupView, TopicIdPartitions};
use crate::group::{GroupOp, GroupReply};

/// ConsumerGroupDescribe v1's member type of a member on the consumer protocol (KIP-1099).
const MEMBER_TYPE_CONSUMER: i8 = 1;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: ConsumerGroupDescribeRequest,
) -> super::Answer {
    let mut response = handle(broker, cx.version, &request).await;
    if request.include_authorized_operations {
        let access = super::authz::access(broker, cx.session);
        // As Kafka: only groups described without an error get them.
        for group in response.groups.iter_mut().filter(|g| g.error_code == 0) {
            group.authorized_operations = access.group_operations(group.group_id.as_str());
        }
    }
    super::Answer::body(response)
}

/// Answer ConsumerGroupDescribe.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let mut groups = Vec::with_capacity(req.group_ids.len());
    for id in &req.group_ids {
        let view = match broker.group(&id.0, GroupOp::ConsumerDescribe).await {
            GroupReply::ConsumerDescribe(v) => v,
            GroupReply::Unavailable(code) => ConsumerGroupView {
                error_code: code,
                ..Default::default()
            },
            other => unreachable!("consumer describe answered with {other:?}"),
        };
        let members = view
            .members
            .iter()
            .map(|m| {
                let member = Member::default()
                    .with_member_id(str_bytes(&m.member_id))
                    .with_instance_id(m.instance_id.as_deref().map(str_bytes))
                    .with_rack_id(m.rack_id.as_deref().map(str_bytes))
                    .with_member_epoch(m.member_epoch)
                    .with_client_id(str_bytes(&m.client_id))
                    .with_client_host(str_bytes(&m.client_host))
                    .with_subscribed_topic_names(
                        m.subscribed_topic_names
                            .iter()
                            .map(|t| topic_name(t))
                            .collect(),
                    )
                    // Kafka shows "" for a member without a regex.
                    .with_subscribed_topic_regex(Some(str_bytes(
                        m.subscribed_topic_regex.as_deref().unwrap_or(""),
                    )))
                    .with_assignment(assignment(broker, &m.assignment))
                    .with_target_assignment(assignment(broker, &m.target_assignment));
                if version >= 1 {
                    member.with_member_type(MEMBER_TYPE_CONSUMER)
                } else {
                    member
                }
            })
            .collect();
        groups.push(
            DescribedGroup::default()
                .with_error_code(view.error_code.code())
                .with_error_message(view.error_message.as_deref().map(message_bytes))
                .with_group_id(id.clone())
                .with_group_state(str_bytes(&view.state))
                .with_group_epoch(view.group_epoch)
                .with_assignment_epoch(view.assignment_epoch)
                .with_assignor_name(str_bytes(&view.assignor_name))
                .with_members(members)
                .with_authorized_operations(super::authz::OPERATIONS_NOT_ASKED),
        );
    }
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

/// An assignment with its topics named (a topic deleted since is left out; an internal one a
/// regex matched is named as Metadata names it).
fn assignment<B: Broker>(broker: &B, parts: &TopicIdPartitions) -> Assignment {
    let topics = parts
        .iter()
        .filter_map(|(id, partitions)| {
            let (name, _) = crate::broker::readable_topic_by_id(broker, *id)?;
            Some(
                TopicPartitions::default()
                    .with_topic_id(*id)
                    .with_topic_name(topic_name(&name))
                    .with_partitions(partitions.clone()),
            )
        })
        .collect();
    Assignment::default().with_topic_partitions(topics)
}
