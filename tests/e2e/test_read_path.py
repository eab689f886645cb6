"""Catch-up reads while a producer appends: every byte served is the byte produced.

The broker runs with a small read cache (rill.read.cache.bytes) and the log grows to about 3x
the per-partition batch cache in one segment, so consumers that read behind the tail load cold
extents of the active segment (read ahead) while appends, background writes and fsyncs go on
at its tail. (Sealed segments, and the same race with seeded latency, are covered by the engine's
simulated-disk tests in engine/src/read_path_tests.rs.)
"""

from __future__ import annotations

import random
import threading

from confluent_kafka import Consumer, TopicPartition

from clients import CLIENT_TIMEOUT_S, create_topic, produce_all, producer

#: Messages produced; with ~1 KiB values, about 3x the 4 MiB batch cache of a partition.
MESSAGES = 12_000


def value(i: int) -> bytes:
    """A value that tells its index apart from every other one, byte for byte."""
    return (b"%08d|" % i) * 113


def consume_checked(bootstrap: str, topic: str, start: int, count: int,
                    errors: list[str]) -> None:
    """Read `count` messages from offset `start` and check each offset and value."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rill-e2e-unused",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "fetch.wait.max.ms": 50, "max.partition.fetch.bytes": 256 * 1024})
    c.assign([TopicPartition(topic, 0, start)])
    expected = start
    try:
        while expected < start + count:
            batch = c.consume(num_messages=1000, timeout=CLIENT_TIMEOUT_S)
            if not batch:
                errors.append(f"no message at offset {expected} within {CLIENT_TIMEOUT_S} s")
                return
            for m in batch:
                if m.error():
                    errors.append(f"consumer error {m.error()}")
                    return
                if m.offset() != expected or m.value() != value(expected):
                    errors.append(f"offset {m.offset()} (expected {expected}): "
                                  f"value {m.value()[:20]!r}...")
                    return
                expected += 1
                if expected == start + count:
                    break
    finally:
        c.close()


def test_catch_up_reads_racing_appends_serve_exactly_what_was_produced(broker_factory, tmp_path,
                                                                        topic_name):
    props = tmp_path / "read-path.properties"
    props.write_text("rill.read.cache.bytes=2097152\n")
    b = broker_factory(config_path=props)
    # One segment: every cold read is of the active segment, racing the appends at its tail.
    create_topic(b.bootstrap, topic_name, partitions=1,
                 config={"segment.bytes": str(64 << 20), "index.interval.bytes": "4096"})
    errors: list[str] = []
    acked = [0]
    done = threading.Event()

    def produce() -> None:
        p = producer(b.bootstrap, acks="all", **{"linger.ms": 2, "batch.num.messages": 64})
        for start in range(0, MESSAGES, 500):
            produce_all(p, topic_name, [(None, value(i)) for i in range(start, start + 500)])
            acked[0] = start + 500
        done.set()

    def read_behind(seed: int) -> None:
        # Catch-up passes from random acknowledged offsets, mostly far behind the tail (cold).
        rng = random.Random(seed)
        while not done.is_set() and not errors:
            start = rng.randrange(max(acked[0] - 1000, 1))
            consume_checked(b.bootstrap, topic_name, start, min(1000, acked[0] - start), errors)

    writer = threading.Thread(target=produce)
    writer.start()
    readers = [threading.Thread(target=read_behind, args=(seed,)) for seed in range(2)]
    for r in readers:
        r.start()
    writer.join()
    for r in readers:
        r.join()
    # Once everything is written: a whole catch-up from cold.
    consume_checked(b.bootstrap, topic_name, 0, MESSAGES, errors)
    assert not errors, errors
    assert "panicked" not in b.log_text()


def test_a_catch_up_read_progresses_under_continuous_acks_all_produce(broker_factory, topic_name):
    """While acks=all producers keep the partition flushing, its read-ahead is held
    (rill.read.ahead.hold.ms: one load in flight at a time): a catch-up reader must still get
    every message, in order, each read served once its own bytes are loaded. The producer never pauses while it reads."""
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=1)
    backlog = 20_000  # ~20 MiB: most of it past the batch cache, read cold
    p = producer(b.bootstrap, acks="all")
    produce_all(p, topic_name, [(None, value(i)) for i in range(backlog)])
    stop = threading.Event()
    produced = [0]
    failures: list[str] = []

    def produce_continuously() -> None:
        q = producer(b.bootstrap, acks="all", **{"linger.ms": 0})
        i = backlog
        while not stop.is_set():
            q.produce(topic_name, value(i), partition=0,
                      on_delivery=lambda err, _m: err and failures.append(str(err)))
            q.poll(0)
            q.flush(CLIENT_TIMEOUT_S)  # one durable produce after another, no pause
            produced[0] += 1
            i += 1
        q.flush(CLIENT_TIMEOUT_S)

    writer = threading.Thread(target=produce_continuously)
    writer.start()
    errors: list[str] = []
    try:
        consume_checked(b.bootstrap, topic_name, 0, backlog, errors)
    finally:
        stop.set()
        writer.join()
    assert not errors, errors
    assert not failures, failures
    assert produced[0] > 0, "the producer ran while the reader read"
    assert "panicked" not in b.log_text()
