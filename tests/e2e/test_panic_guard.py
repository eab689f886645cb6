"""Issue 26, the last line of defence: a request whose handler panics is answered (or its
connection closed), logged with its API and version, and counted in /metrics, and the broker
goes on serving; a shard that dies for any other reason ends the whole process at once, with a
clear message, instead of leaving it half-alive.

The faults come from test hooks that only debug builds honour (server/src/test_hooks.rs):
`rill.test.panic.api`, `rill.test.panic.group.prefix` and `rill.test.kill.shard`.
"""

from __future__ import annotations

import time

import kafka_wire as kw
import wire_flexible as wf
from broker_watchdog import WATCHDOG
from clients import consume_partition, create_topic, producer, produce_all
from test_admin_listener import metrics

#: Group ids the panicking broker's coordinators panic on; with 2 shards some are coordinated
#: by the shard of the asking connection and some by the other (the cross-shard path).
BOOM = "boom-"


def properties(path, lines: dict) -> object:
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


def round_trip(b, topic: str) -> None:
    create_topic(b.bootstrap, topic)
    reports = produce_all(producer(b.bootstrap, acks="all"), topic, [(None, b"alive")])
    assert consume_partition(b.bootstrap, topic, 0, reports[0][2], 1)[0].value() == b"alive"


def wait_metric(b, name: str, at_least: float, timeout_s: float = 5.0) -> float:
    deadline = time.monotonic() + timeout_s
    while True:
        value = metrics(f"127.0.0.1:{b.admin_port}").get(name, 0)
        if value >= at_least or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def test_a_panicking_handler_is_answered_and_the_broker_goes_on(broker_factory, tmp_path,
                                                                 topic_name):
    config = properties(tmp_path / "panics.properties", {
        "rill.test.panic.api": kw.API_INIT_PRODUCER_ID,
        "rill.test.panic.group.prefix": BOOM,
    })
    b = broker_factory(shards=2, config_path=config)
    # InitProducerId panics in its handler: UNKNOWN_SERVER_ERROR, on the same connection again.
    with kw.Conn(b.host, b.port) as c:
        for corr in (1, 2, 3):
            c.send(kw.request(kw.API_INIT_PRODUCER_ID, 0, corr, kw.init_producer_id_v0_body()))
            resp = c.recv_response()
            assert resp is not None and resp[0] == corr, "a panicking handler closed the connection"
            err, _pid, _epoch = kw.parse_init_producer_id_v0(resp[1])
            assert err == kw.ERR_UNKNOWN_SERVER_ERROR
    # JoinGroup of groups whose coordinator panics, on this shard or the other one.
    with kw.Conn(b.host, b.port) as c:
        for i in range(8):
            join = wf.join_group_v6(f"{BOOM}{i}")
            c.send(wf.request(wf.API_JOIN_GROUP, 6, 10 + i, join))
            resp = c.recv_response()
            assert resp is not None and resp[0] == 10 + i
            assert wf.parse_join_group_v6(resp[1])["error"] == kw.ERR_UNKNOWN_SERVER_ERROR
    round_trip(b, topic_name)
    assert wait_metric(b, 'rill_request_panics_total{api="InitProducerId"}', 3) == 3
    assert wait_metric(b, 'rill_request_panics_total{api="JoinGroup"}', 8) == 8
    log = b.log_text()
    assert "a request's handler panicked; the shard goes on" in log
    assert "api_key=22" in log and "version=0" in log
    assert "answered=\"UNKNOWN_SERVER_ERROR\"" in log or "answered=UNKNOWN_SERVER_ERROR" in log
    assert b.alive()
    assert b.stop() == 0


def test_a_shard_that_dies_ends_the_process(broker_factory, tmp_path):
    """Shard 1 dies outside any request (a panic in one of its tasks) 2 s after it listens:
    before, shard 0 went on alone and the process looked alive; now it exits, non-zero, and
    says why."""
    config = properties(tmp_path / "kill.properties", {"rill.test.kill.shard": "1:2000"})
    b = broker_factory(shards=2, config_path=config)
    with kw.Conn(b.host, b.port) as c:
        c.send(kw.request(kw.API_VERSIONS, 0, 1, b""))
        assert c.recv_response() is not None, "the broker serves before the shard dies"
    WATCHDOG.disarm(b)  # this death is asked for
    deadline = time.monotonic() + 20
    while b.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not b.alive(), f"the process outlived its dead shard:\n{b.log_tail()}"
    assert b.proc.returncode != 0
    log = b.log_text()
    assert "injected death of shard 1" in log
    assert "a shard died; the broker cannot serve without it" in log, b.log_tail()
