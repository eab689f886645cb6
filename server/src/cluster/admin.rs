//! CreateTopics, DeleteTopics and CreatePartitions in a cluster, through any broker: checked here
//! as a single node checks them (names, configs), decided by the active controller (placement,
//! existence, races), and answered once this broker has applied the change, so the client that
//! created a topic finds it on this broker at once and on every other within a heartbeat of
//! the metadata log (voters apply as the log commits; observers fetch every 200 ms).
//!
//! The partition data follows on each broker by itself: a leader opens its partitions on first
//! use, and [`super::deletions`] removes those of deleted topics.

use std::collections::BTreeMap;

use rill_metadata::request::{
    ControllerRequest, ControllerResponse, NewTopic, TopicRef, TopicResult,
};
use rill_protocol::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use rill_protocol::kafka_protocol::messages::create_topics_request::CreatableTopic;
use rill_protocol::kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use rill_protocol::kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use rill_protocol::kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse,
};
use rill_types::ErrorCode;
use uuid::Uuid;

use super::view::ClusterView;
use crate::broker::{message_bytes, topic_name, Broker, Refused};
use crate::handler::create_topics::{created_result, requested};

/// The controller's per-topic results by name, or one error for all (no controller, timeout).
async fn ask(
    cluster: &ClusterView,
    request: ControllerRequest,
    sleep: impl AsyncSleep,
) -> Result<BTreeMap<String, TopicResult>, (ErrorCode, String)> {
    match cluster.request(request, |d| sleep.sleep(d)).await {
        ControllerResponse::Topics { results, index } => {
            if !cluster.wait_applied(index, |d| sleep.sleep(d)).await {
                tracing::warn!(
                    index = index.0,
                    "this broker has not applied its change yet"
                );
            }
            Ok(results.into_iter().map(|r| (r.name.clone(), r)).collect())
        }
        ControllerResponse::Error {
            error_code,
            message,
        } => Err((error_code, message)),
        other => Err((
            ErrorCode::UnknownServerError,
            format!("unexpected controller answer {other:?}"),
        )),
    }
}

/// The runtime's sleep, borrowed from the broker (glommio's timer on a shard).
pub trait AsyncSleep {
    /// Sleep for `duration`.
    fn sleep(&self, duration: std::time::Duration) -> impl std::future::Future<Output = ()>;
}

impl<B: Broker> AsyncSleep for &B {
    fn sleep(&self, duration: std::time::Duration) -> impl std::future::Future<Output = ()> {
        Broker::sleep(*self, duration)
    }
}

/// A requested topic as checked here: (partitions, replication factor, configs).
type Checked = (i32, i16, BTreeMap<String, String>);

/// CreateTopics in a cluster.
pub async fn create_topics<B: Broker>(
    broker: &B,
    cluster: &ClusterView,
    version: i16,
    request: &CreateTopicsRequest,
) -> CreateTopicsResponse {
    let checked: Vec<Result<(Checked, NewTopic), Refused>> = request
        .topics
        .iter()
        .map(|topic| check_topic(broker, cluster, topic))
        .collect();
    let new: Vec<NewTopic> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok().map(|(_, new)| new.clone()))
        .collect();
    let decided = if new.is_empty() {
        Ok(BTreeMap::new())
    } else {
        let request = ControllerRequest::CreateTopics {
            topics: new,
            validate_only: request.validate_only,
        };
        ask(cluster, request, broker).await
    };
    let topics = request
        .topics
        .iter()
        .zip(checked)
        .map(|(topic, checked)| {
            let result = CreatableTopicResult::default()
                .with_name(topic.name.clone())
                // Kafka sends null on success; the codec's default is "".
                .with_error_message(None);
            let outcome = checked.and_then(|((partitions, factor, configs), _)| {
                let decided = decided.as_ref().map_err(Clone::clone)?;
                let r = decided.get(topic.name.0.as_str()).ok_or_else(missing)?;
                if r.error_code != ErrorCode::None {
                    return Err((r.error(), r.message.clone().unwrap_or_default()));
                }
                let placed = (r.topic_id, partitions, factor);
                Ok(created_result(
                    broker,
                    version,
                    result.clone(),
                    placed,
                    &configs,
                ))
            });
            outcome.unwrap_or_else(|(code, message)| {
                result
                    .with_error_code(code.code())
                    .with_error_message(Some(message_bytes(&message)))
            })
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

/// Check one requested topic here (as a single node does) and phrase it for the controller.
fn check_topic<B: Broker>(
    broker: &B,
    cluster: &ClusterView,
    topic: &CreatableTopic,
) -> Result<(Checked, NewTopic), Refused> {
    let (partitions, configs) = requested(broker, topic)?;
    let factor = match topic.replication_factor {
        -1 => cluster.config().default_replication_factor,
        f if f >= 1 => f as u16,
        f => {
            let message = format!("replication factor {f}");
            return Err((ErrorCode::InvalidReplicationFactor, message));
        }
    };
    if !topic.assignments.is_empty() {
        let message = "manual replica assignments are not supported; leave them out";
        return Err((ErrorCode::InvalidReplicaAssignment, message.to_string()));
    }
    let new = NewTopic {
        name: topic.name.0.to_string(),
        partitions: partitions.max(0) as u32,
        replication_factor: Some(factor),
        configs: configs.clone(),
        internal: false,
    };
    Ok(((partitions, factor as i16, configs), new))
}

fn missing() -> (ErrorCode, String) {
    (
        ErrorCode::UnknownServerError,
        "the controller did not answer for this topic".to_string(),
    )
}

/// A topic's config changes (`None`: remove the override) in a cluster, already checked by
/// the caller; decided by the controller and applied here before the answer.
pub async fn alter_topic_configs<B: Broker>(
    broker: &B,
    cluster: &ClusterView,
    topic: &str,
    changes: BTreeMap<String, Option<String>>,
) -> Result<(), Refused> {
    let request = ControllerRequest::AlterTopicConfigs {
        topic: topic.to_string(),
        changes,
    };
    let decided = ask(cluster, request, broker).await?;
    let r = decided.get(topic).ok_or_else(missing)?;
    if r.error_code != ErrorCode::None {
        return Err((r.error(), r.message.clone().unwrap_or_default()));
    }
    Ok(())
}

/// DeleteTopics in a cluster (names in v0-5, names or ids in v6+).
pub async fn delete_topics<B: Broker>(
    broker: &B,
    cluster: &ClusterView,
    version: i16,
    request: &DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let mut refs: Vec<TopicRef> = request
        .topic_names
        .iter()
        .map(|n| TopicRef::Name(n.0.to_string()))
        .collect();
    refs.extend(request.topics.iter().map(|t| match &t.name {
        Some(name) => TopicRef::Name(name.0.to_string()),
        None => TopicRef::Id(t.topic_id),
    }));
    let image = cluster.image();
    let keys: Vec<(Option<String>, Uuid)> = refs
        .iter()
        .map(|r| match r {
            TopicRef::Name(name) => (Some(name.clone()), Uuid::nil()),
            TopicRef::Id(id) => (image.topic_by_id(*id).map(|t| t.name.clone()), *id),
        })
        .collect();
    let request = ControllerRequest::DeleteTopics { topics: refs };
    let decided = ask(cluster, request, broker).await;
    let results = keys
        .into_iter()
        .map(|(name, id)| {
            let mut result = DeletableTopicResult::default()
                .with_name(name.as_deref().map(topic_name))
                .with_topic_id(id);
            let key = name.unwrap_or_else(|| id.to_string());
            let outcome = decided
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|d| d.get(&key).cloned().ok_or_else(missing));
            match outcome {
                Ok(r) if r.error_code == ErrorCode::None => {
                    tracing::info!(topic = %key, "deleted topic");
                    result.topic_id = r.topic_id;
                }
                Ok(r) => {
                    result.error_code = r.error_code.code();
                    result.error_message = r.message.as_deref().map(message_bytes);
                }
                Err((code, message)) => {
                    result.error_code = code.code();
                    result.error_message = Some(message_bytes(&message));
                }
            }
            if version < 6 {
                result.topic_id = Uuid::nil();
            }
            if version < 5 {
                result.error_message = None;
            }
            result
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(results)
}

/// CreatePartitions in a cluster.
pub async fn create_partitions<B: Broker>(
    broker: &B,
    cluster: &ClusterView,
    request: &CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let topics: Vec<(String, u32)> = request
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.count.max(0) as u32))
        .collect();
    let manual = request.topics.iter().any(|t| t.assignments.is_some());
    let decided = if manual {
        Err((
            ErrorCode::InvalidReplicaAssignment,
            "manual replica assignments are not supported; leave them out".to_string(),
        ))
    } else {
        let request = ControllerRequest::CreatePartitions {
            topics,
            validate_only: request.validate_only,
        };
        ask(cluster, request, broker).await
    };
    let results = request
        .topics
        .iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            let outcome = decided
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|d| d.get(t.name.0.as_str()).cloned().ok_or_else(missing));
            match outcome {
                Ok(r) if r.error_code == ErrorCode::None => result,
                Ok(r) => result
                    .with_error_code(r.error_code.code())
                    .with_error_message(r.message.as_deref().map(message_bytes)),
                Err((code, message)) => result
                    .with_error_code(code.code())
                    .with_error_message(Some(message_bytes(&message))),
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}
