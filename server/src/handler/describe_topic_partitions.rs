//! DescribeTopicPartitions (75, KIP-966): the topics' partitions as Metadata gives them, plus their
//! eligible leader replicas, paged by a cursor. The Java AdminClient's `describeTopics` (and so
//! `kafka-topics.sh --describe`) asks it first.
//!
//! Answered from Metadata's answer (the same leaders, epochs, replicas, ISR and offline replicas on
//! a single node and in a cluster, internal topics included): topics sorted by name, as Kafka sorts
//! them; none asked means every topic; a cursor starts at its topic and partition; at most
//! `response_partition_limit` partitions (capped by [`PARTITION_LIMIT`]) go out, and `next_cursor`
//! names the first left out. Rill keeps no eligible leader replicas: both ELR lists are empty, as
//! Kafka sends them for a partition whose ISR is whole. Each topic carries the operations the
//! principal may do on it (KIP-430; Kafka always fills them in this API).

use rill_protocol::kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use rill_protocol::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use rill_protocol::kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use rill_protocol::kafka_protocol::messages::{
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, MetadataRequest,
};

use super::Broker;
use crate::security::listeners::Listener;

/// Kafka's `max.request.partition.size.limit` default: the most partitions one response holds.
pub const PARTITION_LIMIT: i32 = 2000;
/// The Metadata version whose answer this one is built from (topic ids, leader epochs).
const METADATA_VERSION: i16 = 12;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: DescribeTopicPartitionsRequest,
) -> super::Answer {
    let mut response = handle_on(broker, &request, &cx.session.listener).await;
    let access = super::authz::access(broker, cx.session);
    for topic in &mut response.topics {
        let name = topic.name.as_ref().map_or("", |n| n.0.as_str());
        topic.topic_authorized_operations = access.topic_operations(name);
    }
    super::Answer::body(response)
}

/// Answer DescribeTopicPartitions as asked on `listener`.
pub async fn handle_on<B: Broker>(
    broker: &B,
    request: &DescribeTopicPartitionsRequest,
    listener: &Listener,
) -> DescribeTopicPartitionsResponse {
    let asked = (!request.topics.is_empty()).then(|| {
        request
            .topics
            .iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(t.name.clone())))
            .collect()
    });
    let metadata = MetadataRequest::default()
        .with_topics(asked)
        .with_allow_auto_topic_creation(false);
    let mut topics = super::metadata::handle_on(broker, METADATA_VERSION, &metadata, listener)
        .await
        .topics;
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    topics.dedup_by(|a, b| a.name == b.name);
    page(topics, request)
}

/// The page of `topics` (sorted by name) that the request's cursor and limit select.
fn page(
    topics: Vec<MetadataResponseTopic>,
    request: &DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let mut budget = request.response_partition_limit.clamp(1, PARTITION_LIMIT);
    let start = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index.max(0)));
    let mut out = Vec::new();
    let mut next_cursor = None;
    for t in topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        let first = match &start {
            Some((cursor, _)) if name.as_str() < cursor.as_str() => continue,
            Some((cursor, partition)) if name == *cursor => *partition,
            _ => 0,
        };
        if budget == 0 {
            next_cursor = Some(cursor_at(&t, first));
            break;
        }
        let mut entry = DescribeTopicPartitionsResponseTopic::default()
            .with_error_code(t.error_code)
            .with_name(t.name.clone())
            .with_topic_id(t.topic_id)
            .with_is_internal(t.is_internal);
        let mut partitions = t.partitions.clone();
        partitions.sort_by_key(|p| p.partition_index);
        for p in partitions
            .into_iter()
            .filter(|p| p.partition_index >= first)
        {
            if budget == 0 {
                next_cursor = Some(cursor_at(&t, p.partition_index));
                break;
            }
            budget -= 1;
            entry.partitions.push(
                DescribeTopicPartitionsResponsePartition::default()
                    .with_error_code(p.error_code)
                    .with_partition_index(p.partition_index)
                    .with_leader_id(p.leader_id)
                    .with_leader_epoch(p.leader_epoch)
                    .with_replica_nodes(p.replica_nodes)
                    .with_isr_nodes(p.isr_nodes)
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new()))
                    .with_offline_replicas(p.offline_replicas),
            );
        }
        out.push(entry);
        if next_cursor.is_some() {
            break;
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(out)
        .with_next_cursor(next_cursor)
}

fn cursor_at(topic: &MetadataResponseTopic, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(topic.name.clone().unwrap_or_default())
        .with_partition_index(partition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use crate::handler::topic_name;
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::describe_topic_partitions_request::{
        Cursor as AskCursor, TopicRequest,
    };
    use rill_protocol::ErrorCode;

    fn ask(
        names: &[&str],
        limit: i32,
        cursor: Option<(&str, i32)>,
    ) -> DescribeTopicPartitionsRequest {
        DescribeTopicPartitionsRequest::default()
            .with_topics(
                names
                    .iter()
                    .map(|n| TopicRequest::default().with_name(topic_name(n)))
                    .collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                AskCursor::default()
                    .with_topic_name(topic_name(t))
                    .with_partition_index(p)
            }))
    }

    fn run(
        broker: &FakeBroker,
        req: &DescribeTopicPartitionsRequest,
    ) -> DescribeTopicPartitionsResponse {
        let listener = broker.config().listeners.all[0].clone();
        block_on(handle_on(broker, req, &listener))
    }

    fn shape(r: &DescribeTopicPartitionsResponse) -> Vec<(String, Vec<i32>)> {
        r.topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                (
                    name,
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn sorted_with_elr_lists_and_unknown_topics_named() {
        let broker = FakeBroker::new();
        broker.topics().create("b", 2, Default::default()).unwrap();
        broker.topics().create("a", 1, Default::default()).unwrap();
        let r = run(&broker, &ask(&["b", "a", "nope"], 2000, None));
        assert_eq!(
            shape(&r),
            [
                ("a".into(), vec![0]),
                ("b".into(), vec![0, 1]),
                ("nope".into(), vec![])
            ]
        );
        assert_eq!(
            r.topics[2].error_code,
            ErrorCode::UnknownTopicOrPartition.code()
        );
        assert!(broker.topics().get("nope").is_none(), "never auto-created");
        let p = &r.topics[1].partitions[1];
        assert_eq!(p.eligible_leader_replicas.as_deref(), Some(&[][..]));
        assert_eq!(p.last_known_elr.as_deref(), Some(&[][..]));
        assert_eq!(p.isr_nodes, p.replica_nodes);
        assert_eq!(r.topics[1].topic_id, broker.topics().get("b").unwrap().id);
        assert!(r.next_cursor.is_none());
    }

    #[test]
    fn pages_by_limit_and_cursor() {
        let broker = FakeBroker::new();
        broker.topics().create("a", 3, Default::default()).unwrap();
        broker.topics().create("b", 2, Default::default()).unwrap();
        let first = run(&broker, &ask(&["a", "b"], 2, None));
        assert_eq!(shape(&first), [("a".into(), vec![0, 1])]);
        let c = first.next_cursor.as_ref().unwrap();
        assert_eq!((c.topic_name.0.as_str(), c.partition_index), ("a", 2));
        let second = run(&broker, &ask(&["a", "b"], 2, Some(("a", 2))));
        assert_eq!(
            shape(&second),
            [("a".into(), vec![2]), ("b".into(), vec![0])]
        );
        let third = run(&broker, &ask(&["a", "b"], 2, Some(("b", 1))));
        assert_eq!(shape(&third), [("b".into(), vec![1])]);
        assert!(third.next_cursor.is_none());
        // None asked: every topic, internal ones included.
        let all = run(&broker, &ask(&[], 2000, None));
        assert!(shape(&all).iter().any(|(n, _)| n == "a"));
    }
}
