//! Unit tests of [`ProducerState`]: sequence rules, transactions, snapshots.

use super::*;
use crate::types::TimestampMs;

fn meta(pid: i64, epoch: i16, seq: i32, base: i64, records: i64) -> BatchMeta {
    BatchMeta {
        base_offset: Offset(base),
        last_offset: Offset(base + records - 1),
        max_timestamp: TimestampMs(0),
        total_bytes: 100,
        producer_id: ProducerId(pid),
        producer_epoch: ProducerEpoch(epoch),
        base_sequence: Sequence(seq),
        transactional: false,
        control: None,
    }
}

#[test]
fn sequence_rules() {
    let mut s = ProducerState::default();
    s.check(&meta(1, 0, 0, 0, 3)).unwrap();
    s.record(&meta(1, 0, 0, 0, 3));
    assert!(matches!(
        s.check(&meta(1, 0, 0, 9, 3)),
        Err(EngineError::DuplicateSequence {
            base_offset: Offset(0),
            last_offset: Offset(2)
        })
    ));
    assert!(matches!(
        s.check(&meta(1, 0, 5, 3, 1)),
        Err(EngineError::OutOfOrderSequence {
            expected: Sequence(3),
            ..
        })
    ));
    s.check(&meta(1, 0, 3, 3, 1)).unwrap();
    assert!(matches!(
        s.check(&meta(1, 1, 7, 3, 1)),
        Err(EngineError::OutOfOrderSequence {
            expected: Sequence(0),
            ..
        })
    ));
    s.record(&meta(1, 1, 0, 3, 1));
    assert!(matches!(
        s.check(&meta(1, 0, 4, 4, 1)),
        Err(EngineError::InvalidProducerEpoch {
            current: ProducerEpoch(1),
            received: ProducerEpoch(0)
        })
    ));
    s.check(&meta(2, 0, 77, 4, 1)).unwrap();
    s.check(&meta(-1, -1, -1, 4, 1)).unwrap();
}

#[test]
fn keeps_five_and_wraps_sequences() {
    let mut s = ProducerState::default();
    for i in 0..7 {
        s.record(&meta(1, 0, i, i64::from(i), 1));
    }
    assert!(
        s.check(&meta(1, 0, 0, 9, 1)).is_err(),
        "seq 0 forgotten: out of order, not duplicate"
    );
    assert!(matches!(
        s.check(&meta(1, 0, 6, 9, 1)),
        Err(EngineError::DuplicateSequence { .. })
    ));
    assert_eq!(last_seq(Sequence(i32::MAX), 1), Sequence(0));
    assert_eq!(next_seq(Sequence(i32::MAX)), Sequence(0));
}

#[test]
fn replaying_a_recorded_batch_never_regresses_the_state() {
    let mut s = ProducerState::default();
    s.record(&meta(1, 0, 0, 0, 2));
    s.record(&meta(1, 1, 0, 2, 1));
    let before = s.clone();
    s.record(&meta(1, 0, 0, 0, 2)); // older epoch, already covered
    s.record(&meta(1, 1, 0, 2, 1)); // the same batch again
    assert_eq!(s, before);
    assert!(matches!(
        s.check(&meta(1, 0, 2, 3, 1)),
        Err(EngineError::InvalidProducerEpoch {
            current: ProducerEpoch(1),
            ..
        })
    ));
}

#[test]
fn snapshot_round_trip_and_damage() {
    let mut s = ProducerState::default();
    s.record(&meta(1, 0, 0, 0, 3));
    s.record(&meta(9, 2, 0, 3, 1));
    let mut bytes = s.encode(Offset(4));
    bytes.extend_from_slice(&[0; 100]);
    assert_eq!(ProducerState::decode(&bytes), Some((Offset(4), s)));
    bytes[10] ^= 1;
    assert_eq!(ProducerState::decode(&bytes), None);
    assert_eq!(ProducerState::decode(&[]), None);
}

fn txn(pid: i64, epoch: i16, seq: i32, base: i64, records: i64) -> BatchMeta {
    BatchMeta {
        transactional: true,
        ..meta(pid, epoch, seq, base, records)
    }
}

fn marker(pid: i64, epoch: i16, at: i64, kind: ControlType, coordinator_epoch: i32) -> BatchMeta {
    BatchMeta {
        base_sequence: Sequence::NONE,
        control: Some(crate::control::Control {
            kind,
            coordinator_epoch,
        }),
        ..txn(pid, epoch, -1, at, 1)
    }
}

#[test]
fn a_transaction_opens_at_its_first_batch_and_a_marker_closes_it() {
    let mut s = ProducerState::default();
    assert_eq!(s.record(&txn(1, 0, 0, 10, 2)), None);
    assert_eq!(s.record(&txn(2, 0, 0, 12, 1)), None);
    assert_eq!(s.record(&txn(1, 0, 2, 13, 1)), None);
    assert_eq!(s.first_open_txn_offset(), Some(Offset(10)));
    assert!(s.has_open_txn(ProducerId(1)) && s.has_open_txn(ProducerId(2)));
    let done = s.record(&marker(1, 0, 14, ControlType::Abort, 0));
    assert_eq!(
        done,
        Some(CompletedTxn {
            producer_id: ProducerId(1),
            first_offset: Offset(10),
            last_offset: Offset(14),
            aborted: true
        })
    );
    assert_eq!(s.first_open_txn_offset(), Some(Offset(12)));
    let done = s.record(&marker(2, 0, 15, ControlType::Commit, 0)).unwrap();
    assert!(!done.aborted);
    assert_eq!(s.first_open_txn_offset(), None);
    assert_eq!(
        s.record(&marker(2, 0, 16, ControlType::Commit, 0)),
        None,
        "nothing open"
    );
    // Sequences continue across transactions of the same epoch.
    s.check(&txn(1, 0, 3, 17, 1)).unwrap();
}

#[test]
fn non_transactional_writes_inside_an_open_transaction_are_refused() {
    let mut s = ProducerState::default();
    s.record(&txn(1, 0, 0, 0, 1));
    assert!(matches!(
        s.check(&meta(1, 0, 1, 1, 1)),
        Err(EngineError::InvalidTxnState(_))
    ));
    assert!(matches!(
        s.check(&txn(-1, -1, -1, 1, 1)),
        Err(EngineError::InvalidRecord(_))
    ));
}

#[test]
fn a_fencing_marker_bumps_the_epoch_and_old_markers_are_refused() {
    let mut s = ProducerState::default();
    s.record(&txn(1, 3, 0, 0, 1));
    s.record(&marker(1, 4, 1, ControlType::Abort, 2));
    assert!(matches!(
        s.check(&txn(1, 3, 1, 2, 1)),
        Err(EngineError::InvalidProducerEpoch {
            current: ProducerEpoch(4),
            received: ProducerEpoch(3)
        })
    ));
    s.check(&txn(1, 5, 0, 2, 1)).unwrap();
    let stale_epoch = TxnMarker {
        producer_id: ProducerId(1),
        producer_epoch: ProducerEpoch(3),
        commit: true,
        coordinator_epoch: 2,
    };
    assert!(matches!(
        s.check_marker(&stale_epoch),
        Err(EngineError::InvalidProducerEpoch { .. })
    ));
    let stale_coordinator = TxnMarker {
        producer_epoch: ProducerEpoch(4),
        coordinator_epoch: 1,
        ..stale_epoch
    };
    assert!(matches!(
        s.check_marker(&stale_coordinator),
        Err(EngineError::CoordinatorFenced { .. })
    ));
}

#[test]
fn replayed_markers_do_not_close_a_later_transaction() {
    let mut s = ProducerState::default();
    s.record(&txn(1, 0, 0, 0, 1));
    s.record(&marker(1, 0, 1, ControlType::Commit, 0));
    s.record(&txn(1, 0, 1, 2, 1));
    let before = s.clone();
    assert_eq!(s.record(&marker(1, 0, 1, ControlType::Commit, 0)), None);
    assert_eq!(s, before);
    assert_eq!(s.first_open_txn_offset(), Some(Offset(2)));
}

#[test]
fn snapshot_keeps_open_transactions_and_reads_version_1() {
    let mut s = ProducerState::default();
    s.record(&txn(1, 0, 0, 5, 2));
    s.record(&marker(3, 1, 7, ControlType::Commit, 9));
    let bytes = s.encode(Offset(8));
    let (offset, back) = ProducerState::decode(&bytes).unwrap();
    assert_eq!((offset, &back), (Offset(8), &s));
    assert_eq!(back.first_open_txn_offset(), Some(Offset(5)));
    // Version 1: [crc][i64 offset][u32 count] then [i64 pid][i16 epoch][u8 n] + batches.
    let mut body = 4i64.to_be_bytes().to_vec();
    body.extend_from_slice(&1u32.to_be_bytes());
    body.extend_from_slice(&9i64.to_be_bytes());
    body.extend_from_slice(&2i16.to_be_bytes());
    body.push(1);
    for v in [0i32, 0] {
        body.extend_from_slice(&v.to_be_bytes());
    }
    for v in [3i64, 3] {
        body.extend_from_slice(&v.to_be_bytes());
    }
    let mut v1 = crc32c::crc32c(&body).to_be_bytes().to_vec();
    v1.extend_from_slice(&body);
    let (offset, old) = ProducerState::decode(&v1).unwrap();
    assert_eq!(offset, Offset(4));
    assert!(matches!(
        old.check(&meta(9, 2, 0, 4, 1)),
        Err(EngineError::DuplicateSequence { .. })
    ));
    assert_eq!(old.first_open_txn_offset(), None);
}

#[test]
fn views_describe_each_producer() {
    let mut s = ProducerState::default();
    s.record(&txn(4, 1, 0, 0, 3));
    let v = s.views();
    assert_eq!(v.len(), 1);
    assert_eq!(
        (v[0].producer_id, v[0].producer_epoch, v[0].last_sequence),
        (ProducerId(4), ProducerEpoch(1), Sequence(2))
    );
    assert_eq!(v[0].txn_first_offset, Some(Offset(0)));
}

#[test]
fn idle_producers_expire_unless_a_transaction_is_open() {
    let mut s = ProducerState::default();
    let at = |pid, base, ts| BatchMeta {
        max_timestamp: TimestampMs(ts),
        ..meta(pid, 0, 0, base, 1)
    };
    s.record(&at(1, 0, 1_000));
    s.record(&at(2, 1, 5_000));
    s.record(&BatchMeta {
        transactional: true,
        ..at(3, 2, 1_000)
    });
    // 1 is idle for exactly the expiration: gone (Kafka's >=); 2 is one ms short of it.
    assert_eq!(s.remove_expired(TimestampMs(11_000), DurationMs(10_000)), 1);
    assert_eq!(s.len(), 2);
    assert_eq!(s.remove_expired(TimestampMs(14_999), DurationMs(10_000)), 0);
    assert_eq!(s.remove_expired(TimestampMs(15_000), DurationMs(10_000)), 1);
    assert!(
        s.has_open_txn(ProducerId(3)),
        "an open transaction never expires"
    );
    // Its marker is activity: from then on it ages like the others.
    let marker = BatchMeta {
        control: Some(crate::control::Control {
            kind: ControlType::Commit,
            coordinator_epoch: 0,
        }),
        transactional: true,
        max_timestamp: TimestampMs(20_000),
        ..meta(3, 0, -1, 3, 1)
    };
    assert!(s.record(&marker).is_some());
    assert_eq!(s.remove_expired(TimestampMs(29_999), DurationMs(10_000)), 0);
    assert_eq!(s.remove_expired(TimestampMs(30_000), DurationMs(10_000)), 1);
    // A producer without a timestamp (a version 1 snapshot's) gets a whole period from now.
    s.record(&at(4, 4, -1));
    assert_eq!(s.remove_expired(TimestampMs(50_000), DurationMs(10_000)), 0);
    assert_eq!(s.remove_expired(TimestampMs(60_000), DurationMs(10_000)), 1);
    assert!(s.is_empty());
}

#[test]
fn past_its_bound_the_least_recently_written_producers_are_evicted_in_batches() {
    let mut s = ProducerState::default();
    let max = 32;
    s.record(&BatchMeta {
        transactional: true,
        ..meta(1000, 0, 0, 0, 1)
    });
    for pid in 0..max as i64 - 1 {
        s.record(&meta(pid, 0, 0, 1 + pid, 1));
        assert_eq!(s.evict_over(max), 0, "within the bound");
    }
    assert_eq!(s.len(), max);
    s.record(&meta(500, 0, 0, 100, 1));
    // 33 > 32: down to 30 at once, the oldest writers first, the open transaction kept.
    assert_eq!(s.evict_over(max), 3);
    assert_eq!(s.len(), evict_target(max));
    assert!(s.has_open_txn(ProducerId(1000)));
    for gone in 0..3 {
        assert!(s.views().iter().all(|v| v.producer_id != ProducerId(gone)));
    }
    assert!(s.views().iter().any(|v| v.producer_id == ProducerId(500)));
    // A forgotten producer's next batch is accepted as a new producer's, as after expiry.
    s.check(&meta(0, 0, 9, 200, 1)).unwrap();
    // Only open transactions left past the bound: nothing to evict.
    let mut t = ProducerState::default();
    for pid in 0..3 {
        t.record(&BatchMeta {
            transactional: true,
            ..meta(pid, 0, 0, pid, 1)
        });
    }
    assert_eq!(t.evict_over(1), 0);
}

/// A transactional batch matching a batch of a transaction that has ended is no retry (every
/// batch of a transaction is answered before its end): it is out of order, never a duplicate
/// whose records would silently be dropped from the next transaction (tests/jepsen seed 303:
/// librdkafka reused a sequence after NOT_LEADER and an abort).
#[test]
fn a_batch_matching_one_of_an_ended_transaction_is_out_of_order_not_a_duplicate() {
    let mut s = ProducerState::default();
    s.record(&txn(1, 0, 57, 219, 1));
    // A retry while the transaction is open is a duplicate, answered with the first offsets.
    assert!(matches!(
        s.check(&txn(1, 0, 57, 220, 1)),
        Err(EngineError::DuplicateSequence {
            base_offset: Offset(219),
            last_offset: Offset(219)
        })
    ));
    s.record(&marker(1, 0, 220, ControlType::Abort, 0));
    assert!(matches!(
        s.check(&txn(1, 0, 57, 221, 1)),
        Err(EngineError::OutOfOrderSequence {
            expected: Sequence(58),
            received: Sequence(57)
        })
    ));
    // The next transaction's first batch opens it; a retry of it is a duplicate again, and one
    // matching the ended transaction's batch still is not.
    s.check(&txn(1, 0, 58, 221, 1)).unwrap();
    s.record(&txn(1, 0, 58, 221, 1));
    assert!(matches!(
        s.check(&txn(1, 0, 58, 222, 1)),
        Err(EngineError::DuplicateSequence { .. })
    ));
    assert!(matches!(
        s.check(&txn(1, 0, 57, 222, 1)),
        Err(EngineError::OutOfOrderSequence { .. })
    ));
    // An idempotent (non-transactional) producer's duplicates are unchanged.
    s.record(&meta(2, 0, 0, 223, 1));
    assert!(matches!(
        s.check(&meta(2, 0, 0, 224, 1)),
        Err(EngineError::DuplicateSequence { .. })
    ));
}
