//! Offset lookup as the log grows: should stay flat (binary search over segments, then over the
//! sparse index, then a short forward scan).
//!
//! - `engine_index/offset_index_lookup/N`: the in-memory sparse index alone, N entries.
//! - `engine_index/read_random_offset/N`: `PartitionLog::read` of one batch at a random offset of
//!   a log of N batches (cache off, simulated in-memory disk, so it measures the lookup path and
//!   not the device).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rill_engine::batch::{build_test_batch, validated};
use rill_engine::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
use rill_engine::segment::offset_index::OffsetIndex;
use rill_engine::{
    FilePosition, LogConfig, LogManager, Offset, PartitionLog, RelativeOffset, TimestampMs,
};
use rill_engine::{PartitionIndex, TopicPartitionRef};
use std::hint::black_box;
use std::path::PathBuf;
use std::rc::Rc;

/// Probe positions spread over `[0, n)` by a large odd stride (no RNG needed, no locality).
struct Spread {
    n: u64,
    i: u64,
}

impl Spread {
    fn new(n: u64) -> Self {
        Spread { n, i: 0 }
    }

    fn next(&mut self) -> u64 {
        self.i = self.i.wrapping_add(1);
        self.i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % self.n
    }
}

fn offset_index_lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine_index/offset_index_lookup");
    for entries in [1_000u32, 100_000, 1_000_000] {
        let mut index = OffsetIndex::default();
        for i in 0..entries {
            index.push(RelativeOffset(i * 10), FilePosition(i * 4096));
        }
        let mut probe = Spread::new(u64::from(entries) * 10);
        group.bench_with_input(BenchmarkId::from_parameter(entries), &index, |b, index| {
            b.iter(|| black_box(index.lookup(RelativeOffset(probe.next() as u32))))
        });
    }
    group.finish();
}

fn log_of(batches: usize) -> PartitionLog<SimStorage> {
    let config = LogConfig {
        segment_bytes_max: 8 << 20,
        batch_cache_bytes_max: 0,
        retention_ms: None,
        ..LogConfig::default()
    };
    let manager = LogManager::new(
        SimStorage::new(1, FaultConfig::default()),
        PathBuf::from("/data"),
    );
    let mut log = block_on(manager.open_partition(
        TopicPartitionRef::new("idx", PartitionIndex(0)),
        config,
        Rc::new(ManualClock::new(TimestampMs(0))),
    ))
    .unwrap();
    let batch = build_test_batch(4, 200, TimestampMs(1), None);
    for _ in 0..batches {
        block_on(log.append(validated(&batch), TimestampMs(1))).unwrap();
    }
    block_on(log.flush()).unwrap();
    log
}

fn read_random_offset(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine_index/read_random_offset");
    group.sample_size(20);
    for batches in [10_000usize, 100_000, 400_000] {
        let mut log = log_of(batches);
        let end = log.log_end_offset().0;
        let mut probe = Spread::new(end as u64);
        group.bench_function(BenchmarkId::from_parameter(batches), |b| {
            b.iter(|| black_box(block_on(log.read(Offset(probe.next() as i64), 1)).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, offset_index_lookup, read_random_offset);
criterion_main!(benches);
