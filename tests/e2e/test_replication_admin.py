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

from cluster import Cluster, node_metadata, running, wait_topic_everywhere
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


def produce(bootstrap: str, topic: str, count: int, partition: int, size: int = 100,
            acks: int | str = "all") -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=0)
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
    with running(Cluster(tmp_path_factory.mktemp("repladmin")), _BROKERS) as c:
        yield c


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


ERR_NONE = 0
ERR_UNKNOWN_TOPIC_OR_PARTITION = 3
ERR_PREFERRED_LEADER_NOT_AVAILABLE = 80
ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ERR_ELECTION_NOT_NEEDED = 84
PREFERRED, UNCLEAN = 0, 1


def elect(bootstrap: str, election: int, partitions: dict | None) -> dict[tuple[str, int], int]:
    """kafka-python's elect_leaders → {(topic, partition): error code}."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        response = admin.elect_leaders(election, partitions, raise_errors=False)
    finally:
        admin.close()
    assert getattr(response, "error_code", 0) == 0, response
    return {(t.topic, p.partition_id): p.error_code
            for t in response.replica_election_results for p in t.partition_result}


def test_elect_leaders_on_a_single_node_needs_no_election(broker, topic_name):
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 2, 1)])
    finally:
        admin.close()
    codes = elect(broker.bootstrap, PREFERRED, {topic_name: [0, 1, 5]})
    assert codes == {(topic_name, 0): ERR_ELECTION_NOT_NEEDED,
                     (topic_name, 1): ERR_ELECTION_NOT_NEEDED,
                     (topic_name, 5): ERR_UNKNOWN_TOPIC_OR_PARTITION}, codes


def leaders(node, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """{partition: (leader, replicas, isr)} as `node` answers Metadata."""
    parts = node_metadata(node)["topics"][topic][1]
    return {p: (leader, replicas, isr) for p, (_, leader, replicas, isr) in parts.items()}


def wait_for(what: str, check, timeout_s: float = 15.0):
    import time
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s}s"
        time.sleep(0.1)


@pytest.mark.timeout(120)
def test_elections_and_reassignments_through_the_controller_with_a_broker_down(tmp_path):
    """Preferred elections find nothing to do on fresh topics. With followers replicating, a
    killed leader's partitions move to the in-sync follower (a clean election); when the
    preferred replica returns and is back in the ISR, a preferred election moves leadership
    back. A reassignment onto the dead broker stays under way (listed) until cancelled; one
    whose target is in sync switches at once. (Refusing an unclean election needs an ISR of one
    at the moment the leader dies; the controller's rule is covered by rill-metadata's tests.)"""
    from kafka.admin import NewTopic
    c = Cluster(tmp_path, **{"broker.session.timeout.ms": 4000,
                             "broker.heartbeat.interval.ms": 1000})
    with running(c, _BROKERS):
        dis, en = unique("clean-only"), unique("unclean-ok")
        moved, shrunk = unique("moved"), unique("shrunk")
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap(1))
        admin.create_topics([NewTopic(moved, 3, 1), NewTopic(shrunk, 3, 2), NewTopic(dis, 3, 2),
                             NewTopic(en, 3, 2,
                                      topic_configs={"unclean.leader.election.enable": "true"})])
        admin.close()
        wait_topic_everywhere(c, dis, 3, timeout_s=10)
        wait_topic_everywhere(c, en, 3, timeout_s=10)
        fresh = elect(c.bootstrap(2), PREFERRED, None)
        assert {fresh[(t, p)] for t in (dis, en) for p in range(3)} == {ERR_ELECTION_NOT_NEEDED}
        controller = c.controller()
        victim = next(n.node_id for n in c.nodes if n.node_id != controller)
        survivor = c.node(controller)
        led = {t: next(p for p, (leader, _, _) in leaders(survivor, t).items() if leader == victim)
               for t in (dis, en)}

        def isr_full(t):
            _, replicas, isr = leaders(survivor, t)[led[t]]
            return sorted(isr) == sorted(replicas)

        wait_for("followers in sync", lambda: all(isr_full(t) for t in (dis, en)), 30)
        c.node(victim).kill9()
        wait_for("the in-sync followers lead the victim's partitions",
                 lambda: all(leaders(survivor, t)[led[t]][0] not in (-1, victim)
                             for t in (dis, en)), 30)
        leader, replicas, _ = leaders(survivor, en)[led[en]]
        assert leader in replicas and victim in replicas, (leader, replicas)
        # The new leader serves produce requests (acks=1: with the victim gone its ISR falls
        # under the cluster's min.insync.replicas=2, where acks=all is refused).
        produce(c.bootstrap(leader), en, 10, partition=led[en], acks=1)
        reassignments_with_a_broker_down(c, survivor, victim, moved, shrunk)
        # The preferred replica returns, catches up, rejoins the ISR, and an election moves
        # leadership back to it.
        c.node(victim).start()
        c.wait_brokers(3, timeout_s=20)
        wait_for("the returning replica back in the ISR", lambda: isr_full(en), 60)
        codes = elect(survivor.bootstrap, PREFERRED, {en: [led[en]]})
        assert codes == {(en, led[en]): ERR_NONE}, codes
        wait_for("the preferred replica leads again",
                 lambda: leaders(survivor, en)[led[en]][0] == victim)


def reassignments_with_a_broker_down(c: Cluster, survivor, victim: int, moved: str,
                                     shrunk: str) -> None:
    from kafka import TopicPartition
    from kafka.errors import (InvalidReplicationAssignmentError, NoReassignmentInProgressError,
                              UnknownTopicOrPartitionError)
    admin = KafkaAdminClient(bootstrap_servers=survivor.bootstrap)
    try:
        here = next(p for p, (_, replicas, _) in leaders(survivor, moved).items()
                    if replicas == [survivor.node_id])
        tp = TopicPartition(moved, here)
        assert admin.list_partition_reassignments() == {}
        # Onto the dead broker: under way (it cannot catch up) and listed by every live node.
        assert admin.alter_partition_reassignments({tp: [survivor.node_id, victim]}) == {tp: None}
        ongoing = {"replicas": [survivor.node_id, victim], "adding_replicas": [victim],
                   "removing_replicas": []}
        assert admin.list_partition_reassignments() == {tp: ongoing}
        assert admin.list_partition_reassignments({moved: [here]}) == {tp: ongoing}
        assert leaders(survivor, moved)[here][1] == [survivor.node_id, victim]
        # Cancelled: back to where it was; a second cancel finds nothing.
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        assert admin.list_partition_reassignments() == {}
        assert leaders(survivor, moved)[here][1] == [survivor.node_id]
        assert admin.alter_partition_reassignments({tp: None}) == {
            tp: NoReassignmentInProgressError}
        bad = admin.alter_partition_reassignments({tp: [survivor.node_id, 99],
                                                   TopicPartition(moved, 7): [victim]})
        assert bad == {tp: InvalidReplicationAssignmentError,
                       TopicPartition(moved, 7): UnknownTopicOrPartitionError}, bad
        # Down to its leader alone: the target is in the ISR, so it switches at once.
        # (Round-robin placement: exactly one partition has both replicas on live brokers.)
        p, (leader, replicas, _) = next((p, s) for p, s in leaders(survivor, shrunk).items()
                                        if victim not in s[1])
        assert len(replicas) == 2
        follower = c.node(next(r for r in replicas if r != leader))
        # The follower's log exists (DescribeLogDirs opens it on every replica until replication
        # does), then goes once the reassignment drops that replica.
        admin.describe_log_dirs({shrunk: [p]})
        moved_away = follower.data_dir / f"{shrunk}-{p}"
        assert moved_away.is_dir()
        tp = TopicPartition(shrunk, p)
        assert admin.alter_partition_reassignments({tp: [leader]}) == {tp: None}
        assert leaders(survivor, shrunk)[p][:2] == (leader, [leader])
        wait_for("the dropped replica's log deleted", lambda: not moved_away.exists(), 5)
        assert (c.node(leader).data_dir / f"{shrunk}-{p}").is_dir()
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
