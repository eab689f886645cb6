//! DescribeProducers (61): the producers each partition knows (epoch, last sequence and
//! timestamp, coordinator epoch of their last marker, start of their open transaction), from
//! the partitions' owners.

use futures::future::join_all;
use rill_protocol::kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use rill_protocol::kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartitionRef};

use super::Broker;
use crate::partition::ops::{PartitionOp, PartitionReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::DescribeProducersRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer DescribeProducers.
pub async fn handle<B: Broker>(
    broker: &B,
    req: &DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = join_all(req.topics.iter().map(|t| async move {
        let name = t.name.0.as_str();
        // The internal topics are not in the registry; `find-hanging` asks about them too.
        let meta = broker
            .topics()
            .get(name)
            .or_else(|| broker.internal_topic(name));
        let partitions = join_all(t.partition_indexes.iter().map(|&p| {
            let known = meta.as_ref().is_some_and(|m| p >= 0 && p < m.partitions);
            async move {
                let base = PartitionResponse::default().with_partition_index(p);
                if !known {
                    return base.with_error_code(ErrorCode::UnknownTopicOrPartition.code());
                }
                let tp = TopicPartitionRef::new(name, PartitionIndex(p));
                match broker.partition(tp, PartitionOp::DescribeProducers).await {
                    PartitionReply::Producers(views) => {
                        base.with_active_producers(views.iter().map(producer_state).collect())
                    }
                    other => base.with_error_code(other.error_code().code()),
                }
            }
        }));
        TopicResponse::default()
            .with_name(t.name.clone())
            .with_partitions(partitions.await)
    }));
    DescribeProducersResponse::default().with_topics(topics.await)
}

fn producer_state(v: &rill_engine::ProducerView) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(v.producer_id.0))
        .with_producer_epoch(i32::from(v.producer_epoch.0))
        .with_last_sequence(v.last_sequence.0)
        .with_last_timestamp(v.last_timestamp.0)
        .with_coordinator_epoch(v.coordinator_epoch)
        .with_current_txn_start_offset(v.txn_first_offset.map_or(-1, |o| o.0))
}
