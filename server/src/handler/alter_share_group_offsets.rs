//! AlterShareGroupOffsets (91, KIP-932): sets share-partitions' start offsets of a share group
//! that has no members (NON_EMPTY_GROUP otherwise); the records from there on are delivered
//! anew. UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist.

use rill_protocol::kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use rill_protocol::kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse,
};
use rill_protocol::ErrorCode;
use rill_types::{Offset, PartitionIndex};

use super::{message_bytes, Broker};
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: AlterShareGroupOffsetsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer AlterShareGroupOffsets.
pub async fn handle<B: Broker>(
    broker: &B,
    req: &AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let mut starts = Vec::new();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        let meta = broker.topics().get(&t.topic_name.0);
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                let known = meta
                    .as_ref()
                    .filter(|m| p.partition_index >= 0 && p.partition_index < m.partitions);
                let code = match known {
                    Some(_) if p.start_offset < 0 => ErrorCode::InvalidRequest,
                    Some(m) => {
                        starts.push((
                            (m.id, PartitionIndex(p.partition_index)),
                            Offset(p.start_offset),
                        ));
                        ErrorCode::None
                    }
                    None => ErrorCode::UnknownTopicOrPartition,
                };
                (p.partition_index, code)
            })
            .collect::<Vec<_>>();
        topics.push((
            t.topic_name.clone(),
            meta.map(|m| m.id).unwrap_or_default(),
            partitions,
        ));
    }
    let code = match broker
        .group(&req.group_id.0, GroupOp::ShareAlterOffsets(starts))
        .await
    {
        GroupReply::ShareOffsetsChanged(code) | GroupReply::Unavailable(code) => code,
        other => unreachable!("share alter offsets answered with {other:?}"),
    };
    if !code.is_ok() {
        return AlterShareGroupOffsetsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(message_bytes(&format!(
                "The offsets of group {} were not altered.",
                req.group_id.0
            ))));
    }
    let responses = topics
        .into_iter()
        .map(|(name, id, partitions)| {
            AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_name(name)
                .with_topic_id(id)
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(p, code)| {
                            AlterShareGroupOffsetsResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect();
    AlterShareGroupOffsetsResponse::default().with_responses(responses)
}
