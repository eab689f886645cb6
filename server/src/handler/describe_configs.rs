//! DescribeConfigs (32): a topic's or the broker's configs, each with its value, source, type,
//! synonyms (v1+, when asked) and documentation (v3+, when asked).
//!
//! | resource                 | configs                                                     |
//! |--------------------------|-------------------------------------------------------------|
//! | topic (2)                | every topic config, resolved through the layers (`config::topic`) |
//! | broker (4) `"0"`         | the static configs (read-only) and every dynamic one         |
//! | broker (4) `""`          | the cluster-wide dynamic defaults that are set               |
//! | anything else            | INVALID_REQUEST                                              |
//!
//! `configuration_keys` null lists every config, a list only those (an empty list none).

use rill_protocol::kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use rill_protocol::kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use rill_protocol::kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use rill_protocol::ErrorCode;

use super::{message_bytes, str_bytes, Broker};
use crate::config::broker::{self, BrokerRow};
use crate::config::topic::{describe, BrokerLayers, ConfigType, SynonymValue};

/// Kafka's resource types.
pub const RESOURCE_TOPIC: i8 = 2;
/// The broker resource type.
pub const RESOURCE_BROKER: i8 = 4;

/// What the request asks to include.
#[derive(Copy, Clone)]
struct Include {
    synonyms: bool,
    documentation: bool,
}

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::DescribeConfigsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request))
}

/// Answer DescribeConfigs.
pub fn handle<B: Broker>(
    broker: &B,
    version: i16,
    request: &DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let include = Include {
        synonyms: version >= 1 && request.include_synonyms,
        documentation: version >= 3 && request.include_documentation,
    };
    let results = request
        .resources
        .iter()
        .map(|resource| describe_resource(broker, resource, include))
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn describe_resource<B: Broker>(
    broker: &B,
    resource: &DescribeConfigsResource,
    include: Include,
) -> DescribeConfigsResult {
    let name = resource.resource_name.as_str();
    let base = DescribeConfigsResult::default()
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone());
    let fail = |code: ErrorCode, message: String| {
        base.clone()
            .with_error_code(code.code())
            .with_error_message(Some(message_bytes(&message)))
    };
    let rows = match resource.resource_type {
        RESOURCE_TOPIC => match broker.topics().get(name) {
            Some(meta) => {
                let layers = BrokerLayers::of(broker.config(), broker.topics());
                describe(&layers.with_topic(&meta.configs))
                    .into_iter()
                    .map(|row| BrokerRow {
                        name: row.def.name,
                        value: Some(row.resolved.value),
                        source: row.resolved.source,
                        kind: row.def.kind,
                        read_only: false,
                        doc: row.def.doc,
                        synonyms: row.resolved.synonyms,
                    })
                    .collect()
            }
            None => {
                let message = format!("Topic {name} does not exist");
                return fail(ErrorCode::UnknownTopicOrPartition, message);
            }
        },
        RESOURCE_BROKER if broker::is_broker_resource(broker.config(), name) => {
            let dynamic = broker.topics().broker_configs();
            broker::describe(broker.config(), &dynamic, name)
        }
        RESOURCE_BROKER => {
            let message = format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                broker.config().node_id
            );
            return fail(ErrorCode::InvalidRequest, message);
        }
        other => {
            let message = format!("resource type {other} is not supported");
            return fail(ErrorCode::InvalidRequest, message);
        }
    };
    let wanted = resource.configuration_keys.as_ref();
    let configs = rows
        .into_iter()
        .filter(|r| wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == r.name)))
        .map(|r| result_row(r, include))
        .collect();
    base.with_configs(configs)
}

fn result_row(row: BrokerRow, include: Include) -> DescribeConfigsResourceResult {
    let sensitive = row.kind == ConfigType::Password;
    let synonyms = if include.synonyms {
        let hide = |s: DescribeConfigsSynonym| if sensitive { s.with_value(None) } else { s };
        row.synonyms.iter().map(synonym).map(hide).collect()
    } else {
        Vec::new()
    };
    let documentation = include.documentation.then(|| str_bytes(row.doc));
    // A secret is listed, never shown (Kafka sends a null value, is_sensitive true).
    let value = row.value.as_deref().filter(|_| !sensitive);
    DescribeConfigsResourceResult::default()
        .with_name(str_bytes(row.name))
        .with_value(value.map(str_bytes))
        .with_read_only(row.read_only)
        .with_config_source(row.source as i8)
        .with_is_sensitive(sensitive)
        .with_synonyms(synonyms)
        .with_config_type(row.kind as i8)
        .with_documentation(documentation)
}

fn synonym(s: &SynonymValue) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(str_bytes(&s.name))
        .with_value(Some(str_bytes(&s.value)))
        .with_source(s.source as i8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;

    fn resource(kind: i8, name: &str, keys: Option<&[&str]>) -> DescribeConfigsResource {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(str_bytes(name))
            .with_configuration_keys(keys.map(|k| k.iter().map(|k| str_bytes(k)).collect()))
    }

    #[test]
    fn topic_configs_show_sources_types_synonyms_and_docs() {
        let broker = FakeBroker::new();
        let configs = [("retention.ms".to_string(), "42".to_string())].into();
        broker.topics().create("t", 1, configs).unwrap();
        let req = DescribeConfigsRequest::default()
            .with_include_synonyms(true)
            .with_include_documentation(true)
            .with_resources(vec![
                resource(RESOURCE_TOPIC, "t", None),
                resource(RESOURCE_TOPIC, "nope", None),
                resource(RESOURCE_BROKER, "0", Some(&["advertised.listeners"])),
                resource(RESOURCE_BROKER, "7", None),
                resource(RESOURCE_TOPIC, "t", Some(&[])),
            ]);
        let r = handle(&broker, 4, &req);
        let t = &r.results[0];
        let row = |n: &str| t.configs.iter().find(|c| c.name.as_str() == n).unwrap();
        assert_eq!(row("retention.ms").value.as_ref().unwrap().as_str(), "42");
        assert_eq!(row("retention.ms").config_source, 1);
        assert_eq!(row("retention.ms").config_type, ConfigType::Long as i8);
        let names: Vec<&str> = row("retention.ms")
            .synonyms
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, ["retention.ms", "log.retention.ms"]);
        assert!(row("retention.ms").documentation.is_some());
        assert_eq!(row("cleanup.policy").config_type, ConfigType::List as i8);
        assert_eq!(
            row("min.cleanable.dirty.ratio").config_type,
            ConfigType::Double as i8
        );
        assert_eq!(row("segment.bytes").config_source, 5);
        assert_eq!(r.results[1].error_code, 3);
        assert_eq!(r.results[2].configs.len(), 1, "only the key asked for");
        assert_eq!(r.results[3].error_code, ErrorCode::InvalidRequest.code());
        assert!(
            r.results[4].configs.is_empty(),
            "an empty key list names none"
        );
    }

    use crate::config::topic::ConfigType;
}
