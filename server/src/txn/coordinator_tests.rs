//! The coordinator over an in-memory journal and a fake broker, with a manual clock.

use std::cell::Cell;

use super::*;
use crate::txn::journal::MemTxnJournal;
use crate::txn::state::TxnState;
use futures::executor::block_on;
use rill_engine::io::sim::ManualClock;
use rill_types::TopicPartitionRef;

/// The typed keys of `(topic, partition)` pairs.
fn typed(parts: &[(&str, i32)]) -> Vec<TopicPartition> {
    parts
        .iter()
        .map(|(t, p)| TopicPartition::new(*t, PartitionIndex(*p)))
        .collect()
}

/// A broker that records what the coordinator asks of it.
#[derive(Default)]
struct FakeEnv {
    next_id: Cell<i64>,
    markers: RefCell<Vec<(String, i32, TxnMarker)>>,
    group_ends: RefCell<Vec<(String, ProducerId, bool)>>,
    pending: RefCell<Vec<(String, ProducerId, usize)>>,
    fail_markers: Cell<Option<ErrorCode>>,
}

impl TxnEnv for FakeEnv {
    fn allocate_producer_id(&self) -> Result<ProducerId, ErrorCode> {
        self.next_id.set(self.next_id.get() + 1);
        Ok(ProducerId(1000 + self.next_id.get()))
    }
    fn partition_refusal(&self, tp: TopicPartitionRef<'_>) -> Option<ErrorCode> {
        (tp.topic == "missing" || !tp.partition.is_within(4))
            .then_some(ErrorCode::UnknownTopicOrPartition)
    }
    async fn write_marker(
        &self,
        tp: TopicPartitionRef<'_>,
        marker: TxnMarker,
    ) -> Result<(), ErrorCode> {
        if let Some(code) = self.fail_markers.get() {
            return Err(code);
        }
        self.markers
            .borrow_mut()
            .push((tp.topic.into(), tp.partition.0, marker));
        Ok(())
    }
    async fn end_group_txn(&self, group: &str, marker: TxnMarker) -> Result<(), ErrorCode> {
        self.group_ends
            .borrow_mut()
            .push((group.into(), marker.producer_id, marker.commit));
        Ok(())
    }
    async fn commit_group_txn_offsets(
        &self,
        group: &str,
        pid: ProducerId,
        _member: MemberRef,
        offsets: TxnOffsets,
    ) -> Vec<ErrorCode> {
        self.pending
            .borrow_mut()
            .push((group.into(), pid, offsets.len()));
        vec![ErrorCode::None; offsets.len()]
    }
}

struct Harness {
    c: TxnCoordinator<MemTxnJournal>,
    clock: Rc<ManualClock>,
    env: FakeEnv,
}

fn harness() -> Harness {
    let clock = Rc::new(ManualClock::new(TimestampMs(1_000)));
    Harness {
        c: TxnCoordinator::new(
            MemTxnJournal::default(),
            clock.clone(),
            TxnConfig::default(),
            Vec::new(),
        ),
        clock,
        env: FakeEnv::default(),
    }
}

impl Harness {
    fn run(&self, id: &str, op: TxnOp) -> TxnReply {
        block_on(self.c.handle(id, op, &self.env))
    }

    fn init(&self, id: &str, timeout_ms: i32) -> TxnProducer {
        match self.run(
            id,
            TxnOp::InitProducerId {
                timeout_ms,
                expected: None,
            },
        ) {
            TxnReply::Init(Ok((id, epoch))) => TxnProducer { id, epoch },
            other => panic!("{other:?}"),
        }
    }

    fn add(&self, id: &str, producer: TxnProducer, parts: &[(&str, i32)]) -> Vec<ErrorCode> {
        let partitions = typed(parts);
        match self.run(
            id,
            TxnOp::AddPartitions {
                producer,
                partitions,
                verify_only: false,
            },
        ) {
            TxnReply::Partitions(codes) => codes,
            other => panic!("{other:?}"),
        }
    }

    fn verify(&self, id: &str, producer: TxnProducer, parts: &[(&str, i32)]) -> Vec<ErrorCode> {
        let partitions = typed(parts);
        match self.run(
            id,
            TxnOp::AddPartitions {
                producer,
                partitions,
                verify_only: true,
            },
        ) {
            TxnReply::Partitions(codes) => codes,
            other => panic!("{other:?}"),
        }
    }

    fn end(&self, id: &str, producer: TxnProducer, commit: bool) -> ErrorCode {
        match self.run(id, TxnOp::End { producer, commit }) {
            TxnReply::Done(code) => code,
            other => panic!("{other:?}"),
        }
    }

    fn state(&self, id: &str) -> TxnState {
        self.c.get(id).unwrap().state
    }
}

#[test]
fn commit_writes_markers_to_every_partition_and_ends_group_offsets() {
    let h = harness();
    let p = h.init("tx", 60_000);
    assert_eq!(
        h.add("tx", p, &[("t", 0), ("u", 1)]),
        vec![ErrorCode::None; 2]
    );
    let add_offsets = TxnOp::AddOffsets {
        producer: p,
        group: "g".into(),
    };
    assert_eq!(h.run("tx", add_offsets), TxnReply::Done(ErrorCode::None));
    let commit = TxnOp::CommitOffsets {
        producer: p,
        group: "g".into(),
        member: MemberRef {
            member_id: String::new(),
            group_instance_id: None,
            generation_id: -1,
        },
        offsets: vec![(
            "in".into(),
            0,
            crate::group::offsets::CommittedOffset {
                offset: rill_engine::Offset(5),
                leader_epoch: rill_types::LeaderEpoch(-1),
                metadata: None,
                commit_time_ms: rill_types::TimestampMs(0),
            },
        )],
    };
    assert_eq!(
        h.run("tx", commit),
        TxnReply::Offsets(vec![ErrorCode::None])
    );
    assert_eq!(h.end("tx", p, true), ErrorCode::None);
    assert_eq!(h.state("tx"), TxnState::CompleteCommit);
    let markers = h.env.markers.borrow();
    assert_eq!(markers.len(), 2);
    assert!(markers
        .iter()
        .all(|(_, _, m)| m.commit && m.producer_id == p.id && m.producer_epoch == p.epoch));
    assert_eq!(*h.env.group_ends.borrow(), vec![("g".into(), p.id, true)]);
    let states: Vec<TxnState> =
        h.c.journal()
            .records
            .borrow()
            .iter()
            .map(|r| r.metadata.as_ref().unwrap().state)
            .collect();
    assert_eq!(
        states,
        vec![
            TxnState::Empty,
            TxnState::Ongoing,
            TxnState::Ongoing,
            TxnState::PrepareCommit,
            TxnState::CompleteCommit
        ],
        "every transition is durable before it is installed"
    );
    assert_eq!(
        h.end("tx", p, true),
        ErrorCode::None,
        "a retried commit succeeds"
    );
}

#[test]
fn unknown_partitions_and_unverified_partitions_are_refused() {
    let h = harness();
    let p = h.init("tx", 60_000);
    assert_eq!(
        h.add("tx", p, &[("t", 0), ("missing", 0)]),
        vec![
            ErrorCode::OperationNotAttempted,
            ErrorCode::UnknownTopicOrPartition
        ]
    );
    assert_eq!(h.add("tx", p, &[("t", 0)]), vec![ErrorCode::None]);
    assert_eq!(
        h.verify("tx", p, &[("t", 0), ("t", 1)]),
        vec![ErrorCode::None, ErrorCode::TransactionAbortable]
    );
    let stale = TxnProducer {
        epoch: ProducerEpoch(p.epoch.0 - 1),
        ..p
    };
    assert_eq!(
        h.verify("tx", stale, &[("t", 0)]),
        vec![ErrorCode::ProducerFenced]
    );
    assert_eq!(
        h.verify("nobody", p, &[("t", 0)]),
        vec![ErrorCode::InvalidProducerIdMapping]
    );
    let offsets = TxnOp::CommitOffsets {
        producer: p,
        group: "not-added".into(),
        member: MemberRef::default(),
        offsets: Vec::new(),
    };
    assert_eq!(h.run("tx", offsets), TxnReply::Offsets(Vec::new()));
}

#[test]
fn a_new_producer_fences_the_old_one_and_aborts_its_transaction() {
    let h = harness();
    let old = h.init("tx", 60_000);
    h.add("tx", old, &[("t", 2)]);
    let new = h.init("tx", 60_000);
    assert_eq!(new.id, old.id);
    assert_eq!(
        new.epoch,
        ProducerEpoch(old.epoch.0 + 2),
        "fenced once to abort, bumped once more"
    );
    let markers = h.env.markers.borrow();
    assert_eq!(markers.len(), 1);
    assert!(!markers[0].2.commit);
    assert_eq!(markers[0].2.producer_epoch.0, old.epoch.0 + 1);
    drop(markers);
    assert_eq!(
        h.add("tx", old, &[("t", 0)]),
        vec![ErrorCode::ProducerFenced]
    );
    assert_eq!(h.end("tx", old, true), ErrorCode::ProducerFenced);
}

#[test]
fn a_timed_out_transaction_is_aborted_with_a_fencing_epoch() {
    let h = harness();
    let p = h.init("tx", 5_000);
    h.add("tx", p, &[("t", 1)]);
    h.clock.advance(5_000);
    block_on(h.c.tick(&h.env));
    assert_eq!(h.state("tx"), TxnState::Ongoing, "not yet past its timeout");
    h.clock.advance(1);
    block_on(h.c.tick(&h.env));
    assert_eq!(h.state("tx"), TxnState::CompleteAbort);
    assert_eq!(h.env.markers.borrow()[0].2.producer_epoch.0, p.epoch.0 + 1);
    assert_eq!(h.end("tx", p, true), ErrorCode::ProducerFenced);
    let again = h.init("tx", 5_000);
    assert_eq!(h.add("tx", again, &[("t", 1)]), vec![ErrorCode::None]);
    assert_eq!(h.end("tx", again, true), ErrorCode::None);
}

#[test]
fn markers_that_fail_are_finished_by_a_later_tick() {
    let h = harness();
    let p = h.init("tx", 60_000);
    h.add("tx", p, &[("t", 0)]);
    h.env.fail_markers.set(Some(ErrorCode::KafkaStorageError));
    assert_eq!(
        h.end("tx", p, false),
        ErrorCode::None,
        "the decision is durable"
    );
    assert_eq!(h.state("tx"), TxnState::PrepareAbort);
    assert_eq!(
        h.add("tx", p, &[("t", 1)]),
        vec![ErrorCode::ConcurrentTransactions]
    );
    assert_eq!(
        h.init_reply("tx"),
        TxnReply::Init(Err(ErrorCode::ConcurrentTransactions))
    );
    h.env.fail_markers.set(None);
    block_on(h.c.tick(&h.env));
    assert_eq!(h.state("tx"), TxnState::CompleteAbort);
    assert_eq!(h.add("tx", p, &[("t", 1)]), vec![ErrorCode::None]);
}

#[test]
fn a_restarted_coordinator_finishes_decisions_and_keeps_open_transactions() {
    let h = harness();
    let p = h.init("a", 10_000);
    h.add("a", p, &[("t", 0)]);
    h.env.fail_markers.set(Some(ErrorCode::KafkaStorageError));
    h.end("a", p, true);
    let q = h.init("b", 10_000);
    h.add("b", q, &[("t", 1)]);
    // Replay what the journal holds into a new coordinator (the restart).
    let mut live: HashMap<String, TxnMetadata> = HashMap::new();
    for r in h.c.journal().records.borrow().iter() {
        live.insert(r.transactional_id.clone(), r.metadata.clone().unwrap());
    }
    let env = FakeEnv::default();
    let clock = Rc::new(ManualClock::new(TimestampMs(2_000)));
    let c = TxnCoordinator::new(
        MemTxnJournal::default(),
        clock.clone(),
        TxnConfig::default(),
        live.into_iter().collect(),
    );
    block_on(c.tick(&env));
    assert_eq!(c.get("a").unwrap().state, TxnState::CompleteCommit);
    assert_eq!(
        c.get("b").unwrap().state,
        TxnState::Ongoing,
        "aborted only when it times out"
    );
    clock.advance(10_000);
    block_on(c.tick(&env));
    assert_eq!(c.get("b").unwrap().state, TxnState::CompleteAbort);
    let markers = env.markers.borrow();
    assert_eq!(
        markers
            .iter()
            .map(|(_, p, m)| (*p, m.commit))
            .collect::<Vec<_>>(),
        vec![(0, true), (1, false)]
    );
}

#[test]
fn idle_ids_expire_and_timeouts_are_bounded() {
    let h = harness();
    let p = h.init("tx", 60_000);
    h.add("tx", p, &[("t", 0)]);
    h.end("tx", p, true);
    h.init("idle", 60_000);
    h.clock.advance(TxnConfig::default().id_expiration_ms.0);
    block_on(h.c.expire());
    assert!(h.c.get("tx").is_none() && h.c.get("idle").is_none());
    assert_eq!(
        h.c.journal().records.borrow().last().unwrap().metadata,
        None
    );
    let too_long = TxnOp::InitProducerId {
        timeout_ms: 900_001,
        expected: None,
    };
    assert_eq!(
        h.run("tx", too_long),
        TxnReply::Init(Err(ErrorCode::InvalidTransactionTimeout))
    );
    let empty = TxnOp::InitProducerId {
        timeout_ms: 1,
        expected: None,
    };
    assert_eq!(
        h.run("", empty),
        TxnReply::Init(Err(ErrorCode::InvalidRequest))
    );
}

#[test]
fn past_the_shards_maximum_a_new_id_takes_the_place_of_the_idle_one_updated_longest_ago() {
    let clock = Rc::new(ManualClock::new(TimestampMs(1_000)));
    let config = TxnConfig {
        shard_ids_max: 2,
        ..TxnConfig::default()
    };
    let h = Harness {
        c: TxnCoordinator::new(MemTxnJournal::default(), clock.clone(), config, Vec::new()),
        clock,
        env: FakeEnv::default(),
    };
    let old = h.init("old", 60_000);
    h.clock.advance(10);
    let open = h.init("open", 60_000);
    assert_eq!(h.add("open", open, &[("t", 0)]), vec![ErrorCode::None]);
    h.clock.advance(10);
    // "old" is idle and oldest: forgotten (a tombstone) for "new".
    h.init("new", 60_000);
    assert!(h.c.get("old").is_none() && h.c.get("new").is_some());
    let tombstone = |id: &str| {
        h.c.journal()
            .records
            .borrow()
            .iter()
            .any(|r| r.transactional_id == id && r.metadata.is_none())
    };
    assert!(tombstone("old"));
    // Every id in a transaction: a new one is refused, and a known one keeps its place.
    let p = h.init("new", 60_000);
    assert_eq!(h.add("new", p, &[("t", 1)]), vec![ErrorCode::None]);
    let init = || TxnOp::InitProducerId {
        timeout_ms: 60_000,
        expected: None,
    };
    assert_eq!(
        h.run("another", init()),
        TxnReply::Init(Err(ErrorCode::PolicyViolation))
    );
    assert_eq!(h.state("open"), TxnState::Ongoing);
    // Once one ends it is idle, and the next new id takes its place.
    assert_eq!(h.end("new", p, true), ErrorCode::None);
    h.clock.advance(10);
    let another = h.init("another", 60_000);
    assert!(h.c.get("new").is_none() && tombstone("new"));
    assert_ne!(another.id, old.id);
}

#[test]
fn describe_and_list() {
    let h = harness();
    let p = h.init("tx", 60_000);
    h.add("tx", p, &[("t", 3)]);
    h.run(
        "tx",
        TxnOp::AddOffsets {
            producer: p,
            group: "g".into(),
        },
    );
    let TxnReply::Describe(Ok(d)) = h.run("tx", TxnOp::Describe) else {
        panic!()
    };
    assert_eq!(d.state, "Ongoing");
    assert_eq!(d.partitions.len(), 2);
    assert!(d
        .partitions
        .contains(&TopicPartition::new(OFFSETS_TOPIC, offsets_partition("g"))));
    assert_eq!(
        h.run("nope", TxnOp::Describe),
        TxnReply::Describe(Err(ErrorCode::TransactionalIdNotFound))
    );
    h.init("other", 60_000);
    let ongoing = TxnListFilter {
        states: vec!["Ongoing".into()],
        min_duration_ms: rill_types::DurationMs(-1),
        ..Default::default()
    };
    let listed = h.c.list(&ongoing);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].transactional_id, "tx");
    let all = TxnListFilter {
        min_duration_ms: rill_types::DurationMs(-1),
        ..Default::default()
    };
    assert_eq!(h.c.list(&all).len(), 2);
    h.clock.advance(100);
    let long = TxnListFilter {
        min_duration_ms: rill_types::DurationMs(100),
        ..Default::default()
    };
    assert_eq!(h.c.list(&long).len(), 1, "only the open one has a start");
}

impl Harness {
    fn init_reply(&self, id: &str) -> TxnReply {
        self.run(
            id,
            TxnOp::InitProducerId {
                timeout_ms: 60_000,
                expected: None,
            },
        )
    }
}

#[test]
fn markers_carry_the_coordinator_epoch_and_a_moved_partition_is_refused_then_reloaded() {
    let h = harness();
    h.c.journal().epoch.set(7);
    let p = h.init("tx", 60_000);
    assert_eq!(h.add("tx", p, &[("t", 0)]), vec![ErrorCode::None]);
    assert_eq!(h.end("tx", p, true), ErrorCode::None);
    assert_eq!(h.env.markers.borrow()[0].2.coordinator_epoch, 7);

    let kept = h.c.get("tx").unwrap();
    let partition = crate::txn::txn_partition("tx");
    h.c.unload_partition(partition);
    assert!(h.c.get("tx").is_none(), "dropped with its partition");
    h.c.journal()
        .not_ready
        .set(Some(ErrorCode::CoordinatorLoadInProgress));
    let init = TxnOp::InitProducerId {
        timeout_ms: 60_000,
        expected: None,
    };
    assert_eq!(
        h.run("tx", init),
        TxnReply::Unavailable(ErrorCode::CoordinatorLoadInProgress)
    );
    h.c.load_partition(partition, vec![("tx".into(), kept)]);
    h.c.journal().not_ready.set(None);
    let again = h.init("tx", 60_000);
    assert_eq!(
        (again.id, again.epoch.0),
        (p.id, p.epoch.0 + 1),
        "the loaded state bumps"
    );
}
