//! ListPartitionReassignments (46): the reassignments under way, with each partition's
//! replicas and those being added and removed (`kafka-reassign-partitions.sh --verify`,
//! AdminClient `listPartitionReassignments`). Answered from this broker's metadata image, which
//! every broker follows; a single node never has one under way.

use rill_metadata::types::NodeId;
use rill_protocol::kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use rill_protocol::kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::{by_topic, topic_name, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::ListPartitionReassignmentsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request))
}

/// Answer ListPartitionReassignments.
pub fn handle<B: Broker>(
    broker: &B,
    req: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let Some(cluster) = broker.cluster() else {
        // Kafka sends a null message on success; the codec's default is "".
        return ListPartitionReassignmentsResponse::default().with_error_message(None);
    };
    let asked: Option<Vec<(String, Vec<i32>)>> = req.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let image = cluster.image();
    let ids = |nodes: &[NodeId]| nodes.iter().map(|n| BrokerId(n.0)).collect::<Vec<_>>();
    let ongoing = rill_metadata::reassign::list(&image, asked.as_deref())
        .into_iter()
        .map(|(topic, partition, state)| {
            let ongoing = OngoingPartitionReassignment::default()
                .with_partition_index(partition)
                .with_replicas(ids(&state.replicas))
                .with_adding_replicas(ids(&state.adding_replicas))
                .with_removing_replicas(ids(&state.removing_replicas));
            (topic, ongoing)
        });
    let topics = by_topic(ongoing)
        .into_iter()
        .map(|(topic, partitions)| {
            OngoingTopicReassignment::default()
                .with_name(topic_name(&topic))
                .with_partitions(partitions)
        })
        .collect();
    ListPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_topics(topics)
}
