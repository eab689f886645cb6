//! OffsetFetch (9): a group's committed positions (all of them when `topics` is null);
//! v8+ asks for several groups in one request, each answered by its own coordinator shard.
//! v7+ `require_stable` (KIP-447): a partition with offsets pending in an open transaction is
//! answered UNSTABLE_OFFSET_COMMIT (the consumer retries) instead of the offset that
//! transaction is about to replace.

use rill_protocol::kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use rill_protocol::kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse};
use rill_protocol::ErrorCode;

use super::{str_bytes, topic_name, Broker};
use crate::group::offsets::CommittedOffset;
use crate::group::ops::TopicPartitions;
use crate::group::{GroupOp, GroupReply};

/// One group's answer: error, then (topic, partition, committed), then the partitions that are
/// unstable (offsets pending in a transaction) when the request requires stable offsets.
type Fetched = (
    ErrorCode,
    Vec<(String, i32, Option<CommittedOffset>)>,
    Vec<(String, i32)>,
);

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::OffsetFetchRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer OffsetFetch.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &OffsetFetchRequest,
) -> OffsetFetchResponse {
    if version >= 8 {
        let mut groups = Vec::with_capacity(req.groups.len());
        for g in &req.groups {
            let topics = g.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            // v9: a consumer group's member fetches at its member epoch (KIP-848).
            let member = g.member_id.as_deref().unwrap_or("");
            if version >= 9 && (!member.is_empty() || g.member_epoch != -1) {
                let check = GroupOp::CheckFetcher(member.to_string(), g.member_epoch);
                let code = match broker.group(&g.group_id.0, check).await {
                    GroupReply::CheckFetcher(code) | GroupReply::Unavailable(code) => code,
                    other => unreachable!("check answered with {other:?}"),
                };
                if !code.is_ok() {
                    groups.push(group_v8(g.group_id.clone(), (code, Vec::new(), Vec::new())));
                    continue;
                }
            }
            let fetched = fetch(broker, &g.group_id.0, topics, req.require_stable).await;
            groups.push(group_v8(g.group_id.clone(), fetched));
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let topics = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let require_stable = version >= 7 && req.require_stable;
    let (error, found, unstable) = fetch(broker, &req.group_id.0, topics, require_stable).await;
    let mut out: Vec<OffsetFetchResponseTopic> = Vec::new();
    for (topic, partition, value) in found {
        if out.last().is_none_or(|t| t.name.0.as_str() != topic) {
            out.push(OffsetFetchResponseTopic::default().with_name(topic_name(&topic)));
        }
        let pending = unstable.iter().any(|(t, p)| *t == topic && *p == partition);
        let (offset, epoch, metadata) = fields(if pending { None } else { value });
        let p = OffsetFetchResponsePartition::default()
            .with_partition_index(partition)
            .with_committed_offset(offset)
            .with_committed_leader_epoch(if version >= 5 { epoch } else { -1 })
            .with_metadata(Some(str_bytes(&metadata)))
            .with_error_code(unstable_code(pending));
        out.last_mut().expect("pushed").partitions.push(p);
    }
    OffsetFetchResponse::default()
        .with_topics(out)
        .with_error_code(if version >= 2 { error.code() } else { 0 })
}

/// A group's committed offsets; with `require_stable`, first the partitions with offsets
/// pending in a transaction (asked first: a transaction that commits in between then only
/// makes the answer more conservative, never stale).
async fn fetch<B: Broker>(
    broker: &B,
    group_id: &str,
    topics: Option<Vec<TopicPartitions>>,
    require_stable: bool,
) -> Fetched {
    let unstable = if require_stable {
        match broker
            .group(group_id, GroupOp::PendingTxn(topics.clone()))
            .await
        {
            GroupReply::PendingTxn(pending) => pending,
            GroupReply::Unavailable(code) => return (code, Vec::new(), Vec::new()),
            other => unreachable!("pending answered with {other:?}"),
        }
    } else {
        Vec::new()
    };
    match broker.group(group_id, GroupOp::Fetch(topics)).await {
        GroupReply::Fetch(error, found) => (error, found, unstable),
        GroupReply::Unavailable(code) => (code, Vec::new(), Vec::new()),
        other => unreachable!("fetch answered with {other:?}"),
    }
}

/// A partition's error: UNSTABLE_OFFSET_COMMIT while offsets are pending in a transaction.
fn unstable_code(pending: bool) -> i16 {
    if pending {
        ErrorCode::UnstableOffsetCommit.code()
    } else {
        ErrorCode::None.code()
    }
}

/// (offset, leader epoch, metadata) of a committed position; -1/-1/"" when none.
fn fields(value: Option<CommittedOffset>) -> (i64, i32, String) {
    match value {
        Some(v) => (v.offset.0, v.leader_epoch.0, v.metadata.unwrap_or_default()),
        None => (-1, -1, String::new()),
    }
}

fn group_v8(group_id: GroupId, (error, found, unstable): Fetched) -> OffsetFetchResponseGroup {
    let mut topics: Vec<OffsetFetchResponseTopics> = Vec::new();
    for (topic, partition, value) in found {
        if topics.last().is_none_or(|t| t.name.0.as_str() != topic) {
            topics.push(OffsetFetchResponseTopics::default().with_name(topic_name(&topic)));
        }
        let pending = unstable.iter().any(|(t, p)| *t == topic && *p == partition);
        let (offset, epoch, metadata) = fields(if pending { None } else { value });
        let p = OffsetFetchResponsePartitions::default()
            .with_partition_index(partition)
            .with_committed_offset(offset)
            .with_committed_leader_epoch(epoch)
            .with_metadata(Some(str_bytes(&metadata)))
            .with_error_code(unstable_code(pending));
        topics.last_mut().expect("pushed").partitions.push(p);
    }
    OffsetFetchResponseGroup::default()
        .with_group_id(group_id)
        .with_topics(topics)
        .with_error_code(error.code())
}
