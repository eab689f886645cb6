//! Runtime edge of the group coordinator: start it on a shard (join the group channel mesh,
//! open and replay the offsets logs), route each group operation to its coordinator shard, serve
//! operations other shards forward here, and tick session timers.
//!
//! The group mesh is separate from the partition mesh; a shard's place in it (its peer id) is
//! what [`super::coordinator_shard`] and [`super::owned_offsets_partitions`] are computed with.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::oneshot;
use glommio::channels::channel_mesh::{Full, MeshBuilder, Senders};
use glommio::channels::shared_channel::ConnectedReceiver;
use rill_engine::io::glommio::GlommioStorage;
use rill_engine::io::{Clock, SystemClock};
use rill_engine::LogManager;

use super::coordinator::{GroupCoordinator, TICK_MS};
use super::journal::LogJournal;
use super::ops::GroupListing;
use super::{
    coordinator_shard, owned_offsets_partitions, GroupMsg, GroupOp, GroupReply, OFFSETS_DIR,
};
use crate::config::BrokerConfig;
use rill_protocol::ErrorCode;

/// The coordinator type a real shard runs.
pub type ShardCoordinator = GroupCoordinator<LogJournal<GlommioStorage>>;

/// The group mesh every shard joins (built once, cloned into each executor).
pub type GroupMesh = MeshBuilder<GroupMsg, Full>;

/// A new group mesh for `shards` shards (`None` with one shard).
pub fn group_mesh(config: &BrokerConfig) -> Option<GroupMesh> {
    (config.shards > 1).then(|| MeshBuilder::full(config.shards, config.shard_channel_capacity))
}

/// Routes group operations from one shard to the coordinating shard.
pub struct GroupRouter {
    /// This shard's place in the group mesh.
    pub peer_id: usize,
    /// Total shards.
    pub shards: usize,
    senders: Option<Senders<GroupMsg>>,
}

/// Start this shard's coordinator: join the mesh, replay the owned offsets partitions, serve
/// forwarded operations, tick timers.
pub async fn start(
    config: &Arc<BrokerConfig>,
    mesh: Option<GroupMesh>,
) -> anyhow::Result<(Rc<ShardCoordinator>, GroupRouter)> {
    let (senders, receivers) = match mesh {
        Some(mesh) => {
            let (s, r) = mesh
                .join()
                .await
                .map_err(|_| anyhow::anyhow!("group channel mesh join failed"))?;
            (Some(s), Some(r))
        }
        None => (None, None),
    };
    let peer_id = senders.as_ref().map_or(0, |s| s.peer_id());
    let shards = config.shards;
    let clock: Rc<dyn Clock> = Rc::new(SystemClock);
    let manager = LogManager::new(GlommioStorage::new(), config.data_dir.join(OFFSETS_DIR));
    let owned = owned_offsets_partitions(peer_id, shards);
    let journal = LogJournal::open(&manager, &owned, clock.clone())
        .await
        .map_err(|e| anyhow::anyhow!("opening the offsets log: {e}"))?;
    let live = journal.live();
    tracing::info!(shard = peer_id, partitions = ?owned, offsets = live.len(), "group coordinator ready");
    let coordinator = Rc::new(GroupCoordinator::new(journal, clock, live));
    if let Some(mut receivers) = receivers {
        for (_, stream) in receivers.streams() {
            glommio::spawn_local(serve_peer(stream, coordinator.clone())).detach();
        }
    }
    glommio::spawn_local(tick_forever(Rc::downgrade(&coordinator))).detach();
    Ok((
        coordinator,
        GroupRouter {
            peer_id,
            shards,
            senders,
        },
    ))
}

async fn tick_forever(coordinator: std::rc::Weak<ShardCoordinator>) {
    loop {
        glommio::timer::sleep(Duration::from_millis(TICK_MS)).await;
        match coordinator.upgrade() {
            Some(c) => c.tick(),
            None => return,
        }
    }
}

/// Serve operations forwarded by one peer. Each runs in its own task: a JoinGroup may wait for
/// a whole rebalance. The channel is bounded, so a flood makes senders wait.
async fn serve_peer(receiver: ConnectedReceiver<GroupMsg>, coordinator: Rc<ShardCoordinator>) {
    while let Some(msg) = receiver.recv().await {
        let coordinator = coordinator.clone();
        glommio::spawn_local(async move {
            let GroupMsg {
                group_id,
                op,
                reply,
            } = msg;
            let answer = coordinator.handle(&group_id, op).await;
            let _ = reply.send(answer);
        })
        .detach();
    }
}

impl GroupRouter {
    /// Run `op` on the shard that coordinates `group_id`.
    pub async fn route(&self, local: &ShardCoordinator, group_id: &str, op: GroupOp) -> GroupReply {
        let owner = coordinator_shard(group_id, self.shards);
        if owner == self.peer_id {
            return local.handle(group_id, op).await;
        }
        self.forward(owner, group_id, op).await
    }

    async fn forward(&self, owner: usize, group_id: &str, op: GroupOp) -> GroupReply {
        let Some(senders) = &self.senders else {
            unreachable!("a single shard coordinates every group")
        };
        let (reply, answer) = oneshot::channel();
        let msg = GroupMsg {
            group_id: group_id.to_string(),
            op,
            reply,
        };
        if senders.send_to(owner, msg).await.is_err() {
            return GroupReply::Unavailable(ErrorCode::CoordinatorNotAvailable);
        }
        answer
            .await
            .unwrap_or(GroupReply::Unavailable(ErrorCode::CoordinatorNotAvailable))
    }

    /// Every group on every shard.
    pub async fn list(&self, local: &ShardCoordinator) -> Vec<GroupListing> {
        let mut all = local.list();
        for peer in (0..self.shards).filter(|p| *p != self.peer_id) {
            if let GroupReply::List(more) = self.forward(peer, "", GroupOp::List).await {
                all.extend(more);
            }
        }
        all.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        all
    }
}
