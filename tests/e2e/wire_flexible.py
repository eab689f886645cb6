"""Flexible-version (KIP-482) requests on the raw wire, for sending values at and past Kafka's
limits: compact strings, whose varint lengths can claim far more than Kafka's 32767 bytes (the
INT16 strings of kafka_wire.py cannot). Only what test_limits.py needs; real clients cover the
happy paths.
"""

from __future__ import annotations

import struct

import kafka_wire as kw

API_OFFSET_COMMIT = 8
API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10
API_JOIN_GROUP = 11
API_SYNC_GROUP = 14
API_CREATE_TOPICS = 19
API_ADD_OFFSETS_TO_TXN = 25
API_TXN_OFFSET_COMMIT = 28

ERR_INVALID_GROUP_ID = 24
ERR_MEMBER_ID_REQUIRED = 79
ERR_NOT_COORDINATOR = 16
ERR_COORDINATOR_NOT_AVAILABLE = 15

KEY_GROUP, KEY_TRANSACTION = 0, 1


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


TAGS = uvarint(0)


def cstring(s: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: varint length + 1, 0 for null."""
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def cbytes(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def carray(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def request(api_key: int, version: int, correlation_id: int, body: bytes,
            client_id: str = "rill-e2e-limits") -> bytes:
    """A size-prefixed request with header v2 (flexible: an empty tag section)."""
    header = struct.pack(">hhi", api_key, version, correlation_id) + kw.kstring(client_id) + TAGS
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def init_producer_id_v4(transactional_id: str | None, timeout_ms: int = 60000) -> bytes:
    return cstring(transactional_id) + struct.pack(">iqh", timeout_ms, -1, -1) + TAGS


def offset_commit_v8(group_id: str, topic: str, partition: int, offset: int) -> bytes:
    """A simple (generation -1, no member) commit of one partition."""
    part = struct.pack(">iqi", partition, offset, -1) + cstring(None) + TAGS
    topics = carray([cstring(topic) + carray([part]) + TAGS])
    return cstring(group_id) + struct.pack(">i", -1) + cstring("") + cstring(None) + topics + TAGS


def txn_offset_commit_v3(transactional_id: str, group_id: str, producer_id: int, epoch: int,
                         topic: str, partition: int, offset: int) -> bytes:
    part = struct.pack(">iqi", partition, offset, -1) + cstring(None) + TAGS
    topics = carray([cstring(topic) + carray([part]) + TAGS])
    return (cstring(transactional_id) + cstring(group_id) + struct.pack(">qhi", producer_id, epoch, -1)
            + cstring("") + cstring(None) + topics + TAGS)


def add_offsets_to_txn_v3(transactional_id: str, producer_id: int, epoch: int,
                          group_id: str) -> bytes:
    return cstring(transactional_id) + struct.pack(">qh", producer_id, epoch) + cstring(group_id) + TAGS


def join_group_v6(group_id: str, member_id: str = "", instance_id: str | None = None,
                  protocol_type: str = "consumer", protocol_name: str = "range",
                  session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 10000) -> bytes:
    protocols = carray([cstring(protocol_name) + cbytes(b"\x00\x01") + TAGS])
    return (cstring(group_id) + struct.pack(">ii", session_timeout_ms, rebalance_timeout_ms)
            + cstring(member_id) + cstring(instance_id) + cstring(protocol_type) + protocols + TAGS)


class FlexReader(kw.Reader):
    """kw.Reader plus the compact forms."""

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def cstring(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def cbytes(self) -> bytes:
        n = self.uvarint() - 1
        b = self.data[self.pos:self.pos + max(n, 0)]
        self.pos += max(n, 0)
        return b

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def flex_body(body_after_corr: bytes) -> FlexReader:
    """A reader past a response header v1 (the correlation id is gone already: its tags)."""
    r = FlexReader(body_after_corr)
    r.tags()
    return r


def parse_init_producer_id_v4(body: bytes) -> tuple[int, int, int]:
    """(error_code, producer_id, epoch)."""
    r = flex_body(body)
    _throttle, err, pid, epoch = r.take(">ihqh")
    return err, pid, epoch


def parse_offset_commit_v8(body: bytes) -> dict[tuple[str, int], int]:
    r = flex_body(body)
    r.take(">i")
    out = {}
    for _ in range(r.uvarint() - 1):
        topic = r.cstring()
        for _ in range(r.uvarint() - 1):
            idx, err = r.take(">ih")
            r.tags()
            out[(topic, idx)] = err
        r.tags()
    return out


def parse_add_offsets_to_txn_v3(body: bytes) -> int:
    _throttle, err = flex_body(body).take(">ih")
    return err


def parse_join_group_v6(body: bytes) -> dict:
    r = flex_body(body)
    _throttle, err, generation = r.take(">ihi")
    protocol = r.cstring()
    leader = r.cstring()
    member_id = r.cstring()
    members = []
    for _ in range(r.uvarint() - 1):
        members.append((r.cstring(), r.cstring(), r.cbytes()))
        r.tags()
    return {"error": err, "generation": generation, "protocol": protocol, "leader": leader,
            "member_id": member_id, "members": members}


# --- non-flexible (INT16 strings, which hold up to Kafka's 32767 bytes) -------------------------

def find_coordinator_v2(key: str, key_type: int) -> bytes:
    return kw.kstring(key) + struct.pack(">b", key_type)


def parse_find_coordinator_v2(body: bytes) -> tuple[int, int]:
    """(error, node id)."""
    r = kw.Reader(body)
    _throttle, err = r.take(">ih")
    r.string()
    return err, r.take(">i")


def sync_group_v3(group_id: str, generation: int, member_id: str, instance_id: str | None,
                  assignments: dict[str, bytes]) -> bytes:
    body = kw.kstring(group_id) + struct.pack(">i", generation) + kw.kstring(member_id)
    body += kw.kstring(instance_id) + struct.pack(">i", len(assignments))
    for member, assignment in assignments.items():
        body += kw.kstring(member) + kw.kbytes(assignment)
    return body


def parse_sync_group_v3(body: bytes) -> int:
    _throttle, err = kw.Reader(body).take(">ih")
    return err


def offset_fetch_v1(group_id: str, topic: str, partition: int) -> bytes:
    return kw.kstring(group_id) + struct.pack(">i", 1) + kw.kstring(topic) + struct.pack(">ii", 1, partition)


def parse_offset_fetch_v1(body: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (error, offset)}."""
    r = kw.Reader(body)
    out = {}
    for _ in range(r.take(">i")):
        topic = r.string()
        for _ in range(r.take(">i")):
            idx, offset = r.take(">iq")
            r.string()
            out[(topic, idx)] = (r.take(">h"), offset)
    return out


def create_topics_v2(names: list[str], partitions: int = 1, replication: int = -1) -> bytes:
    body = struct.pack(">i", len(names))
    for name in names:
        body += kw.kstring(name) + struct.pack(">ihii", partitions, replication, 0, 0)
    return body + struct.pack(">i?", 10000, False)


def parse_create_topics_v2(body: bytes) -> dict[str, int]:
    r = kw.Reader(body)
    r.take(">i")
    out = {}
    for _ in range(r.take(">i")):
        name = r.string()
        out[name] = r.take(">h")
        r.string()
    return out
