//! Runtime edge of the group coordinator: start it on a shard (open and replay the offsets logs
//! it owns, tick its session timers), with the storage and the clock handed in. Requests reach
//! it through the shard's generic [`crate::shard::router::Router`]; it serves them as a
//! [`Service`].
//!
//! A shard's place among the shards (its index) is what [`super::coordinator_shard`] and
//! [`super::owned_offsets_partitions`] are computed with. On a single node the offsets live in
//! the shard's private logs ([`LogJournal`]); in a cluster in the replicated
//! `__consumer_offsets` partitions ([`ReplicatedJournal`]), loaded as leadership comes.

use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use rill_engine::io::{Clock, Storage};
use rill_engine::LogManager;
use rill_protocol::ErrorCode;

use super::coordinator::{GroupCoordinator, TICK_MS};
use super::journal::{Journal, LogJournal};
use super::metadata_record::GroupMetadata;
use super::offsets::OffsetRecord;
use super::replicated::ReplicatedJournal;
use super::{owned_offsets_partitions, GroupCall, GroupReply, OFFSETS_DIR, OFFSETS_TOPIC};
use crate::cluster::view::ClusterView;
use crate::config::settings::BrokerConfig;
use crate::internal_topics::replicated::ReplicatedLog;
use crate::partition::table::PartitionTable;
use crate::shard::service::Service;

/// Where a shard's committed offsets become durable.
pub enum ShardJournal<S: Storage> {
    /// A single node's private logs.
    Private(LogJournal<S>),
    /// A cluster's replicated `__consumer_offsets` partitions.
    Replicated(ReplicatedJournal<S>),
}

impl<S: Storage + 'static> ShardJournal<S> {
    /// Close the private logs (shutdown); the partition table closes the replicated ones.
    pub async fn close(&self) {
        if let ShardJournal::Private(journal) = self {
            journal.close().await;
        }
    }
}

impl<S: Storage + 'static> Journal for ShardJournal<S> {
    async fn append(&self, group_id: &str, records: Vec<OffsetRecord>) -> Result<(), ErrorCode> {
        match self {
            ShardJournal::Private(journal) => journal.append(group_id, records).await,
            ShardJournal::Replicated(journal) => journal.append(group_id, records).await,
        }
    }

    fn ready(&self, group_id: &str) -> Result<(), ErrorCode> {
        match self {
            ShardJournal::Private(journal) => journal.ready(group_id),
            ShardJournal::Replicated(journal) => journal.ready(group_id),
        }
    }

    fn writes_membership(&self) -> bool {
        match self {
            ShardJournal::Private(journal) => journal.writes_membership(),
            ShardJournal::Replicated(journal) => journal.writes_membership(),
        }
    }

    async fn append_group(
        &self,
        group_id: &str,
        value: Option<GroupMetadata>,
    ) -> Result<(), ErrorCode> {
        match self {
            ShardJournal::Private(journal) => journal.append_group(group_id, value).await,
            ShardJournal::Replicated(journal) => journal.append_group(group_id, value).await,
        }
    }

    async fn append_consumer(
        &self,
        group_id: &str,
        records: Vec<crate::group::consumer::records::RawRecord>,
    ) -> Result<(), ErrorCode> {
        match self {
            ShardJournal::Private(journal) => journal.append_consumer(group_id, records).await,
            ShardJournal::Replicated(journal) => journal.append_consumer(group_id, records).await,
        }
    }
}

/// The coordinator a shard runs over storage `S`.
pub type ShardCoordinator<S> = GroupCoordinator<ShardJournal<S>>;

/// Start shard `shard`'s coordinator: replay the offsets partitions it owns (a single node), or
/// follow their leadership in `cluster` through the shard's partition `table`; tick its timers.
pub async fn start<S: Storage + 'static>(
    config: &BrokerConfig,
    (shard, storage): (usize, S),
    clock: Rc<dyn Clock>,
    cluster: Option<(Rc<PartitionTable<S>>, Arc<ClusterView>)>,
) -> anyhow::Result<Rc<ShardCoordinator<S>>> {
    let owned = owned_offsets_partitions(shard, config.shards);
    let coordinator = match cluster {
        Some((table, view)) => {
            let log = ReplicatedLog::new(OFFSETS_TOPIC, owned.clone(), table, view);
            let journal = ShardJournal::Replicated(ReplicatedJournal::new(log, clock.clone()));
            tracing::info!(shard, partitions = ?owned, "group coordinator follows __consumer_offsets");
            GroupCoordinator::new(journal, clock, config.group, Vec::new())
        }
        None => {
            let manager = LogManager::new(storage, config.data_dir.join(OFFSETS_DIR));
            let journal = LogJournal::open(&manager, &owned, clock.clone())
                .await
                .map_err(|e| anyhow::anyhow!("opening the offsets log: {e}"))?;
            // Each partition loads as a cluster's coordinator loads one it now leads: its
            // offsets, then its groups' written memberships (sessions starting now).
            let replayed: Vec<_> = journal
                .logs()
                .map(|(p, log)| (p, log.live(), log.take_memberships()))
                .collect();
            let offsets: usize = replayed.iter().map(|(_, live, _)| live.len()).sum();
            let journal = ShardJournal::Private(journal);
            let coordinator = GroupCoordinator::new(journal, clock, config.group, Vec::new());
            for (partition, live, memberships) in replayed {
                let groups = memberships.groups.into_iter();
                let groups = groups.filter_map(|(g, v)| Some((g, v?))).collect();
                coordinator.load_partition(partition, live, groups);
                let consumer = memberships.consumer.into_iter().collect();
                coordinator.load_consumer_groups(partition, consumer);
            }
            tracing::info!(shard, partitions = ?owned, offsets, "group coordinator ready");
            coordinator
        }
    };
    let coordinator = Rc::new(coordinator);
    glommio::spawn_local(tick_forever(Rc::downgrade(&coordinator))).detach();
    Ok(coordinator)
}

async fn tick_forever<S: Storage + 'static>(coordinator: Weak<ShardCoordinator<S>>) {
    loop {
        glommio::timer::sleep(Duration::from_millis(TICK_MS)).await;
        let Some(c) = coordinator.upgrade() else {
            return;
        };
        for (group_id, record) in c.tick() {
            let c = c.clone();
            let write = async move { c.write_emptied(&group_id, record).await };
            glommio::spawn_local(write).detach();
        }
        c.tick_share();
        for group_id in c.fenced_consumer_groups() {
            let c = c.clone();
            let write = async move {
                if let Err(code) = c.write_consumer(&group_id).await {
                    tracing::warn!(group = group_id, ?code, "writing the fenced members failed");
                }
            };
            glommio::spawn_local(write).detach();
        }
        if let ShardJournal::Replicated(journal) = c.journal() {
            journal.follow(&c).await;
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
