//! ElectLeaders (43): preferred or unclean leader elections (`kafka-leader-election.sh`,
//! AdminClient `electLeaders`). In a cluster any broker forwards the request to the active
//! controller, which decides through the metadata log ([`rill_metadata::elect_leaders`]); the
//! answer waits until this broker applied the changes, so its next Metadata shows the new
//! leaders. On a single node every partition is led by its only replica, the preferred one:
//! nothing to elect (ELECTION_NOT_NEEDED), unknown partitions aside.

use rill_metadata::request::{
    ControllerRequest, ControllerResponse, ElectionType, PartitionResult,
};
use rill_protocol::kafka_protocol::messages::elect_leaders_response::{
    PartitionResult as WirePartitionResult, ReplicaElectionResult,
};
use rill_protocol::kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use rill_protocol::ErrorCode;

use super::{by_topic, message_bytes, topic_name, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::ElectLeadersRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer ElectLeaders.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &ElectLeadersRequest,
) -> ElectLeadersResponse {
    let asked: Option<Vec<(String, Vec<i32>)>> = req.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.topic.0.to_string(), t.partitions.clone()))
            .collect()
    });
    // v0 has no election type: always preferred.
    let election = if version == 0 {
        Some(ElectionType::Preferred)
    } else {
        ElectionType::from_wire(req.election_type)
    };
    let Some(election) = election else {
        let message = format!("unknown election type {}", req.election_type);
        return refuse(version, asked, ErrorCode::InvalidRequest, &message);
    };
    let results = match broker.cluster() {
        None => single_node(broker, asked.as_deref()),
        Some(cluster) => {
            let request = ControllerRequest::ElectLeaders {
                election,
                partitions: asked.clone(),
            };
            match cluster.request(request, |d| broker.sleep(d)).await {
                ControllerResponse::PartitionResults { results, index } => {
                    if !cluster.wait_applied(index, |d| broker.sleep(d)).await {
                        tracing::warn!(index = index.0, "elections not applied here yet");
                    }
                    results
                }
                ControllerResponse::Error {
                    error_code,
                    message,
                } => return refuse(version, asked, error_code, &message),
                other => {
                    let message = format!("unexpected controller answer {other:?}");
                    return refuse(version, asked, ErrorCode::UnknownServerError, &message);
                }
            }
        }
    };
    response(results)
}

/// The single node's answer: its partitions need no election.
fn single_node<B: Broker>(
    broker: &B,
    asked: Option<&[(String, Vec<i32>)]>,
) -> Vec<PartitionResult> {
    let pairs: Vec<(String, i32)> = match asked {
        Some(asked) => asked
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect(),
        None => broker
            .topics()
            .list()
            .into_iter()
            .flat_map(|(name, meta)| (0..meta.partitions).map(move |p| (name.clone(), p)))
            .collect(),
    };
    pairs
        .into_iter()
        .map(|(topic, partition)| {
            let known = broker
                .topics()
                .get(&topic)
                .is_some_and(|m| (0..m.partitions).contains(&partition));
            if known {
                let message = "a single node leads every partition as its preferred replica";
                PartitionResult::failed(&topic, partition, ErrorCode::ElectionNotNeeded, message)
            } else {
                let message = "unknown topic or partition";
                let code = ErrorCode::UnknownTopicOrPartition;
                PartitionResult::failed(&topic, partition, code, message)
            }
        })
        .collect()
}

/// The whole request refused: v1+ say so at the top; every partition carries the code too
/// (v0's only place for it).
fn refuse(
    version: i16,
    asked: Option<Vec<(String, Vec<i32>)>>,
    code: ErrorCode,
    message: &str,
) -> ElectLeadersResponse {
    let results = asked
        .unwrap_or_default()
        .into_iter()
        .flat_map(|(t, ps)| {
            ps.into_iter()
                .map(move |p| PartitionResult::failed(&t, p, code, message))
        })
        .collect();
    let mut response = response(results);
    if version >= 1 {
        response.error_code = code.code();
    }
    response
}

/// Results grouped by topic, topics in first-seen order.
fn response(results: Vec<PartitionResult>) -> ElectLeadersResponse {
    let topics = by_topic(results.into_iter().map(|r| {
        let partition = WirePartitionResult::default()
            .with_partition_id(r.partition)
            .with_error_code(r.error_code.code())
            .with_error_message(r.message.as_deref().map(message_bytes));
        (r.topic, partition)
    }));
    let topics = topics
        .into_iter()
        .map(|(topic, partitions)| {
            ReplicaElectionResult::default()
                .with_topic(topic_name(&topic))
                .with_partition_result(partitions)
        })
        .collect();
    ElectLeadersResponse::default().with_replica_election_results(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use rill_protocol::kafka_protocol::messages::elect_leaders_request::TopicPartitions;

    fn codes(response: &ElectLeadersResponse) -> Vec<(String, i32, i16)> {
        response
            .replica_election_results
            .iter()
            .flat_map(|t| {
                t.partition_result
                    .iter()
                    .map(|p| (t.topic.0.to_string(), p.partition_id, p.error_code))
            })
            .collect()
    }

    #[test]
    fn a_single_node_needs_no_election_and_names_unknowns() {
        futures::executor::block_on(async {
            let broker = FakeBroker::new();
            broker.topics().create("t", 2, Default::default()).unwrap();
            let all = handle(
                &broker,
                2,
                &ElectLeadersRequest::default().with_topic_partitions(None),
            )
            .await;
            assert_eq!(all.error_code, 0);
            assert_eq!(codes(&all), vec![("t".into(), 0, 84), ("t".into(), 1, 84)]);
            let asked = ElectLeadersRequest::default()
                .with_election_type(1)
                .with_topic_partitions(Some(vec![TopicPartitions::default()
                    .with_topic(topic_name("t"))
                    .with_partitions(vec![1, 5])]));
            let some = handle(&broker, 2, &asked).await;
            assert_eq!(codes(&some), vec![("t".into(), 1, 84), ("t".into(), 5, 3)]);
            let bad = handle(&broker, 2, &asked.clone().with_election_type(7)).await;
            assert_eq!(bad.error_code, 42);
            assert_eq!(codes(&bad), vec![("t".into(), 1, 42), ("t".into(), 5, 42)]);
        });
    }
}
