//! Metadata (3): brokers (this node), topics with their partitions and ids; auto-creates
//! requested topics when allowed.
//!
//! Every partition is led by this node at [`LEADER_EPOCH`]; topic ids are the registry's stable
//! UUIDs (so Fetch v13+ clients can name topics by id).

use std::sync::Arc;

use rill_protocol::kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use rill_protocol::kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::ErrorCode;

use super::{str_bytes, topic_name, topic_or_auto_create, Broker, LEADER_EPOCH};
use crate::topics::TopicMeta;

/// Answer Metadata.
pub fn handle<B: Broker>(broker: &B, version: i16, request: &MetadataRequest) -> MetadataResponse {
    let config = broker.config();
    let node = BrokerId(config.node_id);
    let broker_entry = MetadataResponseBroker::default()
        .with_node_id(node)
        .with_host(str_bytes(&config.advertise_host))
        .with_port(i32::from(config.advertise_port));
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let all = match &request.topics {
        None => true,
        Some(list) => list.is_empty() && version == 0,
    };
    let topics = if all {
        broker
            .topics()
            .list()
            .into_iter()
            .map(|(name, meta)| topic_entry(version, &name, Ok(meta), node))
            .collect()
    } else {
        // v4+ carries the flag; older clients always allowed auto-creation.
        let allow = version < 4 || request.allow_auto_topic_creation;
        let requested = request.topics.as_deref().unwrap_or_default();
        requested
            .iter()
            .map(|t| match &t.name {
                Some(name) => {
                    let meta = topic_or_auto_create(broker, name.as_str(), allow);
                    topic_entry(version, name.as_str(), meta, node)
                }
                None => match broker.topics().by_id(t.topic_id) {
                    Some((name, meta)) => topic_entry(version, &name, Ok(meta), node),
                    None => MetadataResponseTopic::default()
                        .with_topic_id(t.topic_id)
                        .with_error_code(ErrorCode::UnknownTopicId.code()),
                },
            })
            .collect()
    };
    // Fields a version lacks must stay at their defaults or the codec refuses to encode.
    let mut response = MetadataResponse::default()
        .with_brokers(vec![broker_entry])
        .with_topics(topics);
    if version >= 1 {
        response.controller_id = node;
    }
    if version >= 2 {
        response.cluster_id = Some(StrBytes::from_string(broker.topics().cluster_id()));
    }
    response
}

fn topic_entry(
    version: i16,
    name: &str,
    meta: Result<Arc<TopicMeta>, ErrorCode>,
    node: BrokerId,
) -> MetadataResponseTopic {
    let entry = MetadataResponseTopic::default().with_name(Some(topic_name(name)));
    let meta = match meta {
        Ok(meta) => meta,
        Err(code) => return entry.with_error_code(code.code()),
    };
    let partitions = (0..meta.partitions)
        .map(|index| {
            MetadataResponsePartition::default()
                .with_partition_index(index)
                .with_leader_id(node)
                .with_leader_epoch(if version >= 7 { LEADER_EPOCH.0 } else { -1 })
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect();
    let entry = entry.with_partitions(partitions);
    if version >= 10 {
        entry.with_topic_id(meta.id)
    } else {
        entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use rill_protocol::kafka_protocol::messages::metadata_request::MetadataRequestTopic;

    fn request(names: &[&str], auto: bool) -> MetadataRequest {
        let topics = names
            .iter()
            .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
            .collect();
        MetadataRequest::default()
            .with_topics(Some(topics))
            .with_allow_auto_topic_creation(auto)
    }

    #[test]
    fn auto_creates_with_default_partitions_and_stable_id() {
        let broker = FakeBroker::new();
        let r = handle(&broker, 12, &request(&["new-topic"], true));
        let t = &r.topics[0];
        assert_eq!(t.error_code, 0);
        assert_eq!(t.partitions.len(), 1);
        assert!(!t.topic_id.is_nil());
        let again = handle(&broker, 12, &request(&["new-topic"], true));
        assert_eq!(again.topics[0].topic_id, t.topic_id);
        assert_eq!(r.brokers[0].port, 9092);
    }

    #[test]
    fn unknown_without_auto_create_and_invalid_names() {
        let broker = FakeBroker::new();
        let r = handle(&broker, 9, &request(&["absent", "bad name!"], false));
        assert_eq!(r.topics[0].error_code, 3);
        assert_eq!(r.topics[1].error_code, 17);
        let r = handle(&broker, 9, &request(&["bad name!"], true));
        assert_eq!(r.topics[0].error_code, 17);
        assert!(broker.topics().list().is_empty());
    }

    #[test]
    fn null_topics_lists_all_and_empty_lists_none() {
        let broker = FakeBroker::new();
        broker.topics().create("a", 2, Default::default()).unwrap();
        let all = handle(&broker, 9, &MetadataRequest::default().with_topics(None));
        assert_eq!(all.topics.len(), 1);
        assert_eq!(all.topics[0].partitions.len(), 2);
        let none = handle(
            &broker,
            9,
            &MetadataRequest::default().with_topics(Some(vec![])),
        );
        assert!(none.topics.is_empty());
        let v0_all = handle(
            &broker,
            0,
            &MetadataRequest::default().with_topics(Some(vec![])),
        );
        assert_eq!(v0_all.topics.len(), 1);
    }
}
