"""Kafka semantics checked at the wire, where clients would hide them: idempotent duplicates and
sequence gaps, unknown partitions, and producer state across a restart."""

from __future__ import annotations

import time

import pytest

import kafka_wire as kw
from clients import create_topic, watermarks


def _call(b, api_key: int, version: int, body: bytes, corr: int = 1) -> bytes:
    with kw.Conn(b.host, b.port, timeout_s=10) as c:
        c.send(kw.request(api_key, version, corr, body))
        resp = c.recv_response()
    assert resp is not None, f"broker closed the connection on api {api_key} v{version}"
    assert resp[0] == corr
    return resp[1]


def _init_pid(b) -> tuple[int, int]:
    err, pid, epoch = kw.parse_init_producer_id_v0(
        _call(b, kw.API_INIT_PRODUCER_ID, 0, kw.init_producer_id_v0_body()))
    assert err == 0 and pid >= 0 and epoch >= 0, (err, pid, epoch)
    return pid, epoch


def _produce(b, topic: str, batch: bytes, partition: int = 0) -> tuple[int, int]:
    body = _call(b, kw.API_PRODUCE, 3, kw.produce_v3_body({topic: {partition: batch}}))
    return kw.parse_produce_v3_offsets(body)[(topic, partition)]


def _produce_retrying(b, topic: str, batch: bytes, partition: int = 0) -> tuple[int, int]:
    """Like a client: resend the same (idempotent) batch on a new connection if one is dropped."""
    for _ in range(20):
        try:
            return _produce(b, topic, batch, partition)
        except (AssertionError, ConnectionError):
            time.sleep(0.1)
    return _produce(b, topic, batch, partition)


def _idem_batch(pid, epoch, seq, n, tag):
    return kw.record_batch([b"%s-%d" % (tag, seq + i) for i in range(n)], producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq)


def test_idempotent_duplicate_dropped_and_gap_rejected(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    pid, epoch = _init_pid(broker)
    first = _idem_batch(pid, epoch, 0, 3, b"a")
    assert _produce(broker, topic_name, first) == (kw.ERR_NONE, 0)
    # A retried batch (same pid/epoch/sequence) is acknowledged again, not appended again.
    err, base = _produce(broker, topic_name, first)
    assert err in (kw.ERR_NONE, kw.ERR_DUPLICATE_SEQUENCE_NUMBER) and base in (0, -1), (err, base)
    assert _produce(broker, topic_name, _idem_batch(pid, epoch, 3, 2, b"a")) == (kw.ERR_NONE, 3)
    # A gap in the sequence is rejected and nothing is written.
    err, _ = _produce(broker, topic_name, _idem_batch(pid, epoch, 9, 1, b"a"))
    assert err == kw.ERR_OUT_OF_ORDER_SEQUENCE_NUMBER
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 5)


def test_idempotent_state_survives_restart(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=1)
    pid, epoch = _init_pid(b)
    batch = _idem_batch(pid, epoch, 0, 4, b"r")
    assert _produce(b, topic_name, batch) == (kw.ERR_NONE, 0)
    b.restart(graceful=False)                # SIGKILL: state must come back from disk
    err, _ = _produce_retrying(b, topic_name, batch)
    assert err in (kw.ERR_NONE, kw.ERR_DUPLICATE_SEQUENCE_NUMBER), err
    assert watermarks(b.bootstrap, topic_name, 0) == (0, 4), "duplicate appended after restart"
    assert _produce(b, topic_name, _idem_batch(pid, epoch, 4, 1, b"r")) == (kw.ERR_NONE, 4)


@pytest.mark.parametrize("partition", [1, 7, -1])
def test_produce_to_missing_partition(broker, topic_name, partition):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    err, _ = _produce(broker, topic_name, kw.record_batch([b"v"]), partition=partition)
    assert err == kw.ERR_UNKNOWN_TOPIC_OR_PARTITION


def test_first_produce_after_restart_is_answered(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=1)
    assert _produce(b, topic_name, kw.record_batch([b"before"])) == (kw.ERR_NONE, 0)
    b.restart(graceful=False)
    assert _produce(b, topic_name, kw.record_batch([b"after"])) == (kw.ERR_NONE, 1)
