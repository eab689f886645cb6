//! `rill-bench compare`: the same workloads against Rill and its peers (Apache Kafka with its
//! defaults and with an fsync before every ack, through `peers/kafka/kafka.sh`; tansu) in one run,
//! rotating the order, each on a freshly started broker, plus this machine's limits
//! measured in the same run. Prints a markdown ratio table (also `summary.md`), writes
//! `results.json`, `.hgrm` files and one latency chart per latency workload.
//!
//! A broker that is missing or fails to start is reported as `pending`, the rest still runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::broker::{Broker, BrokerKind, BrokerSpec};
use crate::cli::{
    Acks, CompareArgs, Compression, LatencyArgs, Target, ThroughputArgs, WorkloadSet,
};
use crate::machine::{self, MachineLimits};
use crate::mixed::MixedResult;
use crate::report::{self, Percentiles};
use crate::throughput::ThroughputResult;

/// Seconds of loopback TCP blast for the machine limit.
const TCP_BLAST_SECONDS: f64 = 3.0;

/// One workload of the comparison.
#[derive(Debug, Clone, Copy)]
enum Workload {
    Throughput(Acks),
    Latency(Acks),
    /// acks=all producer alone, then beside a catch-up consumer (see [`crate::mixed`]).
    Mixed,
    /// What a broker costs before any load: start-up, idle RSS, RSS at 1,000 partitions.
    Footprint,
}

impl Workload {
    fn selected(self, set: WorkloadSet) -> bool {
        matches!(
            (set, self),
            (WorkloadSet::All, _)
                | (WorkloadSet::Throughput, Workload::Throughput(_))
                | (WorkloadSet::Latency, Workload::Latency(_))
                | (WorkloadSet::Mixed, Workload::Mixed)
                | (WorkloadSet::Footprint, Workload::Footprint)
        )
    }

    fn name(self) -> String {
        match self {
            Workload::Throughput(acks) => format!("throughput-acks-{}", acks.as_config()),
            Workload::Latency(acks) => format!("latency-acks-{}", acks.as_config()),
            Workload::Mixed => "mixed-acks-all".to_string(),
            Workload::Footprint => "footprint".to_string(),
        }
    }
}

const WORKLOADS: [Workload; 6] = [
    Workload::Throughput(Acks::All),
    Workload::Throughput(Acks::Leader),
    Workload::Latency(Acks::All),
    Workload::Latency(Acks::Leader),
    Workload::Mixed,
    Workload::Footprint,
];

/// Partitions the footprint workload creates (one topic, replication 1).
const FOOTPRINT_PARTITIONS: i32 = 1000;
/// How long a broker sits idle before its RSS is read, and again after the partitions are
/// created: its start-up and creation work has settled.
const FOOTPRINT_SETTLE: Duration = Duration::from_secs(3);

/// One footprint run of a broker.
#[derive(Debug, Clone, Copy, Serialize)]
struct Footprint {
    /// From launch to serving (Kafka's includes `kafka-storage format`, as its start does).
    start_seconds: f64,
    idle_rss_kib: u64,
    partitions_rss_kib: u64,
}

/// Everything measured for one (workload, broker), merged over rounds.
#[derive(Debug, Default, Clone)]
struct Measured {
    throughput: Vec<ThroughputResult>,
    ack: Option<Histogram<u64>>,
    e2e: Option<Histogram<u64>>,
    mixed: Vec<MixedResult>,
    footprint: Vec<Footprint>,
    failures: Vec<String>,
}

type Key = (String, BrokerKind);

/// Runs the comparison; see the module doc.
pub fn run(args: &CompareArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let out = args.out.canonicalize()?;
    eprintln!(
        "== machine limits (dd O_DIRECT in {}, loopback TCP)",
        out.display()
    );
    let limits = machine::measure(&out, args.dd_mib, TCP_BLAST_SECONDS)?;
    eprintln!("{limits:?}");
    let specs = broker_specs(args, &out);
    let mut measured: BTreeMap<Key, Measured> = BTreeMap::new();
    for round in 0..args.rounds {
        for (index, workload) in WORKLOADS
            .iter()
            .filter(|w| w.selected(args.workloads))
            .enumerate()
        {
            // Rotate who goes first: over as many rounds and workloads as there are brokers,
            // each broker takes each place once.
            let mut order: Vec<&BrokerSpec> = specs.iter().collect();
            if !order.is_empty() {
                let turn = (round as usize + index) % order.len();
                order.rotate_left(turn);
            }
            for spec in order {
                let key = (workload.name(), spec.kind);
                let entry = measured.entry(key).or_default();
                run_one(args, spec, *workload, round, entry);
            }
        }
    }
    for kind in BrokerKind::ALL {
        if !specs.iter().any(|s| s.kind == kind) {
            eprintln!(
                "{}: no binary given or found: its rows are pending",
                kind.name()
            );
        }
    }
    write_outputs(args, &out, &limits, &measured)
}

/// The brokers that have a binary.
fn broker_specs(args: &CompareArgs, out: &Path) -> Vec<BrokerSpec> {
    let candidates = [
        (BrokerKind::Rill, &args.rill_bin),
        (BrokerKind::Kafka, &args.kafka_script),
        (BrokerKind::KafkaFsync, &args.kafka_script),
        (BrokerKind::Tansu, &args.tansu_bin),
    ];
    candidates
        .into_iter()
        .filter_map(|(kind, binary)| {
            let binary = binary.as_ref().filter(|b| b.exists())?;
            Some(BrokerSpec {
                kind,
                binary: binary.clone(),
                data_dir: out.join(format!("{}-data", kind.name())),
                shards: args.shards,
                log_path: out.join(format!("{}.log", kind.name())),
                rill_config: args.rill_config.clone(),
            })
        })
        .collect()
}

/// Starts a fresh broker, runs one workload on it, stops it; failures are recorded, not fatal.
fn run_one(
    args: &CompareArgs,
    spec: &BrokerSpec,
    workload: Workload,
    round: u32,
    into: &mut Measured,
) {
    let label = format!("{} round {round} on {}", workload.name(), spec.kind.name());
    eprintln!("== {label}");
    let _ = std::fs::remove_dir_all(&spec.data_dir);
    let launched = Instant::now();
    let result = Broker::start(spec).and_then(|broker| {
        let start_seconds = launched.elapsed().as_secs_f64();
        let topic = format!("bench-{}-r{round}", workload.name());
        let target = Target {
            brokers: broker.address.clone(),
            topic,
            partitions: args.partitions,
            size: args.size,
            acks: Acks::All,
            replication_factor: 1,
        };
        match workload {
            Workload::Throughput(acks) => run_throughput(args, target, acks, broker.pid(), into),
            Workload::Latency(acks) => run_latency(args, target, acks, into),
            Workload::Mixed => {
                let options = crate::mixed::MixedOptions {
                    rate: args.mixed_rate,
                    phase: Duration::from_secs_f64(args.mixed_phase_seconds),
                    pairs: args.mixed_pairs,
                    settle: Duration::from_secs_f64(args.mixed_settle_seconds),
                    backlog_mib: args.mixed_backlog_mib,
                    reader_nice: args.mixed_reader_nice,
                    reader_cpus: args
                        .mixed_reader_cpus
                        .clone()
                        .map(|c| c.0)
                        .unwrap_or_default(),
                    probe_rate: args.mixed_probe_rate,
                    probe_dir: spec.data_dir.clone(),
                    metrics_address: broker.admin_address.clone(),
                    broker_pid: (spec.kind == BrokerKind::Rill).then(|| broker.pid()),
                };
                eprintln!("   catch-up reader's client on {}", reader_placement(args));
                let result = crate::mixed::run(&target, &options)?;
                print_mixed(&result);
                into.mixed.push(result);
                Ok(())
            }
            Workload::Footprint => {
                let footprint = measure_footprint(&broker, start_seconds)?;
                eprintln!("   {footprint:?}");
                into.footprint.push(footprint);
                Ok(())
            }
        }
    });
    let _ = std::fs::remove_dir_all(&spec.data_dir);
    if let Err(error) = result {
        eprintln!("   FAILED: {error:#}");
        into.failures.push(format!("{label}: {error:#}"));
    }
}

/// Where the mixed workload's catch-up consumer's client runs, for the output.
fn reader_placement(args: &CompareArgs) -> String {
    match &args.mixed_reader_cpus {
        Some(cpus) => format!("CPUs {:?}", cpus.0),
        None => "any CPU".to_string(),
    }
}

/// One mixed run's lines: merged quantiles per condition, per-phase p99s, the device probe,
/// and the broker's own view.
fn print_mixed(result: &MixedResult) {
    let quantiles = |h: &Histogram<u64>| {
        let at = |q: f64| h.value_at_quantile(q);
        format!("{}/{}/{}/{}", at(0.5), at(0.9), at(0.99), at(0.999))
    };
    eprintln!(
        "   producer p50/p90/p99/p99.9 µs alone {}, with catch-up reader {}; reader {:.0} MB/s",
        quantiles(&result.alone),
        quantiles(&result.with_reader),
        result.reader_mb_s
    );
    eprintln!(
        "   per-phase p99 µs alone {:?}, beside {:?}",
        result.alone_phase_p99_us, result.beside_phase_p99_us
    );
    eprintln!(
        "   device 4 KiB O_DSYNC p50/p90/p99/p99.9 µs alone {}, beside {}",
        quantiles(&result.device_alone),
        quantiles(&result.device_beside)
    );
    for (name, series) in [
        ("alone", &result.broker_alone),
        ("beside", &result.broker_beside),
    ] {
        if !series.is_empty() {
            eprintln!("   broker {name}: {}", crate::mixed::broker_line(series));
        }
    }
}

/// Idle RSS after settling, then RSS once 1,000 partitions exist and have settled.
fn measure_footprint(broker: &Broker, start_seconds: f64) -> anyhow::Result<Footprint> {
    std::thread::sleep(FOOTPRINT_SETTLE);
    let idle_rss_kib = crate::proc_stat::rss_kib(broker.pid())?;
    crate::client::ensure_topic(&broker.address, "footprint", FOOTPRINT_PARTITIONS, 1)?;
    std::thread::sleep(FOOTPRINT_SETTLE);
    let partitions_rss_kib = crate::proc_stat::rss_kib(broker.pid())?;
    Ok(Footprint {
        start_seconds,
        idle_rss_kib,
        partitions_rss_kib,
    })
}

/// The footprint workload's rows, means over rounds.
fn footprint_rows(workload: &str, get: Get) -> Vec<Row> {
    type Figure = fn(&Footprint) -> f64;
    let figures: [(&str, Figure); 3] = [
        ("start-up to ready s", |f| f.start_seconds),
        ("idle RSS MiB", |f| f.idle_rss_kib as f64 / 1024.0),
        ("RSS after creating 1,000 partitions MiB", |f| {
            f.partitions_rss_kib as f64 / 1024.0
        }),
    ];
    figures
        .into_iter()
        .map(|(metric, figure)| {
            Row::of(workload, metric.to_string(), get, |m| {
                mean_of(&m.footprint, |f| Some(figure(f)))
            })
        })
        .collect()
}

fn run_throughput(
    args: &CompareArgs,
    target: Target,
    acks: Acks,
    pid: u32,
    into: &mut Measured,
) -> anyhow::Result<()> {
    let args = ThroughputArgs {
        target: Target { acks, ..target },
        seconds: args.throughput_seconds,
        compression: Compression::None,
        linger_ms: 5,
        batch_bytes: 1_000_000,
        broker_pid: Some(pid),
        skip_consume: false,
        producer: crate::cli::ProducerMode::Plain,
        txn_messages: 0,
    };
    let result = crate::throughput::run(&args)?;
    crate::throughput::print(&result);
    into.throughput.push(result);
    Ok(())
}

fn run_latency(
    args: &CompareArgs,
    target: Target,
    acks: Acks,
    into: &mut Measured,
) -> anyhow::Result<()> {
    let args = LatencyArgs {
        target: Target { acks, ..target },
        rate: args.rate,
        seconds: args.latency_seconds,
        warmup_seconds: 1.0,
        linger_ms: 0,
        drain_seconds: 15.0,
        hgrm: None,
        svg: None,
        partition: None,
    };
    let result = crate::latency::run(&args)?;
    crate::latency::print(&args, &result)?;
    merge(&mut into.ack, &result.ack)?;
    merge(&mut into.e2e, &result.e2e)
}

fn merge(into: &mut Option<Histogram<u64>>, from: &Histogram<u64>) -> anyhow::Result<()> {
    match into {
        Some(histogram) => histogram.add(from).context("merging histograms"),
        None => {
            *into = Some(from.clone());
            Ok(())
        }
    }
}

/// Mean of one figure over rounds; `None` when nothing was measured.
fn mean_of<T>(runs: &[T], figure: impl Fn(&T) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = runs.iter().filter_map(figure).collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// One row of the ratio table: a figure per broker (`None`: not measured).
#[derive(Debug, Serialize)]
struct Row {
    workload: String,
    metric: String,
    figures: BTreeMap<BrokerKind, Option<f64>>,
    /// Rill's figure against the machine limit that bounds it, as text ("42% of disk").
    rill_vs_machine: String,
}

impl Row {
    /// A row with `figure` taken of each broker's measurements.
    fn of(
        workload: &str,
        metric: String,
        get: Get,
        figure: impl Fn(&Measured) -> Option<f64>,
    ) -> Row {
        Row {
            workload: workload.to_string(),
            metric,
            figures: BrokerKind::ALL
                .into_iter()
                .map(|kind| (kind, figure(get(kind))))
                .collect(),
            rill_vs_machine: String::new(),
        }
    }

    /// The figure of `kind`, if measured.
    fn figure(&self, kind: BrokerKind) -> Option<f64> {
        self.figures.get(&kind).copied().flatten()
    }
}

/// One workload's measurements of a broker.
type Get<'a> = &'a dyn Fn(BrokerKind) -> &'a Measured;

fn throughput_rows(workload: &str, get: Get, limits: &MachineLimits) -> Vec<Row> {
    type Figure = fn(&ThroughputResult) -> Option<f64>;
    let figures: [(&str, Figure); 6] = [
        ("produce MB/s", |r| Some(r.produce.mb_per_s)),
        ("produce msg/s", |r| Some(r.produce.msgs_per_s)),
        ("produce broker CPU s/GB", |r| r.produce.broker_cpu_s_per_gb),
        ("consume MB/s", |r| r.consume.map(|c| c.mb_per_s)),
        ("consume msg/s", |r| r.consume.map(|c| c.msgs_per_s)),
        ("consume broker CPU s/GB", |r| {
            r.consume.and_then(|c| c.broker_cpu_s_per_gb)
        }),
    ];
    figures
        .into_iter()
        .map(|(metric, figure)| {
            let mut row = Row::of(workload, metric.to_string(), get, |m| {
                mean_of(&m.throughput, figure)
            });
            row.rill_vs_machine = match (metric, row.figure(BrokerKind::Rill)) {
                ("produce MB/s", Some(v)) => format!(
                    "{:.0}% of disk, {:.0}% of loopback",
                    100.0 * v / limits.disk_direct_write_mb_s,
                    100.0 * v / limits.loopback_tcp_mb_s
                ),
                ("consume MB/s", Some(v)) => {
                    format!("{:.0}% of loopback", 100.0 * v / limits.loopback_tcp_mb_s)
                }
                _ => String::new(),
            };
            row
        })
        .collect()
}

/// Which latency of a run a row quotes.
#[derive(Debug, Clone, Copy)]
enum LatencyPath {
    Ack,
    Consume,
}

fn latency_rows(workload: &str, get: Get, limits: &MachineLimits) -> Vec<Row> {
    type Pick = fn(&Percentiles) -> u64;
    let quantiles: [(&str, Pick); 6] = [
        ("p50", |p| p.p50_us),
        ("p90", |p| p.p90_us),
        ("p99", |p| p.p99_us),
        ("p99.9", |p| p.p999_us),
        ("p99.99", |p| p.p9999_us),
        ("max", |p| p.max_us),
    ];
    let mut rows = Vec::new();
    for path in [LatencyPath::Ack, LatencyPath::Consume] {
        let of = |m: &Measured| {
            let histogram = match path {
                LatencyPath::Ack => &m.ack,
                LatencyPath::Consume => &m.e2e,
            };
            histogram.as_ref().map(Percentiles::of)
        };
        for (name, q) in quantiles {
            let path_name = match path {
                LatencyPath::Ack => "ack",
                LatencyPath::Consume => "consume",
            };
            let metric = format!("produce→{path_name} {name} µs");
            let mut row = Row::of(workload, metric, get, |m| of(m).map(|p| q(&p) as f64));
            let floor_us = q(&limits.disk_sync_write_4k).max(1) as f64;
            row.rill_vs_machine = match row.figure(BrokerKind::Rill) {
                Some(v) if workload.ends_with("all") => {
                    format!("{:.1}× the {name} of a 4 KiB sync write", v / floor_us)
                }
                _ => String::new(),
            };
            rows.push(row);
        }
    }
    rows
}

fn all_rows(
    args: &CompareArgs,
    measured: &BTreeMap<Key, Measured>,
    limits: &MachineLimits,
) -> Vec<Row> {
    let empty = Measured::default();
    let mut rows = Vec::new();
    for workload in WORKLOADS.into_iter().filter(|w| w.selected(args.workloads)) {
        let name = workload.name();
        let get = |kind: BrokerKind| measured.get(&(name.clone(), kind)).unwrap_or(&empty);
        match workload {
            Workload::Throughput(_) => rows.extend(throughput_rows(&name, &get, limits)),
            Workload::Latency(_) => rows.extend(latency_rows(&name, &get, limits)),
            Workload::Mixed => rows.extend(mixed_rows(&name, &get)),
            Workload::Footprint => rows.extend(footprint_rows(&name, &get)),
        }
    }
    rows
}

type HistogramPick = fn(&MixedResult) -> &Histogram<u64>;
type PhasesPick = fn(&MixedResult) -> &Vec<u64>;

/// Quantile `q` of the histograms `pick` takes from every run, merged.
fn merged_quantile(runs: &[MixedResult], pick: HistogramPick, q: f64) -> Option<f64> {
    let mut merged: Option<Histogram<u64>> = None;
    for run in runs {
        merge(&mut merged, pick(run)).ok()?;
    }
    merged
        .filter(|h| !h.is_empty())
        .map(|h| h.value_at_quantile(q) as f64)
}

/// The lowest (or highest) per-phase p99 over every run.
fn phase_p99_extreme(runs: &[MixedResult], pick: PhasesPick, highest: bool) -> Option<f64> {
    let all = runs.iter().flat_map(|r| pick(r).iter().copied());
    let extreme = if highest { all.max() } else { all.min() };
    extreme.map(|v| v as f64)
}

/// Percent of Produce requests over 1 ms in the broker (`/metrics`) over every run's phases
/// of one condition.
fn broker_produce_over_1ms(runs: &[MixedResult], beside: bool) -> Option<f64> {
    let mut series = BTreeMap::new();
    for run in runs {
        let from = if beside {
            &run.broker_beside
        } else {
            &run.broker_alone
        };
        crate::mixed::add_series(&mut series, from);
    }
    let shares = crate::mixed::shares(&series, "rill_request_duration_seconds", "api=\"Produce\"")?;
    let (_, share) = shares.over.iter().find(|(bound, _)| bound == "0.001")?;
    Some(100.0 * share)
}

/// The mixed workload's rows: the producer's quantiles alone and beside the catch-up consumer
/// (histograms merged over every phase of every round), the p99 ratio, the spread of the
/// per-phase p99s, the device probe's p99 per condition, the broker's share of Produce
/// requests over 1 ms per condition, and the consumer's read rate (mean).
fn mixed_rows(workload: &str, get: Get) -> Vec<Row> {
    let row = |metric: String, figure: &dyn Fn(&[MixedResult]) -> Option<f64>| {
        Row::of(workload, metric, get, |m| figure(&m.mixed))
    };
    let alone: HistogramPick = |r| &r.alone;
    let beside: HistogramPick = |r| &r.with_reader;
    let mut rows = Vec::new();
    for (condition, pick) in [("alone", alone), ("beside a catch-up reader", beside)] {
        for (name, q) in [("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)] {
            rows.push(row(format!("producer {name} µs, {condition}"), &|runs| {
                merged_quantile(runs, pick, q)
            }));
        }
    }
    rows.push(row("producer p99 beside reader / alone".into(), &|runs| {
        Some(merged_quantile(runs, beside, 0.99)? / merged_quantile(runs, alone, 0.99)?)
    }));
    let alone_phases: PhasesPick = |r| &r.alone_phase_p99_us;
    let beside_phases: PhasesPick = |r| &r.beside_phase_p99_us;
    for (condition, pick) in [("alone", alone_phases), ("beside", beside_phases)] {
        for (end, highest) in [("lowest", false), ("highest", true)] {
            rows.push(row(
                format!("producer p99 µs of one phase {condition}, {end}"),
                &|runs| phase_p99_extreme(runs, pick, highest),
            ));
        }
    }
    let device_alone: HistogramPick = |r| &r.device_alone;
    let device_beside: HistogramPick = |r| &r.device_beside;
    for (condition, pick) in [("alone", device_alone), ("beside", device_beside)] {
        rows.push(row(
            format!("device 4 KiB O_DSYNC append p99 µs, {condition}"),
            &|runs| merged_quantile(runs, pick, 0.99),
        ));
    }
    for (condition, beside) in [("alone", false), ("beside", true)] {
        rows.push(row(
            format!("broker: % of Produce requests over 1 ms, {condition}"),
            &|runs| broker_produce_over_1ms(runs, beside),
        ));
    }
    rows.push(row("catch-up reader MB/s".into(), &|runs| {
        (!runs.is_empty())
            .then(|| runs.iter().map(|r| r.reader_mb_s).sum::<f64>() / runs.len() as f64)
    }));
    rows
}

/// Two significant figures for small ratios (latency ratios far below 1 stay readable).
fn ratio_text(ratio: f64) -> String {
    if ratio >= 0.1 {
        format!("{ratio:.2}")
    } else {
        format!("{ratio:.2e}")
    }
}

fn cell(value: Option<f64>, pending: &str) -> String {
    match value {
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.2}"),
        None => pending.to_string(),
    }
}

fn markdown(
    args: &CompareArgs,
    limits: &MachineLimits,
    rows: &[Row],
    failures: &[String],
) -> String {
    let mut text = format!(
        "Machine limits (same run): sequential O_DIRECT write {:.0} MB/s; 4 KiB O_DIRECT+O_DSYNC append p50 {} µs, p99 {} µs, p99.9 {} µs; loopback TCP {:.0} MB/s.\n\
         Workloads: {} B messages, {} partition(s), Rill --shards {}, throughput {} s per run (linger 5 ms, no compression), latency {} msg/s for {} s (first 1 s dropped), {} round(s), the order rotating; mixed: acks=all producer at {} msg/s on one broker per round, {} pairs of {} s phases alone / beside a consumer reading a {} MiB backlog from its start at full speed (paused in between), the first {} s of each phase dropped, a device probe of {} durable 4 KiB appends/s throughout, the reader's client on {}; footprint: start-up (launch to serving), RSS after {} s idle, RSS {} s after creating a topic of {} partitions.\n\n\
         | workload | metric | {} | {} | rill vs machine |\n|---|---|{}---|\n",
        limits.disk_direct_write_mb_s,
        limits.disk_sync_write_4k.p50_us,
        limits.disk_sync_write_4k.p99_us,
        limits.disk_sync_write_4k.p999_us,
        limits.loopback_tcp_mb_s,
        args.size, args.partitions, args.shards, args.throughput_seconds, args.rate, args.latency_seconds, args.rounds,
        args.mixed_rate, args.mixed_pairs, args.mixed_phase_seconds, args.mixed_backlog_mib,
        args.mixed_settle_seconds, args.mixed_probe_rate, reader_placement(args),
        FOOTPRINT_SETTLE.as_secs(), FOOTPRINT_SETTLE.as_secs(), FOOTPRINT_PARTITIONS,
        BrokerKind::ALL.map(BrokerKind::name).join(" | "),
        BrokerKind::PEERS.map(|peer| format!("rill/{}", peer.name())).join(" | "),
        "---:|".repeat(BrokerKind::ALL.len() + BrokerKind::PEERS.len()),
    );
    for row in rows {
        let rill = row.figure(BrokerKind::Rill);
        let mut cells = vec![cell(rill, "pending")];
        cells.extend(BrokerKind::PEERS.map(|peer| cell(row.figure(peer), "n/a")));
        cells.extend(
            BrokerKind::PEERS.map(|peer| match (rill, row.figure(peer)) {
                (Some(r), Some(p)) if p != 0.0 => ratio_text(r / p),
                _ => "-".to_string(),
            }),
        );
        text += &format!(
            "| {} | {} | {} | {} |\n",
            row.workload,
            row.metric,
            cells.join(" | "),
            row.rill_vs_machine
        );
    }
    for failure in failures {
        text += &format!("\nFAILED: {failure}\n");
    }
    text
}

fn write_outputs(
    args: &CompareArgs,
    out: &Path,
    limits: &MachineLimits,
    measured: &BTreeMap<Key, Measured>,
) -> anyhow::Result<()> {
    let rows = all_rows(args, measured, limits);
    let failures: Vec<String> = measured.values().flat_map(|m| m.failures.clone()).collect();
    let summary = markdown(args, limits, &rows, &failures);
    std::fs::write(out.join("summary.md"), &summary)?;
    write_latency_files(out, measured)?;
    let raw: BTreeMap<String, Vec<&ThroughputResult>> = measured
        .iter()
        .map(|((w, k), m)| (format!("{w}/{}", k.name()), m.throughput.iter().collect()))
        .collect();
    let mixed_runs: BTreeMap<String, Vec<serde_json::Value>> = measured
        .iter()
        .filter(|(_, m)| !m.mixed.is_empty())
        .map(|((w, k), m)| {
            (
                format!("{w}/{}", k.name()),
                m.mixed.iter().map(mixed_json).collect(),
            )
        })
        .collect();
    let footprint_runs: BTreeMap<String, &Vec<Footprint>> = measured
        .iter()
        .filter(|(_, m)| !m.footprint.is_empty())
        .map(|((w, k), m)| (format!("{w}/{}", k.name()), &m.footprint))
        .collect();
    let json = serde_json::json!({
        "machine": limits,
        "rows": rows,
        "throughput_runs": raw,
        "mixed_runs": mixed_runs,
        "footprint_runs": footprint_runs,
        "failures": failures,
    });
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    println!("{summary}");
    println!("(written to {})", out.display());
    Ok(())
}

/// One mixed run for results.json: quantiles per condition and phase, probe, broker view.
fn mixed_json(run: &MixedResult) -> serde_json::Value {
    let encoded = |h: &Histogram<u64>| report::histogram_to_base64(h).ok();
    serde_json::json!({
        "histograms": {
            "alone": encoded(&run.alone),
            "beside": encoded(&run.with_reader),
            "device_alone": encoded(&run.device_alone),
            "device_beside": encoded(&run.device_beside),
        },
        "alone": Percentiles::of(&run.alone),
        "beside": Percentiles::of(&run.with_reader),
        "alone_phase_p99_us": run.alone_phase_p99_us,
        "beside_phase_p99_us": run.beside_phase_p99_us,
        "device_alone": Percentiles::of(&run.device_alone),
        "device_beside": Percentiles::of(&run.device_beside),
        "broker_alone": crate::mixed::broker_line(&run.broker_alone),
        "broker_beside": crate::mixed::broker_line(&run.broker_beside),
        "reader_mb_s": run.reader_mb_s,
    })
}

/// Per broker `.hgrm` files and one chart per latency workload.
fn write_latency_files(out: &Path, measured: &BTreeMap<Key, Measured>) -> anyhow::Result<()> {
    for workload in WORKLOADS
        .iter()
        .filter(|w| matches!(w, Workload::Latency(_)))
    {
        let name = workload.name();
        let mut series: Vec<(String, &Histogram<u64>)> = Vec::new();
        for kind in BrokerKind::ALL {
            let Some(m) = measured.get(&(name.clone(), kind)) else {
                continue;
            };
            if let (Some(ack), Some(e2e)) = (&m.ack, &m.e2e) {
                let hgrm: PathBuf = out.join(format!("{name}-{}.hgrm", kind.name()));
                report::write_hgrm(&hgrm, ack)?;
                report::write_hgrm(&report::sibling_path(&hgrm, "e2e"), e2e)?;
                series.push((format!("{} produce→ack", kind.name()), ack));
                series.push((format!("{} produce→consume", kind.name()), e2e));
            }
        }
        if !series.is_empty() {
            let named: Vec<(&str, &Histogram<u64>)> =
                series.iter().map(|(n, h)| (n.as_str(), *h)).collect();
            crate::chart::latency_chart(&out.join(format!("{name}.svg")), &name, &named)?;
        }
    }
    Ok(())
}
