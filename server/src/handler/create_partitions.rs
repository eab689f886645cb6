//! CreatePartitions (37): grow a topic; new partitions open on first use on their owner shard.
//! Growth that does not fit (the broker's partition limit, its disk) is refused before anything
//! is written (`capacity`).

use rill_protocol::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use rill_protocol::kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use rill_protocol::ErrorCode;

use super::{str_bytes, Broker};
use crate::topics::Growth;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::CreatePartitionsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer CreatePartitions (in a cluster: decided by the controller, [`crate::cluster::admin`]).
pub async fn handle<B: Broker>(
    broker: &B,
    request: &CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    if let Some(cluster) = broker.cluster() {
        return crate::cluster::admin::create_partitions(broker, cluster, request).await;
    }
    let results = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
            let outcome = match broker.topics().get(name) {
                None => Err((
                    ErrorCode::UnknownTopicOrPartition,
                    format!("unknown topic {name}"),
                )),
                Some(meta) if topic.count <= meta.partitions => Err((
                    ErrorCode::InvalidPartitions,
                    format!(
                        "topic has {} partitions; {} is not more",
                        meta.partitions, topic.count
                    ),
                )),
                Some(meta) if request.validate_only => {
                    let growth = Growth {
                        partitions_before: broker.topics().partition_count(),
                        adding: i64::from(topic.count - meta.partitions),
                    };
                    crate::capacity::admit(broker.config(), growth, 0)
                        .map_err(|e| (e.kafka_error_code(), e.to_string()))
                }
                Some(_) => broker
                    .topics()
                    .add_partitions_within(name, topic.count, |growth| {
                        crate::capacity::admit(broker.config(), growth, 0)
                    })
                    .map(|_| ())
                    .map_err(|e| (e.kafka_error_code(), e.to_string())),
            };
            match outcome {
                Ok(()) => result,
                Err((code, message)) => result
                    .with_error_code(code.code())
                    .with_error_message(Some(str_bytes(&message))),
            }
        })
        .collect();
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
