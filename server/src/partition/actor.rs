//! The partition actor: the one task on the owning shard that touches a partition's log.
//!
//! It drains its mailbox in groups: every queued append is written, then the log is flushed
//! once for the whole group (group commit, one fdatasync), then acks=all producers are answered
//! and the new high watermark is published to waiting fetches; only then are the group's reads
//! and lookups served. acks=0/1 are answered right after their append. Reads, offset lookups and
//! deletes go through the same mailbox, so nothing else ever needs to borrow the log — no
//! `RefCell` held across an `.await`.
//!
//! A read never holds the actor while the disk works: one whose bytes are still being
//! loaded ([`PartitionLog::prepare_read`]) is parked until they are in memory and served then,
//! so a catch-up consumer's reads do not delay a producer's appends and acks.
//!
//! A compacted partition also plans cleans (every `log.cleaner.backoff.ms`) and hands them to
//! the shard's cleaner, whose task sends each cleaned group back here to be swapped in
//! (`crate::compaction::shard_cleaner`).

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::channel::local::{mpsc, oneshot};
use futures::future::{select, Either, LocalBoxFuture};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use rill_engine::cleaner::CompactionConfig;
use rill_engine::io::{Clock, Storage};
use rill_engine::{
    EngineError, FlushPolicy, LogConfig, LogManager, PartitionLog, Positions, TxnMarker,
};
use rill_types::batch::ValidatedBatch;
use rill_types::{DurationMs, Offset, TimestampMs, TopicPartition, TopicPartitionRef};

use crate::admin::bound_hits::Bound;
use crate::admin::shard::hooks;
use crate::admin::state::PartitionStats;

use super::file_budget::FileShare;
use super::ops::{Acks, Isolation, PartitionOp, PartitionReply, INTERNAL_ACK_TIMEOUT};
use super::txn_guard::{Admit, TxnGuards};
use super::watch::PartitionWatch;
use crate::compaction::{CleanEvent, ShardCleaner};
use crate::config::settings::BrokerConfig;
use crate::config::topic::TopicSettings;
use crate::shutdown::ShutdownSignal;
use crate::topics::TopicRegistry;
use rill_protocol::ErrorCode;

mod replicated;
use replicated::{
    is_replication_op, DurableWaiter, EpochFloor, HwCheckpoint, Replication, REPLICATED_TICK_MS,
};

use crate::tiered::tier::{PartitionTier, TierEvent};

/// Most mailbox messages handled as one group (bounds the latency of the first in the group).
pub const GROUP_OPS_MAX: usize = 256;

/// Least time between attempts to reopen a failed log (a full disk fails each write again).
const REOPEN_INTERVAL_MS: DurationMs = DurationMs(500);

/// Whether an idle partition should release its memory now: idle for `idle_ms`
/// (`rill.partition.idle.ms`) and not released since its last message. A released partition
/// (`PartitionLog::release_idle_memory`) costs a few KiB, no open file and no preallocation.
fn idle_release_due(
    last_activity_ms: TimestampMs,
    now_ms: TimestampMs,
    released: bool,
    idle_ms: u64,
) -> bool {
    !released && now_ms.saturating_since(last_activity_ms) >= span(idle_ms)
}

/// A configured `u64` interval as a span, cast as the `i64` arithmetic it replaced cast it.
fn span(ms: u64) -> DurationMs {
    DurationMs(ms as i64)
}

/// One mailbox message.
#[derive(Debug)]
pub struct ActorMsg {
    /// What to do.
    pub op: PartitionOp,
    /// When it was sent (how long it waited in the mailbox).
    pub queued: Instant,
    /// Where the answer goes.
    pub reply: oneshot::Sender<PartitionReply>,
}

/// Shard-side handle to a running actor.
#[derive(Debug)]
pub struct PartitionHandle {
    /// The mailbox (bounded: a full mailbox makes senders wait — back-pressure).
    pub mailbox: mpsc::Sender<ActorMsg>,
    /// Published high watermark and parked fetches.
    pub watch: Rc<PartitionWatch>,
    /// Set when the actor stopped (open failed, deleted, closed): the table must not reuse it.
    pub stopped: Rc<Cell<bool>>,
    /// Fired when the actor's task has ended: its log closed and, when asked, its directory
    /// deleted. A stopped actor still owns the directory until then, so no other may open it.
    pub finished: Rc<ShutdownSignal>,
    /// Files the partition's log holds open (published by the actor).
    pub files: Rc<Cell<usize>>,
    /// When the table last routed a request here (the table's own clock of requests).
    pub last_use: Cell<u64>,
    /// The `last_use` at which the table last asked for a release (none yet: `u64::MAX`).
    pub release_asked: Cell<u64>,
}

/// Everything an actor needs to open and run its log.
pub struct ActorSetup<S: Storage> {
    /// Opens and deletes partition directories.
    pub log_manager: Rc<LogManager<S>>,
    /// The partition.
    pub tp: TopicPartition,
    /// Effective log config (broker defaults + topic overrides).
    pub config: LogConfig,
    /// Injected wall clock.
    pub clock: Rc<dyn Clock>,
    /// How often retention runs.
    pub retention_check_interval_ms: u64,
    /// Release memory, preallocation and files after this long without a message.
    pub idle_release_ms: u64,
    /// This partition's part of the shard's open-file budget.
    pub files: FileShare,
    /// Compaction settings when the topic is compacted (and the cleaner enabled).
    pub compaction: Option<CompactionConfig>,
    /// The shard's cleaner.
    pub cleaner: Rc<ShardCleaner>,
    /// Where changed configs come from (AlterConfigs), to apply them live.
    pub configs: ConfigWatch,
    /// Logs the shard opens at once (shared by its actors).
    pub open_permits: Rc<glommio::sync::Semaphore>,
    /// The cluster (`None` on a single node): a replicated partition follows its role there.
    pub cluster: Option<Arc<crate::cluster::view::ClusterView>>,
    /// The actor's own mailbox, for its follower fetcher (`crate::replication::fetcher`).
    pub mailbox: Option<mpsc::Sender<ActorMsg>>,
    /// `min.insync.replicas` of the topic (acks=all on a replicated leader).
    pub min_insync_replicas: i32,
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// Tiered storage, when the topic and the broker enable it (`crate::tiered`).
    pub tier: Option<crate::tiered::tier::TierSetup>,
}

/// The registry and broker config a partition's settings come from, and the registry's config
/// generation they were computed at.
pub struct ConfigWatch {
    /// Topic and dynamic broker configs.
    pub registry: Arc<TopicRegistry>,
    /// The broker's static config.
    pub broker: Arc<BrokerConfig>,
    /// `registry.config_generation()` when the settings were computed.
    pub generation: u64,
    /// The shard's parsed topic settings (the partition table's), shared by its partitions.
    pub settings: Rc<crate::config::topic::cache::SettingsCache>,
}

/// Spawnable body of the actor: open the log, serve the mailbox until it closes, close the log.
pub async fn run_actor<S: Storage + 'static>(
    setup: ActorSetup<S>,
    mailbox: mpsc::Receiver<ActorMsg>,
    watch: Rc<PartitionWatch>,
    stopped: Rc<Cell<bool>>,
    finished: Rc<ShutdownSignal>,
) {
    serve_and_close(setup, mailbox, watch, stopped).await;
    finished.fire();
}

/// [`run_actor`] up to the end of its task.
async fn serve_and_close<S: Storage + 'static>(
    setup: ActorSetup<S>,
    mut mailbox: mpsc::Receiver<ActorMsg>,
    watch: Rc<PartitionWatch>,
    stopped: Rc<Cell<bool>>,
) {
    // Large futures (recovery, a group's appends, close) are boxed while they run: the actor's
    // own future stays small between messages, which is most of an idle partition's memory.
    let mut actor = match open_actor(setup, watch.clone()).await {
        Ok(actor) => actor,
        Err(code) => {
            stopped.set(true);
            watch.close();
            fail_all(&mut mailbox, code);
            return;
        }
    };
    // Its own step, boxed: awaited inside `open_actor`, it kept room for a second log in every
    // partition's future (issue 33's footprint test: 2,000 partitions, +2.4 KiB each).
    if let Err(code) = Box::pin(actor.open_tier()).await {
        stopped.set(true);
        watch.close();
        fail_all(&mut mailbox, code);
        return;
    }
    Box::pin(actor.sync_role()).await;
    actor.publish();
    let delete_reply = actor.serve(&mut mailbox).await;
    stopped.set(true);
    actor.watch.close();
    mailbox.close();
    fail_all(&mut mailbox, ErrorCode::UnknownTopicOrPartition);
    Box::pin(actor.shut_down(delete_reply)).await;
}

/// Opens the partition's log (at most [`ActorSetup::open_permits`] at once on the shard, so
/// thousands of partitions opening at start-up do not all hold their recovery's buffers at the
/// same time) and builds its actor.
async fn open_actor<S: Storage + 'static>(
    setup: ActorSetup<S>,
    watch: Rc<PartitionWatch>,
) -> Result<Actor<S>, ErrorCode> {
    let tp = setup.tp.borrowed();
    let (topic, partition) = (tp.topic, tp.partition.0);
    let stats = hooks::partition(tp);
    let opened = {
        let _permit = setup.open_permits.acquire_permit(1).await;
        // Boxed only now: the partitions waiting for a permit hold no recovery state.
        let manager = &setup.log_manager;
        let (config, clock) = (setup.config.clone(), setup.clock.clone());
        Box::pin(manager.open_partition(tp, config, clock)).await
    };
    hooks::log_opened(); // counted as opening where the actor was spawned
    let log = opened.map_err(|e| {
        tracing::error!(topic, partition, error = %e, "cannot open partition log");
        if let Some(stats) = &stats {
            stats.failed.store(true, Ordering::Relaxed);
        }
        e.kafka_error_code()
    })?;
    tracing::debug!(topic, partition, "partition log open");
    setup.files.publish(log.open_files());
    if let Some(stats) = &stats {
        stats.failed.store(false, Ordering::Relaxed);
        stats.online.store(true, Ordering::Relaxed);
    }
    let last_activity_ms = setup.clock.now();
    Ok(Actor {
        log: Some(log),
        tier: None, // opened by `open_tier`, boxed: see `serve_and_close`
        last_tier_ms: TimestampMs(0),
        last_retention_ms: TimestampMs(0),
        last_reopen_ms: TimestampMs(0),
        last_activity_ms,
        idle_released: false,
        stats,
        clean: None,
        last_clean_check_ms: TimestampMs(0),
        last_maintenance_ms: last_activity_ms,
        txn_guards: TxnGuards::default(),
        jitter: jitter(tp),
        parked: None,
        last_durable_flush: None,
        hw_checkpoint: HwCheckpoint::default(),
        epoch_floor: EpochFloor::default(),
        replication: if setup.cluster.is_some() {
            Replication::Opened
        } else {
            Replication::Off
        },
        setup,
        watch,
    })
}

/// A fixed pseudo-random 0..1000 per partition (a hash of its name), to spread timers.
fn jitter(tp: TopicPartitionRef<'_>) -> u16 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tp.hash(&mut hasher);
    (hasher.finish() % 1000) as u16
}

/// Answer every queued message with `code` (the actor is going away).
fn fail_all(mailbox: &mut mpsc::Receiver<ActorMsg>, code: ErrorCode) {
    mailbox.close();
    while let Ok(msg) = mailbox.try_recv() {
        let _ = msg.reply.send(PartitionReply::Error(code));
    }
}

struct Actor<S: Storage> {
    /// `Some` while open; taken by `close`.
    log: Option<PartitionLog<S>>,
    /// The partition's part in the remote tier (a tiered topic's).
    tier: Option<Box<PartitionTier>>,
    /// When the tier last looked for work (`rill.remote.task.interval.ms`).
    last_tier_ms: TimestampMs,
    setup: ActorSetup<S>,
    watch: Rc<PartitionWatch>,
    last_retention_ms: TimestampMs,
    /// When a failed log was last reopened (see [`Actor::reopen_if_failed`]).
    last_reopen_ms: TimestampMs,
    /// When the last mailbox message arrived (drives [`IDLE_RELEASE_MS`]).
    last_activity_ms: TimestampMs,
    /// Whether the log's memory was released since the last message.
    idle_released: bool,
    /// Where the admin listener reads this partition's positions and traffic.
    stats: Option<Arc<PartitionStats>>,
    /// The clean of this log in flight (dropping it cancels the clean).
    clean: Option<CleanInFlight>,
    /// When the actor last asked the log whether a clean is due.
    last_clean_check_ms: TimestampMs,
    /// When time-driven work last ran: it also runs between messages once a tick is overdue,
    /// so a partition that never goes quiet still gets its retention, flushes and cleans.
    last_maintenance_ms: TimestampMs,
    /// Transactional producers' first appends awaiting their coordinator (KIP-890).
    txn_guards: TxnGuards,
    /// This partition's stretch of its tick, in thousandths of a quarter (from its name).
    jitter: u16,
    /// Reads waiting for their bytes to load from disk, each resolving to its message
    /// once they are in memory (see the module doc); `None` until the first (an idle actor
    /// stays small).
    parked: Option<FuturesUnordered<LocalBoxFuture<'static, ActorMsg>>>,
    /// This partition's part in replication (`replicated.rs`).
    replication: Replication,
    /// The high watermark last checkpointed (a replicated log's, see `replicated.rs`).
    hw_checkpoint: HwCheckpoint,
    /// The newest leader epoch a role was taken at (asserted never to go back).
    epoch_floor: EpochFloor,
    /// When a flush that acks=all producers waited on last ended (holds read-ahead, see
    /// [`Actor::hold_read_ahead_if_writing`]).
    last_durable_flush: Option<Instant>,
}

/// A clean running in the shard cleaner's task queue, and where its results arrive.
struct CleanInFlight {
    task: glommio::Task<()>,
    events: mpsc::Receiver<CleanEvent>,
}

enum Next {
    Msg(ActorMsg),
    /// A tier job ended.
    Tier(TierEvent),
    /// A parked read whose bytes are loaded.
    Unparked(ActorMsg),
    Tick,
    Closed,
    Clean(Option<CleanEvent>),
}

impl<S: Storage + 'static> Actor<S> {
    /// A tiered partition's remote tier, opened beside its log. Without its metadata a tiered
    /// log must not run (local retention would not be gated): the log is closed.
    async fn open_tier(&mut self) -> Result<(), ErrorCode> {
        let Some(setup) = self.setup.tier.clone() else {
            return Ok(());
        };
        let log = self.log.as_mut().expect("a log just opened");
        match PartitionTier::open(setup, log).await {
            Ok(tier) => {
                self.tier = Some(Box::new(tier));
                Ok(())
            }
            Err(e) => {
                let (topic, partition) = (&self.setup.tp.topic, self.setup.tp.partition.0);
                tracing::error!(topic, partition, error = %e, "cannot read the remote log metadata");
                if let Some(log) = self.log.take() {
                    let _ = log.close().await;
                }
                Err(ErrorCode::KafkaStorageError)
            }
        }
    }

    fn log(&mut self) -> &mut PartitionLog<S> {
        self.log
            .as_mut()
            .expect("log is open while the actor serves")
    }

    /// The log's positions; a tiered log's start is the remote tier's first offset.
    fn positions(&mut self) -> Positions {
        let positions = self.log().positions();
        positions.check();
        match self.tier.as_ref().and_then(|t| t.earliest_offset()) {
            Some(remote_start) => positions.with_log_start_at_most(remote_start),
            None => positions,
        }
    }

    fn publish(&mut self) {
        let positions = self.log().positions();
        let hw = positions.high_watermark();
        self.watch.publish(hw, positions.last_stable());
        self.watch.publish_log_end(positions.log_end());
        let Some(stats) = self.stats.clone() else {
            return;
        };
        let log_start = self.positions().log_start();
        let log = self.log();
        let store = |a: &std::sync::atomic::AtomicI64, o: Offset| a.store(o.0, Ordering::Relaxed);
        store(&stats.log_start_offset, log_start);
        store(&stats.log_end_offset, log.log_end_offset());
        store(&stats.high_watermark, hw);
        store(&stats.last_stable_offset, log.last_stable_offset());
        stats
            .segments
            .store(log.segment_count() as u64, Ordering::Relaxed);
        stats.log_bytes.store(log.size_bytes(), Ordering::Relaxed);
        store(&stats.local_log_start_offset, log.log_start_offset());
        let (segments, bytes) = self.tier.as_ref().map_or((0, 0), |t| t.extent());
        stats.remote_segments.store(segments, Ordering::Relaxed);
        stats.remote_bytes.store(bytes, Ordering::Relaxed);
    }

    /// `log.flush()`, timed for the flush-duration histogram.
    async fn timed_flush(&mut self) -> Result<Offset, EngineError> {
        let started = Instant::now();
        let flushed = self.log().flush().await;
        hooks::log_flushed(started.elapsed());
        flushed
    }

    /// Serve until the mailbox closes or a Delete arrives (whose reply is returned).
    async fn serve(
        &mut self,
        mailbox: &mut mpsc::Receiver<ActorMsg>,
    ) -> Option<oneshot::Sender<PartitionReply>> {
        loop {
            let next = self.next(mailbox).await;
            if self.log().is_failed() {
                Box::pin(self.reopen_if_failed()).await;
            }
            if self.setup.cluster.is_some() {
                Box::pin(self.sync_role()).await;
                if self.log.is_none() {
                    // Lost reopening in a new role: stop (the table reopens it on next use).
                    if let Next::Msg(msg) | Next::Unparked(msg) = next {
                        Self::refuse(msg);
                    }
                    return None;
                }
            }
            let first = match next {
                Next::Msg(msg) => msg,
                Next::Tick => {
                    self.advance_high_watermark();
                    self.maybe_alter_isr();
                    Box::pin(self.maintenance()).await;
                    self.publish_files();
                    continue;
                }
                Next::Clean(event) => {
                    Box::pin(self.on_clean_event(event)).await;
                    continue;
                }
                Next::Tier(event) => {
                    Box::pin(self.on_tier_event(event)).await;
                    continue;
                }
                Next::Unparked(msg) => {
                    Box::pin(self.serve_unparked(msg)).await;
                    continue;
                }
                Next::Closed => return None,
            };
            self.last_activity_ms = self.setup.clock.now();
            self.idle_released = false;
            if self.setup.configs.registry.config_generation() != self.setup.configs.generation {
                Box::pin(self.refresh_config()).await; // boxed: rare, and kept out of the idle future
            }
            let mut group = Vec::with_capacity(8);
            group.push(first);
            while group.len() < GROUP_OPS_MAX {
                match mailbox.try_recv() {
                    Ok(msg) => group.push(msg),
                    _ => break,
                }
            }
            let delete_reply = Box::pin(self.serve_group(group)).await;
            // A log lost with a failed truncation: stop (the table reopens it on next use).
            self.log.as_ref()?;
            self.publish_files();
            if let Some(delete_reply) = delete_reply {
                return Some(delete_reply);
            }
            let now = self.setup.clock.now();
            if now - self.last_maintenance_ms >= span(self.tick_ms()) {
                Box::pin(self.maintenance()).await;
            }
        }
    }

    /// A parked read whose bytes are loaded. Local retention may have deleted them
    /// meanwhile, once copied to the remote tier: it is then read from there.
    async fn serve_unparked(&mut self, msg: ActorMsg) {
        if self.parked.as_ref().is_some_and(FuturesUnordered::is_empty) {
            self.parked = None;
        }
        self.hold_read_ahead_if_writing();
        let Some(msg) = self.try_remote_read(msg).await else {
            return;
        };
        let reply = self.serve_other(msg.op).await;
        let _ = msg.reply.send(reply);
    }

    /// Tells the shard how many files the log holds open now.
    fn publish_files(&mut self) {
        let files = self.log.as_ref().map_or(0, PartitionLog::open_files);
        self.setup.files.publish(files);
    }

    /// A log whose write or sync failed (a full disk, an I/O error) refuses everything, reads
    /// included, until reopened. Reopen it — recovery keeps every durable batch and cuts what
    /// never became durable — so reads resume at once and writes as soon as space returns,
    /// without a broker restart. The failed instance is inert; it is dropped once the new one
    /// is open (and kept, still failed, if reopening fails: the next attempt comes later).
    async fn reopen_if_failed(&mut self) {
        let now = self.setup.clock.now();
        if !self.log().is_failed() || now - self.last_reopen_ms < REOPEN_INTERVAL_MS {
            return;
        }
        self.last_reopen_ms = now;
        self.cancel_clean().await; // recovery must not race a clean's files
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        let high_watermark = self.log().high_watermark();
        match self.open_again(high_watermark).await {
            Ok(mut log) => {
                // Replication, not recovery, decides what a replicated log exposes.
                assert!(
                    !log.is_replicated()
                        || log.high_watermark() <= high_watermark.max(log.log_start_offset()),
                    "a reopened replicated log exposes no more than before"
                );
                if let Some(tier) = &self.tier {
                    tier.apply_gate(&mut log);
                }
                drop(self.log.replace(log));
                self.publish_files();
                tracing::warn!(
                    topic,
                    partition,
                    "reopened partition log after a write failure"
                );
                self.publish();
            }
            Err(e) => tracing::error!(topic, partition, error = %e, "reopening failed log failed"),
        }
    }

    /// Moves the log start to `before` (DeleteRecords; on a follower, the leader's log start),
    /// deleting the segments wholly below it, and publishes it; logs `why`.
    async fn move_log_start(
        &mut self,
        before: Offset,
        why: &'static str,
    ) -> Result<Offset, EngineError> {
        let start = self.log().delete_records_before(before).await?;
        let (topic, partition) = (&self.setup.tp.topic, self.setup.tp.partition.0);
        tracing::info!(topic, partition, log_start = start.0, "{why}");
        self.publish();
        Ok(start)
    }

    /// Opens this partition's log again (after a write failure, or a cut divergent tail) in
    /// the part replication gives this replica, exposing at most `high_watermark` if it is
    /// replicated (recovery alone would expose the whole log and stop stamping epochs).
    async fn open_again(&self, high_watermark: Offset) -> Result<PartitionLog<S>, EngineError> {
        let mut log = self
            .setup
            .log_manager
            .open_partition(
                self.setup.tp.borrowed(),
                self.setup.config.clone(),
                self.setup.clock.clone(),
            )
            .await?;
        self.resume_role(&mut log, high_watermark);
        Ok(log)
    }

    /// The next message, a parked read now loaded, a clean's result, or a tick when the flush
    /// interval, retention check or clean check is due.
    async fn next(&mut self, mailbox: &mut mpsc::Receiver<ActorMsg>) -> Next {
        let tick = Duration::from_millis(self.tick_ms());
        let sleep = glommio::timer::sleep(tick);
        futures::pin_mut!(sleep);
        let (clean, parked, tier) = (&mut self.clean, &mut self.parked, &mut self.tier);
        let tiered = async {
            match tier.as_mut() {
                Some(tier) => tier.next_event().await,
                None => std::future::pending().await,
            }
        };
        futures::pin_mut!(tiered);
        let clean = async {
            match clean.as_mut() {
                Some(clean) => clean.events.next().await,
                None => std::future::pending().await,
            }
        };
        futures::pin_mut!(clean);
        let unparked = async {
            match parked {
                Some(parked) if !parked.is_empty() => parked.next().await.expect("not empty"),
                _ => std::future::pending().await,
            }
        };
        futures::pin_mut!(unparked);
        let timed = select(sleep, clean);
        let events = select(select(mailbox.next(), unparked), timed);
        match select(events, tiered).await {
            Either::Left((Either::Left((Either::Left((Some(msg), _)), _)), _)) => Next::Msg(msg),
            Either::Left((Either::Left((Either::Left((None, _)), _)), _)) => Next::Closed,
            Either::Left((Either::Left((Either::Right((msg, _)), _)), _)) => Next::Unparked(msg),
            Either::Left((Either::Right((Either::Left(_), _)), _)) => Next::Tick,
            Either::Left((Either::Right((Either::Right((event, _)), _)), _)) => Next::Clean(event),
            Either::Right((event, _)) => Next::Tier(event),
        }
    }

    /// Time to the next tick: the flush interval, retention check, clean check or idle
    /// release, whichever comes first (a released partition has no release left to wait for),
    /// stretched by up to a quarter by [`Actor::jitter`] so that thousands of partitions opened
    /// together do not all wake at the same moment, again and again.
    fn tick_ms(&self) -> u64 {
        let flush_ms = match self.setup.config.flush {
            FlushPolicy::Interval { ms: Some(ms), .. } => ms,
            _ => u64::MAX,
        };
        let clean_ms = match self.setup.compaction {
            Some(_) => self.setup.cleaner.backoff_ms(),
            None => u64::MAX,
        };
        let idle_ms = if self.idle_released {
            u64::MAX
        } else {
            self.setup.idle_release_ms
        };
        let replicated_ms = match self.replication {
            Replication::Off => u64::MAX,
            _ => REPLICATED_TICK_MS,
        };
        let tier_ms = match self.tier {
            Some(_) => self.setup.configs.broker.remote.task_interval_ms,
            None => u64::MAX,
        };
        let tick = flush_ms
            .min(replicated_ms)
            .min(tier_ms)
            .min(self.setup.retention_check_interval_ms)
            .min(idle_ms)
            .min(clean_ms)
            .clamp(1, 60_000);
        tick + tick * u64::from(self.jitter) / 4000
    }

    /// Time-driven work: a flush the interval policy owes, retention, idle memory release.
    async fn maintenance(&mut self) {
        self.refresh_config().await;
        let now = self.setup.clock.now();
        self.last_maintenance_ms = now;
        if self.log().flush_due(now) {
            if let Err(e) = self.timed_flush().await {
                tracing::error!(topic = self.setup.tp.topic, error = %e, "periodic flush failed");
            }
            self.publish();
        }
        let interval_ms = span(self.setup.retention_check_interval_ms);
        if now - self.last_retention_ms >= interval_ms {
            self.last_retention_ms = now;
            if let Err(e) = self.log().apply_retention(now).await {
                tracing::error!(topic = self.setup.tp.topic, error = %e, "retention failed");
            }
            self.publish(); // the log start, segments and bytes may have moved
            let expiration_ms = self.setup.configs.broker.producers.expiration_ms;
            let expired = self.log().expire_producers(expiration_ms);
            hooks::bound_hits(Bound::ProducerIdExpiration, expired as u64);
        }
        self.maybe_start_clean(now).await;
        let tier_interval_ms = span(self.setup.configs.broker.remote.task_interval_ms);
        if self.tier.is_some() && now - self.last_tier_ms >= tier_interval_ms {
            self.last_tier_ms = now;
            self.start_tier_job(now).await;
        }
        self.checkpoint_high_watermark(false).await;
        let idle_ms = self.setup.idle_release_ms;
        if idle_release_due(self.last_activity_ms, now, self.idle_released, idle_ms) {
            self.release().await;
        }
    }

    /// Releases memory, preallocation and open files (idle, or the shard is over its budget).
    async fn release(&mut self) {
        self.idle_released = true;
        match self.log().release_idle_memory().await {
            Ok(()) => self.publish(), // it may have flushed
            Err(e) => {
                tracing::warn!(topic = self.setup.tp.topic, error = %e, "idle memory release failed");
            }
        }
    }

    /// Applies changed topic or broker configs (AlterConfigs) before the next operation: the
    /// registry's config generation says whether anything changed since they were computed.
    async fn refresh_config(&mut self) {
        let generation = self.setup.configs.registry.config_generation();
        if generation == self.setup.configs.generation {
            return;
        }
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        let Some(meta) = self.setup.configs.registry.get(&topic) else {
            return; // being deleted
        };
        let watch = &self.setup.configs;
        let parse = || TopicSettings::of_topic(&watch.broker, &watch.registry, &meta.configs);
        let parsed = watch
            .settings
            .settings(&watch.registry, &topic, &meta, parse);
        let settings = parsed.map(|s| TopicSettings::clone(&s));
        self.setup.configs.generation = generation;
        let settings = match settings {
            Ok(settings) => settings,
            Err(e) => {
                tracing::error!(topic, partition, error = %e, "changed configs do not apply");
                return;
            }
        };
        let mut settings = settings;
        match (&mut self.tier, settings.remote) {
            (Some(tier), Some(total)) => {
                tier.set_retention(total.retention_ms, total.retention_bytes)
            }
            // Tiering switched on while open: the total retention holds until the partition
            // reopens with its tier (local retention must never run ungated).
            (None, Some(total)) => {
                settings.log.retention_ms = total.retention_ms;
                settings.log.retention_bytes = total.retention_bytes;
            }
            _ => {}
        }
        if settings.log != self.setup.config {
            if let Err(e) = self.log().reconfigure(settings.log.clone()).await {
                tracing::error!(topic, partition, error = %e, "applying changed configs failed");
                self.setup.configs.generation = 0; // try again before the next operation
                return;
            }
            tracing::info!(topic, partition, "applied changed configs");
            self.setup.config = settings.log;
            self.publish(); // a flush policy change may move the high watermark
        }
        let min_isr = crate::partition::table::min_insync_replicas_of(
            self.setup.cluster.as_deref(),
            &meta.configs,
            settings.min_insync_replicas,
        );
        if min_isr != self.setup.min_insync_replicas {
            tracing::info!(topic, partition, min_isr, "min.insync.replicas changed");
            self.setup.min_insync_replicas = min_isr;
            self.advance_high_watermark(); // waiting acks=all are answered under the new rule
        }
        let compaction = settings.compaction.filter(|_| self.setup.cleaner.enabled());
        if compaction != self.setup.compaction {
            if compaction.is_none() {
                self.cancel_clean().await;
            }
            self.setup.compaction = compaction;
        }
    }

    /// Plans a clean of a compacted log every `log.cleaner.backoff.ms` and hands a due one to
    /// the shard's cleaner.
    async fn maybe_start_clean(&mut self, now: rill_engine::TimestampMs) {
        let Some(config) = self.setup.compaction.clone() else {
            return;
        };
        let backoff_ms = span(self.setup.cleaner.backoff_ms());
        if self.clean.is_some() || now - self.last_clean_check_ms < backoff_ms {
            return;
        }
        self.last_clean_check_ms = now;
        match self.log().plan_clean(&config, now).await {
            Ok(Some(job)) => {
                let name = self.setup.tp.to_string();
                let (task, events) = self.setup.cleaner.spawn(job, name);
                self.clean = Some(CleanInFlight { task, events });
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(topic = self.setup.tp.topic, partition = self.setup.tp.partition.0, error = %e, "planning a clean failed")
            }
        }
    }

    /// Swaps in a cleaned group, or records the end of a clean.
    async fn on_clean_event(&mut self, event: Option<CleanEvent>) {
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        match event {
            Some(CleanEvent::Group(group)) => match self.log().install_cleaned(&group).await {
                Ok(true) => self.publish(), // fewer bytes, maybe fewer segments
                Ok(false) => self.cancel_clean().await,
                Err(e) => {
                    tracing::error!(topic, partition, error = %e, "swapping in a cleaned segment failed");
                    self.cancel_clean().await;
                }
            },
            Some(CleanEvent::Done { checkpoint, .. }) => {
                self.clean = None;
                if let Err(e) = self.log().finish_clean(checkpoint).await {
                    tracing::warn!(topic, partition, error = %e, "writing the cleaner checkpoint failed");
                }
            }
            Some(CleanEvent::Failed(_)) | None => self.clean = None,
        }
    }

    /// DeleteRecords on a tiered log: the remote tier's log start moves first (durably), so
    /// no remote read serves a deleted record; its copies below go with the next jobs.
    async fn move_remote_log_start(&mut self, before: Offset) -> Result<(), EngineError> {
        let (Some(tier), Some(log)) = (self.tier.as_mut(), self.log.as_ref()) else {
            return Ok(());
        };
        let hw = log.high_watermark();
        let target = if before.0 == -1 { hw } else { before };
        if target.0 < 0 || target > hw {
            return Ok(()); // the engine refuses it with its error
        }
        tier.advance_log_start(log, target).await
    }

    /// Starts the tier's next copy or delete, if one is due and none runs.
    async fn start_tier_job(&mut self, now: TimestampMs) {
        let (Some(tier), Some(log)) = (self.tier.as_mut(), self.log.as_mut()) else {
            return;
        };
        tier.start_next(log, now).await;
    }

    /// Records a tier job's end and starts the next one at once (copies chain without
    /// waiting for a tick); local retention may now delete what was copied.
    async fn on_tier_event(&mut self, event: TierEvent) {
        let (Some(tier), Some(log)) = (self.tier.as_mut(), self.log.as_mut()) else {
            return;
        };
        tier.on_event(log, event).await;
        let now = self.setup.clock.now();
        self.start_tier_job(now).await;
        self.publish(); // the log start may have moved (a remote copy deleted)
    }

    /// A read below the local log start that the remote tier holds, as a task of its own
    /// that answers `msg` (the actor goes on at once); `msg` back if the tier cannot serve it.
    async fn try_remote_read(&mut self, msg: ActorMsg) -> Option<ActorMsg> {
        let PartitionOp::Read {
            from,
            max_bytes,
            isolation,
        } = msg.op
        else {
            return Some(msg);
        };
        let (Some(tier), Some(log)) = (self.tier.as_ref(), self.log.as_mut()) else {
            return Some(msg);
        };
        let Some(upper) = tier.remote_read_end(from) else {
            return Some(msg);
        };
        if from >= log.log_start_offset() {
            return Some(msg);
        }
        let (visible_end, committed) = match isolation {
            // The local log's part of the aborted transactions the read must list.
            Isolation::ReadCommitted => match log.aborted_transactions(from, upper).await {
                Ok(local) => (log.last_stable_offset(), Some(local)),
                Err(_) => return Some(msg), // the engine answers the read with its error
            },
            _ => (log.high_watermark(), None),
        };
        let Some(read) = tier.remote_read(from, max_bytes, visible_end, committed) else {
            return Some(msg);
        };
        let positions = self.positions();
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        let task = async move {
            let reply = match read.await {
                Ok(read) => PartitionReply::Read {
                    positions,
                    chunks: read.chunks,
                    aborted: read.aborted,
                },
                Err(e) => {
                    tracing::warn!(topic, partition, from = from.0, error = %e, "remote read failed");
                    PartitionReply::Error(ErrorCode::KafkaStorageError)
                }
            };
            let _ = msg.reply.send(reply);
        };
        glommio::spawn_local(task).detach();
        None
    }

    /// Stops the clean in flight, if any (its leftover files are removed by the next one).
    async fn cancel_clean(&mut self) {
        if let Some(clean) = self.clean.take() {
            clean.task.cancel().await;
        }
    }

    /// Handle one group: its appends (and their flush and acks) first, then its reads and
    /// lookups; returns the Delete reply if the group asked to delete the partition.
    async fn serve_group(
        &mut self,
        group: Vec<ActorMsg>,
    ) -> Option<oneshot::Sender<PartitionReply>> {
        let group_started = Instant::now();
        let mut durable_waiters = Vec::new();
        let mut appended = false;
        let mut delete_reply = None;
        // Served after the flush: they then see the group's appends, and a read waiting on
        // the disk never delays an ack.
        let mut others = Vec::new();
        for msg in group {
            if self.log.is_none() {
                Self::refuse(msg);
                continue;
            }
            if delete_reply.is_some() {
                let _ = msg
                    .reply
                    .send(PartitionReply::Error(ErrorCode::UnknownTopicOrPartition));
                continue;
            }
            match msg.op {
                PartitionOp::Append {
                    batch,
                    acks,
                    ack_timeout,
                    txn_guard,
                } => {
                    appended = true;
                    if acks == Acks::All {
                        let waited = group_started.saturating_duration_since(msg.queued);
                        hooks::shard_stage(hooks::Stage::Mailbox, waited);
                    }
                    let (reply, wait_for_flush) = self.append_op(batch, acks, txn_guard).await;
                    if wait_for_flush {
                        durable_waiters.push((msg.reply, reply, ack_timeout));
                    } else {
                        let _ = msg.reply.send(reply);
                    }
                }
                PartitionOp::WriteTxnMarker(marker) => {
                    appended = true;
                    if let Err(code) = self.check_leader_append(false) {
                        let _ = msg.reply.send(PartitionReply::Error(code));
                        continue;
                    }
                    // A marker is answered once durable, whatever the flush policy.
                    match self.write_marker(marker).await {
                        PartitionReply::MarkerWritten => durable_waiters.push((
                            msg.reply,
                            PartitionReply::MarkerWritten,
                            INTERNAL_ACK_TIMEOUT,
                        )),
                        failed => {
                            let _ = msg.reply.send(failed);
                        }
                    }
                }
                PartitionOp::Delete => delete_reply = Some(msg.reply),
                _ => others.push(msg),
            }
        }
        if appended && self.log.is_some() {
            for _ in &durable_waiters {
                hooks::shard_stage(hooks::Stage::Appending, group_started.elapsed());
            }
            self.flush_group(durable_waiters).await;
        }
        if !others.is_empty() {
            let reads_started = Instant::now();
            self.serve_after_flush(others).await;
            hooks::shard_stage(hooks::Stage::ActorReads, reads_started.elapsed());
        }
        delete_reply
    }

    /// The group's other messages, served after its flush (they then see its appends, and a
    /// read waiting on the disk never delays an ack).
    async fn serve_after_flush(&mut self, others: Vec<ActorMsg>) {
        self.hold_read_ahead_if_writing();
        for msg in others {
            if self.log.is_none() {
                Self::refuse(msg);
                continue;
            }
            if is_replication_op(&msg.op) {
                let reply = self
                    .serve_replication(msg.op)
                    .await
                    .unwrap_or(PartitionReply::Error(ErrorCode::KafkaStorageError));
                let _ = msg.reply.send(reply);
                continue;
            }
            let Some(msg) = self.try_remote_read(msg).await else {
                continue; // served from the remote tier, in a task of its own
            };
            if let PartitionOp::Read {
                from, max_bytes, ..
            } = msg.op
            {
                if let Some(loaded) = self.log().prepare_read(from, max_bytes).await {
                    let parked = self.parked.get_or_insert_with(FuturesUnordered::new);
                    parked.push(loaded.map(move |()| msg).boxed_local());
                    continue;
                }
            }
            let reply = self.serve_other(msg.op).await;
            let _ = msg.reply.send(reply);
        }
    }

    /// Holds the log's read-ahead while producers wait on its flushes: within
    /// `rill.read.ahead.hold.ms` of the last flush an acks=all producer waited on, the log
    /// keeps few loads in flight and reads them one piece at a time on the core, none started
    /// while a flush is in flight, so a catch-up reader's loads (megabytes, issued at once) do
    /// not queue on the device ahead of the next flush, while the next fetch's extent still
    /// loads ahead. Reads are still served as before, each as soon as its own bytes are loaded.
    fn hold_read_ahead_if_writing(&mut self) {
        let hold = Duration::from_millis(self.setup.configs.broker.read_ahead_hold_ms);
        let writing = self
            .last_durable_flush
            .is_some_and(|at| at.elapsed() < hold);
        if let Some(log) = self.log.as_mut() {
            log.hold_read_ahead(writing);
        }
    }

    /// One Append: its reply, and whether it waits for the group's flush (acks=all on a topic
    /// that syncs, or on a replicated leader, where it then waits for the ISR too).
    async fn append_op(
        &mut self,
        batch: ValidatedBatch,
        acks: Acks,
        txn_guard: Option<u64>,
    ) -> (PartitionReply, bool) {
        let reply = match self.check_leader_append(acks == Acks::All) {
            Err(code) => PartitionReply::Error(code),
            Ok(()) => match self.admit_txn(batch, txn_guard) {
                Ok(batch) => self.append(batch).await,
                Err(reply) => reply,
            },
        };
        let wait_for_flush = acks == Acks::All
            && matches!(reply, PartitionReply::Appended { .. })
            && (self.setup.config.flush == FlushPolicy::EveryAppend || self.leads_replicated());
        (reply, wait_for_flush)
    }

    /// Flush once for the group if anyone waits for durability or the policy says so, then
    /// answer the acks=all waiters and publish the new high watermark.
    async fn flush_group(&mut self, waiters: Vec<DurableWaiter>) {
        let now = self.setup.clock.now();
        let must_flush = !waiters.is_empty()
            || self.setup.config.flush == FlushPolicy::EveryAppend
            || self.log().flush_due(now);
        let flushed = if must_flush {
            self.timed_flush().await.map(|_| ())
        } else {
            Ok(())
        };
        if !waiters.is_empty() {
            self.last_durable_flush = Some(Instant::now());
        }
        if must_flush && flushed.is_ok() {
            let log = self.log();
            assert!(
                log.durable_offset() == log.log_end_offset(),
                "a group's flush makes all it appended durable before acks=all is answered"
            );
        }
        let error = flushed.as_ref().err().map(EngineError::kafka_error_code);
        if let Err(e) = &flushed {
            tracing::error!(topic = self.setup.tp.topic, partition = self.setup.tp.partition.0, error = %e, "flush failed");
        }
        let waiters = waiters
            .into_iter()
            .map(|(reply_to, reply, timeout)| match error {
                Some(code) => (reply_to, PartitionReply::Error(code), timeout),
                None => (reply_to, reply, timeout),
            })
            .collect();
        self.answer_durable(waiters);
        self.publish();
    }

    async fn append(&mut self, batch: ValidatedBatch) -> PartitionReply {
        let now = self.setup.clock.now();
        let bytes = batch.len() as u64;
        match self.log().append(batch, now).await {
            Ok(info) => {
                assert!(
                    info.base_offset <= info.last_offset
                        && self.log().log_end_offset() == info.last_offset.plus(1),
                    "an append ends the log just past its batch"
                );
                let evicted = self.log().take_producers_evicted();
                hooks::bound_hits(Bound::PartitionProducers, evicted);
                if let Some(stats) = &self.stats {
                    let records = info.last_offset.0 - info.base_offset.0 + 1;
                    stats.appended(bytes, records as u64);
                }
                PartitionReply::Appended {
                    base_offset: info.base_offset,
                    log_append_time: info.log_append_time,
                    log_start_offset: info.log_start_offset,
                }
            }
            // An idempotent retry of a batch we hold: success, with the original offsets.
            Err(EngineError::DuplicateSequence { base_offset, .. }) => PartitionReply::Appended {
                base_offset,
                log_append_time: TimestampMs::NONE,
                log_start_offset: self.log().log_start_offset(),
            },
            Err(e) => {
                tracing::debug!(topic = self.setup.tp.topic, error = %e, "append refused");
                PartitionReply::Error(e.kafka_error_code())
            }
        }
    }

    /// KIP-890: a transactional producer's first append since its transaction began waits for
    /// its coordinator's word (see `txn_guard.rs`); the batch comes back with the guard.
    fn admit_txn(
        &mut self,
        batch: ValidatedBatch,
        guard: Option<u64>,
    ) -> Result<ValidatedBatch, PartitionReply> {
        let header = batch.header();
        let attributes = header.attrs();
        let (pid, epoch, _) = header.producer();
        // Control batches and producer-less ones are the engine's to refuse.
        if !attributes.is_transactional() || attributes.is_control() || !pid.is_some() {
            return Ok(batch);
        }
        let open_here = self.log().has_open_txn(pid);
        match self.txn_guards.admit(pid, open_here, guard) {
            Admit::Append => Ok(batch),
            Admit::Verify(guard) => Err(PartitionReply::NeedsTxnVerification {
                producer: (pid, epoch),
                guard,
                batch,
            }),
            Admit::Refuse => Err(PartitionReply::Error(ErrorCode::InvalidTxnState)),
        }
    }

    /// Appends a transaction marker (flushed by the caller's group before it is answered).
    async fn write_marker(&mut self, marker: TxnMarker) -> PartitionReply {
        self.txn_guards.void(marker.producer_id);
        let now = self.setup.clock.now();
        match self.log().append_marker(&marker, now).await {
            Ok(_) => PartitionReply::MarkerWritten,
            Err(e) => {
                tracing::warn!(topic = self.setup.tp.topic, partition = self.setup.tp.partition.0, error = %e, "transaction marker refused");
                PartitionReply::Error(e.kafka_error_code())
            }
        }
    }

    async fn read(
        &mut self,
        from: Offset,
        max_bytes: usize,
        isolation: Isolation,
    ) -> PartitionReply {
        let read = match isolation {
            Isolation::ReadUncommitted => self
                .log()
                .read(from, max_bytes)
                .await
                .map(|read| (read, Vec::new())),
            // Up to the log end: a coordinator loading its state (`crate::internal_topics::replicated`).
            Isolation::Replica => self
                .log()
                .read_for_replica(from, max_bytes)
                .await
                .map(|read| (read, Vec::new())),
            Isolation::ReadCommitted => self.log().read_committed(from, max_bytes).await,
        };
        match read {
            Ok((read, aborted)) => PartitionReply::Read {
                positions: self.positions(),
                chunks: read.chunks,
                aborted,
            },
            Err(e) => PartitionReply::Error(e.kafka_error_code()),
        }
    }

    async fn serve_other(&mut self, op: PartitionOp) -> PartitionReply {
        match op {
            PartitionOp::Read {
                from,
                max_bytes,
                isolation,
            } => self.read(from, max_bytes, isolation).await,
            PartitionOp::DescribeProducers => PartitionReply::Producers(self.log().producers()),
            PartitionOp::Offsets => PartitionReply::Offsets(self.positions()),
            PartitionOp::TierOffsets => PartitionReply::TierOffsets {
                local_log_start: self.log().log_start_offset(),
                highest_tiered: self.tier.as_ref().and_then(|t| t.highest_offset()),
            },
            PartitionOp::LogSize => PartitionReply::LogSize {
                bytes: self.log().size_bytes(),
                positions: self.positions(),
            },
            PartitionOp::OffsetForTimestamp { timestamp } => {
                let found = self.log().offset_for_timestamp(timestamp).await;
                self.timestamp_reply(found, Some(timestamp)).await
            }
            PartitionOp::MaxTimestamp => {
                let found = self.log().offset_of_max_timestamp().await;
                self.timestamp_reply(found, None).await
            }
            PartitionOp::DeleteRecords { before } => {
                if let Err(e) = self.move_remote_log_start(before).await {
                    return PartitionReply::Error(e.kafka_error_code());
                }
                match self.move_log_start(before, "records deleted").await {
                    Ok(_) => PartitionReply::Offsets(self.positions()),
                    Err(e) => PartitionReply::Error(e.kafka_error_code()),
                }
            }
            // Answered by the table from the watch; never queued here.
            PartitionOp::WaitForData { .. } => PartitionReply::Waited,
            PartitionOp::Release => {
                self.release().await;
                PartitionReply::Released
            }
            // After its group's appends: one of them still holding the guard is only verified
            // (and sent again) once more.
            PartitionOp::ReturnTxnGuard { producer, guard } => {
                self.txn_guards.give_back(producer, guard);
                PartitionReply::Released
            }
            PartitionOp::Append { .. } | PartitionOp::Delete | PartitionOp::WriteTxnMarker(_) => {
                unreachable!("handled by serve_group")
            }
            op => unreachable!("a replication op is handled by serve_group: {op:?}"),
        }
    }

    /// ListOffsets by timestamp: the engine's batch-level answer refined to the first record
    /// at or after `target` (`None`: the batch's own max timestamp, for -3).
    async fn timestamp_reply(
        &mut self,
        found: Result<Option<(Offset, TimestampMs)>, EngineError>,
        target: Option<TimestampMs>,
    ) -> PartitionReply {
        let found = match found {
            Ok(Some((offset, batch_ts))) => Some(
                self.refine_to_record(offset, target.unwrap_or(batch_ts))
                    .await
                    .unwrap_or((offset, batch_ts)),
            ),
            Ok(None) => None,
            Err(e) => return PartitionReply::Error(e.kafka_error_code()),
        };
        PartitionReply::OffsetForTimestamp(found, self.positions())
    }

    /// The exact record at or after `timestamp` inside the batch holding `offset`.
    async fn refine_to_record(
        &mut self,
        offset: Offset,
        timestamp: TimestampMs,
    ) -> Option<(Offset, TimestampMs)> {
        let read = self.log().read(offset, 1).await.ok()?;
        // A chunk may hold several batches back to back; look at each in offset order.
        read.chunks
            .iter()
            .flat_map(|chunk| rill_protocol::record::batches(chunk.clone()))
            .map_while(Result::ok)
            .find_map(|view| {
                super::timestamp_lookup::first_record_at_or_after(view.as_bytes(), timestamp)
            })
            // `offset` may be a log start inside the batch: nothing below it is an answer.
            .filter(|(found, _)| *found >= offset)
    }

    /// Close the log cleanly; delete its directory if asked.
    async fn shut_down(mut self, delete_reply: Option<oneshot::Sender<PartitionReply>>) {
        self.cancel_clean().await;
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        if let Some(stats) = &self.stats {
            stats.online.store(false, Ordering::Relaxed);
        }
        if delete_reply.is_none() && self.log.is_some() {
            self.checkpoint_high_watermark(true).await;
        }
        if let Some(log) = self.log.take() {
            if let Err(e) = log.close().await {
                tracing::error!(topic, partition, error = %e, "closing partition log failed");
            }
        }
        if let (Some(tier), Some(_)) = (&self.tier, &delete_reply) {
            tier.delete_everything();
        }
        if let Some(reply) = delete_reply {
            let result = self
                .setup
                .log_manager
                .delete_partition(self.setup.tp.borrowed())
                .await;
            let answer = match result {
                Ok(()) => {
                    hooks::partition_deleted(self.setup.tp.borrowed());
                    PartitionReply::Deleted
                }
                Err(e) => {
                    tracing::error!(topic, partition, error = %e, "deleting partition failed");
                    PartitionReply::Error(ErrorCode::KafkaStorageError)
                }
            };
            let _ = reply.send(answer);
        }
        tracing::debug!(topic, partition, "partition log closed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_release_once_per_idle_period() {
        let (t0, idle) = (TimestampMs(1_000_000), 30_000);
        let after = |ms: i64| t0 + DurationMs(ms);
        assert!(!idle_release_due(t0, t0, false, idle));
        assert!(!idle_release_due(t0, after(idle as i64 - 1), false, idle));
        assert!(idle_release_due(t0, after(idle as i64), false, idle));
        assert!(
            !idle_release_due(t0, after(10 * idle as i64), true, idle),
            "released already"
        );
        assert!(
            !idle_release_due(t0, after(-5), false, idle),
            "clock stepped back"
        );
    }
}
