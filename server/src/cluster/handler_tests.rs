//! The handlers' cluster answers, without sockets: a [`FakeBroker`] that belongs to a cluster
//! whose image holds a live leader, a fenced leader and a leaderless partition. Every answer
//! must encode at every version the registry advertises (the codec refuses a field set on a
//! version that lacks it, which would close the client's connection).

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::executor::block_on;
use rill_metadata::image::MetadataImage;
use rill_metadata::record::{BrokerIdentity, MetadataRecord, PartitionAssignment};
use rill_metadata::types::{Endpoint, LogIndex, NodeId};
use rill_protocol::api_registry::entry;
use rill_protocol::kafka_protocol::messages::*;
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::response::encode_response;
use rill_types::ErrorCode;
use rill_types::{PartitionIndex, TopicPartitionRef};
use uuid::Uuid;

use super::mirror::mirror;
use super::ClusterView;
use crate::broker::{topic_name, Broker};
use crate::config::cluster::ClusterConfig;
use crate::config::BrokerConfig;
use crate::group::ops::GroupListing;
use crate::group::{GroupOp, GroupReply};
use crate::handler;
use crate::handler::fake::FakeBroker;
use crate::partition::ops::{PartitionOp, PartitionReply};
use crate::topics::TopicRegistry;

/// A fake broker (node 1) in a cluster.
struct ClusterFake {
    fake: FakeBroker,
    view: Arc<ClusterView>,
}

impl Broker for ClusterFake {
    fn config(&self) -> &BrokerConfig {
        self.fake.config()
    }
    fn topics(&self) -> &Arc<TopicRegistry> {
        self.fake.topics()
    }
    async fn partition(&self, tp: TopicPartitionRef<'_>, op: PartitionOp) -> PartitionReply {
        self.fake.partition(tp, op).await
    }
    async fn sleep(&self, duration: Duration) {
        self.fake.sleep(duration).await
    }
    fn now(&self) -> std::time::Instant {
        self.fake.now()
    }
    async fn group(&self, group_id: &str, op: GroupOp) -> GroupReply {
        self.fake.group(group_id, op).await
    }
    async fn list_groups(&self) -> Vec<GroupListing> {
        self.fake.list_groups().await
    }
    fn cluster(&self) -> Option<&ClusterView> {
        Some(&self.view)
    }
    async fn txn(
        &self,
        transactional_id: &str,
        op: crate::txn::ops::TxnOp,
    ) -> crate::txn::ops::TxnReply {
        // As a shard routes it: the id's coordinator may be another broker.
        let here = |op| self.fake.txns.handle(transactional_id, op, self);
        crate::txn::remote::route(self, &self.view, transactional_id, op, here).await
    }
    async fn list_txns(
        &self,
        filter: crate::txn::ops::TxnListFilter,
    ) -> Vec<crate::txn::ops::TxnListing> {
        self.fake.list_txns(filter).await
    }
}

fn register(node: i32) -> MetadataRecord {
    MetadataRecord::RegisterBroker(BrokerIdentity {
        node_id: NodeId(node),
        incarnation_id: Uuid::from_u128(node as u128),
        log_dir_id: Uuid::from_u128(node as u128),
        endpoint: Endpoint {
            host: "127.0.0.1".into(),
            port: 9000 + node as u16,
        },
        rack: None,
        replica_secret_sha256: None,
        listeners: Default::default(),
    })
}

fn led_by(leader: Option<i32>, replicas: &[i32]) -> PartitionAssignment {
    let replicas: Vec<NodeId> = replicas.iter().copied().map(NodeId).collect();
    PartitionAssignment {
        isr: vec![leader.map_or(replicas[0], NodeId)],
        leader: leader.map(NodeId),
        replicas,
    }
}

/// Brokers 1 and 2 live, 3 registered but fenced; topic "t": partition 0 led by 1, partition 1
/// led by fenced 3, partition 2 without a leader.
fn cluster_fake() -> ClusterFake {
    let mut image = MetadataImage::default();
    let mut records = vec![MetadataRecord::ClusterInit {
        cluster_id: "c1".into(),
    }];
    records.extend([register(1), register(2), register(3)]);
    image.apply_entry(LogIndex(1), 1, &records);
    let unfence = |node: i32, epoch| MetadataRecord::UnfenceBroker {
        node_id: NodeId(node),
        broker_epoch: rill_metadata::types::BrokerEpoch(epoch),
    };
    image.apply_entry(LogIndex(2), 1, &[unfence(1, 1), unfence(2, 1)]);
    let topic = MetadataRecord::Topic {
        name: "t".into(),
        topic_id: Uuid::from_u128(7),
        internal: false,
        configs: Default::default(),
        partitions: vec![
            led_by(Some(1), &[1, 2, 3]),
            led_by(Some(3), &[3, 1, 2]),
            led_by(None, &[2, 3, 1]),
        ],
    };
    image.apply_entry(LogIndex(3), 1, &[topic]);
    let config = ClusterConfig::node_1_of_three_replicas();
    let fake = FakeBroker::new();
    let view = ClusterView::new(
        config,
        Default::default(),
        std::sync::Arc::new(crate::security::peer_client::PeerClient::plaintext()),
        None,
    );
    mirror(fake.topics(), &image).unwrap();
    view.publish(Arc::new(image));
    view.set_controller(Some(NodeId(2)));
    ClusterFake { fake, view }
}

fn versions(api_key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let e = entry(api_key).expect("registered");
    e.decodable_min..=e.advertised_max
}

fn encodes(api_key: ApiKey, version: i16, body: &ResponseKind) {
    let mut out = BytesMut::new();
    if let Err(e) = encode_response(&mut out, 1, api_key, version, body) {
        panic!("{api_key:?} v{version}: {e}");
    }
}

#[test]
fn metadata_lists_live_brokers_and_each_partitions_leadership_at_every_version() {
    let broker = cluster_fake();
    for v in versions(ApiKey::Metadata) {
        let request = MetadataRequest::default().with_topics(None);
        let r = block_on(handler::metadata::handle(&broker, v, &request));
        encodes(ApiKey::Metadata, v, &ResponseKind::Metadata(r.clone()));
        let ids: Vec<i32> = r.brokers.iter().map(|b| b.node_id.0).collect();
        assert_eq!(ids, vec![1, 2], "v{v}: only live brokers");
        if v >= 1 {
            // This node (1), which forwards admin requests, not the active controller (2).
            assert_eq!(r.controller_id.0, 1);
        }
        let t = &r.topics[0];
        let p: Vec<(i16, i32)> = t
            .partitions
            .iter()
            .map(|p| (p.error_code, p.leader_id.0))
            .collect();
        let unavailable = ErrorCode::LeaderNotAvailable.code();
        assert_eq!(
            p,
            vec![(0, 1), (unavailable, -1), (unavailable, -1)],
            "v{v}"
        );
        assert_eq!(t.partitions[0].replica_nodes.len(), 3);
        if v >= 5 {
            let offline: Vec<i32> = t.partitions[0]
                .offline_replicas
                .iter()
                .map(|b| b.0)
                .collect();
            assert_eq!(offline, vec![3]);
        }
        if v >= 7 {
            assert_eq!(t.partitions[0].leader_epoch, 0);
        }
    }
}

#[test]
fn describe_cluster_and_find_coordinator_encode_at_every_version() {
    let broker = cluster_fake();
    for v in versions(ApiKey::DescribeCluster) {
        let r = handler::describe_cluster::handle(&broker, &DescribeClusterRequest::default());
        assert_eq!(r.controller_id.0, 1, "this node (1), as Metadata names it");
        assert_eq!(r.brokers.len(), 2);
        assert_eq!(r.cluster_id.as_str(), "c1");
        encodes(
            ApiKey::DescribeCluster,
            v,
            &ResponseKind::DescribeCluster(r),
        );
    }
    for v in versions(ApiKey::FindCoordinator) {
        let key = StrBytes::from_static_str("g");
        let request = FindCoordinatorRequest::default()
            .with_key(key.clone())
            .with_coordinator_keys(vec![key]);
        let r = handler::find_coordinator::handle(&broker, v, &request);
        // No __consumer_offsets yet: not available (its creation was asked for).
        let code = if v >= 4 {
            r.coordinators[0].error_code
        } else {
            r.error_code
        };
        assert_eq!(code, ErrorCode::CoordinatorNotAvailable.code(), "v{v}");
        encodes(
            ApiKey::FindCoordinator,
            v,
            &ResponseKind::FindCoordinator(r),
        );
    }
}

#[test]
fn leader_epochs_come_from_the_image() {
    let broker = cluster_fake();
    assert_eq!(
        broker.leader_epoch(TopicPartitionRef::new("t", PartitionIndex(0))),
        rill_types::LeaderEpoch(0)
    );
    let stale = offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
        .with_partition(0)
        .with_current_leader_epoch(1)
        .with_leader_epoch(0);
    let t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
        .with_topic(topic_name("t"))
        .with_partitions(vec![stale]);
    let request = OffsetForLeaderEpochRequest::default().with_topics(vec![t]);
    let r = block_on(handler::offset_for_leader_epoch::handle(&broker, &request));
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        ErrorCode::UnknownLeaderEpoch.code(),
        "a newer epoch than the log's is unknown here"
    );
}

#[test]
fn a_transactional_id_is_coordinated_by_the_leader_of_its_state_partition() {
    use crate::txn::ops::{TxnOp, TxnReply};
    use crate::txn::{txn_partition, TXN_PARTITIONS, TXN_TOPIC};
    let broker = cluster_fake();
    let find = |id: &str| {
        let key = StrBytes::from_string(id.to_string());
        let request = FindCoordinatorRequest::default()
            .with_key_type(1)
            .with_coordinator_keys(vec![key]);
        let r = handler::find_coordinator::handle(&broker, 4, &request);
        let c = &r.coordinators[0];
        (c.error_code, c.node_id.0, c.port)
    };
    let unavailable = ErrorCode::CoordinatorNotAvailable.code();
    assert_eq!(find("tx"), (unavailable, -1, -1), "no state topic yet");
    // The state topic: even partitions led by this broker (1), odd ones by broker 2.
    let mut image = (*broker.view.image()).clone();
    let partitions = (0..TXN_PARTITIONS)
        .map(|p| led_by(Some(1 + p % 2), &[1, 2]))
        .collect();
    let topic = MetadataRecord::Topic {
        name: TXN_TOPIC.into(),
        topic_id: Uuid::from_u128(8),
        internal: true,
        configs: Default::default(),
        partitions,
    };
    image.apply_entry(LogIndex(image.applied_index.0 + 1), 1, &[topic]);
    broker.view.publish(Arc::new(image));
    let ids: Vec<String> = (0..64).map(|i| format!("tx-{i}")).collect();
    let here = ids.iter().find(|id| txn_partition(id).0 % 2 == 0).unwrap();
    let there = ids.iter().find(|id| txn_partition(id).0 % 2 == 1).unwrap();
    assert_eq!(find(here), (0, 1, 9001));
    assert_eq!(find(there), (0, 2, 9002));
    let init = || TxnOp::InitProducerId {
        timeout_ms: 60_000,
        expected: None,
    };
    let reply = futures::executor::block_on(broker.txn(here, init()));
    assert!(matches!(reply, TxnReply::Init(Ok(_))), "{reply:?}");
    let reply = futures::executor::block_on(broker.txn(there, init()));
    assert_eq!(reply, TxnReply::Unavailable(ErrorCode::NotCoordinator));
}

/// A restarted broker's wait to catch up (`super::wait_caught_up`) has no deadline: it ends
/// only when this node applied the log up to its registration, or when the node stops.
#[test]
fn a_restarted_brokers_catch_up_wait_ends_only_caught_up_or_stopped() {
    use super::{catch_up_progress, wait_caught_up, CatchUp};
    use std::sync::atomic::{AtomicBool, Ordering};
    let log_every = Duration::from_millis(20);
    let view = cluster_fake().view; // applied up to index 3, not registered
    assert!(catch_up_progress(&view).starts_with("not registered yet (active controller: 2)"));

    // No registration, ever (no quorum): it waits, past many progress logs, until stopped.
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::SeqCst);
        })
    };
    assert_eq!(
        wait_caught_up(&view, &stop, log_every, None),
        CatchUp::Stopped
    );
    stopper.join().unwrap();

    // Registered at index 5, applied up to 3: it serves once index 5 is applied.
    let stop = AtomicBool::new(false);
    view.set_registered(rill_metadata::types::BrokerEpoch(5));
    assert_eq!(
        catch_up_progress(&view),
        "metadata applied up to 3 of this start's registration at 5"
    );
    let applier = {
        let view = view.clone();
        std::thread::spawn(move || {
            let mut image = (*view.image()).clone();
            for index in [4, 5] {
                std::thread::sleep(Duration::from_millis(50));
                image.apply_entry(LogIndex(index), 1, &[]);
                view.publish(Arc::new(image.clone()));
            }
        })
    };
    assert_eq!(
        wait_caught_up(&view, &stop, log_every, None),
        CatchUp::Serve
    );
    assert!(view.caught_up() && view.applied_index() == LogIndex(5));
    applier.join().unwrap();

    // An operator's bound (rill.metadata.catch.up.max.ms): it serves what it knows after it.
    view.set_registered(rill_metadata::types::BrokerEpoch(9));
    let bound = Some(Duration::from_millis(50));
    assert_eq!(
        wait_caught_up(&view, &stop, log_every, bound),
        CatchUp::Serve
    );
    assert!(!view.caught_up());
}
