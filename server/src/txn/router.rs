//! Runtime edge of the transaction coordinator: start it on a shard (join the transaction
//! channel mesh, open and replay the state-log partitions), route each operation to the
//! coordinating shard, serve operations other shards forward here, and run its timers.
//!
//! The shape is the group router's; the coordinator is handed the shard (as [`super::env::TxnEnv`])
//! with each operation, so forwarded operations and timers are served once the shard exists
//! ([`serve`]).

use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use futures::channel::oneshot;
use glommio::channels::channel_mesh::{Full, MeshBuilder, Receivers, Senders};
use glommio::channels::shared_channel::ConnectedReceiver;
use rill_engine::io::glommio::GlommioStorage;
use rill_engine::io::{Clock, SystemClock};
use rill_engine::LogManager;
use rill_protocol::ErrorCode;

use super::coordinator::TxnCoordinator;
use super::env::TxnEnv;
use super::log::TxnStateLog;
use super::ops::{TxnListFilter, TxnListing, TxnMsg, TxnOp, TxnReply};
use super::{coordinator_shard, owned_txn_partitions, TXN_DIR};
use crate::config::BrokerConfig;

/// The coordinator type a real shard runs.
pub type ShardTxnCoordinator = TxnCoordinator<TxnStateLog<GlommioStorage>>;

/// The transaction mesh every shard joins (built once, cloned into each executor).
pub type TxnMesh = MeshBuilder<TxnMsg, Full>;

/// A new transaction mesh for `shards` shards (`None` with one shard).
pub fn txn_mesh(config: &BrokerConfig) -> Option<TxnMesh> {
    (config.shards > 1).then(|| MeshBuilder::full(config.shards, config.shard_channel_capacity))
}

/// Routes transaction operations from one shard to the coordinating shard.
pub struct TxnRouter {
    /// This shard's place in the transaction mesh.
    pub peer_id: usize,
    /// Total shards.
    pub shards: usize,
    senders: Option<Senders<TxnMsg>>,
    receivers: std::cell::RefCell<Option<Receivers<TxnMsg>>>,
}

/// Join the mesh and replay the owned state-log partitions; [`serve`] starts serving.
pub async fn start(
    config: &Arc<BrokerConfig>,
    mesh: Option<TxnMesh>,
) -> anyhow::Result<(Rc<ShardTxnCoordinator>, TxnRouter)> {
    let (senders, receivers) = match mesh {
        Some(mesh) => {
            let (s, r) = mesh
                .join()
                .await
                .map_err(|_| anyhow::anyhow!("transaction channel mesh join failed"))?;
            (Some(s), Some(r))
        }
        None => (None, None),
    };
    let peer_id = senders.as_ref().map_or(0, |s| s.peer_id());
    let shards = config.shards;
    let clock: Rc<dyn Clock> = Rc::new(SystemClock);
    let manager = LogManager::new(GlommioStorage::new(), config.data_dir.join(TXN_DIR));
    let owned = owned_txn_partitions(peer_id, shards);
    let log = TxnStateLog::open(&manager, &owned, clock.clone())
        .await
        .map_err(|e| anyhow::anyhow!("opening the transaction state log: {e}"))?;
    let live = log.live();
    tracing::info!(shard = peer_id, partitions = ?owned, ids = live.len(), "transaction coordinator ready");
    let coordinator = Rc::new(TxnCoordinator::new(log, clock, config.txn.clone(), live));
    let router = TxnRouter {
        peer_id,
        shards,
        senders,
        receivers: std::cell::RefCell::new(receivers),
    };
    Ok((coordinator, router))
}

/// Serve forwarded operations and run the timers, with `env` (the shard, held weakly so it
/// can be dropped at shutdown).
pub fn serve<E: TxnEnv + 'static>(
    coordinator: &Rc<ShardTxnCoordinator>,
    router: &TxnRouter,
    env: &Rc<E>,
) {
    if let Some(mut receivers) = router.receivers.borrow_mut().take() {
        for (_, stream) in receivers.streams() {
            let task = serve_peer(stream, Rc::downgrade(coordinator), Rc::downgrade(env));
            glommio::spawn_local(task).detach();
        }
    }
    let config = coordinator.config();
    let every = Duration::from_millis(config.abort_check_interval_ms.max(1));
    let (c, e) = (Rc::downgrade(coordinator), Rc::downgrade(env));
    glommio::spawn_local(tick_forever(c, e, every)).detach();
    let every = Duration::from_millis(config.expiration_check_interval_ms.max(1));
    glommio::spawn_local(expire_forever(Rc::downgrade(coordinator), every)).detach();
}

async fn tick_forever<E: TxnEnv>(
    coordinator: Weak<ShardTxnCoordinator>,
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

async fn expire_forever(coordinator: Weak<ShardTxnCoordinator>, every: Duration) {
    loop {
        glommio::timer::sleep(every).await;
        match coordinator.upgrade() {
            Some(c) => c.expire().await,
            None => return,
        }
    }
}

/// Serve operations forwarded by one peer, each in its own task (an EndTxn waits for markers).
async fn serve_peer<E: TxnEnv + 'static>(
    receiver: ConnectedReceiver<TxnMsg>,
    coordinator: Weak<ShardTxnCoordinator>,
    env: Weak<E>,
) {
    while let Some(msg) = receiver.recv().await {
        let (Some(coordinator), Some(env)) = (coordinator.upgrade(), env.upgrade()) else {
            return;
        };
        glommio::spawn_local(async move {
            let TxnMsg {
                transactional_id,
                op,
                reply,
            } = msg;
            let answer = coordinator.handle(&transactional_id, op, &*env).await;
            let _ = reply.send(answer);
        })
        .detach();
    }
}

impl TxnRouter {
    /// Run `op` on the shard that coordinates `transactional_id`.
    pub async fn route<E: TxnEnv>(
        &self,
        local: &ShardTxnCoordinator,
        env: &E,
        transactional_id: &str,
        op: TxnOp,
    ) -> TxnReply {
        let owner = coordinator_shard(transactional_id, self.shards);
        if owner == self.peer_id {
            return local.handle(transactional_id, op, env).await;
        }
        self.forward(owner, transactional_id, op).await
    }

    async fn forward(&self, owner: usize, transactional_id: &str, op: TxnOp) -> TxnReply {
        let Some(senders) = &self.senders else {
            unreachable!("a single shard coordinates every transactional id")
        };
        let (reply, answer) = oneshot::channel();
        let msg = TxnMsg {
            transactional_id: transactional_id.to_string(),
            op,
            reply,
        };
        if senders.send_to(owner, msg).await.is_err() {
            return TxnReply::Unavailable(ErrorCode::CoordinatorNotAvailable);
        }
        answer
            .await
            .unwrap_or(TxnReply::Unavailable(ErrorCode::CoordinatorNotAvailable))
    }

    /// Every transactional id on every shard that passes `filter`.
    pub async fn list(
        &self,
        local: &ShardTxnCoordinator,
        filter: TxnListFilter,
    ) -> Vec<TxnListing> {
        let mut all = local.list(&filter);
        for peer in (0..self.shards).filter(|p| *p != self.peer_id) {
            if let TxnReply::List(more) = self.forward(peer, "", TxnOp::List(filter.clone())).await
            {
                all.extend(more);
            }
        }
        all.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        all
    }
}
