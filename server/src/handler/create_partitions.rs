//! CreatePartitions (37): grow a topic; new partitions open on first use on their owner shard.

use rill_protocol::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use rill_protocol::kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use rill_protocol::ErrorCode;

use super::{str_bytes, Broker};

/// Answer CreatePartitions.
pub fn handle<B: Broker>(
    broker: &B,
    request: &CreatePartitionsRequest,
) -> CreatePartitionsResponse {
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
                Some(_) if request.validate_only => Ok(()),
                Some(_) => broker
                    .topics()
                    .add_partitions(name, topic.count)
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
        assert_eq!(handle(&broker, &req(3)).results[0].error_code, 0);
        assert_eq!(broker.topics().get("t").unwrap().partitions, 3);
        assert_eq!(handle(&broker, &req(2)).results[0].error_code, 37);
    }
}
