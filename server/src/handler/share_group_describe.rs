//! ShareGroupDescribe (77, KIP-932): epochs, assignor and members (with their assignments) of
//! each asked share group; GROUP_ID_NOT_FOUND for a group that is not one.

use rill_protocol::kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use rill_protocol::kafka_protocol::messages::{
    ShareGroupDescribeRequest, ShareGroupDescribeResponse,
};

use super::{message_bytes, str_bytes, topic_name, Broker};
use crate::group::ops::share::ShareGroupView;
use crate::group::ops::TopicIdPartitions;
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: ShareGroupDescribeRequest,
) -> super::Answer {
    let mut response = handle(broker, &request).await;
    if request.include_authorized_operations {
        let access = super::authz::access(broker, cx.session);
        // As Kafka: only groups described without an error get them.
        for group in response.groups.iter_mut().filter(|g| g.error_code == 0) {
            group.authorized_operations = access.group_operations(group.group_id.as_str());
        }
    }
    super::Answer::body(response)
}

/// Answer ShareGroupDescribe.
pub async fn handle<B: Broker>(
    broker: &B,
    req: &ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    let mut groups = Vec::with_capacity(req.group_ids.len());
    for id in &req.group_ids {
        let view = match broker.group(&id.0, GroupOp::ShareDescribe).await {
            GroupReply::ShareDescribe(v) => v,
            GroupReply::Unavailable(code) => ShareGroupView {
                error_code: code,
                ..Default::default()
            },
            other => unreachable!("share describe answered with {other:?}"),
        };
        let members = view
            .members
            .iter()
            .map(|m| {
                Member::default()
                    .with_member_id(str_bytes(&m.member_id))
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
                    .with_assignment(assignment(broker, &m.assignment))
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
    ShareGroupDescribeResponse::default().with_groups(groups)
}

/// An assignment with its topics named (a topic deleted since is left out).
fn assignment<B: Broker>(broker: &B, parts: &TopicIdPartitions) -> Assignment {
    let topics = parts
        .iter()
        .filter_map(|(id, partitions)| {
            let (name, _) = broker.topics().by_id(*id)?;
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
