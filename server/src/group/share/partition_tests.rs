//! The share-partition state machine at its edges: locks, delivery counts, the window bound,
//! acknowledgement validation and rollback.

use std::rc::Rc;

use super::*;

fn settings(locks: usize) -> PartitionSettings {
    PartitionSettings {
        lock_duration_ms: rill_types::DurationMs(1_000),
        delivery_count_limit: 3,
        max_record_locks: locks,
    }
}

fn batch(first: i64, last: i64) -> FetchedBatch {
    FetchedBatch {
        first,
        last,
        control: false,
    }
}

fn ack(first: i64, last: i64, t: AckType) -> AckBatch {
    AckBatch {
        first,
        last,
        types: vec![t],
    }
}

fn member(name: &str) -> Rc<str> {
    Rc::from(name)
}

#[test]
fn acquire_then_accept_moves_the_start() {
    let mut p = SharePartition::new(Offset(10), settings(100));
    let a = member("a");
    assert_eq!(p.next_fetch_offset(), Some(Offset(10)));
    let got = p.acquire(&a, &[batch(10, 14)], 500, 0);
    assert_eq!(
        got,
        vec![Acquired {
            first: 10,
            last: 14,
            delivery_count: 1
        }]
    );
    assert_eq!(p.end(), Offset(15));
    assert_eq!(p.next_fetch_offset(), Some(Offset(15)));
    p.acknowledge("a", &[ack(10, 12, AckType::Accept)]).unwrap();
    assert_eq!(p.start(), Offset(13));
    assert_eq!(p.acquired_count(), 2);
}

#[test]
fn batches_below_the_start_are_not_acquired_again() {
    let mut p = SharePartition::new(Offset(5), settings(100));
    let a = member("a");
    let got = p.acquire(&a, &[batch(0, 7)], 500, 0);
    assert_eq!(got[0].first, 5);
    assert_eq!(got[0].last, 7);
    // The same records fetched again by another member: all held, nothing acquired.
    assert!(p.acquire(&member("b"), &[batch(0, 7)], 500, 0).is_empty());
}

#[test]
fn release_redelivers_and_counts_then_archives_at_the_limit() {
    let mut p = SharePartition::new(Offset(0), settings(100));
    let a = member("a");
    for delivery in 1..=3 {
        let got = p.acquire(&a, &[batch(0, 0)], 500, 0);
        assert_eq!(got[0].delivery_count, delivery);
        p.acknowledge("a", &[ack(0, 0, AckType::Release)]).unwrap();
    }
    // Delivered three times (the limit): archived, the start moves past it.
    assert_eq!(p.start(), Offset(1));
    assert!(p.acquire(&a, &[batch(0, 0)], 500, 0).is_empty());
}

#[test]
fn reject_archives_at_once() {
    let mut p = SharePartition::new(Offset(0), settings(100));
    let a = member("a");
    p.acquire(&a, &[batch(0, 2)], 500, 0);
    p.acknowledge(
        "a",
        &[AckBatch {
            first: 0,
            last: 2,
            types: vec![AckType::Accept, AckType::Reject, AckType::Release],
        }],
    )
    .unwrap();
    assert_eq!(p.start(), Offset(2));
    assert_eq!(p.state(2), Some((RecordState::Available, 1)));
    let got = p.acquire(&member("b"), &[batch(0, 2)], 500, 0);
    assert_eq!(
        got,
        vec![Acquired {
            first: 2,
            last: 2,
            delivery_count: 2
        }]
    );
}

#[test]
fn an_expired_lock_makes_the_record_available_to_another_member() {
    let mut p = SharePartition::new(Offset(0), settings(100));
    p.acquire(&member("a"), &[batch(0, 1)], 500, 0);
    assert_eq!(p.tick(999), 0);
    assert!(p.acquire(&member("b"), &[batch(0, 1)], 500, 999).is_empty());
    assert_eq!(p.tick(1_000), 2);
    let got = p.acquire(&member("b"), &[batch(0, 1)], 500, 1_000);
    assert_eq!(got[0].delivery_count, 2);
    // The late acknowledgement of the first member is refused.
    assert_eq!(
        p.acknowledge("a", &[ack(0, 1, AckType::Accept)]),
        Err(ErrorCode::InvalidRecordState)
    );
    p.acknowledge("b", &[ack(0, 1, AckType::Accept)]).unwrap();
    assert_eq!(p.start(), Offset(2));
}

#[test]
fn expiry_at_the_delivery_limit_archives() {
    let mut p = SharePartition::new(Offset(0), settings(100));
    for now in [0, 1_000, 2_000] {
        assert_eq!(p.acquire(&member("a"), &[batch(0, 0)], 500, now).len(), 1);
        p.tick(now + 1_000);
    }
    assert_eq!(p.start(), Offset(1));
}

#[test]
fn an_invalid_acknowledgement_changes_nothing() {
    let mut p = SharePartition::new(Offset(0), settings(100));
    p.acquire(&member("a"), &[batch(0, 3)], 500, 0);
    p.acquire(&member("b"), &[batch(4, 5)], 500, 0);
    // The second batch names b's record: the whole acknowledgement fails, 0-1 stay held.
    let refused = p.acknowledge(
        "a",
        &[ack(0, 1, AckType::Accept), ack(3, 4, AckType::Accept)],
    );
    assert_eq!(refused, Err(ErrorCode::InvalidRecordState));
    assert_eq!(p.state(0), Some((RecordState::Acquired, 1)));
    assert_eq!(p.start(), Offset(0));
    // Outside the window, out of order, reversed, or with the wrong number of types.
    assert_eq!(
        p.acknowledge("a", &[ack(9, 9, AckType::Accept)]),
        Err(ErrorCode::InvalidRecordState)
    );
    assert_eq!(
        p.acknowledge(
            "a",
            &[ack(2, 3, AckType::Accept), ack(0, 1, AckType::Accept)]
        ),
        Err(ErrorCode::InvalidRequest)
    );
    assert_eq!(
        p.acknowledge("a", &[ack(3, 2, AckType::Accept)]),
        Err(ErrorCode::InvalidRequest)
    );
    let two_types = AckBatch {
        first: 0,
        last: 2,
        types: vec![AckType::Accept, AckType::Accept],
    };
    assert_eq!(
        p.acknowledge("a", &[two_types]),
        Err(ErrorCode::InvalidRequest)
    );
    assert_eq!(
        p.acknowledge("a", &[ack(i64::MIN, i64::MAX, AckType::Accept)]),
        Err(ErrorCode::InvalidRequest)
    );
    assert_eq!(p.acquired_count(), 6);
}

#[test]
fn the_window_is_bounded_by_max_record_locks() {
    let mut p = SharePartition::new(Offset(0), settings(4));
    let a = member("a");
    let got = p.acquire(&a, &[batch(0, 9)], 500, 0);
    assert_eq!(got[0].last, 3);
    assert_eq!(p.next_fetch_offset(), None);
    assert!(p.acquire(&a, &[batch(4, 9)], 500, 0).is_empty());
    p.acknowledge("a", &[ack(0, 1, AckType::Accept)]).unwrap();
    assert_eq!(p.next_fetch_offset(), Some(Offset(4)));
    let got = p.acquire(&a, &[batch(4, 9)], 500, 0);
    assert_eq!((got[0].first, got[0].last), (4, 5));
    // A huge gap (a compacted log) never grows the window past the bound either.
    p.acknowledge("a", &[ack(2, 5, AckType::Accept)]).unwrap();
    p.acquire(&a, &[batch(6, 6)], 500, 0);
    let got = p.acquire(&a, &[batch(1_000_000, 1_000_000)], 500, 0);
    assert!(got.is_empty());
    assert!(p.end().0 - p.start().0 <= 4);
}

#[test]
fn gaps_and_control_batches_are_archived_not_delivered() {
    let mut p = SharePartition::new(Offset(0), settings(100));
    let a = member("a");
    let control = FetchedBatch {
        first: 3,
        last: 3,
        control: true,
    };
    let got = p.acquire(&a, &[batch(0, 1), control, batch(5, 6)], 500, 0);
    assert_eq!(
        got.iter().map(|g| (g.first, g.last)).collect::<Vec<_>>(),
        vec![(0, 1), (5, 6)]
    );
    assert_eq!(p.state(2), Some((RecordState::Archived, 0)));
    assert_eq!(p.state(3), Some((RecordState::Archived, 0)));
    p.acknowledge("a", &[ack(0, 1, AckType::Accept)]).unwrap();
    assert_eq!(p.start(), Offset(5));
}

#[test]
fn max_records_and_leaving_members() {
    let mut p = SharePartition::new(Offset(0), settings(100));
    let got = p.acquire(&member("a"), &[batch(0, 9)], 3, 0);
    assert_eq!(got[0].last, 2);
    p.acquire(&member("b"), &[batch(0, 9)], 3, 0);
    p.release_member("a");
    assert_eq!(p.next_fetch_offset(), Some(Offset(0)));
    assert_eq!(p.state(0), Some((RecordState::Available, 1)));
    assert_eq!(p.state(3), Some((RecordState::Acquired, 1)));
}

#[test]
fn log_start_and_reset_move_the_start() {
    let mut p = SharePartition::new(Offset(0), settings(100));
    p.acquire(&member("a"), &[batch(0, 4)], 500, 0);
    p.advance_to_log_start(Offset(3));
    assert_eq!(p.start(), Offset(3));
    assert_eq!(p.end(), Offset(5));
    p.advance_to_log_start(Offset(10));
    assert_eq!((p.start(), p.end()), (Offset(10), Offset(10)));
    p.reset(Offset(2));
    assert_eq!((p.start(), p.end()), (Offset(2), Offset(2)));
}

#[test]
fn ack_types_from_the_wire() {
    assert_eq!(AckType::from_wire(1), Some(AckType::Accept));
    assert_eq!(AckType::from_wire(0), Some(AckType::Gap));
    assert_eq!(AckType::from_wire(4), None);
    assert_eq!(AckType::from_wire(-1), None);
}

#[test]
fn done_runs_round_trip_and_hostile_text_restores_within_bounds() {
    let mut p = SharePartition::new(Offset(10), settings(100));
    p.acquire(&member("a"), &[batch(10, 16)], 500, 0);
    p.acknowledge(
        "a",
        &[ack(11, 12, AckType::Accept), ack(14, 14, AckType::Reject)],
    )
    .unwrap();
    assert_eq!(p.done_runs(), "1:2,4:1");
    let q = SharePartition::restored(p.start(), &p.done_runs(), settings(100));
    assert_eq!(q.start(), Offset(10));
    assert_eq!(q.end(), Offset(15));
    assert_eq!(q.state(10), Some((RecordState::Available, 0)));
    assert_eq!(q.state(12), Some((RecordState::Acknowledged, 0)));
    assert_eq!(q.state(13), Some((RecordState::Available, 0)));
    for hostile in ["x", "5:99999999999", "3:1,1:1", "0:4000000000", ":", "9:9,"] {
        let q = SharePartition::restored(Offset(0), hostile, settings(100));
        assert!(q.end().0 - q.start().0 <= 100, "{hostile}");
    }
    // A run at the front is done: the start moves past it.
    let q = SharePartition::restored(Offset(0), "0:3", settings(100));
    assert_eq!((q.start(), q.end()), (Offset(3), Offset(3)));
}
