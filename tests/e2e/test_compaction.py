"""Compaction (cleanup.policy=compact): many updates and tombstones compact down to the latest
value of each key, at its original offset, read back by three client families and after a restart.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from clients import CLIENT_TIMEOUT_S, admin, create_topic, kafkajs, produce_all, producer, \
    watermarks

KEYS = 200
ROUNDS = 15
DELETED = 50          # keys k000..k049 end with a tombstone


def _read_all_confluent(bootstrap: str, topic: str) -> list[tuple[int, str, str | None]]:
    """Every record of partition 0 from its start to its high watermark: (offset, key, value)."""
    low, high = watermarks(bootstrap, topic, 0)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rill-e2e-unused",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    out = []
    try:
        c.assign([TopicPartition(topic, 0, low)])
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:          # _PARTITION_EOF: at the high watermark
                    return out
                raise KafkaException(msg.error())
            value = None if msg.value() is None else msg.value().decode()
            out.append((msg.offset(), msg.key().decode(), value))
        raise AssertionError(f"no end of partition within {CLIENT_TIMEOUT_S}s at {out[-1:]} "
                             f"(watermarks {low}, {high})")
    finally:
        c.close()


def _read_all_kafka_python(bootstrap: str, topic: str, count: int) -> list:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      request_timeout_ms=30000)
    try:
        tp = KpTopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        out = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(out) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                out.extend((r.offset, r.key.decode(), None if r.value is None else r.value.decode())
                           for r in records)
        return out
    finally:
        c.close()


def _sealed_log_bytes(b, topic: str) -> int:
    """Bytes of the partition's sealed segments (the active one is preallocated)."""
    logs = sorted((b.data_dir / f"{topic}-0").glob("*.log"))
    return sum(f.stat().st_size for f in logs[:-1])


def _expected(reports: list, keys: list[bytes]) -> list[tuple[int, str, str | None]]:
    """The latest record of each key from the delivery reports, minus deleted keys."""
    latest: dict[str, tuple[int, str | None]] = {}
    for (err, _partition, offset, value), key in zip(reports, keys):
        assert err is None
        latest[key.decode()] = (offset, None if value is None else value.decode())
    return sorted((offset, key, value) for key, (offset, value) in latest.items()
                  if value is not None)


def test_updates_and_tombstones_compact_to_latest_values(broker_factory, tmp_path, topic_name):
    props = tmp_path / "rill.properties"
    props.write_text("log.cleaner.backoff.ms=200\n")
    b = broker_factory(config_path=props)
    create_topic(b.bootstrap, topic_name, partitions=1, config={
        "cleanup.policy": "compact", "segment.bytes": "16384", "segment.ms": "1500",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    messages = [(b"k%03d" % k, b"k%03d-r%02d" % (k, r)) for r in range(ROUNDS) for k in range(KEYS)]
    messages += [(b"k%03d" % k, None) for k in range(DELETED)]
    p = producer(b.bootstrap, acks="all", **{"compression.codec": "snappy", "linger.ms": 2,
                                              "batch.num.messages": 25})
    reports = produce_all(p, topic_name, messages)
    time.sleep(1.6)  # segment.ms: the next append rolls the segment holding every update
    reports += produce_all(p, topic_name, [(b"sentinel", b"end")])
    expected = _expected(reports, [m[0] for m in messages] + [b"sentinel"])
    assert len(expected) == KEYS - DELETED + 1
    log_bytes_before = _sealed_log_bytes(b, topic_name)

    deadline = time.monotonic() + 60
    got = _read_all_confluent(b.bootstrap, topic_name)
    while got != expected and time.monotonic() < deadline:
        time.sleep(0.5)
        got = _read_all_confluent(b.bootstrap, topic_name)
    assert got == expected, f"not compacted to the latest values: {len(got)} records, " \
                            f"first differences {[g for g in got if g not in expected][:5]}"
    log_bytes = _sealed_log_bytes(b, topic_name)
    assert log_bytes < log_bytes_before / 5, (log_bytes, log_bytes_before)
    assert watermarks(b.bootstrap, topic_name, 0) == (0, len(messages) + 1), "offsets kept"

    assert _read_all_kafka_python(b.bootstrap, topic_name, len(expected)) == expected
    # kafkajs's own group consumer: it must step over the gaps and the empty batch at the end of
    # the cleaned range (the raw `fetch` helper cannot: it sees records, not batches).
    js = kafkajs(b.bootstrap, "group-consume", {"topic": topic_name, "groupId": topic_name,
                                                "count": len(expected)})
    assert [(int(m["offset"]), m["value"]) for m in js] == [(o, v) for o, _, v in expected]

    b.restart(graceful=False)   # kill -9: cleaned segments recover as they are
    assert _read_all_confluent(b.bootstrap, topic_name) == expected


def test_compact_delete_policy_and_bad_values(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1,
                 config={"cleanup.policy": "compact,delete", "retention.ms": "600000",
                         "min.compaction.lag.ms": "10", "max.compaction.lag.ms": "60000"})
    a = admin(broker.bootstrap)
    res = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic_name)])
    configs = list(res.values())[0].result(timeout=CLIENT_TIMEOUT_S)
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["max.compaction.lag.ms"].value == "60000"
    for name, value in [("cleanup.policy", "shred"), ("min.cleanable.dirty.ratio", "2"),
                        ("delete.retention.ms", "-5")]:
        futures = a.create_topics([NewTopic(topic_name + "-bad", num_partitions=1,
                                            replication_factor=1, config={name: value})],
                                  request_timeout=CLIENT_TIMEOUT_S)
        with pytest.raises(KafkaException) as refused:
            futures[topic_name + "-bad"].result(timeout=CLIENT_TIMEOUT_S)
        err = refused.value.args[0]
        assert err.name() == "INVALID_CONFIG", err
        assert name in err.str(), f"the message names the config: {err.str()}"
