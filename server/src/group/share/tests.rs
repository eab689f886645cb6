//! Share group membership, the simple assignor and share sessions.

use super::partition::{AckBatch, AckType, FetchedBatch};
use super::*;
use crate::group::ops::TopicInfo;
use rill_types::PartitionIndex;

const T: Uuid = Uuid::from_u128(7);
/// Partition 0 of topic [`T`], as a share group keys it.
const T0: ShareKey = (T, PartitionIndex(0));

fn topics(partitions: i32) -> Vec<TopicInfo> {
    vec![TopicInfo {
        name: "t".to_string(),
        id: T,
        partitions,
    }]
}

fn join(g: &mut ShareGroup, member: &str, partitions: i32, now: i64) -> ShareHeartbeatResult {
    g.heartbeat(
        ShareHeartbeatArgs {
            member_id: member.to_string(),
            member_epoch: 0,
            subscribed_topic_names: Some(vec!["t".to_string()]),
            topics: topics(partitions),
            ..Default::default()
        },
        now,
    )
}

fn beat(g: &mut ShareGroup, member: &str, epoch: i32, now: i64) -> ShareHeartbeatResult {
    beat_with(g, member, epoch, now, 1)
}

fn beat_with(
    g: &mut ShareGroup,
    member: &str,
    epoch: i32,
    now: i64,
    partitions: i32,
) -> ShareHeartbeatResult {
    g.heartbeat(
        ShareHeartbeatArgs {
            member_id: member.to_string(),
            member_epoch: epoch,
            topics: topics(partitions),
            ..Default::default()
        },
        now,
    )
}

fn group() -> ShareGroup {
    ShareGroup::new(
        "g",
        ShareConfig {
            session_timeout_ms: 1_000,
            ..ShareConfig::default()
        },
    )
}

fn session(member: &str, epoch: i32, acks: Vec<(ShareKey, Vec<AckBatch>)>) -> ShareSessionArgs {
    ShareSessionArgs {
        member_id: member.to_string(),
        epoch,
        fetch: true,
        add: vec![T0],
        forget: Vec::new(),
        acks,
    }
}

#[test]
fn two_members_share_one_partition_and_epochs_advance() {
    let mut g = group();
    let a = join(&mut g, "a", 1, 0);
    assert_eq!(a.error_code, ErrorCode::None);
    assert_eq!(a.member_epoch, 1);
    assert_eq!(a.assignment, Some(vec![(T, vec![0])]));
    let b = join(&mut g, "b", 1, 0);
    assert_eq!(b.member_epoch, 2);
    assert_eq!(b.assignment, Some(vec![(T, vec![0])]));
    // a still heartbeats with epoch 1 and moves to 2 with the same partition.
    let a = beat(&mut g, "a", 1, 10);
    assert_eq!(a.member_epoch, 2);
    assert_eq!(a.assignment, Some(vec![(T, vec![0])]));
    assert_eq!(beat(&mut g, "a", 2, 20).assignment, None);
    // A stale or future epoch is fenced; an unknown member is told so.
    assert_eq!(
        beat(&mut g, "a", 1, 30).error_code,
        ErrorCode::FencedMemberEpoch
    );
    assert_eq!(
        beat(&mut g, "zz", 3, 30).error_code,
        ErrorCode::UnknownMemberId
    );
    let view = g.describe();
    assert_eq!((view.state.as_str(), view.group_epoch), ("Stable", 2));
    assert_eq!(view.members.len(), 2);
}

#[test]
fn the_simple_assignor_covers_every_partition_and_member() {
    let mut g = group();
    join(&mut g, "a", 3, 0);
    let a = beat_with(&mut g, "a", 1, 0, 3);
    assert_eq!(a.assignment, None);
    assert_eq!(g.describe().members[0].assignment, vec![(T, vec![0, 1, 2])]);
    join(&mut g, "b", 3, 0);
    let views = g.describe().members;
    assert_eq!(views[0].assignment, vec![(T, vec![0, 2])]);
    assert_eq!(views[1].assignment, vec![(T, vec![1])]);
    for m in ["c", "d"] {
        join(&mut g, m, 3, 0);
    }
    let covered: BTreeSet<i32> = g
        .describe()
        .members
        .iter()
        .flat_map(|m| m.assignment[0].1.clone())
        .collect();
    assert_eq!(covered, BTreeSet::from([0, 1, 2]));
    assert!(g
        .describe()
        .members
        .iter()
        .all(|m| m.assignment[0].1.len() == 1));
}

#[test]
fn a_fenced_member_gives_back_its_records() {
    let mut g = group();
    join(&mut g, "a", 1, 0);
    join(&mut g, "b", 1, 0);
    assert_eq!(g.session(session("a", 0, vec![])).fetch, vec![T0]);
    let plan = g.plan(&[T0]);
    assert_eq!(plan, vec![(T0, FetchFrom::Init { earliest: false })]);
    let part = ShareAcquirePart {
        key: T0,
        init: Some(Offset(0)),
        log_start: Offset(0),
        batches: vec![FetchedBatch {
            first: 0,
            last: 4,
            control: false,
        }],
    };
    let got = g.acquire("a", 500, vec![part], 0);
    assert_eq!(got[0].1[0].last, 4);
    assert_eq!(g.plan(&[T0]), vec![(T0, FetchFrom::At(Offset(5)))]);
    // b keeps heartbeating, a does not: a is fenced and its records come back.
    beat(&mut g, "b", 2, 900);
    assert!(g.tick(1_000));
    assert_eq!(g.describe().members.len(), 1);
    assert_eq!(g.plan(&[T0]), vec![(T0, FetchFrom::At(Offset(0)))]);
    assert_eq!(
        g.session(session("a", 1, vec![])).error_code,
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn share_session_epochs() {
    let mut g = group();
    join(&mut g, "a", 1, 0);
    let ack = |first, last| {
        vec![(
            T0,
            vec![AckBatch {
                first,
                last,
                types: vec![AckType::Accept],
            }],
        )]
    };
    // No session yet.
    assert_eq!(
        g.session(session("a", 1, vec![])).error_code,
        ErrorCode::ShareSessionNotFound
    );
    let mut ack_only = session("a", 0, vec![]);
    ack_only.fetch = false;
    assert_eq!(
        g.session(ack_only).error_code,
        ErrorCode::InvalidShareSessionEpoch
    );
    assert_eq!(
        g.session(session("a", 0, vec![])).error_code,
        ErrorCode::None
    );
    assert_eq!(
        g.session(session("a", 2, vec![])).error_code,
        ErrorCode::InvalidShareSessionEpoch
    );
    assert_eq!(
        g.session(session("a", 1, vec![])).error_code,
        ErrorCode::None
    );
    // An acknowledgement of a record never acquired fails its partition, not the request.
    let r = g.session(session("a", 2, ack(0, 0)));
    assert_eq!(r.error_code, ErrorCode::None);
    assert_eq!(r.acks, vec![(T0, ErrorCode::InvalidRecordState)]);
    // Forgetting the partition leaves nothing to fetch; closing ends the session.
    let mut forget = session("a", 3, vec![]);
    forget.add.clear();
    forget.forget = vec![T0];
    assert!(g.session(forget).fetch.is_empty());
    let close = g.session(session("a", LEAVE_EPOCH, vec![]));
    assert_eq!(close.error_code, ErrorCode::None);
    assert!(close.fetch.is_empty());
    assert_eq!(g.session_count(), 0);
    assert_eq!(
        g.session(session("a", 4, vec![])).error_code,
        ErrorCode::ShareSessionNotFound
    );
    assert_eq!(next_epoch(i32::MAX), 1);
}

#[test]
fn group_max_size_and_leaving() {
    let mut g = ShareGroup::new(
        "g",
        ShareConfig {
            max_size: 1,
            ..ShareConfig::default()
        },
    );
    join(&mut g, "a", 1, 0);
    assert_eq!(
        join(&mut g, "b", 1, 0).error_code,
        ErrorCode::GroupMaxSizeReached
    );
    let left = beat(&mut g, "a", LEAVE_EPOCH, 0);
    assert_eq!(
        (left.error_code, left.member_epoch),
        (ErrorCode::None, LEAVE_EPOCH)
    );
    assert_eq!(g.state_name(), "Empty");
    assert_eq!(
        beat(&mut g, "a", LEAVE_EPOCH, 0).error_code,
        ErrorCode::UnknownMemberId
    );
}

fn at(start: i64, done: &str) -> Option<Durable> {
    Some(Durable {
        start: Offset(start),
        done: done.to_string(),
    })
}

#[test]
fn moved_states_are_taken_once_and_again_after_a_failed_write() {
    let mut g = group();
    join(&mut g, "a", 1, 0);
    g.session(session("a", 0, vec![]));
    let part = ShareAcquirePart {
        key: T0,
        init: Some(Offset(0)),
        log_start: Offset(0),
        batches: vec![FetchedBatch {
            first: 0,
            last: 3,
            control: false,
        }],
    };
    g.acquire("a", 500, vec![part], 0);
    assert_eq!(g.take_moved(), vec![(T0, at(0, ""))]);
    assert!(g.take_moved().is_empty());
    // Accepting 0 moves the start; accepting 2 (past the held 1) is a done run.
    let ack = |first, last| AckBatch {
        first,
        last,
        types: vec![AckType::Accept],
    };
    g.session(session("a", 1, vec![(T0, vec![ack(0, 0), ack(2, 2)])]));
    assert_eq!(g.take_moved(), vec![(T0, at(1, "1:1"))]);
    g.unmark(&[T0]);
    assert_eq!(g.take_moved(), vec![(T0, at(1, "1:1"))]);
    // Restored from the log: offset 2 stays done, 1 and 3 come back; forgotten: a tombstone.
    let mut h = group();
    h.restore(T0, at(1, "1:1").unwrap());
    assert!(h.take_moved().is_empty());
    assert_eq!(h.plan(&[T0]), vec![(T0, FetchFrom::At(Offset(1)))]);
    let p = h.partition(&T0).unwrap();
    assert_eq!(
        p.state(2).map(|s| s.0),
        Some(partition::RecordState::Acknowledged)
    );
    assert!(h.delete_topic_state(T));
    assert_eq!(h.take_moved(), vec![(T0, None)]);
    h.unmark(&[T0]);
    assert_eq!(h.take_moved(), vec![(T0, None)]);
    assert!(h.take_moved().is_empty());
}
