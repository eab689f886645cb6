"""Restart the broker on the same data directory and read everything back, with every client."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker_watchdog import WATCHDOG
from clients import admin, consume_partition, create_topic, kafkajs, kcat, offset_for_time, \
    producer, produce_all, wait_for_topic, watermarks


def _write_with_every_client(b, topic: str, t0: int) -> dict[int, list[bytes]]:
    """Write to partitions 0..4 of `topic`, one client per partition; return expected values."""
    expected: dict[int, list[bytes]] = {}

    vals = [b"confluent-%d" % i for i in range(50)]
    p = producer(b.bootstrap, acks="all", **{"compression.codec": "zstd",
                                            "enable.idempotence": True})
    produce_all(p, topic, [(None, v, t0 + i) for i, v in enumerate(vals)], partition=0)
    expected[0] = vals

    vals = [b"kcat-%d" % i for i in range(50)]
    kcat(b.bootstrap, "-P", "-t", topic, "-p", "1", "-z", "lz4", "-X", "acks=all",
         input=b"\n".join(vals) + b"\n")
    expected[1] = vals

    vals = [b"kafka-python-%d" % i for i in range(50)]
    kp = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", compression_type="gzip")
    for v in vals:
        kp.send(topic, value=v, partition=2)
    kp.flush(timeout=30)
    kp.close()
    expected[2] = vals

    vals = [b"aiokafka-%d" % i for i in range(50)]

    async def aio():
        ap = AIOKafkaProducer(bootstrap_servers=b.bootstrap, acks="all",
                              compression_type="snappy")
        await ap.start()
        try:
            for v in vals:
                await ap.send(topic, value=v, partition=3)
            await ap.flush()
        finally:
            await ap.stop()

    asyncio.run(asyncio.wait_for(aio(), 60))
    expected[3] = vals

    vals = [b"kafkajs-%d" % i for i in range(50)]
    kafkajs(b.bootstrap, "produce", {"topic": topic, "partition": 4, "acks": -1,
                                     "compression": "gzip", "chunk": 10,
                                     "messages": [{"value": v.decode()} for v in vals]})
    expected[4] = vals
    return expected


def _check_all(b, topic: str, expected: dict[int, list[bytes]]) -> None:
    for part, vals in expected.items():
        got = consume_partition(b.bootstrap, topic, part, 0, len(vals))
        assert [m.value() for m in got] == vals, f"partition {part}"
        assert watermarks(b.bootstrap, topic, part) == (0, len(vals)), f"partition {part}"
    if 4 in expected:                        # kcat reads what kafkajs wrote
        out = kcat(b.bootstrap, "-C", "-t", topic, "-p", "4", "-o", "beginning", "-e").stdout
        assert out.split(b"\n")[:-1] == expected[4]
    if 2 in expected:                        # kafkajs reads kafka-python's gzip batches
        # (not kcat's partition 1: kafkajs has no lz4 codec here)
        js = kafkajs(b.bootstrap, "fetch", {"topic": topic, "partition": 2, "offset": 0,
                                            "count": len(expected[2])})
        assert [m["value"].encode() for m in js] == expected[2]
    if 2 in expected:                        # kafka-python reads back what it wrote
        kc = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=None, enable_auto_commit=False)
        try:
            tp = TopicPartition(topic, 2)
            kc.assign([tp])
            kc.seek_to_beginning(tp)
            got: list = []
            deadline = time.monotonic() + 30
            while len(got) < len(expected[2]) and time.monotonic() < deadline:
                for records in kc.poll(timeout_ms=500).values():
                    got.extend(r.value for r in records)
            assert got == expected[2]
        finally:
            kc.close()
    if 3 in expected:                        # aiokafka reads back what it wrote
        async def aio_read():
            ac = AIOKafkaConsumer(bootstrap_servers=b.bootstrap, group_id=None,
                                  enable_auto_commit=False)
            await ac.start()
            try:
                atp = AioTopicPartition(topic, 3)
                ac.assign([atp])
                await ac.seek_to_beginning(atp)
                got: list = []
                while len(got) < len(expected[3]):
                    batch = await ac.getmany(atp, timeout_ms=500)
                    got.extend(r.value for r in batch.get(atp, []))
                return got
            finally:
                await ac.stop()
        assert asyncio.run(asyncio.wait_for(aio_read(), 30)) == expected[3]


def test_graceful_restart_keeps_topics_data_and_offsets(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=5, config={"retention.ms": "86400000"})
    deleted = topic_name + "-deleted"
    create_topic(b.bootstrap, deleted, partitions=2)
    a = admin(b.bootstrap)
    a.delete_topics([deleted])[deleted].result(timeout=30)
    t0 = int(time.time() * 1000) - 3_600_000
    expected = _write_with_every_client(b, topic_name, t0)
    _check_all(b, topic_name, expected)
    by_time = offset_for_time(b.bootstrap, topic_name, 0, t0 + 10)

    b.restart(graceful=True)

    wait_for_topic(b.bootstrap, topic_name, 5)
    topics = admin(b.bootstrap).list_topics(timeout=10).topics
    assert deleted not in topics, "a deleted topic came back after restart"
    _check_all(b, topic_name, expected)
    # The time index answers as before the restart (record-level precision is tested in
    # test_confluent.py::test_offsets_for_times_inside_one_batch).
    assert offset_for_time(b.bootstrap, topic_name, 0, t0 + 10) == by_time
    assert offset_for_time(b.bootstrap, topic_name, 0, t0 + 3_600_000) == -1
    # Appends continue after the recovered end, never reusing an offset.
    reports = produce_all(producer(b.bootstrap, acks="all"), topic_name, [(None, b"after")],
                          partition=0)
    assert reports[0][2] == 50
    # A fresh idempotent producer works against recovered producer state.
    p = producer(b.bootstrap, **{"enable.idempotence": True})
    reports = produce_all(p, topic_name, [(None, b"idem-after-%d" % i) for i in range(20)],
                          partition=0)
    assert [r[2] for r in reports] == list(range(51, 71))

    b.restart(graceful=True)                 # twice: recovery of a recovered log
    _check_all(b, topic_name, {1: expected[1], 2: expected[2]})
    assert watermarks(b.bootstrap, topic_name, 0) == (0, 71)


def test_kill9_keeps_every_acks_all_message(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=2)
    p = producer(b.bootstrap, acks="all", **{"enable.idempotence": True, "linger.ms": 1})
    acked = {0: [], 1: []}
    for round_ in range(3):
        for part in (0, 1):
            vals = [b"r%d-p%d-%d" % (round_, part, i) for i in range(40)]
            reports = produce_all(p, topic_name, [(None, v) for v in vals], partition=part)
            acked[part].extend((r[2], r[3]) for r in reports)
        b.restart(graceful=False)            # SIGKILL: no flush, no close
        wait_for_topic(b.bootstrap, topic_name, 2)
    for part in (0, 1):
        got = consume_partition(b.bootstrap, topic_name, part, 0, len(acked[part]))
        assert [(m.offset(), m.value()) for m in got] == acked[part]
    # kcat (librdkafka 2.0.2) sees the same after the crash-restarts.
    out = kcat(b.bootstrap, "-C", "-t", topic_name, "-p", "1", "-o", "beginning", "-e").stdout
    assert out.split(b"\n")[:-1] == [v for _, v in acked[1]]


def test_kcat_reads_everything_after_restart(broker_factory, topic_name):
    b = broker_factory()
    lines = [f"line-{i}" for i in range(100)]
    kcat(b.bootstrap, "-P", "-t", topic_name, "-X", "acks=all",
         input="\n".join(lines).encode() + b"\n")
    b.restart(graceful=True)
    out = kcat(b.bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "beginning", "-e").stdout
    assert out.decode().splitlines() == lines


def test_sigint_stops_cleanly_and_keeps_data(broker_factory, topic_name):
    import signal
    b = broker_factory()
    produce_all(producer(b.bootstrap, acks="all"), topic_name, [(None, b"int-%d" % i)
                                                               for i in range(10)])
    # Disarmed first: this exit is asked for, and the watchdog must not see it unasked.
    WATCHDOG.disarm(b)
    b.proc.send_signal(signal.SIGINT)
    assert b.proc.wait(timeout=20) == 0, b.log_tail()
    b.start()
    got = consume_partition(b.bootstrap, topic_name, 0, 0, 10)
    assert [m.value() for m in got] == [b"int-%d" % i for i in range(10)]
