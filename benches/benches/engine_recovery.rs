//! Recovery time: opening a partition whose ~512 MiB active segment was never closed
//! (preallocated tail), so it is validated batch by batch (length, magic, CRC-32C, offset
//! continuity) with O_DIRECT reads from where recovery can resume. The engine checkpoints the
//! active segment's indexes and producer snapshot every `CHECKPOINT_BYTES` (256 MiB) of flushed
//! log, so the scan is bounded by that, whatever the segment size:
//! - `unclean_..._no_index`: index files and snapshot deleted before each open: the whole
//!   segment is scanned (what every unclean open cost before checkpoints);
//! - `unclean_..._255MiB_since_checkpoint`: the worst case, 255 MiB flushed after the last
//!   checkpoint (flushes every 1 MiB);
//! - `unclean_..._checkpoint_at_end`: the last flush also checkpointed (best case);
//! - `clean_..._after_close` beside them.
//!
//! Throughput is reported in bytes of log per second of open; time per GiB = 1 / that.

use criterion::{Criterion, Throughput};
use rill_engine::batch::{build_test_batch, validated};
use rill_engine::io::glommio::{GlommioStorage, LocalRuntime};
use rill_engine::io::SystemClock;
use rill_engine::{LogConfig, LogManager, TimestampMs};
use rill_engine::{PartitionIndex, TopicPartitionRef};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

const LOG_BYTES: usize = 512 << 20;
/// The worst-case log: 255 MiB past its last checkpoint at 256 MiB.
const WORST_LOG_BYTES: usize = LOG_BYTES - (1 << 20);
const BATCH_BYTES: usize = 16 << 10;

fn config() -> LogConfig {
    LogConfig {
        retention_ms: None,
        ..LogConfig::default()
    }
}

/// Writes `log_bytes` of batches, flushing every 1 MiB, and drops the log without closing it
/// (an unclean shutdown).
fn write_unclosed(rt: &LocalRuntime, dir: PathBuf, log_bytes: usize) {
    rt.block_on(async move {
        let manager = LogManager::new(GlommioStorage::new(), dir);
        let mut log = manager
            .open_partition(
                TopicPartitionRef::new("rec", PartitionIndex(0)),
                config(),
                Rc::new(SystemClock),
            )
            .await
            .unwrap();
        let batch = build_test_batch(16, BATCH_BYTES - 61, TimestampMs(1), None);
        for i in 0..log_bytes / BATCH_BYTES {
            log.append(validated(&batch), TimestampMs(1)).await.unwrap();
            if i % 64 == 63 {
                log.flush().await.unwrap();
            }
        }
        log.flush().await.unwrap();
    });
}

/// How a bench reopens the partition.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Reopen {
    /// Drop it unclosed, so every open recovers again.
    Unclean,
    /// Delete its index files and producer snapshot first (untimed): a full scan.
    UncleanNoIndex,
    /// Close it after each open.
    Clean,
}

/// Deletes what recovery could resume from: the index files and the producer snapshot.
fn delete_checkpoint(dir: &Path) {
    let partition = dir.join("rec-0");
    for name in [
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
        "producer.snapshot",
    ] {
        let _ = std::fs::remove_file(partition.join(name));
    }
}

/// Opens the partition `iters` times; returns the time spent opening.
fn reopen(rt: &LocalRuntime, dir: &Path, log_bytes: usize, iters: u64, how: Reopen) -> Duration {
    let dir = dir.to_path_buf();
    rt.block_on(async move {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            if how == Reopen::UncleanNoIndex {
                delete_checkpoint(&dir);
            }
            let manager = LogManager::new(GlommioStorage::new(), dir.clone());
            let start = Instant::now();
            let log = manager
                .open_partition(
                    TopicPartitionRef::new("rec", PartitionIndex(0)),
                    config(),
                    Rc::new(SystemClock),
                )
                .await
                .unwrap();
            total += start.elapsed();
            assert_eq!(
                log.log_end_offset().0 as usize,
                log_bytes / BATCH_BYTES * 16
            );
            if how == Reopen::Clean {
                log.close().await.unwrap();
            }
        }
        total
    })
}

fn main() {
    let rt = LocalRuntime::new(2 << 20).expect("glommio executor");
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("engine-bench-recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (dir, worst_dir) = (root.join("at-end"), root.join("worst"));
    write_unclosed(&rt, dir.clone(), LOG_BYTES);
    write_unclosed(&rt, worst_dir.clone(), WORST_LOG_BYTES);
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("engine_recovery");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Bytes(LOG_BYTES as u64));
    group.bench_function("unclean_512MiB_checkpoint_at_end", |b| {
        b.iter_custom(|iters| reopen(&rt, &dir, LOG_BYTES, iters, Reopen::Unclean))
    });
    group.bench_function("unclean_512MiB_no_index", |b| {
        b.iter_custom(|iters| reopen(&rt, &dir, LOG_BYTES, iters, Reopen::UncleanNoIndex))
    });
    reopen(&rt, &dir, LOG_BYTES, 1, Reopen::Clean);
    group.bench_function("clean_512MiB_after_close", |b| {
        b.iter_custom(|iters| reopen(&rt, &dir, LOG_BYTES, iters, Reopen::Clean))
    });
    group.throughput(Throughput::Bytes(WORST_LOG_BYTES as u64));
    group.bench_function("unclean_511MiB_255MiB_since_checkpoint", |b| {
        b.iter_custom(|iters| reopen(&rt, &worst_dir, WORST_LOG_BYTES, iters, Reopen::Unclean))
    });
    group.finish();
    c.final_summary();
    let _ = std::fs::remove_dir_all(&root);
}
