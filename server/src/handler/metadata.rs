//! Metadata (3): brokers, topics with their partitions and ids; auto-creates requested topics
//! when allowed.
//!
//! On a single node this node leads every partition at [`LEADER_EPOCH`]. In a cluster the
//! metadata image says who: every live broker with its advertised listener, and each partition's
//! leader (LEADER_NOT_AVAILABLE while none is alive), leader epoch, replicas, ISR and offline
//! replicas. Topic ids are the registry's stable UUIDs (Fetch v13+ names topics by id).
//!
//! The internal topics (`__consumer_offsets`, `__transaction_state`: a cluster's replicated
//! coordinator logs, `crate::internal_topics::replicated`; a single node's private ones,
//! `crate::internal_topics::single_node`) are listed and found by name or id as in Kafka, with `is_internal`
//! (clients leave them out of their topic lists); in a cluster, a request naming one that does
//! not exist yet creates it with its own settings when auto-creation is allowed. An ordinary
//! topic is never auto-created by one of their names.

use std::sync::Arc;

use rill_metadata::image::MetadataImage;
use rill_metadata::types::NodeId;
use rill_protocol::kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use rill_protocol::kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::ErrorCode;

use super::{str_bytes, topic_name, topic_or_auto_create, Broker, LEADER_EPOCH};
use crate::security::listeners::Listener;
use crate::topics::TopicMeta;

/// Who leads and replicates each partition: this node alone, or the cluster's image.
enum Layout {
    Single(BrokerId),
    Cluster(Arc<MetadataImage>),
}

impl Layout {
    fn of<B: Broker>(broker: &B) -> Self {
        match broker.cluster() {
            Some(cluster) => Layout::Cluster(cluster.image()),
            None => Layout::Single(BrokerId(broker.config().node_id)),
        }
    }

    /// The brokers clients of `listener` may connect to, at that listener's endpoints.
    fn brokers<B: Broker>(&self, broker: &B, listener: &Listener) -> Vec<MetadataResponseBroker> {
        let entry = |id: i32, host: &str, port: u16| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(str_bytes(host))
                .with_port(i32::from(port))
        };
        match self {
            Layout::Single(node) => {
                let _ = broker;
                vec![entry(
                    node.0,
                    &listener.advertise_host,
                    listener.advertise_port,
                )]
            }
            Layout::Cluster(image) => image
                .live_brokers()
                .filter_map(|b| {
                    let e = b.endpoint_on(&listener.name)?;
                    Some(entry(b.node_id.0, &e.host, e.port))
                })
                .collect(),
        }
    }

    /// The partition's entry (without its index and error, which the caller sets).
    fn partition(&self, version: i16, topic: &str, index: i32) -> MetadataResponsePartition {
        let ids = |nodes: &[NodeId]| nodes.iter().map(|n| BrokerId(n.0)).collect::<Vec<_>>();
        let entry = MetadataResponsePartition::default().with_partition_index(index);
        let (leader, epoch, replicas, isr, offline) = match self {
            Layout::Single(node) => (*node, LEADER_EPOCH, vec![*node], vec![*node], Vec::new()),
            Layout::Cluster(image) => {
                let Some(state) = image.partition(topic, index) else {
                    return entry
                        .with_error_code(ErrorCode::LeaderNotAvailable.code())
                        .with_leader_id(BrokerId(-1));
                };
                let leader = image
                    .live_leader(state)
                    .map_or(BrokerId(-1), |l| BrokerId(l.0));
                let offline: Vec<NodeId> = state
                    .replicas
                    .iter()
                    .copied()
                    .filter(|r| image.live_broker(*r).is_none())
                    .collect();
                let (replicas, isr) = (ids(&state.replicas), ids(&state.isr));
                (leader, state.leader_epoch, replicas, isr, ids(&offline))
            }
        };
        let error = if leader.0 < 0 {
            ErrorCode::LeaderNotAvailable
        } else {
            ErrorCode::None
        };
        // Fields a version lacks must stay at their defaults or the codec refuses to encode.
        entry
            .with_error_code(error.code())
            .with_leader_id(leader)
            .with_leader_epoch(if version >= 7 { epoch.0 } else { -1 })
            .with_replica_nodes(replicas)
            .with_isr_nodes(isr)
            .with_offline_replicas(if version >= 5 { offline } else { Vec::new() })
    }
}

/// The controller clients send admin requests to (Metadata and DescribeCluster): this node,
/// since every broker forwards them to the active controller (KIP-590; Kafka's KRaft brokers
/// name a random live broker). Naming the active controller sent clients to a node that may
/// have just died: librdkafka's AdminClient then waited on it for over 30 s (issue 32).
pub fn named_controller<B: Broker>(broker: &B) -> BrokerId {
    match broker.cluster() {
        Some(cluster) => BrokerId(cluster.node_id().0),
        None => BrokerId(broker.config().node_id),
    }
}

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::MetadataRequest,
) -> super::Answer {
    let mut response = handle_on(broker, cx.version, &request, &cx.session.listener).await;
    // KIP-430, asked for from v8 (the cluster's only up to v10, as Kafka).
    let topics = cx.version >= 8 && request.include_topic_authorized_operations;
    let cluster = (8..=10).contains(&cx.version) && request.include_cluster_authorized_operations;
    if topics || cluster {
        let access = super::authz::access(broker, cx.session);
        if topics {
            for topic in &mut response.topics {
                let name = topic.name.as_ref().map_or("", |n| n.0.as_str());
                topic.topic_authorized_operations = access.topic_operations(name);
            }
        }
        if cluster {
            response.cluster_authorized_operations = access.cluster_operations();
        }
    }
    super::Answer::body(response)
}

/// Answer Metadata as asked on the first listener.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    request: &MetadataRequest,
) -> MetadataResponse {
    let first = broker.config().listeners.all[0].clone();
    handle_on(broker, version, request, &first).await
}

/// Answer Metadata as asked on `listener` (the brokers are given at its endpoints).
pub async fn handle_on<B: Broker>(
    broker: &B,
    version: i16,
    request: &MetadataRequest,
    listener: &Listener,
) -> MetadataResponse {
    let layout = Layout::of(broker);
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let all = match &request.topics {
        None => true,
        Some(list) => list.is_empty() && version == 0,
    };
    // The internal topics (a cluster's image, a single node's coordinator logs) are not in the
    // registry.
    let internal_topics = || broker.internal_topics();
    let internal = |name: &str| broker.internal_topic(name);
    let topics = if all {
        // Kafka lists its internal topics too, marked so (clients leave them out of their lists).
        let listed = broker.topics().list().into_iter().chain(internal_topics());
        listed
            .map(|(name, meta)| topic_entry(version, &name, Ok(meta), &layout))
            .collect()
    } else {
        // v4+ carries the flag; older clients always allowed auto-creation.
        let allow = version < 4 || request.allow_auto_topic_creation;
        let requested = request.topics.as_deref().unwrap_or_default();
        let mut entries = Vec::with_capacity(requested.len());
        for t in requested {
            // A non-zero topic id names the topic whatever the name says: the Java client asks
            // by id with the name at its default "" (Kafka's KafkaApis looks ids up first too).
            let name = if t.topic_id.is_nil() {
                t.name.as_ref()
            } else {
                None
            };
            entries.push(match name {
                Some(name) => {
                    let meta = match internal(name.as_str()) {
                        Some(meta) => Ok(meta),
                        None => topic_or_auto_create(broker, name.as_str(), allow).await,
                    };
                    topic_entry(version, name.as_str(), meta, &layout)
                }
                None => match broker.topics().by_id(t.topic_id).or_else(|| {
                    let mut internal = internal_topics().into_iter();
                    internal.find(|(_, meta)| meta.id == t.topic_id)
                }) {
                    Some((name, meta)) => topic_entry(version, &name, Ok(meta), &layout),
                    None => MetadataResponseTopic::default()
                        .with_topic_id(t.topic_id)
                        .with_error_code(ErrorCode::UnknownTopicId.code()),
                },
            });
        }
        entries
    };
    // Fields a version lacks must stay at their defaults or the codec refuses to encode.
    let mut response = MetadataResponse::default()
        .with_brokers(layout.brokers(broker, listener))
        .with_topics(topics);
    if version >= 1 {
        response.controller_id = named_controller(broker);
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
    layout: &Layout,
) -> MetadataResponseTopic {
    let entry = MetadataResponseTopic::default().with_name(Some(topic_name(name)));
    // As Kafka's `Topic.isInternal`: by name, whatever the answer (the flag is v1+).
    let entry = entry.with_is_internal(version >= 1 && crate::internal_topics::is_internal(name));
    let meta = match meta {
        Ok(meta) => meta,
        Err(code) => return entry.with_error_code(code.code()),
    };
    let partitions = (0..meta.partitions)
        .map(|index| layout.partition(version, name, index))
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
    use futures::executor::block_on;
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
        let r = block_on(handle(&broker, 12, &request(&["new-topic"], true)));
        let t = &r.topics[0];
        assert_eq!(t.error_code, 0);
        assert_eq!(t.partitions.len(), 1);
        assert!(!t.topic_id.is_nil());
        let again = block_on(handle(&broker, 12, &request(&["new-topic"], true)));
        assert_eq!(again.topics[0].topic_id, t.topic_id);
        assert_eq!(r.brokers[0].port, 9092);
    }

    #[test]
    fn a_topic_id_is_looked_up_whatever_the_name_says() {
        let broker = FakeBroker::new();
        broker
            .topics()
            .create("by-id", 2, Default::default())
            .unwrap();
        let id = broker.topics().get("by-id").unwrap().id;
        // As the Java AdminClient sends it: the id, and the name at its default "".
        let ask = |id| {
            MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
                .with_topic_id(id)
                .with_name(Some(topic_name("")))]))
        };
        let r = block_on(handle(&broker, 12, &ask(id)));
        assert_eq!(r.topics[0].error_code, 0);
        assert_eq!(r.topics[0].topic_id, id);
        assert_eq!(r.topics[0].name.as_ref().map(|n| n.as_str()), Some("by-id"));
        assert_eq!(r.topics[0].partitions.len(), 2);
        let unknown = uuid::Uuid::from_u128(7);
        let r = block_on(handle(&broker, 12, &ask(unknown)));
        assert_eq!(r.topics[0].error_code, ErrorCode::UnknownTopicId.code());
        assert_eq!(r.topics[0].topic_id, unknown);
    }

    #[test]
    fn unknown_without_auto_create_and_invalid_names() {
        let broker = FakeBroker::new();
        let r = block_on(handle(
            &broker,
            9,
            &request(&["absent", "bad name!"], false),
        ));
        assert_eq!(r.topics[0].error_code, 3);
        assert_eq!(r.topics[1].error_code, 17);
        let r = block_on(handle(&broker, 9, &request(&["bad name!"], true)));
        assert_eq!(r.topics[0].error_code, 17);
        assert!(broker.topics().list().is_empty());
    }

    #[test]
    fn a_single_node_never_auto_creates_an_internal_topic_name() {
        let broker = FakeBroker::new();
        let r = block_on(handle(
            &broker,
            12,
            &request(&["__consumer_offsets", "__transaction_state"], true),
        ));
        assert_eq!(r.topics[0].error_code, 3);
        assert_eq!(r.topics[1].error_code, 3);
        assert!(r.topics[0].is_internal);
        assert!(broker.topics().list().is_empty());
    }

    #[test]
    fn null_topics_lists_all_and_empty_lists_none() {
        let broker = FakeBroker::new();
        broker.topics().create("a", 2, Default::default()).unwrap();
        let all = block_on(handle(
            &broker,
            9,
            &MetadataRequest::default().with_topics(None),
        ));
        assert_eq!(all.topics.len(), 1);
        assert_eq!(all.topics[0].partitions.len(), 2);
        let none = block_on(handle(
            &broker,
            9,
            &MetadataRequest::default().with_topics(Some(vec![])),
        ));
        assert!(none.topics.is_empty());
        let v0_all = block_on(handle(
            &broker,
            0,
            &MetadataRequest::default().with_topics(Some(vec![])),
        ));
        assert_eq!(v0_all.topics.len(), 1);
    }
}
