"""kafka-python: produce with acks/codecs/idempotence, assigned consumer from beginning/end/time."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from clients import consume_partition, create_topic

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def _producer(broker, **conf) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000,
                         max_block_ms=30000, **conf)


def _consumer(broker) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                         enable_auto_commit=False, consumer_timeout_ms=20000,
                         request_timeout_ms=30000)


def _read(consumer: KafkaConsumer, n: int, timeout_s: float = 30.0) -> list:
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            out.extend(records)
    return out


@pytest.mark.parametrize("acks", [0, 1, "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produce_consume(broker, topic_name, acks, codec):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    p = _producer(broker, acks=acks, compression_type=codec, enable_idempotence=False,
                  linger_ms=5)
    futures = [p.send(topic_name, key=b"k%d" % i, value=b"kp-%d" % i, partition=1)
               for i in range(50)]
    p.flush(timeout=30)
    metas = [f.get(timeout=30) for f in futures]
    p.close()
    if acks != 0:
        assert [m.offset for m in metas] == list(range(50))
    c = _consumer(broker)
    try:
        tp = TopicPartition(topic_name, 1)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = _read(c, 50)
        assert [(r.offset, r.key, r.value) for r in got] == \
            [(i, b"k%d" % i, b"kp-%d" % i) for i in range(50)]
    finally:
        c.close()


def test_kafka_python_idempotent(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    p = _producer(broker, enable_idempotence=True, acks="all", batch_size=512, linger_ms=2)
    futures = [p.send(topic_name, value=b"idem-%04d" % i, partition=0) for i in range(300)]
    p.flush(timeout=30)
    assert [f.get(timeout=30).offset for f in futures] == list(range(300))
    p.close()
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 300)
    assert [m.value() for m in got] == [b"idem-%04d" % i for i in range(300)]


def test_kafka_python_seek_end_and_offsets_for_times(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    t0 = int(time.time() * 1000) - 3_600_000
    p = _producer(broker, acks="all", enable_idempotence=False)
    for i in range(6):
        p.send(topic_name, value=b"t%d" % i, partition=0, timestamp_ms=t0 + i * 1000)
        p.flush(timeout=30)                  # one batch per message
    c = _consumer(broker)
    try:
        tp = TopicPartition(topic_name, 0)
        assert c.beginning_offsets([tp])[tp] == 0
        assert c.end_offsets([tp])[tp] == 6
        found = c.offsets_for_times({tp: t0 + 2500})[tp]
        assert found is not None and found.offset == 3 and found.timestamp == t0 + 3000
        assert c.offsets_for_times({tp: t0 + 60_000})[tp] is None
        c.assign([tp])
        c.seek(tp, found.offset)
        assert [r.value for r in _read(c, 3)] == [b"t3", b"t4", b"t5"]
        c.seek_to_end(tp)
        assert c.position(tp) == 6
        p.send(topic_name, value=b"after-end", partition=0)
        p.flush(timeout=30)
        got = _read(c, 1)
        assert [(r.offset, r.value) for r in got] == [(6, b"after-end")]
    finally:
        c.close()
        p.close()
