//! Edge tests of transactions in [`PartitionLog`]: markers, the last stable offset, `.txnindex`
//! across rolls, retention, checkpoints, crashes and damaged files (simulated disk).

use crate::batch::{build_test_batch, validated};
use crate::control::{mark_transactional, TxnMarker};
use crate::error::EngineError;
use crate::io::sim::{block_on, FaultConfig, SimStorage};
use crate::log_tests::{append, open, small_config, DIR};
use crate::partition_log::PartitionLog;
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::segment::txn_index::AbortedTxn;
use crate::types::{Offset, TimestampMs};
use rill_types::ErrorCode;
use rill_types::{ProducerEpoch, ProducerId};
use std::path::Path;

/// Appends a transactional batch of `records` for producer `pid` (epoch 0, sequence `seq`).
pub(crate) fn txn_append(
    log: &mut PartitionLog<SimStorage>,
    pid: i64,
    seq: i32,
    records: i32,
) -> Offset {
    let mut b = build_test_batch(records, 40, TimestampMs(5), Some((pid, 0, seq)));
    mark_transactional(&mut b);
    block_on(log.append(validated(&b), TimestampMs(5)))
        .unwrap()
        .base_offset
}

pub(crate) fn end_txn(log: &mut PartitionLog<SimStorage>, pid: i64, commit: bool) -> Offset {
    let marker = TxnMarker {
        producer_id: ProducerId(pid),
        producer_epoch: ProducerEpoch(0),
        commit,
        coordinator_epoch: 0,
    };
    block_on(log.append_marker(&marker, TimestampMs(6)))
        .unwrap()
        .base_offset
}

fn flush(log: &mut PartitionLog<SimStorage>) {
    block_on(log.flush()).unwrap();
}

pub(crate) fn aborted(
    log: &mut PartitionLog<SimStorage>,
    from: i64,
    upper: i64,
) -> Vec<(i64, i64, i64)> {
    block_on(log.aborted_transactions(Offset(from), Offset(upper)))
        .unwrap()
        .iter()
        .map(|a| (a.producer_id.0, a.first_offset.0, a.last_offset.0))
        .collect()
}

#[test]
fn lso_stops_at_an_open_transaction_until_its_marker_is_durable() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    append(&mut log, 2, 10, 5); // 0-1, not transactional
    let first = txn_append(&mut log, 7, 0, 3); // 2-4
    append(&mut log, 1, 10, 5); // 5
    flush(&mut log);
    assert_eq!(first, Offset(2));
    assert_eq!(log.high_watermark(), Offset(6));
    assert_eq!(log.last_stable_offset(), Offset(2));
    let (committed, _) = block_on(log.read_committed(Offset(0), 1 << 20)).unwrap();
    assert_eq!(
        committed.chunks.len(),
        1,
        "only the batch below the open transaction"
    );
    assert!(block_on(log.read_committed(Offset(2), 1 << 20))
        .unwrap()
        .0
        .chunks
        .is_empty());
    let marker = end_txn(&mut log, 7, true); // 6
    assert_eq!(marker, Offset(6));
    assert_eq!(
        log.last_stable_offset(),
        Offset(2),
        "marker not durable yet"
    );
    flush(&mut log);
    assert_eq!(log.last_stable_offset(), Offset(7));
    assert_eq!(
        block_on(log.read_committed(Offset(2), 1 << 20))
            .unwrap()
            .0
            .chunks
            .len(),
        3
    );
    assert!(
        aborted(&mut log, 0, 7).is_empty(),
        "a commit is not in the index"
    );
}

#[test]
fn aborts_are_reported_for_overlapping_reads_only() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    txn_append(&mut log, 1, 0, 2); // 0-1
    txn_append(&mut log, 2, 0, 1); // 2
    end_txn(&mut log, 1, false); // 3
    txn_append(&mut log, 2, 1, 1); // 4
    end_txn(&mut log, 2, false); // 5
    flush(&mut log);
    assert_eq!(aborted(&mut log, 0, 6), vec![(1, 0, 3), (2, 2, 5)]);
    let (read, with_read) = block_on(log.read_committed(Offset(4), 1)).unwrap();
    assert_eq!(read.chunks.len(), 1, "one batch: offset 4");
    let pairs: Vec<_> = with_read
        .iter()
        .map(|a| (a.producer_id.0, a.last_offset.0))
        .collect();
    assert_eq!(pairs, vec![(2, 5)], "only what overlaps [4, 5)");
    assert_eq!(aborted(&mut log, 4, 6), vec![(2, 2, 5)]);
    assert_eq!(
        aborted(&mut log, 0, 2),
        vec![(1, 0, 3)],
        "2's starts at the bound"
    );
    assert!(aborted(&mut log, 6, 6).is_empty());
    let entries = block_on(log.aborted_transactions(Offset(0), Offset(6))).unwrap();
    assert_eq!(
        entries[0],
        AbortedTxn {
            producer_id: ProducerId(1),
            first_offset: Offset(0),
            last_offset: Offset(3),
            last_stable_offset: Offset(2),
        },
        "the earliest open transaction bounds the LSO after the first abort"
    );
    assert_eq!(entries[1].last_stable_offset, Offset(6));
}

#[test]
fn client_control_batches_and_non_transactional_writes_in_a_transaction_are_refused() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    let marker = TxnMarker {
        producer_id: ProducerId(3),
        producer_epoch: ProducerEpoch(0),
        commit: true,
        coordinator_epoch: 0,
    };
    let bytes = crate::control::encode_marker_batch(&marker, TimestampMs(1));
    let refused = block_on(log.append(validated(&bytes), TimestampMs(1)));
    assert!(matches!(refused, Err(EngineError::InvalidRecord(_))));
    txn_append(&mut log, 3, 0, 1);
    let plain = build_test_batch(1, 10, TimestampMs(1), Some((3, 0, 1)));
    let refused = block_on(log.append(validated(&plain), TimestampMs(1)));
    assert_eq!(
        refused.unwrap_err().kafka_error_code(),
        ErrorCode::InvalidTxnState
    );
    assert_eq!(log.log_end_offset(), Offset(1));
}

#[test]
fn an_abort_spanning_segments_is_found_from_its_first_segment() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    txn_append(&mut log, 9, 0, 1); // 0, in the first segment
    for i in 0..40 {
        append(&mut log, 1, 300, i); // rolls several 4 KiB segments
    }
    let marker = end_txn(&mut log, 9, false);
    for i in 0..40 {
        append(&mut log, 1, 300, i); // the marker's segment gets sealed too
    }
    flush(&mut log);
    assert!(log.segment_count() > 4);
    let marker_segment = log.segment_index_for(marker);
    assert!(marker_segment + 1 < log.segment_count(), "sealed");
    let path = Path::new(DIR).join(segment_file_name(
        log.segments[marker_segment].base,
        FileKind::TxnIndex,
    ));
    assert!(
        s.file_bytes(&path).is_some(),
        "the sealed segment has its .txnindex"
    );
    assert_eq!(aborted(&mut log, 0, 1), vec![(9, 0, marker.0)]);
    assert!(aborted(&mut log, marker.0 + 1, marker.0 + 5).is_empty());
    drop(log);
    s.crash();
    let mut log = open(&s, small_config());
    assert_eq!(
        aborted(&mut log, 0, 1),
        vec![(9, 0, marker.0)],
        "after a crash"
    );
    assert_eq!(log.last_stable_offset(), log.high_watermark());
}

#[test]
fn retention_deletes_a_segment_with_its_txnindex() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    txn_append(&mut log, 9, 0, 1);
    let marker = end_txn(&mut log, 9, false);
    for i in 0..30 {
        append(&mut log, 1, 300, i);
    }
    flush(&mut log);
    let first = log.segments[0].base;
    let path = Path::new(DIR).join(segment_file_name(first, FileKind::TxnIndex));
    assert!(s.file_bytes(&path).is_some());
    let next = log.segments[1].base;
    block_on(log.delete_records_before(next)).unwrap();
    assert!(
        s.file_bytes(&path).is_none(),
        ".txnindex deleted with its segment"
    );
    assert!(marker < next);
    assert!(aborted(&mut log, next.0, next.0 + 3).is_empty());
}

#[test]
fn crash_keeps_open_transactions_and_rederives_unsaved_aborts() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    txn_append(&mut log, 1, 0, 1); // 0
    txn_append(&mut log, 2, 0, 1); // 1
    end_txn(&mut log, 1, false); // 2
    flush(&mut log);
    txn_append(&mut log, 3, 0, 1); // 3, lost in the crash
    drop(log);
    s.crash();
    let mut log = open(&s, small_config());
    assert_eq!(log.log_end_offset(), Offset(3));
    assert_eq!(
        log.last_stable_offset(),
        Offset(1),
        "2's transaction is still open"
    );
    assert!(
        log.has_open_txn(ProducerId(2))
            && !log.has_open_txn(ProducerId(1))
            && !log.has_open_txn(ProducerId(3))
    );
    assert_eq!(aborted(&mut log, 0, 3), vec![(1, 0, 2)]);
    end_txn(&mut log, 2, false);
    block_on(log.close()).unwrap();
    let mut log = open(&s, small_config());
    assert_eq!(
        aborted(&mut log, 0, 4),
        vec![(1, 0, 2), (2, 1, 3)],
        "from the file"
    );
    assert_eq!(log.last_stable_offset(), Offset(4));
}

#[test]
fn a_checkpointed_txnindex_beyond_the_snapshot_is_rederived_not_duplicated() {
    let s = SimStorage::new(1, FaultConfig::default());
    let config = crate::config::LogConfig {
        segment_bytes_max: 1 << 20,
        ..small_config()
    };
    let mut log = open(&s, config.clone());
    txn_append(&mut log, 1, 0, 1);
    end_txn(&mut log, 1, false);
    flush(&mut log);
    block_on(log.write_checkpoint()).unwrap(); // .txnindex and snapshot at offset 2
    txn_append(&mut log, 1, 1, 1);
    end_txn(&mut log, 1, false);
    flush(&mut log);
    // What a checkpoint cut off between its .txnindex and its snapshot leaves.
    let active = log.active();
    let name = segment_file_name(active.base, FileKind::TxnIndex);
    let bytes = active.txn_index.encode();
    block_on(crate::small_file::write_atomic(
        &s,
        Path::new(DIR),
        &name,
        &bytes,
    ))
    .unwrap();
    drop(log);
    s.crash();
    let mut log = open(&s, config);
    assert_eq!(aborted(&mut log, 0, 4), vec![(1, 0, 1), (1, 2, 3)]);
}

#[test]
fn a_damaged_sealed_txnindex_is_rebuilt_at_open() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    txn_append(&mut log, 5, 0, 1);
    let marker = end_txn(&mut log, 5, false);
    for i in 0..30 {
        append(&mut log, 1, 300, i);
    }
    block_on(log.close()).unwrap();
    let path = Path::new(DIR).join(segment_file_name(Offset(0), FileKind::TxnIndex));
    s.corrupt(&path, 1, &[9]); // version 9: does not decode
    let mut log = open(&s, small_config());
    assert_eq!(aborted(&mut log, 0, 1), vec![(5, 0, marker.0)]);
    let bytes = s.file_bytes(&path).unwrap();
    assert_eq!(bytes.len(), 34, "rewritten");
    assert_eq!(bytes[1], 0);
}

#[test]
fn a_fenced_producer_is_refused_after_a_bumped_marker() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    txn_append(&mut log, 4, 0, 1);
    let marker = TxnMarker {
        producer_id: ProducerId(4),
        producer_epoch: ProducerEpoch(1),
        commit: false,
        coordinator_epoch: 0,
    };
    block_on(log.append_marker(&marker, TimestampMs(1))).unwrap();
    let mut b = build_test_batch(1, 10, TimestampMs(1), Some((4, 0, 1)));
    mark_transactional(&mut b);
    let refused = block_on(log.append(validated(&b), TimestampMs(1)));
    assert_eq!(
        refused.unwrap_err().kafka_error_code(),
        ErrorCode::InvalidProducerEpoch
    );
    let stale = TxnMarker {
        producer_epoch: ProducerEpoch(0),
        ..marker
    };
    assert!(block_on(log.append_marker(&stale, TimestampMs(1))).is_err());
}
