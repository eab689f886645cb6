//! DeleteRecords (21): moves a partition's log start ("low watermark") forward; offset -1 means
//! the high watermark. Records below it are gone for every reader at once (a Fetch below it
//! answers OFFSET_OUT_OF_RANGE); segments wholly below it are deleted, the rest when retention
//! or the cleaner next passes. The new log start is durable before the answer.
//!
//! | case                                              | error code |
//! |---------------------------------------------------|------------|
//! | topic or partition unknown                        | UNKNOWN_TOPIC_OR_PARTITION (3) |
//! | offset below -1, or above the high watermark      | OFFSET_OUT_OF_RANGE (1) |
//! | `cleanup.policy` without `delete` (compact only)  | POLICY_VIOLATION (44) |
//! | partition led by another broker (cluster)         | NOT_LEADER_OR_FOLLOWER (6) |

use futures::future::join_all;
use rill_protocol::kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use rill_protocol::kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use rill_protocol::ErrorCode;
use rill_types::{Offset, PartitionIndex, TopicPartitionRef};

use super::Broker;
use crate::partition::ops::{PartitionOp, PartitionReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::DeleteRecordsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer DeleteRecords.
pub async fn handle<B: Broker>(
    broker: &B,
    request: &DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let topics = request.topics.iter().map(|topic| async move {
        let name = topic.name.0.as_str();
        let meta = broker.topics().get(name);
        // Only a topic whose cleanup.policy includes delete may lose records on request.
        let refusal = meta
            .as_ref()
            .and_then(|m| match broker.topic_settings(name, m) {
                Ok(s) if s.policy.delete => None,
                Ok(_) => Some(ErrorCode::PolicyViolation),
                Err(_) => Some(ErrorCode::InvalidConfig),
            });
        let partitions = topic.partitions.iter().map(|p| {
            let meta = meta.clone();
            async move {
                let base = DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_low_watermark(-1);
                let known = meta
                    .is_some_and(|m| p.partition_index >= 0 && p.partition_index < m.partitions);
                let code = if !known {
                    ErrorCode::UnknownTopicOrPartition
                } else if let Some(code) = refusal {
                    code
                } else if p.offset < -1 {
                    ErrorCode::OffsetOutOfRange
                } else {
                    let op = PartitionOp::DeleteRecords {
                        before: Offset(p.offset),
                    };
                    let tp = TopicPartitionRef::new(name, PartitionIndex(p.partition_index));
                    match broker.partition(tp, op).await {
                        PartitionReply::Offsets(positions) => {
                            return base.with_low_watermark(positions.log_start().0);
                        }
                        other => other.error_code(),
                    }
                };
                base.with_error_code(code.code())
            }
        });
        DeleteRecordsTopicResult::default()
            .with_name(topic.name.clone())
            .with_partitions(join_all(partitions).await)
    });
    DeleteRecordsResponse::default().with_topics(join_all(topics).await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::{batch, FakeBroker};
    use crate::handler::topic_name;
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };

    fn delete(broker: &FakeBroker, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
        let req = DeleteRecordsRequest::default().with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])]);
        let r = block_on(handle(broker, &req));
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.low_watermark)
    }

    #[test]
    fn moves_the_low_watermark_within_the_high_watermark() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 1, Default::default()).unwrap();
        broker.append(TopicPartitionRef::new("t", PartitionIndex(0)), batch(10));
        assert_eq!(delete(&broker, "t", 0, 4), (0, 4));
        assert_eq!(delete(&broker, "t", 0, 2), (0, 4), "never backwards");
        assert_eq!(
            delete(&broker, "t", 0, 11),
            (1, -1),
            "past the high watermark"
        );
        assert_eq!(delete(&broker, "t", 0, -2), (1, -1));
        assert_eq!(
            delete(&broker, "t", 0, -1),
            (0, 10),
            "-1: the high watermark"
        );
        assert_eq!(delete(&broker, "t", 1, 0), (3, -1));
        assert_eq!(delete(&broker, "nope", 0, 0), (3, -1));
    }

    #[test]
    fn compact_only_topics_refuse_with_policy_violation() {
        let broker = FakeBroker::new();
        let compact = [("cleanup.policy".to_string(), "compact".to_string())];
        broker.topics().create("c", 1, compact.into()).unwrap();
        broker.append(TopicPartitionRef::new("c", PartitionIndex(0)), batch(3));
        assert_eq!(
            delete(&broker, "c", 0, 1),
            (ErrorCode::PolicyViolation.code(), -1)
        );
        let both = [("cleanup.policy".to_string(), "compact,delete".to_string())];
        broker.topics().create("cd", 1, both.into()).unwrap();
        broker.append(TopicPartitionRef::new("cd", PartitionIndex(0)), batch(3));
        assert_eq!(delete(&broker, "cd", 0, 1), (0, 1));
    }
}
