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
//! Byte budgets (KIP-74): the response carries at most `limit` record bytes, the client's
//! `max_bytes` or the broker's `fetch.max.bytes` if smaller, handed out to the partitions in
//! request order as Kafka's `readFromLog` does: each reads up to its `partition_max_bytes` and
//! what the partitions before it left of `limit`; once `limit` is spent, the rest are answered
//! with their positions only (nothing is read for them). The first partition with data is
//! always included whole, so a large batch can never stall a consumer.
//!
//! Memory (`rill.shard.fetch.bytes.max`): before reading, a Fetch reserves from its shard's
//! budget what its partitions may read at most (never more than `limit`), waiting in line if the
//! budget is spent; it keeps what its response carries until the response is written. The reads
//! run concurrently within that reservation: a partition starts once what the earlier ones
//! claimed leaves it room, each claiming at least [`CLAIM_BYTES_MIN`] (so at most
//! `limit / CLAIM_BYTES_MIN` are read at once). A read returns at least one whole batch, which
//! may be larger than its claim; that excess is counted too (the budget may be overdrawn by it).
//!
//! | partition                         | read with                                  |
//! |-----------------------------------|--------------------------------------------|
//! | `limit` not yet spent             | min(`partition_max_bytes`, what is left)    |
//! | `limit` spent by earlier data     | nothing: positions only                     |
//! | unknown topic, partition out of range | nothing: the error                      |
//!
//! Time is the broker's ([`Broker::now`], [`Broker::sleep`]): the long poll's deadline and its
//! timer come from the same clock, so tests drive it with a virtual one.

use std::time::Duration;

use bytes::Bytes;
use futures::future::{join_all, select, select_all, Either};
use futures::stream::{FuturesUnordered, StreamExt};
use rill_protocol::kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use rill_protocol::kafka_protocol::messages::{FetchRequest, FetchResponse};
use rill_protocol::ErrorCode;
use uuid::Uuid;

use super::Broker;
use crate::admin::bound_hits::Bound;
use crate::admin::shard::hooks;
use crate::memory_budget::Hold;
use crate::partition::ops::{Isolation, PartitionOp, PartitionReply};
use crate::security::session::Session;
use rill_engine::{AbortedTxn, Positions};
use rill_metadata::types::NodeId;
use rill_types::{LeaderEpoch, Offset, PartitionIndex, TopicPartitionRef};

/// Upper bound on how long one fetch may park (clients send ~500 ms; a lying value is capped).
pub const FETCH_WAIT_MS_MAX: u64 = 30_000;

/// The least of a Fetch's limit one partition's read claims (the usual `partition_max_bytes`):
/// bounds how many partitions are read at once, and so how many may each return a first batch
/// larger than their claim.
pub const CLAIM_BYTES_MIN: usize = 1 << 20;

/// An answered Fetch: the response without record bytes, each partition's record chunks in
/// response order (the vectored encoder, `rill_protocol::fetch_encoder`, splices them in
/// without copying), and the part of the shard's Fetch budget they hold until written.
#[derive(Debug)]
pub struct Fetched {
    /// The response, records left out.
    pub response: FetchResponse,
    /// Each partition's record chunks, in response order.
    pub records: Vec<Vec<Bytes>>,
    /// The record bytes' reservation (`rill.shard.fetch.bytes.max`).
    pub hold: Hold,
}

/// One requested partition, resolved.
#[derive(Debug, Clone)]
struct Want {
    topic: String,
    topic_id: Uuid,
    partition: PartitionIndex,
    fetch_offset: Offset,
    max_bytes: usize,
    /// The request's isolation level ([`Isolation::Replica`] for a follower's fetch).
    isolation: Isolation,
    /// A follower's fetch: its node id, the leader epoch it names and its last fetched epoch.
    replica: Option<(NodeId, LeaderEpoch, Option<LeaderEpoch>)>,
    /// Set when the topic is unknown: answered without touching a shard.
    error: Option<ErrorCode>,
}

impl Want {
    /// The partition asked for.
    fn tp(&self) -> TopicPartitionRef<'_> {
        TopicPartitionRef::new(&self.topic, self.partition)
    }
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
    super::Answer::Fetch(handle(broker, cx.version, &request, cx.session).await)
}

/// Whether a Fetch naming a replica comes from that broker (see `SECURITY.md`, "Replication"):
/// it arrived on the inter-broker listener and carries the replica secret the broker
/// registered with, in Rill's tagged field. Anything else (a client posing as a follower, a
/// single node, which has no followers) is refused as Kafka refuses a follower fetch without
/// CLUSTER_ACTION: TOPIC_AUTHORIZATION_FAILED on every partition, reading and moving nothing.
fn from_replica<B: Broker>(
    broker: &B,
    node: NodeId,
    request: &FetchRequest,
    session: &Session,
) -> bool {
    if !session.listener.inter_broker {
        return false;
    }
    let presented = request
        .unknown_tagged_fields
        .get(&crate::replication::wire::REPLICA_SECRET_TAG);
    match (broker.cluster(), presented) {
        (Some(cluster), Some(secret)) => cluster.is_replica(node, secret),
        _ => false,
    }
}

/// Answer Fetch (see the module doc).
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    request: &FetchRequest,
    session: &Session,
) -> Fetched {
    let Some(isolation) = Isolation::from_wire(request.isolation_level) else {
        tracing::warn!(
            isolation_level = request.isolation_level,
            "Fetch names an unknown isolation level: answered UNKNOWN_SERVER_ERROR, as Kafka"
        );
        return refuse(version, request, Isolation::INVALID_CODE);
    };
    let wants = resolve(broker, version, request, isolation, session);
    let wait = Duration::from_millis((request.max_wait_ms.max(0) as u64).min(FETCH_WAIT_MS_MAX));
    let min_bytes = request.min_bytes.max(0) as usize;
    let limit = response_limit(request.max_bytes, broker.config().fetch_max_bytes);
    let deadline = broker.now() + wait;
    let mut read = read_all(broker, &wants, limit).await;
    let mut waited = Duration::ZERO;
    loop {
        let total: usize = read.gots.iter().map(|g| bytes_of(&g.chunks)).sum();
        let any_error = read
            .gots
            .iter()
            .any(|g| !g.error.is_ok() || g.diverging.is_some());
        let now = broker.now();
        if total >= min_bytes.max(1) || any_error || now >= deadline || wants.is_empty() {
            break;
        }
        // Nothing is held while the poll waits: what was read is read again after.
        let waitable: Vec<bool> = read.gots.iter().map(|g| g.error.is_ok()).collect();
        drop(read);
        wait_for_any(broker, &wants, &waitable, deadline - now).await;
        waited += broker.now() - now;
        read = read_all(broker, &wants, limit).await;
    }
    let Read {
        gots,
        mut hold,
        cut,
    } = read;
    let (response, records, kept) = response(version, wants, gots, limit);
    if cut || kept.trimmed {
        hooks::bound_hit(Bound::FetchMaxBytes);
    }
    hold.shrink_to(kept.bytes as u64);
    let from_consumer = follower(request).is_none();
    hooks::fetch_answered(waited, from_consumer.then(|| sent(&response, &records)));
    Fetched {
        response,
        records,
        hold,
    }
}

/// The most record bytes the response may carry: the client's `max_bytes` (none if not
/// positive) and the broker's `fetch.max.bytes`, whichever is smaller.
fn response_limit(max_bytes: i32, fetch_max_bytes: usize) -> usize {
    match usize::try_from(max_bytes) {
        Ok(asked) if asked > 0 => asked.min(fetch_max_bytes),
        _ => fetch_max_bytes,
    }
}

/// Each partition's record chunks in `response`, with its topic name (for the metrics).
fn sent<'a>(
    response: &'a FetchResponse,
    records: &'a [Vec<Bytes>],
) -> impl Iterator<Item = (TopicPartitionRef<'a>, &'a [Bytes])> {
    let partitions = response.responses.iter().flat_map(|t| {
        t.partitions.iter().map(move |p| {
            TopicPartitionRef::new(t.topic.0.as_str(), PartitionIndex(p.partition_index))
        })
    });
    partitions
        .zip(records)
        .map(|(tp, chunks)| (tp, chunks.as_slice()))
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
fn refuse(version: i16, request: &FetchRequest, code: ErrorCode) -> Fetched {
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
    Fetched {
        response,
        records: vec![Vec::new(); partitions],
        hold: Hold::none(),
    }
}

fn resolve<B: Broker>(
    broker: &B,
    version: i16,
    request: &FetchRequest,
    isolation: Isolation,
    session: &Session,
) -> Vec<Want> {
    let mut wants = Vec::new();
    let replica_id = follower(request);
    let refused = replica_id.filter(|&node| !from_replica(broker, node, request, session));
    if let Some(node) = refused {
        tracing::debug!(
            replica = node.0,
            "refusing a follower fetch that does not come from that broker"
        );
    }
    for topic in &request.topics {
        let by_id = version >= 13;
        // Followers copy the internal topics and consumers read them (`crate::internal_topics::replicated`).
        let found = if by_id {
            crate::broker::readable_topic_by_id(broker, topic.topic_id)
        } else {
            let name = topic.topic.0.as_str();
            crate::broker::readable_topic(broker, name).map(|m| (name.to_string(), m))
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
                partition: PartitionIndex(p.partition),
                fetch_offset: Offset(p.fetch_offset),
                max_bytes: p.partition_max_bytes.max(0) as usize,
                isolation: match replica {
                    Some(_) => Isolation::Replica,
                    None => isolation,
                },
                replica,
                error: match refused {
                    Some(_) => Some(ErrorCode::TopicAuthorizationFailed),
                    None => error.or((!in_range).then_some(ErrorCode::UnknownTopicOrPartition)),
                },
            });
        }
    }
    wants
}

/// Every partition's outcome in request order, the bytes they hold, and whether `limit` left
/// some partitions unread.
struct Read {
    gots: Vec<Got>,
    hold: Hold,
    cut: bool,
}

/// Reads the partitions within `limit` (see the module doc). When what they may read fits
/// the reservation (the usual few partitions), all are read at once; otherwise
/// [`read_within`] hands the reservation out in request order.
async fn read_all<B: Broker>(broker: &B, wants: &[Want], limit: usize) -> Read {
    let most: usize = wants
        .iter()
        .filter(|w| w.error.is_none())
        .map(|w| claim_of(w.max_bytes.min(limit), limit))
        .fold(0, usize::saturating_add);
    let (mut hold, reserved) = reserve(broker, most.min(limit)).await;
    let (gots, cut) = if most <= reserved {
        let reads = wants
            .iter()
            .map(|w| read_one(broker, w, w.max_bytes.min(limit)));
        (join_all(reads).await, false)
    } else {
        read_within(broker, wants, reserved).await
    };
    let used: usize = gots.iter().map(|g| bytes_of(&g.chunks)).sum();
    // First batches larger than their claims: memory that exists, so it is counted.
    hold.overdraw(used.saturating_sub(reserved) as u64);
    Read { gots, hold, cut }
}

/// What a read of at most `read_max` bytes claims of a reservation that has `free` left.
fn claim_of(read_max: usize, free: usize) -> usize {
    read_max.max(CLAIM_BYTES_MIN).min(free)
}

/// Reads the partitions with something to read within `reserved` bytes, in request order,
/// each once the earlier ones leave it room. Their positions come first, all at once, so
/// partitions with nothing to read (a consumer caught up) take no room; those that find none
/// left are answered with those positions. Returns whether any was left out.
async fn read_within<B: Broker>(broker: &B, wants: &[Want], reserved: usize) -> (Vec<Got>, bool) {
    let probed = join_all(wants.iter().map(|w| probe(broker, w))).await;
    let mut gots: Vec<Option<Got>> = Vec::with_capacity(wants.len());
    let mut to_read = Vec::new();
    for (index, (got, needs_read)) in probed.into_iter().enumerate() {
        if needs_read {
            to_read.push((index, got));
            gots.push(None);
        } else {
            gots.push(Some(got));
        }
    }
    let mut in_flight = FuturesUnordered::new();
    let (mut claimed, mut used) = (0usize, 0usize);
    let mut queue = to_read.into_iter().peekable();
    loop {
        while let Some((index, _)) = queue.peek() {
            let free = reserved.saturating_sub(claimed + used);
            if free == 0 {
                break;
            }
            let want = &wants[*index];
            let read_max = want.max_bytes.min(free);
            let claim = claim_of(read_max, free);
            claimed += claim;
            let index = *index;
            queue.next();
            in_flight.push(async move { (index, claim, read_one(broker, want, read_max).await) });
        }
        let Some((index, claim, got)) = in_flight.next().await else {
            break;
        };
        claimed -= claim;
        used += bytes_of(&got.chunks);
        gots[index] = Some(got);
    }
    // Earlier data spent the reservation: the rest are answered with their positions.
    let mut cut = false;
    for (index, positions) in queue {
        gots[index] = Some(positions);
        cut = true;
    }
    let gots = gots.into_iter().map(|g| g.expect("answered")).collect();
    (gots, cut)
}

/// A partition's positions without reading it, and whether a read has anything to find
/// (records, or the error a read alone reports, such as OFFSET_OUT_OF_RANGE). A follower's
/// probe already counts as its fetch position.
async fn probe<B: Broker>(broker: &B, want: &Want) -> (Got, bool) {
    if let Some(code) = want.error {
        return (Got::empty(code, None), false);
    }
    if let Some(replica) = want.replica {
        let got = read_for_follower(broker, want, replica, 0).await;
        let behind = got
            .positions
            .is_some_and(|p| want.fetch_offset < p.log_end());
        let read = got.error.is_ok() && got.diverging.is_none() && behind;
        return (got, read);
    }
    match broker.partition(want.tp(), PartitionOp::Offsets).await {
        PartitionReply::Offsets(positions) => {
            let visible_end = match want.isolation {
                Isolation::ReadCommitted => positions.last_stable(),
                Isolation::ReadUncommitted | Isolation::Replica => positions.high_watermark(),
            };
            let got = Got::empty(ErrorCode::None, Some(positions));
            (got, want.fetch_offset != visible_end)
        }
        other => (Got::empty(other.error_code(), None), false),
    }
}

/// `bytes` of the shard's Fetch budget (at most all of it), waiting in line if need be; with
/// the bytes granted (all of them where no budget applies).
async fn reserve<B: Broker>(broker: &B, bytes: usize) -> (Hold, usize) {
    let Some(budget) = broker.fetch_budget() else {
        return (Hold::none(), bytes);
    };
    let bytes = (bytes as u64).min(budget.capacity());
    let hold = match budget.try_reserve(bytes) {
        Some(hold) => hold,
        None => {
            hooks::bound_hit(Bound::ShardFetchBytes);
            budget.reserve(bytes).await
        }
    };
    (hold, bytes as usize)
}

impl Got {
    /// A partition answered without records: `error` and what is known of its positions.
    fn empty(error: ErrorCode, positions: Option<Positions>) -> Got {
        Got {
            error,
            positions,
            chunks: Vec::new(),
            aborted: Vec::new(),
            diverging: None,
        }
    }
}

/// One partition's read of at most `max_bytes` (its first batch whole, whatever its size).
async fn read_one<B: Broker>(broker: &B, want: &Want, max_bytes: usize) -> Got {
    if let Some(code) = want.error {
        return Got::empty(code, None);
    }
    if let Some(replica) = want.replica {
        return read_for_follower(broker, want, replica, max_bytes).await;
    }
    let op = PartitionOp::Read {
        from: want.fetch_offset,
        max_bytes,
        isolation: want.isolation,
    };
    match broker.partition(want.tp(), op).await {
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
            let positions = match broker.partition(want.tp(), PartitionOp::Offsets).await {
                PartitionReply::Offsets(p) => Some(p),
                _ => None,
            };
            Got::empty(other.error_code(), positions)
        }
    }
}

/// A follower's fetch (`crate::replication`): up to the leader's log end (at most
/// `max_bytes`; 0 reads nothing), or where the follower's log diverges.
async fn read_for_follower<B: Broker>(
    broker: &B,
    want: &Want,
    (replica, current_leader_epoch, last_fetched_epoch): (NodeId, LeaderEpoch, Option<LeaderEpoch>),
    max_bytes: usize,
) -> Got {
    let op = PartitionOp::ReplicaFetch {
        replica,
        from: want.fetch_offset,
        max_bytes,
        current_leader_epoch,
        last_fetched_epoch,
    };
    match broker.partition(want.tp(), op).await {
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
        PartitionReply::ReplicaOutOfRange(positions) => {
            Got::empty(ErrorCode::OffsetOutOfRange, Some(positions))
        }
        other => Got::empty(other.error_code(), None),
    }
}

fn bytes_of(chunks: &[Bytes]) -> usize {
    chunks.iter().map(Bytes::len).sum()
}

/// Park until any partition's visible end (high watermark, read_committed: last stable
/// offset) passes its fetch position, or `wait` elapses.
/// `waitable`: per partition, whether its last read had no error.
async fn wait_for_any<B: Broker>(broker: &B, wants: &[Want], waitable: &[bool], wait: Duration) {
    let wait_ms = wait.as_millis() as u64;
    let waits: Vec<_> = wants
        .iter()
        .zip(waitable)
        .filter(|(w, ok)| w.error.is_none() && **ok)
        .map(|(w, _)| {
            let op = PartitionOp::WaitForData {
                from: w.fetch_offset,
                wait_ms,
                isolation: w.isolation,
            };
            Box::pin(broker.partition(w.tp(), op))
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

/// What a response keeps of the record bytes read.
struct Kept {
    /// Record bytes it carries.
    bytes: usize,
    /// Whether a partition's bytes were left out to keep it within the limit.
    trimmed: bool,
}

fn response(
    version: i16,
    wants: Vec<Want>,
    gots: Vec<Got>,
    budget: usize,
) -> (FetchResponse, Vec<Vec<Bytes>>, Kept) {
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    let mut records = Vec::with_capacity(wants.len());
    let mut used = 0usize;
    let mut first_data_sent = false;
    let mut trimmed = false;
    for (want, got) in wants.into_iter().zip(gots) {
        let mut size = bytes_of(&got.chunks);
        let mut chunks = got.chunks;
        if first_data_sent && used + size > budget {
            chunks.clear();
            trimmed |= size > 0;
            size = 0;
        }
        first_data_sent |= size > 0;
        used += size;
        let mut partition = partition_data(want.partition.0, got.error, got.positions);
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
    let kept = Kept {
        bytes: used,
        trimmed,
    };
    (response, records, kept)
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
    use rill_protocol::kafka_protocol::messages::BrokerId;

    /// [`handle`], with each partition's chunks put back into its `records` field (what a
    /// client decodes from the spliced response).
    async fn answer<B: Broker>(broker: &B, version: i16, request: &FetchRequest) -> FetchResponse {
        let Fetched {
            mut response,
            records,
            ..
        } = handle(broker, version, request, &Session::plaintext_default()).await;
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
        broker.append(TopicPartitionRef::new("t", PartitionIndex(0)), batch(3));
        broker.append(TopicPartitionRef::new("t", PartitionIndex(0)), batch(2));
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

    /// Issue 27: a Fetch naming a replica without that broker's secret (here a single node,
    /// which has no followers; the e2e test `test_security_replica.py` covers a cluster) is
    /// refused on every partition, unknown ones included, and reads nothing.
    #[test]
    fn a_fetch_posing_as_a_follower_is_refused_on_every_partition() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 1, Default::default()).unwrap();
        broker.append(TopicPartitionRef::new("t", PartitionIndex(0)), batch(3));
        let with_secret = request("t", &[(0, 0), (7, 0)], 0, 1)
            .with_replica_id(BrokerId(2))
            .with_unknown_tagged_field(
                crate::replication::wire::REPLICA_SECRET_TAG,
                Bytes::from(vec![0u8; 16]),
            );
        for req in [
            request("t", &[(0, 0), (7, 0)], 0, 1).with_replica_id(BrokerId(0)),
            with_secret,
        ] {
            let r = block_on(answer(&broker, 12, &req));
            let parts = &r.responses[0].partitions;
            assert_eq!(parts.len(), 2);
            for p in parts {
                assert_eq!(p.error_code, ErrorCode::TopicAuthorizationFailed.code());
                assert_eq!(p.high_watermark, -1);
                assert!(p.records.as_ref().unwrap().is_empty());
            }
        }
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
        broker.append(TopicPartitionRef::new("t", PartitionIndex(0)), batch(3));
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

    /// `request` over `partitions` partitions of "t" from offset 0, each up to `pmb` bytes.
    fn wide_request(partitions: i32, pmb: i32, max_bytes: i32) -> FetchRequest {
        let offsets: Vec<(i32, i64)> = (0..partitions).map(|p| (p, 0)).collect();
        let mut req = request("t", &offsets, 0, 1).with_max_bytes(max_bytes);
        for p in &mut req.topics[0].partitions {
            p.partition_max_bytes = pmb;
        }
        req
    }

    fn record_bytes(r: &FetchResponse) -> Vec<usize> {
        r.responses[0]
            .partitions
            .iter()
            .map(|p| p.records.as_ref().map_or(0, Bytes::len))
            .collect()
    }

    #[test]
    fn a_wide_fetch_reads_within_fetch_max_bytes_in_request_order() {
        let limit = 20 << 10;
        let mut broker = FakeBroker::with_config(|c| c.fetch_max_bytes = limit);
        let budget = crate::memory_budget::ByteBudget::new(1 << 30);
        broker.fetch_budget = Some(budget.clone());
        broker
            .topics()
            .create("t", 200, Default::default())
            .unwrap();
        for p in 0..200 {
            for _ in 0..4 {
                broker.append(TopicPartitionRef::new("t", PartitionIndex(p)), batch(100));
            }
        }
        let one = batch(100).len();
        // 2 GiB per partition, no client max: the broker's fetch.max.bytes bounds it.
        let req = wide_request(200, i32::MAX, i32::MAX);
        let fetched = block_on(handle(&broker, 12, &req, &Session::plaintext_default()));
        let mut r = fetched.response.clone();
        for (p, chunks) in r.responses[0].partitions.iter_mut().zip(&fetched.records) {
            p.records = Some(Bytes::from(chunks.concat()));
        }
        let sizes = record_bytes(&r);
        let total: usize = sizes.iter().sum();
        assert!(total <= limit, "{total} bytes over the {limit} limit");
        assert!(total > limit - one, "the limit is used, in whole batches");
        // Kafka's order: earlier partitions first, whole; then nothing.
        assert_eq!(sizes[0], 4 * one);
        let with_data = sizes.iter().take_while(|&&n| n > 0).count();
        assert!(sizes[with_data..].iter().all(|&n| n == 0), "{sizes:?}");
        // Every partition still reports its positions, read or not.
        for p in &r.responses[0].partitions {
            assert_eq!((p.error_code, p.high_watermark), (0, 400));
        }
        // The budget holds what the response carries until it is dropped (written).
        assert_eq!(budget.stats().held, total as u64);
        drop(fetched);
        assert_eq!(budget.stats().held, 0);
    }

    #[test]
    fn a_first_batch_larger_than_the_limit_is_returned_whole() {
        let mut broker = FakeBroker::with_config(|c| c.fetch_max_bytes = 100);
        let budget = crate::memory_budget::ByteBudget::new(1 << 20);
        broker.fetch_budget = Some(budget.clone());
        broker.topics().create("t", 3, Default::default()).unwrap();
        for p in 0..3 {
            broker.append(TopicPartitionRef::new("t", PartitionIndex(p)), batch(50));
        }
        let req = wide_request(3, 1 << 20, 1 << 20);
        let r = block_on(answer(&broker, 12, &req));
        // The consumer makes progress: one whole batch, however large; the rest wait.
        assert_eq!(record_bytes(&r), vec![batch(50).len(), 0, 0]);
        assert_eq!(budget.stats().held, 0, "nothing held once answered");
    }

    #[test]
    fn partitions_with_nothing_to_read_take_no_room() {
        let broker = FakeBroker::with_config(|c| c.fetch_max_bytes = 2 << 20);
        broker
            .topics()
            .create("t", 100, Default::default())
            .unwrap();
        broker.append(TopicPartitionRef::new("t", PartitionIndex(97)), batch(10));
        broker.append(TopicPartitionRef::new("t", PartitionIndex(99)), batch(10));
        // 100 partitions at 1 MiB each claim more than the 2 MiB limit, but only two have data.
        let r = block_on(answer(&broker, 12, &wide_request(100, 1 << 20, 50 << 20)));
        let sizes = record_bytes(&r);
        assert_eq!(sizes[97], batch(10).len());
        assert_eq!(sizes[99], batch(10).len());
        assert_eq!(sizes.iter().filter(|&&n| n > 0).count(), 2);
    }

    #[test]
    fn the_response_limit_is_the_smaller_of_the_clients_and_the_brokers() {
        assert_eq!(response_limit(1000, 57_671_680), 1000);
        assert_eq!(response_limit(i32::MAX, 57_671_680), 57_671_680);
        assert_eq!(response_limit(0, 500), 500, "no client limit");
        assert_eq!(response_limit(-1, 500), 500);
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
