//! The per-resource checks of `super::authz_guard`'s table: before the handler, what a request
//! may not touch is taken out of it ([`check`]); after it, the refused resources are put back
//! into the answer with Kafka's error codes, and listing answers lose what the principal may
//! not DESCRIBE ([`patch`]). Requests without side effects (OffsetFetch, ListOffsets,
//! DescribeGroups...) are filtered on the answer only.

use bytes::Bytes;
use rill_metadata::acl::Operation;
use rill_protocol::kafka_protocol::messages::*;
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::ErrorCode;

use super::authz::Access;
use super::authz_guard::refuse_whole;
use super::Answer;

/// What was taken out of a request, to be answered refused.
#[derive(Debug, Default)]
pub enum Refused {
    /// Nothing (or only the answer is filtered).
    #[default]
    Nothing,
    /// Produce: topics and their partitions, with their code.
    Produce(Vec<(TopicName, Vec<i32>)>, ErrorCode),
    /// Fetch: topics and their partitions.
    Fetch(Vec<(TopicName, Vec<i32>)>),
    /// Metadata: the named topics refused, and whether every topic was asked.
    Metadata(Vec<TopicName>, bool),
    /// OffsetCommit: topics and their partitions, with their code.
    OffsetCommit(Vec<(TopicName, Vec<i32>)>, ErrorCode),
    /// OffsetFetch: whether every topic was asked.
    OffsetFetch(bool),
    /// FindCoordinator v4: the keys refused, with their code.
    FindCoordinator(Vec<StrBytes>, ErrorCode),
    /// DeleteGroups: the groups refused.
    DeleteGroups(Vec<GroupId>),
    /// CreateTopics: the topics refused.
    CreateTopics(Vec<TopicName>),
    /// DeleteTopics: the entries refused (name, id).
    DeleteTopics(Vec<(Option<TopicName>, uuid::Uuid)>),
    /// TxnOffsetCommit, OffsetDelete, DeleteRecords: topics and partitions, with their code.
    Partitions(Vec<(TopicName, Vec<i32>)>, ErrorCode),
    /// CreatePartitions: the topics refused.
    CreatePartitions(Vec<TopicName>),
    /// AlterConfigs, IncrementalAlterConfigs: (resource type, name, code) refused.
    Configs(Vec<(i8, StrBytes, ErrorCode)>),
    /// ShareFetch, ShareAcknowledge: topics (by id) and partitions refused.
    ShareTopics(Vec<(uuid::Uuid, Vec<i32>)>),
    /// DescribeTopicPartitions: whether every topic was asked.
    DescribeTopicPartitions(bool),
    /// Answers filtered, nothing taken out (ListOffsets, OffsetForLeaderEpoch,
    /// DescribeGroups, ConsumerGroupDescribe, ListGroups).
    FilterAnswer,
}

/// A request let through with what was refused, or the whole request's answer (boxed: an
/// answer is large).
pub type Checked = Result<(RequestKind, Refused), Box<Answer>>;

/// Kafka's message for a described group whose members hold a topic the caller may not
/// DESCRIBE (KafkaApis' ConsumerGroupDescribe and ShareGroupDescribe): the group is not shown.
pub const HIDDEN_TOPICS: &str =
    "The group has described topic(s) that the client is not authorized to describe.";
const TOPIC: ErrorCode = ErrorCode::TopicAuthorizationFailed;
const GROUP: ErrorCode = ErrorCode::GroupAuthorizationFailed;
const TXN: ErrorCode = ErrorCode::TransactionalIdAuthorizationFailed;
const CLUSTER: ErrorCode = ErrorCode::ClusterAuthorizationFailed;

/// A whole request refused for want of an operation on the cluster.
pub fn cluster_denied(api: ApiKey, version: i16, body: &RequestKind) -> Answer {
    match body {
        RequestKind::WriteTxnMarkers(r) => {
            let markers = r
                .markers
                .iter()
                .map(|m| {
                    let topics = m
                        .topics
                        .iter()
                        .map(|t| {
                            let partitions = t
                                .partition_indexes
                                .iter()
                                .map(|&p| {
                                    write_txn_markers_response::WritableTxnMarkerPartitionResult::default()
                                        .with_partition_index(p)
                                        .with_error_code(CLUSTER.code())
                                })
                                .collect();
                            write_txn_markers_response::WritableTxnMarkerTopicResult::default()
                                .with_name(t.name.clone())
                                .with_partitions(partitions)
                        })
                        .collect();
                    write_txn_markers_response::WritableTxnMarkerResult::default()
                        .with_producer_id(m.producer_id)
                        .with_topics(topics)
                })
                .collect();
            Answer::body(WriteTxnMarkersResponse::default().with_markers(markers))
        }
        RequestKind::AlterUserScramCredentials(r) => {
            let results = r
                .deletions
                .iter()
                .map(|d| d.name.clone())
                .chain(r.upsertions.iter().map(|u| u.name.clone()))
                .map(|user| {
                    alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default(
                    )
                    .with_user(user)
                    .with_error_code(CLUSTER.code())
                })
                .collect();
            Answer::body(AlterUserScramCredentialsResponse::default().with_results(results))
        }
        RequestKind::DescribeUserScramCredentials(_) => Answer::body(
            DescribeUserScramCredentialsResponse::default().with_error_code(CLUSTER.code()),
        ),
        // Kafka's getErrorResponse of each: Describe without a message or entries, Alter each
        // entity with the code's message.
        RequestKind::DescribeClientQuotas(_) => Answer::body(
            DescribeClientQuotasResponse::default()
                .with_error_code(CLUSTER.code())
                .with_error_message(None)
                .with_entries(None),
        ),
        RequestKind::AlterClientQuotas(r) => Answer::body(super::alter_client_quotas::refuse_all(
            r,
            CLUSTER,
            "Cluster authorization failed.",
        )),
        _ => refuse_whole(api, version, CLUSTER),
    }
}

/// ConsumerGroupHeartbeat past its group's READ: as Kafka's KafkaApis, every subscribed name
/// must be DESCRIBE-able or the whole heartbeat is refused (a regex's matches are filtered by
/// the handler instead).
fn consumer_group_heartbeat(access: &Access<'_>, r: ConsumerGroupHeartbeatRequest) -> Checked {
    let mut names = r.subscribed_topic_names.iter().flatten();
    if names.any(|t| !access.topic(Operation::Describe, t)) {
        return Err(Box::new(Answer::body(
            ConsumerGroupHeartbeatResponse::default().with_error_code(TOPIC.code()),
        )));
    }
    Ok((RequestKind::ConsumerGroupHeartbeat(r), Refused::Nothing))
}

/// The request with what `access` may not touch taken out, or the whole request's answer.
pub fn check(access: &Access<'_>, version: i16, body: RequestKind) -> Checked {
    use Operation::*;
    let group = |api: ApiKey, id: &GroupId, op| {
        if access.group(op, id) {
            Ok(())
        } else {
            Err(Box::new(refuse_whole(api, version, GROUP)))
        }
    };
    let kind = |body: RequestKind| Ok((body, Refused::Nothing));
    match body {
        RequestKind::Produce(r) => produce(access, r),
        RequestKind::Fetch(r) => fetch(access, r),
        RequestKind::Metadata(r) => metadata(access, r),
        RequestKind::OffsetCommit(r) => offset_commit(access, r),
        RequestKind::OffsetFetch(r) => {
            if r.groups.is_empty() {
                group(ApiKey::OffsetFetch, &r.group_id, Describe)?;
            }
            let all = r.topics.is_none() && r.groups.iter().all(|g| g.topics.is_none());
            Ok((RequestKind::OffsetFetch(r), Refused::OffsetFetch(all)))
        }
        RequestKind::FindCoordinator(r) => find_coordinator(access, version, r),
        RequestKind::JoinGroup(r) => group(ApiKey::JoinGroup, &r.group_id, Read)
            .and_then(|()| kind(RequestKind::JoinGroup(r))),
        RequestKind::SyncGroup(r) => group(ApiKey::SyncGroup, &r.group_id, Read)
            .and_then(|()| kind(RequestKind::SyncGroup(r))),
        RequestKind::Heartbeat(r) => group(ApiKey::Heartbeat, &r.group_id, Read)
            .and_then(|()| kind(RequestKind::Heartbeat(r))),
        RequestKind::LeaveGroup(r) => group(ApiKey::LeaveGroup, &r.group_id, Read)
            .and_then(|()| kind(RequestKind::LeaveGroup(r))),
        RequestKind::ConsumerGroupHeartbeat(r) => {
            group(ApiKey::ConsumerGroupHeartbeat, &r.group_id, Read)?;
            consumer_group_heartbeat(access, r)
        }
        RequestKind::DeleteGroups(mut r) => {
            let (kept, refused) = split(std::mem::take(&mut r.groups_names), |g| {
                access.group(Delete, g)
            });
            r.groups_names = kept;
            Ok((RequestKind::DeleteGroups(r), Refused::DeleteGroups(refused)))
        }
        RequestKind::CreateTopics(mut r) => {
            let cluster = access.cluster(Create);
            let (kept, refused) = split(std::mem::take(&mut r.topics), |t| {
                cluster || access.topic(Create, &t.name)
            });
            r.topics = kept;
            let refused = refused.into_iter().map(|t| t.name).collect();
            Ok((RequestKind::CreateTopics(r), Refused::CreateTopics(refused)))
        }
        RequestKind::DeleteTopics(r) => delete_topics(access, r),
        body @ (RequestKind::InitProducerId(_)
        | RequestKind::EndTxn(_)
        | RequestKind::AddOffsetsToTxn(_)
        | RequestKind::AddPartitionsToTxn(_)) => transactional(access, version, body),
        body @ (RequestKind::ListOffsets(_)
        | RequestKind::OffsetForLeaderEpoch(_)
        | RequestKind::DescribeGroups(_)
        | RequestKind::ConsumerGroupDescribe(_)
        | RequestKind::ListGroups(_)
        | RequestKind::DescribeProducers(_)
        | RequestKind::DescribeTransactions(_)
        | RequestKind::ListTransactions(_)) => Ok((body, Refused::FilterAnswer)),
        body => super::authz_admin::check(access, version, body),
    }
}

/// The transactional APIs: WRITE on the transactional id (and READ on AddOffsetsToTxn's group).
fn transactional(access: &Access<'_>, version: i16, body: RequestKind) -> Checked {
    use Operation::*;
    let group = |api: ApiKey, id: &GroupId, op| {
        if access.group(op, id) {
            Ok(())
        } else {
            Err(Box::new(refuse_whole(api, version, GROUP)))
        }
    };
    let kind = |body: RequestKind| Ok((body, Refused::Nothing));
    match body {
        RequestKind::InitProducerId(r) => {
            let allowed = match &r.transactional_id {
                Some(id) if !id.is_empty() => access.transactional_id(Write, id),
                _ => {
                    access.cluster(IdempotentWrite)
                        || access.allows_any(Write, rill_metadata::acl::ResourceType::Topic)
                }
            };
            match (
                allowed,
                r.transactional_id.as_ref().is_some_and(|id| !id.is_empty()),
            ) {
                (true, _) => kind(RequestKind::InitProducerId(r)),
                (false, true) => Err(Box::new(refuse_whole(ApiKey::InitProducerId, version, TXN))),
                (false, false) => Err(Box::new(refuse_whole(
                    ApiKey::InitProducerId,
                    version,
                    CLUSTER,
                ))),
            }
        }
        RequestKind::EndTxn(r) => match access.transactional_id(Write, &r.transactional_id) {
            true => kind(RequestKind::EndTxn(r)),
            false => Err(Box::new(refuse_whole(ApiKey::EndTxn, version, TXN))),
        },
        RequestKind::AddOffsetsToTxn(r) => {
            if !access.transactional_id(Write, &r.transactional_id) {
                return Err(Box::new(refuse_whole(
                    ApiKey::AddOffsetsToTxn,
                    version,
                    TXN,
                )));
            }
            group(ApiKey::AddOffsetsToTxn, &r.group_id, Read)
                .and_then(|()| kind(RequestKind::AddOffsetsToTxn(r)))
        }
        RequestKind::AddPartitionsToTxn(r) => add_partitions_to_txn(access, version, r),
        body => kind(body),
    }
}

/// `items` split into those `keep` takes and the others, each in order.
pub(super) fn split<T>(items: Vec<T>, mut keep: impl FnMut(&T) -> bool) -> (Vec<T>, Vec<T>) {
    items.into_iter().partition(|item| keep(item))
}

fn produce(access: &Access<'_>, mut r: ProduceRequest) -> Checked {
    let txn_denied = r
        .transactional_id
        .as_ref()
        .is_some_and(|id| !id.is_empty() && !access.transactional_id(Operation::Write, id));
    // Rill creates an unknown topic on Produce too (auto.create.topics.enable): CREATE is
    // asked as Metadata asks it.
    let (kept, refused) = split(std::mem::take(&mut r.topic_data), |t| {
        !txn_denied
            && access.topic(Operation::Write, &t.name)
            && !access.would_create_unallowed(&t.name)
    });
    if txn_denied && r.acks == 0 {
        return Err(Box::new(Answer::Close));
    }
    r.topic_data = kept;
    let refused = refused
        .into_iter()
        .map(|t| (t.name, t.partition_data.iter().map(|p| p.index).collect()))
        .collect();
    let code = if txn_denied { TXN } else { TOPIC };
    Ok((RequestKind::Produce(r), Refused::Produce(refused, code)))
}

fn fetch(access: &Access<'_>, mut r: FetchRequest) -> Checked {
    // A follower's Fetch is checked by its replica secret (`handler::fetch`), not by ACLs.
    if r.replica_id.0 >= 0 || r.replica_state.replica_id.0 >= 0 {
        return Ok((RequestKind::Fetch(r), Refused::Nothing));
    }
    let (kept, refused) = split(std::mem::take(&mut r.topics), |t| {
        access.topic(Operation::Read, &t.topic)
    });
    r.topics = kept;
    let refused = refused
        .into_iter()
        .map(|t| (t.topic, t.partitions.iter().map(|p| p.partition).collect()))
        .collect();
    Ok((RequestKind::Fetch(r), Refused::Fetch(refused)))
}

fn metadata(access: &Access<'_>, mut r: MetadataRequest) -> Checked {
    let all = r.topics.as_ref().is_none_or(Vec::is_empty);
    let mut refused = Vec::new();
    if let Some(topics) = r.topics.take() {
        let auto = r.allow_auto_topic_creation;
        let (kept, denied) = split(topics, |t| {
            t.name.as_ref().is_none_or(|n| {
                access.topic(Operation::Describe, n) && !(auto && access.would_create_unallowed(n))
            })
        });
        refused = denied.into_iter().filter_map(|t| t.name).collect();
        // Every named topic refused: ask for none (an empty list would be every topic at v0).
        let emptied = !all && kept.is_empty();
        r.topics = Some(kept);
        if emptied {
            r.allow_auto_topic_creation = false;
        }
    }
    Ok((RequestKind::Metadata(r), Refused::Metadata(refused, all)))
}

fn offset_commit(access: &Access<'_>, mut r: OffsetCommitRequest) -> Checked {
    let group_ok = access.group(Operation::Read, &r.group_id);
    let (kept, refused) = split(std::mem::take(&mut r.topics), |t| {
        group_ok && access.topic(Operation::Read, &t.name)
    });
    r.topics = kept;
    let refused = refused
        .into_iter()
        .map(|t| {
            (
                t.name,
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let code = if group_ok { TOPIC } else { GROUP };
    Ok((
        RequestKind::OffsetCommit(r),
        Refused::OffsetCommit(refused, code),
    ))
}

fn find_coordinator(access: &Access<'_>, version: i16, mut r: FindCoordinatorRequest) -> Checked {
    let txn = r.key_type == 1;
    let code = if txn { TXN } else { GROUP };
    let allowed = |k: &str| match txn {
        true => access.transactional_id(Operation::Describe, k),
        false => access.group(Operation::Describe, k),
    };
    if version < 4 {
        return match allowed(&r.key) {
            true => Ok((RequestKind::FindCoordinator(r), Refused::Nothing)),
            false => Err(Box::new(refuse_whole(
                ApiKey::FindCoordinator,
                version,
                code,
            ))),
        };
    }
    let (kept, refused) = split(std::mem::take(&mut r.coordinator_keys), |k| allowed(k));
    r.coordinator_keys = kept;
    Ok((
        RequestKind::FindCoordinator(r),
        Refused::FindCoordinator(refused, code),
    ))
}

fn delete_topics(access: &Access<'_>, mut r: DeleteTopicsRequest) -> Checked {
    let delete = |name: &str| access.topic(Operation::Delete, name);
    let (kept, denied) = split(std::mem::take(&mut r.topic_names), |n| delete(n));
    r.topic_names = kept;
    let mut refused: Vec<_> = denied
        .into_iter()
        .map(|n| (Some(n), uuid::Uuid::nil()))
        .collect();
    // A topic named by id only is checked by its name, as Kafka resolves it; an unknown id is
    // the handler's to answer (UNKNOWN_TOPIC_ID).
    let (kept, denied) = split(std::mem::take(&mut r.topics), |t| match &t.name {
        Some(n) => delete(n),
        None => access.topic_name_of(t.topic_id).is_none_or(|n| delete(&n)),
    });
    r.topics = kept;
    refused.extend(denied.into_iter().map(|t| (t.name, t.topic_id)));
    Ok((RequestKind::DeleteTopics(r), Refused::DeleteTopics(refused)))
}

/// AddPartitionsToTxn v0-3 (a producer's): WRITE on its transactional id and on each topic,
/// all or nothing, as Kafka answers it; v4-5 (brokers') need CLUSTER_ACTION.
fn add_partitions_to_txn(
    access: &Access<'_>,
    version: i16,
    r: AddPartitionsToTxnRequest,
) -> Checked {
    use add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    if version >= 4 {
        return match access.cluster(Operation::ClusterAction) {
            true => Ok((RequestKind::AddPartitionsToTxn(r), Refused::Nothing)),
            false => Err(Box::new(refuse_whole(
                ApiKey::AddPartitionsToTxn,
                version,
                CLUSTER,
            ))),
        };
    }
    let txn_ok = access.transactional_id(Operation::Write, &r.v3_and_below_transactional_id);
    let topic_ok = |t: &TopicName| access.topic(Operation::Write, t);
    if txn_ok && r.v3_and_below_topics.iter().all(|t| topic_ok(&t.name)) {
        return Ok((RequestKind::AddPartitionsToTxn(r), Refused::Nothing));
    }
    let results = r
        .v3_and_below_topics
        .iter()
        .map(|t| {
            let code = match (txn_ok, topic_ok(&t.name)) {
                (false, _) => TXN,
                (true, false) => TOPIC,
                (true, true) => ErrorCode::OperationNotAttempted,
            };
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(code.code())
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(partitions)
        })
        .collect();
    Err(Box::new(Answer::body(
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
    )))
}

/// The handler's `answer` with `refused` put back and what `access` may not see taken out.
pub fn patch(access: &Access<'_>, refused: Refused, version: i16, answer: Answer) -> Answer {
    match (refused, answer) {
        (Refused::Nothing, answer) => answer,
        (Refused::Produce(refused, _), Answer::Silent) if !refused.is_empty() => Answer::Close,
        (Refused::Produce(refused, code), Answer::Body(ResponseKind::Produce(mut r))) => {
            r.responses
                .extend(refused.into_iter().map(|(name, partitions)| {
                    let partitions = partitions
                        .into_iter()
                        .map(|p| {
                            produce_response::PartitionProduceResponse::default()
                                .with_index(p)
                                .with_error_code(code.code())
                                .with_base_offset(-1)
                                .with_log_append_time_ms(-1)
                                .with_log_start_offset(-1)
                        })
                        .collect();
                    produce_response::TopicProduceResponse::default()
                        .with_name(name)
                        .with_partition_responses(partitions)
                }));
            Answer::body(r)
        }
        (Refused::Fetch(refused), Answer::Fetch(mut f)) => {
            for (name, partitions) in refused {
                let partitions: Vec<_> = partitions
                    .into_iter()
                    .map(|p| {
                        fetch_response::PartitionData::default()
                            .with_partition_index(p)
                            .with_error_code(TOPIC.code())
                            .with_high_watermark(-1)
                            .with_last_stable_offset(-1)
                            .with_log_start_offset(-1)
                    })
                    .collect();
                f.records
                    .extend(partitions.iter().map(|_| Vec::<Bytes>::new()));
                f.response.responses.push(
                    fetch_response::FetchableTopicResponse::default()
                        .with_topic(name)
                        .with_partitions(partitions),
                );
            }
            Answer::Fetch(f)
        }
        (refused, Answer::Body(body)) => Answer::Body(patch_body(access, refused, version, body)),
        (_, answer) => answer,
    }
}

fn patch_body(
    access: &Access<'_>,
    refused: Refused,
    version: i16,
    body: ResponseKind,
) -> ResponseKind {
    let _ = version;
    let describe_topic = |name: &str| access.topic(Operation::Describe, name);
    match (refused, body) {
        (Refused::Metadata(denied, all), ResponseKind::Metadata(mut r)) => {
            r.topics
                .retain(|t| !all || t.name.as_ref().is_none_or(|n| describe_topic(n)));
            for t in r.topics.iter_mut() {
                if t.name.as_ref().is_some_and(|n| !describe_topic(n)) {
                    *t = metadata_response::MetadataResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_error_code(TOPIC.code());
                }
            }
            r.topics.extend(denied.into_iter().map(|name| {
                metadata_response::MetadataResponseTopic::default()
                    .with_name(Some(name))
                    .with_error_code(TOPIC.code())
            }));
            ResponseKind::Metadata(r)
        }
        (Refused::OffsetCommit(refused, code), ResponseKind::OffsetCommit(mut r)) => {
            r.topics
                .extend(refused.into_iter().map(|(name, partitions)| {
                    let partitions = partitions
                        .into_iter()
                        .map(|p| {
                            offset_commit_response::OffsetCommitResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(code.code())
                        })
                        .collect();
                    offset_commit_response::OffsetCommitResponseTopic::default()
                        .with_name(name)
                        .with_partitions(partitions)
                }));
            ResponseKind::OffsetCommit(r)
        }
        (Refused::OffsetFetch(all), ResponseKind::OffsetFetch(mut r)) => {
            offset_fetch(access, all, &mut r);
            ResponseKind::OffsetFetch(r)
        }
        (Refused::FindCoordinator(keys, code), ResponseKind::FindCoordinator(mut r)) => {
            r.coordinators.extend(keys.into_iter().map(|key| {
                find_coordinator_response::Coordinator::default()
                    .with_key(key)
                    .with_node_id(BrokerId(-1))
                    .with_port(-1)
                    .with_error_code(code.code())
            }));
            ResponseKind::FindCoordinator(r)
        }
        (Refused::FilterAnswer, ResponseKind::DescribeConfigs(r)) => super::authz_admin::patch(
            access,
            Refused::FilterAnswer,
            ResponseKind::DescribeConfigs(r),
        ),
        (Refused::FilterAnswer, body) => filter_answer(access, body),
        (refused, body) => patch_admin(access, refused, body),
    }
}

/// DeleteGroups, CreateTopics, DeleteTopics: the refused ones answered.
fn patch_admin(access: &Access<'_>, refused: Refused, body: ResponseKind) -> ResponseKind {
    match (refused, body) {
        (Refused::DeleteGroups(groups), ResponseKind::DeleteGroups(mut r)) => {
            r.results.extend(groups.into_iter().map(|g| {
                delete_groups_response::DeletableGroupResult::default()
                    .with_group_id(g)
                    .with_error_code(GROUP.code())
            }));
            ResponseKind::DeleteGroups(r)
        }
        (Refused::CreateTopics(topics), ResponseKind::CreateTopics(mut r)) => {
            r.topics.extend(topics.into_iter().map(|name| {
                create_topics_response::CreatableTopicResult::default()
                    .with_name(name)
                    .with_error_code(TOPIC.code())
                    .with_error_message(Some(StrBytes::from_static_str("Authorization failed.")))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
            }));
            ResponseKind::CreateTopics(r)
        }
        (Refused::DeleteTopics(topics), ResponseKind::DeleteTopics(mut r)) => {
            r.responses.extend(topics.into_iter().map(|(name, id)| {
                delete_topics_response::DeletableTopicResult::default()
                    .with_name(name)
                    .with_topic_id(id)
                    .with_error_code(TOPIC.code())
            }));
            ResponseKind::DeleteTopics(r)
        }
        (refused, body) => super::authz_admin::patch(access, refused, body),
    }
}

fn offset_fetch(access: &Access<'_>, all: bool, r: &mut OffsetFetchResponse) {
    let describe_topic = |name: &str| access.topic(Operation::Describe, name);
    r.topics.retain(|t| !all || describe_topic(&t.name));
    for t in r.topics.iter_mut().filter(|t| !describe_topic(&t.name)) {
        for p in t.partitions.iter_mut() {
            p.committed_offset = -1;
            p.error_code = TOPIC.code();
        }
    }
    for g in r.groups.iter_mut() {
        if !access.group(Operation::Describe, &g.group_id) {
            g.topics.clear();
            g.error_code = GROUP.code();
            continue;
        }
        g.topics.retain(|t| !all || describe_topic(&t.name));
        for t in g.topics.iter_mut().filter(|t| !describe_topic(&t.name)) {
            for p in t.partitions.iter_mut() {
                p.committed_offset = -1;
                p.error_code = TOPIC.code();
            }
        }
    }
}

/// Answers of requests without side effects: what may not be described is refused in place.
fn filter_answer(access: &Access<'_>, body: ResponseKind) -> ResponseKind {
    let describe_topic = |name: &str| access.topic(Operation::Describe, name);
    let describe_group = |name: &str| access.group(Operation::Describe, name);
    match body {
        ResponseKind::ListOffsets(mut r) => {
            for t in r.topics.iter_mut().filter(|t| !describe_topic(&t.name)) {
                for p in t.partitions.iter_mut() {
                    *p = list_offsets_response::ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(TOPIC.code())
                        .with_timestamp(-1)
                        .with_offset(-1);
                }
            }
            ResponseKind::ListOffsets(r)
        }
        ResponseKind::OffsetForLeaderEpoch(mut r) => {
            for t in r.topics.iter_mut().filter(|t| !describe_topic(&t.topic)) {
                for p in t.partitions.iter_mut() {
                    p.error_code = TOPIC.code();
                    p.leader_epoch = -1;
                    p.end_offset = -1;
                }
            }
            ResponseKind::OffsetForLeaderEpoch(r)
        }
        ResponseKind::DescribeGroups(mut r) => {
            for g in r.groups.iter_mut().filter(|g| !describe_group(&g.group_id)) {
                *g = describe_groups_response::DescribedGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_error_code(GROUP.code());
            }
            ResponseKind::DescribeGroups(r)
        }
        ResponseKind::ConsumerGroupDescribe(mut r) => {
            use consumer_group_describe_response::DescribedGroup;
            for g in r.groups.iter_mut() {
                if !describe_group(&g.group_id) {
                    *g = DescribedGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(GROUP.code());
                    continue;
                }
                let mut topics = g.members.iter().flat_map(|m| {
                    m.assignment
                        .topic_partitions
                        .iter()
                        .chain(&m.target_assignment.topic_partitions)
                        .map(|t| &t.topic_name)
                });
                if topics.any(|t| !describe_topic(t)) {
                    *g = DescribedGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(TOPIC.code())
                        .with_error_message(Some(StrBytes::from_static_str(HIDDEN_TOPICS)));
                }
            }
            ResponseKind::ConsumerGroupDescribe(r)
        }
        ResponseKind::ListGroups(mut r) => {
            if !access.cluster(Operation::Describe) {
                r.groups.retain(|g| describe_group(&g.group_id));
            }
            ResponseKind::ListGroups(r)
        }
        body => filter_txn_answer(access, body),
    }
}

/// DescribeProducers (READ on each topic), DescribeTransactions (DESCRIBE on each id; its
/// topics only those the principal may DESCRIBE), ListTransactions (only the ids it may
/// DESCRIBE), as Kafka's handlers filter them.
fn filter_txn_answer(access: &Access<'_>, body: ResponseKind) -> ResponseKind {
    match body {
        ResponseKind::DescribeProducers(mut r) => {
            for t in r.topics.iter_mut() {
                if access.topic(Operation::Read, &t.name) {
                    continue;
                }
                for p in t.partitions.iter_mut() {
                    *p = describe_producers_response::PartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(TOPIC.code());
                }
            }
            ResponseKind::DescribeProducers(r)
        }
        ResponseKind::DescribeTransactions(mut r) => {
            for t in r.transaction_states.iter_mut() {
                if !access.transactional_id(Operation::Describe, &t.transactional_id) {
                    *t = describe_transactions_response::TransactionState::default()
                        .with_transactional_id(t.transactional_id.clone())
                        .with_error_code(TXN.code());
                    continue;
                }
                t.topics
                    .retain(|topic| access.topic(Operation::Describe, &topic.topic));
            }
            ResponseKind::DescribeTransactions(r)
        }
        ResponseKind::ListTransactions(mut r) => {
            r.transaction_states
                .retain(|t| access.transactional_id(Operation::Describe, &t.transactional_id));
            ResponseKind::ListTransactions(r)
        }
        body => super::authz_share::patch(access, Refused::FilterAnswer, body),
    }
}
