"""confluent-kafka (current librdkafka): produce with every acks/codec, idempotence, consume by offset."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from clients import consume_partition, create_topic, offset_for_time, producer, produce_all, \
    watermarks

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["0", "1", "all"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ACKS)
def test_produce_consume_acks_codec(broker, topic_name, acks, codec):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    msgs = [(f"k{i}".encode(), f"{codec}-{acks}-{i}-".encode() * 20) for i in range(60)]
    p = producer(broker.bootstrap, acks=acks, **{"compression.codec": codec,
                                                "enable.idempotence": False})
    reports = produce_all(p, topic_name, msgs, partition=1)
    if acks != "0":
        assert [r[2] for r in reports] == list(range(60)), "offsets must be dense from 0"
    got = consume_partition(broker.bootstrap, topic_name, 1, 0, 60)
    assert [(m.key(), m.value()) for m in got] == msgs
    assert [m.offset() for m in got] == list(range(60))
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 60)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)


def test_idempotent_producer_no_duplicates(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    p = producer(broker.bootstrap, **{"enable.idempotence": True, "linger.ms": 2,
                                      "batch.num.messages": 7, "compression.codec": "lz4"})
    for part in (0, 1):
        msgs = [(None, f"p{part}-{i}".encode()) for i in range(300)]
        reports = produce_all(p, topic_name, msgs, partition=part)
        assert [r[2] for r in reports] == list(range(300))
    for part in (0, 1):
        got = consume_partition(broker.bootstrap, topic_name, part, 0, 300)
        assert [m.value() for m in got] == [f"p{part}-{i}".encode() for i in range(300)]
        assert watermarks(broker.bootstrap, topic_name, part) == (0, 300)


def test_consume_from_end_sees_only_new(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    p = producer(broker.bootstrap, acks="all")
    produce_all(p, topic_name, [(None, b"old-%d" % i) for i in range(10)])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rill-e2e-unused",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic_name, 0, OFFSET_END)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:       # let the end offset resolve before producing
            c.poll(0.2)
            pos = c.position([TopicPartition(topic_name, 0)])[0].offset
            if pos == 10:
                break
        produce_all(p, topic_name, [(None, b"new-%d" % i) for i in range(5)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
        assert [m.value() for m in got] == [b"new-%d" % i for i in range(5)]
        assert [m.offset() for m in got] == list(range(10, 15))
    finally:
        c.close()


def test_consume_from_middle_offset(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    p = producer(broker.bootstrap, acks="all", **{"batch.num.messages": 10})
    produce_all(p, topic_name, [(None, b"m%d" % i) for i in range(100)])
    got = consume_partition(broker.bootstrap, topic_name, 0, 37, 63)
    assert [m.offset() for m in got] == list(range(37, 100))
    assert got[0].value() == b"m37"


def _produce_timed(bootstrap: str, topic: str, t0: int, n: int, one_batch_each: bool):
    p = producer(bootstrap, acks="all")
    if one_batch_each:
        for i in range(n):
            produce_all(p, topic, [(None, b"t%d" % i, t0 + i * 1000)])
    else:
        produce_all(p, topic, [(None, b"t%d" % i, t0 + i * 1000) for i in range(n)])


def test_offsets_for_times_batch_per_message(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    t0 = int(time.time() * 1000) - 3_600_000
    _produce_timed(broker.bootstrap, topic_name, t0, 10, one_batch_each=True)
    assert offset_for_time(broker.bootstrap, topic_name, 0, t0 - 5000) == 0
    assert offset_for_time(broker.bootstrap, topic_name, 0, t0 + 3500) == 4
    assert offset_for_time(broker.bootstrap, topic_name, 0, t0 + 4000) == 4
    assert offset_for_time(broker.bootstrap, topic_name, 0, t0 + 9000) == 9
    # No message at or after the time: Kafka answers offset -1 (librdkafka reports OFFSET_END).
    assert offset_for_time(broker.bootstrap, topic_name, 0, t0 + 60_000) == OFFSET_END
    got = consume_partition(broker.bootstrap, topic_name, 0, 4, 6)
    assert [m.timestamp()[1] for m in got] == [t0 + i * 1000 for i in range(4, 10)]


def test_offsets_for_times_inside_one_batch(broker, topic_name):
    """Kafka resolves a timestamp to the exact record, even inside one batch."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    t0 = int(time.time() * 1000) - 3_600_000
    _produce_timed(broker.bootstrap, topic_name, t0, 10, one_batch_each=False)
    assert offset_for_time(broker.bootstrap, topic_name, 0, t0 + 3500) == 4


def test_message_headers_and_null_key_roundtrip(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    p = producer(broker.bootstrap, acks="all")
    p.produce(topic_name, value=b"v", key=None, partition=0,
              headers=[("h1", b"one"), ("h2", None)])
    p.produce(topic_name, value=None, key=b"tombstone", partition=0)
    assert p.flush(30) == 0
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 2)
    assert got[0].key() is None and got[0].headers() == [("h1", b"one"), ("h2", None)]
    assert got[1].value() is None and got[1].key() == b"tombstone"


def test_large_message_near_limit(broker, topic_name):
    """A ~900 KiB value (under the 1 MiB default) goes through uncompressed."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    value = bytes(range(256)) * 3600
    p = producer(broker.bootstrap, acks="all", **{"message.max.bytes": 2_000_000})
    produce_all(p, topic_name, [(None, value)])
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 1,
                            **{"fetch.max.bytes": 10_000_000})
    assert got[0].value() == value


def test_one_consumer_many_partitions_across_shards(broker, topic_name):
    """Partitions live on different shards; one producer and one consumer span all of them."""
    create_topic(broker.bootstrap, topic_name, partitions=6)
    p = producer(broker.bootstrap, acks="all", **{"linger.ms": 20})
    reports = []

    def on_delivery(err, msg):
        reports.append((err, msg.partition()))

    for i in range(600):
        p.produce(topic_name, value=b"s%d" % i, partition=i % 6, on_delivery=on_delivery)
    assert p.flush(30) == 0
    assert all(err is None for err, _ in reports)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rill-e2e-unused",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic_name, part, 0) for part in range(6)])
        seen: dict[int, list[bytes]] = {part: [] for part in range(6)}
        deadline = time.monotonic() + 30
        while sum(map(len, seen.values())) < 600 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen[m.partition()].append(m.value())
        for part in range(6):
            assert seen[part] == [b"s%d" % i for i in range(part, 600, 6)], f"partition {part}"
    finally:
        c.close()


def test_fetch_smaller_than_a_batch_still_progresses(broker, topic_name):
    """KIP-74: a fetch returns at least one whole batch even if it exceeds the fetch size."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    value = b"z" * 20_000
    p = producer(broker.bootstrap, acks="all", **{"compression.codec": "none"})
    for i in range(5):                       # one batch per message
        produce_all(p, topic_name, [(None, value + b"%d" % i)])
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 5,
                            **{"fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024,
                               "message.max.bytes": 1000, "receive.message.max.bytes": 1_000_000})
    assert [m.value() for m in got] == [value + b"%d" % i for i in range(5)]


def test_out_of_range_offset_resets_to_earliest(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    produce_all(producer(broker.bootstrap, acks="all"), topic_name,
                [(None, b"o%d" % i) for i in range(10)])
    got = consume_partition(broker.bootstrap, topic_name, 0, 1000, 10,
                            **{"auto.offset.reset": "earliest"})
    assert [m.offset() for m in got] == list(range(10))


def test_deleted_topic_recreated_is_empty(broker, topic_name):
    from clients import admin
    create_topic(broker.bootstrap, topic_name, partitions=2)
    produce_all(producer(broker.bootstrap, acks="all"), topic_name,
                [(None, b"old%d" % i) for i in range(10)], partition=1)
    a = admin(broker.bootstrap)
    a.delete_topics([topic_name], operation_timeout=10)[topic_name].result(timeout=30)
    deadline = time.monotonic() + 15
    while True:
        try:
            create_topic(broker.bootstrap, topic_name, partitions=2)
            break
        except Exception:                    # deletion may still be completing
            assert time.monotonic() < deadline
            time.sleep(0.2)
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 0), "old data came back"
    reports = produce_all(producer(broker.bootstrap, acks="all"), topic_name, [(None, b"new")],
                          partition=1)
    assert reports[0][2] == 0
    assert consume_partition(broker.bootstrap, topic_name, 1, 0, 1)[0].value() == b"new"
