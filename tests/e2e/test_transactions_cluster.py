"""Transactions across the brokers of a cluster (issue 15 on issue 13's cluster): every broker
names the same coordinator for a transactional id (the leader of its `__transaction_state`
partition), markers reach partitions led by other brokers, and offsets sent to a transaction
reach a group coordinated by yet another broker. Three `rill` processes, rill.shards=1.
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as kw
from clients import CLIENT_TIMEOUT_S, producer, produce_all
from cluster import Cluster, node_metadata, wait_topic_everywhere
from conftest import _BROKERS
from test_transactions import read_all, visible_end

API_FIND_COORDINATOR = 10
GROUP, TRANSACTION = 0, 1
#: Kafka's partitions of the internal topics, as Rill places them (crc32c of the key).
INTERNAL_PARTITIONS = 8


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("txn-cluster3"),
                **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})
    _BROKERS.extend(c.nodes)
    c.start()
    yield c
    codes = c.stop()
    assert codes == [0, 0, 0], f"exit codes on SIGTERM: {codes}"
    for node in c.nodes:
        assert "panicked" not in node.log_text(), f"node {node.node_id} panicked"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(15)


def find_coordinator(node, key: str, key_type: int) -> tuple[int, int]:
    """FindCoordinator v1 asked of `node` itself: (error, node id)."""
    body = kw.kstring(key) + struct.pack(">b", key_type)
    with kw.Conn(node.host, node.port) as c:
        c.send(kw.request(API_FIND_COORDINATOR, 1, 3, body))
        resp = c.recv_response()
    assert resp is not None and resp[0] == 3
    data = resp[1]
    error, = struct.unpack_from(">h", data, 4)          # after throttle_time_ms
    msg_len, = struct.unpack_from(">h", data, 6)
    at = 8 + max(msg_len, 0)
    node_id, = struct.unpack_from(">i", data, at)
    return error, node_id


def coordinator(cluster, key: str, key_type: int) -> int:
    """The coordinator every node names for `key` (waits for the internal topic to exist)."""
    deadline = time.monotonic() + 30
    while True:
        answers = {n.node_id: find_coordinator(n, key, key_type) for n in cluster.nodes}
        if all(error == 0 for error, _ in answers.values()):
            named = {node_id for _, node_id in answers.values()}
            assert len(named) == 1, f"brokers disagree on the coordinator of {key}: {answers}"
            return named.pop()
        assert time.monotonic() < deadline, f"no coordinator for {key}: {answers}"
        time.sleep(0.2)


def leaders(cluster, topic: str) -> dict[int, int]:
    placement = node_metadata(cluster.node(1))["topics"][topic][1]
    return {p: leader for p, (_, leader, _, _) in placement.items()}


def test_a_transaction_commits_and_aborts_on_partitions_of_every_broker(cluster3):
    topic = unique("txn-spread")
    create(cluster3.bootstrap(1), topic, partitions=6)
    wait_topic_everywhere(cluster3, topic, 6)
    led = leaders(cluster3, topic)
    assert len(set(led.values())) >= 2, f"partitions all on one broker: {led}"
    tid = unique("tx")
    txn_coordinator = coordinator(cluster3, tid, TRANSACTION)
    # Bootstrap from a broker that is not the coordinator: the client must be sent there.
    other = next(n for n in cluster3.nodes if n.node_id != txn_coordinator)
    p = producer(other.bootstrap, **{"transactional.id": tid, "acks": "all"})
    p.init_transactions(CLIENT_TIMEOUT_S)
    for label, commit in (("c1", True), ("a", False), ("c2", True)):
        p.begin_transaction()
        for part in range(6):
            p.produce(topic, value=f"{label}-{part}".encode(), partition=part)
        p.flush(CLIENT_TIMEOUT_S)
        if commit:
            p.commit_transaction(CLIENT_TIMEOUT_S)
        else:
            p.abort_transaction(CLIENT_TIMEOUT_S)
    for part in range(6):
        reader = cluster3.node(led[part]).bootstrap
        assert read_all(reader, topic, "read_committed", part) == [f"c1-{part}", f"c2-{part}"]
        assert read_all(reader, topic, "read_uncommitted", part) == \
            [f"c1-{part}", f"a-{part}", f"c2-{part}"]
        # Three records and three markers; nothing left open on any broker.
        assert visible_end(reader, topic, "read_committed", part) == 6
    # A new producer of the id, through a third broker, fences the first one.
    again = producer(cluster3.bootstrap(txn_coordinator), **{"transactional.id": tid})
    again.init_transactions(CLIENT_TIMEOUT_S)
    p.begin_transaction()
    p.produce(topic, value=b"zombie", partition=0)
    with pytest.raises(Exception):
        p.commit_transaction(CLIENT_TIMEOUT_S)
    assert read_all(cluster3.node(led[0]).bootstrap, topic, "read_committed", 0) == \
        ["c1-0", "c2-0"]


def test_offsets_sent_to_a_transaction_reach_a_group_on_another_broker(cluster3):
    source, sink = unique("txn-src"), unique("txn-sink")
    create(cluster3.bootstrap(1), source, partitions=3)
    create(cluster3.bootstrap(2), sink, partitions=3)
    wait_topic_everywhere(cluster3, source, 3)
    wait_topic_everywhere(cluster3, sink, 3)
    tid = unique("tx")
    txn_coordinator = coordinator(cluster3, tid, TRANSACTION)
    # A group whose coordinator is another broker than the transaction's.
    group = None
    for _ in range(50):
        candidate = unique("g")
        if coordinator(cluster3, candidate, GROUP) != txn_coordinator:
            group = candidate
            break
    assert group is not None
    per_partition = 100
    feed = producer(cluster3.bootstrap(1), acks="all")
    for part in range(3):
        produce_all(feed, source, [(None, f"v{part}-{i}".encode()) for i in range(per_partition)],
                    partition=part)
    consumer = Consumer({"bootstrap.servers": cluster3.bootstrap(3), "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([source])
    p = producer(cluster3.bootstrap(2), **{"transactional.id": tid})
    p.init_transactions(CLIENT_TIMEOUT_S)
    done = 0
    deadline = time.monotonic() + 60
    try:
        while done < 3 * per_partition:
            assert time.monotonic() < deadline, f"transformed only {done}"
            msgs = [m for m in consumer.consume(100, timeout=0.5) if not m.error()]
            if not msgs:
                continue
            p.begin_transaction()
            positions = {}
            for m in msgs:
                p.produce(sink, value=b"out-" + m.value(), partition=m.partition())
                positions[m.partition()] = m.offset() + 1
            p.send_offsets_to_transaction(
                [TopicPartition(source, part, o) for part, o in positions.items()],
                consumer.consumer_group_metadata(), CLIENT_TIMEOUT_S)
            p.commit_transaction(CLIENT_TIMEOUT_S)
            done += len(msgs)
    finally:
        consumer.close()
    led = leaders(cluster3, sink)
    for part in range(3):
        out = read_all(cluster3.node(led[part]).bootstrap, sink, "read_committed", part)
        assert out == [f"out-v{part}-{i}" for i in range(per_partition)]
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap(1)})
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(source, q) for q in range(3)])]
    result = admin.list_consumer_group_offsets(request, require_stable=True)[group]
    committed = result.result(timeout=CLIENT_TIMEOUT_S).topic_partitions
    assert [tp.offset for tp in committed] == [per_partition] * 3
