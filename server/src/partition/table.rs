//! The partitions a shard owns: opened lazily on first use, each served by its actor.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use crate::channel::local::{mpsc, oneshot};
use futures::{SinkExt, StreamExt};
use rill_engine::io::{Clock, Storage};
use rill_engine::LogManager;

use super::actor::{run_actor, ActorMsg, ActorSetup, ConfigWatch, PartitionHandle};
use super::file_budget::{releases_needed, FileBudget, FileShare};
use super::ops::{PartitionOp, PartitionReply};
use super::watch::PartitionWatch;
use crate::compaction::ShardCleaner;
use crate::config::settings::BrokerConfig;
use crate::config::topic::cache::{SettingsCache, Settled};
use crate::config::topic::TopicSettings;
use crate::partition::internal::InternalLog;
use crate::shutdown::ShutdownSignal;
use crate::topics::{TopicMeta, TopicRegistry};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartition, TopicPartitionRef};

/// Pause of the file keeper between release rounds (releases flush and close, they take a moment).
const KEEPER_PAUSE: Duration = Duration::from_millis(20);

/// Partition logs a shard opens (recovers) at once: enough to keep the disk busy, few enough
/// that 10,000 partitions opening at start-up do not all hold their recovery buffers at once
/// (the peak stays in the allocator's heap, i.e. in every idle partition's share of RSS).
pub const OPENING_MAX: u64 = 64;

/// The open partitions, looked up by a borrowed key ([`TopicPartitionRef::key`]): routing a
/// request to its actor copies no topic name (only opening one does).
type PartitionMap = HashMap<TopicPartition, Rc<PartitionHandle>>;

/// What the table has for a partition right now.
enum Slot {
    /// A running actor.
    Open(Rc<PartitionHandle>),
    /// An actor that stopped (released its files, failed to open) and is still closing its
    /// log: fired when it is done and a new actor may open the directory.
    Closing(Rc<ShutdownSignal>),
}

/// What a partition's actor is opened with: log config, compaction, `min.insync.replicas`, tier.
type PartitionSettings = (
    rill_engine::LogConfig,
    Option<rill_engine::cleaner::CompactionConfig>,
    i32,
    Option<crate::tiered::tier::TierSetup>,
);

/// A single node's internal partition on this shard: topic, partition and the log behind it.
type InternalPartition<S> = (TopicPartitionRef<'static>, Rc<InternalLog<S>>);

/// A partition whose directory is being deleted: how many deletes run, and the end of the actor
/// the first of them asked to delete (later deletes wait for it before touching the directory).
#[derive(Default)]
struct Deleting {
    running: u32,
    actor_finished: Option<Rc<ShutdownSignal>>,
}

/// The partition logs one shard owns, keyed by (topic, partition).
pub struct PartitionTable<S: Storage> {
    log_manager: Rc<LogManager<S>>,
    registry: Arc<TopicRegistry>,
    config: Arc<BrokerConfig>,
    clock: Rc<dyn Clock>,
    partitions: Rc<RefCell<PartitionMap>>,
    actors: RefCell<Vec<glommio::task::JoinHandle<()>>>,
    /// Set by `close_all`: a late request must not reopen a log during shutdown.
    closed: Cell<bool>,
    /// Partitions whose directory is being deleted (with how many deletes are running): no
    /// actor may open one until its delete is done (issue 26: a second actor opened a directory
    /// while the first removed it, and glommio's open panicked on the vanished path).
    deleting: RefCell<HashMap<TopicPartition, Deleting>>,
    /// The shard's open partition files and their bound.
    files: Rc<FileBudget>,
    /// Wakes the file keeper; taken when the keeper task starts (with the first actor).
    keeper_wake: RefCell<Option<mpsc::UnboundedReceiver<()>>>,
    /// Requests routed so far: the clock of `PartitionHandle::last_use`.
    uses: Cell<u64>,
    /// Cleans this shard's compacted partitions.
    cleaner: Rc<ShardCleaner>,
    /// Logs opening at once on this shard ([`OPENING_MAX`]).
    open_permits: Rc<glommio::sync::Semaphore>,
    /// The cluster, if any: replicated partitions follow their role there.
    cluster: Option<Arc<crate::cluster::view::ClusterView>>,
    /// A single node's internal partitions this shard owns, served read-only from the
    /// coordinators' logs (`crate::internal_topics::single_node`).
    internal: RefCell<Vec<InternalPartition<S>>>,
    /// The shard's share of tiered storage, when the broker enables it.
    tier: Option<Rc<crate::tiered::tier::ShardTier>>,
    /// Topic settings parsed on this shard, per config change (Produce checks every batch
    /// against them; opening a partition starts from them, and its actor re-reads them on a
    /// change: one parse per topic, not per partition).
    settings: Rc<SettingsCache>,
}

impl<S: Storage + 'static> PartitionTable<S> {
    /// An empty table; partitions open on first use.
    pub fn new(
        log_manager: Rc<LogManager<S>>,
        registry: Arc<TopicRegistry>,
        config: Arc<BrokerConfig>,
        clock: Rc<dyn Clock>,
    ) -> Self {
        let nofile = crate::open_files::current_limit().unwrap_or(1024);
        let max_files =
            crate::open_files::shard_budget(config.shard_open_files_max, nofile, config.shards);
        let (files, keeper_wake) = FileBudget::new(max_files);
        let cleaner = ShardCleaner::new(&config.log.cleaner, config.shards, files.clone());
        Self {
            log_manager,
            registry,
            clock,
            partitions: Rc::new(RefCell::new(HashMap::new())),
            actors: RefCell::new(Vec::new()),
            closed: Cell::new(false),
            deleting: RefCell::new(HashMap::new()),
            files,
            keeper_wake: RefCell::new(Some(keeper_wake)),
            uses: Cell::new(0),
            cleaner,
            open_permits: Rc::new(glommio::sync::Semaphore::new(OPENING_MAX)),
            config,
            cluster: None,
            internal: RefCell::new(Vec::new()),
            tier: None,
            settings: Rc::default(),
        }
    }

    /// The table of a broker with tiered storage: tiered topics' partitions copy to it.
    pub fn with_tier(mut self, tier: Option<Rc<crate::tiered::tier::ShardTier>>) -> Self {
        self.tier = tier;
        self
    }

    /// Serve reads of partition `tp` (an internal topic's) from `log`, a single node's
    /// coordinator log on this shard.
    pub fn serve_internal(&self, tp: TopicPartitionRef<'static>, log: InternalLog<S>) {
        debug_assert!(crate::internal_topics::is_internal(tp.topic));
        debug_assert!(
            self.cluster.is_none(),
            "a cluster's are replicated partitions"
        );
        self.internal.borrow_mut().push((tp, Rc::new(log)));
    }

    fn internal_log(&self, tp: TopicPartitionRef<'_>) -> Option<Rc<InternalLog<S>>> {
        if !crate::internal_topics::is_internal(tp.topic) {
            return None;
        }
        let internal = self.internal.borrow();
        let found = internal.iter().find(|(served, _)| *served == tp);
        found.map(|(_, log)| log.clone())
    }

    /// The table of a broker in `cluster`: its replicated partitions lead or follow there.
    pub fn with_cluster(mut self, cluster: Option<Arc<crate::cluster::view::ClusterView>>) -> Self {
        self.cluster = cluster;
        self
    }

    /// The shard's open partition files and their bound.
    pub fn files(&self) -> &FileBudget {
        &self.files
    }

    /// A topic's metadata. Internal topics are not in the registry (hidden from clients) but
    /// open here too (`crate::internal_topics::replicated`).
    fn topic(&self, topic: &str) -> Option<Arc<crate::topics::TopicMeta>> {
        self.registry
            .get(topic)
            .or_else(|| self.cluster.as_ref()?.internal_topic(topic))
    }

    /// `topic`'s settings on this broker ([`TopicSettings::of_topic`] of its current `meta`),
    /// parsed once per config change on this shard ([`SettingsCache`]).
    pub fn cached_settings(&self, topic: &str, meta: &Arc<TopicMeta>) -> Settled {
        let parse = || TopicSettings::of_topic(&self.config, &self.registry, &meta.configs);
        self.settings.settings(&self.registry, topic, meta, parse)
    }

    /// A topic's settings, `min.insync.replicas` from the cluster's default unless the topic
    /// sets it.
    fn topic_settings(
        &self,
        topic: &str,
        meta: &Arc<TopicMeta>,
    ) -> Result<TopicSettings, crate::config::topic::RefusedConfig> {
        let mut settings = TopicSettings::clone(&*self.cached_settings(topic, meta)?);
        let cluster = self.cluster.as_deref();
        settings.min_insync_replicas =
            min_insync_replicas_of(cluster, &meta.configs, settings.min_insync_replicas);
        Ok(settings)
    }

    /// The settings an actor opens a partition with: its log config, compaction,
    /// `min.insync.replicas` and tier.
    fn partition_settings(
        &self,
        topic: &str,
        meta: &Arc<TopicMeta>,
        partition: PartitionIndex,
    ) -> Result<PartitionSettings, ErrorCode> {
        let settings = self.topic_settings(topic, meta).map_err(|e| {
            tracing::error!(topic, error = %e, "stored topic config is invalid");
            ErrorCode::InvalidConfig
        })?;
        let mut config = settings.log;
        let tier = self.tier_setup(topic, meta.id, partition, settings.remote, &mut config);
        let compaction = settings.compaction;
        Ok((config, compaction, settings.min_insync_replicas, tier))
    }

    /// What a tiered topic's partition needs to copy to and read from the remote tier
    /// (`None`: the topic or the broker is not tiered; a cluster's replicas are not yet). A
    /// tiered topic's partition that is not tiered here keeps the total retention in `config`:
    /// local retention must never run ungated.
    fn tier_setup(
        &self,
        topic: &str,
        topic_id: uuid::Uuid,
        partition: PartitionIndex,
        remote: Option<crate::config::topic::RemoteRetention>,
        config: &mut rill_engine::LogConfig,
    ) -> Option<crate::tiered::tier::TierSetup> {
        let remote = remote?;
        let Some(shard) = self.tier.clone().filter(|_| self.cluster.is_none()) else {
            tracing::warn!(
                topic,
                "tiered storage is single-node only for now: not copied"
            );
            (config.retention_ms, config.retention_bytes) =
                (remote.retention_ms, remote.retention_bytes);
            return None;
        };
        let keys = crate::tiered::keys::PartitionKeys::new(
            &shard.settings.prefix,
            topic,
            topic_id,
            partition,
        );
        Some(crate::tiered::tier::TierSetup {
            shard,
            keys,
            retention_ms: remote.retention_ms,
            retention_bytes: remote.retention_bytes,
        })
    }

    /// The slot of a partition that has an actor (running or closing) or is being deleted;
    /// `None` when a new actor may open it.
    fn existing(&self, tp: TopicPartitionRef<'_>) -> Option<Result<Slot, ErrorCode>> {
        let key = tp.key();
        if let Some(handle) = self.partitions.borrow().get(key) {
            if !handle.stopped.get() {
                return Some(Ok(Slot::Open(handle.clone())));
            }
            if !handle.finished.is_fired() {
                return Some(Ok(Slot::Closing(handle.finished.clone())));
            }
        }
        // What Kafka answers for a partition of a topic being deleted (retriable).
        let deleting = self.deleting.borrow().contains_key(key);
        deleting.then_some(Err(ErrorCode::UnknownTopicOrPartition))
    }

    /// The running actor of a partition, starting it if the partition exists but is not open.
    /// Existence is checked here only when it opens: an open actor's lookup is the map's.
    fn handle(&self, tp: TopicPartitionRef<'_>) -> Result<Slot, ErrorCode> {
        if self.closed.get() {
            return Err(ErrorCode::KafkaStorageError);
        }
        if let Some(slot) = self.existing(tp) {
            return slot;
        }
        let meta = self
            .topic(tp.topic)
            .ok_or(ErrorCode::UnknownTopicOrPartition)?;
        if !tp.partition.is_within(meta.partitions) {
            return Err(ErrorCode::UnknownTopicOrPartition);
        }
        let generation = self.registry.config_generation();
        let (config, compaction, min_insync_replicas, tier) =
            self.partition_settings(tp.topic, &meta, tp.partition)?;
        let (mailbox, receiver) = mpsc::channel(self.config.partition_queue_max);
        let handle = Rc::new(PartitionHandle {
            mailbox,
            watch: Rc::new(PartitionWatch::default()),
            stopped: Rc::new(Cell::new(false)),
            finished: Rc::new(ShutdownSignal::default()),
            files: Rc::new(Cell::new(0)),
            last_use: Cell::new(0),
            release_asked: Cell::new(u64::MAX),
        });
        let setup = ActorSetup {
            log_manager: self.log_manager.clone(),
            tp: tp.owned(),
            config,
            clock: self.clock.clone(),
            retention_check_interval_ms: self.config.log.retention_check_interval_ms,
            idle_release_ms: self.config.partition_idle_ms,
            files: FileShare::new(self.files.clone(), handle.files.clone()),
            compaction: compaction.filter(|_| self.cleaner.enabled()),
            cleaner: self.cleaner.clone(),
            configs: ConfigWatch {
                registry: self.registry.clone(),
                broker: self.config.clone(),
                generation,
                settings: self.settings.clone(),
            },
            open_permits: self.open_permits.clone(),
            cluster: self.cluster.clone(),
            mailbox: self.cluster.as_ref().map(|_| handle.mailbox.clone()),
            min_insync_replicas,
            tier,
            replica_lag_time_max_ms: self
                .cluster
                .as_ref()
                .map_or(0, |c| c.config().replica_lag_time_max_ms),
        };
        self.start_file_keeper();
        let task = run_actor(
            setup,
            receiver,
            handle.watch.clone(),
            handle.stopped.clone(),
            handle.finished.clone(),
        );
        // Counted now, not when the task first runs: readiness must see it before the shard
        // listens (the actor counts the open done).
        crate::admin::shard::hooks::log_opening();
        let join = glommio::spawn_local(task).detach();
        self.actors.borrow_mut().push(join);
        let key = tp.owned(); // the one copy of the name, as it opens
        self.partitions.borrow_mut().insert(key, handle.clone());
        Ok(Slot::Open(handle))
    }

    /// Starts the task that keeps the shard's open files within budget (once).
    fn start_file_keeper(&self) {
        if let Some(wake) = self.keeper_wake.borrow_mut().take() {
            let keeper =
                keep_files_within_budget(self.files.clone(), wake, self.partitions.clone());
            glommio::spawn_local(keeper).detach();
        }
    }

    /// The running actor of a partition (see [`Self::handle`]), marked as just used.
    async fn use_handle(
        &self,
        tp: TopicPartitionRef<'_>,
    ) -> Result<Rc<PartitionHandle>, ErrorCode> {
        let handle = loop {
            match self.handle(tp)? {
                Slot::Open(handle) => break handle,
                // One actor per directory: the next opens once the last has closed its log.
                Slot::Closing(finished) => finished.wait().await,
            }
        };
        self.uses.set(self.uses.get() + 1);
        handle.last_use.set(self.uses.get());
        Ok(handle)
    }

    /// Run `op` on a partition this shard owns.
    pub async fn call(&self, tp: TopicPartitionRef<'_>, op: PartitionOp) -> PartitionReply {
        if let Some(log) = self.internal_log(tp) {
            return log.serve(op, glommio::timer::sleep).await;
        }
        match op {
            PartitionOp::WaitForData {
                from,
                wait_ms,
                isolation,
            } => {
                let handle = match self.use_handle(tp).await {
                    Ok(handle) => handle,
                    Err(code) => return PartitionReply::Error(code),
                };
                let wait = Duration::from_millis(wait_ms);
                handle
                    .watch
                    .wait_for_data(from, isolation, glommio::timer::sleep, wait)
                    .await;
                PartitionReply::Waited
            }
            PartitionOp::Delete => self.delete(tp).await,
            op => match self.use_handle(tp).await {
                Ok(handle) => send(&handle, op).await,
                Err(code) => PartitionReply::Error(code),
            },
        }
    }

    /// Deletes the partition's directory: through its actor when one runs (it closes its log
    /// first), else directly once any closing actor is done. No actor opens it meanwhile, and a
    /// delete that finds another under way waits for the actor that one asked to delete: that
    /// actor may still be opening the directory (a second DeleteTopics of a topic just
    /// re-created removed it under the open, and glommio's open panicked on the vanished path).
    async fn delete(&self, tp: TopicPartitionRef<'_>) -> PartitionReply {
        let key = tp.owned();
        let earlier = {
            let mut deleting = self.deleting.borrow_mut();
            let entry = deleting.entry(key.clone()).or_default();
            entry.running += 1;
            entry.actor_finished.clone()
        };
        let open = self.partitions.borrow_mut().remove(&key);
        let reply = match open {
            Some(handle) if !handle.stopped.get() => {
                assert!(
                    earlier.is_none(),
                    "no actor opens a partition being deleted"
                );
                if let Some(entry) = self.deleting.borrow_mut().get_mut(&key) {
                    entry.actor_finished = Some(handle.finished.clone());
                }
                let reply = send(&handle, PartitionOp::Delete).await;
                handle.finished.wait().await;
                reply
            }
            closing => {
                if let Some(handle) = closing {
                    handle.finished.wait().await; // a released actor may still be closing
                }
                if let Some(finished) = earlier {
                    finished.wait().await; // the earlier delete's actor may still be opening
                }
                match self.log_manager.delete_partition(tp).await {
                    Ok(()) => PartitionReply::Deleted,
                    Err(e) => {
                        let (topic, partition) = (tp.topic, tp.partition.0);
                        tracing::error!(topic, partition, error = %e, "deleting partition failed");
                        PartitionReply::Error(ErrorCode::KafkaStorageError)
                    }
                }
            }
        };
        let mut deleting = self.deleting.borrow_mut();
        let entry = deleting.get_mut(&key).expect("counted above");
        entry.running -= 1;
        if entry.running == 0 {
            deleting.remove(&key);
        }
        reply
    }

    /// Open every partition this shard owns that exists on disk (recovery runs now, not on the
    /// first request).
    pub async fn open_owned(&self, owns: impl Fn(TopicPartitionRef<'_>) -> bool) {
        for (topic, meta) in self.registry.list() {
            for partition in PartitionIndex::all(meta.partitions) {
                let tp = TopicPartitionRef::new(&topic, partition);
                if owns(tp) && self.has_files(tp).await {
                    let _ = self.handle(tp);
                }
            }
        }
    }

    /// Whether the partition has a directory: one never used has nothing to recover and opens
    /// (is created) on its first request, costing nothing until then.
    async fn has_files(&self, tp: TopicPartitionRef<'_>) -> bool {
        let dir = self.log_manager.partition_dir(tp);
        self.log_manager
            .storage()
            .exists(&dir)
            .await
            .unwrap_or(true)
    }

    /// Close every log cleanly (shutdown): close the mailboxes, then wait for each actor to
    /// finish its queued work, flush and close.
    pub async fn close_all(&self) {
        self.closed.set(true);
        let handles: Vec<_> = self.partitions.borrow_mut().drain().collect();
        for (_, handle) in handles {
            handle.mailbox.clone().close_channel();
        }
        let actors: Vec<_> = self.actors.borrow_mut().drain(..).collect();
        futures::future::join_all(actors).await;
    }
}

/// The file keeper: whenever the shard holds more partition files than its budget, asks the
/// least recently used partitions holding files to release them, round after round, until the
/// shard is back under the budget's target or nothing is left to ask.
async fn keep_files_within_budget(
    budget: Rc<FileBudget>,
    mut wake: mpsc::UnboundedReceiver<()>,
    partitions: Rc<RefCell<PartitionMap>>,
) {
    while wake.next().await.is_some() {
        while budget.over() {
            let asked = ask_least_recently_used_to_release(&budget, &partitions);
            tracing::debug!(
                open = budget.open(),
                max = budget.max(),
                asked,
                "over the open-file budget"
            );
            if asked == 0 {
                break;
            }
            glommio::timer::sleep(KEEPER_PAUSE).await;
        }
        budget.rearm();
    }
}

/// One round of the keeper: sends `Release` to as many of the least recently used partitions
/// (holding files, not asked since their last use) as it takes to reach the target. Returns how
/// many were asked. Answers are not awaited: the partitions release concurrently.
fn ask_least_recently_used_to_release(
    budget: &FileBudget,
    partitions: &RefCell<PartitionMap>,
) -> usize {
    let mut holding: Vec<Rc<PartitionHandle>> = partitions
        .borrow()
        .values()
        .filter(|h| h.files.get() > 0 && !h.stopped.get())
        .filter(|h| h.release_asked.get() != h.last_use.get())
        .cloned()
        .collect();
    holding.sort_unstable_by_key(|h| h.last_use.get());
    let count = releases_needed(
        holding.iter().map(|h| h.files.get()),
        budget.open(),
        budget.target(),
    );
    let mut asked = 0;
    for handle in &holding[..count] {
        handle.release_asked.set(handle.last_use.get());
        let (reply, _) = oneshot::channel();
        let msg = ActorMsg {
            op: PartitionOp::Release,
            queued: std::time::Instant::now(),
            reply,
        };
        // A full mailbox means a busy partition: skip it this round.
        if handle.mailbox.clone().try_send(msg).is_ok() {
            asked += 1;
        }
    }
    asked
}

async fn send(handle: &PartitionHandle, op: PartitionOp) -> PartitionReply {
    let (reply, answer) = oneshot::channel();
    let mut mailbox = handle.mailbox.clone();
    if mailbox
        .send(ActorMsg {
            op,
            queued: std::time::Instant::now(),
            reply,
        })
        .await
        .is_err()
    {
        return PartitionReply::Error(ErrorCode::KafkaStorageError);
    }
    answer
        .await
        .unwrap_or(PartitionReply::Error(ErrorCode::UnknownTopicOrPartition))
}

impl<S: Storage + 'static> crate::shard::service::Service<super::ops::PartitionCall>
    for PartitionTable<S>
{
    type Reply = PartitionReply;

    async fn serve(&self, call: super::ops::PartitionCall) -> PartitionReply {
        self.call(call.tp.borrowed(), call.op).await
    }

    /// A long-poll wait is dropped once its fetch completed through another partition, so
    /// parked waits do not pile up.
    fn abandon_unheard(call: &super::ops::PartitionCall) -> bool {
        matches!(call.op, PartitionOp::WaitForData { .. })
    }
}

/// `min.insync.replicas` of a topic: its own config, else the cluster's default, else the
/// broker's (`from_settings`). Read when a partition opens and again when configs change.
pub(crate) fn min_insync_replicas_of(
    cluster: Option<&crate::cluster::view::ClusterView>,
    topic_configs: &std::collections::BTreeMap<String, String>,
    from_settings: i32,
) -> i32 {
    match cluster {
        Some(c) if !topic_configs.contains_key("min.insync.replicas") => {
            i32::from(c.config().min_insync_replicas)
        }
        _ => from_settings,
    }
}
