//! `/metrics`: the registry's data-path metrics plus gauges read from [`AdminState`] at scrape
//! time, in the Prometheus text format.
//!
//! | family (rill_…)                                   | labels                 | bound            |
//! |---------------------------------------------------|------------------------|------------------|
//! | requests_total, request_duration_seconds          | api                    | Kafka's APIs     |
//! | log_flush_duration_seconds, produce_durable_seconds, fetch_wait_seconds | —  | —                |
//! | shard_stage_seconds                               | stage                  | 7 stages         |
//! | cleaner_{cleans_total, clean_duration_seconds, read_bytes_total, written_bytes_total, records_read_total, records_removed_total} | result (cleans) | — |
//! | txn_ended_total, txn_timed_out_total              | result (ended)         | —                |
//! | partition_{log_start_offset, log_end_offset, high_watermark, last_stable_offset, segments, log_bytes} | topic, partition | partition series |
//! | topic_{partitions, segments, log_bytes, bytes_in_total, messages_in_total, bytes_out_total, messages_out_total} | topic | topics_max |
//! | log_segments, log_bytes, partitions               | state (partitions)     | —                |
//! | shard_{connections_open, connections_accepted_total, connections_closed_total, requests_in_flight, busy_seconds_total} | shard | shards |
//! | read_cache_hits_total, read_cache_misses_total, read_cache_bytes | shard   | shards           |
//! | read_cache_hit_ratio                              | —                      | —                |
//! | bound_hits_total                                  | bound                  | the bounds       |
//! | shard_budget_{bytes, held_bytes, held_bytes_max, waiting} | shard, budget  | shards × 2       |
//! | group_lag                                         | group, topic, partition | partition series |
//! | group_topic_lag                                   | group, topic           | groups_max × topics_max |
//! | group_members, group_state                        | group (state)          | groups_max       |
//! | txn_ids                                           | state                  | Kafka's 6 states |
//! | build_info, ready, live, metrics_series_dropped   | version / family       | —                |
//! | cluster_brokers, cluster_controller_id, cluster_metadata_applied_index (in a cluster) | state | — |
//!
//! Cardinality: per-partition families emit at most `partition_series_max` series each (none
//! when switched off), counting the rest in `rill_metrics_series_dropped{family}`; topics and
//! groups beyond their maximum (in name order) are summed under `topic="_other"` /
//! `group="_other"`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};

use super::state::{
    AdminState, GroupSnapshot, PartitionView, SeriesLimits, ShardSnapshot, ShardStats,
};
use crate::txn::state::TxnState;

/// The label value that sums topics or groups beyond their maximum.
pub const OTHER: &str = "_other";

/// The whole `/metrics` body, with what the shards answered (`snapshots`).
pub fn render(state: &AdminState, snapshots: &[ShardSnapshot]) -> String {
    let mut families = state.metrics.registry.gather();
    let partitions = state.partition_views();
    let groups: Vec<GroupSnapshot> = snapshots.iter().flat_map(|s| s.groups.clone()).collect();
    let mut out = Families::new(state.limits);
    partition_families(&mut out, &partitions);
    topic_families(&mut out, &partitions);
    shard_families(&mut out, state);
    bound_families(&mut out, state);
    group_families(&mut out, &partitions, &groups);
    txn_families(&mut out, snapshots);
    broker_families(&mut out, state);
    cluster_families(&mut out, state);
    families.extend(out.finish());
    let mut text = String::new();
    prometheus::TextEncoder::new()
        .encode_utf8(&families, &mut text)
        .expect("families are well-formed");
    text
}

/// Families under construction, with the series-dropped count per family.
struct Families {
    limits: SeriesLimits,
    by_name: BTreeMap<&'static str, MetricFamily>,
    dropped: BTreeMap<&'static str, u64>,
}

impl Families {
    fn new(limits: SeriesLimits) -> Self {
        Families {
            limits,
            by_name: BTreeMap::new(),
            dropped: BTreeMap::new(),
        }
    }

    fn add(
        &mut self,
        name: &'static str,
        help: &str,
        kind: MetricType,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        let family = self.by_name.entry(name).or_insert_with(|| {
            let mut f = MetricFamily::default();
            f.set_name(name.to_string());
            f.set_help(help.to_string());
            f.set_field_type(kind);
            f
        });
        let mut metric = Metric::from_label(
            labels
                .iter()
                .map(|(k, v)| {
                    let mut pair = LabelPair::default();
                    pair.set_name(k.to_string());
                    pair.set_value(v.to_string());
                    pair
                })
                .collect(),
        );
        if kind == MetricType::COUNTER {
            let mut c = Counter::default();
            c.set_value(value);
            metric.set_counter(c);
        } else {
            let mut g = Gauge::default();
            g.set_value(value);
            metric.set_gauge(g);
        }
        family.mut_metric().push(metric);
    }

    /// Adds a per-partition series unless the family is switched off or full.
    fn add_partition_series(
        &mut self,
        name: &'static str,
        help: &str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        let emitted = self.by_name.get(name).map_or(0, |f| f.get_metric().len());
        if !self.limits.partition_series || emitted >= self.limits.partition_series_max {
            *self.dropped.entry(name).or_default() += 1;
            return;
        }
        self.add(name, help, MetricType::GAUGE, labels, value);
    }

    fn finish(mut self) -> Vec<MetricFamily> {
        let dropped = std::mem::take(&mut self.dropped);
        for (family, count) in dropped {
            self.add(
                "rill_metrics_series_dropped",
                "Series not exported by the cardinality bounds (rill.metrics.*), by family.",
                MetricType::GAUGE,
                &[("family", family)],
                count as f64,
            );
        }
        self.by_name.into_values().collect()
    }
}

const PARTITION_GAUGES: [(&str, &str); 6] = [
    (
        "rill_partition_log_start_offset",
        "First offset still in the partition's log.",
    ),
    (
        "rill_partition_log_end_offset",
        "Next offset the partition will assign.",
    ),
    (
        "rill_partition_high_watermark",
        "Consumers read below this offset.",
    ),
    (
        "rill_partition_last_stable_offset",
        "Read-committed consumers read below this offset.",
    ),
    (
        "rill_partition_segments",
        "Segments of the partition's log.",
    ),
    (
        "rill_partition_log_bytes",
        "Bytes of whole batches in the partition's segments.",
    ),
];

fn partition_values(v: &PartitionView) -> [f64; 6] {
    [
        v.log_start_offset as f64,
        v.log_end_offset as f64,
        v.high_watermark as f64,
        v.last_stable_offset as f64,
        v.segments as f64,
        v.log_bytes as f64,
    ]
}

fn partition_families(out: &mut Families, partitions: &[((String, i32), PartitionView)]) {
    for ((topic, partition), view) in partitions.iter().filter(|(_, v)| v.online) {
        let partition = partition.to_string();
        let labels = [("topic", topic.as_str()), ("partition", partition.as_str())];
        for ((name, help), value) in PARTITION_GAUGES.iter().zip(partition_values(view)) {
            out.add_partition_series(name, help, &labels, value);
        }
    }
}

/// Per-topic sums of partition numbers: partitions, segments, bytes, traffic.
#[derive(Default)]
struct TopicSums {
    partitions: u64,
    segments: u64,
    log_bytes: u64,
    bytes_in: u64,
    messages_in: u64,
    bytes_out: u64,
    messages_out: u64,
}

/// Maps each name to itself for the first `max` distinct names (in order), to [`OTHER`] after.
fn bounded<'a>(names: impl Iterator<Item = &'a str>, max: usize) -> BTreeMap<&'a str, &'a str> {
    let mut distinct: Vec<&str> = names.collect();
    distinct.sort_unstable();
    distinct.dedup();
    distinct
        .iter()
        .enumerate()
        .map(|(i, &n)| (n, if i < max { n } else { OTHER }))
        .collect()
}

fn topic_families(out: &mut Families, partitions: &[((String, i32), PartitionView)]) {
    let label = bounded(
        partitions.iter().map(|((t, _), _)| t.as_str()),
        out.limits.topics_max,
    );
    let mut sums: BTreeMap<&str, TopicSums> = BTreeMap::new();
    for ((topic, _), v) in partitions {
        let s = sums.entry(label[topic.as_str()]).or_default();
        s.partitions += 1;
        s.segments += v.segments;
        s.log_bytes += v.log_bytes;
        s.bytes_in += v.bytes_in;
        s.messages_in += v.messages_in;
        s.bytes_out += v.bytes_out;
        s.messages_out += v.messages_out;
    }
    use MetricType::{COUNTER, GAUGE};
    for (topic, s) in sums {
        let l = [("topic", topic)];
        out.add(
            "rill_topic_partitions",
            "Partitions of the topic this broker has opened.",
            GAUGE,
            &l,
            s.partitions as f64,
        );
        out.add(
            "rill_topic_segments",
            "Segments of the topic's partitions.",
            GAUGE,
            &l,
            s.segments as f64,
        );
        out.add(
            "rill_topic_log_bytes",
            "Bytes of whole batches in the topic's segments.",
            GAUGE,
            &l,
            s.log_bytes as f64,
        );
        out.add(
            "rill_topic_bytes_in_total",
            "Batch bytes appended to the topic.",
            COUNTER,
            &l,
            s.bytes_in as f64,
        );
        out.add(
            "rill_topic_messages_in_total",
            "Records appended to the topic.",
            COUNTER,
            &l,
            s.messages_in as f64,
        );
        out.add(
            "rill_topic_bytes_out_total",
            "Batch bytes of the topic sent to consumers.",
            COUNTER,
            &l,
            s.bytes_out as f64,
        );
        out.add(
            "rill_topic_messages_out_total",
            "Records of the topic sent to consumers.",
            COUNTER,
            &l,
            s.messages_out as f64,
        );
    }
}

const SHARD_FAMILIES: [(&str, &str, MetricType); 8] = [
    (
        "rill_shard_connections_open",
        "Client connections open on the shard.",
        MetricType::GAUGE,
    ),
    (
        "rill_shard_connections_accepted_total",
        "Client connections the shard accepted.",
        MetricType::COUNTER,
    ),
    (
        "rill_shard_connections_closed_total",
        "Client connections the shard closed.",
        MetricType::COUNTER,
    ),
    (
        "rill_shard_requests_in_flight",
        "Requests read and not yet answered on the shard (its request queue).",
        MetricType::GAUGE,
    ),
    (
        "rill_shard_busy_seconds_total",
        "Time the shard's executor spent running tasks.",
        MetricType::COUNTER,
    ),
    (
        "rill_read_cache_hits_total",
        "Cold reads served by the shard's read cache.",
        MetricType::COUNTER,
    ),
    (
        "rill_read_cache_misses_total",
        "Cold reads the shard's read cache sent to the disk.",
        MetricType::COUNTER,
    ),
    (
        "rill_read_cache_bytes",
        "Bytes the shard's read cache holds (written through and read ahead).",
        MetricType::GAUGE,
    ),
];

fn shard_values(s: &ShardStats) -> [f64; 8] {
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let (accepted, closed) = (get(&s.connections_accepted), get(&s.connections_closed));
    [
        accepted.saturating_sub(closed) as f64,
        accepted as f64,
        closed as f64,
        s.requests_in_flight.load(Ordering::Relaxed) as f64,
        get(&s.busy_us) as f64 / 1e6,
        get(&s.read_cache_hits) as f64,
        get(&s.read_cache_misses) as f64,
        get(&s.read_cache_bytes) as f64,
    ]
}

fn shard_families(out: &mut Families, state: &AdminState) {
    let (mut hits, mut misses) = (0.0, 0.0);
    for (id, s) in state.shards.iter().enumerate() {
        let id = id.to_string();
        let values = shard_values(s);
        (hits, misses) = (hits + values[5], misses + values[6]);
        for (&(name, help, kind), value) in SHARD_FAMILIES.iter().zip(values) {
            out.add(name, help, kind, &[("shard", id.as_str())], value);
        }
    }
    if hits + misses > 0.0 {
        out.add(
            "rill_read_cache_hit_ratio",
            "Share of cold reads served by the read caches since start.",
            MetricType::GAUGE,
            &[],
            hits / (hits + misses),
        );
    }
}

/// How often each resource bound bit (summed over the shards), and each shard's byte budgets.
fn bound_families(out: &mut Families, state: &AdminState) {
    use super::bound_hits::Bound;
    use super::state::Budget;
    for bound in Bound::ALL {
        let hits: u64 = state.shards.iter().map(|s| s.bound_hits.get(bound)).sum();
        out.add(
            "rill_bound_hits_total",
            "Times a resource bound bit, by its property (README: Bounds).",
            MetricType::COUNTER,
            &[("bound", bound.property())],
            hits as f64,
        );
    }
    const BUDGET_FAMILIES: [(&str, &str); 4] = [
        (
            "rill_shard_budget_bytes",
            "The shard's bound of a byte budget, by its property.",
        ),
        (
            "rill_shard_budget_held_bytes",
            "Bytes the shard's work holds of a byte budget now.",
        ),
        (
            "rill_shard_budget_waiting",
            "Reservations waiting for a byte budget on the shard now.",
        ),
        (
            "rill_shard_budget_held_bytes_max",
            "The most bytes the shard's work held of a byte budget at once, since start.",
        ),
    ];
    for (id, s) in state.shards.iter().enumerate() {
        let id = id.to_string();
        for (budget, gauges) in Budget::ALL.iter().zip(&s.budgets) {
            let values = [
                &gauges.capacity,
                &gauges.held,
                &gauges.waiting,
                &gauges.held_max,
            ];
            for ((name, help), value) in BUDGET_FAMILIES.iter().zip(values) {
                let labels = [("shard", id.as_str()), ("budget", budget.property())];
                let value = value.load(Ordering::Relaxed) as f64;
                out.add(name, help, MetricType::GAUGE, &labels, value);
            }
        }
    }
}

fn group_families(
    out: &mut Families,
    partitions: &[((String, i32), PartitionView)],
    groups: &[GroupSnapshot],
) {
    let hw: BTreeMap<(&str, i32), i64> = partitions
        .iter()
        .filter(|(_, v)| v.online)
        .map(|((t, p), v)| ((t.as_str(), *p), v.high_watermark))
        .collect();
    let label = bounded(
        groups.iter().map(|g| g.group.as_str()),
        out.limits.groups_max,
    );
    let mut topic_lag: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    let mut members: BTreeMap<&str, usize> = BTreeMap::new();
    for g in groups {
        let name = label[g.group.as_str()];
        *members.entry(name).or_default() += g.members;
        if name != OTHER {
            out.add(
                "rill_group_state",
                "The consumer group's state (1 for the current one).",
                MetricType::GAUGE,
                &[("group", name), ("state", &g.state)],
                1.0,
            );
        }
        for ((topic, partition), &committed) in &g.committed {
            let Some(&high_watermark) = hw.get(&(topic.as_str(), *partition)) else {
                continue; // a deleted topic, or a partition not open
            };
            let lag = high_watermark - committed.0;
            *topic_lag.entry((name, topic.as_str())).or_default() += lag;
            let p = partition.to_string();
            let labels = [
                ("group", g.group.as_str()),
                ("topic", topic.as_str()),
                ("partition", p.as_str()),
            ];
            out.add_partition_series(
                "rill_group_lag",
                "High watermark minus the group's committed offset.",
                &labels,
                lag as f64,
            );
        }
    }
    for ((group, topic), lag) in topic_lag {
        out.add(
            "rill_group_topic_lag",
            "Sum over the topic's partitions of high watermark minus committed offset.",
            MetricType::GAUGE,
            &[("group", group), ("topic", topic)],
            lag as f64,
        );
    }
    for (group, n) in members {
        out.add(
            "rill_group_members",
            "Live members of the consumer group.",
            MetricType::GAUGE,
            &[("group", group)],
            n as f64,
        );
    }
}

/// Transactional ids by state, summed over the shards' coordinators (every state, 0s too).
fn txn_families(out: &mut Families, snapshots: &[ShardSnapshot]) {
    let mut by_state: BTreeMap<&str, u64> = TxnState::ALL.iter().map(|s| (s.name(), 0)).collect();
    for (state, n) in snapshots.iter().flat_map(|s| &s.transactions) {
        *by_state.entry(state).or_default() += n;
    }
    for (state, n) in by_state {
        out.add(
            "rill_txn_ids",
            "Transactional ids the coordinators on this broker hold, by state.",
            MetricType::GAUGE,
            &[("state", state)],
            n as f64,
        );
    }
}

fn broker_families(out: &mut Families, state: &AdminState) {
    use MetricType::GAUGE;
    let info = state.info.read().expect("not poisoned").clone();
    let (version, commit) = split_version(&info.version);
    out.add(
        "rill_build_info",
        "Version and git commit of this broker (always 1).",
        GAUGE,
        &[("version", version), ("commit", commit)],
        1.0,
    );
    out.add(
        "rill_ready",
        "1 when every shard listens and start-up recovery is done.",
        GAUGE,
        &[],
        f64::from(u8::from(state.ready().is_ok())),
    );
    out.add(
        "rill_live",
        "1 when every shard ran within the last 10 seconds.",
        GAUGE,
        &[],
        f64::from(u8::from(state.live().is_ok())),
    );
    let views = state.partition_views();
    let (mut segments, mut bytes) = (0u64, 0u64);
    let mut by_state: BTreeMap<&str, u64> = [("online", 0), ("offline", 0), ("opening", 0)].into();
    for (_, v) in &views {
        segments += v.segments;
        bytes += v.log_bytes;
        let s = if v.online {
            "online"
        } else if v.failed {
            "offline"
        } else {
            "opening"
        };
        *by_state.entry(s).or_default() += 1;
    }
    out.add(
        "rill_log_segments",
        "Segments of every partition on this broker.",
        GAUGE,
        &[],
        segments as f64,
    );
    out.add(
        "rill_log_bytes",
        "Bytes of whole batches in every partition on this broker.",
        GAUGE,
        &[],
        bytes as f64,
    );
    for (s, n) in by_state {
        out.add(
            "rill_partitions",
            "Partitions on this broker by state.",
            GAUGE,
            &[("state", s)],
            n as f64,
        );
    }
}

/// The cluster as this node's metadata image has it (nothing on a single node).
fn cluster_families(out: &mut Families, state: &AdminState) {
    let Some(cluster) = state.cluster() else {
        return;
    };
    let image = cluster.image();
    let fenced = image.brokers.values().filter(|b| b.fenced).count();
    let live = image.brokers.len() - fenced;
    for (s, n) in [("live", live), ("fenced", fenced)] {
        out.add(
            "rill_cluster_brokers",
            "Registered brokers in this node's metadata image, by state.",
            MetricType::GAUGE,
            &[("state", s)],
            n as f64,
        );
    }
    let controller = cluster.controller().map_or(-1.0, |c| f64::from(c.0));
    out.add(
        "rill_cluster_controller_id",
        "node.id of the active controller as this node knows it (-1: unknown).",
        MetricType::GAUGE,
        &[],
        controller,
    );
    out.add(
        "rill_cluster_metadata_applied_index",
        "How far this node applied the metadata log.",
        MetricType::GAUGE,
        &[],
        image.applied_index.0 as f64,
    );
}

/// "0.1.0 (git abc123)" → ("0.1.0", "abc123").
fn split_version(full: &str) -> (&str, &str) {
    match full.split_once(" (git ") {
        Some((v, rest)) => (v, rest.trim_end_matches(')')),
        None => (full, "unknown"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_types::Offset;

    fn view(hw: i64) -> PartitionView {
        PartitionView {
            online: true,
            high_watermark: hw,
            log_end_offset: hw,
            bytes_in: 100,
            ..PartitionView::default()
        }
    }

    fn limits(partition_series: bool, max: usize) -> SeriesLimits {
        SeriesLimits {
            partition_series,
            partition_series_max: max,
            topics_max: 2,
            groups_max: 1,
        }
    }

    fn text(families: Vec<MetricFamily>) -> String {
        prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap()
    }

    #[test]
    fn lag_is_high_watermark_minus_committed_and_groups_are_bounded() {
        let partitions = vec![
            (("t".to_string(), 0), view(10)),
            (("t".to_string(), 1), view(7)),
        ];
        let group = |name: &str, committed: &[(i32, i64)]| GroupSnapshot {
            group: name.into(),
            state: "Stable".into(),
            members: 2,
            protocol_type: "consumer".into(),
            committed: committed
                .iter()
                .map(|&(p, o)| (("t".into(), p), Offset(o)))
                .collect(),
        };
        let groups = [
            group("a", &[(0, 4), (1, 7)]),
            group("b", &[(0, 9)]),
            group("c", &[(0, 0)]),
        ];
        let mut out = Families::new(limits(true, 100));
        group_families(&mut out, &partitions, &groups);
        let t = text(out.finish());
        assert!(
            t.contains("rill_group_lag{group=\"a\",topic=\"t\",partition=\"0\"} 6"),
            "{t}"
        );
        assert!(
            t.contains("rill_group_lag{group=\"a\",topic=\"t\",partition=\"1\"} 0"),
            "{t}"
        );
        assert!(
            t.contains("rill_group_topic_lag{group=\"a\",topic=\"t\"} 6"),
            "{t}"
        );
        // b and c are beyond groups_max = 1: summed as _other (1 + 10), members 4.
        assert!(
            t.contains("rill_group_topic_lag{group=\"_other\",topic=\"t\"} 11"),
            "{t}"
        );
        assert!(t.contains("rill_group_members{group=\"_other\"} 4"), "{t}");
        assert!(!t.contains("rill_group_state{group=\"_other\""), "{t}");
    }

    #[test]
    fn partition_series_are_capped_counted_and_can_be_switched_off() {
        let partitions: Vec<_> = (0..5)
            .map(|p| (("t".to_string(), p), view(p as i64)))
            .collect();
        let mut out = Families::new(limits(true, 3));
        partition_families(&mut out, &partitions);
        let t = text(out.finish());
        assert_eq!(
            t.matches("rill_partition_high_watermark{").count(),
            3,
            "{t}"
        );
        assert!(
            t.contains("rill_metrics_series_dropped{family=\"rill_partition_high_watermark\"} 2"),
            "{t}"
        );
        let mut out = Families::new(limits(false, 3));
        partition_families(&mut out, &partitions);
        let t = text(out.finish());
        assert!(!t.contains("rill_partition_high_watermark{"), "{t}");
        assert!(
            t.contains("rill_metrics_series_dropped{family=\"rill_partition_log_bytes\"} 5"),
            "{t}"
        );
    }

    #[test]
    fn topics_beyond_the_bound_are_summed_under_other() {
        let partitions: Vec<_> = ["a", "b", "c", "d"]
            .iter()
            .map(|t| ((t.to_string(), 0), view(1)))
            .collect();
        let mut out = Families::new(limits(true, 10));
        topic_families(&mut out, &partitions);
        let t = text(out.finish());
        assert!(
            t.contains("rill_topic_bytes_in_total{topic=\"a\"} 100"),
            "{t}"
        );
        assert!(
            t.contains("rill_topic_bytes_in_total{topic=\"_other\"} 200"),
            "{t}"
        );
        assert_eq!(t.matches("rill_topic_bytes_in_total{").count(), 3);
    }

    #[test]
    fn version_splits() {
        assert_eq!(split_version("0.1.0 (git abc)"), ("0.1.0", "abc"));
        assert_eq!(split_version("x"), ("x", "unknown"));
    }
}
