//! `rill-bench throughput`: produce as fast as the broker accepts for a while, then consume all of
//! it back; msg/s, MB/s (10^6 bytes of message values) and broker CPU seconds per GB (10^9 bytes).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use serde::Serialize;

use crate::cli::{ProducerMode, ThroughputArgs};
use crate::client::{self, ProducerKnobs};
use crate::payload;
use crate::proc_stat::CpuMeter;

/// The consume phase gives up after this long without a new message.
const CONSUME_IDLE_TIMEOUT: Duration = Duration::from_secs(15);

/// One direction's figures.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PhaseResult {
    pub messages: u64,
    pub seconds: f64,
    pub msgs_per_s: f64,
    pub mb_per_s: f64,
    /// Broker CPU seconds per 10^9 value bytes; `None` without `--broker-pid`.
    pub broker_cpu_s_per_gb: Option<f64>,
}

impl PhaseResult {
    fn new(messages: u64, size_bytes: usize, seconds: f64, cpu_seconds: Option<f64>) -> Self {
        let bytes = messages as f64 * size_bytes as f64;
        let seconds = seconds.max(1e-9);
        PhaseResult {
            messages,
            seconds,
            msgs_per_s: messages as f64 / seconds,
            mb_per_s: bytes / 1e6 / seconds,
            broker_cpu_s_per_gb: cpu_seconds
                .filter(|_| bytes > 0.0)
                .map(|cpu| cpu / (bytes / 1e9)),
        }
    }
}

/// What a throughput run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputResult {
    pub size: usize,
    pub partitions: i32,
    pub acks: &'static str,
    pub compression: &'static str,
    pub producer: &'static str,
    pub produce: PhaseResult,
    pub produce_errors: u64,
    pub consume: Option<PhaseResult>,
}

/// Delivery callbacks: count successes and failures.
#[derive(Default)]
struct CountContext {
    acked: AtomicU64,
    errors: AtomicU64,
}

impl ClientContext for CountContext {}

impl ProducerContext for CountContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let counter = if result.is_ok() {
            &self.acked
        } else {
            &self.errors
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs the produce phase, then (unless skipped) the consume phase.
pub fn run(args: &ThroughputArgs) -> anyhow::Result<ThroughputResult> {
    let target = &args.target;
    client::ensure_target_topic(target)?;
    let consumer: BaseConsumer = client::consumer_config(&target.brokers)
        .set("fetch.wait.max.ms", "500")
        .create()?;
    let start_offsets = client::end_offsets(&consumer, &target.topic, target.partitions)?;
    let (produce, produce_errors) = produce_phase(args)?;
    let consume = if args.skip_consume {
        None
    } else {
        client::assign_from(&consumer, &target.topic, &start_offsets)?;
        Some(consume_phase(&consumer, produce.messages, args))
    };
    Ok(ThroughputResult {
        size: target.size,
        partitions: target.partitions,
        acks: target.acks.as_config(),
        compression: args.compression.as_config(),
        producer: args.producer.as_str(),
        produce,
        produce_errors,
        consume,
    })
}

fn produce_phase(args: &ThroughputArgs) -> anyhow::Result<(PhaseResult, u64)> {
    let target = &args.target;
    let knobs = ProducerKnobs {
        acks: target.acks,
        compression: args.compression,
        linger_ms: args.linger_ms,
        batch_bytes: args.batch_bytes,
    };
    let mut config = client::producer_config(&target.brokers, knobs);
    match args.producer {
        ProducerMode::Plain => {}
        ProducerMode::Idempotent => {
            config.set("enable.idempotence", "true");
        }
        ProducerMode::Transactional => {
            // librdkafka refuses a transactional.id with idempotence explicitly off (the
            // plain producer's setting), though transactions imply it.
            let id = format!("rill-bench-{}", std::process::id());
            config
                .set("enable.idempotence", "true")
                .set("transactional.id", id);
        }
    }
    let producer: ThreadedProducer<CountContext> = config
        .create_with_context(CountContext::default())
        .context("creating the producer")?;
    let txn = Transactions::start(&producer, args)?;
    let value = payload::template(target.size, payload::new_run_id());
    let partitions = target.partitions.max(1) as u64;
    let cpu = CpuMeter::start(args.broker_pid);
    let start = Instant::now();
    let send_for = Duration::from_secs_f64(args.seconds);
    let mut index = 0u64;
    while start.elapsed() < send_for {
        // Check the clock once per 256 sends: it is not free at millions of messages per second.
        for _ in 0..256 {
            let partition = (index % partitions) as i32;
            let record = BaseRecord::<(), [u8], ()>::to(&target.topic)
                .partition(partition)
                .payload(&value);
            match producer.send(record) {
                Ok(()) => {
                    index += 1;
                    txn.after_send(&producer, index)?;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err((err, _)) => return Err(err).context("enqueueing a message"),
            }
        }
    }
    txn.finish(&producer)?;
    producer
        .flush(Duration::from_secs(120))
        .context("waiting for the last acks")?;
    let seconds = start.elapsed().as_secs_f64();
    let context = producer.context();
    let acked = context.acked.load(Ordering::Relaxed);
    let phase = PhaseResult::new(acked, target.size, seconds, cpu.elapsed_seconds());
    Ok((phase, context.errors.load(Ordering::Relaxed)))
}

/// With `--producer transactional`: a transaction is open while sending, committed (which
/// waits for its messages' acks) every `--txn-messages` messages and at the end.
struct Transactions {
    every: Option<u64>,
}

impl Transactions {
    fn start(
        producer: &ThreadedProducer<CountContext>,
        args: &ThroughputArgs,
    ) -> anyhow::Result<Self> {
        if args.producer != ProducerMode::Transactional {
            return Ok(Transactions { every: None });
        }
        anyhow::ensure!(args.txn_messages > 0, "--txn-messages must be at least 1");
        producer
            .init_transactions(TXN_TIMEOUT)
            .context("init_transactions")?;
        producer.begin_transaction().context("begin_transaction")?;
        Ok(Transactions {
            every: Some(args.txn_messages),
        })
    }

    fn after_send(
        &self,
        producer: &ThreadedProducer<CountContext>,
        sent: u64,
    ) -> anyhow::Result<()> {
        if self.every.is_some_and(|n| sent.is_multiple_of(n)) {
            wait_for_reports(producer, sent)?;
            producer
                .commit_transaction(TXN_TIMEOUT)
                .context("commit_transaction")?;
            producer.begin_transaction().context("begin_transaction")?;
        }
        Ok(())
    }

    fn finish(&self, producer: &ThreadedProducer<CountContext>) -> anyhow::Result<()> {
        if self.every.is_some() {
            producer
                .commit_transaction(TXN_TIMEOUT)
                .context("the last commit_transaction")?;
        }
        Ok(())
    }
}

/// Longest a transaction call may take.
const TXN_TIMEOUT: Duration = Duration::from_secs(60);

/// Waits until the polling thread has served the delivery reports of `sent` messages. Without
/// it, commit_transaction's flush (rdkafka's, which polls in 100 ms steps while this producer's
/// own thread takes the events) holds every commit ~100 ms: the tool, not the broker.
fn wait_for_reports(producer: &ThreadedProducer<CountContext>, sent: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + TXN_TIMEOUT;
    let context = producer.context();
    while context.acked.load(Ordering::Relaxed) + context.errors.load(Ordering::Relaxed) < sent {
        anyhow::ensure!(Instant::now() < deadline, "delivery reports did not arrive");
        std::thread::sleep(Duration::from_micros(50));
    }
    Ok(())
}

fn consume_phase(consumer: &BaseConsumer, expected: u64, args: &ThroughputArgs) -> PhaseResult {
    let cpu = CpuMeter::start(args.broker_pid);
    let start = Instant::now();
    let mut last_message = Instant::now();
    let mut received = 0u64;
    while received < expected && last_message.elapsed() < CONSUME_IDLE_TIMEOUT {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) if message.payload_len() > 0 => {
                received += 1;
                last_message = Instant::now();
            }
            _ => {}
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    PhaseResult::new(received, args.target.size, seconds, cpu.elapsed_seconds())
}

/// Prints a short table and, last, the JSON result line.
pub fn print(result: &ThroughputResult) {
    println!(
        "{} B, {} partition(s), acks={}, compression={}, {} producer, produce errors {}",
        result.size,
        result.partitions,
        result.acks,
        result.compression,
        result.producer,
        result.produce_errors
    );
    println!(
        "{:<8} {:>10} {:>8} {:>12} {:>9} {:>16}",
        "phase", "messages", "seconds", "msg/s", "MB/s", "broker CPU s/GB"
    );
    let phases = [
        ("produce", Some(result.produce)),
        ("consume", result.consume),
    ];
    for (name, phase) in phases {
        let Some(p) = phase else { continue };
        let cpu = p
            .broker_cpu_s_per_gb
            .map_or("-".to_string(), |c| format!("{c:.2}"));
        println!(
            "{:<8} {:>10} {:>8.2} {:>12.0} {:>9.1} {:>16}",
            name, p.messages, p.seconds, p.msgs_per_s, p.mb_per_s, cpu
        );
    }
    println!("{}", serde_json::to_string(result).unwrap_or_default());
}
