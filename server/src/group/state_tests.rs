//! The state machine driven by hand: time is a number of milliseconds (`at`), answers are polled
//! from oneshots.

use super::*;
use crate::channel::local::oneshot::Receiver;
use rill_protocol::ErrorCode;

/// The instant `ms` milliseconds after the epoch.
fn at(ms: i64) -> TimestampMs {
    TimestampMs(ms)
}

fn args(member_id: &str, protocols: &[&str]) -> JoinArgs {
    JoinArgs {
        member_id: member_id.to_string(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 6_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("meta-{p}"))))
            .collect(),
        require_known_member_id: true,
    }
}

fn ready<T>(rx: &mut Receiver<T>) -> Option<T> {
    rx.try_recv().expect("sender kept or answered")
}

fn who(member_id: &str, generation_id: i32) -> MemberRef {
    MemberRef {
        member_id: member_id.into(),
        group_instance_id: None,
        generation_id,
    }
}

fn sync_args(member_id: &str, generation_id: i32, assignments: &[(&str, &str)]) -> SyncArgs {
    SyncArgs {
        member_id: member_id.into(),
        generation_id,
        assignments: assignments
            .iter()
            .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
            .collect(),
        ..Default::default()
    }
}

/// A first member through MEMBER_ID_REQUIRED, join and sync: returns its id (generation 1).
fn first_member(g: &mut Group, now: i64) -> String {
    let r = ready(&mut g.join(args("", &["range"]), at(now))).unwrap();
    assert_eq!(r.error_code, ErrorCode::MemberIdRequired);
    assert!(r.member_id.starts_with("c-"));
    assert_eq!(
        g.state(),
        GroupState::Empty,
        "a pending id is not a member yet"
    );
    let id = r.member_id;
    let r =
        ready(&mut g.join(args(&id, &["range"]), at(now))).expect("sole member completes at once");
    assert_eq!(
        (r.error_code, r.generation_id, r.leader.as_str()),
        (ErrorCode::None, 1, id.as_str())
    );
    assert_eq!(r.members.len(), 1, "the leader sees every member");
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    let s = ready(&mut g.sync(sync_args(&id, 1, &[(&id, "A")]), at(now))).unwrap();
    assert_eq!(
        (s.error_code, &s.assignment[..]),
        (ErrorCode::None, &b"A"[..])
    );
    assert_eq!(g.state(), GroupState::Stable);
    id
}

#[test]
fn join_requires_member_id_then_completes_and_syncs() {
    let mut g = Group::new("g", 0);
    first_member(&mut g, 0);
}

#[test]
fn second_member_rebalances_the_first_through_heartbeat() {
    let mut g = Group::new("g", 0);
    let a = first_member(&mut g, 0);
    let b = ready(&mut g.join(args("", &["range"]), at(10)))
        .unwrap()
        .member_id;
    let mut b_join = g.join(args(&b, &["range"]), at(10));
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert!(
        ready(&mut b_join).is_none(),
        "waits for the first member to rejoin"
    );
    assert_eq!(
        g.heartbeat(&who(&a, 1), at(20)),
        ErrorCode::RebalanceInProgress
    );
    let mut a_join = g.join(args(&a, &["range"]), at(30));
    let ra = ready(&mut a_join).unwrap();
    let rb = ready(&mut b_join).unwrap();
    assert_eq!((ra.generation_id, rb.generation_id), (2, 2));
    assert_eq!(ra.leader, a, "the old leader stays leader");
    assert_eq!((ra.members.len(), rb.members.len()), (2, 0));
    // The follower's sync waits for the leader's.
    let mut b_sync = g.sync(sync_args(&b, 2, &[]), at(40));
    assert!(ready(&mut b_sync).is_none());
    let ra = ready(&mut g.sync(sync_args(&a, 2, &[(&a, "p0"), (&b, "p1")]), at(50))).unwrap();
    assert_eq!(&ra.assignment[..], b"p0");
    assert_eq!(&ready(&mut b_sync).unwrap().assignment[..], b"p1");
    assert_eq!(g.state(), GroupState::Stable);
    assert_eq!(g.heartbeat(&who(&b, 2), at(60)), ErrorCode::None);
}

#[test]
fn generation_and_membership_are_fenced() {
    let mut g = Group::new("g", 0);
    let a = first_member(&mut g, 0);
    assert_eq!(
        g.heartbeat(&who(&a, 0), at(1)),
        ErrorCode::IllegalGeneration
    );
    assert_eq!(
        g.heartbeat(&who("nobody", 1), at(1)),
        ErrorCode::UnknownMemberId
    );
    let s = ready(&mut g.sync(sync_args(&a, 7, &[]), at(1))).unwrap();
    assert_eq!(s.error_code, ErrorCode::IllegalGeneration);
    let r = ready(&mut g.join(args("ghost", &["range"]), at(1))).unwrap();
    assert_eq!(r.error_code, ErrorCode::UnknownMemberId);
    assert_eq!(
        g.validate_commit(&who(&a, 0), at(1)),
        Err(ErrorCode::IllegalGeneration)
    );
    assert_eq!(g.validate_commit(&who(&a, 1), at(1)), Ok(()));
    assert_eq!(
        g.validate_commit(&who("", -1), at(1)),
        Err(ErrorCode::UnknownMemberId),
        "group has members"
    );
}

#[test]
fn simple_commits_need_an_empty_group() {
    let mut g = Group::new("g", 0);
    assert_eq!(g.validate_commit(&who("", -1), at(0)), Ok(()));
}

#[test]
fn a_silent_member_expires_after_its_session_timeout() {
    let mut g = Group::new("g", 0);
    let a = first_member(&mut g, 0);
    let b = ready(&mut g.join(args("", &["range"]), at(0)))
        .unwrap()
        .member_id;
    let mut b_join = g.join(args(&b, &["range"]), at(0));
    drop(g.join(args(&a, &["range"]), at(0)));
    ready(&mut b_join).unwrap();
    drop(g.sync(sync_args(&b, 2, &[]), at(0)));
    drop(g.sync(sync_args(&a, 2, &[(&a, "x"), (&b, "y")]), at(0)));
    assert_eq!(g.state(), GroupState::Stable);
    // a keeps heartbeating; b goes silent (killed: no LeaveGroup).
    for t in (1_000..=6_000).step_by(1_000) {
        assert_eq!(g.heartbeat(&who(&a, 2), at(t)), ErrorCode::None);
        g.tick(at(t));
    }
    assert_eq!(
        g.state(),
        GroupState::Stable,
        "not before the session timeout"
    );
    assert!(g.tick(at(6_001)));
    assert_eq!(g.member_ids(), vec![a.clone()]);
    assert_eq!(
        g.heartbeat(&who(&a, 2), at(6_100)),
        ErrorCode::RebalanceInProgress
    );
    let r = ready(&mut g.join(args(&a, &["range"]), at(6_200))).unwrap();
    assert_eq!((r.generation_id, r.members.len()), (3, 1));
}

#[test]
fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let mut g = Group::new("g", 0);
    let a = first_member(&mut g, 0);
    let b = ready(&mut g.join(args("", &["range"]), at(0)))
        .unwrap()
        .member_id;
    let mut b_join = g.join(args(&b, &["range"]), at(0));
    // a never rejoins but keeps heartbeating (a stuck poll loop).
    for t in (1_000..10_000).step_by(1_000) {
        g.heartbeat(&who(&a, 1), at(t));
        g.tick(at(t));
        assert!(ready(&mut b_join).is_none());
    }
    g.tick(at(10_000));
    let r = ready(&mut b_join).unwrap();
    assert_eq!(
        (r.error_code, r.generation_id, r.leader.as_str()),
        (ErrorCode::None, 2, b.as_str())
    );
    assert_eq!(g.member_ids(), vec![b]);
    assert_eq!(
        g.heartbeat(&who(&a, 1), at(10_001)),
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn leave_rebalances_and_the_last_leave_empties_the_group() {
    let mut g = Group::new("g", 0);
    let a = first_member(&mut g, 0);
    assert_eq!(
        g.leave(&[(a.clone(), None), ("ghost".into(), None)], at(1)),
        vec![ErrorCode::None, ErrorCode::UnknownMemberId]
    );
    assert_eq!(g.state(), GroupState::Empty);
    assert_eq!(g.generation(), 2);
    assert!(!g.has_members());
}

#[test]
fn leaving_while_others_wait_completes_their_join() {
    let mut g = Group::new("g", 0);
    let a = first_member(&mut g, 0);
    let b = ready(&mut g.join(args("", &["range"]), at(0)))
        .unwrap()
        .member_id;
    let mut b_join = g.join(args(&b, &["range"]), at(0));
    assert_eq!(g.leave(&[(a, None)], at(1)), vec![ErrorCode::None]);
    let r = ready(&mut b_join).unwrap();
    assert_eq!(
        (r.error_code, r.leader.as_str(), r.generation_id),
        (ErrorCode::None, b.as_str(), 2)
    );
}

#[test]
fn protocol_is_one_every_member_supports() {
    let mut g = Group::new("g", 0);
    let mut x = args("", &["cooperative-sticky", "range"]);
    x.require_known_member_id = false;
    let mut y = args("", &["range", "roundrobin"]);
    y.require_known_member_id = false;
    let mut rx = g.join(x, at(0));
    let mut ry = g.join(y, at(0));
    // x completed alone first (generation 1); y's join started a new rebalance.
    let first = ready(&mut rx).unwrap();
    assert_eq!(first.protocol_name.as_deref(), Some("cooperative-sticky"));
    drop(g.join(
        JoinArgs {
            member_id: first.member_id.clone(),
            ..args("", &["cooperative-sticky", "range"])
        },
        at(1),
    ));
    let r = ready(&mut ry).unwrap();
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    let mut z = args("", &["sticky"]);
    z.require_known_member_id = false;
    let rz = ready(&mut g.join(z, at(2))).unwrap();
    assert_eq!(rz.error_code, ErrorCode::InconsistentGroupProtocol);
}

#[test]
fn static_member_rejoining_keeps_its_place_and_fences_the_old_id() {
    let mut g = Group::new("g", 0);
    let mut s = args("", &["range"]);
    s.group_instance_id = Some("inst-1".into());
    let r = ready(&mut g.join(s.clone(), at(0))).unwrap();
    assert_eq!(
        r.error_code,
        ErrorCode::None,
        "static members need no MEMBER_ID_REQUIRED round"
    );
    let old = r.member_id;
    assert!(old.starts_with("inst-1-"));
    drop(g.sync(sync_args(&old, 1, &[(&old, "mine")]), at(0)));
    assert_eq!(g.state(), GroupState::Stable);
    // Restarted: same instance id, no member id.
    let r = ready(&mut g.join(s.clone(), at(100))).unwrap();
    assert_eq!(
        (r.error_code, r.generation_id),
        (ErrorCode::None, 1),
        "no rebalance for a stable group"
    );
    let new = r.member_id;
    assert_ne!(new, old);
    assert_eq!(r.leader, new);
    let fenced = MemberRef {
        group_instance_id: Some("inst-1".into()),
        ..who(&old, 1)
    };
    assert_eq!(g.heartbeat(&fenced, at(101)), ErrorCode::FencedInstanceId);
    let mut sync = sync_args(&new, 1, &[]);
    sync.group_instance_id = Some("inst-1".into());
    assert_eq!(
        &ready(&mut g.sync(sync, at(102))).unwrap().assignment[..],
        b"mine"
    );
    // Static leave by instance id (member id unknown to the caller).
    assert_eq!(
        g.leave(&[(String::new(), Some("inst-1".into()))], at(103)),
        vec![ErrorCode::None]
    );
    assert!(!g.has_members());
}

#[test]
fn pending_member_ids_expire() {
    let mut g = Group::new("g", 0);
    let a = first_member(&mut g, 0);
    let _pending = ready(&mut g.join(args("", &["range"]), at(0)))
        .unwrap()
        .member_id;
    assert_eq!(
        g.heartbeat(&who(&a, 1), at(1)),
        ErrorCode::None,
        "a pending id does not disturb the group"
    );
    g.tick(at(7_000));
    let r = ready(&mut g.join(args(&_pending, &["range"]), at(7_001))).unwrap();
    assert_eq!(r.error_code, ErrorCode::UnknownMemberId);
}

#[test]
fn describe_shows_assignment_only_when_stable() {
    let mut g = Group::new("g", 0);
    let a = first_member(&mut g, 0);
    let d = g.describe();
    assert_eq!(
        (d.state.as_str(), d.protocol_data.as_str()),
        ("Stable", "range")
    );
    assert_eq!(d.members[0].member_id, a);
    assert_eq!(&d.members[0].assignment[..], b"A");
    assert_eq!(&d.members[0].metadata[..], b"meta-range");
}

#[test]
fn shutdown_releases_parked_joins() {
    let mut g = Group::new("g", 0);
    let _a = first_member(&mut g, 0);
    let b = ready(&mut g.join(args("", &["range"]), at(0)))
        .unwrap()
        .member_id;
    let mut b_join = g.join(args(&b, &["range"]), at(0));
    assert!(ready(&mut b_join).is_none());
    g.fail_waiters(ErrorCode::CoordinatorNotAvailable);
    assert_eq!(
        ready(&mut b_join).unwrap().error_code,
        ErrorCode::CoordinatorNotAvailable
    );
}

#[test]
fn a_leader_that_never_syncs_is_dropped_at_the_rebalance_timeout() {
    let mut g = Group::new("g", 0);
    let a = first_member(&mut g, 0);
    let b = ready(&mut g.join(args("", &["range"]), at(0)))
        .unwrap()
        .member_id;
    let mut b_join = g.join(args(&b, &["range"]), at(0));
    drop(g.join(args(&a, &["range"]), at(0)));
    assert_eq!(ready(&mut b_join).unwrap().generation_id, 2);
    // b (follower) waits for the assignment; a (leader) heartbeats but never sends it.
    let mut b_sync = g.sync(sync_args(&b, 2, &[]), at(1));
    for t in [3_000, 6_000, 9_000] {
        assert_eq!(g.heartbeat(&who(&a, 2), at(t)), ErrorCode::None);
        assert!(!g.tick(at(t)));
    }
    assert!(!g.tick(at(9_999)));
    assert!(ready(&mut b_sync).is_none());
    assert!(g.tick(at(10_001)));
    assert_eq!(
        ready(&mut b_sync).unwrap().error_code,
        ErrorCode::RebalanceInProgress
    );
    assert_eq!(g.member_ids(), vec![b.clone()]);
    let r = ready(&mut g.join(args(&b, &["range"]), at(10_002))).unwrap();
    assert_eq!((r.generation_id, r.leader.as_str()), (3, b.as_str()));
}

// ------------------------------------------------ group.initial.rebalance.delay.ms

/// A new member through MEMBER_ID_REQUIRED: its id and its parked JoinGroup.
fn join_new_member(g: &mut Group, now: i64) -> (String, Receiver<JoinResult>) {
    let id = ready(&mut g.join(args("", &["range"]), at(now)))
        .unwrap()
        .member_id;
    let rx = g.join(args(&id, &["range"]), at(now));
    (id, rx)
}

#[test]
fn the_first_rebalance_waits_the_delay_and_each_new_member_extends_it() {
    let mut g = Group::new("g", 3_000);
    let (a, mut a_join) = join_new_member(&mut g, 0);
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert!(ready(&mut a_join).is_none(), "held although a has joined");
    let (b, mut b_join) = join_new_member(&mut g, 1_000);
    g.tick(at(2_999));
    assert!(ready(&mut a_join).is_none());
    g.tick(at(3_000));
    assert!(
        ready(&mut a_join).is_none() && ready(&mut b_join).is_none(),
        "b arrived during the wait: one more wait"
    );
    g.tick(at(5_999));
    assert!(ready(&mut a_join).is_none());
    g.tick(at(6_000));
    let (ra, rb) = (ready(&mut a_join).unwrap(), ready(&mut b_join).unwrap());
    assert_eq!(
        (ra.generation_id, rb.generation_id),
        (1, 1),
        "one generation"
    );
    assert_eq!((ra.leader.as_str(), ra.members.len()), (a.as_str(), 2));
    assert_eq!(rb.member_id, b);
    assert_eq!(g.state(), GroupState::CompletingRebalance);
}

#[test]
fn the_delay_never_outlasts_the_rebalance_timeout() {
    // args(): rebalance timeout 10 s. A member arriving in every wait extends it to 10 s, no more.
    let mut g = Group::new("g", 3_000);
    let (_, mut first) = join_new_member(&mut g, 0);
    let mut joins = Vec::new();
    for (t, tick) in [
        (1_000, 3_000),
        (4_000, 6_000),
        (7_000, 9_000),
        (9_500, 9_999),
    ] {
        joins.push(join_new_member(&mut g, t).1);
        g.tick(at(tick));
        assert!(ready(&mut first).is_none(), "still held at {tick}");
    }
    g.tick(at(10_000));
    let r = ready(&mut first).unwrap();
    assert_eq!((r.generation_id, r.members.len()), (1, 5));
    for mut rx in joins {
        assert_eq!(ready(&mut rx).unwrap().generation_id, 1);
    }
    // A delay longer than the rebalance timeout is cut to it.
    let mut g = Group::new("g", 60_000);
    let (_, mut only) = join_new_member(&mut g, 0);
    g.tick(at(9_999));
    assert!(ready(&mut only).is_none());
    g.tick(at(10_000));
    assert_eq!(ready(&mut only).unwrap().generation_id, 1);
}

#[test]
fn a_member_leaving_during_the_delay() {
    let mut g = Group::new("g", 3_000);
    let (a, mut a_join) = join_new_member(&mut g, 0);
    let (b, mut b_join) = join_new_member(&mut g, 500);
    assert_eq!(
        g.leave(&[(b.clone(), None)], at(1_000)),
        vec![ErrorCode::None]
    );
    assert_eq!(
        ready(&mut b_join).unwrap().error_code,
        ErrorCode::UnknownMemberId,
        "the leaver's parked join is answered"
    );
    g.tick(at(3_000));
    assert!(
        ready(&mut a_join).is_none(),
        "b's arrival still extends once"
    );
    g.tick(at(6_000));
    let r = ready(&mut a_join).unwrap();
    assert_eq!((r.generation_id, r.leader.as_str()), (1, a.as_str()));
    assert_eq!(g.member_ids(), vec![a.clone()]);

    // When the last member leaves, nothing is left to wait for: Empty at once.
    let mut g = Group::new("g", 3_000);
    let (a, mut a_join) = join_new_member(&mut g, 0);
    assert_eq!(g.leave(&[(a, None)], at(100)), vec![ErrorCode::None]);
    assert_eq!(
        ready(&mut a_join).unwrap().error_code,
        ErrorCode::UnknownMemberId
    );
    assert_eq!(g.state(), GroupState::Empty);
}

#[test]
fn a_group_with_members_rebalances_without_the_delay() {
    let mut g = Group::new("g", 3_000);
    let (a, mut a_join) = join_new_member(&mut g, 0);
    g.tick(at(3_000));
    assert_eq!(ready(&mut a_join).unwrap().generation_id, 1);
    let s = ready(&mut g.sync(sync_args(&a, 1, &[(&a, "all")]), at(3_001))).unwrap();
    assert_eq!(s.error_code, ErrorCode::None);
    assert_eq!(g.state(), GroupState::Stable);
    // A second member joins a Stable group: the rebalance completes once a rejoins, no delay.
    let (_, mut b_join) = join_new_member(&mut g, 4_000);
    let mut a_join = g.join(args(&a, &["range"]), at(4_010));
    assert_eq!(ready(&mut a_join).unwrap().generation_id, 2);
    assert_eq!(ready(&mut b_join).unwrap().generation_id, 2);
}

/// A consumer's metadata whose topics count claims ~2^30 strings: once made the codec allocate
/// 58 GB and abort the broker on OffsetDelete (found by the differential suite, issue 28).
#[test]
fn subscribed_topics_of_hostile_metadata_is_unknown_not_an_abort() {
    let mut g = Group::new("g", 0);
    let id = first_member(&mut g, 0);
    assert!(!id.is_empty());
    // "meta-range": version 0x6d65 (clamped to 3), then a topics count of 0x74612d72.
    assert_eq!(g.subscribed_topics(), None);
}

/// A well-formed subscription (v0: two topics, null user data) is read.
#[test]
fn subscribed_topics_reads_a_real_subscription() {
    let mut g = Group::new("g", 0);
    let mut join = args("", &["range"]);
    let mut meta = vec![0, 0, 0, 0, 0, 2, 0, 1, b'a', 0, 1, b'b'];
    meta.extend_from_slice(&(-1i32).to_be_bytes());
    join.protocols = vec![("range".into(), Bytes::from(meta))];
    let r = ready(&mut g.join(join.clone(), at(0))).unwrap();
    join.member_id = r.member_id;
    ready(&mut g.join(join, at(0))).expect("sole member completes at once");
    assert_eq!(
        g.subscribed_topics(),
        Some(vec!["a".to_string(), "b".to_string()])
    );
}

#[test]
fn group_max_size_refuses_members_past_it_as_kafka_does() {
    let mut g = Group::new("g", 0);
    g.set_max_size(2);
    let first = first_member(&mut g, 0); // Stable with 1 member
                                         // A second member joins: room for it; the group rebalances.
    let second = ready(&mut g.join(args("", &["range"]), at(0)))
        .unwrap()
        .member_id;
    let mut second_join = g.join(args(&second, &["range"]), at(0));
    assert!(
        ready(&mut second_join).is_none(),
        "waits for the first to rejoin"
    );
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    // While rebalancing, the members waiting count: the first has not rejoined yet, so a
    // third new member still fits beside the one waiting...
    let third = ready(&mut g.join(args("", &["range"]), at(0)))
        .unwrap()
        .member_id;
    let mut third_join = g.join(args(&third, &["range"]), at(0));
    assert!(ready(&mut third_join).is_none());
    // ...but the first, rejoining last, finds two waiting: it is left out (Kafka kicks the
    // last to rejoin out of a group past its maximum).
    let refused = ready(&mut g.join(args(&first, &["range"]), at(0))).unwrap();
    assert_eq!(
        (refused.error_code, refused.member_id.as_str()),
        (ErrorCode::GroupMaxSizeReached, "")
    );
    assert!(
        !g.member_ids().contains(&first),
        "the refused member is removed"
    );
    let done = ready(&mut second_join).expect("the rebalance completes without it");
    assert_eq!((done.error_code, done.members.len()), (ErrorCode::None, 2));
    let _ = ready(&mut third_join).unwrap();
    // Full and not rebalancing: a new member is refused, the members are not.
    assert_eq!(g.state(), GroupState::CompletingRebalance);
    let r = ready(&mut g.join(args("", &["range"]), at(0))).unwrap();
    assert_eq!(r.error_code, ErrorCode::GroupMaxSizeReached);
    let r = ready(&mut g.join(args(&second, &["range"]), at(0))).unwrap();
    assert_eq!(
        r.error_code,
        ErrorCode::None,
        "a member of a full group rejoins"
    );
}

#[test]
fn member_ids_pending_their_rejoin_are_bounded_too() {
    let mut g = Group::new("g", 0);
    g.set_max_size(3);
    let pending: Vec<String> = (0..3)
        .map(|_| ready(&mut g.join(args("", &["range"]), at(0))).unwrap())
        .map(|r| {
            assert_eq!(r.error_code, ErrorCode::MemberIdRequired);
            r.member_id
        })
        .collect();
    assert_eq!(g.state(), GroupState::Empty);
    let r = ready(&mut g.join(args("", &["range"]), at(0))).unwrap();
    assert_eq!(
        r.error_code,
        ErrorCode::GroupMaxSizeReached,
        "a fourth pending id"
    );
    // The pending ones may still come back with their ids (the join then waits for the rest).
    let mut joined = g.join(args(&pending[0], &["range"]), at(0));
    assert!(ready(&mut joined).is_none());
    assert_eq!(g.member_ids(), vec![pending[0].clone()]);
}

/// Kafka checks a rejoin against every member, the joiner's own current protocols included:
/// a sole member changes neither its protocol type nor its protocol by rejoining.
#[test]
fn a_sole_member_rejoining_keeps_the_groups_protocol_type_and_protocols() {
    let mut g = Group::new("g", 0);
    let id = first_member(&mut g, 0);
    let mut connect = args(&id, &["range"]);
    connect.protocol_type = "connect".into();
    let other_type = ready(&mut g.join(connect, at(1))).unwrap();
    assert_eq!(other_type.error_code, ErrorCode::InconsistentGroupProtocol);
    let other_protocol = ready(&mut g.join(args(&id, &["sticky"]), at(1))).unwrap();
    assert_eq!(
        other_protocol.error_code,
        ErrorCode::InconsistentGroupProtocol
    );
    let same = ready(&mut g.join(args(&id, &["sticky", "range"]), at(1))).unwrap();
    assert_eq!(same.error_code, ErrorCode::None);
}
