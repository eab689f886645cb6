//! DescribeConfigs (32): a topic's effective configs (overrides and defaults) and the broker's
//! main settings.

use rill_protocol::kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use rill_protocol::kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use rill_protocol::ErrorCode;

use super::{str_bytes, Broker};
use crate::topic_config::describe;

/// Kafka's resource types.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Kafka's config sources.
const SOURCE_TOPIC_OVERRIDE: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

/// Answer DescribeConfigs.
pub fn handle<B: Broker>(broker: &B, request: &DescribeConfigsRequest) -> DescribeConfigsResponse {
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let name = resource.resource_name.as_str();
            let base = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let rows = match resource.resource_type {
                RESOURCE_TOPIC => match broker.topics().get(name) {
                    Some(meta) => describe(&broker.config().log, &meta.configs)
                        .into_iter()
                        .map(|r| {
                            let source = if r.is_topic_override {
                                SOURCE_TOPIC_OVERRIDE
                            } else {
                                SOURCE_DEFAULT
                            };
                            (r.name.to_string(), r.value, source)
                        })
                        .collect(),
                    None => return base.with_error_code(ErrorCode::UnknownTopicOrPartition.code()),
                },
                RESOURCE_BROKER => broker_rows(broker),
                _ => return base.with_error_code(ErrorCode::InvalidRequest.code()),
            };
            // null lists every key; an empty list too (more useful than listing none).
            let wanted = resource
                .configuration_keys
                .as_ref()
                .filter(|keys| !keys.is_empty());
            let configs = rows
                .into_iter()
                .filter(|(n, _, _)| wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == n)))
                .map(|(n, v, source)| {
                    DescribeConfigsResourceResult::default()
                        .with_name(str_bytes(&n))
                        .with_value(Some(str_bytes(&v)))
                        .with_config_source(source)
                        .with_read_only(resource.resource_type == RESOURCE_BROKER)
                })
                .collect();
            base.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn broker_rows<B: Broker>(broker: &B) -> Vec<(String, String, i8)> {
    let c = broker.config();
    let opt = |v: Option<u64>| v.map_or("-1".to_string(), |n| n.to_string());
    [
        ("broker.id", c.node_id.to_string()),
        ("num.partitions", c.default_partitions.to_string()),
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
        ),
        ("log.segment.bytes", c.log.segment_bytes_max.to_string()),
        ("log.retention.ms", opt(c.log.retention_ms)),
        ("log.retention.bytes", opt(c.log.retention_bytes)),
        ("message.max.bytes", c.log.message_bytes_max.to_string()),
        ("socket.request.max.bytes", c.request_bytes_max.to_string()),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v, SOURCE_STATIC_BROKER))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use rill_protocol::kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;

    #[test]
    fn topic_configs_show_overrides_and_defaults() {
        let broker = FakeBroker::new();
        let configs = [("retention.ms".to_string(), "42".to_string())].into();
        broker.topics().create("t", 1, configs).unwrap();
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(str_bytes("t")),
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(str_bytes("nope")),
            DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(str_bytes("0")),
        ]);
        let r = handle(&broker, &req);
        let t = &r.results[0];
        let retention = t
            .configs
            .iter()
            .find(|c| c.name.as_str() == "retention.ms")
            .unwrap();
        assert_eq!(retention.value.as_ref().unwrap().as_str(), "42");
        assert_eq!(retention.config_source, 1);
        assert_eq!(r.results[1].error_code, 3);
        assert!(!r.results[2].configs.is_empty());
    }
}
