//! Metadata at every version: a known topic, an unknown one (auto-creation off), an invalid
//! name, and auto-creation by an old version.

use rill_protocol::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use rill_protocol::kafka_protocol::messages::{ApiKey, MetadataRequest, RequestKind};

use super::{create_topic, tn, Case};
use crate::pair::Pair;

pub const CASES: &[Case] = &[
    ("metadata_known_topic", known_topic),
    ("metadata_unknown_topic", unknown_topic),
    ("metadata_invalid_name", invalid_name),
    ("metadata_auto_create", auto_create),
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
    if (8..=10).contains(&version) {
        r = r.with_include_cluster_authorized_operations(false);
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
