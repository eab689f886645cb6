//! What the shards publish for the admin listener to read: one [`AdminState`] per process.
//!
//! Thread-per-core means the admin thread may not touch a shard's partitions or groups. So the
//! shards push: each partition actor owns one [`PartitionStats`] and stores its positions and
//! counts into it with relaxed atomics (one writer each, read at scrape time), each shard owns
//! one [`ShardStats`], and group state, which changes by the thousand per second and is kept in
//! shard-local maps, is pulled on demand: the admin thread asks every shard for a
//! [`ShardSnapshot`] and waits at most [`SNAPSHOT_WAIT`] for the answers.
//!
//! Nothing here is on a request's critical path but a few relaxed stores.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rill_metadata::image::MetadataImage;
use rill_metadata::types::NodeId;
use rill_types::{Offset, PartitionIndex, TopicPartitionRef};

use super::metrics::Metrics;
pub use super::settings::SeriesLimits;
use crate::config::settings::BrokerConfig;
use crate::topics::TopicRegistry;

/// Longest the admin thread waits for the shards' snapshots before answering without them.
pub const SNAPSHOT_WAIT: Duration = Duration::from_secs(2);
/// A shard whose heartbeat is older than this is stuck: the broker is not live.
pub const HEARTBEAT_STALE: Duration = Duration::from_secs(10);

/// Positions and traffic of one partition, written only by its actor.
#[derive(Debug)]
pub struct PartitionStats {
    /// The shard that owns the partition.
    pub shard: usize,
    /// Whether the log is open (false while it opens, after a failure, after it closed).
    pub online: AtomicBool,
    /// Whether opening the log failed (the partition is offline).
    pub failed: AtomicBool,
    /// First offset still in the log.
    pub log_start_offset: AtomicI64,
    /// Next offset to be assigned.
    pub log_end_offset: AtomicI64,
    /// Consumers read below this.
    pub high_watermark: AtomicI64,
    /// Read-committed consumers read below this (the high watermark until transactions land).
    pub last_stable_offset: AtomicI64,
    /// Segments of the log.
    pub segments: AtomicU64,
    /// Bytes of whole batches in the log's segments.
    pub log_bytes: AtomicU64,
    /// First offset on local disk (below it, a tiered log's offsets are in the remote tier).
    pub local_log_start_offset: AtomicI64,
    /// Segments copied to the remote tier (a tiered topic's).
    pub remote_segments: AtomicU64,
    /// Bytes of those segments' `.log` objects.
    pub remote_bytes: AtomicU64,
    /// Batch bytes appended (what producers sent and the log accepted).
    pub bytes_in: AtomicU64,
    /// Records appended.
    pub messages_in: AtomicU64,
    /// Batch bytes handed to consumers.
    pub bytes_out: AtomicU64,
    /// Records handed to consumers.
    pub messages_out: AtomicU64,
}

impl PartitionStats {
    fn new(shard: usize) -> Self {
        PartitionStats {
            shard,
            online: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            log_start_offset: AtomicI64::new(0),
            log_end_offset: AtomicI64::new(0),
            high_watermark: AtomicI64::new(0),
            last_stable_offset: AtomicI64::new(0),
            segments: AtomicU64::new(0),
            log_bytes: AtomicU64::new(0),
            local_log_start_offset: AtomicI64::new(0),
            remote_segments: AtomicU64::new(0),
            remote_bytes: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            messages_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            messages_out: AtomicU64::new(0),
        }
    }

    /// Counts an append of `messages` records in `bytes` of batches.
    pub fn appended(&self, bytes: u64, messages: u64) {
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        self.messages_in.fetch_add(messages, Ordering::Relaxed);
    }

    /// Counts `messages` records in `bytes` of batches handed to a consumer.
    pub fn fetched(&self, bytes: u64, messages: u64) {
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        self.messages_out.fetch_add(messages, Ordering::Relaxed);
    }

    /// A consistent-enough copy for one scrape (each field is read once).
    pub fn read(&self) -> PartitionView {
        let get = |a: &AtomicI64| a.load(Ordering::Relaxed);
        let count = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PartitionView {
            shard: self.shard,
            online: self.online.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            log_start_offset: get(&self.log_start_offset),
            log_end_offset: get(&self.log_end_offset),
            high_watermark: get(&self.high_watermark),
            last_stable_offset: get(&self.last_stable_offset),
            segments: count(&self.segments),
            log_bytes: count(&self.log_bytes),
            local_log_start_offset: get(&self.local_log_start_offset),
            remote_segments: count(&self.remote_segments),
            remote_bytes: count(&self.remote_bytes),
            bytes_in: count(&self.bytes_in),
            messages_in: count(&self.messages_in),
            bytes_out: count(&self.bytes_out),
            messages_out: count(&self.messages_out),
        }
    }
}

/// One partition's numbers as read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PartitionView {
    /// Owning shard.
    pub shard: usize,
    /// Whether the log is open.
    pub online: bool,
    /// Whether opening the log failed.
    pub failed: bool,
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// Next offset to be assigned.
    pub log_end_offset: i64,
    /// Consumers read below this.
    pub high_watermark: i64,
    /// Read-committed consumers read below this.
    pub last_stable_offset: i64,
    /// Segments.
    pub segments: u64,
    /// Bytes of whole batches.
    pub log_bytes: u64,
    /// First offset on local disk.
    pub local_log_start_offset: i64,
    /// Segments in the remote tier.
    pub remote_segments: u64,
    /// Bytes in the remote tier.
    pub remote_bytes: u64,
    /// Batch bytes appended.
    pub bytes_in: u64,
    /// Records appended.
    pub messages_in: u64,
    /// Batch bytes fetched.
    pub bytes_out: u64,
    /// Records fetched.
    pub messages_out: u64,
}

/// One shard's counters, written only by that shard.
#[derive(Debug, Default)]
pub struct ShardStats {
    /// Whether the shard's listener is bound.
    pub listening: AtomicBool,
    /// When the shard last showed it runs (ms since the admin state was created).
    pub heartbeat_ms: AtomicU64,
    /// Connections accepted since start.
    pub connections_accepted: AtomicU64,
    /// Connections closed since start.
    pub connections_closed: AtomicU64,
    /// Requests read and not yet answered (the shard's request queue).
    pub requests_in_flight: AtomicI64,
    /// Time the executor spent running tasks, in microseconds.
    pub busy_us: AtomicU64,
    /// Read cache lookups that found their bytes (loaded or loading).
    pub read_cache_hits: AtomicU64,
    /// Read cache lookups that had to read the disk.
    pub read_cache_misses: AtomicU64,
    /// Bytes the shard's read cache holds (within `rill.read.cache.bytes`).
    pub read_cache_bytes: AtomicU64,
    /// How often each resource bound bit on this shard.
    pub bound_hits: super::bound_hits::BoundHits,
    /// The shard's byte budgets, by [`Budget`], as of its last flush.
    pub budgets: [BudgetGauges; 2],
}

/// A shard's byte budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Request frames from their size prefix until answered (`queued.max.request.bytes`).
    RequestBytes,
    /// Record bytes of Fetch responses until written (`rill.shard.fetch.bytes.max`).
    FetchBytes,
}

impl Budget {
    /// Both, in declaration order.
    pub const ALL: [Budget; 2] = [Budget::RequestBytes, Budget::FetchBytes];

    /// The property that sets it (the metric label).
    pub fn property(self) -> &'static str {
        match self {
            Budget::RequestBytes => "queued.max.request.bytes",
            Budget::FetchBytes => "rill.shard.fetch.bytes.max",
        }
    }
}

/// One byte budget's figures, published by the shard's observer.
#[derive(Debug, Default)]
pub struct BudgetGauges {
    /// Its bound on this shard.
    pub capacity: AtomicU64,
    /// Bytes held now.
    pub held: AtomicU64,
    /// Reservations waiting now.
    pub waiting: AtomicU64,
    /// The most held at once since start.
    pub held_max: AtomicU64,
}

/// One consumer group as its coordinator shard sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// Group id.
    pub group: String,
    /// Kafka's state name (Stable, Empty, ...).
    pub state: String,
    /// Live members.
    pub members: usize,
    /// Protocol type ("consumer" for consumer groups).
    pub protocol_type: String,
    /// Committed offsets by (topic, partition).
    pub committed: BTreeMap<(String, i32), Offset>,
}

/// What a shard answers when the admin thread asks.
#[derive(Debug, Clone, Default)]
pub struct ShardSnapshot {
    /// The groups this shard coordinates.
    pub groups: Vec<GroupSnapshot>,
    /// The transactional ids this shard coordinates, counted by state (Kafka's names).
    pub transactions: BTreeMap<&'static str, u64>,
}

/// A request from the admin thread to one shard: answer on `reply`.
pub type SnapshotRequest = std::sync::mpsc::Sender<ShardSnapshot>;

/// Readiness inputs.
#[derive(Debug, Default)]
pub struct Health {
    /// Partition logs being opened (recovering) right now.
    pub opening: AtomicUsize,
    /// Latched once every shard listened with no log opening: start-up recovery is done.
    pub recovered: AtomicBool,
    /// Set when the broker began to stop.
    pub stopping: AtomicBool,
}

/// Static facts about this broker, for the status page.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BrokerInfo {
    /// `node.id`.
    pub node_id: i32,
    /// Version and git commit (`rill --version`).
    pub version: String,
    /// Kafka listener.
    pub listen: String,
    /// Address clients are told.
    pub advertise: String,
    /// Admin listener, once bound.
    pub admin_listen: String,
    /// Data directory.
    pub data_dir: String,
    /// Shards (executors).
    pub shards: usize,
}

/// The cluster as the admin listener reads it (readiness, the status page, the metrics): what
/// this node's cluster view answers (`crate::cluster::view::ClusterView` implements it, from the
/// floor above).
pub trait ClusterStatus: Send + Sync {
    /// This node.
    fn node_id(&self) -> NodeId;
    /// The applied metadata image.
    fn image(&self) -> Arc<MetadataImage>;
    /// The active controller, if known.
    fn controller(&self) -> Option<NodeId>;
    /// The fatal condition, if one was recorded.
    fn fatal(&self) -> Option<String>;
    /// Whether this broker applied the metadata log up to its registration.
    fn caught_up(&self) -> bool;
    /// Where this broker's catch-up stands, for its readiness probe.
    fn catch_up_progress(&self) -> String;
}

/// Everything the admin listener reads, shared by the shards (writers) and the admin thread.
pub struct AdminState {
    /// Static facts.
    pub info: RwLock<BrokerInfo>,
    /// One per shard.
    pub shards: Vec<ShardStats>,
    /// Every partition this process has opened, by topic then partition.
    partitions: RwLock<BTreeMap<String, BTreeMap<PartitionIndex, Arc<PartitionStats>>>>,
    /// The data-path metrics the shards flush into.
    pub metrics: Metrics,
    /// Topics and their partition counts.
    pub registry: Arc<TopicRegistry>,
    /// Readiness inputs.
    pub health: Health,
    /// Label cardinality bounds.
    pub limits: SeriesLimits,
    /// Where each shard takes snapshot requests (set when the shard starts).
    snapshot_requests: Mutex<Vec<Option<std::sync::mpsc::Sender<SnapshotRequest>>>>,
    /// The cluster this broker belongs to, once it started (`None` on a single node).
    cluster: OnceLock<Arc<dyn ClusterStatus>>,
    /// A controller-only node: no shards, no registration as a broker.
    controller_only: bool,
    /// When the state was created (the heartbeat clock).
    started: Instant,
    /// Wall-clock start, for uptime on the status page.
    pub started_at: SystemTime,
}

impl AdminState {
    /// The state of a broker about to start with `config`.
    pub fn new(config: &BrokerConfig, registry: Arc<TopicRegistry>) -> Arc<Self> {
        Self::with_shards(config, registry, config.shards, false)
    }

    /// The state of a controller-only node (`process.roles=controller`): no shards, no client
    /// listener; ready once it knows the active controller.
    pub fn controller_only(config: &BrokerConfig, registry: Arc<TopicRegistry>) -> Arc<Self> {
        Self::with_shards(config, registry, 0, true)
    }

    fn with_shards(
        config: &BrokerConfig,
        registry: Arc<TopicRegistry>,
        shards: usize,
        controller_only: bool,
    ) -> Arc<Self> {
        let info = BrokerInfo {
            node_id: config.node_id,
            version: crate::build_info::VERSION.to_string(),
            listen: config.listen.to_string(),
            advertise: format!("{}:{}", config.advertise_host, config.advertise_port),
            admin_listen: "off".to_string(),
            data_dir: config.data_dir.display().to_string(),
            shards,
        };
        Arc::new(AdminState {
            info: RwLock::new(info),
            shards: (0..shards).map(|_| ShardStats::default()).collect(),
            partitions: RwLock::new(BTreeMap::new()),
            metrics: Metrics::new(),
            registry,
            health: Health::default(),
            limits: config.admin.limits,
            snapshot_requests: Mutex::new(vec![None; shards]),
            cluster: OnceLock::new(),
            controller_only,
            started: Instant::now(),
            started_at: SystemTime::now(),
        })
    }

    /// Joins the broker to `cluster`: readiness then also needs the controller's registration,
    /// and the status lists every broker.
    pub fn set_cluster(&self, cluster: Arc<dyn ClusterStatus>) {
        let _ = self.cluster.set(cluster);
    }

    /// The cluster, if this broker is part of one.
    pub fn cluster(&self) -> Option<&Arc<dyn ClusterStatus>> {
        self.cluster.get()
    }

    /// Milliseconds since the state was created (monotonic).
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The stats of partition `tp`, created on first use (kept across reopenings so the
    /// counters only grow).
    pub fn partition(&self, tp: TopicPartitionRef<'_>, shard: usize) -> Arc<PartitionStats> {
        if let Some(stats) = self.known_partition(tp) {
            return stats;
        }
        let mut partitions = self.partitions.write().expect("not poisoned");
        partitions
            .entry(tp.topic.to_string())
            .or_default()
            .entry(tp.partition)
            .or_insert_with(|| Arc::new(PartitionStats::new(shard)))
            .clone()
    }

    /// The stats of partition `tp` if it was ever opened.
    pub fn known_partition(&self, tp: TopicPartitionRef<'_>) -> Option<Arc<PartitionStats>> {
        let partitions = self.partitions.read().expect("not poisoned");
        partitions.get(tp.topic)?.get(&tp.partition).cloned()
    }

    /// Forgets a deleted partition.
    pub fn remove_partition(&self, tp: TopicPartitionRef<'_>) {
        let mut partitions = self.partitions.write().expect("not poisoned");
        if let Some(topic_partitions) = partitions.get_mut(tp.topic) {
            topic_partitions.remove(&tp.partition);
            if topic_partitions.is_empty() {
                partitions.remove(tp.topic);
            }
        }
    }

    /// Every partition's numbers, in (topic, partition) order.
    pub fn partition_views(&self) -> Vec<((String, i32), PartitionView)> {
        let partitions = self.partitions.read().expect("not poisoned");
        let mut views = Vec::new();
        for (topic, by_partition) in partitions.iter() {
            for (&partition, stats) in by_partition {
                views.push(((topic.clone(), partition.0), stats.read()));
            }
        }
        views
    }

    /// Registers where shard `id` takes snapshot requests.
    pub fn set_snapshot_requests(&self, id: usize, tx: std::sync::mpsc::Sender<SnapshotRequest>) {
        self.snapshot_requests.lock().expect("not poisoned")[id] = Some(tx);
    }

    /// Asks every shard for its snapshot; returns the answers that came within
    /// [`SNAPSHOT_WAIT`] and how many shards did not answer.
    pub fn snapshots(&self) -> (Vec<ShardSnapshot>, usize) {
        let senders = self.snapshot_requests.lock().expect("not poisoned").clone();
        let (reply, answers) = std::sync::mpsc::channel();
        let mut asked = 0;
        for tx in senders.iter().flatten() {
            if tx.send(reply.clone()).is_ok() {
                asked += 1;
            }
        }
        drop(reply);
        let deadline = Instant::now() + SNAPSHOT_WAIT;
        let mut got = Vec::with_capacity(asked);
        while got.len() < asked {
            let left = deadline.saturating_duration_since(Instant::now());
            match answers.recv_timeout(left) {
                Ok(snapshot) => got.push(snapshot),
                Err(_) => break,
            }
        }
        let missing = self.shards.len() - got.len();
        (got, missing)
    }

    /// Whether every shard showed it runs within [`HEARTBEAT_STALE`].
    pub fn live(&self) -> Result<(), String> {
        let now = self.now_ms();
        for (id, shard) in self.shards.iter().enumerate() {
            let age = now.saturating_sub(shard.heartbeat_ms.load(Ordering::Relaxed));
            if age > HEARTBEAT_STALE.as_millis() as u64 {
                return Err(format!("shard {id} has not run for {age} ms"));
            }
        }
        Ok(())
    }

    /// Ready: every shard listens and start-up recovery is done, the broker is not stopping,
    /// and in a cluster the controller has registered it (it is live in the metadata image this
    /// node applied, so it caught up at least to its own registration). A controller-only node
    /// is ready once it knows the active controller.
    pub fn ready(&self) -> Result<(), String> {
        if self.health.stopping.load(Ordering::Relaxed) {
            return Err("stopping".into());
        }
        if let Some(cluster) = self.cluster() {
            if let Some(why) = cluster.fatal() {
                return Err(why);
            }
            if self.controller_only {
                return match cluster.controller() {
                    Some(_) => Ok(()),
                    None => Err("no active controller known yet".into()),
                };
            }
            if cluster.image().live_broker(cluster.node_id()).is_none() {
                return Err("not registered with the controller yet".into());
            }
        }
        let listening = self
            .shards
            .iter()
            .filter(|s| s.listening.load(Ordering::Relaxed))
            .count();
        if listening == 0 {
            if let Some(cluster) = self.cluster().filter(|c| !c.caught_up()) {
                let progress = cluster.catch_up_progress();
                return Err(format!("catching up with the metadata quorum: {progress}"));
            }
        }
        if listening < self.shards.len() {
            return Err(format!(
                "{listening} of {} shards listening",
                self.shards.len()
            ));
        }
        if !self.health.recovered.load(Ordering::Relaxed) {
            let opening = self.health.opening.load(Ordering::Relaxed);
            if opening > 0 {
                return Err(format!("recovering: {opening} partition logs opening"));
            }
            self.health.recovered.store(true, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(shards: usize) -> Arc<AdminState> {
        let dir = tempfile::tempdir().unwrap();
        let registry = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        let mut config = BrokerConfig::defaults();
        config.shards = shards;
        AdminState::new(&config, registry)
    }

    #[test]
    fn ready_needs_every_shard_listening_and_no_log_opening_then_latches() {
        let s = state(2);
        assert!(s.ready().unwrap_err().contains("0 of 2"));
        s.shards[0].listening.store(true, Ordering::Relaxed);
        s.shards[1].listening.store(true, Ordering::Relaxed);
        s.health.opening.store(3, Ordering::Relaxed);
        assert!(s.ready().unwrap_err().contains("3 partition logs"));
        s.health.opening.store(0, Ordering::Relaxed);
        assert!(s.ready().is_ok());
        // A topic created later opens logs: readiness does not flap.
        s.health.opening.store(1, Ordering::Relaxed);
        assert!(s.ready().is_ok());
        s.health.stopping.store(true, Ordering::Relaxed);
        assert_eq!(s.ready().unwrap_err(), "stopping");
    }

    #[test]
    fn partition_stats_persist_across_lookups_and_snapshots_time_out() {
        let s = state(1);
        s.partition(TopicPartitionRef::new("t", PartitionIndex(0)), 0)
            .appended(100, 2);
        s.partition(TopicPartitionRef::new("t", PartitionIndex(0)), 0)
            .appended(50, 1);
        let views = s.partition_views();
        assert_eq!((views[0].1.bytes_in, views[0].1.messages_in), (150, 3));
        // No shard registered: nothing to ask, one missing.
        let (got, missing) = s.snapshots();
        assert_eq!((got.len(), missing), (0, 1));
    }
}
