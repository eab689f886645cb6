//! Runtime edge of the transaction coordinator: start it on a shard (open and replay the
//! state-log partitions it owns) with the storage and the clock handed in, and run its timers.
//! Operations reach it through the shard's generic [`crate::shard::router::Router`]: on its own
//! shard through [`Coordinating`], from other shards through [`RemoteTxns`].
//!
//! Unlike a group, a transaction needs the broker to act (markers, group offsets: [`TxnEnv`]), so
//! the coordinator is served together with the shard, which exists only once the coordinator
//! does: other shards' calls are served from then on ([`RemoteTxns`], [`run_timers`]).

use std::rc::{Rc, Weak};
use std::time::Duration;

use rill_engine::io::{Clock, Storage};
use rill_engine::LogManager;
use rill_protocol::ErrorCode;

use super::coordinator::TxnCoordinator;
use super::env::TxnEnv;
use super::log::{TxnJournal, TxnStateLog};
use super::ops::{TxnCall, TxnReply};
use super::{owned_txn_partitions, TXN_DIR};
use crate::config::BrokerConfig;
use crate::shard::router::Service;

/// The coordinator a shard runs over storage `S`.
pub type ShardTxnCoordinator<S> = TxnCoordinator<TxnStateLog<S>>;

/// Start shard `shard`'s coordinator: replay the state-log partitions it owns.
pub async fn start<S: Storage + 'static>(
    config: &BrokerConfig,
    shard: usize,
    storage: S,
    clock: Rc<dyn Clock>,
) -> anyhow::Result<Rc<ShardTxnCoordinator<S>>> {
    let manager = LogManager::new(storage, config.data_dir.join(TXN_DIR));
    let owned = owned_txn_partitions(shard, config.shards);
    let log = TxnStateLog::open(&manager, &owned, clock.clone())
        .await
        .map_err(|e| anyhow::anyhow!("opening the transaction state log: {e}"))?;
    let live = log.live();
    tracing::info!(shard, partitions = ?owned, ids = live.len(), "transaction coordinator ready");
    Ok(Rc::new(TxnCoordinator::new(
        log,
        clock,
        config.txn.clone(),
        live,
    )))
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
