//! Tests of the read path on the simulated disk: the shard read cache's bound with many
//! catch-up consumers, read-ahead, and reads racing appends on the active segment.

use crate::batch::{build_test_batch, validate_prefix, validated};
use crate::config::{FlushPolicy, LogConfig};
use crate::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
use crate::log_manager::LogManager;
use crate::partition_log::PartitionLog;
use crate::read_cache::ReadCache;
use crate::read_path::HELD_LOADS_IN_FLIGHT;
use crate::types::{Offset, TimestampMs};
use crate::types::{PartitionIndex, TopicPartitionRef};
use bytes::{Bytes, BytesMut};
use std::path::PathBuf;
use std::rc::Rc;

/// 256 KiB segments, an index entry every 4 KiB, no batch cache: every read is cold.
fn cold_config() -> LogConfig {
    LogConfig {
        segment_bytes_max: 256 << 10,
        index_interval_bytes: 4096,
        batch_cache_bytes_max: 0,
        retention_ms: None,
        segment_ms_max: None,
        ..LogConfig::default()
    }
}

fn manager(s: &SimStorage, cache: &Rc<ReadCache>) -> LogManager<SimStorage> {
    LogManager::new(s.clone(), PathBuf::from("/data")).with_read_cache(cache.clone())
}

fn open_log(manager: &LogManager<SimStorage>, partition: i32) -> PartitionLog<SimStorage> {
    let clock = Rc::new(ManualClock::new(TimestampMs(1_000)));
    block_on(manager.open_partition(
        TopicPartitionRef::new("t", PartitionIndex(partition)),
        cold_config(),
        clock,
    ))
    .unwrap()
}

/// A batch of `records` whose payload bytes tell its partition and sequence number apart.
fn batch(partition: i32, seq: usize, payload: usize) -> BytesMut {
    let mut b = build_test_batch(2, payload, TimestampMs(1), None);
    let tag = (partition as u32) << 20 | seq as u32;
    b[61..65].copy_from_slice(&tag.to_be_bytes());
    fix_crc(&mut b);
    BytesMut::from(&b[..])
}

fn fix_crc(b: &mut [u8]) {
    rill_types::batch::write_crc(b);
}

/// Splits read chunks into their batches (a chunk holds whole batches back to back).
fn batches_of(chunks: &[Bytes]) -> Vec<Bytes> {
    let mut out = Vec::new();
    for chunk in chunks {
        let mut pos = 0;
        while pos < chunk.len() {
            let meta = validate_prefix(&chunk[pos..]).expect("served batches verify");
            out.push(chunk.slice(pos..pos + meta.total_bytes));
            pos += meta.total_bytes;
        }
    }
    out
}

/// What the log must hold: each appended batch as written, with its assigned base offset.
fn expected(mut b: BytesMut, base: Offset) -> Bytes {
    crate::batch::set_base_offset(&mut b, base);
    b.freeze()
}

/// Opens `partitions` logs sharing one cache, each holding `batches` batches of ~5 KiB;
/// returns them with the bytes each must serve.
fn fill_logs(
    manager: &LogManager<SimStorage>,
    partitions: i32,
    batches: usize,
    config: &LogConfig,
) -> (Vec<PartitionLog<SimStorage>>, Vec<Vec<Bytes>>) {
    let (mut logs, mut want) = (Vec::new(), Vec::new());
    let cache = manager.read_cache();
    for p in 0..partitions {
        let clock = Rc::new(ManualClock::new(TimestampMs(1_000)));
        let mut log = block_on(manager.open_partition(
            TopicPartitionRef::new("t", PartitionIndex(p)),
            config.clone(),
            clock,
        ))
        .unwrap();
        let mut appended = Vec::new();
        for i in 0..batches {
            let b = batch(p, i, 5_000);
            let base = block_on(log.append(validated(&b), TimestampMs(1)))
                .unwrap()
                .base_offset;
            appended.push(expected(b, base));
            assert!(
                cache.bytes() <= cache.bytes_max(),
                "bound held while writing"
            );
        }
        block_on(log.flush()).unwrap();
        logs.push(log);
        want.push(appended);
    }
    (logs, want)
}

/// Catch-up consumers of every log, round robin, 64 KiB fetches, until each is done or (odd
/// partitions) has read `stop_after` batches; checks the cache bound after every fetch.
fn consume_round_robin(
    logs: &mut [PartitionLog<SimStorage>],
    cache: &ReadCache,
    stop_after: usize,
) -> Vec<Vec<Bytes>> {
    let mut next = vec![Offset(0); logs.len()];
    let mut got: Vec<Vec<Bytes>> = vec![Vec::new(); logs.len()];
    loop {
        let mut active = 0;
        for (p, log) in logs.iter_mut().enumerate() {
            let stopped = p % 2 == 1 && got[p].len() >= stop_after;
            if stopped || next[p] >= log.high_watermark() {
                continue;
            }
            active += 1;
            let read = block_on(log.read(next[p], 64 << 10)).unwrap();
            let batches = batches_of(&read.chunks);
            let last = batches.last().expect("a read below hw returns a batch");
            next[p] = validate_prefix(last).unwrap().last_offset.plus(1);
            got[p].extend(batches);
            assert!(
                cache.bytes() <= cache.bytes_max(),
                "bound held at every step"
            );
        }
        if active == 0 {
            return got;
        }
    }
}

#[test]
fn read_cache_stays_in_bounds_with_many_catch_up_consumers() {
    read_cache_bound_case(false);
}

/// The same with write-through: appended batches leave a 64 KiB tail cache into the shared
/// read cache as they are written, which holds only the newest ~3 MiB of the 24 logs; the
/// rest is read ahead from disk, the two kinds of entries evicting each other.
#[test]
fn read_cache_stays_in_bounds_with_write_through_and_many_catch_up_consumers() {
    read_cache_bound_case(true);
}

fn read_cache_bound_case(write_through: bool) {
    const PARTITIONS: i32 = 24;
    const BATCHES: usize = 200; // ~1 MiB of log per partition, 4 segments each
    let s = SimStorage::new(11, FaultConfig::default());
    let cache = Rc::new(ReadCache::with_write_through(3 << 20, write_through));
    let manager = manager(&s, &cache);
    let config = LogConfig {
        batch_cache_bytes_max: if write_through { 64 << 10 } else { 0 },
        ..cold_config()
    };
    let (mut logs, want) = fill_logs(&manager, PARTITIONS, BATCHES, &config);
    let written = cache.stats().written;
    assert_eq!(written > 0, write_through, "{:?}", cache.stats());
    // Half of the consumers stop half way.
    let got = consume_round_robin(&mut logs, &cache, BATCHES / 2);
    for p in 0..PARTITIONS as usize {
        let n = got[p].len();
        assert_eq!(
            got[p][..],
            want[p][..n],
            "partition {p}: every byte as appended"
        );
        assert!(p % 2 == 1 || n == BATCHES);
    }
    let stats = cache.stats();
    assert!(stats.evictions > 0, "the bound was reached: {stats:?}");
    assert!(
        stats.loads > 0,
        "the older logs were read from disk: {stats:?}"
    );
    assert!(
        stats.hits + stats.hits_loading > stats.loads / 2,
        "read-ahead served: {stats:?}"
    );
    // The stopped consumers pin nothing: the others' reads evicted their extents.
    let pinned: usize = (0..PARTITIONS as usize)
        .filter(|p| p % 2 == 1)
        .map(|p| cache.entries_of(logs[p].read_cache_log))
        .sum();
    assert!(pinned <= 4, "{pinned} extents of stopped consumers left");
    // An idle log keeps its entries (within the bound) and serves from them without touching
    // its files; a closed one drops what it still has.
    let log0 = logs[0].read_cache_log;
    let kept = cache.entries_of(log0);
    let cached = (0..logs[0].high_watermark().0)
        .rev()
        .map(Offset)
        .find(|&o| cache.entry_covering(log0, o).is_some())
        .expect("partition 0 read last: some of its extents are cached");
    let before = block_on(logs[0].read(cached, 1)).unwrap();
    block_on(logs[0].release_idle_memory()).unwrap();
    assert_eq!(logs[0].open_files(), 0);
    assert_eq!(cache.entries_of(log0), kept, "idle: kept");
    let loads = cache.stats().loads;
    let after = block_on(logs[0].read(cached, 1)).unwrap();
    assert_eq!(batches_of(&after.chunks), batches_of(&before.chunks));
    assert_eq!(cache.stats().loads, loads, "served from memory");
    assert_eq!(logs[0].open_files(), 0, "no file reopened");
    let last = logs.pop().unwrap();
    let id = last.read_cache_log;
    block_on(last.close()).unwrap();
    assert_eq!(cache.entries_of(id), 0);
}

/// A 64 MiB read cache without write-through: only read-ahead from disk fills it.
fn disk_only_cache() -> Rc<ReadCache> {
    Rc::new(ReadCache::with_write_through(64 << 20, false))
}

/// A log of 400 flushed batches of ~10 KiB (16 segments) on a disk seeded `seed`, with its
/// own 64 MiB read cache (no write-through: these reads go to the disk).
fn log_of_400_batches(seed: u64) -> (Rc<ReadCache>, PartitionLog<SimStorage>) {
    let s = SimStorage::new(seed, FaultConfig::default());
    let cache = disk_only_cache();
    let mut log = open_log(&manager(&s, &cache), 0);
    for i in 0..400 {
        block_on(log.append(validated(&batch(0, i, 10_000)), TimestampMs(1))).unwrap();
    }
    block_on(log.flush()).unwrap();
    (cache, log)
}

#[test]
fn a_sequential_reader_finds_its_next_fetch_loaded_ahead() {
    let (cache, mut log) = log_of_400_batches(12);
    let mut next = Offset(0);
    let mut fetches = 0;
    while next < log.high_watermark() {
        let read = block_on(log.read(next, 256 << 10)).unwrap();
        let last = batches_of(&read.chunks).pop().unwrap();
        next = validate_prefix(&last).unwrap().last_offset.plus(1);
        fetches += 1;
    }
    let stats = cache.stats();
    // Only the first fetch and the first after it load on demand; each later one finds its
    // extents already loaded or loading.
    assert!(stats.loads >= 4, "{stats:?}");
    assert!(
        stats.hits + stats.hits_loading >= fetches - 2,
        "{fetches} fetches: {stats:?}"
    );
    // A random read (not where the last one ended) issues no read-ahead.
    let loads = cache.stats().loads;
    cache.forget_log(log.read_cache_log);
    block_on(log.read(Offset(10), 1)).unwrap();
    assert_eq!(cache.stats().loads, loads + 1, "only the extent it needs");
}

/// With read-ahead held, a sequential reader keeps at most [`HELD_LOADS_IN_FLIGHT`] loads in
/// flight (it still reads ahead); released, its whole window is loaded ahead at once. Every
/// read is served either way.
#[test]
fn a_held_read_ahead_keeps_few_loads_in_flight() {
    let s = SimStorage::new(14, FaultConfig::default());
    let cache = disk_only_cache();
    let mut log = open_log(&manager(&s, &cache), 0);
    for i in 0..400 {
        block_on(log.append(validated(&batch(0, i, 10_000)), TimestampMs(1))).unwrap();
    }
    block_on(log.flush()).unwrap();
    // Loads stay in flight until a read awaits them.
    s.set_latency_polls_max(4);
    let in_flight = |log: &PartitionLog<SimStorage>, from: Offset| {
        let (mut offset, mut loading) = (from, 0);
        while let Some((end, _)) = cache.entry_covering(log.read_cache_log, offset) {
            let load = cache.loading(log.read_cache_log, offset);
            loading += usize::from(load.is_some_and(|l| l.peek().is_none()));
            offset = end;
        }
        loading
    };
    let read_from = |log: &mut PartitionLog<SimStorage>, next: &mut Offset| {
        let read = block_on(log.read(*next, 64 << 10)).unwrap();
        let last = batches_of(&read.chunks)
            .pop()
            .expect("a read below hw serves a batch");
        *next = validate_prefix(&last).unwrap().last_offset.plus(1);
    };
    let mut next = Offset(0);
    log.hold_read_ahead(true);
    let loads = cache.stats().loads;
    for _ in 0..16 {
        read_from(&mut log, &mut next);
        assert!(
            in_flight(&log, next) <= HELD_LOADS_IN_FLIGHT,
            "held: more loads in flight than HELD_LOADS_IN_FLIGHT"
        );
    }
    assert!(
        cache.stats().loads - loads >= 2,
        "held: the reader still loads ahead"
    );
    log.hold_read_ahead(false);
    let loads = cache.stats().loads;
    read_from(&mut log, &mut next);
    read_from(&mut log, &mut next);
    assert!(
        cache.stats().loads - loads >= 2,
        "released: the sequential reader's window is loaded ahead: {:?}",
        cache.stats()
    );
}

/// Reads race appends, background writes and flushes of the active segment (seeded latency
/// keeps loads in flight across them); every byte served is what was appended there, and the
/// simulator checks that no write ever touched bytes under a load in flight.
#[test]
fn no_stale_or_torn_byte_when_reads_race_appends_on_the_active_segment() {
    for seed in 0..6u64 {
        let s = SimStorage::new(100 + seed, FaultConfig::default());
        s.set_latency_polls_max(6);
        let cache = Rc::new(ReadCache::new(2 << 20));
        let manager = manager(&s, &cache);
        let config = LogConfig {
            segment_bytes_max: 2 << 20,
            index_interval_bytes: 1024,
            batch_cache_bytes_max: 8 << 10,
            // hw = log end: readers chase bytes that are written in the background, unsynced.
            flush: if seed % 2 == 0 {
                FlushPolicy::EveryAppend
            } else {
                FlushPolicy::Interval {
                    messages: Some(50),
                    ms: None,
                }
            },
            ..cold_config()
        };
        let clock = Rc::new(ManualClock::new(TimestampMs(1_000)));
        let mut log = block_on(manager.open_partition(
            TopicPartitionRef::new("race", PartitionIndex(0)),
            config,
            clock,
        ))
        .unwrap();
        let mut rng = fastrand::Rng::with_seed(seed);
        let (mut want, mut lasts): (Vec<Bytes>, Vec<Offset>) = (Vec::new(), Vec::new());
        let mut readers = [Offset(0); 3];
        for step in 0..2_000 {
            match rng.u8(0..10) {
                0..=4 => {
                    let b = batch(0, step, rng.usize(4..6_000));
                    let info = block_on(log.append(validated(&b), TimestampMs(1))).unwrap();
                    want.push(expected(b, info.base_offset));
                    lasts.push(info.last_offset);
                }
                5 => {
                    block_on(log.flush()).unwrap();
                }
                _ => {
                    let r = rng.usize(0..readers.len());
                    let read = block_on(log.read(readers[r], rng.usize(1..200_000))).unwrap();
                    let got = batches_of(&read.chunks);
                    if let Some(last) = got.last() {
                        let first = lasts.partition_point(|&last| last < readers[r]);
                        assert_eq!(
                            got[..],
                            want[first..first + got.len()],
                            "seed {seed} step {step}"
                        );
                        readers[r] = validate_prefix(last).unwrap().last_offset.plus(1);
                    }
                    if rng.u8(0..20) == 0 {
                        readers[r] = Offset(0); // a consumer rewinds: cold again
                    }
                }
            }
        }
        assert!(cache.stats().loads > 10, "seed {seed}: extents were loaded");
    }
}

/// A read whose first bytes are still loading is prepared without waiting: the caller gets the
/// load to await elsewhere, the log takes appends meanwhile, and the read that follows finds
/// the bytes in memory (no second load).
#[test]
fn a_read_waiting_on_the_disk_is_prepared_without_holding_the_log() {
    let s = SimStorage::new(13, FaultConfig::default());
    let cache = disk_only_cache();
    let manager = manager(&s, &cache);
    let mut log = open_log(&manager, 0);
    let mut want = Vec::new();
    for i in 0..100 {
        let b = batch(0, i, 10_000);
        let base = block_on(log.append(validated(&b), TimestampMs(1)))
            .unwrap()
            .base_offset;
        want.push(expected(b, base));
    }
    block_on(log.flush()).unwrap();
    s.set_latency_polls_max(50);
    let loaded = block_on(log.prepare_read(Offset(0), 256 << 10)).expect("a load in flight");
    let loads = cache.stats().loads;
    // The log is free while the load runs: an append goes through.
    block_on(log.append(validated(&batch(0, 100, 100)), TimestampMs(1))).unwrap();
    block_on(log.flush()).unwrap();
    block_on(loaded);
    assert!(
        block_on(log.prepare_read(Offset(0), 256 << 10)).is_none(),
        "loaded: nothing to wait for"
    );
    let read = block_on(log.read(Offset(0), 256 << 10)).unwrap();
    let got = batches_of(&read.chunks);
    assert!(!got.is_empty());
    assert_eq!(got[..], want[..got.len()], "every byte as appended");
    assert_eq!(cache.stats().loads, loads, "served from the prepared load");
    // Out of range, or at the log end: nothing to prepare (the read reports or waits itself).
    assert!(block_on(log.prepare_read(Offset(1_000_000), 1)).is_none());
    let end = log.high_watermark();
    assert!(block_on(log.prepare_read(end, 1)).is_none());
}

/// A held log's loads wait while one of the core's flushes is in flight (paced behind the
/// shard's `FlushGate`), and go once it ends; a released log's loads do not wait.
#[test]
fn a_held_load_waits_behind_a_flush_in_flight() {
    use futures::FutureExt;
    let (cache, mut log) = log_of_400_batches(15);
    log.hold_read_ahead(true);
    let flushing = cache.flush_gate().flush_started();
    let mut loaded = block_on(log.prepare_read(Offset(0), 64 << 10)).expect("a cold read loads");
    assert!(
        (&mut loaded).now_or_never().is_none(),
        "held: no load goes while a flush is in flight"
    );
    drop(flushing);
    block_on(loaded);
    let read = block_on(log.read(Offset(0), 64 << 10)).unwrap();
    assert_eq!(
        validate_prefix(&read.chunks[0]).unwrap().base_offset,
        Offset(0)
    );

    let (cache, mut log) = log_of_400_batches(16);
    let _flushing = cache.flush_gate().flush_started();
    let loaded = block_on(log.prepare_read(Offset(0), 64 << 10));
    assert!(
        loaded.is_none_or(|loaded| loaded.now_or_never().is_some()),
        "released: loads do not wait for flushes"
    );
}
