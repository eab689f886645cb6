//! `/v1/status`: the broker's state as one JSON document (also what the HTML page shows).
//!
//! Brokers (one until the cluster lands), shards, topics with each partition's offsets, groups
//! with each committed offset's lag, and recent warnings and errors. Built from
//! [`AdminState`] and the shards' snapshots at request time.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use serde::Serialize;

use super::errors::{recent, RecentEvent};
use super::state::{AdminState, BrokerInfo, GroupSnapshot, PartitionView};

/// The whole document.
#[derive(Debug, Serialize)]
pub struct Status {
    /// This broker.
    pub broker: BrokerInfo,
    /// Seconds since the broker started.
    pub uptime_seconds: u64,
    /// `ready`, or why not.
    pub ready: Readiness,
    /// `live`, or why not.
    pub live: Readiness,
    /// Every broker of the cluster (this one alone for now).
    pub brokers: Vec<BrokerEntry>,
    /// The shards of this broker.
    pub shards: Vec<ShardEntry>,
    /// Topics, by name.
    pub topics: Vec<TopicEntry>,
    /// Consumer groups, by id.
    pub groups: Vec<GroupEntry>,
    /// Shards that did not answer the snapshot request in time (their groups are missing).
    pub shards_not_answering: usize,
    /// The last warnings and errors, oldest first.
    pub recent_errors: Vec<RecentEvent>,
}

/// A yes/no with the reason for no.
#[derive(Debug, Serialize)]
pub struct Readiness {
    /// Whether the check passes.
    pub ok: bool,
    /// Why not, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl From<Result<(), String>> for Readiness {
    fn from(r: Result<(), String>) -> Self {
        Readiness {
            ok: r.is_ok(),
            reason: r.err(),
        }
    }
}

/// One broker of the cluster.
#[derive(Debug, Serialize)]
pub struct BrokerEntry {
    /// `node.id`.
    pub node_id: i32,
    /// Address clients connect to.
    pub address: String,
    /// Whether this is the broker answering.
    pub this_broker: bool,
    /// Fenced by the controller (missed its heartbeats): not live.
    pub fenced: bool,
    /// Whether it is the active controller.
    pub controller: bool,
}

/// One shard.
#[derive(Debug, Serialize)]
pub struct ShardEntry {
    /// Index.
    pub id: usize,
    /// Whether its listener is bound.
    pub listening: bool,
    /// Client connections open.
    pub connections_open: u64,
    /// Requests read, not yet answered.
    pub requests_in_flight: i64,
    /// Executor busy time since start.
    pub busy_seconds: f64,
    /// Milliseconds since the shard last ran its observer.
    pub heartbeat_age_ms: u64,
}

/// One topic.
#[derive(Debug, Serialize)]
pub struct TopicEntry {
    /// Name.
    pub name: String,
    /// Partitions (from the topic metadata).
    pub partition_count: i32,
    /// Every partition this broker has opened.
    pub partitions: Vec<PartitionEntry>,
}

/// One partition.
#[derive(Debug, Serialize)]
pub struct PartitionEntry {
    /// Index.
    pub partition: i32,
    /// `online`, `opening` or `offline`.
    pub state: &'static str,
    /// Offsets, sizes and traffic.
    #[serde(flatten)]
    pub numbers: PartitionView,
}

/// One consumer group.
#[derive(Debug, Serialize)]
pub struct GroupEntry {
    /// Id.
    pub group: String,
    /// State.
    pub state: String,
    /// Live members.
    pub members: usize,
    /// Protocol type.
    pub protocol_type: String,
    /// Sum of the lags below.
    pub lag: i64,
    /// Each committed offset with its partition's high watermark.
    pub offsets: Vec<GroupOffset>,
}

/// One committed offset.
#[derive(Debug, Serialize)]
pub struct GroupOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The next offset the group will consume.
    pub committed_offset: i64,
    /// The partition's high watermark (absent if the partition is not open).
    pub high_watermark: Option<i64>,
    /// High watermark minus committed offset.
    pub lag: Option<i64>,
}

fn partition_state(v: &PartitionView) -> &'static str {
    if v.online {
        "online"
    } else if v.failed {
        "offline"
    } else {
        "opening"
    }
}

/// Builds the document from the state and the shards' snapshots.
pub fn build(state: &AdminState, groups: &[GroupSnapshot], not_answering: usize) -> Status {
    let broker = state.info.read().expect("not poisoned").clone();
    let brokers = brokers(state, &broker);
    let views = state.partition_views();
    Status {
        uptime_seconds: state.started_at.elapsed().map_or(0, |d| d.as_secs()),
        ready: state.ready().into(),
        live: state.live().into(),
        brokers,
        shards: shards(state),
        topics: topics(state, &views),
        groups: group_entries(groups, &views),
        shards_not_answering: not_answering,
        recent_errors: recent(),
        broker,
    }
}

/// Every registered broker of the cluster as this node's metadata image has them, or this
/// broker alone.
fn brokers(state: &AdminState, this: &BrokerInfo) -> Vec<BrokerEntry> {
    let Some(cluster) = state.cluster() else {
        return vec![BrokerEntry {
            node_id: this.node_id,
            address: this.advertise.clone(),
            this_broker: true,
            fenced: false,
            controller: false,
        }];
    };
    let controller = cluster.controller();
    cluster
        .image()
        .brokers
        .values()
        .map(|b| BrokerEntry {
            node_id: b.node_id.0,
            address: b.endpoint.to_string(),
            this_broker: b.node_id == cluster.node_id(),
            fenced: b.fenced,
            controller: controller == Some(b.node_id),
        })
        .collect()
}

fn shards(state: &AdminState) -> Vec<ShardEntry> {
    let now = state.now_ms();
    state
        .shards
        .iter()
        .enumerate()
        .map(|(id, s)| ShardEntry {
            id,
            listening: s.listening.load(Ordering::Relaxed),
            connections_open: s
                .connections_accepted
                .load(Ordering::Relaxed)
                .saturating_sub(s.connections_closed.load(Ordering::Relaxed)),
            requests_in_flight: s.requests_in_flight.load(Ordering::Relaxed),
            busy_seconds: s.busy_us.load(Ordering::Relaxed) as f64 / 1e6,
            heartbeat_age_ms: now.saturating_sub(s.heartbeat_ms.load(Ordering::Relaxed)),
        })
        .collect()
}

fn topics(state: &AdminState, views: &[((String, i32), PartitionView)]) -> Vec<TopicEntry> {
    let mut topics: BTreeMap<String, TopicEntry> = state
        .registry
        .list()
        .into_iter()
        .map(|(name, meta)| {
            let entry = TopicEntry {
                name: name.clone(),
                partition_count: meta.partitions,
                partitions: Vec::new(),
            };
            (name, entry)
        })
        .collect();
    for ((topic, partition), v) in views {
        // Internal logs (group offsets) have no topic metadata: shown only through groups.
        if let Some(entry) = topics.get_mut(topic) {
            entry.partitions.push(PartitionEntry {
                partition: *partition,
                state: partition_state(v),
                numbers: *v,
            });
        }
    }
    topics.into_values().collect()
}

fn group_entries(
    groups: &[GroupSnapshot],
    views: &[((String, i32), PartitionView)],
) -> Vec<GroupEntry> {
    let hw: BTreeMap<(&str, i32), i64> = views
        .iter()
        .filter(|(_, v)| v.online)
        .map(|((t, p), v)| ((t.as_str(), *p), v.high_watermark))
        .collect();
    let mut entries: Vec<GroupEntry> = groups
        .iter()
        .map(|g| {
            let offsets: Vec<GroupOffset> = g
                .committed
                .iter()
                .map(|((topic, partition), committed)| {
                    let committed = committed.0;
                    let high_watermark = hw.get(&(topic.as_str(), *partition)).copied();
                    GroupOffset {
                        topic: topic.clone(),
                        partition: *partition,
                        committed_offset: committed,
                        high_watermark,
                        lag: high_watermark.map(|h| h - committed),
                    }
                })
                .collect();
            GroupEntry {
                group: g.group.clone(),
                state: g.state.clone(),
                members: g.members,
                protocol_type: g.protocol_type.clone(),
                lag: offsets.iter().filter_map(|o| o.lag).sum(),
                offsets,
            }
        })
        .collect();
    entries.sort_by(|a, b| a.group.cmp(&b.group));
    entries
}
