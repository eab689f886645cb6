//! DescribeLogDirs (35): the partitions this broker holds and the bytes each log takes, per log
//! directory (`kafka-log-dirs.sh`, AdminClient `describeLogDirs`).
//!
//! Rill keeps every partition in one data directory (`log.dirs` takes the first), so the answer
//! has one result. Which partitions: on a single node every partition of every topic; in a
//! cluster those whose replicas name this broker. Each size comes from the partition's owner
//! (the engine's bytes of whole batches, preallocation aside), on leaders and followers alike.
//!
//! | case                                         | answer                                  |
//! |----------------------------------------------|-----------------------------------------|
//! | `topics` null                                | every partition held here               |
//! | a topic or partition not held here           | left out (as Kafka does)                |
//! | a log that cannot be read (failed to open)   | left out; the directory gets KAFKA_STORAGE_ERROR |
//! | the directory's file system cannot be read   | KAFKA_STORAGE_ERROR, sizes -1           |
//!
//! `offset_lag` is Kafka's for a current (not future) replica: how far the log end is below
//! the high watermark, never negative.

use std::collections::BTreeMap;

use futures::future::join_all;
use rill_protocol::kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use rill_protocol::kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartition, TopicPartitionRef};

use super::{str_bytes, topic_name, Broker};
use crate::partition::ops::{PartitionOp, PartitionReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::DescribeLogDirsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer DescribeLogDirs.
pub async fn handle<B: Broker>(
    broker: &B,
    req: &DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let wanted = held_partitions(broker, req);
    let sized = join_all(wanted.iter().map(|tp| async move {
        let reply = broker.partition(tp.borrowed(), PartitionOp::LogSize).await;
        (tp.topic.as_str(), tp.partition.0, reply)
    }))
    .await;
    let mut storage_error = false;
    let mut topics: BTreeMap<&str, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for (topic, partition, reply) in sized {
        match reply {
            PartitionReply::LogSize { bytes, positions } => {
                let lag = (positions.high_watermark().0 - positions.log_end().0).max(0);
                topics.entry(topic).or_default().push(
                    DescribeLogDirsPartition::default()
                        .with_partition_index(partition)
                        .with_partition_size(i64::try_from(bytes).unwrap_or(i64::MAX))
                        .with_offset_lag(lag)
                        .with_is_future_key(false),
                );
            }
            PartitionReply::Error(ErrorCode::KafkaStorageError) => storage_error = true,
            // Deleted or moved away while we asked: not held here any more.
            other => {
                tracing::debug!(topic, partition, ?other, "log size not available");
            }
        }
    }
    // The path's resolution and the disk's statvfs ask the filesystem: off the shard's thread.
    let data_dir = broker.config().data_dir.clone();
    let (path, space) = broker
        .blocking(move || {
            let path = std::fs::canonicalize(&data_dir).unwrap_or_else(|_| data_dir.clone());
            let space = crate::capacity::disk_space(&data_dir);
            (path, space)
        })
        .await;
    let mut result = DescribeLogDirsResult::default()
        .with_log_dir(str_bytes(&path.display().to_string()))
        .with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    DescribeLogDirsTopic::default()
                        .with_name(topic_name(name))
                        .with_partitions(partitions)
                })
                .collect(),
        )
        .with_total_bytes(-1)
        .with_usable_bytes(-1);
    match space {
        Ok(space) => {
            result.total_bytes = i64::try_from(space.total_bytes).unwrap_or(i64::MAX);
            result.usable_bytes = i64::try_from(space.free_bytes).unwrap_or(i64::MAX);
        }
        Err(e) => {
            tracing::warn!(dir = %path.display(), error = %e, "log directory unreadable");
            storage_error = true;
        }
    }
    if storage_error {
        result.error_code = ErrorCode::KafkaStorageError.code();
    }
    DescribeLogDirsResponse::default().with_results(vec![result])
}

/// The (topic, partition) pairs asked for that this broker holds, in request order.
fn held_partitions<B: Broker>(broker: &B, req: &DescribeLogDirsRequest) -> Vec<TopicPartition> {
    let image = broker.cluster().map(|c| (c.image(), c.node_id()));
    let holds = |tp: TopicPartitionRef<'_>| match &image {
        None => true,
        Some((image, node)) => image
            .partition(tp.topic, tp.partition.0)
            .is_some_and(|p| p.replicas.contains(node)),
    };
    // The internal topics hold data here too (`crate::internal_topics::replicated`), as in Kafka's answer.
    let internal = |name: &str| broker.internal_topic(name);
    let counts: Vec<(String, i32)> = match &req.topics {
        None => {
            let internal_topics = broker.internal_topics();
            broker
                .topics()
                .list()
                .into_iter()
                .chain(internal_topics)
                .map(|(name, meta)| (name, meta.partitions))
                .collect()
        }
        Some(asked) => asked
            .iter()
            .filter_map(|t| {
                let name = t.topic.0.to_string();
                let meta = broker.topics().get(&name).or_else(|| internal(&name));
                meta.map(|m| (name, m.partitions))
            })
            .collect(),
    };
    let mut held = Vec::new();
    for (name, count) in counts {
        let asked: Vec<i32> = match &req.topics {
            None => (0..count).collect(),
            Some(asked) => asked
                .iter()
                .filter(|t| t.topic.0.as_str() == name)
                .flat_map(|t| t.partitions.iter().copied())
                .collect(),
        };
        for partition in asked.into_iter().map(PartitionIndex) {
            let tp = TopicPartitionRef::new(&name, partition);
            let new = !held.iter().any(|h: &TopicPartition| h.borrowed() == tp);
            if partition.is_within(count) && holds(tp) && new {
                held.push(tp.owned());
            }
        }
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::{batch, FakeBroker};
    use rill_protocol::kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;

    fn ask(topics: Option<Vec<(&str, Vec<i32>)>>) -> DescribeLogDirsRequest {
        DescribeLogDirsRequest::default().with_topics(topics.map(|ts| {
            ts.into_iter()
                .map(|(name, partitions)| {
                    DescribableLogDirTopic::default()
                        .with_topic(topic_name(name))
                        .with_partitions(partitions)
                })
                .collect()
        }))
    }

    fn sizes(response: &DescribeLogDirsResponse) -> Vec<(String, i32, i64)> {
        assert_eq!(response.results.len(), 1, "one log directory");
        response.results[0]
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.0.to_string(), p.partition_index, p.partition_size))
            })
            .collect()
    }

    #[test]
    fn every_partition_with_its_bytes_and_unknowns_left_out() {
        futures::executor::block_on(async {
            let broker = FakeBroker::new();
            broker.topics().create("a", 2, Default::default()).unwrap();
            broker.topics().create("b", 1, Default::default()).unwrap();
            let one = batch(3);
            broker.append(TopicPartitionRef::new("a", PartitionIndex(1)), one.clone());
            let batch = one.len();
            let all = handle(&broker, &ask(None)).await;
            assert_eq!(all.results[0].error_code, 0);
            assert!(all.results[0].total_bytes > 0 && all.results[0].usable_bytes >= 0);
            assert_eq!(
                sizes(&all),
                vec![
                    ("a".to_string(), 0, 0),
                    ("a".to_string(), 1, batch as i64),
                    ("b".to_string(), 0, 0)
                ]
            );
            let some = handle(
                &broker,
                &ask(Some(vec![("a", vec![1, 7, -1]), ("nope", vec![0])])),
            )
            .await;
            assert_eq!(sizes(&some), vec![("a".to_string(), 1, batch as i64)]);
            let none = handle(&broker, &ask(Some(vec![]))).await;
            assert!(sizes(&none).is_empty());
        });
    }
}
