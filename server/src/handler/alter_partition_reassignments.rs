//! AlterPartitionReassignments (45): move a partition's replicas to other brokers
//! (`kafka-reassign-partitions.sh --execute`, AdminClient `alterPartitionReassignments`). In a
//! cluster any broker forwards it to the active controller, which records the target and
//! switches once the new replicas are in sync ([`rill_metadata::reassign`]); the answer waits
//! until this broker applied the change. A single node has one broker: the only target is
//! itself, which is where every replica already is.

use rill_metadata::reassign::Target;
use rill_metadata::request::{ControllerRequest, ControllerResponse, PartitionResult};
use rill_metadata::types::NodeId;
use rill_protocol::kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use rill_protocol::kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use rill_protocol::ErrorCode;

use super::{by_topic, message_bytes, topic_name, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::AlterPartitionReassignmentsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer AlterPartitionReassignments.
pub async fn handle<B: Broker>(
    broker: &B,
    req: &AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let topics: Vec<(String, Vec<Target>)> = req
        .topics
        .iter()
        .map(|t| {
            let targets = t
                .partitions
                .iter()
                .map(|p| {
                    let replicas = p
                        .replicas
                        .as_ref()
                        .map(|rs| rs.iter().map(|r| NodeId(r.0)).collect());
                    (p.partition_index, replicas)
                })
                .collect();
            (t.name.0.to_string(), targets)
        })
        .collect();
    let results = match broker.cluster() {
        None => single_node(broker, &topics),
        Some(cluster) => {
            let request = ControllerRequest::AlterPartitionReassignments {
                topics: topics.clone(),
            };
            match cluster.request(request, |d| broker.sleep(d)).await {
                ControllerResponse::PartitionResults { results, index } => {
                    if !cluster.wait_applied(index, |d| broker.sleep(d)).await {
                        tracing::warn!(index = index.0, "reassignments not applied here yet");
                    }
                    results
                }
                ControllerResponse::Error {
                    error_code,
                    message,
                } => {
                    return AlterPartitionReassignmentsResponse::default()
                        .with_error_code(error_code.code())
                        .with_error_message(Some(message_bytes(&message)))
                }
                other => {
                    let message = format!("unexpected controller answer {other:?}");
                    return AlterPartitionReassignmentsResponse::default()
                        .with_error_code(ErrorCode::UnknownServerError.code())
                        .with_error_message(Some(message_bytes(&message)));
                }
            }
        }
    };
    response(results)
}

/// A single node: its own id is the only target, and no reassignment is ever under way.
fn single_node<B: Broker>(broker: &B, topics: &[(String, Vec<Target>)]) -> Vec<PartitionResult> {
    let me = NodeId(broker.config().node_id);
    let mut results = Vec::new();
    for (topic, targets) in topics {
        let count = broker.topics().get(topic).map_or(0, |m| m.partitions);
        for (partition, target) in targets {
            let result = |code: ErrorCode, message: &str| {
                PartitionResult::failed(topic, *partition, code, message)
            };
            results.push(match target {
                _ if !(0..count).contains(partition) => result(
                    ErrorCode::UnknownTopicOrPartition,
                    "unknown topic or partition",
                ),
                None => result(
                    ErrorCode::NoReassignmentInProgress,
                    "no reassignment is under way",
                ),
                Some(replicas) if replicas.as_slice() == [me] => {
                    PartitionResult::ok(topic, *partition)
                }
                Some(_) => result(
                    ErrorCode::InvalidReplicaAssignment,
                    "a single node has one broker: the only replica list is its own id",
                ),
            });
        }
    }
    results
}

/// Results grouped by topic, topics in first-seen order.
fn response(results: Vec<PartitionResult>) -> AlterPartitionReassignmentsResponse {
    let topics = by_topic(results.into_iter().map(|r| {
        let partition = ReassignablePartitionResponse::default()
            .with_partition_index(r.partition)
            .with_error_code(r.error_code.code())
            .with_error_message(r.message.as_deref().map(message_bytes));
        (r.topic, partition)
    }));
    let topics = topics
        .into_iter()
        .map(|(topic, partitions)| {
            ReassignableTopicResponse::default()
                .with_name(topic_name(&topic))
                .with_partitions(partitions)
        })
        .collect();
    // Kafka sends a null top-level message on success; the codec's default is "".
    AlterPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_responses(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use rill_protocol::kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use rill_protocol::kafka_protocol::messages::BrokerId;

    #[test]
    fn a_single_node_accepts_only_itself_and_has_nothing_to_cancel() {
        futures::executor::block_on(async {
            let broker = FakeBroker::new();
            broker.topics().create("t", 1, Default::default()).unwrap();
            let me = broker.config().node_id;
            let partition = |index: i32, replicas: Option<Vec<i32>>| {
                ReassignablePartition::default()
                    .with_partition_index(index)
                    .with_replicas(replicas.map(|rs| rs.into_iter().map(BrokerId).collect()))
            };
            let req = AlterPartitionReassignmentsRequest::default().with_topics(vec![
                ReassignableTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(vec![
                        partition(0, Some(vec![me])),
                        partition(0, Some(vec![me + 1])),
                        partition(0, None),
                        partition(3, Some(vec![me])),
                    ]),
            ]);
            let r = handle(&broker, &req).await;
            let codes: Vec<i16> = r.responses[0]
                .partitions
                .iter()
                .map(|p| p.error_code)
                .collect();
            assert_eq!((r.error_code, codes), (0, vec![0, 39, 85, 3]));
        });
    }
}
