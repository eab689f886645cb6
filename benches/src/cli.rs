//! The command line: one argument struct per subcommand, parsed by clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `rill-bench`: load, latency and comparison tool for Kafka-compatible brokers.
#[derive(Debug, Parser)]
#[command(name = "rill-bench", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// A librdkafka property for every client this run makes, KEY=VALUE (repeatable), e.g.
    /// `-X security.protocol=ssl -X ssl.ca.location=ca.pem` to measure a TLS listener.
    #[arg(short = 'X', long = "client-config", global = true, value_parser = parse_property)]
    pub client_config: Vec<(String, String)>,
}

/// Splits `KEY=VALUE` at the first `=`.
fn parse_property(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open-loop latency at a fixed rate: produce→ack and produce→consume percentiles.
    Latency(LatencyArgs),
    /// Produce then consume as fast as possible: msg/s, MB/s, broker CPU s/GB.
    Throughput(ThroughputArgs),
    /// Rill vs its peers (Apache Kafka in two configurations, tansu) vs this machine's limits,
    /// alternating, one run.
    Compare(CompareArgs),
    /// This machine's limits: sequential O_DIRECT write (dd) and loopback TCP bandwidth.
    Machine(MachineArgs),
    /// Many partitions on one Rill: start-up and recovery, Metadata, RSS/fds/disk per partition,
    /// produce latency to one partition beside idle ones vs a lone partition.
    Partitions(PartitionsArgs),
    /// `perf script` output → flame graph SVG and the top self costs.
    Flamegraph(FlamegraphArgs),
    /// Pools `compare --workloads mixed` runs of one build (their results.json files): the
    /// producer's histograms merged per condition over every phase of every run.
    MixedPool(MixedPoolArgs),
}

/// `rill-bench mixed-pool`.
#[derive(Debug, Clone, Args)]
pub struct MixedPoolArgs {
    /// results.json files written by `compare --workloads mixed` (one build's runs).
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Whose runs to pool: rill or tansu.
    #[arg(long, default_value = "rill")]
    pub broker: String,
}

/// Kafka's `acks` producer setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
pub enum Acks {
    /// No acknowledgement: "delivered" once written to the socket.
    #[value(name = "0")]
    #[serde(rename = "0")]
    None,
    /// The leader appended it.
    #[value(name = "1")]
    #[serde(rename = "1")]
    Leader,
    /// Durable per the broker's flush policy (Rill: after fdatasync).
    #[value(name = "all", alias = "-1")]
    #[serde(rename = "all")]
    All,
}

impl Acks {
    /// The librdkafka `acks` property value.
    pub fn as_config(self) -> &'static str {
        match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
    }
}

/// librdkafka's `compression.codec` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// The librdkafka `compression.codec` property value.
    pub fn as_config(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// How the throughput producer writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProducerMode {
    /// No producer id: the plain path.
    Plain,
    /// `enable.idempotence=true` (needs acks=all).
    Idempotent,
    /// A transactional producer committing every `--txn-messages` messages (acks=all).
    Transactional,
}

impl ProducerMode {
    /// The name reported with the result.
    pub fn as_str(self) -> &'static str {
        match self {
            ProducerMode::Plain => "plain",
            ProducerMode::Idempotent => "idempotent",
            ProducerMode::Transactional => "transactional",
        }
    }
}

/// Where and what to send: shared by latency and throughput.
#[derive(Debug, Clone, Args)]
pub struct Target {
    /// Bootstrap broker(s), HOST:PORT[,HOST:PORT].
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// Topic; created through the admin API if it does not exist.
    #[arg(long)]
    pub topic: String,
    /// Partitions for a topic this tool creates (and the partitions it spreads load across).
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    /// Message value size in bytes (at least 16: the first 16 carry the send stamp).
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Producer acks: 0, 1 or all.
    #[arg(long, value_enum, default_value = "all")]
    pub acks: Acks,
    /// Replicas of a topic this tool creates (a cluster: it waits until every replica is in
    /// the ISR before sending).
    #[arg(long, default_value_t = 1)]
    pub replication_factor: i32,
}

/// `rill-bench latency`.
#[derive(Debug, Clone, Args)]
pub struct LatencyArgs {
    #[command(flatten)]
    pub target: Target,
    /// Messages per second, open loop (the schedule never waits for the broker).
    #[arg(long, default_value_t = 1000)]
    pub rate: u64,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Leading seconds whose samples are dropped (connection and cache warm-up).
    #[arg(long, default_value_t = 1.0)]
    pub warmup_seconds: f64,
    /// Producer linger (queue.buffering.max.ms); 0 sends each message at once.
    #[arg(long, default_value_t = 0)]
    pub linger_ms: u32,
    /// How long to wait for stragglers (acks and consumed copies) after the last send.
    #[arg(long, default_value_t = 15.0)]
    pub drain_seconds: f64,
    /// Write the produce→ack percentile distribution here (HdrHistogram text format, ms);
    /// produce→consume goes beside it with `.e2e` before the extension.
    #[arg(long)]
    pub hgrm: Option<PathBuf>,
    /// Write a percentile chart (SVG) of this run here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Send to and read from only this partition of the topic (the others stay idle); by
    /// default messages go round-robin over `--partitions`.
    #[arg(long)]
    pub partition: Option<i32>,
}

/// `rill-bench throughput`.
#[derive(Debug, Clone, Args)]
pub struct ThroughputArgs {
    #[command(flatten)]
    pub target: Target,
    /// Produce phase length in seconds (the consume phase reads back what was produced).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Compression codec.
    #[arg(long, value_enum, default_value = "none")]
    pub compression: Compression,
    /// Producer linger in ms (batching).
    #[arg(long, default_value_t = 5)]
    pub linger_ms: u32,
    /// Producer batch.size in bytes.
    #[arg(long, default_value_t = 1_000_000)]
    pub batch_bytes: u32,
    /// PID of a local broker: its CPU time (from /proc) is reported per GB moved.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Only produce.
    #[arg(long)]
    pub skip_consume: bool,
    /// Plain, idempotent or transactional producer.
    #[arg(long, value_enum, default_value = "plain")]
    pub producer: ProducerMode,
    /// Messages per transaction with `--producer transactional`.
    #[arg(long, default_value_t = 1000)]
    pub txn_messages: u64,
}

/// `rill-bench compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The `rill` binary (built --release); missing or failing → Rill rows marked pending.
    #[arg(long)]
    pub rill_bin: Option<PathBuf>,
    /// The tansu binary (peer broker, memory:// storage).
    #[arg(long)]
    pub tansu_bin: Option<PathBuf>,
    /// `peers/kafka/kafka.sh`: Apache Kafka runs as two peers, with its defaults and with
    /// `log.flush.interval.messages=1` (an fsync before every ack).
    #[arg(long)]
    pub kafka_script: Option<PathBuf>,
    /// Output directory: results.json, summary.md, charts, .hgrm files, broker logs.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Rill's `--shards`.
    #[arg(long, default_value_t = 1)]
    pub shards: u32,
    /// A properties file Rill starts with (`--config`), e.g. `rill.read.cache.bytes=...`.
    #[arg(long)]
    pub rill_config: Option<PathBuf>,
    /// Message size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Partitions per topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    /// Throughput produce phase, seconds.
    #[arg(long, default_value_t = 8.0)]
    pub throughput_seconds: f64,
    /// Latency run length, seconds.
    #[arg(long, default_value_t = 15.0)]
    pub latency_seconds: f64,
    /// Latency run rate, msg/s.
    #[arg(long, default_value_t = 1000)]
    pub rate: u64,
    /// Rounds; each round runs every workload on each broker, alternating.
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// MiB written by the dd O_DIRECT measurement.
    #[arg(long, default_value_t = 1024)]
    pub dd_mib: u64,
    /// Which workloads to run.
    #[arg(long, value_enum, default_value = "all")]
    pub workloads: WorkloadSet,
    /// Mixed workload: the producer's rate, msg/s (acks=all).
    #[arg(long, default_value_t = 2000)]
    pub mixed_rate: u64,
    /// Mixed workload: seconds of each phase (alone and beside the reader alternate on one
    /// broker, the reader paused in between).
    #[arg(long, default_value_t = 5.0)]
    pub mixed_phase_seconds: f64,
    /// Mixed workload: alone/beside phase pairs per round.
    #[arg(long, default_value_t = 3)]
    pub mixed_pairs: u32,
    /// Mixed workload: seconds dropped at the start of every phase (the reader starting or
    /// stopping).
    #[arg(long, default_value_t = 0.5)]
    pub mixed_settle_seconds: f64,
    /// Mixed workload: durable 4 KiB appends per second timed beside the broker through the
    /// same phases (the device's own limit per condition); 0 turns the probe off.
    #[arg(long, default_value_t = 100)]
    pub mixed_probe_rate: u64,
    /// Mixed workload: MiB produced before it, which the catch-up consumer reads over and over.
    #[arg(long, default_value_t = 1024)]
    pub mixed_backlog_mib: u64,
    /// Mixed workload: run the catch-up consumer's client threads at this nice value (e.g. 19,
    /// so that on a machine with few cores they take CPU only when the producer's client and
    /// the broker leave it: tells their contention apart from the broker's own).
    #[arg(long)]
    pub mixed_reader_nice: Option<i32>,
    /// Mixed workload: run the catch-up consumer's client on these CPUs (a list as `taskset -c`
    /// takes it, e.g. `1`), in its alone and beside phases alike: off the CPU a `--shards 1`
    /// broker's shard is pinned to (CPU 0), as a client on another machine would be. Default:
    /// any CPU.
    #[arg(long, value_parser = crate::mixed::parse_cpu_list)]
    pub mixed_reader_cpus: Option<crate::mixed::CpuList>,
}

/// A subset of `compare`'s workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadSet {
    All,
    Throughput,
    Latency,
    /// A producer at `--mixed-rate` acks=all, alone and beside a catch-up consumer in turns.
    Mixed,
    /// Start-up time, idle RSS, and RSS after creating 1,000 partitions.
    Footprint,
}

/// `rill-bench partitions`.
#[derive(Debug, Clone, Args)]
pub struct PartitionsArgs {
    /// The `rill` binary (built --release).
    #[arg(long)]
    pub rill_bin: PathBuf,
    /// Output directory: the brokers' data directories and logs, results.json.
    #[arg(long, default_value = "bench-partitions")]
    pub out: PathBuf,
    /// Partitions on the broker: N-1 in the topic `many`, 1 in `hot` (the one written to).
    #[arg(long, default_value_t = 10_000)]
    pub partitions: i32,
    /// Rill's `--shards`.
    #[arg(long, default_value_t = 2)]
    pub shards: u32,
    /// Metadata requests timed.
    #[arg(long, default_value_t = 50)]
    pub metadata_requests: u32,
    /// Seconds to wait for the idle release (the broker releases after 30 to 37.5 s: 30 s
    /// `rill.partition.idle.ms` stretched by each partition's timer jitter).
    #[arg(long, default_value_t = 45.0)]
    pub idle_wait_seconds: f64,
    /// Latency runs: messages per second, open loop.
    #[arg(long, default_value_t = 1000)]
    pub rate: u64,
    /// Latency runs: seconds each (two rounds on each broker).
    #[arg(long, default_value_t = 15.0)]
    pub seconds: f64,
    /// Latency runs: message value size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
}

/// `rill-bench machine`.
#[derive(Debug, Clone, Args)]
pub struct MachineArgs {
    /// Directory on the disk to measure (a scratch file is written and removed).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// MiB written by dd.
    #[arg(long, default_value_t = 1024)]
    pub dd_mib: u64,
    /// Seconds of loopback TCP blast.
    #[arg(long, default_value_t = 3.0)]
    pub tcp_seconds: f64,
}

/// `rill-bench flamegraph`.
#[derive(Debug, Clone, Args)]
pub struct FlamegraphArgs {
    /// Text from `perf script`.
    #[arg(long)]
    pub perf_script: PathBuf,
    /// The flame graph SVG to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Also write the folded stacks here.
    #[arg(long)]
    pub folded: Option<PathBuf>,
    /// Chart title.
    #[arg(long, default_value = "rill")]
    pub title: String,
    /// How many top self-cost functions to print.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}
