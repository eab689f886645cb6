//! Configs: DescribeConfigs of topics and of the broker at every version, and the changes
//! (AlterConfigs, IncrementalAlterConfigs) with a valid and an invalid value of every topic
//! config value class (boolean, string, int, long, double, list), unknown names and resources.

use rill_protocol::kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use rill_protocol::kafka_protocol::messages::{
    alter_configs_request, incremental_alter_configs_request, AlterConfigsRequest, ApiKey,
    DescribeClusterRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest, RequestKind,
    ResponseKind,
};

use super::{create_topic, response, sb, Case};
use crate::pair::{Pair, Side};

pub const CASES: &[Case] = &[
    ("describe_topic_configs", describe_topic),
    ("describe_broker_configs", describe_broker),
    ("incremental_alter_configs", incremental_alter),
    ("alter_configs", alter),
    ("topic_config_value_classes", value_classes),
];

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// One valid and one invalid value per topic config value class.
const CLASSES: &[(&str, &str, &str, &str)] = &[
    ("boolean", "unclean.leader.election.enable", "true", "yes"),
    ("boolean", "preallocate", "true", "1"),
    ("string", "compression.type", "zstd", "brotli"),
    (
        "string",
        "message.timestamp.type",
        "LogAppendTime",
        "WallClock",
    ),
    ("int", "min.insync.replicas", "1", "0"),
    ("int", "max.message.bytes", "2000000", "-2"),
    ("int", "segment.bytes", "16777216", "100"),
    ("long", "retention.ms", "86400000", "-5"),
    ("long", "retention.bytes", "1073741824", "lots"),
    ("long", "segment.ms", "3600000", "0"),
    ("double", "min.cleanable.dirty.ratio", "0.25", "1.5"),
    ("list", "cleanup.policy", "compact,delete", "shred"),
    ("list", "leader.replication.throttled.replicas", "0:1", "x"),
];

fn describe(resource_type: i8, name: &str, keys: Option<&[&str]>, version: i16) -> RequestKind {
    let mut r =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(sb(name))
            .with_configuration_keys(keys.map(|k| k.iter().map(|s| sb(s)).collect()))]);
    if version >= 1 {
        r = r.with_include_synonyms(true);
    }
    if version >= 3 {
        r = r.with_include_documentation(true);
    }
    RequestKind::DescribeConfigs(r)
}

fn describe_topic(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-configs", 1, &[("retention.ms", "7200000")])?;
    for version in pair.versions(ApiKey::DescribeConfigs) {
        pair.both(version, |_| describe(TOPIC, "kd-configs", None, version))?;
        let keys = ["retention.ms", "cleanup.policy", "no.such.config"];
        pair.both(version, |_| {
            describe(TOPIC, "kd-configs", Some(&keys), version)
        })?;
        pair.both(version, |_| {
            describe(TOPIC, "kd-configs-missing", None, version)
        })?;
        pair.both(version, |_| describe(TOPIC, "", None, version))?;
        pair.both(version, |_| describe(9, "x", None, version))?;
    }
    Ok(())
}

/// Saves each broker's own node id (as `node`) from DescribeCluster.
fn save_node_id(pair: &mut Pair) -> anyhow::Result<()> {
    let answers = pair.send(0, &|_| {
        RequestKind::DescribeCluster(DescribeClusterRequest::default())
    })?;
    for (side, answer) in [&mut pair.kafka, &mut pair.rill].into_iter().zip(&answers) {
        if let Some(ResponseKind::DescribeCluster(r)) = response(answer) {
            if let Some(b) = r.brokers.first() {
                side.state.insert("node".into(), b.broker_id.0.to_string());
            }
        }
    }
    Ok(())
}

/// Broker configs whose values are this machine's or this run's (paths, ports, ids).
const BROKER_VALUES_DIFFER: &[&str] = &[
    "advertised.listeners",
    "listeners",
    "log.dirs",
    "log.dir",
    "node.id",
    "broker.id",
    "controller.quorum.voters",
    "metadata.log.dir",
];

fn describe_broker(pair: &mut Pair) -> anyhow::Result<()> {
    save_node_id(pair)?;
    let keys = [
        "advertised.listeners",
        "auto.create.topics.enable",
        "num.partitions",
        "default.replication.factor",
        "min.insync.replicas",
        "log.retention.ms",
        "log.retention.hours",
        "log.segment.bytes",
        "log.flush.interval.messages",
        "message.max.bytes",
        "compression.type",
        "log.cleanup.policy",
        "group.initial.rebalance.delay.ms",
        "node.id",
        "no.such.config",
    ];
    let ignored: Vec<String> = BROKER_VALUES_DIFFER
        .iter()
        .flat_map(|k| {
            [
                format!("results[resource_name=<node>].configs[name={k}].value"),
                format!("results[resource_name=<node>].configs[name={k}].synonyms"),
            ]
        })
        .collect();
    pair.ignore(&ignored.iter().map(String::as_str).collect::<Vec<_>>());
    for version in pair.versions(ApiKey::DescribeConfigs) {
        pair.both(version, |s| {
            describe(BROKER, &s.get("node", ""), Some(&keys), version)
        })?;
        pair.both(version, |_| describe(BROKER, "", Some(&keys[..3]), version))?; // cluster default
        pair.both(version, |_| describe(BROKER, "4242", None, version))?; // another broker
        pair.both(version, |_| describe(BROKER, "not-a-number", None, version))?;
    }
    Ok(())
}

fn incremental(
    resource_type: i8,
    name: &str,
    configs: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> RequestKind {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    RequestKind::IncrementalAlterConfigs(
        IncrementalAlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(sb(name))
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, op, v)| {
                            AlterableConfig::default()
                                .with_name(sb(k))
                                .with_config_operation(*op)
                                .with_value(v.map(sb))
                        })
                        .collect(),
                )]),
    )
}

/// One IncrementalAlterConfigs request: resource type, name, (config, operation, value)s,
/// validate-only.
type Step<'a> = (i8, &'a str, Vec<(&'a str, i8, Option<&'a str>)>, bool);

/// The IncrementalAlterConfigs steps of one version, on topic `t`.
fn incremental_steps(t: &str) -> Vec<Step<'_>> {
    vec![
        (TOPIC, t, vec![("retention.ms", 0, Some("1000"))], false), // SET
        (TOPIC, t, vec![("retention.ms", 1, None)], false),         // DELETE
        (
            TOPIC,
            t,
            vec![("cleanup.policy", 2, Some("compact"))],
            false,
        ), // APPEND
        (TOPIC, t, vec![("cleanup.policy", 3, Some("delete"))], false), // SUBTRACT
        (TOPIC, t, vec![("retention.ms", 2, Some("5"))], false),    // APPEND to a non-list
        (TOPIC, t, vec![("retention.ms", 9, Some("5"))], false),    // no such operation
        (TOPIC, t, vec![("no.such.config", 0, Some("1"))], false),
        (TOPIC, t, vec![("segment.bytes", 0, Some("1"))], true),
        (
            TOPIC,
            t,
            vec![
                ("retention.ms", 0, Some("1")),
                ("retention.ms", 0, Some("2")),
            ],
            false,
        ),
        (
            TOPIC,
            "kd-incremental-missing",
            vec![("retention.ms", 0, Some("1"))],
            false,
        ),
        (
            BROKER,
            "",
            vec![("log.retention.ms", 0, Some("604800000"))],
            true,
        ),
        (
            BROKER,
            "",
            vec![("log.flush.interval.messages", 0, Some("bogus"))],
            true,
        ),
        (
            BROKER,
            "",
            vec![("advertised.listeners", 0, Some("PLAINTEXT://127.0.0.1:1"))],
            true,
        ),
        (
            BROKER,
            "",
            vec![("no.such.broker.config", 0, Some("1"))],
            true,
        ),
    ]
}

fn incremental_alter(pair: &mut Pair) -> anyhow::Result<()> {
    let t = "kd-incremental";
    create_topic(pair, t, 1, &[])?;
    save_node_id(pair)?;
    for version in pair.versions(ApiKey::IncrementalAlterConfigs) {
        let steps = incremental_steps(t);
        for (kind, name, configs, validate_only) in &steps {
            pair.both(version, |_| {
                incremental(*kind, name, configs, *validate_only)
            })?;
        }
        pair.both(version, |s: &Side| {
            incremental(
                BROKER,
                &s.get("node", ""),
                &[("advertised.listeners", 0, Some("PLAINTEXT://127.0.0.1:1"))],
                true,
            )
        })?;
        pair.both(4, |_| {
            describe(TOPIC, t, Some(&["retention.ms", "cleanup.policy"]), 4)
        })?;
    }
    Ok(())
}

fn alter_request(name: &str, configs: &[(&str, &str)], validate_only: bool) -> RequestKind {
    use alter_configs_request::{AlterConfigsResource, AlterableConfig};
    RequestKind::AlterConfigs(
        AlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(TOPIC)
                .with_resource_name(sb(name))
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            AlterableConfig::default()
                                .with_name(sb(k))
                                .with_value(Some(sb(v)))
                        })
                        .collect(),
                )]),
    )
}

fn alter(pair: &mut Pair) -> anyhow::Result<()> {
    let t = "kd-alter";
    create_topic(pair, t, 1, &[("retention.ms", "1000")])?;
    for version in pair.versions(ApiKey::AlterConfigs) {
        pair.both(version, |_| {
            alter_request(t, &[("segment.ms", "60000")], false)
        })?;
        pair.both(4, |_| {
            describe(TOPIC, t, Some(&["retention.ms", "segment.ms"]), 4)
        })?; // retention.ms reset
        pair.both(version, |_| {
            alter_request(t, &[("segment.ms", "zero")], false)
        })?;
        pair.both(version, |_| {
            alter_request(t, &[("no.such.config", "1")], true)
        })?;
        pair.both(version, |_| {
            alter_request("kd-alter-missing", &[("segment.ms", "1")], false)
        })?;
    }
    Ok(())
}

fn value_classes(pair: &mut Pair) -> anyhow::Result<()> {
    let t = "kd-value-classes";
    create_topic(pair, t, 1, &[])?;
    for (class, key, good, bad) in CLASSES {
        let _ = class;
        pair.both(1, |_| incremental(TOPIC, t, &[(key, 0, Some(good))], false))?;
        pair.both(1, |_| incremental(TOPIC, t, &[(key, 0, Some(bad))], false))?;
        pair.both(1, |_| incremental(TOPIC, t, &[(key, 0, None)], false))?;
        let created = format!("kd-class-{}", key.replace('.', "-"));
        let bad_topic = format!("{created}-bad");
        pair.both(7, |_| {
            RequestKind::CreateTopics(
                rill_protocol::kafka_protocol::messages::CreateTopicsRequest::default()
                    .with_timeout_ms(30_000)
                    .with_topics(vec![
                        super::creatable(&created, 1, 1, &[(key, good)]),
                        super::creatable(&bad_topic, 1, 1, &[(key, bad)]),
                    ]),
            )
        })?;
    }
    pair.both(4, |_| describe(TOPIC, t, None, 4))?;
    Ok(())
}
