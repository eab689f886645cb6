//! Topic configs: Kafka's names, where a topic's values come from, and what they become.
//!
//! A topic config's value is the first of these that sets it (Kafka's order; DescribeConfigs
//! reports which as the source):
//!
//! | layer                              | set by                                         | source |
//! |------------------------------------|------------------------------------------------|--------|
//! | the topic's own config             | CreateTopics, (Incremental)AlterConfigs topic  | DYNAMIC_TOPIC_CONFIG (1) |
//! | this broker's dynamic config       | (Incremental)AlterConfigs broker `0`           | DYNAMIC_BROKER_CONFIG (2) |
//! | the cluster's dynamic default      | (Incremental)AlterConfigs broker `""`          | DYNAMIC_DEFAULT_BROKER_CONFIG (3) |
//! | the broker's properties file       | `log.retention.hours=168`, ...                 | STATIC_BROKER_CONFIG (4) |
//! | Kafka's default                    | [`defs::TOPIC_CONFIGS`]                        | DEFAULT_CONFIG (5) |
//!
//! The broker layers name a topic config by its broker synonyms (`retention.ms` by
//! `log.retention.ms`, then `log.retention.minutes`, then `log.retention.hours`, converted).
//! [`TopicSettings`] is what the values mean: the engine's `LogConfig`, compaction, the
//! produce-time rules. Dynamic layers live in the topic registry and every change bumps its
//! config generation, which open partitions watch to apply changes live; each shard parses a
//! topic's settings once per change ([`cache`]).

pub mod cache;
pub mod defs;

use std::collections::BTreeMap;

use rill_engine::cleaner::CompactionConfig;
use rill_engine::{FlushPolicy, LogConfig};
use rill_protocol::record::Compression;

use std::sync::Arc;

use crate::config::settings::BrokerConfig;
use crate::topics::{BrokerConfigs, TopicRegistry};
pub use defs::{def, TopicConfigDef, TOPIC_CONFIGS};

/// DescribeConfigs' `config_type`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigType {
    /// Not typed.
    Unknown = 0,
    /// true / false.
    Boolean = 1,
    /// Free text.
    String = 2,
    /// 32-bit integer.
    Int = 3,
    /// 16-bit integer.
    Short = 4,
    /// 64-bit integer.
    Long = 5,
    /// Floating point.
    Double = 6,
    /// Comma-separated list.
    List = 7,
    /// A class name.
    Class = 8,
    /// A secret (never shown).
    Password = 9,
}

/// DescribeConfigs' `config_source`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigSource {
    /// Unknown.
    Unknown = 0,
    /// The topic's own config.
    DynamicTopic = 1,
    /// This broker's dynamic config.
    DynamicBroker = 2,
    /// The cluster-wide dynamic default.
    DynamicDefaultBroker = 3,
    /// The broker's properties file or flags.
    StaticBroker = 4,
    /// Kafka's default.
    Default = 5,
}

/// A refused config: which one and why (the message of an INVALID_CONFIG answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedConfig {
    /// The config's name.
    pub name: String,
    /// The value refused.
    pub value: String,
    /// Why.
    pub reason: String,
}

impl std::fmt::Display for RefusedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.reason == UNKNOWN_NAME {
            return write!(f, "Unknown topic config name: {}", self.name);
        }
        if STANDALONE_MESSAGES.contains(&self.reason.as_str()) {
            return f.write_str(&self.reason);
        }
        let (name, value, reason) = (&self.name, &self.value, &self.reason);
        write!(
            f,
            "Invalid value {value} for configuration {name}: {reason}"
        )
    }
}

impl std::error::Error for RefusedConfig {}

const UNKNOWN_NAME: &str = "unknown topic config name";

/// Kafka's refusal when a topic enables remote storage on a broker without it.
pub const REMOTE_STORAGE_DISABLED: &str =
    "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.";
/// Kafka's refusal of remote storage on a compacted topic.
pub const REMOTE_STORAGE_COMPACTED: &str =
    "Remote log storage is unsupported for the compacted topics";
/// Refusals Kafka words without naming the config (a `ConfigException(message)`).
const STANDALONE_MESSAGES: [&str; 2] = [REMOTE_STORAGE_DISABLED, REMOTE_STORAGE_COMPACTED];

/// The broker property that lets topics enable remote storage. The broker's properties file
/// layer carries it (`LogDefaults::static_props`) so a topic's configs are checked against it.
pub const REMOTE_STORAGE_SYSTEM_ENABLE: &str = "remote.log.storage.system.enable";

impl RefusedConfig {
    /// An unknown config name (Kafka: "Unknown topic config name").
    pub fn unknown(name: &str) -> RefusedConfig {
        RefusedConfig {
            name: name.to_string(),
            value: String::new(),
            reason: UNKNOWN_NAME.into(),
        }
    }
}

/// One layer's setting of a config, as DescribeConfigs lists synonyms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynonymValue {
    /// The name in that layer (the topic config, or a broker property).
    pub name: String,
    /// The value as set there (in that property's unit).
    pub value: String,
    /// The layer.
    pub source: ConfigSource,
}

/// A config's effective value, where it comes from, and every layer setting it (highest
/// priority first, Kafka's default last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The effective value, in the topic config's unit.
    pub value: String,
    /// Where it comes from.
    pub source: ConfigSource,
    /// Every layer that sets it.
    pub synonyms: Vec<SynonymValue>,
}

/// The layers of a topic's configs (see the module doc). Broker layers are keyed by broker
/// property name.
#[derive(Debug, Clone, Copy)]
pub struct ConfigLayers<'a> {
    /// The topic's own configs.
    pub topic: &'a BTreeMap<String, String>,
    /// This broker's dynamic configs.
    pub dynamic_broker: &'a BTreeMap<String, String>,
    /// The cluster's dynamic defaults.
    pub dynamic_default: &'a BTreeMap<String, String>,
    /// The properties file.
    pub static_broker: &'a BTreeMap<String, String>,
}

impl ConfigLayers<'_> {
    /// The effective value of `def` and every layer that sets it.
    pub fn resolve(&self, def: &TopicConfigDef) -> Resolved {
        let mut synonyms = Vec::new();
        if let Some(v) = self.topic.get(def.name) {
            synonyms.push(SynonymValue {
                name: def.name.to_string(),
                value: v.trim().to_string(),
                source: ConfigSource::DynamicTopic,
            });
        }
        let broker_layers = [
            (self.dynamic_broker, ConfigSource::DynamicBroker),
            (self.dynamic_default, ConfigSource::DynamicDefaultBroker),
            (self.static_broker, ConfigSource::StaticBroker),
        ];
        let mut effective = None;
        for (layer, source) in broker_layers {
            for synonym in def.synonyms {
                if let Some(v) = layer.get(synonym.name) {
                    effective.get_or_insert_with(|| converted(v.trim(), synonym.factor));
                    synonyms.push(SynonymValue {
                        name: synonym.name.to_string(),
                        value: v.trim().to_string(),
                        source,
                    });
                }
            }
        }
        let default_name = def.synonyms.first().map_or(def.name, |s| s.name);
        synonyms.push(SynonymValue {
            name: default_name.to_string(),
            value: def.default.to_string(),
            source: ConfigSource::Default,
        });
        let first = &synonyms[0];
        let value = match first.source {
            ConfigSource::DynamicTopic | ConfigSource::Default => first.value.clone(),
            _ => effective.expect("a broker layer set it"),
        };
        Resolved {
            value,
            source: first.source,
            synonyms,
        }
    }

    /// The effective value of the config `name` (which must be in the table).
    pub fn value(&self, name: &str) -> String {
        self.resolve(def(name).expect("a known topic config")).value
    }
}

/// A broker property's value in the topic config's unit (`-1` and other negatives stay).
fn converted(value: &str, factor: i64) -> String {
    match value.parse::<i64>() {
        Ok(n) if factor != 1 && n >= 0 => n.saturating_mul(factor).to_string(),
        _ => value.to_string(),
    }
}

/// Kafka's `cleanup.policy`: a list of `delete` and `compact`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Old segments are deleted by `retention.ms` / `retention.bytes`.
    pub delete: bool,
    /// The log is compacted.
    pub compact: bool,
}

/// Parses `cleanup.policy` (`delete`, `compact`, `compact,delete`, in any order).
pub fn parse_cleanup_policy(v: &str) -> Result<CleanupPolicy, String> {
    (def("cleanup.policy").expect("known").check)(v)?;
    Ok(CleanupPolicy {
        delete: v.split(',').any(|i| i.trim() == "delete"),
        compact: v.split(',').any(|i| i.trim() == "compact"),
    })
}

/// What the broker does with a batch's compression (`compression.type`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TargetCompression {
    /// Keep what the producer sent.
    Producer,
    /// Store every batch with this codec and level (recompressing what differs).
    Codec(Compression, Option<i32>),
}

/// Everything a topic's configs decide.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicSettings {
    /// The engine's log configuration.
    pub log: LogConfig,
    /// `cleanup.policy`.
    pub policy: CleanupPolicy,
    /// Compaction settings when the policy compacts.
    pub compaction: Option<CompactionConfig>,
    /// `compression.type` with its level.
    pub compression: TargetCompression,
    /// `message.timestamp.before.max.ms` (`None`: no bound).
    pub timestamp_before_max_ms: Option<u64>,
    /// `message.timestamp.after.max.ms` (`None`: no bound).
    pub timestamp_after_max_ms: Option<u64>,
    /// `min.insync.replicas`.
    pub min_insync_replicas: i32,
    /// `remote.storage.enable=true`: the total retention, which deletes remote copies
    /// (`log` then holds the local retention, `local.retention.*`).
    pub remote: Option<RemoteRetention>,
}

/// A tiered topic's total retention (`retention.ms`, `retention.bytes`; `None`: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteRetention {
    /// `retention.ms`.
    pub retention_ms: Option<u64>,
    /// `retention.bytes`.
    pub retention_bytes: Option<u64>,
}

/// Reads values the layers resolve, naming the config in every error.
struct Reader<'a> {
    layers: &'a ConfigLayers<'a>,
}

impl Reader<'_> {
    fn text(&self, name: &str) -> Result<String, RefusedConfig> {
        let d = def(name).expect("a known topic config");
        let value = self.layers.resolve(d).value;
        (d.check)(&value).map_err(|reason| RefusedConfig {
            name: name.to_string(),
            value: value.clone(),
            reason,
        })?;
        Ok(value)
    }

    fn long(&self, name: &str) -> Result<i64, RefusedConfig> {
        let value = self.text(name)?;
        value.parse::<i64>().map_err(|_| RefusedConfig {
            name: name.into(),
            value,
            reason: "not a number".into(),
        })
    }

    /// A limit where -1 (or `Long.MAX_VALUE`) means none.
    fn limit(&self, name: &str) -> Result<Option<u64>, RefusedConfig> {
        Ok(match self.long(name)? {
            n if n < 0 || n == i64::MAX => None,
            n => Some(n as u64),
        })
    }
}

impl TopicSettings {
    /// The settings the layers give (every value checked; cross-config rules too).
    pub fn from_layers(layers: &ConfigLayers) -> Result<TopicSettings, RefusedConfig> {
        for (name, value) in layers.topic {
            let d = def(name).ok_or_else(|| RefusedConfig::unknown(name))?;
            (d.check)(value).map_err(|reason| RefusedConfig {
                name: name.clone(),
                value: value.clone(),
                reason,
            })?;
        }
        let r = Reader { layers };
        let policy = parse_cleanup_policy(&r.text("cleanup.policy")?).expect("checked");
        let compaction = policy.compact.then(|| compaction_config(&r)).transpose()?;
        let mut log = log_config(&r)?;
        if !policy.delete {
            // Compacted only: nothing is deleted by age or size, whatever retention says.
            (log.retention_ms, log.retention_bytes) = (None, None);
        }
        if let Some(lag) = compaction.as_ref().and_then(|c| c.max_compaction_lag_ms) {
            // KIP-354: the active segment rolls at max.compaction.lag.ms, so it gets cleaned.
            log.segment_ms_max = Some(log.segment_ms_max.map_or(lag, |ms| ms.min(lag)));
        }
        let remote = remote_retention(&r, layers, policy, &mut log)?;
        Ok(TopicSettings {
            remote,
            log,
            policy,
            compaction,
            compression: target_compression(&r)?,
            timestamp_before_max_ms: r.limit("message.timestamp.before.max.ms")?,
            timestamp_after_max_ms: r.limit("message.timestamp.after.max.ms")?,
            min_insync_replicas: r.long("min.insync.replicas")? as i32,
        })
    }

    /// A topic's settings on this broker: its configs over the broker's layers.
    pub fn of_topic(
        config: &BrokerConfig,
        registry: &TopicRegistry,
        topic: &BTreeMap<String, String>,
    ) -> Result<TopicSettings, RefusedConfig> {
        let broker = BrokerLayers::of(config, registry);
        let mut settings = TopicSettings::from_layers(&broker.with_topic(topic))?;
        settings.log.producers_max = config.producers.partition_max;
        Ok(settings)
    }
}

/// This broker's layers under any topic's: a snapshot of the dynamic configs and the file's.
pub struct BrokerLayers<'a> {
    dynamic: Arc<BrokerConfigs>,
    config: &'a BrokerConfig,
}

impl<'a> BrokerLayers<'a> {
    /// The layers as they are now.
    pub fn of(config: &'a BrokerConfig, registry: &TopicRegistry) -> BrokerLayers<'a> {
        BrokerLayers {
            dynamic: registry.broker_configs(),
            config,
        }
    }

    /// The layers of a topic whose own configs are `topic`.
    pub fn with_topic<'b>(&'b self, topic: &'b BTreeMap<String, String>) -> ConfigLayers<'b> {
        ConfigLayers {
            topic,
            dynamic_broker: self.dynamic.of_broker(self.config.node_id),
            dynamic_default: self.dynamic.cluster_default(),
            static_broker: &self.config.log.static_props,
        }
    }
}

fn log_config(r: &Reader) -> Result<LogConfig, RefusedConfig> {
    let flush_messages = r.limit("flush.messages")?;
    let flush_ms = r.limit("flush.ms")?;
    let flush = if flush_messages.is_none() && flush_ms.is_none() {
        FlushPolicy::EveryAppend
    } else {
        FlushPolicy::Interval {
            messages: flush_messages,
            ms: flush_ms,
        }
    };
    Ok(LogConfig {
        segment_bytes_max: r.long("segment.bytes")? as u64,
        segment_ms_max: r.limit("segment.ms")?,
        segment_jitter_ms: r.long("segment.jitter.ms")? as u64,
        index_interval_bytes: (r.long("index.interval.bytes")? as u32).max(1),
        index_bytes_max: r.long("segment.index.bytes")? as u64,
        flush,
        retention_ms: r.limit("retention.ms")?,
        retention_bytes: r.limit("retention.bytes")?,
        // The engine needs room for a header; smaller limits refuse every batch at Produce.
        message_bytes_max: (r.long("max.message.bytes")? as u32).max(61),
        log_append_time: r.text("message.timestamp.type")? == "LogAppendTime",
        ..LogConfig::default()
    })
}

/// A tiered topic's checks (Kafka's `LogConfig.validateTopicLogConfigValues`) and retention:
/// `log` gets the local retention (`local.retention.*`, -2: the total one), the total one is
/// returned.
fn remote_retention(
    r: &Reader,
    layers: &ConfigLayers,
    policy: CleanupPolicy,
    log: &mut LogConfig,
) -> Result<Option<RemoteRetention>, RefusedConfig> {
    if r.text("remote.storage.enable")? != "true" {
        return Ok(None);
    }
    let standalone = |reason: &str| RefusedConfig {
        name: "remote.storage.enable".into(),
        value: "true".into(),
        reason: reason.into(),
    };
    let system = layers
        .static_broker
        .get(REMOTE_STORAGE_SYSTEM_ENABLE)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if !system {
        return Err(standalone(REMOTE_STORAGE_DISABLED));
    }
    if policy.compact {
        return Err(standalone(REMOTE_STORAGE_COMPACTED));
    }
    let total = RemoteRetention {
        retention_ms: log.retention_ms,
        retention_bytes: log.retention_bytes,
    };
    for (total_name, local_name) in [
        ("retention.ms", "local.retention.ms"),
        ("retention.bytes", "local.retention.bytes"),
    ] {
        let (total_value, local) = (r.long(total_name)?, r.long(local_name)?);
        check_local_retention(total_name, total_value, local_name, local)?;
        let local_limit = match local {
            -2 => continue, // the total retention, already in `log`
            n if n < 0 => None,
            n => Some(n as u64),
        };
        match total_name {
            "retention.ms" => log.retention_ms = local_limit,
            _ => log.retention_bytes = local_limit,
        }
    }
    Ok(Some(total))
}

/// Kafka's rule: with a total retention set, a local one is -2 (the same), or at most it.
fn check_local_retention(
    total_name: &str,
    total: i64,
    local_name: &str,
    local: i64,
) -> Result<(), RefusedConfig> {
    if total == -1 || local == -2 {
        return Ok(());
    }
    let reason = if local == -1 {
        format!("Value must not be -1 as {total_name} value is set as {total}.")
    } else if local > total {
        format!("Value must not be more than {total_name} property value: {total}")
    } else {
        return Ok(());
    };
    Err(RefusedConfig {
        name: local_name.into(),
        value: local.to_string(),
        reason,
    })
}

fn compaction_config(r: &Reader) -> Result<CompactionConfig, RefusedConfig> {
    let ratio = r.text("min.cleanable.dirty.ratio")?;
    let config = CompactionConfig {
        delete_retention_ms: r.long("delete.retention.ms")? as u64,
        min_cleanable_dirty_ratio: ratio.parse().expect("checked"),
        min_compaction_lag_ms: r.long("min.compaction.lag.ms")? as u64,
        max_compaction_lag_ms: r.limit("max.compaction.lag.ms")?,
    };
    if let Some(max) = config.max_compaction_lag_ms {
        if max < config.min_compaction_lag_ms {
            return Err(RefusedConfig {
                name: "max.compaction.lag.ms".into(),
                value: max.to_string(),
                reason: format!(
                    "below min.compaction.lag.ms ({})",
                    config.min_compaction_lag_ms
                ),
            });
        }
    }
    Ok(config)
}

fn target_compression(r: &Reader) -> Result<TargetCompression, RefusedConfig> {
    let level = |name: &str| -> Result<Option<i32>, RefusedConfig> {
        Ok(Some(r.long(name)? as i32).filter(|&l| l != -1))
    };
    Ok(match r.text("compression.type")?.as_str() {
        "producer" => TargetCompression::Producer,
        "uncompressed" => TargetCompression::Codec(Compression::None, None),
        "gzip" => TargetCompression::Codec(Compression::Gzip, level("compression.gzip.level")?),
        "snappy" => TargetCompression::Codec(Compression::Snappy, None),
        "lz4" => TargetCompression::Codec(Compression::Lz4, level("compression.lz4.level")?),
        "zstd" => TargetCompression::Codec(Compression::Zstd, level("compression.zstd.level")?),
        other => unreachable!("checked: {other}"),
    })
}

/// One DescribeConfigs row of a topic.
#[derive(Debug, Clone)]
pub struct DescribedConfig {
    /// The config.
    pub def: &'static TopicConfigDef,
    /// Its effective value and layers.
    pub resolved: Resolved,
}

/// Every topic config with its effective value and layers, in name order.
pub fn describe(layers: &ConfigLayers) -> Vec<DescribedConfig> {
    TOPIC_CONFIGS
        .iter()
        .map(|def| DescribedConfig {
            def,
            resolved: layers.resolve(def),
        })
        .collect()
}

#[cfg(test)]
mod tests;
