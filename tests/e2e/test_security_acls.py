"""ACLs with Kafka's StandardAuthorizer semantics (issue 27 item 4; SECURITY.md, "ACLs"): real
clients, one broker.

The broker runs `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`
with `super.users=User:admin`, a PLAINTEXT listener (its clients are User:ANONYMOUS) and a
SASL_PLAINTEXT one with PLAIN users admin, alice and bob (the fixtures of test_security_sasl.py).
- confluent-kafka's AdminClient, as admin, creates, describes (every filter kind) and deletes
  ACLs; a user without ALTER on the cluster cannot;
- ACLs survive a restart.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ResourcePatternType, ResourceType)

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
