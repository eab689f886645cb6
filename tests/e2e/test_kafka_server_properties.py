"""Kafka 4's own `config/server.properties`, with a secured broker's usual additions, starts Rill
unchanged apart from paths, ports and the loopback host (issue 27, "Done when").

The file is Kafka 4.x's KRaft combined-mode `server.properties` as shipped (process.roles,
node.id, `controller.quorum.bootstrap.servers`, its thread, socket and retention settings),
plus: a SASL_SSL listener with PLAIN and SCRAM-SHA-512, an mTLS listener
(`ssl.client.auth=required`, `ssl.principal.mapping.rules`), StandardAuthorizer and
`super.users`; PEM stores (certificates made by the test with trustme). Then real clients:
confluent-kafka's AdminClient logs in with PLAIN and makes a SCRAM-SHA-512 user; that user,
without ACLs, is refused the topic (TOPIC_AUTHORIZATION_FAILED); a super user produces over
SASL_SSL with SCRAM-SHA-512, and a super user's client certificate reads it back over mTLS.
"""

from __future__ import annotations

import uuid

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from broker import Broker, free_port, rill_binary
from conftest import _BROKERS

#: Kafka 4.x config/server.properties (KRaft, combined broker and controller), setting for
#: setting, with {placeholders} for the ports and the log directory.
KAFKA_SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={data}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""

#: What a secured Kafka broker adds: the listeners replaced, SASL, mTLS, the authorizer.
SECURITY_ADDITIONS = """\
listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl},MTLS://127.0.0.1:{mtls},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl},MTLS://127.0.0.1:{mtls},CONTROLLER://127.0.0.1:{controller}
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location={keystore}
listener.name.mtls.ssl.client.auth=required
listener.name.mtls.ssl.truststore.type=PEM
listener.name.mtls.ssl.truststore.location={ca}
listener.name.mtls.ssl.principal.mapping.rules=RULE:^CN=([^,]*),.*$/$1/,DEFAULT
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:carol;User:bob
allow.everyone.if.no.acl.found=false
"""


class KafkaConfiguredBroker(Broker):
    """A broker whose only argument is the properties file, as `kafka-server-start.sh` takes."""

    def command(self) -> list[str]:
        return [str(rill_binary()), "--config", str(self.config_path)]


@pytest.fixture
def secured(tmp_path):
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    keystore, ca_file = tmp_path / "broker.pem", tmp_path / "ca.pem"
    keystore.write_bytes(server.private_key_pem.bytes()
                         + b"".join(p.bytes() for p in server.cert_chain_pems))
    ca_file.write_bytes(ca.cert_pem.bytes())
    bob = ca.issue_cert("bob.example", common_name="bob")
    (tmp_path / "bob.key").write_bytes(bob.private_key_pem.bytes())
    (tmp_path / "bob.crt").write_bytes(bob.cert_chain_pems[0].bytes())
    config = tmp_path / "server.properties"
    broker = KafkaConfiguredBroker(tmp_path / "kraft-combined-logs", tmp_path / "rill.log",
                                   config_path=config)
    ports = {"plain": broker.port, "controller": free_port(), "sasl_ssl": free_port(),
             "mtls": free_port(), "data": broker.data_dir, "keystore": keystore, "ca": ca_file}
    config.write_text(KAFKA_SERVER_PROPERTIES.format(**ports)
                      + SECURITY_ADDITIONS.format(**ports))
    _BROKERS.append(broker)
    broker.start()
    yield broker, ports, tmp_path
    assert broker.stop() == 0
    assert "panicked" not in broker.log_text()


def test_kafkas_server_properties_with_sasl_ssl_mtls_and_the_authorizer_start_rill(secured):
    broker, ports, root = secured
    sasl = {"bootstrap.servers": f"127.0.0.1:{ports['sasl_ssl']}",
            "security.protocol": "SASL_SSL", "ssl.ca.location": str(ports["ca"])}
    admin = AdminClient({**sasl, "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                         "sasl.password": "admin-secret"})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    for user, password in (("carol", "carol-pw"), ("dave", "dave-pw")):
        for f in admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(user, info, password.encode())]).values():
            f.result(10)
    topic = f"kafka-props-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)

    def scram(user: str, password: str) -> dict:
        return {**sasl, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
                "sasl.password": password}

    # dave has no ACL: refused, as Kafka refuses him.
    refused = []
    dave = Producer({**scram("dave", "dave-pw"), "message.timeout.ms": 10000})
    dave.produce(topic, b"no", on_delivery=lambda err, _m: refused.append(err))
    dave.flush(15)
    assert refused and refused[0] is not None, "dave wrote without an ACL"
    assert refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused[0]

    carol = Producer({**scram("carol", "carol-pw"), "acks": "all"})
    errors = []
    for i in range(5):
        carol.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _m: errors.append(err))
    assert carol.flush(15) == 0 and errors == [None] * 5, errors

    bob = Consumer({"bootstrap.servers": f"127.0.0.1:{ports['mtls']}", "security.protocol": "SSL",
                    "ssl.ca.location": str(ports["ca"]),
                    "ssl.certificate.location": str(root / "bob.crt"),
                    "ssl.key.location": str(root / "bob.key"),
                    "group.id": "bob", "enable.auto.commit": False})
    bob.assign([TopicPartition(topic, 0, 0)])
    values = []
    for _ in range(40):
        msg = bob.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
        if len(values) == 5:
            break
    bob.close()
    assert values == [f"v{i}".encode() for i in range(5)]
    log = broker.log_text()
    assert "carol-pw" not in log and "admin-secret" not in log, "a password was logged"
