//! Local broker processes for `compare`: Rill and its peers (Apache Kafka in two configurations,
//! started through `peers/kafka/kafka.sh`; tansu), each on a free loopback port, logs to a file,
//! stopped with SIGTERM (then SIGKILL) when dropped.

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// How long a broker may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a broker may take to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long Kafka may take to start (the JVM, `kafka-storage format`, the KRaft quorum).
const KAFKA_READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Which broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BrokerKind {
    Rill,
    /// Apache Kafka with its defaults: page cache, no fsync before the ack.
    Kafka,
    /// Apache Kafka with `log.flush.interval.messages=1`: an fsync before every ack, the
    /// durability Rill gives at acks=all.
    KafkaFsync,
    Tansu,
}

impl BrokerKind {
    /// Every broker, in the order of tables' columns.
    pub const ALL: [BrokerKind; 4] = [
        BrokerKind::Rill,
        BrokerKind::Kafka,
        BrokerKind::KafkaFsync,
        BrokerKind::Tansu,
    ];

    /// The peers Rill is compared with, in the order of tables' columns.
    pub const PEERS: [BrokerKind; 3] =
        [BrokerKind::Kafka, BrokerKind::KafkaFsync, BrokerKind::Tansu];

    /// Lowercase name, as in tables and file names.
    pub fn name(self) -> &'static str {
        match self {
            BrokerKind::Rill => "rill",
            BrokerKind::Kafka => "kafka",
            BrokerKind::KafkaFsync => "kafka-fsync",
            BrokerKind::Tansu => "tansu",
        }
    }

    /// Whether this is Apache Kafka, started through `peers/kafka/kafka.sh` (its `binary`).
    pub fn is_kafka(self) -> bool {
        matches!(self, BrokerKind::Kafka | BrokerKind::KafkaFsync)
    }
}

/// How to start one broker.
#[derive(Debug, Clone)]
pub struct BrokerSpec {
    pub kind: BrokerKind,
    /// The broker's binary; for Kafka, `peers/kafka/kafka.sh`.
    pub binary: PathBuf,
    /// Rill's data directory, or Kafka's `--dir` (tansu runs with memory:// storage).
    pub data_dir: PathBuf,
    pub shards: u32,
    pub log_path: PathBuf,
    /// A properties file Rill starts with (`--config`), if any.
    pub rill_config: Option<PathBuf>,
}

/// A running broker; stopped on drop.
#[derive(Debug)]
pub struct Broker {
    pub kind: BrokerKind,
    pub address: String,
    /// Rill's admin HTTP listener (`/metrics`), on its own free port; `None` for the peers.
    pub admin_address: Option<String>,
    process: Process,
}

/// The broker's process: a child of ours, or a Kafka node `kafka.sh` started (setsid) in `dir`.
#[derive(Debug)]
enum Process {
    Child(Child),
    Kafka {
        pid: u32,
        script: PathBuf,
        dir: PathBuf,
    },
}

impl Broker {
    /// Starts the broker on a free port and waits until the port accepts connections.
    pub fn start(spec: &BrokerSpec) -> anyhow::Result<Broker> {
        if spec.kind.is_kafka() {
            return Self::start_kafka(spec);
        }
        let port = free_port()?;
        let address = format!("127.0.0.1:{port}");
        let log = File::create(&spec.log_path)
            .with_context(|| format!("creating {}", spec.log_path.display()))?;
        let mut command = Command::new(&spec.binary);
        let mut admin_address = None;
        match spec.kind {
            BrokerKind::Rill => {
                std::fs::create_dir_all(&spec.data_dir)?;
                // Its own port: the default (9644) may be taken by another broker on the machine.
                let admin = format!("127.0.0.1:{}", free_port()?);
                command
                    .arg("--listen")
                    .arg(&address)
                    .arg("--admin-listen")
                    .arg(&admin)
                    .arg("--data-dir")
                    .arg(&spec.data_dir)
                    .arg("--shards")
                    .arg(spec.shards.to_string());
                if let Some(config) = &spec.rill_config {
                    command.arg("--config").arg(config);
                }
                admin_address = Some(admin);
            }
            BrokerKind::Kafka | BrokerKind::KafkaFsync => unreachable!("started by start_kafka"),
            BrokerKind::Tansu => {
                let url = format!("tcp://{address}");
                command
                    .args([
                        "broker",
                        "--listener-url",
                        &url,
                        "--advertised-listener-url",
                        &url,
                    ])
                    .args(["--storage-engine", "memory://tansu/"]);
            }
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", spec.binary.display()))?;
        let mut broker = Broker {
            kind: spec.kind,
            address,
            admin_address,
            process: Process::Child(child),
        };
        broker.wait_ready(&spec.log_path)?;
        Ok(broker)
    }

    /// Starts a fresh single KRaft node (broker and controller) with `kafka.sh start-single`,
    /// which formats `data_dir` anew and returns once the node serves; its output is the log.
    fn start_kafka(spec: &BrokerSpec) -> anyhow::Result<Broker> {
        let port = free_port()?;
        let log = File::create(&spec.log_path)
            .with_context(|| format!("creating {}", spec.log_path.display()))?;
        let mut command = Command::new(&spec.binary);
        command
            .arg("start-single")
            .arg("--dir")
            .arg(&spec.data_dir)
            .arg("--port")
            .arg(port.to_string())
            .env(
                "KAFKA_PEER_READY_SECONDS",
                KAFKA_READY_TIMEOUT.as_secs().to_string(),
            );
        if spec.kind == BrokerKind::KafkaFsync {
            command.arg("--flush-every-message");
        }
        let output = command
            .stdin(Stdio::null())
            .stderr(log)
            .output()
            .with_context(|| format!("starting {}", spec.binary.display()))?;
        if !output.status.success() {
            bail!(
                "{} start-single failed ({}); see {}",
                spec.binary.display(),
                output.status,
                spec.log_path.display()
            );
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let value = |key: &str| {
            stdout
                .lines()
                .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_string)
                .with_context(|| format!("kafka.sh printed no {key}: {stdout}"))
        };
        let pid = value("KAFKA_PIDS")?
            .parse()
            .context("kafka.sh's KAFKA_PIDS of one node")?;
        Ok(Broker {
            kind: spec.kind,
            address: value("KAFKA_BOOTSTRAP")?,
            admin_address: None,
            process: Process::Kafka {
                pid,
                script: spec.binary.clone(),
                dir: spec.data_dir.clone(),
            },
        })
    }

    /// The broker's pid, for CPU metering.
    pub fn pid(&self) -> u32 {
        match &self.process {
            Process::Child(child) => child.id(),
            Process::Kafka { pid, .. } => *pid,
        }
    }

    /// Stops the broker with SIGTERM (a clean shutdown) and returns how long it took to exit.
    pub fn stop(mut self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let kind = self.kind;
        match &mut self.process {
            Process::Child(child) => {
                let pid = child.id() as libc::pid_t;
                // SAFETY: kill(2) on the pid of a child we spawned and have not yet reaped.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                let status = child.wait().context("waiting for the broker to exit")?;
                if !status.success() {
                    bail!("{} exited with {status} on SIGTERM", kind.name());
                }
            }
            Process::Kafka { script, dir, .. } => {
                let status = kafka_stop(script, dir).context("kafka.sh stop")?;
                if !status.success() {
                    bail!("kafka.sh stop --dir {} failed: {status}", dir.display());
                }
            }
        }
        Ok(started.elapsed())
    }

    /// Kills the broker with SIGKILL (a crash: the next start recovers).
    pub fn kill9(mut self) -> anyhow::Result<()> {
        match &mut self.process {
            Process::Child(child) => {
                child.kill().context("killing the broker")?;
                child.wait().context("reaping the broker")?;
            }
            Process::Kafka { .. } => bail!("kill9 of a Kafka peer is not supported"),
        }
        Ok(())
    }

    fn wait_ready(&mut self, log_path: &Path) -> anyhow::Result<()> {
        let Process::Child(child) = &mut self.process else {
            return Ok(()); // kafka.sh returned once the node served
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "{} exited at start ({status}); see {}",
                    self.kind.name(),
                    log_path.display()
                );
            }
            if TcpStream::connect(&self.address).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "{} did not accept on {} in time",
            self.kind.name(),
            self.address
        )
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let child = match &mut self.process {
            Process::Child(child) => child,
            Process::Kafka { script, dir, .. } => {
                // A no-op when stopped already (kafka.sh removed the pids file).
                let _ = kafka_stop(script, dir);
                return;
            }
        };
        if matches!(child.try_wait(), Ok(Some(_))) {
            return; // stopped or killed already
        }
        let pid = child.id() as libc::pid_t;
        // SAFETY: kill(2) on the pid of a child we spawned and have not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// `kafka.sh stop --dir DIR`: SIGTERM to the nodes started there, waiting for them to exit.
fn kafka_stop(script: &Path, dir: &Path) -> std::io::Result<std::process::ExitStatus> {
    Command::new(script)
        .arg("stop")
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .status()
}

/// A loopback port that was free a moment ago.
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
