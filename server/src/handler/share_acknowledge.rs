//! ShareAcknowledge (79, KIP-932): a share group member acknowledges records it was given
//! (ACCEPT, RELEASE, REJECT, or GAP for offsets that held no record) without fetching more.
//! Its share session epoch must be the session's next (0 cannot open one:
//! INVALID_SHARE_SESSION_EPOCH); -1 closes the session after the acknowledgements, giving back
//! the records the member still holds. Each partition answers its own outcome
//! (INVALID_RECORD_STATE for a record the member does not hold).

use rill_protocol::kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, PartitionData, ShareAcknowledgeTopicResponse,
};
use rill_protocol::kafka_protocol::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartitionRef};

use super::share_fetch::acknowledgements;
use super::Broker;
use crate::group::ops::share::{ShareKey, ShareSessionArgs, ShareSessionResult};
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: ShareAcknowledgeRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, request).await)
}

/// Answer ShareAcknowledge.
pub async fn handle<B: Broker>(
    broker: &B,
    req: ShareAcknowledgeRequest,
) -> ShareAcknowledgeResponse {
    let group_id = req
        .group_id
        .as_ref()
        .map(|g| g.0.to_string())
        .unwrap_or_default();
    let member_id = req
        .member_id
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default();
    if group_id.is_empty() || member_id.is_empty() {
        return top_error(
            ErrorCode::InvalidRequest,
            "GroupId and MemberId must be set.",
        );
    }
    let (acks, mut outcomes) = acknowledgements(
        req.topics.iter().flat_map(|t| {
            t.partitions.iter().map(move |p| {
                let key = (t.topic_id, PartitionIndex(p.partition_index));
                (key, &p.acknowledgement_batches)
            })
        }),
        |b| (b.first_offset, b.last_offset, &b.acknowledge_types),
    );
    let args = ShareSessionArgs {
        member_id,
        epoch: req.share_session_epoch,
        fetch: false,
        acks,
        ..Default::default()
    };
    let result = match broker
        .group(&group_id, GroupOp::ShareSession(Box::new(args)))
        .await
    {
        GroupReply::ShareSession(r) => r,
        GroupReply::Unavailable(code) => ShareSessionResult {
            error_code: code,
            ..Default::default()
        },
        other => unreachable!("share session answered with {other:?}"),
    };
    if !result.error_code.is_ok() {
        let message = result.error_message.unwrap_or_default();
        return top_error(result.error_code, &message);
    }
    outcomes.extend(result.acks);
    ShareAcknowledgeResponse::default().with_responses(by_topic(broker, outcomes))
}

/// Each partition's outcome, grouped by topic, with its current leader.
fn by_topic<B: Broker>(
    broker: &B,
    outcomes: Vec<(ShareKey, ErrorCode)>,
) -> Vec<ShareAcknowledgeTopicResponse> {
    let leader = LeaderIdAndEpoch::default().with_leader_id(broker.config().node_id);
    let mut topics: Vec<ShareAcknowledgeTopicResponse> = Vec::new();
    for ((topic_id, partition), code) in outcomes {
        let epoch = broker
            .topics()
            .by_id(topic_id)
            .map(|(name, _)| {
                broker
                    .leader_epoch(TopicPartitionRef::new(&name, partition))
                    .0
            })
            .unwrap_or(-1);
        let data = PartitionData::default()
            .with_partition_index(partition.0)
            .with_error_code(code.code())
            .with_error_message(super::share_fetch::ack_message(code))
            .with_current_leader(leader.clone().with_leader_epoch(epoch));
        match topics.iter_mut().find(|t| t.topic_id == topic_id) {
            Some(t) => t.partitions.push(data),
            None => topics.push(
                ShareAcknowledgeTopicResponse::default()
                    .with_topic_id(topic_id)
                    .with_partitions(vec![data]),
            ),
        }
    }
    topics
}

/// A whole-request error answer: no message, as Kafka sends none (`message` goes to the log).
fn top_error(code: ErrorCode, message: &str) -> ShareAcknowledgeResponse {
    tracing::debug!(?code, message, "share request refused");
    ShareAcknowledgeResponse::default().with_error_code(code.code())
}
