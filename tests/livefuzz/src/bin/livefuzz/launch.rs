//! The brokers under fuzz: one `rill` node, or a cluster of combined broker+controller nodes
//! (each from its own KRaft-style .properties file, as tests/e2e/cluster.py writes them), on
//! free loopback ports with their own data directories under the work directory. Or brokers
//! someone else started (`--bootstrap`, `--pid`).

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What rill logs once every shard listens (server/src/shard/runtime.rs).
const READY_LINE: &str = "all shards listening";
/// How long a node may take to come up (debug build, loaded 2 cores).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a graceful stop may take before the node is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// What a broker logs only through a defect of its own, whatever a client sent: a panic (caught
/// or not), and a response it made but cannot encode (the client's answer is lost and its
/// connection closed, as a 32 KiB name quoted in an error message once did).
pub const DEFECT_MARKS: [&str; 2] = ["panicked", "cannot encode"];

/// One broker process.
pub struct Node {
    /// Its client address.
    pub addr: SocketAddr,
    /// Its process id (for RSS and liveness).
    pub pid: u32,
    /// The process, when this tool started it.
    pub child: Option<Child>,
    /// Its data directory (nothing may appear beside it), when known.
    pub data_dir: Option<PathBuf>,
    /// Its log, when this tool started it.
    pub log: Option<PathBuf>,
    /// How far the log has been scanned for panics.
    pub log_scanned: u64,
}

impl Node {
    /// Whether the process still runs; `Err` with how it ended.
    pub fn alive(&mut self) -> Result<(), String> {
        match &mut self.child {
            Some(child) => match child.try_wait() {
                Ok(None) => Ok(()),
                Ok(Some(status)) => Err(format!("broker {} exited: {status}", self.addr)),
                Err(e) => Err(format!("broker {}: wait: {e}", self.addr)),
            },
            None if Path::new(&format!("/proc/{}", self.pid)).exists() => Ok(()),
            None => Err(format!("broker pid {} is gone", self.pid)),
        }
    }

    /// Resident set size in KiB (None once the process is gone).
    pub fn rss_kib(&self) -> Option<u64> {
        status_kib(self.pid, "VmRSS:")
    }

    /// Peak resident set size in KiB since the process started.
    pub fn rss_peak_kib(&self) -> Option<u64> {
        status_kib(self.pid, "VmHWM:")
    }

    /// Log lines written since the last call that report a broker defect (see [`DEFECT_MARKS`]).
    pub fn new_defects(&mut self) -> Vec<String> {
        let Some(path) = &self.log else {
            return Vec::new();
        };
        let Ok(mut file) = fs::File::open(path) else {
            return Vec::new();
        };
        let mut text = Vec::new();
        if file.seek(SeekFrom::Start(self.log_scanned)).is_err()
            || file.read_to_end(&mut text).is_err()
        {
            return Vec::new();
        }
        // Only whole lines: the next call rereads a line still being written.
        let whole = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.log_scanned += whole as u64;
        String::from_utf8_lossy(&text[..whole])
            .lines()
            .filter(|l| DEFECT_MARKS.iter().any(|mark| l.contains(mark)))
            .map(str::to_owned)
            .collect()
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        let Some(text) = self.log.as_ref().and_then(|p| fs::read(p).ok()) else {
            return String::new();
        };
        let text = String::from_utf8_lossy(&text);
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGTERM, then wait for a clean exit; the exit code (None: killed after the timeout).
    pub fn stop(&mut self) -> Option<i32> {
        let child = self.child.as_mut()?;
        if child.try_wait().ok().flatten().is_none() {
            // SAFETY: kill(2) on our own child's pid; no memory is involved.
            unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            if child.try_wait().ok().flatten().is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// A TCP port on 127.0.0.1 that nobody listens on now.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// How to start the brokers.
pub struct LaunchSpec<'a> {
    /// The `rill` binary.
    pub rill_bin: &'a Path,
    /// Where data dirs and logs go.
    pub work_dir: &'a Path,
    /// Shards of a single node (cluster nodes run one each, as the e2e cluster does).
    pub shards: usize,
    /// Extra `key=value` properties for every node.
    pub properties: &'a [String],
}

/// Starts one node.
pub fn single(spec: &LaunchSpec) -> Result<Vec<Node>, String> {
    let dir = spec.work_dir.join("node0");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let port = free_port().map_err(|e| e.to_string())?;
    let mut props = vec![
        "group.initial.rebalance.delay.ms=100".to_owned(),
        // The valid cases' sessions (1-6 s, `values.rs`) expire within a run; Kafka's floor is 6 s.
        "group.min.session.timeout.ms=1000".to_owned(),
        format!("rill.shards={}", spec.shards),
        "rill.admin.listen=off".to_owned(),
        "num.partitions=1".to_owned(),
        "auto.create.topics.enable=true".to_owned(),
    ];
    props.extend(spec.properties.iter().cloned());
    let config = dir.join("rill.properties");
    fs::write(&config, props.join("\n") + "\n").map_err(|e| e.to_string())?;
    let addr: SocketAddr = format!("127.0.0.1:{port}")
        .parse()
        .expect("loopback address");
    let data = dir.join("data");
    let mut cmd = Command::new(spec.rill_bin);
    cmd.arg("--listen")
        .arg(addr.to_string())
        .arg("--data-dir")
        .arg(&data)
        .arg("--config")
        .arg(&config);
    let node = spawn(cmd, addr, data, dir.join("rill.log"))?;
    Ok(vec![node])
}

/// Starts `size` combined broker+controller nodes and waits for each to come up.
pub fn cluster(spec: &LaunchSpec, size: usize) -> Result<Vec<Node>, String> {
    let ports: Vec<(u16, u16)> = (0..size)
        .map(|_| Ok((free_port()?, free_port()?)))
        .collect::<std::io::Result<_>>()
        .map_err(|e| e.to_string())?;
    let voters: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, (_, c))| format!("{}@127.0.0.1:{c}", i + 1))
        .collect();
    let mut nodes = Vec::new();
    for (i, (port, controller)) in ports.iter().enumerate() {
        let id = i + 1;
        let dir = spec.work_dir.join(format!("node{id}"));
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let data = dir.join("data");
        let mut props = vec![
            format!("node.id={id}"),
            "process.roles=broker,controller".to_owned(),
            format!("listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"),
            format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port}"),
            "controller.listener.names=CONTROLLER".to_owned(),
            format!("controller.quorum.voters={}", voters.join(",")),
            format!("log.dirs={}", data.display()),
            format!("default.replication.factor={size}"),
            format!("min.insync.replicas={}", size.min(2)),
            format!("offsets.topic.replication.factor={size}"),
            "rill.shards=1".to_owned(),
            "rill.shard.io.memory.bytes=1048576".to_owned(),
            "rill.admin.listen=off".to_owned(),
            "group.initial.rebalance.delay.ms=100".to_owned(),
            "group.min.session.timeout.ms=1000".to_owned(),
        ];
        props.extend(spec.properties.iter().cloned());
        let config = dir.join(format!("node{id}.properties"));
        fs::write(&config, props.join("\n") + "\n").map_err(|e| e.to_string())?;
        let addr: SocketAddr = format!("127.0.0.1:{port}")
            .parse()
            .expect("loopback address");
        let mut cmd = Command::new(spec.rill_bin);
        cmd.arg("--config").arg(&config);
        nodes.push(spawn_only(
            cmd,
            addr,
            data,
            dir.join(format!("node{id}.log")),
        )?);
    }
    for node in &mut nodes {
        wait_ready(node)?;
    }
    Ok(nodes)
}

fn spawn(cmd: Command, addr: SocketAddr, data: PathBuf, log: PathBuf) -> Result<Node, String> {
    let mut node = spawn_only(cmd, addr, data, log)?;
    wait_ready(&mut node)?;
    Ok(node)
}

fn spawn_only(
    mut cmd: Command,
    addr: SocketAddr,
    data: PathBuf,
    log: PathBuf,
) -> Result<Node, String> {
    let out = fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    // Warnings and above, and the ready line; never debug (a fuzz logs millions of closes).
    cmd.env(
        "RUST_LOG",
        std::env::var("LIVEFUZZ_RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
    );
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    Ok(Node {
        addr,
        pid: child.id(),
        child: Some(child),
        data_dir: Some(data),
        log: Some(log),
        log_scanned: 0,
    })
}

fn wait_ready(node: &mut Node) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        node.alive()
            .map_err(|e| format!("{e}; log:\n{}", node.log_tail(30)))?;
        let log = node
            .log
            .as_ref()
            .and_then(|p| fs::read_to_string(p).ok())
            .unwrap_or_default();
        if log.contains(READY_LINE) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "broker {} not ready after {START_TIMEOUT:?}; log:\n{}",
                node.addr,
                node.log_tail(30)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Brokers someone else started: addresses and (optionally) their pids.
pub fn attach(addrs: &[SocketAddr], pids: &[u32]) -> Vec<Node> {
    addrs
        .iter()
        .enumerate()
        .map(|(i, addr)| Node {
            addr: *addr,
            pid: pids.get(i).copied().unwrap_or(0),
            child: None,
            data_dir: None,
            log: None,
            log_scanned: 0,
        })
        .collect()
}

/// Entries beside a node's data directory that the launcher did not make: a topic name that
/// escaped the data dir (`../x`) shows up here.
pub fn strays(node: &Node) -> Vec<String> {
    let Some(data) = &node.data_dir else {
        return Vec::new();
    };
    let Some(parent) = data.parent() else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !(name == "data" || name.ends_with(".log") || name.ends_with(".properties")))
        .collect()
}
