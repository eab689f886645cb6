//! The request sequences: each case is a function of a [`Pair`] that sends the same requests to
//! both brokers (through [`Pair::both`], which compares) and sets up what it needs quietly
//! (through [`Pair::send`]). Topic names start with `kd-` and are unique per case, so cases run
//! one after another on the same two brokers.

use std::time::{Duration, Instant};

use anyhow::bail;
use bytes::Bytes;
use rill_protocol::kafka_protocol::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig,
};
use rill_protocol::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use rill_protocol::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use rill_protocol::kafka_protocol::messages::{
    CreateTopicsRequest, MetadataRequest, ProduceRequest, RequestKind, ResponseKind, TopicName,
};
use rill_protocol::kafka_protocol::protocol::StrBytes;

use crate::pair::Pair;
use crate::records::{batch, BatchSpec};
use crate::wire::Answer;

mod acls;
mod admin;
mod api_versions;
mod configs;
mod consumer_groups;
mod groups;
mod metadata;
mod offsets;
mod produce_fetch;
mod producers;
mod quotas;
mod scram;
mod share_groups;
mod transactions;

/// A case: its name and its body.
pub type Case = (&'static str, fn(&mut Pair) -> anyhow::Result<()>);

/// Every case, in the order they run.
pub fn all() -> Vec<Case> {
    [
        api_versions::CASES,
        metadata::CASES,
        produce_fetch::CASES,
        offsets::CASES,
        producers::CASES,
        groups::FIRST_USE,
        transactions::CASES,
        groups::CASES,
        consumer_groups::CASES,
        share_groups::CASES,
        admin::CASES,
        configs::CASES,
        scram::CASES,
        acls::CASES,
        quotas::CASES,
    ]
    .concat()
}

/// How long a created topic may take to have a leader on both brokers.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A `StrBytes` of `s`.
pub fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A `TopicName` of `s`.
pub fn tn(s: &str) -> TopicName {
    TopicName(sb(s))
}

/// Creates `name` on both brokers (configs as given), then waits until both have a leader for
/// every partition. Not compared: the create_topics case compares CreateTopics itself.
pub fn create_topic(
    pair: &mut Pair,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> anyhow::Result<()> {
    let topic = creatable(name, partitions, 1, configs);
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(30_000);
    for answer in pair.send(5, &|_| RequestKind::CreateTopics(request.clone()))? {
        if let Answer::Response(r) = answer {
            if let ResponseKind::CreateTopics(r) = *r {
                let code = r.topics.first().map_or(-1, |t| t.error_code);
                if code != 0 && code != 36 {
                    bail!("creating {name}: error {code}");
                }
            }
        }
    }
    wait_leaders(pair, name, partitions)
}

/// Waits until both brokers' Metadata shows a leader for each of `partitions` partitions.
pub fn wait_leaders(pair: &mut Pair, name: &str, partitions: i32) -> anyhow::Result<()> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(tn(name)))
        ]))
        .with_allow_auto_topic_creation(false);
    let deadline = Instant::now() + TOPIC_READY_TIMEOUT;
    loop {
        let answers = pair.send(9, &|_| RequestKind::Metadata(request.clone()))?;
        let ready = answers.iter().all(|a| match a {
            Answer::Response(r) => match &**r {
                ResponseKind::Metadata(m) => m.topics.iter().any(|t| {
                    t.error_code == 0
                        && t.partitions.len() == partitions as usize
                        && t.partitions
                            .iter()
                            .all(|p| p.leader_id.0 >= 0 && p.error_code == 0)
                }),
                _ => false,
            },
            _ => false,
        });
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("topic {name} has no leader on both brokers after {TOPIC_READY_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Produce request of one batch to `topic`/`partition`.
pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(tn(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

/// Produces `count` small records (one batch) to `topic`/`partition` on both, not compared.
pub fn produce_quiet(
    pair: &mut Pair,
    topic: &str,
    partition: i32,
    count: usize,
) -> anyhow::Result<()> {
    let values: Vec<Vec<u8>> = (0..count)
        .map(|i| format!("value-{i}").into_bytes())
        .collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let request = produce_request(topic, partition, batch(&refs, BatchSpec::default()), -1);
    pair.send(7, &|_| RequestKind::Produce(request.clone()))?;
    Ok(())
}

/// The response of one side, if it is of the expected kind.
pub fn response(answer: &Answer) -> Option<&ResponseKind> {
    match answer {
        Answer::Response(r) => Some(r),
        _ => None,
    }
}

/// A CreateTopics entry: `partitions` partitions, replication factor `rf`, these configs.
pub fn creatable(name: &str, partitions: i32, rf: i16, configs: &[(&str, &str)]) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(tn(name))
        .with_num_partitions(partitions)
        .with_replication_factor(rf)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(sb(k))
                        .with_value(Some(sb(v)))
                })
                .collect(),
        )
}
