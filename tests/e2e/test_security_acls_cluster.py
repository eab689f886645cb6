"""ACLs in a cluster live in the metadata log (issue 27 item 4; SECURITY.md, "ACLs").

A real 3-node cluster with `authorizer.class.name` set to Kafka's StandardAuthorizer and
`super.users=User:admin`: each node has a PLAINTEXT listener (inter-broker), a SASL_PLAINTEXT one
with PLAIN users admin and alice, and its CONTROLLER listener. An ACL created through one node
(confluent-kafka's AdminClient as admin) is described and enforced on every node, is still there
on a restarted node, and a DeleteAcls through another node removes it everywhere.
"""

from __future__ import annotations

import time

from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType)

from broker import free_port
from cluster import Cluster, running
from conftest import _BROKERS

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret";')


def until(check, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def client(port: int, user: str) -> AdminClient:
    return AdminClient({
        "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret",
    })


def described(port: int) -> set:
    admin = client(port, "admin")
    f = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    return set(admin.describe_acls(f, request_timeout=10).result())


def visible(port: int, user: str) -> set:
    return set(client(port, user).list_topics(timeout=10).topics)


def test_an_acl_made_on_one_node_holds_on_every_node_and_after_a_restart(tmp_path):
    cluster = Cluster(tmp_path, **{
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    })
    ports = {}
    for node in cluster.nodes:
        port = ports[node.node_id] = free_port()
        text = node.config_path.read_text().replace(
            f"listeners=PLAINTEXT://127.0.0.1:{node.port},",
            f"listeners=PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{port},")
        text = text.replace(
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{port}")
        node.config_path.write_text(text)
    with running(cluster, _BROKERS):
        admin = client(ports[1], "admin")
        for f in admin.create_topics([NewTopic("shared", 1, 3), NewTopic("hidden", 1, 3)],
                                     request_timeout=20).values():
            f.result()
        grant = AclBinding(ResourceType.TOPIC, "shared", ResourcePatternType.LITERAL,
                           "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
        for f in admin.create_acls([grant], request_timeout=10).values():
            f.result()
        for node_id, port in ports.items():
            assert until(lambda: grant in described(port)), f"node {node_id}"
            assert until(lambda: visible(port, "alice") >= {"shared"}), f"node {node_id}"
            assert "hidden" not in visible(port, "alice"), f"node {node_id}"
        cluster.node(2).restart()
        assert until(lambda: grant in described(ports[2])), "after a restart"
        other = client(ports[3], "admin")
        deleted = other.delete_acls([AclBindingFilter(
            ResourceType.TOPIC, "shared", ResourcePatternType.LITERAL, None, None,
            AclOperation.ANY, AclPermissionType.ANY)], request_timeout=10)
        assert [set(f.result()) for f in deleted.values()] == [{grant}]
        for node_id, port in ports.items():
            assert until(lambda: "shared" not in visible(port, "alice")), f"node {node_id}"
