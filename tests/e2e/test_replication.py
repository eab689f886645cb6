"""Replicated partitions (issue 14): three `rill` nodes on loopback (rill.shards=1), topics with
three replicas, followers pulling with Kafka's follower Fetch, the ISR and high watermark kept by
each leader, acks=all answered once the ISR holds a batch.

Faults are real: kill -9 and SIGSTOP/SIGCONT of whole processes. Sessions are short
(broker.session.timeout.ms=4000) and replica.lag.time.max.ms is 3000 so each test stays
bounded. The seeded fault loop is in test_replication_faults.py.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from cluster import Cluster, node_metadata
from conftest import _BROKERS

FAST = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 1000,
        "replica.lag.time.max.ms": 3000}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, **FAST)
    _BROKERS.extend(c.nodes)
    c.start()
    yield c
    for node in c.nodes:
        if node.alive():
            try:
                os.kill(node.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    c.stop()
    for node in c.nodes:
        assert "panicked" not in node.log_text(), f"node {node.node_id} panicked"


def create(c: Cluster, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(15)


def bootstrap(c: Cluster) -> str:
    return ",".join(n.bootstrap for n in c.live_nodes())


def partitions(c: Cluster, topic: str) -> dict:
    """{partition: (error, leader, replicas, isr)} as a live, running node sees it."""
    for node in c.live_nodes():
        if node.proc is not None and not getattr(node, "stopped", False):
            return node_metadata(node)["topics"].get(topic, (None, {}))[1]
    raise AssertionError("no live node")


def wait_for(what, timeout_s: float, describe) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, describe()
        time.sleep(0.1)


def wait_isr(c: Cluster, topic: str, size: int, timeout_s: float = 20) -> None:
    wait_for(lambda: (p := partitions(c, topic)) and all(len(s[3]) == size and s[1] >= 0
                                                         for s in p.values()),
             timeout_s, lambda: f"ISR of {topic} not {size}: {partitions(c, topic)}")


class Recorder:
    """An idempotent acks=all producer writing `p:i` values (i counts per partition) and the
    values it was told are acknowledged."""

    def __init__(self, c: Cluster, topic: str, parts: int, **extra):
        self.topic, self.parts = topic, parts
        self.producer = Producer({"bootstrap.servers": bootstrap(c), "acks": "all",
                                  "enable.idempotence": True, "message.timeout.ms": 120000,
                                  "linger.ms": 5, **extra})
        self.next = [0] * parts
        self.acked: list[set[int]] = [set() for _ in range(parts)]
        self.failed: list[str] = []
        self.stop = threading.Event()

    def _done(self, err, msg):
        if err is not None:
            self.failed.append(str(err))
            return
        p, i = msg.value().decode().split(":")
        self.acked[int(p)].add(int(i))

    def produce(self, count: int) -> None:
        for _ in range(count):
            p = random.randrange(self.parts)
            self.producer.produce(self.topic, f"{p}:{self.next[p]}".encode(), partition=p,
                                  on_delivery=self._done)
            self.next[p] += 1
        self.producer.poll(0)

    def run(self) -> None:
        while not self.stop.is_set():
            self.produce(10)
            time.sleep(0.01)

    def finish(self) -> None:
        assert self.producer.flush(120) == 0, "messages still in flight after 120 s"
        assert not self.failed, self.failed[:5]


def consume_all(c: Cluster, topic: str, parts: int) -> list[list[int]]:
    """Every record of every partition, in offset order, read up to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap(c), "group.id": unique("g"),
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
                for p in range(parts)]
        consumer.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        got: list[list[int]] = [[] for _ in range(parts)]
        done = {p for p in range(parts) if ends[p] == 0}
        deadline = time.monotonic() + 60
        while len(done) < parts:
            assert time.monotonic() < deadline, f"read {[len(g) for g in got]} of {ends}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF and \
                        msg.offset() >= ends[msg.partition()]:
                    done.add(msg.partition())
                continue
            p, i = msg.value().decode().split(":")
            assert int(p) == msg.partition()
            got[msg.partition()].append(int(i))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return got
    finally:
        consumer.close()


def check_no_loss_no_duplicate(rec: Recorder, got: list[list[int]]) -> None:
    for p in range(rec.parts):
        assert len(got[p]) == len(set(got[p])), f"partition {p} holds duplicates"
        assert got[p] == sorted(got[p]), f"partition {p} out of produce order"
        lost = rec.acked[p] - set(got[p])
        assert not lost, f"partition {p} lost {len(lost)} acknowledged messages: {sorted(lost)[:10]}"


def leader_of(c: Cluster, topic: str, partition: int) -> int:
    return partitions(c, topic)[partition][1]


def test_kill9_of_the_leader_under_an_idempotent_acks_all_producer_loses_and_duplicates_nothing(
        cluster):
    topic = unique("failover")
    create(cluster, topic, 3)
    wait_isr(cluster, topic, 3)
    rec = Recorder(cluster, topic, 3)
    writer = threading.Thread(target=rec.run)
    writer.start()
    try:
        time.sleep(2)
        victim = cluster.node(leader_of(cluster, topic, 0))
        victim.kill9()
        wait_for(lambda: leader_of(cluster, topic, 0) not in (-1, victim.node_id), 20,
                 lambda: f"no new leader: {partitions(cluster, topic)}")
        time.sleep(2)
        victim.start()
        wait_isr(cluster, topic, 3, timeout_s=30)
        time.sleep(1)
    finally:
        rec.stop.set()
        writer.join()
    rec.finish()
    assert sum(len(a) for a in rec.acked) > 300
    check_no_loss_no_duplicate(rec, consume_all(cluster, topic, 3))


def test_a_stopped_follower_leaves_the_isr_acks_all_goes_on_and_it_rejoins(cluster):
    topic = unique("sigstop")
    create(cluster, topic, 1)
    wait_isr(cluster, topic, 3)
    leader = leader_of(cluster, topic, 0)
    follower = cluster.node(next(n for n in (1, 2, 3) if n != leader))
    rec = Recorder(cluster, topic, 1)
    rec.produce(50)
    rec.producer.flush(30)
    os.kill(follower.proc.pid, signal.SIGSTOP)
    follower.stopped = True
    try:
        wait_for(lambda: follower.node_id not in partitions(cluster, topic)[0][3], 20,
                 lambda: f"ISR did not shrink: {partitions(cluster, topic)}")
        rec.produce(50)
        assert rec.producer.flush(30) == 0
        assert len(rec.acked[0]) == 100, "acks=all goes on with min.insync.replicas=2"
    finally:
        os.kill(follower.proc.pid, signal.SIGCONT)
        follower.stopped = False
    wait_isr(cluster, topic, 3, timeout_s=30)
    rec.produce(50)
    rec.finish()
    check_no_loss_no_duplicate(rec, consume_all(cluster, topic, 1))


def test_a_one_replica_topic_refuses_acks_all_under_min_insync_replicas_2(cluster):
    """An ISR of one is below the cluster's min.insync.replicas=2: acks=all is refused with
    NOT_ENOUGH_REPLICAS (Kafka's answer), acks=1 goes on, and the topic's own
    min.insync.replicas=1 admits acks=all."""
    strict, relaxed = unique("rf1-strict"), unique("rf1-relaxed")
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    for name, configs in ((strict, {}), (relaxed, {"min.insync.replicas": "1"})):
        admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(15)
    wait_isr(cluster, strict, 1)
    wait_isr(cluster, relaxed, 1)

    def outcome(topic: str, acks: str):
        got = []
        p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": acks,
                      "message.timeout.ms": 10000, "retries": 0})
        p.produce(topic, b"x", partition=0, on_delivery=lambda e, m: got.append(e))
        p.flush(15)
        assert len(got) == 1, got
        return got[0]

    refused = outcome(strict, "all")
    assert refused is not None and refused.code() == KafkaError.NOT_ENOUGH_REPLICAS, refused
    assert outcome(strict, "1") is None
    assert outcome(relaxed, "all") is None


def test_with_two_of_three_killed_acks_all_is_refused_and_acks_1_goes_on(tmp_path):
    # Two controller-only voters keep the quorum (3 of 5) when two of the three brokers die.
    cluster = Cluster(tmp_path, size=5, roles={1: "controller", 2: "controller"}, **FAST)
    _BROKERS.extend(cluster.nodes)
    cluster.start()
    try:
        two_down(cluster)
    finally:
        cluster.stop()


def two_down(cluster: Cluster) -> None:
    topic = unique("two-down")
    create(cluster, topic, 1)
    wait_isr(cluster, topic, 3)
    leader = leader_of(cluster, topic, 0)
    for node in cluster.nodes:
        if node.node_id != leader and node.is_broker:
            node.kill9()
    wait_for(lambda: len(partitions(cluster, topic)[0][3]) == 1, 30,
             lambda: f"ISR did not shrink to the leader: {partitions(cluster, topic)}")
    errors = []
    p = Producer({"bootstrap.servers": cluster.node(leader).bootstrap, "acks": "all",
                  "message.timeout.ms": 3000, "retries": 0})
    p.produce(topic, b"refused", partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors and errors[0] is not None, errors
    assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errors
    acked = []
    p1 = Producer({"bootstrap.servers": cluster.node(leader).bootstrap, "acks": 1})
    p1.produce(topic, b"0:0", partition=0, on_delivery=lambda e, m: acked.append(e))
    assert p1.flush(10) == 0 and acked == [None], acked
    # min.insync.replicas lowered on the topic (AlterConfigs): the running partition takes it,
    # and acks=all goes on with the ISR of one.
    admin = AdminClient({"bootstrap.servers": cluster.node(leader).bootstrap})
    resource = ConfigResource("topic", topic, set_config={"min.insync.replicas": "1"})
    admin.alter_configs([resource])[resource].result(15)
    acked = []
    p = Producer({"bootstrap.servers": cluster.node(leader).bootstrap, "acks": "all",
                  "message.timeout.ms": 15000})
    p.produce(topic, b"0:1", partition=0, on_delivery=lambda e, m: acked.append(e))
    assert p.flush(20) == 0 and acked == [None], acked
