//! `compare`'s mixed workload: what a catch-up consumer costs a producer.
//!
//! 1. A backlog of `backlog_mib` is produced as fast as the broker takes it (acks=1).
//! 2. The producer alone: open-loop at `rate` msg/s with acks=all (produce→ack, as `latency`).
//! 3. The same producer while a catch-up consumer reads the topic from its start at full speed
//!    (back to the start whenever it reaches the end, so it never turns into a tail reader).
//!
//! The figure is the producer's p99 in (3) against (2); the consumer's MB/s is reported beside.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{DefaultProducerContext, Producer, ThreadedProducer};

use crate::cli::{Acks, Compression, LatencyArgs, Target};
use crate::client::{self, ProducerKnobs};

/// What one mixed run measured.
#[derive(Debug, Clone)]
pub struct MixedResult {
    /// produce→ack µs of the producer alone.
    pub alone: Histogram<u64>,
    /// produce→ack µs of the producer while the catch-up consumer reads.
    pub with_reader: Histogram<u64>,
    /// The catch-up consumer's read rate during (3), MB/s (10^6 bytes of values).
    pub reader_mb_s: f64,
}

/// Runs the three phases against `target` (its `acks` is ignored: backlog acks=1, probe acks=all).
pub fn run(
    target: &Target,
    rate: u64,
    seconds: f64,
    backlog_mib: u64,
    reader_nice: Option<i32>,
) -> anyhow::Result<MixedResult> {
    client::ensure_target_topic(target)?;
    produce_backlog(target, backlog_mib << 20)?;
    let probe = LatencyArgs {
        target: Target {
            acks: Acks::All,
            ..target.clone()
        },
        rate,
        seconds,
        warmup_seconds: 1.0,
        linger_ms: 0,
        drain_seconds: 15.0,
        hgrm: None,
        svg: None,
        partition: None,
    };
    let alone = crate::latency::run(&probe)?.ack;
    let stop = Arc::new(AtomicBool::new(false));
    let read_bytes = Arc::new(AtomicU64::new(0));
    let reader = {
        let (target, stop, read_bytes) = (target.clone(), stop.clone(), read_bytes.clone());
        std::thread::spawn(move || {
            if let Some(nice) = reader_nice {
                set_thread_nice(nice)?;
            }
            catch_up_loop(&target, &stop, &read_bytes)
        })
    };
    let started = Instant::now();
    let with_reader = crate::latency::run(&probe);
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    reader.join().expect("reader thread panicked")?;
    Ok(MixedResult {
        alone,
        with_reader: with_reader?.ack,
        reader_mb_s: read_bytes.load(Ordering::Relaxed) as f64 / 1e6 / elapsed.max(1e-9),
    })
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

/// Reads every partition from its start until `stop`, starting over at the end; counts bytes.
fn catch_up_loop(target: &Target, stop: &AtomicBool, read_bytes: &AtomicU64) -> anyhow::Result<()> {
    let mut config = client::consumer_config(&target.brokers);
    config.set("enable.partition.eof", "true");
    let consumer: BaseConsumer = config.create().context("creating the catch-up consumer")?;
    let starts = vec![0i64; target.partitions.max(1) as usize];
    client::assign_from(&consumer, &target.topic, &starts)?;
    let mut at_end = 0usize;
    while !stop.load(Ordering::Relaxed) {
        match consumer.poll(Duration::from_millis(50)) {
            Some(Ok(message)) => {
                let len = message.payload().map_or(0, <[u8]>::len);
                read_bytes.fetch_add(len as u64, Ordering::Relaxed);
            }
            Some(Err(KafkaError::PartitionEOF(_))) => {
                at_end += 1;
                if at_end == starts.len() {
                    client::assign_from(&consumer, &target.topic, &starts)?;
                    at_end = 0;
                }
            }
            Some(Err(_)) | None => {}
        }
    }
    Ok(())
}
