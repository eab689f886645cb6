//! Tests of index checkpoints, checkpointed recovery and idle memory release, on the
//! simulated disk (a crash keeps only what was synced).

use crate::batch::{build_test_batch, validated};
use crate::config::LogConfig;
use crate::error::EngineError;
use crate::io::sim::{block_on, FaultConfig, SimStorage};
use crate::log_tests::{append, open, read_all, small_config, DIR};
use crate::partition_log::{PartitionLog, OPEN_SEALED_FILES_MAX};
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::segment::offset_index::OffsetIndex;
use crate::small_file;
use crate::types::{Offset, TimestampMs};
use crate::types::{PartitionIndex, TopicPartitionRef};
use bytes::BytesMut;
use std::path::{Path, PathBuf};

/// What an idle partition may hold after `release_idle_memory` (the Limits of issue 2).
const IDLE_RESIDENT_BYTES_MAX: usize = 8 << 10;
/// Payload of the test batches: ~560 bytes each with the header.
const PAYLOAD_BYTES: usize = 500;
/// Batches per flush in the checkpoint tests.
const BATCHES_PER_FLUSH: usize = 4;

/// 64 KiB segments: a checkpoint every 16 KiB of flushed log.
fn checkpoint_config() -> LogConfig {
    LogConfig {
        segment_bytes_max: 64 << 10,
        index_interval_bytes: 256,
        batch_cache_bytes_max: 0,
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn active_path(base: Offset, kind: FileKind) -> PathBuf {
    Path::new(DIR).join(segment_file_name(base, kind))
}

/// Appends `n` batches (timestamps `ts0`, `ts0+1`, ...), flushing every few.
fn fill(log: &mut PartitionLog<SimStorage>, n: usize, ts0: i64) {
    for i in 0..n {
        append(log, 2, PAYLOAD_BYTES, ts0 + i as i64);
        if i % BATCHES_PER_FLUSH == BATCHES_PER_FLUSH - 1 {
            block_on(log.flush()).unwrap();
        }
    }
    block_on(log.flush()).unwrap();
}

/// The on-disk offset index of the segment at `base`.
fn disk_index(s: &SimStorage, base: Offset, log_bytes: u64) -> OffsetIndex {
    let bytes = s.file_bytes(&active_path(base, FileKind::Index)).unwrap();
    OffsetIndex::decode(&bytes, log_bytes).expect("index decodes")
}

fn replace_file(s: &SimStorage, base: Offset, kind: FileKind, bytes: &[u8]) {
    let name = segment_file_name(base, kind);
    block_on(small_file::write_atomic(s, Path::new(DIR), &name, bytes)).unwrap();
}

/// A log with ~50 KiB in its active segment, checkpointed, then crashed: returns the storage,
/// log end and active size before the crash.
fn crashed_after_checkpoints() -> (SimStorage, Offset, u64) {
    let s = SimStorage::new(7, FaultConfig::default());
    let mut log = open(&s, checkpoint_config());
    fill(&mut log, 90, 1_000);
    assert_eq!(log.segment_count(), 1, "all in the active segment");
    let (end, size) = (log.log_end_offset(), log.active().size_bytes);
    assert!(
        log.checkpointed_bytes >= 32 << 10,
        "checkpoints were written"
    );
    drop(log);
    s.crash();
    (s, end, size)
}

#[test]
fn recovery_after_a_checkpoint_scans_only_from_the_last_checkpointed_entry() {
    let (s, end, size) = crashed_after_checkpoints();
    let entry = disk_index(&s, Offset(0), size).last().unwrap();
    let mut log = open(&s, checkpoint_config());
    let stats = log.recovery_stats();
    assert_eq!(log.log_end_offset(), end, "nothing durable lost");
    assert_eq!(stats.active_scan_from_bytes, u64::from(entry.1 .0));
    assert_eq!(stats.index_entries_dropped, 0);
    assert_eq!(stats.producer_replay_read_bytes, 0);
    let bound = log.checkpoint_bytes() + 4 * 1024; // + one flush of 4 batches + one interval
    assert!(
        stats.active_scanned_bytes < bound,
        "scanned {} of {size} bytes, bound {bound}",
        stats.active_scanned_bytes
    );
    assert!(stats.active_scanned_bytes < size / 2);
    assert_eq!(read_all(&mut log, Offset(0)).len(), 90);
    assert_eq!(append(&mut log, 1, 10, 5_000), end, "appends continue");
}

#[test]
fn recovery_without_index_files_scans_the_whole_segment_and_checkpoints() {
    let (s, end, size) = crashed_after_checkpoints();
    block_on(crate::io::Storage::remove_file(
        &s,
        &active_path(Offset(0), FileKind::Index),
    ))
    .unwrap();
    let log = open(&s, checkpoint_config());
    let stats = log.recovery_stats();
    assert_eq!(
        (stats.active_scan_from_bytes, stats.active_scanned_bytes),
        (0, size)
    );
    assert!(stats.checkpoint_written, "a long scan is checkpointed");
    assert_eq!(log.log_end_offset(), end);
    drop(log);
    s.crash();
    let log = open(&s, checkpoint_config());
    let rescanned = log.recovery_stats().active_scanned_bytes;
    assert!(
        rescanned < 2048,
        "from the last entry only: {rescanned} bytes"
    );
    assert_eq!(log.log_end_offset(), end);
}

#[test]
fn damaged_active_index_entries_are_dropped_and_recovery_falls_back() {
    let (s, end, size) = crashed_after_checkpoints();
    let index = disk_index(&s, Offset(0), size);
    let good = index.encode();
    let n = good.len() / 8;
    let last = index.last().unwrap();
    // (name, index bytes, entries the recovery must drop, expected scan start)
    let mid_batch = {
        // The last entry moved 7 bytes into its batch: still increasing, inside the file.
        let mut b = good.clone();
        b[(n - 1) * 8 + 4..].copy_from_slice(&(last.1 .0 + 7).to_be_bytes());
        b
    };
    let wrong_offset = {
        let mut b = good.clone();
        b[(n - 1) * 8..(n - 1) * 8 + 4].copy_from_slice(&(last.0 .0 + 1).to_be_bytes());
        b
    };
    let past_the_end = {
        // An entry past the last batch (in the preallocated zeros) must never be trusted.
        let mut b = good.clone();
        b.extend_from_slice(&(last.0 .0 + 100).to_be_bytes());
        b.extend_from_slice(&u32::try_from(size + 100).unwrap().to_be_bytes());
        b
    };
    let past_the_file = {
        let mut b = good.clone();
        b.extend_from_slice(&(last.0 .0 + 100).to_be_bytes());
        b.extend_from_slice(&(1u32 << 30).to_be_bytes());
        b
    };
    let stale = good[..(n / 2) * 8].to_vec();
    let garbage = vec![0xff; 24];
    let previous = index
        .lookup(crate::types::RelativeOffset(last.0 .0 - 1))
        .unwrap();
    let cases: [(&str, Vec<u8>, u32, u64); 6] = [
        ("mid batch", mid_batch, 1, u64::from(previous.1 .0)),
        ("wrong offset", wrong_offset, 1, u64::from(previous.1 .0)),
        ("past the end", past_the_end, 1, u64::from(last.1 .0)),
        ("past the file", past_the_file, 1, u64::from(last.1 .0)),
        ("stale", stale.clone(), 0, {
            let i = OffsetIndex::decode(&stale, size).unwrap();
            u64::from(i.last().unwrap().1 .0)
        }),
        ("garbage", garbage, 0, 0),
    ];
    for (name, bytes, dropped, from) in cases {
        let s2 = SimStorage::new(1, FaultConfig::default());
        copy_dir(&s, &s2);
        replace_file(&s2, Offset(0), FileKind::Index, &bytes);
        let mut log = open(&s2, checkpoint_config());
        let stats = log.recovery_stats();
        assert_eq!(log.log_end_offset(), end, "{name}: nothing durable lost");
        assert_eq!(stats.index_entries_dropped, dropped, "{name}");
        assert_eq!(stats.active_scan_from_bytes, from, "{name}");
        assert_eq!(stats.active_scanned_bytes, size - from, "{name}");
        assert_eq!(read_all(&mut log, Offset(0)).len(), 90, "{name}");
        let max = log.active().max_timestamp;
        assert_eq!(max, TimestampMs(1_000 + 89), "{name}: running max kept");
        if dropped > 0 {
            assert!(
                stats.checkpoint_written,
                "{name}: bad entries are rewritten"
            );
            let fixed = disk_index(&s2, Offset(0), size);
            assert!(u64::from(fixed.last().unwrap().1 .0) < size, "{name}");
        }
    }
}

/// Copies every file of the partition (durable bytes) to another simulated disk.
fn copy_dir(from: &SimStorage, to: &SimStorage) {
    use crate::io::Storage;
    let names = block_on(from.list_dir(Path::new(DIR))).unwrap();
    block_on(to.create_dir_all(Path::new(DIR))).unwrap();
    for name in names {
        let bytes = from.file_bytes(&Path::new(DIR).join(&name)).unwrap();
        block_on(small_file::write_atomic(to, Path::new(DIR), &name, &bytes)).unwrap();
    }
}

#[test]
fn producer_dedup_and_fencing_survive_a_crash_after_a_checkpoint() {
    let s = SimStorage::new(3, FaultConfig::default());
    let produce = |epoch: i16, seq: i32| {
        let b = build_test_batch(2, PAYLOAD_BYTES, TimestampMs(1), Some((42, epoch, seq)));
        BytesMut::from(&b[..])
    };
    let mut log = open(&s, checkpoint_config());
    let mut seq = 0;
    while log.checkpointed_bytes < 16 << 10 {
        block_on(log.append(validated(&produce(0, seq)), TimestampMs(1))).unwrap();
        block_on(log.flush()).unwrap();
        seq += 2;
    }
    // The epoch bump lands after the checkpoint; the scan starts before it (at the last
    // index entry), so replaying the scanned epoch-0 batches would regress the epoch.
    let bumped = block_on(log.append(validated(&produce(1, 0)), TimestampMs(1))).unwrap();
    block_on(log.flush()).unwrap();
    let checkpoint_end = log.checkpointed_bytes;
    drop(log);
    s.crash();
    let mut log = open(&s, checkpoint_config());
    let stats = log.recovery_stats();
    assert!(stats.active_scan_from_bytes < checkpoint_end);
    assert_eq!(
        stats.producer_replay_read_bytes, 0,
        "snapshot + scanned tail"
    );
    let dup = block_on(log.append(validated(&produce(1, 0)), TimestampMs(1))).unwrap_err();
    assert!(
        matches!(dup, EngineError::DuplicateSequence { base_offset, .. } if base_offset == bumped.base_offset),
        "{dup:?}"
    );
    let fenced = block_on(log.append(validated(&produce(0, seq)), TimestampMs(1))).unwrap_err();
    assert!(matches!(
        fenced,
        EngineError::InvalidProducerEpoch {
            current: rill_types::ProducerEpoch(1),
            ..
        }
    ));
    block_on(log.append(validated(&produce(1, 2)), TimestampMs(1))).unwrap();
}

#[test]
fn producer_state_from_a_checkpoint_detects_duplicates_before_it() {
    let s = SimStorage::new(4, FaultConfig::default());
    let produce = |seq: i32| {
        let b = build_test_batch(1, PAYLOAD_BYTES, TimestampMs(1), Some((9, 0, seq)));
        BytesMut::from(&b[..])
    };
    let mut log = open(&s, checkpoint_config());
    let mut offsets = Vec::new();
    // Stop right after a checkpoint: the state then comes from the snapshot alone.
    while offsets.is_empty() || log.checkpointed_bytes != log.active().size_bytes {
        let seq = offsets.len() as i32;
        offsets.push(block_on(log.append(validated(&produce(seq)), TimestampMs(1))).unwrap());
        block_on(log.flush()).unwrap();
    }
    let n = offsets.len() as i32;
    drop(log);
    s.crash();
    let mut log = open(&s, checkpoint_config());
    for seq in n - 5..n {
        let dup = block_on(log.append(validated(&produce(seq)), TimestampMs(1))).unwrap_err();
        let original = offsets[seq as usize].base_offset;
        assert!(
            matches!(dup, EngineError::DuplicateSequence { base_offset, .. } if base_offset == original),
            "seq {seq}: {dup:?}"
        );
    }
    block_on(log.append(validated(&produce(n)), TimestampMs(1))).unwrap();
}

#[test]
fn time_lookup_max_timestamp_and_retention_stay_right_after_checkpointed_recovery() {
    let s = SimStorage::new(5, FaultConfig::default());
    let config = LogConfig {
        retention_ms: Some(10_000),
        ..checkpoint_config()
    };
    let mut log = open(&s, config.clone());
    // Timestamps wander (not monotone) so the running max matters.
    for i in 0..200i64 {
        append(&mut log, 1, PAYLOAD_BYTES, 100_000 + i * 10 - (i % 7) * 25);
        if i % 4 == 3 {
            block_on(log.flush()).unwrap();
        }
    }
    block_on(log.flush()).unwrap();
    assert!(log.segment_count() >= 2);
    let probes: Vec<i64> = (0..40).map(|k| 99_000 + k * 60).collect();
    let find = |log: &mut PartitionLog<SimStorage>, ts| {
        block_on(log.offset_for_timestamp(TimestampMs(ts))).unwrap()
    };
    let before: Vec<_> = probes.iter().map(|&t| find(&mut log, t)).collect();
    let max_before: Vec<_> = log.segments.iter().map(|s| s.max_timestamp).collect();
    drop(log);
    s.crash();
    let mut log = open(&s, config);
    assert!(
        log.recovery_stats().active_scan_from_bytes > 0,
        "resumed mid-segment"
    );
    let max_after: Vec<_> = log.segments.iter().map(|s| s.max_timestamp).collect();
    assert_eq!(max_after, max_before);
    let after: Vec<_> = probes.iter().map(|&t| find(&mut log, t)).collect();
    assert_eq!(after, before);
    let newest_sealed = max_after[max_after.len() - 2].0;
    block_on(log.apply_retention(TimestampMs(newest_sealed + 10_001))).unwrap();
    assert_eq!(
        log.segment_count(),
        1,
        "sealed segments expired by max timestamp"
    );
    block_on(log.apply_retention(TimestampMs(max_after.last().unwrap().0 + 10_001))).unwrap();
    assert_eq!(
        log.segment_count(),
        1,
        "the active segment is never deleted"
    );
}

#[test]
fn sealed_segments_keep_only_a_summary_and_load_indexes_on_read() {
    let s = SimStorage::new(6, FaultConfig::default());
    let mut log = open(&s, small_config());
    for i in 0..80 {
        append(&mut log, 2, 300, i);
    }
    block_on(log.close()).unwrap();
    let mut log = open(&s, small_config());
    let sealed = log.segment_count() - 1;
    assert!(sealed > OPEN_SEALED_FILES_MAX + 1);
    assert!(log.segments[..sealed]
        .iter()
        .all(|seg| !seg.indexes_loaded && seg.index_heap_bytes() == 0 && seg.file.is_none()));
    assert_eq!(read_all(&mut log, Offset(0)).len(), 80);
    let loaded = log.segments[..sealed]
        .iter()
        .filter(|seg| seg.indexes_loaded)
        .count();
    assert!(
        loaded <= OPEN_SEALED_FILES_MAX,
        "{loaded} sealed indexes in memory"
    );
    // A damaged index file of a closed sealed segment is rebuilt when a read opens it.
    let base = log.segments[0].base;
    replace_file(&s, base, FileKind::Index, &[0xee; 16]);
    assert!(!log.segments[0].indexes_loaded);
    log.read_cache.forget_log(log.read_cache_log); // so the read opens the segment again
    assert_eq!(read_all(&mut log, Offset(0)).len(), 80);
    let size = log.segments[0].size_bytes;
    assert!(!disk_index(&s, base, size).is_empty(), "rewritten");
}

#[test]
fn idle_release_keeps_a_few_kib_and_everything_reloads() {
    let s = SimStorage::new(8, FaultConfig::default());
    let config = LogConfig {
        batch_cache_bytes_max: 1 << 20,
        ..small_config()
    };
    let mut log = open(&s, config.clone());
    for i in 0..60 {
        append(&mut log, 2, 300, 1_000 + i);
    }
    block_on(log.flush()).unwrap();
    append(&mut log, 1, 100, 2_000); // unflushed: release flushes it
    assert!(log.segment_count() > OPEN_SEALED_FILES_MAX + 1);
    assert_eq!(read_all(&mut log, Offset(0)).len(), 60);
    let busy = log.resident_bytes();
    block_on(log.release_idle_memory()).unwrap();
    let idle = log.resident_bytes();
    assert!(
        idle < IDLE_RESIDENT_BYTES_MAX,
        "idle partition holds {idle} bytes (busy: {busy})"
    );
    assert!(busy > 10 * idle);
    assert_eq!(log.durable_offset(), log.log_end_offset());
    // Reads, time lookups and appends reload what they need.
    assert_eq!(read_all(&mut log, Offset(0)).len(), 61);
    let found = block_on(log.offset_for_timestamp(TimestampMs(1_030))).unwrap();
    assert_eq!(found, Some((Offset(60), TimestampMs(1_030))));
    block_on(log.release_idle_memory()).unwrap();
    let end = log.log_end_offset();
    assert_eq!(append(&mut log, 1, 10, 3_000), end);
    block_on(log.flush()).unwrap();
    block_on(log.release_idle_memory()).unwrap();
    assert!(log.resident_bytes() < IDLE_RESIDENT_BYTES_MAX);
    drop(log);
    s.crash();
    let mut log = open(&s, config);
    assert_eq!(log.log_end_offset(), end.plus(1));
    assert_eq!(read_all(&mut log, Offset(0)).len(), 62);
}

/// The active `.log` of the test log, as the simulated disk has it.
fn active_log_bytes(s: &SimStorage, log: &PartitionLog<SimStorage>) -> usize {
    let base = log.segments.last().expect("a segment").base;
    let path = log.dir().join(segment_file_name(base, FileKind::Log));
    s.file_bytes(&path).unwrap().len()
}

/// Every write, sync, truncate, allocate and read from now on fails: an operation that still
/// succeeds did no I/O but open and close.
fn fail_all_io(s: &SimStorage) {
    s.set_faults(crate::io::sim::FaultConfig {
        io_error_per_million: 1_000_000,
        bit_flip_per_million: 0,
    });
}

#[test]
fn preallocation_follows_the_data_and_idle_release_gives_it_back() {
    let s = SimStorage::new(21, FaultConfig::default());
    let config = LogConfig {
        segment_bytes_max: 1 << 30,
        ..checkpoint_config()
    };
    let manager =
        crate::LogManager::new(s.clone(), PathBuf::from("/data")).with_prealloc_budget(8 << 20);
    let clock = std::rc::Rc::new(crate::io::sim::ManualClock::new(TimestampMs(1_000)));
    let open = |topic: &str| {
        let clock: std::rc::Rc<dyn crate::io::Clock> = clock.clone();
        block_on(manager.open_partition(
            TopicPartitionRef::new(topic, PartitionIndex(0)),
            config.clone(),
            clock,
        ))
        .unwrap()
    };
    let (mut idle, mut hot) = (open("idle"), open("hot"));
    assert_eq!(
        active_log_bytes(&s, &idle),
        0,
        "an empty partition costs no data block"
    );
    append(&mut idle, 1, 100, 1);
    block_on(idle.flush()).unwrap();
    assert_eq!(
        active_log_bytes(&s, &idle),
        crate::prealloc::PREALLOC_STEP_MIN as usize,
        "a first small batch: the first step, its block included (one allocation)"
    );
    // A hot partition: 64 KiB batches as fast as the (manual) clock allows.
    for i in 0..64 {
        append(&mut hot, 1, 64 << 10, i);
        block_on(hot.flush()).unwrap();
    }
    let held = manager.prealloc_budget().held_bytes();
    let hot_file = s
        .file_bytes(&PathBuf::from("/data/hot-0/00000000000000000000.log"))
        .unwrap()
        .len() as u64;
    let hot_size = hot.segments[0].size_bytes;
    assert!(held > 1 << 20, "a hot partition runs ahead: {held} bytes");
    assert!(
        hot_file > hot_size + (1 << 20),
        "file {hot_file} for {hot_size} of data"
    );
    assert!(held <= 8 << 20, "within the shard's budget");
    // Idle release: trimmed to the data, file closed, budget back; reopened on demand.
    block_on(hot.release_idle_memory()).unwrap();
    assert_eq!(
        manager.prealloc_budget().held_bytes(),
        crate::prealloc::PREALLOC_STEP_MIN - 4096,
        "what is left: the written-once partition's first step, past its block"
    );
    assert_eq!(hot.open_files(), 0);
    let trimmed = s
        .file_bytes(&PathBuf::from("/data/hot-0/00000000000000000000.log"))
        .unwrap()
        .len() as u64;
    assert_eq!(trimmed, hot_size);
    hot.read_cache.forget_log(hot.read_cache_log); // written through: so the read opens the file
    let read = block_on(hot.read(Offset(10), 1)).unwrap();
    assert_eq!(validate_base(&read.chunks[0]), Offset(10));
    assert_eq!(hot.open_files(), 1, "a read reopened the active file");
    assert_eq!(append(&mut hot, 1, 10, 100), Offset(64));
    block_on(hot.flush()).unwrap();
    block_on(idle.close()).unwrap();
    block_on(hot.close()).unwrap();
    assert_eq!(manager.prealloc_budget().held_bytes(), 0);
}

fn validate_base(chunk: &[u8]) -> Offset {
    crate::batch::validate_prefix(chunk).unwrap().base_offset
}

#[test]
fn a_released_or_cleanly_reopened_log_closes_without_writing() {
    let s = SimStorage::new(22, FaultConfig::default());
    let mut log = open(&s, checkpoint_config());
    fill(&mut log, 30, 1_000);
    block_on(log.release_idle_memory()).unwrap();
    fail_all_io(&s);
    block_on(log.close()).unwrap(); // no write, sync or truncate: they would all fail
    s.set_faults(FaultConfig::default());
    // Closed cleanly: the next open finds the files current, and releasing and closing it
    // writes nothing either.
    let mut log = open(&s, checkpoint_config());
    assert_eq!(log.log_end_offset(), Offset(60));
    fail_all_io(&s);
    block_on(log.release_idle_memory()).unwrap();
    block_on(log.close()).unwrap();
    s.set_faults(FaultConfig::default());
    // Everything is still there, and a fresh empty log also closes without writing.
    let mut log = open(&s, checkpoint_config());
    assert_eq!(read_all(&mut log, Offset(0)).len(), 30);
    let found = block_on(log.offset_for_timestamp(TimestampMs(1_029))).unwrap();
    assert_eq!(found, Some((Offset(58), TimestampMs(1_029))));
    assert_eq!(append(&mut log, 1, 10, 2_000), Offset(60));
    block_on(log.close()).unwrap();
    let empty = crate::LogManager::new(s.clone(), PathBuf::from("/data"));
    let clock = std::rc::Rc::new(crate::io::sim::ManualClock::new(TimestampMs(1_000)));
    let fresh = block_on(empty.open_partition(
        TopicPartitionRef::new("fresh", PartitionIndex(0)),
        checkpoint_config(),
        clock,
    ))
    .unwrap();
    fail_all_io(&s);
    block_on(fresh.close()).unwrap();
}

#[test]
fn close_leaves_a_short_tail_to_recovery_and_checkpoints_a_long_one() {
    let s = SimStorage::new(23, FaultConfig::default());
    let config = LogConfig {
        segment_bytes_max: 4 << 20, // checkpoints every 1 MiB
        ..checkpoint_config()
    };
    let mut log = open(&s, config.clone());
    fill(&mut log, 300, 1_000); // ~170 KB past the (absent) checkpoint
    let end = log.log_end_offset();
    block_on(log.close()).unwrap();
    let mut log = open(&s, config.clone());
    let stats = log.recovery_stats();
    assert!(
        stats.active_scanned_bytes <= 1024,
        "checkpointed at close: {stats:?}"
    );
    assert_eq!(log.log_end_offset(), end);
    append(&mut log, 2, PAYLOAD_BYTES, 5_000); // a short tail past the checkpoint
    block_on(log.close()).unwrap();
    let mut log = open(&s, config);
    let stats = log.recovery_stats();
    assert!(
        stats.active_scanned_bytes > 0 && stats.active_cut_bytes == 0,
        "{stats:?}"
    );
    assert!(stats.active_scanned_bytes <= crate::partition_log::CLOSE_SCAN_BYTES_MAX);
    assert_eq!(log.log_end_offset(), end.plus(2));
    assert_eq!(read_all(&mut log, Offset(0)).len(), 301);
}
