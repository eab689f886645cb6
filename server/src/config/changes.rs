//! Changing configs: what AlterConfigs and IncrementalAlterConfigs share.
//!
//! A change is computed and checked under the registry's write lock (against the configs as
//! they are then), persisted (in a cluster: topic configs through the controller, as a
//! `TopicConfigs` metadata record every node mirrors), and applied live: the registry's config generation moves, and
//! every open partition of the topic (or every partition, for a broker change) picks the new
//! settings up before its next operation.
//!
//! | failure                                   | error code        |
//! |-------------------------------------------|-------------------|
//! | topic unknown                             | UNKNOWN_TOPIC_OR_PARTITION (3) |
//! | config unknown, or a value its rule refuses | INVALID_CONFIG (40), the message names the config |
//! | broker config fixed at start-up           | INVALID_REQUEST (42) |
//! | broker resource not this node nor `""`    | INVALID_REQUEST (42) |
//! | broker resource `""` in a cluster (not replicated yet) | INVALID_REQUEST (42) |
//! | APPEND/SUBTRACT on a non-list config, unknown operation, resource type | INVALID_REQUEST (42) |
//! | the metadata file cannot be written       | KAFKA_STORAGE_ERROR (56) |

use std::collections::BTreeMap;

use rill_protocol::ErrorCode;

use crate::broker::Broker;
use crate::cluster::view::ClusterView;
use crate::config::broker::{self, AlterRefusal};
use crate::config::topic::{def, BrokerLayers, ConfigType, RefusedConfig, TopicSettings};
use crate::config::BrokerConfig;
use crate::topics::{TopicError, TopicRegistry};

/// Kafka's resource types.
pub const RESOURCE_TOPIC: i8 = 2;
/// The broker resource type.
pub const RESOURCE_BROKER: i8 = 4;
/// The group resource type (KIP-848's group configs).
pub const RESOURCE_GROUP: i8 = 32;
/// The one group config Rill has: where a share group's partitions with no state start.
pub const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";

/// One change to one config (IncrementalAlterConfigs' operations; AlterConfigs sets all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Set the value (SET, 0).
    Set(String),
    /// Remove the override (DELETE, 1).
    Delete,
    /// Add items to a list (APPEND, 2).
    Append(String),
    /// Remove items from a list (SUBTRACT, 3).
    Subtract(String),
}

impl Op {
    /// From the wire's operation code and value.
    pub fn from_wire(code: i8, value: Option<&str>) -> Option<Op> {
        let value = value.unwrap_or("").to_string();
        match code {
            0 => Some(Op::Set(value)),
            1 => Some(Op::Delete),
            2 => Some(Op::Append(value)),
            3 => Some(Op::Subtract(value)),
            _ => None,
        }
    }
}

/// How a whole resource's configs change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// AlterConfigs: these become the resource's configs; every other one is reset.
    Replace(BTreeMap<String, String>),
    /// IncrementalAlterConfigs: these operations, in order.
    Incremental(Vec<(String, Op)>),
}

pub use crate::broker::Refused;

fn invalid_config(e: RefusedConfig) -> Refused {
    (ErrorCode::InvalidConfig, e.to_string())
}

fn storage(e: TopicError) -> Refused {
    match e {
        TopicError::Unknown(name) => (
            ErrorCode::UnknownTopicOrPartition,
            format!("Topic {name} does not exist"),
        ),
        TopicError::InvalidConfig(message) => (ErrorCode::InvalidConfig, message),
        TopicError::InvalidName(message) => (ErrorCode::InvalidRequest, message),
        other => (other.kafka_error_code(), other.to_string()),
    }
}

/// Topic `name`'s configs after `change`, checked against the configs as they are now.
fn next_topic_configs(
    layers: &BrokerLayers,
    current: &BTreeMap<String, String>,
    change: &Change,
) -> Result<BTreeMap<String, String>, Refused> {
    let next = match change {
        Change::Replace(all) => all.clone(),
        Change::Incremental(ops) => apply_topic_ops(layers, current, ops)?,
    };
    TopicSettings::from_layers(&layers.with_topic(&next)).map_err(invalid_config)?;
    Ok(next)
}

/// Changes topic `name`'s configs on a single node (only checks them if `validate_only`).
pub fn alter_topic(
    config: &BrokerConfig,
    registry: &TopicRegistry,
    name: &str,
    change: &Change,
    validate_only: bool,
) -> Result<(), Refused> {
    let layers = BrokerLayers::of(config, registry);
    if validate_only {
        let meta = registry
            .get(name)
            .ok_or_else(|| storage(TopicError::Unknown(name.to_string())))?;
        return next_topic_configs(&layers, &meta.configs, change).map(|_| ());
    }
    let mut refused = None;
    let result = registry.set_topic_configs(name, |current| {
        next_topic_configs(&layers, current, change).map_err(|r| {
            let e = TopicError::InvalidConfig(r.1.clone());
            refused = Some(r);
            e
        })
    });
    match (result, refused) {
        (Ok(_), _) => {
            tracing::info!(topic = name, "topic configs changed");
            Ok(())
        }
        (Err(_), Some(refusal)) => Err(refusal),
        (Err(e), None) => Err(storage(e)),
    }
}

/// Changes topic `name`'s configs in a cluster: checked here against this node's mirror of the
/// metadata image, decided by the controller (a `TopicConfigs` record every node applies).
async fn alter_topic_in_cluster<B: Broker>(
    broker: &B,
    cluster: &ClusterView,
    name: &str,
    change: &Change,
    validate_only: bool,
) -> Result<(), Refused> {
    let registry = broker.topics();
    let layers = BrokerLayers::of(broker.config(), registry);
    let current = registry
        .get(name)
        .ok_or_else(|| storage(TopicError::Unknown(name.to_string())))?
        .configs
        .clone();
    let next = next_topic_configs(&layers, &current, change)?;
    if validate_only {
        return Ok(());
    }
    let mut changes: BTreeMap<String, Option<String>> = current
        .keys()
        .filter(|k| !next.contains_key(*k))
        .map(|k| (k.clone(), None))
        .collect();
    for (k, v) in &next {
        if current.get(k) != Some(v) {
            changes.insert(k.clone(), Some(v.clone()));
        }
    }
    if changes.is_empty() {
        return Ok(());
    }
    crate::cluster::admin::alter_topic_configs(broker, cluster, name, changes).await?;
    tracing::info!(topic = name, "topic configs changed");
    Ok(())
}

fn apply_topic_ops(
    layers: &BrokerLayers,
    current: &BTreeMap<String, String>,
    ops: &[(String, Op)],
) -> Result<BTreeMap<String, String>, Refused> {
    let mut next = current.clone();
    for (name, op) in ops {
        let d = def(name).ok_or_else(|| invalid_config(RefusedConfig::unknown(name)))?;
        match op {
            Op::Set(v) => {
                next.insert(name.clone(), v.clone());
            }
            Op::Delete => {
                next.remove(name);
            }
            Op::Append(v) | Op::Subtract(v) => {
                if d.kind != ConfigType::List {
                    let verb = if matches!(op, Op::Append(_)) {
                        "append"
                    } else {
                        "subtract"
                    };
                    let message =
                        format!("Config value {verb} is not allowed for config key: {name}");
                    return Err((ErrorCode::InvalidRequest, message));
                }
                let base = layers.with_topic(&next).value(name);
                let list = edit_list(&base, v, matches!(op, Op::Append(_)));
                next.insert(name.clone(), list);
            }
        }
    }
    Ok(next)
}

/// A comma-separated list with `items` appended (once each) or subtracted.
fn edit_list(base: &str, items: &str, append: bool) -> String {
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .map(|i| i.trim().to_string())
            .filter(|i| !i.is_empty())
            .collect()
    };
    let mut list = split(base);
    for item in split(items) {
        if append && !list.contains(&item) {
            list.push(item);
        } else if !append {
            list.retain(|i| *i != item);
        }
    }
    list.join(",")
}

/// Changes broker resource `resource`'s dynamic configs (`"0"` this node, `""` the cluster).
pub fn alter_broker(
    config: &BrokerConfig,
    registry: &TopicRegistry,
    resource: &str,
    change: &Change,
    validate_only: bool,
) -> Result<(), Refused> {
    if !broker::is_broker_resource(config, resource) {
        let message = format!(
            "Unexpected broker id, expected {} or empty string, but received {resource}",
            config.node_id
        );
        return Err((ErrorCode::InvalidRequest, message));
    }
    let refusal = |r: AlterRefusal| match r {
        AlterRefusal::ReadOnly(_) => (ErrorCode::InvalidRequest, r.to_string()),
        _ => (ErrorCode::InvalidConfig, r.to_string()),
    };
    let compute =
        |current: &BTreeMap<String, String>| -> Result<BTreeMap<String, String>, Refused> {
            let changes: Vec<(String, Option<String>)> = match change {
                Change::Replace(all) => {
                    let mut changes: Vec<_> = current.keys().map(|k| (k.clone(), None)).collect();
                    changes.extend(all.iter().map(|(k, v)| (k.clone(), Some(v.clone()))));
                    changes
                }
                Change::Incremental(ops) => broker_ops(ops)?,
            };
            broker::apply(current, &changes).map_err(refusal)
        };
    if validate_only {
        let dynamic = registry.broker_configs();
        return compute(dynamic.of_resource(resource)).map(|_| ());
    }
    let mut refused = None;
    let result = registry.set_broker_configs(resource, |current| {
        compute(current).map_err(|r| {
            let e = TopicError::InvalidConfig(r.1.clone());
            refused = Some(r);
            e
        })
    });
    match (result, refused) {
        (Ok(()), _) => {
            tracing::info!(resource, "dynamic broker configs changed");
            Ok(())
        }
        (Err(_), Some(refusal)) => Err(refusal),
        (Err(e), None) => Err(storage(e)),
    }
}

/// Broker configs take SET and DELETE only (none of the dynamic ones is a list).
fn broker_ops(ops: &[(String, Op)]) -> Result<Vec<(String, Option<String>)>, Refused> {
    ops.iter()
        .map(|(name, op)| match op {
            Op::Set(v) => Ok((name.clone(), Some(v.clone()))),
            Op::Delete => Ok((name.clone(), None)),
            Op::Append(_) | Op::Subtract(_) => Err((
                ErrorCode::InvalidRequest,
                format!("Config value append or subtract is not allowed for config key: {name}"),
            )),
        })
        .collect()
}

/// Changes one resource of either kind.
pub async fn alter<B: Broker>(
    broker: &B,
    resource_type: i8,
    resource: &str,
    change: &Change,
    validate_only: bool,
) -> Result<(), Refused> {
    // A single node's change is a commit of topics.json (write and fsync): off the shard's
    // thread, with owned copies of what it reads.
    let owned = || {
        (
            broker.config().clone(),
            broker.topics().clone(),
            resource.to_string(),
            change.clone(),
        )
    };
    match (resource_type, broker.cluster()) {
        (RESOURCE_TOPIC, None) => {
            let (config, registry, resource, change) = owned();
            broker
                .blocking(move || {
                    alter_topic(&config, &registry, &resource, &change, validate_only)
                })
                .await
        }
        (RESOURCE_TOPIC, Some(cluster)) => {
            alter_topic_in_cluster(broker, cluster, resource, change, validate_only).await
        }
        (RESOURCE_BROKER, Some(_)) if resource.is_empty() => Err((
            ErrorCode::InvalidRequest,
            "cluster-wide dynamic broker configs are not supported in a cluster yet; \
             set them on each broker's own resource"
                .to_string(),
        )),
        (RESOURCE_BROKER, _) => {
            let (config, registry, resource, change) = owned();
            broker
                .blocking(move || {
                    alter_broker(&config, &registry, &resource, &change, validate_only)
                })
                .await
        }
        (RESOURCE_GROUP, _) => alter_group(broker, resource, change, validate_only).await,
        (other, _) => Err((
            ErrorCode::InvalidRequest,
            format!("resource type {other} is not supported"),
        )),
    }
}

/// A group's configs: only `share.auto.offset.reset` (SET `latest`/`earliest`, or DELETE back
/// to `latest`), kept by the group's coordinator beside its share group, in memory as the share
/// groups are (COMPATIBILITY.md). Kafka's other group configs are refused as unknown here.
async fn alter_group<B: Broker>(
    broker: &B,
    group_id: &str,
    change: &Change,
    validate_only: bool,
) -> Result<(), Refused> {
    use crate::group::share::AutoOffsetReset;
    let Change::Incremental(ops) = change else {
        return Err((
            ErrorCode::InvalidRequest,
            "group configs are changed with IncrementalAlterConfigs".to_string(),
        ));
    };
    if group_id.is_empty() {
        return Err((
            ErrorCode::InvalidGroupId,
            "the group id is empty".to_string(),
        ));
    }
    let mut reset = None;
    for (name, op) in ops {
        if name != SHARE_AUTO_OFFSET_RESET {
            return Err((
                ErrorCode::InvalidConfig,
                format!("Unknown group config name: {name}"),
            ));
        }
        reset = Some(match op {
            Op::Set(v) => AutoOffsetReset::parse(v).ok_or_else(|| {
                (
                    ErrorCode::InvalidConfig,
                    format!(
                        "Invalid value {v} for configuration {name}: must be latest or earliest"
                    ),
                )
            })?,
            Op::Delete => AutoOffsetReset::default(),
            Op::Append(_) | Op::Subtract(_) => {
                return Err((
                    ErrorCode::InvalidConfig,
                    format!("{name} is not a list: APPEND and SUBTRACT do not apply"),
                ))
            }
        });
    }
    let Some(reset) = reset.filter(|_| !validate_only) else {
        return Ok(());
    };
    match broker
        .group(group_id, crate::group::GroupOp::ShareSetReset(reset))
        .await
    {
        crate::group::GroupReply::ShareSetReset(code)
        | crate::group::GroupReply::Unavailable(code)
            if !code.is_ok() =>
        {
            Err((code, format!("the group config of {group_id} was not set")))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_append_once_and_subtract() {
        assert_eq!(edit_list("delete", "compact", true), "delete,compact");
        assert_eq!(
            edit_list("delete,compact", "compact", true),
            "delete,compact"
        );
        assert_eq!(edit_list("delete,compact", "delete", false), "compact");
        assert_eq!(edit_list("", "0:0, 1:0", true), "0:0,1:0");
    }

    #[test]
    fn operations_come_from_the_wire_codes() {
        assert_eq!(Op::from_wire(0, Some("x")), Some(Op::Set("x".into())));
        assert_eq!(Op::from_wire(1, None), Some(Op::Delete));
        assert_eq!(Op::from_wire(9, None), None);
    }
}
