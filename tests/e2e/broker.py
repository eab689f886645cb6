"""Start, restart, kill and stop a real `rill` broker process for the end-to-end tests.

The tests talk to the real thing: a `rill` binary on a free 127.0.0.1 port with its own temporary
data directory. Its stdout/stderr go to a log file that the tests attach to any failure report.

Set RILL_E2E_BROKER=127.0.0.1:PORT to run the suite against an already running Kafka-compatible
broker instead (used to develop the tests against a peer broker); tests that must restart or kill the
broker are skipped then. CI never sets it.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from broker_watchdog import WATCHDOG

REPO_ROOT = Path(__file__).resolve().parents[2]

#: How long a broker may take to accept connections after it was started (debug build, 2 cores).
START_TIMEOUT_S = 20.0
#: What rill logs once every shard listens (server/src/shard/runtime.rs): the readiness signal.
READY_LINE = "all shards listening"
#: How long a graceful stop (SIGTERM: finish in-flight, flush, close) may take before we SIGKILL.
STOP_TIMEOUT_S = 20.0
#: `group.initial.rebalance.delay.ms` of the test brokers: short, so that each group's first
#: rebalance costs the suite 0.1 s instead of Kafka's default 3 s, but not 0, so that the delay
#: runs under every client. test_groups_initial_delay.py runs the default.
E2E_INITIAL_REBALANCE_DELAY_MS = 100


#: Ports free_port has handed out in this process: a port is closed again as soon as it is
#: picked, so it could come up twice (a node's admin port once equalled its controller port); it
#: must never go to two listeners of one test.
_PORTS_HANDED_OUT: set[int] = set()
#: Listener ports come from below the kernel's ephemeral range, so that no client's (or peer's)
#: outgoing connection takes a port between free_port closing it and rill binding it: the suite
#: runs tests side by side (pytest-xdist), with many connections at once.
_PORT_FLOOR = 10_000
#: One file, one byte-range lock per handed-out port (fcntl, held until the process exits):
#: pytest-xdist workers, and other e2e runs on the machine, never hand out the same port.
_PORT_LOCKS = Path(tempfile.gettempdir()) / "rill-e2e-ports.lock"
_port_lock_fd: int | None = None
#: Not the `random` module's shared state, which a test may seed: workers must not walk in step.
_port_rng = random.SystemRandom()


def _ephemeral_low() -> int:
    """The lowest port the kernel picks for outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _claim(port: int) -> bool:
    """Lock `port`'s byte in the machine-wide lock file; False if another process holds it."""
    global _port_lock_fd
    if _port_lock_fd is None:
        _port_lock_fd = os.open(_PORT_LOCKS, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.lockf(_port_lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
        return True
    except OSError:
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now, below the ephemeral range,
    never one this process or another live e2e process handed out."""
    high = _ephemeral_low()
    while True:
        port = _port_rng.randrange(_PORT_FLOOR, high)
        if port in _PORTS_HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if _claim(port):
            _PORTS_HANDED_OUT.add(port)
            return port


def port_accepts(host: str, port: int) -> bool:
    """True when a TCP connect to host:port succeeds now."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def rill_binary() -> Path:
    """The broker binary under test: $RILL_BIN, else target/debug/rill of this checkout."""
    if os.environ.get("RILL_BIN"):
        return Path(os.environ["RILL_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target"))
    if not target.is_absolute():
        target = REPO_ROOT / target
    return target / "debug" / "rill"


def external_broker() -> str | None:
    """host:port of an externally managed broker (RILL_E2E_BROKER), or None to spawn rill."""
    return os.environ.get("RILL_E2E_BROKER") or None


class Broker:
    """One `rill` process: a fixed port and data directory that survive restarts."""

    def __init__(self, data_dir: Path, log_path: Path, *, partitions_default: int | None = 1,
                 auto_create_topics: bool | None = True, shards: int | None = None,
                 config_path: Path | None = None,
                 initial_rebalance_delay_ms: int | None = E2E_INITIAL_REBALANCE_DELAY_MS):
        self.host = "127.0.0.1"
        self.port = free_port()
        #: The admin listener (metrics, health, status): never the default 9644, tests run side
        #: by side.
        self.admin_port = free_port()
        self.data_dir = data_dir
        self.log_path = log_path
        self.partitions_default = partitions_default
        self.auto_create_topics = auto_create_topics
        self.shards = shards if shards is not None else int(os.environ.get("RILL_E2E_SHARDS", "2"))
        self.config_path = config_path
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        """The bootstrap address clients use."""
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        """The exact command line the broker is started with (shown in failure reports)."""
        cmd = [str(rill_binary()),
               "--listen", self.bootstrap,
               "--data-dir", str(self.data_dir),
               "--shards", str(self.shards),
               "--admin-listen", f"{self.host}:{self.admin_port}"]
        # None leaves a setting to the config file (or the broker's default).
        if self.partitions_default is not None:
            cmd += ["--default-partitions", str(self.partitions_default)]
        if self.auto_create_topics is not None:
            cmd += ["--auto-create-topics", "true" if self.auto_create_topics else "false"]
        if self.initial_rebalance_delay_ms is not None:
            cmd += ["--group-initial-rebalance-delay-ms", str(self.initial_rebalance_delay_ms)]
        if self.config_path is not None:
            cmd += ["--config", str(self.config_path)]
        return cmd

    def start(self) -> None:
        """Start the process and wait until it logs that every shard listens and its port
        accepts connections. A start that does not get there within START_TIMEOUT_S fails the
        test (the process is killed so the run can go on): start-up must never hang."""
        self.wait_ready(self.spawn())

    def wait_ready(self, log_start: int) -> None:
        """Wait until the start whose log begins at `log_start` (what `spawn` returned) is
        ready, as `start` does."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rill exited with {self.proc.returncode} during start-up; "
                                   f"log tail:\n{self.log_tail()}")
            # Ready = THIS start logged that every shard listens. A port that accepts is not
            # enough: after kill -9 the dead broker's listener (held by its io_uring until the
            # kernel tears it down) keeps accepting, then resetting, connections for tens of ms.
            if self.logged_since(log_start, READY_LINE) and port_accepts(self.host, self.port):
                WATCHDOG.arm(self)
                return
            time.sleep(0.05)
        self.kill9()
        raise RuntimeError(f"rill start #{self.starts} did not listen on {self.bootstrap} within "
                           f"{START_TIMEOUT_S}s (killed); log tail:\n{self.log_tail()}")

    def spawn(self) -> int:
        """Start the process without waiting for it (`start` waits); returns where this start's
        lines begin in the log (for `logged_since`)."""
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        binary = rill_binary()
        if not binary.exists():
            raise RuntimeError(f"{binary} does not exist: run `cargo build --workspace` first")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env.setdefault("RUST_BACKTRACE", "1")
        env.setdefault("NO_COLOR", "1")
        log = open(self.log_path, "ab")
        self.starts += 1
        log.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
        log.flush()
        log_start = log.tell()
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, cwd=self.data_dir.parent)
        log.close()
        return log_start

    def logged_since(self, offset: int, needle: str) -> bool:
        """True when the broker log, from byte `offset` on, contains `needle`."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return needle.encode() in f.read()
        except FileNotFoundError:
            return False

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        """Graceful stop (SIGTERM); SIGKILL if it does not exit in time. Returns the exit code."""
        if self.proc is None:
            return None
        WATCHDOG.disarm(self)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(f"rill did not stop within {STOP_TIMEOUT_S}s of SIGTERM")
        return self.proc.returncode

    def kill9(self) -> None:
        """SIGKILL: the process dies without flushing or closing anything."""
        assert self.proc is not None
        WATCHDOG.disarm(self)
        self.proc.kill()
        self.proc.wait()

    def restart(self, *, graceful: bool = True) -> None:
        """Stop (SIGTERM, or SIGKILL when graceful=False) and start again on the same port and data."""
        if graceful:
            code = self.stop()
            assert code == 0, f"rill exited with {code} on SIGTERM; log tail:\n{self.log_tail()}"
        else:
            self.kill9()
        self.start()

    def log_tail(self, lines: int = 80) -> str:
        """The last lines of the broker's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def log_text(self) -> str:
        """The whole broker log."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class ExternalBroker:
    """A broker the suite does not manage (RILL_E2E_BROKER); same interface minus process control."""

    def __init__(self, address: str):
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)
        self.log_path = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def alive(self) -> bool:
        return port_accepts(self.host, self.port)

    def log_tail(self, lines: int = 80) -> str:
        return "(external broker: no log)"

    def log_text(self) -> str:
        return ""
