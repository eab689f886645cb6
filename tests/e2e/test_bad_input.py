"""Bad input over raw sockets: each gets its Kafka error or a closed connection, never a crash/hang.

After every test, a normal client must still produce and consume, and the broker must be alive.
"""

from __future__ import annotations

import os
import socket
import struct

import pytest

import kafka_wire as kw
from clients import consume_partition, create_topic, producer, produce_all, watermarks

#: How long the broker may take to answer or close on bad input before we call it a hang.
ANSWER_TIMEOUT_S = 10.0


@pytest.fixture(autouse=True)
def broker_still_serves(broker, topic_name):
    """After each bad-input test: the broker is alive and a normal client round-trips a message."""
    yield
    assert broker.alive(), f"broker died; log tail:\n{broker.log_tail()}"
    probe = f"{topic_name}-probe"
    reports = produce_all(producer(broker.bootstrap, acks="all"), probe, [(None, b"still-here")])
    got = consume_partition(broker.bootstrap, probe, 0, reports[0][2], 1)
    assert got[0].value() == b"still-here"
    assert "panicked" not in broker.log_text(), f"broker panicked:\n{broker.log_tail()}"


def conn(broker) -> kw.Conn:
    return kw.Conn(broker.host, broker.port, timeout_s=ANSWER_TIMEOUT_S)


def answer_or_close(c: kw.Conn):
    """The broker's response, or None if it closed the connection; a stall fails the test."""
    try:
        return c.recv_response()
    except socket.timeout:
        pytest.fail(f"broker neither answered nor closed within {ANSWER_TIMEOUT_S}s")


def produce(broker, parts: dict[str, dict[int, bytes]], corr: int = 11) -> dict:
    with conn(broker) as c:
        c.send(kw.request(kw.API_PRODUCE, 3, corr, kw.produce_v3_body(parts)))
        resp = answer_or_close(c)
        assert resp is not None, "broker closed the connection instead of answering the Produce"
        assert resp[0] == corr
        return kw.parse_produce_v3(resp[1])


def test_api_versions_v0_lists_ranges(broker):
    with conn(broker) as c:
        c.send(kw.request(kw.API_VERSIONS, 0, 1, b""))
        corr, body = answer_or_close(c)
        error, ranges = kw.parse_api_versions_v0(body)
    assert (corr, error) == (1, 0)
    assert ranges[kw.API_VERSIONS][0] == 0 and ranges[kw.API_VERSIONS][1] >= 3
    # librdkafka 2.0.2 needs Produce v3 and Fetch v4 for record batches v2,
    # and old Produce versions to keep compression on.
    assert ranges[kw.API_PRODUCE][0] <= 3 <= ranges[kw.API_PRODUCE][1]
    assert ranges[1][0] <= 4 <= ranges[1][1]


def test_api_versions_unsupported_version_answers_35_with_v0_body(broker):
    with conn(broker) as c:
        c.send(kw.request(kw.API_VERSIONS, 99, 42, b"\x00" * 8))
        resp = answer_or_close(c)
    assert resp is not None, "ApiVersions v99 must be answered (error 35 + v0 body), not closed"
    corr, body = resp
    error, ranges = kw.parse_api_versions_v0(body)
    assert corr == 42
    assert error == kw.ERR_UNSUPPORTED_VERSION
    assert kw.API_VERSIONS in ranges and kw.API_PRODUCE in ranges


def test_unknown_api_key(broker):
    with conn(broker) as c:
        c.send(kw.request(9999, 0, 5, b""))
        resp = answer_or_close(c)
        if resp is not None:
            assert resp[0] == 5


def test_unsupported_produce_version(broker):
    with conn(broker) as c:
        c.send(kw.request(kw.API_PRODUCE, 99, 6, b"\x00" * 16))
        resp = answer_or_close(c)
        if resp is not None:
            assert resp[0] == 6


@pytest.mark.parametrize("payload", [
    pytest.param(b"\x00\x12", id="shorter-than-header"),
    pytest.param(b"\x00\x12\x00\x00\x00\x00\x00\x07\x75\x30abc", id="client-id-length-lies"),
    pytest.param(os.urandom(64), id="random-64-bytes"),
    pytest.param(b"\x00\x03\x00\x01\x00\x00\x00\x08\x00\x01x\x7f\xff\xff\xff", id="array-len-lies"),
])
def test_malformed_frame(broker, payload):
    with conn(broker) as c:
        c.send(struct.pack(">i", len(payload)) + payload)
        answer_or_close(c)


@pytest.mark.parametrize("size", [0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0],
                         ids=["2GiB", "negative-min", "minus-one", "zero"])
def test_absurd_size_prefix_closes(broker, size):
    with conn(broker) as c:
        c.send(struct.pack(">I", size) + b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
        assert c.closed_by_peer(), f"size prefix {size:#x}: connection must be closed"


def test_lying_frame_length_then_eof(broker):
    """The frame says 1000 bytes; 20 come and the client half-closes: the broker lets go."""
    with conn(broker) as c:
        c.send(struct.pack(">i", 1000) + kw.request(kw.API_VERSIONS, 0, 1, b"")[4:] + b"\x00" * 6)
        c.sock.shutdown(socket.SHUT_WR)
        try:
            resp = c.recv_response()
        except socket.timeout:
            pytest.fail("broker kept a half-closed, truncated connection open")
        assert resp is None


def test_truncated_frame_held_open_does_not_stall_others(broker, topic_name):
    """A connection stuck mid-frame must not delay other connections."""
    with conn(broker) as stuck:
        stuck.send(struct.pack(">i", 500) + b"\x00\x00\x00\x03")
        create_topic(broker.bootstrap, topic_name, partitions=1)
        produce_all(producer(broker.bootstrap, acks="all"), topic_name, [(None, b"ok")])
        assert consume_partition(broker.bootstrap, topic_name, 0, 0, 1)[0].value() == b"ok"


def test_corrupt_crc_rejected_per_partition(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    good = kw.record_batch([b"good-1", b"good-2"])
    bad = kw.corrupt_crc(kw.record_batch([b"bad-1", b"bad-2"]))
    errors = produce(broker, {topic_name: {0: bad, 1: good}})
    assert errors == {(topic_name, 0): kw.ERR_CORRUPT_MESSAGE, (topic_name, 1): kw.ERR_NONE}
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0), "corrupt batch was stored"
    got = consume_partition(broker.bootstrap, topic_name, 1, 0, 2)
    assert [m.value() for m in got] == [b"good-1", b"good-2"]


@pytest.mark.parametrize("delta", [+40, -20], ids=["longer", "shorter"])
def test_batch_length_lies(broker, topic_name, delta):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    """batchLength disagrees with the bytes given: a Kafka error for the partition, or a close."""
    batch = bytearray(kw.record_batch([b"v1", b"v2", b"v3"]))
    (length,) = struct.unpack_from(">i", batch, 8)
    struct.pack_into(">i", batch, 8, length + delta)
    with conn(broker) as c:
        c.send(kw.request(kw.API_PRODUCE, 3, 12, kw.produce_v3_body({topic_name: {0: bytes(batch)}})))
        resp = answer_or_close(c)
    if resp is not None:
        errors = kw.parse_produce_v3(resp[1])
        assert errors[(topic_name, 0)] in (kw.ERR_CORRUPT_MESSAGE, kw.ERR_INVALID_RECORD), errors
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)


def test_an_unknown_isolation_level_is_refused_as_kafka_refuses_it(broker, topic_name):
    """Kafka's `IsolationLevel.forId` throws on anything but 0 (read_uncommitted) and 1
    (read_committed), and the request is answered UNKNOWN_SERVER_ERROR on every partition
    (`FetchRequest`/`ListOffsetsRequest.getErrorResponse`); it used to read as read_uncommitted."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    produce_all(producer(broker.bootstrap, acks="all"), topic_name, [(None, b"v")])
    tp = (topic_name, 0)
    with conn(broker) as c:
        for corr, level in ((21, 0), (22, 1), (23, 2), (24, -1)):
            c.send(kw.request(kw.API_FETCH, 4, corr,
                              kw.fetch_v4_body({tp: 0}, isolation_level=level)))
            got, body = answer_or_close(c)
            err, hw, records = kw.parse_fetch_v4(body)[tp]
            if level in (0, 1):
                assert (got, err, hw) == (corr, kw.ERR_NONE, 1) and records, level
            else:
                assert (got, err, hw, records) == (corr, kw.ERR_UNKNOWN_SERVER_ERROR, -1, b""), level
            c.send(kw.request(kw.API_LIST_OFFSETS, 2, corr,
                              kw.list_offsets_v2_body({tp: -1}, isolation_level=level)))
            got, body = answer_or_close(c)
            answer = kw.parse_list_offsets_v2(body)[tp]
            expected = (kw.ERR_NONE, 1) if level in (0, 1) else (kw.ERR_UNKNOWN_SERVER_ERROR, -1)
            assert (got, answer) == (corr, expected), level


def test_oversized_batch_message_too_large(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    big = kw.record_batch([os.urandom(1024) * 1536])     # 1.5 MiB > 1 MiB max.message.bytes
    errors = produce(broker, {topic_name: {0: big}})
    assert errors[(topic_name, 0)] == kw.ERR_MESSAGE_TOO_LARGE
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)


@pytest.mark.parametrize("name", ["bad name!", "..", "x" * 300])
def test_invalid_topic_name_in_produce(broker, name):
    errors = produce(broker, {name: {0: kw.record_batch([b"v"])}})
    assert errors == {(name, 0): kw.ERR_INVALID_TOPIC_EXCEPTION}


def test_invalid_topic_name_in_metadata(broker):
    with conn(broker) as c:
        c.send(kw.request(kw.API_METADATA, 1, 3, kw.metadata_v1_body(["bad name!"])))
        corr, body = answer_or_close(c)
    assert corr == 3
    assert kw.parse_metadata_v1_topic_errors(body) == {"bad name!": kw.ERR_INVALID_TOPIC_EXCEPTION}


def test_garbage_flood_then_pipelined_requests_elsewhere(broker):
    """64 KiB of random bytes on one connection; pipelined requests on another stay in order."""
    with conn(broker) as junk:
        try:
            junk.send(b"\x00\x00\x01\x00" + os.urandom(65536))
        except (BrokenPipeError, ConnectionResetError):
            pass
        with conn(broker) as c:
            c.send(b"".join(kw.request(kw.API_VERSIONS, 0, corr, b"") for corr in range(20)))
            corrs = [answer_or_close(c)[0] for _ in range(20)]
        assert corrs == list(range(20)), "responses must come back in request order"


def test_acks0_produce_gets_no_response(broker, topic_name):
    """acks=0: no response at all, so the next response on the connection is the next request's."""
    create_topic(broker.bootstrap, topic_name, partitions=1)
    with conn(broker) as c:
        body = kw.produce_v3_body({topic_name: {0: kw.record_batch([b"fire", b"forget"])}}, acks=0)
        c.send(kw.request(kw.API_PRODUCE, 3, 100, body) + kw.request(kw.API_VERSIONS, 0, 101, b""))
        resp = answer_or_close(c)
        assert resp is not None and resp[0] == 101
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 2)
    assert [m.value() for m in got] == [b"fire", b"forget"]


def test_a_failed_acks0_produce_closes_the_connection(broker, topic_name):
    """acks=0 has no response to carry an error, so Kafka closes the connection when a
    partition fails (the producer then refreshes its metadata and reconnects). The request's
    good partition is still written; one where every partition went in leaves it open."""
    create_topic(broker.bootstrap, topic_name, partitions=2)
    two_batches = kw.record_batch([b"x"]) + kw.record_batch([b"y"])
    for failing in ({7: kw.record_batch([b"unknown partition"])}, {1: two_batches}):
        with conn(broker) as c:
            body = kw.produce_v3_body({topic_name: {0: kw.record_batch([b"kept"]), **failing}},
                                      acks=0)
            c.send(kw.request(kw.API_PRODUCE, 3, 100, body)
                   + kw.request(kw.API_VERSIONS, 0, 101, b""))
            assert answer_or_close(c) is None, "answered instead of closing the connection"
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 2)
    assert [m.value() for m in got] == [b"kept", b"kept"]
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 0)
