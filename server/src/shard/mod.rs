//! A shard: one glommio executor pinned to one core, owning the partitions that
//! [`owner::owner_shard`] assigns it and the groups [`crate::group::coordinator_shard`]
//! assigns it, accepting its own connections on the shared port.
//!
//! - [`owner`]: which shard owns a partition (a pure function, on the base floor); which
//!   *broker* leads it is the cluster's question ([`ClusterView::check_leader`]).
//! - [`router`]: one generic [`router::Router`] per kind of request (partitions, groups,
//!   transactions) takes
//!   it to the owning shard over that kind's channel mesh, and serves other shards' requests
//!   with bounded concurrency.
//! - [`service`]: the [`service::Service`] trait each owner (partition table, group and
//!   transaction coordinators) implements for the requests the router brings it.
//! - [`mesh`]: the channels between shards, built on the main thread and connected at start-up
//!   without waiting on any wake-up; [`rendezvous`]: the start-up barrier that makes that work.
//! - [`runtime`]: start the executors, serve until the stop flag turns, close cleanly.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rill_engine::io::Storage;
use rill_protocol::ErrorCode;
use rill_types::TopicPartitionRef;

use crate::broker::Broker;
use crate::client_quotas::ClientRates;
use crate::cluster::ClusterView;
use crate::config::BrokerConfig;
use crate::group::ops::GroupListing;
use crate::group::runtime::ShardCoordinator;
use crate::group::{coordinator_shard, GroupCall, GroupOp, GroupReply};
use crate::memory_budget::ByteBudget;
use crate::partition::ops::{PartitionCall, PartitionOp, PartitionReply};
use crate::partition::table::PartitionTable;
use crate::shard::owner::owner_shard;
use crate::topics::TopicRegistry;
use crate::txn::ops::{TxnCall, TxnListFilter, TxnListing, TxnOp, TxnReply};
use crate::txn::runtime::{Coordinating, ShardTxnCoordinator};

pub mod blocking;
pub mod mesh;
pub mod owner;
pub mod rendezvous;
pub mod router;
pub mod runtime;
pub mod service;

use router::Router;

/// The owner shard is gone (shutting down).
const OWNER_UNAVAILABLE: ErrorCode = ErrorCode::KafkaStorageError;

/// The coordinating shard is gone (shutting down).
const COORDINATOR_UNAVAILABLE: ErrorCode = ErrorCode::CoordinatorNotAvailable;

/// One shard's view of the broker (implements [`Broker`] for the handlers).
pub struct Shard<S: Storage + 'static> {
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
    /// Takes partition operations to the owning shard.
    pub partitions: Router<PartitionCall, PartitionReply>,
    /// This shard's share of `queued.max.request.bytes`: request frames from their size
    /// prefix until answered, over its connections. When spent, connections stop reading.
    pub request_bytes: ByteBudget,
    /// `rill.shard.fetch.bytes.max`: record bytes this shard's Fetch requests hold, from their
    /// read until their response is written.
    pub fetch_bytes: ByteBudget,
    /// The consumer groups this shard coordinates.
    pub groups: Rc<ShardCoordinator<S>>,
    /// Takes group operations to the coordinating shard.
    pub group_router: Router<GroupCall, GroupReply>,
    /// The cluster this broker belongs to (`None` on a single node).
    pub cluster: Option<Arc<ClusterView>>,
    /// The transactional ids this shard coordinates.
    pub txns: Rc<ShardTxnCoordinator<S>>,
    /// Takes transaction operations to the coordinating shard.
    pub txn_router: Router<TxnCall, TxnReply>,
    /// Every client's byte rates (process-wide: client quotas).
    pub client_rates: Arc<ClientRates>,
    /// Calls on the executor's blocking thread, which the shard outlives.
    pub blocking_jobs: Rc<blocking::BlockingJobs>,
}

impl<S: Storage + 'static> Broker for Shard<S> {
    fn config(&self) -> &BrokerConfig {
        &self.config
    }

    fn topics(&self) -> &Arc<TopicRegistry> {
        &self.registry
    }

    async fn blocking<T: Send + 'static>(&self, call: impl FnOnce() -> T + Send + 'static) -> T {
        self.blocking_jobs.run(call).await
    }

    fn topic_settings(
        &self,
        name: &str,
        meta: &Arc<crate::topics::TopicMeta>,
    ) -> crate::config::topic::cache::Settled {
        self.table.cached_settings(name, meta)
    }

    fn cluster(&self) -> Option<&ClusterView> {
        self.cluster.as_deref()
    }

    fn fetch_budget(&self) -> Option<&ByteBudget> {
        Some(&self.fetch_bytes)
    }

    fn client_rates(&self) -> Option<&ClientRates> {
        Some(&self.client_rates)
    }

    // A single node serves its coordinators' logs as the internal topics (`runtime`).
    fn internal_topic(&self, name: &str) -> Option<Arc<crate::topics::TopicMeta>> {
        match self.cluster.as_deref() {
            Some(cluster) => cluster.internal_topic(name),
            None => crate::internal_topics::single_node::topic(name),
        }
    }

    fn internal_topics(&self) -> Vec<(String, Arc<crate::topics::TopicMeta>)> {
        match self.cluster.as_deref() {
            Some(cluster) => cluster.internal_topics(),
            None => crate::internal_topics::single_node::topics(),
        }
    }

    async fn partition(&self, tp: TopicPartitionRef<'_>, op: PartitionOp) -> PartitionReply {
        if tp.partition.0 < 0 {
            return PartitionReply::Error(ErrorCode::UnknownTopicOrPartition);
        }
        // In a cluster only the partition's leader serves it; deleting or sizing local data is
        // always ours.
        if let Some(cluster) = self
            .cluster
            .as_deref()
            .filter(|_| !matches!(op, PartitionOp::Delete | PartitionOp::LogSize))
        {
            if let Err(code) = cluster.check_leader(tp) {
                return PartitionReply::Error(code);
            }
        }
        let owner = owner_shard(tp, self.shards);
        if owner == self.id {
            // The hot path borrows the topic name; only a call that crosses cores owns one.
            return self.table.call(tp, op).await;
        }
        let call = PartitionCall { tp: tp.owned(), op };
        let unavailable = || PartitionReply::Error(OWNER_UNAVAILABLE);
        let table = &*self.table;
        self.partitions.call(owner, table, call, unavailable).await
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
        let owner = coordinator_shard(group_id, self.shards);
        let call = GroupCall {
            group_id: group_id.to_string(),
            op,
        };
        let unavailable = || GroupReply::Unavailable(COORDINATOR_UNAVAILABLE);
        self.group_router
            .call(owner, &*self.groups, call, unavailable)
            .await
    }

    async fn list_groups(&self) -> Vec<GroupListing> {
        let mut all = self.groups.list();
        for peer in self.group_router.peers() {
            let call = GroupCall {
                group_id: String::new(),
                op: GroupOp::List,
            };
            let unavailable = || GroupReply::Unavailable(COORDINATOR_UNAVAILABLE);
            let reply = self
                .group_router
                .call(peer, &*self.groups, call, unavailable);
            if let GroupReply::List(more) = reply.await {
                all.extend(more);
            }
        }
        all.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        all
    }

    async fn txn(&self, transactional_id: &str, op: TxnOp) -> TxnReply {
        // In a cluster the id may be another broker's (crate::txn::remote).
        let here = |op| self.txn_on_its_shard(transactional_id, op);
        match self.cluster.as_deref() {
            Some(cluster) => {
                crate::txn::remote::route(self, cluster, transactional_id, op, here).await
            }
            None => here(op).await,
        }
    }

    async fn list_txns(&self, filter: TxnListFilter) -> Vec<TxnListing> {
        let mut all = self.txns.list(&filter);
        for peer in self.txn_router.peers() {
            let call = TxnCall {
                transactional_id: String::new(),
                op: TxnOp::List(filter.clone()),
            };
            let local = self.coordinating();
            let unavailable = || TxnReply::Unavailable(COORDINATOR_UNAVAILABLE);
            if let TxnReply::List(more) =
                self.txn_router.call(peer, &local, call, unavailable).await
            {
                all.extend(more);
            }
        }
        all.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        all
    }
}

impl<S: Storage + 'static> Shard<S> {
    /// This shard's transaction coordinator, acting through this shard.
    fn coordinating(&self) -> Coordinating<'_, crate::txn::runtime::ShardTxnJournal<S>, Self> {
        Coordinating {
            coordinator: &self.txns,
            env: self,
        }
    }

    /// Run `op` on the shard of this broker that coordinates `transactional_id`.
    async fn txn_on_its_shard(&self, transactional_id: &str, op: TxnOp) -> TxnReply {
        let owner = crate::txn::coordinator_shard(transactional_id, self.shards);
        let call = TxnCall {
            transactional_id: transactional_id.to_string(),
            op,
        };
        let local = self.coordinating();
        let unavailable = || TxnReply::Unavailable(COORDINATOR_UNAVAILABLE);
        self.txn_router.call(owner, &local, call, unavailable).await
    }
}
