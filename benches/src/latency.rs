//! `rill-bench latency`: an open-loop producer at a fixed rate and a consumer on the same topic.
//!
//! Each message carries its intended send time ([`crate::payload::Stamp`]); the delivery report
//! gives produce→ack latency and the consumer gives produce→consume latency, both measured from
//! the intended time, so a stall anywhere shows up in full (no coordinated omission).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use serde::Serialize;

use crate::cli::{Compression, LatencyArgs};
use crate::client::{self, ProducerKnobs};
use crate::payload::{self, Stamp};
use crate::report::{self, Percentiles};

/// What one latency run measured.
#[derive(Debug, Clone)]
pub struct LatencyResult {
    /// produce→ack, µs from intended send time.
    pub ack: Histogram<u64>,
    /// produce→consume, µs from intended send time.
    pub e2e: Histogram<u64>,
    pub sent: u64,
    pub acked: u64,
    pub errors: u64,
    pub consumed: u64,
    /// Seconds from the first intended send to the last send call.
    pub send_seconds: f64,
}

/// The JSON summary line.
#[derive(Debug, Serialize)]
struct Summary<'a> {
    #[serde(flatten)]
    ack: Percentiles,
    e2e_count: u64,
    e2e_p50_us: u64,
    e2e_p90_us: u64,
    e2e_p99_us: u64,
    e2e_p999_us: u64,
    e2e_p9999_us: u64,
    e2e_max_us: u64,
    sent: u64,
    acked: u64,
    errors: u64,
    rate: u64,
    achieved_rate: f64,
    size: usize,
    acks: &'a str,
    partitions: i32,
}

/// Delivery callbacks: record produce→ack latency from the intended time in the opaque.
struct AckContext {
    base: Instant,
    warmup_ns: u64,
    histogram: Mutex<Histogram<u64>>,
    acked: AtomicU64,
    errors: AtomicU64,
}

impl ClientContext for AckContext {}

impl ProducerContext for AckContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, intended_ns: usize) {
        let now_ns = self.base.elapsed().as_nanos() as u64;
        if result.is_err() {
            self.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.acked.fetch_add(1, Ordering::Relaxed);
        let intended_ns = intended_ns as u64;
        if intended_ns >= self.warmup_ns {
            let latency_us = now_ns.saturating_sub(intended_ns) / 1000;
            let mut histogram = self.histogram.lock().expect("histogram lock");
            histogram.saturating_record(latency_us.max(1));
        }
    }
}

/// Consumer-side shared state.
struct E2eShared {
    base: Instant,
    run_id: u64,
    warmup_ns: u64,
    stop: AtomicBool,
    consumed: AtomicU64,
}

/// Runs one latency measurement against `args.target`.
pub fn run(args: &LatencyArgs) -> anyhow::Result<LatencyResult> {
    let target = &args.target;
    client::ensure_target_topic(target)?;
    let consumer: BaseConsumer = client::consumer_config(&target.brokers).create()?;
    match args.partition {
        Some(partition) => {
            let (_, high) = consumer
                .fetch_watermarks(&target.topic, partition, Duration::from_secs(15))
                .with_context(|| format!("ListOffsets for {}-{partition}", target.topic))?;
            let mut list = rdkafka::TopicPartitionList::new();
            list.add_partition_offset(&target.topic, partition, rdkafka::Offset::Offset(high))?;
            consumer.assign(&list).context("assigning the partition")?;
        }
        None => {
            let start_offsets = client::end_offsets(&consumer, &target.topic, target.partitions)?;
            client::assign_from(&consumer, &target.topic, &start_offsets)?;
        }
    }

    let base = Instant::now();
    let warmup_ns = (args.warmup_seconds.max(0.0) * 1e9) as u64;
    let shared = Arc::new(E2eShared {
        base,
        run_id: payload::new_run_id(),
        warmup_ns,
        stop: AtomicBool::new(false),
        consumed: AtomicU64::new(0),
    });
    let consumer_thread = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || consume_loop(&consumer, &shared))
    };
    let context = AckContext {
        base,
        warmup_ns,
        histogram: Mutex::new(report::new_histogram()),
        acked: AtomicU64::new(0),
        errors: AtomicU64::new(0),
    };
    let knobs = ProducerKnobs {
        acks: target.acks,
        compression: Compression::None,
        linger_ms: args.linger_ms,
        batch_bytes: 1_000_000,
    };
    let producer: ThreadedProducer<AckContext> = client::producer_config(&target.brokers, knobs)
        .create_with_context(context)
        .context("creating the producer")?;
    let (sent, send_seconds) = send_paced(&producer, args, &shared)?;
    let drain = Duration::from_secs_f64(args.drain_seconds);
    producer.flush(drain).context("waiting for the last acks")?;
    wait_consumed(
        &shared,
        producer.context().acked.load(Ordering::Relaxed),
        drain,
    );
    shared.stop.store(true, Ordering::Relaxed);
    let e2e = consumer_thread.join().expect("consumer thread panicked");
    let context = producer.context();
    let ack = context.histogram.lock().expect("histogram lock").clone();
    Ok(LatencyResult {
        ack,
        e2e,
        sent,
        acked: context.acked.load(Ordering::Relaxed),
        errors: context.errors.load(Ordering::Relaxed),
        consumed: shared.consumed.load(Ordering::Relaxed),
        send_seconds,
    })
}

/// Sends `rate * seconds` messages on the open-loop schedule; returns (sent, seconds taken).
fn send_paced(
    producer: &ThreadedProducer<AckContext>,
    args: &LatencyArgs,
    shared: &E2eShared,
) -> anyhow::Result<(u64, f64)> {
    let total = (args.rate as f64 * args.seconds).round() as u64;
    let mut value = payload::template(args.target.size, shared.run_id);
    let mut pacer = crate::pacer::Pacer::new(shared.base, args.rate, total);
    let partitions = args.target.partitions.max(1) as u64;
    while !pacer.finished() {
        pacer.wait_next();
        for index in pacer.take_due(Instant::now()) {
            let intended_ns = pacer.intended(index).as_nanos() as u64;
            Stamp {
                run_id: shared.run_id,
                intended_ns,
            }
            .write(&mut value);
            let partition = args.partition.unwrap_or((index % partitions) as i32);
            send_one(producer, &args.target.topic, partition, &value, intended_ns)?;
        }
    }
    Ok((total, shared.base.elapsed().as_secs_f64()))
}

/// Enqueues one message, waiting while librdkafka's queue is full (the wait counts as latency).
pub(crate) fn send_one<C: ProducerContext<DeliveryOpaque = usize> + 'static>(
    producer: &ThreadedProducer<C>,
    topic: &str,
    partition: i32,
    value: &[u8],
    intended_ns: u64,
) -> anyhow::Result<()> {
    loop {
        let record = BaseRecord::<(), [u8], usize>::with_opaque_to(topic, intended_ns as usize)
            .partition(partition)
            .payload(value);
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                std::thread::sleep(Duration::from_micros(100));
            }
            Err((err, _)) => return Err(err).context("enqueueing a message"),
        }
    }
}

/// Polls until `stop`, recording produce→consume latency of this run's messages.
fn consume_loop(consumer: &BaseConsumer, shared: &E2eShared) -> Histogram<u64> {
    let mut histogram = report::new_histogram();
    while !shared.stop.load(Ordering::Relaxed) {
        let Some(Ok(message)) = consumer.poll(Duration::from_millis(50)) else {
            continue;
        };
        let now_ns = shared.base.elapsed().as_nanos() as u64;
        let Some(stamp) = message.payload().and_then(Stamp::read) else {
            continue;
        };
        if stamp.run_id != shared.run_id {
            continue;
        }
        shared.consumed.fetch_add(1, Ordering::Relaxed);
        if stamp.intended_ns >= shared.warmup_ns {
            histogram.saturating_record((now_ns.saturating_sub(stamp.intended_ns) / 1000).max(1));
        }
    }
    histogram
}

/// Waits until the consumer has seen `expected` messages or `timeout` passes.
fn wait_consumed(shared: &E2eShared, expected: u64, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while shared.consumed.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Prints the table, writes the optional files, and ends with the JSON summary line.
pub fn print(args: &LatencyArgs, result: &LatencyResult) -> anyhow::Result<()> {
    let ack = Percentiles::of(&result.ack);
    let e2e = Percentiles::of(&result.e2e);
    println!(
        "rate {} msg/s for {} s, {} B, acks={}, {} partition(s){}: sent {}, acked {}, errors {}, consumed {}",
        args.rate,
        args.seconds,
        args.target.size,
        args.target.acks.as_config(),
        args.target.partitions,
        args.partition.map_or(String::new(), |p| format!(", all to partition {p}")),
        result.sent,
        result.acked,
        result.errors,
        result.consumed
    );
    report::print_table(&[("produce→ack", ack), ("produce→consume", e2e)]);
    if let Some(path) = &args.hgrm {
        report::write_hgrm(path, &result.ack)?;
        report::write_hgrm(&report::sibling_path(path, "e2e"), &result.e2e)?;
    }
    if let Some(path) = &args.svg {
        let title = format!(
            "{} msg/s, {} B, acks={}",
            args.rate,
            args.target.size,
            args.target.acks.as_config()
        );
        crate::chart::latency_chart(
            path,
            &title,
            &[
                ("produce→ack", &result.ack),
                ("produce→consume", &result.e2e),
            ],
        )?;
    }
    println!(
        "{}",
        serde_json::to_string(&summary(args, result, ack, e2e))?
    );
    Ok(())
}

fn summary<'a>(
    args: &'a LatencyArgs,
    result: &LatencyResult,
    ack: Percentiles,
    e2e: Percentiles,
) -> Summary<'a> {
    Summary {
        ack,
        e2e_count: e2e.count,
        e2e_p50_us: e2e.p50_us,
        e2e_p90_us: e2e.p90_us,
        e2e_p99_us: e2e.p99_us,
        e2e_p999_us: e2e.p999_us,
        e2e_p9999_us: e2e.p9999_us,
        e2e_max_us: e2e.max_us,
        sent: result.sent,
        acked: result.acked,
        errors: result.errors,
        rate: args.rate,
        achieved_rate: result.sent as f64 / result.send_seconds.max(1e-9),
        size: args.target.size,
        acks: args.target.acks.as_config(),
        partitions: args.target.partitions,
    }
}
