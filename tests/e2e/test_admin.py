"""Topic administration with real clients: create, list, describe, grow and delete topics."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from clients import CLIENT_TIMEOUT_S, admin, create_topic, kafkajs, kcat, producer, produce_all, \
    wait_for_topic


def _topic_gone(bootstrap: str, name: str, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if name not in admin(bootstrap).list_topics(timeout=10).topics:
            return True
        time.sleep(0.1)
    return False


def _error_code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), repr(exc)
    return exc.args[0].code()


def test_confluent_create_describe_delete(broker, topic_name):
    a = admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, partitions=3, config={"retention.ms": "3600000"})
    md = a.list_topics(timeout=10).topics[topic_name]
    assert sorted(md.partitions) == [0, 1, 2]

    res = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic_name)])
    configs = list(res.values())[0].result(timeout=CLIENT_TIMEOUT_S)
    assert configs["retention.ms"].value == "3600000"

    again = a.create_topics([NewTopic(topic_name, 3, 1)], operation_timeout=10)[topic_name]
    with pytest.raises(KafkaException) as exc:
        again.result(timeout=CLIENT_TIMEOUT_S)
    assert _error_code(exc.value) == KafkaError.TOPIC_ALREADY_EXISTS

    a.delete_topics([topic_name], operation_timeout=10)[topic_name].result(timeout=CLIENT_TIMEOUT_S)
    assert _topic_gone(broker.bootstrap, topic_name)

    gone = a.delete_topics([topic_name], operation_timeout=10)[topic_name]
    with pytest.raises(KafkaException) as exc:
        gone.result(timeout=CLIENT_TIMEOUT_S)
    assert _error_code(exc.value) == KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.mark.parametrize("bad_name", ["has space", "a/b", "..", "x" * 250])
def test_confluent_create_invalid_name_rejected(broker, bad_name):
    a = admin(broker.bootstrap)
    fut = a.create_topics([NewTopic(bad_name, 1, 1)], operation_timeout=10)[bad_name]
    with pytest.raises(KafkaException) as exc:
        fut.result(timeout=CLIENT_TIMEOUT_S)
    assert _error_code(exc.value) == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION (17)


def test_confluent_create_partitions_grows_topic(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    a = admin(broker.bootstrap)
    fut = a.create_partitions([NewPartitions(topic_name, 4)])[topic_name]
    fut.result(timeout=CLIENT_TIMEOUT_S)
    wait_for_topic(broker.bootstrap, topic_name, 4)
    p = producer(broker.bootstrap, acks="all")
    reports = produce_all(p, topic_name, [(None, b"on-new-partition")], partition=3)
    assert reports[0][2] == 0


def test_confluent_describe_cluster(broker):
    a = admin(broker.bootstrap)
    res = a.describe_cluster(request_timeout=CLIENT_TIMEOUT_S)
    desc = res.result(timeout=CLIENT_TIMEOUT_S)
    assert len(desc.nodes) == 1
    assert desc.nodes[0].host == broker.host and desc.nodes[0].port == broker.port


def test_kafka_python_admin_create_list_delete(broker, topic_name):
    from kafka.admin import KafkaAdminClient
    from kafka.errors import TopicAlreadyExistsError

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        a.create_topics({topic_name: {"num_partitions": 2, "replication_factor": 1}})
        wait_for_topic(broker.bootstrap, topic_name, 2)
        assert topic_name in a.list_topics()
        described = a.describe_topics([topic_name])
        assert len(described[0]["partitions"]) == 2
        with pytest.raises(TopicAlreadyExistsError):
            a.create_topics({topic_name: {"num_partitions": 2, "replication_factor": 1}})
        a.delete_topics([topic_name])
        assert _topic_gone(broker.bootstrap, topic_name)
    finally:
        a.close()


def test_kafkajs_admin_create_list_delete(broker, topic_name):
    created = kafkajs(broker.bootstrap, "create-topics",
                      {"topics": [{"topic": topic_name, "numPartitions": 3}]})
    assert created is True
    assert topic_name in kafkajs(broker.bootstrap, "list-topics", {})
    md = kafkajs(broker.bootstrap, "topic-metadata", {"topics": [topic_name]})
    assert len(md["topics"][0]["partitions"]) == 3
    assert kafkajs(broker.bootstrap, "delete-topics", {"topics": [topic_name]}) is True
    assert _topic_gone(broker.bootstrap, topic_name)


def test_kcat_metadata_lists_broker_and_topic(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    out = json.loads(kcat(broker.bootstrap, "-L", "-J").stdout)
    assert [(b["name"]) for b in out["brokers"]] == [broker.bootstrap] or \
        out["brokers"][0]["name"].endswith(f":{broker.port}")
    topics = {t["topic"]: t for t in out["topics"]}
    assert topic_name in topics
    assert sorted(p["partition"] for p in topics[topic_name]["partitions"]) == [0, 1]


def test_auto_create_on_produce(broker, topic_name):
    """Auto-create is on by default: producing to a new topic creates it with 1 partition."""
    p = producer(broker.bootstrap, acks="all")
    reports = produce_all(p, topic_name, [(None, b"first")])
    assert reports[0][2] == 0
    wait_for_topic(broker.bootstrap, topic_name, 1)


def test_auto_create_off_unknown_topic(broker_factory, topic_name):
    """With --auto-create-topics false, Metadata for a missing topic says UNKNOWN_TOPIC_OR_PARTITION."""
    b = broker_factory(auto_create_topics=False)
    md = admin(b.bootstrap).list_topics(topic=topic_name, timeout=10)
    t = md.topics[topic_name]
    assert t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    create_topic(b.bootstrap, topic_name, partitions=1)   # explicit creation still works
    reports = produce_all(producer(b.bootstrap, acks="all"), topic_name, [(None, b"x")])
    assert reports[0][2] == 0


def test_default_partitions_flag(broker_factory, topic_name):
    b = broker_factory(partitions_default=3)
    produce_all(producer(b.bootstrap, acks="all"), topic_name, [(None, b"x")])
    wait_for_topic(b.bootstrap, topic_name, 3)
