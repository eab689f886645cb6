//! IncrementalAlterConfigs (44): SET, DELETE, APPEND, SUBTRACT on single configs of a topic or a
//! broker resource, persisted and applied live (`config::changes`).

use rill_protocol::kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use rill_protocol::kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use rill_protocol::ErrorCode;

use super::{message_bytes, Broker};
use crate::config::changes::{alter, Change, Op};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::IncrementalAlterConfigsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer IncrementalAlterConfigs.
pub async fn handle<B: Broker>(
    broker: &B,
    request: &IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let base = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        let ops: Option<Vec<(String, Op)>> = resource
            .configs
            .iter()
            .map(|c| {
                let op = Op::from_wire(c.config_operation, c.value.as_ref().map(|v| v.as_str()))?;
                Some((c.name.to_string(), op))
            })
            .collect();
        let (kind, name) = (resource.resource_type, resource.resource_name.as_str());
        let result = match ops {
            Some(ops) => {
                let change = Change::Incremental(ops);
                alter(broker, kind, name, &change, request.validate_only).await
            }
            None => Err((
                ErrorCode::InvalidRequest,
                "unknown config operation".to_string(),
            )),
        };
        responses.push(match result {
            Ok(()) => base.with_error_message(None),
            Err((code, message)) => base
                .with_error_code(code.code())
                .with_error_message(Some(message_bytes(&message))),
        });
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use crate::handler::str_bytes;
    use rill_protocol::kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };

    fn op(name: &str, code: i8, value: Option<&str>) -> AlterableConfig {
        AlterableConfig::default()
            .with_name(str_bytes(name))
            .with_config_operation(code)
            .with_value(value.map(str_bytes))
    }

    fn resource(kind: i8, name: &str, configs: Vec<AlterableConfig>) -> AlterConfigsResource {
        AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(str_bytes(name))
            .with_configs(configs)
    }

    #[test]
    fn set_delete_append_subtract_and_validate_only() {
        let broker = FakeBroker::new();
        let configs = [("retention.ms".to_string(), "42".to_string())].into();
        broker.topics().create("t", 1, configs).unwrap();
        let run = |resources, validate_only| {
            let req = IncrementalAlterConfigsRequest::default()
                .with_resources(resources)
                .with_validate_only(validate_only);
            futures::executor::block_on(handle(&broker, &req)).responses[0].error_code
        };
        let set = vec![
            op("segment.ms", 0, Some("1000")),
            op("retention.ms", 1, None),
        ];
        assert_eq!(run(vec![resource(2, "t", set)], false), 0);
        let append = vec![op("cleanup.policy", 2, Some("compact"))];
        assert_eq!(run(vec![resource(2, "t", append)], false), 0);
        let configs = broker.topics().get("t").unwrap().configs.clone();
        assert_eq!(configs.get("retention.ms"), None);
        assert_eq!(configs["cleanup.policy"], "delete,compact");
        let subtract = vec![op("cleanup.policy", 3, Some("delete"))];
        assert_eq!(run(vec![resource(2, "t", subtract)], false), 0);
        assert_eq!(
            broker.topics().get("t").unwrap().configs["cleanup.policy"],
            "compact"
        );
        let checked_only = vec![op("segment.ms", 0, Some("5"))];
        assert_eq!(run(vec![resource(2, "t", checked_only)], true), 0);
        assert_eq!(
            broker.topics().get("t").unwrap().configs["segment.ms"],
            "1000"
        );
        let on_a_number = vec![op("segment.ms", 2, Some("5"))];
        assert_eq!(
            run(vec![resource(2, "t", on_a_number)], false),
            ErrorCode::InvalidRequest.code()
        );
        let unknown = vec![op("no.such.config", 0, Some("5"))];
        assert_eq!(
            run(vec![resource(2, "t", unknown)], false),
            ErrorCode::InvalidConfig.code()
        );
        let bad_op = vec![op("segment.ms", 7, Some("5"))];
        assert_eq!(
            run(vec![resource(2, "t", bad_op)], false),
            ErrorCode::InvalidRequest.code()
        );
        let broker_set = vec![op("message.max.bytes", 0, Some("2000000"))];
        assert_eq!(run(vec![resource(4, "", broker_set)], false), 0);
        assert_eq!(
            broker.topics().broker_configs().cluster_default()["message.max.bytes"],
            "2000000"
        );
    }
}
