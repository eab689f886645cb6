//! Broker configuration: built-in defaults, then a Kafka-style `.properties` file, then the command
//! line — each layer overrides the one before it. This module reads the file and checks the
//! values; the flags are applied in `crate::cli` ([`BrokerConfig::resolve`]), and the settings
//! themselves are plain values in [`crate::config::settings`].
//!
//! The file uses Kafka's own property names where one exists (`num.partitions`,
//! `log.segment.bytes`, `log.retention.ms`, ...), so an operator's existing `server.properties`
//! mostly just works; Rill-only knobs are prefixed `rill.`. Unknown keys are logged and ignored, as
//! Kafka does; a known key with a bad value is an error, because silently ignoring it would run the
//! broker with a setting the operator did not ask for.
//!
//! Every kind of configuration lives under this module, each part on its own floor
//! (`server/LAYERS.md`):
//! - this file: the properties file, read and checked into the settings;
//! - [`settings`]: the resolved [`BrokerConfig`] every module reads (the settings floor);
//! - [`topic`]: per-topic configs, their Kafka names and layers, and what they become (the
//!   settings floor);
//! - [`broker`]: the broker's configs as the DescribeConfigs/AlterConfigs broker resource sees
//!   them, static and dynamic (the handlers floor);
//! - [`changes`]: (Incremental)AlterConfigs of topics and brokers, persisted and applied live
//!   (the handlers floor);
//! - [`cluster`]: the cluster's own settings (KRaft roles, quorum voters, controller
//!   listener), read from the same file and flags (the settings floor).

pub mod broker;
pub mod changes;
pub mod cluster;
pub mod settings;
pub mod topic;

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use crate::config::cluster::client_listener;

pub use crate::admin::settings::AdminSettings;
/// The settings this file fills, named here too so the parser's callers and tests need one
/// path (`crate::config::BrokerConfig`); they are defined in [`settings`].
pub use crate::config::settings::{
    available_cores, memory_bytes, BrokerConfig, ConfigError, ConnectionSettings, LogDefaults,
    ProducerSettings, CONNECTIONS_MAX_IDLE_MS_DEFAULT, FETCH_MAX_BYTES_DEFAULT,
    PARTITIONS_PER_SHARD_DEFAULT, QUEUED_REQUEST_BYTES_PER_SHARD_DEFAULT, READ_CACHE_BYTES_MIN,
    SHARD_FETCH_BYTES_DEFAULT,
};

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
pub(crate) fn parse_admin_listen(key: &str, v: &str) -> Result<Option<SocketAddr>, ConfigError> {
    if v.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    parse_listen(key, v).map(Some)
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
            "connections.max.idle.ms" => self.idle_ms = rill_types::DurationMs(parse_num(key, v)?),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl ProducerSettings {
    fn apply_property(&mut self, key: &str, v: &str) -> Result<bool, ConfigError> {
        match key {
            "producer.id.expiration.ms" => {
                self.expiration_ms = rill_types::DurationMs::from(parse_positive_i32(key, v)?)
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

impl BrokerConfig {
    /// Kafka's cross-checks of the bounds.
    pub(crate) fn check_bounds(&self) -> Result<(), ConfigError> {
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
        if key == crate::config::topic::REMOTE_STORAGE_SYSTEM_ENABLE {
            // Topic configs are checked against it (`config::topic::remote_retention`).
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
    pub(crate) fn resolve_listeners(&mut self) -> Result<(), ConfigError> {
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
}

enum Applied {
    Yes,
    Advertise(String),
    Unknown,
}

impl LogDefaults {
    fn apply_property(&mut self, key: &str, v: &str) -> Result<Applied, ConfigError> {
        if let Some((def, synonym)) = crate::config::topic::defs::by_synonym(key) {
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

pub(crate) fn parse_positive_i32(key: &str, v: &str) -> Result<i32, ConfigError> {
    let n: i32 = parse_num(key, v)?;
    if n < 1 {
        return Err(bad(key, v, "must be at least 1"));
    }
    Ok(n)
}

/// A delay in milliseconds: 0 or more.
pub(crate) fn parse_delay_ms(key: &str, v: &str) -> Result<i32, ConfigError> {
    match v.parse::<i32>() {
        Ok(n) if n >= 0 => Ok(n),
        _ => Err(bad(
            key,
            v,
            "expected a whole number of milliseconds, 0 or more",
        )),
    }
}

pub(crate) fn parse_shards(key: &str, v: &str) -> Result<usize, ConfigError> {
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

pub(crate) fn parse_listen(key: &str, v: &str) -> Result<SocketAddr, ConfigError> {
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

pub(crate) fn split_host_port(key: &str, v: &str) -> Result<(String, u16), ConfigError> {
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
}
