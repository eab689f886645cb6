//! Images for the controller's unit tests: three live brokers and one topic.

use uuid::Uuid;

use crate::image::MetadataImage;
use crate::record::{BrokerIdentity, MetadataRecord, PartitionAssignment};
use crate::types::{BrokerEpoch, Endpoint, LogIndex, NodeId};

/// The id of topic "t".
pub const TOPIC: u128 = 7;

/// Brokers 1..=3 registered and live; topic "t" with the given (replicas, isr, leader).
pub fn image(partitions: &[(&[i32], &[i32], Option<i32>)]) -> MetadataImage {
    let mut image = MetadataImage::default();
    let ids = |ns: &[i32]| ns.iter().copied().map(NodeId).collect::<Vec<_>>();
    let mut records = vec![MetadataRecord::ClusterInit {
        cluster_id: "c".into(),
    }];
    for node in 1..=3 {
        records.push(MetadataRecord::RegisterBroker(BrokerIdentity {
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
        }));
    }
    apply(&mut image, records);
    let unfence = (1..=3)
        .map(|node| MetadataRecord::UnfenceBroker {
            node_id: NodeId(node),
            broker_epoch: BrokerEpoch(1),
        })
        .collect();
    apply(&mut image, unfence);
    let topic = MetadataRecord::Topic {
        name: "t".into(),
        topic_id: Uuid::from_u128(TOPIC),
        internal: false,
        configs: Default::default(),
        partitions: partitions
            .iter()
            .map(|(replicas, isr, leader)| PartitionAssignment {
                replicas: ids(replicas),
                isr: ids(isr),
                leader: leader.map(NodeId),
            })
            .collect(),
    };
    assert_eq!(apply(&mut image, vec![topic]), vec![Ok(())]);
    image
}

/// Apply `records` as the next entry.
pub fn apply(
    image: &mut MetadataImage,
    records: Vec<MetadataRecord>,
) -> Vec<Result<(), crate::image::Rejected>> {
    let index = LogIndex(image.applied_index.0 + 1);
    image.apply_entry(index, 1, &records)
}

/// Fence broker `node`.
pub fn fence(image: &mut MetadataImage, node: i32) {
    let epoch = image.brokers[&NodeId(node)].epoch;
    let fence = MetadataRecord::FenceBroker {
        node_id: NodeId(node),
        broker_epoch: epoch,
    };
    assert_eq!(apply(image, vec![fence]), vec![Ok(())]);
}
