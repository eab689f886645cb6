//! The coordinator over an in-memory journal: commits, fetches, deletes, failures.

use super::*;
use crate::group::journal::MemJournal;
use crate::group::ops::{JoinArgs, SyncArgs};
use futures::executor::block_on;
use rill_engine::io::sim::ManualClock;
use rill_protocol::ErrorCode;
use rill_types::{LeaderEpoch, Offset, ProducerId, TimestampMs};

fn coordinator() -> GroupCoordinator<MemJournal> {
    GroupCoordinator::new(
        MemJournal::default(),
        Rc::new(ManualClock::new(TimestampMs(0))),
        no_delay(),
        Vec::new(),
    )
}

/// Rebalances complete as soon as every member joined (the delay has its own tests).
fn no_delay() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

fn offset(offset: i64, metadata: Option<&str>) -> CommittedOffset {
    CommittedOffset {
        offset: Offset(offset),
        leader_epoch: LeaderEpoch(2),
        metadata: metadata.map(str::to_string),
        commit_time_ms: TimestampMs(0),
    }
}

fn simple() -> MemberRef {
    MemberRef {
        member_id: String::new(),
        group_instance_id: None,
        generation_id: -1,
    }
}

fn commit(
    c: &GroupCoordinator<MemJournal>,
    group: &str,
    who: MemberRef,
    p: i32,
    o: i64,
) -> Vec<ErrorCode> {
    let op = GroupOp::Commit(who, vec![("t".into(), p, offset(o, Some("meta")))]);
    match block_on(c.handle(group, op)) {
        GroupReply::Commit(errors) => errors,
        other => panic!("{other:?}"),
    }
}

fn fetch(
    c: &GroupCoordinator<MemJournal>,
    group: &str,
    topics: Option<Vec<TopicPartitions>>,
) -> Vec<(String, i32, Option<CommittedOffset>)> {
    match block_on(c.handle(group, GroupOp::Fetch(topics))) {
        GroupReply::Fetch(ErrorCode::None, found) => found,
        other => panic!("{other:?}"),
    }
}

#[test]
fn standalone_commit_then_fetch_named_and_all() {
    let c = coordinator();
    assert_eq!(commit(&c, "g", simple(), 0, 42), vec![ErrorCode::None]);
    assert_eq!(commit(&c, "g", simple(), 1, 7), vec![ErrorCode::None]);
    let named = fetch(&c, "g", Some(vec![("t".into(), vec![0, 5])]));
    assert_eq!(
        named[0].2.as_ref().map(|v| (v.offset, v.leader_epoch)),
        Some((Offset(42), LeaderEpoch(2)))
    );
    assert_eq!(
        named[0]
            .2
            .as_ref()
            .and_then(|v| v.metadata.clone())
            .as_deref(),
        Some("meta")
    );
    assert_eq!(named[1].2, None, "never committed");
    let all = fetch(&c, "g", None);
    assert_eq!(
        all.iter().map(|(_, p, _)| *p).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert!(fetch(&c, "nobody", None).is_empty());
    assert_eq!(
        c.journal().records.borrow().len(),
        2,
        "each commit went through the journal"
    );
}

#[test]
fn a_failed_journal_write_is_an_error_and_not_visible() {
    let c = coordinator();
    c.journal()
        .fail_with
        .set(Some(ErrorCode::KafkaStorageError));
    assert_eq!(
        commit(&c, "g", simple(), 0, 42),
        vec![ErrorCode::KafkaStorageError]
    );
    assert_eq!(fetch(&c, "g", Some(vec![("t".into(), vec![0])]))[0].2, None);
}

#[test]
fn oversized_metadata_is_refused_per_partition() {
    let c = coordinator();
    let big = "x".repeat(super::super::offsets::METADATA_BYTES_MAX + 1);
    let op = GroupOp::Commit(
        simple(),
        vec![
            ("t".into(), 0, offset(1, Some(&big))),
            ("t".into(), 1, offset(1, None)),
        ],
    );
    match block_on(c.handle("g", op)) {
        GroupReply::Commit(errors) => assert_eq!(
            errors,
            vec![ErrorCode::OffsetMetadataTooLarge, ErrorCode::None]
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn commits_from_unknown_generations_are_refused() {
    let c = coordinator();
    let stale = MemberRef {
        member_id: "m".into(),
        group_instance_id: None,
        generation_id: 3,
    };
    assert_eq!(
        commit(&c, "absent", stale, 0, 1),
        vec![ErrorCode::IllegalGeneration]
    );
}

#[test]
fn rebuilt_from_replayed_offsets() {
    let live = vec![(
        OffsetKey::committed("g", TopicPartitionRef::new("t", PartitionIndex(3))),
        offset(9, None),
    )];
    let c = GroupCoordinator::new(
        MemJournal::default(),
        Rc::new(ManualClock::new(TimestampMs(0))),
        no_delay(),
        live,
    );
    assert_eq!(
        fetch(&c, "g", None)[0].2.as_ref().unwrap().offset,
        Offset(9)
    );
    assert_eq!(c.list()[0].state, "Empty");
}

#[test]
fn delete_group_and_offsets() {
    let c = coordinator();
    assert_eq!(
        block_on(c.handle("g", GroupOp::Delete)),
        GroupReply::Delete(ErrorCode::GroupIdNotFound)
    );
    commit(&c, "g", simple(), 0, 1);
    commit(&c, "g", simple(), 1, 1);
    let del = block_on(c.handle("g", GroupOp::DeleteOffsets(vec![("t".into(), vec![0])])));
    assert_eq!(
        del,
        GroupReply::DeleteOffsets(ErrorCode::None, vec![ErrorCode::None])
    );
    assert_eq!(fetch(&c, "g", None).len(), 1);
    assert_eq!(
        block_on(c.handle("g", GroupOp::Delete)),
        GroupReply::Delete(ErrorCode::None)
    );
    assert!(c.list().is_empty());
    let journal = c.journal().records.borrow();
    assert!(
        journal.iter().rev().take(2).all(|r| r.value.is_none()),
        "tombstones written"
    );
}

#[test]
fn a_group_with_members_cannot_be_deleted_and_empty_ids_are_invalid() {
    let c = coordinator();
    let join = JoinArgs {
        session_timeout_ms: 6_000,
        rebalance_timeout_ms: 6_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), bytes::Bytes::new())],
        ..Default::default()
    };
    let GroupReply::Join(r) = block_on(c.handle("g", GroupOp::Join(join))) else {
        panic!()
    };
    assert_eq!((r.error_code, r.generation_id), (ErrorCode::None, 1));
    let sync = SyncArgs {
        member_id: r.member_id.clone(),
        generation_id: 1,
        ..Default::default()
    };
    let GroupReply::Sync(s) = block_on(c.handle("g", GroupOp::Sync(sync))) else {
        panic!()
    };
    assert_eq!(s.error_code, ErrorCode::None);
    assert_eq!(
        block_on(c.handle("g", GroupOp::Delete)),
        GroupReply::Delete(ErrorCode::NonEmptyGroup)
    );
    assert_eq!(c.list()[0].state, "Stable");
    assert_eq!(
        block_on(c.handle("", GroupOp::Delete)),
        GroupReply::Delete(ErrorCode::InvalidGroupId)
    );
}

/// Consumer-protocol metadata subscribing to `topics` (i16 version, then the subscription).
fn subscription(topics: &[&str]) -> bytes::Bytes {
    use bytes::BufMut;
    use rill_protocol::kafka_protocol::messages::ConsumerProtocolSubscription;
    use rill_protocol::kafka_protocol::protocol::{Encodable, StrBytes};
    let sub = ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| StrBytes::from_string(t.to_string()))
            .collect(),
    );
    let mut out = bytes::BytesMut::new();
    out.put_i16(1);
    sub.encode(&mut out, 1).unwrap();
    out.freeze()
}

#[test]
fn offsets_of_a_subscribed_topic_cannot_be_deleted() {
    let c = coordinator();
    commit(&c, "g", simple(), 0, 5);
    let join = JoinArgs {
        session_timeout_ms: 6_000,
        rebalance_timeout_ms: 6_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(&["t"]))],
        ..Default::default()
    };
    let GroupReply::Join(r) = block_on(c.handle("g", GroupOp::Join(join))) else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::None);
    let op = GroupOp::DeleteOffsets(vec![("t".into(), vec![0]), ("other".into(), vec![0])]);
    assert_eq!(
        block_on(c.handle("g", op)),
        GroupReply::DeleteOffsets(
            ErrorCode::None,
            vec![ErrorCode::GroupSubscribedToTopic, ErrorCode::None]
        )
    );
    assert_eq!(
        fetch(&c, "g", None).len(),
        1,
        "the subscribed topic's offset stays"
    );
}

#[test]
fn offset_delete_of_an_unreadable_subscription_or_another_protocol_is_refused_as_kafka() {
    let c = coordinator();
    for (group, protocol_type) in [("unreadable", "consumer"), ("connect", "connect")] {
        commit(&c, group, simple(), 0, 5);
        let join = JoinArgs {
            session_timeout_ms: 6_000,
            rebalance_timeout_ms: 6_000,
            protocol_type: protocol_type.into(),
            protocols: vec![("range".into(), bytes::Bytes::from_static(b"\0\x01meta"))],
            ..Default::default()
        };
        let GroupReply::Join(r) = block_on(c.handle(group, GroupOp::Join(join))) else {
            panic!()
        };
        assert_eq!(r.error_code, ErrorCode::None);
    }
    let op = || GroupOp::DeleteOffsets(vec![("t".into(), vec![0])]);
    // A consumer-protocol group whose subscription cannot be read is taken as subscribed to
    // every topic (Kafka's isSubscribedToTopic); another protocol's group refuses whole.
    assert_eq!(
        block_on(c.handle("unreadable", op())),
        GroupReply::DeleteOffsets(ErrorCode::None, vec![ErrorCode::GroupSubscribedToTopic])
    );
    assert_eq!(
        block_on(c.handle("connect", op())),
        GroupReply::DeleteOffsets(ErrorCode::NonEmptyGroup, vec![ErrorCode::None])
    );
    for group in ["unreadable", "connect"] {
        assert_eq!(fetch(&c, group, None).len(), 1, "{group}: the offset stays");
    }
}

#[test]
fn groups_left_with_nothing_are_forgotten_at_the_cleanup_interval() {
    let clock = Rc::new(ManualClock::new(TimestampMs(0)));
    let c = GroupCoordinator::new(MemJournal::default(), clock.clone(), no_delay(), Vec::new());
    let join = JoinArgs {
        session_timeout_ms: 6_000,
        rebalance_timeout_ms: 6_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), bytes::Bytes::new())],
        ..Default::default()
    };
    let GroupReply::Join(r) = block_on(c.handle("g", GroupOp::Join(join))) else {
        panic!()
    };
    commit(&c, "kept", simple(), 0, 1);
    let leave = GroupOp::Leave(vec![(r.member_id, None)]);
    assert_eq!(
        block_on(c.handle("g", leave)),
        GroupReply::Leave(ErrorCode::None, vec![ErrorCode::None])
    );
    assert_eq!(c.list().len(), 2);
    assert!(
        c.tick().is_empty(),
        "LeaveGroup wrote the Empty group itself"
    );
    // Until the cleanup, the emptied group is Empty and keeps its protocol type (Kafka's
    // DescribeGroups and ListGroups show it so).
    clock.advance(GroupConfig::default().cleanup_interval_ms.0 - 1);
    assert!(c.tick().is_empty());
    assert_eq!(
        c.list().len(),
        2,
        "kept until offsets.retention.check.interval.ms"
    );
    let d = c.describe("g");
    assert_eq!(
        (d.state.as_str(), d.protocol_type.as_str()),
        ("Empty", "consumer")
    );
    clock.advance(1);
    assert!(c.tick().is_empty());
    let left: Vec<String> = c.list().into_iter().map(|g| g.group_id).collect();
    assert_eq!(left, vec!["kept".to_string()], "offsets keep a group");
}

#[test]
fn an_empty_group_is_deleted_by_delete_groups_until_the_cleanup() {
    let c = coordinator();
    let GroupReply::Join(r) = block_on(c.handle("g", classic_join())) else {
        panic!()
    };
    let leave = GroupOp::Leave(vec![(r.member_id, None)]);
    block_on(c.handle("g", leave));
    assert_eq!(
        block_on(c.handle("g", GroupOp::Delete)),
        GroupReply::Delete(ErrorCode::None)
    );
    assert_eq!(
        block_on(c.handle("g", GroupOp::Delete)),
        GroupReply::Delete(ErrorCode::GroupIdNotFound)
    );
}

#[test]
fn join_group_session_timeouts_are_bounded_as_kafka_bounds_them() {
    let c = coordinator();
    let config = GroupConfig::default();
    for (session_ms, expected) in [
        (
            config.session_timeout_ms_min - 1,
            ErrorCode::InvalidSessionTimeout,
        ),
        (1, ErrorCode::InvalidSessionTimeout),
        (-1, ErrorCode::InvalidSessionTimeout),
        (
            config.session_timeout_ms_max + 1,
            ErrorCode::InvalidSessionTimeout,
        ),
        (config.session_timeout_ms_min, ErrorCode::None),
        (config.session_timeout_ms_max, ErrorCode::None),
    ] {
        let join = GroupOp::Join(JoinArgs {
            member_id: "m".into(),
            session_timeout_ms: session_ms,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), bytes::Bytes::new())],
            ..Default::default()
        });
        let GroupReply::Join(r) = block_on(c.handle(&format!("g{session_ms}"), join)) else {
            panic!()
        };
        if expected == ErrorCode::None {
            // Past the bound check: a member id the group does not know.
            assert_ne!(
                r.error_code,
                ErrorCode::InvalidSessionTimeout,
                "{session_ms}"
            );
        } else {
            assert_eq!(r.error_code, expected, "{session_ms}");
            assert_eq!((r.member_id.as_str(), r.generation_id), ("m", -1), "echoed");
        }
    }
    assert_eq!(c.list().len(), 2, "a refused join creates no group");
}

fn txn_commit(
    c: &GroupCoordinator<MemJournal>,
    who: MemberRef,
    pid: i64,
    o: i64,
) -> Vec<ErrorCode> {
    let op = GroupOp::TxnCommit {
        producer_id: ProducerId(pid),
        member: who,
        offsets: vec![("t".into(), 0, offset(o, None))],
    };
    match block_on(c.handle("g", op)) {
        GroupReply::Commit(errors) => errors,
        other => panic!("{other:?}"),
    }
}

fn txn_end(c: &GroupCoordinator<MemJournal>, pid: i64, commit: bool) {
    let op = GroupOp::TxnEnd {
        producer_id: ProducerId(pid),
        commit,
    };
    assert_eq!(
        block_on(c.handle("g", op)),
        GroupReply::TxnEnd(ErrorCode::None)
    );
}

fn pending(c: &GroupCoordinator<MemJournal>) -> Vec<(String, i32)> {
    match block_on(c.handle("g", GroupOp::PendingTxn(None))) {
        GroupReply::PendingTxn(p) => p,
        other => panic!("{other:?}"),
    }
}

fn committed_offset(c: &GroupCoordinator<MemJournal>) -> Option<Offset> {
    fetch(c, "g", Some(vec![("t".into(), vec![0])]))[0]
        .2
        .as_ref()
        .map(|v| v.offset)
}

#[test]
fn transactional_offsets_are_visible_only_when_the_transaction_commits() {
    let c = coordinator();
    commit(&c, "g", simple(), 0, 5);
    assert_eq!(txn_commit(&c, simple(), 77, 10), vec![ErrorCode::None]);
    assert_eq!(
        committed_offset(&c),
        Some(Offset(5)),
        "pending, not committed"
    );
    assert_eq!(pending(&c), vec![("t".to_string(), 0)]);
    txn_end(&c, 77, true);
    assert_eq!(committed_offset(&c), Some(Offset(10)));
    assert!(pending(&c).is_empty());
    assert_eq!(txn_commit(&c, simple(), 77, 20), vec![ErrorCode::None]);
    txn_end(&c, 77, false);
    assert_eq!(
        committed_offset(&c),
        Some(Offset(10)),
        "an abort drops them"
    );
    txn_end(&c, 99, true); // nothing pending: nothing written
    let journal = c.journal().records.borrow();
    let pending_keys = journal
        .iter()
        .filter(|r| r.key.pending_for.is_some())
        .count();
    assert_eq!(pending_keys, 4, "two pending writes, two tombstones");
    assert_eq!(journal.len(), 6);
}

#[test]
fn pending_offsets_survive_a_replay_and_keep_the_group_from_deletion() {
    let live = vec![(
        OffsetKey::pending(
            "g",
            TopicPartitionRef::new("t", PartitionIndex(0)),
            ProducerId(3),
        ),
        offset(9, None),
    )];
    let c = GroupCoordinator::new(
        MemJournal::default(),
        Rc::new(ManualClock::new(TimestampMs(0))),
        no_delay(),
        live,
    );
    assert_eq!(pending(&c), vec![("t".to_string(), 0)]);
    assert_eq!(committed_offset(&c), None);
    assert_eq!(
        block_on(c.handle("g", GroupOp::Delete)),
        GroupReply::Delete(ErrorCode::NonEmptyGroup)
    );
    txn_end(&c, 3, true);
    assert_eq!(committed_offset(&c), Some(Offset(9)));
}

#[test]
fn transactional_commits_check_members_only_when_they_name_one() {
    let c = coordinator();
    let join = JoinArgs {
        member_id: String::new(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "h".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), bytes::Bytes::new())],
        require_known_member_id: false,
    };
    let joined = block_on(c.handle("g", GroupOp::Join(join)));
    assert!(matches!(joined, GroupReply::Join(_)));
    assert_eq!(
        txn_commit(&c, simple(), 1, 3),
        vec![ErrorCode::None],
        "pre-KIP-447 clients"
    );
    let stranger = MemberRef {
        member_id: "nobody".into(),
        group_instance_id: None,
        generation_id: 1,
    };
    assert_eq!(
        txn_commit(&c, stranger, 1, 3),
        vec![ErrorCode::UnknownMemberId]
    );
}

#[test]
fn loading_a_partition_replaces_its_groups_and_unloading_drops_only_them() {
    let c = coordinator();
    let (a, b) = ("group-a", "group-b");
    let (pa, pb) = (
        crate::group::offsets_partition(a),
        crate::group::offsets_partition(b),
    );
    assert_ne!(pa, pb, "the test needs groups on two partitions");
    assert_eq!(commit(&c, a, simple(), 0, 5), vec![ErrorCode::None]);
    assert_eq!(commit(&c, b, simple(), 0, 7), vec![ErrorCode::None]);
    // What another coordinator wrote meanwhile replaces what was in memory.
    let key = OffsetKey::committed(a, TopicPartitionRef::new("t", PartitionIndex(0)));
    c.load_partition(pa, vec![(key, offset(9, None))], Vec::new());
    assert_eq!(fetch(&c, a, None)[0].2.as_ref().unwrap().offset, Offset(9));
    assert_eq!(fetch(&c, b, None)[0].2.as_ref().unwrap().offset, Offset(7));
    c.unload_partition(pa);
    assert!(fetch(&c, a, None).is_empty(), "dropped with its partition");
    assert_eq!(c.list().len(), 1);
}

fn writing_membership() -> GroupCoordinator<MemJournal> {
    let journal = MemJournal::default();
    journal.membership.set(true);
    let clock = Rc::new(ManualClock::new(TimestampMs(0)));
    GroupCoordinator::new(journal, clock, no_delay(), Vec::new())
}

/// One member joins and syncs `assignment` for itself: (member id, generation, sync answer).
fn join_and_sync(
    c: &GroupCoordinator<MemJournal>,
    group: &str,
    assignment: &'static [u8],
) -> (String, i32, super::super::ops::SyncResult) {
    let join = JoinArgs {
        client_id: "cid".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 6_000,
        rebalance_timeout_ms: 6_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(&["t"]))],
        ..Default::default()
    };
    let GroupReply::Join(j) = block_on(c.handle(group, GroupOp::Join(join))) else {
        panic!()
    };
    assert_eq!(j.error_code, ErrorCode::None);
    let sync = SyncArgs {
        member_id: j.member_id.clone(),
        generation_id: j.generation_id,
        assignments: vec![(j.member_id.clone(), bytes::Bytes::from_static(assignment))],
        ..Default::default()
    };
    let GroupReply::Sync(s) = block_on(c.handle(group, GroupOp::Sync(sync))) else {
        panic!()
    };
    (j.member_id, j.generation_id, s)
}

#[test]
fn a_completed_rebalance_is_written_and_a_new_coordinator_restores_it() {
    let c = writing_membership();
    let (member, generation, synced) = join_and_sync(&c, "g", b"assigned");
    assert_eq!(synced.error_code, ErrorCode::None);
    assert_eq!(&synced.assignment[..], b"assigned");
    let written = c.journal().groups.borrow().clone();
    assert_eq!(written.len(), 1, "one record per completed rebalance");
    let (id, record) = written.into_iter().next().unwrap();
    let record = record.expect("not a tombstone");
    assert_eq!((id.as_str(), record.generation), ("g", generation));
    assert_eq!(record.leader.as_deref(), Some(member.as_str()));
    assert_eq!(record.members.len(), 1);
    assert_eq!(&record.members[0].assignment[..], b"assigned");
    assert_eq!(record.members[0].client_id, "cid");

    // Another broker becomes coordinator and loads what was written.
    let next = writing_membership();
    let partition = crate::group::offsets_partition("g");
    next.load_partition(partition, Vec::new(), vec![("g".into(), record)]);
    let who = MemberRef {
        member_id: member.clone(),
        group_instance_id: None,
        generation_id: generation,
    };
    let beat = block_on(next.handle("g", GroupOp::Heartbeat(who.clone())));
    assert_eq!(beat, GroupReply::Heartbeat(ErrorCode::None));
    assert_eq!(commit(&next, "g", who, 0, 4), vec![ErrorCode::None]);
    let sync = SyncArgs {
        member_id: member,
        generation_id: generation,
        ..Default::default()
    };
    let GroupReply::Sync(again) = block_on(next.handle("g", GroupOp::Sync(sync))) else {
        panic!()
    };
    assert_eq!(
        (again.error_code, &again.assignment[..]),
        (ErrorCode::None, &b"assigned"[..])
    );
}

#[test]
fn a_failed_membership_write_answers_the_error_and_rebalances() {
    let c = writing_membership();
    c.journal().fail_with.set(Some(ErrorCode::NotCoordinator));
    let (member, generation, synced) = join_and_sync(&c, "g", b"a");
    assert_eq!(synced.error_code, ErrorCode::NotCoordinator);
    assert!(synced.assignment.is_empty());
    c.journal().fail_with.set(None);
    let who = MemberRef {
        member_id: member,
        group_instance_id: None,
        generation_id: generation,
    };
    let beat = block_on(c.handle("g", GroupOp::Heartbeat(who)));
    assert_eq!(beat, GroupReply::Heartbeat(ErrorCode::RebalanceInProgress));
}

#[test]
fn deleting_a_group_writes_its_tombstone() {
    let c = writing_membership();
    commit(&c, "g", simple(), 0, 5);
    assert_eq!(
        block_on(c.handle("g", GroupOp::Delete)),
        GroupReply::Delete(ErrorCode::None)
    );
    assert_eq!(
        c.journal().groups.borrow().as_slice(),
        &[("g".to_string(), None)]
    );
}

/// A new coordinator that loaded `g`'s `record`, and how it describes `g`.
fn restored(
    record: GroupMetadata,
) -> (
    GroupCoordinator<MemJournal>,
    super::super::ops::GroupDescription,
) {
    let next = writing_membership();
    let partition = crate::group::offsets_partition("g");
    next.load_partition(partition, Vec::new(), vec![("g".into(), record)]);
    let GroupReply::Describe(d) = block_on(next.handle("g", GroupOp::Describe)) else {
        panic!()
    };
    (next, d)
}

#[test]
fn the_last_member_leaving_writes_the_empty_group() {
    let c = writing_membership();
    let (member, generation, _) = join_and_sync(&c, "g", b"a");
    let leave = GroupOp::Leave(vec![(member, None)]);
    assert!(matches!(
        block_on(c.handle("g", leave)),
        GroupReply::Leave(ErrorCode::None, _)
    ));
    let written = c.journal().groups.borrow().clone();
    let last = written.last().unwrap().1.clone().expect("not a tombstone");
    assert!(last.members.is_empty());
    assert_eq!(last.generation, generation + 1);
    let (_, d) = restored(last);
    assert_eq!(d.state, "Empty");
}

#[test]
fn a_group_emptied_by_session_expiry_is_written_empty() {
    let journal = MemJournal::default();
    journal.membership.set(true);
    let clock = Rc::new(ManualClock::new(TimestampMs(0)));
    let c = GroupCoordinator::new(journal, clock.clone(), no_delay(), Vec::new());
    let (_, generation, _) = join_and_sync(&c, "g", b"a");
    assert_eq!(c.journal().groups.borrow().len(), 1, "the rebalance");
    clock.advance(5_000);
    assert!(c.tick().is_empty(), "the session is still alive");
    clock.advance(1_001); // past the 6 s session: no heartbeat, no LeaveGroup
    for (group, record) in c.tick() {
        block_on(c.write_emptied(&group, record));
    }
    let written = c.journal().groups.borrow().clone();
    assert_eq!(written.len(), 2, "{written:?}");
    let (id, last) = written.last().unwrap().clone();
    let last = last.expect("not a tombstone");
    assert_eq!(id, "g");
    assert!(last.members.is_empty());
    assert_eq!(last.generation, generation + 1);
    // The group had no offsets: forgotten at the cleanup, and a new coordinator restores it
    // Empty.
    clock.advance(GroupConfig::default().cleanup_interval_ms.0);
    assert!(c.tick().is_empty());
    assert!(c.list().is_empty());
    let (next, d) = restored(last);
    assert_eq!((d.state.as_str(), d.members.len()), ("Empty", 0));
    assert!(next.tick().is_empty(), "nothing more to write");
}

#[test]
fn a_shard_holds_at_most_its_groups_max() {
    let config = GroupConfig {
        shard_groups_max: 2,
        ..no_delay()
    };
    let c = GroupCoordinator::new(
        MemJournal::default(),
        Rc::new(ManualClock::new(TimestampMs(0))),
        config,
        Vec::new(),
    );
    let join = || JoinArgs {
        session_timeout_ms: 6_000,
        rebalance_timeout_ms: 6_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), bytes::Bytes::new())],
        ..Default::default()
    };
    let mut members = Vec::new();
    for g in ["a", "b"] {
        let GroupReply::Join(r) = block_on(c.handle(g, GroupOp::Join(join()))) else {
            panic!()
        };
        assert_eq!(r.error_code, ErrorCode::None);
        members.push(r.member_id);
    }
    let GroupReply::Join(r) = block_on(c.handle("c", GroupOp::Join(join()))) else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::GroupMaxSizeReached);
    assert_eq!(
        commit(&c, "c", simple(), 0, 5),
        vec![ErrorCode::GroupMaxSizeReached]
    );
    // The groups it holds are served as before.
    let served = commit(&c, "a", simple(), 0, 5);
    assert_ne!(served, vec![ErrorCode::GroupMaxSizeReached]);
    assert_eq!(c.list().len(), 2);
    // A group left with nothing makes room at once, before its cleanup is due.
    let leave = GroupOp::Leave(vec![(members.pop().expect("b's member"), None)]);
    assert_eq!(
        block_on(c.handle("b", leave)),
        GroupReply::Leave(ErrorCode::None, vec![ErrorCode::None])
    );
    let GroupReply::Join(r) = block_on(c.handle("c", GroupOp::Join(join()))) else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::None);
    let listed: Vec<String> = c.list().into_iter().map(|g| g.group_id).collect();
    assert_eq!(listed, vec!["a".to_string(), "c".to_string()]);
}

fn consumer_join(member: &str) -> GroupOp {
    GroupOp::ConsumerHeartbeat(Box::new(crate::group::ops::ConsumerHeartbeatArgs {
        version: 1,
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 1_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        owned: Some(Vec::new()),
        topics: vec![crate::group::ops::TopicInfo {
            name: "t".into(),
            id: uuid::Uuid::from_bytes([1; 16]),
            partitions: 2,
        }],
        ..Default::default()
    }))
}

/// A KIP-848 member at an epoch, as a commit names it.
fn at(member: &str, epoch: i32) -> MemberRef {
    MemberRef {
        member_id: member.into(),
        generation_id: epoch,
        ..Default::default()
    }
}

fn classic_join() -> GroupOp {
    GroupOp::Join(JoinArgs {
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), bytes::Bytes::new())],
        ..Default::default()
    })
}

#[test]
fn a_group_changes_protocol_only_while_empty_and_keeps_its_offsets() {
    let c = coordinator();
    let GroupReply::ConsumerHeartbeat(r) = block_on(c.handle("g", consumer_join("m"))) else {
        panic!()
    };
    assert_eq!((r.error_code, r.member_epoch), (ErrorCode::None, 1));
    // A commit at the member's epoch is taken, one at another epoch is STALE_MEMBER_EPOCH, one
    // from a stranger UNKNOWN_MEMBER_ID.
    let offsets = || vec![("t".to_string(), 0, offset(4, None))];
    let commit = |who| block_on(c.handle("g", GroupOp::Commit(who, offsets())));
    assert_eq!(
        commit(at("m", 1)),
        GroupReply::Commit(vec![ErrorCode::None])
    );
    assert_eq!(
        commit(at("m", 2)),
        GroupReply::Commit(vec![ErrorCode::StaleMemberEpoch])
    );
    assert_eq!(
        commit(at("x", 1)),
        GroupReply::Commit(vec![ErrorCode::UnknownMemberId])
    );
    let types = |c: &GroupCoordinator<MemJournal>| {
        c.list()
            .into_iter()
            .map(|g| (g.group_id, g.group_type))
            .collect::<Vec<_>>()
    };
    assert_eq!(types(&c), vec![("g".to_string(), "consumer")]);
    // A classic member may not join while it has members.
    let GroupReply::Join(j) = block_on(c.handle("g", classic_join())) else {
        panic!()
    };
    assert_eq!(j.error_code, ErrorCode::InconsistentGroupProtocol);
    let mut leave = crate::group::ops::ConsumerHeartbeatArgs {
        member_id: "m".into(),
        member_epoch: -1,
        ..Default::default()
    };
    leave.version = 1;
    block_on(c.handle("g", GroupOp::ConsumerHeartbeat(Box::new(leave))));
    // Empty: a classic member takes it over, with its offsets.
    let GroupReply::Join(j) = block_on(c.handle("g", classic_join())) else {
        panic!()
    };
    assert_eq!(j.error_code, ErrorCode::None);
    assert_eq!(types(&c), vec![("g".to_string(), "classic")]);
    let GroupReply::Fetch(_, found) = block_on(c.handle("g", GroupOp::Fetch(None))) else {
        panic!()
    };
    assert_eq!(found[0].2.as_ref().map(|o| o.offset), Some(Offset(4)));
    // And now a consumer member may not.
    let GroupReply::ConsumerHeartbeat(r) = block_on(c.handle("g", consumer_join("n"))) else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::GroupIdNotFound);
}

#[test]
fn a_txn_offset_commit_in_a_consumer_group_checks_the_member_and_its_epoch() {
    let c = coordinator();
    let GroupReply::ConsumerHeartbeat(r) = block_on(c.handle("g", consumer_join("m"))) else {
        panic!()
    };
    assert_eq!((r.error_code, r.member_epoch), (ErrorCode::None, 1));
    // The member at its epoch: pending in the transaction, visible once it commits.
    assert_eq!(txn_commit(&c, at("m", 1), 7, 5), vec![ErrorCode::None]);
    assert_eq!(pending(&c), vec![("t".to_string(), 0)]);
    txn_end(&c, 7, true);
    assert!(pending(&c).is_empty());
    // A newer epoch: TxnOffsetCommit has no STALE_MEMBER_EPOCH, Kafka answers ILLEGAL_GENERATION.
    assert_eq!(
        txn_commit(&c, at("m", 2), 7, 6),
        vec![ErrorCode::IllegalGeneration]
    );
    assert_eq!(
        txn_commit(&c, at("x", 1), 7, 6),
        vec![ErrorCode::UnknownMemberId]
    );
    // Without a member or generation (a client before KIP-447) nothing is checked.
    assert_eq!(txn_commit(&c, at("", -1), 8, 6), vec![ErrorCode::None]);
    assert!(c.list().iter().all(|g| g.group_id == "g"));
}

/// Kafka's share-offsets admin on a group nobody joined: describe answers the partitions
/// without starts, AlterShareGroupOffsets creates the (empty) share group with its starts,
/// and an id a classic group holds is still not a share group.
#[test]
fn share_offsets_of_a_group_nobody_joined_are_described_and_set_as_kafka() {
    let c = coordinator();
    let key = (uuid::Uuid::from_bytes([7; 16]), PartitionIndex(0));
    assert_eq!(
        block_on(c.handle("s", GroupOp::ShareOffsets(Some(vec![key])))),
        GroupReply::ShareOffsets(ErrorCode::None, vec![(key, None)])
    );
    assert_eq!(
        block_on(c.handle("s", GroupOp::ShareOffsets(None))),
        GroupReply::ShareOffsets(ErrorCode::None, Vec::new())
    );
    assert!(!c.is_share_group("s"), "describing creates nothing");
    assert_eq!(
        block_on(c.handle("s", GroupOp::ShareAlterOffsets(vec![(key, Offset(5))]))),
        GroupReply::ShareOffsetsChanged(ErrorCode::None)
    );
    assert!(c.is_share_group("s"));
    assert_eq!(
        block_on(c.handle("s", GroupOp::ShareOffsets(Some(vec![key])))),
        GroupReply::ShareOffsets(ErrorCode::None, vec![(key, Some(Offset(5)))])
    );
    commit(&c, "classic", simple(), 0, 1);
    assert_eq!(
        block_on(c.handle(
            "classic",
            GroupOp::ShareAlterOffsets(vec![(key, Offset(5))])
        )),
        GroupReply::ShareOffsetsChanged(ErrorCode::GroupIdNotFound)
    );
    assert_eq!(
        block_on(c.handle("classic", GroupOp::ShareOffsets(Some(vec![key])))),
        GroupReply::ShareOffsets(ErrorCode::GroupIdNotFound, Vec::new())
    );
}
