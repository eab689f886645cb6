"""The admin side of replication (issue 14): DescribeLogDirs, ElectLeaders and the automatic
leader rebalance, partition reassignments, and the replication-factor settings.

Real `rill` processes and real clients (kafka-python's KafkaAdminClient speaks every one of
these APIs). Cluster tests use three nodes on loopback with rill.shards=1 (cluster.py).
"""

from __future__ import annotations

import os
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaProducer

from cluster import Cluster, node_metadata, wait_topic_everywhere
from conftest import _BROKERS


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def log_dir_sizes(described: list[dict]) -> dict[int, dict[tuple[str, int], int]]:
    """kafka-python's describe_log_dirs answer → {broker: {(topic, partition): size}}."""
    out: dict[int, dict[tuple[str, int], int]] = {}
    for per_broker in described:
        sizes = out.setdefault(per_broker["broker"], {})
        for log_dir in per_broker["log_dirs"]:
            assert log_dir["error_code"] == 0, log_dir
            for topic in log_dir["topics"]:
                for p in topic["partitions"]:
                    sizes[(topic["name"], p["partition_index"])] = p["partition_size"]
    return out


def produce(bootstrap: str, topic: str, count: int, partition: int, size: int = 100) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    for i in range(count):
        producer.send(topic, bytes([i % 256]) * size, partition=partition)
    producer.flush(30)
    producer.close()


def test_describe_log_dirs_reports_each_partitions_bytes_single_node(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        from kafka.admin import NewTopic
        admin.create_topics([NewTopic(topic_name, 3, 1)])
        produce(broker.bootstrap, topic_name, 50, partition=1)
        described = admin.describe_log_dirs()
        assert len(described) == 1 and len(described[0]["log_dirs"]) == 1
        log_dir = described[0]["log_dirs"][0]
        assert os.path.isabs(log_dir["log_dir"]), log_dir["log_dir"]
        sizes = log_dir_sizes(described)[described[0]["broker"]]
        # 50 records of 100 bytes (plus batch and record headers) on partition 1, none elsewhere.
        assert sizes[(topic_name, 0)] == 0 and sizes[(topic_name, 2)] == 0, sizes
        assert 5000 < sizes[(topic_name, 1)] < 5000 + 50 * 100, sizes
        if "total_bytes" in log_dir:
            assert log_dir["total_bytes"] >= log_dir["usable_bytes"] >= 0
        # Only what is asked: one partition of this topic, and an unknown topic left out.
        some = log_dir_sizes(admin.describe_log_dirs({topic_name: [1], "no-such-topic": [0]}))
        assert list(some.values())[0] == {(topic_name, 1): sizes[(topic_name, 1)]}
    finally:
        admin.close()


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("repladmin"))
    _BROKERS.extend(c.nodes)
    c.start()
    yield c
    codes = c.stop()
    assert codes == [0, 0, 0], f"exit codes on SIGTERM: {codes}"
    for node in c.nodes:
        assert "panicked" not in node.log_text(), f"node {node.node_id} panicked"


def test_describe_log_dirs_in_a_cluster_lists_each_brokers_replicas(cluster3):
    from kafka.admin import NewTopic
    topic = unique("logdirs")
    admin = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap(1))
    try:
        admin.create_topics([NewTopic(topic, 3, 2)])
        wait_topic_everywhere(cluster3, topic, 3, timeout_s=10)
        placement = node_metadata(cluster3.node(1))["topics"][topic][1]
        leader0 = placement[0][1]
        produce(cluster3.bootstrap(leader0), topic, 20, partition=0)
        sizes = log_dir_sizes(admin.describe_log_dirs([topic]))
        assert sorted(sizes) == [1, 2, 3]
        for node_id, held in sizes.items():
            expected = {(topic, p) for p, (_, _, replicas, _) in placement.items()
                        if node_id in replicas}
            # A follower reports its replica once it holds a log (replication creates it).
            assert set(held) <= expected, (node_id, held, placement)
            leads = {(topic, p) for p, (_, leader, _, _) in placement.items() if leader == node_id}
            assert leads <= set(held), (node_id, held, placement)
        assert sizes[leader0][(topic, 0)] > 20 * 100, sizes
    finally:
        admin.close()
