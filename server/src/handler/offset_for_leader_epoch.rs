//! OffsetForLeaderEpoch (23): clients validate their position after a Metadata leader epoch.
//!
//! The partition's current epoch is [`Broker::leader_epoch`] ([`super::LEADER_EPOCH`] on one
//! node, the metadata log's in a cluster). A client naming a later current epoch gets
//! UNKNOWN_LEADER_EPOCH, an earlier one FENCED_LEADER_EPOCH (its metadata is stale). A
//! replicated partition answers from its `leader-epoch-checkpoint`: the largest epoch up to the
//! one asked and where it ended (KIP-101). A log that records no epochs (one replica) was never
//! truncated: the end offset of any epoch up to the current one is the log end offset. A later
//! epoch than ours is unknown (-1/-1, as Kafka answers).

use futures::future::join_all;
use rill_protocol::kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use rill_protocol::kafka_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};
use rill_protocol::ErrorCode;
use rill_types::{LeaderEpoch, PartitionIndex, TopicPartitionRef};

use super::{topic_name, Broker};
use crate::partition::ops::{PartitionOp, PartitionReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::OffsetForLeaderEpochRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer OffsetForLeaderEpoch.
pub async fn handle<B: Broker>(
    broker: &B,
    request: &OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let topics = request.topics.iter().map(|topic| async move {
        let name = topic.topic.0.as_str();
        let meta = crate::broker::readable_topic(broker, name);
        let partitions = topic.partitions.iter().map(|p| {
            let meta = meta.clone();
            async move {
                let base = EpochEndOffset::default()
                    .with_partition(p.partition)
                    .with_leader_epoch(-1)
                    .with_end_offset(-1);
                let known = meta.is_some_and(|m| p.partition >= 0 && p.partition < m.partitions);
                if !known {
                    return base.with_error_code(ErrorCode::UnknownTopicOrPartition.code());
                }
                let tp = TopicPartitionRef::new(name, PartitionIndex(p.partition));
                let current = broker.leader_epoch(tp);
                let asked = LeaderEpoch(p.current_leader_epoch);
                if asked > current {
                    return base.with_error_code(ErrorCode::UnknownLeaderEpoch.code());
                }
                if asked != LeaderEpoch::NONE && asked < current {
                    return base.with_error_code(ErrorCode::FencedLeaderEpoch.code());
                }
                if LeaderEpoch(p.leader_epoch) > current {
                    return base;
                }
                let op = PartitionOp::EndOffsetForEpoch {
                    epoch: LeaderEpoch(p.leader_epoch),
                };
                match broker.partition(tp, op).await {
                    // Replicated: where that epoch ended in the leader's log (KIP-101).
                    PartitionReply::EpochEnd(Some((epoch, end)), _) => {
                        base.with_leader_epoch(epoch.0).with_end_offset(end.0)
                    }
                    // A log without epochs (one replica): nothing was ever truncated.
                    PartitionReply::EpochEnd(None, pos) => base
                        .with_leader_epoch(current.0)
                        .with_end_offset(pos.log_end().0),
                    other => base.with_error_code(other.error_code().code()),
                }
            }
        });
        OffsetForLeaderTopicResult::default()
            .with_topic(topic_name(name))
            .with_partitions(join_all(partitions).await)
    });
    OffsetForLeaderEpochResponse::default().with_topics(join_all(topics).await)
}
