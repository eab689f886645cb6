"""A tiny hand-rolled Kafka wire encoder/decoder for sending bad input on purpose.

Only what the bad-input tests need: request header v1, ApiVersions v0, Produce v3, Metadata v1,
InitProducerId v0, AddPartitionsToTxn v0, EndTxn v0, and record batch v2 (transactional and control
batches too) with a correct (or deliberately wrong) CRC-32C. Real clients cover the happy paths.
"""

from __future__ import annotations

import socket
import struct
import time

API_PRODUCE = 0
API_FETCH = 1
API_LIST_OFFSETS = 2
API_METADATA = 3
API_VERSIONS = 18
API_INIT_PRODUCER_ID = 22
API_ADD_PARTITIONS_TO_TXN = 24
API_END_TXN = 26
API_INCREMENTAL_ALTER_CONFIGS = 44

#: Record batch attribute bits.
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

ERR_NONE = 0
ERR_UNKNOWN_SERVER_ERROR = -1
ERR_CORRUPT_MESSAGE = 2
ERR_UNKNOWN_TOPIC_OR_PARTITION = 3
ERR_MESSAGE_TOO_LARGE = 10
ERR_INVALID_TOPIC_EXCEPTION = 17
ERR_RECORD_LIST_TOO_LARGE = 18
ERR_UNSUPPORTED_VERSION = 35
ERR_INVALID_REQUEST = 42
ERR_OUT_OF_ORDER_SEQUENCE_NUMBER = 45
ERR_DUPLICATE_SEQUENCE_NUMBER = 46
ERR_INVALID_PRODUCER_EPOCH = 47
ERR_INVALID_TXN_STATE = 48
ERR_CONCURRENT_TRANSACTIONS = 51
ERR_INVALID_RECORD = 87
ERR_INVALID_TIMESTAMP = 32


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as record batch v2 uses. Pure Python: fine for test-sized batches."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def zigzag_varint(n: int) -> bytes:
    """Kafka's signed varint (zigzag + LEB128)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def kstring(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def kbytes(b: bytes | None) -> bytes:
    if b is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(b)) + b


def record(value: bytes | None, offset_delta: int, key: bytes | None = None) -> bytes:
    body = bytes([0])                       # attributes
    body += zigzag_varint(0)                # timestamp delta
    body += zigzag_varint(offset_delta)
    if key is None:
        body += zigzag_varint(-1)
    else:
        body += zigzag_varint(len(key)) + key
    body += zigzag_varint(-1) if value is None else zigzag_varint(len(value)) + value
    body += zigzag_varint(0)                # headers
    return zigzag_varint(len(body)) + body


def record_batch(values: list[bytes], timestamp_ms: int | None = None, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1, attributes: int = 0,
                 keys: list[bytes | None] | None = None) -> bytes:
    """An uncompressed record batch v2 with a correct CRC and baseOffset 0.

    With producer_id >= 0 it is an idempotent batch (producer id/epoch and first sequence);
    `attributes` may add ATTR_TRANSACTIONAL / ATTR_CONTROL.
    """
    keys = keys or [None] * len(values)
    records = b"".join(record(v, i, k) for i, (v, k) in enumerate(zip(values, keys)))
    return batch_of_records(records, len(values), timestamp_ms=timestamp_ms,
                            producer_id=producer_id, producer_epoch=producer_epoch,
                            base_sequence=base_sequence, attributes=attributes)


def batch_of_records(records: bytes, count: int, *, last_offset_delta: int | None = None,
                     timestamp_ms: int | None = None, producer_id: int = -1,
                     producer_epoch: int = -1, base_sequence: int = -1, attributes: int = 0,
                     magic: int = 2) -> bytes:
    """A batch around already encoded `records` (which may be malformed on purpose), declaring
    `count` records; its CRC is right."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    after_crc = struct.pack(">hiqqqhii", attributes, delta, ts, ts, producer_id,
                            producer_epoch, base_sequence, count)
    after_crc += records
    crc = crc32c(after_crc)
    after_len = struct.pack(">ibI", 0, magic, crc) + after_crc   # leader epoch, magic, crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def corrupt_crc(batch: bytes) -> bytes:
    """The same batch with one payload byte flipped, so its stored CRC no longer matches."""
    b = bytearray(batch)
    b[-2] ^= 0xFF
    return bytes(b)


def request(api_key: int, api_version: int, correlation_id: int, body: bytes,
            client_id: str = "rill-e2e-raw") -> bytes:
    """A size-prefixed request with header v1 (non-flexible)."""
    header = struct.pack(">hhi", api_key, api_version, correlation_id) + kstring(client_id)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def produce_v3_body(topic_partitions: dict[str, dict[int, bytes]], acks: int = -1,
                    timeout_ms: int = 10000, transactional_id: str | None = None) -> bytes:
    body = kstring(transactional_id) + struct.pack(">hi", acks, timeout_ms)
    body += struct.pack(">i", len(topic_partitions))
    for topic, parts in topic_partitions.items():
        body += kstring(topic) + struct.pack(">i", len(parts))
        for idx, records in parts.items():
            body += struct.pack(">i", idx) + kbytes(records)
    return body


def parse_produce_v8(body: bytes) -> dict[tuple[str, int], tuple[int, list, str | None]]:
    """{(topic, partition): (error_code, [(batch_index, message)], error_message)} from a Produce
    v8 response body (v8 is the last non-flexible version, the first with KIP-467's fields)."""
    r = Reader(body)
    out = {}
    for _ in range(r.take(">i")):
        topic = r.string()
        for _ in range(r.take(">i")):
            idx, err, _base, _append_time, _log_start = r.take(">ihqqq")
            record_errors = []
            for _ in range(r.take(">i")):
                record_errors.append((r.take(">i"), r.string()))
            out[(topic, idx)] = (err, record_errors, r.string())
    return out


def metadata_v1_body(topics: list[str] | None) -> bytes:
    if topics is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(topics)) + b"".join(kstring(t) for t in topics)


def fetch_v4_body(offsets: dict[tuple[str, int], int], max_wait_ms: int = 0, min_bytes: int = 1,
                  max_bytes: int = 1 << 24, partition_max_bytes: int = 1 << 22,
                  isolation_level: int = 0) -> bytes:
    """Fetch v4 (a consumer, read_uncommitted unless told) of each (topic, partition) from its
    offset."""
    body = struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, isolation_level)
    return body + topics_array({(t, p): struct.pack(">iqi", p, o, partition_max_bytes)
                                for (t, p), o in offsets.items()})


def topics_array(entries: dict[tuple[str, int], bytes]) -> bytes:
    """A request's topics array: each topic (in first-seen order) with its partitions' already
    encoded entries."""
    topics: dict[str, list[bytes]] = {}
    for (topic, _partition), entry in entries.items():
        topics.setdefault(topic, []).append(entry)
    body = struct.pack(">i", len(topics))
    for topic, parts in topics.items():
        body += kstring(topic) + struct.pack(">i", len(parts)) + b"".join(parts)
    return body


def list_offsets_v2_body(timestamps: dict[tuple[str, int], int], isolation_level: int = 0) -> bytes:
    """ListOffsets v2 (a consumer) of each (topic, partition) at its timestamp (-1 latest)."""
    return struct.pack(">ib", -1, isolation_level) + topics_array(
        {(t, p): struct.pack(">iq", p, ts) for (t, p), ts in timestamps.items()})


class Reader:
    """Cursor over a response body."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        vals = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return vals if len(vals) > 1 else vals[0]

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s


def parse_api_versions_v0(body: bytes) -> tuple[int, dict[int, tuple[int, int]]]:
    """(error_code, {api_key: (min, max)}) from an ApiVersions v0 response body."""
    r = Reader(body)
    error = r.take(">h")
    n = r.take(">i")
    ranges = {}
    for _ in range(max(n, 0)):
        key, lo, hi = r.take(">hhh")
        ranges[key] = (lo, hi)
    return error, ranges


def parse_produce_v3(body: bytes) -> dict[tuple[str, int], int]:
    """{(topic, partition): error_code} from a Produce v3 response body."""
    return {k: v[0] for k, v in parse_produce_v3_offsets(body).items()}


def parse_produce_v3_offsets(body: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (error_code, base_offset)} from a Produce v3 response body."""
    r = Reader(body)
    out = {}
    for _ in range(r.take(">i")):
        topic = r.string()
        for _ in range(r.take(">i")):
            idx, err, base, _append_time = r.take(">ihqq")
            out[(topic, idx)] = (err, base)
    return out


def per_partition(body: bytes, partition) -> dict:
    """{(topic, index): value} from a response of throttle_time_ms then topics of partitions;
    `partition(reader)` reads one partition and returns (index, value)."""
    r = Reader(body)
    r.take(">i")  # throttle_time_ms
    out = {}
    for _ in range(r.take(">i")):
        topic = r.string()
        for _ in range(r.take(">i")):
            idx, value = partition(r)
            out[(topic, idx)] = value
    return out


def parse_fetch_v4(body: bytes) -> dict[tuple[str, int], tuple[int, int, bytes]]:
    """{(topic, partition): (error_code, high_watermark, records)} from a Fetch v4 response."""
    def partition(r: Reader):
        idx, err, hw, _lso = r.take(">ihqq")
        for _ in range(max(r.take(">i"), 0)):  # aborted transactions
            r.take(">qq")
        n = r.take(">i")
        records = r.data[r.pos:r.pos + max(n, 0)]
        r.pos += max(n, 0)
        return idx, (err, hw, records)
    return per_partition(body, partition)


def parse_list_offsets_v2(body: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (error_code, offset)} from a ListOffsets v2 response body."""
    def partition(r: Reader):
        idx, err, _ts, offset = r.take(">ihqq")
        return idx, (err, offset)
    return per_partition(body, partition)


def init_producer_id_v0_body(transactional_id: str | None = None,
                             timeout_ms: int = 60000) -> bytes:
    """InitProducerId v0: idempotent without a transactional id, transactional with one."""
    return kstring(transactional_id) + struct.pack(">i", timeout_ms)


def add_partitions_to_txn_v0_body(transactional_id: str, producer_id: int, epoch: int,
                                  partitions: dict[str, list[int]]) -> bytes:
    body = kstring(transactional_id) + struct.pack(">qhi", producer_id, epoch, len(partitions))
    for topic, parts in partitions.items():
        body += kstring(topic) + struct.pack(">i", len(parts))
        body += b"".join(struct.pack(">i", p) for p in parts)
    return body


def parse_add_partitions_to_txn_v0(body: bytes) -> dict[tuple[str, int], int]:
    """{(topic, partition): error_code}."""
    r = Reader(body)
    r.take(">i")                           # throttle
    out = {}
    for _ in range(r.take(">i")):
        topic = r.string()
        for _ in range(r.take(">i")):
            idx, err = r.take(">ih")
            out[(topic, idx)] = err
    return out


def end_txn_v0_body(transactional_id: str, producer_id: int, epoch: int, commit: bool) -> bytes:
    return kstring(transactional_id) + struct.pack(">qhb", producer_id, epoch, int(commit))


def parse_end_txn_v0(body: bytes) -> int:
    """The error code."""
    _throttle, err = Reader(body).take(">ih")
    return err


def commit_marker_batch(producer_id: int, epoch: int) -> bytes:
    """A COMMIT control batch as only a transaction coordinator may write it."""
    key = struct.pack(">hh", 0, 1)
    value = struct.pack(">hi", 0, 0)
    return record_batch([value], producer_id=producer_id, producer_epoch=epoch,
                        attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL, keys=[key])


def parse_init_producer_id_v0(body: bytes) -> tuple[int, int, int]:
    """(error_code, producer_id, producer_epoch)."""
    _throttle, err, pid, epoch = Reader(body).take(">ihqh")
    return err, pid, epoch


def parse_metadata_v1_topic_errors(body: bytes) -> dict[str, int]:
    """{topic: error_code} from a Metadata v1 response body."""
    r = Reader(body)
    for _ in range(r.take(">i")):          # brokers: node_id, host, port, rack
        r.take(">i")
        r.string()
        r.take(">i")
        r.string()
    r.take(">i")                           # controller id
    out = {}
    for _ in range(r.take(">i")):
        err = r.take(">h")
        name = r.string()
        r.take(">b")                       # is_internal
        for _ in range(r.take(">i")):
            r.take(">hii")                 # error, partition, leader
            for _array in ("replicas", "isr"):
                n = r.take(">i")
                r.pos += 4 * max(n, 0)
        out[name] = err
    return out


def incremental_alter_configs_v0_body(resource_type: int, name: str,
                                      sets: dict[str, str]) -> bytes:
    """IncrementalAlterConfigs v0 setting `sets` on one resource (the cluster-wide broker default
    is resource type 4 with name "", which the client libraries refuse to name)."""
    body = struct.pack(">i", 1) + struct.pack(">b", resource_type) + kstring(name)
    body += struct.pack(">i", len(sets))
    for key, value in sets.items():
        body += kstring(key) + struct.pack(">b", 0) + kstring(value)
    return body + struct.pack(">?", False)


def parse_incremental_alter_configs_v0(body: bytes) -> list[tuple[int, str | None, int, str]]:
    """[(error_code, error_message, resource_type, resource_name)]."""
    r = Reader(body)
    r.take(">i")                           # throttle
    out = []
    for _ in range(r.take(">i")):
        err = r.take(">h")
        message = r.string()
        kind = r.take(">b")
        out.append((err, message, kind, r.string()))
    return out


class Conn:
    """A raw TCP connection that sends bytes and reads size-prefixed responses."""

    def __init__(self, host: str, port: int, timeout_s: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.settimeout(timeout_s)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_exact(self, n: int) -> bytes | None:
        """n bytes, or None if the peer closed first (raises socket.timeout on a stall)."""
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def recv_response(self) -> tuple[int, bytes] | None:
        """(correlation_id, body after the v0 response header), or None if the broker closed."""
        head = self.recv_exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        assert 4 <= size <= 64 * 1024 * 1024, f"absurd response size {size}"
        payload = self.recv_exact(size)
        assert payload is not None, "connection closed mid-response"
        (corr,) = struct.unpack_from(">i", payload)
        return corr, payload[4:]

    def closed_by_peer(self) -> bool:
        """True if the broker closed the connection (EOF/reset) within the socket timeout."""
        try:
            data = self.sock.recv(1)
        except ConnectionResetError:
            return True
        return data == b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
