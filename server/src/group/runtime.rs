//! Runtime edge of the group coordinator: start it on a shard (open and replay the offsets logs
//! it owns, tick its session timers), with the storage and the clock handed in. Requests reach
//! it through the shard's generic [`crate::shard::router::Router`]; it serves them as a
//! [`Service`].
//!
//! A shard's place among the shards (its index) is what [`super::coordinator_shard`] and
//! [`super::owned_offsets_partitions`] are computed with.

use std::rc::{Rc, Weak};
use std::time::Duration;

use rill_engine::io::{Clock, Storage};
use rill_engine::LogManager;

use super::coordinator::{GroupCoordinator, TICK_MS};
use super::journal::{Journal, LogJournal};
use super::{owned_offsets_partitions, GroupCall, GroupReply, OFFSETS_DIR};
use crate::config::BrokerConfig;
use crate::shard::router::Service;

/// The coordinator a shard runs over storage `S`.
pub type ShardCoordinator<S> = GroupCoordinator<LogJournal<S>>;

/// Start shard `shard`'s coordinator: replay the offsets partitions it owns, tick its timers.
pub async fn start<S: Storage + 'static>(
    config: &BrokerConfig,
    shard: usize,
    storage: S,
    clock: Rc<dyn Clock>,
) -> anyhow::Result<Rc<ShardCoordinator<S>>> {
    let manager = LogManager::new(storage, config.data_dir.join(OFFSETS_DIR));
    let owned = owned_offsets_partitions(shard, config.shards);
    let journal = LogJournal::open(&manager, &owned, clock.clone())
        .await
        .map_err(|e| anyhow::anyhow!("opening the offsets log: {e}"))?;
    let live = journal.live();
    tracing::info!(shard, partitions = ?owned, offsets = live.len(), "group coordinator ready");
    let coordinator = Rc::new(GroupCoordinator::new(journal, clock, config.group, live));
    glommio::spawn_local(tick_forever(Rc::downgrade(&coordinator))).detach();
    Ok(coordinator)
}

async fn tick_forever<J: Journal + 'static>(coordinator: Weak<GroupCoordinator<J>>) {
    loop {
        glommio::timer::sleep(Duration::from_millis(TICK_MS)).await;
        match coordinator.upgrade() {
            Some(c) => c.tick(),
            None => return,
        }
    }
}

impl<J: Journal> Service<GroupCall> for GroupCoordinator<J> {
    type Reply = GroupReply;

    /// Every group operation runs to completion: a JoinGroup may wait for a whole rebalance.
    async fn serve(&self, call: GroupCall) -> GroupReply {
        self.handle(&call.group_id, call.op).await
    }
}
