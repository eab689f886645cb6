//! The broker's settings as every module reads them: [`BrokerConfig`], which holds each
//! module's own settings type (`crate::group::settings`, `crate::txn::settings`, ...), their
//! defaults and what follows from them. Plain values on the settings floor, below everything
//! that reads them; `crate::config` fills them from the properties file and the flags (and
//! says why a value is refused: [`ConfigError`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use rill_types::DurationMs;

use crate::admin::settings::AdminSettings;
use crate::config::cluster::{ClusterConfig, ClusterSettings};

/// Something wrong with a setting: which key, which value, and why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or parsed as `.properties`.
    #[error("cannot read config file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    /// A known key carries a value that does not parse or is out of range.
    #[error("bad value {value:?} for {key}: {reason}")]
    BadValue {
        key: String,
        value: String,
        reason: String,
    },
}

/// Log settings that every topic inherits unless its own config overrides them (Kafka's `log.*`
/// broker properties) and the broker's own log machinery. The topic-config defaults are kept
/// as the file gave them (`static_props`, by broker property name, each checked by the topic
/// config's rule); [`crate::config::topic`] resolves them under a topic's own configs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LogDefaults {
    /// Broker properties that set topic-config defaults (`log.retention.hours=168`,
    /// `message.max.bytes`, `compression.type`, ...), as set in the file.
    pub static_props: BTreeMap<String, String>,
    /// `log.retention.check.interval.ms`: how often retention runs per partition.
    pub retention_check_interval_ms: u64,
    /// The `log.cleaner.*` settings of the shards' cleaners.
    pub cleaner: crate::compaction::settings::CleanerSettings,
}

impl LogDefaults {
    /// Kafka's defaults: nothing set by the file.
    pub fn kafka() -> Self {
        LogDefaults {
            static_props: BTreeMap::new(),
            retention_check_interval_ms: 5 * 60 * 1000,
            cleaner: crate::compaction::settings::CleanerSettings::default(),
        }
    }

    /// The effective value of topic config `name` at broker level (no topic override and no
    /// dynamic config): what DescribeConfigs shows and what a topic inherits.
    pub fn topic_default(&self, name: &str) -> String {
        let empty = BTreeMap::new();
        crate::config::topic::ConfigLayers {
            topic: &empty,
            dynamic_broker: &empty,
            dynamic_default: &empty,
            static_broker: &self.static_props,
        }
        .value(name)
    }
}

/// Everything the broker needs to start, resolved from defaults, file and flags.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Address every shard binds (SO_REUSEPORT).
    pub listen: SocketAddr,
    /// Host clients are told to connect to (Metadata); defaults to the listen host.
    pub advertise_host: String,
    /// Port clients are told to connect to (Metadata); defaults to the listen port.
    pub advertise_port: u16,
    /// Every listener served (`listeners`, `listener.security.protocol.map`,
    /// `inter.broker.listener.name`): the first is the one `listen` and `advertise_*` describe.
    pub listeners: crate::security::listeners::Listeners,
    /// The security properties as given, resolved into `listeners` once file and flags are read.
    pub security: crate::security::listeners::SecuritySettings,
    /// `authorizer.class.name`: Kafka's StandardAuthorizer turns ACLs on (off: every request
    /// is allowed, as without an authorizer in Kafka). [`Self::authorizer`] reads it.
    pub authorizer_on: bool,
    /// `super.users` and `allow.everyone.if.no.acl.found`, read whatever the key order.
    pub authorizer_settings: rill_metadata::acl::AuthorizerConfig,
    /// Root of all partition directories and the broker's own metadata.
    pub data_dir: PathBuf,
    /// Number of executors (one per core, each pinned).
    pub shards: usize,
    /// `broker.id` / `node.id`: the id this single node answers with.
    pub node_id: i32,
    /// `num.partitions`: partitions of an auto-created topic (and CreateTopics with -1).
    pub default_partitions: i32,
    /// `auto.create.topics.enable`: create unknown topics on Metadata / Produce.
    pub auto_create_topics: bool,
    /// `socket.request.max.bytes`: the largest request frame accepted.
    pub request_bytes_max: usize,
    /// `rill.connection.inflight.requests.max`: requests decoded but not yet answered, per
    /// connection; reading stops at this many (back-pressure on pipelining clients).
    pub inflight_requests_max: usize,
    /// `rill.shard.io.memory.bytes`: glommio io_memory per executor (RLIMIT_MEMLOCK is small).
    pub io_memory_bytes: usize,
    /// `rill.partition.queue.max`: operations queued to one partition before senders wait.
    pub partition_queue_max: usize,
    /// `rill.shard.channel.capacity`: slots per cross-shard channel.
    pub shard_channel_capacity: usize,
    /// `queued.max.request.bytes`: memory request frames may hold, over every shard, from
    /// their size prefix on (partially received ones included) until they are answered; split
    /// evenly among the shards ([`Self::shard_request_bytes_max`]). `None`:
    /// [`QUEUED_REQUEST_BYTES_PER_SHARD_DEFAULT`] per shard.
    pub queued_max_request_bytes: Option<u64>,
    /// `fetch.max.bytes`: the most record bytes one Fetch response carries (the client's
    /// `max_bytes` if smaller), its first batch excepted.
    pub fetch_max_bytes: usize,
    /// `quota.window.num` samples of `quota.window.size.seconds` each: the window client
    /// quotas measure byte rates over (Kafka's defaults, 11 of 1 s).
    pub quota_window: crate::client_quotas::rate::Window,
    /// `controller.quota.window.num` × `controller.quota.window.size.seconds`: the window of
    /// controller mutation quotas, whose burst is the quota over it (Kafka's defaults, 11 of 1 s).
    pub controller_quota_window: crate::client_quotas::rate::Window,
    /// `rill.shard.fetch.bytes.max`: record bytes a shard's Fetch requests may hold at once,
    /// from their read until their response is written.
    pub shard_fetch_bytes_max: usize,
    /// `max.connections`, `max.connections.per.ip` (and its overrides),
    /// `connections.max.idle.ms`.
    pub connections: ConnectionSettings,
    /// `producer.id.expiration.ms`, `rill.partition.producers.max`.
    pub producers: ProducerSettings,
    /// `rill.read.cache.bytes`: each shard's cache of log bytes past the partitions' tail
    /// caches, for catch-up consumers (a hard bound, least recently used evicted; 0 disables
    /// it and read-ahead). `None`: sized to the machine, see [`Self::read_cache_bytes_per_shard`].
    pub read_cache_bytes: Option<usize>,
    /// `rill.read.cache.write.through`: appended batches leaving a partition's tail cache are
    /// kept in the read cache (no copy), so a catch-up of a log just written reads memory.
    pub read_cache_write_through: bool,
    /// `rill.read.ahead.hold.ms`: for this long after a flush that acks=all producers waited
    /// on, a partition's readers keep few loads in flight, read one piece at a time per shard
    /// and none started while a flush is in flight (still loading ahead, so a catch-up
    /// reader's loads do not queue on the device ahead of the next flush, nor wait on the disk
    /// at every fetch); 0 never holds read-ahead.
    pub read_ahead_hold_ms: u64,
    /// `rill.read.ahead.hold.piece.bytes`: while read-ahead is held, the largest piece a
    /// shard reads from disk at a time (4 KiB to 256 KiB, whole 4 KiB blocks): what a flush
    /// may find queued ahead of it on the device. Smaller keeps producers' flushes closer to
    /// their time alone and costs a held catch-up reader throughput.
    pub read_ahead_hold_piece_bytes: usize,
    /// `rill.shard.prealloc.bytes.max`: disk a shard's partitions may hold allocated ahead of
    /// their data (0: no preallocation).
    pub shard_prealloc_bytes_max: u64,
    /// `rill.shard.open.files.max`: partition files a shard keeps open before it closes the
    /// least recently used partitions' files; `None` derives it from RLIMIT_NOFILE.
    pub shard_open_files_max: Option<usize>,
    /// `rill.broker.partitions.max`: partitions this broker holds at most (CreateTopics and
    /// CreatePartitions past it are refused); `None` is [`PARTITIONS_PER_SHARD_DEFAULT`] per shard.
    pub broker_partitions_max: Option<i64>,
    /// `rill.partition.idle.ms`: a partition with no request for this long releases its memory,
    /// preallocation and open file.
    pub partition_idle_ms: u64,
    /// Log settings topics inherit.
    pub log: LogDefaults,
    /// Properties set by the file or the command line (DescribeConfigs reports them as
    /// STATIC_BROKER_CONFIG, the others as DEFAULT_CONFIG).
    pub explicit: std::collections::BTreeSet<String>,
    /// The admin listener and metric bounds (`rill.admin.listen`, `rill.metrics.*`).
    pub admin: AdminSettings,
    /// The cluster this node belongs to; `None`: the single node (no quorum configured).
    pub cluster: Option<ClusterConfig>,
    /// Cluster properties as given, resolved into `cluster` once file and flags are read.
    pub cluster_settings: ClusterSettings,
    /// Transaction coordinator settings (`transaction.*`, `transactional.id.expiration.ms`).
    pub txn: crate::txn::settings::TxnConfig,
    /// Kafka's `group.*` settings (the consumer group coordinator).
    pub group: crate::group::settings::GroupConfig,
    /// Tiered storage: `remote.log.storage.system.enable`, `rill.remote.*`.
    pub remote: crate::tiered::settings::RemoteStorageSettings,
    /// `rill.test.*`: faults injected on purpose, debug builds only ([`crate::test_hooks`]).
    pub test_hooks: crate::test_hooks::TestHooks,
}

/// Kafka's `fetch.max.bytes` (55 MiB).
pub const FETCH_MAX_BYTES_DEFAULT: usize = 57_671_680;

/// The default `rill.shard.fetch.bytes.max`: a few full-size Fetch responses in flight per
/// shard (each at most `fetch.max.bytes`), many more of the usual 1 MiB per partition.
pub const SHARD_FETCH_BYTES_DEFAULT: usize = 256 << 20;

/// The default share of `queued.max.request.bytes` per shard (Kafka's default, -1, bounds
/// nothing): room for two requests of the largest default size at once on each shard.
pub const QUEUED_REQUEST_BYTES_PER_SHARD_DEFAULT: u64 = 256 << 20;

/// Kafka's `connections.max.idle.ms` (10 minutes).
pub const CONNECTIONS_MAX_IDLE_MS_DEFAULT: DurationMs = DurationMs(600_000);

/// The connection limits, as Kafka names them (see `crate::net::quotas`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// `max.connections`: open connections over every shard; `None`: what RLIMIT_NOFILE
    /// leaves beside the partition files ([`crate::open_files::connections_default`]).
    pub max: Option<usize>,
    /// `max.connections.per.ip` (Kafka's default: `i32::MAX`).
    pub per_ip: usize,
    /// `max.connections.per.ip.overrides` as given (`host:count,...`).
    pub per_ip_overrides_text: String,
    /// Those overrides, hosts resolved to their addresses.
    pub per_ip_overrides: std::collections::HashMap<std::net::IpAddr, usize>,
    /// `connections.max.idle.ms`: a connection with nothing received or sent for this long,
    /// and no request being served, is closed; negative: never.
    pub idle_ms: DurationMs,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            max: None,
            per_ip: i32::MAX as usize,
            per_ip_overrides_text: String::new(),
            per_ip_overrides: Default::default(),
            idle_ms: CONNECTIONS_MAX_IDLE_MS_DEFAULT,
        }
    }
}

impl ConnectionSettings {
    /// `connections.max.idle.ms` as a duration; `None` when connections never idle out.
    pub fn idle(&self) -> Option<std::time::Duration> {
        u64::try_from(self.idle_ms.0)
            .ok()
            .map(std::time::Duration::from_millis)
    }
}

/// Idempotent producers' state, kept per partition (Kafka's producer state manager).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSettings {
    /// `producer.id.expiration.ms` (Kafka: 1 day): a producer idle this long with no open
    /// transaction is forgotten by each partition, at its retention checks
    /// (`log.retention.check.interval.ms`).
    pub expiration_ms: DurationMs,
    /// `rill.partition.producers.max`: producers one partition keeps at most (the least
    /// recently written without an open transaction are forgotten past it).
    pub partition_max: usize,
}

impl Default for ProducerSettings {
    fn default() -> Self {
        ProducerSettings {
            expiration_ms: DurationMs(86_400_000),
            partition_max: rill_engine::config::PRODUCERS_MAX_DEFAULT,
        }
    }
}

/// Partitions per shard the default `rill.broker.partitions.max` allows: the load whose
/// start-up, memory and latency BENCHMARKS.md measures (10,000 on 2 shards) with room.
pub const PARTITIONS_PER_SHARD_DEFAULT: i64 = 10_000;

impl BrokerConfig {
    /// The defaults of issue 4 with no file and no flags.
    pub fn defaults() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertise_host: "127.0.0.1".to_string(),
            advertise_port: 9092,
            listeners: crate::security::listeners::Listeners::plaintext(
                SocketAddr::from(([127, 0, 0, 1], 9092)),
                "127.0.0.1",
                9092,
            ),
            security: Default::default(),
            authorizer_on: false,
            authorizer_settings: Default::default(),
            data_dir: PathBuf::from("./rill-data"),
            shards: available_cores(),
            node_id: 0,
            default_partitions: 1,
            auto_create_topics: true,
            request_bytes_max: 100 * 1024 * 1024,
            inflight_requests_max: 64,
            io_memory_bytes: 2 << 20,
            partition_queue_max: 1024,
            shard_channel_capacity: 1024,
            queued_max_request_bytes: None,
            fetch_max_bytes: FETCH_MAX_BYTES_DEFAULT,
            quota_window: Default::default(),
            controller_quota_window: Default::default(),
            shard_fetch_bytes_max: SHARD_FETCH_BYTES_DEFAULT,
            connections: ConnectionSettings::default(),
            producers: ProducerSettings::default(),
            read_cache_bytes: None,
            read_cache_write_through: true,
            read_ahead_hold_ms: 100,
            read_ahead_hold_piece_bytes: rill_engine::io::gate::PIECE_BYTES_DEFAULT,
            shard_prealloc_bytes_max: rill_engine::prealloc::SHARD_PREALLOC_BYTES_DEFAULT,
            shard_open_files_max: None,
            broker_partitions_max: None,
            partition_idle_ms: 30_000,
            log: LogDefaults::kafka(),
            explicit: Default::default(),
            admin: AdminSettings::default(),
            cluster: None,
            cluster_settings: ClusterSettings::default(),
            txn: crate::txn::settings::TxnConfig::default(),
            group: crate::group::settings::GroupConfig::default(),
            remote: Default::default(),
            test_hooks: Default::default(),
        }
    }

    /// Bound of each shard's read cache: `rill.read.cache.bytes` if set, else an eighth of the
    /// memory this process may use ([`memory_bytes`]) divided among the shards, at least
    /// [`READ_CACHE_BYTES_MIN`]. It is a ceiling, never allocated ahead: the cache holds only
    /// what was written or read. An eighth, because unlike the page cache Kafka leans on, the
    /// kernel cannot take it back under pressure: the rest stays for the OS, the page cache of
    /// other processes, and the broker's own memory (tail caches, requests, indexes).
    pub fn read_cache_bytes_per_shard(&self) -> usize {
        self.read_cache_bytes.unwrap_or_else(|| {
            let memory = usize::try_from(memory_bytes()).unwrap_or(usize::MAX);
            (memory / 8 / self.shards.max(1)).max(READ_CACHE_BYTES_MIN)
        })
    }

    /// `queued.max.request.bytes`, or its default.
    pub fn queued_max_request_bytes(&self) -> u64 {
        self.queued_max_request_bytes
            .unwrap_or(QUEUED_REQUEST_BYTES_PER_SHARD_DEFAULT * self.shards.max(1) as u64)
    }

    /// Each shard's share of `queued.max.request.bytes`, never below one request of the
    /// largest size (`socket.request.max.bytes` and its size prefix), which must always fit.
    pub fn shard_request_bytes_max(&self) -> u64 {
        let largest =
            self.request_bytes_max as u64 + rill_protocol::frame::SIZE_PREFIX_BYTES as u64;
        (self.queued_max_request_bytes() / self.shards.max(1) as u64).max(largest)
    }

    /// `max.connections`, or what RLIMIT_NOFILE leaves for connections now.
    pub fn max_connections(&self) -> usize {
        self.connections.max.unwrap_or_else(|| {
            let nofile = crate::open_files::current_limit().unwrap_or(1024);
            crate::open_files::connections_default(nofile)
        })
    }

    /// The limits `crate::net::quotas` applies.
    pub fn connection_quota_limits(&self) -> crate::net::quotas::QuotaLimits {
        crate::net::quotas::QuotaLimits {
            max: self.max_connections(),
            per_ip: self.connections.per_ip,
            per_ip_overrides: self.connections.per_ip_overrides.clone(),
        }
    }

    /// Partitions this broker may hold (`rill.broker.partitions.max`, or its default).
    pub fn broker_partitions_max(&self) -> i64 {
        self.broker_partitions_max
            .unwrap_or(PARTITIONS_PER_SHARD_DEFAULT * self.shards as i64)
    }

    /// The authorizer's settings when `authorizer.class.name` turned it on.
    pub fn authorizer(&self) -> Option<&rill_metadata::acl::AuthorizerConfig> {
        self.authorizer_on.then_some(&self.authorizer_settings)
    }
}

/// Least per-shard read cache the memory-sized default gives (so a small machine still reads
/// ahead for catch-up consumers).
pub const READ_CACHE_BYTES_MIN: usize = 64 << 20;

/// Memory this process may use: the machine's (`MemTotal` in /proc/meminfo), or its cgroup's
/// limit (v2 `memory.max`) if lower; 1 GiB if neither can be read.
pub fn memory_bytes() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total_bytes(&text))
        .unwrap_or(1 << 30);
    let limit = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok());
    limit.map_or(total, |limit| limit.min(total))
}

/// `MemTotal` of a /proc/meminfo text, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Number of cores this process may run on (the `--shards` default).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_cache_is_sized_to_memory_unless_set() {
        let meminfo = "MemTotal:       24634412 kB\nMemFree:  100 kB\n";
        assert_eq!(mem_total_bytes(meminfo), Some(24_634_412 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1 kB\n"), None);
        let mut c = BrokerConfig::defaults();
        c.shards = 2;
        let per_shard = (memory_bytes() / 16) as usize;
        assert_eq!(
            c.read_cache_bytes_per_shard(),
            per_shard.max(READ_CACHE_BYTES_MIN)
        );
        assert!(c.read_cache_write_through);
        c.read_cache_bytes = Some(0);
        assert_eq!(c.read_cache_bytes_per_shard(), 0, "0 turns it off");
    }
}
