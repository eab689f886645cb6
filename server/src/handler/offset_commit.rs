//! OffsetCommit (8): a group's (or a standalone consumer's) positions, answered only once
//! durable in the offsets log.

use rill_protocol::kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use rill_protocol::kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::Broker;
use crate::group::offsets::CommittedOffset;
use crate::group::ops::MemberRef;
use crate::group::{GroupOp, GroupReply};
use rill_protocol::ErrorCode;
use rill_types::{LeaderEpoch, Offset};

/// Answer OffsetCommit: unknown partitions are refused here, the rest go to the coordinator.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &OffsetCommitRequest,
) -> OffsetCommitResponse {
    // Per request partition: Some(error) decided here, or None = sent to the coordinator.
    let mut decided: Vec<Option<ErrorCode>> = Vec::new();
    let mut offsets = Vec::new();
    for topic in &req.topics {
        let meta = broker.topics().get(&topic.name.0);
        for p in &topic.partitions {
            let known = meta
                .as_ref()
                .is_some_and(|m| p.partition_index >= 0 && p.partition_index < m.partitions);
            if !known {
                decided.push(Some(ErrorCode::UnknownTopicOrPartition));
                continue;
            }
            decided.push(None);
            offsets.push((
                topic.name.0.to_string(),
                p.partition_index,
                CommittedOffset {
                    offset: Offset(p.committed_offset),
                    leader_epoch: if version >= 6 {
                        LeaderEpoch(p.committed_leader_epoch)
                    } else {
                        LeaderEpoch::NONE
                    },
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    commit_time_ms: 0,
                },
            ));
        }
    }
    let who = MemberRef {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id_or_member_epoch,
    };
    let sent = offsets.len();
    let errors = if sent == 0 {
        Vec::new()
    } else {
        match broker
            .group(&req.group_id.0, GroupOp::Commit(who, offsets))
            .await
        {
            GroupReply::Commit(errors) => errors,
            GroupReply::Unavailable(code) => vec![code; sent],
            other => unreachable!("commit answered with {other:?}"),
        }
    };
    response(req, decided, errors)
}

/// The response in request order: each partition's error decided here, else the coordinator's.
fn response(
    req: &OffsetCommitRequest,
    decided: Vec<Option<ErrorCode>>,
    errors: Vec<ErrorCode>,
) -> OffsetCommitResponse {
    let mut errors = errors.into_iter();
    let mut decided = decided.into_iter();
    let topics = req
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let code = decided
                        .next()
                        .flatten()
                        .unwrap_or_else(|| errors.next().unwrap_or(ErrorCode::None));
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code.code())
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
