//! The replicated partition actor at its edges, against the engine on its simulated disk in a
//! cluster view of three brokers (this one is node 1): as leader, followers' fetches move the
//! high watermark from an empty log to the log end and never back, and answer acks=all in
//! offset order; as follower, the leader's batches are copied and cut at a divergence, to
//! exactly the high watermark and below it (as Kafka's followers do), and what a peer sends out
//! of line is refused with an error code, never a panic (the actor's assertions hold).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rill_engine::io::sim::{FaultConfig, SimStorage};
use rill_engine::io::{Clock, SystemClock};
use rill_engine::{LogManager, Positions};
use rill_metadata::image::MetadataImage;
use rill_metadata::record::{BrokerIdentity, MetadataRecord, PartitionAssignment};
use rill_metadata::types::{BrokerEpoch, Endpoint, LogIndex, NodeId};
use rill_protocol::ErrorCode;
use rill_types::{LeaderEpoch, Offset, PartitionIndex, TopicPartitionRef};
use uuid::Uuid;

use super::ops::{Acks, PartitionOp, PartitionReply};
use super::table::PartitionTable;
use super::table_tests::{append, run};
use crate::cluster::mirror::mirror;
use crate::cluster::view::ClusterView;
use crate::config::cluster::ClusterConfig;
use crate::config::settings::BrokerConfig;
use crate::test_batches::batch;
use crate::topics::TopicRegistry;

/// Partition 0 of "t" is led here (node 1); partition 1 is led by node 2 and followed here.
const LED: i32 = 0;
const FOLLOWED: i32 = 1;
const EPOCH: LeaderEpoch = LeaderEpoch(0);

/// Partition `p` of the test's topic `t`.
fn tp(p: i32) -> TopicPartitionRef<'static> {
    TopicPartitionRef::new("t", PartitionIndex(p))
}

fn register(node: i32) -> MetadataRecord {
    MetadataRecord::RegisterBroker(BrokerIdentity {
        node_id: NodeId(node),
        incarnation_id: Uuid::from_u128(node as u128),
        log_dir_id: Uuid::from_u128(node as u128),
        // Port 1: nobody listens, so the follower's fetcher never reaches its leader and the
        // test alone drives the follower's log.
        endpoint: Endpoint {
            host: "127.0.0.1".into(),
            port: 1,
        },
        rack: None,
        replica_secret_sha256: None,
        listeners: Default::default(),
    })
}

/// Brokers 1, 2 and 3 live; "t"/0 led by 1 and "t"/1 by 2, each with all three in the ISR.
fn image() -> MetadataImage {
    let mut image = MetadataImage::default();
    let mut records = vec![MetadataRecord::ClusterInit {
        cluster_id: "c1".into(),
    }];
    records.extend([register(1), register(2), register(3)]);
    image.apply_entry(LogIndex(1), 1, &records);
    let unfence = |node: i32| MetadataRecord::UnfenceBroker {
        node_id: NodeId(node),
        broker_epoch: BrokerEpoch(1),
    };
    image.apply_entry(LogIndex(2), 1, &[unfence(1), unfence(2), unfence(3)]);
    let led_by = |leader: i32, replicas: [i32; 3]| PartitionAssignment {
        replicas: replicas.map(NodeId).to_vec(),
        isr: replicas.map(NodeId).to_vec(),
        leader: Some(NodeId(leader)),
    };
    let topic = MetadataRecord::Topic {
        name: "t".into(),
        topic_id: Uuid::from_u128(7),
        internal: false,
        configs: Default::default(),
        partitions: vec![led_by(1, [1, 2, 3]), led_by(2, [2, 1, 3])],
    };
    image.apply_entry(LogIndex(3), 1, &[topic]);
    image
}

/// A partition table of node 1 in the cluster of [`image`] (and the directory it lives in).
fn table() -> (tempfile::TempDir, Rc<PartitionTable<SimStorage>>) {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(TopicRegistry::open(dir.path()).unwrap());
    let image = image();
    mirror(&registry, &image).unwrap();
    let peers = Arc::new(crate::security::peer_client::PeerClient::plaintext());
    let view = ClusterView::new(
        ClusterConfig::node_1_of_three_replicas(),
        Default::default(),
        peers,
        None,
    );
    view.publish(Arc::new(image));
    let storage = SimStorage::new(7, FaultConfig::default());
    let manager = LogManager::new(storage, "/sim/data".into());
    let clock: Rc<dyn Clock> = Rc::new(SystemClock);
    let config = Arc::new(BrokerConfig::defaults());
    let table = PartitionTable::new(Rc::new(manager), registry, config, clock);
    (dir, Rc::new(table.with_cluster(Some(view))))
}

/// `node`'s fetch from `from` at the current epoch.
fn fetch(node: i32, from: i64) -> PartitionOp {
    PartitionOp::ReplicaFetch {
        replica: NodeId(node),
        from: Offset(from),
        max_bytes: 1 << 20,
        current_leader_epoch: EPOCH,
        last_fetched_epoch: None,
    }
}

/// A leader's batch of `records` records at `base`, written at `epoch` (the base offset and
/// the leader epoch lie before the part of the header the CRC covers).
fn leader_batch(base: i64, records: usize, epoch: LeaderEpoch) -> Bytes {
    let mut bytes = BytesMut::from(&batch(records)[..]);
    bytes[0..8].copy_from_slice(&base.to_be_bytes());
    bytes[12..16].copy_from_slice(&epoch.0.to_be_bytes());
    bytes.freeze()
}

/// The leader's batches, as a follower's fetcher hands them to its actor.
fn copy(records: Bytes, leader_high_watermark: i64) -> PartitionOp {
    PartitionOp::ReplicaAppend {
        epoch: EPOCH,
        records,
        leader_high_watermark: Offset(leader_high_watermark),
        leader_log_start: Offset(0),
    }
}

/// The leader says this follower's log diverges at `end_offset` (KIP-320).
fn cut_at(end_offset: i64) -> PartitionOp {
    PartitionOp::Truncate {
        epoch: EPOCH,
        diverging_epoch: EPOCH,
        end_offset: Offset(end_offset),
    }
}

async fn positions(table: &PartitionTable<SimStorage>, partition: i32) -> Positions {
    match table.call(tp(partition), PartitionOp::Offsets).await {
        PartitionReply::Offsets(p) => p,
        other => panic!("offsets failed: {other:?}"),
    }
}

/// (log start, high watermark, log end) of `partition`.
async fn marks(table: &PartitionTable<SimStorage>, partition: i32) -> (i64, i64, i64) {
    let p = positions(table, partition).await;
    (p.log_start().0, p.high_watermark().0, p.log_end().0)
}

fn error_of(reply: PartitionReply) -> ErrorCode {
    match reply {
        PartitionReply::Error(code) => code,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn read_high_watermark(reply: PartitionReply) -> i64 {
    match reply {
        PartitionReply::ReplicaRead {
            positions,
            diverging: None,
            ..
        } => positions.high_watermark().0,
        other => panic!("expected a replica read, got {other:?}"),
    }
}

#[test]
fn a_leaders_high_watermark_goes_from_the_empty_log_to_its_end_and_never_back() {
    run(|| async {
        let (_dir, table) = table();
        assert_eq!(marks(&table, LED).await, (0, 0, 0), "empty");
        assert_eq!(
            read_high_watermark(table.call(tp(LED), fetch(2, 0)).await),
            0
        );
        assert_eq!(
            read_high_watermark(table.call(tp(LED), fetch(3, 0)).await),
            0
        );
        match table.call(tp(LED), append(3, Acks::Leader)).await {
            PartitionReply::Appended { base_offset, .. } => assert_eq!(base_offset, Offset(0)),
            other => panic!("append failed: {other:?}"),
        }
        assert_eq!(
            read_high_watermark(table.call(tp(LED), fetch(2, 3)).await),
            0
        );
        assert_eq!(
            read_high_watermark(table.call(tp(LED), fetch(3, 3)).await),
            3,
            "at the log end once the whole ISR holds it"
        );
        // Back from a crash that lost what it had not flushed: consumers keep what they saw.
        assert_eq!(
            read_high_watermark(table.call(tp(LED), fetch(2, 1)).await),
            3
        );
        assert_eq!(marks(&table, LED).await, (0, 3, 3));
    });
}

#[test]
fn a_leader_refuses_fetches_out_of_line_with_error_codes() {
    run(|| async {
        let (_dir, table) = table();
        table.call(tp(LED), append(3, Acks::Leader)).await;
        // Past the end without a last epoch: told where the leader's latest epoch ends.
        match table.call(tp(LED), fetch(2, 4)).await {
            PartitionReply::ReplicaRead { diverging, .. } => {
                assert_eq!(diverging, Some((EPOCH, Offset(3))));
            }
            other => panic!("expected a diverging epoch, got {other:?}"),
        }
        let newer = PartitionOp::ReplicaFetch {
            replica: NodeId(2),
            from: Offset(0),
            max_bytes: 1 << 20,
            current_leader_epoch: LeaderEpoch(1),
            last_fetched_epoch: None,
        };
        let newer = table.call(tp(LED), newer).await;
        assert_eq!(error_of(newer), ErrorCode::UnknownLeaderEpoch);
        let stranger = table.call(tp(LED), fetch(9, 0)).await;
        assert_eq!(error_of(stranger), ErrorCode::NotLeaderOrFollower);
        // Its last epoch ended here at 3, below where it asks from: cut there.
        let diverged = PartitionOp::ReplicaFetch {
            replica: NodeId(2),
            from: Offset(5),
            max_bytes: 1 << 20,
            current_leader_epoch: EPOCH,
            last_fetched_epoch: Some(EPOCH),
        };
        match table.call(tp(LED), diverged).await {
            PartitionReply::ReplicaRead { diverging, .. } => {
                assert_eq!(diverging, Some((EPOCH, Offset(3))));
            }
            other => panic!("expected a diverging epoch, got {other:?}"),
        }
        assert_eq!(marks(&table, LED).await, (0, 0, 3), "nothing moved");
    });
}

#[test]
fn acks_all_waits_for_the_isr_and_is_answered_in_offset_order() {
    run(|| async {
        let (_dir, table) = table();
        let produce = |records| {
            let table = table.clone();
            glommio::spawn_local(
                async move { table.call(tp(LED), append(records, Acks::All)).await },
            )
        };
        let first = produce(2);
        glommio::timer::sleep(Duration::from_millis(20)).await;
        let second = produce(3);
        glommio::timer::sleep(Duration::from_millis(20)).await;
        assert_eq!(marks(&table, LED).await, (0, 0, 5), "both wait for the ISR");
        table.call(tp(LED), fetch(2, 5)).await;
        table.call(tp(LED), fetch(3, 5)).await;
        let bases: Vec<Offset> = [first.await, second.await]
            .into_iter()
            .map(|reply| match reply {
                PartitionReply::Appended { base_offset, .. } => base_offset,
                other => panic!("acks=all failed: {other:?}"),
            })
            .collect();
        assert_eq!(bases, [Offset(0), Offset(2)]);
        assert_eq!(marks(&table, LED).await, (0, 5, 5));
    });
}

#[test]
fn a_follower_cuts_to_exactly_its_high_watermark_and_below_it() {
    run(|| async {
        let (_dir, table) = table();
        assert_eq!(marks(&table, FOLLOWED).await, (0, 0, 0), "empty");
        let copied = table
            .call(tp(FOLLOWED), copy(leader_batch(0, 5, EPOCH), 5))
            .await;
        assert!(
            matches!(copied, PartitionReply::ReplicaAppended),
            "{copied:?}"
        );
        let copied = table
            .call(tp(FOLLOWED), copy(leader_batch(5, 3, EPOCH), 5))
            .await;
        assert!(
            matches!(copied, PartitionReply::ReplicaAppended),
            "{copied:?}"
        );
        assert_eq!(marks(&table, FOLLOWED).await, (0, 5, 8));
        // The divergence exactly at the high watermark: the tail past it goes, nothing else.
        let cut = table.call(tp(FOLLOWED), cut_at(5)).await;
        assert!(matches!(cut, PartitionReply::ReplicaAppended), "{cut:?}");
        assert_eq!(marks(&table, FOLLOWED).await, (0, 5, 5));
        // A divergence at or past the log end cuts nothing.
        table.call(tp(FOLLOWED), cut_at(9)).await;
        assert_eq!(marks(&table, FOLLOWED).await, (0, 5, 5));
        table
            .call(tp(FOLLOWED), copy(leader_batch(5, 3, EPOCH), 8))
            .await;
        assert_eq!(marks(&table, FOLLOWED).await, (0, 8, 8), "at the log end");
        // Below it, as Kafka's followers do when the leader that won says so: the batch
        // holding offset 3 goes too, and what this replica exposes comes down with the cut.
        table.call(tp(FOLLOWED), cut_at(3)).await;
        assert_eq!(marks(&table, FOLLOWED).await, (0, 0, 0));
        table
            .call(tp(FOLLOWED), copy(leader_batch(0, 5, EPOCH), 2))
            .await;
        assert_eq!(marks(&table, FOLLOWED).await, (0, 2, 5));
    });
}

#[test]
fn a_follower_refuses_what_a_peer_sends_out_of_line_with_error_codes() {
    run(|| async {
        let (_dir, table) = table();
        table
            .call(tp(FOLLOWED), copy(leader_batch(0, 5, EPOCH), 9))
            .await;
        assert_eq!(
            marks(&table, FOLLOWED).await,
            (0, 5, 5),
            "a leader's high watermark past this log is capped at its end"
        );
        let below_end = table
            .call(tp(FOLLOWED), copy(leader_batch(2, 2, EPOCH), 5))
            .await;
        assert!(
            matches!(below_end, PartitionReply::Error(_)),
            "{below_end:?}"
        );
        let stale = PartitionOp::ReplicaAppend {
            epoch: LeaderEpoch(1),
            records: leader_batch(5, 1, EPOCH),
            leader_high_watermark: Offset(6),
            leader_log_start: Offset(0),
        };
        let stale = table.call(tp(FOLLOWED), stale).await;
        assert_eq!(error_of(stale), ErrorCode::FencedLeaderEpoch);
        assert_eq!(marks(&table, FOLLOWED).await, (0, 5, 5), "nothing moved");
        // The leader's log starts past this one's end: emptied to start there.
        let reset = PartitionOp::ResetToLeaderStart {
            epoch: EPOCH,
            leader_log_start: Offset(20),
        };
        let reset = table.call(tp(FOLLOWED), reset).await;
        assert!(
            matches!(reset, PartitionReply::ReplicaAppended),
            "{reset:?}"
        );
        assert_eq!(marks(&table, FOLLOWED).await, (20, 20, 20));
        table
            .call(tp(FOLLOWED), copy(leader_batch(20, 2, EPOCH), 22))
            .await;
        assert_eq!(marks(&table, FOLLOWED).await, (20, 22, 22));
    });
}
