//! librdkafka configuration for the benchmark producer and consumer, and topic creation through
//! the admin API.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::cli::{Acks, Compression};

/// How long metadata and admin calls may take before the run is abandoned.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(15);

/// Properties from `-X KEY=VALUE`, applied to every client after the tool's own (set once, at
/// start): one run measures one listener, so every producer, consumer and admin client of it
/// must speak that listener's protocol.
static EXTRA_CONFIG: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Records the `-X` properties; called once from `main` before any client is made.
pub fn set_extra_config(properties: Vec<(String, String)>) {
    let set = EXTRA_CONFIG.set(properties);
    debug_assert!(set.is_ok(), "client properties are set once");
}

/// Settings common to every client: loopback, no Nagle, quiet logs, then the `-X` properties.
pub fn base_config(brokers: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", brokers)
        .set("client.id", "rill-bench")
        .set("broker.address.family", "v4")
        .set("socket.nagle.disable", "true")
        .set("log_level", "3");
    for (key, value) in EXTRA_CONFIG.get().into_iter().flatten() {
        config.set(key, value);
    }
    config
}

/// Producer knobs that differ between latency and throughput runs.
#[derive(Debug, Clone, Copy)]
pub struct ProducerKnobs {
    pub acks: Acks,
    pub compression: Compression,
    pub linger_ms: u32,
    pub batch_bytes: u32,
}

/// A producer configuration: no idempotence (we measure the plain path), bounded retries.
pub fn producer_config(brokers: &str, knobs: ProducerKnobs) -> ClientConfig {
    let mut config = base_config(brokers);
    config
        .set("acks", knobs.acks.as_config())
        .set("compression.codec", knobs.compression.as_config())
        .set("linger.ms", knobs.linger_ms.to_string())
        .set("batch.size", knobs.batch_bytes.to_string())
        .set("enable.idempotence", "false")
        // A bounded client queue (64 MiB): a throughput run then ends promptly after its send
        // window instead of draining a gigabyte of backlog.
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "65536")
        .set("message.timeout.ms", "60000");
    config
}

/// A consumer configuration for manual assignment with no commits. librdkafka's high-level
/// consumer insists on a `group.id` even for `assign()`; the group is never joined and nothing is
/// committed, so the benchmark does not depend on the broker's group coordinator.
pub fn consumer_config(brokers: &str) -> ClientConfig {
    let mut config = base_config(brokers);
    config
        .set("group.id", format!("rill-bench-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("fetch.wait.max.ms", "100")
        .set("fetch.min.bytes", "1");
    config
}

/// Creates `topic` with `partitions` (replication 1) unless it exists, then waits until metadata
/// shows all its partitions.
pub fn ensure_topic(
    brokers: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i32,
) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = base_config(brokers)
        .create()
        .context("creating the admin client")?;
    let replication = TopicReplication::Fixed(replication_factor);
    let new_topic = NewTopic::new(topic, partitions, replication);
    let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    let results = futures_executor::block_on(admin.create_topics([&new_topic], &options))
        .context("CreateTopics request")?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => bail!("creating topic {name}: {code}"),
        }
    }
    wait_for_partitions(brokers, topic, partitions)
}

/// [`ensure_topic`] for a run's target.
pub fn ensure_target_topic(target: &crate::cli::Target) -> anyhow::Result<()> {
    ensure_topic(
        &target.brokers,
        &target.topic,
        target.partitions,
        target.replication_factor,
    )
}

/// Polls metadata until `topic` has `partitions` partitions with leaders and whole ISRs.
fn wait_for_partitions(brokers: &str, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let consumer: BaseConsumer = consumer_config(brokers).create()?;
    let deadline = Instant::now() + ADMIN_TIMEOUT;
    loop {
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(5));
        if let Ok(metadata) = metadata {
            let ready = metadata.topics().iter().any(|t| {
                t.name() == topic
                    && t.error().is_none()
                    && t.partitions().len() as i32 >= partitions
                    && t.partitions()
                        .iter()
                        .all(|p| p.leader() >= 0 && p.isr().len() == p.replicas().len())
            });
            if ready {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("topic {topic} did not show {partitions} partitions in metadata in time");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The high watermark of each partition `0..partitions` (where a reader of new data starts).
pub fn end_offsets(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<Vec<i64>> {
    (0..partitions)
        .map(|p| {
            let (_, high) = consumer
                .fetch_watermarks(topic, p, ADMIN_TIMEOUT)
                .with_context(|| format!("ListOffsets for {topic}-{p}"))?;
            Ok(high)
        })
        .collect()
}

/// Assigns `consumer` to every partition of `topic`, each starting at its given offset.
pub fn assign_from(consumer: &BaseConsumer, topic: &str, offsets: &[i64]) -> anyhow::Result<()> {
    let mut list = TopicPartitionList::new();
    for (partition, offset) in offsets.iter().enumerate() {
        list.add_partition_offset(topic, partition as i32, Offset::Offset(*offset))?;
    }
    consumer.assign(&list).context("assigning partitions")?;
    Ok(())
}

/// Enqueues one record for `partition` of `topic`, sleeping 1 ms at a time while librdkafka's
/// queue is full (loads that enqueue faster than the broker acknowledges).
pub fn send_waiting<C>(
    producer: &ThreadedProducer<C>,
    topic: &str,
    partition: i32,
    value: &[u8],
) -> anyhow::Result<()>
where
    C: ProducerContext<DeliveryOpaque = ()> + 'static,
{
    loop {
        let record = BaseRecord::<(), [u8]>::to(topic)
            .partition(partition)
            .payload(value);
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((e, _)) => return Err(e).context("enqueueing a record"),
        }
    }
}
