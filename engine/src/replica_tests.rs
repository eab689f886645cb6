//! Tests of what replication asks of a log (`replica.rs`, `leader_epochs.rs`) on the simulated
//! disk: epoch stamping and its checkpoint, follower appends, the replicated high watermark,
//! and truncation of a divergent tail (at every batch, across segments, cut off by a crash at
//! every storage step, after torn writes, with stale checkpoints left behind).

use crate::batch::{build_test_batch, validate_prefix, validated};
use crate::error::EngineError;
use crate::io::sim::{block_on, block_on_polls, FaultConfig, SimStorage};
use crate::log_tests::{open, read_all, small_config};
use crate::partition_log::PartitionLog;
use crate::types::{Offset, TimestampMs};
use bytes::Bytes;
use rill_types::LeaderEpoch;

const PID: i64 = 7;

/// The first and last offset of a batch.
type Span = (Offset, Offset);

/// A batch of `records` records from producer [`PID`] starting at `seq` (or no producer).
fn batch(records: i32, seq: Option<i32>) -> Vec<u8> {
    build_test_batch(records, 900, TimestampMs(1), seq.map(|s| (PID, 0, s)))
}

fn append(log: &mut PartitionLog<SimStorage>, records: i32, seq: Option<i32>) -> Offset {
    block_on(log.append(validated(&batch(records, seq)), TimestampMs(1)))
        .unwrap()
        .base_offset
}

/// Every batch from `from` to the log end, as a follower's fetch would get them.
fn batches_for_replica(log: &mut PartitionLog<SimStorage>, from: Offset) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end_offset() {
        let read = block_on(log.read_for_replica(next, 1)).unwrap();
        assert!(!read.chunks.is_empty(), "nothing read at {next}");
        for chunk in read.chunks {
            let mut at = 0;
            while at < chunk.len() {
                let meta = validate_prefix(&chunk[at..]).unwrap();
                out.push(chunk.slice(at..at + meta.total_bytes));
                next = meta.last_offset.plus(1);
                at += meta.total_bytes;
            }
        }
    }
    out
}

fn epoch_of(bytes: &[u8]) -> i32 {
    rill_types::batch::RecordBatchHeader::view(bytes)
        .unwrap()
        .leader_epoch()
        .0
}

fn epochs(log: &PartitionLog<SimStorage>) -> Vec<(i32, i64)> {
    log.leader_epochs()
        .entries()
        .iter()
        .map(|(e, o)| (e.0, o.0))
        .collect()
}

#[test]
fn a_leader_stamps_its_epoch_and_the_checkpoint_survives_reopen() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    append(&mut log, 2, None); // written before replication: no epoch recorded
    assert!(epochs(&log).is_empty());
    log.lead(LeaderEpoch(3), Offset(0));
    append(&mut log, 3, None);
    append(&mut log, 1, None);
    log.lead(LeaderEpoch(5), Offset(0));
    append(&mut log, 2, None);
    assert_eq!(epochs(&log), [(3, 2), (5, 6)]);
    let stamped: Vec<i32> = batches_for_replica(&mut log, Offset(2))
        .iter()
        .map(|b| epoch_of(b))
        .collect();
    assert_eq!(stamped, [3, 3, 5]);
    assert_eq!(
        log.end_offset_for_epoch(LeaderEpoch(4)),
        Some((LeaderEpoch(3), Offset(6)))
    );
    assert_eq!(
        log.end_offset_for_epoch(LeaderEpoch(7)),
        Some((LeaderEpoch(5), Offset(8)))
    );
    assert_eq!(
        log.end_offset_for_epoch(LeaderEpoch(2)),
        Some((LeaderEpoch(2), Offset(2))),
        "an epoch older than every one here ends where the first starts"
    );
    block_on(log.close()).unwrap();
    let log = open(&s, small_config());
    assert_eq!(epochs(&log), [(3, 2), (5, 6)]);
    assert_eq!(log.latest_epoch(), Some(LeaderEpoch(5)));
}

#[test]
fn the_replicated_high_watermark_moves_only_when_told() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    append(&mut log, 2, None);
    log.lead(LeaderEpoch(0), Offset(1));
    assert_eq!(log.high_watermark(), Offset(1), "what this replica knew");
    append(&mut log, 3, None);
    block_on(log.flush()).unwrap();
    assert_eq!(log.high_watermark(), Offset(1), "a flush does not move it");
    assert_eq!(read_all(&mut log, Offset(0)), [(Offset(0), Offset(1))]);
    assert_eq!(
        batches_for_replica(&mut log, Offset(2)).len(),
        1,
        "a follower reads past it"
    );
    log.set_high_watermark(Offset(99));
    assert_eq!(log.high_watermark(), Offset(5), "clamped to the log end");
    assert_eq!(read_all(&mut log, Offset(0)).len(), 2);
}

#[test]
fn a_follower_copies_offsets_epochs_and_producer_state() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut leader = open(&s, small_config());
    leader.lead(LeaderEpoch(2), Offset(0));
    for seq in 0..6 {
        append(&mut leader, 2, Some(seq * 2));
    }
    let copied = batches_for_replica(&mut leader, Offset(0));
    let f = SimStorage::new(2, FaultConfig::default());
    let mut follower = open(&f, small_config());
    follower.follow(Offset(0));
    block_on(follower.append_replica(validated(&copied[0]), TimestampMs(1))).unwrap();
    let wrong = block_on(follower.append_replica(validated(&copied[0]), TimestampMs(1)));
    assert!(
        matches!(wrong, Err(EngineError::InvalidRecord(_))),
        "a batch below the log end: {wrong:?}"
    );
    for b in &copied[1..] {
        block_on(follower.append_replica(validated(b), TimestampMs(1))).unwrap();
    }
    block_on(follower.flush()).unwrap();
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(epochs(&follower), [(2, 0)]);
    assert_eq!(batches_for_replica(&mut follower, Offset(0)), copied);
    // The follower takes over: the producer's retry of its last batch is a duplicate there too.
    follower.lead(LeaderEpoch(3), Offset(12));
    let dup = block_on(follower.append(validated(&batch(2, Some(10))), TimestampMs(1)));
    assert!(
        matches!(
            dup,
            Err(EngineError::DuplicateSequence {
                base_offset: Offset(10),
                ..
            })
        ),
        "{dup:?}"
    );
    assert_eq!(append(&mut follower, 2, Some(12)), Offset(12));
    assert_eq!(epochs(&follower), [(2, 0), (3, 12)]);
}

/// A log over several segments: 12 batches of 1-3 records, epoch 1 then 4 from batch 8, each
/// from producer [`PID`]. Returns the (base, last) offsets of the batches.
fn divergent_log(s: &SimStorage) -> Vec<(Offset, Offset)> {
    let mut log = open(s, small_config());
    log.lead(LeaderEpoch(1), Offset(0));
    let mut seq = 0;
    let mut spans = Vec::new();
    for i in 0..12 {
        if i == 8 {
            log.lead(LeaderEpoch(4), Offset(0));
        }
        let records = 1 + i % 3;
        let base = append(&mut log, records, Some(seq));
        spans.push((base, base.plus(i64::from(records) - 1)));
        seq += records;
    }
    assert!(log.segment_count() >= 3, "spans segments");
    block_on(log.close()).unwrap();
    spans
}

fn reopen_follower(s: &SimStorage) -> PartitionLog<SimStorage> {
    let mut log = open(s, small_config());
    log.follow(Offset(0));
    log
}

#[test]
fn truncation_at_every_offset_cuts_to_the_batch_holding_it() {
    let s = SimStorage::new(1, FaultConfig::default());
    let spans = divergent_log(&s);
    let end = spans.last().unwrap().1 .0 + 1;
    for at in 0..end {
        let s = SimStorage::new(1, FaultConfig::default());
        divergent_log(&s);
        let (kept, cut): (Vec<Span>, Vec<Span>) = spans.iter().partition(|(_, last)| last.0 < at);
        let new_end = cut[0].0;
        let log = reopen_follower(&s);
        block_on(log.truncate_to(Offset(at))).unwrap();
        let mut log = reopen_follower(&s);
        assert_eq!(log.log_end_offset(), new_end, "cut at {at}");
        log.set_high_watermark(new_end);
        assert_eq!(read_all(&mut log, Offset(0)), kept, "cut at {at}");
        let expected_epochs: Vec<(i32, i64)> = [(1, 0), (4, spans[8].0 .0)]
            .into_iter()
            .filter(|(_, start)| *start < new_end.0)
            .collect();
        assert_eq!(epochs(&log), expected_epochs, "cut at {at}");
        // The producer state is what the kept batches say: the first cut batch is new again.
        log.lead(LeaderEpoch(6), new_end);
        let seq = i32::try_from(new_end.0).unwrap(); // one record per sequence number
        if let Some((base, _)) = kept.last() {
            let retry = block_on(log.append(
                validated(&batch(1 + (kept.len() as i32 - 1) % 3, Some(base.0 as i32))),
                TimestampMs(1),
            ));
            assert!(
                matches!(retry, Err(EngineError::DuplicateSequence { .. })),
                "a kept batch stays a duplicate (cut at {at}): {retry:?}"
            );
        }
        assert_eq!(append(&mut log, 1, Some(seq)), new_end, "cut at {at}");
        assert_eq!(
            epochs(&log).last(),
            Some(&(6, new_end.0)),
            "the new leader's epoch starts at the cut"
        );
    }
}

#[test]
fn truncation_below_the_log_start_is_refused() {
    let s = SimStorage::new(1, FaultConfig::default());
    divergent_log(&s);
    let mut log = reopen_follower(&s);
    log.set_high_watermark(Offset(10));
    block_on(log.delete_records_before(Offset(5))).unwrap();
    let refused = block_on(log.truncate_to(Offset(3)));
    assert!(
        matches!(refused, Err(EngineError::InvalidRecord(_))),
        "{refused:?}"
    );
}

#[test]
fn a_stale_producer_snapshot_is_not_trusted_after_truncation() {
    let s = SimStorage::new(1, FaultConfig::default());
    let spans = divergent_log(&s); // closed cleanly: a producer snapshot at the log end
    let cut = spans[5].0;
    block_on(reopen_follower(&s).truncate_to(cut)).unwrap();
    let mut log = reopen_follower(&s);
    // The new leader's batches (another producer) grow the log past the old snapshot's offset.
    let other = |seq| build_test_batch(3, 40, TimestampMs(1), Some((99, 0, seq)));
    let mut seq = 0;
    while log.log_end_offset() <= spans.last().unwrap().1 {
        let mut b = other(seq);
        crate::batch::set_base_offset(&mut b, log.log_end_offset());
        block_on(log.append_replica(validated(&b), TimestampMs(1))).unwrap();
        seq += 3;
    }
    block_on(log.flush()).unwrap();
    s.crash(); // no fresh snapshot: recovery rebuilds producer state from the log
    let mut log = reopen_follower(&s);
    log.lead(LeaderEpoch(9), log.log_end_offset());
    let next_seq = i32::try_from(cut.0).unwrap();
    let resent = block_on(log.append(validated(&batch(1 + 5 % 3, Some(next_seq))), TimestampMs(1)));
    assert!(
        resent.is_ok(),
        "the cut batch of {PID} is not a duplicate: {resent:?}"
    );
}

#[test]
fn torn_follower_appends_leave_no_epoch_past_the_log_end() {
    for seed in 0..40 {
        let s = SimStorage::new(seed, FaultConfig::default());
        let mut leader = open(&s, small_config());
        leader.lead(LeaderEpoch(1), Offset(0));
        for _ in 0..4 {
            append(&mut leader, 2, None);
        }
        leader.lead(LeaderEpoch(2), Offset(0));
        for _ in 0..4 {
            append(&mut leader, 2, None);
        }
        let copied = batches_for_replica(&mut leader, Offset(0));
        let f = SimStorage::new(seed + 1000, FaultConfig::default());
        let mut follower = open(&f, small_config());
        follower.follow(Offset(0));
        for b in &copied[..3] {
            block_on(follower.append_replica(validated(b), TimestampMs(1))).unwrap();
        }
        block_on(follower.flush()).unwrap();
        for b in &copied[3..] {
            block_on(follower.append_replica(validated(b), TimestampMs(1))).unwrap();
        }
        f.crash(); // the unflushed batches survive whole, in part or not at all
        let mut follower = reopen_follower(&f);
        let end = follower.log_end_offset();
        assert!(end >= Offset(6), "seed {seed}: the flushed batches stay");
        assert!(
            epochs(&follower).iter().all(|(_, start)| *start < end.0),
            "seed {seed}: {:?} past {end}",
            epochs(&follower)
        );
        let kept = batches_for_replica(&mut follower, Offset(0));
        assert_eq!(kept, copied[..kept.len()], "seed {seed}: a prefix");
        // Catching up again from its end gives the leader's log and epochs.
        for b in &copied[kept.len()..] {
            block_on(follower.append_replica(validated(b), TimestampMs(1))).unwrap();
        }
        assert_eq!(epochs(&follower), epochs(&leader), "seed {seed}");
    }
}

#[test]
fn truncation_cut_off_by_a_crash_at_every_step_leaves_a_prefix_and_can_be_redone() {
    let reference = SimStorage::new(1, FaultConfig::default());
    let spans = divergent_log(&reference);
    let original = batches_for_replica(&mut reopen_follower(&reference), Offset(0));
    let target = spans[4].0; // in the second segment: later segments go, this one is cut
    let mut crashed = 0;
    for budget in 1.. {
        let s = SimStorage::new(budget, FaultConfig::default());
        divergent_log(&s);
        s.set_latency_polls_max(3);
        let log = reopen_follower(&s);
        if block_on_polls(log.truncate_to(target), budget).is_some() {
            break;
        }
        crashed += 1;
        s.crash();
        s.set_latency_polls_max(0);
        let mut log = reopen_follower(&s);
        let end = log.log_end_offset();
        assert!(
            end >= target,
            "budget {budget}: cut below the target ({end})"
        );
        let kept = batches_for_replica(&mut log, Offset(0));
        assert_eq!(kept, original[..kept.len()], "budget {budget}: a prefix");
        assert!(epochs(&log).iter().all(|(_, start)| *start < end.0));
        if end > target {
            block_on(log.truncate_to(target)).unwrap();
            log = reopen_follower(&s);
        }
        assert_eq!(log.log_end_offset(), target, "budget {budget}");
        assert_eq!(epochs(&log), [(1, 0)], "budget {budget}");
        assert!(budget < 100_000, "truncation never completes");
    }
    assert!(crashed > 10, "the crash points were exercised ({crashed})");
}

#[test]
fn a_log_emptied_to_start_at_the_leaders_log_start_holds_nothing_of_the_old_one() {
    let s = SimStorage::new(1, FaultConfig::default());
    let spans = divergent_log(&s); // several segments, epochs, a producer snapshot
    let old_end = spans.last().unwrap().1.plus(1);
    let start = Offset(old_end.0 + 50);
    block_on(reopen_follower(&s).truncate_fully_and_start_at(start)).unwrap();
    let mut log = reopen_follower(&s);
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (start, start)
    );
    assert_eq!(log.segment_count(), 1);
    assert!(epochs(&log).is_empty());
    assert!(read_all(&mut log, start).is_empty());
    // The leader's batches from its log start on are appended at their offsets.
    let mut b = batch(3, Some(40));
    crate::batch::set_base_offset(&mut b, start);
    block_on(log.append_replica(validated(&b), TimestampMs(1))).unwrap();
    assert_eq!(log.log_end_offset(), start.plus(3));
    // No producer state came from the old log: as leader, a new sequence of PID is taken.
    log.lead(LeaderEpoch(7), start.plus(3));
    assert_eq!(append(&mut log, 1, Some(43)), start.plus(3));
    block_on(log.close()).unwrap();
    let log = reopen_follower(&s);
    assert_eq!(log.log_start_offset(), start, "the start survives a reopen");
    assert_eq!(epochs(&log), [(0, start.0), (7, start.0 + 3)]);
}

#[test]
fn emptying_cut_off_by_a_crash_at_every_step_leaves_a_prefix_below_the_start() {
    let reference = SimStorage::new(1, FaultConfig::default());
    let spans = divergent_log(&reference);
    let original = batches_for_replica(&mut reopen_follower(&reference), Offset(0));
    let start = spans.last().unwrap().1.plus(20);
    let mut crashed = 0;
    for budget in 1.. {
        let s = SimStorage::new(budget, FaultConfig::default());
        divergent_log(&s);
        s.set_latency_polls_max(3);
        let log = reopen_follower(&s);
        if block_on_polls(log.truncate_fully_and_start_at(start), budget).is_some() {
            break;
        }
        crashed += 1;
        s.crash();
        s.set_latency_polls_max(0);
        let mut log = reopen_follower(&s);
        let end = log.log_end_offset();
        if end != start {
            assert!(end < start, "budget {budget}: ends at {end}");
            let kept = batches_for_replica(&mut log, Offset(0));
            assert_eq!(kept, original[..kept.len()], "budget {budget}: a prefix");
            block_on(log.truncate_fully_and_start_at(start)).unwrap();
            log = reopen_follower(&s);
        }
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (start, start),
            "budget {budget}"
        );
        assert!(epochs(&log).is_empty(), "budget {budget}");
        assert!(budget < 100_000, "emptying never completes");
    }
    assert!(crashed > 3, "the crash points were exercised ({crashed})");
}

#[test]
fn the_high_watermark_checkpoint_survives_a_reopen_within_the_log_and_goes_with_a_cut_past_it() {
    let s = SimStorage::new(1, FaultConfig::default());
    let spans = divergent_log(&s);
    let mut log = reopen_follower(&s);
    assert_eq!(block_on(log.checkpointed_high_watermark()).unwrap(), None);
    log.set_high_watermark(spans[6].0);
    block_on(log.checkpoint_high_watermark()).unwrap();
    block_on(log.close()).unwrap();
    let log = open(&s, small_config()); // not replicated yet: the file is still read
    assert_eq!(
        block_on(log.checkpointed_high_watermark()).unwrap(),
        Some(spans[6].0)
    );
    // A cut at or above it keeps it; one below it removes it.
    block_on(log.truncate_to(spans[8].0)).unwrap();
    let log = reopen_follower(&s);
    assert_eq!(
        block_on(log.checkpointed_high_watermark()).unwrap(),
        Some(spans[6].0)
    );
    block_on(log.truncate_to(spans[3].0)).unwrap();
    let log = reopen_follower(&s);
    assert_eq!(block_on(log.checkpointed_high_watermark()).unwrap(), None);
}

#[test]
fn a_high_watermark_checkpoint_past_the_recovered_end_is_clamped_to_it() {
    let mut clamped = 0;
    for seed in 0..20 {
        let s = SimStorage::new(seed, FaultConfig::default());
        let mut log = open(&s, small_config());
        log.follow(Offset(0));
        for base in [0, 4] {
            let mut b = batch(4, None);
            crate::batch::set_base_offset(&mut b, Offset(base));
            block_on(log.append_replica(validated(&b), TimestampMs(1))).unwrap();
            if base == 0 {
                block_on(log.flush()).unwrap();
            }
        }
        log.set_high_watermark(Offset(8)); // the second batch is not durable yet
        block_on(log.checkpoint_high_watermark()).unwrap();
        s.crash();
        let log = reopen_follower(&s);
        let end = log.log_end_offset();
        assert!(end >= Offset(4), "seed {seed}: the flushed batch stays");
        let hw = block_on(log.checkpointed_high_watermark()).unwrap();
        assert_eq!(hw, Some(end), "seed {seed}");
        clamped += usize::from(end < Offset(8));
    }
    assert!(clamped > 0, "some crash lost the unflushed batch");
    // Unreplicated logs write none.
    let u = SimStorage::new(99, FaultConfig::default());
    let mut plain = open(&u, small_config());
    append(&mut plain, 2, None);
    block_on(plain.checkpoint_high_watermark()).unwrap();
    assert_eq!(block_on(plain.checkpointed_high_watermark()).unwrap(), None);
}
