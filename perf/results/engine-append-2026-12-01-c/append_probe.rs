//! Throwaway A/B probe (not committed): B-byte batches, fdatasync per F bytes, T MiB per rep, R reps;
//! wall and thread CPU per batch; then filefrag of the active segment.
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

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let batch_bytes: usize = a[1].parse().unwrap();
    let flush_bytes: usize = a[2].parse().unwrap();
    let total_mib: usize = a[3].parse().unwrap();
    let reps: usize = a[4].parse().unwrap();
    #[allow(unused)]
    let budget: u64 = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(256 << 20);
    let dir = std::path::PathBuf::from(std::env::var("PROBE_DIR").unwrap_or("/work/wt/structure/target/tmp/probe".into()))
        .join(format!("p{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rt = LocalRuntime::new(2 << 20).unwrap();
    let d2 = dir.clone();
    rt.block_on(async move {
        let config = LogConfig { retention_bytes: Some(512 << 20), retention_ms: None, ..LogConfig::default() };
        let manager = LogManager::new(GlommioStorage::new(), d2.clone()) /*BUDGET*/;
        let mut log = manager.open_partition("bench", 0, config, Rc::new(SystemClock)).await.unwrap();
        let batch = build_test_batch(1, batch_bytes - 61, TimestampMs(1), None);
        let per_flush = (flush_bytes / batch_bytes).max(1);
        let rounds = (total_mib << 20) / (per_flush * batch_bytes);
        let mut all = Vec::new();
        {
            log.append(/*V*/(rill_engine::bytes::BytesMut::from(&batch[..])), TimestampMs(1)).await.unwrap();
            log.flush().await.unwrap();
            let seg = d2.join("bench-0").join("00000000000000000000.log");
            println!("file after the first append: {} bytes", std::fs::metadata(&seg).unwrap().len());
        }
        for rep in 0..reps {
            let mut elapsed = Duration::ZERO;
            let mut cpu = 0u64;
            for _ in 0..rounds {
                let batches: Vec<_> = (0..per_flush).map(|_| rill_engine::bytes::BytesMut::from(&batch[..])).collect();
                let c0 = thread_cpu_ns();
                let start = Instant::now();
                for b in batches { log.append(/*V*/(b), TimestampMs(1)).await.unwrap(); }
                log.flush().await.unwrap();
                let e = start.elapsed();
                all.push(e.as_micros() as u64);
                elapsed += e;
                cpu += thread_cpu_ns() - c0;
            }
            let n = (rounds * per_flush) as f64;
            let mut r: Vec<u64> = all[all.len() - rounds..].to_vec();
            r.sort_unstable();
            let seg = d2.join("bench-0").join("00000000000000000000.log");
            let out = std::process::Command::new("filefrag").arg(&seg).output().unwrap();
            let frag = String::from_utf8_lossy(&out.stdout);
            let frag = frag.rsplit(": ").next().unwrap_or("").trim().to_string();
            println!("rep {rep}: {:.0} MB/s, cpu {:.0} ns/batch, wall {:.0} ns/batch, p50 {} us, {frag}",
                n * batch_bytes as f64 / elapsed.as_secs_f64() / 1e6, cpu as f64 / n, elapsed.as_nanos() as f64 / n, r[r.len() / 2]);
        }
        all.sort_unstable();
        println!("per flush: p50 {} us, p90 {} us", all[all.len() / 2], all[all.len() * 9 / 10]);
        if std::env::var_os("FRAG").is_some() {
            let seg = d2.join("bench-0").join("00000000000000000000.log");
            let out = std::process::Command::new("filefrag").arg("-v").arg(&seg).output().unwrap();
            print!("{}", String::from_utf8_lossy(&out.stdout));
        }
        log.close().await.unwrap();
    });
    let _ = std::fs::remove_dir_all(&dir);
}
