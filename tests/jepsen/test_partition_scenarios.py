"""Network faults in the cluster tests (issue 32 item 5): three scripted partitions of a real
three-node cluster, each checked for exactly what Kafka promises, on the namespaces and iptables
rules of net.py (the nodes and their properties are nodes.py's, as the Jepsen runner's).

- An isolated partition leader stops acknowledging acks=all writes, is replaced by the majority
  within its session timeout, and once healed rejoins the ISR having truncated what it took
  while isolated (acks=1 writes it acknowledged alone): led by it again, the partition reads
  exactly the committed records.
- A partitioned controller minority cannot change metadata: a CreateTopics it is sent is not
  carried out, ever; the majority elects a controller that creates topics meanwhile, and the
  healed node learns them.

Needs root (namespaces, iptables): test.sh runs it in its Jepsen step,
`sudo .venv/bin/python -m pytest -q tests/jepsen/test_partition_scenarios.py` by hand.
The pytest process moves into the clients' namespace for good, so run this file on its own.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import (Consumer, ElectionType, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from jepsen import wait_isr_full
from net import Network, sweep_stale
from nodes import FAST, Cluster

#: librdkafka's own log lines go here, not to the test's output.
CLIENT_LOG = logging.getLogger("partition-scenarios-clients")
#: How long the majority may take to replace a fenced node's leadership or controllership:
#: broker.session.timeout.ms (nodes.FAST, 4 s) plus an election and a metadata round.
TAKEOVER_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    sweep_stale()
    net = Network(3, random.Random())
    net.create()
    nodes = None
    try:
        net.enter_clients()
        nodes = Cluster(net, Path(tmp_path_factory.mktemp("partitions")))
        nodes.start()
        yield nodes, net
        net.heal()
        for n in nodes.nodes:
            assert n.stop() == 0, f"node {n.node_id} exited uncleanly:\n{n.log_tail()}"
            assert "panicked" not in n.log_text(), n.log_tail()
    finally:
        if nodes is not None:
            nodes.kill_all()
        net.close()


def bootstrap(*nodes) -> str:
    return ",".join(n.bootstrap for n in nodes)


def admin(servers: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": servers, "logger": CLIENT_LOG})


def produce(servers: str, topic: str, partition: int, values: list[str], acks: str,
            timeout_s: float = 8.0) -> dict[str, object]:
    """Each value's delivery: its offset, or the error that failed it."""
    results: dict[str, object] = {}
    p = Producer({"bootstrap.servers": servers, "acks": acks, "logger": CLIENT_LOG,
                  "enable.idempotence": False, "retries": 0,
                  "message.timeout.ms": int(timeout_s * 1000),
                  "request.timeout.ms": int(timeout_s * 1000)})

    def delivered(err, msg):
        results[msg.value().decode()] = err if err is not None else msg.offset()

    for v in values:
        p.produce(topic, v.encode(), partition=partition, on_delivery=delivered)
    p.flush(timeout_s + 10)
    assert len(results) == len(values), f"deliveries not reported: {results}"
    return results


def read_all(servers: str, topic: str, partition: int, end: int,
             timeout_s: float = 30.0) -> list[str]:
    """`partition` of `topic` from offset 0 to `end` through whoever leads it."""
    c = Consumer({"bootstrap.servers": servers, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "logger": CLIENT_LOG})
    c.assign([TopicPartition(topic, partition, 0)])
    got: list[tuple[int, str]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while (not got or got[-1][0] < end - 1) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value().decode()))
    finally:
        c.close()
    assert [o for o, _ in got] == list(range(end)), f"offsets read: {[o for o, _ in got]}"
    return [v for _, v in got]


def partition_as_seen_by(node, topic: str, partition: int) -> tuple:
    """(error, leader, replicas, isr) of `partition` as `node` answers Metadata."""
    t = node.metadata()["topics"].get(topic)
    return t[1][partition] if t and partition in t[1] else (-1, -1, [], [])


def leader_as_seen_by(node, topic: str, partition: int) -> int:
    return partition_as_seen_by(node, topic, partition)[1]


def until(what: str, check, timeout_s: float = TAKEOVER_S):
    """check()'s first truthy value within timeout_s; fails the test with `what` otherwise."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (OSError, AssertionError, KafkaException) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.25)
    pytest.fail(f"{what}: not within {timeout_s:g} s (last seen: {last!r})")


def test_an_isolated_leader_stops_acknowledging_and_truncates_what_it_took_alone(cluster):
    nodes, net = cluster
    # The leader to isolate is one that is not the active controller, so that this scenario is
    # the partition leader's alone (the next one partitions the controller), and the preferred
    # replica of the partition used, so that it can be made its leader again after the heal.
    # Three partitions: their preferred replicas differ, so one of them fits.
    controller = until("an active controller", lambda: nodes.node(1).controller() > 0 and
                       nodes.node(1).controller())
    topic = f"iso-leader-{uuid.uuid4().hex[:6]}"
    client = admin(nodes.bootstrap)  # kept: a collected AdminClient fails its futures
    client.create_topics([NewTopic(topic, 3, 3)], request_timeout=30)[topic].result(timeout=40)
    assert wait_isr_full(nodes, 3, 30, topic) is None
    p, old = next((p, nodes.node(replicas[0])) for p, (_, leader, replicas, _)
                  in sorted(nodes.partitions(topic).items())
                  if replicas[0] != controller and leader == replicas[0])
    others = [n for n in nodes.nodes if n is not old]
    before = [f"before-{i}" for i in range(10)]
    assert sorted(produce(nodes.bootstrap, topic, p, before, "all").values()) == list(range(10))

    net.isolate(old.node_id)
    # acks=all through the isolated leader alone: its followers cannot fetch, so nothing it
    # takes reaches the high watermark; none may be acknowledged.
    isolated_all = produce(old.bootstrap, topic, p, [f"iso-all-{i}" for i in range(5)], "all")
    assert not any(isinstance(r, int) for r in isolated_all.values()), \
        f"acknowledged while isolated: {isolated_all}"
    # acks=1 through it: it may acknowledge (only its own disk is asked), and must later drop.
    # Kafka's leader does so too; these are what the heal must cut (after the unacknowledged
    # acks=all records, which it appended as well).
    alone = produce(old.bootstrap, topic, p, [f"iso-one-{i}" for i in range(5)], "1")
    assert all(isinstance(o, int) and o >= 10 for o in alone.values()), alone
    # The majority fences it, elects another leader and shrinks the ISR to the two of them;
    # acks=all writes through it are then acknowledged (min.insync.replicas 2).
    def replaced():
        _, leader, _, isr = partition_as_seen_by(others[0], topic, p)
        return leader in {n.node_id for n in others} and old.node_id not in isr and leader
    new_leader = until("a new leader and ISR without the isolated node", replaced)
    during = [f"during-{i}" for i in range(10)]
    delivered = produce(bootstrap(*others), topic, p, during, "all", timeout_s=20)
    assert sorted(delivered.values()) == list(range(10, 20)), delivered

    net.heal()
    # Every node's view, not the first answer: the healed node's own still shows the ISR of
    # before the isolation until it hears the controller again.
    until(f"every node showing {old.node_id} back in the ISR of partition {p}", lambda: all(
        sorted(partition_as_seen_by(n, topic, p)[3]) == [1, 2, 3] for n in nodes.nodes))
    # Led by the node that was isolated again, the partition holds exactly what was committed:
    # it cut its own acks=1 records at offset 10 and copied the majority's.
    # (No request_timeout: confluent-kafka 2.16's elect_leaders fails on any keyword.)
    # ELECTION_NOT_NEEDED: it already leads (auto.leader.rebalance.enable moved it back).
    elected = client.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p)])
    errors = [e for e in elected.result(timeout=40).values() if e is not None]
    codes = [e.code() if isinstance(e, KafkaError) else e.args[0].code() for e in errors]
    assert all(c == KafkaError.ELECTION_NOT_NEEDED for c in codes), errors
    until(f"{old.node_id} leading {topic} again (was {new_leader})",
          lambda: all(leader_as_seen_by(n, topic, p) == old.node_id for n in nodes.nodes))
    assert read_all(old.bootstrap, topic, p, 20) == before + during


def test_a_partitioned_controller_minority_cannot_change_metadata(cluster):
    nodes, net = cluster
    controller = until("an active controller", lambda: nodes.node(1).controller() > 0 and
                       nodes.node(1).controller())
    minority = nodes.node(controller)
    majority = [n for n in nodes.nodes if n is not minority]
    net.isolate(minority.node_id)
    refused = f"minority-{uuid.uuid4().hex[:6]}"
    created = f"majority-{uuid.uuid4().hex[:6]}"
    isolated = admin(minority.bootstrap)  # kept: a collected AdminClient fails its futures
    # RF 1: nothing but the missing quorum can refuse it.
    futures = isolated.create_topics(
        [NewTopic(refused, 1, 1)], request_timeout=10, operation_timeout=10)
    with pytest.raises(KafkaException):
        futures[refused].result(timeout=30)
    client = admin(bootstrap(*majority))
    # RF 2: the fenced node does not count (Kafka: INVALID_REPLICATION_FACTOR for 3 of 2).
    until("a topic created through the majority", lambda: client.create_topics(
        [NewTopic(created, 1, 2)], request_timeout=10)[created].result(timeout=20) is None)
    for n in majority:
        assert until(f"node {n.node_id} listing {created}",
                     lambda n=n: created in n.metadata()["topics"])
    net.heal()
    until(f"the healed node {minority.node_id} listing {created}",
          lambda: created in minority.metadata()["topics"])
    nodes.wait_brokers(3, TAKEOVER_S)
    # What the minority was asked never happened, on any node, after the heal too.
    time.sleep(2)
    for n in nodes.nodes:
        listed = n.metadata()["topics"]
        assert refused not in listed, f"node {n.node_id} lists {refused}"
