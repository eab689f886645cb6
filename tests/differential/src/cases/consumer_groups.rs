//! KIP-848 consumer groups (issue 29): ConsumerGroupHeartbeat joins, heartbeats and leaves at
//! every version, its request checks (no subscription, an unknown assignor, a bad regex, a wrong
//! epoch, an unknown member), ConsumerGroupDescribe, and an OffsetCommit at a stale epoch.

use rill_protocol::kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use rill_protocol::kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use rill_protocol::kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, GroupId,
    ListGroupsRequest, OffsetCommitRequest, RequestKind, ResponseKind,
};

use super::{create_topic, response, sb, tn, Case};
use crate::pair::{Pair, Side};
use crate::wire::Answer;

pub const CASES: &[Case] = &[
    ("consumer_group_lifecycle", lifecycle),
    ("consumer_group_errors", errors),
];

const TOPIC: &str = "kd-cg";

fn gid(s: &str) -> GroupId {
    GroupId(sb(s))
}

/// A first heartbeat (epoch 0) of `member` (v0 with "": the coordinator names it).
fn join(group: &str, member: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(sb(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![tn(TOPIC)]))
        .with_topic_partitions(Some(Vec::new()))
}

/// A heartbeat at the saved member id and epoch (plus `delta`), owning what was assigned.
fn beat(side: &Side, group: &str, delta: i32) -> RequestKind {
    let owned: Vec<TopicPartitions> = side
        .state
        .get("owned")
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (id, parts) = s.split_once(':').expect("saved as id:parts");
            vec![TopicPartitions::default()
                .with_topic_id(id.parse().expect("a uuid"))
                .with_partitions(
                    parts
                        .split(',')
                        .map(|p| p.parse().expect("a partition"))
                        .collect(),
                )]
        })
        .unwrap_or_default();
    RequestKind::ConsumerGroupHeartbeat(
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(gid(group))
            .with_member_id(sb(&side.get("member", "")))
            .with_member_epoch(side.int("epoch", 0) as i32 + delta)
            .with_topic_partitions(Some(owned)),
    )
}

/// Saves each side's member id, epoch and assignment from a heartbeat answer.
fn save(pair: &mut Pair, answers: &[Answer; 2]) {
    for (side, answer) in [&mut pair.kafka, &mut pair.rill].into_iter().zip(answers) {
        if let Some(ResponseKind::ConsumerGroupHeartbeat(r)) = response(answer) {
            if let Some(id) = &r.member_id {
                side.state.insert("member".into(), id.to_string());
            }
            side.state
                .insert("epoch".into(), r.member_epoch.to_string());
            if let Some(a) = &r.assignment {
                let owned = a
                    .topic_partitions
                    .first()
                    .map(|t| {
                        let parts: Vec<String> =
                            t.partitions.iter().map(|p| p.to_string()).collect();
                        format!("{}:{}", t.topic_id, parts.join(","))
                    })
                    .unwrap_or_default();
                side.state.insert("owned".into(), owned);
            }
        }
    }
}

fn describe(group: &str) -> RequestKind {
    RequestKind::ConsumerGroupDescribe(
        ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![gid(group)])
            .with_include_authorized_operations(true),
    )
}

fn lifecycle(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, TOPIC, 2, &[])?;
    let describes: Vec<i16> = pair.versions(ApiKey::ConsumerGroupDescribe).collect();
    for version in pair.versions(ApiKey::ConsumerGroupHeartbeat) {
        let group = format!("kd-cg-{version}");
        let member = if version == 0 { "" } else { "kd-cg-member" };
        for side in [&mut pair.kafka, &mut pair.rill] {
            side.state.clear();
        }
        let answers = pair.both(version, |_| {
            RequestKind::ConsumerGroupHeartbeat(join(&group, member))
        })?;
        save(pair, &answers);
        let answers = pair.both(version, |s| beat(s, &group, 0))?;
        save(pair, &answers);
        for &v in &describes {
            pair.both(v, |_| describe(&group))?;
        }
        pair.both(5, |_| {
            RequestKind::ListGroups(
                ListGroupsRequest::default().with_types_filter(vec![sb("consumer")]),
            )
        })?;
        // A commit at an epoch the member does not have.
        pair.both(9, |s| commit(s, &group, 1))?;
        pair.both(9, |s| commit(s, &group, 0))?;
        pair.both(version, |s| beat(s, &group, 5))?; // fenced
        let answers = pair.both(version, |s| {
            let RequestKind::ConsumerGroupHeartbeat(r) = beat(s, &group, 0) else {
                unreachable!()
            };
            RequestKind::ConsumerGroupHeartbeat(r.with_member_epoch(-1))
        })?;
        save(pair, &answers);
        for &v in &describes {
            pair.both(v, |_| describe(&group))?;
        }
    }
    Ok(())
}

fn commit(side: &Side, group: &str, delta: i32) -> RequestKind {
    RequestKind::OffsetCommit(
        OffsetCommitRequest::default()
            .with_group_id(gid(group))
            .with_generation_id_or_member_epoch(side.int("epoch", 0) as i32 + delta)
            .with_member_id(sb(&side.get("member", "")))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(tn(TOPIC))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(0)])]),
    )
}

fn errors(pair: &mut Pair) -> anyhow::Result<()> {
    let group = "kd-cg-errors";
    for version in pair.versions(ApiKey::ConsumerGroupHeartbeat) {
        let member = if version == 0 { "" } else { "kd-cg-err" };
        let hb = |r: ConsumerGroupHeartbeatRequest| RequestKind::ConsumerGroupHeartbeat(r);
        pair.both(version, |_| {
            hb(join(group, member).with_subscribed_topic_names(None))
        })?;
        pair.both(version, |_| {
            hb(join(group, member).with_rebalance_timeout_ms(-1))
        })?;
        pair.both(version, |_| {
            hb(join(group, member).with_topic_partitions(None))
        })?;
        pair.both(version, |_| {
            hb(join(group, member).with_server_assignor(Some(sb("kd-none"))))
        })?;
        pair.both(version, |_| hb(join("", member)))?;
        pair.both(version, |_| {
            hb(join(group, "kd-cg-stranger")
                .with_member_epoch(3)
                .with_topic_partitions(None))
        })?;
        if version >= 1 {
            // v0 has no regex field.
            pair.both(version, |_| {
                hb(join(group, member)
                    .with_subscribed_topic_names(None)
                    .with_subscribed_topic_regex(Some(sb("kd-cg-("))))
            })?;
        }
        pair.both(version, |_| hb(join(group, member).with_member_epoch(-3)))?;
    }
    for v in pair.versions(ApiKey::ConsumerGroupDescribe) {
        pair.both(v, |_| describe("kd-cg-none"))?;
        pair.both(v, |_| describe("kd-group-errors"))?; // a classic group (groups case)
    }
    Ok(())
}
