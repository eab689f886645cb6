"""Client quotas (issue 27 item 6; KIP-13, KIP-124, KIP-546; SECURITY.md, "Client quotas"):
real rill, real clients.

- AlterClientQuotas / DescribeClientQuotas through kafka-python's protocol classes (neither
  Python admin client wraps them): set, describe with filters, validate_only, a refused key,
  removal, and the quotas kept across a restart;
- Produce: a client id with `producer_byte_rate` producing as fast as it can is held to within
  10% of its quota over Kafka's quota window of 11 s from its first byte (Kafka lets a new
  client's first ten windows of quota through at once, then throttles it until the window is
  over), while a client without a quota, producing at the same time, goes far faster;
- Fetch: the same for `consumer_byte_rate`;
- Requests (KIP-124): a client id over its `request_percentage` gets `throttle_time_ms` in its
  Metadata responses and its connection is muted for that long; another client id is not;
- a 3-node cluster: quotas set through one node are described and enforced by every node, and
  kept by a restarted one.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid

import kafka_wire as kw

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

#: How long the rate is measured from a client's first byte: Kafka's quota window (its default
#: 11 samples of 1 s). The first ten windows of quota pass at once, the client is then held to
#: the quota over the whole window; the burst's sample expires past it.
MEASURE_S = 11.0


def admin(broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)


def send(client: KafkaAdminClient, request):
    return client._manager.run(client._manager.send, request)


def alter(client, entity: dict, ops: dict, validate_only: bool = False) -> tuple[int, str | None]:
    """Sets (value) or removes (None) each op's key on one entity; its error code and message."""
    request = AlterClientQuotasRequest(
        entries=[(list(entity.items()),
                  [(k, v if v is not None else 0.0, v is None) for k, v in ops.items()])],
        validate_only=validate_only)
    response = send(client, request)
    [entry] = response.entries
    return entry.error_code, entry.error_message


def describe(client, components: list[tuple], strict: bool = False) -> dict:
    """{frozenset of (type, name): {key: value}}."""
    response = send(client, DescribeClientQuotasRequest(components=components, strict=strict))
    assert response.error_code == 0, response
    return {frozenset((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in response.entries}


def test_quotas_are_altered_described_and_kept(broker_factory):
    broker = broker_factory()
    client = admin(broker)
    try:
        assert alter(client, {"user": "alice"}, {"producer_byte_rate": 1024.0}) == (0, None)
        assert alter(client, {"user": "alice", "client-id": None},
                     {"consumer_byte_rate": 2048.0}) == (0, None)
        assert alter(client, {"client-id": "c"}, {"request_percentage": 12.5}) == (0, None)
        assert alter(client, {"user": "v"}, {"producer_byte_rate": 1.0},
                     validate_only=True) == (0, None)
        code, message = alter(client, {"user": "alice"}, {"bogus": 1.0})
        assert (code, message) == (42, "Invalid configuration key bogus")
        everything = describe(client, [])
        assert everything == {
            frozenset({("user", "alice")}): {"producer_byte_rate": 1024.0},
            frozenset({("user", "alice"), ("client-id", None)}): {"consumer_byte_rate": 2048.0},
            frozenset({("client-id", "c")}): {"request_percentage": 12.5},
        }
        strict_alice = describe(client, [("user", 0, "alice")], strict=True)
        assert list(strict_alice) == [frozenset({("user", "alice")})]
        default_clients = describe(client, [("client-id", 1, None)])
        assert list(default_clients) == [frozenset({("user", "alice"), ("client-id", None)})]
        assert alter(client, {"client-id": "c"}, {"request_percentage": None}) == (0, None)
    finally:
        client.close()
    broker.restart()
    client = admin(broker)
    try:
        kept = describe(client, [])
        assert frozenset({("client-id", "c")}) not in kept
        assert kept[frozenset({("user", "alice")})] == {"producer_byte_rate": 1024.0}
    finally:
        client.close()


def produce_flat_out(bootstrap: str, topic: str, client_id: str, seconds: float,
                     acked: list, value: bytes) -> None:
    """Produces `value` as fast as the client goes for `seconds`; appends (time, bytes) of each
    acknowledged record to `acked`."""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1,
                         "linger.ms": 5, "batch.size": 65536,
                         "queue.buffering.max.messages": 200})

    def delivered(err, msg):
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce(topic, value, partition=0, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
            continue
        producer.poll(0)
    producer.purge()
    producer.flush(5)


def achieved(acked: list, start: float, seconds: float) -> float:
    """Bytes per second acknowledged within `seconds` of `start`."""
    return sum(n for t, n in acked if t - start <= seconds) / seconds


def test_a_producer_over_its_quota_is_held_to_it(broker_factory):
    broker = broker_factory()
    quota = 1 << 20
    client = admin(broker)
    try:
        assert alter(client, {"client-id": "throttled"},
                     {"producer_byte_rate": float(quota)}) == (0, None)
    finally:
        client.close()
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    value = b"x" * 10_000
    throttled, free = [], []
    runs = [threading.Thread(target=produce_flat_out,
                             args=(broker.bootstrap, f"{topic}-{name}", name, MEASURE_S + 1.0,
                                   acked, value))
            for name, acked in (("throttled", throttled), ("free", free))]
    start = time.monotonic()
    for run in runs:
        run.start()
    for run in runs:
        run.join(30)
    assert throttled and free
    rate = achieved(throttled, start, MEASURE_S)
    free_rate = achieved(free, start, MEASURE_S)
    print(f"throttled {rate:.0f} B/s ({rate / quota:.3f} of its quota), free {free_rate:.0f} B/s")
    assert abs(rate - quota) / quota < 0.10, (rate, quota)
    assert free_rate > 5 * quota, (free_rate, quota)


def consume_flat_out(bootstrap: str, topic: str, client_id: str, seconds: float,
                     got: list) -> None:
    """Reads `topic` from its start as fast as the client goes for `seconds`; appends (time,
    bytes) of each record to `got`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "group.id": f"g-{client_id}-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for msg in consumer.consume(1000, 0.2):
            if msg.error() is None:
                got.append((time.monotonic(), len(msg.value())))
    consumer.close()


def test_a_consumer_over_its_quota_is_held_to_it(broker_factory):
    """`consumer_byte_rate` on one client id: reading a 24 MiB backlog flat out it gets within
    10% of its quota over the quota window from its first byte (its Fetch `max_bytes` capped to
    the window's allowance, as Kafka caps it), while a client without a quota, reading the same
    backlog at the same time, gets all of it."""
    broker = broker_factory()
    quota = 1 << 20
    client = admin(broker)
    try:
        assert alter(client, {"client-id": "slow-reader"},
                     {"consumer_byte_rate": float(quota)}) == (0, None)
    finally:
        client.close()
    topic = f"quota-read-{uuid.uuid4().hex[:8]}"
    value, count = b"y" * 10_000, 2400
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 5})
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    slow, free = [], []
    runs = [threading.Thread(target=consume_flat_out,
                             args=(broker.bootstrap, topic, name, MEASURE_S + 1.0, got))
            for name, got in (("slow-reader", slow), ("free-reader", free))]
    for run in runs:
        run.start()
    for run in runs:
        run.join(30)
    assert slow and free
    first = slow[0][0]
    rate = sum(n for t, n in slow if t - first <= MEASURE_S) / MEASURE_S
    print(f"throttled reader {rate:.0f} B/s ({rate / quota:.3f} of its quota), "
          f"free reader {sum(n for _, n in free)} of {count * len(value)} bytes")
    assert abs(rate - quota) / quota < 0.10, (rate, quota)
    assert sum(n for _, n in free) == count * len(value)


def metadata_throttle_ms(conn: kw.Conn, client_id: str, correlation_id: int) -> int:
    """Metadata v3 of no topic on `conn` as `client_id`: its response's throttle_time_ms."""
    conn.send(kw.request(3, 3, correlation_id, struct.pack(">i", 0), client_id=client_id))
    got = conn.recv_response()
    assert got is not None and got[0] == correlation_id, got
    (throttle_ms,) = struct.unpack_from(">i", got[1])
    return throttle_ms


def test_a_client_over_its_request_percentage_is_throttled(broker_factory):
    broker = broker_factory()
    client = admin(broker)
    try:
        # 0.1% of one thread: ~10 ms of the broker's time over the 11 s window.
        assert alter(client, {"client-id": "busy"}, {"request_percentage": 0.1}) == (0, None)
        assert describe(client, [("client-id", 0, "busy")]) == {
            frozenset({("client-id", "busy")}): {"request_percentage": 0.1}}
    finally:
        client.close()
    busy = kw.Conn("127.0.0.1", broker.port)
    calm = kw.Conn("127.0.0.1", broker.port)
    throttle_ms, sent = 0, 0
    while throttle_ms == 0:
        sent += 1
        assert sent <= 100_000, "never throttled"
        throttle_ms = metadata_throttle_ms(busy, "busy", sent)
    print(f"throttled after {sent} Metadata requests: throttle_time_ms {throttle_ms}")
    assert throttle_ms > 0
    # Muted: the next request on that connection is read only once the throttle is over.
    started = time.monotonic()
    metadata_throttle_ms(busy, "busy", sent + 1)
    waited_ms = (time.monotonic() - started) * 1000
    assert waited_ms >= throttle_ms * 0.9, (waited_ms, throttle_ms)
    # Another client id, at the same time, is not throttled.
    assert [metadata_throttle_ms(calm, "calm", i) for i in range(1, 201)] == [0] * 200


def until(check, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def described_on(node, components: list[tuple]) -> dict:
    client = admin(node)
    try:
        return describe(client, components)
    finally:
        client.close()


def throttled_after(node, client_id: str) -> int:
    """Metadata requests `client_id` sends `node` back to back before one is throttled."""
    conn = kw.Conn("127.0.0.1", node.port)
    for sent in range(1, 100_001):
        if metadata_throttle_ms(conn, client_id, sent) > 0:
            return sent
    raise AssertionError(f"node {node.node_id} never throttled {client_id}")


def test_quotas_in_a_cluster_hold_on_every_node_and_after_a_restart(tmp_path):
    """A quota set through one node is in the metadata log: every node describes and enforces
    it, a restarted node too."""
    from cluster import Cluster, running
    from conftest import _BROKERS
    cluster = Cluster(tmp_path)
    with running(cluster, _BROKERS):
        client = admin(cluster.node(1))
        try:
            assert alter(client, {"client-id": "busy"}, {"request_percentage": 0.1}) == (0, None)
            assert alter(client, {"user": None}, {"producer_byte_rate": 2048.0}) == (0, None)
        finally:
            client.close()
        want = {frozenset({("client-id", "busy")}): {"request_percentage": 0.1},
                frozenset({("user", None)}): {"producer_byte_rate": 2048.0}}
        for node in cluster.nodes:
            assert until(lambda: described_on(node, []) == want), \
                (node.node_id, described_on(node, []))
        cluster.node(2).restart()
        cluster.wait_brokers(3)
        assert described_on(cluster.node(2), []) == want
        counts = {node.node_id: throttled_after(node, "busy") for node in cluster.nodes}
        print(f"Metadata requests before the first throttle, per node: {counts}")
