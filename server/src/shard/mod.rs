//! A shard: one glommio executor pinned to one core, owning the partitions that
//! [`crate::routing::owner_shard`] assigns it, accepting its own connections on the shared port.
//!
//! Requests for partitions owned elsewhere cross cores over the channel mesh ([`mesh`]); each
//! carries a oneshot sender, so many are in flight at once and the answer wakes the asking task
//! directly on its own core.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use glommio::channels::channel_mesh::Senders;
use rill_engine::io::Storage;
use rill_protocol::ErrorCode;

use crate::cluster::ClusterView;
use crate::config::BrokerConfig;
use crate::group::ops::GroupListing;
use crate::group::router::{GroupRouter, ShardCoordinator};
use crate::group::{GroupOp, GroupReply};
use crate::handler::Broker;
use crate::partition::ops::{PartitionOp, PartitionReply, ShardMsg};
use crate::partition::table::PartitionTable;
use crate::routing::owner_shard;
use crate::topics::TopicRegistry;
use crate::txn::ops::{TxnListFilter, TxnListing, TxnOp, TxnReply};
use crate::txn::router::{ShardTxnCoordinator, TxnRouter};

pub mod mesh;
pub mod runtime;

/// The owner shard is gone (shutting down).
const OWNER_UNAVAILABLE: ErrorCode = ErrorCode::KafkaStorageError;

/// One shard's view of the broker (implements [`Broker`] for the handlers).
pub struct Shard<S: Storage> {
    /// This shard's index in `0..shards` (its channel-mesh peer id).
    pub id: usize,
    /// Total shards.
    pub shards: usize,
    /// Resolved configuration.
    pub config: Arc<BrokerConfig>,
    /// Durable topic metadata (process-wide).
    pub registry: Arc<TopicRegistry>,
    /// The partitions this shard owns.
    pub table: Rc<PartitionTable<S>>,
    /// Senders to every other shard (`None` with one shard).
    pub mesh: Option<Senders<ShardMsg>>,
    /// Request bytes read but not yet answered, across this shard's connections, in permits of
    /// one byte: when exhausted, connections stop reading (back-pressure, bounded memory).
    pub inflight_bytes: Rc<glommio::sync::Semaphore>,
    /// The consumer groups this shard coordinates.
    pub groups: Rc<ShardCoordinator>,
    /// Routes group operations to their coordinating shard.
    pub group_router: GroupRouter,
    /// The cluster this broker belongs to (`None` on a single node).
    pub cluster: Option<Arc<ClusterView>>,
    /// The transactional ids this shard coordinates.
    pub txns: Rc<ShardTxnCoordinator>,
    /// Routes transaction operations to their coordinating shard.
    pub txn_router: TxnRouter,
}

impl<S: Storage + 'static> Broker for Shard<S> {
    fn config(&self) -> &BrokerConfig {
        &self.config
    }

    fn topics(&self) -> &Arc<TopicRegistry> {
        &self.registry
    }

    fn cluster(&self) -> Option<&ClusterView> {
        self.cluster.as_deref()
    }

    async fn partition(&self, topic: &str, partition: i32, op: PartitionOp) -> PartitionReply {
        if partition < 0 {
            return PartitionReply::Error(ErrorCode::UnknownTopicOrPartition);
        }
        // In a cluster only the partition's leader serves it; deleting local data is always ours.
        if let Some(cluster) = self
            .cluster
            .as_deref()
            .filter(|_| !matches!(op, PartitionOp::Delete))
        {
            if let Err(code) = cluster.route(topic, partition) {
                return PartitionReply::Error(code);
            }
        }
        let owner = owner_shard(topic, partition, self.shards);
        if owner == self.id {
            return self.table.call(topic, partition, op).await;
        }
        let Some(mesh) = &self.mesh else {
            unreachable!("a single shard owns every partition")
        };
        let (reply, answer) = oneshot::channel();
        let msg = ShardMsg {
            topic: topic.to_string(),
            partition,
            op,
            reply,
        };
        if mesh.send_to(owner, msg).await.is_err() {
            return PartitionReply::Error(OWNER_UNAVAILABLE);
        }
        answer
            .await
            .unwrap_or(PartitionReply::Error(OWNER_UNAVAILABLE))
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    async fn sleep(&self, duration: Duration) {
        glommio::timer::sleep(duration).await;
    }

    async fn group(&self, group_id: &str, op: GroupOp) -> GroupReply {
        // In a cluster a group belongs to the leader of its offsets partition.
        if let Some(cluster) = &self.cluster {
            match cluster.group_coordinator(group_id) {
                Ok(node) if node == cluster.node_id() => {}
                Ok(_) => return GroupReply::Unavailable(ErrorCode::NotCoordinator),
                Err(code) => return GroupReply::Unavailable(code),
            }
        }
        self.group_router.route(&self.groups, group_id, op).await
    }

    async fn list_groups(&self) -> Vec<GroupListing> {
        self.group_router.list(&self.groups).await
    }

    async fn txn(&self, transactional_id: &str, op: TxnOp) -> TxnReply {
        self.txn_router
            .route(&self.txns, self, transactional_id, op)
            .await
    }

    async fn list_txns(&self, filter: TxnListFilter) -> Vec<TxnListing> {
        self.txn_router.list(&self.txns, filter).await
    }
}
