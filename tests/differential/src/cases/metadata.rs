//! Metadata at every version: a known topic, an unknown one (auto-creation off), an invalid
//! name, and auto-creation by an old version; DescribeTopicPartitions (KIP-966's paged
//! describe) with a partition limit that cuts a topic, its cursor, and unknown names.

use rill_protocol::kafka_protocol::messages::describe_topic_partitions_request::{
    Cursor, TopicRequest,
};
use rill_protocol::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use rill_protocol::kafka_protocol::messages::{
    ApiKey, DescribeTopicPartitionsRequest, MetadataRequest, RequestKind,
};

use super::{create_topic, tn, Case};
use crate::pair::Pair;

pub const CASES: &[Case] = &[
    ("metadata_known_topic", known_topic),
    ("metadata_unknown_topic", unknown_topic),
    ("metadata_invalid_name", invalid_name),
    ("metadata_auto_create", auto_create),
    ("describe_topic_partitions", describe_topic_partitions),
];

fn request(names: &[&str], auto_create: bool, version: i16) -> MetadataRequest {
    let topics = names
        .iter()
        .map(|n| MetadataRequestTopic::default().with_name(Some(tn(n))))
        .collect();
    let mut r = MetadataRequest::default().with_topics(Some(topics));
    if version >= 4 {
        r = r.with_allow_auto_topic_creation(auto_create);
    }
    // KIP-430: both authorized-operations fields asked for, where the version has them.
    if (8..=10).contains(&version) {
        r = r.with_include_cluster_authorized_operations(true);
    }
    if version >= 8 {
        r = r.with_include_topic_authorized_operations(true);
    }
    r
}

fn known_topic(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-meta", 3, &[])?;
    for version in pair.versions(ApiKey::Metadata) {
        pair.both(version, |_| {
            RequestKind::Metadata(request(&["kd-meta"], false, version))
        })?;
    }
    Ok(())
}

fn unknown_topic(pair: &mut Pair) -> anyhow::Result<()> {
    for version in pair.versions(ApiKey::Metadata).filter(|v| *v >= 4) {
        pair.both(version, |_| {
            RequestKind::Metadata(request(&["kd-nope"], false, version))
        })?;
    }
    Ok(())
}

fn invalid_name(pair: &mut Pair) -> anyhow::Result<()> {
    for version in pair.versions(ApiKey::Metadata).filter(|v| *v >= 4) {
        let names = ["kd bad name!", &"x".repeat(250)];
        pair.both(version, |_| {
            RequestKind::Metadata(request(&names, true, version))
        })?;
    }
    Ok(())
}

/// Metadata v1 (no allow flag: auto-creation follows the broker's setting, on by default).
fn auto_create(pair: &mut Pair) -> anyhow::Result<()> {
    pair.both(1, |_| RequestKind::Metadata(request(&["kd-auto"], true, 1)))?;
    super::wait_leaders(pair, "kd-auto", 1)?;
    pair.both(1, |_| RequestKind::Metadata(request(&["kd-auto"], true, 1)))?;
    Ok(())
}

/// Every version: two topics (one unknown) under a limit of 2 partitions, which cuts the known
/// topic of 3, then the page its cursor starts, then a cursor naming an unknown topic.
fn describe_topic_partitions(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-dtp", 3, &[])?;
    let topics = || {
        ["kd-dtp", "kd-dtp-nope"]
            .iter()
            .map(|n| TopicRequest::default().with_name(tn(n)))
            .collect::<Vec<_>>()
    };
    let cursor = |topic: &str, partition: i32| {
        Some(
            Cursor::default()
                .with_topic_name(tn(topic))
                .with_partition_index(partition),
        )
    };
    for version in pair.versions(ApiKey::DescribeTopicPartitions) {
        for (limit, at) in [
            (2, None),
            (2, cursor("kd-dtp", 2)),
            (2000, cursor("kd-dtp-nope", 0)),
        ] {
            let request = DescribeTopicPartitionsRequest::default()
                .with_topics(topics())
                .with_response_partition_limit(limit)
                .with_cursor(at);
            pair.both(version, |_| {
                RequestKind::DescribeTopicPartitions(request.clone())
            })?;
        }
    }
    Ok(())
}
