"""Dynamic configs: (Incremental)AlterConfigs and DescribeConfigs of topics and the broker, by
confluent-kafka, kafka-python and kafkajs; changes persist and apply to open partitions at once;
the produce-time rules topic configs set (compression.type, LogAppendTime, KIP-937 timestamp
bounds, KIP-467 record errors, min.insync.replicas).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, TIMESTAMP_LOG_APPEND_TIME
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource as KpConfigResource, ConfigResourceType

import kafka_wire
from clients import CLIENT_TIMEOUT_S, admin, consume_partition, create_topic, kafkajs, producer, \
    produce_all


def _describe(bootstrap: str, topic: str) -> dict:
    a = admin(bootstrap)
    res = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    return list(res.values())[0].result(timeout=CLIENT_TIMEOUT_S)


def _incremental(bootstrap: str, kind, name: str, entries: list) -> None:
    a = admin(bootstrap)
    resource = ConfigResource(kind, name, incremental_configs=entries)
    futures = a.incremental_alter_configs([resource])
    list(futures.values())[0].result(timeout=CLIENT_TIMEOUT_S)


def _kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)


def test_confluent_incremental_alter_and_describe_with_types_sources_and_synonyms(broker,
                                                                                 topic_name):
    create_topic(broker.bootstrap, topic_name, config={"retention.ms": "3600000"})
    _incremental(broker.bootstrap, ConfigResource.Type.TOPIC, topic_name, [
        ConfigEntry("segment.ms", "1000000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    a = admin(broker.bootstrap)
    res = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic_name)],
                             request_timeout=CLIENT_TIMEOUT_S)
    configs = list(res.values())[0].result(timeout=CLIENT_TIMEOUT_S)
    assert configs["segment.ms"].value == "1000000"
    assert configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete,compact"
    assert [s.name for s in configs["segment.ms"].synonyms.values()][:2] == ["segment.ms",
                                                                             "log.roll.ms"]
    with pytest.raises(KafkaException) as refused:
        _incremental(broker.bootstrap, ConfigResource.Type.TOPIC, topic_name, [
            ConfigEntry("segment.bytes", "10", incremental_operation=AlterConfigOpType.SET)])
    err = refused.value.args[0]
    assert err.name() == "INVALID_CONFIG" and "segment.bytes" in err.str(), err


def test_kafka_python_alter_both_ways_and_describe(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    a = _kp_admin(broker.bootstrap)
    try:
        resource = KpConfigResource(ConfigResourceType.TOPIC, topic_name,
                                    configs={"retention.ms": "120000", "segment.ms": "60000"})
        a.alter_configs([resource], incremental=False)
        described = a.describe_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, topic_name)], config_filter="all")
        configs = described["topic"][topic_name]
        assert configs["retention.ms"]["value"] == "120000", configs["retention.ms"]
        a.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic_name,
                                          configs={"retention.ms": "240000"})], incremental=True)
        configs = a.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic_name)],
                                     config_filter="all")["topic"][topic_name]
        assert configs["retention.ms"]["value"] == "240000"
        assert configs["segment.ms"]["value"] == "60000", "incremental kept the other"
        assert a.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "0")],
                                  config_filter="all")["broker"]["0"]["advertised.listeners"]
    finally:
        a.close()


def test_kafkajs_alter_and_describe(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    kafkajs(broker.bootstrap, "alter-configs", {"resources": [
        {"type": 2, "name": topic_name, "configEntries": [{"name": "retention.ms",
                                                           "value": "86400000"}]}]})
    described = kafkajs(broker.bootstrap, "describe-configs", {
        "resources": [{"type": 2, "name": topic_name, "configNames": ["retention.ms"]},
                      {"type": 4, "name": "0", "configNames": ["advertised.listeners"]}],
        "includeSynonyms": True})
    topic, node = described["resources"]
    assert topic["configEntries"][0]["configValue"] == "86400000"
    assert topic["configEntries"][0]["configSource"] == 1
    assert node["configEntries"][0]["configValue"] == f"PLAINTEXT://{broker.bootstrap}"
    assert _describe(broker.bootstrap, topic_name)["retention.ms"].value == "86400000"


TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "zstd",
                 "retention.ms": "3600000", "message.timestamp.type": "LogAppendTime"}


def _assert_created_with(bootstrap: str, topic: str) -> None:
    configs = _describe(bootstrap, topic)
    for name, value in TOPIC_CONFIGS.items():
        assert configs[name].value == value, (name, configs[name].value)
        assert configs[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, name


def test_kafka_python_creates_topics_with_configs_and_gets_the_reason_for_a_bad_one(broker,
                                                                                    topic_name):
    from kafka.admin import NewTopic
    from kafka.errors import InvalidConfigurationError
    a = _kp_admin(broker.bootstrap)
    try:
        a.create_topics([NewTopic(topic_name, 2, 1, topic_configs=TOPIC_CONFIGS)])
        _assert_created_with(broker.bootstrap, topic_name)
        with pytest.raises(InvalidConfigurationError, match="segment.bytes"):
            a.create_topics([NewTopic(f"{topic_name}-bad", 1, 1,
                                      topic_configs={"segment.bytes": "10"})])
        with pytest.raises(InvalidConfigurationError, match="no.such.config"):
            a.create_topics([NewTopic(f"{topic_name}-bad", 1, 1,
                                      topic_configs={"no.such.config": "1"})])
    finally:
        a.close()
    assert f"{topic_name}-bad" not in admin(broker.bootstrap).list_topics(timeout=30).topics


def test_kafkajs_creates_topics_with_configs_and_gets_the_reason_for_a_bad_one(broker,
                                                                              topic_name):
    entries = [{"name": k, "value": v} for k, v in TOPIC_CONFIGS.items()]
    assert kafkajs(broker.bootstrap, "create-topics", {"topics": [
        {"topic": topic_name, "numPartitions": 2, "configEntries": entries}]}) is True
    _assert_created_with(broker.bootstrap, topic_name)
    described = kafkajs(broker.bootstrap, "describe-configs", {"resources": [
        {"type": 2, "name": topic_name, "configNames": ["cleanup.policy"]}]})
    assert described["resources"][0]["configEntries"][0]["configValue"] == "compact"
    # kafkajs drops CreateTopics' error message: only the code is there to check.
    with pytest.raises(AssertionError, match="inner error INVALID_CONFIG"):
        kafkajs(broker.bootstrap, "create-topics", {"topics": [
            {"topic": f"{topic_name}-bad", "configEntries": [
                {"name": "segment.bytes", "value": "10"}]}]})


def test_changes_apply_live_persist_and_broker_defaults_layer(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, config={"max.message.bytes": "100000"})
    big = b"x" * 300_000
    p = producer(b.bootstrap, acks="all", **{"message.max.bytes": 2_000_000,
                                            "compression.codec": "none", "retries": 0,
                                            "linger.ms": 0, "batch.size": 1500})
    produce_all(p, topic_name, [(None, b"opens the partition")])
    with pytest.raises(AssertionError, match="MSG_SIZE_TOO_LARGE|too large"):
        produce_all(p, topic_name, [(None, big)])
    _incremental(b.bootstrap, ConfigResource.Type.TOPIC, topic_name, [
        ConfigEntry("max.message.bytes", "1000000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.bytes", "65536", incremental_operation=AlterConfigOpType.SET)])
    produce_all(p, topic_name, [(None, big)])                     # the open partition took it
    produce_all(p, topic_name, [(None, b"y" * 1000) for _ in range(200)])
    segments = list((b.data_dir / f"{topic_name}-0").glob("*.log"))
    assert len(segments) > 2, "the smaller segment.bytes rolled the open partition"
    # A cluster-wide default (broker resource "", which all three client libraries refuse to
    # name, so raw wire) applies to topics without their own value.
    host, port = b.bootstrap.rsplit(":", 1)
    conn = kafka_wire.Conn(host, int(port))
    conn.send(kafka_wire.request(kafka_wire.API_INCREMENTAL_ALTER_CONFIGS, 0, 7,
                                 kafka_wire.incremental_alter_configs_v0_body(
                                     4, "", {"log.retention.ms": "7200000"})))
    _, body = conn.recv_response()
    assert kafka_wire.parse_incremental_alter_configs_v0(body) == [(0, None, 4, "")]
    configs = _describe(b.bootstrap, topic_name)
    assert configs["retention.ms"].value == "7200000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    with pytest.raises(KafkaException) as refused:
        _incremental(b.bootstrap, ConfigResource.Type.BROKER, "0", [
            ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    assert refused.value.args[0].name() == "INVALID_REQUEST"
    b.restart(graceful=False)
    configs = _describe(b.bootstrap, topic_name)
    assert configs["max.message.bytes"].value == "1000000", "persisted"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def test_compression_type_recompresses(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"compression.type": "zstd"})
    values = [b"value-%04d " % i * 20 for i in range(300)]
    p = producer(broker.bootstrap, acks="all", **{"compression.codec": "gzip"})
    produce_all(p, topic_name, [(None, v) for v in values])
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, len(values))
    assert [m.value() for m in got] == values
    data = (broker.data_dir / f"{topic_name}-0" / "00000000000000000000.log").read_bytes()
    attributes = int.from_bytes(data[21:23], "big")
    assert attributes & 7 == 4, f"stored with zstd, attributes {attributes:#x}"


def test_log_append_time_stamps_records(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce_all(producer(broker.bootstrap, acks="all"), topic_name,
                [(None, b"old", 1_000_000), (None, b"older", 2_000)])
    got = consume_partition(broker.bootstrap, topic_name, 0, 0, 2)
    for m in got:
        kind, ts = m.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        assert before - 5000 <= ts <= int(time.time() * 1000) + 5000


def test_timestamp_bounds_and_keyless_records_are_refused_with_record_errors(broker, topic_name):
    create_topic(broker.bootstrap, topic_name,
                 config={"message.timestamp.before.max.ms": "60000", "cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    p = producer(broker.bootstrap, acks="all", retries=0)
    with pytest.raises(AssertionError, match="INVALID_TIMESTAMP|Invalid timestamp|invalid timestamp"):
        produce_all(p, topic_name, [(b"k", b"v", now - 3_600_000)])
    with pytest.raises(AssertionError, match="INVALID_RECORD|invalid record|Broker: Invalid record"):
        produce_all(p, topic_name, [(None, b"no key", now)])
    produce_all(p, topic_name, [(b"k", b"fine", now)])
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0, acks="all",
                       request_timeout_ms=30000)
    try:
        future = kp.send(topic_name, value=b"no key", partition=0)
        with pytest.raises(Exception) as refused:
            future.get(timeout=CLIENT_TIMEOUT_S)
        assert "InvalidRecord" in type(refused.value).__name__ or "INVALID_RECORD" in str(
            refused.value).upper().replace(" ", "_"), repr(refused.value)
        assert "without key" in str(refused.value), "KIP-467 record error message"
    finally:
        kp.close()


def test_min_insync_replicas_above_one_refuses_acks_all(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"min.insync.replicas": "2"})
    with pytest.raises(AssertionError, match="NOT_ENOUGH_REPLICAS|not enough|Not enough"):
        produce_all(producer(broker.bootstrap, acks="all", retries=0,
                             **{"message.timeout.ms": 5000}), topic_name, [(None, b"v")])
    produce_all(producer(broker.bootstrap, acks=1), topic_name, [(None, b"v")])
