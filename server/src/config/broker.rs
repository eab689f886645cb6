//! The broker resource of DescribeConfigs and (Incremental)AlterConfigs.
//!
//! - Static configs ([`STATIC_CONFIGS`]): what the broker started with (file, flags, defaults);
//!   read-only, as Kafka reports them.
//! - Dynamic configs: every broker property that sets a topic config's default
//!   (`log.retention.ms`, `message.max.bytes`, `compression.type`, ...). They can be set for
//!   this broker (resource `"0"`, its node id) or for the whole cluster (resource `""`), are
//!   kept in the topic registry, and apply at once to every topic that does not set its own.

use std::collections::BTreeMap;

use crate::config::topic::defs::{by_synonym, TOPIC_CONFIGS};
use crate::config::topic::{ConfigSource, ConfigType, RefusedConfig, SynonymValue};
use crate::config::BrokerConfig;
use crate::topics::{BrokerConfigs, CLUSTER_DEFAULT_RESOURCE};

/// One static broker config.
pub struct StaticConfig {
    /// Kafka's name.
    pub name: &'static str,
    /// Its type.
    pub kind: ConfigType,
    /// What it does here.
    pub doc: &'static str,
    /// Its value on this broker.
    pub value: fn(&BrokerConfig) -> String,
}

/// The broker's static configs, sorted by name.
pub const STATIC_CONFIGS: &[StaticConfig] = &[
    StaticConfig {
        name: "advertised.listeners",
        kind: ConfigType::List,
        doc: "The addresses clients are told to connect to (Metadata), by listener.",
        value: |c| {
            let each = c
                .listeners
                .all
                .iter()
                .map(|l| format!("{}://{}:{}", l.name, l.advertise_host, l.advertise_port));
            each.collect::<Vec<_>>().join(",")
        },
    },
    StaticConfig {
        name: "auto.create.topics.enable",
        kind: ConfigType::Boolean,
        doc: "Whether Metadata and Produce create unknown topics.",
        value: |c| c.auto_create_topics.to_string(),
    },
    StaticConfig {
        name: "broker.id",
        kind: ConfigType::Int,
        doc: "This broker's id.",
        value: |c| c.node_id.to_string(),
    },
    StaticConfig {
        name: "connections.max.idle.ms",
        kind: ConfigType::Long,
        doc: "A connection that received and sent nothing for this long, with no request being \
              served, is closed (negative: never).",
        value: |c| c.connections.idle_ms.to_string(),
    },
    StaticConfig {
        name: "fetch.max.bytes",
        kind: ConfigType::Int,
        doc: "The most record bytes one Fetch response carries (the client's max_bytes if \
              smaller), its first batch excepted.",
        value: |c| c.fetch_max_bytes.to_string(),
    },
    StaticConfig {
        name: "group.initial.rebalance.delay.ms",
        kind: ConfigType::Int,
        doc: "How long the first rebalance of an empty consumer group waits for more members \
              (again while members keep arriving, within the rebalance timeout).",
        value: |c| c.group.initial_rebalance_delay_ms.to_string(),
    },
    StaticConfig {
        name: "group.max.size",
        kind: ConfigType::Int,
        doc: "Members of one consumer group (and member ids it hands out pending their \
              rejoin); a JoinGroup past it gets GROUP_MAX_SIZE_REACHED.",
        value: |c| c.group.max_size.to_string(),
    },
    StaticConfig {
        name: "listeners",
        kind: ConfigType::List,
        doc: "The address the broker listens on.",
        value: |c| format!("PLAINTEXT://{}", c.listen),
    },
    StaticConfig {
        name: "log.cleaner.backoff.ms",
        kind: ConfigType::Long,
        doc: "How often a compacted partition checks whether a clean is due.",
        value: |c| c.log.cleaner.backoff_ms.to_string(),
    },
    StaticConfig {
        name: "log.cleaner.dedupe.buffer.size",
        kind: ConfigType::Long,
        doc: "Memory of the cleaners' offset maps, over all shards.",
        value: |c| c.log.cleaner.dedupe_buffer_bytes.to_string(),
    },
    StaticConfig {
        name: "log.cleaner.enable",
        kind: ConfigType::Boolean,
        doc: "Whether compacted topics are cleaned.",
        value: |c| c.log.cleaner.enabled.to_string(),
    },
    StaticConfig {
        name: "log.cleaner.io.max.bytes.per.second",
        kind: ConfigType::Double,
        doc: "Read plus write rate of the cleaners, over all shards.",
        value: |c| {
            c.log
                .cleaner
                .io_bytes_per_second_max
                .map_or("1.7976931348623157E308".to_string(), |r| format!("{r}.0"))
        },
    },
    StaticConfig {
        name: "log.cleaner.threads",
        kind: ConfigType::Int,
        doc: "Cleaners: one per shard, each cleaning one log at a time.",
        value: |c| c.shards.to_string(),
    },
    StaticConfig {
        name: "log.dirs",
        kind: ConfigType::String,
        doc: "The data directory.",
        value: |c| c.data_dir.display().to_string(),
    },
    StaticConfig {
        name: "log.retention.check.interval.ms",
        kind: ConfigType::Long,
        doc: "How often each partition applies retention.",
        value: |c| c.log.retention_check_interval_ms.to_string(),
    },
    StaticConfig {
        name: "max.connections",
        kind: ConfigType::Int,
        doc: "Connections open at once over every shard; at it, the broker accepts again once \
              one closes. Default: what RLIMIT_NOFILE leaves beside the partition files.",
        value: |c| c.max_connections().to_string(),
    },
    StaticConfig {
        name: "max.connections.per.ip",
        kind: ConfigType::Int,
        doc: "Connections open at once from one address; past it new ones are closed.",
        value: |c| c.connections.per_ip.to_string(),
    },
    StaticConfig {
        name: "max.connections.per.ip.overrides",
        kind: ConfigType::String,
        doc: "host:count pairs that override max.connections.per.ip.",
        value: |c| c.connections.per_ip_overrides_text.clone(),
    },
    StaticConfig {
        name: "node.id",
        kind: ConfigType::Int,
        doc: "This broker's id.",
        value: |c| c.node_id.to_string(),
    },
    StaticConfig {
        name: "num.partitions",
        kind: ConfigType::Int,
        doc: "Partitions of an auto-created topic, and of CreateTopics with -1.",
        value: |c| c.default_partitions.to_string(),
    },
    StaticConfig {
        name: "offsets.topic.num.partitions",
        kind: ConfigType::Int,
        doc: "Partitions of the internal committed-offsets log.",
        value: |_| crate::group::OFFSETS_PARTITIONS.to_string(),
    },
    StaticConfig {
        name: "producer.id.expiration.ms",
        kind: ConfigType::Int,
        doc: "A producer idle this long (since its last batch or marker) with no open \
              transaction is forgotten by each partition, at its retention checks.",
        value: |c| c.producers.expiration_ms.to_string(),
    },
    StaticConfig {
        name: "queued.max.request.bytes",
        kind: ConfigType::Long,
        doc: "Memory request frames hold from their size prefix until answered, over every \
              shard (split evenly, each share at least one largest request); a connection \
              that cannot get its frame's waits, reading nothing more.",
        value: |c| c.queued_max_request_bytes().to_string(),
    },
    StaticConfig {
        name: "remote.log.manager.copy.max.bytes.per.second",
        kind: ConfigType::Long,
        doc: "Bytes per second the broker's copies to the remote tier put at most (split evenly among the shards); Long.MAX_VALUE: no bound.",
        value: |c| {
            c.remote
                .copy_bytes_per_second
                .unwrap_or(i64::MAX as u64)
                .to_string()
        },
    },
    StaticConfig {
        name: "remote.log.storage.system.enable",
        kind: ConfigType::Boolean,
        doc: "Whether topics may enable tiered storage (remote.storage.enable): sealed segments copied to the object store of rill.remote.*.",
        value: |c| c.remote.system_enable.to_string(),
    },
    StaticConfig {
        name: "rill.partition.producers.max",
        kind: ConfigType::Int,
        doc: "Producers one partition keeps idempotence state for; past it, the least \
              recently written without an open transaction are forgotten.",
        value: |c| c.producers.partition_max.to_string(),
    },
    StaticConfig {
        name: "rill.remote.access.key.id",
        kind: ConfigType::String,
        doc: "The object store's access key id (empty: the environment's credentials).",
        value: |c| c.remote.access_key_id.clone().unwrap_or_default(),
    },
    StaticConfig {
        name: "rill.remote.bucket",
        kind: ConfigType::String,
        doc: "The S3 bucket tiered segments are copied to.",
        value: |c| c.remote.bucket.clone(),
    },
    StaticConfig {
        name: "rill.remote.endpoint",
        kind: ConfigType::String,
        doc: "The S3 endpoint (empty: AWS's for the region).",
        value: |c| c.remote.endpoint.clone().unwrap_or_default(),
    },
    StaticConfig {
        name: "rill.remote.prefix",
        kind: ConfigType::String,
        doc: "The prefix of every object key (<prefix>/<topic>-<topic id>/<partition>/<base offset>-<segment id>.<suffix>).",
        value: |c| c.remote.prefix.clone(),
    },
    StaticConfig {
        name: "rill.remote.region",
        kind: ConfigType::String,
        doc: "The object store's region.",
        value: |c| c.remote.region.clone(),
    },
    StaticConfig {
        name: "rill.remote.retry.backoff.max.ms",
        kind: ConfigType::Long,
        doc: "Longest pause between two tries of a failed copy or delete.",
        value: |c| c.remote.retry_backoff_max_ms.to_string(),
    },
    StaticConfig {
        name: "rill.remote.retry.backoff.ms",
        kind: ConfigType::Long,
        doc: "Pause after a failed copy or delete, doubled on each further failure.",
        value: |c| c.remote.retry_backoff_ms.to_string(),
    },
    StaticConfig {
        name: "rill.remote.secret.access.key",
        kind: ConfigType::Password,
        doc: "The object store's secret key (never shown).",
        value: |_| String::new(),
    },
    StaticConfig {
        name: "rill.remote.task.interval.ms",
        kind: ConfigType::Long,
        doc: "How often a tiered partition looks for segments to copy or delete (also right after each copy).",
        value: |c| c.remote.task_interval_ms.to_string(),
    },
    StaticConfig {
        name: "rill.remote.upload.concurrency",
        kind: ConfigType::Int,
        doc: "Object-store requests a shard runs at once (copies and remote reads).",
        value: |c| c.remote.requests_per_shard.to_string(),
    },
    StaticConfig {
        name: "rill.shard.fetch.bytes.max",
        kind: ConfigType::Long,
        doc: "Record bytes a shard's Fetch requests hold at once, from their read until \
              their response is written; a Fetch that finds it spent waits.",
        value: |c| c.shard_fetch_bytes_max.to_string(),
    },
    StaticConfig {
        name: "rill.shard.groups.max",
        kind: ConfigType::Int,
        doc: "Consumer groups one shard coordinates; a request that would create one more gets \
              GROUP_MAX_SIZE_REACHED.",
        value: |c| c.group.shard_groups_max.to_string(),
    },
    StaticConfig {
        name: "rill.shard.transactional.ids.max",
        kind: ConfigType::Int,
        doc: "Transactional ids one shard coordinates; a new one past it takes the place of \
              the idle id updated longest ago, or is refused (POLICY_VIOLATION) if none is idle.",
        value: |c| c.txn.shard_ids_max.to_string(),
    },
    StaticConfig {
        name: "socket.request.max.bytes",
        kind: ConfigType::Int,
        doc: "The largest request the broker reads.",
        value: |c| c.request_bytes_max.to_string(),
    },
    StaticConfig {
        name: "transactional.id.expiration.ms",
        kind: ConfigType::Int,
        doc: "A transactional id with no transaction for this long is forgotten.",
        value: |c| c.txn.id_expiration_ms.to_string(),
    },
];

/// One DescribeConfigs row of the broker resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRow {
    /// The property.
    pub name: &'static str,
    /// Its value (`None`: not set and no default).
    pub value: Option<String>,
    /// Where the value comes from.
    pub source: ConfigSource,
    /// Its type.
    pub kind: ConfigType,
    /// Whether (Incremental)AlterConfigs may change it.
    pub read_only: bool,
    /// What it does.
    pub doc: &'static str,
    /// Every layer setting it, highest first.
    pub synonyms: Vec<SynonymValue>,
}

/// Whether `name` is a valid broker resource name: this node's id, or `""` (the cluster default).
pub fn is_broker_resource(config: &BrokerConfig, name: &str) -> bool {
    name == CLUSTER_DEFAULT_RESOURCE || name == config.node_id.to_string()
}

/// The rows of broker resource `resource`: for the node itself every config; for the cluster
/// default only the dynamic configs set there (as Kafka lists them).
pub fn describe(config: &BrokerConfig, dynamic: &BrokerConfigs, resource: &str) -> Vec<BrokerRow> {
    if resource == CLUSTER_DEFAULT_RESOURCE {
        return dynamic
            .cluster_default()
            .iter()
            .filter_map(|(name, value)| {
                let (def, _) = by_synonym(name)?;
                let name = synonym_name(name)?;
                let synonym = SynonymValue {
                    name: name.to_string(),
                    value: value.clone(),
                    source: ConfigSource::DynamicDefaultBroker,
                };
                Some(BrokerRow {
                    name,
                    value: Some(value.clone()),
                    source: ConfigSource::DynamicDefaultBroker,
                    kind: def.kind,
                    read_only: false,
                    doc: def.doc,
                    synonyms: vec![synonym],
                })
            })
            .collect();
    }
    let mut rows: Vec<BrokerRow> = STATIC_CONFIGS
        .iter()
        .map(|s| {
            let value = (s.value)(config);
            let source = if config.explicit.contains(s.name) {
                ConfigSource::StaticBroker
            } else {
                ConfigSource::Default
            };
            BrokerRow {
                name: s.name,
                synonyms: vec![SynonymValue {
                    name: s.name.to_string(),
                    value: value.clone(),
                    source,
                }],
                value: Some(value),
                source,
                kind: s.kind,
                read_only: true,
                doc: s.doc,
            }
        })
        .collect();
    rows.extend(dynamic_rows(config, dynamic));
    rows.sort_by_key(|r| r.name);
    rows
}

/// One row per broker property that sets a topic config's default.
fn dynamic_rows(config: &BrokerConfig, dynamic: &BrokerConfigs) -> Vec<BrokerRow> {
    let layers = [
        (
            dynamic.of_broker(config.node_id),
            ConfigSource::DynamicBroker,
        ),
        (
            dynamic.cluster_default(),
            ConfigSource::DynamicDefaultBroker,
        ),
        (&config.log.static_props, ConfigSource::StaticBroker),
    ];
    let mut rows = Vec::new();
    for def in TOPIC_CONFIGS {
        for (i, synonym) in def.synonyms.iter().enumerate() {
            let mut synonyms: Vec<SynonymValue> = layers
                .iter()
                .filter_map(|(layer, source)| {
                    Some(SynonymValue {
                        name: synonym.name.to_string(),
                        value: layer.get(synonym.name)?.clone(),
                        source: *source,
                    })
                })
                .collect();
            // The first synonym carries Kafka's default, in the topic config's unit.
            if i == 0 && synonym.factor == 1 {
                synonyms.push(SynonymValue {
                    name: synonym.name.to_string(),
                    value: def.default.to_string(),
                    source: ConfigSource::Default,
                });
            }
            let (value, source) = synonyms.first().map_or((None, ConfigSource::Default), |s| {
                (Some(s.value.clone()), s.source)
            });
            rows.push(BrokerRow {
                name: synonym.name,
                value,
                source,
                kind: if synonym.factor == 1 {
                    def.kind
                } else {
                    ConfigType::Int
                },
                read_only: false,
                doc: def.doc,
                synonyms,
            });
        }
    }
    // Two topic configs can share a broker synonym (none do today); keep one row each.
    rows.dedup_by_key(|r| r.name);
    rows
}

/// The `'static` name of a dynamic broker property.
fn synonym_name(name: &str) -> Option<&'static str> {
    TOPIC_CONFIGS
        .iter()
        .flat_map(|d| d.synonyms.iter())
        .find(|s| s.name == name)
        .map(|s| s.name)
}

/// Why a broker config cannot be set to `value`: not a broker config, read-only, or invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterRefusal {
    /// Not one Rill knows (INVALID_CONFIG).
    Unknown(String),
    /// Fixed at start-up (INVALID_REQUEST, as Kafka answers).
    ReadOnly(String),
    /// A value the rule refuses (INVALID_CONFIG).
    Invalid(RefusedConfig),
}

impl std::fmt::Display for AlterRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AlterRefusal::Unknown(name) => write!(f, "Unknown broker config {name}"),
            AlterRefusal::ReadOnly(name) => {
                write!(f, "Cannot update these configs dynamically: [{name}]")
            }
            AlterRefusal::Invalid(e) => write!(f, "{e}"),
        }
    }
}

/// Checks a dynamic broker config value (in its own unit, as the property takes it).
pub fn check_dynamic(name: &str, value: &str) -> Result<(), AlterRefusal> {
    let Some((def, synonym)) = by_synonym(name) else {
        if STATIC_CONFIGS.iter().any(|s| s.name == name) {
            return Err(AlterRefusal::ReadOnly(name.to_string()));
        }
        return Err(AlterRefusal::Unknown(name.to_string()));
    };
    let in_topic_unit = match value.trim().parse::<i64>() {
        Ok(n) if synonym.factor != 1 && n >= 0 => n.saturating_mul(synonym.factor).to_string(),
        _ => value.trim().to_string(),
    };
    (def.check)(&in_topic_unit).map_err(|reason| {
        AlterRefusal::Invalid(RefusedConfig {
            name: name.to_string(),
            value: value.to_string(),
            reason,
        })
    })
}

/// The dynamic broker configs of `resource` after `changes` (name → new value, `None` removes).
pub fn apply(
    current: &BTreeMap<String, String>,
    changes: &[(String, Option<String>)],
) -> Result<BTreeMap<String, String>, AlterRefusal> {
    let mut next = current.clone();
    for (name, value) in changes {
        match value {
            Some(v) => {
                check_dynamic(name, v)?;
                next.insert(name.clone(), v.trim().to_string());
            }
            None => {
                if by_synonym(name).is_none() {
                    check_dynamic(name, "")?; // names the refusal
                }
                next.remove(name);
            }
        }
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_configs_are_sorted_and_read_only_to_alter() {
        for pair in STATIC_CONFIGS.windows(2) {
            assert!(pair[0].name < pair[1].name);
        }
        assert_eq!(
            check_dynamic("num.partitions", "3"),
            Err(AlterRefusal::ReadOnly("num.partitions".into()))
        );
        assert_eq!(
            check_dynamic("no.such", "3"),
            Err(AlterRefusal::Unknown("no.such".into()))
        );
        assert!(matches!(
            check_dynamic("log.retention.hours", "-5"),
            Err(AlterRefusal::Invalid(_))
        ));
        assert_eq!(check_dynamic("log.retention.hours", "2"), Ok(()));
    }

    #[test]
    fn a_broker_lists_its_static_and_dynamic_configs_with_sources() {
        let mut config = BrokerConfig::defaults();
        config
            .log
            .static_props
            .insert("log.retention.hours".into(), "24".into());
        let mut dynamic = BrokerConfigs::default();
        let changes = [("log.retention.ms".to_string(), Some("1000".to_string()))];
        let broker = apply(&BTreeMap::new(), &changes).unwrap();
        dynamic_set(&mut dynamic, "0", broker);
        let rows = describe(&config, &dynamic, "0");
        let row = |n: &str| rows.iter().find(|r| r.name == n).unwrap().clone();
        assert_eq!(row("log.retention.ms").source, ConfigSource::DynamicBroker);
        assert_eq!(row("log.retention.ms").value.as_deref(), Some("1000"));
        assert_eq!(
            row("log.retention.hours").source,
            ConfigSource::StaticBroker
        );
        assert_eq!(
            row("advertised.listeners").value.as_deref(),
            Some("PLAINTEXT://127.0.0.1:9092")
        );
        assert!(row("num.partitions").read_only);
        assert_eq!(row("message.max.bytes").value.as_deref(), Some("1048588"));
        assert_eq!(row("message.max.bytes").source, ConfigSource::Default);
        assert!(
            describe(&config, &dynamic, "").is_empty(),
            "no cluster default set"
        );
    }

    fn dynamic_set(dynamic: &mut BrokerConfigs, resource: &str, configs: BTreeMap<String, String>) {
        *dynamic = serde_json::from_value(serde_json::json!({ resource: configs })).unwrap();
    }
}
