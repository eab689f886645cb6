//! Runtime edge of the transaction coordinator: start it on a shard (open and replay the
//! state-log partitions it owns on a single node; follow their leadership in a cluster,
//! `crate::internal_topics::replicated`) with the storage and the clock handed in, and run its timers.
//! Operations reach it through the shard's generic [`crate::shard::router::Router`]: on its own
//! shard through [`Coordinating`], from other shards through [`RemoteTxns`].
//!
//! Unlike a group, a transaction needs the broker to act (markers, group offsets: [`TxnEnv`]), so
//! the coordinator is served together with the shard, which exists only once the coordinator
//! does: other shards' calls are served from then on ([`RemoteTxns`], [`run_timers`]).

use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use rill_engine::io::{Clock, Storage};
use rill_engine::LogManager;
use rill_protocol::ErrorCode;

use super::coordinator::TxnCoordinator;
use super::env::TxnEnv;
use super::journal::{TxnJournal, TxnStateLog};
use super::ops::{TxnCall, TxnReply};
use super::record::TxnRecord;
use super::replicated::ReplicatedTxnLog;
use super::{owned_txn_partitions, TXN_DIR, TXN_TOPIC};
use crate::cluster::view::ClusterView;
use crate::config::settings::BrokerConfig;
use crate::internal_topics::replicated::ReplicatedLog;
use crate::partition::table::PartitionTable;
use crate::shard::service::Service;

/// How often a cluster's coordinator looks at the leadership of its state-log partitions.
const FOLLOW_MS: u64 = 100;

/// Where a shard's transaction state becomes durable.
pub enum ShardTxnJournal<S: Storage> {
    /// A single node's private logs.
    Private(TxnStateLog<S>),
    /// A cluster's replicated `__transaction_state` partitions.
    Replicated(ReplicatedTxnLog<S>),
}

impl<S: Storage + 'static> ShardTxnJournal<S> {
    /// Close the private logs (shutdown); the partition table closes the replicated ones.
    pub async fn close(&self) {
        if let ShardTxnJournal::Private(log) = self {
            log.close().await;
        }
    }
}

impl<S: Storage + 'static> TxnJournal for ShardTxnJournal<S> {
    async fn append(&self, record: TxnRecord) -> Result<(), ErrorCode> {
        match self {
            ShardTxnJournal::Private(log) => log.append(record).await,
            ShardTxnJournal::Replicated(log) => log.append(record).await,
        }
    }

    fn ready(&self, transactional_id: &str) -> Result<(), ErrorCode> {
        match self {
            ShardTxnJournal::Private(log) => log.ready(transactional_id),
            ShardTxnJournal::Replicated(log) => log.ready(transactional_id),
        }
    }

    fn coordinator_epoch(&self, transactional_id: &str) -> i32 {
        match self {
            ShardTxnJournal::Private(log) => log.coordinator_epoch(transactional_id),
            ShardTxnJournal::Replicated(log) => log.coordinator_epoch(transactional_id),
        }
    }
}

/// The coordinator a shard runs over storage `S`.
pub type ShardTxnCoordinator<S> = TxnCoordinator<ShardTxnJournal<S>>;

/// Start shard `shard`'s coordinator: replay the state-log partitions it owns (a single node),
/// or follow their leadership in `cluster` through the shard's partition `table`
/// ([`follow_leadership`]).
pub async fn start<S: Storage + 'static>(
    config: &BrokerConfig,
    (shard, storage): (usize, S),
    clock: Rc<dyn Clock>,
    cluster: Option<(Rc<PartitionTable<S>>, Arc<ClusterView>)>,
) -> anyhow::Result<Rc<ShardTxnCoordinator<S>>> {
    let owned = owned_txn_partitions(shard, config.shards);
    let (journal, live) = match cluster {
        Some((table, view)) => {
            let log = ReplicatedLog::new(TXN_TOPIC, owned.clone(), table, view);
            let journal = ReplicatedTxnLog::new(log, clock.clone());
            tracing::info!(shard, partitions = ?owned, "transaction coordinator follows __transaction_state");
            (ShardTxnJournal::Replicated(journal), Vec::new())
        }
        None => {
            let manager = LogManager::new(storage, config.data_dir.join(TXN_DIR));
            let log = TxnStateLog::open(&manager, &owned, clock.clone())
                .await
                .map_err(|e| anyhow::anyhow!("opening the transaction state log: {e}"))?;
            let live = log.live();
            tracing::info!(shard, partitions = ?owned, ids = live.len(), "transaction coordinator ready");
            (ShardTxnJournal::Private(log), live)
        }
    };
    Ok(Rc::new(TxnCoordinator::new(
        journal,
        clock,
        config.txn.clone(),
        live,
    )))
}

/// In a cluster: loads and drops the state of the partitions this broker leads as leadership
/// moves, and finishes the decisions a load brings at once (markers a dead coordinator left
/// unwritten), until the coordinator or `env` is dropped.
pub fn follow_leadership<S, E>(coordinator: &Rc<ShardTxnCoordinator<S>>, env: &Rc<E>)
where
    S: Storage + 'static,
    E: TxnEnv + 'static,
{
    if !matches!(coordinator.journal(), ShardTxnJournal::Replicated(_)) {
        return;
    }
    let (c, e) = (Rc::downgrade(coordinator), Rc::downgrade(env));
    glommio::spawn_local(follow_forever(c, e)).detach();
}

async fn follow_forever<S: Storage + 'static, E: TxnEnv>(
    coordinator: Weak<ShardTxnCoordinator<S>>,
    env: Weak<E>,
) {
    loop {
        glommio::timer::sleep(Duration::from_millis(FOLLOW_MS)).await;
        let (Some(c), Some(env)) = (coordinator.upgrade(), env.upgrade()) else {
            return;
        };
        let ShardTxnJournal::Replicated(journal) = c.journal() else {
            return;
        };
        if journal.follow(&c).await {
            c.tick(&*env).await;
        }
    }
}

/// Runs the coordinator's timers (transaction timeouts and unfinished decisions with `env`, id
/// expiration) until the coordinator or `env` is dropped.
pub fn run_timers<J, E>(coordinator: &Rc<TxnCoordinator<J>>, env: &Rc<E>)
where
    J: TxnJournal + 'static,
    E: TxnEnv + 'static,
{
    let config = coordinator.config();
    let every = Duration::from_millis(config.abort_check_interval_ms.max(1));
    let (c, e) = (Rc::downgrade(coordinator), Rc::downgrade(env));
    glommio::spawn_local(tick_forever(c, e, every)).detach();
    let every = Duration::from_millis(config.expiration_check_interval_ms.max(1));
    glommio::spawn_local(expire_forever(Rc::downgrade(coordinator), every)).detach();
}

async fn tick_forever<J: TxnJournal, E: TxnEnv>(
    coordinator: Weak<TxnCoordinator<J>>,
    env: Weak<E>,
    every: Duration,
) {
    loop {
        glommio::timer::sleep(every).await;
        match (coordinator.upgrade(), env.upgrade()) {
            (Some(c), Some(env)) => c.tick(&*env).await,
            _ => return,
        }
    }
}

async fn expire_forever<J: TxnJournal>(coordinator: Weak<TxnCoordinator<J>>, every: Duration) {
    loop {
        glommio::timer::sleep(every).await;
        match coordinator.upgrade() {
            Some(c) => c.expire().await,
            None => return,
        }
    }
}

/// The coordinator with the broker it acts through: serves a call on the coordinating shard.
pub struct Coordinating<'a, J: TxnJournal, E> {
    /// This shard's coordinator.
    pub coordinator: &'a TxnCoordinator<J>,
    /// The broker that writes markers and group offsets.
    pub env: &'a E,
}

/// Every transaction operation runs to completion: an EndTxn waits for its markers.
impl<J: TxnJournal, E: TxnEnv> Service<TxnCall> for Coordinating<'_, J, E> {
    type Reply = TxnReply;

    async fn serve(&self, call: TxnCall) -> TxnReply {
        self.coordinator
            .handle(&call.transactional_id, call.op, self.env)
            .await
    }
}

/// Serves other shards' calls. Holds the coordinator and the shard weakly: shards hold each
/// other's senders, so a strong hold would keep every shard alive at shutdown.
pub struct RemoteTxns<J: TxnJournal, E> {
    coordinator: Weak<TxnCoordinator<J>>,
    env: Weak<E>,
}

impl<J: TxnJournal, E> RemoteTxns<J, E> {
    /// Serves with `coordinator`, acting through `env`.
    pub fn new(coordinator: &Rc<TxnCoordinator<J>>, env: &Rc<E>) -> Self {
        RemoteTxns {
            coordinator: Rc::downgrade(coordinator),
            env: Rc::downgrade(env),
        }
    }
}

impl<J: TxnJournal, E: TxnEnv> Service<TxnCall> for RemoteTxns<J, E> {
    type Reply = TxnReply;

    async fn serve(&self, call: TxnCall) -> TxnReply {
        match (self.coordinator.upgrade(), self.env.upgrade()) {
            (Some(coordinator), Some(env)) => {
                let local = Coordinating {
                    coordinator: &*coordinator,
                    env: &*env,
                };
                local.serve(call).await
            }
            _ => TxnReply::Unavailable(ErrorCode::CoordinatorNotAvailable),
        }
    }
}
