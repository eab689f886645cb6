//! OffsetCommit (8): a group's (or a standalone consumer's) positions, answered only once
//! durable in the offsets log.

use rill_protocol::kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use rill_protocol::kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::partition_verdicts::PartitionVerdicts;
use super::Broker;
use crate::group::offsets::CommittedOffset;
use crate::group::ops::MemberRef;
use crate::group::{GroupOp, GroupReply};
use rill_protocol::ErrorCode;
use rill_types::{LeaderEpoch, Offset, TimestampMs};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::OffsetCommitRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer OffsetCommit: unknown partitions are refused here, the rest go to the coordinator.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &OffsetCommitRequest,
) -> OffsetCommitResponse {
    let mut verdicts = PartitionVerdicts::default();
    for topic in &req.topics {
        // Kafka takes any topic its metadata holds, the internal ones included.
        let meta = crate::broker::readable_topic(broker, &topic.name.0);
        for p in &topic.partitions {
            verdicts.judge(meta.as_deref(), p.partition_index, || {
                (
                    topic.name.0.to_string(),
                    p.partition_index,
                    committed(version, p),
                )
            });
        }
    }
    let who = MemberRef {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id_or_member_epoch,
    };
    let offsets = verdicts.take_sent();
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
            other => {
                tracing::error!(reply = ?other, "OffsetCommit got an unexpected reply");
                vec![ErrorCode::UnknownServerError; sent]
            }
        }
    };
    response(req, verdicts.codes(errors))
}

/// The response in request order, one code per request partition.
fn response(
    req: &OffsetCommitRequest,
    mut codes: impl Iterator<Item = ErrorCode>,
) -> OffsetCommitResponse {
    let topics = req
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let code = codes.next().expect("one code per request partition");
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

/// A request partition's offset as the coordinator stores it (leader epoch from v6).
fn committed(
    version: i16,
    p: &rill_protocol::kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition,
) -> CommittedOffset {
    CommittedOffset {
        offset: Offset(p.committed_offset),
        leader_epoch: if version >= 6 {
            LeaderEpoch(p.committed_leader_epoch)
        } else {
            LeaderEpoch::NONE
        },
        metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
        commit_time_ms: TimestampMs(0),
    }
}
