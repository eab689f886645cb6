"""kcat (Debian's librdkafka 2.0.2): metadata, produce with every codec/acks, consume by offset/time."""

from __future__ import annotations

import json
import time

import pytest

from clients import consume_partition, create_topic, kcat, producer, produce_all

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _consume_json(bootstrap: str, topic: str, partition: int, offset: str) -> list[dict]:
    """kcat -C from `offset` to the end of the partition (-e), one JSON object per message."""
    out = kcat(bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", offset, "-e", "-J").stdout
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_codec_consume_beginning(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    lines = [f"key{i}:{codec}-value-{i}-" + "x" * 50 for i in range(40)]
    kcat(broker.bootstrap, "-P", "-t", topic_name, "-p", "0", "-K:", "-z", codec,
         "-X", "acks=all", input="\n".join(lines).encode() + b"\n")
    msgs = _consume_json(broker.bootstrap, topic_name, 0, "beginning")
    assert [f"{m['key']}:{m['payload']}" for m in msgs] == lines
    assert [m["offset"] for m in msgs] == list(range(40))


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_kcat_produce_acks(broker, topic_name, acks):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    lines = [f"acks{acks}-{i}" for i in range(25)]
    kcat(broker.bootstrap, "-P", "-t", topic_name, "-p", "0", "-X", f"acks={acks}",
         input="\n".join(lines).encode() + b"\n")
    deadline = time.monotonic() + 15
    msgs: list = []
    while time.monotonic() < deadline:      # acks=0: the broker may still be appending
        msgs = _consume_json(broker.bootstrap, topic_name, 0, "beginning")
        if len(msgs) >= len(lines):
            break
        time.sleep(0.2)
    assert [m["payload"] for m in msgs] == lines


def test_kcat_idempotent_produce(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    lines = [f"idem-{i}" for i in range(200)]
    kcat(broker.bootstrap, "-P", "-t", topic_name, "-p", "0", "-X", "enable.idempotence=true",
         "-X", "batch.num.messages=9", input="\n".join(lines).encode() + b"\n")
    msgs = _consume_json(broker.bootstrap, topic_name, 0, "beginning")
    assert [m["payload"] for m in msgs] == lines


def test_kcat_consume_from_end_and_relative(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    produce_all(producer(broker.bootstrap, acks="all"), topic_name,
                [(None, b"r%d" % i) for i in range(10)])
    assert _consume_json(broker.bootstrap, topic_name, 0, "end") == []
    last3 = _consume_json(broker.bootstrap, topic_name, 0, "-3")
    assert [m["payload"] for m in last3] == ["r7", "r8", "r9"]
    mid = _consume_json(broker.bootstrap, topic_name, 0, "5")
    assert [m["offset"] for m in mid] == [5, 6, 7, 8, 9]


def test_kcat_consume_from_timestamp(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    t0 = int(time.time() * 1000) - 3_600_000
    p = producer(broker.bootstrap, acks="all")
    for i in range(8):
        produce_all(p, topic_name, [(None, b"ts%d" % i, t0 + i * 1000)])
    msgs = _consume_json(broker.bootstrap, topic_name, 0, f"s@{t0 + 2500}")
    assert [m["payload"] for m in msgs] == [f"ts{i}" for i in range(3, 8)]
    assert msgs[0]["ts"] == t0 + 3000


def test_kcat_multi_partition_produce_and_read(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=3)
    for part in range(3):
        kcat(broker.bootstrap, "-P", "-t", topic_name, "-p", str(part),
             input="".join(f"p{part}-{i}\n" for i in range(15)).encode())
    for part in range(3):
        got = consume_partition(broker.bootstrap, topic_name, part, 0, 15)
        assert [m.value() for m in got] == [f"p{part}-{i}".encode() for i in range(15)]
