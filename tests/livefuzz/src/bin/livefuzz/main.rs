//! `livefuzz`: a stateful fuzzer for a live rill broker (issue 26). See the crate doc of
//! `rill_livefuzz` for the generator, SECURITY.md for how it is run and what it found.
//!
//! ```text
//! livefuzz --rill-bin target/release/rill [--cluster 3] [--seed S] [--requests N] [--seconds T]
//!          [--connections C] [--batch B] [--rss-max-mib M] [--work-dir DIR] [--replay DIR]
//! livefuzz --bootstrap 127.0.0.1:9092 [--pid PID] ...      (a broker someone else started)
//! ```
//!
//! A run: start the broker(s), create the friendly topic, start the friendly producer and
//! consumer, start C fuzz connections (lane i draws from `Seeded::new(seed, i)`: the same seed
//! and connection count regenerate every lane's requests), and after every B cases (or 2 s) run
//! the checks ([`monitor::check`]). The first failed check stops the run, writes the lanes'
//! recent frames for `--replay`, and exits 1. At the end the broker must stop cleanly on
//! SIGTERM.

mod client;
mod friendly;
mod hostile;
mod launch;
mod monitor;
mod replay;
mod stats;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::Parser;

use friendly::{Friendly, Progress};
use hostile::{Kept, Lane};
use launch::{LaunchSpec, Node};
use monitor::{Bounds, Seen};
use stats::{Outcome, Stats};

#[derive(Parser, Debug)]
#[command(name = "livefuzz", about = "A stateful fuzzer for a live rill broker")]
struct Args {
    /// The rill binary to start (ignored with --bootstrap).
    #[arg(long, env = "RILL_BIN", default_value = "target/debug/rill")]
    rill_bin: PathBuf,
    /// Fuzz brokers someone else started instead (comma-separated HOST:PORT).
    #[arg(long, value_delimiter = ',')]
    bootstrap: Vec<SocketAddr>,
    /// Their pids, in the same order (for RSS and liveness).
    #[arg(long, value_delimiter = ',')]
    pid: Vec<u32>,
    /// Start a cluster of this many combined broker+controller nodes (0: one single node).
    #[arg(long, default_value_t = 0)]
    cluster: usize,
    /// Shards of the single node.
    #[arg(long, default_value_t = 2)]
    shards: usize,
    /// The seed (decimal or 0x-hex); a random one, printed, when absent.
    #[arg(long)]
    seed: Option<String>,
    /// Stop after this many cases (0: no limit).
    #[arg(long, default_value_t = 0)]
    requests: u64,
    /// Stop after this many seconds (0: no limit).
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Fuzz connections (lanes) side by side.
    #[arg(long, default_value_t = 24)]
    connections: usize,
    /// Cases between two checks (a check also runs every 2 s).
    #[arg(long, default_value_t = 20_000)]
    batch: u64,
    /// The broker's RSS bound, MiB.
    #[arg(long, default_value_t = 1024)]
    rss_max_mib: u64,
    /// How long a friendly client may go without progress, seconds.
    #[arg(long, default_value_t = 30)]
    stall_seconds: u64,
    /// How long a fuzz connection waits for an answer before giving up on it, ms.
    #[arg(long, default_value_t = 5000)]
    answer_timeout_ms: u64,
    /// Where data dirs, logs and replay files go [default: target/livefuzz/<seed>].
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Extra broker property KEY=VALUE (repeatable).
    #[arg(long)]
    property: Vec<String>,
    /// Send a failed run's frames again (the directory it wrote) instead of generating.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// Keep the work directory after a passing run.
    #[arg(long)]
    keep: bool,
}

fn main() {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("livefuzz: FAILED: {e}");
            std::process::exit(1);
        }
    }
}

fn parse_seed(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|e| format!("--seed {text}: {e}"))
}

/// A seed nobody chose: 8 bytes of /dev/urandom.
fn random_seed() -> Result<u64, String> {
    let mut buf = [0u8; 8];
    let mut f = std::fs::File::open("/dev/urandom").map_err(|e| format!("/dev/urandom: {e}"))?;
    std::io::Read::read_exact(&mut f, &mut buf).map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(u64::from_le_bytes(buf))
}

fn run(args: &Args) -> Result<(), String> {
    let seed = match &args.seed {
        Some(text) => parse_seed(text)?,
        None => random_seed()?,
    };
    let work_dir = args
        .work_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("target/livefuzz/{seed:#018x}")));
    let _ = std::fs::remove_dir_all(&work_dir);
    std::fs::create_dir_all(&work_dir).map_err(|e| format!("{}: {e}", work_dir.display()))?;
    println!(
        "livefuzz: seed {seed:#018x} ({} connections, {}; replay with --seed {seed:#018x} --connections {})",
        args.connections,
        if args.cluster > 0 { format!("{}-node cluster", args.cluster) } else { "single node".to_owned() },
        args.connections
    );
    let mut nodes = start_nodes(args, &work_dir)?;
    let outcome = match &args.replay {
        Some(dir) => replay_run(args, &mut nodes, dir),
        None => fuzz_run(args, seed, &mut nodes, &work_dir),
    };
    let stopped = stop_nodes(&mut nodes);
    outcome.and(stopped)?;
    if !args.keep {
        let _ = std::fs::remove_dir_all(&work_dir);
    }
    Ok(())
}

fn start_nodes(args: &Args, work_dir: &std::path::Path) -> Result<Vec<Node>, String> {
    if !args.bootstrap.is_empty() {
        return Ok(launch::attach(&args.bootstrap, &args.pid));
    }
    let spec = LaunchSpec {
        rill_bin: &args.rill_bin,
        work_dir,
        shards: args.shards,
        properties: &args.property,
    };
    let t = Instant::now();
    let nodes = if args.cluster > 0 {
        launch::cluster(&spec, args.cluster)?
    } else {
        launch::single(&spec)?
    };
    println!(
        "livefuzz: {} broker(s) up in {:.1} s: {}",
        nodes.len(),
        t.elapsed().as_secs_f64(),
        nodes
            .iter()
            .map(|n| n.addr.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(nodes)
}

/// SIGTERM each node this tool started: each must exit 0 and have logged no defect.
fn stop_nodes(nodes: &mut [Node]) -> Result<(), String> {
    let mut failed = Vec::new();
    for node in nodes.iter_mut() {
        if node.child.is_none() {
            continue;
        }
        let defects = node.new_defects();
        match node.stop() {
            Some(0) if defects.is_empty() => {}
            Some(0) => failed.push(format!(
                "broker {} logged a defect: {}",
                node.addr, defects[0]
            )),
            code => failed.push(format!(
                "broker {} stopped with {code:?} on SIGTERM; log:\n{}",
                node.addr,
                node.log_tail(20)
            )),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

struct Running {
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    lanes: Vec<JoinHandle<Kept>>,
    friendly: Vec<JoinHandle<()>>,
}

fn start_clients(args: &Args, seed: u64, nodes: &[Node]) -> Result<Running, String> {
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    let stats = Arc::new(Stats::new());
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(Progress {
        started: Instant::now(),
        produced_ms: AtomicU64::new(0),
        consumed_ms: AtomicU64::new(0),
    });
    let friendly = Friendly {
        addrs: addrs.clone(),
        stats: stats.clone(),
        progress: progress.clone(),
        stop: stop.clone(),
        replication_factor: if args.cluster > 0 {
            args.cluster.min(3) as i16
        } else {
            -1
        },
    };
    friendly.create_topic()?;
    progress.produced_ms.store(progress.now_ms(), Relaxed);
    progress.consumed_ms.store(progress.now_ms(), Relaxed);
    let f1 = friendly.clone();
    let f2 = friendly;
    let friendly = vec![
        std::thread::spawn(move || friendly::produce(f1)),
        std::thread::spawn(move || friendly::consume(f2)),
    ];
    let budget = Arc::new(AtomicU64::new(if args.requests == 0 {
        u64::MAX
    } else {
        args.requests
    }));
    let lanes = (0..args.connections as u64)
        .map(|index| {
            let lane = Lane {
                index,
                seed,
                addrs: addrs.clone(),
                stats: stats.clone(),
                budget: budget.clone(),
                stop: stop.clone(),
                answer_timeout: Duration::from_millis(args.answer_timeout_ms),
            };
            std::thread::spawn(move || hostile::run(lane))
        })
        .collect();
    Ok(Running {
        stats,
        stop,
        progress,
        lanes,
        friendly,
    })
}

fn fuzz_run(
    args: &Args,
    seed: u64,
    nodes: &mut [Node],
    work_dir: &std::path::Path,
) -> Result<(), String> {
    let run = start_clients(args, seed, nodes)?;
    let bounds = Bounds {
        rss_max_kib: args.rss_max_mib << 10,
        stall: Duration::from_secs(args.stall_seconds),
        probe_timeout: Duration::from_secs(10),
    };
    let mut seen = Seen::default();
    let started = Instant::now();
    let mut next_check = args.batch;
    let mut last_check = Instant::now();
    let mut last_line = Instant::now();
    let failure = loop {
        std::thread::sleep(Duration::from_millis(50));
        let sent = run.stats.sent();
        let finished = !run.lanes.is_empty() && run.lanes.iter().all(JoinHandle::is_finished);
        let out_of_time =
            args.seconds > 0 && started.elapsed() >= Duration::from_secs(args.seconds);
        if sent >= next_check
            || last_check.elapsed() >= Duration::from_secs(2)
            || finished
            || out_of_time
        {
            next_check = sent + args.batch;
            last_check = Instant::now();
            if let Err(e) = monitor::check(nodes, &run.stats, &run.progress, &bounds, &mut seen) {
                break Some(e);
            }
        }
        if last_line.elapsed() >= Duration::from_secs(10) {
            last_line = Instant::now();
            println!("livefuzz: {sent} cases in {:.0} s ({:.0}/s), broker RSS max {} MiB, friendly {} acked / {} consumed",
                started.elapsed().as_secs_f64(), sent as f64 / started.elapsed().as_secs_f64(), seen.rss_max_kib >> 10,
                run.stats.friendly_acked.load(Relaxed), run.stats.friendly_consumed.load(Relaxed));
        }
        if finished || out_of_time {
            break None;
        }
    };
    run.stop.store(true, Relaxed);
    let kept: Vec<Kept> = run
        .lanes
        .into_iter()
        .map(|h| h.join().unwrap_or_default())
        .collect();
    for h in run.friendly {
        let _ = h.join();
    }
    let elapsed = started.elapsed();
    report(args, seed, nodes, &run.stats, &seen, elapsed);
    if let Some(reason) = failure {
        let dir = work_dir.join("failure");
        let _ = replay::write(&dir, &kept, &reason);
        for node in nodes.iter() {
            println!("--- log tail of {}:\n{}", node.addr, node.log_tail(30));
        }
        return Err(format!(
            "{reason}\n  seed {seed:#018x}; the lanes' last frames: {} (livefuzz --replay {} ...); work dir kept: {}",
            dir.display(), dir.display(), work_dir.display()
        ));
    }
    Ok(())
}

fn report(args: &Args, seed: u64, nodes: &[Node], stats: &Stats, seen: &Seen, elapsed: Duration) {
    let sent = stats.sent();
    let secs = elapsed.as_secs_f64();
    let peak = nodes
        .iter()
        .filter_map(Node::rss_peak_kib)
        .max()
        .unwrap_or(seen.rss_max_kib);
    println!("livefuzz: seed {seed:#018x}: {sent} cases in {secs:.1} s ({:.0}/s) over {} connections ({} connects), {} sync requests",
        sent as f64 / secs.max(0.001), args.connections, stats.connects.load(Relaxed), stats.syncs.load(Relaxed));
    println!(
        "  answered {}, silent {}, closed by the broker {}, abandoned {}",
        stats.total(Outcome::Answered),
        stats.total(Outcome::Silent),
        stats.total(Outcome::Closed),
        stats.total(Outcome::Abandoned)
    );
    println!("  friendly: {} records acknowledged, {} consumed in order, {} offset commits read back, {} retries",
        stats.friendly_acked.load(Relaxed), stats.friendly_consumed.load(Relaxed),
        stats.friendly_commits.load(Relaxed), stats.friendly_retries.load(Relaxed));
    println!(
        "  checks passed: {}; broker RSS: max sampled {} MiB, peak (VmHWM) {} MiB, bound {} MiB",
        seen.checks,
        seen.rss_max_kib >> 10,
        peak >> 10,
        args.rss_max_mib
    );
    print!("{}", stats.tables());
    for note in stats.notes.lock().expect("stats lock").iter().take(20) {
        println!("  note: {note}");
    }
    for finding in stats.findings.lock().expect("stats lock").iter().take(20) {
        println!("  FINDING: {finding}");
    }
}

fn replay_run(args: &Args, nodes: &mut [Node], dir: &std::path::Path) -> Result<(), String> {
    let lanes = replay::read(dir)?;
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    println!(
        "livefuzz: replaying {} lanes from {}",
        lanes.len(),
        dir.display()
    );
    let handles: Vec<_> = lanes
        .into_iter()
        .enumerate()
        .map(|(i, kept)| {
            let addr = addrs[i % addrs.len()];
            let wait = Duration::from_millis(args.answer_timeout_ms.min(1000));
            std::thread::spawn(move || replay::send_lane(addr, &kept, wait))
        })
        .collect();
    let (mut answered, mut closed) = (0, 0);
    for h in handles {
        let (a, c) = h.join().unwrap_or_default();
        answered += a;
        closed += c;
    }
    println!("livefuzz: replay: {answered} answered, {closed} closes");
    std::thread::sleep(Duration::from_millis(500));
    for node in nodes.iter_mut() {
        node.alive()?;
        if let Some(line) = node.new_defects().first() {
            return Err(format!("broker {} logged a defect: {line}", node.addr));
        }
    }
    Ok(())
}
