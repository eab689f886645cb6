//! Transitions of one transactional id, with the time passed in.

use super::*;
use rill_types::{PartitionIndex, TopicPartition};

/// The instant `ms` milliseconds after the epoch.
fn t(ms: i64) -> TimestampMs {
    TimestampMs(ms)
}

fn ids(start: i64) -> impl FnMut() -> Result<ProducerId, ErrorCode> {
    let mut next = start;
    move || {
        next += 1;
        Ok(ProducerId(next - 1))
    }
}

fn ready(plan: Result<InitPlan, ErrorCode>) -> TxnMetadata {
    match plan {
        Ok(InitPlan::Ready(m)) => m,
        other => panic!("expected Ready, got {other:?}"),
    }
}

fn tp(topic: &str, p: i32) -> TopicPartition {
    TopicPartition::new(topic, PartitionIndex(p))
}

fn first_init() -> TxnMetadata {
    ready(init(None, 60_000, None, t(10), &mut ids(100)))
}

#[test]
fn a_new_id_gets_a_producer_id_and_epoch_0_then_bumps() {
    let m = first_init();
    assert_eq!(
        (m.producer_id, m.producer_epoch),
        (ProducerId(100), ProducerEpoch(0))
    );
    assert_eq!(m.state, TxnState::Empty);
    let again = ready(init(Some(&m), 5_000, None, t(20), &mut ids(200)));
    assert_eq!(
        (again.producer_id, again.producer_epoch),
        (ProducerId(100), ProducerEpoch(1))
    );
    assert_eq!((again.timeout_ms, again.last_update_ms), (5_000, t(20)));
}

#[test]
fn an_open_transaction_is_fenced_with_a_bumped_epoch_then_aborted() {
    let m = first_init();
    let open = add(
        &m,
        m.producer_id,
        m.producer_epoch,
        &[tp("t", 0)],
        &[],
        t(30),
    )
    .unwrap()
    .unwrap();
    assert_eq!((open.state, open.start_ms), (TxnState::Ongoing, t(30)));
    let InitPlan::FenceOpen(fenced) =
        init(Some(&open), 60_000, None, t(40), &mut ids(200)).unwrap()
    else {
        panic!("open transactions are fenced first")
    };
    assert_eq!(fenced.state, TxnState::PrepareAbort);
    assert_eq!(fenced.producer_epoch, ProducerEpoch(1));
    assert_eq!(fenced.partitions.len(), 1, "its markers still go out");
    assert_eq!(
        init(Some(&fenced), 60_000, None, t(41), &mut ids(200)),
        Err(ErrorCode::ConcurrentTransactions)
    );
    let done = complete(&fenced, t(50));
    assert_eq!(done.state, TxnState::CompleteAbort);
    assert!(done.partitions.is_empty());
    let next = ready(init(Some(&done), 60_000, None, t(60), &mut ids(200)));
    assert_eq!(next.producer_epoch, ProducerEpoch(2));
}

#[test]
fn an_exhausted_epoch_rotates_the_producer_id() {
    let mut m = first_init();
    m.producer_epoch = EPOCH_EXHAUSTED;
    let next = ready(init(Some(&m), 60_000, None, t(20), &mut ids(500)));
    assert_eq!(
        (next.producer_id, next.producer_epoch),
        (ProducerId(500), ProducerEpoch(0))
    );
    assert_eq!(next.last_producer_id, ProducerId(100));
}

#[test]
fn kip_360_bumps_retries_and_fences() {
    let m = first_init(); // epoch 0
    let expect = |e: i16| Some((ProducerId(100), ProducerEpoch(e)));
    let bumped = ready(init(Some(&m), 1_000, expect(0), t(20), &mut ids(200)));
    assert_eq!(
        (bumped.producer_epoch, bumped.last_producer_epoch),
        (ProducerEpoch(1), ProducerEpoch(0))
    );
    let retry = ready(init(Some(&bumped), 1_000, expect(0), t(21), &mut ids(200)));
    assert_eq!(
        retry.producer_epoch,
        ProducerEpoch(1),
        "a retry is not bumped again"
    );
    assert_eq!(
        init(Some(&bumped), 1_000, expect(7), t(22), &mut ids(200)),
        Err(ErrorCode::ProducerFenced)
    );
    assert_eq!(
        init(
            Some(&bumped),
            1_000,
            Some((ProducerId(9), ProducerEpoch(0))),
            t(22),
            &mut ids(200)
        ),
        Err(ErrorCode::ProducerFenced),
        "another producer id"
    );
}

#[test]
fn add_checks_the_producer_and_is_idempotent() {
    let m = first_init();
    let (pid, epoch) = (m.producer_id, m.producer_epoch);
    assert_eq!(
        add(&m, ProducerId(1), epoch, &[tp("t", 0)], &[], t(1)),
        Err(ErrorCode::InvalidProducerIdMapping)
    );
    assert_eq!(
        add(&m, pid, ProducerEpoch(3), &[tp("t", 0)], &[], t(1)),
        Err(ErrorCode::ProducerFenced)
    );
    let open = add(&m, pid, epoch, &[tp("t", 0)], &["g".into()], t(5))
        .unwrap()
        .unwrap();
    assert_eq!(
        add(&open, pid, epoch, &[tp("t", 0)], &["g".into()], t(9)),
        Ok(None)
    );
    let more = add(&open, pid, epoch, &[tp("t", 1)], &[], t(9))
        .unwrap()
        .unwrap();
    assert_eq!(
        more.start_ms,
        t(5),
        "the transaction began at the first add"
    );
    assert_eq!(
        verify(&more, pid, epoch, &[tp("t", 1), tp("u", 0)]),
        Ok(vec![true, false])
    );
    assert_eq!(verify_group(&more, pid, epoch, "g"), Ok(true));
    assert_eq!(verify_group(&more, pid, epoch, "h"), Ok(false));
}

#[test]
fn end_prepares_once_and_retries_succeed() {
    let m = first_init();
    let (pid, epoch) = (m.producer_id, m.producer_epoch);
    assert_eq!(
        end(&m, pid, epoch, true, t(1)),
        Err(ErrorCode::InvalidTxnState)
    );
    let open = add(&m, pid, epoch, &[tp("t", 0)], &[], t(2))
        .unwrap()
        .unwrap();
    let EndPlan::Prepare(prepared) = end(&open, pid, epoch, true, t(3)).unwrap() else {
        panic!()
    };
    assert_eq!(prepared.state, TxnState::PrepareCommit);
    assert!(prepared.commits());
    assert_eq!(
        end(&prepared, pid, epoch, true, t(4)),
        Err(ErrorCode::ConcurrentTransactions)
    );
    assert_eq!(
        end(&prepared, pid, epoch, false, t(4)),
        Err(ErrorCode::InvalidTxnState)
    );
    assert_eq!(
        add(&prepared, pid, epoch, &[tp("t", 1)], &[], t(4)),
        Err(ErrorCode::ConcurrentTransactions)
    );
    let done = complete(&prepared, t(5));
    assert_eq!(end(&done, pid, epoch, true, t(6)), Ok(EndPlan::AlreadyDone));
    assert_eq!(
        end(&done, pid, epoch, false, t(6)),
        Err(ErrorCode::InvalidTxnState)
    );
    assert_eq!(
        end(&done, pid, ProducerEpoch(9), true, t(6)),
        Err(ErrorCode::ProducerFenced)
    );
}

#[test]
fn timeouts_and_expiration_follow_the_clock() {
    let m = first_init();
    let open = add(
        &m,
        m.producer_id,
        m.producer_epoch,
        &[tp("t", 0)],
        &[],
        t(1_000),
    )
    .unwrap()
    .unwrap();
    assert!(!timed_out(&open, t(61_000)));
    assert!(timed_out(&open, t(61_001)));
    assert!(
        !expired(&open, t(i64::MAX), DurationMs(10)),
        "an open transaction never expires"
    );
    let fenced = fence(&open, t(61_001));
    assert_eq!(fenced.producer_epoch, ProducerEpoch(1));
    let done = complete(&fenced, t(62_000));
    assert!(!expired(&done, t(62_000 + 9), DurationMs(10)));
    assert!(expired(&done, t(62_000 + 10), DurationMs(10)));
}
