//! Classic consumer groups: join (with MEMBER_ID_REQUIRED), sync, heartbeat, commit, fetch,
//! describe, list, leave, delete at every version, and the error paths (unknown member, wrong
//! generation, an inconsistent protocol, a commit from a non-member, offsets of a deleted group).

use bytes::Bytes;
use rill_protocol::kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use rill_protocol::kafka_protocol::messages::leave_group_request::MemberIdentity;
use rill_protocol::kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use rill_protocol::kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition as OffsetDeletePartition,
    OffsetDeleteRequestTopic as OffsetDeleteTopic,
};
use rill_protocol::kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use rill_protocol::kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use rill_protocol::kafka_protocol::messages::{
    ApiKey, DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, RequestKind, ResponseKind, SyncGroupRequest,
};

use super::{create_topic, response, sb, tn, Case};
use crate::pair::{Pair, Side};
use crate::wire::Answer;

/// The first case to touch a coordinator (it runs before the transactions and groups cases).
pub const FIRST_USE: &[Case] = &[("coordinator_first_use", coordinator_first_use)];

pub const CASES: &[Case] = &[
    ("find_coordinator", find_coordinator),
    ("group_lifecycle", lifecycle),
    ("group_errors", errors),
    ("group_offsets", offsets),
    ("group_list_describe_delete", list_describe_delete),
];

fn gid(s: &str) -> GroupId {
    GroupId(sb(s))
}

/// How long Kafka may take to create `__consumer_offsets` and `__transaction_state` on first use.
const COORDINATOR_READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The first FindCoordinator of each kind is compared (Kafka creates its internal topic then and
/// answers COORDINATOR_NOT_AVAILABLE meanwhile); then both are waited for until they answer.
fn coordinator_first_use(pair: &mut Pair) -> anyhow::Result<()> {
    for key_type in [0, 1] {
        let request = FindCoordinatorRequest::default()
            .with_key(sb("kd-first"))
            .with_key_type(key_type);
        pair.both(3, |_| RequestKind::FindCoordinator(request.clone()))?;
        let deadline = std::time::Instant::now() + COORDINATOR_READY_TIMEOUT;
        loop {
            let answers = pair.send(3, &|_| RequestKind::FindCoordinator(request.clone()))?;
            let ready = answers.iter().all(|a| {
                matches!(response(a), Some(ResponseKind::FindCoordinator(r)) if r.error_code == 0)
            });
            if ready {
                break;
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!("coordinator (key type {key_type}) not available on both after {COORDINATOR_READY_TIMEOUT:?}");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    // The transaction coordinator answers COORDINATOR_LOAD_IN_PROGRESS while Kafka loads the
    // new __transaction_state partitions: wait (quietly) until a transactional id initialises.
    let init = rill_protocol::kafka_protocol::messages::InitProducerIdRequest::default()
        .with_transactional_id(Some(
            rill_protocol::kafka_protocol::messages::TransactionalId(sb("kd-warm-up")),
        ))
        .with_transaction_timeout_ms(60_000);
    let deadline = std::time::Instant::now() + COORDINATOR_READY_TIMEOUT;
    loop {
        let answers = pair.send(3, &|_| RequestKind::InitProducerId(init.clone()))?;
        let ready = answers.iter().all(
            |a| matches!(response(a), Some(ResponseKind::InitProducerId(r)) if r.error_code == 0),
        );
        if ready {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            anyhow::bail!(
                "transaction coordinator not loaded on both after {COORDINATOR_READY_TIMEOUT:?}"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn find_coordinator(pair: &mut Pair) -> anyhow::Result<()> {
    for version in pair.versions(ApiKey::FindCoordinator) {
        for key_type in [0, 1, 2] {
            let mut request = FindCoordinatorRequest::default();
            if version >= 4 {
                request = request.with_coordinator_keys(vec![sb("kd-fc"), sb("")]);
            } else {
                request = request.with_key(sb("kd-fc"));
            }
            if version >= 1 {
                request = request.with_key_type(key_type);
            } else if key_type != 0 {
                continue;
            }
            pair.both(version, |_| RequestKind::FindCoordinator(request.clone()))?;
        }
    }
    Ok(())
}

fn join(side: &Side, group: &str, version: i16, protocol_type: &str) -> RequestKind {
    let mut r = JoinGroupRequest::default()
        .with_group_id(gid(group))
        .with_session_timeout_ms(30_000)
        .with_member_id(sb(&side.get("member", "")))
        .with_protocol_type(sb(protocol_type))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(sb("range"))
            .with_metadata(Bytes::from_static(b"\x00\x01meta"))]);
    if version >= 1 {
        r = r.with_rebalance_timeout_ms(30_000);
    }
    RequestKind::JoinGroup(r)
}

/// Saves the member id and generation of a JoinGroup answer on each side.
fn save_member(pair: &mut Pair, answers: &[Answer; 2]) {
    for (side, answer) in [&mut pair.kafka, &mut pair.rill].into_iter().zip(answers) {
        if let Some(ResponseKind::JoinGroup(r)) = response(answer) {
            side.state
                .insert("member".into(), r.member_id.as_str().to_string());
            side.state
                .insert("generation".into(), r.generation_id.to_string());
        }
    }
}

/// Joins `group` at `version` (again with the member id when the broker asks for one).
fn join_member(pair: &mut Pair, group: &str, version: i16) -> anyhow::Result<()> {
    for side in [&mut pair.kafka, &mut pair.rill] {
        side.state.remove("member");
    }
    let answers = pair.both(version, |s| join(s, group, version, "consumer"))?;
    save_member(pair, &answers);
    if version >= 4 {
        let answers = pair.both(version, |s| join(s, group, version, "consumer"))?;
        save_member(pair, &answers);
    }
    Ok(())
}

fn sync(side: &Side, group: &str, version: i16, generation_delta: i32) -> RequestKind {
    let member = side.get("member", "");
    let mut r = SyncGroupRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(side.int("generation", -1) as i32 + generation_delta)
        .with_member_id(sb(&member))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(sb(&member))
            .with_assignment(Bytes::from_static(b"\x00\x01assigned"))]);
    if version >= 5 {
        r = r
            .with_protocol_type(Some(sb("consumer")))
            .with_protocol_name(Some(sb("range")));
    }
    RequestKind::SyncGroup(r)
}

fn heartbeat(side: &Side, group: &str, generation_delta: i32, member: Option<&str>) -> RequestKind {
    RequestKind::Heartbeat(
        HeartbeatRequest::default()
            .with_group_id(gid(group))
            .with_generation_id(side.int("generation", -1) as i32 + generation_delta)
            .with_member_id(sb(
                &member.map_or_else(|| side.get("member", ""), str::to_string)
            )),
    )
}

fn leave(side: &Side, group: &str, version: i16) -> RequestKind {
    let member = side.get("member", "");
    let mut r = LeaveGroupRequest::default().with_group_id(gid(group));
    if version >= 3 {
        r = r.with_members(vec![MemberIdentity::default().with_member_id(sb(&member))]);
    } else {
        r = r.with_member_id(sb(&member));
    }
    RequestKind::LeaveGroup(r)
}

fn lifecycle(pair: &mut Pair) -> anyhow::Result<()> {
    let joins: Vec<i16> = pair.versions(ApiKey::JoinGroup).collect();
    let syncs: Vec<i16> = pair.versions(ApiKey::SyncGroup).collect();
    let beats: Vec<i16> = pair.versions(ApiKey::Heartbeat).collect();
    let leaves: Vec<i16> = pair.versions(ApiKey::LeaveGroup).collect();
    let rounds = joins
        .len()
        .max(syncs.len())
        .max(beats.len())
        .max(leaves.len());
    for round in 0..rounds {
        let pick = |list: &[i16]| list[round.min(list.len() - 1)];
        let group = format!("kd-group-{round}");
        join_member(pair, &group, pick(&joins))?;
        let v = pick(&syncs);
        pair.both(v, |s| sync(s, &group, v, 0))?;
        pair.both(pick(&beats), |s| heartbeat(s, &group, 0, None))?;
        let v = pick(&leaves);
        pair.both(v, |s| leave(s, &group, v))?;
        pair.both(pick(&beats), |s| heartbeat(s, &group, 0, None))?;
    }
    Ok(())
}

fn errors(pair: &mut Pair) -> anyhow::Result<()> {
    let group = "kd-group-errors";
    join_member(pair, group, 5)?;
    pair.both(3, |s| sync(s, group, 3, 1))?; // wrong generation
    pair.both(3, |s| sync(s, group, 3, 0))?;
    pair.both(3, |s| heartbeat(s, group, 1, None))?; // wrong generation
    pair.both(3, |s| heartbeat(s, group, 0, Some("kd-stranger")))?; // unknown member
    pair.both(3, |s| heartbeat(s, "kd-group-none", 0, None))?; // unknown group
    pair.both(5, |s| join(s, group, 5, "connect"))?; // inconsistent protocol type
    pair.both(5, |s| {
        let RequestKind::JoinGroup(r) = join(s, group, 5, "consumer") else {
            unreachable!()
        };
        RequestKind::JoinGroup(r.with_protocols(vec![]))
    })?; // no protocols
    pair.both(5, |s| {
        let RequestKind::JoinGroup(r) = join(s, group, 5, "consumer") else {
            unreachable!()
        };
        RequestKind::JoinGroup(r.with_session_timeout_ms(1))
    })?; // session timeout below group.min.session.timeout.ms
    pair.both(3, |s| sync(s, "kd-group-none", 3, 0))?;
    pair.both(3, |s| leave(s, "kd-group-none", 3))?;
    pair.both(3, |s| {
        let RequestKind::LeaveGroup(r) = leave(s, group, 3) else {
            unreachable!()
        };
        RequestKind::LeaveGroup(r.with_members(vec![
            MemberIdentity::default().with_member_id(sb("kd-stranger")),
        ]))
    })?;
    Ok(())
}

fn commit(
    side: &Side,
    group: &str,
    topic: &str,
    version: i16,
    generation: i32,
    offset: i64,
) -> RequestKind {
    let mut partition = OffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(offset)
        .with_committed_metadata(Some(sb("meta")));
    if version >= 6 {
        partition = partition.with_committed_leader_epoch(0);
    }
    let mut r = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(sb(&if generation >= 0 {
            side.get("member", "")
        } else {
            String::new()
        }))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(tn(topic))
                .with_partitions(vec![partition.clone()]),
            OffsetCommitRequestTopic::default()
                .with_name(tn("kd-offsets-missing"))
                .with_partitions(vec![partition]),
        ]);
    if (2..=4).contains(&version) {
        r = r.with_retention_time_ms(-1);
    }
    RequestKind::OffsetCommit(r)
}

fn offset_fetch(group: &str, topic: &str, version: i16, all: bool) -> RequestKind {
    let names = [topic, "kd-offsets-missing"];
    let r = if version >= 8 {
        let topics = (!all).then(|| {
            names
                .iter()
                .map(|n| {
                    OffsetFetchRequestTopics::default()
                        .with_name(tn(n))
                        .with_partition_indexes(vec![0, 3])
                })
                .collect()
        });
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(gid(group))
            .with_topics(topics)])
    } else {
        let topics = (!all || version < 2).then(|| {
            names
                .iter()
                .map(|n| {
                    OffsetFetchRequestTopic::default()
                        .with_name(tn(n))
                        .with_partition_indexes(vec![0, 3])
                })
                .collect()
        });
        OffsetFetchRequest::default()
            .with_group_id(gid(group))
            .with_topics(topics)
    };
    RequestKind::OffsetFetch(r)
}

fn offsets(pair: &mut Pair) -> anyhow::Result<()> {
    let topic = "kd-offsets";
    create_topic(pair, topic, 1, &[])?;
    let group = "kd-group-offsets";
    join_member(pair, group, 5)?;
    pair.both(3, |s| sync(s, group, 3, 0))?;
    for version in pair.versions(ApiKey::OffsetCommit) {
        pair.both(version, |s| {
            commit(s, group, topic, version, s.int("generation", -1) as i32, 3)
        })?;
        pair.both(version, |s| commit(s, group, topic, version, 99, 4))?; // wrong generation
        pair.both(version, |s| {
            commit(s, "kd-group-simple", topic, version, -1, 5)
        })?; // no group
        pair.both(version, |s| commit(s, group, topic, version, -1, 6))?; // not as a member
    }
    for version in pair.versions(ApiKey::OffsetFetch) {
        for all in [false, true] {
            for g in [group, "kd-group-simple", "kd-group-never"] {
                pair.both(version, |_| offset_fetch(g, topic, version, all))?;
            }
        }
    }
    for version in pair.versions(ApiKey::OffsetDelete) {
        let request = OffsetDeleteRequest::default()
            .with_group_id(gid("kd-group-simple"))
            .with_topics(vec![OffsetDeleteTopic::default()
                .with_name(tn(topic))
                .with_partitions(vec![
                    OffsetDeletePartition::default().with_partition_index(0)
                ])]);
        pair.both(version, |_| RequestKind::OffsetDelete(request.clone()))?;
        let busy = request.clone().with_group_id(gid(group)); // the group still uses the topic
        pair.both(version, |_| RequestKind::OffsetDelete(busy.clone()))?;
        let none = request.clone().with_group_id(gid("kd-group-never"));
        pair.both(version, |_| RequestKind::OffsetDelete(none.clone()))?;
    }
    Ok(())
}

fn list_describe_delete(pair: &mut Pair) -> anyhow::Result<()> {
    let group = "kd-group-listed";
    join_member(pair, group, 5)?;
    pair.both(3, |s| sync(s, group, 3, 0))?;
    let empty = "kd-group-listed-empty";
    join_member(pair, empty, 5)?;
    pair.both(3, |s| leave(s, empty, 3))?;
    for version in pair.versions(ApiKey::DescribeGroups) {
        let mut request = DescribeGroupsRequest::default().with_groups(vec![
            gid(group),
            gid(empty),
            gid("kd-group-never"),
        ]);
        if version >= 3 {
            request = request.with_include_authorized_operations(true);
        }
        pair.both(version, |_| RequestKind::DescribeGroups(request.clone()))?;
    }
    pair.ignore(&["groups[group_id=__", "groups[group_id=kd-txn"]);
    for version in pair.versions(ApiKey::ListGroups) {
        let mut filters = vec![ListGroupsRequest::default()];
        if version >= 4 {
            filters.push(ListGroupsRequest::default().with_states_filter(vec![sb("Stable")]));
            filters.push(
                ListGroupsRequest::default().with_states_filter(vec![sb("Empty"), sb("bogus")]),
            );
        }
        if version >= 5 {
            filters.push(ListGroupsRequest::default().with_types_filter(vec![sb("classic")]));
            filters.push(ListGroupsRequest::default().with_types_filter(vec![sb("consumer")]));
        }
        for request in filters {
            pair.both(version, |_| RequestKind::ListGroups(request.clone()))?;
        }
    }
    for version in pair.versions(ApiKey::DeleteGroups) {
        let request = DeleteGroupsRequest::default().with_groups_names(vec![
            gid(group),
            gid(empty),
            gid("kd-group-never"),
        ]);
        pair.both(version, |_| RequestKind::DeleteGroups(request.clone()))?;
    }
    Ok(())
}
