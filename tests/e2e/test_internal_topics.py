"""The internal topics as Kafka clients see them (issue 14/18 leftovers).

- In a cluster, `__consumer_offsets` (and `__transaction_state`) are replicated partitions the
  coordinators write: a consumer can assign them, ask their watermarks and fetch the records,
  as in Kafka (`kcat -C -t __consumer_offsets`). Rill's record formats are its own (see the
  README), so only their keys' readable parts are checked here.
- Clients never create them: Kafka creates its internal topics itself, with their own settings.
  In a cluster, CreateTopics of one that exists gets TOPIC_ALREADY_EXISTS; of one that does not,
  INVALID_REQUEST ("Creation of internal topic ... is prohibited").
- A single node keeps the coordinators' state in private logs and serves them as the same
  internal topics, read-only (`server/src/internal_topics/single_node.rs`): they exist from its start.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as kw
from cluster import node_metadata

from test_replication import bootstrap, cluster, create, unique, wait_isr  # noqa: F401

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
ERR_TOPIC_ALREADY_EXISTS = 36


def create_error(bootstrap_servers: str, name: str) -> tuple[int, str]:
    """(error code, message) of a CreateTopics of `name` (1 partition, default factor)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    future = admin.create_topics([NewTopic(name, 1)], request_timeout=15)[name]
    try:
        future.result(20)
    except KafkaException as e:
        return e.args[0].code(), e.args[0].str()
    return 0, ""


def read_partitions(bootstrap_servers: str, topic: str, partitions: list[int],
                    timeout_s: float = 30.0) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of `partitions` of `topic` from the start to each one's end, as
    (partition, key, value), read by a group-less consumer (assign, no commits)."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": unique("reader"),
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        got, at_end = [], set()
        deadline = time.monotonic() + timeout_s
        while at_end != set(partitions):
            assert time.monotonic() < deadline, f"read {len(got)} records, at end: {at_end}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            got.append((msg.partition(), msg.key(), msg.value()))
        return got
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_a_consumer_fetches_the_offsets_a_group_committed_from_consumer_offsets(cluster):
    topic, group = unique("committed"), unique("group")
    create(cluster, topic, 1)
    wait_isr(cluster, topic, 3)
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    for i in range(5):
        producer.produce(topic, f"{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    committer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": group,
                          "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    finally:
        committer.close()
    reader = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": unique("meta")})
    try:
        listed = reader.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC]
        assert listed.error is None, listed.error
        partitions = sorted(listed.partitions)
        ends = {p: reader.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, p), timeout=10)
                for p in partitions}
    finally:
        reader.close()
    assert any(high > low for low, high in ends.values()), f"nothing committed: {ends}"
    records = read_partitions(bootstrap(cluster), OFFSETS_TOPIC, partitions)
    assert len(records) == sum(high - low for low, high in ends.values())
    ours = [(p, k, v) for p, k, v in records
            if k and group.encode() in k and topic.encode() in k]
    assert ours, f"no commit of {group} among {len(records)} records"
    assert all(v for _, _, v in ours), "the commit is a tombstone"
    # It exists: CreateTopics of it is TOPIC_ALREADY_EXISTS, as in Kafka.
    assert create_error(bootstrap(cluster), OFFSETS_TOPIC)[0] == ERR_TOPIC_ALREADY_EXISTS


@pytest.mark.timeout(120)
def test_a_single_node_serves_its_internal_topics_read_only(broker_factory):
    """A single node keeps the coordinators' state in private logs; it serves them as Kafka
    serves its internal topics: listed with is_internal, read by any consumer, written by no
    client (INVALID_TOPIC_EXCEPTION, Kafka's "Cannot append to internal topic"), never created
    or recreated by one (TOPIC_ALREADY_EXISTS). Before, a single node had none to read."""
    node = broker_factory()  # its own: the shared broker's logs hold every other test's commits
    topic, group, txn_id = unique("committed"), unique("group"), unique("txn")
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
    producer.produce(topic, b"v", partition=0)
    assert producer.flush(30) == 0
    committer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                          "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        committer.close()
    transactional = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": txn_id})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce(topic, b"t", partition=0)
    transactional.commit_transaction(30)

    metadata = node_metadata(node)
    for name in (OFFSETS_TOPIC, TXN_TOPIC):
        error, partitions = metadata["topics"][name]
        assert (error, sorted(partitions)) == (0, list(range(8))), name
        assert name in metadata["internal"] and topic not in metadata["internal"]
        assert create_error(node.bootstrap, name)[0] == ERR_TOPIC_ALREADY_EXISTS, name
        with kw.Conn(node.host, node.port) as c:
            c.send(kw.request(kw.API_PRODUCE, 3, 9, kw.produce_v3_body(
                {name: {0: kw.record_batch([b"forged"])}})))
            assert kw.parse_produce_v3(c.recv_response()[1]) == \
                {(name, 0): kw.ERR_INVALID_TOPIC_EXCEPTION}, name

    offsets = read_partitions(node.bootstrap, OFFSETS_TOPIC, list(range(8)))
    ours = [(p, k, v) for p, k, v in offsets if k and group.encode() in k and topic.encode() in k]
    assert ours and all(v for _, _, v in ours), f"no commit of {group} among {len(offsets)}"
    states = read_partitions(node.bootstrap, TXN_TOPIC, list(range(8)))
    assert any(k and txn_id.encode() in k for _, k, _ in states), \
        f"no record of {txn_id} among {len(states)}"
    assert not any(v == b"forged" for _, _, v in offsets + states)
