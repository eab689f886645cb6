//! `compare`'s mixed workload: what a catch-up consumer costs a producer.
//!
//! 1. A backlog of `backlog_mib` is produced as fast as the broker takes it (acks=1).
//! 2. One open-loop producer at `rate` msg/s with acks=all (produce→ack, as `latency`) runs
//!    through alternating phases on the same broker: *alone* (even phases) and *beside* a
//!    catch-up consumer reading the topic from its start at full speed (odd phases; back to the
//!    start whenever it reaches the end, so it never turns into a tail reader). The consumer is
//!    paused between its phases, not restarted, and so is nothing else.
//! 3. Through the same phases a probe times the device's own durable 4 KiB appends
//!    (O_DIRECT | O_DSYNC, paced), and, for Rill, the broker's `/metrics` are read at each
//!    phase's edges: device stalls and broker stalls can be told apart per condition.
//!
//! Acks are sorted into phases by their intended send time; the first `settle` of every phase
//! is dropped (the reader starting or stopping). The figure is the producer's p99 beside the
//! reader against alone, both from histograms merged over every phase of their condition; the
//! per-phase p99s show how much one phase alone would have moved it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{
    DefaultProducerContext, DeliveryResult, Producer, ProducerContext, ThreadedProducer,
};
use rdkafka::ClientContext;

use crate::cli::{Acks, Compression, Target};
use crate::client::{self, ProducerKnobs};
use crate::machine::SyncAppender;
use crate::report;

/// The start of the run, before the first phase, whose acks are dropped: the client connects
/// and the broker settles after the backlog (else the first alone phase carries that).
const WARMUP: Duration = Duration::from_secs(3);
/// 4 KiB blocks of the device probe's file (8 MiB), written over in a cycle.
const PROBE_BLOCKS: u64 = 2048;

/// How one mixed run is laid out and what it reads.
#[derive(Debug, Clone)]
pub struct MixedOptions {
    /// The producer's rate, msg/s (acks=all).
    pub rate: u64,
    /// Length of each phase.
    pub phase: Duration,
    /// Alone/beside pairs: the run has `2 * pairs` phases, alone first.
    pub pairs: u32,
    /// Dropped at the start of every phase.
    pub settle: Duration,
    /// MiB produced before the phases, read over and over by the catch-up consumer.
    pub backlog_mib: u64,
    /// Nice value of the catch-up consumer's client threads, if any.
    pub reader_nice: Option<i32>,
    /// CPUs the catch-up consumer's client threads run on (all, if empty): kept off the
    /// broker's shard cores, as a client on another machine would be.
    pub reader_cpus: Vec<usize>,
    /// Durable 4 KiB appends per second of the device probe; 0 turns it off.
    pub probe_rate: u64,
    /// Where the probe's scratch file goes (the broker's disk).
    pub probe_dir: PathBuf,
    /// The broker's admin listener, read for `/metrics` at each phase's edges.
    pub metrics_address: Option<String>,
    /// The broker's pid: its shard threads' CPU and run-queue time are read at the same edges.
    pub broker_pid: Option<u32>,
}

/// Which of the two conditions a phase measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    Alone,
    Beside,
}

/// The phase plan: after [`WARMUP`], `2 * pairs` phases of `phase` each, alone first.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub phase: Duration,
    pub phases: u32,
    pub settle: Duration,
}

impl Schedule {
    /// From the warm-up to the end of the last phase.
    pub fn total(&self) -> Duration {
        WARMUP + self.phase * self.phases
    }

    /// The phase that `at` (since the run's start) falls in, if any.
    pub fn phase_at(&self, at: Duration) -> Option<u32> {
        let into = at.checked_sub(WARMUP)?;
        let index = (into.as_nanos() / self.phase.as_nanos().max(1)) as u32;
        (index < self.phases).then_some(index)
    }

    /// The phase `at` falls in when it is measured (past that phase's settling time).
    pub fn measured_phase(&self, at: Duration) -> Option<u32> {
        let index = self.phase_at(at)?;
        (at >= self.start_of(index) + self.settle).then_some(index)
    }

    /// When phase `index` starts, since the run's start.
    pub fn start_of(&self, index: u32) -> Duration {
        WARMUP + self.phase * index
    }

    /// What phase `index` measures.
    pub fn condition(index: u32) -> Condition {
        if index.is_multiple_of(2) {
            Condition::Alone
        } else {
            Condition::Beside
        }
    }
}

/// What one mixed run measured.
#[derive(Debug, Clone)]
pub struct MixedResult {
    /// produce→ack µs of the producer alone, merged over the alone phases.
    pub alone: Histogram<u64>,
    /// produce→ack µs of the producer while the catch-up consumer reads, merged likewise.
    pub with_reader: Histogram<u64>,
    /// The catch-up consumer's read rate during its phases, MB/s (10^6 bytes of values).
    pub reader_mb_s: f64,
    /// The producer's p99 µs of each alone phase, and of each beside phase, in run order.
    pub alone_phase_p99_us: Vec<u64>,
    pub beside_phase_p99_us: Vec<u64>,
    /// The device probe's durable 4 KiB append µs, per condition (empty when it is off).
    pub device_alone: Histogram<u64>,
    pub device_beside: Histogram<u64>,
    /// The broker's `/metrics` series summed over each condition's measured windows
    /// (line key → increase), empty when the broker has no admin listener.
    pub broker_alone: BTreeMap<String, f64>,
    pub broker_beside: BTreeMap<String, f64>,
}

/// Runs the backlog and the alternating phases against `target` (its `acks` is ignored:
/// backlog acks=1, probe acks=all).
pub fn run(target: &Target, options: &MixedOptions) -> anyhow::Result<MixedResult> {
    anyhow::ensure!(
        options.pairs > 0,
        "the mixed workload needs at least one pair"
    );
    anyhow::ensure!(
        options.settle < options.phase,
        "the settling time must be shorter than a phase"
    );
    client::ensure_target_topic(target)?;
    produce_backlog(target, options.backlog_mib << 20)?;
    let backlog_ends = backlog_ends(target)?;
    let schedule = Schedule {
        phase: options.phase,
        phases: 2 * options.pairs,
        settle: options.settle,
    };
    let phases = schedule.phases as usize;
    let done = Arc::new(AtomicBool::new(false));
    let read_bytes = Arc::new(AtomicU64::new(0));
    let base = Instant::now();

    let reader = spawn_reader(
        target,
        options,
        backlog_ends,
        schedule,
        base,
        &done,
        &read_bytes,
    );
    let probe = (options.probe_rate > 0).then(|| {
        let (path, rate, done) = (
            options.probe_dir.join(".rill-bench-mixed-probe.tmp"),
            options.probe_rate,
            done.clone(),
        );
        std::thread::spawn(move || {
            let result = device_probe(&path, rate, schedule, base, &done);
            let _ = std::fs::remove_file(&path);
            result
        })
    });
    let scraper = options.metrics_address.clone().map(|address| {
        let (done, pid) = (done.clone(), options.broker_pid);
        std::thread::spawn(move || scrape_phases(&address, pid, schedule, base, &done))
    });

    let acks = produce_phases(target, options.rate, schedule, base);
    done.store(true, Ordering::Relaxed);
    let reader = reader.join().expect("reader thread panicked");
    let device = match probe {
        Some(probe) => probe.join().expect("probe thread panicked")?,
        None => vec![report::new_histogram(); phases],
    };
    let broker = match scraper {
        Some(scraper) => scraper.join().expect("scraper thread panicked")?,
        None => vec![BTreeMap::new(); phases],
    };
    let acks = acks?;
    reader?;
    let beside_seconds = (options.phase - options.settle).as_secs_f64() * options.pairs as f64;
    let reader_mb_s = read_bytes.load(Ordering::Relaxed) as f64 / 1e6 / beside_seconds;
    merge_phases(&acks, &device, &broker, reader_mb_s)
}

/// Starts [`catch_up_loop`] on a thread of its own, placed as `options` ask (nice, CPUs)
/// before the consumer exists, so librdkafka's threads inherit that.
fn spawn_reader(
    target: &Target,
    options: &MixedOptions,
    ends: Vec<i64>,
    schedule: Schedule,
    base: Instant,
    done: &Arc<AtomicBool>,
    read_bytes: &Arc<AtomicU64>,
) -> std::thread::JoinHandle<anyhow::Result<()>> {
    let (target, done, read_bytes, nice, cpus) = (
        target.clone(),
        done.clone(),
        read_bytes.clone(),
        options.reader_nice,
        options.reader_cpus.clone(),
    );
    std::thread::spawn(move || {
        if let Some(nice) = nice {
            set_thread_nice(nice)?;
        }
        if !cpus.is_empty() {
            set_thread_cpus(&cpus)?;
        }
        catch_up_loop(&target, &ends, schedule, base, &done, &read_bytes)
    })
}

/// Folds per-phase measurements into per-condition ones.
fn merge_phases(
    acks: &[Histogram<u64>],
    device: &[Histogram<u64>],
    broker: &[BTreeMap<String, f64>],
    reader_mb_s: f64,
) -> anyhow::Result<MixedResult> {
    let mut result = MixedResult {
        alone: report::new_histogram(),
        with_reader: report::new_histogram(),
        reader_mb_s,
        alone_phase_p99_us: Vec::new(),
        beside_phase_p99_us: Vec::new(),
        device_alone: report::new_histogram(),
        device_beside: report::new_histogram(),
        broker_alone: BTreeMap::new(),
        broker_beside: BTreeMap::new(),
    };
    for (index, ((acks, device), broker)) in acks.iter().zip(device).zip(broker).enumerate() {
        let (histogram, p99s, device_into, broker_into) = match Schedule::condition(index as u32) {
            Condition::Alone => (
                &mut result.alone,
                &mut result.alone_phase_p99_us,
                &mut result.device_alone,
                &mut result.broker_alone,
            ),
            Condition::Beside => (
                &mut result.with_reader,
                &mut result.beside_phase_p99_us,
                &mut result.device_beside,
                &mut result.broker_beside,
            ),
        };
        histogram.add(acks).context("merging phase histograms")?;
        p99s.push(acks.value_at_quantile(0.99));
        device_into
            .add(device)
            .context("merging probe histograms")?;
        add_series(broker_into, broker);
    }
    Ok(result)
}

/// Adds each series of `from` into `into`.
pub fn add_series(into: &mut BTreeMap<String, f64>, from: &BTreeMap<String, f64>) {
    for (key, value) in from {
        *into.entry(key.clone()).or_default() += value;
    }
}

/// Produces `bytes` of `target.size` messages as fast as the broker takes them.
fn produce_backlog(target: &Target, bytes: u64) -> anyhow::Result<()> {
    let knobs = ProducerKnobs {
        acks: Acks::Leader,
        compression: Compression::None,
        linger_ms: 5,
        batch_bytes: 1_000_000,
    };
    let producer: ThreadedProducer<DefaultProducerContext> =
        client::producer_config(&target.brokers, knobs)
            .create()
            .context("creating the backlog producer")?;
    let value = vec![b'b'; target.size];
    let count = bytes / target.size.max(1) as u64;
    let partitions = target.partitions.max(1) as u64;
    for i in 0..count {
        let partition = (i % partitions) as i32;
        client::send_waiting(&producer, &target.topic, partition, &value)
            .context("producing the backlog")?;
    }
    producer
        .flush(Duration::from_secs(120))
        .context("waiting for the backlog's acks")
}

/// Each partition's end offset after the backlog: the catch-up consumer starts over from the
/// start there, so it never turns into a tail reader of the producer's messages.
fn backlog_ends(target: &Target) -> anyhow::Result<Vec<i64>> {
    let consumer: BaseConsumer = client::consumer_config(&target.brokers)
        .create()
        .context("creating a consumer to read the backlog's end")?;
    let ends = client::end_offsets(&consumer, &target.topic, target.partitions.max(1))?;
    anyhow::ensure!(
        ends.iter().all(|&end| end > 0),
        "a partition has no backlog: {ends:?}"
    );
    Ok(ends)
}

/// Delivery callbacks: produce→ack µs from the intended time, into the phase it was sent in.
struct PhaseAcks {
    base: Instant,
    schedule: Schedule,
    phases: Mutex<Vec<Histogram<u64>>>,
    errors: AtomicU64,
}

impl ClientContext for PhaseAcks {}

impl ProducerContext for PhaseAcks {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, intended_ns: usize) {
        let now_ns = self.base.elapsed().as_nanos() as u64;
        if result.is_err() {
            self.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let intended_ns = intended_ns as u64;
        if let Some(index) = self
            .schedule
            .measured_phase(Duration::from_nanos(intended_ns))
        {
            let latency_us = now_ns.saturating_sub(intended_ns) / 1000;
            let mut phases = self.phases.lock().expect("phase histograms lock");
            phases[index as usize].saturating_record(latency_us.max(1));
        }
    }
}

/// The open-loop acks=all producer through every phase; one ack histogram per phase.
fn produce_phases(
    target: &Target,
    rate: u64,
    schedule: Schedule,
    base: Instant,
) -> anyhow::Result<Vec<Histogram<u64>>> {
    let context = PhaseAcks {
        base,
        schedule,
        phases: Mutex::new(vec![report::new_histogram(); schedule.phases as usize]),
        errors: AtomicU64::new(0),
    };
    let knobs = ProducerKnobs {
        acks: Acks::All,
        compression: Compression::None,
        linger_ms: 0,
        batch_bytes: 1_000_000,
    };
    let producer: ThreadedProducer<PhaseAcks> = client::producer_config(&target.brokers, knobs)
        .create_with_context(context)
        .context("creating the producer")?;
    let total = (rate as f64 * schedule.total().as_secs_f64()).round() as u64;
    let value = crate::payload::template(target.size, crate::payload::new_run_id());
    let mut pacer = crate::pacer::Pacer::new(base, rate, total);
    let partitions = target.partitions.max(1) as u64;
    while !pacer.finished() {
        pacer.wait_next();
        for index in pacer.take_due(Instant::now()) {
            let intended_ns = pacer.intended(index).as_nanos() as u64;
            let partition = (index % partitions) as i32;
            crate::latency::send_one(&producer, &target.topic, partition, &value, intended_ns)?;
        }
    }
    producer
        .flush(Duration::from_secs(30))
        .context("waiting for the last acks")?;
    let context = producer.context();
    let errors = context.errors.load(Ordering::Relaxed);
    anyhow::ensure!(errors == 0, "{errors} produce requests failed");
    let phases = context
        .phases
        .lock()
        .expect("phase histograms lock")
        .clone();
    Ok(phases)
}

/// Sets the calling thread's nice value; threads it starts afterwards (the consumer's
/// librdkafka threads) inherit it.
fn set_thread_nice(nice: i32) -> anyhow::Result<()> {
    // SAFETY: setpriority(2) with PRIO_PROCESS and who = 0 changes only the calling thread's
    // nice value on Linux; no memory is passed.
    let result = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    anyhow::ensure!(
        result == 0,
        "setpriority({nice}): {}",
        std::io::Error::last_os_error()
    );
    Ok(())
}

/// Confines the calling thread to `cpus`; threads it starts afterwards (the consumer's
/// librdkafka threads) inherit the mask.
fn set_thread_cpus(cpus: &[usize]) -> anyhow::Result<()> {
    // SAFETY: cpu_set_t is plain bits, zeroed is the empty set; CPU_SET is given indices
    // checked against CPU_SETSIZE, and sched_setaffinity(0, ..) reads the set we own and
    // changes only the calling thread's mask.
    let result = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            anyhow::ensure!(
                cpu < libc::CPU_SETSIZE as usize,
                "CPU {cpu} is past CPU_SETSIZE"
            );
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    anyhow::ensure!(
        result == 0,
        "sched_setaffinity({cpus:?}): {}",
        std::io::Error::last_os_error()
    );
    Ok(())
}

/// A set of CPUs, sorted, no duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Parses a CPU list as `taskset -c` takes it: `1`, `1,3`, `2-5`.
pub fn parse_cpu_list(text: &str) -> Result<CpuList, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim) {
        let number = |n: &str| {
            n.trim()
                .parse::<usize>()
                .map_err(|_| format!("{n:?} is not a CPU number (CPU list e.g. 1 or 1,3 or 2-5)"))
        };
        match part.split_once('-') {
            Some((low, high)) => {
                let (low, high) = (number(low)?, number(high)?);
                if low > high {
                    return Err(format!("CPU range {part:?} runs backwards"));
                }
                cpus.extend(low..=high);
            }
            None => cpus.push(number(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(CpuList(cpus))
}

/// Messages taken from the consumer's queue per call (librdkafka's batch consume).
const READ_BATCH: usize = 4096;

/// Reads every partition's backlog (up to `ends`) from its start during the beside phases,
/// paused in between (its position kept), starting over once every partition reached its
/// backlog's end; counts the bytes read in measured windows.
///
/// It reads as fast as librdkafka fetches: messages are taken off the consumer's queue
/// [`READ_BATCH`] at a time (`rd_kafka_consume_batch_queue`, as `rdkafka_performance -C` takes
/// them) and only their lengths and offsets are looked at, so the client's own per-message work
/// does not bound the read (the crate's `poll`, one event per message, read 30–80 MB/s here).
/// It starts over at the backlog's end, not at a partition-end event: with the producer
/// appending, a fetch at the end always finds a new message, so no such event ever comes and
/// the reader would turn into a tail reader of the producer's messages.
fn catch_up_loop(
    target: &Target,
    ends: &[i64],
    schedule: Schedule,
    base: Instant,
    done: &AtomicBool,
    read_bytes: &AtomicU64,
) -> anyhow::Result<()> {
    let consumer: BaseConsumer = client::consumer_config(&target.brokers)
        .create()
        .context("creating the catch-up consumer")?;
    let starts = vec![0i64; ends.len()];
    client::assign_from(&consumer, &target.topic, &starts)?;
    let assignment = consumer.assignment().context("reading the assignment")?;
    consumer
        .pause(&assignment)
        .context("pausing the catch-up consumer")?;
    let queue = ConsumerQueue::of(&consumer);
    let mut reading = false;
    let mut at_end = vec![false; ends.len()];
    while !done.load(Ordering::Relaxed) {
        let at = base.elapsed();
        let want = schedule
            .phase_at(at)
            .is_some_and(|index| Schedule::condition(index) == Condition::Beside);
        if want != reading {
            let assignment = consumer.assignment().context("reading the assignment")?;
            if want {
                consumer
                    .resume(&assignment)
                    .context("resuming the reader")?;
            } else {
                consumer.pause(&assignment).context("pausing the reader")?;
            }
            reading = want;
        }
        let bytes = queue.take(Duration::from_millis(20), ends, &mut at_end);
        if reading && schedule.measured_phase(at).is_some() {
            read_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        if at_end.iter().all(|&end| end) {
            client::assign_from(&consumer, &target.topic, &starts)?;
            if !reading {
                let assignment = consumer.assignment().context("reading the assignment")?;
                consumer.pause(&assignment).context("pausing the reader")?;
            }
            at_end.fill(false);
        }
    }
    drop(queue);
    Ok(())
}

/// The consumer queue of a `BaseConsumer` (its main queue is forwarded there), read in batches.
/// Must be dropped before the consumer.
struct ConsumerQueue(*mut rdkafka::bindings::rd_kafka_queue_t);

impl ConsumerQueue {
    fn of(consumer: &BaseConsumer) -> Self {
        // SAFETY: the client pointer is valid while `consumer` lives, and the returned queue
        // handle holds its own reference, released in `drop` (before the consumer).
        let queue = unsafe {
            rdkafka::bindings::rd_kafka_queue_get_consumer(consumer.client().native_ptr())
        };
        assert!(!queue.is_null(), "a BaseConsumer has a consumer queue");
        Self(queue)
    }

    /// Takes up to [`READ_BATCH`] messages, waiting at most `timeout` for the first, and
    /// destroys them: the bytes of the values below each partition's backlog end (`ends`),
    /// marking in `at_end` the partitions whose last backlog message came.
    fn take(&self, timeout: Duration, ends: &[i64], at_end: &mut [bool]) -> u64 {
        use rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR;
        let mut messages = [std::ptr::null_mut(); READ_BATCH];
        // SAFETY: `messages` has room for READ_BATCH pointers; librdkafka fills the first
        // `count` of them with messages we own, each destroyed below exactly once.
        let count = unsafe {
            rdkafka::bindings::rd_kafka_consume_batch_queue(
                self.0,
                timeout.as_millis() as i32,
                messages.as_mut_ptr(),
                READ_BATCH,
            )
        };
        let mut bytes = 0;
        for &message in &messages[..count.max(0) as usize] {
            // SAFETY: a message librdkafka handed us: read, then destroyed once.
            let (err, partition, offset, len) = unsafe {
                let m = &*message;
                let fields = (m.err, m.partition, m.offset, m.len);
                rdkafka::bindings::rd_kafka_message_destroy(message);
                fields
            };
            let Some(&end) = usize::try_from(partition).ok().and_then(|p| ends.get(p)) else {
                continue;
            };
            if err != RD_KAFKA_RESP_ERR_NO_ERROR || offset >= end {
                continue;
            }
            bytes += len as u64;
            if offset + 1 == end {
                at_end[partition as usize] = true;
            }
        }
        bytes
    }
}

impl Drop for ConsumerQueue {
    fn drop(&mut self) {
        // SAFETY: the handle from rd_kafka_queue_get_consumer, released once.
        unsafe { rdkafka::bindings::rd_kafka_queue_destroy(self.0) };
    }
}

/// Paced durable 4 KiB appends to a file of its own beside the broker's data, timed into the
/// phase each started in.
fn device_probe(
    path: &std::path::Path,
    rate: u64,
    schedule: Schedule,
    base: Instant,
    done: &AtomicBool,
) -> anyhow::Result<Vec<Histogram<u64>>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut appender = SyncAppender::new(path, PROBE_BLOCKS)?;
    let mut phases = vec![report::new_histogram(); schedule.phases as usize];
    let total = (rate as f64 * schedule.total().as_secs_f64()).round() as u64;
    let mut pacer = crate::pacer::Pacer::new(base, rate, total);
    while !pacer.finished() && !done.load(Ordering::Relaxed) {
        pacer.wait_next();
        // One write per due slot; slots missed while a write stalled are skipped, not queued.
        if pacer.take_due(Instant::now()).is_empty() {
            continue;
        }
        let at = base.elapsed();
        let took = appender.append()?;
        if let Some(index) = schedule.measured_phase(at) {
            phases[index as usize].saturating_record((took.as_micros() as u64).max(1));
        }
    }
    Ok(phases)
}

/// Reads the broker's `/metrics` at the start (after settling) and end of every phase; per
/// phase, the increase of each series line.
fn scrape_phases(
    address: &str,
    pid: Option<u32>,
    schedule: Schedule,
    base: Instant,
    done: &AtomicBool,
) -> anyhow::Result<Vec<BTreeMap<String, f64>>> {
    let snapshot = || -> anyhow::Result<BTreeMap<String, f64>> {
        let mut samples = scrape(address)?;
        if let Some(pid) = pid {
            samples.extend(shard_schedstat(pid));
        }
        samples.insert(WINDOW_KEY.to_string(), base.elapsed().as_secs_f64());
        Ok(samples)
    };
    let mut phases = Vec::new();
    for index in 0..schedule.phases {
        let start = schedule.start_of(index);
        sleep_until(base, start + schedule.settle, done);
        let before = snapshot()?;
        sleep_until(base, start + schedule.phase, done);
        let after = snapshot()?;
        phases.push(increase(&before, &after));
    }
    Ok(phases)
}

/// The series key of a window's length in seconds (summed like the others).
const WINDOW_KEY: &str = "window_seconds";
/// The series keys of the shard threads' time on a CPU and waiting for one, in seconds.
const SHARD_RUN_KEY: &str = "shard_threads_run_seconds";
const SHARD_WAIT_KEY: &str = "shard_threads_runqueue_seconds";

/// The broker's shard threads (`rill-shard-*`): seconds on a CPU and seconds runnable but
/// waiting for one, from `/proc/<pid>/task/*/schedstat` (empty when it cannot be read).
fn shard_schedstat(pid: u32) -> Vec<(String, f64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let (mut run_ns, mut wait_ns) = (0u64, 0u64);
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !comm.starts_with("rill-shard") {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        let mut fields = stat
            .split_whitespace()
            .map(|f| f.parse::<u64>().unwrap_or(0));
        run_ns += fields.next().unwrap_or(0);
        wait_ns += fields.next().unwrap_or(0);
    }
    vec![
        (SHARD_RUN_KEY.to_string(), run_ns as f64 / 1e9),
        (SHARD_WAIT_KEY.to_string(), wait_ns as f64 / 1e9),
    ]
}

/// Sleeps until `base + at`, or until `done` (then returns at once).
fn sleep_until(base: Instant, at: Duration, done: &AtomicBool) {
    while !done.load(Ordering::Relaxed) {
        let now = base.elapsed();
        if now >= at {
            return;
        }
        std::thread::sleep((at - now).min(Duration::from_millis(50)));
    }
}

/// The broker series this workload reports: request, durability and flush latency buckets.
const SERIES_PREFIXES: [&str; 4] = [
    "rill_request_duration_seconds_",
    "rill_produce_durable_seconds_",
    "rill_shard_stage_seconds_",
    "rill_log_flush_duration_seconds_",
];

/// One `GET /metrics`: every sample line of [`SERIES_PREFIXES`], key → value.
fn scrape(address: &str) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut stream =
        TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .context("reading /metrics")?;
    Ok(parse_samples(&text))
}

/// Sample lines (`name{labels} value`) of the reported series.
fn parse_samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| SERIES_PREFIXES.iter().any(|p| line.starts_with(p)))
        .filter_map(|line| {
            let (key, value) = line.rsplit_once(' ')?;
            Some((key.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// `after - before` per key (a key new in `after` counts from zero).
fn increase(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(key, value)| (key.clone(), value - before.get(key).copied().unwrap_or(0.0)))
        .collect()
}

/// A broker latency series summed over a condition: how many, and the share above each bound.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SeriesShares {
    pub count: f64,
    /// Mean in µs (from the series' sum), when the sum was read.
    pub mean_us: Option<f64>,
    /// (bound in seconds as the metric writes it, share of the count above it).
    pub over: Vec<(String, f64)>,
}

/// The bounds [`shares`] reports.
const SHARE_BOUNDS: [&str; 4] = ["0.0005", "0.001", "0.0025", "0.005"];

/// How many samples `name` (with `labels`, e.g. `api="Produce"`, or empty) counted in
/// `series`, and the share above each of [`SHARE_BOUNDS`]; `None` when it counted none.
pub fn shares(series: &BTreeMap<String, f64>, name: &str, labels: &str) -> Option<SeriesShares> {
    let count_key = if labels.is_empty() {
        format!("{name}_count")
    } else {
        format!("{name}_count{{{labels}}}")
    };
    let count = *series.get(&count_key)?;
    if count <= 0.0 {
        return None;
    }
    let sum_key = if labels.is_empty() {
        format!("{name}_sum")
    } else {
        format!("{name}_sum{{{labels}}}")
    };
    let mean_us = series.get(&sum_key).map(|sum| 1e6 * sum / count);
    let comma = if labels.is_empty() { "" } else { "," };
    let over = SHARE_BOUNDS
        .iter()
        .filter_map(|bound| {
            let key = format!("{name}_bucket{{{labels}{comma}le=\"{bound}\"}}");
            let within = series.get(&key)?;
            Some((bound.to_string(), (count - within) / count))
        })
        .collect();
    Some(SeriesShares {
        count,
        mean_us,
        over,
    })
}

/// The stages of `rill_shard_stage_seconds` reported, in a Produce's order.
const STAGES: [&str; 7] = [
    "queued",
    "planned",
    "mailbox",
    "appending",
    "actor_reads",
    "written",
    "fetch_send_call",
];

/// The broker series of one condition as one line: Produce, durable, flush and Fetch
/// latency, the shard's stages, and its threads' CPU and run-queue time.
pub fn broker_line(series: &BTreeMap<String, f64>) -> String {
    let picks = [
        (
            "produce",
            "rill_request_duration_seconds",
            "api=\"Produce\"",
        ),
        ("durable", "rill_produce_durable_seconds", ""),
        ("flush", "rill_log_flush_duration_seconds", ""),
        ("fetch", "rill_request_duration_seconds", "api=\"Fetch\""),
    ];
    let mut parts = Vec::new();
    for (label, name, labels) in picks {
        let Some(s) = shares(series, name, labels) else {
            continue;
        };
        let over: Vec<String> = s
            .over
            .iter()
            .map(|(bound, share)| {
                let ms = bound.parse::<f64>().unwrap_or(0.0) * 1e3;
                format!(">{ms}ms {:.2}%", 100.0 * share)
            })
            .collect();
        let mean = s
            .mean_us
            .map_or(String::new(), |m| format!(" mean {m:.0}us"));
        parts.push(format!("{label} n={:.0}{mean} {}", s.count, over.join(" ")));
    }
    let stages: Vec<String> = STAGES
        .into_iter()
        .filter_map(|stage| {
            let s = shares(
                series,
                "rill_shard_stage_seconds",
                &format!("stage=\"{stage}\""),
            )?;
            let over_1ms = s.over.iter().find(|(b, _)| b == "0.001")?.1;
            Some(format!(
                "{stage} n={:.0} mean {:.0}us >1ms {:.2}%",
                s.count,
                s.mean_us?,
                100.0 * over_1ms
            ))
        })
        .collect();
    if !stages.is_empty() {
        parts.push(format!("stages: {}", stages.join(", ")));
    }
    if let (Some(window), Some(run), Some(wait)) = (
        series.get(WINDOW_KEY),
        series.get(SHARD_RUN_KEY),
        series.get(SHARD_WAIT_KEY),
    ) {
        parts.push(format!(
            "shard threads: on CPU {:.1}%, runnable waiting {:.1}%",
            100.0 * run / window,
            100.0 * wait / window
        ));
    }
    parts.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> Schedule {
        Schedule {
            phase: Duration::from_secs(5),
            phases: 4,
            settle: Duration::from_millis(500),
        }
    }

    #[test]
    fn cpu_lists_parse_as_taskset_takes_them() {
        assert_eq!(parse_cpu_list("1"), Ok(CpuList(vec![1])));
        assert_eq!(parse_cpu_list("3,1-2,1"), Ok(CpuList(vec![1, 2, 3])));
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("2-1").is_err());
        assert!(parse_cpu_list("a").is_err());
    }

    #[test]
    fn phases_alternate_alone_first_after_the_warmup() {
        let s = schedule();
        assert_eq!(s.phase_at(Duration::from_millis(2_999)), None);
        assert_eq!(s.phase_at(Duration::from_secs(3)), Some(0));
        assert_eq!(s.phase_at(Duration::from_millis(7_999)), Some(0));
        assert_eq!(s.phase_at(Duration::from_secs(8)), Some(1));
        assert_eq!(s.phase_at(Duration::from_millis(22_999)), Some(3));
        assert_eq!(s.phase_at(Duration::from_secs(23)), None);
        assert_eq!(s.total(), Duration::from_secs(23));
        assert_eq!(Schedule::condition(0), Condition::Alone);
        assert_eq!(Schedule::condition(3), Condition::Beside);
    }

    #[test]
    fn the_settling_time_of_each_phase_is_not_measured() {
        let s = schedule();
        assert_eq!(s.measured_phase(Duration::from_millis(8_499)), None);
        assert_eq!(s.measured_phase(Duration::from_millis(8_500)), Some(1));
        assert_eq!(s.measured_phase(Duration::from_millis(3_200)), None);
        assert_eq!(s.measured_phase(Duration::from_millis(3_500)), Some(0));
    }

    #[test]
    fn shares_come_from_bucket_and_count_increases() {
        let text = "# HELP x\n\
            rill_request_duration_seconds_bucket{api=\"Produce\",le=\"0.0005\"} 90\n\
            rill_request_duration_seconds_bucket{api=\"Produce\",le=\"0.001\"} 95\n\
            rill_request_duration_seconds_count{api=\"Produce\"} 100\n\
            rill_log_flush_duration_seconds_bucket{le=\"0.001\"} 40\n\
            rill_log_flush_duration_seconds_count 50\n\
            rill_requests_total{api=\"Produce\"} 100\n";
        let before = parse_samples("rill_log_flush_duration_seconds_count 10\n");
        let after = parse_samples(text);
        assert!(!after.contains_key("rill_requests_total{api=\"Produce\"}"));
        let series = increase(&before, &after);
        let produce = shares(&series, "rill_request_duration_seconds", "api=\"Produce\"")
            .expect("produce counted");
        assert_eq!(produce.count, 100.0);
        assert_eq!(
            produce.over,
            vec![("0.0005".to_string(), 0.1), ("0.001".to_string(), 0.05)]
        );
        let flush = shares(&series, "rill_log_flush_duration_seconds", "").expect("flushes");
        assert_eq!(flush.count, 40.0);
        assert_eq!(flush.over, vec![("0.001".to_string(), 0.0)]);
        assert!(shares(&series, "rill_produce_durable_seconds", "").is_none());
        assert!(broker_line(&series).starts_with("produce n=100 >0.5ms 10.00%"));
    }
}
