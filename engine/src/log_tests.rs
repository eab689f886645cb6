//! Edge tests of [`PartitionLog`] on the simulated disk (one behaviour per test).

use crate::batch::{build_test_batch, validate_prefix, validated, ValidatedBatch};
use crate::config::{FlushPolicy, LogConfig};
use crate::error::EngineError;
use crate::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
use crate::io::{BlockFile, OpenMode, Storage};
use crate::log_manager::LogManager;
use crate::partition_log::PartitionLog;
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::types::{Offset, TimestampMs};
use crate::types::{PartitionIndex, TopicPartitionRef};
use bytes::BytesMut;
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub(crate) const DIR: &str = "/data/t-0";

pub(crate) fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes_max: 4096,
        index_interval_bytes: 256,
        batch_cache_bytes_max: 0,
        ..LogConfig::default()
    }
}

pub(crate) fn open(s: &SimStorage, config: LogConfig) -> PartitionLog<SimStorage> {
    let manager = LogManager::new(s.clone(), PathBuf::from("/data"));
    block_on(manager.open_partition(
        TopicPartitionRef::new("t", PartitionIndex(0)),
        config,
        Rc::new(ManualClock::new(TimestampMs(1_000))),
    ))
    .unwrap()
}

pub(crate) fn batch(records: i32, payload: usize, ts: i64) -> BytesMut {
    BytesMut::from(&build_test_batch(records, payload, TimestampMs(ts), None)[..])
}

pub(crate) fn append(
    log: &mut PartitionLog<SimStorage>,
    records: i32,
    payload: usize,
    ts: i64,
) -> Offset {
    block_on(log.append(validated(&batch(records, payload, ts)), TimestampMs(ts)))
        .unwrap()
        .base_offset
}

/// Reads every batch from `from` and returns (base, last) pairs.
pub(crate) fn read_all(log: &mut PartitionLog<SimStorage>, from: Offset) -> Vec<(Offset, Offset)> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.high_watermark() {
        let r = block_on(log.read(next, 1)).unwrap();
        assert!(
            !r.chunks.is_empty(),
            "read at {next} below the high watermark returned nothing"
        );
        for chunk in &r.chunks {
            let mut rest = &chunk[..];
            while !rest.is_empty() {
                let meta = validate_prefix(rest).unwrap();
                out.push((meta.base_offset, meta.last_offset));
                next = meta.last_offset.plus(1);
                rest = &rest[meta.total_bytes..];
            }
        }
    }
    out
}

#[test]
fn offsets_are_assigned_and_visible_only_when_durable() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    assert_eq!(append(&mut log, 3, 10, 5), Offset(0));
    assert_eq!(append(&mut log, 2, 10, 6), Offset(3));
    assert_eq!(
        (
            log.log_end_offset(),
            log.high_watermark(),
            log.durable_offset()
        ),
        (Offset(5), Offset(0), Offset(0))
    );
    assert!(block_on(log.read(Offset(0), 100))
        .unwrap()
        .chunks
        .is_empty());
    assert!(log.flush_due(TimestampMs(0)));
    assert_eq!(block_on(log.flush()).unwrap(), Offset(5));
    assert!(!log.flush_due(TimestampMs(0)));
    assert_eq!(
        read_all(&mut log, Offset(0)),
        vec![(Offset(0), Offset(2)), (Offset(3), Offset(4))]
    );
    assert_eq!(
        read_all(&mut log, Offset(4)),
        vec![(Offset(3), Offset(4))],
        "batch containing the offset"
    );
}

#[test]
fn out_of_range_reads_are_errors() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    append(&mut log, 1, 10, 5);
    let err = block_on(log.read(Offset(2), 100)).unwrap_err();
    assert_eq!(err.kafka_error_code().code(), 1);
    assert!(
        block_on(log.read(Offset(1), 100))
            .unwrap()
            .chunks
            .is_empty(),
        "log end itself is in range"
    );
}

#[test]
fn rolls_by_size_and_reads_across_segment_boundaries() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    for i in 0..60 {
        append(&mut log, 2, 300, i);
    }
    block_on(log.flush()).unwrap();
    assert!(log.segment_count() > 3);
    let all = read_all(&mut log, Offset(0));
    assert_eq!(all.len(), 60);
    let second_base = log.segments[1].base;
    assert_eq!(
        read_all(&mut log, second_base)[0].0,
        second_base,
        "first offset of a segment"
    );
    let before = Offset(second_base.0 - 1);
    assert_eq!(
        read_all(&mut log, before)[0].1,
        before,
        "last offset of the previous segment"
    );
    let sealed = &log.segments[..log.segments.len() - 1];
    let open = sealed.iter().filter(|s| s.file.is_some()).count();
    assert!(sealed.len() > crate::partition_log::OPEN_SEALED_FILES_MAX);
    assert!(
        open <= crate::partition_log::OPEN_SEALED_FILES_MAX,
        "{open} sealed files open"
    );
}

#[test]
fn at_least_one_batch_even_over_max_bytes() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    append(&mut log, 1, 2000, 1);
    append(&mut log, 1, 2000, 1);
    block_on(log.flush()).unwrap();
    let r = block_on(log.read(Offset(0), 10)).unwrap();
    assert_eq!(r.chunks.len(), 1);
    let r = block_on(log.read(Offset(0), 1 << 20)).unwrap();
    assert_eq!(log.segment_count(), 2, "the second batch rolled");
    assert_eq!(
        r.chunks.len(),
        2,
        "a read continues into the next segment, one chunk per extent"
    );
}

#[test]
fn close_trims_log_to_whole_batches_and_reopen_continues() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(
        &s,
        LogConfig {
            batch_cache_bytes_max: 0,
            ..LogConfig::default()
        },
    );
    append(&mut log, 2, 100, 1);
    append(&mut log, 1, 7, 2);
    block_on(log.close()).unwrap();
    let path = Path::new(DIR).join(segment_file_name(Offset(0), FileKind::Log));
    assert_eq!(s.file_bytes(&path).unwrap().len(), 161 + 68);
    let mut log = open(
        &s,
        LogConfig {
            batch_cache_bytes_max: 0,
            ..LogConfig::default()
        },
    );
    assert_eq!(
        (log.log_end_offset(), log.high_watermark()),
        (Offset(3), Offset(3))
    );
    assert_eq!(append(&mut log, 1, 5, 3), Offset(3));
    block_on(log.flush()).unwrap();
    assert_eq!(read_all(&mut log, Offset(0)).len(), 3);
}

/// Writes `bytes` as a file of the partition, padded with preallocated zeros.
fn plant(s: &SimStorage, name: &str, bytes: &[u8], padded_len: usize) {
    block_on(s.create_dir_all(Path::new(DIR))).unwrap();
    let f = block_on(s.open(&Path::new(DIR).join(name), OpenMode::CreateReadWrite)).unwrap();
    let mut data = bytes.to_vec();
    data.resize(
        padded_len.max(crate::io::align_up(bytes.len() as u64) as usize),
        0,
    );
    block_on(f.truncate(0)).unwrap();
    block_on(f.write_at(0, &data)).unwrap();
    block_on(f.sync()).unwrap();
}

/// A log image of three batches (offsets 0-1, 2, 3-5) and where each batch ends.
fn three_batch_image() -> (Vec<u8>, [usize; 3]) {
    let mut bytes = Vec::new();
    let mut ends = [0; 3];
    for (i, (records, base)) in [(2, 0), (1, 2), (3, 3)].into_iter().enumerate() {
        let mut b = build_test_batch(records, 40 + i * 13, TimestampMs(10 + i as i64), None);
        crate::batch::set_base_offset(&mut b, Offset(base));
        bytes.extend_from_slice(&b);
        ends[i] = bytes.len();
    }
    (bytes, ends)
}

#[test]
fn torn_tail_at_every_byte_is_cut_to_the_last_whole_batch() {
    let (image, ends) = three_batch_image();
    for cut in ends[1]..=image.len() {
        let s = SimStorage::new(1, FaultConfig::default());
        plant(
            &s,
            &segment_file_name(Offset(0), FileKind::Log),
            &image[..cut],
            8192,
        );
        let mut log = open(&s, small_config());
        let whole = if cut == image.len() { 6 } else { 3 };
        assert_eq!(log.log_end_offset(), Offset(whole), "cut at {cut}");
        assert_eq!(
            read_all(&mut log, Offset(0)).len(),
            if whole == 6 { 3 } else { 2 }
        );
        assert_eq!(
            append(&mut log, 1, 1, 99),
            Offset(whole),
            "appends continue after the cut"
        );
    }
}

#[test]
fn bit_flip_in_tail_batch_is_cut_and_index_damage_is_rebuilt() {
    let (mut image, ends) = three_batch_image();
    image[ends[1] + 30] ^= 4;
    let s = SimStorage::new(1, FaultConfig::default());
    plant(&s, &segment_file_name(Offset(0), FileKind::Log), &image, 0);
    plant(
        &s,
        &segment_file_name(Offset(0), FileKind::Index),
        &[0xff; 8],
        0,
    );
    let mut log = open(&s, small_config());
    assert_eq!(log.log_end_offset(), Offset(3));
    assert_eq!(read_all(&mut log, Offset(2)), vec![(Offset(2), Offset(2))]);
}

#[test]
fn one_byte_of_tail_garbage_after_whole_batches() {
    let (mut image, _) = three_batch_image();
    image.push(1);
    let s = SimStorage::new(1, FaultConfig::default());
    plant(&s, &segment_file_name(Offset(0), FileKind::Log), &image, 0);
    let log = open(&s, small_config());
    assert_eq!(log.log_end_offset(), Offset(6));
}

#[test]
fn retention_by_size_and_time_and_delete_records() {
    let s = SimStorage::new(1, FaultConfig::default());
    let config = LogConfig {
        retention_bytes: Some(8192),
        retention_ms: Some(1000),
        ..small_config()
    };
    let mut log = open(&s, config.clone());
    for i in 0..40 {
        append(&mut log, 1, 500, 10_000 + i);
    }
    block_on(log.flush()).unwrap();
    let before = log.segment_count();
    block_on(log.apply_retention(TimestampMs(10_000))).unwrap();
    assert!(log.segment_count() < before);
    assert_eq!(log.log_start_offset(), log.segments[0].base);
    let err = block_on(log.read(Offset(0), 10)).unwrap_err();
    assert!(matches!(err, EngineError::OffsetOutOfRange { .. }));
    block_on(log.apply_retention(TimestampMs(1_000_000))).unwrap();
    assert_eq!(
        log.segment_count(),
        1,
        "all sealed segments past retention.ms"
    );
    let start = block_on(log.delete_records_before(Offset(39))).unwrap();
    assert_eq!((start, log.log_start_offset()), (Offset(39), Offset(39)));
    assert!(
        block_on(log.delete_records_before(Offset(41))).is_err(),
        "beyond the high watermark"
    );
    block_on(log.close()).unwrap();
    let log = open(&s, config);
    assert_eq!(
        log.log_start_offset(),
        Offset(39),
        "log start survives restart"
    );
}

#[test]
fn offset_for_timestamp_uses_batch_max_timestamps() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    for (i, ts) in [100, 300, 200, 400, 500].into_iter().enumerate() {
        assert_eq!(append(&mut log, 1, 700, ts), Offset(i as i64));
    }
    block_on(log.flush()).unwrap();
    let find = |log: &mut PartitionLog<SimStorage>, ts| {
        block_on(log.offset_for_timestamp(TimestampMs(ts))).unwrap()
    };
    assert_eq!(find(&mut log, 50), Some((Offset(0), TimestampMs(100))));
    assert_eq!(find(&mut log, 250), Some((Offset(1), TimestampMs(300))));
    assert_eq!(find(&mut log, 301), Some((Offset(3), TimestampMs(400))));
    assert_eq!(find(&mut log, 501), None);
}

#[test]
fn offset_of_max_timestamp_is_the_first_batch_holding_it_across_segments_and_restart() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(&s, small_config());
    assert_eq!(block_on(log.offset_of_max_timestamp()).unwrap(), None);
    for (i, ts) in [100, 900, 200, 900, 500, 300].into_iter().enumerate() {
        assert_eq!(append(&mut log, 1, 700, ts), Offset(i as i64));
    }
    block_on(log.flush()).unwrap();
    assert!(log.segment_count() > 1, "small segments roll");
    let max = |log: &mut PartitionLog<SimStorage>| block_on(log.offset_of_max_timestamp()).unwrap();
    assert_eq!(max(&mut log), Some((Offset(1), TimestampMs(900))));
    block_on(log.close()).unwrap();
    let mut log = open(&s, small_config());
    assert_eq!(
        max(&mut log),
        Some((Offset(1), TimestampMs(900))),
        "after restart"
    );
    block_on(log.delete_records_before(Offset(2))).unwrap();
    assert_eq!(
        max(&mut log),
        Some((Offset(3), TimestampMs(900))),
        "below the log start: next"
    );
}

#[test]
fn idempotent_duplicates_are_detected_across_restart_and_crash() {
    let s = SimStorage::new(1, FaultConfig::default());
    let producer_batch =
        |seq| BytesMut::from(&build_test_batch(2, 10, TimestampMs(1), Some((7, 0, seq)))[..]);
    let mut log = open(&s, small_config());
    block_on(log.append(validated(&producer_batch(0)), TimestampMs(1))).unwrap();
    block_on(log.close()).unwrap();
    let mut log = open(&s, small_config());
    let dup = block_on(log.append(validated(&producer_batch(0)), TimestampMs(1))).unwrap_err();
    assert!(matches!(
        dup,
        EngineError::DuplicateSequence {
            base_offset: Offset(0),
            last_offset: Offset(1)
        }
    ));
    block_on(log.append(validated(&producer_batch(2)), TimestampMs(1))).unwrap();
    block_on(log.flush()).unwrap();
    s.crash();
    let mut log = open(&s, small_config());
    let dup = block_on(log.append(validated(&producer_batch(2)), TimestampMs(1))).unwrap_err();
    assert!(
        matches!(
            dup,
            EngineError::DuplicateSequence {
                base_offset: Offset(2),
                ..
            }
        ),
        "replayed from the log"
    );
    let gap = block_on(log.append(validated(&producer_batch(9)), TimestampMs(1))).unwrap_err();
    assert_eq!(gap.kafka_error_code().code(), 45);
}

#[test]
fn invalid_batches_are_rejected_without_changing_the_log() {
    let s = SimStorage::new(1, FaultConfig::default());
    let log = open(
        &s,
        LogConfig {
            message_bytes_max: 200,
            ..small_config()
        },
    );
    // The log takes only batches checked where they enter the broker (ValidatedBatch, with the
    // topic's message_bytes_max, 200 here): invalid bytes are refused there, never reaching it.
    let refused = |bytes: &[u8]| {
        ValidatedBatch::new(BytesMut::from(bytes), 200)
            .unwrap_err()
            .error_code()
            .code()
    };
    let mut bad = batch(1, 10, 1);
    bad[30] ^= 1;
    assert_eq!(refused(&bad), 2);
    assert_eq!(refused(&batch(1, 500, 1)), 10);
    assert_eq!(refused(&[0u8; 10]), 2);
    assert_eq!(log.log_end_offset(), Offset(0));
}

#[test]
fn io_error_fails_the_log_until_reopen() {
    let s = SimStorage::new(5, FaultConfig::default());
    let mut log = open(&s, small_config());
    append(&mut log, 1, 10, 1);
    block_on(log.flush()).unwrap();
    append(&mut log, 1, 10, 1);
    s.set_faults(FaultConfig {
        io_error_per_million: 1_000_000,
        bit_flip_per_million: 0,
    });
    assert_eq!(
        block_on(log.flush()).unwrap_err().kafka_error_code().code(),
        56
    );
    s.set_faults(FaultConfig::default());
    assert!(matches!(
        block_on(log.append(validated(&batch(1, 1, 1)), TimestampMs(1))),
        Err(EngineError::Failed)
    ));
    drop(log);
    s.crash();
    let log = open(&s, small_config());
    assert!(
        log.log_end_offset() >= Offset(1),
        "the durable batch survives"
    );
}

#[test]
fn interval_policy_exposes_unflushed_data_and_owes_flushes() {
    let s = SimStorage::new(1, FaultConfig::default());
    let policy = FlushPolicy::Interval {
        messages: Some(3),
        ms: Some(100),
    };
    let mut log = open(
        &s,
        LogConfig {
            flush: policy,
            ..small_config()
        },
    );
    append(&mut log, 2, 10, 1);
    assert_eq!(log.high_watermark(), Offset(2));
    assert_eq!(log.durable_offset(), Offset(0));
    assert!(!log.flush_due(TimestampMs(1_050)));
    assert!(
        log.flush_due(TimestampMs(1_100)),
        "flush.ms since the last flush"
    );
    append(&mut log, 1, 10, 1);
    assert!(log.flush_due(TimestampMs(1_000)), "flush.messages reached");
}

#[test]
fn rolls_by_age() {
    let s = SimStorage::new(1, FaultConfig::default());
    let mut log = open(
        &s,
        LogConfig {
            segment_ms_max: Some(10),
            ..LogConfig::default()
        },
    );
    block_on(log.append(validated(&batch(1, 1, 1)), TimestampMs(1_000))).unwrap();
    block_on(log.append(validated(&batch(1, 1, 1)), TimestampMs(1_005))).unwrap();
    assert_eq!(log.segment_count(), 1);
    block_on(log.append(validated(&batch(1, 1, 1)), TimestampMs(1_010))).unwrap();
    assert_eq!(log.segment_count(), 2);
}

#[test]
fn delete_partition_removes_its_directory() {
    let s = SimStorage::new(1, FaultConfig::default());
    let manager = LogManager::new(s.clone(), PathBuf::from("/data"));
    let log = block_on(manager.open_partition(
        TopicPartitionRef::new("t", PartitionIndex(0)),
        small_config(),
        Rc::new(ManualClock::new(TimestampMs(0))),
    ))
    .unwrap();
    block_on(log.close()).unwrap();
    block_on(manager.delete_partition(TopicPartitionRef::new("t", PartitionIndex(0)))).unwrap();
    assert!(!block_on(s.exists(Path::new(DIR))).unwrap());
    let bad = block_on(manager.open_partition(
        TopicPartitionRef::new("../x", PartitionIndex(0)),
        small_config(),
        Rc::new(ManualClock::new(TimestampMs(0))),
    ));
    assert!(matches!(bad, Err(EngineError::Layout(_))));
}
