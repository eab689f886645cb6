"""Kill -9 harness: no acknowledged message and no acknowledged consumer-group commit is ever lost.

A confluent-kafka producer (acks=all; and a variant with enable.idempotence=true) writes
continuously and records every ACKNOWLEDGED (partition, offset, value) from its delivery callbacks.
The broker is killed with SIGKILL at random moments (seeded: the seed is printed, set
RILL_KILL_SEED to replay) and restarted on the same data directory; the producer rides through
(librdkafka reconnects and retries). At the end, per partition:

- the log holds contiguous offsets from 0 (no gap);
- every acknowledged message is at exactly the offset it was acknowledged with;
- with the idempotent producer, no value appears twice and values appear in send order.

Consumer-group commits likewise: every synchronously acknowledged OffsetCommit is what
OffsetFetch returns after the kill (or a later commit that was in flight when the broker died).

CI runs a few cycles; `RILL_KILL_CYCLES=100 ./test.sh -k kill9` runs more (DURABILITY.md).
A restart that does not listen within broker.START_TIMEOUT_S fails the test (this harness once
found starts that hung in glommio's mesh join; tests/e2e/test_start_stop.py now guards that).
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from confluent_kafka import Consumer, KafkaException, TopicPartition

from clients import create_topic, producer, watermarks

#: Kill/restart cycles per test (CI keeps it small; the closing note quotes a 100+ cycle run).
CYCLES = int(os.environ.get("RILL_KILL_CYCLES", "3"))
#: Partitions of the test topic: more than one so two shards and several logs are in play.
PARTITIONS = 3
#: Per-test pytest timeout: generous, and growing with the cycle count.
TEST_TIMEOUT_S = 180 + 15 * CYCLES
#: Client-side patience: a debug build restarting on 2 busy cores is slow, but nothing may hang.
DELIVERY_TIMEOUT_S = 120.0


def _seed() -> int:
    seed = int(os.environ.get("RILL_KILL_SEED", str(random.SystemRandom().randrange(1 << 32))))
    print(f"kill -9 harness seed: RILL_KILL_SEED={seed} (cycles={CYCLES})")
    return seed


def _restart_after_kill(b) -> None:
    """Start the killed broker again; a start that hangs fails the test."""
    b.start()


def _read_log(bootstrap: str, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """Every (offset, value) of one partition from offset 0 up to its high watermark."""
    low, high = watermarks(bootstrap, topic, partition)
    assert low == 0, f"{topic}[{partition}] log start moved to {low}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rill-kill9-verify",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "fetch.max.bytes": 8 << 20})
    out: list[tuple[int, bytes]] = []
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + DELIVERY_TIMEOUT_S
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline and high > 0:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().fatal():
                    raise KafkaException(msg.error())
                continue
            out.append((msg.offset(), msg.value()))
    finally:
        c.close()
    assert high == 0 or (out and out[-1][0] >= high - 1), \
        f"{topic}[{partition}]: read {len(out)} records, high watermark {high}"
    return out


class AckLog:
    """Every acknowledged message and every failed delivery, from delivery callbacks."""

    def __init__(self):
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list[tuple[str, bytes]] = []

    def on_delivery(self, err, msg) -> None:
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.failed.append((str(err), msg.value()))


def _produce_through_kills(b, topic: str, rng: random.Random, idempotent: bool) -> AckLog:
    """Produce continuously; SIGKILL + restart the broker CYCLES times at random moments."""
    conf = {"acks": "all", "linger.ms": rng.choice([0, 1, 5]), "batch.num.messages": 200,
            "message.timeout.ms": int(DELIVERY_TIMEOUT_S * 1000),
            "retry.backoff.ms": 50, "reconnect.backoff.max.ms": 200}
    if idempotent:
        conf["enable.idempotence"] = True
    p = producer(b.bootstrap, **conf)
    acks = AckLog()
    seq = 0

    def produce_for(seconds: float) -> None:
        nonlocal seq
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                p.produce(topic, value=b"v-%08d" % seq, partition=seq % PARTITIONS,
                          on_delivery=acks.on_delivery)
                seq += 1
            except BufferError:
                p.poll(0.01)      # local queue full while the broker is down: back off
                continue
            if seq % 50 == 0:
                p.poll(0)
        p.poll(0)

    produce_for(0.5)
    for cycle in range(CYCLES):
        produce_for(rng.uniform(0.05, 1.5))
        acked_before = len(acks.acked)
        b.kill9()
        time.sleep(rng.uniform(0.0, 0.3))
        _restart_after_kill(b)
        print(f"cycle {cycle}: killed after {acked_before} acks, {seq} sent")
    produce_for(0.5)
    remaining = p.flush(DELIVERY_TIMEOUT_S)
    assert remaining == 0, f"{remaining} messages undelivered after {DELIVERY_TIMEOUT_S}s"
    return acks


def _verify(b, topic: str, acks: AckLog, idempotent: bool) -> int:
    """Check every acknowledged message against the log; return how many were verified."""
    assert not acks.failed, f"{len(acks.failed)} deliveries failed, e.g. {acks.failed[:3]}"
    verified = 0
    for partition in range(PARTITIONS):
        log = _read_log(b.bootstrap, topic, partition)
        offsets = [o for o, _ in log]
        assert offsets == list(range(len(log))), \
            f"[{partition}] offsets not contiguous from 0: first gap near " \
            f"{next((i for i, o in enumerate(offsets) if o != i), None)}"
        values = [v for _, v in log]
        for p, offset, value in acks.acked:
            if p != partition:
                continue
            assert offset < len(values), \
                f"[{partition}] acknowledged offset {offset} ({value!r}) lost: log ends at {len(values)}"
            assert values[offset] == value, \
                f"[{partition}] offset {offset}: acknowledged {value!r}, log has {values[offset]!r}"
            verified += 1
        if idempotent:
            assert len(set(values)) == len(values), \
                f"[{partition}] duplicates with the idempotent producer: " \
                f"{[v for v in set(values) if values.count(v) > 1][:5]}"
            assert values == sorted(values), f"[{partition}] values out of send order"
    return verified


@pytest.mark.timeout(TEST_TIMEOUT_S)
@pytest.mark.parametrize("idempotent", [False, True], ids=["acks-all", "idempotent"])
def test_acked_messages_survive_kill9(broker_factory, topic_name, idempotent):
    rng = random.Random(_seed())
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=PARTITIONS)
    acks = _produce_through_kills(b, topic_name, rng, idempotent)
    verified = _verify(b, topic_name, acks, idempotent)
    print(f"verified {verified} acknowledged messages over {CYCLES} kill -9 cycles")
    assert verified == len(acks.acked) and verified > 0
    assert "panicked" not in b.log_text(), b.log_tail()


#: Bound on one synchronous OffsetCommit to a live broker (generous: a loaded debug build).
COMMIT_TIMEOUT_S = 60.0


def _commit(b, c: Consumer, topic: str, offsets: dict[int, int]) -> bool:
    """Synchronous OffsetCommit; True when the broker acknowledged it without error.

    The broker is alive for every commit here (the kill comes after them), so a broker that
    dies meanwhile is a crash and fails the test with its log. librdkafka's synchronous commit
    waits for a coordinator without bound and pytest-timeout cannot interrupt that C call, so
    the commit runs in a worker thread and is watched from here.
    """
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = c.commit(
                offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                asynchronous=False)
        except KafkaException as e:
            outcome["error"] = e

    worker = threading.Thread(target=run, name="kill9-commit", daemon=True)
    worker.start()
    deadline = time.monotonic() + COMMIT_TIMEOUT_S
    while worker.is_alive():
        worker.join(timeout=0.2)
        if worker.is_alive() and not b.alive():
            pytest.fail(f"the broker died during an OffsetCommit, before any kill:\n"
                        f"{b.log_tail()}")
        if worker.is_alive() and time.monotonic() > deadline:
            pytest.fail(f"an OffsetCommit went unanswered for {COMMIT_TIMEOUT_S:.0f} s:\n"
                        f"{b.log_tail()}")
    if "error" in outcome:
        return False
    return all(tp.error is None for tp in outcome.get("result") or [])


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_committed_offsets_survive_kill9(broker_factory, topic_name):
    rng = random.Random(_seed())
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=PARTITIONS)
    group = f"{topic_name}-group"
    acked: dict[int, int] = {}           # last acknowledged commit per partition
    attempted: dict[int, int] = {}       # last attempted (maybe in flight at the kill)
    next_offset = 0
    commits_acked = 0
    for cycle in range(CYCLES):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                      "enable.auto.commit": False, "socket.timeout.ms": 10000})
        end = time.monotonic() + rng.uniform(0.1, 1.0)
        while time.monotonic() < end:
            next_offset += rng.randint(1, 10)
            offsets = {p: next_offset + p for p in range(PARTITIONS)}
            attempted.update(offsets)
            if _commit(b, c, topic_name, offsets):
                acked.update(offsets)
                commits_acked += 1
        b.kill9()
        c.close()
        _restart_after_kill(b)
        got = _committed(b.bootstrap, group, topic_name)
        for p in range(PARTITIONS):
            if p in acked:
                assert acked[p] <= got[p] <= attempted[p], \
                    f"cycle {cycle} [{p}]: acknowledged commit {acked[p]}, after kill -9 " \
                    f"OffsetFetch says {got[p]} (last attempted {attempted[p]})"
        acked = {p: got[p] for p in acked}   # an in-flight commit that landed is the new floor
        print(f"cycle {cycle}: {commits_acked} commits acknowledged so far, committed={got}")
    assert commits_acked > 0, "no OffsetCommit was ever acknowledged"
    assert "panicked" not in b.log_text(), b.log_tail()
