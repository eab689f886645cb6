//! ShareFetch (78, KIP-932): a share group member's fetch. It carries the member's share
//! session (epoch 0 opens it, -1 closes it, else the session's next epoch; partitions added and
//! forgotten as in incremental fetch sessions) and acknowledgements of records it was given;
//! it answers records acquired for the member (locked for `group.share.record.lock.duration.ms`)
//! with their ranges and delivery counts.
//!
//! The group's coordinator keeps the session and every share-partition's state
//! (`crate::group::share`); this handler reads the partitions' logs between asking it where to
//! read and asking it to acquire what was read. Two members reading the same records race only
//! to the acquisition, which the coordinator serves one at a time: each record goes to one,
//! and new records to the member whose fetch has waited longest (`crate::group::share::waiters`).
//!
//! Long poll: while nothing is acquired the fetch tries again every [`RETRY_MS`] until
//! MaxWaitMs (records come back through releases and lock expiry as well as new appends).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rill_protocol::kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use rill_protocol::kafka_protocol::messages::{ShareFetchRequest, ShareFetchResponse};
use rill_protocol::record::{split, RecordBatchView};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartitionRef};

use super::Broker;
use crate::group::ops::share::{
    AckBatch, AckType, Acquired, FetchFrom, FetchedBatch, ShareAcquirePart, ShareKey,
    ShareSessionArgs, ShareSessionResult,
};
use crate::group::{GroupOp, GroupReply};
use crate::partition::ops::{Isolation, PartitionOp, PartitionReply};

/// How often a fetch that acquired nothing looks again, within its MaxWaitMs.
pub const RETRY_MS: u64 = 50;
/// Record bytes read per partition per try (Kafka's `max.partition.fetch.bytes` default).
pub const PARTITION_BYTES_MAX: usize = 1 << 20;
/// Record bytes one response holds at most, whatever MaxBytes asks.
pub const RESPONSE_BYTES_MAX: usize = 16 << 20;
/// Longest wait a fetch is given, whatever MaxWaitMs asks.
pub const WAIT_MS_MAX: u64 = 30_000;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: ShareFetchRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, request).await)
}

/// Answer ShareFetch.
pub async fn handle<B: Broker>(broker: &B, req: ShareFetchRequest) -> ShareFetchResponse {
    let group_id = req
        .group_id
        .as_ref()
        .map(|g| g.0.to_string())
        .unwrap_or_default();
    let member_id = req
        .member_id
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default();
    if group_id.is_empty() || member_id.is_empty() {
        return top_error(
            ErrorCode::InvalidRequest,
            "GroupId and MemberId must be set.",
        );
    }
    let (acks, mut ack_errors) = acknowledgements(
        req.topics.iter().flat_map(|t| {
            t.partitions.iter().map(move |p| {
                let key = (t.topic_id, PartitionIndex(p.partition_index));
                (key, &p.acknowledgement_batches)
            })
        }),
        |b| (b.first_offset, b.last_offset, &b.acknowledge_types),
    );
    if req.share_session_epoch == 0 && !(acks.is_empty() && ack_errors.is_empty()) {
        return top_error(
            ErrorCode::InvalidRequest,
            "Acknowledge data present on initial ShareFetch.",
        );
    }
    let args = session_args(&req, &member_id, acks);
    let session = match session(broker, &group_id, args).await {
        Ok(s) => s,
        Err(response) => return response,
    };
    ack_errors.extend(session.acks.iter().copied());
    let fetched = long_poll(broker, &group_id, &member_id, &session.fetch, &req).await;
    // An opening fetch answers every partition of the new session, as Kafka's full response.
    let full = if req.share_session_epoch == 0 {
        session.fetch.as_slice()
    } else {
        &[]
    };
    response(broker, session.lock_duration_ms, fetched, &ack_errors, full)
}

/// The session part of a ShareFetch: its epoch, the partitions it names and forgets, `acks`.
fn session_args(req: &ShareFetchRequest, member_id: &str, acks: Acks) -> ShareSessionArgs {
    ShareSessionArgs {
        member_id: member_id.to_string(),
        epoch: req.share_session_epoch,
        fetch: true,
        add: req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic_id, PartitionIndex(p.partition_index)))
            })
            .collect(),
        forget: req
            .forgotten_topics_data
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic_id, PartitionIndex(*p)))
            })
            .collect(),
        acks,
    }
}

/// Tries to acquire records of the session's partitions `keys` until some are acquired or
/// MaxWaitMs passes (bounded by [`WAIT_MS_MAX`]).
async fn long_poll<B: Broker>(
    broker: &B,
    group_id: &str,
    member_id: &str,
    keys: &[ShareKey],
    req: &ShareFetchRequest,
) -> Fetched {
    if keys.is_empty() {
        return Fetched::default();
    }
    let limits = Limits {
        records: usize::try_from(req.max_records)
            .unwrap_or(0)
            .clamp(1, 10_000),
        bytes: usize::try_from(req.max_bytes)
            .unwrap_or(0)
            .clamp(1, RESPONSE_BYTES_MAX),
    };
    let wait_ms = u64::try_from(req.max_wait_ms).unwrap_or(0).min(WAIT_MS_MAX);
    let deadline = broker.now() + Duration::from_millis(wait_ms);
    loop {
        let fetched = fetch_once(broker, group_id, member_id, keys, limits).await;
        if fetched.acquired_any() || broker.now() >= deadline {
            return fetched;
        }
        let left = deadline.saturating_duration_since(broker.now());
        broker
            .sleep(left.min(Duration::from_millis(RETRY_MS)))
            .await;
    }
}

/// A fetch's bounds: records acquired, record bytes returned.
#[derive(Debug, Clone, Copy)]
struct Limits {
    records: usize,
    bytes: usize,
}

/// Acknowledgement batches by share-partition.
pub type Acks = Vec<(ShareKey, Vec<AckBatch>)>;
/// An outcome by share-partition.
pub type Outcomes = Vec<(ShareKey, ErrorCode)>;

/// The acknowledgement batches of a request, by partition, with the partitions whose batches
/// are malformed (an unknown type: INVALID_REQUEST) set apart. Shared with ShareAcknowledge.
pub fn acknowledgements<'a, P, Bt: 'a>(
    partitions: impl Iterator<Item = (ShareKey, P)>,
    fields: impl Fn(&Bt) -> (i64, i64, &Vec<i8>),
) -> (Acks, Outcomes)
where
    P: IntoIterator<Item = &'a Bt>,
{
    let mut acks = Vec::new();
    let mut errors = Vec::new();
    for (key, batches) in partitions {
        let mut parsed = Vec::new();
        let mut bad = false;
        for b in batches {
            let (first, last, types) = fields(b);
            let types: Option<Vec<AckType>> =
                types.iter().map(|t| AckType::from_wire(*t)).collect();
            match types {
                Some(types) if !types.is_empty() => parsed.push(AckBatch { first, last, types }),
                _ => bad = true,
            }
        }
        if bad {
            errors.push((key, ErrorCode::InvalidRequest));
        } else if !parsed.is_empty() {
            acks.push((key, parsed));
        }
    }
    (acks, errors)
}

/// The session step at the coordinator; Err: the whole answer (a top-level error).
async fn session<B: Broker>(
    broker: &B,
    group_id: &str,
    args: ShareSessionArgs,
) -> Result<ShareSessionResult, ShareFetchResponse> {
    let result = match broker
        .group(group_id, GroupOp::ShareSession(Box::new(args)))
        .await
    {
        GroupReply::ShareSession(r) => r,
        GroupReply::Unavailable(code) => ShareSessionResult {
            error_code: code,
            ..Default::default()
        },
        other => unreachable!("share session answered with {other:?}"),
    };
    if result.error_code.is_ok() {
        return Ok(result);
    }
    let message = result.error_message.clone().unwrap_or_default();
    Err(top_error(result.error_code, &message))
}

/// What one try read and acquired, by share-partition (in session order).
#[derive(Default)]
struct Fetched {
    parts: Vec<(ShareKey, ErrorCode, Vec<Acquired>, Vec<Bytes>)>,
}

impl Fetched {
    fn acquired_any(&self) -> bool {
        self.parts.iter().any(|(_, _, a, _)| !a.is_empty())
    }
}

/// One try: where to read (the coordinator), the reads (the partitions), the acquisition (the
/// coordinator again).
async fn fetch_once<B: Broker>(
    broker: &B,
    group_id: &str,
    member_id: &str,
    keys: &[ShareKey],
    limits: Limits,
) -> Fetched {
    let plan = match broker
        .group(
            group_id,
            GroupOp::SharePlan(member_id.to_string(), keys.to_vec()),
        )
        .await
    {
        GroupReply::SharePlan(_, plan) => plan,
        _ => Vec::new(),
    };
    let mut out = Fetched::default();
    let mut parts = Vec::new();
    let mut chunks_of: Vec<(ShareKey, Vec<Bytes>)> = Vec::new();
    let mut budget = limits.bytes;
    for (key, from) in plan {
        if budget == 0 {
            break;
        }
        match read_part(broker, key, from, &mut budget).await {
            Ok(Some((part, chunks))) => {
                parts.push(part);
                chunks_of.push((key, chunks));
            }
            Ok(None) => {}
            Err(code) => out.parts.push((key, code, Vec::new(), Vec::new())),
        }
    }
    let acquired = if parts.is_empty() {
        Vec::new()
    } else {
        let op = GroupOp::ShareAcquire(member_id.to_string(), limits.records, parts);
        match broker.group(group_id, op).await {
            GroupReply::ShareAcquire(a) => a,
            _ => Vec::new(),
        }
    };
    for (key, ranges) in acquired {
        let chunks = chunks_of
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, c)| c.as_slice())
            .unwrap_or_default();
        let kept = holding(chunks, &ranges);
        out.parts.push((key, ErrorCode::None, ranges, kept));
    }
    out
}

/// Reads one share-partition from where the plan says (spending `budget`): what to acquire
/// from and the batches read; `None`: nothing to acquire.
async fn read_part<B: Broker>(
    broker: &B,
    key: ShareKey,
    from: FetchFrom,
    budget: &mut usize,
) -> Result<Option<(ShareAcquirePart, Vec<Bytes>)>, ErrorCode> {
    let Some((topic, _)) = broker.topics().by_id(key.0) else {
        return Err(ErrorCode::UnknownTopicId);
    };
    if key.1.as_usize().is_none() {
        return Err(ErrorCode::UnknownTopicOrPartition);
    }
    let tp = TopicPartitionRef::new(&topic, key.1);
    let positions = match broker.partition(tp, PartitionOp::Offsets).await {
        PartitionReply::Offsets(p) => p,
        other => return Err(other.error_code()),
    };
    let (init, at) = match from {
        FetchFrom::Nothing => return Ok(None),
        FetchFrom::Init { earliest: true } => (Some(positions.log_start()), positions.log_start()),
        FetchFrom::Init { earliest: false } => {
            (Some(positions.high_watermark()), positions.high_watermark())
        }
        FetchFrom::At(at) => (None, at.max(positions.log_start())),
    };
    let mut batches = Vec::new();
    let mut chunks = Vec::new();
    if at < positions.high_watermark() {
        let op = PartitionOp::Read {
            from: at,
            max_bytes: (*budget).min(PARTITION_BYTES_MAX),
            isolation: Isolation::ReadUncommitted,
        };
        let read = match broker.partition(tp, op).await {
            PartitionReply::Read { chunks, .. } => chunks,
            other => return Err(other.error_code()),
        };
        for chunk in read {
            *budget = budget.saturating_sub(chunk.len());
            for slice in split(chunk).flatten() {
                if let Ok(view) = RecordBatchView::new(slice.clone()) {
                    batches.push(FetchedBatch {
                        first: view.base_offset().0,
                        last: view.last_offset().0,
                        control: view.attributes().is_control(),
                    });
                    chunks.push(slice);
                }
            }
        }
    }
    if init.is_none() && batches.is_empty() {
        return Ok(None);
    }
    let part = ShareAcquirePart {
        key,
        init,
        log_start: positions.log_start(),
        batches,
    };
    Ok(Some((part, chunks)))
}

/// The batches that hold an acquired record (the client skips the rest of a batch).
fn holding(chunks: &[Bytes], ranges: &[Acquired]) -> Vec<Bytes> {
    chunks
        .iter()
        .filter(|c| {
            RecordBatchView::new(c.as_ref()).is_ok_and(|v| {
                let (first, last) = (v.base_offset().0, v.last_offset().0);
                ranges.iter().any(|r| r.first <= last && first <= r.last)
            })
        })
        .cloned()
        .collect()
}

/// The response: each partition with records, an error or an acknowledgement outcome.
fn response<B: Broker>(
    broker: &B,
    lock_duration_ms: i32,
    fetched: Fetched,
    acks: &[(ShareKey, ErrorCode)],
    full: &[ShareKey],
) -> ShareFetchResponse {
    let answered: Vec<ShareKey> = acks
        .iter()
        .map(|(k, _)| *k)
        .chain(fetched.parts.iter().map(|(k, ..)| *k))
        .collect();
    let leader = LeaderIdAndEpoch::default().with_leader_id(broker.config().node_id);
    let mut by_topic: Vec<ShareFetchableTopicResponse> = Vec::new();
    let mut put = |key: ShareKey, data: PartitionData| {
        let data = data
            .with_partition_index(key.1 .0)
            .with_current_leader(leader.clone().with_leader_epoch(leader_epoch(broker, key)));
        match by_topic.iter_mut().find(|t| t.topic_id == key.0) {
            Some(t) => match t
                .partitions
                .iter_mut()
                .find(|p| PartitionIndex(p.partition_index) == key.1)
            {
                Some(p) => {
                    p.error_code = data.error_code;
                    p.records = data.records;
                    p.acquired_records = data.acquired_records;
                }
                None => t.partitions.push(data),
            },
            None => by_topic.push(
                ShareFetchableTopicResponse::default()
                    .with_topic_id(key.0)
                    .with_partitions(vec![data]),
            ),
        }
    };
    for (key, code) in acks {
        put(
            *key,
            PartitionData::default()
                .with_acknowledge_error_code(code.code())
                .with_acknowledge_error_message(ack_message(*code)),
        );
    }
    for key in full.iter().filter(|k| !answered.contains(k)) {
        put(*key, PartitionData::default());
    }
    for (key, code, ranges, chunks) in fetched.parts {
        let records = (!chunks.is_empty()).then(|| {
            let mut all = BytesMut::with_capacity(chunks.iter().map(Bytes::len).sum());
            for c in &chunks {
                all.extend_from_slice(c);
            }
            all.freeze()
        });
        let acquired = ranges
            .iter()
            .map(|r| {
                AcquiredRecords::default()
                    .with_first_offset(r.first)
                    .with_last_offset(r.last)
                    .with_delivery_count(r.delivery_count)
            })
            .collect();
        let data = PartitionData::default()
            .with_error_code(code.code())
            .with_records(records)
            .with_acquired_records(acquired);
        // An acknowledgement outcome already there stays.
        let ack = acks.iter().find(|(k, _)| *k == key).map(|(_, c)| c.code());
        put(key, data.with_acknowledge_error_code(ack.unwrap_or(0)));
    }
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(lock_duration_ms)
        .with_responses(by_topic)
}

/// What an acknowledgement's error means, for the client (Kafka sends one too).
pub fn ack_message(code: ErrorCode) -> Option<rill_protocol::kafka_protocol::protocol::StrBytes> {
    let text = match code {
        ErrorCode::None => return None,
        ErrorCode::InvalidRecordState => {
            "The acknowledged offsets are not records this member holds."
        }
        ErrorCode::InvalidRequest => "The acknowledgement batches are malformed.",
        _ => "The acknowledgement failed.",
    };
    Some(super::str_bytes(text))
}

/// The partition's leader epoch as the response reports it.
fn leader_epoch<B: Broker>(broker: &B, key: ShareKey) -> i32 {
    broker
        .topics()
        .by_id(key.0)
        .map(|(name, _)| broker.leader_epoch(TopicPartitionRef::new(&name, key.1)).0)
        .unwrap_or(-1)
}

/// A whole-request error answer: no message, as Kafka sends none (`message` goes to the log).
fn top_error(code: ErrorCode, message: &str) -> ShareFetchResponse {
    tracing::debug!(?code, message, "share request refused");
    ShareFetchResponse::default().with_error_code(code.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_acknowledgements_are_set_apart() {
        let key = (uuid::Uuid::from_u128(1), PartitionIndex(0));
        let good = (1i64, 2i64, vec![1i8]);
        let bad = (3i64, 3i64, vec![9i8]);
        let empty = (4i64, 4i64, Vec::<i8>::new());
        let parts = [
            (key, vec![good.clone()]),
            ((key.0, PartitionIndex(1)), vec![bad]),
            ((key.0, PartitionIndex(2)), vec![empty]),
        ];
        let (acks, errors) = acknowledgements(
            parts.iter().map(|(k, b)| (*k, b.iter())),
            |b: &(i64, i64, Vec<i8>)| (b.0, b.1, &b.2),
        );
        assert_eq!(acks.len(), 1);
        assert_eq!(acks[0].1[0].types, vec![AckType::Accept]);
        assert_eq!(
            errors,
            vec![
                ((key.0, PartitionIndex(1)), ErrorCode::InvalidRequest),
                ((key.0, PartitionIndex(2)), ErrorCode::InvalidRequest)
            ]
        );
    }
}
