use super::*;

/// The instant `ms` milliseconds after the epoch.
fn at(ms: i64) -> TimestampMs {
    TimestampMs(ms)
}

const T1: Uuid = Uuid::from_bytes([1; 16]);
const T2: Uuid = Uuid::from_bytes([2; 16]);

fn config() -> ConsumerConfig {
    ConsumerConfig {
        session_timeout_ms: 1_000,
        heartbeat_interval_ms: 100,
        ..Default::default()
    }
}

fn topics() -> Vec<TopicInfo> {
    vec![TopicInfo {
        name: "orders".into(),
        id: T1,
        partitions: 6,
    }]
}

fn join(member: &str, names: &[&str]) -> ConsumerHeartbeatArgs {
    ConsumerHeartbeatArgs {
        version: 1,
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 5_000,
        subscribed_topic_names: Some(names.iter().map(|s| s.to_string()).collect()),
        owned: Some(Vec::new()),
        topics: topics(),
        ..Default::default()
    }
}

fn beat(member: &str, epoch: i32, owned: &Assignment) -> ConsumerHeartbeatArgs {
    ConsumerHeartbeatArgs {
        version: 1,
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(to_wire(owned)),
        topics: topics(),
        ..Default::default()
    }
}

/// A client that applies every assignment it is given, as librdkafka does.
struct Client {
    id: String,
    epoch: i32,
    owned: Assignment,
}

impl Client {
    fn join(g: &mut ConsumerGroup, id: &str, now: i64) -> Client {
        let r = g.heartbeat(join(id, &["orders"]), at(now));
        assert_eq!(r.error_code, ErrorCode::None, "{r:?}");
        Client {
            id: id.into(),
            epoch: r.member_epoch,
            owned: from_wire(&r.assignment.expect("a join gets its assignment")),
        }
    }

    fn beat(&mut self, g: &mut ConsumerGroup, now: i64) -> ConsumerHeartbeatResult {
        let r = g.heartbeat(beat(&self.id, self.epoch, &self.owned), at(now));
        if r.error_code.is_ok() {
            self.epoch = r.member_epoch;
            if let Some(a) = &r.assignment {
                self.owned = from_wire(a);
            }
        }
        r
    }

    fn count(&self) -> usize {
        self.owned.values().map(|s| s.len()).sum()
    }
}

/// No partition is owned by two members (the safety property of reconciliation).
fn disjoint(g: &ConsumerGroup) {
    let mut seen = BTreeSet::new();
    for m in g.members.values() {
        for (t, ps) in m.assigned.iter().chain(m.pending_revocation.iter()) {
            for p in ps {
                assert!(seen.insert((*t, *p)), "{t}-{p} owned twice");
            }
        }
    }
}

#[test]
fn first_member_gets_everything() {
    let mut g = ConsumerGroup::new("g", config());
    let a = Client::join(&mut g, "a", 0);
    assert_eq!(a.count(), 6);
    assert_eq!(a.epoch, 1);
    assert_eq!(g.state_name(), "Stable");
}

#[test]
fn six_to_three_three_and_back_revokes_before_assigning() {
    let mut g = ConsumerGroup::new("g", config());
    let mut a = Client::join(&mut g, "a", 0);
    let mut b = Client::join(&mut g, "b", 10);
    // b may not get what a still owns.
    assert_eq!(b.count(), 0);
    assert_eq!(g.state_name(), "Reconciling");
    disjoint(&g);
    // a is told to give up three partitions, keeping its epoch.
    let r = a.beat(&mut g, 20);
    assert_eq!(r.member_epoch, 1);
    assert_eq!(a.count(), 3);
    assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
    disjoint(&g);
    b.beat(&mut g, 25);
    assert_eq!(b.count(), 0, "a has not acknowledged yet");
    // a's next heartbeat shows the revocation done: it moves to epoch 2.
    a.beat(&mut g, 30);
    assert_eq!(a.epoch, 2);
    b.beat(&mut g, 40);
    assert_eq!((a.count(), b.count()), (3, 3));
    assert_eq!(g.state_name(), "Stable");
    disjoint(&g);
    // a leaves; b takes all six.
    let r = g.heartbeat(beat("a", LEAVE_EPOCH, &a.owned), at(50));
    assert_eq!(r.member_epoch, LEAVE_EPOCH);
    b.beat(&mut g, 60);
    assert_eq!(b.count(), 6);
    assert_eq!(g.state_name(), "Stable");
}

#[test]
fn a_lost_answer_is_accepted_at_the_previous_epoch() {
    let mut g = ConsumerGroup::new("g", config());
    let mut a = Client::join(&mut g, "a", 0);
    let _b = Client::join(&mut g, "b", 1);
    a.beat(&mut g, 2); // revoke
    let old = a.epoch;
    a.beat(&mut g, 3); // to epoch 2, but suppose the answer was lost
    let r = g.heartbeat(beat("a", old, &a.owned), at(4));
    assert_eq!(r.error_code, ErrorCode::None);
    // An epoch never given is fenced.
    let r = g.heartbeat(beat("a", 99, &a.owned), at(5));
    assert_eq!(r.error_code, ErrorCode::FencedMemberEpoch);
    let r = g.heartbeat(beat("nobody", 3, &Assignment::new()), at(5));
    assert_eq!(r.error_code, ErrorCode::UnknownMemberId);
}

#[test]
fn sessions_expire_and_revocations_time_out() {
    let mut g = ConsumerGroup::new("g", config());
    let mut a = Client::join(&mut g, "a", 0);
    let b = Client::join(&mut g, "b", 0);
    a.beat(&mut g, 10);
    assert!(!g.tick(at(900)));
    // b never heartbeats again: fenced after its 1 s session; a keeps heartbeating.
    a.beat(&mut g, 950);
    assert!(g.tick(at(1_001)));
    assert!(!g.members.contains_key(&b.id));
    a.beat(&mut g, 1_010);
    a.beat(&mut g, 1_020);
    assert_eq!(a.count(), 6);
    // A member that never acknowledges a revocation is fenced after its rebalance timeout.
    let mut g = ConsumerGroup::new(
        "g",
        ConsumerConfig {
            session_timeout_ms: 60_000,
            ..config()
        },
    );
    let a = Client::join(&mut g, "a", 0);
    Client::join(&mut g, "b", 0);
    // Told to revoke (its rebalance timeout is 5 s); it keeps saying it owns all six.
    let r = g.heartbeat(beat("a", a.epoch, &a.owned), at(10));
    assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
    assert!(r.assignment.is_some());
    g.heartbeat(beat("a", a.epoch, &a.owned), at(4_000));
    assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
    assert!(!g.tick(at(5_000)));
    assert!(g.tick(at(5_011)));
    assert!(!g.members.contains_key("a"));
}

#[test]
fn static_member_comes_back_to_its_partitions() {
    let mut g = ConsumerGroup::new("g", config());
    let mut args = join("a1", &["orders"]);
    args.instance_id = Some("inst".into());
    let r = g.heartbeat(args.clone(), at(0));
    let owned = from_wire(&r.assignment.unwrap());
    let mut b = Client::join(&mut g, "b", 0);
    let mut a = Client {
        id: "a1".into(),
        epoch: r.member_epoch,
        owned,
    };
    for now in 1..5 {
        a.beat(&mut g, now);
        b.beat(&mut g, now);
    }
    let mine = a.owned.clone();
    assert_eq!(a.count(), 3);
    let epoch = g.epoch;
    // Leaves as a static member: keeps its partitions for its session.
    let mut leave = beat("a1", STATIC_LEAVE_EPOCH, &a.owned);
    leave.instance_id = Some("inst".into());
    assert_eq!(g.heartbeat(leave, at(10)).member_epoch, STATIC_LEAVE_EPOCH);
    // Another process with the instance id, while the first is still in: refused.
    let mut other = join("a-other", &["orders"]);
    other.instance_id = Some("inst".into());
    b.beat(&mut g, 20);
    assert_eq!(b.count(), 3, "nobody takes the away member's partitions");
    // The restarted process (a new member id) takes them over, with no new group epoch.
    let r = g.heartbeat(other, at(30));
    assert_eq!(r.error_code, ErrorCode::None, "{r:?}");
    assert_eq!(from_wire(&r.assignment.unwrap()), mine);
    assert_eq!(g.epoch, epoch);
    assert!(!g.members.contains_key("a1"));
    // A second process with the same instance id while the new one is live: refused.
    let mut third = join("a-third", &["orders"]);
    third.instance_id = Some("inst".into());
    assert_eq!(
        g.heartbeat(third, at(40)).error_code,
        ErrorCode::UnreleasedInstanceId
    );
}

#[test]
fn static_member_away_past_its_session_is_removed() {
    let mut g = ConsumerGroup::new("g", config());
    let mut args = join("a1", &["orders"]);
    args.instance_id = Some("inst".into());
    g.heartbeat(args, at(0));
    let mut leave = beat("a1", STATIC_LEAVE_EPOCH, &Assignment::new());
    leave.instance_id = Some("inst".into());
    g.heartbeat(leave, at(10));
    assert!(!g.tick(at(1_000)));
    assert!(g.tick(at(1_011)));
    assert!(!g.has_members());
    assert_eq!(g.state_name(), "Empty");
}

#[test]
fn regex_subscription_follows_new_topics() {
    let mut g = ConsumerGroup::new("g", config());
    let mut args = join("a", &[]);
    args.subscribed_topic_names = None;
    args.subscribed_topic_regex = Some("ord.*".into());
    let r = g.heartbeat(args, at(0));
    assert_eq!(from_wire(&r.assignment.unwrap())[&T1].len(), 6);
    let epoch = g.epoch;
    let mut a = Client {
        id: "a".into(),
        epoch: r.member_epoch,
        owned: from_wire(&to_wire(&g.members["a"].assigned)),
    };
    // A topic created later that matches, and one that matches only in part (not taken).
    let mut later = beat("a", a.epoch, &a.owned);
    later.topics.push(TopicInfo {
        name: "orders-eu".into(),
        id: T2,
        partitions: 2,
    });
    later.topics.push(TopicInfo {
        name: "x-orders".into(),
        id: Uuid::from_bytes([3; 16]),
        partitions: 2,
    });
    let r = g.heartbeat(later, at(10));
    assert!(g.epoch > epoch);
    a.owned = from_wire(&r.assignment.unwrap());
    assert_eq!(a.owned[&T2].len(), 2);
    assert_eq!(a.owned.len(), 2);
}

#[test]
fn bad_regex_and_oversized_regex_are_refused() {
    let mut g = ConsumerGroup::new("g", config());
    let mut args = join("a", &[]);
    args.subscribed_topic_regex = Some("(".into());
    assert_eq!(
        g.heartbeat(args.clone(), at(0)).error_code,
        ErrorCode::InvalidRegularExpression
    );
    args.subscribed_topic_regex = Some("a".repeat(REGEX_BYTES_MAX + 1));
    assert_eq!(
        g.heartbeat(args, at(0)).error_code,
        ErrorCode::InvalidRegularExpression
    );
    // A program past the size limit (a counted repetition that blows up) is refused too.
    assert!(compile_regex("(a{1000}){1000}").is_err());
}

#[test]
fn partition_growth_bumps_the_epoch_and_assigns_the_new_partitions() {
    let mut g = ConsumerGroup::new("g", config());
    let a = Client::join(&mut g, "a", 0);
    let mut grown = beat("a", a.epoch, &a.owned);
    grown.topics[0].partitions = 8;
    let r = g.heartbeat(grown, at(5));
    assert_eq!(r.member_epoch, 2);
    assert_eq!(from_wire(&r.assignment.unwrap())[&T1].len(), 8);
}

#[test]
fn range_assignor_is_chosen_by_the_members() {
    let mut g = ConsumerGroup::new("g", config());
    let mut args = join("a", &["orders"]);
    args.server_assignor = Some("range".into());
    g.heartbeat(args, at(0));
    assert_eq!(g.assignor, Assignor::Range);
    assert_eq!(g.describe().assignor_name, "range");
}

#[test]
fn offset_commits_check_the_member_epoch() {
    let mut g = ConsumerGroup::new("g", config());
    assert_eq!(
        g.validate_member("", -1),
        ErrorCode::None,
        "no members: admin"
    );
    let a = Client::join(&mut g, "a", 0);
    assert_eq!(g.validate_member("a", a.epoch), ErrorCode::None);
    assert_eq!(
        g.validate_member("a", a.epoch + 1),
        ErrorCode::StaleMemberEpoch
    );
    assert_eq!(
        g.validate_member("a", a.epoch - 1),
        ErrorCode::StaleMemberEpoch
    );
    assert_eq!(g.validate_member("x", 1), ErrorCode::UnknownMemberId);
    assert_eq!(g.validate_member("", -1), ErrorCode::UnknownMemberId);
}

/// Kafka 4.4's assignment epochs: a commit at the member's previous epoch, sent just before a
/// rebalance bumped it, lands for the partitions it has held since, and fails as a whole
/// (STALE_MEMBER_EPOCH) when it names one it gave up or was given after that epoch.
#[test]
fn a_commit_at_an_older_epoch_lands_for_partitions_held_since() {
    let mut g = ConsumerGroup::new("g", config());
    let mut a = Client::join(&mut g, "a", 0);
    let first = a.epoch;
    assert_eq!(a.count(), 6);
    let mut b = Client::join(&mut g, "b", 1);
    // a revokes what b is to get, then both reach the new epoch.
    for now in 2..10 {
        a.beat(&mut g, now);
        b.beat(&mut g, now);
    }
    assert!(a.epoch > first, "a moved to the new epoch");
    assert_eq!(a.count() + b.count(), 6);
    assert!(b.count() > 0);
    let kept = *a.owned[&T1].iter().next().unwrap();
    let given_away = *b.owned[&T1].iter().next().unwrap();
    let commit = |g: &ConsumerGroup, member: &str, epoch, ps: &[PartitionIndex]| {
        g.validate_commit(
            member,
            epoch,
            ps.iter().map(|p| TopicPartitionRef::new("orders", *p)),
        )
    };
    assert_eq!(
        commit(&g, "a", a.epoch, &[kept, given_away]),
        ErrorCode::None
    );
    assert_eq!(commit(&g, "a", first, &[kept]), ErrorCode::None);
    assert_eq!(commit(&g, "a", first, &[]), ErrorCode::None);
    assert_eq!(
        commit(&g, "a", first, &[kept, given_away]),
        ErrorCode::StaleMemberEpoch,
        "a gave it up"
    );
    // b was given its partitions at its current epoch: nothing at an older one.
    assert_eq!(
        commit(&g, "b", b.epoch - 1, &[given_away]),
        ErrorCode::StaleMemberEpoch
    );
    assert_eq!(commit(&g, "b", b.epoch, &[given_away]), ErrorCode::None);
    assert_eq!(
        commit(&g, "a", a.epoch + 1, &[kept]),
        ErrorCode::StaleMemberEpoch,
        "newer than the member's"
    );
    assert!(
        commit(&g, "a", first, &[kept]).is_ok(),
        "and again: validating changes nothing"
    );
    assert_eq!(
        g.validate_commit("x", first, [TopicPartitionRef::new("orders", kept)]),
        ErrorCode::UnknownMemberId
    );
    assert_eq!(
        g.validate_commit("a", first, [TopicPartitionRef::new("other-topic", kept)]),
        ErrorCode::StaleMemberEpoch,
        "a topic it was never given"
    );
}

#[test]
fn max_size_refuses_one_more_member() {
    let mut g = ConsumerGroup::new(
        "g",
        ConsumerConfig {
            max_size: 1,
            ..config()
        },
    );
    Client::join(&mut g, "a", 0);
    let r = g.heartbeat(join("b", &["orders"]), at(0));
    assert_eq!(r.error_code, ErrorCode::GroupMaxSizeReached);
}

#[test]
fn many_members_churning_never_share_a_partition() {
    let mut g = ConsumerGroup::new("g", config());
    let mut clients: Vec<Client> = Vec::new();
    let mut rng = 7u64;
    for step in 0..400i64 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let pick = (rng >> 33) as usize;
        match pick % 5 {
            0 if clients.len() < 8 => clients.push(Client::join(&mut g, &format!("m{step}"), step)),
            1 if !clients.is_empty() => {
                let c = clients.remove(pick % clients.len());
                g.heartbeat(beat(&c.id, LEAVE_EPOCH, &c.owned), at(step));
            }
            _ => {
                for c in clients.iter_mut() {
                    let r = c.beat(&mut g, step);
                    assert_eq!(r.error_code, ErrorCode::None, "{r:?}");
                }
            }
        }
        disjoint(&g);
    }
    // Quiet heartbeats converge: every partition owned, spread at most one apart.
    for step in 400..420 {
        for c in clients.iter_mut() {
            c.beat(&mut g, step);
        }
    }
    if !clients.is_empty() {
        let total: usize = clients.iter().map(|c| c.count()).sum();
        assert_eq!(total, 6);
        assert_eq!(g.state_name(), "Stable");
    }
}
