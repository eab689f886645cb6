"""Replication edges a demanding Kafka user meets (issue 14's leftovers): three `rill` nodes on
loopback (rill.shards=1), real clients, real stops, kill -9 and SIGSTOP/SIGCONT.

- A replica that was away while the leader's log start moved past its log end (DeleteRecords)
  is answered OFFSET_OUT_OF_RANGE, empties its log to start at the leader's log start (Kafka's
  truncateFullyAndStartAt), catches up and rejoins the ISR; made leader, it serves the same
  records from the same log start.
- acks=all waits for the ISR as long as the Produce request's timeout_ms says, then answers
  REQUEST_TIMED_OUT; the records stay written (as Kafka) and are read once the ISR holds them.
- A restarted broker serves (and names leaders) only once it caught up with the metadata
  quorum, as Kafka's broker does, so no client is sent to a leader that no longer leads; with
  no quorum in reach it keeps waiting, unready and saying why, and stops at once on SIGTERM.
- A follower pulls every partition it follows from one leader in one Fetch over one connection
  (Kafka's ReplicaFetcherThread), not one connection per partition.
- The high watermark is checkpointed (Kafka's replication-offset-checkpoint): after every node
  was killed -9, the partition's leader serves exactly what was committed before, neither
  nothing (a high watermark from scratch) nor the records only the old leader held.
- A replica that was away while its compacted topic was cleaned copies the leader's log with
  the gaps compaction left (whole batches gone in the middle of a segment), as Kafka's
  followers do, rejoins the ISR and, made leader, serves the same latest value of every key.
"""

from __future__ import annotations

import subprocess
import threading
import time
import urllib.error
import urllib.request

import kafka_wire as kw
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker import port_accepts
from test_admin_listener import metrics
from cluster import node_metadata
from test_replication import FAST, bootstrap, create, leader_of, partitions, unique, wait_for, \
    wait_isr
from test_replication_faults import (PARKED_FETCH_S, Nodes, elect_preferred, partition_bytes, pause,
                                     produce_values, read_values, read_values_when_led, resume,
                                     serving)

ERR_REQUEST_TIMED_OUT = 7


def produce_batches(bootstrap_servers: str, topic: str, values: list[str], per_batch: int) -> None:
    """Produce `values` acks=all in batches of `per_batch` records (one flush per batch), each
    acknowledged."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all",
                  "compression.type": "none", "linger.ms": 1000})
    for start in range(0, len(values), per_batch):
        for v in values[start:start + per_batch]:
            p.produce(topic, v.encode(), partition=0, on_delivery=lambda e, m: errors.append(e))
        assert p.flush(30) == 0, "messages still in flight"
    assert errors == [None] * len(values), errors[:5]


@pytest.mark.timeout(150)
def test_a_replica_below_the_leaders_log_start_starts_again_there_and_rejoins_the_isr(tmp_path):
    with Nodes(tmp_path, **FAST) as c:
        topic = unique("below-start")
        create(c, topic, 1)
        wait_isr(c, topic, 3)
        produce_batches(bootstrap(c), topic, [f"old-{i}" for i in range(30)], per_batch=10)
        away = c.node(leader_of(c, topic, 0))  # the preferred replica: elected back below
        assert away.stop() == 0
        wait_for(lambda: leader_of(c, topic, 0) not in (-1, away.node_id), 30,
                 lambda: f"no new leader: {partitions(c, topic)}")
        wait_isr(c, topic, 2)
        # Offsets 30..129 in batches of ten; the new log start (125) falls inside the last.
        produce_batches(bootstrap(c), topic, [f"new-{i}" for i in range(30, 130)], per_batch=10)
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        deleted = admin.delete_records([TopicPartition(topic, 0, 125)])
        assert next(iter(deleted.values())).result(15).low_watermark == 125
        away.start()
        wait_isr(c, topic, 3, timeout_s=30)
        assert "emptying it to start there" in away.log_text()
        assert b"old-" not in partition_bytes(away, topic), "the old records are gone"
        assert elect_preferred(bootstrap(c), topic, 0) == 0
        wait_for(lambda: leader_of(c, topic, 0) == away.node_id, 30,
                 lambda: f"{away.node_id} not leader: {partitions(c, topic)}")
        assert read_values(away.bootstrap, topic) == [f"new-{i}" for i in range(125, 130)]


#: A follower SIGSTOPped for a few seconds stays in the ISR and registered.
PATIENT = {"broker.session.timeout.ms": 10000, "broker.heartbeat.interval.ms": 1000,
           "replica.lag.time.max.ms": 30000}


def produce_raw(node, topic: str, value: bytes, timeout_ms: int) -> tuple[int, float]:
    """One acks=all Produce v3 of `value` to `node` with `timeout_ms`: (error code, seconds
    until the answer)."""
    conn = kw.Conn(node.host, node.port, timeout_s=60)
    try:
        body = kw.produce_v3_body({topic: {0: kw.record_batch([value])}}, acks=-1,
                                  timeout_ms=timeout_ms)
        start = time.monotonic()
        conn.send(kw.request(kw.API_PRODUCE, 3, 1, body))
        answer = conn.recv_response()
        took = time.monotonic() - start
    finally:
        conn.sock.close()
    assert answer is not None, "the leader closed the connection"
    return kw.parse_produce_v3(answer[1])[(topic, 0)], took


@pytest.mark.timeout(120)
def test_acks_all_times_out_after_the_requests_timeout_and_the_records_stay_written(tmp_path):
    with Nodes(tmp_path, **PATIENT) as c:
        topic = unique("ack-timeout")
        create(c, topic, 1)
        wait_isr(c, topic, 3)
        leader = c.node(leader_of(c, topic, 0))
        assert produce_raw(leader, topic, b"before", 10000)[0] == kw.ERR_NONE
        follower = next(n for n in c.nodes if n is not leader)
        pause(follower)
        try:
            code, took = produce_raw(leader, topic, b"timed-out", 700)
            assert code == ERR_REQUEST_TIMED_OUT, code
            assert 0.6 <= took < 5, f"answered after {took:.2f}s, asked to wait 0.7s"
            isr = partitions(c, topic)[0][3]
            assert follower.node_id in isr, f"the follower left the ISR meanwhile: {isr}"
        finally:
            resume(follower)
        # Kafka keeps a timed-out acks=all append: once the follower copies it, it is read.
        wait_for(lambda: read_values(serving(c), topic) == ["before", "timed-out"], 30,
                 lambda: f"read {read_values(serving(c), topic)}")


#: Sessions long enough that two nodes SIGSTOPped for a few seconds are not fenced for it.
RESTART = {"broker.session.timeout.ms": 6000, "broker.heartbeat.interval.ms": 1000,
           "replica.lag.time.max.ms": 3000}


@pytest.mark.timeout(150)
def test_a_restarted_broker_serves_only_once_it_caught_up_with_the_metadata_quorum(tmp_path):
    """The leader is killed -9 and another takes over. It restarts while both other nodes are
    SIGSTOPped (no quorum: it cannot learn that it no longer leads): it must not listen with
    its stale image. Once they resume, it catches up, then listens, and its first Metadata
    names the new leader."""
    with Nodes(tmp_path, **RESTART) as c:
        topic = unique("stale")
        create(c, topic, 1)
        wait_isr(c, topic, 3)
        old = c.node(leader_of(c, topic, 0))
        others = [n for n in c.nodes if n is not old]
        old.kill9()
        wait_for(lambda: leader_of(c, topic, 0) in [n.node_id for n in others], 30,
                 lambda: f"no new leader: {partitions(c, topic)}")
        new_leader = leader_of(c, topic, 0)
        wait_isr(c, topic, 2)
        for n in others:
            pause(n)
        resumed = threading.Event()

        def resume_later():
            time.sleep(4)
            resumed.set()
            for n in others:
                resume(n)

        resumer = threading.Thread(target=resume_later)
        resumer.start()
        try:
            old.start()  # returns once it listens
            listened_after_resume = resumed.is_set()
        finally:
            resumer.join()
        assert listened_after_resume, "it listened before it could catch up (stale metadata)"
        assert "caught up with the metadata quorum" in old.log_text()
        leader = node_metadata(old)["topics"][topic][1][0][1]
        assert leader == new_leader, f"{old.node_id} names {leader}, not {new_leader}"



#: Sessions long enough that no node is fenced for being stopped a few seconds; high
#: watermarks checkpointed every 200 ms; a restarted node serves what it knows after 3 s
#: without a quorum (an operator's opt-in: by default it waits for one, as Kafka).
CHECKPOINTED = {"broker.session.timeout.ms": 10000, "broker.heartbeat.interval.ms": 1000,
                "replica.lag.time.max.ms": 30000,
                "replica.high.watermark.checkpoint.interval.ms": 200,
                "rill.metadata.catch.up.max.ms": 3000}


def checkpointed_high_watermark(node, topic: str, partition: int = 0) -> int | None:
    """The offset in `node`'s high-watermark-checkpoint file of the partition (8 bytes big
    endian, then their CRC-32C), None without one."""
    path = node.data_dir / f"{topic}-{partition}" / "high-watermark-checkpoint"
    return int.from_bytes(path.read_bytes()[:8], "big", signed=True) if path.exists() else None


@pytest.mark.timeout(120)
def test_a_leader_restarted_after_every_node_was_killed_serves_its_checkpointed_high_watermark(
        tmp_path):
    """20 records committed (acks=all), then 10 acks=1 records only the leader takes (its
    followers are stopped: the high watermark stays at 20). Every node is killed -9 a few
    checkpoint intervals later; each replica's checkpoint holds 20. The old leader comes back
    alone: with no quorum it serves, after rill.metadata.catch.up.max.ms, as the leader its
    metadata last named, and must serve exactly the 20 committed records: a high watermark recomputed from
    nothing served none, one taken from the log end would serve the 10 uncommitted ones."""
    with Nodes(tmp_path, **CHECKPOINTED) as c:
        topic = unique("hw-checkpoint")
        create(c, topic, 1)
        wait_isr(c, topic, 3)
        committed = [f"committed-{i}" for i in range(20)]
        produce_batches(bootstrap(c), topic, committed, per_batch=10)
        leader = c.node(leader_of(c, topic, 0))
        followers = [n for n in c.nodes if n is not leader]
        time.sleep(PARKED_FETCH_S)  # the followers' next fetch tells them the high watermark
        for f in followers:
            pause(f)
        time.sleep(PARKED_FETCH_S)
        produce_values(leader.bootstrap, topic, [f"unreplicated-{i}" for i in range(10)],
                       acks="1")
        time.sleep(1.0)  # five checkpoint intervals
        for n in c.nodes:
            n.kill9()
        assert [checkpointed_high_watermark(n, topic) for n in c.nodes] == [20, 20, 20]
        leader.start()  # no quorum: it serves once rill.metadata.catch.up.max.ms is over
        assert "not caught up with the metadata quorum within" in leader.log_text()
        assert read_values_when_led(leader, topic) == committed
        # Logged once the partition took its role, which may come after the node listens.
        assert "high watermark from its checkpoint" in leader.log_text()


#: Longer than the 10 s a restarted broker once waited before serving a stale image.
NO_QUORUM_S = 12


def readiness(node) -> tuple[int, str]:
    """(status, body) of the node's /health/ready."""
    url = f"http://{node.host}:{node.admin_port}/health/ready"
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.mark.timeout(150)
def test_a_restarted_broker_without_a_quorum_waits_unready_and_stops_on_sigterm(tmp_path):
    """A node is killed -9 and restarted while both other nodes are SIGSTOPped: with no quorum
    it cannot catch up, so however long that lasts it does not listen (its readiness probe says
    why, its log says so every 10 s), and SIGTERM stops it at once, exit 0, never having
    served. Once the others resume, it starts, catches up and serves."""
    with Nodes(tmp_path, **RESTART) as c:
        topic = unique("noquorum")
        create(c, topic, 1)
        wait_isr(c, topic, 3)
        victim = c.nodes[0]
        others = c.nodes[1:]
        victim.kill9()
        for n in others:
            pause(n)
        try:
            log_start = victim.spawn()
            began = time.monotonic()
            wait_for(lambda: victim.logged_since(log_start, "still catching up with the metadata"
                                                            " quorum, not serving"),
                     NO_QUORUM_S + 10, victim.log_tail)
            time.sleep(max(0.0, began + NO_QUORUM_S - time.monotonic()))
            assert victim.alive(), victim.log_tail()
            assert not victim.logged_since(log_start, "all shards listening"), victim.log_tail()
            assert not port_accepts(victim.host, victim.port), "it listens with a stale image"
            status, body = readiness(victim)
            assert status == 503 and "catching up with the metadata quorum" in body, body
            # Broker.stop fails the test if SIGTERM does not end it within STOP_TIMEOUT_S.
            assert victim.stop() == 0, victim.log_tail()
            assert victim.logged_since(log_start, "never served"), victim.log_tail()
        finally:
            for n in others:
                resume(n)
        victim.start()
        c.wait_brokers(3, timeout_s=60)
        assert "caught up with the metadata quorum" in victim.log_text()
        assert leader_of(c, topic, 0) != -1


def connections(from_node, to_node) -> int:
    """Established TCP connections `from_node`'s process holds to `to_node`'s client port."""
    out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True,
                         check=True).stdout
    return sum(1 for line in out.splitlines()
               if f"pid={from_node.proc.pid}," in line
               and line.split()[3] == f"127.0.0.1:{to_node.port}")


@pytest.mark.timeout(120)
def test_a_follower_pulls_every_partition_of_a_leader_over_one_connection(tmp_path):
    """30 partitions of three replicas spread their leaders over the three nodes: each node
    follows ~10 partitions of each other node, and pulls them all over one connection per
    leader (rill.shards=1: one fetcher per shard and leader), where it held one per partition.
    acks=all to every partition is answered, so every follower copies through it."""
    with Nodes(tmp_path, **FAST) as c:
        topic = unique("one-link")
        create(c, topic, 30)
        wait_isr(c, topic, 3)
        errors = []
        p = Producer({"bootstrap.servers": bootstrap(c), "acks": "all", "linger.ms": 5})
        for i in range(300):
            p.produce(topic, f"{i}".encode(), partition=i % 30,
                      on_delivery=lambda e, m: errors.append(e))
        assert p.flush(30) == 0, "messages still in flight"
        assert errors == [None] * 300, errors[:5]
        wait_isr(c, topic, 3)
        links = {(a.node_id, b.node_id): connections(a, b) for a in c.nodes for b in c.nodes
                 if a is not b}
        assert links == {pair: 1 for pair in links}, links


def produce_keyed(bootstrap_servers: str, topic: str, records: list[tuple[str, str]],
                  per_batch: int = 1) -> None:
    """Produce `records` acks=all in batches of `per_batch` (a flush each), each acknowledged."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all",
                  "compression.type": "none", "linger.ms": 1000})
    for start in range(0, len(records), per_batch):
        for key, value in records[start:start + per_batch]:
            p.produce(topic, value.encode(), key.encode(), partition=0,
                      on_delivery=lambda e, m: errors.append(e))
        assert p.flush(30) == 0, "a message still in flight"
    assert errors == [None] * len(records), errors[:5]


def read_keyed(bootstrap_servers: str, topic: str) -> list[tuple[int, str, str]]:
    """Every (offset, key, value) of partition 0 up to its end (offsets may have gaps)."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": unique("g"),
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, f"no end of partition after {got}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return got
                continue
            got.append((msg.offset(), msg.key().decode(), msg.value().decode()))
    finally:
        consumer.close()


@pytest.mark.timeout(150)
def test_a_replica_away_while_its_compacted_topic_was_cleaned_copies_the_gaps_and_rejoins_the_isr(
        tmp_path):
    with Nodes(tmp_path, **FAST, **{"log.cleaner.backoff.ms": 200}) as c:
        topic = unique("compacted-gaps")
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        admin.create_topics([NewTopic(topic, 1, 3, config={
            "cleanup.policy": "compact", "segment.ms": "1000",
            "min.cleanable.dirty.ratio": "0.01"})])[topic].result(15)
        wait_isr(c, topic, 3)
        away = c.node(leader_of(c, topic, 0))  # the preferred replica: elected back below
        assert away.stop() == 0
        wait_for(lambda: leader_of(c, topic, 0) not in (-1, away.node_id), 30,
                 lambda: f"no new leader: {partitions(c, topic)}")
        wait_isr(c, topic, 2)
        # Every key in one batch, then even keys five times more, one record per batch: the
        # clean keeps the first batch with its odd keys only (fewer records than offsets), and
        # single batches with gaps between them.
        first = [(f"k{k:02}", "v0") for k in range(20)]
        updates = [(f"k{k:02}", f"v{r}") for r in range(1, 6) for k in range(0, 20, 2)]
        produce_keyed(bootstrap(c), topic, first, per_batch=len(first))
        produce_keyed(bootstrap(c), topic, updates)
        written = first + updates
        time.sleep(1.1)  # segment.ms: the next append seals the segment holding every update
        produce_keyed(bootstrap(c), topic, [("sentinel", "end")])
        leader = c.node(leader_of(c, topic, 0))
        cleaned = 'rill_cleaner_cleans_total{result="done"}'
        wait_for(lambda: metrics(f"127.0.0.1:{leader.admin_port}").get(cleaned, 0) >= 1, 30,
                 lambda: f"the leader's cleaner did not run: {leader.log_tail(20)}")
        expected = read_keyed(leader.bootstrap, topic)
        # Under load segment.ms may have sealed more than one segment while producing, and the
        # last one may not be cleaned yet: the latest values are what counts, and the gaps.
        assert {k: v for _, k, v in expected} == dict(written + [("sentinel", "end")]), expected
        offsets = [o for o, _, _ in expected]
        assert offsets[0] > 0 or any(b > a + 1 for a, b in zip(offsets, offsets[1:])), \
            f"the clean left no gap: {offsets}"
        away.start()  # its log is empty: it fetches offset 0, the leader's first batch is past it
        wait_isr(c, topic, 3, timeout_s=30)
        assert elect_preferred(bootstrap(c), topic, 0) == 0
        wait_for(lambda: leader_of(c, topic, 0) == away.node_id, 30,
                 lambda: f"{away.node_id} not leader: {partitions(c, topic)}")
        assert read_keyed(away.bootstrap, topic) == expected
