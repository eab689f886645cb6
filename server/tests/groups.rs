//! Consumer groups against the real `rill` binary (2 shards) over raw TCP: groups coordinated by
//! both shards (so half the requests are forwarded across cores) join, sync, heartbeat, commit
//! and fetch offsets; ListGroups sees every shard's groups; committed offsets survive kill -9.

mod common;

use common::{free_port, Broker, Client};

use bytes::Bytes;
use rill_protocol::kafka_protocol::messages::*;
use rill_protocol::kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "groups-it";

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn create_topic(c: &mut Client) {
    let t = metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s(TOPIC))));
    let req = MetadataRequest::default()
        .with_topics(Some(vec![t]))
        .with_allow_auto_topic_creation(true);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 4, &req);
    assert_eq!(r.topics[0].error_code, 0);
}

/// Join (through MEMBER_ID_REQUIRED) and sync alone: (member id, generation).
fn join_alone(c: &mut Client, group: &str) -> (StrBytes, i32) {
    let protocol = join_group_request::JoinGroupRequestProtocol::default()
        .with_name(s("range"))
        .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0]));
    let mut req = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![protocol]);
    let first: JoinGroupResponse = c.call(ApiKey::JoinGroup, 5, &req);
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED on v4+");
    req.member_id = first.member_id;
    let r: JoinGroupResponse = c.call(ApiKey::JoinGroup, 5, &req);
    assert_eq!((r.error_code, r.leader.as_str()), (0, r.member_id.as_str()));
    let a = sync_group_request::SyncGroupRequestAssignment::default()
        .with_member_id(r.member_id.clone())
        .with_assignment(Bytes::from_static(b"all-mine"));
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(r.generation_id)
        .with_member_id(r.member_id.clone())
        .with_assignments(vec![a]);
    let sr: SyncGroupResponse = c.call(ApiKey::SyncGroup, 3, &sync);
    assert_eq!((sr.error_code, &sr.assignment[..]), (0, &b"all-mine"[..]));
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(r.generation_id)
        .with_member_id(r.member_id.clone());
    let h: HeartbeatResponse = c.call(ApiKey::Heartbeat, 3, &hb);
    assert_eq!(h.error_code, 0);
    (r.member_id, r.generation_id)
}

fn commit(c: &mut Client, group: &str, member: StrBytes, generation: i32, offset: i64) {
    let parts = (0..2)
        .map(|p| {
            offset_commit_request::OffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(offset + i64::from(p))
                .with_committed_leader_epoch(0)
                .with_committed_metadata(Some(s("meta")))
        })
        .collect();
    let t = offset_commit_request::OffsetCommitRequestTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_partitions(parts);
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(member)
        .with_topics(vec![t]);
    let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 7, &req);
    assert!(
        r.topics[0].partitions.iter().all(|p| p.error_code == 0),
        "{r:?}"
    );
}

/// Committed offsets of partitions 0 and 1 (OffsetFetch v7, all partitions).
fn fetch(c: &mut Client, group: &str) -> Vec<(i32, i64)> {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(None);
    let r: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &req);
    assert_eq!(r.error_code, 0);
    let mut out: Vec<(i32, i64)> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.committed_offset))
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn groups_on_both_shards_commit_and_survive_kill9() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let broker = Broker::start(dir.path(), port, 2);
    let mut c = broker.connect();
    create_topic(&mut c);
    let groups: Vec<String> = (0..6).map(|i| format!("it-group-{i}")).collect();
    let mut first_member = None;
    for (i, group) in groups.iter().enumerate() {
        let req = FindCoordinatorRequest::default().with_key(s(group));
        let fc: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 2, &req);
        assert_eq!((fc.error_code, fc.port), (0, i32::from(port)));
        let (member, generation) = join_alone(&mut c, group);
        first_member.get_or_insert((member.clone(), generation));
        commit(&mut c, group, member, generation, 100 * i as i64);
        assert_eq!(
            fetch(&mut c, group),
            vec![(0, 100 * i as i64), (1, 100 * i as i64 + 1)]
        );
    }
    let lg: ListGroupsResponse = c.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    let mut listed: Vec<String> = lg.groups.iter().map(|g| g.group_id.0.to_string()).collect();
    listed.sort();
    assert_eq!(listed, groups, "every shard's groups are listed");
    assert!(lg.groups.iter().all(|g| g.group_state.as_str() == "Stable"));
    let dg = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(&groups[0]))]);
    let d: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &dg);
    assert_eq!(d.groups[0].members[0].client_id.as_str(), "rill-it");
    broker.kill9();

    let broker = Broker::start(dir.path(), port, 2);
    let mut c = broker.connect();
    for (i, group) in groups.iter().enumerate() {
        assert_eq!(
            fetch(&mut c, group),
            vec![(0, 100 * i as i64), (1, 100 * i as i64 + 1)]
        );
    }
    // The membership was written with the rebalance, as Kafka writes it: after the restart the
    // member goes on at its generation, a stranger is refused.
    let (member, generation) = first_member.expect("a group joined");
    let heartbeat = |c: &mut Client, member: StrBytes, generation| {
        let hb = HeartbeatRequest::default()
            .with_group_id(GroupId(s(&groups[0])))
            .with_generation_id(generation)
            .with_member_id(member);
        let h: HeartbeatResponse = c.call(ApiKey::Heartbeat, 3, &hb);
        h.error_code
    };
    assert_eq!(
        heartbeat(&mut c, member.clone(), generation),
        0,
        "the member goes on"
    );
    assert_eq!(
        heartbeat(&mut c, s("gone"), generation),
        25,
        "UNKNOWN_MEMBER_ID"
    );
    commit(&mut c, &groups[0], member, generation, 7);
    assert_eq!(fetch(&mut c, &groups[0]), vec![(0, 7), (1, 8)]);
}
