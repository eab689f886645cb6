//! Group APIs end to end through `dispatch` on the in-memory broker: each response encodes at
//! every version the registry advertises (the codec refuses fields a version lacks), and a
//! whole consumer-group round trip works on the wire types.

use bytes::BytesMut;
use futures::executor::block_on;
use rill_protocol::api_registry::entry;
use rill_protocol::kafka_protocol::messages::*;
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::response::encode_response;

use crate::broker::{str_bytes, topic_name, Broker};
use crate::handler;
use crate::handler::fake::FakeBroker;

fn versions(api_key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let e = entry(api_key).expect("registered");
    e.decodable_min..=e.advertised_max
}

fn encodes(api_key: ApiKey, v: i16, body: ResponseKind) {
    let mut out = BytesMut::new();
    if let Err(e) = encode_response(&mut out, 1, api_key, v, &body) {
        panic!("{api_key:?} v{v}: {e}");
    }
}

fn join_req(member_id: &str) -> JoinGroupRequest {
    let p = join_group_request::JoinGroupRequestProtocol::default()
        .with_name(str_bytes("range"))
        .with_metadata(bytes::Bytes::from_static(b"\0\0\0\0\0\0\0\0"));
    JoinGroupRequest::default()
        .with_group_id(GroupId(str_bytes("g")))
        .with_session_timeout_ms(6000)
        .with_rebalance_timeout_ms(6000)
        .with_member_id(str_bytes(member_id))
        .with_protocol_type(str_bytes("consumer"))
        .with_protocols(vec![p])
}

/// Join (answering MEMBER_ID_REQUIRED when asked) and sync one member: (member id, generation).
fn join_and_sync(b: &FakeBroker, v: i16) -> (StrBytes, i32) {
    let mut r = block_on(handler::join_group::handle(b, v, "client", &join_req("")));
    if r.error_code == 79 {
        r = block_on(handler::join_group::handle(
            b,
            v,
            "client",
            &join_req(&r.member_id),
        ));
    }
    assert_eq!(r.error_code, 0, "join v{v}");
    encodes(ApiKey::JoinGroup, v, ResponseKind::JoinGroup(r.clone()));
    let a = sync_group_request::SyncGroupRequestAssignment::default()
        .with_member_id(r.member_id.clone())
        .with_assignment(bytes::Bytes::from_static(b"assigned"));
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(str_bytes("g")))
        .with_generation_id(r.generation_id)
        .with_member_id(r.member_id.clone())
        .with_assignments(vec![a]);
    let sv = v.min(5);
    let s = block_on(handler::sync_group::handle(b, sv, &sync));
    assert_eq!((s.error_code, &s.assignment[..]), (0, &b"assigned"[..]));
    encodes(ApiKey::SyncGroup, sv, ResponseKind::SyncGroup(s));
    (r.member_id, r.generation_id)
}

#[test]
fn membership_apis_encode_at_every_version() {
    for v in versions(ApiKey::JoinGroup) {
        let b = FakeBroker::new();
        let (member, generation) = join_and_sync(&b, v);
        let hb = HeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes("g")))
            .with_generation_id(generation)
            .with_member_id(member.clone());
        for hv in versions(ApiKey::Heartbeat) {
            let r = block_on(handler::heartbeat::handle(&b, &hb));
            assert_eq!(r.error_code, 0);
            encodes(ApiKey::Heartbeat, hv, ResponseKind::Heartbeat(r));
        }
        for dv in versions(ApiKey::DescribeGroups) {
            let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(str_bytes("g"))]);
            let r = block_on(handler::describe_groups::handle(&b, dv, &req));
            assert_eq!(r.groups[0].group_state.as_str(), "Stable");
            encodes(ApiKey::DescribeGroups, dv, ResponseKind::DescribeGroups(r));
        }
        for lv in versions(ApiKey::ListGroups) {
            let r = block_on(handler::list_groups::handle(
                &b,
                lv,
                &ListGroupsRequest::default(),
            ));
            assert_eq!(r.groups.len(), 1);
            encodes(ApiKey::ListGroups, lv, ResponseKind::ListGroups(r));
        }
        let lv = versions(ApiKey::LeaveGroup).last().unwrap().min(v.max(0));
        let leave = if lv >= 3 {
            let m = leave_group_request::MemberIdentity::default().with_member_id(member);
            LeaveGroupRequest::default().with_members(vec![m])
        } else {
            LeaveGroupRequest::default().with_member_id(member)
        }
        .with_group_id(GroupId(str_bytes("g")));
        let r = block_on(handler::leave_group::handle(&b, lv, &leave));
        assert_eq!(r.error_code, 0);
        if lv >= 3 {
            assert_eq!(r.members[0].error_code, 0);
        }
        encodes(ApiKey::LeaveGroup, lv, ResponseKind::LeaveGroup(r));
    }
}

fn commit_req(partition: i32, offset: i64) -> OffsetCommitRequest {
    let p = offset_commit_request::OffsetCommitRequestPartition::default()
        .with_partition_index(partition)
        .with_committed_offset(offset)
        .with_committed_metadata(Some(str_bytes("m")));
    let t = offset_commit_request::OffsetCommitRequestTopic::default()
        .with_name(topic_name("t"))
        .with_partitions(vec![p]);
    OffsetCommitRequest::default()
        .with_group_id(GroupId(str_bytes("standalone")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![t])
}

#[test]
fn offset_apis_encode_at_every_version_and_round_trip() {
    let b = FakeBroker::new();
    b.topics().create("t", 2, Default::default()).unwrap();
    for v in versions(ApiKey::OffsetCommit) {
        let r = block_on(handler::offset_commit::handle(
            &b,
            v,
            &commit_req(0, 100 + i64::from(v)),
        ));
        assert_eq!(r.topics[0].partitions[0].error_code, 0);
        encodes(ApiKey::OffsetCommit, v, ResponseKind::OffsetCommit(r));
    }
    let r = block_on(handler::offset_commit::handle(&b, 2, &commit_req(9, 1)));
    assert_eq!(r.topics[0].partitions[0].error_code, 3, "unknown partition");
    let last = 100 + i64::from(*versions(ApiKey::OffsetCommit).end());
    for v in versions(ApiKey::OffsetFetch) {
        let r = if v >= 8 {
            let g = offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(str_bytes("standalone")))
                .with_topics(None);
            let req = OffsetFetchRequest::default().with_groups(vec![g]);
            let r = block_on(handler::offset_fetch::handle(&b, v, &req));
            assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, last);
            r
        } else {
            let t = offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partition_indexes(vec![0, 1]);
            let req = OffsetFetchRequest::default()
                .with_group_id(GroupId(str_bytes("standalone")))
                .with_topics(Some(vec![t]));
            let r = block_on(handler::offset_fetch::handle(&b, v, &req));
            let ps = &r.topics[0].partitions;
            assert_eq!((ps[0].committed_offset, ps[1].committed_offset), (last, -1));
            r
        };
        encodes(ApiKey::OffsetFetch, v, ResponseKind::OffsetFetch(r));
    }
    let t = offset_delete_request::OffsetDeleteRequestTopic::default()
        .with_name(topic_name("t"))
        .with_partitions(vec![
            offset_delete_request::OffsetDeleteRequestPartition::default(),
        ]);
    let req = OffsetDeleteRequest::default()
        .with_group_id(GroupId(str_bytes("standalone")))
        .with_topics(vec![t]);
    let r = block_on(handler::offset_delete::handle(&b, &req));
    assert_eq!(r.error_code, 0);
    encodes(ApiKey::OffsetDelete, 0, ResponseKind::OffsetDelete(r));
    for v in versions(ApiKey::DeleteGroups) {
        let req = DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(str_bytes("standalone"))]);
        let r = block_on(handler::delete_groups::handle(&b, &req));
        let expected = if v == *versions(ApiKey::DeleteGroups).start() {
            0
        } else {
            69
        };
        assert_eq!(r.results[0].error_code, expected);
        encodes(ApiKey::DeleteGroups, v, ResponseKind::DeleteGroups(r));
    }
}

#[test]
fn find_coordinator_answers_this_node_at_every_version() {
    let b = FakeBroker::new();
    for v in versions(ApiKey::FindCoordinator) {
        let req = FindCoordinatorRequest::default()
            .with_key(if v < 4 {
                str_bytes("g")
            } else {
                StrBytes::default()
            })
            .with_coordinator_keys(if v >= 4 {
                vec![str_bytes("g"), str_bytes("h")]
            } else {
                vec![]
            });
        let r = handler::find_coordinator::handle(&b, v, &req);
        if v >= 4 {
            assert_eq!(r.coordinators.len(), 2);
            assert_eq!(r.coordinators[0].port, i32::from(b.config().advertise_port));
        } else {
            assert_eq!(
                (r.error_code, r.port),
                (0, i32::from(b.config().advertise_port))
            );
        }
        encodes(ApiKey::FindCoordinator, v, ResponseKind::FindCoordinator(r));
    }
    let bad = FindCoordinatorRequest::default().with_key_type(7);
    assert_eq!(
        handler::find_coordinator::handle(&b, 1, &bad).error_code,
        42
    );
}
