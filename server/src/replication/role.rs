//! [`Role`]: what the metadata image says this broker is for one partition.

use rill_metadata::image::MetadataImage;
use rill_metadata::types::{NodeId, PartitionEpoch};
use rill_types::{LeaderEpoch, TopicPartitionRef};
use uuid::Uuid;

/// This broker's part in one partition, from the metadata image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// One replica only (or no cluster): the log works as on a single node.
    Unreplicated,
    /// This broker leads a replicated partition.
    Leader(LeaderRole),
    /// Another live broker leads; this one copies from it.
    Follower {
        /// The leader epoch the follower fetches at.
        epoch: LeaderEpoch,
        /// Who leads.
        leader: NodeId,
    },
    /// A replica of a partition with no live leader (or one this broker no longer holds):
    /// nothing to do until the controller elects one.
    Idle,
}

/// What a leader needs from the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderRole {
    /// Its leader epoch.
    pub epoch: LeaderEpoch,
    /// The partition epoch of its view of the ISR (AlterPartition names it).
    pub partition_epoch: PartitionEpoch,
    /// The in-sync replicas (the leader among them).
    pub isr: Vec<NodeId>,
    /// Every replica.
    pub replicas: Vec<NodeId>,
    /// The topic's id (AlterPartition names the topic by id).
    pub topic_id: Uuid,
}

/// The role of `node` for partition `tp` in `image`.
pub fn role_of(image: &MetadataImage, node: NodeId, tp: TopicPartitionRef<'_>) -> Role {
    let Some(topic_image) = image.topics.get(tp.topic) else {
        return Role::Unreplicated;
    };
    let Some(state) = tp
        .partition
        .as_usize()
        .and_then(|i| topic_image.partitions.get(i))
    else {
        return Role::Unreplicated;
    };
    if state.replicas.len() <= 1 {
        return Role::Unreplicated;
    }
    if !state.replicas.contains(&node) {
        return Role::Idle;
    }
    // The image's rule (`MetadataImage::check_invariants`), which the leader's ISR rules build on.
    debug_assert!(
        state.leader.is_none_or(|l| state.isr.contains(&l)),
        "a partition's leader is in its ISR"
    );
    match image.live_leader(state) {
        Some(leader) if leader == node => Role::Leader(LeaderRole {
            epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            isr: state.isr.clone(),
            replicas: state.replicas.clone(),
            topic_id: topic_image.id,
        }),
        Some(leader) => Role::Follower {
            epoch: state.leader_epoch,
            leader,
        },
        None => Role::Idle,
    }
}
