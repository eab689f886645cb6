//! This machine's limits, measured in the same run as the brokers: sequential O_DIRECT write
//! bandwidth (`dd`), the latency of a durable 4 KiB append (O_DIRECT + O_DSYNC, each write timed:
//! the floor under any acks=all acknowledgement), and loopback TCP bandwidth (a built-in blast:
//! one writer thread, one reader thread, 1 MiB writes).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;

use crate::cli::MachineArgs;
use crate::report::{self, Percentiles};

/// 4 KiB durable appends timed for the fsync floor.
const SYNC_WRITES: u64 = 2000;
/// The block size (and alignment) of those appends.
const BLOCK_BYTES: usize = 4096;

/// The limits a broker's figures are judged against.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MachineLimits {
    /// `dd bs=1M oflag=direct conv=fdatasync`: MB/s (10^6 B/s).
    pub disk_direct_write_mb_s: f64,
    /// Durable 4 KiB appends (O_DIRECT + O_DSYNC), µs per write.
    pub disk_sync_write_4k: Percentiles,
    /// One TCP stream over 127.0.0.1: MB/s.
    pub loopback_tcp_mb_s: f64,
}

/// Measures all limits; the scratch file lives in `dir`.
pub fn measure(dir: &Path, dd_mib: u64, tcp_seconds: f64) -> anyhow::Result<MachineLimits> {
    let scratch = dir.join(".rill-bench-dd.tmp");
    let direct = dd_write(&scratch, "1M", dd_mib, "direct", true);
    let _ = std::fs::remove_file(&scratch);
    let sync = sync_append_latency(&scratch, SYNC_WRITES);
    let _ = std::fs::remove_file(&scratch);
    let (direct_bytes, direct_seconds) = direct?;
    Ok(MachineLimits {
        disk_direct_write_mb_s: direct_bytes as f64 / 1e6 / direct_seconds,
        disk_sync_write_4k: Percentiles::of(&sync?),
        loopback_tcp_mb_s: loopback_tcp_mb_s(Duration::from_secs_f64(tcp_seconds))?,
    })
}

/// Runs dd from /dev/zero into `path`; returns (bytes, wall seconds).
fn dd_write(
    path: &Path,
    block: &str,
    count: u64,
    oflag: &str,
    fdatasync: bool,
) -> anyhow::Result<(u64, f64)> {
    let mut command = Command::new("dd");
    command
        .arg("if=/dev/zero")
        .arg(format!("of={}", path.display()))
        .arg(format!("bs={block}"))
        .arg(format!("count={count}"))
        .arg(format!("oflag={oflag}"))
        .arg("status=none");
    if fdatasync {
        command.arg("conv=fdatasync");
    }
    let start = Instant::now();
    let status = command.status().context("running dd (coreutils)")?;
    let seconds = start.elapsed().as_secs_f64();
    if !status.success() {
        bail!("dd {block} x {count} oflag={oflag} failed: {status}");
    }
    let bytes = std::fs::metadata(path)?.len();
    Ok((bytes, seconds))
}

/// Times `count` durable 4 KiB writes (O_DIRECT | O_DSYNC) in sequence over a file at `path` that
/// was written and synced first, as a broker's preallocated segment is: the floor under an
/// acks=all acknowledgement, without the cost of growing the file on every write.
pub fn sync_append_latency(
    path: &Path,
    count: u64,
) -> anyhow::Result<hdrhistogram::Histogram<u64>> {
    let mut appender = SyncAppender::new(path, count)?;
    let mut histogram = report::new_histogram();
    for _ in 0..count {
        let took = appender.append()?;
        histogram.saturating_record((took.as_micros() as u64).max(1));
    }
    Ok(histogram)
}

/// Durable 4 KiB writes (O_DIRECT | O_DSYNC) cycling over a file of `blocks` blocks that was
/// written and synced first: each one timed, the device's floor under a durable append.
pub struct SyncAppender {
    file: std::fs::File,
    /// 8 KiB, of which the 4 KiB-aligned window at `start` is written.
    raw: Vec<u8>,
    start: usize,
    blocks: u64,
    next: u64,
}

impl SyncAppender {
    /// Creates (or overwrites) `path` with `blocks` 4 KiB blocks, synced, and opens it O_DSYNC.
    pub fn new(path: &Path, blocks: u64) -> anyhow::Result<SyncAppender> {
        assert!(blocks > 0, "a sync appender needs at least one block");
        // O_DIRECT needs a block-aligned buffer: take the aligned 4 KiB window of an 8 KiB vector.
        let raw = vec![0x5au8; 2 * BLOCK_BYTES];
        let start = raw.as_ptr().align_offset(BLOCK_BYTES);
        let open = |flags: i32| {
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .custom_flags(flags)
                .open(path)
                .with_context(|| format!("opening {} with O_DIRECT", path.display()))
        };
        let fill = open(libc::O_DIRECT)?;
        let block = &raw[start..start + BLOCK_BYTES];
        for index in 0..blocks {
            fill.write_all_at(block, index * BLOCK_BYTES as u64)?;
        }
        fill.sync_all()?;
        drop(fill);
        Ok(SyncAppender {
            file: open(libc::O_DIRECT | libc::O_DSYNC)?,
            raw,
            start,
            blocks,
            next: 0,
        })
    }

    /// Writes the next block durably (wrapping at the file's end); returns how long it took.
    pub fn append(&mut self) -> anyhow::Result<Duration> {
        let block = &self.raw[self.start..self.start + BLOCK_BYTES];
        let began = Instant::now();
        self.file
            .write_all_at(block, self.next * BLOCK_BYTES as u64)
            .context("durable 4 KiB write")?;
        let took = began.elapsed();
        self.next = (self.next + 1) % self.blocks;
        Ok(took)
    }
}

/// Streams 1 MiB writes over one loopback connection for `duration`; MB/s received.
pub fn loopback_tcp_mb_s(duration: Duration) -> anyhow::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut stream, _) = listener.accept()?;
        let mut buffer = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            match stream.read(&mut buffer)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let mut stream = TcpStream::connect(address)?;
    let chunk = vec![0x5au8; 1 << 20];
    let start = Instant::now();
    while start.elapsed() < duration {
        stream.write_all(&chunk)?;
    }
    stream.shutdown(std::net::Shutdown::Write)?;
    let received = reader.join().expect("reader thread panicked")?;
    Ok(received as f64 / 1e6 / start.elapsed().as_secs_f64())
}

/// `rill-bench machine`: prints the limits, JSON last.
pub fn run_cli(args: &MachineArgs) -> anyhow::Result<()> {
    let limits = measure(&args.dir, args.dd_mib, args.tcp_seconds)?;
    println!(
        "sequential O_DIRECT write : {:>9.1} MB/s",
        limits.disk_direct_write_mb_s
    );
    let sync = limits.disk_sync_write_4k;
    println!(
        "4 KiB O_DIRECT+O_DSYNC    : p50 {} µs, p99 {} µs, p99.9 {} µs, max {} µs",
        sync.p50_us, sync.p99_us, sync.p999_us, sync.max_us
    );
    println!(
        "loopback TCP (1 stream)   : {:>9.1} MB/s",
        limits.loopback_tcp_mb_s
    );
    println!("{}", serde_json::to_string(&limits)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_appends_are_timed() {
        let path = std::env::temp_dir().join(format!("rill-bench-sync-{}", std::process::id()));
        let histogram = sync_append_latency(&path, 4);
        let _ = std::fs::remove_file(&path);
        // tmpfs has no O_DIRECT: accept that refusal, but a success must have timed every write.
        if let Ok(histogram) = histogram {
            assert_eq!(histogram.len(), 4);
        }
    }

    #[test]
    fn loopback_blast_moves_bytes() {
        let mb_s = loopback_tcp_mb_s(Duration::from_millis(100)).unwrap();
        assert!(mb_s > 0.0);
    }
}
