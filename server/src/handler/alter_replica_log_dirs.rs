//! AlterReplicaLogDirs (34): move replicas between a broker's log directories (JBOD,
//! `kafka-reassign-partitions.sh --reassignment-json-file` with `log_dirs`).
//!
//! Rill keeps every partition in its one data directory, so the only move it can be asked for
//! is to the directory the replica is already in, which Kafka answers NONE (nothing to move).
//! Each partition is answered as Kafka's ReplicaManager does, in this order:
//!
//! | case                                                   | answer                        |
//! |--------------------------------------------------------|-------------------------------|
//! | the path is not this broker's data directory           | LOG_DIR_NOT_FOUND             |
//! | the topic or partition is not held here                | UNKNOWN_TOPIC_OR_PARTITION    |
//! | otherwise (the replica is already there)               | NONE                          |

use std::path::{Path, PathBuf};

use rill_protocol::kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use rill_protocol::kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse,
};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartitionRef};

use super::Broker;

/// The registry's entry point (`for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: AlterReplicaLogDirsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer AlterReplicaLogDirs.
pub async fn handle<B: Broker>(
    broker: &B,
    req: &AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    // Resolving paths asks the filesystem (symlinks): off the shard's thread, all at once.
    let data_dir = broker.config().data_dir.clone();
    let asked: Vec<String> = req.dirs.iter().map(|d| d.path.to_string()).collect();
    let here: Vec<bool> = broker
        .blocking(move || {
            let data_dir = absolute(&data_dir);
            asked
                .iter()
                .map(|p| absolute(Path::new(p)) == data_dir)
                .collect()
        })
        .await;
    let mut results = Vec::new();
    for (dir, &here) in req.dirs.iter().zip(&here) {
        for topic in &dir.topics {
            let partitions = topic
                .partitions
                .iter()
                .map(|&partition| {
                    let code = if !here {
                        ErrorCode::LogDirNotFound
                    } else if !holds(
                        broker,
                        TopicPartitionRef::new(topic.name.0.as_str(), PartitionIndex(partition)),
                    ) {
                        ErrorCode::UnknownTopicOrPartition
                    } else {
                        ErrorCode::None
                    };
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(partition)
                        .with_error_code(code.code())
                })
                .collect();
            results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(topic.name.clone())
                    .with_partitions(partitions),
            );
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}

/// The path made absolute and normalised as Kafka does (`toAbsolutePath.normalize`), and with
/// symlinks resolved where it exists.
fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| std::path::absolute(path).unwrap_or_default())
}

/// Whether this broker holds a replica of partition `tp`.
fn holds<B: Broker>(broker: &B, tp: TopicPartitionRef<'_>) -> bool {
    let Some(meta) = broker.topics().get(tp.topic) else {
        return false;
    };
    if !tp.partition.is_within(meta.partitions) {
        return false;
    }
    match broker.cluster() {
        None => true,
        Some(cluster) => cluster
            .image()
            .partition(tp.topic, tp.partition.0)
            .is_some_and(|p| p.replicas.contains(&cluster.node_id())),
    }
}
