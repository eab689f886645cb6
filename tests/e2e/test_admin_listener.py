"""The admin listener of issue 16 (--admin-listen): /metrics values are exact after a known
workload (bytes in = bytes produced, lag = high watermark - committed offset), label cardinality
stays within its bounds, health checks and /v1/status answer, and the status page renders in
headless Chromium (a screenshot is taken and checked)."""

from __future__ import annotations

import json
import re
import shutil
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

import kafka_wire as kw
from broker import free_port, rill_binary
from clients import CLIENT_TIMEOUT_S, create_topic, produce_all, producer

#: Local metrics reach /metrics within one flush interval (200 ms, admin/metrics.rs); waiting for
#: the request count to arrive is bounded by this.
FLUSH_WAIT_S = 5.0


def http_get(admin: str, path: str, method: str = "GET") -> tuple[int, str, str]:
    """(status, content type, body) of one request to the admin listener."""
    request = urllib.request.Request(f"http://{admin}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def metrics(admin: str) -> dict[str, float]:
    """Every sample of /metrics, keyed by its name and labels exactly as exposed."""
    status, content_type, body = http_get(admin, "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4"), content_type
    samples = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def series(samples: dict[str, float], family: str) -> dict[str, float]:
    """The samples of one family (no suffixes like _bucket)."""
    return {k: v for k, v in samples.items() if k == family or k.startswith(family + "{")}


def produce_raw(bootstrap: str, topic: str, partition: int, batches: list[bytes]) -> None:
    """One acks=all Produce v3 request per batch, each checked for success."""
    host, port = bootstrap.rsplit(":", 1)
    with kw.Conn(host, int(port)) as conn:
        for i, batch in enumerate(batches):
            conn.send(kw.request(0, 3, i, kw.produce_v3_body({topic: {partition: batch}})))
            _, body = conn.recv_response()
            assert kw.parse_produce_v3(body) == {(topic, partition): 0}


def fetch_raw(bootstrap: str, offsets: dict[tuple[str, int], int], max_wait_ms: int) -> dict:
    """One Fetch v4 (min_bytes 1): {(topic, partition): (error, high watermark, records)}."""
    host, port = bootstrap.rsplit(":", 1)
    with kw.Conn(host, int(port)) as conn:
        conn.send(kw.request(1, 4, 1, kw.fetch_v4_body(offsets, max_wait_ms=max_wait_ms)))
        _, body = conn.recv_response()
    return kw.parse_fetch_v4(body)


def commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=offsets, asynchronous=False)
    finally:
        c.close()


def test_metric_values_are_exact_after_a_known_workload(broker_factory, topic_name):
    b = broker_factory(shards=2)
    admin = f"127.0.0.1:{b.admin_port}"
    create_topic(b.bootstrap, topic_name, partitions=2)
    sent = {0: [], 1: []}
    for p, count in ((0, 7), (1, 4)):
        for i in range(count):
            values = [f"p{p}-m{i}-r{j}".encode() * (i + 1) for j in range(3)]
            sent[p].append(kw.record_batch(values))
        produce_raw(b.bootstrap, topic_name, p, sent[p])
    group = "lag-" + topic_name
    commit(b.bootstrap, group, [TopicPartition(topic_name, 0, 5), TopicPartition(topic_name, 1, 12)])

    deadline = time.monotonic() + FLUSH_WAIT_S
    while metrics(admin).get('rill_requests_total{api="Produce"}', 0) < 11:
        assert time.monotonic() < deadline, "Produce requests not counted in /metrics"
        time.sleep(0.1)
    m = metrics(admin)
    assert m['rill_requests_total{api="Produce"}'] == 11
    t = f'topic="{topic_name}"'
    assert m[f"rill_topic_bytes_in_total{{{t}}}"] == sum(len(x) for x in sent[0] + sent[1])
    assert m[f"rill_topic_messages_in_total{{{t}}}"] == 3 * 11
    assert m[f"rill_topic_partitions{{{t}}}"] == 2
    for p, hw in ((0, 21), (1, 12)):
        labels = f'{t},partition="{p}"'
        assert m[f"rill_partition_high_watermark{{{labels}}}"] == hw
        assert m[f"rill_partition_log_end_offset{{{labels}}}"] == hw
        assert m[f"rill_partition_last_stable_offset{{{labels}}}"] == hw
        assert m[f"rill_partition_log_start_offset{{{labels}}}"] == 0
        assert m[f"rill_partition_log_bytes{{{labels}}}"] == sum(len(x) for x in sent[p])
        assert m[f"rill_partition_segments{{{labels}}}"] == 1
    g = f'group="{group}"'
    assert m[f'rill_group_lag{{{g},{t},partition="0"}}'] == 21 - 5
    assert m[f'rill_group_lag{{{g},{t},partition="1"}}'] == 12 - 12
    assert m[f"rill_group_topic_lag{{{g},{t}}}"] == 16
    assert m[f'rill_group_state{{{g},state="Empty"}}'] == 1
    assert m[f"rill_group_members{{{g}}}"] == 0
    assert m["rill_ready"] == 1 and m["rill_live"] == 1
    assert sum(series(m, "rill_shard_connections_accepted_total").values()) >= 3
    assert m['rill_request_duration_seconds_count{api="Produce"}'] == 11
    # Every request was acks=all on a topic that syncs before answering: 11 durable produces,
    # each after at least one flush.
    assert m["rill_produce_durable_seconds_count"] == 11
    assert 1 <= m["rill_log_flush_duration_seconds_count"] <= 11
    # Where their time went: each passed every stage up to its flush once (recorded before
    # the request's own latency, so counted by now).
    for stage in ("queued", "planned", "mailbox", "appending"):
        assert m[f'rill_shard_stage_seconds_count{{stage="{stage}"}}'] == 11, stage

    # Out: one Fetch of both partitions from offset 0 gets every batch back at once; a second
    # one at the end parks for its whole max wait.
    everything = fetch_raw(b.bootstrap, {(topic_name, 0): 0, (topic_name, 1): 0}, max_wait_ms=0)
    assert {k: v[:2] for k, v in everything.items()} == \
        {(topic_name, 0): (0, 21), (topic_name, 1): (0, 12)}
    for p in (0, 1):  # the stored batches differ from the sent ones only in their offsets
        assert len(everything[(topic_name, p)][2]) == sum(len(x) for x in sent[p])
    nothing = fetch_raw(b.bootstrap, {(topic_name, 0): 21, (topic_name, 1): 12}, max_wait_ms=300)
    assert [v[2] for v in nothing.values()] == [b"", b""]
    deadline = time.monotonic() + FLUSH_WAIT_S
    while metrics(admin).get('rill_requests_total{api="Fetch"}', 0) < 2:
        assert time.monotonic() < deadline, "Fetch requests not counted in /metrics"
        time.sleep(0.1)
    m = metrics(admin)
    assert m[f"rill_topic_bytes_out_total{{{t}}}"] == sum(len(x) for x in sent[0] + sent[1])
    assert m[f"rill_topic_messages_out_total{{{t}}}"] == 3 * 11
    assert m["rill_fetch_wait_seconds_count"] == 2
    assert m['rill_fetch_wait_seconds_bucket{le="0.0001"}'] == 1  # the first did not wait
    assert m['rill_fetch_wait_seconds_bucket{le="0.25"}'] == 1
    assert m["rill_fetch_wait_seconds_sum"] > 0.25  # parked until its deadline, less the first read
    assert m['rill_request_duration_seconds_count{api="Fetch"}'] == 2

    # Prometheus naming: counters end in _total, histograms in their unit, gauges never in _total.
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", http_get(admin, "/metrics")[2], re.M))
    assert len(types) > 40
    for name, kind in types.items():
        assert name.startswith(("rill_", "process_")), name
        assert kind in ("counter", "gauge", "histogram"), (name, kind)
        assert (kind == "counter") == name.endswith("_total"), (name, kind)
        if kind == "histogram":
            assert name.endswith("_seconds"), name

    # Every family the Grafana dashboard queries is exposed.
    dashboard = (Path(__file__).resolve().parents[2] / "ops/grafana/rill.json").read_text()
    exposed = {re.sub(r"(_bucket|_count|_sum)?(\{.*)?$", "", k) for k in m}
    wanted = set(re.findall(r"\b((?:rill|process)_[a-z_]+?)(?:_bucket)?\b", dashboard)) - {"rill_broker"}
    assert wanted <= exposed, f"dashboard queries missing families: {wanted - exposed}"

    status, content_type, body = http_get(admin, "/v1/status")
    assert status == 200 and content_type == "application/json"
    doc = json.loads(body)
    [topic] = [x for x in doc["topics"] if x["name"] == topic_name]
    assert [(x["partition"], x["high_watermark"], x["bytes_in"]) for x in topic["partitions"]] == \
        [(0, 21, sum(map(len, sent[0]))), (1, 12, sum(map(len, sent[1])))]
    [g] = [x for x in doc["groups"] if x["group"] == group]
    assert g["lag"] == 16 and [o["lag"] for o in g["offsets"]] == [16, 0]
    assert doc["ready"] == {"ok": True} and len(doc["shards"]) == 2


def wait_for_metric(admin: str, name: str, value: float, timeout_s: float = 30.0) -> dict:
    """/metrics once sample `name` reached `value` (fails after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        m = metrics(admin)
        if m.get(name, 0) >= value:
            return m
        assert time.monotonic() < deadline, f"{name} stayed at {m.get(name)}, wanted {value}"
        time.sleep(0.2)


def total(samples: dict[str, float], family: str) -> float:
    """The sum of a family's samples over its labels (e.g. over shards)."""
    return sum(series(samples, family).values())


def test_connections_queue_depth_and_a_live_group_are_exact(broker_factory, topic_name):
    """Three connections each parked in a long-poll Fetch are three open connections and three
    requests in flight; closed, they are counted closed. A consumer in a group is a Stable group
    of one member, lagging by what it has not committed; once it leaves, the group is Empty."""
    b = broker_factory(shards=2)
    admin = f"127.0.0.1:{b.admin_port}"
    create_topic(b.bootstrap, topic_name, partitions=1)
    produce_raw(b.bootstrap, topic_name, 0, [kw.record_batch([b"a", b"b", b"c"]),
                                             kw.record_batch([b"d"])])
    deadline = time.monotonic() + FLUSH_WAIT_S
    while total(m := metrics(admin), "rill_shard_connections_open") != 0:
        assert time.monotonic() < deadline, "set-up clients' connections never closed"
        time.sleep(0.1)
    accepted, closed = (total(m, f"rill_shard_connections_{x}_total") for x in ("accepted", "closed"))
    assert total(m, "rill_shard_requests_in_flight") == 0
    assert total(m, "rill_shard_busy_seconds_total") > 0

    host, port = b.bootstrap.rsplit(":", 1)
    conns = [kw.Conn(host, int(port)) for _ in range(3)]
    for i, c in enumerate(conns):
        c.send(kw.request(1, 4, i, kw.fetch_v4_body({(topic_name, 0): 4}, max_wait_ms=3000)))
    deadline = time.monotonic() + FLUSH_WAIT_S
    while total(m := metrics(admin), "rill_shard_requests_in_flight") != 3:
        assert time.monotonic() < deadline, "the parked Fetches are not in flight"
        time.sleep(0.05)
    assert total(m, "rill_shard_connections_open") == 3
    assert total(m, "rill_shard_connections_accepted_total") == accepted + 3
    for c in conns:
        assert c.recv_response()[0] in (0, 1, 2)   # answered empty at the end of the wait
        c.close()
    deadline = time.monotonic() + FLUSH_WAIT_S
    while total(m := metrics(admin), "rill_shard_connections_closed_total") != closed + 3:
        assert time.monotonic() < deadline, "closed connections not counted"
        time.sleep(0.05)
    assert total(m, "rill_shard_connections_open") == 0
    assert total(m, "rill_shard_requests_in_flight") == 0

    group = "live-" + topic_name
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic_name])
        got = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(got) < 4:
            assert time.monotonic() < deadline, f"consumed only {got}"
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
        assert got == [b"a", b"b", b"c", b"d"]
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        m = metrics(admin)
        g, t = f'group="{group}"', f'topic="{topic_name}"'
        assert m[f'rill_group_state{{{g},state="Stable"}}'] == 1
        assert m[f"rill_group_members{{{g}}}"] == 1
        assert m[f'rill_group_lag{{{g},{t},partition="0"}}'] == 4 - 1
    finally:
        consumer.close()                            # LeaveGroup
    m = metrics(admin)
    assert m[f'rill_group_state{{{g},state="Empty"}}'] == 1
    assert m[f"rill_group_members{{{g}}}"] == 0
    assert m[f"rill_group_topic_lag{{{g},{t}}}"] == 3


def test_cleaner_and_transaction_figures_are_exact(broker_factory, tmp_path, topic_name):
    """A compacted log of KEYS keys written ROUNDS times is cleaned once: the cleaner counts
    every record it read and removes all but the latest of each key. Two committed transactions,
    one aborted and one left to time out are counted by result, and the ids by state."""
    props = tmp_path / "rill.properties"
    props.write_text("log.cleaner.backoff.ms=200\nlog.retention.check.interval.ms=200\n"
                     "transaction.abort.timed.out.transaction.cleanup.interval.ms=200\n")
    b = broker_factory(config_path=props, shards=1)
    admin = f"127.0.0.1:{b.admin_port}"
    m = metrics(admin)
    assert m['rill_cleaner_cleans_total{result="done"}'] == 0
    assert m['rill_txn_ended_total{result="commit"}'] == 0
    assert m['rill_txn_ids{state="Ongoing"}'] == 0

    keys, rounds = 50, 6
    compacted = topic_name + "-compacted"
    create_topic(b.bootstrap, compacted, config={
        "cleanup.policy": "compact", "segment.ms": "2000", "min.cleanable.dirty.ratio": "0.01"})
    p = producer(b.bootstrap, acks="all")
    produce_all(p, compacted, [(b"k%02d" % k, b"v%d" % r) for r in range(rounds) for k in range(keys)])
    # The dirty size is read while every update is in the active segment, which the cleaner never
    # touches: after the next append seals it, the cleaner may finish before any read.
    log_bytes = f'rill_partition_log_bytes{{topic="{compacted}",partition="0"}}'
    dirty = metrics(admin)[log_bytes]
    time.sleep(2.1)  # segment.ms: the next append seals the segment holding every update
    produce_all(p, compacted, [(b"sentinel", b"end")])
    m = wait_for_metric(admin, 'rill_cleaner_cleans_total{result="done"}', 1)
    assert m['rill_cleaner_cleans_total{result="done"}'] == 1
    assert m['rill_cleaner_cleans_total{result="failed"}'] == 0
    assert m["rill_cleaner_clean_duration_seconds_count"] == 1
    assert m["rill_cleaner_records_read_total"] == keys * rounds
    assert m["rill_cleaner_records_removed_total"] == keys * (rounds - 1)
    assert 0 < m["rill_cleaner_written_bytes_total"] < m["rill_cleaner_read_bytes_total"]
    # The partition's figures follow the swap without waiting for traffic.
    assert m[log_bytes] < dirty / 3, (m[log_bytes], dirty)

    # Retention deleting a segment moves the log start at once too.
    expiring = topic_name + "-expiring"
    create_topic(b.bootstrap, expiring, config={"segment.ms": "1000", "retention.ms": "1000"})
    produce_all(p, expiring, [(None, b"old")] * 3)
    time.sleep(1.1)
    produce_all(p, expiring, [(None, b"new")])   # seals the segment of the first three
    start = f'rill_partition_log_start_offset{{topic="{expiring}",partition="0"}}'
    m = wait_for_metric(admin, start, 3)
    assert m[start] == 3
    assert m[f'rill_partition_segments{{topic="{expiring}",partition="0"}}'] == 1

    txn_topic = topic_name + "-txn"
    create_topic(b.bootstrap, txn_topic)
    tx = producer(b.bootstrap, **{"transactional.id": f"{topic_name}-a"})
    tx.init_transactions(CLIENT_TIMEOUT_S)
    for commit in (True, False, True):
        tx.begin_transaction()
        tx.produce(txn_topic, value=b"x", partition=0)
        tx.flush(CLIENT_TIMEOUT_S)
        tx.commit_transaction(CLIENT_TIMEOUT_S) if commit else tx.abort_transaction(CLIENT_TIMEOUT_S)
    left_open = producer(b.bootstrap, **{"transactional.id": f"{topic_name}-b",
                                         "transaction.timeout.ms": 2000,
                                         "message.timeout.ms": 2000})
    left_open.init_transactions(CLIENT_TIMEOUT_S)
    left_open.begin_transaction()
    produce_all(left_open, txn_topic, [(None, b"never committed")])
    m = wait_for_metric(admin, 'rill_txn_ended_total{result="abort"}', 2)
    assert m['rill_txn_ended_total{result="commit"}'] == 2
    assert m['rill_txn_ended_total{result="abort"}'] == 2
    assert m["rill_txn_timed_out_total"] == 1
    ids = series(m, "rill_txn_ids")
    assert ids['rill_txn_ids{state="CompleteCommit"}'] == 1
    assert ids['rill_txn_ids{state="CompleteAbort"}'] == 1
    assert sum(ids.values()) == 2


def test_label_cardinality_stays_within_its_bounds(broker_factory, tmp_path):
    props = tmp_path / "bounds.properties"
    props.write_text("rill.metrics.topics.max=2\nrill.metrics.partition.series.max=3\n"
                     "rill.metrics.groups.max=1\n")
    b = broker_factory(config_path=props, shards=1)
    admin = f"127.0.0.1:{b.admin_port}"
    topics = [f"card-{i}" for i in range(4)]
    for name in topics:
        create_topic(b.bootstrap, name, partitions=2)
        for p in range(2):
            produce_raw(b.bootstrap, name, p, [kw.record_batch([b"x"])])
    m = metrics(admin)
    assert set(series(m, "rill_topic_bytes_in_total")) == {
        'rill_topic_bytes_in_total{topic="card-0"}', 'rill_topic_bytes_in_total{topic="card-1"}',
        'rill_topic_bytes_in_total{topic="_other"}'}
    assert m['rill_topic_partitions{topic="_other"}'] == 4
    assert len(series(m, "rill_partition_high_watermark")) == 3
    assert m['rill_metrics_series_dropped{family="rill_partition_high_watermark"}'] == 5
    for group in ("card-g0", "card-g1", "card-g2"):
        commit(b.bootstrap, group, [TopicPartition(topics[0], 0, 1)])
    m = metrics(admin)
    assert series(m, "rill_group_topic_lag") == {
        'rill_group_topic_lag{group="card-g0",topic="card-0"}': 0,
        'rill_group_topic_lag{group="_other",topic="card-0"}': 0}
    assert set(series(m, "rill_group_members")) == {
        'rill_group_members{group="card-g0"}', 'rill_group_members{group="_other"}'}
    assert len(series(m, "rill_group_lag")) == 3   # per group and partition, not summed

    b.stop()
    props.write_text("rill.metrics.partition.series.enable=false\n")
    b.start()
    produce_raw(b.bootstrap, topics[0], 0, [kw.record_batch([b"y"])])
    m = metrics(admin)
    assert not [k for k in m if k.startswith("rill_partition_")], "per-partition series are off"
    assert len(series(m, "rill_topic_bytes_in_total")) == 4


def test_health_endpoints_and_bad_requests(broker_factory):
    b = broker_factory(shards=2)
    admin = f"127.0.0.1:{b.admin_port}"
    assert http_get(admin, "/health/live")[:3:2] == (200, "live\n")
    assert http_get(admin, "/health/ready")[:3:2] == (200, "ready\n")
    assert http_get(admin, "/nope")[0] == 404
    assert http_get(admin, "/metrics", method="POST")[0] == 405
    assert http_get(admin, "/health/ready", method="HEAD")[0] == 200
    # Garbage and an over-long head are answered (400, 431), not a hang or a crash.
    host, port = admin.split(":")
    for junk in (b"\x00\x01\x02 garbage\r\n\r\n", b"GET / HTTP/1.1\r\nX: " + b"a" * 20000):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(junk)
            assert s.recv(64).split(b" ")[1] in (b"400", b"431")
    assert http_get(admin, "/health/live")[0] == 200
    b.stop()
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=2)


def test_a_broker_its_controller_has_not_registered_is_live_but_not_ready(tmp_path):
    """Readiness waits for the controller: a broker node whose quorum is unreachable runs (live)
    and answers 503 with the reason until it is registered (the cluster test below shows the
    other side)."""
    admin = f"127.0.0.1:{free_port()}"
    props = tmp_path / "broker.properties"
    props.write_text(f"node.id=2\nprocess.roles=broker\ncontroller.quorum.voters=1@127.0.0.1:{free_port()}\n"
                     f"listeners=PLAINTEXT://127.0.0.1:{free_port()}\nlog.dirs={tmp_path / 'data'}\n"
                     f"rill.shards=1\nrill.shard.io.memory.bytes=1048576\nrill.admin.listen={admin}\n")
    log = (tmp_path / "rill.log").open("wb")
    proc = subprocess.Popen([str(rill_binary()), "--config", str(props)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status = http_get(admin, "/health/live")[0]
                break
            except urllib.error.URLError:
                assert proc.poll() is None and time.monotonic() < deadline, "admin listener never up"
                time.sleep(0.1)
        assert status == 200
        time.sleep(1)  # a second more: still no controller
        assert http_get(admin, "/health/ready")[:3:2] == \
            (503, "not ready: not registered with the controller yet\n")
        m = metrics(admin)
        assert (m["rill_ready"], m["rill_live"]) == (0, 1)
        assert json.loads(http_get(admin, "/v1/status")[2])["ready"] == \
            {"ok": False, "reason": "not registered with the controller yet"}
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0, "a broker waiting for its controller stops cleanly"
        log.close()


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.fail("chromium is not installed: ./test.sh installs it (apt-get install chromium)")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_status_page_renders_in_headless_chromium(broker_factory, topic_name, tmp_path):
    props = tmp_path / "rill.properties"
    props.write_text("rill.no.such.property=1\n")
    b = broker_factory(config_path=props, shards=2)
    admin = f"127.0.0.1:{b.admin_port}"
    create_topic(b.bootstrap, topic_name, partitions=1)
    produce_raw(b.bootstrap, topic_name, 0, [kw.record_batch([b"a", b"b", b"c"])])
    group = "<b>page</b>-" + topic_name          # a hostile group id must come out escaped
    commit(b.bootstrap, group, [TopicPartition(topic_name, 0, 1)])
    # The unknown property was logged as a warning at start: it shows among the recent errors.
    [error] = json.loads(http_get(admin, "/v1/status")[2])["recent_errors"]
    assert error["level"] == "WARN" and "rill.no.such.property" in json.dumps(error), error
    chrome = [chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu",
              "--disable-background-networking", "--disable-dev-shm-usage", "--no-first-run",
              "--hide-scrollbars", "--window-size=1280,900"]
    dom = subprocess.run(chrome + ["--dump-dom", f"http://{admin}/"], capture_output=True,
                         text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert topic_name in dom.stdout and "Consumer groups" in dom.stdout
    assert "&lt;b&gt;page&lt;/b&gt;" in dom.stdout and "<b>page</b>" not in dom.stdout
    assert re.search(r"<td>3</td>\s*<td>3</td>", dom.stdout), "log end and high watermark 3"
    assert "rill.no.such.property" in dom.stdout and "None since start." not in dom.stdout
    shot = tmp_path / "status-page.png"
    run = subprocess.run(chrome + [f"--screenshot={shot}", f"http://{admin}/"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    assert png_size(shot) == (1280, 900)
    assert shot.stat().st_size > 20_000, "a blank page compresses to a few KB"
    print(f"status page screenshot: {shot}")


def test_a_cluster_node_is_ready_once_registered_and_lists_the_brokers(tmp_path):
    from cluster import Cluster
    from conftest import _BROKERS
    c = Cluster(tmp_path, size=1, **{"default.replication.factor": 1, "min.insync.replicas": 1,
                                     "offsets.topic.replication.factor": 1})
    _BROKERS.extend(c.nodes)
    try:
        c.start()                           # returns once the node's Metadata lists itself
        admin = f"127.0.0.1:{c.node(1).admin_port}"
        assert http_get(admin, "/health/ready")[:3:2] == (200, "ready\n")
        doc = json.loads(http_get(admin, "/v1/status")[2])
        assert doc["brokers"] == [{"node_id": 1, "address": c.bootstrap(1), "this_broker": True,
                                   "fenced": False, "controller": True}]
        m = metrics(admin)
        assert m['rill_cluster_brokers{state="live"}'] == 1
        assert m['rill_cluster_brokers{state="fenced"}'] == 0
        assert m["rill_cluster_controller_id"] == 1
        assert m["rill_cluster_metadata_applied_index"] >= 1
    finally:
        assert c.stop() == [0]
