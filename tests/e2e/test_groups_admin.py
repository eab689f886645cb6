"""Group admin calls by real clients: ListGroups with its state filter (KIP-518) and type filter
(KIP-848: every group here is "classic") by confluent-kafka and kafka-python, and OffsetDelete
(DeleteConsumerGroupOffsets) by kafka-python and librdkafka, refused for a topic a live member
subscribes to.
"""

from __future__ import annotations

import time

import pytest

from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, TopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import GroupSubscribedToTopicError, NoError

from clients import CLIENT_TIMEOUT_S, admin, create_topic, producer, produce_all
from librdkafka_admin import delete_consumer_group_offsets

GROUP_SUBSCRIBED_TO_TOPIC = 86


def _empty_group_with_offsets(bootstrap: str, group: str, topic: str) -> None:
    """A group with committed offsets and no members (state Empty)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    finally:
        c.close()


def _stable_member(bootstrap: str, group: str, topic: str) -> Consumer:
    """A live member subscribed to `topic`, polled until it has its assignment (Stable)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "session.timeout.ms": 10000, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.assignment(), "the member never got its assignment"
    return c


def _empty_and_stable_groups(bootstrap: str, topic: str) -> tuple[str, str, Consumer]:
    """`topic` with 5 records, an Empty group with offsets, a Stable group and its member."""
    create_topic(bootstrap, topic)
    produce_all(producer(bootstrap), topic, [(None, b"v")] * 5)
    empty, stable = f"{topic}-empty", f"{topic}-stable"
    _empty_group_with_offsets(bootstrap, empty, topic)
    return empty, stable, _stable_member(bootstrap, stable, topic)


def _confluent_listed(bootstrap: str, **filters) -> set[str]:
    a = admin(bootstrap)  # kept alive until the answer is in
    listed = a.list_consumer_groups(request_timeout=CLIENT_TIMEOUT_S, **filters).result(
        timeout=CLIENT_TIMEOUT_S)
    assert not listed.errors, listed.errors
    return {g.group_id for g in listed.valid}


def test_list_groups_state_and_type_filters(broker, topic_name):
    empty, stable, member = _empty_and_stable_groups(broker.bootstrap, topic_name)
    try:
        ours = {empty, stable}
        assert ours <= _confluent_listed(broker.bootstrap)
        assert _confluent_listed(broker.bootstrap, states={ConsumerGroupState.EMPTY}) & ours \
            == {empty}
        assert _confluent_listed(broker.bootstrap, states={ConsumerGroupState.STABLE}) & ours \
            == {stable}
        assert ours <= _confluent_listed(broker.bootstrap, types={ConsumerGroupType.CLASSIC})
        assert not _confluent_listed(broker.bootstrap, types={ConsumerGroupType.CONSUMER}) & ours

        a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
        try:
            listed = a.list_groups(states_filter=["Stable"])
            names = {g[0] if isinstance(g, tuple) else g["group_id"] for g in listed}
            assert stable in names and empty not in names, listed
        finally:
            a.close()
    finally:
        member.close()


def _committed(a: KafkaAdminClient, group: str) -> dict:
    return a.list_group_offsets({group: None})[group]


def test_kafka_python_deletes_group_offsets(broker, topic_name):
    empty, stable, member = _empty_and_stable_groups(broker.bootstrap, topic_name)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        tp = KpTopicPartition(topic_name, 0)
        assert _committed(a, empty)[tp].offset == 3
        assert a.delete_group_offsets(empty, [tp]) == {tp: NoError}
        assert tp not in _committed(a, empty)
        # A live member subscribed to the topic keeps the group's offsets for it.
        member.commit(offsets=[TopicPartition(topic_name, 0, 2)], asynchronous=False)
        assert a.delete_group_offsets(stable, [tp]) == {tp: GroupSubscribedToTopicError}
        assert _committed(a, stable)[tp].offset == 2
    finally:
        a.close()
        member.close()


def test_librdkafka_deletes_group_offsets(broker, topic_name):
    """The same through librdkafka's rd_kafka_DeleteConsumerGroupOffsets (confluent-kafka's
    Python AdminClient and kafkajs have no OffsetDelete): a second client family."""
    empty, stable, member = _empty_and_stable_groups(broker.bootstrap, topic_name)
    try:
        tp = (topic_name, 0)
        assert delete_consumer_group_offsets(broker.bootstrap, empty, [tp]) == (0, {tp: 0})
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": empty})
        try:
            [left] = c.committed([TopicPartition(topic_name, 0)], timeout=CLIENT_TIMEOUT_S)
            assert left.offset < 0, "the committed offset is gone"
        finally:
            c.close()
        member.commit(offsets=[TopicPartition(topic_name, 0, 2)], asynchronous=False)
        assert delete_consumer_group_offsets(broker.bootstrap, stable, [tp]) == \
            (0, {tp: GROUP_SUBSCRIBED_TO_TOPIC})
        # librdkafka reports a group-level error as the request's.
        with pytest.raises(RuntimeError, match="group id does not exist"):
            delete_consumer_group_offsets(broker.bootstrap, f"{topic_name}-none", [tp])
    finally:
        member.close()
