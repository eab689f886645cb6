"""ACLs with Kafka's StandardAuthorizer semantics (issue 27 item 4; SECURITY.md, "ACLs"): real
clients, one broker.

The broker runs `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`
with `super.users=User:admin`, a PLAINTEXT listener (its clients are User:ANONYMOUS) and a
SASL_PLAINTEXT one with PLAIN users admin, alice and bob (the fixtures of test_security_sasl.py).
- confluent-kafka's AdminClient, as admin, creates, describes (every filter kind) and deletes
  ACLs; a user without ALTER on the cluster cannot;
- ACLs survive a restart;
- enforcement: a user allowed to READ topic t cannot write it, sees no other topic in Metadata
  and cannot join a group it has no READ on; DeleteAcls takes effect at once; PREFIXED and DENY
  bindings behave as Kafka's (a DENY of READ leaves DESCRIBE to an ALLOW).
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ConfigResource, NewPartitions, NewTopic,
                                   ResourcePatternType, ResourceType)

from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         KafkaAdminClient, ResourcePatternFilter)
from kafka.admin import ResourceType as KafkaPythonResourceType
from kafka.errors import ClusterAuthorizationFailedError

from broker import Broker, free_port
from conftest import _BROKERS

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class AclBroker:
    def __init__(self, root):
        self.sasl_port = free_port()
        config = root / "acl.properties"
        self.broker = Broker(root / "data", root / "rill.log", config_path=config)
        config.write_text("\n".join([
            f"listeners=PLAINTEXT://127.0.0.1:{self.broker.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
            "sasl.enabled.mechanisms=PLAIN",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
            f"authorizer.class.name={AUTHORIZER}",
            "super.users=User:admin",
        ]) + "\n")

    def config(self, user: str) -> dict:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": f"{user}-secret",
        }

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.config(user))


@pytest.fixture(scope="module")
def acl(tmp_path_factory):
    a = AclBroker(tmp_path_factory.mktemp("acl"))
    _BROKERS.append(a.broker)
    a.broker.start()
    yield a
    assert a.broker.stop() == 0
    assert "panicked" not in a.broker.log_text()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def binding(rtype, name, principal, op, permission=AclPermissionType.ALLOW,
            pattern=ResourcePatternType.LITERAL, host="*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def any_filter(rtype=ResourceType.ANY, name=None, pattern=ResourcePatternType.ANY,
               principal=None, op=AclOperation.ANY,
               permission=AclPermissionType.ANY) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, pattern, principal, None, op, permission)


def kafka_python_admin(acl: AclBroker, user: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{acl.sasl_port}",
                            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                            sasl_plain_username=user, sasl_plain_password=f"{user}-secret")


def everything_filter() -> ACLFilter:
    return ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                     permission_type=ACLPermissionType.ANY,
                     resource_pattern=ResourcePatternFilter(KafkaPythonResourceType.ANY, None,
                                                            ACLResourcePatternType.ANY))


def create(admin: AdminClient, bindings: list[AclBinding]) -> None:
    for f in admin.create_acls(bindings, request_timeout=10).values():
        f.result()


def describe(admin: AdminClient, f: AclBindingFilter) -> set[AclBinding]:
    return set(admin.describe_acls(f, request_timeout=10).result())


def delete(admin: AdminClient, filters: list[AclBindingFilter]) -> list[set[AclBinding]]:
    futures = admin.delete_acls(filters, request_timeout=10)
    return [set(futures[f].result()) for f in filters]


def test_acls_are_created_described_and_deleted_through_the_admin_client(acl):
    admin = acl.admin()
    t = unique("t")
    read = binding(ResourceType.TOPIC, t, "User:alice", AclOperation.READ)
    prefixed = binding(ResourceType.TOPIC, t[:4], "User:bob", AclOperation.WRITE,
                       AclPermissionType.DENY, ResourcePatternType.PREFIXED)
    group = binding(ResourceType.GROUP, unique("g"), "User:alice", AclOperation.READ)
    cluster = binding(ResourceType.BROKER, "kafka-cluster", "User:alice",
                      AclOperation.IDEMPOTENT_WRITE)
    create(admin, [read, prefixed, group, cluster])
    create(admin, [read])  # an existing binding is answered created
    everything = describe(admin, any_filter())
    assert {read, prefixed, group, cluster} <= everything
    assert describe(admin, any_filter(ResourceType.TOPIC, t)) == {read}
    assert describe(admin, any_filter(ResourceType.TOPIC, t, ResourcePatternType.MATCH)) == {
        read, prefixed}
    assert describe(admin, any_filter(ResourceType.TOPIC, None,
                                      ResourcePatternType.PREFIXED,
                                      principal="User:bob")) >= {prefixed}
    assert describe(admin, any_filter(ResourceType.BROKER)) >= {cluster}
    deleted = delete(admin, [any_filter(ResourceType.TOPIC, t, ResourcePatternType.MATCH),
                             any_filter(ResourceType.GROUP, group.name)])
    assert deleted == [{read, prefixed}, {group}]
    assert describe(admin, any_filter(ResourceType.TOPIC, t, ResourcePatternType.MATCH)) == set()
    assert delete(admin, [any_filter(ResourceType.BROKER)]) == [{cluster}]


def test_invalid_bindings_are_refused_as_kafka_refuses_them(acl):
    admin = acl.admin()
    bad = binding(ResourceType.BROKER, "not-the-cluster", "User:alice", AclOperation.ALTER)
    with pytest.raises(KafkaException) as e:
        create(admin, [bad])
    assert e.value.args[0].code() == 42  # INVALID_REQUEST
    assert "The only valid name for the CLUSTER resource is kafka-cluster" in str(e.value)


def test_only_a_principal_with_alter_on_the_cluster_changes_acls(acl):
    alice = acl.admin("alice")
    t = unique("t")
    with pytest.raises(KafkaException) as e:
        create(alice, [binding(ResourceType.TOPIC, t, "User:alice", AclOperation.ALL)])
    assert e.value.args[0].code() == 31  # CLUSTER_AUTHORIZATION_FAILED
    # librdkafka drops DescribeAcls' top-level error (its describe_acls gives []): kafka-python
    # reads it.
    assert describe(alice, any_filter()) == set()
    with pytest.raises(ClusterAuthorizationFailedError):
        kafka_python_admin(acl, "alice").describe_acls(everything_filter())
    create(acl.admin(), [binding(ResourceType.BROKER, "kafka-cluster", "User:alice",
                                 AclOperation.DESCRIBE)])
    assert describe(alice, any_filter(ResourceType.BROKER)) != set()
    with pytest.raises(KafkaException) as e:
        delete(alice, [any_filter()])
    assert e.value.args[0].code() == 31
    delete(acl.admin(), [any_filter(ResourceType.BROKER, principal="User:alice")])


def test_acls_survive_a_restart(acl):
    admin = acl.admin()
    t = unique("kept")
    kept = binding(ResourceType.TOPIC, t, "User:alice", AclOperation.DESCRIBE)
    create(admin, [kept])
    acl.broker.restart()
    assert describe(acl.admin(), any_filter(ResourceType.TOPIC, t)) == {kept}


def make_topics(acl: AclBroker, *names: str) -> None:
    admin = acl.admin()
    futures = admin.create_topics([NewTopic(n, 1, 1) for n in names], request_timeout=15)
    for f in futures.values():
        f.result()


def produce(config: dict, topic: str, n: int = 2) -> list:
    """Delivery errors of n records (None for each delivered)."""
    errors = []
    p = Producer({**config, "acks": "all", "message.timeout.ms": 10000})
    for i in range(n):
        p.produce(topic, f"m{i}".encode(), on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    return errors


def consume(config: dict, topic: str, group: str, want: int, seconds: float = 15):
    """(values, first error code) of a consumer in `group`."""
    c = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, error = [], None
    import time
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(got) < want and error is None:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error() is None:
            got.append(m.value())
        elif m.error().code() != KafkaError._PARTITION_EOF:
            error = m.error().code()
    c.close()
    return got, error


def visible(config: dict) -> set[str]:
    return set(AdminClient(config).list_topics(timeout=10).topics)


def test_a_reader_cannot_write_see_other_topics_or_join_other_groups(acl):
    t, other, g = unique("read"), unique("other"), unique("g")
    make_topics(acl, t, other)
    assert produce(acl.config("admin"), t) == [None, None]
    alice = acl.config("alice")
    # No binding at all: nothing (allow.everyone.if.no.acl.found is false).
    assert t not in visible(alice)
    create(acl.admin(), [binding(ResourceType.TOPIC, t, "User:alice", AclOperation.READ),
                         binding(ResourceType.GROUP, g, "User:alice", AclOperation.READ)])
    seen = visible(alice)
    assert t in seen and other not in seen
    got, error = consume(alice, t, g, 2)
    assert (got, error) == ([b"m0", b"m1"], None)
    errors = produce(alice, t, 1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    _, error = consume(alice, t, unique("not-mine"), 1, seconds=10)
    assert error == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_delete_acls_takes_effect_at_once(acl):
    t = unique("gone")
    make_topics(acl, t)
    alice = acl.config("alice")
    grant = binding(ResourceType.TOPIC, t, "User:alice", AclOperation.WRITE)
    create(acl.admin(), [grant])
    assert produce(alice, t, 1) == [None]
    assert delete(acl.admin(), [any_filter(ResourceType.TOPIC, t)]) == [{grant}]
    assert t not in visible(alice)
    errors = produce(alice, t, 1)
    assert len(errors) == 1 and errors[0] is not None


def test_prefixed_and_deny_bindings_behave_as_kafkas(acl):
    prefix = unique("pfx") + "-"
    a, b, outside = prefix + "a", prefix + "b", unique("outside")
    make_topics(acl, a, b, outside)
    for topic in (a, b):
        assert produce(acl.config("admin"), topic, 1) == [None]
    g = unique("pg")
    create(acl.admin(), [
        binding(ResourceType.TOPIC, prefix, "User:bob", AclOperation.READ,
                pattern=ResourcePatternType.PREFIXED),
        binding(ResourceType.GROUP, g, "User:bob", AclOperation.READ,
                pattern=ResourcePatternType.PREFIXED),
        binding(ResourceType.TOPIC, b, "User:bob", AclOperation.READ, AclPermissionType.DENY),
    ])
    bob = acl.config("bob")
    seen = visible(bob)
    # b stays visible: a DENY of READ does not deny DESCRIBE, which the prefixed READ implies.
    assert a in seen and b in seen and outside not in seen
    assert consume(bob, a, g + "-1", 1) == ([b"m0"], None)
    got, error = consume(bob, b, g + "-2", 1, seconds=10)
    assert got == [] and error == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A DENY for everyone (User:*) on the prefix wins over bob's ALLOW.
    create(acl.admin(), [binding(ResourceType.TOPIC, prefix, "User:*", AclOperation.ALL,
                                 AclPermissionType.DENY, ResourcePatternType.PREFIXED)])
    assert a not in visible(bob)
    assert a in visible(acl.config("admin")), "super users pass every DENY"


def test_configs_and_partitions_are_checked_per_topic(acl):
    mine, other = unique("cfg"), unique("cfg-other")
    make_topics(acl, mine, other)
    create(acl.admin(), [binding(ResourceType.TOPIC, mine, "User:alice",
                                 AclOperation.ALTER_CONFIGS)])
    alice = acl.admin("alice")
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    described = alice.describe_configs([ConfigResource("topic", mine)], request_timeout=10)
    configs = list(described.values())[0].result()
    assert "retention.ms" in configs
    refused = alice.describe_configs([ConfigResource("topic", other)], request_timeout=10)
    with pytest.raises(KafkaException) as e:
        list(refused.values())[0].result()
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # CreatePartitions needs ALTER on the topic, which alice lacks.
    grown = alice.create_partitions([NewPartitions(mine, 2)], request_timeout=10)
    with pytest.raises(KafkaException) as e:
        list(grown.values())[0].result()
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_auto_creation_needs_create(acl):
    prefix = unique("mk") + "-"
    alice = acl.config("alice")
    create(acl.admin(), [binding(ResourceType.TOPIC, prefix, "User:alice", AclOperation.WRITE,
                                 pattern=ResourcePatternType.PREFIXED)])
    first = prefix + "first"
    errors = produce(alice, first, 1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert first not in visible(acl.config("admin")), "created without CREATE"
    create(acl.admin(), [binding(ResourceType.TOPIC, prefix, "User:alice", AclOperation.CREATE,
                                 pattern=ResourcePatternType.PREFIXED)])
    second = prefix + "second"
    assert produce(alice, second, 1) == [None]
    assert second in visible(acl.config("admin"))


def test_delete_topics_needs_delete_on_the_topic(acl):
    t = unique("del")
    make_topics(acl, t)
    alice = acl.admin("alice")
    create(acl.admin(), [binding(ResourceType.TOPIC, t, "User:alice", AclOperation.DESCRIBE)])
    refused = alice.delete_topics([t], request_timeout=10)
    with pytest.raises(KafkaException) as e:
        refused[t].result()
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert t in visible(acl.config("admin"))
    create(acl.admin(), [binding(ResourceType.TOPIC, t, "User:alice", AclOperation.DELETE)])
    alice.delete_topics([t], request_timeout=10)[t].result()
    assert until_gone(acl, t)


def until_gone(acl: AclBroker, topic: str) -> bool:
    import time
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if topic not in visible(acl.config("admin")):
            return True
        time.sleep(0.2)
    return False


def kip848_run(config: dict, group: str, subscription: list[str], seconds: float):
    """A KIP-848 member (`group.protocol=consumer`) of `group` for `seconds`: the topics it was
    ever assigned, the values it read and the first error it was given."""
    import time
    c = Consumer({**config, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(subscription)
    assigned, got, error = set(), [], None
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and error is None:
            m = c.poll(0.2)
            assigned |= {tp.topic for tp in c.assignment()}
            if m is None:
                continue
            if m.error() is None:
                got.append((m.topic(), m.value()))
            elif m.error().code() != KafkaError._PARTITION_EOF:
                error = m.error().code()
    finally:
        c.close()
    return assigned, got, error


def test_a_regex_subscription_is_assigned_only_the_topics_its_member_may_describe(acl):
    """KIP-848 regex subscriptions are resolved by the group coordinator, which keeps only the
    matches the member's principal may DESCRIBE (Kafka's GroupMetadataManager
    `filterTopicDescribeAuthorizedTopics`). Rill resolved a regex against every topic, so a user
    with READ on one topic was assigned and read another it has no ACL on. A name subscription
    to such a topic is refused whole, TOPIC_AUTHORIZATION_FAILED, as Kafka's KafkaApis does."""
    prefix = unique("rx")
    mine, hidden, g = f"{prefix}-mine", f"{prefix}-hidden", unique("g")
    make_topics(acl, mine, hidden)
    for topic in (mine, hidden):
        assert produce(acl.config("admin"), topic, 2) == [None, None]
    create(acl.admin(), [binding(ResourceType.TOPIC, mine, "User:alice", AclOperation.READ),
                         binding(ResourceType.GROUP, g, "User:alice", AclOperation.READ)])
    alice = acl.config("alice")
    assigned, got, error = kip848_run(alice, g, [f"^{prefix}-.*"], seconds=8)
    assert error is None
    assert assigned == {mine}, assigned
    assert sorted(got) == [(mine, b"m0"), (mine, b"m1")], got
    _, got, error = kip848_run(alice, g, [mine, hidden], seconds=8)
    assert (got, error) == ([], KafkaError.TOPIC_AUTHORIZATION_FAILED)
