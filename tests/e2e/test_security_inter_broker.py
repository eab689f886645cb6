"""A 3-node cluster whose brokers reach each other over SASL_SSL and whose quorum speaks mTLS
(issue 27, "Tests"; SECURITY.md, "Inter-broker traffic" and "The controller listener").

A real 3-node cluster (rill.shards=1), configured with Kafka's own properties: each node has a
PLAINTEXT listener (the harness's readiness probe only), a SASL_SSL listener that is the
inter-broker listener (`inter.broker.listener.name=SASL_SSL`,
`sasl.mechanism.inter.broker.protocol`, the JAAS line's `username`/`password`), and its CONTROLLER
listener mapped to SSL with `listener.name.controller.ssl.client.auth=required` (raft between
the voters and every broker's controller requests over mTLS); certificates made by the test (trustme: one CA, a server certificate for 127.0.0.1);
StandardAuthorizer with `super.users=User:admin` and no ACL for anyone else.

Replica Fetches are taken only on the inter-broker listener, and only from a principal with
CLUSTER_ACTION, so an acks=all write acknowledged with min.insync.replicas=2 proves the followers
fetched over TLS, logged in as admin. A committed and an aborted transaction prove the
coordinator's WriteTxnMarkers (and the leaders' KIP-890 verifications) got through too. Run for
each inter-broker mechanism: PLAIN, and SCRAM-SHA-512 with the brokers' own credential made
before any replication is needed (as `kafka-storage format --add-scram` would). On the
controller port, a plaintext peer and a TLS peer without a certificate are refused, and the
quorum goes on.
"""

from __future__ import annotations

import socket
import ssl
import time
import uuid

import pytest
import trustme
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType,
                                   UserScramCredentialUpsertion, ScramCredentialInfo,
                                   ScramMechanism)

from broker import free_port
from test_replication_faults import Nodes

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-scram";')
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def secure_nodes(tmp_path, mechanism: str) -> tuple[Nodes, dict[int, int], str]:
    """The cluster (not started), each node's SASL_SSL port, and the CA file."""
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    keystore, ca_file = tmp_path / "server.pem", tmp_path / "ca.pem"
    keystore.write_bytes(server.private_key_pem.bytes()
                         + b"".join(p.bytes() for p in server.cert_chain_pems))
    ca_file.write_bytes(ca.cert_pem.bytes())
    nodes = Nodes(tmp_path, **{
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
    })
    ports = {}
    for node in nodes.cluster.nodes:
        port = ports[node.node_id] = free_port()
        lines = [line for line in node.config_path.read_text().splitlines()
                 if not line.startswith(("listeners=", "advertised.listeners="))]
        lines += [
            f"listeners=PLAINTEXT://127.0.0.1:{node.port},SASL_SSL://127.0.0.1:{port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port},"
            f"SASL_SSL://127.0.0.1:{port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,"
            "CONTROLLER:SSL",
            "listener.name.controller.ssl.client.auth=required",
            "inter.broker.listener.name=SASL_SSL",
            f"sasl.mechanism.inter.broker.protocol={mechanism}",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}",
            f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={keystore}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={ca_file}",
        ]
        node.config_path.write_text("\n".join(lines) + "\n")
    return nodes, ports, str(ca_file)


def controller_closes_plaintext(port: int) -> bool:
    """Whether the controller port closes a plaintext peer that sent a frame-like header (it
    may say why in a TLS alert first)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"\0\0\0\x20RILL" + b"\0" * 28)
        try:
            while sock.recv(4096):
                pass
            return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False


def controller_takes_tls_without_a_certificate(port: int, ca: str) -> bool:
    """Whether a TLS client without a certificate gets a working connection to the quorum."""
    context = ssl.create_default_context(cafile=ca)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\0" * 32)
                # TLS 1.3: the server's refusal (certificate required) arrives after the
                # client's side of the handshake is done, on the first read.
                return tls.recv(1) != b""
    except (ssl.SSLError, ConnectionResetError, socket.timeout, OSError):
        return False


def client_config(ports: dict[int, int], ca: str, user: str, password: str,
                  mechanism: str = "PLAIN") -> dict:
    return {
        "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ports.values()),
        "security.protocol": "SASL_SSL", "ssl.ca.location": ca,
        "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
    }


def until(check, timeout_s: float, describe) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, describe()
        time.sleep(0.2)


def isr_sizes(admin: AdminClient, topic: str) -> list[int]:
    from confluent_kafka import TopicCollection
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
    return [len(p.isr) for p in described.partitions]


def sasl_logins(cluster) -> float:
    """SaslAuthenticate requests every node has answered (its /metrics)."""
    from test_admin_listener import metrics
    key = 'rill_requests_total{api="SaslAuthenticate"}'
    return sum(metrics(f"127.0.0.1:{n.admin_port}").get(key, 0.0) for n in cluster.nodes)


def deliver_all(producer: Producer, values: list[bytes], topic: str) -> list[str]:
    """Produce every value and flush; the errors reported (none expected)."""
    errors = []

    def done(err, _msg):
        if err is not None:
            errors.append(str(err))

    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % 3, on_delivery=done)
    assert producer.flush(60) == 0, "not every record was answered"
    return errors


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_brokers_replicate_and_commit_transactions_over_sasl_ssl(tmp_path, mechanism):
    nodes, ports, ca = secure_nodes(tmp_path, mechanism)
    admin_login = client_config(ports, ca, "admin", "admin-secret")
    with nodes as cluster:
        admin = AdminClient(admin_login)
        # The brokers' own SCRAM credential (Kafka bootstraps it with kafka-storage format
        # --add-scram) and alice's; made over PLAIN, before any topic needs a follower.
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        for user, password in (("admin", "admin-scram"), ("alice", "alice-scram")):
            for f in admin.alter_user_scram_credentials(
                    [UserScramCredentialUpsertion(user, info, password.encode())]).values():
                f.result(10)
        topic = f"secure-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[
            topic].result(15)
        until(lambda: isr_sizes(admin, topic) == [3, 3, 3], 30,
              lambda: f"ISR never 3 everywhere: {isr_sizes(admin, topic)}; the followers do "
                      f"not replicate over SASL_SSL")
        for operation in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE):
            binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                 "User:alice", "*", operation, AclPermissionType.ALLOW)
            admin.create_acls([binding])[binding].result(10)
        group = AclBinding(ResourceType.GROUP, "alice-", ResourcePatternType.PREFIXED,
                           "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
        admin.create_acls([group])[group].result(10)

        alice = client_config(ports, ca, "alice", "alice-scram", "SCRAM-SHA-512")
        producer = Producer({**alice, "acks": "all", "enable.idempotence": True})
        plain = [f"acked-{i}".encode() for i in range(300)]
        assert deliver_all(producer, plain, topic) == []

        txn = Producer({**admin_login, "transactional.id": f"txn-{uuid.uuid4().hex[:8]}"})
        txn.init_transactions(30)
        txn.begin_transaction()
        committed = [f"committed-{i}".encode() for i in range(30)]
        assert deliver_all(txn, committed, topic) == []
        txn.commit_transaction(30)
        txn.begin_transaction()
        assert deliver_all(txn, [f"aborted-{i}".encode() for i in range(9)], topic) == []
        txn.abort_transaction(30)
        # Brokers keep their connections to each other (cluster/peer.rs): ten more
        # transactions over three partitions (KIP-890 verifications, markers to each leader)
        # log in to no broker again, where a connection per request logged in each time.
        logins_before = sasl_logins(cluster)
        for round_ in range(10):
            txn.begin_transaction()
            more = [f"committed-more-{round_}-{i}".encode() for i in range(3)]
            assert deliver_all(txn, more, topic) == []
            committed += more
            txn.commit_transaction(30)
        new_logins = sasl_logins(cluster) - logins_before
        assert new_logins <= 4, f"{new_logins} SaslAuthenticate requests for ten transactions"

        consumer = Consumer({**alice, "group.id": f"alice-{uuid.uuid4().hex[:6]}",
                             "isolation.level": "read_committed",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(seen) < len(plain) + len(committed) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        consumer.close()
        assert sorted(seen) == sorted(plain + committed), (
            f"read_committed read {len(seen)} of {len(plain) + len(committed)}; "
            f"aborted seen: {[v for v in seen if v.startswith(b'aborted')][:3]}")
        assert isr_sizes(admin, topic) == [3, 3, 3]
        for node in cluster.nodes:
            assert controller_closes_plaintext(node.controller_port)
            assert not controller_takes_tls_without_a_certificate(node.controller_port, ca)
        topic2 = f"after-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic2, 1, 3)])[topic2].result(15)
        for node in cluster.nodes:
            log = node.log_text()
            assert "request to a peer broker failed" not in log, f"node {node.node_id}"
            assert "admin-secret" not in log and "admin-scram" not in log, "a password was logged"
