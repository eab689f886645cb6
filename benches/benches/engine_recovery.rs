//! Recovery time: opening a partition whose 256 MiB active segment was never closed (no index
//! file, no producer snapshot, preallocated tail), so the whole segment is validated batch by
//! batch (length, magic, CRC-32C, offset continuity) with O_DIRECT reads. Throughput is reported
//! in bytes of log recovered per second; time per GiB = 1 / that. A clean reopen (after close)
//! is benched beside it.

use criterion::{Criterion, Throughput};
use rill_engine::batch::build_test_batch;
use rill_engine::bytes::BytesMut;
use rill_engine::io::glommio::{GlommioStorage, LocalRuntime};
use rill_engine::io::SystemClock;
use rill_engine::{LogConfig, LogManager, TimestampMs};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

const LOG_BYTES: usize = 256 << 20;
const BATCH_BYTES: usize = 16 << 10;

fn config() -> LogConfig {
    LogConfig {
        retention_ms: None,
        ..LogConfig::default()
    }
}

/// Writes LOG_BYTES of batches and drops the log without closing it (an unclean shutdown).
fn write_unclosed(rt: &LocalRuntime, dir: PathBuf) {
    rt.block_on(async move {
        let manager = LogManager::new(GlommioStorage::new(), dir);
        let mut log = manager
            .open_partition("rec", 0, config(), Rc::new(SystemClock))
            .await
            .unwrap();
        let batch = build_test_batch(16, BATCH_BYTES - 61, TimestampMs(1), None);
        for i in 0..LOG_BYTES / BATCH_BYTES {
            log.append(BytesMut::from(&batch[..]), TimestampMs(1))
                .await
                .unwrap();
            if i % 64 == 63 {
                log.flush().await.unwrap();
            }
        }
        log.flush().await.unwrap();
    });
}

/// Opens the partition `iters` times, dropping it unclosed so every open recovers again.
fn reopen(rt: &LocalRuntime, dir: &Path, iters: u64, close: bool) -> Duration {
    let dir = dir.to_path_buf();
    rt.block_on(async move {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            let manager = LogManager::new(GlommioStorage::new(), dir.clone());
            let start = Instant::now();
            let log = manager
                .open_partition("rec", 0, config(), Rc::new(SystemClock))
                .await
                .unwrap();
            total += start.elapsed();
            assert_eq!(
                log.log_end_offset().0 as usize,
                LOG_BYTES / BATCH_BYTES * 16
            );
            if close {
                log.close().await.unwrap();
            }
        }
        total
    })
}

fn main() {
    let rt = LocalRuntime::new(2 << 20).expect("glommio executor");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("engine-bench-recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write_unclosed(&rt, dir.clone());
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("engine_recovery");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Bytes(LOG_BYTES as u64));
    group.bench_function("unclean_256MiB_active_segment", |b| {
        b.iter_custom(|iters| reopen(&rt, &dir, iters, false))
    });
    reopen(&rt, &dir, 1, true);
    group.bench_function("clean_256MiB_after_close", |b| {
        b.iter_custom(|iters| reopen(&rt, &dir, iters, true))
    });
    group.finish();
    c.final_summary();
    let _ = std::fs::remove_dir_all(&dir);
}
