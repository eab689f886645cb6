//! AlterConfigs (33): replaces all of a topic's configs, or a broker resource's dynamic
//! configs (configs not given are reset), persisted and applied live (`config::changes`).

use std::collections::BTreeMap;

use rill_protocol::kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use rill_protocol::kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};

use super::{message_bytes, Broker};
use crate::config::changes::{alter, Change};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::AlterConfigsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer AlterConfigs.
pub async fn handle<B: Broker>(broker: &B, request: &AlterConfigsRequest) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let name = resource.resource_name.as_str();
        let configs: BTreeMap<String, String> = resource
            .configs
            .iter()
            .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
            .collect();
        let change = Change::Replace(configs);
        let base = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        let kind = resource.resource_type;
        responses.push(
            match alter(broker, kind, name, &change, request.validate_only).await {
                Ok(()) => base.with_error_message(None),
                Err((code, message)) => base
                    .with_error_code(code.code())
                    .with_error_message(Some(message_bytes(&message))),
            },
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use crate::handler::str_bytes;
    use rill_protocol::kafka_protocol::messages::alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use rill_protocol::ErrorCode;

    fn resource(kind: i8, name: &str, configs: &[(&str, &str)]) -> AlterConfigsResource {
        AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(str_bytes(name))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        AlterableConfig::default()
                            .with_name(str_bytes(k))
                            .with_value(Some(str_bytes(v)))
                    })
                    .collect(),
            )
    }

    #[test]
    fn replaces_all_configs_and_refuses_with_kafka_codes() {
        let broker = FakeBroker::new();
        let configs = [("retention.ms".to_string(), "42".to_string())].into();
        broker.topics().create("t", 1, configs).unwrap();
        let req = AlterConfigsRequest::default().with_resources(vec![
            resource(2, "t", &[("segment.bytes", "8192")]),
            resource(2, "t", &[("segment.bytes", "1")]),
            resource(2, "absent", &[]),
            resource(4, "0", &[("log.retention.hours", "2")]),
            resource(4, "0", &[("num.partitions", "2")]),
            resource(4, "9", &[]),
        ]);
        let r = futures::executor::block_on(handle(&broker, &req));
        let codes: Vec<i16> = r.responses.iter().map(|r| r.error_code).collect();
        let e = |c: ErrorCode| c.code();
        assert_eq!(
            codes,
            [
                0,
                e(ErrorCode::InvalidConfig),
                3,
                0,
                e(ErrorCode::InvalidRequest),
                e(ErrorCode::InvalidRequest)
            ]
        );
        let configs = &broker.topics().get("t").unwrap().configs;
        assert_eq!(configs.len(), 1, "retention.ms reset: {configs:?}");
        assert_eq!(configs["segment.bytes"], "8192");
        let message = r.responses[1].error_message.as_ref().unwrap().to_string();
        assert!(message.contains("segment.bytes"), "{message}");
        let dynamic = broker.topics().broker_configs();
        assert_eq!(dynamic.of_broker(0)["log.retention.hours"], "2");
    }
}
