//! Throwaway A/B probe (not committed): engine appends of B-byte batches, fdatasync per F bytes,
//! T MiB per rep; prints wall MB/s and this thread's CPU ns per batch (schedstat) per rep.
use rill_engine::batch::build_test_batch;
use rill_engine::io::glommio::{GlommioStorage, LocalRuntime};
use rill_engine::io::SystemClock;
use rill_engine::{LogConfig, LogManager, TimestampMs};
use std::rc::Rc;
use std::time::{Duration, Instant};

fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

fn mk(b: &[u8]) -> rill_engine::bytes::BytesMut { rill_engine::bytes::BytesMut::from(b) }
fn v(b: rill_engine::bytes::BytesMut) -> rill_engine::batch::ValidatedBatch { rill_engine::batch::ValidatedBatch::new(b, usize::MAX).unwrap() }

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let batch_bytes: usize = a[1].parse().unwrap();
    let flush_bytes: usize = a[2].parse().unwrap();
    let total_mib: usize = a[3].parse().unwrap();
    let reps: usize = a[4].parse().unwrap();
    let budget: u64 = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(256 << 20);
    let dir = std::path::PathBuf::from(std::env::var("PROBE_DIR").unwrap_or("/work/wt/structure/target/tmp/probe".into()))
        .join(format!("p{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rt = LocalRuntime::new(2 << 20).unwrap();
    let d2 = dir.clone();
    rt.block_on(async move {
        let config = LogConfig { retention_bytes: Some(512 << 20), retention_ms: None, ..LogConfig::default() };
        let manager = LogManager::new(GlommioStorage::new(), d2).with_prealloc_budget(budget);
        let mut log = manager.open_partition("bench", 0, config, Rc::new(SystemClock)).await.unwrap();
        let batch = build_test_batch(1, batch_bytes - 61, TimestampMs(1), None);
        let per_flush = (flush_bytes / batch_bytes).max(1);
        let rounds = (total_mib << 20) / (per_flush * batch_bytes);
        for rep in 0..reps {
            let mut elapsed = Duration::ZERO;
            let mut cpu = 0u64;
            for _ in 0..rounds {
                let batches: Vec<_> = (0..per_flush).map(|_| mk(&batch)).collect();
                let c0 = thread_cpu_ns();
                let start = Instant::now();
                for b in batches { log.append(v(b), TimestampMs(1)).await.unwrap(); }
                log.flush().await.unwrap();
                elapsed += start.elapsed();
                cpu += thread_cpu_ns() - c0;
            }
            log.apply_retention(TimestampMs(1)).await.unwrap();
            let n = (rounds * per_flush) as f64;
            println!("rep {rep}: {:.0} MB/s, cpu {:.0} ns/batch, wall {:.0} ns/batch",
                n * batch_bytes as f64 / elapsed.as_secs_f64() / 1e6, cpu as f64 / n, elapsed.as_nanos() as f64 / n);
        }
        log.close().await.unwrap();
    });
    let _ = std::fs::remove_dir_all(&dir);
}
