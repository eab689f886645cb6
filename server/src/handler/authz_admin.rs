//! The per-resource checks of `super::authz_guard`'s table for the config, partition, record
//! and transactional-offset APIs (the group and data-path ones are `super::authz_filter`'s):
//! [`check`] takes out what the principal may not touch, [`patch`] answers it refused.

use rill_metadata::acl::{Operation, ResourceType};
use rill_protocol::kafka_protocol::messages::*;
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::ErrorCode;

use super::authz::Access;
use super::authz_filter::{split, Checked, Refused};
use super::authz_guard::refuse_whole;

const TOPIC: ErrorCode = ErrorCode::TopicAuthorizationFailed;
const GROUP: ErrorCode = ErrorCode::GroupAuthorizationFailed;
const TXN: ErrorCode = ErrorCode::TransactionalIdAuthorizationFailed;
const CLUSTER: ErrorCode = ErrorCode::ClusterAuthorizationFailed;

/// Kafka's ConfigResource types: 2 topic, 4 broker, 8 broker logger, 16 client metrics,
/// 32 group.
fn config_resource(access: &Access<'_>, op: Operation, kind: i8, name: &str) -> Option<ErrorCode> {
    let (allowed, code) = match kind {
        2 => (access.allows(op, ResourceType::Topic, name), TOPIC),
        32 => (access.allows(op, ResourceType::Group, name), GROUP),
        _ => (access.cluster(op), CLUSTER),
    };
    (!allowed).then_some(code)
}

/// Topics and partitions in a refusal.
fn partitions<T>(
    topics: Vec<T>,
    of: impl Fn(T) -> (TopicName, Vec<i32>),
) -> Vec<(TopicName, Vec<i32>)> {
    topics.into_iter().map(of).collect()
}

/// TxnOffsetCommit: WRITE on the transactional id, READ on the group (else every partition
/// refused), READ on each topic.
fn txn_offset_commit(access: &Access<'_>, mut r: TxnOffsetCommitRequest) -> Checked {
    use Operation::*;
    let code = if !access.transactional_id(Write, &r.transactional_id) {
        Some(TXN)
    } else if !access.group(Read, &r.group_id) {
        Some(GROUP)
    } else {
        None
    };
    let (kept, refused) = split(std::mem::take(&mut r.topics), |t| {
        code.is_none() && access.topic(Read, &t.name)
    });
    r.topics = kept;
    let refused = partitions(refused, |t| {
        (
            t.name,
            t.partitions.iter().map(|p| p.partition_index).collect(),
        )
    });
    Ok((
        RequestKind::TxnOffsetCommit(r),
        Refused::Partitions(refused, code.unwrap_or(TOPIC)),
    ))
}

/// The request with what `access` may not touch taken out (`body` back unchanged for an API
/// checked elsewhere).
pub fn check(access: &Access<'_>, version: i16, body: RequestKind) -> Checked {
    use Operation::*;
    match body {
        RequestKind::TxnOffsetCommit(r) => txn_offset_commit(access, r),
        RequestKind::OffsetDelete(mut r) => {
            if !access.group(Delete, &r.group_id) {
                return Err(Box::new(refuse_whole(ApiKey::OffsetDelete, version, GROUP)));
            }
            let (kept, refused) = split(std::mem::take(&mut r.topics), |t| {
                access.topic(Read, &t.name)
            });
            r.topics = kept;
            let refused = partitions(refused, |t| {
                (
                    t.name,
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            });
            Ok((
                RequestKind::OffsetDelete(r),
                Refused::Partitions(refused, TOPIC),
            ))
        }
        RequestKind::DeleteRecords(mut r) => {
            let (kept, refused) = split(std::mem::take(&mut r.topics), |t| {
                access.topic(Delete, &t.name)
            });
            r.topics = kept;
            let refused = partitions(refused, |t| {
                (
                    t.name,
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            });
            Ok((
                RequestKind::DeleteRecords(r),
                Refused::Partitions(refused, TOPIC),
            ))
        }
        RequestKind::CreatePartitions(mut r) => {
            let (kept, refused) = split(std::mem::take(&mut r.topics), |t| {
                access.topic(Alter, &t.name)
            });
            r.topics = kept;
            let refused = refused.into_iter().map(|t| t.name).collect();
            Ok((
                RequestKind::CreatePartitions(r),
                Refused::CreatePartitions(refused),
            ))
        }
        body => check_configs(access, body),
    }
}

/// DescribeConfigs (answer filtered), AlterConfigs and IncrementalAlterConfigs (taken out),
/// DescribeTopicPartitions (answer filtered).
fn check_configs(access: &Access<'_>, body: RequestKind) -> Checked {
    let op = Operation::AlterConfigs;
    match body {
        RequestKind::AlterConfigs(mut r) => {
            let mut refused = Vec::new();
            r.resources.retain(|x| {
                match config_resource(access, op, x.resource_type, &x.resource_name) {
                    None => true,
                    Some(code) => {
                        refused.push((x.resource_type, x.resource_name.clone(), code));
                        false
                    }
                }
            });
            Ok((RequestKind::AlterConfigs(r), Refused::Configs(refused)))
        }
        RequestKind::IncrementalAlterConfigs(mut r) => {
            let mut refused = Vec::new();
            r.resources.retain(|x| {
                match config_resource(access, op, x.resource_type, &x.resource_name) {
                    None => true,
                    Some(code) => {
                        refused.push((x.resource_type, x.resource_name.clone(), code));
                        false
                    }
                }
            });
            Ok((
                RequestKind::IncrementalAlterConfigs(r),
                Refused::Configs(refused),
            ))
        }
        RequestKind::DescribeTopicPartitions(r) => {
            let all = r.topics.is_empty();
            Ok((
                RequestKind::DescribeTopicPartitions(r),
                Refused::DescribeTopicPartitions(all),
            ))
        }
        body @ RequestKind::DescribeConfigs(_) => Ok((body, Refused::FilterAnswer)),
        body => super::authz_share::check(access, body),
    }
}

fn config_result<T: Default>(
    set: impl Fn(T, i16, Option<StrBytes>, i8, StrBytes) -> T,
    (kind, name, code): (i8, StrBytes, ErrorCode),
) -> T {
    set(T::default(), code.code(), None, kind, name)
}

/// The answer with the refused resources put back (`body` unchanged for other APIs).
pub fn patch(access: &Access<'_>, refused: Refused, body: ResponseKind) -> ResponseKind {
    match (refused, body) {
        (Refused::Partitions(refused, code), ResponseKind::TxnOffsetCommit(mut r)) => {
            r.topics.extend(refused.into_iter().map(|(name, ps)| {
                txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
                    .with_name(name)
                    .with_partitions(ps.into_iter().map(|p| {
                        txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                            .with_partition_index(p)
                            .with_error_code(code.code())
                    }).collect())
            }));
            ResponseKind::TxnOffsetCommit(r)
        }
        (Refused::Partitions(refused, code), ResponseKind::OffsetDelete(mut r)) => {
            r.topics.extend(refused.into_iter().map(|(name, ps)| {
                offset_delete_response::OffsetDeleteResponseTopic::default()
                    .with_name(name)
                    .with_partitions(
                        ps.into_iter()
                            .map(|p| {
                                offset_delete_response::OffsetDeleteResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_error_code(code.code())
                            })
                            .collect(),
                    )
            }));
            ResponseKind::OffsetDelete(r)
        }
        (Refused::Partitions(refused, code), ResponseKind::DeleteRecords(mut r)) => {
            r.topics.extend(refused.into_iter().map(|(name, ps)| {
                delete_records_response::DeleteRecordsTopicResult::default()
                    .with_name(name)
                    .with_partitions(
                        ps.into_iter()
                            .map(|p| {
                                delete_records_response::DeleteRecordsPartitionResult::default()
                                    .with_partition_index(p)
                                    .with_low_watermark(-1)
                                    .with_error_code(code.code())
                            })
                            .collect(),
                    )
            }));
            ResponseKind::DeleteRecords(r)
        }
        (Refused::CreatePartitions(topics), ResponseKind::CreatePartitions(mut r)) => {
            r.results.extend(topics.into_iter().map(|name| {
                create_partitions_response::CreatePartitionsTopicResult::default()
                    .with_name(name)
                    .with_error_code(TOPIC.code())
            }));
            ResponseKind::CreatePartitions(r)
        }
        (refused, body) => patch_configs(access, refused, body),
    }
}

fn patch_configs(access: &Access<'_>, refused: Refused, body: ResponseKind) -> ResponseKind {
    match (refused, body) {
        (Refused::Configs(refused), ResponseKind::AlterConfigs(mut r)) => {
            use alter_configs_response::AlterConfigsResourceResponse as R;
            r.responses.extend(refused.into_iter().map(|x| {
                config_result(
                    |r: R, c, m, k, n| {
                        r.with_error_code(c)
                            .with_error_message(m)
                            .with_resource_type(k)
                            .with_resource_name(n)
                    },
                    x,
                )
            }));
            ResponseKind::AlterConfigs(r)
        }
        (Refused::Configs(refused), ResponseKind::IncrementalAlterConfigs(mut r)) => {
            use incremental_alter_configs_response::AlterConfigsResourceResponse as R;
            r.responses.extend(refused.into_iter().map(|x| {
                config_result(
                    |r: R, c, m, k, n| {
                        r.with_error_code(c)
                            .with_error_message(m)
                            .with_resource_type(k)
                            .with_resource_name(n)
                    },
                    x,
                )
            }));
            ResponseKind::IncrementalAlterConfigs(r)
        }
        (Refused::FilterAnswer, ResponseKind::DescribeConfigs(mut r)) => {
            for x in r.results.iter_mut() {
                let op = Operation::DescribeConfigs;
                if let Some(code) = config_resource(access, op, x.resource_type, &x.resource_name) {
                    *x = describe_configs_response::DescribeConfigsResult::default()
                        .with_error_code(code.code())
                        .with_resource_type(x.resource_type)
                        .with_resource_name(x.resource_name.clone());
                }
            }
            ResponseKind::DescribeConfigs(r)
        }
        (Refused::DescribeTopicPartitions(all), ResponseKind::DescribeTopicPartitions(mut r)) => {
            let describe =
                |t: &describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic| {
                    t.name
                        .as_ref()
                        .is_none_or(|n| access.topic(Operation::Describe, n))
                };
            if all {
                r.topics.retain(describe);
            }
            for t in r.topics.iter_mut().filter(|t| !describe(t)) {
                *t = describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_error_code(TOPIC.code());
            }
            ResponseKind::DescribeTopicPartitions(r)
        }
        (refused, body) => super::authz_share::patch(access, refused, body),
    }
}
