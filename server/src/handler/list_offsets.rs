//! ListOffsets (2): earliest (-2), latest (-1), by timestamp (>= 0), and (v7, KIP-734) max
//! timestamp (-3): the first record holding the partition's largest timestamp. v8-v10 (KIP-405's
//! tiered-storage lookups, v10's timeout for remote ones): earliest-local (-4) is the first
//! offset on local disk and latest-tiered (-5) the highest offset in the remote tier (KIP-1005);
//! with no tiered storage -4 is the log start and -5 not found (offset -1), as Kafka answers
//! them when `remote.storage.enable` is off; the Java AdminClient needs v8 for
//! `OffsetSpec.earliestLocal`. Earliest (-2) of a tiered partition is the remote tier's first offset.
//!
//! Isolation (v2+): read_uncommitted sees up to the high watermark, read_committed up to the
//! last stable offset ("latest" is then the LSO; a timestamp found at or past it is not found).
//! Any other level gets UNKNOWN_SERVER_ERROR on every partition, as Kafka answers it.

use futures::future::join_all;
use rill_protocol::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use rill_protocol::kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use rill_protocol::ErrorCode;
use rill_types::{Offset, PartitionIndex, TimestampMs, TopicPartitionRef};

use super::{topic_name, Broker};
use crate::partition::ops::{Isolation, PartitionOp, PartitionReply};

/// Kafka's special timestamps.
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::ListOffsetsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer ListOffsets.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    request: &ListOffsetsRequest,
) -> ListOffsetsResponse {
    let isolation = if version >= 2 {
        Isolation::from_wire(request.isolation_level)
    } else {
        Some(Isolation::ReadUncommitted)
    };
    let Some(isolation) = isolation else {
        tracing::warn!(
            isolation_level = request.isolation_level,
            "ListOffsets names an unknown isolation level: answered UNKNOWN_SERVER_ERROR, as Kafka"
        );
        return refuse(request, Isolation::INVALID_CODE);
    };
    let topics = request.topics.iter().map(|topic| async move {
        let name = topic.name.0.as_str();
        let meta = crate::broker::readable_topic(broker, name);
        let partitions = topic.partitions.iter().map(|p| {
            let meta = meta.clone();
            async move {
                let base =
                    ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
                let known = meta
                    .is_some_and(|m| p.partition_index >= 0 && p.partition_index < m.partitions);
                if !known {
                    return not_found(base)
                        .with_error_code(ErrorCode::UnknownTopicOrPartition.code());
                }
                let tp = TopicPartitionRef::new(name, PartitionIndex(p.partition_index));
                let mut answer = lookup(broker, tp, p.timestamp, isolation, base).await;
                if version < 4 {
                    answer.leader_epoch = -1; // not in the schema before v4
                }
                answer
            }
        });
        ListOffsetsTopicResponse::default()
            .with_name(topic_name(name))
            .with_partitions(join_all(partitions).await)
    });
    ListOffsetsResponse::default().with_topics(join_all(topics).await)
}

/// Kafka's answer to a ListOffsets it cannot serve at all (`ListOffsetsRequest.getErrorResponse`):
/// `code` on every requested partition, offset and timestamp unknown.
fn refuse(request: &ListOffsetsRequest, code: ErrorCode) -> ListOffsetsResponse {
    let topics = request.topics.iter().map(|topic| {
        let partitions = topic.partitions.iter().map(|p| {
            let base =
                ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            not_found(base).with_error_code(code.code())
        });
        ListOffsetsTopicResponse::default()
            .with_name(topic.name.clone())
            .with_partitions(partitions.collect())
    });
    ListOffsetsResponse::default().with_topics(topics.collect())
}

async fn lookup<B: Broker>(
    broker: &B,
    tp: TopicPartitionRef<'_>,
    timestamp: i64,
    isolation: Isolation,
    base: ListOffsetsPartitionResponse,
) -> ListOffsetsPartitionResponse {
    let visible_end = |p: &rill_engine::Positions| match isolation {
        Isolation::ReadUncommitted | Isolation::Replica => p.high_watermark(),
        Isolation::ReadCommitted => p.last_stable(),
    };
    let op = match timestamp {
        MAX_TIMESTAMP => PartitionOp::MaxTimestamp,
        EARLIEST_LOCAL | LATEST_TIERED => PartitionOp::TierOffsets,
        t if t >= 0 => PartitionOp::OffsetForTimestamp {
            timestamp: TimestampMs(t),
        },
        _ => PartitionOp::Offsets,
    };
    let base = base.with_leader_epoch(broker.leader_epoch(tp).0);
    match (broker.partition(tp, op).await, timestamp) {
        (PartitionReply::Offsets(p), EARLIEST) => found(base, p.log_start(), TimestampMs::NONE),
        (
            PartitionReply::TierOffsets {
                local_log_start, ..
            },
            EARLIEST_LOCAL,
        ) => found(base, local_log_start, TimestampMs::NONE),
        (
            PartitionReply::TierOffsets {
                highest_tiered: Some(offset),
                ..
            },
            LATEST_TIERED,
        ) => found(base, offset, TimestampMs::NONE),
        (PartitionReply::Offsets(p), LATEST) => found(base, visible_end(&p), TimestampMs::NONE),
        (PartitionReply::Offsets(_), _) => not_found(base),
        (PartitionReply::OffsetForTimestamp(Some((offset, ts)), p), _)
            if offset < visible_end(&p) =>
        {
            found(base, offset, ts)
        }
        (PartitionReply::OffsetForTimestamp(_, _), _) => not_found(base),
        (other, _) => not_found(base).with_error_code(other.error_code().code()),
    }
}

fn found(
    base: ListOffsetsPartitionResponse,
    offset: Offset,
    timestamp: TimestampMs,
) -> ListOffsetsPartitionResponse {
    base.with_offset(offset.0).with_timestamp(timestamp.0)
}

fn not_found(base: ListOffsetsPartitionResponse) -> ListOffsetsPartitionResponse {
    base.with_offset(-1)
        .with_timestamp(-1)
        .with_leader_epoch(-1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::{batch, FakeBroker};
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::list_offsets_request::{
        ListOffsetsPartition, ListOffsetsTopic,
    };

    fn ask(broker: &FakeBroker, topic: &str, partition: i32, ts: i64) -> (i16, i64) {
        let req = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(ts)])]);
        let r = block_on(handle(broker, 7, &req));
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.offset)
    }

    #[test]
    fn an_unknown_isolation_level_is_unknown_server_error_on_every_partition() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 1, Default::default()).unwrap();
        broker.append(TopicPartitionRef::new("t", PartitionIndex(0)), batch(2));
        let req = |level| {
            ListOffsetsRequest::default()
                .with_isolation_level(level)
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(vec![
                        ListOffsetsPartition::default().with_timestamp(LATEST)
                    ])])
        };
        let p = |r: ListOffsetsResponse| {
            (
                r.topics[0].partitions[0].error_code,
                r.topics[0].partitions[0].offset,
            )
        };
        assert_eq!(p(block_on(handle(&broker, 7, &req(1)))), (0, 2));
        let refused = (ErrorCode::UnknownServerError.code(), -1);
        assert_eq!(p(block_on(handle(&broker, 7, &req(2)))), refused);
        // v0-v1 have no isolation level: whatever the field holds is not looked at.
        assert_eq!(p(block_on(handle(&broker, 1, &req(2)))), (0, 2));
    }

    #[test]
    fn earliest_latest_and_by_time() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 1, Default::default()).unwrap();
        broker.append(TopicPartitionRef::new("t", PartitionIndex(0)), batch(4));
        assert_eq!(ask(&broker, "t", 0, -2), (0, 0));
        assert_eq!(ask(&broker, "t", 0, -1), (0, 4));
        assert_eq!(ask(&broker, "t", 0, 0), (0, 0));
        assert_eq!(ask(&broker, "t", 0, i64::MAX), (0, -1));
        assert_eq!(
            ask(&broker, "t", 0, -3),
            (0, 3),
            "max timestamp: its record"
        );
        assert_eq!(ask(&broker, "t", 1, -1).0, 3);
        assert_eq!(ask(&broker, "nope", 0, -1).0, 3);
    }

    #[test]
    fn tiered_lookups_without_tiered_storage() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 1, Default::default()).unwrap();
        broker.append(TopicPartitionRef::new("t", PartitionIndex(0)), batch(4));
        assert_eq!(
            ask(&broker, "t", 0, -4),
            (0, 0),
            "earliest local: the log start"
        );
        assert_eq!(
            ask(&broker, "t", 0, -5),
            (0, -1),
            "latest tiered: nothing tiered"
        );
    }
}
