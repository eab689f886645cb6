//! The share group APIs through the in-memory broker: two members split a partition's records,
//! acknowledgements (ACCEPT, RELEASE, REJECT) and redelivery, and the share-session errors.

use futures::executor::block_on;
use rill_protocol::kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatchWire,
};
use rill_protocol::kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
use rill_protocol::kafka_protocol::messages::{
    GroupId, ShareAcknowledgeRequest, ShareFetchRequest, ShareFetchResponse,
    ShareGroupDescribeRequest, ShareGroupHeartbeatRequest, TopicName,
};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartitionRef};
use uuid::Uuid;

use super::fake::{batch, FakeBroker};
use super::{share_acknowledge, share_fetch, share_group_describe, share_group_heartbeat};
use super::{str_bytes, Broker};

fn join(broker: &FakeBroker, member: &str) -> (i32, Uuid) {
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(str_bytes("g")))
        .with_member_id(str_bytes(member))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(str_bytes("t"))]));
    let r = block_on(share_group_heartbeat::handle(broker, "client", req));
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let topic = r.assignment.expect("assigned").topic_partitions[0].topic_id;
    (r.member_epoch, topic)
}

fn fetch(member: &str, topic: Uuid, epoch: i32, acks: Vec<(i64, i64, i8)>) -> ShareFetchRequest {
    use rill_protocol::kafka_protocol::messages::share_fetch_request::AcknowledgementBatch;
    let batches = acks
        .into_iter()
        .map(|(f, l, t)| {
            AcknowledgementBatch::default()
                .with_first_offset(f)
                .with_last_offset(l)
                .with_acknowledge_types(vec![t])
        })
        .collect();
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(str_bytes("g"))))
        .with_member_id(Some(str_bytes(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic)
            .with_partitions(vec![FetchPartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(batches)])])
}

/// (first, last, delivery count) of each acquired range of partition 0.
fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    r.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.acquired_records)
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

fn earliest(broker: &FakeBroker) {
    let op = crate::group::GroupOp::ShareSetReset(crate::group::share::AutoOffsetReset::Earliest);
    block_on(broker.group("g", op));
}

#[test]
fn two_members_acquire_disjoint_records_and_acknowledgements_apply() {
    let broker = FakeBroker::new();
    broker.topics().create("t", 1, Default::default()).unwrap();
    broker.append(TopicPartitionRef::new("t", PartitionIndex(0)), batch(3));
    earliest(&broker);
    let (_, topic) = join(&broker, "a");
    join(&broker, "b");
    let a = block_on(share_fetch::handle(&broker, fetch("a", topic, 0, vec![])));
    assert_eq!(a.error_code, 0, "{:?}", a.error_message);
    assert_eq!(acquired(&a), vec![(0, 2, 1)]);
    assert!(a.responses[0].partitions[0]
        .records
        .as_ref()
        .is_some_and(|r| !r.is_empty()));
    assert!(a.acquisition_lock_timeout_ms > 0);
    let b = block_on(share_fetch::handle(&broker, fetch("b", topic, 0, vec![])));
    assert!(
        acquired(&b).is_empty(),
        "b got records a holds: {:?}",
        acquired(&b)
    );
    // a accepts 0, releases 1, rejects 2 (ShareAcknowledge at the session's next epoch, 1).
    let ack = |f: i64, t: i8| {
        AckBatchWire::default()
            .with_first_offset(f)
            .with_last_offset(f)
            .with_acknowledge_types(vec![t])
    };
    let req = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(str_bytes("g"))))
        .with_member_id(Some(str_bytes("a")))
        .with_share_session_epoch(1)
        .with_topics(vec![AcknowledgeTopic::default()
            .with_topic_id(topic)
            .with_partitions(vec![AcknowledgePartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(vec![
                    ack(0, 1),
                    ack(1, 2),
                    ack(2, 3),
                ])])]);
    let r = block_on(share_acknowledge::handle(&broker, req.clone()));
    assert_eq!(r.error_code, 0);
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    // The same again (epoch 2): those records are no longer a's.
    let again = block_on(share_acknowledge::handle(
        &broker,
        req.with_share_session_epoch(2),
    ));
    assert_eq!(
        again.responses[0].partitions[0].error_code,
        ErrorCode::InvalidRecordState.code()
    );
    // b gets the released record, delivered a second time; never the rejected one.
    let b = block_on(share_fetch::handle(&broker, fetch("b", topic, 1, vec![])));
    assert_eq!(acquired(&b), vec![(1, 1, 2)]);
    let b = block_on(share_fetch::handle(
        &broker,
        fetch("b", topic, 2, vec![(1, 1, 1)]),
    ));
    assert_eq!(b.responses[0].partitions[0].acknowledge_error_code, 0);
    assert!(acquired(&b).is_empty());
    let d = block_on(share_group_describe::handle(
        &broker,
        &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(str_bytes("g"))]),
    ));
    assert_eq!(d.groups[0].members.len(), 2);
    assert_eq!(d.groups[0].assignor_name.as_str(), "simple");
}

#[test]
fn share_session_errors_as_kafka() {
    let broker = FakeBroker::new();
    broker.topics().create("t", 1, Default::default()).unwrap();
    let (_, topic) = join(&broker, "a");
    let code = |r: ShareFetchResponse| r.error_code;
    // No session yet; acknowledgements on an opening fetch; a wrong epoch.
    let r = block_on(share_fetch::handle(&broker, fetch("a", topic, 4, vec![])));
    assert_eq!(code(r), ErrorCode::ShareSessionNotFound.code());
    let r = block_on(share_fetch::handle(
        &broker,
        fetch("a", topic, 0, vec![(0, 0, 1)]),
    ));
    assert_eq!(code(r), ErrorCode::InvalidRequest.code());
    let r = block_on(share_fetch::handle(&broker, fetch("a", topic, 0, vec![])));
    assert_eq!(code(r), 0);
    let r = block_on(share_fetch::handle(&broker, fetch("a", topic, 5, vec![])));
    assert_eq!(code(r), ErrorCode::InvalidShareSessionEpoch.code());
    // An unknown acknowledge type fails its partition only.
    let r = block_on(share_fetch::handle(
        &broker,
        fetch("a", topic, 1, vec![(0, 0, 9)]),
    ));
    assert_eq!(r.error_code, 0);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.acknowledge_error_code, ErrorCode::InvalidRequest.code());
    // A member that is not in the group; a group that does not exist.
    let r = block_on(share_fetch::handle(&broker, fetch("zz", topic, 0, vec![])));
    assert_eq!(code(r), ErrorCode::UnknownMemberId.code());
    let mut other = fetch("a", topic, 0, vec![]);
    other.group_id = Some(GroupId(str_bytes("nope")));
    let r = block_on(share_fetch::handle(&broker, other));
    assert_eq!(code(r), ErrorCode::GroupIdNotFound.code());
    // A heartbeat at a wrong epoch is fenced; the classic API refuses the share group.
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(str_bytes("g")))
        .with_member_id(str_bytes("a"))
        .with_member_epoch(9);
    let r = block_on(share_group_heartbeat::handle(&broker, "c", req));
    assert_eq!(r.error_code, ErrorCode::FencedMemberEpoch.code());
    let list = block_on(broker.list_groups());
    assert_eq!(list[0].group_type, "share");
}
