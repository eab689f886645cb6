//! Broker configuration: built-in defaults, then a Kafka-style `.properties` file, then the command
//! line — each layer overrides the one before it.
//!
//! The file uses Kafka's own property names where one exists (`num.partitions`,
//! `log.segment.bytes`, `log.retention.ms`, ...), so an operator's existing `server.properties`
//! mostly just works; Rill-only knobs are prefixed `rill.`. Unknown keys are logged and ignored, as
//! Kafka does; a known key with a bad value is an error, because silently ignoring it would run the
//! broker with a setting the operator did not ask for.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use crate::admin::state::SeriesLimits;
use crate::cli::Cli;
use crate::cluster::config::{client_listener, ClusterConfig, ClusterSettings};

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
/// config's rule); [`crate::topic_config`] resolves them under a topic's own configs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LogDefaults {
    /// Broker properties that set topic-config defaults (`log.retention.hours=168`,
    /// `message.max.bytes`, `compression.type`, ...), as set in the file.
    pub static_props: BTreeMap<String, String>,
    /// `log.retention.check.interval.ms`: how often retention runs per partition.
    pub retention_check_interval_ms: u64,
    /// The `log.cleaner.*` settings of the shards' cleaners.
    pub cleaner: crate::compaction::CleanerSettings,
}

impl LogDefaults {
    /// Kafka's defaults: nothing set by the file.
    pub fn kafka() -> Self {
        LogDefaults {
            static_props: BTreeMap::new(),
            retention_check_interval_ms: 5 * 60 * 1000,
            cleaner: crate::compaction::CleanerSettings::default(),
        }
    }

    /// The effective value of topic config `name` at broker level (no topic override and no
    /// dynamic config): what DescribeConfigs shows and what a topic inherits.
    pub fn topic_default(&self, name: &str) -> String {
        let empty = BTreeMap::new();
        crate::topic_config::ConfigLayers {
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
    pub txn: crate::txn::TxnConfig,
    /// Kafka's `group.*` settings (the consumer group coordinator).
    pub group: crate::group::GroupConfig,
    /// Tiered storage: `remote.log.storage.system.enable`, `rill.remote.*`.
    pub remote: crate::tiered::settings::RemoteStorageSettings,
    /// `rill.test.*`: faults injected on purpose, debug builds only ([`crate::test_hooks`]).
    pub test_hooks: crate::test_hooks::TestHooks,
}

/// The admin HTTP listener (metrics, health, status) and its label cardinality bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSettings {
    /// `rill.admin.listen` / `--admin-listen`: where it binds; `None` when `off`.
    pub listen: Option<SocketAddr>,
    /// `rill.metrics.partition.series.enable`, `.partition.series.max`, `rill.metrics.topics.max`,
    /// `rill.metrics.groups.max`.
    pub limits: SeriesLimits,
}

impl Default for AdminSettings {
    fn default() -> Self {
        AdminSettings {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 9644))),
            limits: SeriesLimits {
                partition_series: true,
                partition_series_max: 10_000,
                topics_max: 1_000,
                groups_max: 1_000,
            },
        }
    }
}

impl AdminSettings {
    fn apply_property(&mut self, key: &str, v: &str) -> Result<Applied, ConfigError> {
        match key {
            "rill.admin.listen" => self.listen = parse_admin_listen(key, v)?,
            "rill.metrics.partition.series.enable" => {
                self.limits.partition_series = parse_bool(key, v)?
            }
            "rill.metrics.partition.series.max" => {
                self.limits.partition_series_max = parse_at_least_one(key, v)?
            }
            "rill.metrics.topics.max" => self.limits.topics_max = parse_at_least_one(key, v)?,
            "rill.metrics.groups.max" => self.limits.groups_max = parse_at_least_one(key, v)?,
            _ => return Ok(Applied::Unknown),
        }
        Ok(Applied::Yes)
    }
}

/// `HOST:PORT`, or `off` for no admin listener.
fn parse_admin_listen(key: &str, v: &str) -> Result<Option<SocketAddr>, ConfigError> {
    if v.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    parse_listen(key, v).map(Some)
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
pub const CONNECTIONS_MAX_IDLE_MS_DEFAULT: i64 = 600_000;

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
    pub idle_ms: i64,
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
    fn apply_property(&mut self, key: &str, v: &str) -> Result<bool, ConfigError> {
        match key {
            "max.connections" => self.max = Some(parse_at_most_i32(key, v)?),
            "max.connections.per.ip" => {
                self.per_ip = usize::try_from(parse_num::<i32>(key, v)?)
                    .map_err(|_| bad(key, v, "must be 0 or more"))?
            }
            "max.connections.per.ip.overrides" => {
                self.per_ip_overrides = parse_ip_overrides(key, v)?;
                self.per_ip_overrides_text = v.to_string();
            }
            "connections.max.idle.ms" => self.idle_ms = parse_num(key, v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `connections.max.idle.ms` as a duration; `None` when connections never idle out.
    pub fn idle(&self) -> Option<std::time::Duration> {
        u64::try_from(self.idle_ms)
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
    pub expiration_ms: i64,
    /// `rill.partition.producers.max`: producers one partition keeps at most (the least
    /// recently written without an open transaction are forgotten past it).
    pub partition_max: usize,
}

impl Default for ProducerSettings {
    fn default() -> Self {
        ProducerSettings {
            expiration_ms: 86_400_000,
            partition_max: rill_engine::config::PRODUCERS_MAX_DEFAULT,
        }
    }
}

impl ProducerSettings {
    fn apply_property(&mut self, key: &str, v: &str) -> Result<bool, ConfigError> {
        match key {
            "producer.id.expiration.ms" => {
                self.expiration_ms = i64::from(parse_positive_i32(key, v)?)
            }
            "rill.partition.producers.max" => self.partition_max = parse_at_least_one(key, v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// `host:count,host:count`: each host (a name or an address) resolved to every address it has.
fn parse_ip_overrides(
    key: &str,
    v: &str,
) -> Result<std::collections::HashMap<std::net::IpAddr, usize>, ConfigError> {
    let mut out = std::collections::HashMap::new();
    for entry in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, count) = entry
            .rsplit_once(':')
            .ok_or_else(|| bad(key, v, format!("{entry:?} is not host:count")))?;
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| bad(key, v, format!("{entry:?}: the count is not a number")))?;
        let host = host.trim().trim_matches(|c| c == '[' || c == ']');
        let addresses = (host, 0)
            .to_socket_addrs()
            .map_err(|e| bad(key, v, format!("{host:?}: {e}")))?;
        for address in addresses {
            out.insert(address.ip().to_canonical(), count);
        }
    }
    Ok(out)
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
            txn: crate::txn::TxnConfig::default(),
            group: crate::group::GroupConfig::default(),
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

    /// Kafka's cross-checks of the bounds.
    fn check_bounds(&self) -> Result<(), ConfigError> {
        if let Some(q) = self.queued_max_request_bytes {
            if q < self.request_bytes_max as u64 {
                return Err(bad(
                    "queued.max.request.bytes",
                    &q.to_string(),
                    "must be at least socket.request.max.bytes",
                ));
            }
        }
        if self.connections.per_ip == 0 && self.connections.per_ip_overrides.is_empty() {
            return Err(bad(
                "max.connections.per.ip",
                "0",
                "can be 0 only if max.connections.per.ip.overrides is set",
            ));
        }
        Ok(())
    }

    /// Partitions this broker may hold (`rill.broker.partitions.max`, or its default).
    pub fn broker_partitions_max(&self) -> i64 {
        self.broker_partitions_max
            .unwrap_or(PARTITIONS_PER_SHARD_DEFAULT * self.shards as i64)
    }

    /// Resolve defaults, then `cli.config` (if given), then the flags.
    pub fn resolve(cli: &Cli) -> Result<Self, ConfigError> {
        let mut config = Self::defaults();
        let mut advertise_from_file = None;
        if let Some(path) = &cli.config {
            let properties = read_properties_file(path)?;
            advertise_from_file = config.apply_properties(&properties)?;
        }
        config.apply_cli(cli, advertise_from_file)?;
        Ok(config)
    }

    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`; false for
    /// another key.
    fn apply_authorizer_property(&mut self, key: &str, v: &str) -> Result<bool, ConfigError> {
        match key {
            "authorizer.class.name" => self.authorizer_on = parse_authorizer(key, v)?,
            "super.users" => {
                self.authorizer_settings.super_users =
                    rill_metadata::acl::AuthorizerConfig::parse_super_users(v)
            }
            "allow.everyone.if.no.acl.found" => {
                self.authorizer_settings.allow_everyone_if_no_acl_found = parse_bool(key, v)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The authorizer's settings when `authorizer.class.name` turned it on.
    pub fn authorizer(&self) -> Option<&rill_metadata::acl::AuthorizerConfig> {
        self.authorizer_on.then_some(&self.authorizer_settings)
    }

    /// Apply `key=value` pairs; returns an `advertised.listeners`-style address if one was given,
    /// so the CLI layer can decide between it and `--advertise`.
    pub fn apply_properties(
        &mut self,
        properties: &BTreeMap<String, String>,
    ) -> Result<Option<String>, ConfigError> {
        let mut advertise = None;
        // It decides which `listeners` entry is the client's, whatever the key order.
        if let Some(names) = properties.get("controller.listener.names") {
            self.cluster_settings
                .apply_property("controller.listener.names", names)?;
        }
        for (key, value) in properties {
            match self.apply_property(key, value)? {
                Applied::Yes => {
                    self.explicit.insert(key.clone());
                }
                Applied::Advertise(address) => {
                    self.explicit.insert(key.clone());
                    advertise = Some(address);
                }
                Applied::Unknown => tracing::warn!(key, "ignoring unknown config property"),
            }
        }
        self.group
            .consumer
            .check()
            .map_err(|(key, why)| bad(key, &self.group.consumer.value_of(key), why))?;
        if self.group.session_timeout_ms_max < self.group.session_timeout_ms_min {
            return Err(bad(
                "group.max.session.timeout.ms",
                &self.group.session_timeout_ms_max.to_string(),
                "must be at least group.min.session.timeout.ms",
            ));
        }
        self.group
            .share
            .check()
            .map_err(|(key, why)| bad(key, &self.group.share.value_of(key), why))?;
        self.remote
            .check()
            .map_err(|(key, why)| bad(key, &self.remote.bucket, why))?;
        Ok(advertise)
    }

    /// The client quotas' windows (`quota.window.num`, `quota.window.size.seconds`, and the
    /// `controller.` ones of mutation quotas); `false` for another key.
    fn apply_quota_property(&mut self, key: &str, v: &str) -> Result<bool, ConfigError> {
        match key {
            "quota.window.num" => self.quota_window.samples = parse_positive_i32(key, v)? as u32,
            "quota.window.size.seconds" => {
                self.quota_window.window_ms = parse_positive_i32(key, v)? as u64 * 1000
            }
            "controller.quota.window.num" => {
                self.controller_quota_window.samples = parse_positive_i32(key, v)? as u32
            }
            "controller.quota.window.size.seconds" => {
                self.controller_quota_window.window_ms = parse_positive_i32(key, v)? as u64 * 1000
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn apply_property(&mut self, key: &str, value: &str) -> Result<Applied, ConfigError> {
        let v = value.trim();
        if self.apply_remote_property(key, v)? || self.apply_quota_property(key, v)? {
            return Ok(Applied::Yes);
        }
        match key {
            "listeners" | "rill.listen" | "advertised.listeners" | "rill.advertise" => {
                return self.apply_listeners(key, v)
            }
            "log.dirs" | "log.dir" | "rill.data.dir" => {
                let first = v.split(',').next().unwrap_or(v);
                self.data_dir = PathBuf::from(first.trim());
            }
            "num.partitions" => self.default_partitions = parse_positive_i32(key, v)?,
            "auto.create.topics.enable" => self.auto_create_topics = parse_bool(key, v)?,
            "broker.id" | "node.id" => self.node_id = parse_num(key, v)?,
            "socket.request.max.bytes" => self.request_bytes_max = parse_at_most_i32(key, v)?,
            "rill.shards" => self.shards = parse_shards(key, v)?,
            "rill.connection.inflight.requests.max" => {
                self.inflight_requests_max = parse_at_least_one(key, v)?
            }
            "rill.shard.io.memory.bytes" => self.io_memory_bytes = parse_num(key, v)?,
            "rill.partition.queue.max" => self.partition_queue_max = parse_at_least_one(key, v)?,
            "rill.shard.channel.capacity" => {
                self.shard_channel_capacity = parse_at_least_one(key, v)?
            }
            "queued.max.request.bytes" => {
                self.queued_max_request_bytes = parse_queued_bytes(key, v)?
            }
            "fetch.max.bytes" => {
                self.fetch_max_bytes = parse_at_most_i32(key, v)?;
            }
            "rill.shard.fetch.bytes.max" => self.shard_fetch_bytes_max = parse_at_most_i32(key, v)?,
            "rill.read.cache.bytes" => self.read_cache_bytes = Some(parse_num(key, v)?),
            "rill.read.cache.write.through" => self.read_cache_write_through = parse_bool(key, v)?,
            "rill.read.ahead.hold.ms" => self.read_ahead_hold_ms = parse_num(key, v)?,
            "rill.read.ahead.hold.piece.bytes" => {
                self.read_ahead_hold_piece_bytes = parse_piece_bytes(key, v)?
            }
            "rill.shard.prealloc.bytes.max" => self.shard_prealloc_bytes_max = parse_num(key, v)?,
            "rill.shard.open.files.max" => {
                self.shard_open_files_max = Some(parse_at_least_one(key, v)?)
            }
            "rill.broker.partitions.max" => {
                self.broker_partitions_max = Some(parse_at_least_one(key, v)?)
            }
            "rill.partition.idle.ms" => self.partition_idle_ms = parse_at_least_one(key, v)?,
            _ if key.starts_with("group.")
                || key == "rill.shard.groups.max"
                || key == "offsets.retention.check.interval.ms" =>
            {
                return apply_group_property(&mut self.group, key, v)
            }
            _ if key.starts_with("rill.test.") => self
                .test_hooks
                .apply(key, v)
                .map_err(|why| bad(key, v, why))?,
            _ if key.starts_with("transaction") || key == "rill.shard.transactional.ids.max" => {
                return apply_txn_property(&mut self.txn, key, v)
            }
            _ if self.apply_authorizer_property(key, v)? => {}
            _ if self.connections.apply_property(key, v)? => {}
            _ if self.producers.apply_property(key, v)? => {}
            _ if self.security.apply_property(key, v) => {}
            _ if self.cluster_settings.apply_property(key, v)? => {}
            _ => match self.admin.apply_property(key, v)? {
                Applied::Unknown => return self.log.apply_property(key, v),
                applied => return Ok(applied),
            },
        }
        Ok(Applied::Yes)
    }

    /// Tiered storage's properties (`crate::tiered::settings`); false if `key` is not one.
    fn apply_remote_property(&mut self, key: &str, v: &str) -> Result<bool, ConfigError> {
        if !self
            .remote
            .apply_property(key, v)
            .map_err(|why| bad(key, v, why))?
        {
            return Ok(false);
        }
        if key == crate::topic_config::REMOTE_STORAGE_SYSTEM_ENABLE {
            // Topic configs are checked against it (`topic_config::remote_retention`).
            self.log.static_props.insert(key.to_string(), v.to_string());
        }
        Ok(true)
    }

    /// `listeners` or `advertised.listeners`: kept whole for [`Self::resolve_listeners`], and
    /// their first client entry read now.
    fn apply_listeners(&mut self, key: &str, v: &str) -> Result<Applied, ConfigError> {
        if key == "listeners" || key == "rill.listen" {
            self.cluster_settings.set_listeners(v);
            self.security.set_listeners(v);
            let names = self.cluster_settings.controller_listener_names();
            self.listen = parse_listen(key, &client_listener(key, v, &names)?)?;
            return Ok(Applied::Yes);
        }
        self.security.set_advertised(v);
        let names = self.cluster_settings.controller_listener_names();
        Ok(Applied::Advertise(client_listener(key, v, &names)?))
    }

    /// Every listener, the first as `listen` and `advertise_*` say (flags over the file).
    fn resolve_listeners(&mut self) -> Result<(), ConfigError> {
        let first = (
            self.listen,
            self.advertise_host.as_str(),
            self.advertise_port,
        );
        let controllers = self.cluster_settings.controller_listener_names();
        self.listeners =
            self.security
                .resolve(first, &controllers)
                .map_err(|e| ConfigError::BadValue {
                    key: e.key,
                    value: e.value,
                    reason: e.reason,
                })?;
        Ok(())
    }

    fn apply_cli(&mut self, cli: &Cli, advertise_file: Option<String>) -> Result<(), ConfigError> {
        if let Some(listen) = &cli.listen {
            self.listen = parse_listen("--listen", listen)?;
        }
        if let Some(dir) = &cli.data_dir {
            self.data_dir = dir.clone();
        }
        if let Some(shards) = cli.shards {
            self.shards = parse_shards("--shards", &shards.to_string())?;
        }
        if let Some(partitions) = cli.default_partitions {
            self.default_partitions =
                parse_positive_i32("--default-partitions", &partitions.to_string())?;
        }
        if let Some(auto) = cli.auto_create_topics {
            self.auto_create_topics = auto;
        }
        if let Some(bytes) = cli.io_memory_bytes {
            self.io_memory_bytes = bytes;
        }
        if let Some(admin) = &cli.admin_listen {
            self.admin.listen = parse_admin_listen("--admin-listen", admin)?;
        }
        if let Some(node_id) = cli.node_id {
            self.node_id = node_id;
        }
        if let Some(ms) = cli.group_initial_rebalance_delay_ms {
            self.group.initial_rebalance_delay_ms =
                parse_delay_ms("--group-initial-rebalance-delay-ms", &ms.to_string())?;
        }
        self.cluster_settings.apply_flags(&cli.cluster_flags());
        self.cluster = self.cluster_settings.resolve(self.node_id)?;
        // A topic config's broker default, so it stays with the log defaults (DescribeConfigs).
        let unclean = self.log.static_props.get("unclean.leader.election.enable");
        if let (Some(cluster), Some(v)) = (&mut self.cluster, unclean) {
            cluster.leadership.unclean_election = v.trim().eq_ignore_ascii_case("true");
        }
        let flags = [
            (cli.listen.is_some(), "listeners"),
            (cli.data_dir.is_some(), "log.dirs"),
            (cli.shards.is_some(), "rill.shards"),
            (cli.default_partitions.is_some(), "num.partitions"),
            (
                cli.auto_create_topics.is_some(),
                "auto.create.topics.enable",
            ),
            (cli.advertise.is_some(), "advertised.listeners"),
            (cli.node_id.is_some(), "node.id"),
            (
                cli.group_initial_rebalance_delay_ms.is_some(),
                "group.initial.rebalance.delay.ms",
            ),
        ];
        for (_, property) in flags.into_iter().filter(|(given, _)| *given) {
            self.explicit.insert(property.to_string());
        }
        self.check_bounds()?;
        // advertise defaults to listen, so it is resolved after the listen address is final.
        self.advertise_host = self.listen.ip().to_string();
        self.advertise_port = self.listen.port();
        if let Some(address) = cli.advertise.clone().or(advertise_file) {
            let (host, port) = split_host_port("--advertise", &address)?;
            self.advertise_host = host;
            self.advertise_port = port;
        }
        self.resolve_listeners()
    }
}

enum Applied {
    Yes,
    Advertise(String),
    Unknown,
}

impl LogDefaults {
    fn apply_property(&mut self, key: &str, v: &str) -> Result<Applied, ConfigError> {
        if let Some((def, synonym)) = crate::topic_config::defs::by_synonym(key) {
            // Checked in the topic config's unit, as it will be used.
            let value = match v.parse::<i64>() {
                Ok(n) if synonym.factor != 1 && n >= 0 => {
                    n.saturating_mul(synonym.factor).to_string()
                }
                _ => v.to_string(),
            };
            (def.check)(&value).map_err(|reason| bad(key, v, reason))?;
            self.static_props.insert(key.to_string(), v.to_string());
            return Ok(Applied::Yes);
        }
        match key {
            "log.retention.check.interval.ms" => {
                self.retention_check_interval_ms = parse_at_least_one(key, v)?
            }
            "log.cleaner.enable" => self.cleaner.enabled = parse_bool(key, v)?,
            "log.cleaner.dedupe.buffer.size" => {
                self.cleaner.dedupe_buffer_bytes = parse_at_least_one(key, v)?
            }
            "log.cleaner.io.max.bytes.per.second" => {
                self.cleaner.io_bytes_per_second_max = parse_rate(key, v)?
            }
            "log.cleaner.backoff.ms" => self.cleaner.backoff_ms = parse_at_least_one(key, v)?,
            _ => return Ok(Applied::Unknown),
        }
        Ok(Applied::Yes)
    }
}

/// Kafka's transaction coordinator settings.
fn apply_txn_property(
    txn: &mut crate::txn::TxnConfig,
    key: &str,
    v: &str,
) -> Result<Applied, ConfigError> {
    match key {
        "transaction.max.timeout.ms" => txn.max_timeout_ms = parse_positive_i32(key, v)?,
        "transactional.id.expiration.ms" => {
            txn.id_expiration_ms = rill_types::DurationMs::from(parse_positive_i32(key, v)?)
        }
        "transaction.abort.timed.out.transaction.cleanup.interval.ms" => {
            txn.abort_check_interval_ms = parse_at_least_one(key, v)?
        }
        "transaction.remove.expired.transaction.cleanup.interval.ms" => {
            txn.expiration_check_interval_ms = parse_at_least_one(key, v)?
        }
        "rill.shard.transactional.ids.max" => txn.shard_ids_max = parse_at_least_one(key, v)?,
        _ => return Ok(Applied::Unknown),
    }
    Ok(Applied::Yes)
}

/// Kafka's `group.*` broker settings (and Rill's bound on a shard's groups).
fn apply_group_property(
    group: &mut crate::group::GroupConfig,
    key: &str,
    v: &str,
) -> Result<Applied, ConfigError> {
    match key {
        "group.initial.rebalance.delay.ms" => {
            group.initial_rebalance_delay_ms = parse_delay_ms(key, v)?
        }
        "group.max.size" => group.max_size = parse_at_most_i32(key, v)?,
        "rill.shard.groups.max" => group.shard_groups_max = parse_at_least_one(key, v)?,
        "group.min.session.timeout.ms" => group.session_timeout_ms_min = parse_delay_ms(key, v)?,
        "group.max.session.timeout.ms" => group.session_timeout_ms_max = parse_delay_ms(key, v)?,
        "offsets.retention.check.interval.ms" => {
            group.cleanup_interval_ms = rill_types::DurationMs(parse_at_least_one(key, v)?)
        }
        _ if key.starts_with("group.consumer.") => {
            return apply_consumer_group_property(&mut group.consumer, key, v)
        }
        _ if key.starts_with("group.share.") => {
            return apply_share_group_property(&mut group.share, key, v)
        }
        _ => return Ok(Applied::Unknown),
    }
    Ok(Applied::Yes)
}

/// Kafka's `group.consumer.*` broker settings (KIP-848 consumer groups); their bounds are
/// checked together once every property is read (`ConsumerConfig::check`).
fn apply_consumer_group_property(
    c: &mut crate::group::consumer::ConsumerConfig,
    key: &str,
    v: &str,
) -> Result<Applied, ConfigError> {
    use crate::group::consumer::Assignor;
    match key {
        "group.consumer.session.timeout.ms" => c.session_timeout_ms = parse_positive_i32(key, v)?,
        "group.consumer.min.session.timeout.ms" => {
            c.session_timeout_min_ms = parse_positive_i32(key, v)?
        }
        "group.consumer.max.session.timeout.ms" => {
            c.session_timeout_max_ms = parse_positive_i32(key, v)?
        }
        "group.consumer.heartbeat.interval.ms" => {
            c.heartbeat_interval_ms = parse_positive_i32(key, v)?
        }
        "group.consumer.min.heartbeat.interval.ms" => {
            c.heartbeat_interval_min_ms = parse_positive_i32(key, v)?
        }
        "group.consumer.max.heartbeat.interval.ms" => {
            c.heartbeat_interval_max_ms = parse_positive_i32(key, v)?
        }
        "group.consumer.max.size" => c.max_size = parse_at_least_one(key, v)?,
        "group.consumer.assignors" => {
            let mut list = [None; 2];
            let mut n = 0;
            for name in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let a = Assignor::from_name(name)
                    .ok_or_else(|| bad(key, v, format!("unknown assignor {name}")))?;
                if !list.contains(&Some(a)) {
                    list[n] = Some(a);
                    n += 1;
                }
            }
            if n == 0 {
                return Err(bad(key, v, "at least one assignor"));
            }
            c.assignors = list;
        }
        _ => return Ok(Applied::Unknown),
    }
    Ok(Applied::Yes)
}

/// Kafka's `group.share.*` broker settings (KIP-932 share groups); their bounds are checked
/// together once every property is read (`ShareConfig::check`).
fn apply_share_group_property(
    c: &mut crate::group::share::ShareConfig,
    key: &str,
    v: &str,
) -> Result<Applied, ConfigError> {
    match key {
        "group.share.session.timeout.ms" => c.session_timeout_ms = parse_positive_i32(key, v)?,
        "group.share.min.session.timeout.ms" => {
            c.session_timeout_bounds.0 = parse_positive_i32(key, v)?
        }
        "group.share.max.session.timeout.ms" => {
            c.session_timeout_bounds.1 = parse_positive_i32(key, v)?
        }
        "group.share.heartbeat.interval.ms" => {
            c.heartbeat_interval_ms = parse_positive_i32(key, v)?
        }
        "group.share.min.heartbeat.interval.ms" => {
            c.heartbeat_interval_bounds.0 = parse_positive_i32(key, v)?
        }
        "group.share.max.heartbeat.interval.ms" => {
            c.heartbeat_interval_bounds.1 = parse_positive_i32(key, v)?
        }
        "group.share.record.lock.duration.ms" => {
            c.partition.lock_duration_ms = parse_positive_i32(key, v)?.into()
        }
        "group.share.min.record.lock.duration.ms" => {
            c.lock_duration_bounds.0 = parse_positive_i32(key, v)?
        }
        "group.share.max.record.lock.duration.ms" => {
            c.lock_duration_bounds.1 = parse_positive_i32(key, v)?
        }
        "group.share.delivery.count.limit" => c.partition.delivery_count_limit = parse_num(key, v)?,
        "group.share.partition.max.record.locks" => {
            c.partition.max_record_locks = parse_at_least_one(key, v)?
        }
        "group.share.max.size" => c.max_size = parse_at_least_one(key, v)?,
        _ => return Ok(Applied::Unknown),
    }
    Ok(Applied::Yes)
}

/// Upper bound on `--shards`: more shards than cores run unpinned, far more is a mistake.
pub const SHARDS_MAX: usize = 256;

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

/// Parse a Kafka `.properties` file into key → value.
pub fn read_properties_file(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let file = std::fs::File::open(path).map_err(|e| ConfigError::File {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let map =
        java_properties::read(std::io::BufReader::new(file)).map_err(|e| ConfigError::File {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    Ok(map.into_iter().collect())
}

fn bad(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    v.parse::<T>().map_err(|e| bad(key, v, e.to_string()))
}

fn parse_at_least_one<T: std::str::FromStr + PartialOrd + From<u8>>(
    key: &str,
    v: &str,
) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    let n: T = parse_num(key, v)?;
    if n < T::from(1) {
        return Err(bad(key, v, "must be at least 1"));
    }
    Ok(n)
}

/// A Kafka `int` property that counts something: 1 to `i32::MAX`.
fn parse_at_most_i32(key: &str, v: &str) -> Result<usize, ConfigError> {
    let n = parse_positive_i32(key, v)?;
    Ok(n as usize)
}

/// `queued.max.request.bytes`: bytes; Kafka's -1 (or 0: no bound) keeps Rill's default bound.
fn parse_queued_bytes(key: &str, v: &str) -> Result<Option<u64>, ConfigError> {
    let n: i64 = parse_num(key, v)?;
    if n <= 0 {
        tracing::warn!(
            key,
            value = n,
            "Rill always bounds request memory: using the default queued.max.request.bytes"
        );
        return Ok(None);
    }
    Ok(Some(n as u64))
}

fn parse_positive_i32(key: &str, v: &str) -> Result<i32, ConfigError> {
    let n: i32 = parse_num(key, v)?;
    if n < 1 {
        return Err(bad(key, v, "must be at least 1"));
    }
    Ok(n)
}

/// A delay in milliseconds: 0 or more.
fn parse_delay_ms(key: &str, v: &str) -> Result<i32, ConfigError> {
    match v.parse::<i32>() {
        Ok(n) if n >= 0 => Ok(n),
        _ => Err(bad(
            key,
            v,
            "expected a whole number of milliseconds, 0 or more",
        )),
    }
}

fn parse_shards(key: &str, v: &str) -> Result<usize, ConfigError> {
    let n: usize = parse_at_least_one(key, v)?;
    if n > SHARDS_MAX {
        return Err(bad(key, v, format!("at most {SHARDS_MAX} shards")));
    }
    Ok(n)
}

/// A held read's piece size: whole 4 KiB blocks, from one block to 256 KiB (the largest
/// piece any disk read is issued in).
fn parse_piece_bytes(key: &str, v: &str) -> Result<usize, ConfigError> {
    let n: usize = parse_num(key, v)?;
    if !(4096..=256 << 10).contains(&n) || !n.is_multiple_of(4096) {
        return Err(bad(
            key,
            v,
            "must be a multiple of 4096 from 4096 to 262144",
        ));
    }
    Ok(n)
}

/// `authorizer.class.name`: empty is none (Kafka's default); Kafka's StandardAuthorizer is
/// served (`rill_metadata::acl`); any other class (ZooKeeper's AclAuthorizer, a plugin) stops
/// the start rather than leave the broker open.
fn parse_authorizer(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v {
        "" => Ok(false),
        rill_metadata::acl::STANDARD_AUTHORIZER => Ok(true),
        _ => Err(bad(
            key,
            v,
            format!("only {} is served", rill_metadata::acl::STANDARD_AUTHORIZER),
        )),
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(key, v, "expected true or false")),
    }
}

/// A byte rate; Kafka's default (`Double.MAX_VALUE`) and anything past `u64` mean unlimited.
fn parse_rate(key: &str, v: &str) -> Result<Option<u64>, ConfigError> {
    let n: f64 = parse_num(key, v)?;
    if n.is_nan() || n < 1.0 {
        return Err(bad(key, v, "must be at least 1"));
    }
    Ok((n < u64::MAX as f64).then_some(n as u64))
}

fn parse_listen(key: &str, v: &str) -> Result<SocketAddr, ConfigError> {
    // Kafka's `PLAINTEXT://:9092`: an empty host binds every interface.
    let every = format!("0.0.0.0{v}");
    let v = if v.starts_with(':') {
        every.as_str()
    } else {
        v
    };
    let mut addresses = v
        .to_socket_addrs()
        .map_err(|e| bad(key, v, e.to_string()))?;
    addresses
        .next()
        .ok_or_else(|| bad(key, v, "resolves to no address"))
}

fn split_host_port(key: &str, v: &str) -> Result<(String, u16), ConfigError> {
    let (host, port) = v
        .rsplit_once(':')
        .ok_or_else(|| bad(key, v, "expected HOST:PORT"))?;
    let port = port
        .parse::<u16>()
        .map_err(|e| bad(key, v, e.to_string()))?;
    if host.is_empty() {
        return Err(bad(key, v, "empty host"));
    }
    Ok((
        host.trim_matches(|c| c == '[' || c == ']').to_string(),
        port,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("rill").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn defaults_match_issue_4() {
        let c = BrokerConfig::resolve(&cli(&[])).unwrap();
        assert_eq!(c.listen, "127.0.0.1:9092".parse().unwrap());
        assert_eq!(
            (c.advertise_host.as_str(), c.advertise_port),
            ("127.0.0.1", 9092)
        );
        assert_eq!(c.data_dir, PathBuf::from("./rill-data"));
        assert_eq!(c.shards, available_cores());
        assert_eq!(c.default_partitions, 1);
        assert!(c.auto_create_topics);
        assert_eq!(c.group.initial_rebalance_delay_ms, 3_000, "Kafka's default");
        assert!(c.log.static_props.is_empty());
        assert!(c.explicit.is_empty());
    }

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

    #[test]
    fn advertise_follows_listen_unless_given() {
        let c = BrokerConfig::resolve(&cli(&["--listen", "127.0.0.1:19092"])).unwrap();
        assert_eq!(c.advertise_port, 19092);
        let c = BrokerConfig::resolve(&cli(&[
            "--listen",
            "127.0.0.1:19092",
            "--advertise",
            "localhost:29092",
        ]))
        .unwrap();
        assert_eq!(
            (c.advertise_host.as_str(), c.advertise_port),
            ("localhost", 29092)
        );
    }

    #[test]
    fn unclean_election_is_a_log_default_the_controller_reads_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.properties");
        std::fs::write(
            &path,
            "node.id=1\nprocess.roles=broker,controller\n\
             listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n\
             controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9093\n\
             unclean.leader.election.enable=true\nauto.leader.rebalance.enable=false\n",
        )
        .unwrap();
        let c = BrokerConfig::resolve(&cli(&["--config", path.to_str().unwrap()])).unwrap();
        assert_eq!(
            c.log.topic_default("unclean.leader.election.enable"),
            "true"
        );
        let leadership = &c.cluster.as_ref().unwrap().leadership;
        assert!(leadership.unclean_election && !leadership.auto_rebalance);
    }

    #[test]
    fn file_then_flags_override() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.properties");
        std::fs::write(
            &path,
            "# kafka style\nnum.partitions=3\nlog.segment.bytes = 1048576\n\
             log.retention.ms=-1\nlog.flush.interval.messages=100\n\
             auto.create.topics.enable=false\nsome.unknown.key=1\n\
             listeners=PLAINTEXT://127.0.0.1:9999\nrill.read.cache.bytes=1000\n\
             rill.read.ahead.hold.ms=0\nrill.read.cache.write.through=false\n\
             rill.read.ahead.hold.piece.bytes=131072\n\
             transaction.max.timeout.ms=60000\n\
             transaction.abort.timed.out.transaction.cleanup.interval.ms=200\n\
             group.initial.rebalance.delay.ms=250\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let c = BrokerConfig::resolve(&cli(&["--config", p])).unwrap();
        assert_eq!(c.default_partitions, 3);
        assert_eq!(c.txn.max_timeout_ms, 60_000);
        assert_eq!(c.txn.abort_check_interval_ms, 200);
        assert_eq!(c.group.initial_rebalance_delay_ms, 250);
        assert_eq!(c.read_cache_bytes_per_shard(), 1000);
        assert!(!c.read_cache_write_through);
        assert_eq!(c.read_ahead_hold_ms, 0);
        assert_eq!(c.read_ahead_hold_piece_bytes, 128 << 10);
        assert_eq!(c.log.topic_default("segment.bytes"), "1048576");
        assert_eq!(c.log.topic_default("retention.ms"), "-1");
        assert_eq!(c.log.topic_default("flush.messages"), "100");
        assert!(c.explicit.contains("num.partitions") && c.explicit.contains("listeners"));
        assert!(!c.auto_create_topics);
        assert_eq!(c.listen.port(), 9999);
        let c = BrokerConfig::resolve(&cli(&[
            "--config",
            p,
            "--default-partitions",
            "5",
            "--auto-create-topics",
            "true",
            "--group-initial-rebalance-delay-ms",
            "0",
        ]))
        .unwrap();
        assert_eq!(c.default_partitions, 5);
        assert_eq!(c.group.initial_rebalance_delay_ms, 0);
        assert!(c.auto_create_topics);
    }

    /// Kafka's property names turn the authorizer on; another authorizer class stops the start.
    #[test]
    fn the_standard_authorizer_is_turned_on_by_its_class_name() {
        let mut c = BrokerConfig::defaults();
        assert!(c.authorizer().is_none());
        let props: BTreeMap<String, String> = [
            ("super.users", "User:admin;User:broker"),
            ("allow.everyone.if.no.acl.found", "true"),
            (
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        c.apply_properties(&props).unwrap();
        let a = c.authorizer().expect("on");
        assert!(a.allow_everyone_if_no_acl_found);
        assert!(a.super_users.contains("User:admin") && a.super_users.contains("User:broker"));
        let mut c = BrokerConfig::defaults();
        let other = [(
            "authorizer.class.name".to_string(),
            "kafka.security.authorizer.AclAuthorizer".to_string(),
        )];
        assert!(c.apply_properties(&other.into_iter().collect()).is_err());
    }

    #[test]
    fn bad_values_are_errors_not_ignored() {
        let mut c = BrokerConfig::defaults();
        for (k, v) in [
            ("num.partitions", "0"),
            ("num.partitions", "x"),
            ("auto.create.topics.enable", "yes"),
            ("log.retention.ms", "-5"),
            ("log.flush.interval.ms", "-2"),
            ("log.cleanup.policy", "shred"),
            ("log.retention.hours", "x"),
            ("log.segment.bytes", "0"),
            ("rill.broker.partitions.max", "0"),
            ("rill.shard.open.files.max", "-3"),
            ("rill.partition.idle.ms", "0"),
            ("group.initial.rebalance.delay.ms", "-1"),
            ("group.initial.rebalance.delay.ms", "3s"),
            ("group.max.size", "0"),
            ("rill.shard.groups.max", "0"),
            ("producer.id.expiration.ms", "0"),
            ("rill.partition.producers.max", "0"),
            ("rill.shard.transactional.ids.max", "0"),
            ("transactional.id.expiration.ms", "0"),
        ] {
            let map = BTreeMap::from([(k.to_string(), v.to_string())]);
            assert!(c.apply_properties(&map).is_err(), "{k}={v} accepted");
        }
        assert!(Cli::try_parse_from(["rill", "--auto-create-topics", "maybe"]).is_err());
        assert!(BrokerConfig::resolve(&cli(&["--shards", "100000"])).is_err());
        assert!(BrokerConfig::resolve(&cli(&["--listen", "nonsense"])).is_err());
        let negative = Cli::try_parse_from(["rill", "--group-initial-rebalance-delay-ms=-5"]);
        assert!(negative.is_ok_and(|c| BrokerConfig::resolve(&c).is_err()));
    }

    #[test]
    fn partition_scale_settings() {
        let mut c = BrokerConfig::defaults();
        c.shards = 2;
        assert_eq!(c.broker_partitions_max(), 20_000);
        assert_eq!(c.shard_open_files_max, None);
        let map = BTreeMap::from(
            [
                ("rill.broker.partitions.max", "500"),
                ("rill.shard.open.files.max", "64"),
                ("rill.shard.prealloc.bytes.max", "0"),
                ("rill.partition.idle.ms", "2000"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        c.apply_properties(&map).unwrap();
        assert_eq!(c.broker_partitions_max(), 500);
        assert_eq!(c.shard_open_files_max, Some(64));
        assert_eq!(c.shard_prealloc_bytes_max, 0);
        assert_eq!(c.partition_idle_ms, 2000);
    }

    #[test]
    fn admin_listener_defaults_to_9644_and_can_be_moved_or_switched_off() {
        let c = BrokerConfig::resolve(&cli(&[])).unwrap();
        assert_eq!(c.admin.listen, Some("127.0.0.1:9644".parse().unwrap()));
        assert!(c.admin.limits.partition_series);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.properties");
        std::fs::write(
            &path,
            "rill.admin.listen=127.0.0.1:19644\nrill.metrics.topics.max=7\n\
             rill.metrics.partition.series.enable=false\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let c = BrokerConfig::resolve(&cli(&["--config", p])).unwrap();
        assert_eq!(c.admin.listen, Some("127.0.0.1:19644".parse().unwrap()));
        assert_eq!(c.admin.limits.topics_max, 7);
        assert!(!c.admin.limits.partition_series);
        let c = BrokerConfig::resolve(&cli(&["--config", p, "--admin-listen", "OFF"])).unwrap();
        assert_eq!(c.admin.listen, None);
        assert!(BrokerConfig::resolve(&cli(&["--admin-listen", "nowhere"])).is_err());
        let mut c = BrokerConfig::defaults();
        for (k, v) in [
            ("rill.metrics.topics.max", "0"),
            ("rill.metrics.partition.series.enable", "sometimes"),
        ] {
            let map = BTreeMap::from([(k.to_string(), v.to_string())]);
            assert!(c.apply_properties(&map).is_err(), "{k}={v} accepted");
        }
    }

    #[test]
    fn connection_and_memory_bounds_take_kafkas_names_and_defaults() {
        let c = BrokerConfig::resolve(&cli(&["--shards", "2"])).unwrap();
        assert_eq!(
            c.connections.idle_ms, 600_000,
            "Kafka's connections.max.idle.ms"
        );
        assert_eq!(c.connections.per_ip, i32::MAX as usize);
        assert_eq!(c.fetch_max_bytes, 57_671_680, "Kafka's fetch.max.bytes");
        assert_eq!(c.queued_max_request_bytes(), 512 << 20, "256 MiB per shard");
        assert_eq!(c.shard_request_bytes_max(), 256 << 20);
        assert!(c.max_connections() >= 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.properties");
        std::fs::write(
            &path,
            "max.connections=4000\nmax.connections.per.ip=10\n\
             max.connections.per.ip.overrides=127.0.0.1:200,[::1]:5\n\
             connections.max.idle.ms=-1\nqueued.max.request.bytes=200000000\n\
             fetch.max.bytes=1048576\nrill.shard.fetch.bytes.max=8388608\n\
             socket.request.max.bytes=1000000\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let c = BrokerConfig::resolve(&cli(&["--config", p, "--shards", "4"])).unwrap();
        assert_eq!(c.max_connections(), 4000);
        let limits = c.connection_quota_limits();
        assert_eq!(limits.per_ip, 10);
        assert_eq!(limits.per_ip_overrides[&"127.0.0.1".parse().unwrap()], 200);
        assert_eq!(limits.per_ip_overrides[&"::1".parse().unwrap()], 5);
        assert_eq!(c.connections.idle(), None, "negative: never idle out");
        assert_eq!(c.queued_max_request_bytes(), 200_000_000);
        assert_eq!(
            c.shard_request_bytes_max(),
            50_000_000,
            "split among 4 shards"
        );
        assert_eq!(
            (c.fetch_max_bytes, c.shard_fetch_bytes_max),
            (1 << 20, 8 << 20)
        );
        // A share never below one largest request (and its size prefix).
        let mut small = c.clone();
        small.shards = 1000;
        assert_eq!(small.shard_request_bytes_max(), 1_000_004);
        // Kafka's -1 keeps Rill's bound.
        let mut c = BrokerConfig::defaults();
        let map = BTreeMap::from([("queued.max.request.bytes".into(), "-1".into())]);
        c.apply_properties(&map).unwrap();
        assert_eq!(c.queued_max_request_bytes, None);
    }

    #[test]
    fn bad_bounds_are_refused_as_kafka_refuses_them() {
        let mut c = BrokerConfig::defaults();
        for (k, v) in [
            ("max.connections", "0"),
            ("max.connections", "3000000000"),
            ("max.connections.per.ip", "-1"),
            ("max.connections.per.ip.overrides", "nocount"),
            ("max.connections.per.ip.overrides", "127.0.0.1:x"),
            ("fetch.max.bytes", "0"),
            ("socket.request.max.bytes", "0"),
            ("connections.max.idle.ms", "soon"),
        ] {
            let map = BTreeMap::from([(k.to_string(), v.to_string())]);
            assert!(c.apply_properties(&map).is_err(), "{k}={v} accepted");
        }
        let dir = tempfile::tempdir().unwrap();
        for text in [
            "queued.max.request.bytes=1000\n",
            "max.connections.per.ip=0\n",
        ] {
            let path = dir.path().join("bad.properties");
            std::fs::write(&path, text).unwrap();
            let resolved = BrokerConfig::resolve(&cli(&["--config", path.to_str().unwrap()]));
            assert!(resolved.is_err(), "{text} accepted");
        }
    }

    #[test]
    fn missing_config_file_is_an_error() {
        assert!(
            BrokerConfig::resolve(&cli(&["--config", "/nonexistent/rill.properties"])).is_err()
        );
    }
}
