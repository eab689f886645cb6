"""Broker and topic configuration through Kafka's own property names, with the data on disk."""

from __future__ import annotations

import time

from clients import admin, consume_partition, create_topic, offset_for_time, producer, \
    produce_all, wait_for_topic, watermarks


def test_config_file_kafka_properties(broker_factory, tmp_path, topic_name):
    props = tmp_path / "rill.properties"
    props.write_text("# Kafka property names\nnum.partitions=3\nauto.create.topics.enable=true\n"
                     "log.segment.bytes=65536\n")
    b = broker_factory(config_path=props, partitions_default=None)
    produce_all(producer(b.bootstrap, acks="all"), topic_name, [(None, b"x")])
    wait_for_topic(b.bootstrap, topic_name, 3)


def test_many_segments_survive_restart(broker_factory, topic_name):
    """Small segments (topic segment.bytes): rolls, time lookups across segments, recovery."""
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=1,
                 config={"segment.bytes": "65536", "index.interval.bytes": "1024"})
    t0 = int(time.time() * 1000) - 3_600_000
    p = producer(b.bootstrap, acks="all", **{"linger.ms": 0, "batch.num.messages": 10})
    values = [(b"seg-%05d-" % i) * 40 for i in range(2000)]          # ~0.9 MiB in all
    produce_all(p, topic_name, [(None, v, t0 + i) for i, v in enumerate(values)])
    segments = sorted((b.data_dir / f"{topic_name}-0").glob("*.log"))
    assert len(segments) > 5, f"expected segment rolls, found {[s.name for s in segments]}"
    by_time = offset_for_time(b.bootstrap, topic_name, 0, t0 + 1500)
    assert 1490 <= by_time <= 1500, by_time           # batch or record precision
    b.restart(graceful=True)
    assert watermarks(b.bootstrap, topic_name, 0) == (0, 2000)
    assert offset_for_time(b.bootstrap, topic_name, 0, t0 + 1500) == by_time
    got = consume_partition(b.bootstrap, topic_name, 0, 0, 2000)
    assert [m.value() for m in got] == values
    mid = consume_partition(b.bootstrap, topic_name, 0, 1234, 10)
    assert [m.offset() for m in mid] == list(range(1234, 1244))


def test_topic_configs_described(broker, topic_name):
    from confluent_kafka.admin import ConfigResource
    create_topic(broker.bootstrap, topic_name, partitions=1,
                 config={"retention.ms": "123456", "max.message.bytes": "2000000"})
    a = admin(broker.bootstrap)
    res = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic_name)])
    configs = list(res.values())[0].result(timeout=30)
    assert configs["retention.ms"].value == "123456"
    assert configs["max.message.bytes"].value == "2000000"
    assert configs["cleanup.policy"].value == "delete"
    # max.message.bytes raised: a 1.5 MiB message now fits.
    big = b"b" * 1_500_000
    p = producer(broker.bootstrap, acks="all", **{"message.max.bytes": 3_000_000,
                                                 "compression.codec": "none"})
    produce_all(p, topic_name, [(None, big)])
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 1,
                            **{"fetch.max.bytes": 10_000_000,
                               "max.partition.fetch.bytes": 10_000_000})
    assert got[0].value() == big
