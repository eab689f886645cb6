//! TxnOffsetCommit (28): a group's offsets committed inside a transaction; they become the
//! group's committed offsets only when the transaction commits. The transaction's coordinator
//! checks the producer and that the group was added (AddOffsetsToTxn); the group's coordinator
//! checks the member (v3+, KIP-447) and stores the offsets as pending. Unknown partitions are
//! refused here. TRANSACTION_ABORTABLE from v4 (INVALID_TXN_STATE before); PRODUCER_FENCED is
//! INVALID_PRODUCER_EPOCH before v3.

use rill_protocol::kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use rill_protocol::kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use rill_protocol::ErrorCode;
use rill_types::{LeaderEpoch, Offset, TimestampMs};

use super::partition_verdicts::PartitionVerdicts;
use super::Broker;
use crate::group::offsets::CommittedOffset;
use crate::group::ops::MemberRef;
use crate::txn::ops::{for_client, TxnOp, TxnProducer, TxnReply};
use crate::txn::{ProducerEpoch, ProducerId};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::TxnOffsetCommitRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer TxnOffsetCommit.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
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
    let offsets = verdicts.take_sent();
    let n = offsets.len();
    let op = TxnOp::CommitOffsets {
        producer: TxnProducer {
            id: ProducerId(req.producer_id.0),
            epoch: ProducerEpoch(req.producer_epoch),
        },
        group: req.group_id.0.to_string(),
        member: MemberRef {
            member_id: req.member_id.to_string(),
            group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
            generation_id: if version >= 3 { req.generation_id } else { -1 },
        },
        offsets,
    };
    let answers = match broker.txn(&req.transactional_id.0, op).await {
        TxnReply::Offsets(codes) if codes.len() == n => codes,
        TxnReply::Unavailable(code) => vec![code; n],
        other => {
            tracing::error!(reply = ?other, "CommitOffsets got an unexpected reply");
            vec![ErrorCode::UnknownServerError; n]
        }
    };
    let mut codes = verdicts.codes(answers);
    let mut topics = Vec::new();
    for topic in &req.topics {
        let partitions = topic.partitions.iter().map(|p| {
            let code = codes.next().expect("one code per request partition");
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(for_client(code, version, 3, 4).code())
        });
        topics.push(
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions.collect()),
        );
    }
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// A request partition's offset as the coordinator stores it (leader epoch from v2).
fn committed(
    version: i16,
    p: &rill_protocol::kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition,
) -> CommittedOffset {
    CommittedOffset {
        offset: Offset(p.committed_offset),
        leader_epoch: if version >= 2 {
            LeaderEpoch(p.committed_leader_epoch)
        } else {
            LeaderEpoch::NONE
        },
        metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
        commit_time_ms: TimestampMs(0),
    }
}
