//! KIP-932 share groups (issue 29, part 2): ShareGroupHeartbeat's join, heartbeat and leave and
//! its request checks, ShareGroupDescribe, and the share-session errors of ShareFetch and
//! ShareAcknowledge (no session, a wrong epoch, acknowledgements on an opening fetch, a
//! ShareAcknowledge that would open a session), on an empty topic (no record timing involved).

use std::time::{Duration, Instant};

use anyhow::bail;
use rill_protocol::kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use rill_protocol::kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use rill_protocol::kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use rill_protocol::kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use rill_protocol::kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, ApiKey, DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest, GroupId, ListGroupsRequest, RequestKind, ResponseKind,
    ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
};

use super::{create_topic, response, sb, tn, Case};
use crate::pair::{Pair, Side};
use crate::wire::Answer;

pub const CASES: &[Case] = &[
    ("share_group_lifecycle", lifecycle),
    ("share_group_errors", errors),
    ("share_group_offsets", offsets),
];

const TOPIC: &str = "kd-sg";
/// A member id as a Java client makes one (a random Kafka Uuid's text).
const MEMBER: &str = "Ww5cXIxsR9qHnmwdGbS1Mg";

fn gid(s: &str) -> GroupId {
    GroupId(sb(s))
}

fn join(group: &str, member: &str) -> ShareGroupHeartbeatRequest {
    ShareGroupHeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(sb(member))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![tn(TOPIC)]))
}

fn beat(side: &Side, group: &str, epoch_delta: i32) -> RequestKind {
    RequestKind::ShareGroupHeartbeat(
        ShareGroupHeartbeatRequest::default()
            .with_group_id(gid(group))
            .with_member_id(sb(MEMBER))
            .with_member_epoch(side.int("epoch", 0) as i32 + epoch_delta),
    )
}

/// Saves each side's epoch and assigned topic id from a heartbeat answer.
fn save(pair: &mut Pair, answers: &[Answer; 2]) {
    for (side, answer) in [&mut pair.kafka, &mut pair.rill].into_iter().zip(answers) {
        if let Some(ResponseKind::ShareGroupHeartbeat(r)) = response(answer) {
            side.state
                .insert("epoch".into(), r.member_epoch.to_string());
            if let Some(t) = r
                .assignment
                .as_ref()
                .and_then(|a| a.topic_partitions.first())
            {
                side.state.insert("topic".into(), t.topic_id.to_string());
            }
        }
    }
}

fn fetch(side: &Side, group: &str, epoch: i32, ack: bool) -> RequestKind {
    let topic = side
        .state
        .get("topic")
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    let batches = if ack {
        vec![AcknowledgementBatch::default()
            .with_first_offset(0)
            .with_last_offset(0)
            .with_acknowledge_types(vec![1])]
    } else {
        Vec::new()
    };
    RequestKind::ShareFetch(
        ShareFetchRequest::default()
            .with_group_id(Some(gid(group)))
            .with_member_id(Some(sb(MEMBER)))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(100)
            .with_batch_size(100)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(batches)])]),
    )
}

fn acknowledge(group: &str, epoch: i32) -> RequestKind {
    RequestKind::ShareAcknowledge(
        ShareAcknowledgeRequest::default()
            .with_group_id(Some(gid(group)))
            .with_member_id(Some(sb(MEMBER)))
            .with_share_session_epoch(epoch),
    )
}

fn describe(group: &str) -> RequestKind {
    RequestKind::ShareGroupDescribe(
        ShareGroupDescribeRequest::default().with_group_ids(vec![gid(group)]),
    )
}

fn lifecycle(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, TOPIC, 1, &[])?;
    let fetches: Vec<i16> = pair.versions(ApiKey::ShareFetch).collect();
    let acks: Vec<i16> = pair.versions(ApiKey::ShareAcknowledge).collect();
    let describes: Vec<i16> = pair.versions(ApiKey::ShareGroupDescribe).collect();
    for version in pair.versions(ApiKey::ShareGroupHeartbeat) {
        let group = format!("kd-sg-{version}");
        for side in [&mut pair.kafka, &mut pair.rill] {
            side.state.clear();
        }
        let answers = pair.both(version, |_| {
            RequestKind::ShareGroupHeartbeat(join(&group, MEMBER))
        })?;
        save(pair, &answers);
        // Kafka may assign on a later heartbeat (C27): beat, uncompared, until both have.
        for _ in 0..50 {
            if pair.kafka.state.contains_key("topic") && pair.rill.state.contains_key("topic") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            let answers = pair.send(version, &|s: &Side| beat(s, &group, 0))?;
            save(pair, &answers);
        }
        let answers = pair.both(version, |s| beat(s, &group, 0))?;
        save(pair, &answers);
        for &v in &describes {
            pair.both(v, |_| describe(&group))?;
        }
        pair.both(5, |_| {
            RequestKind::ListGroups(
                ListGroupsRequest::default().with_types_filter(vec![sb("share")]),
            )
        })?;
        for &v in &fetches {
            pair.both(v, |s| fetch(s, &group, 3, false))?; // no session yet
            pair.both(v, |s| fetch(s, &group, 0, true))?; // acknowledgements on an opening fetch
            pair.both(v, |s| fetch(s, &group, 0, false))?; // opens it
            pair.both(v, |s| fetch(s, &group, 7, false))?; // not the next epoch
            pair.both(v, |s| fetch(s, &group, 1, true))?; // acknowledges a record never acquired
            pair.both(v, |s| fetch(s, &group, -1, false))?; // closes it
        }
        for &v in &acks {
            pair.both(v, |_| acknowledge(&group, 0))?;
            pair.both(v, |_| acknowledge(&group, 4))?;
        }
        pair.both(version, |s| beat(s, &group, 5))?; // fenced
        let answers = pair.both(version, |s| beat(s, &group, 0).with_leave())?;
        save(pair, &answers);
        for &v in &describes {
            pair.both(v, |_| describe(&group))?;
        }
    }
    Ok(())
}

/// A leave (epoch -1) of the same member.
trait Leave {
    fn with_leave(self) -> RequestKind;
}

impl Leave for RequestKind {
    fn with_leave(self) -> RequestKind {
        match self {
            RequestKind::ShareGroupHeartbeat(r) => {
                RequestKind::ShareGroupHeartbeat(r.with_member_epoch(-1))
            }
            other => other,
        }
    }
}

fn errors(pair: &mut Pair) -> anyhow::Result<()> {
    let group = "kd-sg-errors";
    for version in pair.versions(ApiKey::ShareGroupHeartbeat) {
        let hb = |r: ShareGroupHeartbeatRequest| RequestKind::ShareGroupHeartbeat(r);
        pair.both(version, |_| {
            hb(join(group, MEMBER).with_subscribed_topic_names(None))
        })?;
        pair.both(version, |_| hb(join(group, "")))?;
        pair.both(version, |_| hb(join("", MEMBER)))?;
        pair.both(version, |_| hb(join(group, MEMBER).with_member_epoch(-3)))?;
        pair.both(version, |_| {
            hb(join(group, MEMBER).with_rack_id(Some(sb(""))))
        })?;
        // A classic group's id (the groups case made it).
        pair.both(version, |_| hb(join("kd-group-errors", MEMBER)))?;
    }
    for v in pair.versions(ApiKey::ShareGroupDescribe) {
        pair.both(v, |_| describe("kd-sg-none"))?;
        pair.both(v, |_| describe("kd-group-errors"))?;
    }
    Ok(())
}

/// The share-group offsets admin APIs (KIP-932) on a group that was never joined, at every
/// version both serve: describe (a named partition and all), alter a start offset, delete,
/// describe again.
fn offsets(pair: &mut Pair) -> anyhow::Result<()> {
    let topic = "kd-sgo";
    create_topic(pair, topic, 1, &[])?;
    let group = "kd-sgo-never";
    let describe = |topics: Option<Vec<i32>>| {
        RequestKind::DescribeShareGroupOffsets(
            DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(gid(group))
                    .with_topics(topics.map(|partitions| {
                        vec![DescribeShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(tn(topic))
                            .with_partitions(partitions)]
                    })),
            ]),
        )
    };
    let versions = pair.versions(ApiKey::DescribeShareGroupOffsets);
    wait_group_coordinator_knows(pair, *versions.end(), &|_| describe(Some(vec![0])))?;
    for version in versions {
        pair.both(version, |_| describe(Some(vec![0])))?;
        pair.both(version, |_| describe(None))?;
    }
    for version in pair.versions(ApiKey::AlterShareGroupOffsets) {
        pair.both(version, |_| {
            RequestKind::AlterShareGroupOffsets(
                AlterShareGroupOffsetsRequest::default()
                    .with_group_id(gid(group))
                    .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(tn(topic))
                        .with_partitions(vec![
                            AlterShareGroupOffsetsRequestPartition::default()
                                .with_partition_index(0)
                                .with_start_offset(0),
                        ])]),
            )
        })?;
    }
    for version in pair.versions(ApiKey::DeleteShareGroupOffsets) {
        pair.both(version, |_| {
            RequestKind::DeleteShareGroupOffsets(
                DeleteShareGroupOffsetsRequest::default()
                    .with_group_id(gid(group))
                    .with_topics(vec![
                        DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(tn(topic))
                    ]),
            )
        })?;
    }
    for version in pair.versions(ApiKey::DescribeShareGroupOffsets) {
        pair.both(version, |_| describe(Some(vec![0])))?;
    }
    Ok(())
}

/// How long Kafka's group coordinator may take to see a topic its broker already serves.
const COORDINATOR_IMAGE_TIMEOUT: Duration = Duration::from_secs(20);

/// Waits (not compared) until Kafka's answer to `describe` names the topic by its id. Kafka's
/// group coordinator reads topics from its own copy of the metadata image, published a moment
/// after the broker's Metadata shows the topic; in that window it answers the zero id.
fn wait_group_coordinator_knows(
    pair: &mut Pair,
    version: i16,
    describe: &impl Fn(&Side) -> RequestKind,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + COORDINATOR_IMAGE_TIMEOUT;
    loop {
        let [kafka, _] = pair.send(version, describe)?;
        let known = match response(&kafka) {
            Some(ResponseKind::DescribeShareGroupOffsets(r)) => r
                .groups
                .iter()
                .flat_map(|g| &g.topics)
                .all(|t| !t.topic_id.is_nil()),
            _ => false,
        };
        if known {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "Kafka's group coordinator did not see the topic in {COORDINATOR_IMAGE_TIMEOUT:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
