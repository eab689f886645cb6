"""Hostile clients: garbage, absurd sizes, slowloris, thousands of connections and partitions.

Each attack runs against a private broker while a well-behaved confluent-kafka client keeps
producing and consuming. The broker must answer or close (never crash), keep its memory bounded
(RSS read from /proc/<pid>/status before and after; generous bounds, no timing), and keep serving
the well-behaved client (generous timeouts only: speed is for benchmarks).
"""

from __future__ import annotations

import errno
import os
import random
import resource
import selectors
import socket
import struct
import time

import pytest

import kafka_wire as kw
from clients import consume_partition, create_topic, producer, produce_all

#: How long the broker may take to answer or close before we call it a hang.
ANSWER_TIMEOUT_S = 20.0
#: Connections held open at once (RILL_HOSTILE_CONNECTIONS overrides).
CONNECTIONS = int(os.environ.get("RILL_HOSTILE_CONNECTIONS", "2500"))
#: RSS growth we tolerate over the whole attack (the broker's own bounds are far smaller:
#: a connection reads at most 1 MiB at a time and only allocates what has arrived).
RSS_GROWTH_MAX_BYTES = 512 << 20
#: Stalled (slowloris) connections held at once, half of them announcing 100 MiB frames.
SLOWLORIS_CONNECTIONS = 1000
#: Resident memory a stalled connection may cost: its first read buffer (64 KiB) plus slack.
STALLED_CONNECTION_BYTES_MAX = 256 << 10


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """Resident (VmRSS) or peak resident (VmHWM) bytes of a process, from /proc."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def round_trip(b, topic: str, tag: str) -> None:
    """A well-behaved acks=all produce and consume of one message."""
    value = f"good-{tag}-{time.monotonic_ns()}".encode()
    reports = produce_all(producer(b.bootstrap, acks="all"), topic, [(None, value)])
    got = consume_partition(b.bootstrap, topic, 0, reports[0][2], 1)
    assert got[0].value() == value


def closed_or_answered(sock: socket.socket, timeout_s: float = ANSWER_TIMEOUT_S) -> str:
    """'closed' on EOF/reset, 'answered' if bytes came back; fails the test on a stall."""
    sock.settimeout(timeout_s)
    try:
        data = sock.recv(65536)
    except (ConnectionResetError, BrokenPipeError):
        return "closed"
    except socket.timeout:
        pytest.fail(f"broker neither answered nor closed within {timeout_s}s")
    return "answered" if data else "closed"


def raise_nofile(want: int) -> int:
    """Raise this process's open-file limit towards `want`; return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(soft, want), hard) if hard != resource.RLIM_INFINITY else max(soft, want)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@pytest.fixture
def hostile(broker_factory, topic_name):
    """A private broker (raised fd limit) with a topic the good client uses; checks it after."""
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    round_trip(b, topic_name, "warm-up")
    yield b
    assert b.alive(), f"broker died; log tail:\n{b.log_tail()}"
    round_trip(b, topic_name, "after")
    assert "panicked" not in b.log_text(), f"broker panicked:\n{b.log_tail()}"


def test_random_bytes_then_half_close(hostile, topic_name):
    rng = random.Random(int(os.environ.get("RILL_HOSTILE_SEED", "7")))
    outcomes = {"closed": 0, "answered": 0}
    for i in range(300):
        with socket.create_connection((hostile.host, hostile.port), timeout=ANSWER_TIMEOUT_S) as s:
            try:
                s.sendall(rng.randbytes(rng.randint(1, 4096)))
                s.shutdown(socket.SHUT_WR)  # no more bytes: a waiting broker must now close
            except (BrokenPipeError, ConnectionResetError, OSError) as e:
                # The broker refused the garbage and closed (a reset, since our bytes were
                # unread) before we finished sending or half-closed: the outcome we want.
                assert e.errno in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN), e
                outcomes["closed"] += 1
                continue
            while closed_or_answered(s) == "answered":
                outcomes["answered"] += 1
            outcomes["closed"] += 1
        if i % 100 == 0:
            round_trip(hostile, topic_name, f"random-{i}")
    print(f"random bytes: {outcomes}")


@pytest.mark.parametrize("size", [-1, -(1 << 31), 0, 1, 7, (100 << 20) + 1, (1 << 31) - 1])
def test_absurd_frame_sizes_close(hostile, size):
    with socket.create_connection((hostile.host, hostile.port), timeout=ANSWER_TIMEOUT_S) as s:
        s.sendall(struct.pack(">i", size) + b"\x00\x12\x00\x00\x00\x00\x00\x01")
        assert closed_or_answered(s) == "closed", f"size prefix {size} was not refused"


def test_slowloris_and_huge_declared_frames_hold_no_memory(hostile, topic_name):
    """Connections announce 100 MiB frames (the allowed maximum) and send 100 bytes of them, or
    send half a request, then stall. The broker must not allocate what was only announced (a
    connection's buffer grows with what has arrived), and keeps serving the good client."""
    pid = hostile.proc.pid
    raise_nofile(SLOWLORIS_CONNECTIONS + 256)
    before = rss_bytes(pid)
    socks = []
    try:
        for i in range(SLOWLORIS_CONNECTIONS):
            s = socket.create_connection((hostile.host, hostile.port), timeout=ANSWER_TIMEOUT_S)
            if i % 2:
                s.sendall(struct.pack(">i", 100 << 20) + b"\x00\x00\x00\x03" + b"x" * 100)
            else:
                frame = kw.request(kw.API_METADATA, 1, i, kw.metadata_v1_body([topic_name]))
                s.sendall(frame[: len(frame) // 2])
            socks.append(s)
        time.sleep(1.0)
        round_trip(hostile, topic_name, "during-slowloris")
        during = rss_bytes(pid)
        per_connection = (during - before) // len(socks)
        print(f"slowloris: {len(socks)} stalled connections, RSS {before >> 20} -> "
              f"{during >> 20} MiB ({per_connection >> 10} KiB per connection)")
        # Before the fix each lying prefix pinned 1 MiB (the whole first read, zero-filled).
        assert per_connection < STALLED_CONNECTION_BYTES_MAX, \
            f"{per_connection >> 10} KiB resident per stalled connection"
    finally:
        for s in socks:
            s.close()


def _api_versions_on_all(socks: list[socket.socket]) -> int:
    """Send ApiVersions v0 on every socket at once; return how many got their answer."""
    sel = selectors.DefaultSelector()
    pending: dict[socket.socket, bytearray] = {}
    for i, s in enumerate(socks):
        s.setblocking(True)
        s.settimeout(ANSWER_TIMEOUT_S)
        s.sendall(kw.request(kw.API_VERSIONS, 0, i, b""))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        pending[s] = bytearray()
    answered = 0
    deadline = time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1.0):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                chunk = b""
            buf = pending[s]
            buf += chunk
            if not chunk or (len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]):
                answered += bool(chunk)
                sel.unregister(s)
                del pending[s]
    sel.close()
    return answered


def test_thousands_of_connections(hostile, topic_name):
    pid = hostile.proc.pid
    limit = raise_nofile(CONNECTIONS + 256)
    want = min(CONNECTIONS, limit - 128)
    before = rss_bytes(pid)
    socks: list[socket.socket] = []
    try:
        for _ in range(want):
            socks.append(socket.create_connection((hostile.host, hostile.port),
                                                  timeout=ANSWER_TIMEOUT_S))
        answered = _api_versions_on_all(socks)
        round_trip(hostile, topic_name, "during-connections")
        during = rss_bytes(pid)
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        print(f"connections: {len(socks)} open, {answered} answered ApiVersions, broker fds {fds}, "
              f"RSS {before >> 20} -> {during >> 20} MiB (peak {rss_bytes(pid, 'VmHWM') >> 20} MiB)")
        assert answered == len(socks), f"only {answered} of {len(socks)} connections answered"
        assert during - before < RSS_GROWTH_MAX_BYTES, \
            f"RSS grew {(during - before) >> 20} MiB for {len(socks)} connections"
    finally:
        for s in socks:
            s.close()


def _metadata_v4(topics: list[str], auto_create: bool) -> bytes:
    body = struct.pack(">i", len(topics)) + b"".join(kw.kstring(t) for t in topics)
    return body + struct.pack(">?", auto_create)


def _fetch_v4(topic: str, partitions: int) -> bytes:
    """Fetch v4: replica, max_wait 0, min_bytes 1, max_bytes, isolation, one topic's partitions."""
    body = struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0)
    body += struct.pack(">i", 1) + kw.kstring(topic) + struct.pack(">i", partitions)
    body += b"".join(struct.pack(">iqi", p, 0, 1 << 20) for p in range(partitions))
    return body


def test_thousands_of_partitions_in_one_request(hostile, topic_name):
    """Metadata for 5000 unknown topics (no auto-create), Produce and Fetch for 5000 partitions of
    a 1-partition topic: each is answered with per-partition errors, and memory stays bounded."""
    pid = hostile.proc.pid
    before = rss_bytes(pid)
    n = 5000
    batch = kw.record_batch([b"x"])
    with kw.Conn(hostile.host, hostile.port, timeout_s=ANSWER_TIMEOUT_S) as c:
        c.send(kw.request(kw.API_METADATA, 4, 1,
                          _metadata_v4([f"absent-{i}" for i in range(n)], False)))
        resp = c.recv_response()
        assert resp is not None and resp[0] == 1, "Metadata for 5000 topics not answered"

        c.send(kw.request(kw.API_PRODUCE, 3, 2,
                          kw.produce_v3_body({topic_name: {p: batch for p in range(n)}})))
        resp = c.recv_response()
        assert resp is not None and resp[0] == 2, "Produce to 5000 partitions not answered"
        errors = kw.parse_produce_v3(resp[1])
        assert len(errors) == n
        assert errors[(topic_name, 0)] == kw.ERR_NONE
        assert all(e == kw.ERR_UNKNOWN_TOPIC_OR_PARTITION
                   for (t, p), e in errors.items() if p != 0)

        c.send(kw.request(1, 4, 3, _fetch_v4(topic_name, n)))
        resp = c.recv_response()
        assert resp is not None and resp[0] == 3, "Fetch of 5000 partitions not answered"
    round_trip(hostile, topic_name, "after-partitions")
    after = rss_bytes(pid)
    print(f"5000-partition requests: RSS {before >> 20} -> {after >> 20} MiB")
    assert after - before < RSS_GROWTH_MAX_BYTES
