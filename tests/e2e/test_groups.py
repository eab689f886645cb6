"""Consumer groups (issue 5) with librdkafka (confluent-kafka, kcat): members split partitions,
closing or killing a member hands its partitions over, cooperative-sticky works, and a group
resumes exactly at its committed offsets after the broker restarts (graceful and kill -9).

Short session timeouts keep each test fast; every wait has a deadline so nothing hangs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, TopicPartition

from clients import create_topic, kcat, producer, produce_all

SESSION_MS = 6000
WAIT_S = 45.0


def consumer(bootstrap: str, group: str, **conf) -> Consumer:
    base = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300,
            "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 2000}
    base.update(conf)
    return Consumer(base)


def seed(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str = "m") -> set:
    p = producer(bootstrap, acks="all")
    values = set()
    for part in range(partitions):
        batch = [(None, f"{tag}-p{part}-{i}".encode()) for i in range(per_partition)]
        produce_all(p, topic, batch, partition=part)
        values.update(v.decode() for _, v in batch)
    return values


def owned(c: Consumer) -> set:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def poll_until(consumers, done, *, seen: list | None = None, timeout_s: float = WAIT_S,
               what: str = "condition"):
    """Poll every consumer round-robin (collecting values into `seen`) until `done()`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and not m.error() and seen is not None:
                seen.append(m.value().decode())
        if done():
            return
    raise AssertionError(f"timed out waiting for {what}: "
                         f"assignments={[sorted(owned(c)) for c in consumers]}")


def split_exactly(consumers, topic: str, partitions: int) -> bool:
    """Every partition owned by exactly one consumer, and every consumer owns some."""
    owners = Counter(tp for c in consumers for tp in owned(c))
    everything = {(topic, p) for p in range(partitions)}
    return (set(owners) == everything and all(n == 1 for n in owners.values())
            and all(owned(c) for c in consumers))


def consume_exactly(consumers, expected: set, what: str) -> list:
    seen: list = []
    poll_until(consumers, lambda: len(seen) >= len(expected), seen=seen, what=what)
    # A little longer: duplicates would show up now.
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen.append(m.value().decode())
    dupes = [v for v, n in Counter(seen).items() if n > 1]
    assert not dupes, f"consumed more than once: {dupes[:10]}"
    assert set(seen) == expected
    return seen


def close_all(consumers):
    for c in consumers:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - already closed
            pass


def test_three_consumers_split_then_closing_one_hands_over(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=6)
    group = f"g-{topic_name}"
    cs = [consumer(broker.bootstrap, group) for _ in range(3)]
    try:
        for c in cs:
            c.subscribe([topic_name])
        poll_until(cs, lambda: split_exactly(cs, topic_name, 6), what="3-way split")
        expected = seed(broker.bootstrap, topic_name, 6, 10, "first")
        consume_exactly(cs, expected, "first round")
        for c in cs:
            c.commit(asynchronous=False)
        gone = cs.pop()
        gone.close()  # LeaveGroup: the others take over at once
        poll_until(cs, lambda: split_exactly(cs, topic_name, 6), what="2-way split after close")
        expected = seed(broker.bootstrap, topic_name, 6, 5, "second")
        consume_exactly(cs, expected, "second round")
    finally:
        close_all(cs)


KILLABLE = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer
    bootstrap, group, topic, session_ms = sys.argv[1:5]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "session.timeout.ms": int(session_ms),
                  "heartbeat.interval.ms": 300, "enable.auto.commit": False})
    c.subscribe([topic])
    announced = False
    while True:
        c.poll(0.1)
        if c.assignment() and not announced:
            print("ASSIGNED", len(c.assignment()), flush=True)
            announced = True
""")


def test_killed_member_is_replaced_after_its_session_timeout(broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, partitions=4)
    group = f"g-{topic_name}"
    script = tmp_path / "killable.py"
    script.write_text(KILLABLE)
    proc = subprocess.Popen([sys.executable, str(script), broker.bootstrap, group, topic_name,
                             str(SESSION_MS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    survivor = consumer(broker.bootstrap, group)
    try:
        survivor.subscribe([topic_name])
        poll_until([survivor], lambda: 0 < len(owned(survivor)) < 4,
                   what="survivor shares the topic with the other process")
        proc.send_signal(signal.SIGKILL)  # no LeaveGroup: only the session timeout can tell
        proc.wait(timeout=10)
        killed_at = time.monotonic()
        poll_until([survivor], lambda: len(owned(survivor)) == 4, timeout_s=SESSION_MS / 1000 + 30,
                   what="survivor owns every partition")
        waited = time.monotonic() - killed_at
        # Not a speed assertion: the takeover must wait for the dead member's session to expire
        # (a takeover much earlier would mean a member was dropped while alive).
        assert waited >= SESSION_MS / 1000 * 0.5, f"took over after only {waited:.1f}s"
        expected = seed(broker.bootstrap, topic_name, 4, 5)
        consume_exactly([survivor], expected, "everything after takeover")
    finally:
        if proc.poll() is None:
            proc.kill()
        survivor.close()


def test_cooperative_sticky_assignor(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=4)
    group = f"g-{topic_name}"
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    a = consumer(broker.bootstrap, group, **conf)
    b = consumer(broker.bootstrap, group, **conf)
    revoked: list = []  # a's revocations, one list per callback
    try:
        a.subscribe([topic_name], on_revoke=lambda _c, tps: revoked.append(len(tps)))
        poll_until([a], lambda: len(owned(a)) == 4, what="first member owns all")
        b.subscribe([topic_name])
        poll_until([a, b], lambda: split_exactly([a, b], topic_name, 4),
                   what="incremental rebalance to two members")
        # Cooperative: a gives up only what moves to b (eager would revoke all 4 first).
        assert revoked and max(revoked) <= 2, f"revocations {revoked}"
        expected = seed(broker.bootstrap, topic_name, 4, 5)
        consume_exactly([a, b], expected, "cooperative consumption")
    finally:
        close_all([a, b])


def test_kcat_balanced_consumer_commits_and_resumes(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=3)
    expected = seed(broker.bootstrap, topic_name, 3, 10)
    group = f"g-{topic_name}"
    args = ["-G", group, "-X", "auto.offset.reset=earliest", "-X",
            f"session.timeout.ms={SESSION_MS}", "-q", "-f", "%s\\n"]
    out = kcat(broker.bootstrap, *args, "-c", str(len(expected)), topic_name,
               timeout_s=WAIT_S).stdout.decode().split()
    assert sorted(out) == sorted(expected)
    # kcat commits on exit: the same group continues after what it read.
    later = seed(broker.bootstrap, topic_name, 3, 2, "later")
    out = kcat(broker.bootstrap, *args, "-c", str(len(later)), topic_name,
               timeout_s=WAIT_S).stdout.decode().split()
    assert sorted(out) == sorted(later)


@pytest.mark.parametrize("graceful", [True, False], ids=["sigterm", "kill9"])
def test_group_resumes_at_committed_offsets_after_restart(broker_factory, graceful):
    b = broker_factory()
    topic, group = "resume", "g-resume"
    create_topic(b.bootstrap, topic, partitions=2)
    expected = seed(b.bootstrap, topic, 2, 10)
    c = consumer(b.bootstrap, group)
    seen: list = []
    c.subscribe([topic])
    poll_until([c], lambda: len(seen) >= 6, seen=seen, what="a first part")
    c.commit(asynchronous=False)  # commits the position after what was consumed
    committed = {tp.partition: tp.offset
                 for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                       timeout=30)}
    c.close()
    b.restart(graceful=graceful)
    c = consumer(b.bootstrap, group)
    try:
        after = {tp.partition: tp.offset
                 for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                       timeout=30)}
        assert after == committed, "committed offsets survive the restart"
        c.subscribe([topic])
        rest: list = []
        poll_until([c], lambda: len(rest) >= len(expected) - len(seen), seen=rest,
                   what="the rest after restart")
        assert Counter(seen + rest) == Counter(expected), "resumed exactly at the commit"
    finally:
        c.close()


def test_static_member_rejoins_without_rebalance(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=4)
    group = f"g-{topic_name}"
    revoked_a: list = []
    a = consumer(broker.bootstrap, group, **{"group.instance.id": "static-a"})
    b = consumer(broker.bootstrap, group, **{"group.instance.id": "static-b"})
    a.subscribe([topic_name], on_revoke=lambda _c, tps: revoked_a.append(len(tps)))
    b.subscribe([topic_name])
    b2 = None
    try:
        poll_until([a, b], lambda: split_exactly([a, b], topic_name, 4), what="static split")
        before_a, before_b = owned(a), owned(b)
        revocations = len(revoked_a)
        b.close()  # a static member sends no LeaveGroup: its place is kept for the session
        b2 = consumer(broker.bootstrap, group, **{"group.instance.id": "static-b"})
        b2.subscribe([topic_name])
        poll_until([a, b2], lambda: owned(b2) == before_b, what="restarted static member")
        assert owned(a) == before_a
        assert len(revoked_a) == revocations, "no rebalance for the surviving member"
    finally:
        close_all([a] + ([b2] if b2 else []))


def test_admin_lists_describes_and_deletes_groups(broker, topic_name):
    from confluent_kafka.admin import AdminClient
    create_topic(broker.bootstrap, topic_name, partitions=2)
    group = f"g-{topic_name}"
    c = consumer(broker.bootstrap, group)
    c.subscribe([topic_name])
    poll_until([c], lambda: len(owned(c)) == 2, what="assignment")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups(request_timeout=30).result()
    assert group in {g.group_id for g in listed.valid}
    desc = admin.describe_consumer_groups([group], request_timeout=30)[group].result()
    assert str(desc.state).endswith("STABLE"), desc.state
    assert len(desc.members) == 1
    assert {tp.partition for tp in desc.members[0].assignment.topic_partitions} == {0, 1}
    # A group with members cannot be deleted; once empty it can.
    with pytest.raises(Exception):
        admin.delete_consumer_groups([group], request_timeout=30)[group].result()
    c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
    c.close()
    admin.delete_consumer_groups([group], request_timeout=30)[group].result()
    listed = admin.list_consumer_groups(request_timeout=30).result()
    assert group not in {g.group_id for g in listed.valid}


def test_two_kcat_members_split_a_topic(broker, topic_name, tmp_path):
    """Debian's librdkafka 2.0.2 (kcat -G): two members share a topic, each message once."""
    from confluent_kafka.admin import AdminClient
    from clients import kcat_path
    create_topic(broker.bootstrap, topic_name, partitions=4)
    group = f"g-{topic_name}"
    outs = [tmp_path / f"kcat{i}.out" for i in range(2)]
    procs = []
    for out in outs:
        with open(out, "wb") as f:
            procs.append(subprocess.Popen(
                [kcat_path(), "-b", broker.bootstrap, "-G", group, "-X",
                 "auto.offset.reset=earliest", "-X", f"session.timeout.ms={SESSION_MS}",
                 "-q", "-u", "-f", "%s\\n", topic_name],
                stdout=f, stderr=subprocess.DEVNULL))
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

        def both_assigned() -> bool:
            d = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
            return (str(d.state).endswith("STABLE") and len(d.members) == 2
                    and all(m.assignment.topic_partitions for m in d.members))

        deadline = time.monotonic() + WAIT_S
        while not both_assigned():
            assert time.monotonic() < deadline, "two kcat members never became stable"
            time.sleep(0.2)
        expected = seed(broker.bootstrap, topic_name, 4, 10)
        lines: list = []
        while time.monotonic() < deadline:
            lines = [out.read_text().split() for out in outs]
            if sum(map(len, lines)) >= len(expected):
                break
            time.sleep(0.2)
        time.sleep(0.5)  # duplicates would show up now
        lines = [out.read_text().split() for out in outs]
        everything = [v for member in lines for v in member]
        assert sorted(everything) == sorted(expected), "every message exactly once"
        assert all(lines), "both members consumed"
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
