//! The per-resource checks of `super::authz_guard`'s table for the share-group APIs (KIP-932),
//! as Kafka 4's `KafkaApis` checks them: READ on the share group for its heartbeat, fetch and
//! acknowledge, and READ on each topic fetched or acknowledged (named by id: resolved through
//! the topic registry); DESCRIBE on each group described; ALTER / DELETE on the group for its
//! offsets, READ on each topic.

use rill_metadata::acl::Operation;
use rill_protocol::kafka_protocol::messages::*;
use rill_protocol::ErrorCode;
use uuid::Uuid;

use super::authz::Access;
use super::authz_filter::{Checked, Refused};
use super::Answer;

const TOPIC: ErrorCode = ErrorCode::TopicAuthorizationFailed;
const GROUP: ErrorCode = ErrorCode::GroupAuthorizationFailed;

fn refused(answer: impl Into<ResponseKind>) -> Checked {
    Err(Box::new(Answer::body(answer)))
}

/// Topics by id the principal may not READ (unknown ids are left to the handler).
fn unreadable(access: &Access<'_>, id: Uuid) -> bool {
    access
        .topic_name_of(id)
        .is_some_and(|name| !access.topic(Operation::Read, &name))
}

/// The share-group requests with what `access` may not touch taken out.
pub fn check(access: &Access<'_>, body: RequestKind) -> Checked {
    use Operation::*;
    let group_ok = |g: &Option<GroupId>| g.as_ref().is_none_or(|g| access.group(Read, g));
    match body {
        RequestKind::ShareGroupHeartbeat(r) => {
            if !access.group(Read, &r.group_id) {
                return refused(
                    ShareGroupHeartbeatResponse::default().with_error_code(GROUP.code()),
                );
            }
            let topics = r.subscribed_topic_names.iter().flatten();
            if topics.clone().any(|t| !access.topic(Describe, t)) {
                return refused(
                    ShareGroupHeartbeatResponse::default().with_error_code(TOPIC.code()),
                );
            }
            Ok((RequestKind::ShareGroupHeartbeat(r), Refused::Nothing))
        }
        RequestKind::ShareFetch(mut r) => {
            if !group_ok(&r.group_id) {
                return refused(ShareFetchResponse::default().with_error_code(GROUP.code()));
            }
            let (denied, kept) = std::mem::take(&mut r.topics)
                .into_iter()
                .partition(|t| unreadable(access, t.topic_id));
            r.topics = kept;
            let denied: Vec<_> = denied
                .into_iter()
                .map(|t| {
                    (
                        t.topic_id,
                        t.partitions.iter().map(|p| p.partition_index).collect(),
                    )
                })
                .collect();
            Ok((RequestKind::ShareFetch(r), Refused::ShareTopics(denied)))
        }
        RequestKind::ShareAcknowledge(mut r) => {
            if !group_ok(&r.group_id) {
                return refused(ShareAcknowledgeResponse::default().with_error_code(GROUP.code()));
            }
            let (denied, kept) = std::mem::take(&mut r.topics)
                .into_iter()
                .partition(|t| unreadable(access, t.topic_id));
            r.topics = kept;
            let denied: Vec<_> = denied
                .into_iter()
                .map(|t| {
                    (
                        t.topic_id,
                        t.partitions.iter().map(|p| p.partition_index).collect(),
                    )
                })
                .collect();
            Ok((
                RequestKind::ShareAcknowledge(r),
                Refused::ShareTopics(denied),
            ))
        }
        body => check_offsets(access, body),
    }
}

/// The share groups' offset APIs, and ShareGroupDescribe (its answer filtered).
fn check_offsets(access: &Access<'_>, body: RequestKind) -> Checked {
    use Operation::*;
    match body {
        RequestKind::AlterShareGroupOffsets(mut r) => {
            if !access.group(Alter, &r.group_id) {
                return refused(
                    AlterShareGroupOffsetsResponse::default().with_error_code(GROUP.code()),
                );
            }
            let (kept, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
                .into_iter()
                .partition(|t| access.topic(Read, &t.topic_name));
            r.topics = kept;
            let denied = denied
                .into_iter()
                .map(|t| {
                    (
                        t.topic_name,
                        t.partitions.iter().map(|p| p.partition_index).collect(),
                    )
                })
                .collect();
            Ok((
                RequestKind::AlterShareGroupOffsets(r),
                Refused::Partitions(denied, TOPIC),
            ))
        }
        RequestKind::DeleteShareGroupOffsets(mut r) => {
            if !access.group(Delete, &r.group_id) {
                return refused(
                    DeleteShareGroupOffsetsResponse::default().with_error_code(GROUP.code()),
                );
            }
            let (kept, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
                .into_iter()
                .partition(|t| access.topic(Read, &t.topic_name));
            r.topics = kept;
            let denied = denied
                .into_iter()
                .map(|t| (t.topic_name, Vec::new()))
                .collect();
            Ok((
                RequestKind::DeleteShareGroupOffsets(r),
                Refused::Partitions(denied, TOPIC),
            ))
        }
        body @ (RequestKind::ShareGroupDescribe(_) | RequestKind::DescribeShareGroupOffsets(_)) => {
            Ok((body, Refused::FilterAnswer))
        }
        body => Ok((body, Refused::Nothing)),
    }
}

/// The share-group answers with the refused resources put back, or filtered.
pub fn patch(access: &Access<'_>, refused: Refused, body: ResponseKind) -> ResponseKind {
    match (refused, body) {
        (Refused::ShareTopics(denied), ResponseKind::ShareFetch(mut r)) => {
            r.responses
                .extend(denied.into_iter().map(|(id, partitions)| {
                    share_fetch_response::ShareFetchableTopicResponse::default()
                        .with_topic_id(id)
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|p| {
                                    share_fetch_response::PartitionData::default()
                                        .with_partition_index(p)
                                        .with_error_code(TOPIC.code())
                                })
                                .collect(),
                        )
                }));
            ResponseKind::ShareFetch(r)
        }
        (Refused::ShareTopics(denied), ResponseKind::ShareAcknowledge(mut r)) => {
            r.responses
                .extend(denied.into_iter().map(|(id, partitions)| {
                    share_acknowledge_response::ShareAcknowledgeTopicResponse::default()
                        .with_topic_id(id)
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|p| {
                                    share_acknowledge_response::PartitionData::default()
                                        .with_partition_index(p)
                                        .with_error_code(TOPIC.code())
                                })
                                .collect(),
                        )
                }));
            ResponseKind::ShareAcknowledge(r)
        }
        (Refused::Partitions(denied, code), ResponseKind::AlterShareGroupOffsets(mut r)) => {
            r.responses.extend(denied.into_iter().map(|(name, partitions)| {
                alter_share_group_offsets_response::AlterShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(name)
                    .with_partitions(partitions.into_iter().map(|p| {
                        alter_share_group_offsets_response::AlterShareGroupOffsetsResponsePartition::default()
                            .with_partition_index(p)
                            .with_error_code(code.code())
                    }).collect())
            }));
            ResponseKind::AlterShareGroupOffsets(r)
        }
        (Refused::Partitions(denied, code), ResponseKind::DeleteShareGroupOffsets(mut r)) => {
            r.responses.extend(denied.into_iter().map(|(name, _)| {
                delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(name)
                    .with_error_code(code.code())
            }));
            ResponseKind::DeleteShareGroupOffsets(r)
        }
        (refused, body) => patch_described(access, refused, body),
    }
}

/// ShareGroupDescribe and DescribeShareGroupOffsets: what may not be described refused in place.
fn patch_described(access: &Access<'_>, refused: Refused, body: ResponseKind) -> ResponseKind {
    use Operation::*;
    match (refused, body) {
        (Refused::FilterAnswer, ResponseKind::ShareGroupDescribe(mut r)) => {
            use share_group_describe_response::DescribedGroup;
            for g in r.groups.iter_mut() {
                if !access.group(Describe, &g.group_id) {
                    *g = DescribedGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(GROUP.code());
                    continue;
                }
                let mut topics = g
                    .members
                    .iter()
                    .flat_map(|m| m.assignment.topic_partitions.iter().map(|t| &t.topic_name));
                if topics.any(|t| !access.topic(Describe, t)) {
                    *g = DescribedGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(TOPIC.code())
                        .with_error_message(Some(
                            rill_protocol::kafka_protocol::protocol::StrBytes::from_static_str(
                                super::authz_filter::HIDDEN_TOPICS,
                            ),
                        ));
                }
            }
            ResponseKind::ShareGroupDescribe(r)
        }
        (Refused::FilterAnswer, ResponseKind::DescribeShareGroupOffsets(mut r)) => {
            for g in r.groups.iter_mut() {
                if !access.group(Describe, &g.group_id) {
                    g.topics.clear();
                    g.error_code = GROUP.code();
                    continue;
                }
                for t in g
                    .topics
                    .iter_mut()
                    .filter(|t| !access.topic(Describe, &t.topic_name))
                {
                    for p in t.partitions.iter_mut() {
                        p.error_code = TOPIC.code();
                        p.start_offset = -1;
                    }
                }
            }
            ResponseKind::DescribeShareGroupOffsets(r)
        }
        (_, body) => body,
    }
}
