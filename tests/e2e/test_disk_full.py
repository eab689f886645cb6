"""A full disk: produce fails with a Kafka error, nothing is corrupted, and the broker recovers.

The data directory is a small ext4 file system on a loop device (as root: truncate, mkfs.ext4,
losetup, mount). A producer fills it over the raw wire (so the exact error code is visible), then:

- the failing Produce is answered with KAFKA_STORAGE_ERROR (56), not a hang, crash or close;
- everything acknowledged before stays readable, in place;
- when space returns (a ballast file put there before the broker started is deleted), produce
  works again on the same partition without a restart;
- after a restart every acknowledged record is still there (recovery found no corruption).

Skips (with the reason) only when the machine cannot mount a loop device (not root, no loop
support, mkfs.ext4/losetup missing). CI runs as root on the same kind of machine. (Growing the
mounted file system with resize2fs would be the other way to return space; this sandbox refuses
online resize with EPERM, so the test frees a ballast file instead.)
"""

from __future__ import annotations

import time

import pytest

import kafka_wire as kw
from broker import Broker
from clients import consume_partition, create_topic, producer, produce_all
from loopfs import IMAGE_BYTES, mounted

ERR_KAFKA_STORAGE_ERROR = 56
#: Bytes per record value: Produce requests of ~512 KiB fill the disk in ~100 requests.
VALUE_BYTES = 64 << 10
RECORDS_PER_REQUEST = 8


@pytest.fixture
def loop_fs(tmp_path):
    with mounted(tmp_path) as fs:
        fs.put_ballast()
        yield fs


@pytest.fixture
def full_disk_broker(loop_fs, tmp_path):
    config = tmp_path / "rill.properties"
    # Small segments: preallocation (at most up to the segment's end) must not eat the disk.
    config.write_text("log.segment.bytes=1048576\n")
    b = Broker(loop_fs.mount_dir / "data", tmp_path / "rill.log", config_path=config)
    b.start()
    yield b
    if b.alive():
        b.stop()


def _produce_raw(c: kw.Conn, topic: str, corr: int, values: list[bytes]) -> tuple[int, int]:
    """One acks=all Produce v3 of `values` to partition 0: (error_code, base_offset)."""
    c.send(kw.request(kw.API_PRODUCE, 3, corr,
                      kw.produce_v3_body({topic: {0: kw.record_batch(values)}}, acks=-1,
                                         timeout_ms=30000)))
    resp = c.recv_response()
    assert resp is not None, "the broker closed the connection instead of answering the Produce"
    assert resp[0] == corr
    return kw.parse_produce_v3_offsets(resp[1])[(topic, 0)]


def _fill(b, topic: str) -> tuple[list[tuple[int, list[bytes]]], int]:
    """Produce until the disk refuses; return the acknowledged (base_offset, values) and the error."""
    acked: list[tuple[int, list[bytes]]] = []
    with kw.Conn(b.host, b.port, timeout_s=60.0) as c:
        for i in range(IMAGE_BYTES * 4 // (VALUE_BYTES * RECORDS_PER_REQUEST)):
            values = [(b"%06d-%02d-" % (i, j)).ljust(VALUE_BYTES, b"x")
                      for j in range(RECORDS_PER_REQUEST)]
            error, base = _produce_raw(c, topic, i + 1, values)
            if error != 0:
                return acked, error
            acked.append((base, values))
    raise AssertionError(f"the {IMAGE_BYTES >> 20} MiB disk never filled up")


def _check_acked(b, topic: str, acked: list[tuple[int, list[bytes]]]) -> None:
    """Every acknowledged record is readable at its offset."""
    first, last = acked[0][0], acked[-1][0] + len(acked[-1][1]) - 1
    got = consume_partition(b.bootstrap, topic, 0, first, last - first + 1,
                            **{"fetch.max.bytes": 4 << 20})
    by_offset = {m.offset(): m.value() for m in got}
    for base, values in acked:
        for k, v in enumerate(values):
            assert by_offset.get(base + k) == v, f"{topic} offset {base + k} lost or changed"


@pytest.mark.timeout(300)
def test_disk_full_fails_produce_cleanly_and_recovers(full_disk_broker, loop_fs, topic_name):
    b = full_disk_broker
    keep = f"{topic_name}-keep"
    create_topic(b.bootstrap, keep)
    create_topic(b.bootstrap, topic_name)
    kept = produce_all(producer(b.bootstrap, acks="all"), keep,
                       [(None, b"keep-%d" % i) for i in range(100)])

    acked, error = _fill(b, topic_name)
    print(f"disk full after {len(acked)} acknowledged requests "
          f"({len(acked) * RECORDS_PER_REQUEST * VALUE_BYTES >> 20} MiB), "
          f"error {error}, free {loop_fs.free_bytes() >> 10} KiB")
    assert error == ERR_KAFKA_STORAGE_ERROR, f"full disk answered with error {error}, expected 56"
    assert acked, "not a single Produce succeeded before the disk filled"
    assert b.alive(), f"broker died on a full disk:\n{b.log_tail()}"

    # Nothing acknowledged is lost or damaged while the disk is full.
    _check_acked(b, topic_name, acked)
    got = consume_partition(b.bootstrap, keep, 0, 0, 100)
    assert [m.value() for m in got] == [r[3] for r in kept]

    # Space returns: the same partition accepts writes again, without a restart.
    loop_fs.free_ballast()
    print(f"ballast freed: free {loop_fs.free_bytes() >> 20} MiB")
    after: tuple[int, int] | None = None
    with kw.Conn(b.host, b.port, timeout_s=60.0) as c:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            after = _produce_raw(c, topic_name, 9999, [b"after-space-returns"])
            if after[0] == 0:
                break
            time.sleep(0.5)
    assert after is not None and after[0] == 0, \
        f"produce still fails with {after} after space returned (no restart)"
    acked.append((after[1], [b"after-space-returns"]))
    produce_all(producer(b.bootstrap, acks="all"), keep, [(None, b"keep-after")])

    # A restart finds every acknowledged record intact (recovery cut nothing durable).
    b.restart()
    _check_acked(b, topic_name, acked)
    assert "panicked" not in b.log_text(), b.log_tail()
