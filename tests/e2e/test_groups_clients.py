"""Group consumers of every client (issue 5): kafkajs, confluent-kafka, kafka-python, aiokafka and
kcat subscribe, consume a multi-partition topic and commit; the commit is then read back through
OffsetFetch by another client (confluent-kafka's `committed()`).

(Was a skipped placeholder written before consumer groups existed; now it runs.)
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from clients import create_topic, kafkajs, producer, produce_all

PARTITIONS = 3
PER_PARTITION = 10


def committed_total(bootstrap, group, topic, partitions=PARTITIONS) -> int:
    """Sum of the group's committed offsets (OffsetFetch), -1 counted as 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return sum(max(tp.offset, 0) for tp in tps)
    finally:
        c.close()


def _seed(broker, topic, partitions=PARTITIONS, per_partition=PER_PARTITION):
    create_topic(broker.bootstrap, topic, partitions=partitions)
    p = producer(broker.bootstrap, acks="all")
    for part in range(partitions):
        produce_all(p, topic, [(None, f"p{part}-{i}".encode()) for i in range(per_partition)],
                    partition=part)
    return {f"p{part}-{i}" for part in range(partitions) for i in range(per_partition)}


def test_kafkajs_group_consumer(broker, topic_name):
    expected = _seed(broker, topic_name)
    got = kafkajs(broker.bootstrap, "group-consume",
                  {"topic": topic_name, "groupId": f"g-{topic_name}", "count": len(expected)})
    assert {m["value"] for m in got} == expected
    assert committed_total(broker.bootstrap, f"g-{topic_name}", topic_name) == len(expected)


def test_confluent_group_consumer(broker, topic_name):
    from confluent_kafka import Consumer
    expected = _seed(broker, topic_name)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic_name}",
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        c.subscribe([topic_name])
        seen = set()
        deadline = time.monotonic() + 60
        while len(seen) < len(expected) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen.add(m.value().decode())
        assert seen == expected
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert committed_total(broker.bootstrap, f"g-{topic_name}", topic_name) == len(expected)


def test_kafka_python_group_consumer(broker, topic_name):
    from kafka import KafkaConsumer
    expected = _seed(broker, topic_name)
    c = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
                      auto_offset_reset="earliest", consumer_timeout_ms=30000,
                      session_timeout_ms=6000, heartbeat_interval_ms=1000)
    try:
        # range first: zip stops before asking the consumer for one message too many.
        seen = {r.value.decode() for _, r in zip(range(len(expected)), c)}
        assert seen == expected
        c.commit()
    finally:
        c.close()
    assert committed_total(broker.bootstrap, f"g-{topic_name}", topic_name) == len(expected)


def test_aiokafka_group_consumer(broker, topic_name):
    import asyncio
    from aiokafka import AIOKafkaConsumer
    expected = _seed(broker, topic_name)

    async def go():
        c = AIOKafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap,
                             group_id=f"g-{topic_name}", auto_offset_reset="earliest",
                             session_timeout_ms=6000, heartbeat_interval_ms=1000)
        await c.start()
        try:
            seen = set()
            while len(seen) < len(expected):
                for records in (await c.getmany(timeout_ms=500)).values():
                    seen.update(r.value.decode() for r in records)
            await c.commit()
            return seen
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(go(), 60)) == expected
    assert committed_total(broker.bootstrap, f"g-{topic_name}", topic_name) == len(expected)


def test_kcat_balanced_consumer(broker, topic_name):
    from clients import kcat
    expected = _seed(broker, topic_name)
    out = kcat(broker.bootstrap, "-G", f"g-{topic_name}", "-X", "auto.offset.reset=earliest",
               "-q", "-f", "%s\\n", "-c", str(len(expected)), topic_name, timeout_s=60).stdout
    assert set(out.decode().split()) == expected
