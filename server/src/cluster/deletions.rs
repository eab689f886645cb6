//! A topic removed from the metadata log disappears from every broker's disk: each shard
//! watches the topic registry (which mirrors the log) and deletes the partitions it owns of
//! topics that are gone, or that were recreated under the same name with a new id.
//!
//! The watch starts from the registry as it was on disk before this start's first mirror, so a
//! topic deleted while this node was down is deleted here too once the node catches up.
//!
//! Likewise a replica a reassignment moved away ([`follow_replicas`]): once the image no longer
//! names this broker among a partition's replicas, the shard owning it deletes its log (also
//! when that happened while this node was down: the first image it sees counts).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use rill_engine::io::Storage;

use rill_metadata::types::LogIndex;
use rill_types::{PartitionIndex, TopicPartitionRef};
use uuid::Uuid;

use super::ClusterView;
use crate::partition::ops::PartitionOp;
use crate::partition::table::PartitionTable;
use crate::shard::owner::owner_shard;
use crate::shutdown::ShutdownSignal;
use crate::topics::{TopicMeta, TopicRegistry};

/// How often a shard compares the registry with what it last saw.
const POLL: Duration = Duration::from_millis(100);

/// Delete this shard's partitions of removed topics until shutdown.
pub async fn follow<S: Storage + 'static>(
    table: Rc<PartitionTable<S>>,
    registry: Arc<TopicRegistry>,
    mut known: BTreeMap<String, Arc<TopicMeta>>,
    (shard, shards): (usize, usize),
    shutdown: Rc<ShutdownSignal>,
) {
    loop {
        if !shutdown.sleep(POLL).await {
            return;
        }
        let now: BTreeMap<String, Arc<TopicMeta>> = registry.list().into_iter().collect();
        for (name, old) in &known {
            if now.get(name).is_some_and(|m| m.id == old.id) {
                continue;
            }
            for index in PartitionIndex::all(old.partitions) {
                let tp = TopicPartitionRef::new(name, index);
                if owner_shard(tp, shards) != shard {
                    continue;
                }
                let reply = table.call(tp, PartitionOp::Delete).await;
                if reply.error_code() != rill_types::ErrorCode::None {
                    let partition = index.0;
                    tracing::error!(topic = %name, partition, code = ?reply.error_code(), "deleting a removed topic's partition failed");
                }
            }
            tracing::info!(topic = %name, shard, "deleted a topic the metadata log removed");
        }
        known = now;
    }
}

/// Delete this shard's logs of partitions whose replicas no longer name this broker, until
/// shutdown (see the module doc).
pub async fn follow_replicas<S: Storage + 'static>(
    table: Rc<PartitionTable<S>>,
    cluster: Arc<ClusterView>,
    (shard, shards): (usize, usize),
    shutdown: Rc<ShutdownSignal>,
) {
    let me = cluster.node_id();
    // Whether this broker was a replica, per (topic id, partition), as of `seen`.
    let mut replica: HashMap<(Uuid, u32), bool> = HashMap::new();
    let mut seen = LogIndex(0);
    loop {
        if !shutdown.sleep(POLL).await {
            return;
        }
        let image = cluster.image();
        if image.applied_index == seen {
            continue;
        }
        seen = image.applied_index;
        let mut now = HashMap::with_capacity(replica.len());
        // Internal topics too: their partitions are replicated like any (`crate::internal_topics::replicated`).
        for topic in image.topics.values() {
            for (index, state) in topic.partitions.iter().enumerate() {
                let partition = index as i32;
                let tp = TopicPartitionRef::new(&topic.name, PartitionIndex(partition));
                if owner_shard(tp, shards) != shard {
                    continue;
                }
                let key = (topic.id, index as u32);
                let here = state.replicas.contains(&me);
                now.insert(key, here);
                // Only a change (or the first sight) acts: a broker never a replica has nothing.
                if here || replica.get(&key) == Some(&false) {
                    continue;
                }
                let reply = table.call(tp, PartitionOp::Delete).await;
                if reply.error_code() == rill_types::ErrorCode::None {
                    if replica.get(&key) == Some(&true) {
                        tracing::info!(topic = %topic.name, partition, "deleted a replica moved to other brokers");
                    }
                } else {
                    tracing::error!(topic = %topic.name, partition, code = ?reply.error_code(), "deleting a moved replica failed");
                }
            }
        }
        replica = now;
    }
}
