//! Fetch (1): read many partitions at once on their owning shards; long-poll until `min_bytes`
//! are available or `max_wait_ms` passes, woken by appends.
//!
//! Isolation (v4+): read_uncommitted reads below the high watermark; read_committed below the
//! last stable offset, and gets the aborted transactions among the records it is sent (the
//! client drops their records). Every response carries the partition's last stable offset.
//! Any other level is refused as Kafka refuses it: UNKNOWN_SERVER_ERROR for the whole request.
//! Long polls wait for the high watermark or, read_committed, the last stable offset to pass
//! the fetch position. Fetch sessions are not kept: `session_id` 0 tells clients to send full
//! requests.
//!
//! Byte budgets (KIP-74): each partition reads up to its `partition_max_bytes`; the response
//! keeps partitions in request order while the total stays within `max_bytes`, but the first
//! partition with data is always included whole so a large batch can never stall a consumer.
//!
//! Time is the broker's ([`Broker::now`], [`Broker::sleep`]): the long poll's deadline and its
//! timer come from the same clock, so tests drive it with a virtual one.

use std::time::Duration;

use bytes::Bytes;
use futures::future::{join_all, select, select_all, Either};
use rill_protocol::kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use rill_protocol::kafka_protocol::messages::{FetchRequest, FetchResponse};
use rill_protocol::ErrorCode;
use uuid::Uuid;

use super::Broker;
use crate::admin::shard::hooks;
use crate::partition::ops::{Isolation, PartitionOp, PartitionReply};
use rill_engine::{AbortedTxn, Positions};
use rill_metadata::types::NodeId;
use rill_types::{LeaderEpoch, Offset};

/// Upper bound on how long one fetch may park (clients send ~500 ms; a lying value is capped).
pub const FETCH_WAIT_MS_MAX: u64 = 30_000;

/// One requested partition, resolved.
#[derive(Debug, Clone)]
struct Want {
    topic: String,
    topic_id: Uuid,
    partition: i32,
    fetch_offset: Offset,
    max_bytes: usize,
    /// The request's isolation level ([`Isolation::Replica`] for a follower's fetch).
    isolation: Isolation,
    /// A follower's fetch: its node id, the leader epoch it names and its last fetched epoch.
    replica: Option<(NodeId, LeaderEpoch, Option<LeaderEpoch>)>,
    /// Set when the topic is unknown: answered without touching a shard.
    error: Option<ErrorCode>,
}

/// One partition's outcome.
struct Got {
    error: ErrorCode,
    /// `None` when the partition could not be asked (unknown): -1s on the wire.
    positions: Option<Positions>,
    chunks: Vec<Bytes>,
    /// read_committed: the aborted transactions among the chunks.
    aborted: Vec<AbortedTxn>,
    /// A follower's fetch: where its log diverges from the leader's (KIP-320).
    diverging: Option<(LeaderEpoch, Offset)>,
}

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: FetchRequest,
) -> super::Answer {
    let (response, records) = handle(broker, cx.version, &request).await;
    super::Answer::Fetch(response, records)
}

/// Answer Fetch: the response without record bytes, plus each partition's record chunks in
/// response order, which the vectored encoder (`rill_protocol::fetch_encoder`) splices in
/// without copying them.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    request: &FetchRequest,
) -> (FetchResponse, Vec<Vec<Bytes>>) {
    let Some(isolation) = Isolation::from_wire(request.isolation_level) else {
        tracing::warn!(
            isolation_level = request.isolation_level,
            "Fetch names an unknown isolation level: answered UNKNOWN_SERVER_ERROR, as Kafka"
        );
        return refuse(version, request, Isolation::INVALID_CODE);
    };
    let wants = resolve(broker, version, request, isolation);
    let wait = Duration::from_millis((request.max_wait_ms.max(0) as u64).min(FETCH_WAIT_MS_MAX));
    let min_bytes = request.min_bytes.max(0) as usize;
    let deadline = broker.now() + wait;
    let mut gots = read_all(broker, &wants).await;
    let mut waited = Duration::ZERO;
    loop {
        let total: usize = gots.iter().map(|g| bytes_of(&g.chunks)).sum();
        let any_error = gots
            .iter()
            .any(|g| !g.error.is_ok() || g.diverging.is_some());
        let now = broker.now();
        if total >= min_bytes.max(1) || any_error || now >= deadline || wants.is_empty() {
            break;
        }
        wait_for_any(broker, &wants, &gots, deadline - now).await;
        waited += broker.now() - now;
        gots = read_all(broker, &wants).await;
    }
    let budget = if request.max_bytes > 0 {
        request.max_bytes as usize
    } else {
        usize::MAX
    };
    let (response, records) = response(version, wants, gots, budget);
    let from_consumer = follower(request).is_none();
    hooks::fetch_answered(waited, from_consumer.then(|| sent(&response, &records)));
    (response, records)
}

/// Each partition's record chunks in `response`, with its topic name (for the metrics).
fn sent<'a>(
    response: &'a FetchResponse,
    records: &'a [Vec<Bytes>],
) -> impl Iterator<Item = (&'a str, i32, &'a [Bytes])> {
    let partitions = response.responses.iter().flat_map(|t| {
        t.partitions
            .iter()
            .map(move |p| (t.topic.0.as_str(), p.partition_index))
    });
    partitions
        .zip(records)
        .map(|((topic, partition), chunks)| (topic, partition, chunks.as_slice()))
}

/// The follower a Fetch comes from (its `replica_state`, v15+, or its `replica_id`); `None`
/// for a consumer (-1 on the wire).
fn follower(request: &FetchRequest) -> Option<NodeId> {
    [request.replica_state.replica_id.0, request.replica_id.0]
        .into_iter()
        .find(|&id| id >= 0)
        .map(NodeId)
}

/// Kafka's answer to a Fetch it cannot serve at all (`FetchRequest.getErrorResponse`): `code`
/// at the top (on the wire from v7) and, below v13, on every requested partition too.
fn refuse(
    version: i16,
    request: &FetchRequest,
    code: ErrorCode,
) -> (FetchResponse, Vec<Vec<Bytes>>) {
    let topics: Vec<FetchableTopicResponse> = if version < 13 {
        let each = |t: &rill_protocol::kafka_protocol::messages::fetch_request::FetchTopic| {
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| partition_data(p.partition, code, None))
                        .collect(),
                )
        };
        request.topics.iter().map(each).collect()
    } else {
        Vec::new()
    };
    let partitions = topics.iter().map(|t| t.partitions.len()).sum();
    let response = FetchResponse::default()
        .with_error_code(code.code())
        .with_session_id(0)
        .with_responses(topics);
    (response, vec![Vec::new(); partitions])
}

fn resolve<B: Broker>(
    broker: &B,
    version: i16,
    request: &FetchRequest,
    isolation: Isolation,
) -> Vec<Want> {
    let mut wants = Vec::new();
    let replica_id = follower(request);
    for topic in &request.topics {
        let by_id = version >= 13;
        // Followers copy the internal topics and consumers read them (`crate::coordinator_log`).
        let found = if by_id {
            crate::coordinator_log::readable_topic_by_id(broker, topic.topic_id)
        } else {
            let name = topic.topic.0.as_str();
            crate::coordinator_log::readable_topic(broker, name).map(|m| (name.to_string(), m))
        };
        let (name, error) = match &found {
            Some((name, _)) => (name.clone(), None),
            None if by_id => (String::new(), Some(ErrorCode::UnknownTopicId)),
            None => (
                topic.topic.0.as_str().to_string(),
                Some(ErrorCode::UnknownTopicOrPartition),
            ),
        };
        for p in &topic.partitions {
            let replica = replica_id.map(|node| {
                let last = (p.last_fetched_epoch >= 0).then_some(LeaderEpoch(p.last_fetched_epoch));
                (node, LeaderEpoch(p.current_leader_epoch), last)
            });
            let in_range = found
                .as_ref()
                .is_some_and(|(_, m)| p.partition >= 0 && p.partition < m.partitions);
            wants.push(Want {
                topic: name.clone(),
                topic_id: found.as_ref().map_or(topic.topic_id, |(_, m)| m.id),
                partition: p.partition,
                fetch_offset: Offset(p.fetch_offset),
                max_bytes: p.partition_max_bytes.max(0) as usize,
                isolation: match replica {
                    Some(_) => Isolation::Replica,
                    None => isolation,
                },
                replica,
                error: error.or((!in_range).then_some(ErrorCode::UnknownTopicOrPartition)),
            });
        }
    }
    wants
}

async fn read_all<B: Broker>(broker: &B, wants: &[Want]) -> Vec<Got> {
    join_all(wants.iter().map(|w| read_one(broker, w))).await
}

async fn read_one<B: Broker>(broker: &B, want: &Want) -> Got {
    if let Some(code) = want.error {
        return Got {
            error: code,
            positions: None,
            chunks: Vec::new(),
            aborted: Vec::new(),
            diverging: None,
        };
    }
    if let Some(replica) = want.replica {
        return read_for_follower(broker, want, replica).await;
    }
    let op = PartitionOp::Read {
        from: want.fetch_offset,
        max_bytes: want.max_bytes,
        isolation: want.isolation,
    };
    match broker.partition(&want.topic, want.partition, op).await {
        PartitionReply::Read {
            positions,
            chunks,
            aborted,
        } => Got {
            error: ErrorCode::None,
            positions: Some(positions),
            chunks,
            aborted,
            diverging: None,
        },
        other => {
            // OFFSET_OUT_OF_RANGE still reports positions so the client can reset; fetch them.
            let positions = match broker
                .partition(&want.topic, want.partition, PartitionOp::Offsets)
                .await
            {
                PartitionReply::Offsets(p) => Some(p),
                _ => None,
            };
            Got {
                error: other.error_code(),
                positions,
                chunks: Vec::new(),
                aborted: Vec::new(),
                diverging: None,
            }
        }
    }
}

/// A follower's fetch (`crate::replication`): up to the leader's log end, or where the
/// follower's log diverges.
async fn read_for_follower<B: Broker>(
    broker: &B,
    want: &Want,
    (replica, current_leader_epoch, last_fetched_epoch): (NodeId, LeaderEpoch, Option<LeaderEpoch>),
) -> Got {
    let op = PartitionOp::ReplicaFetch {
        replica,
        from: want.fetch_offset,
        max_bytes: want.max_bytes,
        current_leader_epoch,
        last_fetched_epoch,
    };
    match broker.partition(&want.topic, want.partition, op).await {
        PartitionReply::ReplicaRead {
            positions,
            chunks,
            diverging,
        } => Got {
            error: ErrorCode::None,
            positions: Some(positions),
            chunks,
            aborted: Vec::new(),
            diverging,
        },
        PartitionReply::ReplicaOutOfRange(positions) => Got {
            error: ErrorCode::OffsetOutOfRange,
            positions: Some(positions),
            chunks: Vec::new(),
            aborted: Vec::new(),
            diverging: None,
        },
        other => Got {
            error: other.error_code(),
            positions: None,
            chunks: Vec::new(),
            aborted: Vec::new(),
            diverging: None,
        },
    }
}

fn bytes_of(chunks: &[Bytes]) -> usize {
    chunks.iter().map(Bytes::len).sum()
}

/// Park until any partition's visible end (high watermark, read_committed: last stable
/// offset) passes its fetch position, or `wait` elapses.
async fn wait_for_any<B: Broker>(broker: &B, wants: &[Want], gots: &[Got], wait: Duration) {
    let wait_ms = wait.as_millis() as u64;
    let waits: Vec<_> = wants
        .iter()
        .zip(gots)
        .filter(|(w, g)| w.error.is_none() && g.error.is_ok())
        .map(|(w, _)| {
            let op = PartitionOp::WaitForData {
                from: w.fetch_offset,
                wait_ms,
                isolation: w.isolation,
            };
            Box::pin(broker.partition(&w.topic, w.partition, op))
        })
        .collect();
    if waits.is_empty() {
        broker.sleep(wait).await;
        return;
    }
    let timer = broker.sleep(wait);
    futures::pin_mut!(timer);
    match select(select_all(waits), timer).await {
        Either::Left(_) | Either::Right(_) => {}
    }
}

fn response(
    version: i16,
    wants: Vec<Want>,
    gots: Vec<Got>,
    budget: usize,
) -> (FetchResponse, Vec<Vec<Bytes>>) {
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    let mut records = Vec::with_capacity(wants.len());
    let mut used = 0usize;
    let mut first_data_sent = false;
    for (want, got) in wants.into_iter().zip(gots) {
        let mut size = bytes_of(&got.chunks);
        let mut chunks = got.chunks;
        if first_data_sent && used + size > budget {
            chunks.clear();
            size = 0;
        }
        first_data_sent |= size > 0;
        used += size;
        let mut partition = partition_data(want.partition, got.error, got.positions);
        if let Some((epoch, end)) = got.diverging {
            partition.diverging_epoch = EpochEndOffset::default()
                .with_epoch(epoch.0)
                .with_end_offset(end.0);
        }
        if want.isolation == Isolation::ReadCommitted && !chunks.is_empty() {
            partition.aborted_transactions = Some(aborted_list(&got.aborted));
        }
        records.push(chunks);
        if version < 5 {
            partition.log_start_offset = -1; // not in the schema before v5
        }
        // Topic ids exist on the wire from v13; below it the field must stay nil.
        let topic_id = if version >= 13 {
            want.topic_id
        } else {
            Uuid::nil()
        };
        match topics.last_mut() {
            Some(last) if last.topic.0.as_str() == want.topic && last.topic_id == topic_id => {
                last.partitions.push(partition)
            }
            _ => topics.push(
                FetchableTopicResponse::default()
                    .with_topic(super::topic_name(&want.topic))
                    .with_topic_id(topic_id)
                    .with_partitions(vec![partition]),
            ),
        }
    }
    let response = FetchResponse::default()
        .with_session_id(0)
        .with_responses(topics);
    (response, records)
}

/// The wire form of aborted transactions (producer id, first offset).
fn aborted_list(aborted: &[AbortedTxn]) -> Vec<AbortedTransaction> {
    aborted
        .iter()
        .map(|a| {
            AbortedTransaction::default()
                .with_producer_id(rill_protocol::kafka_protocol::messages::ProducerId(
                    a.producer_id.0,
                ))
                .with_first_offset(a.first_offset.0)
        })
        .collect()
}

fn partition_data(index: i32, error: ErrorCode, positions: Option<Positions>) -> PartitionData {
    // Unknown positions are -1 on the wire.
    let high_watermark = positions.map_or(-1, |p| p.high_watermark().0);
    let last_stable_offset = positions.map_or(-1, |p| p.last_stable().0);
    let log_start_offset = positions.map_or(-1, |p| p.log_start().0);
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(error.code())
        .with_high_watermark(high_watermark)
        .with_last_stable_offset(last_stable_offset)
        .with_log_start_offset(log_start_offset)
        .with_aborted_transactions(Some(Vec::new()))
        .with_preferred_read_replica(rill_protocol::kafka_protocol::messages::BrokerId(-1))
        .with_diverging_epoch(EpochEndOffset::default().with_epoch(-1).with_end_offset(-1))
        .with_records(Some(Bytes::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::{batch, FakeBroker};
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};

    /// [`handle`], with each partition's chunks put back into its `records` field (what a
    /// client decodes from the spliced response).
    async fn answer<B: Broker>(broker: &B, version: i16, request: &FetchRequest) -> FetchResponse {
        let (mut response, records) = handle(broker, version, request).await;
        let partitions = response
            .responses
            .iter_mut()
            .flat_map(|t| t.partitions.iter_mut());
        for (partition, chunks) in partitions.zip(records) {
            partition.records = Some(Bytes::from(chunks.concat()));
        }
        response
    }

    fn request(
        topic: &str,
        partitions: &[(i32, i64)],
        max_wait_ms: i32,
        min_bytes: i32,
    ) -> FetchRequest {
        let parts = partitions
            .iter()
            .map(|&(p, o)| {
                FetchPartition::default()
                    .with_partition(p)
                    .with_fetch_offset(o)
                    .with_partition_max_bytes(1 << 20)
            })
            .collect();
        FetchRequest::default()
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(min_bytes)
            .with_max_bytes(50 << 20)
            .with_isolation_level(1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(super::super::topic_name(topic))
                .with_partitions(parts)])
    }

    #[test]
    fn reads_back_appended_batches_with_lso_equal_to_hw() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 2, Default::default()).unwrap();
        broker.append("t", 0, batch(3));
        broker.append("t", 0, batch(2));
        let r = block_on(answer(&broker, 12, &request("t", &[(0, 0), (1, 0)], 0, 1)));
        let p0 = &r.responses[0].partitions[0];
        assert_eq!(p0.error_code, 0);
        assert_eq!(p0.high_watermark, 5);
        assert_eq!(p0.last_stable_offset, 5);
        assert_eq!(p0.aborted_transactions.as_ref().map(Vec::len), Some(0));
        assert_eq!(
            p0.records.as_ref().unwrap().len(),
            batch(3).len() + batch(2).len()
        );
        let p1 = &r.responses[0].partitions[1];
        assert_eq!((p1.error_code, p1.high_watermark), (0, 0));
        assert!(p1.records.as_ref().unwrap().is_empty());
    }

    #[test]
    fn long_poll_times_out_empty_through_the_injected_timer() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 1, Default::default()).unwrap();
        let start = broker.now();
        let r = block_on(answer(&broker, 12, &request("t", &[(0, 0)], 100, 1)));
        assert!(r.responses[0].partitions[0]
            .records
            .as_ref()
            .unwrap()
            .is_empty());
        assert!(
            broker.now() - start >= Duration::from_millis(100),
            "waited max_wait_ms"
        );
    }

    #[test]
    fn an_unknown_isolation_level_refuses_the_whole_fetch_as_kafka() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 2, Default::default()).unwrap();
        broker.append("t", 0, batch(3));
        for level in [2, -1, i8::MAX] {
            let req = request("t", &[(0, 0), (1, 0)], 0, 1).with_isolation_level(level);
            // Below v13 every partition carries the error too, with unknown positions.
            let r = block_on(answer(&broker, 12, &req));
            assert_eq!(r.error_code, ErrorCode::UnknownServerError.code());
            let parts = &r.responses[0].partitions;
            assert_eq!(parts.len(), 2);
            for p in parts {
                assert_eq!(p.error_code, ErrorCode::UnknownServerError.code());
                assert_eq!((p.high_watermark, p.log_start_offset), (-1, -1));
                assert!(p.records.as_ref().unwrap().is_empty());
            }
            // From v13 the top-level code alone says it.
            let r = block_on(answer(&broker, 13, &req));
            assert_eq!(r.error_code, ErrorCode::UnknownServerError.code());
            assert!(r.responses.is_empty());
        }
    }

    #[test]
    fn unknown_topic_and_out_of_range() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 1, Default::default()).unwrap();
        let r = block_on(answer(&broker, 12, &request("nope", &[(0, 0)], 0, 1)));
        assert_eq!(r.responses[0].partitions[0].error_code, 3);
        let r = block_on(answer(&broker, 12, &request("t", &[(0, 99)], 0, 1)));
        assert_eq!(r.responses[0].partitions[0].error_code, 1);
    }
}
