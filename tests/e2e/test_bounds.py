"""Resource bounds (issue 26): connections, request memory and Fetch memory, each against a real
rill configured with Kafka's property names, while a well-behaved client keeps being served.

Memory is read from /proc/<pid>/status (VmRSS); each bound that bites is also seen counted in
/metrics (`rill_bound_hits_total{bound=...}`). Timeouts are generous and only catch hangs.
"""

from __future__ import annotations

import selectors
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import ConfigResource, ConfigSource

import kafka_wire as kw
from clients import CLIENT_TIMEOUT_S, admin, create_topic, producer
from test_admin_listener import metrics, total, wait_for_metric
from test_hostile_clients import (ANSWER_TIMEOUT_S, closed_or_answered, raise_nofile, round_trip,
                                  rss_bytes)

#: Idle connections held open by the max.connections test.
IDLE_CONNECTIONS = 4000
#: connections.max.idle.ms of that test: long enough to open them all and check the limit first.
IDLE_MS = 15_000
#: Bytes of broker memory beside a bound that we tolerate (allocator slack, buffers, the
#: friendly client's requests).
SLACK_BYTES = 64 << 20


def start(broker_factory, tmp_path, props: dict, **kwargs):
    """A private broker with these properties in its config file."""
    path = tmp_path / "bounds.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return broker_factory(config_path=path, **kwargs)


def hits(b, bound: str) -> float:
    """rill_bound_hits_total of `bound` now."""
    return metrics(f"{b.host}:{b.admin_port}").get(f'rill_bound_hits_total{{bound="{bound}"}}', 0)


def api_versions(sock: socket.socket, correlation_id: int = 1) -> None:
    sock.sendall(kw.request(kw.API_VERSIONS, 0, correlation_id, b""))


def test_max_connections_holds_new_ones_until_others_close_and_idle_ones_close(
        broker_factory, tmp_path, topic_name):
    b = start(broker_factory, tmp_path, {"max.connections": IDLE_CONNECTIONS,
                                         "connections.max.idle.ms": IDLE_MS})
    admin_addr = f"{b.host}:{b.admin_port}"
    create_topic(b.bootstrap, topic_name)
    round_trip(b, topic_name, "warm-up")
    assert raise_nofile(IDLE_CONNECTIONS + 512) >= IDLE_CONNECTIONS + 256, "RLIMIT_NOFILE too low"
    # The friendly clients above closed theirs: the broker holds none but ours from now on.
    wait_for_metric(admin_addr, "rill_ready", 1)
    deadline = time.monotonic() + 30
    while total(metrics(admin_addr), "rill_shard_connections_open") > 0:
        assert time.monotonic() < deadline, "the warm-up's connections did not close"
        time.sleep(0.2)
    idle: list[socket.socket] = []
    friendly = None
    try:
        started = time.monotonic()
        for _ in range(IDLE_CONNECTIONS):
            idle.append(socket.create_connection((b.host, b.port), timeout=ANSWER_TIMEOUT_S))
        deadline = time.monotonic() + 60
        while total(metrics(admin_addr), "rill_shard_connections_open") < IDLE_CONNECTIONS:
            assert time.monotonic() < deadline, "the broker did not accept every idle connection"
            time.sleep(0.2)
        opened_s = time.monotonic() - started
        assert opened_s < IDLE_MS / 1000 / 2, f"opening took {opened_s:.1f}s: idle timer too short"
        # max.connections reached: a new connection is not served (it waits, it is not closed).
        friendly = socket.create_connection((b.host, b.port), timeout=ANSWER_TIMEOUT_S)
        api_versions(friendly)
        friendly.settimeout(2.0)
        with pytest.raises(socket.timeout):
            friendly.recv(1)
        assert total(metrics(admin_addr), "rill_shard_connections_open") == IDLE_CONNECTIONS
        # Some close: the waiting one is served.
        for s in idle[:10]:
            s.close()
        del idle[:10]
        assert closed_or_answered(friendly) == "answered"
        assert hits(b, "max.connections") >= 1
        # The rest idle past connections.max.idle.ms: the broker closes them all.
        sel = selectors.DefaultSelector()
        for s in idle:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        open_ones = set(idle)
        deadline = time.monotonic() + IDLE_MS / 1000 + 90
        while open_ones and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1.0):
                s = key.fileobj
                try:
                    data = s.recv(1)
                except (BlockingIOError, InterruptedError):
                    continue
                except ConnectionResetError:
                    data = b""
                assert data == b"", "an idle connection got bytes it never asked for"
                sel.unregister(s)
                open_ones.discard(s)
        sel.close()
        print(f"max.connections: {IDLE_CONNECTIONS} idle connections opened in {opened_s:.1f}s; "
              f"{IDLE_CONNECTIONS - 10 - len(open_ones)} closed by the idle timer")
        assert not open_ones, f"{len(open_ones)} idle connections still open after " \
                              f"{IDLE_MS} ms idle"
        assert hits(b, "connections.max.idle.ms") >= IDLE_CONNECTIONS - 10
        # The friendly connection answered since, then idled too: closed as well.
        friendly.settimeout(IDLE_MS / 1000 + 60)
        assert closed_or_answered(friendly, IDLE_MS / 1000 + 60) == "closed"
        round_trip(b, topic_name, "after")
    finally:
        for s in idle:
            s.close()
        if friendly is not None:
            friendly.close()


def connect_from(b, source: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(ANSWER_TIMEOUT_S)
    s.bind((source, 0))
    s.connect((b.host, b.port))
    return s


def test_max_connections_per_ip_closes_new_ones_from_that_address(broker_factory, tmp_path):
    b = start(broker_factory, tmp_path, {"max.connections.per.ip": 3,
                                         "max.connections.per.ip.overrides": "127.0.0.2:5"})
    held = []
    try:
        for source, limit in [("127.0.0.1", 3), ("127.0.0.2", 5)]:
            for i in range(limit):
                s = connect_from(b, source)
                api_versions(s, i)
                assert closed_or_answered(s) == "answered", f"{source} connection {i} refused"
                held.append(s)
            over = connect_from(b, source)
            api_versions(over)
            assert closed_or_answered(over) == "closed", f"{source} got a connection past its limit"
            over.close()
        wait_for_metric(f"{b.host}:{b.admin_port}",
                        'rill_bound_hits_total{bound="max.connections.per.ip"}', 2)
        # Another address's limit is its own: 127.0.0.3 still gets its default 3.
        s = connect_from(b, "127.0.0.3")
        api_versions(s)
        assert closed_or_answered(s) == "answered"
        held.append(s)
    finally:
        for s in held:
            s.close()
    # Once they closed, the address may connect again.
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while True:
        s = connect_from(b, "127.0.0.1")
        api_versions(s)
        outcome = closed_or_answered(s)
        s.close()
        if outcome == "answered":
            break
        assert time.monotonic() < deadline, "closed connections still counted"
        time.sleep(0.2)


def send_half_frames(b, connections: int, frame_bytes: int, timeout_s: float = 120.0):
    """`connections` connections each announce a `frame_bytes` frame and send half of it, as fast
    as the broker takes it; returns the sockets (kept open) and the bytes each got through."""
    chunk = memoryview(bytes(1 << 20))
    socks, sent = [], []
    for _ in range(connections):
        s = socket.create_connection((b.host, b.port), timeout=ANSWER_TIMEOUT_S)
        s.sendall(struct.pack(">i", frame_bytes))
        s.setblocking(False)
        socks.append(s)
        sent.append(0)
    want = frame_bytes // 2
    deadline = time.monotonic() + timeout_s
    last_progress = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - last_progress < 5.0:
        moved = False
        for i, s in enumerate(socks):
            if sent[i] >= want:
                continue
            try:
                n = s.send(chunk[:min(len(chunk), want - sent[i])])
            except (BlockingIOError, InterruptedError):
                continue
            sent[i] += n
            moved = moved or n > 0
        if moved:
            last_progress = time.monotonic()
        else:
            time.sleep(0.01)
        if all(n >= want for n in sent):
            break
    return socks, sent


def test_half_sent_frames_stay_within_queued_max_request_bytes(broker_factory, tmp_path,
                                                               topic_name):
    queued = 256 << 20
    frame = 100 << 20  # socket.request.max.bytes, Kafka's default
    b = start(broker_factory, tmp_path, {"queued.max.request.bytes": queued})
    create_topic(b.bootstrap, topic_name)
    round_trip(b, topic_name, "warm-up")
    pid = b.proc.pid
    before = rss_bytes(pid)
    socks, sent = send_half_frames(b, 40, frame)
    try:
        time.sleep(1.0)
        round_trip(b, topic_name, "during")  # small requests still fit beside the large ones
        during = rss_bytes(pid)
        m = metrics(f"{b.host}:{b.admin_port}")
        held = {k: v for k, v in m.items()
                if k.startswith("rill_shard_budget_held_bytes{")
                and 'budget="queued.max.request.bytes"' in k}
        print(f"half-sent frames: 40 x {frame >> 20} MiB announced, {sum(sent) >> 20} MiB sent "
              f"(most per connection {max(sent) >> 20} MiB), RSS {before >> 20} -> "
              f"{during >> 20} MiB, queued.max.request.bytes {queued >> 20} MiB, held {held}")
        assert during - before <= queued + SLACK_BYTES, \
            f"RSS grew {(during - before) >> 20} MiB past queued.max.request.bytes"
        assert sum(held.values()) <= queued
        assert hits(b, "queued.max.request.bytes") >= 30, "the connections left waiting"
    finally:
        for s in socks:
            s.close()
    round_trip(b, topic_name, "after")


def fetch_all(b, topic: str, partitions: int, partition_max_bytes: int):
    """One Fetch v4 of every partition of `topic` from offset 0."""
    body = kw.fetch_v4_body({(topic, p): 0 for p in range(partitions)},
                            max_bytes=(1 << 31) - 1, partition_max_bytes=partition_max_bytes)
    with kw.Conn(b.host, b.port, timeout_s=60) as c:
        c.send(kw.request(kw.API_FETCH, 4, 7, body))
        # The response may be fetch.max.bytes and more: read it without Conn's 64 MiB guard.
        (size,) = struct.unpack(">i", c.recv_exact(4))
        payload = c.recv_exact(size)
    return size, kw.parse_fetch_v4(payload[4:])


def test_a_wide_fetch_stays_within_the_fetch_budget(broker_factory, tmp_path, topic_name):
    partitions, per_partition = 1000, 48 << 10
    fetch_max, shard_budget = 4 << 20, 8 << 20
    b = start(broker_factory, tmp_path, {"fetch.max.bytes": fetch_max,
                                         "rill.shard.fetch.bytes.max": shard_budget,
                                         "rill.read.cache.bytes": 16 << 20})
    create_topic(b.bootstrap, topic_name, partitions=partitions)
    p = producer(b.bootstrap, acks="all", **{"linger.ms": 50, "batch.size": 64 << 10})
    value = b"v" * 1000
    for part in range(partitions):
        for _ in range(per_partition // len(value)):
            p.produce(topic_name, value, partition=part)
        p.poll(0)
    assert p.flush(120) == 0, "produce did not finish"
    # Cold: every read comes from disk, so what a Fetch reads is memory it allocates.
    b.restart()
    pid = b.proc.pid
    before = rss_bytes(pid)
    # 1,000 partitions x 2 GiB each, no client limit: the broker's bounds apply.
    size, parts = fetch_all(b, topic_name, partitions, (1 << 31) - 1)
    during = rss_bytes(pid)
    records = sum(len(r) for _, _, r in parts.values())
    with_data = sum(1 for _, _, r in parts.values() if r)
    m = wait_for_metric(f"{b.host}:{b.admin_port}",
                        'rill_bound_hits_total{bound="fetch.max.bytes"}', 1)
    held_max = max(v for k, v in m.items() if k.startswith("rill_shard_budget_held_bytes_max{")
                   and 'budget="rill.shard.fetch.bytes.max"' in k)
    print(f"wide fetch: {partitions} partitions of ~{per_partition >> 10} KiB, response "
          f"{size >> 10} KiB with {records >> 10} KiB of records from {with_data} partitions; "
          f"fetch budget held at most {int(held_max) >> 10} KiB; RSS {before >> 20} -> "
          f"{during >> 20} MiB")
    assert len(parts) == partitions
    assert all(err == kw.ERR_NONE and hw > 0 for err, hw, _ in parts.values()), \
        "every partition answered with its positions"
    assert 0 < records <= fetch_max, f"{records} record bytes past fetch.max.bytes"
    # What one Fetch holds stays within its limit, plus one first batch past a claim.
    assert held_max <= fetch_max + (64 << 10), f"held {held_max} bytes"
    assert during - before <= fetch_max + 2 * (16 << 20) + SLACK_BYTES, \
        f"RSS grew {(during - before) >> 20} MiB"
    round_trip(b, topic_name, "after")


def test_bounds_are_described_as_kafka_describes_them(broker_factory, tmp_path):
    b = start(broker_factory, tmp_path, {"max.connections": 1234,
                                         "queued.max.request.bytes": 300 << 20})
    a = admin(b.bootstrap)  # kept: the futures need their client alive
    res = a.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0")])
    configs = list(res.values())[0].result(timeout=CLIENT_TIMEOUT_S)
    want = {
        "max.connections": ("1234", False),
        "queued.max.request.bytes": (str(300 << 20), False),
        "max.connections.per.ip": (str((1 << 31) - 1), True),
        "max.connections.per.ip.overrides": ("", True),
        "connections.max.idle.ms": ("600000", True),
        "socket.request.max.bytes": ("104857600", True),
        "fetch.max.bytes": ("57671680", True),
        "rill.shard.fetch.bytes.max": (str(256 << 20), True),
    }
    for name, (value, default) in want.items():
        entry = configs[name]
        source = "DEFAULT_CONFIG" if default else "STATIC_BROKER_CONFIG"
        assert (entry.value or "") == value, (name, entry.value)
        assert ConfigSource(entry.source).name == source, (name, entry.source)
        assert entry.is_read_only, f"{name} is not read-only"
    # max.connections by default: what the broker's RLIMIT_NOFILE leaves for connections.
    b2 = broker_factory()
    a2 = admin(b2.bootstrap)
    res = a2.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0")])
    entry = list(res.values())[0].result(timeout=CLIENT_TIMEOUT_S)["max.connections"]
    assert int(entry.value) > 0 and ConfigSource(entry.source).name == "DEFAULT_CONFIG"


def join(b, group: str, topic: str, others: list, timeout_s: float = 30.0):
    """A consumer of `group` subscribed to `topic`: ("assigned", consumer) once it has its
    partitions, or (KafkaError code, consumer) on the first error the group answers. The
    `others` are polled meanwhile, so that they rejoin the rebalances it causes."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                  "session.timeout.ms": 6000, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 2000})
    c.subscribe([topic])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for other in others:
            other.poll(0.05)
        msg = c.poll(0.2)
        if msg is not None and msg.error() and msg.error().code() != KafkaError._PARTITION_EOF:
            return msg.error().code(), c
        if c.assignment():
            return "assigned", c
    pytest.fail(f"a consumer of {group} neither joined nor got an error in {timeout_s}s")


def test_group_max_size_and_groups_per_shard_refuse_with_group_max_size_reached(
        broker_factory, tmp_path, topic_name):
    b = start(broker_factory, tmp_path, {"group.max.size": 2, "rill.shard.groups.max": 2},
              shards=1)
    create_topic(b.bootstrap, topic_name, partitions=2)
    consumers = []
    try:
        for _ in range(2):
            outcome, c = join(b, "full", topic_name, consumers)
            consumers.append(c)
            assert outcome == "assigned"
        outcome, c = join(b, "full", topic_name, consumers)
        consumers.append(c)
        assert outcome == KafkaError.GROUP_MAX_SIZE_REACHED, outcome
        # One more group fits the shard; a third does not.
        outcome, c = join(b, "second", topic_name, consumers)
        consumers.append(c)
        assert outcome == "assigned"
        outcome, c = join(b, "third", topic_name, consumers)
        consumers.append(c)
        assert outcome == KafkaError.GROUP_MAX_SIZE_REACHED, outcome
        admin_addr = f"{b.host}:{b.admin_port}"
        wait_for_metric(admin_addr, 'rill_bound_hits_total{bound="group.max.size"}', 1)
        wait_for_metric(admin_addr, 'rill_bound_hits_total{bound="rill.shard.groups.max"}', 1)
    finally:
        for c in consumers:
            c.close()


def test_idle_producers_expire_and_a_partition_keeps_at_most_its_producers(
        broker_factory, tmp_path, topic_name):
    b = start(broker_factory, tmp_path, {"producer.id.expiration.ms": 3000,
                                         "log.retention.check.interval.ms": 500,
                                         "rill.partition.producers.max": 2})
    admin_addr = f"{b.host}:{b.admin_port}"
    create_topic(b.bootstrap, topic_name)
    # Four idempotent producers write the partition: past two, the oldest are evicted.
    for i in range(4):
        p = producer(b.bootstrap, acks="all", **{"enable.idempotence": True})
        p.produce(topic_name, f"p{i}".encode(), partition=0)
        assert p.flush(30) == 0
    wait_for_metric(admin_addr, 'rill_bound_hits_total{bound="rill.partition.producers.max"}', 1)
    # Left idle past producer.id.expiration.ms, the rest expire at a retention check.
    wait_for_metric(admin_addr, 'rill_bound_hits_total{bound="producer.id.expiration.ms"}', 1,
                    timeout_s=60)
    round_trip(b, topic_name, "after")


def test_transactional_ids_past_the_shards_maximum(broker_factory, tmp_path, topic_name):
    from confluent_kafka import KafkaException, Producer
    b = start(broker_factory, tmp_path, {"rill.shard.transactional.ids.max": 1}, shards=1)
    create_topic(b.bootstrap, topic_name)

    def txn_producer(tid: str) -> Producer:
        return Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid})

    first = txn_producer("first")
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic_name, b"open", partition=0)
    first.flush(30)  # the transaction is open on the partition
    second = txn_producer("second")
    # librdkafka retries the refusal until its timeout, then raises it.
    with pytest.raises(KafkaException) as refused:
        second.init_transactions(5)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION, refused.value
    first.commit_transaction(30)
    # "first" is idle now: a new id takes its place.
    third = txn_producer("third")
    third.init_transactions(30)
    wait_for_metric(f"{b.host}:{b.admin_port}",
                    'rill_bound_hits_total{bound="rill.shard.transactional.ids.max"}', 2)
