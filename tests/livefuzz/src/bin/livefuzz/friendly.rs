//! The well-behaved clients that must keep making progress while the fuzz runs: an idempotent
//! producer (acks=all, retries with the same sequence, as every modern client does) and a
//! consumer that fetches what it produced, checks every record is there once and in order, and
//! commits and reads back its offset. Their topic and group are names the fuzz never uses, so
//! anything that stops them is the broker's doing.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rill_protocol::kafka_protocol::messages::{
    create_topics_request::CreatableTopic, fetch_request::FetchPartition,
    fetch_request::FetchTopic, find_coordinator_request::FindCoordinatorRequest,
    metadata_request::MetadataRequestTopic, offset_commit_request::OffsetCommitRequestPartition,
    offset_commit_request::OffsetCommitRequestTopic, offset_fetch_request::OffsetFetchRequestTopic,
    produce_request::PartitionProduceData, produce_request::TopicProduceData, ApiKey, BrokerId,
    CreateTopicsRequest, FetchRequest, GroupId, InitProducerIdRequest, MetadataRequest,
    OffsetCommitRequest, OffsetFetchRequest, ProduceRequest, RequestKind, ResponseKind, TopicName,
};
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use rill_protocol::record::{batches, RecordBatchView};

use crate::client::Conn;
use crate::stats::Stats;

/// The friendly clients' topic and group: never in the fuzz's pools.
pub const TOPIC: &str = "livefuzz-friendly";
const GROUP: &str = "livefuzz-friendly-group";
/// Records per produced batch.
const BATCH_RECORDS: i32 = 10;
/// Error codes a well-behaved client retries (leadership moving, replicas catching up).
const RETRIABLE: [i16; 9] = [3, 5, 6, 7, 14, 15, 16, 19, 20];

/// When each friendly client last made progress (ms since the run started).
pub struct Progress {
    /// The run's start.
    pub started: Instant,
    /// Last acknowledged produce.
    pub produced_ms: AtomicU64,
    /// Last record consumed.
    pub consumed_ms: AtomicU64,
}

impl Progress {
    /// Now, as the clock of this run.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

/// What both clients share.
#[derive(Clone)]
pub struct Friendly {
    /// The brokers.
    pub addrs: Vec<SocketAddr>,
    /// Counters and findings.
    pub stats: Arc<Stats>,
    /// Progress times.
    pub progress: Arc<Progress>,
    /// Set when the run ends.
    pub stop: Arc<AtomicBool>,
    /// The replication factor of the topic (-1: the broker's default).
    pub replication_factor: i16,
}

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

impl Friendly {
    fn connect(&self, addr: SocketAddr) -> Option<Conn> {
        Conn::connect(addr, Duration::from_secs(5), Duration::from_secs(30)).ok()
    }

    /// A connection to the leader of the topic's partition 0 (or of the group's coordinator).
    fn connect_leader(&self) -> Option<Conn> {
        for addr in &self.addrs {
            let Some(mut conn) = self.connect(*addr) else {
                continue;
            };
            let request = MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(TopicName(name(TOPIC)))),
            ]));
            let Ok(ResponseKind::Metadata(m)) =
                conn.call(ApiKey::Metadata, 12, RequestKind::Metadata(request))
            else {
                continue;
            };
            let leader = m
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .map(|p| p.leader_id);
            let Some(leader) = leader.filter(|l| l.0 >= 0) else {
                continue;
            };
            let broker = m.brokers.iter().find(|b| b.node_id == leader);
            let addr = broker.and_then(|b| format!("{}:{}", b.host, b.port).parse().ok());
            return addr.and_then(|a| self.connect(a));
        }
        None
    }

    /// A connection to the coordinator of the friendly group.
    fn connect_coordinator(&self) -> Option<Conn> {
        let mut conn = self.connect(self.addrs[0])?;
        let request = FindCoordinatorRequest::default().with_key(name(GROUP));
        match conn.call(
            ApiKey::FindCoordinator,
            2,
            RequestKind::FindCoordinator(request),
        ) {
            Ok(ResponseKind::FindCoordinator(r)) if r.error_code == 0 => {
                self.connect(format!("{}:{}", r.host, r.port).parse().ok()?)
            }
            _ => None,
        }
    }

    /// Counts a retry, and notes its reason once.
    fn retry(&self, why: impl Into<String>) {
        self.stats.note(format!("friendly retry: {}", why.into()));
        self.stats.friendly_retries.fetch_add(1, Relaxed);
        std::thread::sleep(Duration::from_millis(100));
    }

    /// Creates the topic (once: TOPIC_ALREADY_EXISTS is fine) before either client starts.
    pub fn create_topic(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let Some(mut conn) = self.connect(self.addrs[0]) else {
                self.retry("connect");
                continue;
            };
            let topic = CreatableTopic::default()
                .with_name(TopicName(name(TOPIC)))
                .with_num_partitions(1)
                .with_replication_factor(self.replication_factor);
            let request = CreateTopicsRequest::default()
                .with_topics(vec![topic])
                .with_timeout_ms(30_000);
            match conn.call(ApiKey::CreateTopics, 5, RequestKind::CreateTopics(request)) {
                Ok(ResponseKind::CreateTopics(r)) => {
                    let code = r.topics.first().map(|t| t.error_code);
                    if matches!(code, Some(0 | 36)) && self.connect_leader().is_some() {
                        return Ok(());
                    }
                    self.retry(format!("CreateTopics: {code:?}"));
                }
                other => self.retry(format!("CreateTopics: {other:?}")),
            }
        }
        Err(format!("could not create {TOPIC} with a leader in 60 s"))
    }
}

/// The producer: runs until the run stops.
pub fn produce(f: Friendly) {
    let mut next_value: i64 = 0;
    let mut producer: Option<(i64, i16)> = None;
    while !f.stop.load(Relaxed) {
        let Some(mut conn) = f.connect_leader() else {
            f.retry("no leader");
            continue;
        };
        if producer.is_none() {
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000);
            match conn.call(
                ApiKey::InitProducerId,
                4,
                RequestKind::InitProducerId(request),
            ) {
                Ok(ResponseKind::InitProducerId(r)) if r.error_code == 0 => {
                    producer = Some((r.producer_id.0, r.producer_epoch))
                }
                other => {
                    f.retry(format!("InitProducerId: {other:?}"));
                    continue;
                }
            }
        }
        let (pid, epoch) = producer.expect("initialised above");
        while !f.stop.load(Relaxed) && produce_once(&f, &mut conn, pid, epoch, &mut next_value) {}
    }
}

/// Produces the next batch (acks=all); false when the connection must be replaced (a retry
/// of the same batch, with the same sequence, follows on the new one).
fn produce_once(f: &Friendly, conn: &mut Conn, pid: i64, epoch: i16, next_value: &mut i64) -> bool {
    let records = friendly_batch(pid, epoch, *next_value);
    let data = PartitionProduceData::default()
        .with_index(0)
        .with_records(Some(records));
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(name(TOPIC)))
            .with_partition_data(vec![data])]);
    let code = match conn.call(ApiKey::Produce, 9, RequestKind::Produce(request)) {
        Ok(ResponseKind::Produce(r)) => r
            .responses
            .first()
            .and_then(|t| t.partition_responses.first())
            .map(|p| p.error_code),
        other => {
            f.retry(format!("Produce: {other:?}"));
            return false;
        }
    };
    match code {
        Some(0 | 46) => {
            *next_value += i64::from(BATCH_RECORDS);
            f.stats
                .friendly_acked
                .fetch_add(BATCH_RECORDS as u64, Relaxed);
            f.progress.produced_ms.store(f.progress.now_ms(), Relaxed);
            std::thread::sleep(Duration::from_millis(5));
            true
        }
        Some(c) if RETRIABLE.contains(&c) => {
            f.retry(format!("Produce: error {c}"));
            false // find the leader again
        }
        Some(c) => {
            f.stats.finding(format!(
                "friendly producer: Produce answered error {c} at value {next_value}"
            ));
            false
        }
        None => {
            f.retry("Produce: no partition in the answer");
            false
        }
    }
}

/// Records `first..first + BATCH_RECORDS` of producer `pid`: sequence = value, so a retried
/// batch carries the sequence it had.
fn friendly_batch(pid: i64, epoch: i16, first: i64) -> Bytes {
    let records: Vec<Record> = (0..i64::from(BATCH_RECORDS))
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: (first + i) as i32,
            timestamp: 1_700_000_000_000 + first + i,
            key: None,
            value: Some(Bytes::from(format!("friendly-{}", first + i))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encoding into memory");
    buf.freeze()
}

/// The consumer: runs until the run stops.
pub fn consume(f: Friendly) {
    let mut offset: i64 = 0;
    let mut expect: i64 = 0;
    let mut fetches: u64 = 0;
    while !f.stop.load(Relaxed) {
        let Some(mut conn) = f.connect_leader() else {
            f.retry("no leader");
            continue;
        };
        while !f.stop.load(Relaxed) {
            match fetch_once(&f, &mut conn, &mut offset, &mut expect) {
                Ok(()) => {}
                Err(true) => break,
                Err(false) => return, // a data error: a finding was recorded
            }
            fetches += 1;
            if fetches.is_multiple_of(50) && offset > 0 {
                commit_and_check(&f, offset);
            }
        }
    }
}

/// One Fetch: checks each record; `Err(true)` to reconnect, `Err(false)` to stop.
fn fetch_once(
    f: &Friendly,
    conn: &mut Conn,
    offset: &mut i64,
    expect: &mut i64,
) -> Result<(), bool> {
    let partition = FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(*offset)
        .with_partition_max_bytes(1 << 20);
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(200)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(name(TOPIC)))
            .with_partitions(vec![partition])]);
    let r = match conn.call(ApiKey::Fetch, 12, RequestKind::Fetch(request)) {
        Ok(ResponseKind::Fetch(r)) => r,
        other => {
            f.retry(format!("Fetch: {other:?}"));
            return Err(true);
        }
    };
    let Some(p) = r.responses.first().and_then(|t| t.partitions.first()) else {
        f.retry("Fetch: no partition in the answer");
        return Err(true);
    };
    if p.error_code != 0 {
        if RETRIABLE.contains(&p.error_code) {
            f.retry(format!("Fetch: error {}", p.error_code));
            return Err(true);
        }
        f.stats.finding(format!(
            "friendly consumer: Fetch at offset {offset} answered error {}",
            p.error_code
        ));
        return Err(false);
    }
    let Some(blob) = p.records.clone() else {
        return Ok(());
    };
    for batch in batches(blob) {
        let Ok(batch) = batch else { break }; // a partial last batch: fetched again next time
        if batch.last_offset().0 >= *offset {
            check_batch(f, &batch, offset, expect)?;
        }
    }
    Ok(())
}

/// Checks a fetched batch's records from `offset` on: each holds the next expected value.
fn check_batch(
    f: &Friendly,
    batch: &RecordBatchView<Bytes>,
    offset: &mut i64,
    expect: &mut i64,
) -> Result<(), bool> {
    let Ok(records) = batch.records() else {
        f.stats.finding(format!(
            "friendly consumer: batch at {} unreadable",
            batch.base_offset().0
        ));
        return Err(false);
    };
    for record in records {
        let Ok(record) = record else {
            f.stats.finding(format!(
                "friendly consumer: a record of the batch at {} is corrupt",
                batch.base_offset().0
            ));
            return Err(false);
        };
        let at = batch.base_offset().0 + i64::from(record.offset_delta);
        if at < *offset {
            continue;
        }
        let want = format!("friendly-{expect}");
        if record.value != Some(want.as_bytes()) {
            let got = record
                .value
                .map(|v| String::from_utf8_lossy(v).into_owned());
            f.stats.finding(format!(
                "friendly consumer: offset {at} holds {got:?}, expected {want:?}"
            ));
            return Err(false);
        }
        *expect += 1;
        f.stats.friendly_consumed.fetch_add(1, Relaxed);
        f.progress.consumed_ms.store(f.progress.now_ms(), Relaxed);
    }
    *offset = batch.last_offset().0 + 1;
    Ok(())
}

/// Commits `offset` for the friendly group and reads it back.
fn commit_and_check(f: &Friendly, offset: i64) {
    let Some(mut conn) = f.connect_coordinator() else {
        return f.retry("no coordinator");
    };
    let partition = OffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(offset);
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(name(GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(name(TOPIC)))
            .with_partitions(vec![partition])]);
    let code = match conn.call(ApiKey::OffsetCommit, 8, RequestKind::OffsetCommit(request)) {
        Ok(ResponseKind::OffsetCommit(r)) => r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map(|p| p.error_code),
        _ => None,
    };
    match code {
        Some(0) => {}
        Some(c) if RETRIABLE.contains(&c) => return f.retry(format!("OffsetCommit: error {c}")),
        Some(c) => {
            return f.stats.finding(format!(
                "friendly consumer: OffsetCommit answered error {c}"
            ))
        }
        None => return f.retry("OffsetCommit failed"),
    }
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(name(GROUP)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(name(TOPIC)))
            .with_partition_indexes(vec![0])]));
    let committed = match conn.call(ApiKey::OffsetFetch, 7, RequestKind::OffsetFetch(request)) {
        Ok(ResponseKind::OffsetFetch(r)) => r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map(|p| (p.error_code, p.committed_offset)),
        _ => None,
    };
    match committed {
        Some((0, c)) if c == offset => {
            f.stats.friendly_commits.fetch_add(1, Relaxed);
        }
        Some((0, c)) => f.stats.finding(format!(
            "friendly consumer: committed {offset}, OffsetFetch says {c}"
        )),
        other => f.retry(format!("OffsetFetch: {other:?}")),
    }
}
