//! Local broker processes for `compare`: Rill and the peer (tansu), each on a free loopback port,
//! logs to a file, stopped with SIGTERM (then SIGKILL) when dropped.

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

/// Which broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BrokerKind {
    Rill,
    Tansu,
}

impl BrokerKind {
    /// Lowercase name, as in tables and file names.
    pub fn name(self) -> &'static str {
        match self {
            BrokerKind::Rill => "rill",
            BrokerKind::Tansu => "tansu",
        }
    }
}

/// How to start one broker.
#[derive(Debug, Clone)]
pub struct BrokerSpec {
    pub kind: BrokerKind,
    pub binary: PathBuf,
    /// Rill's data directory (tansu runs with memory:// storage).
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
    /// Rill's admin HTTP listener (`/metrics`), on its own free port; `None` for tansu.
    pub admin_address: Option<String>,
    child: Child,
}

impl Broker {
    /// Starts the broker on a free port and waits until the port accepts connections.
    pub fn start(spec: &BrokerSpec) -> anyhow::Result<Broker> {
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
            child,
        };
        broker.wait_ready(&spec.log_path)?;
        Ok(broker)
    }

    /// The broker's pid, for CPU metering.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the broker with SIGTERM (a clean shutdown) and returns how long it took to exit.
    pub fn stop(mut self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on the pid of a child we spawned and have not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = self
            .child
            .wait()
            .context("waiting for the broker to exit")?;
        if !status.success() {
            bail!("{} exited with {status} on SIGTERM", self.kind.name());
        }
        Ok(started.elapsed())
    }

    /// Kills the broker with SIGKILL (a crash: the next start recovers).
    pub fn kill9(mut self) -> anyhow::Result<()> {
        self.child.kill().context("killing the broker")?;
        self.child.wait().context("reaping the broker")?;
        Ok(())
    }

    fn wait_ready(&mut self, log_path: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
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
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return; // stopped or killed already
        }
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on the pid of a child we spawned and have not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port that was free a moment ago.
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
