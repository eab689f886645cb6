"""Write-through (rill.read.cache.bytes, rill.read.cache.write.through): batches leaving a
partition's 4 MiB tail cache are kept in its shard's read cache, so a catch-up read of a log just
written is served from memory. These tests write more than the tail cache holds, so most of what
they read back went through the read cache, then remove or rewrite log bytes (topic deleted and
created again, DeleteRecords, retention, compaction) and read again: never an old byte. Also: the
cache stays within its bound, by the broker's own gauge and by its RSS, with many partitions
caught up at once. (Follower truncation and torn-tail recovery reopen the log, which leaves its
old entries unreachable: engine/src/write_through_tests.rs.)
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from clients import CLIENT_TIMEOUT_S, admin, create_topic, produce_all, producer, watermarks
from test_admin_listener import metrics, series
from test_compaction import _read_all_confluent

#: Each shard's read cache in these tests (so they do not depend on the machine's memory).
CACHE_BYTES = 16 << 20
#: Messages of ~1.1 KiB: 6,000 are ~6.6 MiB, more than a partition's 4 MiB tail cache.
MESSAGES = 6_000


def value(gen: bytes, i: int) -> bytes:
    """A value that tells its generation and index apart from every other one."""
    return (b"%s|%08d|" % (gen, i)) * 100


def start(broker_factory, tmp_path, extra: str = ""):
    props = tmp_path / "write-through.properties"
    props.write_text(f"rill.read.cache.bytes={CACHE_BYTES}\n"
                     "log.retention.check.interval.ms=200\nlog.cleaner.backoff.ms=200\n" + extra)
    return broker_factory(config_path=props)


def produce(bootstrap: str, topic: str, gen: bytes, count: int, partition: int = 0,
            first: int = 0) -> None:
    p = producer(bootstrap, acks="all", **{"linger.ms": 5})
    produce_all(p, topic, [(None, value(gen, i)) for i in range(first, first + count)], partition)


def read_range(bootstrap: str, topic: str, partitions: dict[int, tuple[int, int]],
               expect=None) -> dict:
    """Every message of each partition p from `start` up to `end` ({p: (start, end)}), by one
    catch-up consumer of them all: {p: [(offset, value)]}; with `expect(p, offset)`, each value
    is checked against it as it comes and not kept (None in its place)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rill-e2e-unused",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "fetch.max.bytes": 4 << 20})
    got: dict[int, list] = {p: [] for p in partitions}
    try:
        c.assign([TopicPartition(topic, p, s) for p, (s, _) in partitions.items()])
        want = sum(e - s for s, e in partitions.values())
        deadline = time.monotonic() + 2 * CLIENT_TIMEOUT_S
        n = 0
        while n < want and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=1):
                if m.error():
                    raise KafkaException(m.error())
                n += 1
                if expect is None:
                    got[m.partition()].append((m.offset(), m.value()))
                    continue
                want_value = expect(m.partition(), m.offset())
                assert m.value() == want_value, \
                    f"partition {m.partition()} offset {m.offset()}: {m.value()[:24]!r}..."
                got[m.partition()].append((m.offset(), None))
        assert n >= want, f"{n} of {want} messages read"
        return got
    finally:
        c.close()


def check_values(got: list, gen: bytes, start_offset: int, end: int, index_of=lambda o: o) -> None:
    """Offsets start_offset..end in order, each holding value(gen, index_of(offset))."""
    assert [o for o, _ in got] == list(range(start_offset, end)), \
        f"offsets {got[:1]}..{got[-1:]} not {start_offset}..{end}"
    for offset, v in got:
        assert v == value(gen, index_of(offset)), f"offset {offset}: {v[:24]!r}..."


def cache_bytes(b) -> dict[str, float]:
    m = metrics(f"{b.host}:{b.admin_port}")
    return series(m, "rill_read_cache_bytes")


def wait_cached(b) -> None:
    """Until the shards' gauges show bytes written through (the gauges follow within 200 ms)."""
    deadline = time.monotonic() + 5
    while sum(cache_bytes(b).values()) == 0:
        assert time.monotonic() < deadline, "nothing written through to the read cache"
        time.sleep(0.1)


def test_a_topic_deleted_and_created_again_serves_only_its_new_bytes(broker_factory, tmp_path,
                                                                    topic_name):
    b = start(broker_factory, tmp_path)
    create_topic(b.bootstrap, topic_name, partitions=1)
    produce(b.bootstrap, topic_name, b"old", MESSAGES)
    wait_cached(b)
    check_values(read_range(b.bootstrap, topic_name, {0: (0, MESSAGES)})[0], b"old", 0, MESSAGES)
    a = admin(b.bootstrap)
    a.delete_topics([topic_name], operation_timeout=CLIENT_TIMEOUT_S)[topic_name].result(
        timeout=CLIENT_TIMEOUT_S)
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while topic_name in a.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "topic not deleted"
        time.sleep(0.1)
    # Same name, same partition, same shard: the old log's bytes must not come back.
    fresh = MESSAGES // 2
    create_topic(b.bootstrap, topic_name, partitions=1)
    produce(b.bootstrap, topic_name, b"new", fresh)
    assert watermarks(b.bootstrap, topic_name, 0) == (0, fresh)
    check_values(read_range(b.bootstrap, topic_name, {0: (0, fresh)})[0], b"new", 0, fresh)
    assert "panicked" not in b.log_text()


def test_retention_and_delete_records_never_serve_removed_bytes(broker_factory, tmp_path,
                                                                topic_name):
    b = start(broker_factory, tmp_path)
    create_topic(b.bootstrap, topic_name, partitions=1, config={"segment.bytes": str(1 << 20)})
    produce(b.bootstrap, topic_name, b"gen", MESSAGES)
    wait_cached(b)
    # Retention only now: set at creation it could remove, while a slow (loaded) produce was
    # still going, every segment whose batches had been written through, and then the cache
    # held nothing to test against.
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.bytes", str(3 << 20), incremental_operation=AlterConfigOpType.SET)])
    a = admin(b.bootstrap)
    a.incremental_alter_configs([resource])[resource].result(CLIENT_TIMEOUT_S)
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while (low := watermarks(b.bootstrap, topic_name, 0)[0]) == 0:
        assert time.monotonic() < deadline, "retention deleted no segment"
        time.sleep(0.2)
    check_values(read_range(b.bootstrap, topic_name, {0: (low, MESSAGES)})[0], b"gen", low,
                 MESSAGES)
    target = low + 1_234
    result = a.delete_records([TopicPartition(topic_name, 0, target)],
                              operation_timeout=CLIENT_TIMEOUT_S)
    list(result.values())[0].result(timeout=CLIENT_TIMEOUT_S)
    assert watermarks(b.bootstrap, topic_name, 0) == (target, MESSAGES)
    check_values(read_range(b.bootstrap, topic_name, {0: (target, MESSAGES)})[0], b"gen", target,
                 MESSAGES)
    assert "panicked" not in b.log_text()


def test_compaction_never_serves_superseded_bytes(broker_factory, tmp_path, topic_name):
    b = start(broker_factory, tmp_path)
    keys, rounds = 300, 20  # ~6.6 MiB of updates: most leave the tail cache before the clean
    create_topic(b.bootstrap, topic_name, partitions=1, config={
        "cleanup.policy": "compact", "segment.bytes": str(256 << 10), "segment.ms": "1500",
        "min.cleanable.dirty.ratio": "0.01"})
    p = producer(b.bootstrap, acks="all", **{"linger.ms": 5})
    messages = [(b"k%03d" % k, value(b"r%02d" % r, k)) for r in range(rounds) for k in range(keys)]
    produce_all(p, topic_name, messages)
    wait_cached(b)  # the cleaner may already run: segment.ms rolls while this produces
    total = len(messages)
    time.sleep(1.6)  # segment.ms: the next append rolls the segment holding every update
    produce_all(p, topic_name, [(b"sentinel", b"end")])
    last_round = {(rounds - 1) * keys + k: value(b"r%02d" % (rounds - 1), k) for k in range(keys)}
    last_round[total] = b"end"
    deadline = time.monotonic() + 60
    while True:
        got = {offset: v.encode() for offset, _key, v in _read_all_confluent(b.bootstrap,
                                                                             topic_name)}
        if got == last_round:
            break
        stale = [o for o in got if o not in last_round]
        assert time.monotonic() < deadline, \
            f"not compacted to the last round: {len(got)} records, {len(stale)} superseded ones " \
            f"still served (first {stale[:3]})"
        time.sleep(0.5)
    assert watermarks(b.bootstrap, topic_name, 0) == (0, total + 1), "offsets kept"
    assert "panicked" not in b.log_text()


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS:"))


def test_write_through_stays_within_its_bound_with_many_catch_up_consumers(broker_factory,
                                                                         tmp_path, topic_name):
    """8 partitions on 2 shards, ~34 MiB written to each (~30 MiB of it past its tail cache:
    ~240 MiB written through, seven times the two shards' read caches together), then all 8
    caught up at once from the start: every value as produced, each shard's cache within its
    16 MiB at every sample, and RSS growing by no more than the caches, the tail caches and
    what the broker holds anyway allow."""
    b = start(broker_factory, tmp_path)
    partitions, count = 8, 5 * MESSAGES
    create_topic(b.bootstrap, topic_name, partitions=partitions)
    rss_before = rss_bytes(b.proc.pid)
    samples = []
    for p in range(partitions):
        produce(b.bootstrap, topic_name, b"p%d" % p, count, partition=p)
        samples.append(cache_bytes(b))
    wait_cached(b)
    got = read_range(b.bootstrap, topic_name, {p: (0, count) for p in range(partitions)},
                     expect=lambda p, offset: value(b"p%d" % p, offset))
    samples.append(cache_bytes(b))
    for p in range(partitions):
        assert [o for o, _ in got[p]] == list(range(count)), f"partition {p}: offsets"
    held = [v for s in samples for v in s.values()]
    assert held and max(held) <= CACHE_BYTES, f"a shard's cache over its bound: {max(held)}"
    assert max(held) > CACHE_BYTES / 2, f"write-through filled the caches: {held}"
    grown = rss_bytes(b.proc.pid) - rss_before
    # Caches (2 x 16 MiB) + tail caches (8 x 4 MiB) + 96 MiB for the rest. Measured with 3 x
    # MESSAGES per partition (debug build, 2026-12-01): 57-66 MiB with no read cache at all
    # (tail caches, requests, allocator), 88-105 with read-ahead only, 92-122 with
    # write-through, 170 with a 1 GiB cache (unbounded here); at 5 x, unbounded would be more.
    assert grown < (2 * CACHE_BYTES + partitions * (4 << 20) + (96 << 20)), \
        f"RSS grew {grown >> 20} MiB"
    assert "panicked" not in b.log_text()
