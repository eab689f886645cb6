"""Small helpers over the real clients (confluent-kafka, kcat, kafkajs) shared by the tests.

Consumers here never join a group (groups are a later issue): they are assigned partitions and
offsets directly, as `kcat -C -p N -o ...` or `consumer.assign([...])` do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, OFFSET_BEGINNING, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

NODE_DIR = Path(__file__).resolve().parents[1] / "clients" / "node"

#: Generous client-side timeouts: a debug build on 2 busy cores is slow, but nothing may hang.
CLIENT_TIMEOUT_S = 30.0


# --- confluent-kafka (librdkafka, current) ---------------------------------------------------

def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    """Create a topic with confluent-kafka's AdminClient and wait for the result."""
    a = admin(bootstrap)      # keep the client alive until its futures resolve
    futures = a.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=CLIENT_TIMEOUT_S, request_timeout=CLIENT_TIMEOUT_S)
    futures[name].result(timeout=CLIENT_TIMEOUT_S)
    wait_for_topic(bootstrap, name, partitions)


def wait_for_topic(bootstrap: str, name: str, partitions: int, timeout_s: float = 15.0) -> None:
    """Wait until Metadata shows the topic with all partitions led by a broker."""
    a = admin(bootstrap)
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        md = a.list_topics(topic=name, timeout=10)
        t = md.topics.get(name)
        last = t
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {name} not ready with {partitions} partitions: {last!r}")


def producer(bootstrap: str, **conf) -> Producer:
    base = {"bootstrap.servers": bootstrap, "linger.ms": 5,
            "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000)}
    base.update(conf)
    return Producer(base)


def produce_all(p: Producer, topic: str, messages, partition: int = 0) -> list:
    """Produce (key, value[, timestamp_ms]) tuples, flush, and return delivery reports in order.

    Raises if any delivery failed or the flush did not finish in time.
    """
    reports: list = []

    def on_delivery(err, msg):
        reports.append((err, msg.partition(), msg.offset(), msg.value()))

    for m in messages:
        key, value = m[0], m[1]
        kwargs = {"timestamp": m[2]} if len(m) > 2 else {}
        p.produce(topic, value=value, key=key, partition=partition, on_delivery=on_delivery,
                  **kwargs)
        p.poll(0)
    remaining = p.flush(CLIENT_TIMEOUT_S)
    assert remaining == 0, f"{remaining} messages still in flight after {CLIENT_TIMEOUT_S}s"
    errors = [r for r in reports if r[0] is not None]
    assert not errors, f"delivery errors: {errors[:5]}"
    return reports


def consume_partition(bootstrap: str, topic: str, partition: int, start_offset: int,
                      count: int, timeout_s: float = CLIENT_TIMEOUT_S, **conf) -> list:
    """Read `count` messages from one partition starting at `start_offset` (no consumer group)."""
    base = {"bootstrap.servers": bootstrap, "group.id": "rill-e2e-unused",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "enable.partition.eof": False}
    base.update(conf)
    c = Consumer(base)
    try:
        c.assign([TopicPartition(topic, partition, start_offset)])
        out, errors = [], []
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                # Group-coordinator errors may surface here while groups are not implemented;
                # they do not stop an assigned consumer. Fatal ones do.
                if msg.error().fatal():
                    raise KafkaException(msg.error())
                errors.append(msg.error())
                continue
            out.append(msg)
        assert len(out) >= count, (f"got {len(out)} of {count} messages from {topic}[{partition}] "
                                   f"at {start_offset}; consumer errors: {errors[:5]}")
        return out
    finally:
        c.close()


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(low, high) watermark offsets of one partition, via ListOffsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rill-e2e-unused",
                  "enable.auto.commit": False})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=CLIENT_TIMEOUT_S)
    finally:
        c.close()


def offset_for_time(bootstrap: str, topic: str, partition: int, ts_ms: int) -> int:
    """ListOffsets by timestamp through confluent-kafka's offsets_for_times."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rill-e2e-unused",
                  "enable.auto.commit": False})
    try:
        res = c.offsets_for_times([TopicPartition(topic, partition, ts_ms)],
                                  timeout=CLIENT_TIMEOUT_S)
        assert res[0].error is None, res[0].error
        return res[0].offset
    finally:
        c.close()


# --- kcat (Debian's librdkafka 2.0.2) --------------------------------------------------------

def kcat_path() -> str:
    path = shutil.which("kcat")
    assert path, "kcat is not installed (test.sh installs it from Debian)"
    return path


def kcat(bootstrap: str, *args: str, input: bytes | None = None, timeout_s: float = 60.0,
         check: bool = True) -> subprocess.CompletedProcess:
    """Run kcat against the broker; raise with its stderr if it fails."""
    cmd = [kcat_path(), "-b", bootstrap, "-X", "socket.timeout.ms=20000", *args]
    proc = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout_s)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\nstderr:\n"
                             f"{proc.stderr.decode(errors='replace')[-3000:]}")
    return proc


# --- kafkajs (node) --------------------------------------------------------------------------

def kafkajs(bootstrap: str, command: str, args: dict, timeout_s: float = 90.0) -> dict:
    """Run tests/clients/node/rill-kafkajs.js COMMAND with JSON args; return its JSON result."""
    node = shutil.which("node")
    assert node, "node is not installed"
    assert (NODE_DIR / "node_modules" / "kafkajs").exists(), \
        "kafkajs missing: run `npm ci` in tests/clients/node (test.sh does)"
    env = dict(os.environ, KAFKAJS_NO_PARTITIONER_WARNING="1")
    cmd = [node, str(NODE_DIR / "rill-kafkajs.js"), bootstrap, command, json.dumps(args)]
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout_s, env=env, cwd=NODE_DIR)
    stdout = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        raise AssertionError(f"kafkajs {command} exited {proc.returncode}\nstdout:\n{stdout[-3000:]}"
                             f"\nstderr:\n{proc.stderr.decode(errors='replace')[-3000:]}")
    last = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert last, f"kafkajs {command} printed no RESULT line:\n{stdout[-3000:]}"
    return json.loads(last[-1][len("RESULT "):])


__all__ = ["OFFSET_BEGINNING", "admin", "create_topic", "wait_for_topic", "producer", "produce_all",
           "consume_partition", "watermarks", "offset_for_time", "kcat", "kafkajs"]
