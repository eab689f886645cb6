"""kafkajs 2.2: producer (acks, codecs, idempotence), admin offsets, and a partition-level Fetch.

kafkajs consumers always join a group (see test_kafkajs_groups.py); here reading goes through
kafkajs's own broker Fetch on a chosen partition (tests/clients/node/rill-kafkajs.js `fetch`).
"""

from __future__ import annotations

import time

import pytest

from clients import consume_partition, create_topic, kafkajs

# kafkajs ships gzip; snappy comes from kafkajs-snappy. lz4/zstd need native codec packages.
CODECS = ["none", "gzip", "snappy"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", [0, 1, -1])
def test_kafkajs_produce_then_read(broker, topic_name, acks, codec):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    messages = [{"key": f"k{i}", "value": f"js-{codec}-{i}"} for i in range(30)]
    res = kafkajs(broker.bootstrap, "produce", {"topic": topic_name, "partition": 1, "acks": acks,
                                                "compression": codec, "messages": messages,
                                                "chunk": 10})
    if acks != 0:
        assert [int(r["baseOffset"]) for r in res] == [0, 10, 20]
        assert all(r["errorCode"] == 0 for r in res)
    # Read back with another client (librdkafka) and with kafkajs's own Fetch.
    got = consume_partition(broker.bootstrap, topic_name, 1, 0, 30)
    assert [(m.key().decode(), m.value().decode()) for m in got] == \
        [(m["key"], m["value"]) for m in messages]
    js = kafkajs(broker.bootstrap, "fetch", {"topic": topic_name, "partition": 1, "offset": 0,
                                             "count": 30})
    assert [(int(m["offset"]), m["value"]) for m in js] == \
        [(i, m["value"]) for i, m in enumerate(messages)]


def test_kafkajs_idempotent_produce(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    messages = [{"value": f"jsidem-{i}"} for i in range(100)]
    res = kafkajs(broker.bootstrap, "produce", {"topic": topic_name, "partition": 0, "acks": -1,
                                                "idempotent": True, "messages": messages,
                                                "chunk": 10})
    assert [int(r["baseOffset"]) for r in res] == list(range(0, 100, 10))
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 100)
    assert [m.value().decode() for m in got] == [m["value"] for m in messages]


def test_kafkajs_offsets_and_offsets_by_timestamp(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    t0 = int(time.time() * 1000) - 3_600_000
    messages = [{"value": f"t{i}", "timestamp": t0 + i * 1000} for i in range(6)]
    kafkajs(broker.bootstrap, "produce", {"topic": topic_name, "partition": 0, "acks": -1,
                                          "messages": messages, "chunk": 1})
    offsets = {o["partition"]: o for o in kafkajs(broker.bootstrap, "offsets",
                                                  {"topic": topic_name})}
    assert (offsets[0]["low"], offsets[0]["high"]) == ("0", "6")
    assert (offsets[1]["low"], offsets[1]["high"]) == ("0", "0")
    by_time = {o["partition"]: o["offset"] for o in kafkajs(
        broker.bootstrap, "offsets-by-time", {"topic": topic_name, "timestamp": t0 + 2500})}
    assert by_time[0] == "3"
    js = kafkajs(broker.bootstrap, "fetch", {"topic": topic_name, "partition": 0, "offset": 3,
                                             "count": 3})
    assert [(m["value"], int(m["timestamp"])) for m in js] == \
        [(f"t{i}", t0 + i * 1000) for i in range(3, 6)]


def test_kafkajs_fetch_read_committed(broker, topic_name):
    """kafkajs reads with isolation_level=1 by default: needs a correct last_stable_offset."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    kafkajs(broker.bootstrap, "produce", {"topic": topic_name, "partition": 0, "acks": -1,
                                          "messages": [{"value": "rc"}]})
    js = kafkajs(broker.bootstrap, "fetch", {"topic": topic_name, "partition": 0, "offset": 0,
                                             "count": 1, "isolationLevel": 1})
    assert [m["value"] for m in js] == ["rc"]
