//! Append throughput of the partition log on the real disk (glommio, io_uring, O_DIRECT).
//!
//! Criterion part: MB/s for 1 KiB and 64 KiB batches with one flush (write + fdatasync) per
//! ~1 MiB of batches (group commit). After criterion, a report prints sustained MB/s over
//! 512 MiB, each case between two runs of `dd if=/dev/zero bs=1M count=512 oflag=direct
//! conv=fdatasync` into the same directory and as a share of them, and append+fdatasync latency
//! p50/p99 of single 1 KiB batches. The last sustained cases run without preallocation (a
//! budget of 0: every write extends the file), to show what preallocating ahead is worth.
//!
//! Criterion group `engine_append_fdatasync_each` isolates what preallocation is for: every
//! append is made durable at once (write + fdatasync, a producer waiting on acks=all for each
//! batch), so every write lands in blocks never written before. With a budget of 0 each of
//! them extends the file (the write allocates blocks and moves the size: ext4 refuses
//! such a write without blocking, so io_uring hands it to a worker thread, and the fdatasync
//! commits the allocation); with a 64 KiB budget the policy's smallest step is allocated ahead;
//! with the default budget the policy's own step (up to 16 MiB at these rates).

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput};
use rill_engine::batch::{build_test_batch, validated, ValidatedBatch};
use rill_engine::bytes::BytesMut;
use rill_engine::io::glommio::{GlommioStorage, LocalRuntime};
use rill_engine::io::SystemClock;
use rill_engine::prealloc::SHARD_PREALLOC_BYTES_DEFAULT;
use rill_engine::{LogConfig, LogManager, PartitionLog, TimestampMs};
use rill_engine::{PartitionIndex, TopicPartitionRef};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

type Log = PartitionLog<GlommioStorage>;

/// Group-commit size: batches per flush add up to about this many bytes.
const FLUSH_EVERY_BYTES: usize = 1 << 20;

/// A fresh directory for one log: under `ENGINE_BENCH_DIR` if set (to measure another file
/// system, e.g. one on a loop device), else under cargo's target tmp directory.
fn bench_dir(name: &str) -> PathBuf {
    let root = std::env::var_os("ENGINE_BENCH_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from);
    let dir = root.join(format!("engine-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn open_log(rt: &LocalRuntime, dir: PathBuf, prealloc_budget: u64) -> Log {
    let config = LogConfig {
        retention_bytes: Some(512 << 20),
        retention_ms: None,
        ..LogConfig::default()
    };
    rt.block_on(async move {
        let manager =
            LogManager::new(GlommioStorage::new(), dir).with_prealloc_budget(prealloc_budget);
        manager
            .open_partition(
                TopicPartitionRef::new("bench", PartitionIndex(0)),
                config,
                Rc::new(SystemClock),
            )
            .await
            .unwrap()
    })
}

/// Appends `rounds` x (batches per `flush_every_bytes`) batches, flushing once per round.
/// Timed: each batch's check (`ValidatedBatch::new`: shape and CRC, which the Produce handler
/// runs just before the engine), its append, and the flush. Each round's batch copies are made
/// first, as the server has them in its receive buffer already. Checking inside the timed loop
/// keeps a batch in cache when the appender copies it, as in the server (checked up front, the
/// copy paid a cache miss per batch: 1 KiB appends then looked ~25% dearer than they are), and
/// times the same work as `d8fd86d`, whose `append` checked each batch itself.
async fn append_rounds(
    mut log: Log,
    batch: Rc<Vec<u8>>,
    rounds: u64,
    flush_every_bytes: usize,
) -> (Log, Duration) {
    let per_flush = (flush_every_bytes / batch.len()).max(1);
    let mut elapsed = Duration::ZERO;
    for _ in 0..rounds {
        let batches: Vec<BytesMut> = (0..per_flush).map(|_| BytesMut::from(&batch[..])).collect();
        let start = Instant::now();
        for b in batches {
            let checked = ValidatedBatch::new(b, usize::MAX).expect("a valid batch");
            log.append(checked, TimestampMs(1)).await.unwrap();
        }
        log.flush().await.unwrap();
        elapsed += start.elapsed();
    }
    log.apply_retention(TimestampMs(1)).await.unwrap();
    (log, elapsed)
}

/// [`append_rounds`] on the log kept in `slot` (taken out for the run and put back).
fn timed_rounds(
    rt: &LocalRuntime,
    slot: &mut Option<Log>,
    batch: Rc<Vec<u8>>,
    rounds: u64,
    flush_every_bytes: usize,
) -> Duration {
    let log = slot.take().expect("log");
    let (log, elapsed) = rt.block_on(append_rounds(log, batch, rounds, flush_every_bytes));
    *slot = Some(log);
    elapsed
}

fn test_batch(batch_bytes: usize) -> Rc<Vec<u8>> {
    Rc::new(build_test_batch(1, batch_bytes - 61, TimestampMs(1), None))
}

/// A group of disk-bound cases: 10 samples (each takes milliseconds to seconds), 1 s warm-up.
fn disk_group<'a>(
    c: &'a mut Criterion,
    name: &str,
    measurement_secs: u64,
) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(measurement_secs))
        .warm_up_time(Duration::from_secs(1));
    group
}

fn bench_append(c: &mut Criterion, rt: &LocalRuntime, slot: &mut Option<Log>) {
    let mut group = disk_group(c, "engine_append", 4);
    for batch_bytes in [1024usize, 64 * 1024] {
        let per_flush = (FLUSH_EVERY_BYTES / batch_bytes).max(1);
        group.throughput(Throughput::Bytes((per_flush * batch_bytes) as u64));
        let batch = test_batch(batch_bytes);
        group.bench_function(
            format!("{}KiB_batches_fdatasync_per_MiB", batch_bytes / 1024),
            |b| {
                b.iter_custom(|rounds| {
                    timed_rounds(rt, slot, batch.clone(), rounds, FLUSH_EVERY_BYTES)
                })
            },
        );
    }
    group.finish();
}

/// Preallocation budgets the `engine_append_fdatasync_each` cases compare (see the module doc).
const PREALLOC_CASES: [(&str, u64); 3] = [
    ("extending_no_prealloc", 0),
    ("prealloc_step_64KiB", 64 << 10),
    ("prealloc_policy", SHARD_PREALLOC_BYTES_DEFAULT),
];

/// Appends of one batch each followed by a flush, on a fresh log per preallocation budget.
fn bench_fdatasync_each(c: &mut Criterion, rt: &LocalRuntime) {
    let mut group = disk_group(c, "engine_append_fdatasync_each", 3);
    for batch_bytes in [4096usize, 64 * 1024] {
        group.throughput(Throughput::Bytes(batch_bytes as u64));
        let batch = test_batch(batch_bytes);
        for (label, budget) in PREALLOC_CASES {
            let dir = bench_dir(&format!("fdatasync-each-{label}"));
            let mut slot = Some(open_log(rt, dir.clone(), budget));
            group.bench_function(format!("{}KiB_{label}", batch_bytes / 1024), |b| {
                b.iter_custom(|rounds| {
                    timed_rounds(rt, &mut slot, batch.clone(), rounds, batch_bytes)
                })
            });
            let log = slot.take().expect("log");
            rt.block_on(async move { log.close().await.unwrap() });
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    group.finish();
}

/// Sustained MB/s over `total_bytes` of `batch_bytes` batches, one fdatasync per `flush_every_bytes`.
fn sustained(
    rt: &LocalRuntime,
    slot: &mut Option<Log>,
    batch_bytes: usize,
    total_bytes: usize,
    flush_every_bytes: usize,
) -> f64 {
    let rounds = (total_bytes / flush_every_bytes) as u64;
    let elapsed = timed_rounds(rt, slot, test_batch(batch_bytes), rounds, flush_every_bytes);
    let per_flush = (flush_every_bytes / batch_bytes).max(1);
    let bytes = rounds as f64 * (per_flush * batch_bytes) as f64;
    let mb_s = bytes / elapsed.as_secs_f64() / 1e6;
    print!(
        "sustained append, {:>2} KiB batches, fdatasync per {:>3} MiB: {mb_s:.0} MB/s ({} MiB in {:.2} s)",
        batch_bytes / 1024,
        flush_every_bytes >> 20,
        total_bytes >> 20,
        elapsed.as_secs_f64()
    );
    mb_s
}

/// [`sustained`] between two `dd` runs of the same size (this VM's disk drifts by tens of
/// percent within a minute): prints the engine's rate as a share of the mean of the two.
fn sustained_beside_dd(
    rt: &LocalRuntime,
    slot: &mut Option<Log>,
    dir: &std::path::Path,
    batch_bytes: usize,
    flush_every_bytes: usize,
) {
    let total_bytes = 512 << 20;
    let before = dd_mb_s(dir, total_bytes);
    let engine = sustained(rt, slot, batch_bytes, total_bytes, flush_every_bytes);
    let after = dd_mb_s(dir, total_bytes);
    match before.zip(after) {
        Some((b, a)) => println!(
            "; dd {b:.0} / {a:.0} MB/s around it: {:.0}% of dd",
            engine * 200.0 / (a + b)
        ),
        None => println!("; dd unavailable"),
    }
}

/// `dd oflag=direct` of `total_bytes` in 1 MiB writes plus one fdatasync, into `dir`: the
/// machine's sequential O_DIRECT write rate, measured in the same run as the engine figures.
fn dd_mb_s(dir: &std::path::Path, total_bytes: usize) -> Option<f64> {
    let target = dir.join("dd.tmp");
    let output = std::process::Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", target.display()))
        .args(["bs=1M", "oflag=direct", "conv=fdatasync"])
        .arg(format!("count={}", total_bytes >> 20))
        .output()
        .ok()?;
    let _ = std::fs::remove_file(&target);
    // "536870912 bytes (537 MB, 512 MiB) copied, 0.61 s, 880 MB/s": bytes / seconds.
    let text = String::from_utf8_lossy(&output.stderr);
    let line = text.lines().find(|l| l.contains(" copied, "))?;
    let bytes: f64 = line.split_whitespace().next()?.parse().ok()?;
    let seconds: f64 = line
        .split(" copied, ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let mb_s = bytes / seconds / 1e6;

    Some(mb_s)
}

/// Latency of append(1 KiB) + flush (write + fdatasync), one batch at a time.
fn latency(rt: &LocalRuntime, slot: &mut Option<Log>, samples: usize) {
    let mut log = slot.take().expect("log");
    let batch = test_batch(1024);
    let (log, mut micros) = rt.block_on(async move {
        let mut micros = Vec::with_capacity(samples);
        for _ in 0..samples {
            let checked = validated(&batch); // the Produce handler's part, not timed
            let start = Instant::now();
            log.append(checked, TimestampMs(1)).await.unwrap();
            log.flush().await.unwrap();
            micros.push(start.elapsed().as_micros() as u64);
        }
        (log, micros)
    });
    *slot = Some(log);
    micros.sort_unstable();
    let pct = |p: f64| micros[((micros.len() as f64 * p) as usize).min(micros.len() - 1)];
    println!(
        "append 1 KiB + fdatasync, {samples} samples: p50 {} us, p99 {} us, max {} us",
        pct(0.50),
        pct(0.99),
        micros[micros.len() - 1]
    );
}

fn main() {
    let rt = LocalRuntime::new(2 << 20).expect("glommio executor");
    let dir = bench_dir("append");
    let mut slot = Some(open_log(&rt, dir.clone(), SHARD_PREALLOC_BYTES_DEFAULT));
    let mut criterion = Criterion::default().configure_from_args();
    bench_append(&mut criterion, &rt, &mut slot);
    bench_fdatasync_each(&mut criterion, &rt);
    let quick = std::env::args().any(|a| a == "--test" || a == "--list");
    if !quick {
        for flush_every_bytes in [1 << 20, 8 << 20, 512 << 20] {
            sustained_beside_dd(&rt, &mut slot, &dir, 64 * 1024, flush_every_bytes);
        }
        sustained_beside_dd(&rt, &mut slot, &dir, 1024, 1 << 20);
        sustained_beside_dd(&rt, &mut slot, &dir, 1024, 512 << 20);
        latency(&rt, &mut slot, 2000);
        let log = slot.take().expect("log");
        rt.block_on(async move { log.close().await.unwrap() });
        let bare = bench_dir("append-no-prealloc");
        slot = Some(open_log(&rt, bare.clone(), 0));
        println!("without preallocation (budget 0):");
        sustained_beside_dd(&rt, &mut slot, &bare, 64 * 1024, 1 << 20);
        sustained_beside_dd(&rt, &mut slot, &bare, 64 * 1024, 512 << 20);
        latency(&rt, &mut slot, 2000);
        let log = slot.take().expect("log");
        rt.block_on(async move { log.close().await.unwrap() });
        let _ = std::fs::remove_dir_all(&bare);
    } else {
        let log = slot.take().expect("log");
        rt.block_on(async move { log.close().await.unwrap() });
    }
    criterion.final_summary();
    let _ = std::fs::remove_dir_all(&dir);
}
