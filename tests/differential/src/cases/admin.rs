//! Topic and cluster administration at every version: CreateTopics (and its refusals),
//! DeleteTopics, CreatePartitions, DescribeCluster, DescribeLogDirs, AlterReplicaLogDirs,
//! ElectLeaders and the partition reassignment APIs.

use rill_protocol::kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use rill_protocol::kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use rill_protocol::kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use rill_protocol::kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic,
};
use rill_protocol::kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use rill_protocol::kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use rill_protocol::kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use rill_protocol::kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use rill_protocol::kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, ApiKey,
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeLogDirsRequest, ElectLeadersRequest, ListPartitionReassignmentsRequest, RequestKind,
    ResponseKind,
};

use super::{create_topic, produce_quiet, response, sb, tn, Case};
use crate::pair::Pair;

pub const CASES: &[Case] = &[
    ("create_topics", create_topics),
    ("create_topics_refused", create_topics_refused),
    ("delete_topics", delete_topics),
    ("create_partitions", create_partitions),
    ("describe_cluster", describe_cluster),
    ("describe_log_dirs", describe_log_dirs),
    ("alter_replica_log_dirs", alter_replica_log_dirs),
    ("elect_leaders", elect_leaders),
    ("partition_reassignments", partition_reassignments),
];

fn topic(name: &str, partitions: i32, rf: i16, configs: &[(&str, &str)]) -> CreatableTopic {
    super::creatable(name, partitions, rf, configs)
}

fn create(topics: Vec<CreatableTopic>, validate_only: bool) -> RequestKind {
    RequestKind::CreateTopics(
        CreateTopicsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(30_000)
            .with_validate_only(validate_only),
    )
}

fn create_topics(pair: &mut Pair) -> anyhow::Result<()> {
    for version in pair.versions(ApiKey::CreateTopics) {
        let name = format!("kd-create-v{version}");
        let configs = [("retention.ms", "3600000"), ("cleanup.policy", "compact")];
        let defaults = if version >= 4 { -1 } else { 2 };
        let request = create(
            vec![
                topic(&name, 2, 1, &configs),
                topic(&format!("{name}-defaults"), defaults, defaults as i16, &[]),
            ],
            false,
        );
        pair.both(version, |_| request.clone())?;
        pair.both(version, |_| request.clone())?; // already exists
        let check = create(
            vec![topic(&format!("{name}-validate"), 3, 1, &configs)],
            true,
        );
        pair.both(version, |_| check.clone())?;
    }
    Ok(())
}

fn create_topics_refused(pair: &mut Pair) -> anyhow::Result<()> {
    let assignment = CreatableTopic::default()
        .with_name(tn("kd-create-assigned"))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_assignments(vec![CreatableReplicaAssignment::default()
            .with_partition_index(0)
            .with_broker_ids(vec![(77).into()])]);
    let refused = vec![
        topic("kd-create-zero", 0, 1, &[]),
        topic("kd-create-negative", -5, 1, &[]),
        topic("kd-create-rf3", 1, 3, &[]),
        topic("kd-create-rf0", 1, 0, &[]),
        topic("kd create bad", 1, 1, &[]),
        topic("..", 1, 1, &[]),
        topic(&"y".repeat(250), 1, 1, &[]),
        topic("__consumer_offsets", 1, 1, &[]),
        topic("kd-create-unknown-config", 1, 1, &[("no.such.config", "1")]),
        topic("kd-create-bad-value", 1, 1, &[("retention.ms", "soon")]),
        assignment,
    ];
    for version in [2, 5, 7] {
        for t in &refused {
            pair.both(version, |_| create(vec![t.clone()], false))?;
        }
        // The same name twice in one request.
        let twice = vec![
            topic("kd-create-twice", 1, 1, &[]),
            topic("kd-create-twice", 1, 1, &[]),
        ];
        pair.both(version, |_| create(twice.clone(), false))?;
    }
    Ok(())
}

fn delete_topics(pair: &mut Pair) -> anyhow::Result<()> {
    for version in pair.versions(ApiKey::DeleteTopics) {
        let name = format!("kd-delete-v{version}");
        create_topic(pair, &name, 1, &[])?;
        let names = [name.as_str(), "kd-delete-missing"];
        let request = if version >= 6 {
            DeleteTopicsRequest::default().with_topics(
                names
                    .iter()
                    .map(|n| DeleteTopicState::default().with_name(Some(tn(n))))
                    .collect(),
            )
        } else {
            DeleteTopicsRequest::default().with_topic_names(names.iter().map(|n| tn(n)).collect())
        }
        .with_timeout_ms(30_000);
        pair.both(version, |_| RequestKind::DeleteTopics(request.clone()))?;
        if version >= 6 {
            let by_id = DeleteTopicsRequest::default()
                .with_topics(vec![
                    DeleteTopicState::default().with_topic_id(uuid::Uuid::from_u128(7))
                ])
                .with_timeout_ms(30_000);
            pair.both(version, |_| RequestKind::DeleteTopics(by_id.clone()))?;
        }
    }
    Ok(())
}

fn create_partitions(pair: &mut Pair) -> anyhow::Result<()> {
    for version in pair.versions(ApiKey::CreatePartitions) {
        let name = format!("kd-partitions-v{version}");
        create_topic(pair, &name, 2, &[])?;
        for (count, validate_only) in [(4, true), (4, false), (3, false), (4, false)] {
            let request = CreatePartitionsRequest::default()
                .with_topics(vec![
                    CreatePartitionsTopic::default()
                        .with_name(tn(&name))
                        .with_count(count)
                        .with_assignments(None),
                    CreatePartitionsTopic::default()
                        .with_name(tn("kd-partitions-missing"))
                        .with_count(2)
                        .with_assignments(None),
                ])
                .with_timeout_ms(30_000)
                .with_validate_only(validate_only);
            pair.both(version, |_| RequestKind::CreatePartitions(request.clone()))?;
        }
    }
    Ok(())
}

fn describe_cluster(pair: &mut Pair) -> anyhow::Result<()> {
    for version in pair.versions(ApiKey::DescribeCluster) {
        for operations in [false, true] {
            let mut request = DescribeClusterRequest::default()
                .with_include_cluster_authorized_operations(operations);
            if version >= 1 {
                request = request.with_endpoint_type(1);
            }
            pair.both(version, |_| RequestKind::DescribeCluster(request.clone()))?;
        }
    }
    Ok(())
}

fn describe_log_dirs(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-log-dirs", 2, &[])?;
    produce_quiet(pair, "kd-log-dirs", 0, 3)?;
    // Sizes on disk and the directory's bytes are the machine's, not the protocol's.
    pair.ignore(&["results[0].total_bytes", "results[0].usable_bytes"]);
    for version in pair.versions(ApiKey::DescribeLogDirs) {
        let some = DescribeLogDirsRequest::default().with_topics(Some(vec![
            DescribableLogDirTopic::default()
                .with_topic(tn("kd-log-dirs"))
                .with_partitions(vec![0, 1, 9]),
            DescribableLogDirTopic::default()
                .with_topic(tn("kd-log-dirs-missing"))
                .with_partitions(vec![0]),
        ]));
        pair.both(version, |_| RequestKind::DescribeLogDirs(some.clone()))?;
    }
    Ok(())
}

/// The log dir each broker reported, saved as `log_dir` on each side.
fn save_log_dir(pair: &mut Pair) -> anyhow::Result<()> {
    let request = DescribeLogDirsRequest::default().with_topics(Some(vec![]));
    let answers = pair.send(1, &|_| RequestKind::DescribeLogDirs(request.clone()))?;
    for (side, answer) in [&mut pair.kafka, &mut pair.rill].into_iter().zip(&answers) {
        if let Some(ResponseKind::DescribeLogDirs(r)) = response(answer) {
            if let Some(dir) = r.results.first() {
                side.state
                    .insert("log_dir".into(), dir.log_dir.as_str().to_string());
            }
        }
    }
    Ok(())
}

fn alter_replica_log_dirs(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-alter-log-dirs", 1, &[])?;
    save_log_dir(pair)?;
    // Kafka's range: Rill advertises none of it, so its answer to each is compared.
    let versions = pair.ranges[&crate::pair::Peer::Kafka]
        .get(&(ApiKey::AlterReplicaLogDirs as i16))
        .map_or(Vec::new(), |(a, b)| (*a..=*b).collect());
    for version in versions {
        for (dir, topic) in [
            (None, "kd-alter-log-dirs"),
            (Some("/nonexistent/kd"), "kd-alter-log-dirs"),
            (None, "kd-alter-log-dirs-missing"),
        ] {
            pair.both(version, |s| {
                let path = dir.map_or_else(|| s.get("log_dir", ""), str::to_string);
                RequestKind::AlterReplicaLogDirs(AlterReplicaLogDirsRequest::default().with_dirs(
                    vec![
                        AlterReplicaLogDir::default()
                            .with_path(sb(&path))
                            .with_topics(vec![AlterReplicaLogDirTopic::default()
                                .with_name(tn(topic))
                                .with_partitions(vec![0])]),
                    ],
                ))
            })?;
        }
    }
    Ok(())
}

fn elect_leaders(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-elect", 1, &[])?;
    for version in pair.versions(ApiKey::ElectLeaders) {
        let mut types = vec![0];
        if version >= 1 {
            types.push(1);
        }
        for election_type in types {
            let mut request = ElectLeadersRequest::default()
                .with_topic_partitions(Some(vec![
                    TopicPartitions::default()
                        .with_topic(tn("kd-elect"))
                        .with_partitions(vec![0, 4]),
                    TopicPartitions::default()
                        .with_topic(tn("kd-elect-missing"))
                        .with_partitions(vec![0]),
                ]))
                .with_timeout_ms(10_000);
            if version >= 1 {
                request = request.with_election_type(election_type);
            }
            pair.both(version, |_| RequestKind::ElectLeaders(request.clone()))?;
        }
    }
    Ok(())
}

fn partition_reassignments(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-reassign", 1, &[])?;
    for version in pair.versions(ApiKey::ListPartitionReassignments) {
        for topics in [
            None,
            Some(vec![ListPartitionReassignmentsTopics::default()
                .with_name(tn("kd-reassign"))
                .with_partition_indexes(vec![0, 3])]),
        ] {
            let request = ListPartitionReassignmentsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(topics);
            pair.both(version, |_| {
                RequestKind::ListPartitionReassignments(request.clone())
            })?;
        }
    }
    for version in pair.versions(ApiKey::AlterPartitionReassignments) {
        for replicas in [None, Some(vec![(42).into()])] {
            let request = AlterPartitionReassignmentsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![
                    ReassignableTopic::default()
                        .with_name(tn("kd-reassign"))
                        .with_partitions(vec![ReassignablePartition::default()
                            .with_partition_index(0)
                            .with_replicas(replicas.clone())]),
                    ReassignableTopic::default()
                        .with_name(tn("kd-reassign-missing"))
                        .with_partitions(vec![ReassignablePartition::default()
                            .with_partition_index(0)
                            .with_replicas(replicas)]),
                ]);
            pair.both(version, |_| {
                RequestKind::AlterPartitionReassignments(request.clone())
            })?;
        }
    }
    Ok(())
}
