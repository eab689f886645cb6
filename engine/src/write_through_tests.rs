//! Tests of write-through (batches leaving a log's tail cache kept in the shard's read cache,
//! `read_cache.rs`) on the simulated disk: a log just written is read from memory, and no path
//! that removes or rewrites log bytes leaves an old byte to be served. Each stale-byte test
//! writes batches that are in the cache, removes or rewrites them through one path, writes
//! different batches at the same offsets where it can, and reads everything back through the
//! same shared cache.

use crate::batch::{build_test_batch, validate_prefix, validated};
use crate::config::{FlushPolicy, LogConfig};
use crate::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
use crate::log_manager::LogManager;
use crate::partition_log::PartitionLog;
use crate::read_cache::{Found, ReadCache};
use crate::types::{Offset, TimestampMs};
use crate::types::{PartitionIndex, TopicPartitionRef};
use bytes::{Bytes, BytesMut};
use std::path::PathBuf;
use std::rc::Rc;

/// 16 KiB segments, a 4 KiB tail cache: most batches leave it soon after they are appended.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes_max: 16 << 10,
        index_interval_bytes: 1024,
        batch_cache_bytes_max: 4 << 10,
        retention_ms: None,
        segment_ms_max: None,
        ..LogConfig::default()
    }
}

/// A manager whose logs share one 64 MiB write-through cache.
fn manager(s: &SimStorage) -> LogManager<SimStorage> {
    let cache = Rc::new(ReadCache::new(64 << 20));
    LogManager::new(s.clone(), PathBuf::from("/data")).with_read_cache(cache)
}

fn open(manager: &LogManager<SimStorage>, config: LogConfig) -> PartitionLog<SimStorage> {
    let clock = Rc::new(ManualClock::new(TimestampMs(1_000)));
    block_on(manager.open_partition(
        TopicPartitionRef::new("t", PartitionIndex(0)),
        config,
        clock,
    ))
    .unwrap()
}

/// A batch of 2 records whose payload says which generation (`gen`) and which batch it is.
fn batch(gen: u8, seq: usize) -> BytesMut {
    let mut b = build_test_batch(2, 900, TimestampMs(1), None);
    b[61] = gen;
    b[62..66].copy_from_slice(&(seq as u32).to_be_bytes());
    rill_types::batch::write_crc(&mut b);
    BytesMut::from(&b[..])
}

/// Appends `n` batches of generation `gen` (flushed), returning each as the log must serve it.
fn write(log: &mut PartitionLog<SimStorage>, gen: u8, n: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    for i in 0..n {
        let mut b = batch(gen, i);
        let info = block_on(log.append(validated(&b), TimestampMs(1))).unwrap();
        crate::batch::set_base_offset(&mut b, info.base_offset);
        out.push(b.freeze());
    }
    block_on(log.flush()).unwrap();
    out
}

/// The whole batches of one chunk.
fn split(chunk: &Bytes) -> Vec<Bytes> {
    let (mut out, mut at) = (Vec::new(), 0);
    while at < chunk.len() {
        let meta = validate_prefix(&chunk[at..]).unwrap();
        out.push(chunk.slice(at..at + meta.total_bytes));
        at += meta.total_bytes;
    }
    out
}

/// Every batch from `from` to the high watermark, split one per item.
fn read_all(log: &mut PartitionLog<SimStorage>, from: Offset) -> Vec<Bytes> {
    let (mut out, mut next) = (Vec::new(), from);
    while next < log.high_watermark() {
        let read = block_on(log.read(next, 8 << 10)).unwrap();
        assert!(!read.chunks.is_empty(), "nothing read at {next}");
        for batch in read.chunks.iter().flat_map(split) {
            next = validate_prefix(&batch).unwrap().last_offset.plus(1);
            out.push(batch);
        }
    }
    out
}

/// Whether the cache holds a written (ready) extent of `log` at `offset`.
fn cached(log: &PartitionLog<SimStorage>, offset: Offset) -> bool {
    matches!(
        log.read_cache.find(log.read_cache_log, offset),
        Some(Found::Ready(_))
    )
}

#[test]
fn a_log_just_written_is_read_from_memory_then_from_the_tail_cache() {
    let s = SimStorage::new(1, FaultConfig::default());
    let manager = manager(&s);
    let mut log = open(&manager, config());
    let want = write(&mut log, 1, 200); // ~190 KiB over 12 segments
    let cache = manager.read_cache().clone();
    assert!(cache.stats().written >= 190, "{:?}", cache.stats());
    assert_eq!(read_all(&mut log, Offset(0)), want);
    let stats = cache.stats();
    assert_eq!(stats.loads, 0, "nothing read from disk: {stats:?}");
    assert_eq!(stats.misses, 0, "{stats:?}");
    // A reader crossing from the written extents into the tail cache gets both in one read.
    assert!(!cached(&log, Offset(2 * 199)) && cached(&log, Offset(2 * 186)));
    let read = block_on(log.read(Offset(2 * 186), 1 << 20)).unwrap();
    let got: Vec<Bytes> = read.chunks.iter().flat_map(split).collect();
    assert_eq!(got, want[186..]);
    // Off, the same log reads the disk.
    let s = SimStorage::new(1, FaultConfig::default());
    let off = Rc::new(ReadCache::with_write_through(64 << 20, false));
    let manager = LogManager::new(s, PathBuf::from("/data")).with_read_cache(off.clone());
    let mut log = open(&manager, config());
    let want = write(&mut log, 1, 200);
    assert_eq!(off.stats().written, 0);
    assert_eq!(read_all(&mut log, Offset(0)), want);
    assert!(off.stats().loads > 0);
}

#[test]
fn the_bound_holds_and_the_oldest_written_batches_go_first() {
    let s = SimStorage::new(2, FaultConfig::default());
    let cache = Rc::new(ReadCache::new(40 << 10));
    let manager = LogManager::new(s, PathBuf::from("/data")).with_read_cache(cache.clone());
    let mut log = open(&manager, config());
    let mut want = Vec::new();
    for round in 0..10 {
        want.extend(write(&mut log, 1, 20));
        assert!(cache.bytes() <= cache.bytes_max(), "round {round}");
    }
    assert!(cache.stats().evictions > 0);
    assert!(!cached(&log, Offset(0)), "the oldest went first");
    assert!(cached(&log, Offset(2 * (200 - 10))), "the newest stayed");
    assert_eq!(read_all(&mut log, Offset(0)), want, "the rest from disk");
}

/// A follower's divergent tail, truncated and rewritten with other batches.
#[test]
fn follower_truncation_leaves_no_stale_byte() {
    let s = SimStorage::new(3, FaultConfig::default());
    let manager = manager(&s);
    let mut log = open(&manager, config());
    log.follow(Offset(0));
    let old = write(&mut log, 1, 60);
    log.set_high_watermark(Offset(40));
    assert!(cached(&log, Offset(60)), "the tail to cut is cached");
    block_on(log.truncate_to(Offset(40))).unwrap();
    let mut log = open(&manager, config());
    log.follow(Offset(0));
    assert_eq!(log.log_end_offset(), Offset(40));
    let new = write(&mut log, 2, 30);
    log.set_high_watermark(log.log_end_offset());
    let got = read_all(&mut log, Offset(0));
    assert_eq!(got[..20], old[..20]);
    assert_eq!(got[20..], new[..], "only the new batches past the cut");
}

/// A follower below its leader's log start: the log emptied to start further on.
#[test]
fn emptying_to_a_new_start_leaves_no_stale_byte() {
    let s = SimStorage::new(4, FaultConfig::default());
    let manager = manager(&s);
    let mut log = open(&manager, config());
    log.follow(Offset(0));
    write(&mut log, 1, 60);
    let (cache, old_id) = (manager.read_cache().clone(), log.read_cache_log);
    block_on(log.truncate_fully_and_start_at(Offset(100))).unwrap();
    assert_eq!(
        cache.entries_of(old_id),
        0,
        "the old log's entries are gone"
    );
    let mut log = open(&manager, config());
    assert_eq!(log.log_end_offset(), Offset(100));
    let new = write(&mut log, 2, 60);
    assert_eq!(read_all(&mut log, Offset(100)), new);
}

/// Retention deletes the oldest segments; DeleteRecords moves the log start within one.
#[test]
fn retention_and_delete_records_forget_what_they_remove() {
    let s = SimStorage::new(5, FaultConfig::default());
    let manager = manager(&s);
    let config = LogConfig {
        retention_bytes: Some(40 << 10),
        ..config()
    };
    let mut log = open(&manager, config);
    let want = write(&mut log, 1, 100);
    assert!(cached(&log, Offset(0)));
    block_on(log.apply_retention(TimestampMs(1_000))).unwrap();
    let start = log.log_start_offset();
    assert!(start > Offset(0), "retention deleted segments");
    for offset in 0..start.0 {
        assert!(
            !cached(&log, Offset(offset)),
            "{offset} below the start {start}"
        );
    }
    let first = want
        .iter()
        .position(|b| validate_prefix(b).unwrap().base_offset == start);
    assert_eq!(read_all(&mut log, start), want[first.unwrap()..]);
    let target = start.plus(7);
    block_on(log.delete_records_before(target)).unwrap();
    assert!(block_on(log.read(start, 1)).is_err(), "below the new start");
    let got = read_all(&mut log, target);
    assert_eq!(validate_prefix(&got[0]).unwrap().last_offset, target);
}

/// A topic deleted and created again under the same name, in the same shard.
#[test]
fn a_partition_deleted_and_created_again_never_serves_the_old_bytes() {
    let s = SimStorage::new(6, FaultConfig::default());
    let manager = manager(&s);
    let mut log = open(&manager, config());
    write(&mut log, 1, 80);
    assert!(cached(&log, Offset(0)));
    drop(log); // the partition's owner drops it, then deletes its files
    block_on(manager.delete_partition(TopicPartitionRef::new("t", PartitionIndex(0)))).unwrap();
    let mut log = open(&manager, config());
    let new = write(&mut log, 2, 80);
    assert_eq!(read_all(&mut log, Offset(0)), new);
}

/// Batches written but not flushed are lost in a crash; recovery cuts the torn tail, and the
/// offsets are written again with other bytes. The crashed log is not even dropped (so it never
/// forgets its entries): the reopened log's own id keeps them out of reach.
#[test]
fn a_tail_lost_in_a_crash_is_never_served() {
    let s = SimStorage::new(7, FaultConfig::default());
    let manager = manager(&s);
    let config = LogConfig {
        segment_bytes_max: 1 << 20,
        flush: FlushPolicy::Interval {
            messages: None,
            ms: None,
        },
        ..config()
    };
    let mut log = open(&manager, config.clone());
    let mut want = write(&mut log, 1, 20);
    let mut lost = Vec::new();
    for i in 0..40 {
        let mut b = batch(3, i);
        let info = block_on(log.append(validated(&b), TimestampMs(1))).unwrap();
        crate::batch::set_base_offset(&mut b, info.base_offset);
        lost.push(b.freeze());
    }
    assert!(
        cached(&log, Offset(40)),
        "an unflushed batch left the tail cache"
    );
    s.crash();
    std::mem::forget(log);
    let mut log = open(&manager, config);
    let survived = (log.log_end_offset().0 as usize - 40) / 2;
    assert!(survived < 40, "the crash lost unflushed batches");
    want.extend_from_slice(&lost[..survived]);
    want.extend(write(&mut log, 2, 40));
    assert_eq!(read_all(&mut log, Offset(0)), want);
}
