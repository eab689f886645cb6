"""Record-level validation on Produce (issue 18, KIP-467), as Kafka's LogValidator does it: a batch
holding an invalid record is refused whole with INVALID_RECORD (or INVALID_TIMESTAMP), the
response lists the failing records (`record_errors`) and says why (`error_message`), and nothing
of the batch is stored.

Raw Produce v8 requests carry batches no client would build; real clients (every codec,
idempotent) show that what they send still passes.
"""

from __future__ import annotations

import struct
import time

import pytest

import kafka_wire as kw
from clients import consume_partition, create_topic, producer, produce_all, watermarks

PRODUCE_V8 = 8


def produce_v8(broker, topic: str, batch: bytes):
    """(error_code, record_errors, error_message) of producing `batch` to partition 0."""
    with kw.Conn(broker.host, broker.port) as c:
        c.send(kw.request(kw.API_PRODUCE, PRODUCE_V8, 7, kw.produce_v3_body({topic: {0: batch}})))
        resp = c.recv_response()
    assert resp is not None, "broker closed the connection"
    return kw.parse_produce_v8(resp[1])[(topic, 0)]


def raw_record(body: bytes) -> bytes:
    """A record whose body is given as is (length prefix added)."""
    return kw.zigzag_varint(len(body)) + body


def record_body(offset_delta: int, key: bytes | None, value: bytes | None,
                headers: bytes = kw.zigzag_varint(0)) -> bytes:
    def field(b):
        return kw.zigzag_varint(-1) if b is None else kw.zigzag_varint(len(b)) + b
    return (bytes([0]) + kw.zigzag_varint(0) + kw.zigzag_varint(offset_delta) + field(key)
            + field(value) + headers)


def with_batch_length(batch: bytes, length: int) -> bytes:
    """`batch` with its batchLength field set to `length`."""
    return batch[:8] + struct.pack(">i", length) + batch[12:]


def good(i: int) -> bytes:
    return kw.record(b"v%d" % i, i, key=b"k%d" % i)


# name → (batch, expected code, words the error message contains, index of the failing record)
CASES = {
    "record length past the batch end": (
        kw.batch_of_records(good(0) + kw.zigzag_varint(200) + b"\x00\x00", 2),
        kw.ERR_INVALID_RECORD, "invalid record structure", 1),
    "fewer records than recordsCount": (
        kw.batch_of_records(good(0) + good(1), 3),
        kw.ERR_INVALID_RECORD, "invalid record structure", 2),
    "bytes after the last record": (
        kw.batch_of_records(good(0) + good(1), 1),
        kw.ERR_INVALID_RECORD, "after the last record", 1),
    "a varint of eleven bytes": (
        kw.batch_of_records(raw_record(bytes([0]) + b"\xff" * 10 + b"\x01"), 1),
        kw.ERR_INVALID_RECORD, "invalid record structure", 0),
    "a header with a null key": (
        kw.batch_of_records(good(0) + raw_record(record_body(
            1, b"k", b"v", kw.zigzag_varint(1) + kw.zigzag_varint(-1) + kw.zigzag_varint(-1))), 2),
        kw.ERR_INVALID_RECORD, "invalid record structure", 1),
    "a negative header count": (
        kw.batch_of_records(raw_record(record_body(0, b"k", b"v", kw.zigzag_varint(-3))), 1),
        kw.ERR_INVALID_RECORD, "invalid record structure", 0),
    "offset deltas out of order": (
        kw.batch_of_records(good(0) + good(0), 2),
        kw.ERR_INVALID_RECORD, "offset delta 0", 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_record_is_refused_and_named(broker, topic_name, case):
    create_topic(broker.bootstrap, topic_name)
    batch, code, words, index = CASES[case]
    err, record_errors, message = produce_v8(broker, topic_name, batch)
    assert err == code, (err, record_errors, message)
    assert message and words in message, message
    assert [i for i, _ in record_errors] == [index], record_errors
    assert record_errors[0][1], "each record error says why"
    # Nothing of the batch was stored; a good batch still goes in at offset 0.
    assert produce_v8(broker, topic_name, kw.record_batch([b"fine"]))[0] == kw.ERR_NONE
    assert [m.value() for m in consume_partition(broker.bootstrap, topic_name, 0, 0, 1)] == \
        [b"fine"]


def test_batch_level_refusals_say_why(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    for batch, code, words in [
        (kw.record_batch([b"v"], attributes=kw.ATTR_CONTROL), kw.ERR_INVALID_RECORD,
         "control records"),
        (kw.record_batch([b"v"], producer_id=5, producer_epoch=0, base_sequence=-1),
         kw.ERR_INVALID_RECORD, "Invalid sequence number -1"),
        (kw.batch_of_records(good(0), 1, magic=1), kw.ERR_INVALID_RECORD, "magic 2"),
        (kw.corrupt_crc(kw.record_batch([b"v"])), kw.ERR_CORRUPT_MESSAGE, "CRC"),
        (kw.batch_of_records(good(0) + good(1), 2, last_offset_delta=5), kw.ERR_INVALID_RECORD,
         "Invalid record batch"),
        # As Kafka's batch reader sees the bytes (ByteBufferLogInputStream): a batch cut short,
        # alone or after a whole one, or a few bytes, is no batch (INVALID_RECORD, not the
        # retriable CORRUPT_MESSAGE); a batchLength below 14 or a magic outside 0..=2 is corrupt.
        (kw.record_batch([b"v"])[:-5], kw.ERR_INVALID_RECORD, "no whole batch"),
        (b"\x00" * 5, kw.ERR_INVALID_RECORD, "at least one record batch"),
        (kw.record_batch([b"v"]) + kw.record_batch([b"w"])[:30], kw.ERR_INVALID_RECORD,
         "30 bytes follow the batch"),
        (with_batch_length(kw.record_batch([b"v"]), 3), kw.ERR_CORRUPT_MESSAGE,
         "invalid batchLength 3"),
        (kw.batch_of_records(good(0), 1, magic=7)[:40], kw.ERR_CORRUPT_MESSAGE,
         "Invalid magic found in record: 7"),
    ]:
        err, record_errors, message = produce_v8(broker, topic_name, batch)
        assert (err, record_errors) == (code, []), (words, err, record_errors, message)
        assert message and words in message, message


def test_per_record_rules_list_each_record_once(broker, topic_name):
    create_topic(broker.bootstrap, topic_name,
                 config={"cleanup.policy": "compact", "message.timestamp.before.max.ms": "60000"})
    old = int(time.time() * 1000) - 3_600_000
    keyless = kw.record_batch([b"a", b"b", b"c"], keys=[b"k", None, b"k"])
    err, record_errors, message = produce_v8(broker, topic_name, keyless)
    assert err == kw.ERR_INVALID_RECORD
    assert [i for i, _ in record_errors] == [1]
    assert "without key" in record_errors[0][1] and "1 record(s)" in message
    # Too old, one of them keyless as well: one error per record, the key's first; a timestamp
    # among them makes the partition's code INVALID_TIMESTAMP (as Kafka).
    both = kw.record_batch([b"a", b"b"], keys=[None, b"k"], timestamp_ms=old)
    err, record_errors, message = produce_v8(broker, topic_name, both)
    assert err == kw.ERR_INVALID_TIMESTAMP, (err, record_errors)
    assert [(i, "without key" in m) for i, m in record_errors] == [(0, True), (1, False)]
    assert "out of range" in record_errors[1][1]


ONE_BATCH_ONLY = ("Produce requests with version {} are only allowed to contain exactly one record "
                  "batch per partition")


def test_two_batches_for_one_partition_are_refused_whole(broker, topic_name):
    """Kafka's ProduceRequest.validateRecords: from v3 a partition carries exactly one batch.
    The partition with two is refused whole (INVALID_RECORD, no record errors) and nothing of
    it is stored; the request's other partition is written."""
    create_topic(broker.bootstrap, topic_name, partitions=2)
    two = kw.record_batch([b"a", b"b"]) + kw.record_batch([b"c"])
    body = kw.produce_v3_body({topic_name: {0: two, 1: kw.record_batch([b"other"])}})
    with kw.Conn(broker.host, broker.port) as c:
        c.send(kw.request(kw.API_PRODUCE, PRODUCE_V8, 11, body))
        resp = c.recv_response()
        assert resp is not None, "broker closed the connection"
        results = kw.parse_produce_v8(resp[1])
        assert results[(topic_name, 0)] == (kw.ERR_INVALID_RECORD, [], ONE_BATCH_ONLY.format(8))
        assert results[(topic_name, 1)][0] == kw.ERR_NONE
        # Produce v3, the oldest decoded version: the same code (v3 has no message field).
        c.send(kw.request(kw.API_PRODUCE, 3, 12, kw.produce_v3_body({topic_name: {0: two}})))
        resp = c.recv_response()
        assert resp is not None, "broker closed the connection"
        r = kw.Reader(resp[1])
        assert r.take(">i") == 1 and r.string() == topic_name and r.take(">i") == 1
        index, err, base_offset, _append_time = r.take(">ihqq")
        assert (index, err, base_offset) == (0, kw.ERR_INVALID_RECORD, -1)
        # Kafka counts the batches before it looks into one: a corrupt first batch with a
        # second after it is the same refusal, not CORRUPT_MESSAGE.
        corrupt = bytearray(two)
        corrupt[len(kw.record_batch([b"a", b"b"])) - 1] ^= 0xFF
        body = kw.produce_v3_body({topic_name: {0: bytes(corrupt)}})
        c.send(kw.request(kw.API_PRODUCE, PRODUCE_V8, 13, body))
        resp = c.recv_response()
        assert resp is not None, "broker closed the connection"
        assert kw.parse_produce_v8(resp[1])[(topic_name, 0)] == \
            (kw.ERR_INVALID_RECORD, [], ONE_BATCH_ONLY.format(8))
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0), "nothing of partition 0"
    assert [m.value() for m in consume_partition(broker.bootstrap, topic_name, 1, 0, 1)] == \
        [b"other"]
    # Each batch in a request of its own goes in.
    for batch in (kw.record_batch([b"a", b"b"]), kw.record_batch([b"c"])):
        assert produce_v8(broker, topic_name, batch)[0] == kw.ERR_NONE
    assert [m.value() for m in consume_partition(broker.bootstrap, topic_name, 0, 0, 3)] == \
        [b"a", b"b", b"c"]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_real_clients_batches_pass_every_record_check(broker, topic_name, codec):
    """Every record of a compressed, idempotent batch is decoded now: what librdkafka and
    kafka-python send passes (dense offset deltas, sequences, headers)."""
    from kafka import KafkaProducer
    create_topic(broker.bootstrap, topic_name)
    p = producer(broker.bootstrap, acks="all", **{"compression.type": codec,
                                                  "enable.idempotence": True, "linger.ms": 50})
    messages = [(b"k%d" % i, b"v%d" % i * 20) for i in range(200)]
    for key, value in messages:
        p.produce(topic_name, value, key, partition=0, headers=[("h", b"x"), ("e", None)])
    assert p.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                       compression_type=codec, linger_ms=50)
    try:
        futures = [kp.send(topic_name, value=v, key=k, partition=0, headers=[("h", b"y")])
                   for k, v in messages]
        for f in futures:
            f.get(timeout=30)
    finally:
        kp.close()
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 2 * len(messages))
    assert [m.value() for m in got] == [v for _, v in messages] * 2
    produce_all(producer(broker.bootstrap), topic_name, [(b"k", b"after")])


def test_struct_helpers_agree_with_the_spec():
    """batch_of_records builds what record_batch builds for the same records."""
    records = good(0) + good(1)
    a = kw.batch_of_records(records, 2, timestamp_ms=5)
    b = kw.record_batch([b"v0", b"v1"], keys=[b"k0", b"k1"], timestamp_ms=5)
    assert a == b
    assert struct.unpack_from(">b", a, 16)[0] == 2
