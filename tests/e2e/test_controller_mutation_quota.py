"""Controller mutation quotas (KIP-599, `controller_mutation_rate`; SECURITY.md, "Client
quotas"): real rill, kafka-python's protocol classes at chosen versions.

The broker's controller quota window is 2 samples of 1 s, so a quota of 2 mutations/s allows a
burst of 4 (quota x window num x window size); one partition created or deleted is one mutation.

- strict (CreateTopics v6, CreatePartitions v3, DeleteTopics v5): topics are taken in request
  order while the bucket is not below 0 (the one that crosses 0 is taken whole), the rest are
  answered THROTTLING_QUOTA_EXCEEDED (89) and the response's throttle_time_ms says how long
  until the bucket is back at 0;
- permissive (CreateTopics v5): every topic is created and only throttle_time_ms is set;
- validate_only takes nothing; another client id has no quota;
- a 3-node cluster: the node that takes the requests measures them (topics counted from the
  metadata image), a second connection of the same client id sharing the bucket.
"""

from __future__ import annotations

import time
import uuid

from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import (AlterClientQuotasRequest, CreatePartitionsRequest,
                                  CreateTopicsRequest, DeleteTopicsRequest)

THROTTLED = 89
MESSAGE = "The throttling quota has been exceeded."
#: The bucket's refill time from empty: the burst (4) over the quota (2/s), and some slack.
REFILL_S = 2.5


def admin(broker, client_id: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id=client_id,
                            request_timeout_ms=10000)


def send(client: KafkaAdminClient, request):
    return client._manager.run(client._manager.send, request)


def send_to(client: KafkaAdminClient, node_id: int, request):
    """`request` to node `node_id` (each broker measures what it takes)."""
    return client._manager.run(client._manager.send, request, node_id)


def set_quota(client, client_id: str, rate: float) -> None:
    request = AlterClientQuotasRequest(
        entries=[([("client-id", client_id)], [("controller_mutation_rate", rate, False)])],
        validate_only=False)
    [entry] = send(client, request).entries
    assert entry.error_code == 0, entry


def create(client, version: int, names: list[str], partitions: int = 1,
           validate_only: bool = False):
    cls = CreateTopicsRequest[version]
    topics = [cls.CreatableTopic(name=n, num_partitions=partitions, replication_factor=1,
                                 assignments=[], configs=[]) for n in names]
    return send(client, cls(topics=topics, timeout_ms=10000, validate_only=validate_only))


def mutation_broker(broker_factory, tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("controller.quota.window.num=2\ncontroller.quota.window.size.seconds=1\n")
    return broker_factory(config_path=props)


def test_strict_versions_refuse_topics_past_the_burst(broker_factory, tmp_path):
    broker = mutation_broker(broker_factory, tmp_path)
    setup = admin(broker, "setup")
    client = admin(broker, "mutator")
    try:
        set_quota(setup, "mutator", 2.0)
        prefix = f"mq-{uuid.uuid4().hex[:8]}"
        names = [f"{prefix}-{i}" for i in range(6)]
        # validate_only takes no tokens.
        checked = create(client, 6, names, validate_only=True)
        assert [t.error_code for t in checked.topics] == [0] * 6, checked
        assert checked.throttle_time_ms == 0
        # 4 tokens: four topics empty the bucket, the fifth crosses to -1, the sixth is refused
        # and waits 1 / 2 s for the bucket to be back at 0.
        response = create(client, 6, names)
        codes = {t.name: (t.error_code, t.error_message) for t in response.topics}
        assert codes == {**{n: (0, None) for n in names[:5]}, names[5]: (THROTTLED, MESSAGE)}, \
            response
        assert 0 < response.throttle_time_ms <= 500, response
        print(f"CreateTopics v6: 5 of 6 created, throttle_time_ms {response.throttle_time_ms}")
        # Another client id has no quota.
        other = admin(broker, "other")
        try:
            free = create(other, 6, [f"{prefix}-free-{i}" for i in range(10)])
            assert [t.error_code for t in free.topics] == [0] * 10 and free.throttle_time_ms == 0
        finally:
            other.close()

        # CreatePartitions v3: growing to 6 adds 5 (taken whole, -1), the next is refused.
        time.sleep(REFILL_S)
        cls = CreatePartitionsRequest[3]
        grow = cls(topics=[cls.CreatePartitionsTopic(name=n, count=6, assignments=None)
                           for n in names[:2]], timeout_ms=10000, validate_only=False)
        grown = send(client, grow)
        results = {r.name: r.error_code for r in grown.results}
        assert results == {names[0]: 0, names[1]: THROTTLED}, grown
        assert 0 < grown.throttle_time_ms <= 500, grown

        # DeleteTopics v5: each topic of 1 partition is one mutation; the first (6 partitions now)
        # crosses to -2 and the rest are refused.
        time.sleep(REFILL_S)
        cls = DeleteTopicsRequest[5]
        deleted = send(client, cls(topic_names=names[:5], timeout_ms=10000))
        results = {r.name: r.error_code for r in deleted.responses}
        assert results == {names[0]: 0, **{n: THROTTLED for n in names[1:5]}}, deleted
        assert 0 < deleted.throttle_time_ms <= 1000, deleted
    finally:
        client.close()
        setup.close()


def test_older_versions_create_everything_and_are_throttled(broker_factory, tmp_path):
    broker = mutation_broker(broker_factory, tmp_path)
    setup = admin(broker, "setup")
    client = admin(broker, "old-client")
    try:
        set_quota(setup, "old-client", 2.0)
        names = [f"mq-old-{uuid.uuid4().hex[:8]}-{i}" for i in range(6)]
        # CreateTopics v5 cannot answer THROTTLING_QUOTA_EXCEEDED: all 6 are created, the
        # bucket is at -2, a second at 2/s.
        response = create(client, 5, names)
        assert [t.error_code for t in response.topics] == [0] * 6, response
        assert 500 < response.throttle_time_ms <= 1000, response
        print(f"CreateTopics v5: 6 of 6 created, throttle_time_ms {response.throttle_time_ms}")
    finally:
        client.close()
        setup.close()


def test_a_cluster_node_enforces_the_quota(tmp_path):
    """In a cluster the broker that takes the request measures it, topics counted from the
    metadata image (the default window, 11 x 1 s: a quota of 0.5/s is a burst of 5.5)."""
    from cluster import Cluster, running
    from conftest import _BROKERS
    cluster = Cluster(tmp_path)
    with running(cluster, _BROKERS):
        node = cluster.node(1)
        setup = admin(node, "setup")
        client = admin(node, "mutator")
        # The same client id on another connection: the first one is muted for the throttle.
        again = admin(node, "mutator")
        try:
            set_quota(setup, "mutator", 0.5)
            names = [f"mq-c-{uuid.uuid4().hex[:8]}-{i}" for i in range(3)]
            # A topic of 12 partitions is taken whole (5.5 - 12 = -6.5, 13 s from 0 at 0.5/s);
            # the next two are refused.
            cls = CreateTopicsRequest[6]
            topics = [cls.CreatableTopic(name=n, num_partitions=12 if i == 0 else 1,
                                         replication_factor=1, assignments=[], configs=[])
                      for i, n in enumerate(names)]
            response = send_to(client, node.node_id,
                               cls(topics=topics, timeout_ms=10000, validate_only=False))
            codes = {t.name: t.error_code for t in response.topics}
            assert codes == {names[0]: 0, names[1]: THROTTLED, names[2]: THROTTLED}, response
            assert 12000 < response.throttle_time_ms <= 13000, response
            # Still below 0: deleting the topic (its 12 partitions, from the image) is refused.
            cls = DeleteTopicsRequest[5]
            deleted = send_to(again, node.node_id, cls(topic_names=[names[0]], timeout_ms=10000))
            assert [(r.name, r.error_code) for r in deleted.responses] == \
                [(names[0], THROTTLED)], deleted
            assert deleted.throttle_time_ms > 10000, deleted
        finally:
            again.close()
            client.close()
            setup.close()
