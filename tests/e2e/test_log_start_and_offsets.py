"""DeleteRecords (21) by confluent-kafka, kafka-python and kafkajs: the log start moves up and
stays there across a restart, ListOffsets earliest follows it, a consumer below it gets
OFFSET_OUT_OF_RANGE, and the segments wholly below it are deleted from disk. ListOffsets
max-timestamp (-3, KIP-734) by confluent-kafka and kafka-python.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec
from kafka import KafkaAdminClient
from kafka.protocol.consumer.offsets import OffsetSpec as KpOffsetSpec
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import OffsetOutOfRangeError, PolicyViolationError

from clients import CLIENT_TIMEOUT_S, admin, consume_partition, create_topic, kafkajs, producer, \
    produce_all, watermarks


def _fill(bootstrap: str, topic: str, count: int, size: int = 1000) -> None:
    p = producer(bootstrap, **{"linger.ms": 0, "batch.num.messages": 1})
    produce_all(p, topic, [(f"k{i}".encode(), f"{i:06d}".encode() + b"x" * size)
                           for i in range(count)])


def _segment_bases(b, topic: str) -> list[int]:
    return sorted(int(p.stem) for p in (b.data_dir / f"{topic}-0").glob("*.log"))


def _first_error_below_start(bootstrap: str, topic: str, offset: int):
    """Fetch from `offset` with auto.offset.reset=error: the consumer's first error."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rill-e2e-unused",
                  "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        for _ in range(40):
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is not None, f"read offset {msg.offset()} below the log start"
            return msg.error()
        raise AssertionError("no error for a fetch below the log start")
    finally:
        c.close()


def test_confluent_delete_records_moves_the_log_start_durably(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, config={"segment.bytes": "16384"})
    _fill(b.bootstrap, topic_name, 200)
    assert len(_segment_bases(b, topic_name)) > 5, "small segments roll"

    a = admin(b.bootstrap)
    futures = a.delete_records([TopicPartition(topic_name, 0, 150)],
                               request_timeout=CLIENT_TIMEOUT_S)
    deleted = list(futures.values())[0].result(timeout=CLIENT_TIMEOUT_S)
    assert deleted.low_watermark == 150
    assert watermarks(b.bootstrap, topic_name, 0) == (150, 200)

    # Segments wholly below the new start are gone; the one holding 150 stays.
    bases = _segment_bases(b, topic_name)
    assert bases[0] <= 150 and (len(bases) == 1 or bases[1] > 150), bases

    err = _first_error_below_start(b.bootstrap, topic_name, 120)
    assert err.code() == KafkaError._AUTO_OFFSET_RESET, err
    assert "out of range" in err.str().lower() or "OFFSET_OUT_OF_RANGE" in err.str(), err
    first = consume_partition(b.bootstrap, topic_name, 0, 150, 1)[0]
    assert first.offset() == 150 and first.value().startswith(b"000150")

    # Never backwards; past the high watermark is OFFSET_OUT_OF_RANGE.
    again = a.delete_records([TopicPartition(topic_name, 0, 10)])
    assert list(again.values())[0].result(timeout=CLIENT_TIMEOUT_S).low_watermark == 150
    with pytest.raises(KafkaException) as past:
        list(a.delete_records([TopicPartition(topic_name, 0, 201)]).values())[0].result(
            timeout=CLIENT_TIMEOUT_S)
    assert past.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE

    b.restart()
    assert watermarks(b.bootstrap, topic_name, 0) == (150, 200), "the log start survives restart"
    b.kill9()
    b.start()
    assert watermarks(b.bootstrap, topic_name, 0) == (150, 200), "and kill -9"
    assert consume_partition(b.bootstrap, topic_name, 0, 150, 50)[-1].offset() == 199


def test_kafka_python_delete_records_and_the_high_watermark(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    _fill(broker.bootstrap, topic_name, 30, size=10)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        tp = KpTopicPartition(topic_name, 0)
        result = a.delete_records({tp: 12})
        assert result[tp]["low_watermark"] == 12, result
        assert watermarks(broker.bootstrap, topic_name, 0) == (12, 30)
        result = a.delete_records({tp: -1})
        assert result[tp]["low_watermark"] == 30, "-1 means the high watermark"
        assert watermarks(broker.bootstrap, topic_name, 0) == (30, 30)
        with pytest.raises(OffsetOutOfRangeError):
            a.delete_records({tp: 31})
    finally:
        a.close()
    # New records after an emptying delete are read from the new start.
    _fill(broker.bootstrap, topic_name, 1, size=10)
    assert consume_partition(broker.bootstrap, topic_name, 0, 30, 1)[0].offset() == 30


def test_kafkajs_delete_records_and_compacted_topics_refuse(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    _fill(broker.bootstrap, topic_name, 20, size=10)
    kafkajs(broker.bootstrap, "delete-records",
            {"topic": topic_name, "partitions": [{"partition": 0, "offset": "7"}]})
    offsets = kafkajs(broker.bootstrap, "offsets", {"topic": topic_name})
    assert (offsets[0]["low"], offsets[0]["high"]) == ("7", "20"), offsets

    compacted = f"{topic_name}-c"
    create_topic(broker.bootstrap, compacted, config={"cleanup.policy": "compact"})
    _fill(broker.bootstrap, compacted, 5, size=10)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        with pytest.raises(PolicyViolationError):
            a.delete_records({KpTopicPartition(compacted, 0): 2})
    finally:
        a.close()
    assert watermarks(broker.bootstrap, compacted, 0) == (0, 5)


def _max_timestamp_confluent(bootstrap: str, topic: str) -> tuple[int, int]:
    a = admin(bootstrap)
    futures = a.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()},
                             request_timeout=CLIENT_TIMEOUT_S)
    info = list(futures.values())[0].result(timeout=CLIENT_TIMEOUT_S)
    return info.offset, info.timestamp


def test_list_offsets_max_timestamp_across_segments_restart_and_delete(broker_factory,
                                                                       topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, config={"segment.bytes": "16384"})
    assert _max_timestamp_confluent(b.bootstrap, topic_name) == (-1, -1), "empty: not found"
    stamps = [1_700_000_000_000 + t for t in (100, 900, 200, 900, 500, 300)]
    p = producer(b.bootstrap, **{"linger.ms": 0, "batch.num.messages": 1})
    produce_all(p, topic_name, [(None, b"v" * 6000, ts) for ts in stamps])
    assert len(_segment_bases(b, topic_name)) > 1, "small segments roll"
    expected = (1, stamps[1])  # the first record holding the largest timestamp
    assert _max_timestamp_confluent(b.bootstrap, topic_name) == expected
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=30000)
    try:
        tp = KpTopicPartition(topic_name, 0)
        found = a.list_partition_offsets({tp: KpOffsetSpec.MAX_TIMESTAMP})[tp]
        assert (found.offset, found.timestamp) == expected, found
        a.delete_records({tp: 2})
    finally:
        a.close()
    assert _max_timestamp_confluent(b.bootstrap, topic_name) == (3, stamps[3]), \
        "below the log start it is the next record holding it"
    b.restart()
    assert _max_timestamp_confluent(b.bootstrap, topic_name) == (3, stamps[3]), "after restart"
