"""Kafka's join delay (issue 18): `group.initial.rebalance.delay.ms`, 3000 ms by default, holds the
first rebalance of an empty group so that consumers started together land in one generation.

Without it, the first of two consumers got all four partitions, consumed, and a second generation
moved two of them away: messages consumed but not yet committed were consumed again (3 runs out
of 3). These brokers run the default delay; the rest of the suite runs 100 ms (broker.py).
"""

from __future__ import annotations

import time
from collections import Counter

from confluent_kafka.admin import ConfigResource, ConfigSource

from clients import admin, create_topic
from test_groups import WAIT_S, close_all, consumer, owned, seed, split_exactly

PARTITIONS = 4
PER_PARTITION = 250


def test_two_consumers_started_together_get_one_generation(broker_factory, topic_name):
    b = broker_factory(initial_rebalance_delay_ms=None)  # the broker's default: Kafka's 3000 ms
    create_topic(b.bootstrap, topic_name, partitions=PARTITIONS)
    expected = seed(b.bootstrap, topic_name, PARTITIONS, PER_PARTITION)
    group = f"g-{topic_name}"
    # Every assignment each consumer was given, in order (librdkafka's rebalance callback).
    assigned: list[list[list[int]]] = [[], []]
    consumers = []
    seen: list[str] = []
    for i in range(2):
        c = consumer(b.bootstrap, group, **{"enable.auto.commit": True})

        def on_assign(_c, partitions, i=i):
            assigned[i].append(sorted(tp.partition for tp in partitions))

        c.subscribe([topic_name], on_assign=on_assign)
        consumers.append(c)
        if i == 0:
            # The second starts half a second after the first, as processes started together do
            # (without the delay the first is given every partition and consumes meanwhile).
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                m = c.poll(0.1)
                if m is not None and not m.error():
                    seen.append(m.value().decode())
    try:
        deadline = time.monotonic() + WAIT_S
        while not (len(seen) >= len(expected) and split_exactly(consumers, topic_name, PARTITIONS)):
            assert time.monotonic() < deadline, f"not consumed in {WAIT_S}s: {assigned}"
            for c in consumers:
                m = c.poll(0.1)
                if m is not None and not m.error():
                    seen.append(m.value().decode())
        # A little longer: a late second generation would deliver duplicates now.
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            for c in consumers:
                m = c.poll(0.05)
                if m is not None and not m.error():
                    seen.append(m.value().decode())
        final = [sorted(p for _, p in owned(c)) for c in consumers]
    finally:
        close_all(consumers)
    assert all(len(a) == 1 for a in assigned), f"more than one generation: {assigned}"
    assert not any(len(p) == PARTITIONS for a in assigned for p in a), \
        f"one consumer was given every partition: {assigned}"
    assert sorted(len(p) for p in final) == [2, 2], final
    dupes = [v for v, n in Counter(seen).items() if n > 1]
    assert not dupes, f"consumed more than once: {len(dupes)}, e.g. {dupes[:5]}"
    assert set(seen) == expected


def test_the_delay_is_a_described_broker_config(broker_factory):
    for delay, value, source in [(None, "3000", ConfigSource.DEFAULT_CONFIG),
                                 (250, "250", ConfigSource.STATIC_BROKER_CONFIG)]:
        b = broker_factory(initial_rebalance_delay_ms=delay)
        a = admin(b.bootstrap)
        resource = ConfigResource(ConfigResource.Type.BROKER, "0")
        entry = a.describe_configs([resource])[resource].result(timeout=30)[
            "group.initial.rebalance.delay.ms"]
        assert (entry.value, entry.source, entry.is_read_only) == (value, source.value, True)
        b.stop()
