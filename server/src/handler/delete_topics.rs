//! DeleteTopics (20): remove the topic from durable metadata first (so nothing reopens it), then
//! close and delete each partition's directory on its owning shard.

use futures::future::join_all;
use rill_protocol::kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use rill_protocol::kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartitionRef};
use uuid::Uuid;

use super::mutation_quota::{self, Gate};
use super::{message_bytes, topic_name, Broker};
use crate::partition::ops::PartitionOp;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    mut request: rill_protocol::kafka_protocol::messages::DeleteTopicsRequest,
) -> super::Answer {
    // KIP-599: strict from v5, whose clients know THROTTLING_QUOTA_EXCEEDED.
    let Some(mut gate) = Gate::open(broker, &cx, cx.version >= 5, false) else {
        return super::Answer::body(handle(broker, cx.version, &request).await);
    };
    let mut refused = Vec::new();
    let mut ask = |name: Option<String>, id: Uuid| {
        // The partitions deleted; none for an unknown topic (which fails on its own).
        let name = name.or_else(|| mutation_quota::name_of(broker, id));
        let Some(name) = name else { return true };
        let partitions = mutation_quota::partitions_of(broker, &name).unwrap_or(0);
        if gate.admit(&name, u32::try_from(partitions).unwrap_or(0)) {
            return true;
        }
        let (code, message) = mutation_quota::throttled();
        let id = if cx.version >= 6 { id } else { Uuid::nil() };
        refused.push(
            DeletableTopicResult::default()
                .with_name(Some(topic_name(&name)))
                .with_topic_id(id)
                .with_error_code(code)
                .with_error_message((cx.version >= 5).then(|| message_bytes(message))),
        );
        false
    };
    request
        .topic_names
        .retain(|n| ask(Some(n.0.as_str().to_string()), Uuid::nil()));
    request.topics.retain(|t| {
        let name = t.name.as_ref().map(|n| n.0.as_str().to_string());
        ask(name, t.topic_id)
    });
    let mut response = handle(broker, cx.version, &request).await;
    for result in response.responses.iter().filter(|r| r.error_code != 0) {
        if let Some(name) = &result.name {
            gate.failed(name.0.as_str());
        }
    }
    response.responses.extend(refused);
    response.throttle_time_ms = response.throttle_time_ms.max(gate.finish());
    super::Answer::body(response)
}

/// Answer DeleteTopics (names in v0-5, names or ids in v6+).
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    request: &DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    if let Some(cluster) = broker.cluster() {
        return crate::cluster::admin::delete_topics(broker, cluster, version, request).await;
    }
    let mut targets: Vec<(Option<String>, Uuid)> = request
        .topic_names
        .iter()
        .map(|n| (Some(n.0.as_str().to_string()), Uuid::nil()))
        .collect();
    targets.extend(request.topics.iter().map(|t| {
        (
            t.name.as_ref().map(|n| n.0.as_str().to_string()),
            t.topic_id,
        )
    }));
    let results = targets
        .into_iter()
        .map(|(name, id)| delete_one(broker, name, id));
    let mut results = join_all(results).await;
    for r in &mut results {
        if version < 6 {
            r.topic_id = Uuid::nil(); // not in the schema before v6
        }
        if version < 5 {
            r.error_message = None;
        }
    }
    DeleteTopicsResponse::default().with_responses(results)
}

async fn delete_one<B: Broker>(broker: &B, name: Option<String>, id: Uuid) -> DeletableTopicResult {
    let name = match name {
        Some(name) => Some(name),
        None => broker.topics().by_id(id).map(|(name, _)| name),
    };
    let Some(name) = name else {
        return DeletableTopicResult::default()
            .with_topic_id(id)
            .with_error_code(ErrorCode::UnknownTopicId.code());
    };
    let result = DeletableTopicResult::default().with_name(Some(topic_name(&name)));
    // The commit writes and fsyncs topics.json: off the shard's thread.
    let (registry, owned) = (broker.topics().clone(), name.clone());
    let meta = match broker.blocking(move || registry.delete(&owned)).await {
        Ok(meta) => meta,
        Err(e) => {
            return result
                .with_topic_id(id)
                .with_error_code(e.kafka_error_code().code())
                .with_error_message(Some(message_bytes(&e.to_string())))
        }
    };
    let deletes = PartitionIndex::all(meta.partitions)
        .map(|p| broker.partition(TopicPartitionRef::new(&name, p), PartitionOp::Delete));
    let failed = join_all(deletes)
        .await
        .into_iter()
        .find(|r| !r.error_code().is_ok());
    if let Some(reply) = failed {
        tracing::error!(
            topic = name,
            code = %reply.error_code(),
            "partition delete failed"
        );
    }
    tracing::info!(topic = name, "deleted topic");
    result.with_topic_id(meta.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::{batch, FakeBroker};
    use futures::executor::block_on;

    #[test]
    fn deletes_metadata_and_partitions() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 2, Default::default()).unwrap();
        broker.append(TopicPartitionRef::new("t", PartitionIndex(1)), batch(1));
        let req = DeleteTopicsRequest::default()
            .with_topic_names(vec![topic_name("t"), topic_name("nope")]);
        let r = block_on(handle(&broker, 6, &req));
        assert_eq!(r.responses[0].error_code, 0);
        assert_eq!(r.responses[1].error_code, 3);
        assert!(broker.topics().get("t").is_none());
        assert_eq!(
            broker.log_end(TopicPartitionRef::new("t", PartitionIndex(1))),
            0
        );
    }
}
