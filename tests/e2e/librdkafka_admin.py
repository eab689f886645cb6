"""librdkafka's admin calls that confluent-kafka's Python AdminClient does not expose, called
through ctypes on the librdkafka the confluent-kafka wheel ships (the same C client code behind
the Python AdminClient, so the same client family).

Only DeleteConsumerGroupOffsets (OffsetDelete) so far: kafkajs and confluent-kafka's Python API
lack it, and the issue asks for two client families per admin API.
"""

from __future__ import annotations

import ctypes
import glob
from ctypes import POINTER, Structure, byref, c_char_p, c_int, c_int32, c_int64, c_size_t, \
    c_void_p
from pathlib import Path

import confluent_kafka

RD_KAFKA_PRODUCER = 0
TIMEOUT_MS = 30_000


class _TopicPartition(Structure):
    """rd_kafka_topic_partition_t (rdkafka.h)."""
    _fields_ = [("topic", c_char_p), ("partition", c_int32), ("offset", c_int64),
                ("metadata", c_void_p), ("metadata_size", c_size_t), ("opaque", c_void_p),
                ("err", c_int), ("_private", c_void_p)]


class _TopicPartitionList(Structure):
    """rd_kafka_topic_partition_list_t (rdkafka.h)."""
    _fields_ = [("cnt", c_int), ("size", c_int), ("elems", POINTER(_TopicPartition))]


def _lib() -> ctypes.CDLL:
    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    found = glob.glob(str(libs / "librdkafka*.so*"))
    assert found, f"no librdkafka in {libs}"
    lib = ctypes.CDLL(found[0])
    pointers = ["rd_kafka_conf_new", "rd_kafka_new", "rd_kafka_topic_partition_list_new",
                "rd_kafka_topic_partition_list_add", "rd_kafka_DeleteConsumerGroupOffsets_new",
                "rd_kafka_queue_new", "rd_kafka_queue_poll",
                "rd_kafka_event_DeleteConsumerGroupOffsets_result",
                "rd_kafka_DeleteConsumerGroupOffsets_result_groups",
                "rd_kafka_group_result_error", "rd_kafka_group_result_partitions",
                "rd_kafka_event_error_string"]
    for name in pointers:
        getattr(lib, name).restype = c_void_p
    lib.rd_kafka_conf_set.argtypes = [c_void_p, c_char_p, c_char_p, c_char_p, c_size_t]
    lib.rd_kafka_new.argtypes = [c_int, c_void_p, c_char_p, c_size_t]
    lib.rd_kafka_topic_partition_list_add.argtypes = [c_void_p, c_char_p, c_int32]
    lib.rd_kafka_topic_partition_list_destroy.argtypes = [c_void_p]
    lib.rd_kafka_DeleteConsumerGroupOffsets_new.argtypes = [c_char_p, c_void_p]
    lib.rd_kafka_DeleteConsumerGroupOffsets.argtypes = [c_void_p, POINTER(c_void_p), c_size_t,
                                                        c_void_p, c_void_p]
    lib.rd_kafka_DeleteConsumerGroupOffsets_destroy.argtypes = [c_void_p]
    lib.rd_kafka_queue_new.argtypes = [c_void_p]
    lib.rd_kafka_queue_poll.argtypes = [c_void_p, c_int]
    lib.rd_kafka_queue_destroy.argtypes = [c_void_p]
    lib.rd_kafka_event_error.argtypes = [c_void_p]
    lib.rd_kafka_event_error_string.argtypes = [c_void_p]
    lib.rd_kafka_event_DeleteConsumerGroupOffsets_result.argtypes = [c_void_p]
    lib.rd_kafka_DeleteConsumerGroupOffsets_result_groups.argtypes = [c_void_p,
                                                                      POINTER(c_size_t)]
    lib.rd_kafka_group_result_error.argtypes = [c_void_p]
    lib.rd_kafka_group_result_partitions.argtypes = [c_void_p]
    lib.rd_kafka_error_code.argtypes = [c_void_p]
    lib.rd_kafka_event_destroy.argtypes = [c_void_p]
    lib.rd_kafka_destroy.argtypes = [c_void_p]
    return lib


def delete_consumer_group_offsets(bootstrap: str, group: str,
                                  partitions: list[tuple[str, int]]) -> tuple[int, dict]:
    """rd_kafka_DeleteConsumerGroupOffsets: (the group's error code, {(topic, partition): error
    code}). A request-level failure raises."""
    lib = _lib()
    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    assert lib.rd_kafka_conf_set(conf, b"bootstrap.servers", bootstrap.encode(), errstr, 512) == 0
    rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, 512)
    assert rk, errstr.value
    queue = lib.rd_kafka_queue_new(rk)
    tpl = lib.rd_kafka_topic_partition_list_new(len(partitions))
    for topic, partition in partitions:
        lib.rd_kafka_topic_partition_list_add(tpl, topic.encode(), partition)
    request = lib.rd_kafka_DeleteConsumerGroupOffsets_new(group.encode(), tpl)
    lib.rd_kafka_topic_partition_list_destroy(tpl)
    event = None
    try:
        lib.rd_kafka_DeleteConsumerGroupOffsets(rk, (c_void_p * 1)(request), 1, None, queue)
        event = lib.rd_kafka_queue_poll(queue, TIMEOUT_MS)
        assert event, f"no answer in {TIMEOUT_MS} ms"
        if lib.rd_kafka_event_error(event):
            raise RuntimeError(ctypes.string_at(lib.rd_kafka_event_error_string(event)).decode())
        result = lib.rd_kafka_event_DeleteConsumerGroupOffsets_result(event)
        count = c_size_t()
        groups = ctypes.cast(lib.rd_kafka_DeleteConsumerGroupOffsets_result_groups(
            result, byref(count)), POINTER(c_void_p))
        assert count.value == 1
        error = lib.rd_kafka_group_result_error(groups[0])
        group_code = lib.rd_kafka_error_code(error) if error else 0
        listed = ctypes.cast(lib.rd_kafka_group_result_partitions(groups[0]),
                             POINTER(_TopicPartitionList))
        codes = {}
        if listed:
            for i in range(listed.contents.cnt):
                tp = listed.contents.elems[i]
                codes[(tp.topic.decode(), tp.partition)] = tp.err
        return group_code, codes
    finally:
        if event:
            lib.rd_kafka_event_destroy(event)
        lib.rd_kafka_DeleteConsumerGroupOffsets_destroy(request)
        lib.rd_kafka_queue_destroy(queue)
        lib.rd_kafka_destroy(rk)
