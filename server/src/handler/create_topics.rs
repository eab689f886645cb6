//! CreateTopics (19): durable topics with validated configs; `validate_only` checks and stops.
//! A topic that does not fit (the broker's partition limit, its disk) is refused whole
//! (`capacity`), before anything is written.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;

use rill_protocol::kafka_protocol::messages::create_topics_request::CreatableTopic;
use rill_protocol::kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use rill_protocol::kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use rill_protocol::ErrorCode;

use super::mutation_quota::{self, Gate};
use super::{message_bytes, str_bytes, Broker};
use crate::capacity::Capacity;
use crate::config::topic::{describe, BrokerLayers, TopicSettings};
use crate::topics::{validate_topic_name, Growth, TopicError, TopicMeta};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    mut request: rill_protocol::kafka_protocol::messages::CreateTopicsRequest,
) -> super::Answer {
    // KIP-599: strict from v6, whose clients know THROTTLING_QUOTA_EXCEEDED.
    let Some(mut gate) = Gate::open(broker, &cx, cx.version >= 6, request.validate_only) else {
        return super::Answer::body(handle(broker, cx.version, &request).await);
    };
    let mut refused = Vec::new();
    request.topics.retain(|topic| {
        let name = topic.name.0.as_str();
        if gate.admit(name, mutations(broker, topic)) {
            return true;
        }
        let (code, message) = mutation_quota::throttled();
        refused.push(
            CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_error_code(code)
                .with_error_message(Some(message_bytes(message))),
        );
        false
    });
    let mut response = handle(broker, cx.version, &request).await;
    for result in response.topics.iter().filter(|r| r.error_code != 0) {
        gate.failed(result.name.0.as_str());
    }
    response.topics.extend(refused);
    response.throttle_time_ms = response.throttle_time_ms.max(gate.finish());
    super::Answer::body(response)
}

/// The partitions `topic` would create (its mutations); none for one that exists already.
fn mutations<B: Broker>(broker: &B, topic: &CreatableTopic) -> u32 {
    if mutation_quota::partitions_of(broker, topic.name.0.as_str()).is_some() {
        return 0;
    }
    let partitions = match (topic.num_partitions, topic.assignments.len()) {
        (-1, 0) => broker.config().default_partitions,
        (-1, n) => i32::try_from(n).unwrap_or(i32::MAX),
        (n, _) => n,
    };
    u32::try_from(partitions).unwrap_or(0)
}

/// Answer CreateTopics (in a cluster: decided by the controller, [`crate::cluster::admin`]).
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    request: &CreateTopicsRequest,
) -> CreateTopicsResponse {
    if let Some(cluster) = broker.cluster() {
        return crate::cluster::admin::create_topics(broker, cluster, version, request).await;
    }
    // Partitions admitted by earlier topics of this request: they have no files yet.
    let pending = Cell::new(0);
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        topics.push(create_one(broker, version, topic, request.validate_only, &pending).await);
    }
    CreateTopicsResponse::default().with_topics(topics)
}

async fn create_one<B: Broker>(
    broker: &B,
    version: i16,
    topic: &CreatableTopic,
    validate_only: bool,
    pending: &Cell<i64>,
) -> CreatableTopicResult {
    let name = topic.name.0.as_str();
    let result = CreatableTopicResult::default()
        .with_name(topic.name.clone())
        // Kafka sends null on success; the codec's default is "".
        .with_error_message(None);
    let fail = |code: ErrorCode, message: String| {
        tracing::debug!(topic = name, message, "CreateTopics refused");
        result
            .clone()
            .with_error_code(code.code())
            .with_error_message(Some(message_bytes(&message)))
    };
    if topic.replication_factor != -1 && topic.replication_factor != 1 {
        let message = format!(
            "replication factor {} > 1 on a single node",
            topic.replication_factor
        );
        return fail(ErrorCode::InvalidReplicationFactor, message);
    }
    let (partitions, configs) = match requested(broker, topic) {
        Ok(requested) => requested,
        Err((code, message)) => return fail(code, message),
    };
    let created =
        create_or_validate(broker, name, partitions, &configs, validate_only, pending).await;
    match created {
        Ok(meta) => {
            if meta.is_some() {
                tracing::info!(topic = name, partitions, "created topic");
            }
            let id = meta.map_or(uuid::Uuid::nil(), |m| m.id);
            created_result(broker, version, result, (id, partitions, 1), &configs)
        }
        Err(e) => {
            let code = e.kafka_error_code();
            fail(code, e.to_string())
        }
    }
}

/// A requested topic's partition count (-1: `num.partitions`) and configs, checked as every
/// broker checks them (name, config values); the replication factor is the caller's to check.
pub(crate) fn requested<B: Broker>(
    broker: &B,
    topic: &CreatableTopic,
) -> Result<(i32, BTreeMap<String, String>), (ErrorCode, String)> {
    let partitions = match (topic.num_partitions, topic.assignments.len()) {
        (-1, 0) => broker.config().default_partitions,
        (-1, n) => n as i32,
        (n, _) => n,
    };
    let configs: BTreeMap<String, String> = topic
        .configs
        .iter()
        .filter_map(|c| {
            Some((
                c.name.as_str().to_string(),
                c.value.as_ref()?.as_str().to_string(),
            ))
        })
        .collect();
    let layers = BrokerLayers::of(broker.config(), broker.topics());
    TopicSettings::from_layers(&layers.with_topic(&configs))
        .map_err(|e| (ErrorCode::InvalidConfig, e.to_string()))?;
    validate_topic_name(topic.name.0.as_str())
        .map_err(|e| (ErrorCode::InvalidTopicException, e.to_string()))?;
    refuse_internal(broker, topic.name.0.as_str())?;
    Ok((partitions, configs))
}

/// `__consumer_offsets` and `__transaction_state` are the coordinators' to create, with their
/// own settings (a cluster's on first use; a single node's exist from its start):
/// TOPIC_ALREADY_EXISTS once one exists, else INVALID_REQUEST, Kafka's answer for an internal
/// topic clients may not create ("Creation of internal topic ... is prohibited").
fn refuse_internal<B: Broker>(broker: &B, name: &str) -> Result<(), (ErrorCode, String)> {
    if name == crate::internal_topics::METADATA_TOPIC {
        let message = format!("Creation of internal topic {name} is prohibited.");
        return Err((ErrorCode::InvalidRequest, message));
    }
    if !crate::internal_topics::is_internal(name) {
        return Ok(());
    }
    let internal = broker.internal_topic(name);
    if internal.is_some() || broker.topics().get(name).is_some() {
        return Err((
            ErrorCode::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        ));
    }
    let message = format!(
        "Creation of internal topic {name} is prohibited: the coordinators create it with \
         its own settings"
    );
    Err((ErrorCode::InvalidRequest, message))
}

/// Creates the topic if it fits on this broker (or, `validate_only`, says whether it would).
async fn create_or_validate<B: Broker>(
    broker: &B,
    name: &str,
    partitions: i32,
    configs: &BTreeMap<String, String>,
    validate_only: bool,
    pending: &Cell<i64>,
) -> Result<Option<Arc<TopicMeta>>, TopicError> {
    let capacity = Capacity::of(broker.config());
    let registry = broker.topics();
    if !validate_only {
        // The commit writes and fsyncs topics.json (and admission stats the file system):
        // off the shard's thread.
        let (registry, name, configs) = (registry.clone(), name.to_string(), configs.clone());
        let admitted = pending.get();
        let meta = broker
            .blocking(move || {
                registry.create_within(&name, partitions, configs, |growth| {
                    capacity.admit(growth, admitted)
                })
            })
            .await?;
        pending.set(pending.get() + i64::from(partitions));
        return Ok(Some(meta));
    }
    if registry.get(name).is_some() {
        return Err(TopicError::AlreadyExists(name.to_string()));
    }
    if !(1..=crate::topics::PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
        return Err(TopicError::InvalidPartitions(partitions.to_string()));
    }
    let growth = Growth {
        partitions_before: registry.partition_count() + pending.get(),
        adding: i64::from(partitions),
    };
    let admitted = pending.get();
    broker
        .blocking(move || capacity.admit(growth, admitted))
        .await?;
    pending.set(pending.get() + i64::from(partitions));
    Ok(None)
}

/// A created (or validated) topic's result: its id from v7, its partitions, replication factor
/// and effective configs from v5.
pub(crate) fn created_result<B: Broker>(
    broker: &B,
    version: i16,
    result: CreatableTopicResult,
    (id, partitions, replication_factor): (uuid::Uuid, i32, i16),
    configs: &BTreeMap<String, String>,
) -> CreatableTopicResult {
    let result = if version >= 7 {
        result.with_topic_id(id)
    } else {
        result
    };
    if version < 5 {
        return result;
    }
    let layers = BrokerLayers::of(broker.config(), broker.topics());
    let rows = describe(&layers.with_topic(configs))
        .into_iter()
        .map(|row| {
            CreatableTopicConfigs::default()
                .with_name(str_bytes(row.def.name))
                .with_value(Some(str_bytes(&row.resolved.value)))
                .with_config_source(row.resolved.source as i8)
        })
        .collect();
    result
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
        .with_configs(Some(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use crate::handler::topic_name;
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::create_topics_request::CreatableTopicConfig;

    fn topic(name: &str, partitions: i32, configs: &[(&str, &str)]) -> CreatableTopic {
        CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(str_bytes(k))
                            .with_value(Some(str_bytes(v)))
                    })
                    .collect(),
            )
    }

    #[test]
    fn creates_validates_and_refuses() {
        let broker = FakeBroker::new();
        let req = CreateTopicsRequest::default().with_topics(vec![
            topic("a", 3, &[("retention.ms", "1000")]),
            topic("a", 3, &[]),
            topic("b", 0, &[]),
            topic("c", 1, &[("cleanup.policy", "shred")]),
            topic("bad/name", 1, &[]),
            topic("d", -1, &[]),
        ]);
        let r = block_on(handle(&broker, 7, &req));
        let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, vec![0, 36, 37, 40, 17, 0]);
        assert_eq!(broker.topics().get("a").unwrap().partitions, 3);
        assert_eq!(broker.topics().get("d").unwrap().partitions, 1);
        assert_eq!(r.topics[0].topic_id, broker.topics().get("a").unwrap().id);
    }

    #[test]
    fn topics_past_the_partition_limit_are_refused_whole() {
        let broker = FakeBroker::with_config(|c| c.broker_partitions_max = Some(10));
        broker
            .topics()
            .create("old", 4, Default::default())
            .unwrap();
        let req = CreateTopicsRequest::default().with_topics(vec![
            topic("a", 4, &[]),
            topic("b", 3, &[]),
            topic("c", 2, &[]),
        ]);
        let r = block_on(handle(&broker, 7, &req));
        let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, vec![0, 37, 0]);
        let message = r.topics[1].error_message.as_ref().unwrap().as_str();
        assert!(
            message.contains("rill.broker.partitions.max is 10"),
            "{message}"
        );
        assert!(
            broker.topics().get("b").is_none(),
            "nothing of a refused topic"
        );
        assert_eq!(broker.topics().partition_count(), 10);
        // validate_only counts the request's earlier topics too, and creates nothing.
        let broker = FakeBroker::with_config(|c| c.broker_partitions_max = Some(5));
        let req = CreateTopicsRequest::default()
            .with_validate_only(true)
            .with_topics(vec![topic("x", 3, &[]), topic("y", 3, &[])]);
        let codes: Vec<i16> = block_on(handle(&broker, 7, &req))
            .topics
            .iter()
            .map(|t| t.error_code)
            .collect();
        assert_eq!(codes, vec![0, 37]);
        assert_eq!(broker.topics().partition_count(), 0);
    }

    #[test]
    fn validate_only_creates_nothing() {
        let broker = FakeBroker::new();
        let req = CreateTopicsRequest::default()
            .with_validate_only(true)
            .with_topics(vec![topic("v", 2, &[])]);
        assert_eq!(block_on(handle(&broker, 7, &req)).topics[0].error_code, 0);
        assert!(broker.topics().get("v").is_none());
    }

    #[test]
    fn the_internal_topics_are_not_a_clients_to_create() {
        let broker = FakeBroker::new();
        let req = CreateTopicsRequest::default().with_topics(vec![
            topic("__consumer_offsets", 3, &[]),
            topic("__transaction_state", -1, &[]),
            topic("__consumer_offsets_not", 1, &[]),
            topic("__cluster_metadata", 1, &[]),
        ]);
        let r = block_on(handle(&broker, 7, &req));
        let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, vec![42, 42, 0, 42]);
        assert!(broker.topics().get("__cluster_metadata").is_none());
        let message = r.topics[0].error_message.as_ref().unwrap().as_str();
        assert!(message.starts_with("Creation of internal topic __consumer_offsets is prohibited"));
        assert!(broker.topics().get("__consumer_offsets").is_none());
        // One an older version created as an ordinary topic exists.
        broker
            .topics()
            .create("__consumer_offsets", 1, Default::default())
            .unwrap();
        let req =
            CreateTopicsRequest::default().with_topics(vec![topic("__consumer_offsets", 1, &[])]);
        assert_eq!(block_on(handle(&broker, 7, &req)).topics[0].error_code, 36);
    }
}
