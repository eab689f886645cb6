"""Three rill processes, each in its own network namespace (net.Network), configured as
tests/e2e/cluster.py configures its loopback nodes (KRaft-style properties, rill.shards=1, RF 3,
min.insync.replicas 2), but every listener on the node's own address.

A node is started with `ip netns exec`, which execs rill in place: the Popen's pid is rill's, so
kill -9, SIGSTOP and SIGCONT reach the broker itself. A start that does not log readiness in
time raises (no retry): start-up must never hang.
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from broker import READY_LINE, port_accepts, rill_binary  # noqa: E402
from cluster import node_metadata  # noqa: E402

from net import Network  # noqa: E402

CLIENT_PORT = 9092
CONTROLLER_PORT = 9093
ADMIN_PORT = 9644
#: A start (debug build, 2 cores, log replay after kill -9) must be ready within this.
START_TIMEOUT_S = 60.0
#: Graceful stop budget before the final check calls it a failure.
STOP_TIMEOUT_S = 30.0
#: Failure detection fast enough for a short run, as tests/e2e/test_replication.py's FAST.
FAST = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 1000,
        "replica.lag.time.max.ms": 3000}


class Node:
    """One rill node: a namespace, an address, a data dir that survives restarts."""

    def __init__(self, net: Network, root: Path, node_id: int, voters: str):
        self.net = net
        self.node_id = node_id
        self.host = net.address(node_id)
        self.port = CLIENT_PORT
        self.data_dir = root / f"node{node_id}"
        self.log_path = root / f"node{node_id}.log"
        self.config_path = root / f"node{node_id}.properties"
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self.starts = 0
        props = {
            "node.id": node_id,
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://{self.host}:{CLIENT_PORT},"
                         f"CONTROLLER://{self.host}:{CONTROLLER_PORT}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{CLIENT_PORT}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": voters,
            "log.dirs": str(self.data_dir),
            "default.replication.factor": 3,
            "min.insync.replicas": 2,
            "offsets.topic.replication.factor": 3,
            "rill.shards": 1,
            "rill.shard.io.memory.bytes": 1 << 20,
            "rill.admin.listen": f"{self.host}:{ADMIN_PORT}",
            "group.initial.rebalance.delay.ms": 100,
            # A dead transactional producer's open transaction is aborted within a second of
            # its timeout (txn_workload.TXN_TIMEOUT_MS), not Kafka's 10 s check interval later:
            # until then it holds every read_committed reader of its partitions back.
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
            **FAST,
        }
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> int:
        """Start rill in the namespace; returns where this start's log lines begin."""
        assert not self.alive(), f"node {self.node_id} already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"),
                   RUST_BACKTRACE="1", NO_COLOR="1")
        cmd = self.net.exec_prefix(self.node_id) + [str(rill_binary()), "--config",
                                                     str(self.config_path)]
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            start = log.tell()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
        self.paused = False
        return start

    def wait_ready(self, log_start: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.node_id} exited with {self.proc.returncode} "
                                   f"during start-up:\n{self.log_tail()}")
            if self._logged_since(log_start, READY_LINE) and port_accepts(self.host, self.port):
                return
            time.sleep(0.05)
        raise RuntimeError(f"node {self.node_id} not ready within {START_TIMEOUT_S}s:\n"
                           f"{self.log_tail()}")

    def start(self) -> None:
        self.wait_ready(self.spawn())

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.paused = False

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def stop(self) -> int | None:
        """SIGCONT if paused, SIGTERM, wait; SIGKILL and raise if it does not exit in time."""
        if not self.alive():
            return None if self.proc is None else self.proc.returncode
        if self.paused:
            self.resume()
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"node {self.node_id} did not stop within {STOP_TIMEOUT_S}s")

    def _logged_since(self, offset: int, needle: str) -> bool:
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return needle.encode() in f.read()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def metadata(self) -> dict:
        """Metadata v1 asked of this node itself (tests/e2e/cluster.node_metadata)."""
        return node_metadata(self)

    def controller(self) -> int:
        """The active controller as this node knows it (its rill_cluster_controller_id gauge)."""
        conn = http.client.HTTPConnection(self.host, ADMIN_PORT, timeout=2)
        try:
            conn.request("GET", "/metrics")
            body = conn.getresponse().read().decode()
        finally:
            conn.close()
        for line in body.splitlines():
            if line.startswith("rill_cluster_controller_id"):
                return int(float(line.rsplit(" ", 1)[1]))
        return -1


class Cluster:
    """Three nodes on one Network."""

    def __init__(self, net: Network, root: Path):
        voters = ",".join(f"{i}@{net.address(i)}:{CONTROLLER_PORT}"
                          for i in range(1, net.nodes + 1))
        self.nodes = [Node(net, root, i, voters) for i in range(1, net.nodes + 1)]

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def start(self) -> None:
        starts = [n.spawn() for n in self.nodes]
        for n, s in zip(self.nodes, starts):
            n.wait_ready(s)
        self.wait_brokers(len(self.nodes), 60)

    def serving(self) -> list[Node]:
        return [n for n in self.nodes if n.alive() and not n.paused]

    def wait_brokers(self, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        seen: dict = {}
        while time.monotonic() < deadline:
            try:
                seen = {n.node_id: sorted(n.metadata()["brokers"]) for n in self.serving()}
            except (OSError, AssertionError) as e:
                seen = {"error": str(e)}
            else:
                if all(len(ids) == count for ids in seen.values()):
                    return
            time.sleep(0.2)
        raise RuntimeError(f"brokers listed per node after {timeout_s}s: {seen}")

    def partitions(self, topic: str) -> dict[int, tuple[int, int, list[int], list[int]]]:
        """partition -> (error, leader, replicas, isr) as the first answering node says."""
        for n in self.serving():
            try:
                t = n.metadata()["topics"].get(topic)
            except (OSError, AssertionError):
                continue
            if t:
                return t[1]
        return {}

    def kill_all(self) -> None:
        for n in self.nodes:
            if n.alive():
                n.kill9()
