//! `rill-bench partitions`: what many partitions cost one Rill broker (issue 17), in one run.
//!
//! With the broker's defaults (only `--shards` set), on fresh data directories:
//! 1. **Lone partition**, round 1: a broker with one 1-partition topic `hot`; open-loop acks=all
//!    produce latency to it (`latency --partition 0`). Then stopped.
//! 2. **Many partitions**: a new broker; footprint of the empty broker; CreateTopics of `many`
//!    with N-1 partitions and `hot` with 1 (timed); Metadata for `many`, M times (every partition
//!    listed); ListOffsets of every partition (its first use creates each partition's directory
//!    and empty log: timed, footprint); one 100-byte record to every partition of `many` (timed,
//!    footprint); clean restart: SIGTERM time, time to listening and until every partition
//!    answers ListOffsets (all logs opened and recovered), footprint; footprint after the idle
//!    release (`--idle-wait-seconds`, past the broker's 30 s `rill.partition.idle.ms`); produce
//!    latency to `hot` beside the N-1 idle partitions, round 1, and to partition 0 of `many`
//!    (a producer of an N-1-partition topic does per-partition work of its own in librdkafka);
//!    `kill -9` and restart: to listening and every partition answering (recovery); latency to
//!    `hot`, round 2; SIGTERM time with data everywhere.
//! 3. **Lone partition**, round 2, on its data directory from step 1.
//!
//! Footprint: RSS (`VmRSS`), open descriptors (`/proc/<pid>/fd`) and disk (allocated blocks under
//! the data directory). Writes `results.json` and prints a markdown table.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::Serialize;

use crate::broker::{Broker, BrokerKind, BrokerSpec};
use crate::cli::{Acks, Compression, LatencyArgs, PartitionsArgs, Target};
use crate::client::{self, ProducerKnobs};
use crate::report::{self, Percentiles};

/// How long ListOffsets for every partition may take (a debug build opening 10,000 logs).
const ALL_PARTITIONS_TIMEOUT: Duration = Duration::from_secs(120);
/// Bytes of the record written to every partition.
const RECORD_BYTES: usize = 100;
/// The topic of the idle partitions.
const MANY: &str = "many";
/// The 1-partition topic the latency runs produce to.
const HOT: &str = "hot";

/// RSS, descriptors and disk of the broker at one moment.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Footprint {
    pub rss_kib: u64,
    pub fds: u64,
    pub disk_kib: u64,
}

/// A restart: to listening, and until every partition answered ListOffsets.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Restart {
    pub listening_s: f64,
    pub all_partitions_s: f64,
}

/// Everything one run measured.
#[derive(Debug, Serialize)]
pub struct PartitionsResult {
    pub partitions: i32,
    pub shards: u32,
    pub empty_broker: Footprint,
    pub create_topic_s: f64,
    pub metadata_ms: Vec<f64>,
    pub first_use_s: f64,
    pub created: Footprint,
    pub write_one_each_s: f64,
    pub one_record_each: Footprint,
    pub clean_stop_s: f64,
    pub clean_restart: Restart,
    pub opened: Footprint,
    pub idle: Footprint,
    pub crash_restart: Restart,
    pub clean_stop_with_data_s: f64,
    pub lone_ack: Percentiles,
    pub beside_ack: Percentiles,
    pub same_topic_ack: Percentiles,
}

/// Runs the whole workload (see the module doc) and prints its report.
pub fn run(args: &PartitionsArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let out = args.out.canonicalize()?;
    let spec = |name: &str| BrokerSpec {
        kind: BrokerKind::Rill,
        binary: args.rill_bin.clone(),
        data_dir: out.join(format!("{name}-data")),
        shards: args.shards,
        log_path: out.join(format!("{name}.log")),
        rill_config: None,
    };
    let (lone, many) = (spec("lone"), spec("many"));
    for dir in [&lone.data_dir, &many.data_dir] {
        let _ = std::fs::remove_dir_all(dir);
    }
    let mut lone_ack = report::new_histogram();
    eprintln!("== lone partition, round 1");
    lone_round(args, &lone, &mut lone_ack)?;
    let result = many_partitions(args, &many)?;
    eprintln!("== lone partition, round 2");
    lone_round(args, &lone, &mut lone_ack)?;
    let result = PartitionsResult {
        lone_ack: Percentiles::of(&lone_ack),
        ..result
    };
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&result)?,
    )?;
    print(args, &result);
    Ok(())
}

/// One latency round on the lone-partition broker (started on its data dir, stopped after).
fn lone_round(
    args: &PartitionsArgs,
    spec: &BrokerSpec,
    into: &mut Histogram<u64>,
) -> anyhow::Result<()> {
    let broker = Broker::start(spec)?;
    let ack = latency(args, &broker.address, HOT, 1)?;
    into.add(&ack).context("merging histograms")?;
    broker.stop()?;
    Ok(())
}

/// Step 2 of the module doc.
fn many_partitions(args: &PartitionsArgs, spec: &BrokerSpec) -> anyhow::Result<PartitionsResult> {
    let n = args.partitions - 1;
    eprintln!("== {} partitions ({MANY}: {n}, {HOT}: 1)", args.partitions);
    let broker = Broker::start(spec)?;
    let empty_broker = footprint(&broker, &spec.data_dir)?;
    let started = Instant::now();
    client::ensure_topic(&broker.address, MANY, n, 1)?;
    client::ensure_topic(&broker.address, HOT, 1, 1)?;
    let create_topic_s = started.elapsed().as_secs_f64();
    let metadata_ms = metadata_times(&broker.address, MANY, n, args.metadata_requests)?;
    let started = Instant::now();
    list_offsets_of_all(&broker.address, n)?;
    let first_use_s = started.elapsed().as_secs_f64();
    let created = footprint(&broker, &spec.data_dir)?;
    let write_one_each_s = write_one_each(&broker.address, MANY, n)?.as_secs_f64();
    let one_record_each = footprint(&broker, &spec.data_dir)?;
    let clean_stop_s = broker.stop()?.as_secs_f64();
    let (broker, clean_restart) = restart(spec, n)?;
    let opened = footprint(&broker, &spec.data_dir)?;
    eprintln!("waiting {} s for the idle release", args.idle_wait_seconds);
    std::thread::sleep(Duration::from_secs_f64(args.idle_wait_seconds));
    let idle = footprint(&broker, &spec.data_dir)?;
    let mut beside = latency(args, &broker.address, HOT, 1)?;
    let same_topic = latency(args, &broker.address, MANY, n)?;
    broker.kill9()?;
    let (broker, crash_restart) = restart(spec, n)?;
    beside.add(&latency(args, &broker.address, HOT, 1)?)?;
    let clean_stop_with_data_s = broker.stop()?.as_secs_f64();
    Ok(PartitionsResult {
        partitions: args.partitions,
        shards: args.shards,
        empty_broker,
        create_topic_s,
        metadata_ms,
        first_use_s,
        created,
        write_one_each_s,
        one_record_each,
        clean_stop_s,
        clean_restart,
        opened,
        idle,
        crash_restart,
        clean_stop_with_data_s,
        lone_ack: Percentiles::default(),
        beside_ack: Percentiles::of(&beside),
        same_topic_ack: Percentiles::of(&same_topic),
    })
}

/// Starts the broker on its existing data and times it to listening and to every partition
/// answering ListOffsets.
fn restart(spec: &BrokerSpec, many: i32) -> anyhow::Result<(Broker, Restart)> {
    let started = Instant::now();
    let broker = Broker::start(spec)?;
    let listening_s = started.elapsed().as_secs_f64();
    list_offsets_of_all(&broker.address, many)?;
    let all_partitions_s = started.elapsed().as_secs_f64();
    eprintln!("restart: listening after {listening_s:.2} s, every partition after {all_partitions_s:.2} s");
    Ok((
        broker,
        Restart {
            listening_s,
            all_partitions_s,
        },
    ))
}

/// One ListOffsets (latest) covering every partition of `many` and `hot`: answered once every
/// log is open.
fn list_offsets_of_all(brokers: &str, many: i32) -> anyhow::Result<()> {
    let consumer: BaseConsumer = client::consumer_config(brokers).create()?;
    let mut list = TopicPartitionList::new();
    for p in 0..many {
        list.add_partition_offset(MANY, p, Offset::End)?;
    }
    list.add_partition_offset(HOT, 0, Offset::End)?;
    let partitions = many + 1;
    let answered = consumer
        .offsets_for_times(list, ALL_PARTITIONS_TIMEOUT)
        .context("ListOffsets for every partition")?;
    let failed: Vec<_> = answered
        .elements()
        .iter()
        .filter_map(|e| e.error().err().map(|err| (e.partition(), err)))
        .take(3)
        .collect();
    if answered.count() != partitions as usize || !failed.is_empty() {
        bail!(
            "ListOffsets: {} answers, errors {failed:?}",
            answered.count()
        );
    }
    Ok(())
}

/// Milliseconds of `count` Metadata requests for `topic`, each listing all its partitions.
fn metadata_times(
    brokers: &str,
    topic: &str,
    partitions: i32,
    count: u32,
) -> anyhow::Result<Vec<f64>> {
    let consumer: BaseConsumer = client::consumer_config(brokers).create()?;
    let mut times = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let started = Instant::now();
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(30))?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
        let listed = metadata
            .topics()
            .first()
            .map_or(0, |t| t.partitions().len());
        if listed != partitions as usize {
            bail!("Metadata listed {listed} of {partitions} partitions");
        }
    }
    Ok(times)
}

/// Delivery failures of [`write_one_each`].
#[derive(Default)]
struct CountErrors(AtomicU64);

impl ClientContext for CountErrors {}

impl ProducerContext for CountErrors {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if result.is_err() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Writes one acks=all record to every partition; returns how long until all were acknowledged.
fn write_one_each(brokers: &str, topic: &str, partitions: i32) -> anyhow::Result<Duration> {
    let knobs = ProducerKnobs {
        acks: Acks::All,
        compression: Compression::None,
        linger_ms: 5,
        batch_bytes: 1_000_000,
    };
    let producer: ThreadedProducer<CountErrors> =
        client::producer_config(brokers, knobs).create_with_context(CountErrors::default())?;
    let value = [b'x'; RECORD_BYTES];
    let started = Instant::now();
    for p in 0..partitions {
        client::send_waiting(&producer, topic, p, &value)?;
    }
    producer
        .flush(Duration::from_secs(120))
        .context("waiting for the acks")?;
    let errors = producer.context().0.load(Ordering::Relaxed);
    if errors > 0 {
        bail!("{errors} of {partitions} records failed");
    }
    Ok(started.elapsed())
}

/// One open-loop acks=all latency run to partition 0 of `topic`; its produce→ack histogram.
fn latency(
    args: &PartitionsArgs,
    brokers: &str,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<Histogram<u64>> {
    let latency_args = LatencyArgs {
        target: Target {
            brokers: brokers.to_string(),
            topic: topic.to_string(),
            partitions,
            size: args.size,
            acks: Acks::All,
            replication_factor: 1,
        },
        rate: args.rate,
        seconds: args.seconds,
        warmup_seconds: 1.0,
        linger_ms: 0,
        drain_seconds: 15.0,
        hgrm: None,
        svg: None,
        partition: Some(0),
    };
    let result = crate::latency::run(&latency_args)?;
    crate::latency::print(&latency_args, &result)?;
    if result.errors > 0 || result.acked < result.sent {
        bail!(
            "{} of {} sends failed",
            result.sent - result.acked,
            result.sent
        );
    }
    Ok(result.ack)
}

/// RSS, open descriptors and allocated disk of `broker` now.
fn footprint(broker: &Broker, data_dir: &Path) -> anyhow::Result<Footprint> {
    let pid = broker.pid();
    let rss_kib = crate::proc_stat::rss_kib(pid)?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64;
    let disk_kib = allocated_bytes(data_dir)? / 1024;
    let footprint = Footprint {
        rss_kib,
        fds,
        disk_kib,
    };
    eprintln!("{footprint:?}");
    Ok(footprint)
}

/// Bytes of disk blocks allocated to `dir` and everything below it (what `du` counts).
fn allocated_bytes(dir: &Path) -> anyhow::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut pending: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            total += meta.blocks() * 512;
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    Ok(total)
}

/// Per-partition difference between two footprints, in KiB (or descriptors).
fn per_partition(after: u64, before: u64, partitions: i32) -> f64 {
    (after as f64 - before as f64) / f64::from(partitions)
}

/// A footprint as a table cell, each figure also per partition over the empty broker.
fn footprint_cell(f: &Footprint, empty: &Footprint, n: i32) -> String {
    format!(
        "RSS {:.1} MiB ({:+.1} KiB per partition), {} fds ({:+.2} per partition), disk {:.1} MiB ({:+.1} KiB per partition)",
        f.rss_kib as f64 / 1024.0,
        per_partition(f.rss_kib, empty.rss_kib, n),
        f.fds,
        per_partition(f.fds, empty.fds, n),
        f.disk_kib as f64 / 1024.0,
        per_partition(f.disk_kib, empty.disk_kib, n),
    )
}

/// A restart as a table cell.
fn restart_cell(x: &Restart) -> String {
    format!(
        "listening {:.2} s, every partition answering {:.2} s",
        x.listening_s, x.all_partitions_s
    )
}

/// The markdown report.
fn print(args: &PartitionsArgs, r: &PartitionsResult) {
    let n = r.partitions;
    let each = |f: &Footprint| footprint_cell(f, &r.empty_broker, n);
    let mut metadata = r.metadata_ms.clone();
    metadata.sort_by(f64::total_cmp);
    let pct = |p: f64| metadata[((metadata.len() as f64 * p) as usize).min(metadata.len() - 1)];
    println!("\n## {n} partitions on one broker, {} shards\n", r.shards);
    println!("| measure | figure |\n|---|---|");
    println!("| empty broker | {} |", each(&r.empty_broker));
    println!(
        "| CreateTopics, {n} partitions ({:.2} s) | {} |",
        r.create_topic_s,
        each(&r.empty_broker)
    );
    println!(
        "| Metadata of `{MANY}` ({} partitions), {} requests | p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms |",
        n - 1,
        metadata.len(),
        pct(0.5),
        pct(0.99),
        metadata[metadata.len() - 1]
    );
    println!("| first use (ListOffsets) of every partition: directory and empty log made ({:.2} s) | {} |", r.first_use_s, each(&r.created));
    println!(
        "| one {RECORD_BYTES}-byte record to every partition ({:.2} s) | {} |",
        r.write_one_each_s,
        each(&r.one_record_each)
    );
    println!(
        "| clean restart (SIGTERM took {:.2} s) | {} |",
        r.clean_stop_s,
        restart_cell(&r.clean_restart)
    );
    println!(
        "| all partitions open after the restart | {} |",
        each(&r.opened)
    );
    println!("| idle-released | {} |", each(&r.idle));
    println!(
        "| kill -9, restart (recovery) | {} |",
        restart_cell(&r.crash_restart)
    );
    println!(
        "| clean stop with a record in every partition | {:.2} s |",
        r.clean_stop_with_data_s
    );
    println!(
        "\nProduce acks=all, {} B at {} msg/s, {} s per round, open loop (µs):\n",
        args.size, args.rate, args.seconds
    );
    report::print_table(&[
        ("lone (2 rounds)", r.lone_ack),
        (&format!("beside {} (2 rounds)", n - 1), r.beside_ack),
        (&format!("{MANY} partition 0"), r.same_topic_ack),
    ]);
    println!(
        "\np99 beside {} idle partitions / lone: {:.2}",
        n - 1,
        r.beside_ack.p99_us as f64 / r.lone_ack.p99_us.max(1) as f64
    );
}
