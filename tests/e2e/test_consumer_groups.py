"""KIP-848 consumer groups (issue 29): confluent-kafka 2.16 with `group.protocol=consumer`
against ConsumerGroupHeartbeat, the server-side assignors and incremental reconciliation.

One broker for the module with short consumer-group sessions (3 s, heartbeats every 300 ms:
`group.consumer.*` lowered within their configured bounds), and a 3-node cluster for the
coordinator kill.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from broker import Broker
from clients import admin, create_topic
from conftest import _BROKERS
from test_groups import owned, seed

SESSION_MS = 3000
HEARTBEAT_MS = 300
CONSUMER_GROUP_PROPERTIES = {
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": 100,
}
WAIT_S = 30.0


@pytest.fixture(scope="module")
def kip848_broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("rill-kip848")
    props = root / "rill.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in CONSUMER_GROUP_PROPERTIES.items()))
    b = Broker(root / "data", root / "rill.log", config_path=props)
    _BROKERS.append(b)
    b.start()
    yield b
    assert b.stop() == 0, b.log_tail()
    assert "panicked" not in b.log_text(), b.log_tail()


def consumer(bootstrap: str, group: str, **conf) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **conf})


def poll_until(consumers, done, *, seen: list | None = None, commit: bool = False,
               timeout_s: float = WAIT_S, what: str = "condition"):
    """Poll every consumer round-robin until `done()`; each record's value goes to `seen` and,
    with `commit`, is committed synchronously before the next poll."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is None or m.error():
                continue
            if seen is not None:
                seen.append(m.value().decode())
            if commit:
                c.commit(message=m, asynchronous=False)
        if done():
            return
    raise AssertionError(f"timed out waiting for {what}: "
                         f"assignments={[sorted(owned(c)) for c in consumers]}")


def describe(bootstrap: str, group: str):
    """The group as ConsumerGroupDescribe shows it (confluent-kafka's admin client). A new
    coordinator answers COORDINATOR_LOAD_IN_PROGRESS until it loaded the group, as Kafka's does,
    and Kafka's Java admin client retries that; librdkafka's surfaces it, so it is retried
    here, for at most 15 s."""
    a = admin(bootstrap)
    deadline = time.monotonic() + 15
    while True:
        try:
            return a.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=10)
        except KafkaException as e:
            loading = e.args[0].code() == KafkaError.COORDINATOR_LOAD_IN_PROGRESS
            if not loading or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_six_partitions_go_six_then_three_three_then_six_with_nothing_read_twice(
        kip848_broker, topic_name):
    bootstrap = kip848_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    expected = seed(bootstrap, topic_name, 6, 40)
    group = f"g-{topic_name}"
    first, second = consumer(bootstrap, group), consumer(bootstrap, group)
    seen: list = []
    try:
        first.subscribe([topic_name])
        poll_until([first], lambda: len(owned(first)) == 6, seen=seen, commit=True,
                   what="the first member owns all six")
        second.subscribe([topic_name])
        # Both keep reading and committing every record while the partitions move.
        poll_until([first, second], lambda: len(owned(first)) == 3 and len(owned(second)) == 3,
                   seen=seen, commit=True, what="three and three")
        assert not owned(first) & owned(second)
        desc = describe(bootstrap, group)
        assert len(desc.members) == 2
        assert desc.partition_assignor == "uniform"
        first.close()
        poll_until([second], lambda: len(owned(second)) == 6 and len(seen) >= len(expected),
                   seen=seen, commit=True, what="the second member owns all six")
        # A little longer: a record read twice would show up now.
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            m = second.poll(0.05)
            if m is not None and not m.error():
                seen.append(m.value().decode())
    finally:
        second.close()
    dupes = [v for v, n in Counter(seen).items() if n > 1]
    assert not dupes, f"consumed more than once under synchronous commits: {dupes[:10]}"
    assert set(seen) == expected


def test_a_regex_subscription_picks_up_a_topic_created_later(kip848_broker, topic_name):
    bootstrap = kip848_broker.bootstrap
    prefix = f"rx-{topic_name}"
    create_topic(bootstrap, f"{prefix}-a", partitions=2)
    first = seed(bootstrap, f"{prefix}-a", 2, 3, tag="a")
    c = consumer(bootstrap, f"g-{prefix}")
    seen: list = []
    try:
        c.subscribe([f"^{prefix}-.*"])
        poll_until([c], lambda: len(seen) >= len(first), seen=seen, what="the first topic")
        create_topic(bootstrap, f"{prefix}-b", partitions=3)
        later = seed(bootstrap, f"{prefix}-b", 3, 3, tag="b")
        poll_until([c], lambda: len(seen) >= len(first) + len(later), seen=seen,
                   what="the topic created later")
        assert {t for t, _ in owned(c)} == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        c.close()
    assert set(seen) == first | later


def test_a_static_member_restart_keeps_its_partitions(kip848_broker, topic_name):
    bootstrap = kip848_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    group = f"g-{topic_name}"
    a = consumer(bootstrap, group, **{"group.instance.id": "a"})
    b = consumer(bootstrap, group, **{"group.instance.id": "b"})
    try:
        a.subscribe([topic_name])
        b.subscribe([topic_name])
        poll_until([a, b], lambda: len(owned(a)) == 3 and len(owned(b)) == 3, what="3 and 3")
        before_a, before_b = owned(a), owned(b)
        a.close()              # a static member's leave (epoch -2): it keeps its partitions
        # b is not given a's partitions while a is away (well within its 3 s session).
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            b.poll(0.05)
            assert owned(b) == before_b, "the away static member's partitions moved"
        a = consumer(bootstrap, group, **{"group.instance.id": "a"})
        a.subscribe([topic_name])
        poll_until([a, b], lambda: owned(a) == before_a, what="the restarted member's partitions")
        assert owned(b) == before_b
    finally:
        a.close()
        b.close()


KILLABLE = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    bootstrap, group, topic = sys.argv[1:4]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    announced = False
    while True:
        c.poll(0.1)
        if c.assignment() and not announced:
            print("ASSIGNED", len(c.assignment()), flush=True)
            announced = True
""")


def test_a_member_that_stops_heartbeating_is_fenced_after_its_session(
        kip848_broker, topic_name, tmp_path):
    bootstrap = kip848_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=4)
    group = f"g-{topic_name}"
    script = tmp_path / "killable.py"
    script.write_text(KILLABLE)
    proc = subprocess.Popen([sys.executable, str(script), bootstrap, group, topic_name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    survivor = consumer(bootstrap, group)
    try:
        survivor.subscribe([topic_name])
        poll_until([survivor], lambda: len(owned(survivor)) == 2, what="two members share it")
        assert len(describe(bootstrap, group).members) == 2
        proc.send_signal(signal.SIGKILL)   # no leave heartbeat: only the session can end it
        proc.wait(timeout=10)
        killed_at = time.monotonic()
        poll_until([survivor], lambda: len(owned(survivor)) == 4,
                   timeout_s=SESSION_MS / 1000 + 20, what="the survivor owns all four")
        waited = time.monotonic() - killed_at
        # Not a speed assertion: the dead member's partitions move only once its session ends.
        assert waited >= SESSION_MS / 1000 * 0.5, f"fenced after only {waited:.1f}s"
        desc = describe(bootstrap, group)
        assert len(desc.members) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
        survivor.close()


def test_commits_carry_the_member_epoch_and_groups_report_their_type(kip848_broker, topic_name):
    bootstrap = kip848_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=1)
    seed(bootstrap, topic_name, 1, 5)
    group = f"g-{topic_name}"
    c = consumer(bootstrap, group)
    try:
        c.subscribe([topic_name])
        seen: list = []
        poll_until([c], lambda: len(seen) >= 5, seen=seen, what="five records")
        committed = c.commit(asynchronous=False)
        assert [tp.offset for tp in committed] == [5]
        assert [tp.offset for tp in c.committed([TopicPartition(topic_name, 0)], timeout=10)] == [5]
        a = admin(bootstrap)   # kept alive until its future resolves
        listed = a.list_consumer_groups(request_timeout=10).result(timeout=10)
        types = {g.group_id: str(g.type) for g in listed.valid}
        assert group in types, (listed.valid, listed.errors)
        assert types[group].endswith("CONSUMER"), types[group]
        # A classic member may not join a consumer group that has members.
        classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "session.timeout.ms": 6000})
        try:
            classic.subscribe([topic_name])
            deadline = time.monotonic() + 10
            error = None
            while error is None and time.monotonic() < deadline:
                m = classic.poll(0.2)
                if m is not None and m.error():
                    error = m.error()
            assert error is not None and "INCONSISTENT_GROUP_PROTOCOL" in error.name(), error
        finally:
            classic.close()
    finally:
        c.close()
    # Once it has no members, it is still a consumer group (Empty) with its offsets.
    desc = describe(bootstrap, group)
    assert str(desc.state).endswith("EMPTY"), desc.state
    # A group that is none: ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND, and librdkafka
    # then asks DescribeGroups, which shows it Dead.
    assert str(describe(bootstrap, f"none-{topic_name}").state).endswith("DEAD")


@pytest.fixture
def kip848_cluster(tmp_path):
    from cluster import Cluster
    from test_replication import FAST
    c = Cluster(tmp_path, **FAST, **CONSUMER_GROUP_PROPERTIES)
    _BROKERS.extend(c.nodes)
    c.start()
    yield c
    c.stop()
    for node in c.nodes:
        assert "panicked" not in node.log_text(), f"node {node.node_id} panicked"


def test_the_group_resumes_at_its_committed_offsets_after_the_coordinator_is_killed(
        kip848_cluster):
    from test_coordinator_failover import (MESSAGES, PARTITIONS, commit_until_done, consume,
                                           live_coordinator, produce)
    from test_replication import bootstrap, create, unique, wait_isr
    from test_transactions_cluster import GROUP
    c = kip848_cluster
    topic, group = unique("kfail"), unique("kfail-group")
    create(c, topic, PARTITIONS)
    wait_isr(c, topic, 3)
    produce(c, topic)
    first = consumer(bootstrap(c), group)
    first.subscribe([topic])
    consumed = consume(first, MESSAGES // 2)
    committed = {tp.partition: max(tp.offset, 0) for tp in commit_until_done(first)}
    consume(first, 30)                 # read past the commit, never committed
    old = live_coordinator(c, group, GROUP)
    c.node(old).kill9()
    first.close()
    new = live_coordinator(c, group, GROUP)
    assert new != old
    second = consumer(bootstrap(c), group)
    second.subscribe([topic])
    rest = consume(second, MESSAGES - len(consumed))
    second.close()
    by_partition: dict[int, list[int]] = {}
    for p, o in rest:
        by_partition.setdefault(p, []).append(o)
    for p in range(PARTITIONS):
        start, end = committed.get(p, 0), MESSAGES // PARTITIONS
        assert sorted(by_partition.get(p, [])) == list(range(start, end)), (
            f"partition {p}: committed {start}, read {sorted(by_partition.get(p, []))[:5]}")
    assert sum(committed.values()) + len(rest) == MESSAGES


def test_a_member_keeps_its_assignment_and_position_when_the_coordinator_is_killed(
        kip848_cluster):
    """The group's records in __consumer_offsets (Kafka's ConsumerGroup* record types) let the
    new coordinator answer the member's next heartbeat at its epoch: it keeps its partitions and
    its fetch positions, so nothing read since its last commit is read again."""
    from test_coordinator_failover import MESSAGES, PARTITIONS, consume, live_coordinator, produce
    from test_replication import bootstrap, create, unique, wait_isr
    from test_transactions_cluster import GROUP
    c = kip848_cluster
    topic, group = unique("kkeep"), unique("kkeep-group")
    create(c, topic, PARTITIONS)
    wait_isr(c, topic, 3)
    produce(c, topic)
    member = consumer(bootstrap(c), group)
    try:
        member.subscribe([topic])
        before = consume(member, MESSAGES // 2)
        epoch_before = describe(bootstrap(c), group).members[0]
        old = live_coordinator(c, group, GROUP)
        c.node(old).kill9()
        assert live_coordinator(c, group, GROUP) != old
        after = consume(member, MESSAGES - len(before))
        seen = before + after
        assert len(set(seen)) == len(seen) == MESSAGES, "records read twice after the failover"
        desc = describe(bootstrap(c), group)
        assert [m.member_id for m in desc.members] == [epoch_before.member_id]
        assert len(owned(member)) == PARTITIONS
    finally:
        member.close()


def test_a_consumer_group_member_rejoins_after_a_single_node_restart(broker_factory, tmp_path,
                                                                      topic_name):
    """A single node keeps consumer group membership across a restart, as Kafka keeps it in
    __consumer_offsets: the member goes on under the same member id, and its commits (of records
    fetched before its next heartbeat, too) are taken; nothing is lost or read twice."""
    props = tmp_path / "kip848.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in CONSUMER_GROUP_PROPERTIES.items()))
    b = broker_factory(config_path=props)
    create_topic(b.bootstrap, topic_name, partitions=2)
    first = seed(b.bootstrap, topic_name, 2, 3, tag="before")
    c = consumer(b.bootstrap, f"g-{topic_name}")
    seen: list = []
    try:
        c.subscribe([topic_name])
        poll_until([c], lambda: len(seen) >= len(first), seen=seen, commit=True,
                   what="records before the restart")
        member = c.memberid()
        b.restart()
        later = seed(b.bootstrap, topic_name, 2, 3, tag="after")
        poll_until([c], lambda: len(seen) >= len(first) + len(later), seen=seen, commit=True,
                   what="records after the restart")
        assert c.memberid() == member
    finally:
        c.close()
    assert sorted(seen) == sorted(first | later)


OFFSETS_TOPIC = "__consumer_offsets"


def regex_assigns_internal_topic(bootstrap: str, prefix: str) -> dict:
    """A KIP-848 member subscribed by regex (SubscribedTopicRegex) to `__consumer_offs.*` and its
    own topic: what it is assigned, reads and commits. Written against any broker, so that the
    same scenario can be run against Apache Kafka (as the test's docstring says was done)."""
    topic = f"{prefix}-own"
    create_topic(bootstrap, topic, partitions=1)
    own = seed(bootstrap, topic, 1, 2, tag="own")
    # Another group's commit: a record in __consumer_offsets for the member to read.
    marker = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{prefix}-marker"})
    marker.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    marker.close()
    listed = admin(bootstrap).list_topics(timeout=10).topics
    offsets_partitions = len(listed[OFFSETS_TOPIC].partitions)
    group = f"g-{prefix}"
    c = consumer(bootstrap, group)
    read: dict[str, int] = {}
    try:
        c.subscribe([f"^(__consumer_offs.*|{prefix}-own)$"])
        want = {(OFFSETS_TOPIC, p) for p in range(offsets_partitions)} | {(topic, 0)}
        deadline = time.monotonic() + WAIT_S
        while not (owned(c) == want and read.get(topic, 0) >= len(own) and read.get(OFFSETS_TOPIC)):
            assert time.monotonic() < deadline, f"assigned {sorted(owned(c))}, read {read}"
            m = c.poll(0.05)
            if m is not None and not m.error():
                read[m.topic()] = read.get(m.topic(), 0) + 1
        # Kafka takes a commit of an internal topic's partition (it is in its metadata).
        committed = c.commit(offsets=[TopicPartition(OFFSETS_TOPIC, 0, 1)], asynchronous=False)
        fetched = c.committed([TopicPartition(OFFSETS_TOPIC, 0)], timeout=10)
        described = describe(bootstrap, group).members[0].assignment.topic_partitions
    finally:
        c.close()
    return {
        "assigned": len(want),
        "commit": [(tp.topic, tp.partition, tp.offset, tp.error) for tp in committed],
        "committed": [(tp.topic, tp.partition, tp.offset, tp.error) for tp in fetched],
        "described": sorted({tp.topic for tp in described}),
        "offsets_partitions": offsets_partitions,
    }


def test_a_regex_naming_an_internal_topic_is_assigned_it(kip848_broker, topic_name):
    """Kafka's group coordinator resolves a member's SubscribedTopicRegex against every topic of
    its metadata image (`GroupMetadataManager.refreshRegularExpressions` scans
    `image.topics().topicsByName()`), the internal ones included: `__consumer_offsets` is
    assigned like any topic, and fetched, committed and described (franz-go's
    Test848RegexBrokerResolves relies on it). Rill resolved regexes against its registered
    topics only, so the member was never assigned it. The same scenario against Apache Kafka
    4.4 (peers/kafka/kafka.sh start-single, 2026-12-02) gave the same answer, with Kafka's 50
    partitions for Rill's 8."""
    got = regex_assigns_internal_topic(kip848_broker.bootstrap, f"rxi-{topic_name}")
    n = got["offsets_partitions"]
    assert n == 8, got
    assert got["assigned"] == n + 1
    assert got["commit"] == [(OFFSETS_TOPIC, 0, 1, None)], got
    assert got["committed"] == [(OFFSETS_TOPIC, 0, 1, None)], got
    assert got["described"] == sorted([OFFSETS_TOPIC, f"rxi-{topic_name}-own"]), got
