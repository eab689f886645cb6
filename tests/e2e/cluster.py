"""A cluster of `rill` processes on loopback for the end-to-end tests (issue 13).

Each node is one process started from its own KRaft-style `.properties` file, exactly as an
operator would write it (node.id, process.roles=broker,controller, listeners with a CONTROLLER
entry, controller.listener.names, controller.quorum.voters, ...), on free 127.0.0.1 ports, with
rill.shards=1 (the whole suite shares two cores). As with Broker.start, a node that does not come
up in time fails the test: no retries.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

from broker import E2E_INITIAL_REBALANCE_DELAY_MS, Broker, free_port, rill_binary
from broker_watchdog import WATCHDOG

#: How long a fresh cluster may take until every node lists every broker (debug build, 2 cores).
FORM_TIMEOUT_S = 30.0


class ClusterNode(Broker):
    """One node: a Broker whose only argument is its properties file."""

    def __init__(self, root: Path, node_id: int, client_port: int, controller_port: int,
                 voters: str, properties: dict[str, object], roles: str = "broker,controller"):
        super().__init__(root / f"node{node_id}", root / f"node{node_id}.log",
                         partitions_default=None, auto_create_topics=None, shards=1,
                         config_path=root / f"node{node_id}.properties")
        self.node_id = node_id
        self.port = client_port
        self.controller_port = controller_port
        self.roles = roles
        lines = {
            "node.id": node_id,
            "process.roles": roles,
            "listeners": f"PLAINTEXT://127.0.0.1:{client_port},"
                         f"CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{client_port}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": voters,
            "log.dirs": str(self.data_dir),
            "default.replication.factor": 3,
            "min.insync.replicas": 2,
            "offsets.topic.replication.factor": 3,
            "rill.shards": 1,
            "rill.shard.io.memory.bytes": 1 << 20,
            "rill.admin.listen": f"127.0.0.1:{self.admin_port}",
            "group.initial.rebalance.delay.ms": E2E_INITIAL_REBALANCE_DELAY_MS,
        }
        lines.update(properties)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))

    def command(self) -> list[str]:
        return [str(rill_binary()), "--config", str(self.config_path)]

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    def start(self) -> None:
        self.wait_ready(self.spawn())

    def wait_ready(self, start: int) -> None:
        if self.is_broker:
            super().wait_ready(start)
            return
        # A controller-only node has no client listener: ready once it says so.
        deadline = time.monotonic() + FORM_TIMEOUT_S
        while not self.logged_since(start, "controller only: no client listener"):
            assert self.proc.poll() is None, f"controller exited:\n{self.log_tail()}"
            assert time.monotonic() < deadline, f"controller not up:\n{self.log_tail()}"
            time.sleep(0.05)
        WATCHDOG.arm(self)


class Cluster:
    """`size` combined broker+controller nodes; `properties` go into every node's file."""

    def __init__(self, root: Path, size: int = 3, roles: dict[int, str] | None = None,
                 **properties):
        ports = [(free_port(), free_port()) for _ in range(size)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports))
        roles = roles or {}
        self.nodes = [ClusterNode(root, i + 1, p, c, voters, properties,
                                  roles.get(i + 1, "broker,controller"))
                      for i, (p, c) in enumerate(ports)]

    def node(self, node_id: int) -> ClusterNode:
        return self.nodes[node_id - 1]

    def bootstrap(self, node_id: int) -> str:
        return self.node(node_id).bootstrap

    def start(self) -> None:
        """Start every node, then wait until each lists every broker. A failure stops (kill -9)
        whatever started, so no node outlives its test."""
        try:
            # Spawned together, then waited for: a broker serves only once its registration
            # is applied, which needs a quorum of the voters running.
            starts = [node.spawn() for node in self.nodes]
            for node, start in zip(self.nodes, starts):
                node.wait_ready(start)
            self.wait_brokers(sum(n.is_broker for n in self.nodes))
        except BaseException:
            for node in self.nodes:
                if node.alive():
                    node.kill9()
            raise

    def stop(self) -> list[int | None]:
        return [node.stop() for node in self.nodes if node.alive()]

    def live_nodes(self) -> list[ClusterNode]:
        """Nodes whose process runs and that serve clients."""
        return [n for n in self.nodes if n.alive() and n.is_broker]

    def wait_brokers(self, count: int, timeout_s: float = FORM_TIMEOUT_S) -> None:
        """Until every live node's Metadata lists exactly `count` brokers."""
        deadline = time.monotonic() + timeout_s
        seen = {}
        while time.monotonic() < deadline:
            seen = {n.node_id: sorted(node_metadata(n)["brokers"]) for n in self.live_nodes()}
            if all(len(ids) == count for ids in seen.values()):
                return
            time.sleep(0.2)
        raise AssertionError(f"brokers listed per node after {timeout_s}s: {seen}")

    def controller(self) -> int:
        """The active controller as a live node knows it (its /metrics gauge
        rill_cluster_controller_id; -1 unknown). Metadata names the node asked (KIP-590)."""
        return active_controller(self.live_nodes()[0])


@contextmanager
def running(cluster: Cluster, started: list):
    """Start `cluster` (its nodes join `started`, whose log tails failing tests show) and stop it
    when the block ends: after a clean block every node must exit 0 on SIGTERM, unpanicked."""
    started.extend(cluster.nodes)
    cluster.start()
    try:
        yield cluster
    except BaseException:
        cluster.stop()
        raise
    codes = cluster.stop()
    assert codes == [0] * len(cluster.nodes), f"exit codes on SIGTERM: {codes}"
    for node in cluster.nodes:
        assert "panicked" not in node.log_text(), f"node {node.node_id} panicked"


def active_controller(node: ClusterNode) -> int:
    """The node.id of the active controller as `node` knows it (-1: unknown), from /metrics."""
    from test_admin_listener import metrics
    return int(metrics(f"127.0.0.1:{node.admin_port}")["rill_cluster_controller_id"])


def node_metadata(node: Broker, topics: list[str] | None = None) -> dict:
    """Metadata v1 asked of `node` itself (raw wire: no client picks another broker). Naming
    topics auto-creates them (v1 predates the flag); None asks for all.
    Returns
    {"brokers": {id: (host, port)}, "controller": id,
     "topics": {name: (error, {partition: (error, leader, replicas, isr)})},
     "internal": {names marked is_internal}}."""
    import kafka_wire as kw
    conn = kw.Conn(node.host, node.port)
    try:
        conn.send(kw.request(kw.API_METADATA, 1, 7, kw.metadata_v1_body(topics)))
        answer = conn.recv_response()
    finally:
        conn.sock.close()
    assert answer is not None, f"node at {node.bootstrap} closed the connection"
    r = kw.Reader(answer[1])
    brokers = {}
    for _ in range(r.take(">i")):
        node_id = r.take(">i")
        host = r.string()
        brokers[node_id] = (host, r.take(">i"))
        r.string()                                   # rack
    controller = r.take(">i")
    out, internal = {}, set()
    for _ in range(r.take(">i")):
        error = r.take(">h")
        name = r.string()
        if r.take(">b"):                             # is_internal
            internal.add(name)
        partitions = {}
        for _ in range(r.take(">i")):
            p_error, index, leader = r.take(">hii")
            replicas = [r.take(">i") for _ in range(r.take(">i"))]
            isr = [r.take(">i") for _ in range(r.take(">i"))]
            partitions[index] = (p_error, leader, replicas, isr)
        out[name] = (error, partitions)
    return {"brokers": brokers, "controller": controller, "topics": out, "internal": internal}


def wait_isr_full(cluster: Cluster, topic: str, timeout_s: float = 20.0) -> float:
    """Seconds until every partition of `topic` has every replica in its ISR (issue 14: the
    ISR starts as the leader; followers join once they caught up), as every live node says."""
    start = time.monotonic()
    seen = {}
    while time.monotonic() - start < timeout_s:
        seen = {n.node_id: node_metadata(n)["topics"].get(topic) for n in cluster.live_nodes()}
        if all(s and s[0] == 0 and s[1] and all(sorted(p[3]) == sorted(p[2]) for p in s[1].values())
               for s in seen.values()):
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"ISR of {topic} not full within {timeout_s}s: {seen}")


def wait_topic_everywhere(cluster: Cluster, topic: str, partitions: int,
                          timeout_s: float = 1.0) -> float:
    """Seconds until every live node's Metadata shows `topic` with `partitions` led partitions."""
    start = time.monotonic()
    seen = {}
    while time.monotonic() - start < timeout_s:
        # All topics: naming one in Metadata v1 would auto-create it.
        seen = {n.node_id: node_metadata(n)["topics"].get(topic) for n in cluster.live_nodes()}
        if all(s and s[0] == 0 and len(s[1]) == partitions and all(p[1] >= 0 for p in s[1].values())
               for s in seen.values()):
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"{topic} not on every node within {timeout_s}s: {seen}")
