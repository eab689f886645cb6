//! This machine's limits, measured in the same run as the brokers: sequential O_DIRECT write
//! bandwidth and 4 KiB O_DIRECT+O_DSYNC write latency (`dd`), and loopback TCP bandwidth (a
//! built-in blast: one writer thread, one reader thread, 1 MiB writes).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;

use crate::cli::MachineArgs;

/// 4 KiB synchronous writes timed for the fsync floor.
const SYNC_WRITES: u64 = 2000;

/// The limits a broker's figures are judged against.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MachineLimits {
    /// `dd bs=1M oflag=direct conv=fdatasync`: MB/s (10^6 B/s).
    pub disk_direct_write_mb_s: f64,
    /// `dd bs=4k oflag=direct,dsync`: mean µs per durable 4 KiB write.
    pub disk_sync_write_4k_us: f64,
    /// One TCP stream over 127.0.0.1: MB/s.
    pub loopback_tcp_mb_s: f64,
}

/// Measures all limits; the scratch file lives in `dir`.
pub fn measure(dir: &Path, dd_mib: u64, tcp_seconds: f64) -> anyhow::Result<MachineLimits> {
    let scratch = dir.join(".rill-bench-dd.tmp");
    let direct = dd_write(&scratch, "1M", dd_mib, "direct", true);
    let sync = dd_write(&scratch, "4k", SYNC_WRITES, "direct,dsync", false);
    let _ = std::fs::remove_file(&scratch);
    let (direct_bytes, direct_seconds) = direct?;
    let (_, sync_seconds) = sync?;
    Ok(MachineLimits {
        disk_direct_write_mb_s: direct_bytes as f64 / 1e6 / direct_seconds,
        disk_sync_write_4k_us: sync_seconds * 1e6 / SYNC_WRITES as f64,
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
    println!(
        "4 KiB O_DIRECT+O_DSYNC    : {:>9.1} µs per write",
        limits.disk_sync_write_4k_us
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
    fn loopback_blast_moves_bytes() {
        let mb_s = loopback_tcp_mb_s(Duration::from_millis(100)).unwrap();
        assert!(mb_s > 0.0);
    }
}
