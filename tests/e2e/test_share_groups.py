"""KIP-932 share groups (issue 29, part 2): ShareGroupHeartbeat, ShareFetch and
ShareAcknowledge with real share consumers.

- confluent-kafka 2.16's ShareConsumer (librdkafka) for the record-level behaviour: two members
  of one group split a partition's records with none lost or doubled, RELEASE redelivers (the
  delivery count grows) until the delivery limit archives the record, REJECT never comes back,
  and a member that stops acknowledging loses its records to the other member when their locks
  expire.
- Kafka's own `kafka-console-share-consumer` (the Java KafkaShareConsumer, run on the peer's
  jars through peers/kafka/kafka.sh) against Rill and against Apache Kafka 4.4 with the same
  settings: the same scenario gives the same counts on both.

One Rill broker for the module with short share-group timers (`group.share.*` lowered within
lowered bounds, as Kafka allows): 3 s sessions, heartbeats every 300 ms, 2 s record locks and a
delivery limit of 3. The groups start at the log start (`share.auto.offset.reset=earliest`, a
group config set with IncrementalAlterConfigs, as Kafka's tools do).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ResourceType)

from broker import Broker
from clients import admin, create_topic, produce_all, producer
from conftest import _BROKERS

ROOT = Path(__file__).resolve().parents[2]
KAFKA_SH = ROOT / "peers" / "kafka" / "kafka.sh"

LOCK_MS = 2000
DELIVERY_LIMIT = 3
SHARE_PROPERTIES = {
    "group.share.session.timeout.ms": 3000,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.heartbeat.interval.ms": 300,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.record.lock.duration.ms": LOCK_MS,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.delivery.count.limit": DELIVERY_LIMIT,
}
WAIT_S = 30.0


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("rill-share")
    props = root / "rill.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in SHARE_PROPERTIES.items()))
    b = Broker(root / "data", root / "rill.log", config_path=props)
    _BROKERS.append(b)
    b.start()
    yield b
    assert b.stop() == 0, b.log_tail()
    assert "panicked" not in b.log_text(), b.log_tail()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def from_earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest on `group` (IncrementalAlterConfigs, GROUP resource)."""
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    a = admin(bootstrap)
    for f in a.incremental_alter_configs([resource], request_timeout=15).values():
        f.result(timeout=15)


def topic_with(bootstrap: str, count: int, prefix: str = "share") -> str:
    topic = unique(prefix)
    create_topic(bootstrap, topic, 1)
    produce_all(producer(bootstrap), topic, [(None, f"v{i}".encode()) for i in range(count)])
    return topic


def share_consumer(bootstrap: str, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(conf)
    c.subscribe([topic])
    return c


def records(c: ShareConsumer, timeout: float = 0.2) -> list:
    return [m for m in c.poll(timeout) if m.error() is None]


def test_two_share_consumers_split_the_records_none_lost_none_twice(share_broker):
    bootstrap = share_broker.bootstrap
    group = unique("g-split")
    from_earliest(bootstrap, group)
    topic = unique("share-split")
    create_topic(bootstrap, topic, 1)
    consumers = [share_consumer(bootstrap, group, topic) for _ in range(2)]
    p = producer(bootstrap)
    seen: list[Counter] = [Counter(), Counter()]
    total = 0
    try:
        deadline = time.monotonic() + WAIT_S
        # Records arrive in rounds while both members fetch, so both get some.
        for round_ in range(10):
            produce_all(p, topic, [(None, f"r{round_}-{i}".encode()) for i in range(10)])
            total += 10
            for _ in range(3):
                for k, c in enumerate(consumers):
                    for m in records(c, 0.1):
                        seen[k][m.value().decode()] += 1
        while sum(sum(s.values()) for s in seen) < total and time.monotonic() < deadline:
            for k, c in enumerate(consumers):
                for m in records(c):
                    seen[k][m.value().decode()] += 1
        for c in consumers:
            c.commit_sync(10)
        # Nothing more comes: every record was accepted once.
        for _ in range(5):
            for k, c in enumerate(consumers):
                for m in records(c):
                    seen[k][m.value().decode()] += 1
    finally:
        for c in consumers:
            c.close()
    both = seen[0] + seen[1]
    assert len(both) == total, f"lost {total - len(both)} records"
    assert max(both.values()) == 1, f"delivered twice: {[v for v, n in both.items() if n > 1]}"
    assert all(sum(s.values()) > 0 for s in seen), f"one member got nothing: {seen}"


def test_release_redelivers_until_the_limit_and_reject_never_returns(share_broker):
    bootstrap = share_broker.bootstrap
    group = unique("g-ack")
    from_earliest(bootstrap, group)
    topic = topic_with(bootstrap, 3, "share-ack")
    c = share_consumer(bootstrap, group, topic, explicit=True)
    deliveries: Counter = Counter()
    counts: dict[str, list[int]] = {}
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            got = records(c)
            for m in got:
                v = m.value().decode()
                deliveries[v] += 1
                counts.setdefault(v, []).append(m.delivery_count())
                # v0 is always released (a poison record), v1 rejected, v2 accepted.
                kind = {"v0": AcknowledgeType.RELEASE, "v1": AcknowledgeType.REJECT}.get(
                    v, AcknowledgeType.ACCEPT)
                c.acknowledge(m, kind)
            if got:
                c.commit_sync(10)
            if deliveries["v0"] >= DELIVERY_LIMIT and deliveries["v2"]:
                break
        # Archived: v0 past its limit and the rejected v1 never come back.
        for _ in range(10):
            assert not records(c), "an archived record was delivered again"
    finally:
        c.close()
    assert deliveries == Counter({"v0": DELIVERY_LIMIT, "v1": 1, "v2": 1}), deliveries
    assert counts["v0"] == list(range(1, DELIVERY_LIMIT + 1)), counts


HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
held = 0
while held < int(sys.argv[4]):
    held += sum(1 for m in c.poll(0.2) if m.error() is None)
print("held", held, flush=True)
time.sleep(600)
"""


def test_a_killed_member_s_records_come_back_when_their_locks_expire(share_broker):
    """A member killed -9 while it holds records (explicit mode, nothing acknowledged): the
    other member gets them once their locks expire, delivered a second time."""
    bootstrap = share_broker.bootstrap
    group = unique("g-lock")
    from_earliest(bootstrap, group)
    topic = topic_with(bootstrap, 5, "share-lock")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, bootstrap, group, topic, "5"],
                              stdout=subprocess.PIPE, text=True)
    other = None
    try:
        line = holder.stdout.readline()
        assert line.startswith("held 5"), f"the holder said {line!r}"
        other = share_consumer(bootstrap, group, topic, explicit=True)
        holder.kill()
        holder.wait(10)
        started = time.monotonic()
        deadline = started + WAIT_S
        again: list = []
        while len(again) < 5 and time.monotonic() < deadline:
            for m in records(other):
                again.append(m)
                other.acknowledge(m, AcknowledgeType.ACCEPT)
        waited = time.monotonic() - started
        other.commit_sync(10)
        assert sorted(m.value().decode() for m in again) == [f"v{i}" for i in range(5)]
        assert all(m.delivery_count() == 2 for m in again), [m.delivery_count() for m in again]
        assert waited >= (LOCK_MS - 1000) / 1000, f"redelivered after {waited:.2f} s"
    finally:
        if holder.poll() is None:
            holder.kill()
        if other is not None:
            other.close()


# --- the Java KafkaShareConsumer, against Rill and against Apache Kafka -----------------------

def java_ready() -> str | None:
    if shutil.which("java") is None:
        return "java is not installed (test.sh installs it for the differential suite)"
    if not os.access(KAFKA_SH, os.X_OK):
        return "peers/kafka/kafka.sh is missing"
    return None


def console_share_consumer(bootstrap: str, group: str, topic: str, *extra: str) -> subprocess.Popen:
    """kafka-console-share-consumer (org.apache.kafka.tools.consumer.ConsoleShareConsumer)
    printing each record's offset and delivery count."""
    env = dict(os.environ, KAFKA_PEER_TOOL_HEAP="256m")
    return subprocess.Popen(
        [str(KAFKA_SH), "tool", "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
         "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
         "--formatter-property", "print.offset=true",
         "--formatter-property", "print.delivery=true", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def deliveries_of(proc: subprocess.Popen, timeout_s: float = 90) -> list[tuple[int, int]]:
    out, err = proc.communicate(timeout=timeout_s)
    got = []
    for line in out.splitlines():
        offset = re.search(r"Offset:(\d+)", line)
        delivery = re.search(r"Delivery:(\d+)", line)
        if offset and delivery:
            got.append((int(offset.group(1)), int(delivery.group(1))))
    # A consumer that got nothing exits after its --timeout-ms; either way what it printed counts.
    assert "Exception" not in err or "TimeoutException" in err, err[-3000:]
    return got


def java_scenario(bootstrap: str) -> dict:
    """Two console share consumers on one group over 40 records, one that releases every
    record (10 records), one that rejects every record (10 records): what each saw."""
    split_group, release_group, reject_group, warm_group = (
        unique(g) for g in ("j-split", "j-rel", "j-rej", "j-warm"))
    for g in (split_group, release_group, reject_group, warm_group):
        from_earliest(bootstrap, g)
    # A fresh Apache Kafka creates __share_group_state (50 partitions) and starts its share
    # coordinator on the first share fetch. On a loaded 2-core CI machine that took over 20 s
    # (stop 36: 8 s consumers saw nothing; stop 38: the 20 s split pair saw nothing while the 30 s
    # consumers beside it were served). One share consumer waits for one record first, with a
    # bound far above that, so the scenario's --timeout-ms measure the broker warm, as on Rill.
    warm = deliveries_of(console_share_consumer(
        bootstrap, warm_group, topic_with(bootstrap, 1, "jshare-warm"),
        "--max-messages", "1", "--timeout-ms", "120000"), timeout_s=180)
    assert [o for o, _ in warm] == [0], f"the warm-up share consumer saw {warm}"
    split_topic = topic_with(bootstrap, 40, "jshare-split")
    ack_topic = topic_with(bootstrap, 10, "jshare-ack")
    # The tool's --timeout-ms is the longest wait for a record, the first one included. The
    # consumers whose count is known stop at it; the split pair, whose shares are not, waits 20 s.
    procs = {
        "split-a": console_share_consumer(bootstrap, split_group, split_topic, "--timeout-ms", "20000"),
        "split-b": console_share_consumer(bootstrap, split_group, split_topic, "--timeout-ms", "20000"),
        "release": console_share_consumer(bootstrap, release_group, ack_topic, "--release",
                                          "--max-messages", str(10 * DELIVERY_LIMIT),
                                          "--timeout-ms", "30000"),
        "reject": console_share_consumer(bootstrap, reject_group, ack_topic, "--reject",
                                         "--max-messages", "10", "--timeout-ms", "30000"),
    }
    seen = {name: deliveries_of(p) for name, p in procs.items()}
    split = Counter(o for o, _ in seen["split-a"] + seen["split-b"])
    return {
        "split_records": len(split),
        "split_most_deliveries": max(split.values(), default=0),
        "release_deliveries": Counter(o for o, _ in seen["release"]),
        "release_max_count": max((d for _, d in seen["release"]), default=0),
        "reject_deliveries": Counter(o for o, _ in seen["reject"]),
    }


@pytest.mark.timeout(480)   # ten JVM runs and an Apache Kafka start on a loaded 2-core machine
def test_java_share_consumers_same_counts_as_apache_kafka(share_broker, tmp_path):
    why = java_ready()
    if why:
        pytest.skip(why)
    rill = java_scenario(share_broker.bootstrap)
    assert rill["split_records"] == 40 and rill["split_most_deliveries"] == 1, rill
    assert rill["release_deliveries"] == Counter({o: DELIVERY_LIMIT for o in range(10)}), rill
    assert rill["release_max_count"] == DELIVERY_LIMIT, rill
    assert rill["reject_deliveries"] == Counter({o: 1 for o in range(10)}), rill
    kafka_dir = tmp_path / "kafka"
    sets = [f"{k}={v}" for k, v in SHARE_PROPERTIES.items()]
    start = subprocess.run(
        [str(KAFKA_SH), "start-single", "--dir", str(kafka_dir), "--heap", "512m",
         *[a for kv in sets for a in ("--set", kv)]],
        capture_output=True, text=True, timeout=180)
    assert start.returncode == 0, start.stderr[-3000:]
    env = dict(line.split("=", 1) for line in start.stdout.splitlines() if "=" in line)
    try:
        kafka = java_scenario(env["KAFKA_BOOTSTRAP"])
    finally:
        subprocess.run([str(KAFKA_SH), "stop", "--dir", str(kafka_dir)], capture_output=True,
                       timeout=120)
    assert kafka == rill, f"Apache Kafka: {kafka}\nRill: {rill}"


ACK_HALF = """
import sys, time
from confluent_kafka import AcknowledgeType, ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
got = []
while len(got) < 10:
    got += [m for m in c.poll(0.2) if m.error() is None]
for m in got:
    i = int(m.value().decode()[1:])
    if i < 5 or i == 7:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    elif i == 5:
        c.acknowledge(m, AcknowledgeType.RELEASE)
c.commit_sync(10)
print("acked", flush=True)
time.sleep(600)
"""


def test_accepted_records_stay_accepted_across_a_broker_kill9(broker_factory, tmp_path):
    """Records v0-v4 and v7 accepted (the acknowledgement answered), v5 released, v6, v8 and v9
    held, then the broker is killed -9 and restarted: a new member gets v5, v6, v8 and v9, never
    an accepted one (the start and the done records past it are durable, COMPATIBILITY H4)."""
    props = tmp_path / "share.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in SHARE_PROPERTIES.items()))
    b = broker_factory(config_path=props)
    group = unique("g-restart")
    from_earliest(b.bootstrap, group)
    topic = topic_with(b.bootstrap, 10, "share-restart")
    holder = subprocess.Popen([sys.executable, "-c", ACK_HALF, b.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()
        assert line.startswith("acked"), f"the member said {line!r}"
        b.restart(graceful=False)
    finally:
        holder.kill()
        holder.wait(10)
    c = share_consumer(b.bootstrap, group, topic)
    again: list = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(again) < 4 and time.monotonic() < deadline:
            again += records(c)
        for _ in range(5):
            again += records(c)
    finally:
        c.close()
    assert sorted(m.value().decode() for m in again) == ["v5", "v6", "v8", "v9"]
