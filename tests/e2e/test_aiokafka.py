"""aiokafka (its own asyncio client; speaks ApiVersions v0 and InitProducerId v0 only)."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from clients import consume_partition, create_topic

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def run(coro, timeout_s: float = 60.0):
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


async def _produce(bootstrap, topic, partition, values, **conf):
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=30000, **conf)
    await p.start()
    try:
        futs = [await p.send(topic, value=v, partition=partition) for v in values]
        metas = await asyncio.gather(*futs)
        return [None if m is None else m.offset for m in metas]   # acks=0: no metadata
    finally:
        await p.stop()


async def _read(bootstrap, topic, partition, n, start=None, timestamp_ms=None):
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         request_timeout_ms=30000)
    await c.start()
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        info = {}
        if timestamp_ms is not None:
            found = (await c.offsets_for_times({tp: timestamp_ms}))[tp]
            info["found"] = None if found is None else (found.offset, found.timestamp)
            start = found.offset if found else None
        if start == "beginning":
            await c.seek_to_beginning(tp)
        elif start == "end":
            await c.seek_to_end(tp)
            info["end"] = await c.position(tp)
        elif start is not None:
            c.seek(tp, start)
        info["beginning"] = (await c.beginning_offsets([tp]))[tp]
        info["end_offset"] = (await c.end_offsets([tp]))[tp]
        out = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            batch = await c.getmany(tp, timeout_ms=500)
            out.extend(batch.get(tp, []))
        return out, info
    finally:
        await c.stop()


@pytest.mark.parametrize("acks", [0, 1, "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_produce_consume(broker, topic_name, acks, codec):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    values = [b"aio-%d-" % i * 10 for i in range(40)]
    offsets = run(_produce(broker.bootstrap, topic_name, 0, values, acks=acks,
                           compression_type=codec, linger_ms=5))
    if acks != 0:
        assert offsets == list(range(40))
    got, info = run(_read(broker.bootstrap, topic_name, 0, 40, start="beginning"))
    assert [(r.offset, r.value) for r in got] == list(enumerate(values))
    assert info["beginning"] == 0 and info["end_offset"] == 40


def test_aiokafka_idempotent(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    values = [b"aidem-%d" % i for i in range(200)]
    offsets = run(_produce(broker.bootstrap, topic_name, 0, values, enable_idempotence=True,
                           max_batch_size=512))
    assert offsets == list(range(200))
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 200)
    assert [m.value() for m in got] == values


def test_aiokafka_end_and_timestamp(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    t0 = int(time.time() * 1000) - 3_600_000

    async def produce_timed():
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await p.start()
        try:
            for i in range(5):
                await (await p.send(topic_name, value=b"t%d" % i, partition=0,
                                    timestamp_ms=t0 + i * 1000))
        finally:
            await p.stop()

    run(produce_timed())
    got, info = run(_read(broker.bootstrap, topic_name, 0, 2, timestamp_ms=t0 + 2500))
    assert info["found"] == (3, t0 + 3000)
    assert [r.value for r in got] == [b"t3", b"t4"]
    got, info = run(_read(broker.bootstrap, topic_name, 0, 0, start="end"))
    assert info["end"] == 5 and got == []


def test_aiokafka_admin_create_list_delete(broker, topic_name):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def go():
        a = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
        await a.start()
        try:
            resp = await a.create_topics([NewTopic(topic_name, num_partitions=2,
                                                   replication_factor=1)])
            errors = [t[1] for t in resp.topic_errors]
            assert errors == [0], resp
            listed = await a.list_topics()
            await a.delete_topics([topic_name])
            return listed
        finally:
            await a.close()

    assert topic_name in run(go())
    deadline = time.monotonic() + 15
    from clients import admin
    while topic_name in admin(broker.bootstrap).list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "topic still listed after delete"
        time.sleep(0.1)
