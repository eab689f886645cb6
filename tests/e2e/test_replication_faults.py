"""Replicated partitions under faults (issue 14): three `rill` nodes on loopback (rill.shards=1),
real clients, real kill -9 and SIGSTOP/SIGCONT.

- A deposed leader holding records its followers never copied rejoins, cuts them away, and no
  consumer ever read them.
- Unclean leader election: refused by default (no leader, nothing lost), done when the topic
  allows it (the out-of-sync replica leads, and what only the old leader held is cut).
- A seeded random fault loop under an idempotent acks=all load: every acknowledged message is
  read back once, in produce order. RILL_FAULT_LOOP_SECONDS (default 160) bounds it,
  RILL_FAULT_LOOP_SEED replays one (the seed is printed).
- A reassignment copies a partition to new brokers, catches up and switches; the data is read
  from the new replicas after the old one is gone.
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from cluster import Cluster, node_metadata
from conftest import _BROKERS
from test_replication import (FAST, Recorder, bootstrap, check_no_loss_no_duplicate, consume_all,
                              create, leader_of, partitions, unique, wait_for, wait_isr)

ERR_LEADER_NOT_AVAILABLE = 5
PREFERRED = 0


class Nodes:
    """A started cluster whose nodes are SIGCONTed (if stopped) and stopped when it ends; any
    node's log that says "panicked" fails the test."""

    def __init__(self, tmp_path, **properties):
        self.cluster = Cluster(tmp_path, **properties)
        _BROKERS.extend(self.cluster.nodes)

    def __enter__(self) -> Cluster:
        self.cluster.start()
        return self.cluster

    def __exit__(self, *exc):
        for node in self.cluster.nodes:
            if node.alive():
                resume(node)
        self.cluster.stop()
        for node in self.cluster.nodes:
            assert "panicked" not in node.log_text(), f"node {node.node_id} panicked"


def pause(node) -> None:
    os.kill(node.proc.pid, signal.SIGSTOP)
    node.stopped = True


def resume(node) -> None:
    os.kill(node.proc.pid, signal.SIGCONT)
    node.stopped = False


def serving(c: Cluster) -> str:
    """Bootstrap over the nodes that run and are not stopped."""
    return ",".join(n.bootstrap for n in c.live_nodes() if not getattr(n, "stopped", False))


def produce_values(bootstrap_servers: str, topic: str, values: list[str], acks: str,
                   partition: int = 0, **extra) -> None:
    """Produce `values` (uncompressed) and assert every one was acknowledged."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap_servers, "acks": acks,
                  "compression.type": "none", "linger.ms": 0, **extra})
    for v in values:
        p.produce(topic, v.encode(), partition=partition,
                  on_delivery=lambda e, m: errors.append(e))
    assert p.flush(30) == 0, "messages still in flight"
    assert errors == [None] * len(values), errors[:5]


def read_values(bootstrap_servers: str, topic: str, partition: int = 0) -> list[str]:
    """Every value of the partition from its log start up to its high watermark, in offset
    order."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": unique("g"),
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        tp = TopicPartition(topic, partition)
        start, end = consumer.get_watermark_offsets(tp, timeout=15)
        consumer.assign([TopicPartition(topic, partition, start)])
        got: list[str] = []
        deadline = time.monotonic() + 30
        while len(got) < end - start:
            assert time.monotonic() < deadline, f"read {len(got)} of {end}"
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append(msg.value().decode())
        return got
    finally:
        consumer.close()


def partition_bytes(node, topic: str, partition: int = 0) -> bytes:
    """Every segment file of the partition on `node`'s disk."""
    directory = node.data_dir / f"{topic}-{partition}"
    return b"".join(f.read_bytes() for f in sorted(directory.glob("*.log")))


def cuts(node, topic: str) -> list[tuple[int, int]]:
    """(cut, old end) of every divergent tail `node` cut for `topic` (its log says so)."""
    pattern = re.compile(r'cutting a divergent tail topic="?' + re.escape(topic)
                         + r'"? .*cut=(\d+) end=(\d+)')
    return [(int(m[1]), int(m[2])) for m in pattern.finditer(node.log_text())]


def elect_preferred(bootstrap_servers: str, topic: str, partition: int) -> int:
    """kafka-python's preferred ElectLeaders for one partition: its error code."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        response = admin.elect_leaders(PREFERRED, {topic: [partition]}, raise_errors=False)
    finally:
        admin.close()
    return next(p.error_code for t in response.replica_election_results
                for p in t.partition_result)


#: The deposed-leader test keeps the ISR whole while the followers are stopped: with two of
#: three voters stopped no metadata change can commit anyway, and a session long enough that
#: no node is fenced for the stop itself (a few seconds) keeps the resumed controller from
#: fencing the followers it did not hear from meanwhile.
DEPOSED = {"broker.session.timeout.ms": 10000, "broker.heartbeat.interval.ms": 1000,
           "replica.lag.time.max.ms": 30000}
#: How long a follower's Fetch may be parked at its leader (server/src/replication/fetcher.rs,
#: FETCH_WAIT_MS = 500), with room: after this, a stopped follower has no fetch outstanding,
#: so nothing appended later can reach it.
PARKED_FETCH_S = 2.0


@pytest.mark.timeout(150)
def test_a_deposed_leader_cuts_the_records_it_never_replicated_and_no_consumer_saw_them(
        tmp_path):
    with Nodes(tmp_path, **DEPOSED) as c:
        topic = unique("deposed")
        create(c, topic, 1)
        wait_isr(c, topic, 3)
        old = c.node(leader_of(c, topic, 0))
        followers = [n for n in c.nodes if n is not old]
        committed = [f"committed-{i}" for i in range(20)]
        produce_values(bootstrap(c), topic, committed, acks="all")
        # A consumer reading from the leader the whole time.
        consumer = Consumer({"bootstrap.servers": old.bootstrap, "group.id": unique("g"),
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen: list[str] = []

        def poll_for(seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    seen.append(msg.value().decode())

        wait_for(lambda: poll_for(0.5) or len(seen) >= len(committed), 20,
                 lambda: f"consumer read {seen}")
        # Both followers stop; the ISR stays whole (no quorum to change it), so the leader's
        # high watermark cannot pass what they hold.
        stopped_at = time.monotonic()
        for f in followers:
            pause(f)
        time.sleep(PARKED_FETCH_S)
        unreplicated = [f"unreplicated-{i}-{topic}" for i in range(10)]
        produce_values(old.bootstrap, topic, unreplicated, acks="1")
        poll_for(2.0)
        assert seen == committed, "a consumer read records the followers never had"
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, len(committed)), "the high watermark passed the ISR"
        consumer.close()
        old.kill9()
        for f in followers:
            resume(f)
        assert time.monotonic() - stopped_at < DEPOSED["broker.session.timeout.ms"] / 1000 - 2, \
            "the followers were stopped longer than this test's premise allows"
        # The old leader had them on disk when it died.
        on_disk = partition_bytes(old, topic)
        assert all(v.encode() in on_disk for v in unreplicated)
        wait_for(lambda: leader_of(c, topic, 0) in [f.node_id for f in followers], 45,
                 lambda: f"no follower took over: {partitions(c, topic)}")
        # The new leader writes other records at those offsets.
        later = [f"later-{i}" for i in range(20)]
        produce_values(bootstrap(c), topic, later, acks="all")
        old.start()
        # (Asked of a follower: the restarted node answers from its stale image until it
        # catches up with the metadata log.)
        wait_for(lambda: sorted(as_seen_by(followers[0], topic)[0][3]) == [1, 2, 3]
                 and cuts(old, topic), 45,
                 lambda: f"not rejoined: {as_seen_by(followers[0], topic)}")
        assert cuts(old, topic) == [(len(committed), len(committed) + len(unreplicated))], \
            old.log_tail()
        on_disk = partition_bytes(old, topic)
        assert not any(v.encode() in on_disk for v in unreplicated), "the tail was not cut"
        # Leading again (it is the preferred replica), it serves exactly the replicated log.
        assert elect_preferred(bootstrap(c), topic, 0) == 0
        wait_for(lambda: as_seen_by(followers[0], topic)[0][1] == old.node_id, 20,
                 lambda: f"the old leader did not lead again: {as_seen_by(followers[0], topic)}")
        # The followers' Metadata names it leader before it has taken the role itself (each
        # node applies the metadata log on its own, as in Kafka): until then it answers
        # NOT_LEADER_OR_FOLLOWER, which a client retries.
        assert read_values_when_led(old, topic) == committed + later


def read_values_when_led(node, topic: str, partition: int = 0,
                         timeout_s: float = 20.0) -> list[str]:
    """read_values from `node`, retried while it answers NOT_LEADER_OR_FOLLOWER (it has not yet
    applied the leadership other nodes already show); any other error fails at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return read_values(node.bootstrap, topic, partition)
        except KafkaException as e:
            if (e.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION
                    or time.monotonic() > deadline):
                raise
            time.sleep(0.2)


def as_seen_by(node, topic: str) -> dict:
    """{partition: (error, leader, replicas, isr)} as `node` answers Metadata."""
    return node_metadata(node)["topics"].get(topic, (None, {}))[1]


def leader_and_isr(node, topic: str, partition: int) -> tuple[int, list[int], int]:
    """(leader, isr, partition error) as `node` answers Metadata."""
    error, leader, _, isr = as_seen_by(node, topic)[partition]
    return leader, sorted(isr), error


@pytest.mark.timeout(150)
def test_unclean_election_is_refused_by_default_and_done_when_the_topic_allows_it(tmp_path):
    """Two topics on the same two replicas [L, F]: F is stopped until it leaves the ISR, L takes
    acks=all writes alone (min.insync.replicas=1) and is killed. Neither partition has a
    leader (clients get LEADER_NOT_AVAILABLE), even with F back. Allowing unclean election on
    one topic makes F lead it at once, without what only L held; the other stays leaderless
    until L returns and leads it with everything. L then cuts its unreplicated tail of the
    first."""
    with Nodes(tmp_path, **FAST) as c:
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        clean, unclean = unique("clean"), unique("unclean")
        configs = {"min.insync.replicas": "1"}
        admin.create_topics([NewTopic(clean, 1, 2, config=configs)])[clean].result(15)
        admin.create_topics([NewTopic(unclean, 6, 2, config=configs)])[unclean].result(15)
        wait_isr(c, clean, 2)
        wait_isr(c, unclean, 2)
        _, l_id, replicas, _ = partitions(c, clean)[0]
        # Round-robin placement: of the two partitions L leads, one has F as its follower.
        same = [p for p, s in partitions(c, unclean).items() if s[2] == replicas]
        assert same, (replicas, partitions(c, unclean))
        p = same[0]
        leader, follower = c.node(replicas[0]), c.node(replicas[1])
        # The third node is never faulted: it answers Metadata from a current image (a node
        # just restarted or resumed answers from its stale one until it catches up).
        g = next(n for n in c.nodes if n.node_id not in replicas)
        assert leader.node_id == l_id
        first = [f"first-{i}" for i in range(10)]
        produce_values(bootstrap(c), clean, first, acks="all")
        produce_values(bootstrap(c), unclean, first, acks="all", partition=p)
        pause(follower)
        wait_for(lambda: leader_and_isr(g, clean, 0)[1] == [leader.node_id]
                 and leader_and_isr(g, unclean, p)[1] == [leader.node_id], 30,
                 lambda: f"ISR did not shrink: {as_seen_by(g, clean)}")
        alone = [f"alone-{i}" for i in range(10)]
        produce_values(leader.bootstrap, clean, alone, acks="all")
        produce_values(leader.bootstrap, unclean, alone, acks="all", partition=p)
        leader.kill9()
        resume(follower)
        c.wait_brokers(2, timeout_s=30)
        wait_for(lambda: leader_and_isr(g, clean, 0)[0] == -1
                 and leader_and_isr(g, unclean, p)[0] == -1, 30,
                 lambda: f"still led: {as_seen_by(g, clean)} {as_seen_by(g, unclean)}")
        assert leader_and_isr(g, clean, 0) == (-1, [leader.node_id], ERR_LEADER_NOT_AVAILABLE)
        errors = []
        refused = Producer({"bootstrap.servers": bootstrap(c), "acks": "all",
                            "message.timeout.ms": 3000})
        refused.produce(clean, b"refused", partition=0, on_delivery=lambda e, m: errors.append(e))
        refused.flush(10)
        assert errors and errors[0] is not None, errors
        # Allowed on one topic: its out-of-sync replica leads at once; the other stays
        # leaderless (the same decision refused it).
        # (AlterConfigs replaces the topic's configs: min.insync.replicas is named again.)
        resource = ConfigResource("topic", unclean,
                                  set_config={"unclean.leader.election.enable": "true", **configs})
        admin = AdminClient({"bootstrap.servers": serving(c)})
        admin.alter_configs([resource])[resource].result(15)
        wait_for(lambda: leader_and_isr(g, unclean, p)[0] == follower.node_id, 20,
                 lambda: f"no unclean election: {as_seen_by(g, unclean)}")
        assert leader_and_isr(g, unclean, p)[:2] == (follower.node_id, [follower.node_id])
        assert leader_and_isr(g, clean, 0)[0] == -1, as_seen_by(g, clean)
        assert read_values(bootstrap(c), unclean, p) == first, "unclean: only what F held"
        after = [f"after-{i}" for i in range(10)]
        produce_values(bootstrap(c), unclean, after, acks="all", partition=p)
        # L returns: it leads the partition only it held, with everything acknowledged, and
        # follows the other one, cutting what it alone had.
        leader.start()
        wait_for(lambda: leader_and_isr(g, clean, 0)[0] == leader.node_id, 30,
                 lambda: f"L does not lead again: {as_seen_by(g, clean)}")
        assert read_values(bootstrap(c), clean) == first + alone, "nothing lost by default"
        wait_for(lambda: leader_and_isr(g, unclean, p)[1] == sorted(replicas), 45,
                 lambda: f"L did not rejoin: {as_seen_by(g, unclean)}")
        assert cuts(leader, unclean) == [(len(first), len(first) + len(alone))], \
            leader.log_tail()
        assert read_values(bootstrap(c), unclean, p) == first + after


FAULT_LOOP_S = float(os.environ.get("RILL_FAULT_LOOP_SECONDS", "160"))


@pytest.mark.timeout(int(FAULT_LOOP_S) + 240)
def test_a_seeded_random_fault_loop_loses_duplicates_and_reorders_no_acknowledged_message(
        tmp_path):
    """kill -9 and restart, SIGSTOP for up to 6 s (past replica.lag.time.max.ms and the broker
    session) then SIGCONT, or a graceful restart: one node at a time, at random moments, while
    an idempotent acks=all producer writes to three partitions led on different nodes. Every
    message it sent must be acknowledged, and each partition must hold exactly the messages
    sent to it, once each, in send order."""
    seed = int(os.environ.get("RILL_FAULT_LOOP_SEED", random.randrange(1 << 32)))
    print(f"fault loop: RILL_FAULT_LOOP_SEED={seed}, {FAULT_LOOP_S:.0f} s")
    rng = random.Random(seed)
    faults: list[str] = []
    try:
        with Nodes(tmp_path, **FAST) as c:
            topic = unique("faults")
            create(c, topic, 3)
            wait_isr(c, topic, 3)
            rec = Recorder(c, topic, 3)
            writer = threading.Thread(target=rec.run)
            writer.start()
            try:
                deadline = time.monotonic() + FAULT_LOOP_S
                while time.monotonic() < deadline:
                    time.sleep(rng.uniform(0.2, 3.0))
                    node = rng.choice(c.nodes)
                    fault = rng.choice(["kill -9", "SIGSTOP", "restart"])
                    pause_s = rng.uniform(0.1, 6.0 if fault == "SIGSTOP" else 3.0)
                    faults.append(f"{fault} node {node.node_id} for {pause_s:.1f} s")
                    if fault == "kill -9":
                        node.kill9()
                        time.sleep(pause_s)
                        node.start()
                    elif fault == "SIGSTOP":
                        pause(node)
                        time.sleep(pause_s)
                        resume(node)
                    else:
                        assert node.stop() == 0, f"node {node.node_id} did not stop cleanly"
                        time.sleep(pause_s)
                        node.start()
                    c.wait_brokers(3, timeout_s=60)
            finally:
                rec.stop.set()
                writer.join()
            wait_isr(c, topic, 3, timeout_s=60)
            rec.finish()
            got = consume_all(c, topic, 3)
            check_no_loss_no_duplicate(rec, got)
            for p in range(3):
                assert got[p] == list(range(rec.next[p])), \
                    f"partition {p}: {len(got[p])} records for {rec.next[p]} sent"
    except BaseException:
        print(f"fault loop seed {seed}; faults: {faults}")
        raise
    print(f"fault loop seed {seed}: {len(faults)} faults, {sum(rec.next)} messages, all there")


@pytest.mark.timeout(150)
def test_a_reassignment_copies_the_partition_to_new_brokers_and_switches_to_them(tmp_path):
    """A one-replica partition with data moves to the two other brokers
    (AlterPartitionReassignments) while an idempotent acks=all producer keeps writing: they copy
    it, catch up, join the ISR, the controller switches (a new replica leads) and the old
    replica's log is deleted. With the old broker killed, every acknowledged message is read
    from the new replicas, once, in order, and a consumer reading through the move never went
    back. Then down to one replica: new writes are read as on an unreplicated partition."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    with Nodes(tmp_path, **FAST) as c:
        topic = unique("moved")
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        admin.create_topics([NewTopic(topic, 1, 1, config={"min.insync.replicas": "1"})]
                            )[topic].result(15)
        wait_isr(c, topic, 1)
        old = c.node(leader_of(c, topic, 0))
        new = [n.node_id for n in c.nodes if n is not old]
        rec = Recorder(c, topic, 1)
        rec.produce(2000)
        assert rec.producer.flush(30) == 0
        # A consumer follows the partition through the move: its position only grows.
        consumer = Consumer({"bootstrap.servers": bootstrap(c), "group.id": unique("g"),
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        read: list[int] = []

        def poll_for(seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    read.append(int(msg.value().decode().split(":")[1]))

        poll_for(2)
        writer = threading.Thread(target=rec.run)
        writer.start()
        try:
            kadmin = KafkaAdminClient(bootstrap_servers=bootstrap(c))
            try:
                tp = KTopicPartition(topic, 0)
                assert kadmin.alter_partition_reassignments({tp: new}) == {tp: None}
                wait_for(lambda: partitions(c, topic)[0][2] == new
                         and partitions(c, topic)[0][1] in new, 60,
                         lambda: f"no switch: {partitions(c, topic)} "
                                 f"{kadmin.list_partition_reassignments()}")
                assert kadmin.list_partition_reassignments() == {}
            finally:
                kadmin.close()
            moved_away = old.data_dir / f"{topic}-0"
            wait_for(lambda: not moved_away.exists(), 20,
                     lambda: f"{moved_away} still there")
            wait_isr(c, topic, 2, timeout_s=30)
            poll_for(2)
            old.kill9()
            time.sleep(2)
        finally:
            rec.stop.set()
            writer.join()
        rec.finish()
        poll_for(3)
        consumer.close()
        assert read == sorted(read) and len(read) == len(set(read)), "the consumer went back"
        got = consume_all(c, topic, 1)
        check_no_loss_no_duplicate(rec, got)
        assert got[0] == list(range(rec.next[0]))
        assert read == got[0][:len(read)]
        # Down to one replica: its high watermark follows its own log again. (Once the killed
        # broker's session ended: until then Metadata lists it and kafka-python's admin may
        # pick it.)
        c.wait_brokers(2, timeout_s=30)
        alone = leader_of(c, topic, 0)
        kadmin = KafkaAdminClient(bootstrap_servers=serving(c))
        try:
            tp = KTopicPartition(topic, 0)
            assert kadmin.alter_partition_reassignments({tp: [alone]}) == {tp: None}
        finally:
            kadmin.close()
        wait_for(lambda: partitions(c, topic)[0][2] == [alone], 20,
                 lambda: f"not down to {alone}: {partitions(c, topic)}")
        rec.produce(100)
        rec.finish()
        assert consume_all(c, topic, 1)[0] == list(range(rec.next[0]))


@pytest.mark.timeout(120)
def test_delete_records_on_the_leader_moves_every_replicas_log_start(tmp_path):
    """DeleteRecords is answered by the leader; its followers take the new log start from
    their next fetches, so after the leader dies the new one starts there too."""
    with Nodes(tmp_path, **FAST) as c:
        topic = unique("deleted")
        create(c, topic, 1)
        wait_isr(c, topic, 3)
        produce_values(bootstrap(c), topic, [f"v-{i}" for i in range(100)], acks="all")
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        deleted = admin.delete_records([TopicPartition(topic, 0, 60)])
        assert next(iter(deleted.values())).result(15).low_watermark == 60
        old = c.node(leader_of(c, topic, 0))
        followers = [n for n in c.nodes if n is not old]
        wait_for(lambda: all("log start follows the leader's" in f.log_text() for f in followers),
                 20, lambda: "the followers' log start did not move")
        old.kill9()
        wait_for(lambda: as_seen_by(followers[0], topic)[0][1] in [f.node_id for f in followers],
                 30, lambda: f"no new leader: {as_seen_by(followers[0], topic)}")
        consumer = Consumer({"bootstrap.servers": serving(c), "group.id": unique("g")})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        finally:
            consumer.close()
        assert (low, high) == (60, 100)
        assert read_values(serving(c), topic) == [f"v-{i}" for i in range(60, 100)]
