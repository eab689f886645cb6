//! DescribeShareGroupOffsets (90, KIP-932): each share-partition's start offset (SPSO) for the
//! asked share groups (all the partitions with state when a group names no topics); -1 for a
//! partition with no state yet, GROUP_ID_NOT_FOUND for a group that is not a share group.

use rill_protocol::kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic;
use rill_protocol::kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use rill_protocol::kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartitionRef};

use super::{message_bytes, topic_name, Broker};
use crate::group::ops::share::ShareKey;
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: DescribeShareGroupOffsetsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// The asked partitions as share-partition keys (`None`: all), and those that do not exist.
fn resolve<B: Broker>(
    broker: &B,
    topics: Option<&[DescribeShareGroupOffsetsRequestTopic]>,
) -> (Option<Vec<ShareKey>>, Vec<(String, i32)>) {
    let mut unknown = Vec::new();
    let keys = topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic_name.0.to_string(), *p))
            })
            .filter_map(|(name, p)| match broker.topics().get(&name) {
                Some(meta) if PartitionIndex(p).is_within(meta.partitions) => {
                    Some((meta.id, PartitionIndex(p)))
                }
                _ => {
                    unknown.push((name, p));
                    None
                }
            })
            .collect()
    });
    (keys, unknown)
}

/// Answer DescribeShareGroupOffsets.
pub async fn handle<B: Broker>(
    broker: &B,
    req: &DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let mut groups = Vec::with_capacity(req.groups.len());
    for g in &req.groups {
        let (keys, unknown) = resolve(broker, g.topics.as_deref());
        let (code, starts) = match broker
            .group(&g.group_id.0, GroupOp::ShareOffsets(keys))
            .await
        {
            GroupReply::ShareOffsets(code, starts) => (code, starts),
            GroupReply::Unavailable(code) => (code, Vec::new()),
            other => unreachable!("share offsets answered with {other:?}"),
        };
        let mut topics: Vec<DescribeShareGroupOffsetsResponseTopic> = Vec::new();
        let mut put = |name: String, id: uuid::Uuid, partition| match topics
            .iter_mut()
            .find(|t| t.topic_name.0.as_str() == name)
        {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                DescribeShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(topic_name(&name))
                    .with_topic_id(id)
                    .with_partitions(vec![partition]),
            ),
        };
        for ((id, p), start) in starts {
            let Some((name, _)) = broker.topics().by_id(id) else {
                continue;
            };
            let epoch = broker.leader_epoch(TopicPartitionRef::new(&name, p)).0;
            put(
                name,
                id,
                DescribeShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p.0)
                    .with_start_offset(start.map_or(-1, |o| o.0))
                    // A partition without a start has state epoch 0, as Kafka 4.4 answers.
                    .with_leader_epoch(if start.is_some() { epoch } else { 0 }),
            );
        }
        for (name, p) in unknown {
            put(
                name,
                uuid::Uuid::nil(),
                DescribeShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p)
                    .with_start_offset(-1)
                    .with_leader_epoch(-1)
                    .with_error_code(ErrorCode::UnknownTopicOrPartition.code()),
            );
        }
        let message = (!code.is_ok())
            .then(|| message_bytes(&format!("Group {} is not a share group.", g.group_id.0)));
        groups.push(
            DescribeShareGroupOffsetsResponseGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(code.code())
                .with_error_message(message)
                .with_topics(if code.is_ok() { topics } else { Vec::new() }),
        );
    }
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}
