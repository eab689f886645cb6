"""Coordinator state survives a coordinator's death (issue 14): `__consumer_offsets` and
`__transaction_state` are replicated partitions; the broker that becomes leader of one loads
its groups' committed offsets and its transactional ids' state before answering for them.

Three `rill` nodes on loopback (rill.shards=1), short sessions (test_replication.FAST), real
clients (confluent-kafka), kill -9 of the coordinator's process.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

import kafka_wire as kw
from cluster import Cluster, running
from conftest import _BROKERS
from test_groups import KILLABLE
from test_replication import bootstrap, cluster, create, unique, wait_isr  # noqa: F401
from test_replication_admin import PREFERRED, elect, log_dir_sizes
from test_transactions import read_all
from test_transactions_cluster import GROUP, TRANSACTION, find_coordinator

MESSAGES = 300
PARTITIONS = 3


def live_coordinator(c, key: str, key_type: int, timeout_s: float = 40.0) -> int:
    """The coordinator every live node names for `key`, once they agree on a live one."""
    deadline = time.monotonic() + timeout_s
    answers = {}
    while time.monotonic() < deadline:
        nodes = c.live_nodes()
        answers = {n.node_id: find_coordinator(n, key, key_type) for n in nodes}
        named = {node_id for error, node_id in answers.values() if error == 0}
        live = {n.node_id for n in nodes}
        if all(e == 0 for e, _ in answers.values()) and len(named) == 1 and named <= live:
            return named.pop()
        time.sleep(0.2)
    raise AssertionError(f"no live coordinator for {key}: {answers}")


def produce(c, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap(c), "acks": "all"})
    for i in range(MESSAGES):
        p.produce(topic, f"{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0


def consumer(c, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap(c), "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})


def consume(cons: Consumer, count: int, timeout_s: float = 60.0) -> list[tuple[int, int]]:
    """(partition, offset) of the next `count` messages."""
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} messages in {timeout_s}s"
        msg = cons.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append((msg.partition(), msg.offset()))
    return got


def commit_until_done(cons: Consumer, timeout_s: float = 30.0) -> list[TopicPartition]:
    """Commit the consumed positions synchronously. Retried only while the new offsets
    partition's ISR is still below min.insync.replicas (COORDINATOR_NOT_AVAILABLE, as Kafka)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return cons.commit(asynchronous=False)
        except KafkaException as e:
            assert time.monotonic() < deadline, f"commit failed for {timeout_s}s: {e}"
            time.sleep(0.3)


def test_a_group_resumes_from_its_committed_offsets_after_the_coordinator_is_killed(cluster):
    topic, group = unique("gfail"), unique("gfail-group")
    create(cluster, topic, PARTITIONS)
    wait_isr(cluster, topic, 3)
    produce(cluster, topic)

    first = consumer(cluster, group)
    first.subscribe([topic])
    consumed = consume(first, MESSAGES // 2)
    # A partition not read yet has no position to commit (-1001): it starts from the beginning.
    committed = {tp.partition: max(tp.offset, 0) for tp in commit_until_done(first)}
    assert all(tp.error is None for tp in first.committed(
        [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20))
    consume(first, 30)               # read past the commit, never committed
    old = live_coordinator(cluster, group, GROUP)
    cluster.node(old).kill9()        # the consumer dies with it: no LeaveGroup, no commit
    first.close()

    new = live_coordinator(cluster, group, GROUP)
    assert new != old
    second = consumer(cluster, group)
    second.subscribe([topic])
    rest = consume(second, MESSAGES - len(consumed))
    second.close()
    by_partition: dict[int, list[int]] = {}
    for p, o in rest:
        by_partition.setdefault(p, []).append(o)
    for p in range(PARTITIONS):
        # Exactly what was not committed: nothing before the commit again, nothing skipped.
        start, end = committed.get(p, 0), MESSAGES // PARTITIONS
        assert sorted(by_partition.get(p, [])) == list(range(start, end)), (
            f"partition {p}: committed {start}, read again {sorted(by_partition.get(p, []))[:5]}")
    assert sum(committed.values()) + len(rest) == MESSAGES
    # The commits live in a replicated partition of __consumer_offsets, which DescribeLogDirs
    # reports on every live replica.
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(cluster))
    try:
        sizes = log_dir_sizes(admin.describe_log_dirs({"__consumer_offsets": list(range(8))}))
    finally:
        admin.close()
    held = ("__consumer_offsets", kw.crc32c(group.encode()) % 8)
    assert sorted(sizes) == sorted(n.node_id for n in cluster.live_nodes()), sizes
    assert all(sizes[n].get(held, 0) > 0 for n in sizes), (held, sizes)


def test_a_member_keeps_its_generation_and_assignment_when_the_coordinator_is_killed(cluster):
    """The coordinator writes each completed rebalance to __consumer_offsets; the new one
    restores the group Stable with its generation and members. So a consumer that outlives
    its coordinator keeps heartbeating and committing with its old generation: no revoke, no
    new assignment, the same member id."""
    topic, group = unique("gkeep"), unique("gkeep-group")
    create(cluster, topic, PARTITIONS)
    wait_isr(cluster, topic, 3)
    produce(cluster, topic)
    events: list[str] = []
    cons = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     # Longer than the failover, so librdkafka never gives its session up.
                     "session.timeout.ms": 30000, "heartbeat.interval.ms": 500})
    cons.subscribe([topic], on_assign=lambda c, ps: events.append(f"assign {len(ps)}"),
                   on_revoke=lambda c, ps: events.append(f"revoke {len(ps)}"),
                   on_lost=lambda c, ps: events.append(f"lost {len(ps)}"))
    try:
        consume(cons, 60)
        commit_until_done(cons)
        assert events == [f"assign {PARTITIONS}"], events
        member = cons.memberid()
        old = live_coordinator(cluster, group, GROUP)
        cluster.node(old).kill9()
        new = live_coordinator(cluster, group, GROUP)
        assert new != old
        consume(cons, 60)
        # Accepted by the new coordinator with the old generation (a refused one would be
        # ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID and a rejoin: the events below would show it).
        done = {tp.partition: tp.offset for tp in commit_until_done(cons)}
        end = time.monotonic() + 5    # heartbeats to the new coordinator meanwhile
        while time.monotonic() < end:
            cons.poll(0.2)
        assert events == [f"assign {PARTITIONS}"], events
        assert cons.memberid() == member
        assert committed(cluster, group, topic) == done
    finally:
        cons.close()


def describe_when_loaded(admin, group: str, timeout_s: float = 40.0):
    """DescribeGroups once the coordinator answers (it loads its partition after a start)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return admin.describe_consumer_groups([group], request_timeout=10)[group].result()
        except KafkaException as e:
            assert time.monotonic() < deadline, f"DescribeGroups failed for {timeout_s}s: {e}"
            time.sleep(0.3)


@pytest.mark.timeout(180)
def test_a_group_emptied_by_session_expiry_comes_back_empty_after_a_restart(tmp_path):
    """A member killed without LeaveGroup: once its session expires the group is Empty, and
    the coordinator writes it so (as Kafka does). A restarted coordinator loads that Empty
    group, not the dead member, so a new member is assigned at once instead of waiting for
    the old session to run out a second time. One node with a one-replica
    __consumer_offsets: the coordinator restarts in place."""
    from confluent_kafka.admin import AdminClient, NewTopic
    session_ms = 10_000
    c = Cluster(tmp_path, size=1, **{"default.replication.factor": 1,
                                     "offsets.topic.replication.factor": 1,
                                     "min.insync.replicas": 1})
    with running(c, _BROKERS):
        topic, group = unique("gexpiry"), unique("gexpiry-group")
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
        # Committed offsets keep the group once it is Empty (a group with none is forgotten,
        # and described Dead, at once).
        simple = Consumer({"bootstrap.servers": bootstrap(c), "group.id": group})
        simple.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        simple.close()
        script = tmp_path / "killable.py"
        script.write_text(KILLABLE)
        proc = subprocess.Popen([sys.executable, str(script), bootstrap(c), group, topic,
                                 str(session_ms)], stdout=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            assert line.startswith("ASSIGNED 2"), line
            assert str(describe_when_loaded(admin, group).state).endswith("STABLE")
            proc.send_signal(signal.SIGKILL)        # no LeaveGroup: only the session can end
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
        deadline = time.monotonic() + session_ms / 1000 + 30
        while not str(describe_when_loaded(admin, group).state).endswith("EMPTY"):
            assert time.monotonic() < deadline, "the dead member's session never expired"
            time.sleep(0.3)

        c.node(1).restart(graceful=False)           # what was written must be on disk
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        described = describe_when_loaded(admin, group)
        assert str(described.state).endswith("EMPTY") and not described.members, (
            described.state, [m.member_id for m in described.members])
        fresh = consumer(c, group)
        try:
            fresh.subscribe([topic])
            subscribed = time.monotonic()
            while len(fresh.assignment()) < 2:
                # Not a speed bound: a restored dead member would hold the rebalance for its
                # whole session, restarted at load.
                assert time.monotonic() - subscribed < session_ms / 1000, \
                    "the new member waited for the dead one"
                fresh.poll(0.2)
            described = describe_when_loaded(admin, group)
            assert len(described.members) == 1, [m.member_id for m in described.members]
        finally:
            fresh.close()


def committed(c, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as its coordinator answers OffsetFetch."""
    cons = consumer(c, group)
    try:
        tps = cons.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        cons.close()
    assert all(tp.error is None for tp in tps), tps
    return {tp.partition: tp.offset for tp in tps}


def test_a_preferred_election_moves_the_coordinator_back_with_what_was_committed_meanwhile(
        cluster):
    """Leadership of the offsets partition moves twice: to a follower when the coordinator is
    killed, back to the returning broker by a preferred election (ElectLeaders). The returning
    broker loads at the new epoch what the interim coordinator committed."""
    topic, group = unique("gmove"), unique("gmove-group")
    create(cluster, topic, PARTITIONS)
    wait_isr(cluster, topic, 3)
    produce(cluster, topic)
    first = consumer(cluster, group)
    first.subscribe([topic])
    consume(first, 60)
    commit_until_done(first)
    first.close()
    preferred = live_coordinator(cluster, group, GROUP)
    cluster.node(preferred).kill9()

    interim = live_coordinator(cluster, group, GROUP)
    second = consumer(cluster, group)
    second.subscribe([topic])
    consume(second, 90)
    meanwhile = {tp.partition: tp.offset for tp in commit_until_done(second)}
    second.close()
    assert committed(cluster, group, topic) == meanwhile

    cluster.node(preferred).start()
    cluster.wait_brokers(3, timeout_s=20)
    offsets_partition = kw.crc32c(group.encode()) % 8
    deadline = time.monotonic() + 60
    while True:       # until the returning replica caught up and is back in the ISR
        codes = elect(bootstrap(cluster), PREFERRED, {"__consumer_offsets": [offsets_partition]})
        code = codes[("__consumer_offsets", offsets_partition)]
        if code == 0:
            break
        assert code == 80 and time.monotonic() < deadline, f"preferred election: {codes}"
        time.sleep(0.5)
    assert live_coordinator(cluster, group, GROUP) == preferred != interim
    assert committed(cluster, group, topic) == meanwhile


#: InitProducerId answers a client retries: the coordinator is loading, moved, or finishing
#: (aborting) the id's open transaction.
RETRIABLE = {14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE",
             16: "NOT_COORDINATOR", 51: "CONCURRENT_TRANSACTIONS"}


def init_producer_id(c, transactional_id: str, timeout_s: float = 40.0) -> tuple[int, int]:
    """InitProducerId v0 asked of the id's coordinator (raw wire: the epoch is visible):
    (producer id, epoch). Retriable answers are asked again, as every client does."""
    deadline = time.monotonic() + timeout_s
    while True:
        node = c.node(live_coordinator(c, transactional_id, TRANSACTION))
        with kw.Conn(node.host, node.port) as conn:
            conn.send(kw.request(kw.API_INIT_PRODUCER_ID, 0, 9,
                                 kw.init_producer_id_v0_body(transactional_id)))
            answer = conn.recv_response()
        assert answer is not None
        error, pid, epoch = kw.parse_init_producer_id_v0(answer[1])
        if error == 0:
            return pid, epoch
        assert error in RETRIABLE and time.monotonic() < deadline, f"InitProducerId: {error}"
        time.sleep(0.2)


def transactional(c, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap(c), "transactional.id": transactional_id,
                  "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
    p.init_transactions(60)
    return p


def test_transactions_survive_a_coordinator_kill(cluster):
    """An open transaction is aborted by the new coordinator when the id is initialised again
    (its epoch bumped: the old producer is fenced); a committed one stays committed and its
    producer goes on with the new coordinator."""
    topic = unique("tfail")
    create(cluster, topic, 1)
    wait_isr(cluster, topic, 3)
    open_id = unique("tx-open")
    pid, epoch = init_producer_id(cluster, open_id)
    old = live_coordinator(cluster, open_id, TRANSACTION)
    # Another id with the same coordinator, whose transaction commits before the kill.
    done_id = next(i for i in (unique("tx-done") for _ in range(200))
                   if live_coordinator(cluster, i, TRANSACTION) == old)

    done = transactional(cluster, done_id)
    done.begin_transaction()
    for i in range(5):
        done.produce(topic, f"committed-{i}".encode(), partition=0)
    done.commit_transaction(60)

    opened = transactional(cluster, open_id)     # epoch + 1
    opened.begin_transaction()
    for i in range(5):
        opened.produce(topic, f"open-{i}".encode(), partition=0)
    assert opened.flush(60) == 0                 # written, never committed
    # The state partitions are replicated with acks=all: kill the coordinator now.
    cluster.node(old).kill9()

    assert live_coordinator(cluster, open_id, TRANSACTION) != old
    again_pid, again_epoch = init_producer_id(cluster, open_id)
    assert again_pid == pid, "the id kept its producer id across the move"
    assert again_epoch >= epoch + 2, (
        f"epoch {again_epoch} after {epoch}, one init and a fence: the open transaction's "
        "state was lost")
    with pytest.raises(KafkaException):
        opened.commit_transaction(30)            # fenced by the bump

    done.begin_transaction()                     # its state moved with the partition
    for i in range(5, 8):
        done.produce(topic, f"committed-{i}".encode(), partition=0)
    done.commit_transaction(60)

    values = read_all(bootstrap(cluster), topic, "read_committed")
    assert values == [f"committed-{i}" for i in range(8)], values
