//! CreatePartitions (37): grow a topic; new partitions open on first use on their owner shard.
//! Growth that does not fit (the broker's partition limit, its disk) is refused before anything
//! is written (`capacity`).

use rill_protocol::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use rill_protocol::kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use rill_protocol::ErrorCode;

use super::mutation_quota::{self, Gate};
use super::{message_bytes, Broker};
use crate::capacity::Capacity;
use crate::topics::Growth;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    mut request: rill_protocol::kafka_protocol::messages::CreatePartitionsRequest,
) -> super::Answer {
    // KIP-599: strict from v3, whose clients know THROTTLING_QUOTA_EXCEEDED.
    let Some(mut gate) = Gate::open(broker, &cx, cx.version >= 3, request.validate_only) else {
        return super::Answer::body(handle(broker, &request).await);
    };
    let mut refused = Vec::new();
    request.topics.retain(|topic| {
        let name = topic.name.0.as_str();
        // The partitions added; none for an unknown topic or no growth (which fail on their own).
        let current = mutation_quota::partitions_of(broker, name).unwrap_or(topic.count);
        let adding = u32::try_from(topic.count.saturating_sub(current)).unwrap_or(0);
        if gate.admit(name, adding) {
            return true;
        }
        let (code, message) = mutation_quota::throttled();
        refused.push(
            CreatePartitionsTopicResult::default()
                .with_name(topic.name.clone())
                .with_error_code(code)
                .with_error_message(Some(message_bytes(message))),
        );
        false
    });
    let mut response = handle(broker, &request).await;
    for result in response.results.iter().filter(|r| r.error_code != 0) {
        gate.failed(result.name.0.as_str());
    }
    response.results.extend(refused);
    response.throttle_time_ms = response.throttle_time_ms.max(gate.finish());
    super::Answer::body(response)
}

/// Answer CreatePartitions (in a cluster: decided by the controller, [`crate::cluster::admin`]).
pub async fn handle<B: Broker>(
    broker: &B,
    request: &CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    if let Some(cluster) = broker.cluster() {
        return crate::cluster::admin::create_partitions(broker, cluster, request).await;
    }
    let capacity = Capacity::of(broker.config());
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        let outcome = match broker.topics().get(name) {
            None => Err((
                ErrorCode::UnknownTopicOrPartition,
                format!("unknown topic {name}"),
            )),
            // Kafka's messages (ReplicationControlManager), which `kafka-topics.sh --alter` prints.
            Some(meta) if topic.count == meta.partitions => Err((
                ErrorCode::InvalidPartitions,
                format!("Topic already has {} partition(s).", meta.partitions),
            )),
            Some(meta) if topic.count < meta.partitions => Err((
                ErrorCode::InvalidPartitions,
                format!(
                    "The topic {name} currently has {} partition(s); {} would not be an increase.",
                    meta.partitions, topic.count
                ),
            )),
            Some(meta) if request.validate_only => {
                let growth = Growth {
                    partitions_before: broker.topics().partition_count(),
                    adding: i64::from(topic.count - meta.partitions),
                };
                let capacity = capacity.clone();
                broker
                    .blocking(move || capacity.admit(growth, 0))
                    .await
                    .map_err(|e| (e.kafka_error_code(), e.to_string()))
            }
            Some(_) => {
                // The commit writes and fsyncs topics.json: off the shard's thread.
                let (registry, capacity) = (broker.topics().clone(), capacity.clone());
                let (owned, count) = (name.to_string(), topic.count);
                broker
                    .blocking(move || {
                        registry.add_partitions_within(&owned, count, |growth| {
                            capacity.admit(growth, 0)
                        })
                    })
                    .await
                    .map(|_| ())
                    .map_err(|e| (e.kafka_error_code(), e.to_string()))
            }
        };
        results.push(match outcome {
            Ok(()) => result,
            Err((code, message)) => result
                .with_error_code(code.code())
                .with_error_message(Some(message_bytes(&message))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use crate::handler::topic_name;
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;

    #[test]
    fn grows_and_refuses_shrinking() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 1, Default::default()).unwrap();
        let req = |n| {
            CreatePartitionsRequest::default().with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic_name("t"))
                .with_count(n)])
        };
        assert_eq!(block_on(handle(&broker, &req(3))).results[0].error_code, 0);
        assert_eq!(broker.topics().get("t").unwrap().partitions, 3);
        assert_eq!(block_on(handle(&broker, &req(2))).results[0].error_code, 37);
    }

    #[test]
    fn growth_past_the_partition_limit_is_refused() {
        let broker = FakeBroker::with_config(|c| c.broker_partitions_max = Some(4));
        broker.topics().create("t", 1, Default::default()).unwrap();
        let req = |n, validate_only| {
            CreatePartitionsRequest::default()
                .with_validate_only(validate_only)
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(topic_name("t"))
                    .with_count(n)])
        };
        let refused = &block_on(handle(&broker, &req(5, true))).results[0];
        assert_eq!(refused.error_code, 37);
        assert_eq!(
            block_on(handle(&broker, &req(5, false))).results[0].error_code,
            37
        );
        assert_eq!(broker.topics().get("t").unwrap().partitions, 1);
        assert_eq!(
            block_on(handle(&broker, &req(4, false))).results[0].error_code,
            0
        );
        assert_eq!(broker.topics().get("t").unwrap().partitions, 4);
    }
}
