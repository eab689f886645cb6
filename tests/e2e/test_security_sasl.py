"""SASL listeners (issue 27 item 3; SECURITY.md, "SASL"): real clients, one broker.

Three listeners, configured with Kafka's own properties:
  PLAINTEXT (the first), SASL_PLAINTEXT and SASL_SSL (certificates trustme makes here), each SASL
  one with `sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512` and the PLAIN users in
  `listener.name.<l>.plain.sasl.jaas.config`.
- confluent-kafka (librdkafka) and kafka-python produce and consume with PLAIN, SCRAM-SHA-256 and
  SCRAM-SHA-512 over SASL_PLAINTEXT, and over SASL_SSL;
- SCRAM users are made with AlterUserScramCredentials (kafka-python's admin, itself logged in
  with PLAIN), described with DescribeUserScramCredentials, deleted, and still log in after the
  broker restarts;
- a wrong password is answered SASL_AUTHENTICATION_FAILED with Kafka's message, then closed;
- before authentication a Produce or a Metadata closes the connection unanswered, as does an
  unknown mechanism (after its UNSUPPORTED_SASL_MECHANISM answer) and an oversized frame.
"""

from __future__ import annotations

import struct
import uuid

import kafka_wire as kw
import pytest
import trustme
from confluent_kafka import Consumer, KafkaException, Producer

from broker import Broker, free_port
from conftest import _BROKERS

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" '
              'user_admin="admin-secret" user_alice="alice-secret";')
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"

ERR_UNSUPPORTED_SASL_MECHANISM = 33
ERR_ILLEGAL_SASL_STATE = 34
ERR_SASL_AUTHENTICATION_FAILED = 58
API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36


class SaslBroker:
    def __init__(self, root):
        self.ca = trustme.CA()
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.server_pem = root / "server.pem"
        self.server_pem.write_bytes(server.private_key_pem.bytes() + b"".join(
            p.bytes() for p in server.cert_chain_pems))
        self.ca_pem = root / "ca.pem"
        self.ca_pem.write_bytes(self.ca.cert_pem.bytes())
        self.sasl_port, self.ssl_port = free_port(), free_port()
        config = root / "sasl.properties"
        self.broker = Broker(root / "data", root / "rill.log", config_path=config)
        lines = [
            f"listeners=PLAINTEXT://127.0.0.1:{self.broker.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},SASL_SSL://127.0.0.1:{self.ssl_port}",
            f"sasl.enabled.mechanisms={MECHANISMS}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={self.server_pem}",
        ]
        for listener in ("sasl_plaintext", "sasl_ssl"):
            lines.append(f"listener.name.{listener}.plain.sasl.jaas.config={PLAIN_JAAS}")
        lines.append("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
                     "org.apache.kafka.common.security.scram.ScramLoginModule required;")
        config.write_text("\n".join(lines) + "\n")

    def confluent(self, mechanism: str, user: str, password: str, tls: bool = False) -> dict:
        config = {
            "bootstrap.servers": f"127.0.0.1:{self.ssl_port if tls else self.sasl_port}",
            "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
        }
        if tls:
            config["ssl.ca.location"] = str(self.ca_pem)
        return config

    def kafka_python(self, mechanism: str, user: str, password: str, tls: bool = False) -> dict:
        config = {
            "bootstrap_servers": f"127.0.0.1:{self.ssl_port if tls else self.sasl_port}",
            "security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
        if tls:
            config["ssl_cafile"] = str(self.ca_pem)
        return config


@pytest.fixture(scope="module")
def sasl(tmp_path_factory):
    s = SaslBroker(tmp_path_factory.mktemp("sasl"))
    _BROKERS.append(s.broker)
    s.broker.start()
    yield s
    assert s.broker.stop() == 0
    assert "panicked" not in s.broker.log_text()
    assert "alice-secret" not in s.broker.log_text(), "a password was logged"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def confluent_round_trip(config: dict, topic: str, n: int = 3) -> list[bytes]:
    p = Producer({**config, "acks": "all"})
    for i in range(n):
        p.produce(topic, f"m{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    for _ in range(100):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
        if len(got) == n:
            break
    c.close()
    return got


def kafka_python_round_trip(config: dict, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer
    producer = KafkaProducer(**config, acks="all")
    producer.send(topic, b"from-kafka-python").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, **config, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    values = []
    for m in consumer:
        values.append(m.value)
        break
    consumer.close()
    return values


def admin(sasl):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(**sasl.kafka_python("PLAIN", "admin", "admin-secret"))


def create_scram_users(sasl, users: dict[str, tuple[str, str]]) -> None:
    """users: name -> (mechanism, password), made through AlterUserScramCredentials."""
    from kafka.admin import UserScramCredentialUpsertion
    client = admin(sasl)
    try:
        result = client.alter_user_scram_credentials([
            UserScramCredentialUpsertion(user, mechanism, password, iterations=4096)
            for user, (mechanism, password) in users.items()])
    finally:
        client.close()
    assert result == {user: None for user in users}, result


def test_plain_with_confluent_kafka_and_kafka_python(sasl):
    topic = unique("plain")
    got = confluent_round_trip(sasl.confluent("PLAIN", "alice", "alice-secret"), topic)
    assert got == [b"m0", b"m1", b"m2"]
    config = sasl.kafka_python("PLAIN", "alice", "alice-secret")
    assert kafka_python_round_trip(config, topic) == [b"m0"]


def test_scram_users_made_by_alter_user_scram_credentials_log_in(sasl):
    create_scram_users(sasl, {"s256": ("SCRAM-SHA-256", "pw-256"),
                              "s512": ("SCRAM-SHA-512", "pw-512")})
    for mechanism, user, password in (("SCRAM-SHA-256", "s256", "pw-256"),
                                      ("SCRAM-SHA-512", "s512", "pw-512")):
        topic = unique(user)
        assert len(confluent_round_trip(sasl.confluent(mechanism, user, password), topic)) == 3
        config = sasl.kafka_python(mechanism, user, password)
        assert kafka_python_round_trip(config, topic) == [b"m0"]
    client = admin(sasl)
    try:
        described = client.describe_user_scram_credentials(["s256", "s512", "nobody"])
    finally:
        client.close()
    assert described["s256"]["error"] is None
    assert [(int(c["mechanism"]), c["iterations"])
            for c in described["s512"]["credential_infos"]] == [(2, 4096)]
    assert "does not exist" in described["nobody"]["error"]


def test_sasl_ssl_with_real_certificates(sasl):
    create_scram_users(sasl, {"tls512": ("SCRAM-SHA-512", "pw-tls")})
    topic = unique("sasl-ssl")
    config = sasl.confluent("SCRAM-SHA-512", "tls512", "pw-tls", tls=True)
    assert len(confluent_round_trip(config, topic)) == 3
    config = sasl.kafka_python("PLAIN", "alice", "alice-secret", tls=True)
    assert kafka_python_round_trip(config, topic) == [b"m0"]


def test_kafkajs_and_kafka_python_over_sasl_ssl_with_scram_sha_512(sasl):
    from clients import kafkajs
    create_scram_users(sasl, {"js512": ("SCRAM-SHA-512", "pw-js")})
    topic = unique("js-sasl-ssl")
    config = sasl.kafka_python("SCRAM-SHA-512", "js512", "pw-js", tls=True)
    assert kafka_python_round_trip(config, topic) == [b"from-kafka-python"]
    bootstrap = f"127.0.0.1:{sasl.ssl_port}"

    def security(password: str) -> dict:
        return {"ssl": {"ca": str(sasl.ca_pem)},
                "sasl": {"mechanism": "scram-sha-512", "username": "js512", "password": password}}

    kafkajs(bootstrap, "produce", {"topic": topic, "partition": 0, "acks": -1,
                                   "messages": [{"value": "js0"}, {"value": "js1"}],
                                   "security": security("pw-js")})
    got = kafkajs(bootstrap, "fetch", {"topic": topic, "partition": 0, "offset": 0, "count": 3,
                                       "security": security("pw-js")})
    assert [m["value"] for m in got] == ["from-kafka-python", "js0", "js1"], got
    with pytest.raises(AssertionError) as refused:
        kafkajs(bootstrap, "list-topics", {"security": security("wrong")})
    assert "SASL SCRAM SHA512 authentication failed" in str(refused.value) \
        or "SASL_AUTHENTICATION_FAILED" in str(refused.value), str(refused.value)[-1500:]


def handshake(conn: kw.Conn, mechanism: str, correlation_id: int = 1) -> tuple[int, list[str]]:
    conn.send(kw.request(API_SASL_HANDSHAKE, 1, correlation_id, kw.kstring(mechanism)))
    got = conn.recv_response()
    assert got is not None, "SaslHandshake not answered"
    r = kw.Reader(got[1])
    error = r.take(">h")
    mechanisms = [r.string() for _ in range(r.take(">i"))]
    return error, mechanisms


def authenticate(conn: kw.Conn, token: bytes, correlation_id: int = 2):
    """SaslAuthenticate v0: (error, message, auth bytes), or None if the broker closed."""
    conn.send(kw.request(API_SASL_AUTHENTICATE, 0, correlation_id, kw.kbytes(token)))
    got = conn.recv_response()
    if got is None:
        return None
    r = kw.Reader(got[1])
    error, message = r.take(">h"), r.string()
    size = r.take(">i")
    return error, message, r.data[r.pos:r.pos + max(size, 0)]


def test_a_wrong_password_is_refused_and_closed(sasl):
    with kw.Conn("127.0.0.1", sasl.sasl_port) as conn:
        error, mechanisms = handshake(conn, "PLAIN")
        assert (error, sorted(mechanisms)) == (0, MECHANISMS.split(","))
        error, message, _ = authenticate(conn, b"\0alice\0wrong")
        assert error == ERR_SASL_AUTHENTICATION_FAILED
        assert message == "Authentication failed: Invalid username or password"
        assert conn.closed_by_peer()
    with kw.Conn("127.0.0.1", sasl.sasl_port) as conn:
        handshake(conn, "SCRAM-SHA-256")
        error, message, _ = authenticate(conn, b"n,,n=nobody,r=abcdef")
        assert error == ERR_SASL_AUTHENTICATION_FAILED
        assert message == ("Authentication failed during authentication due to invalid "
                           "credentials with SASL mechanism SCRAM-SHA-256")
        assert conn.closed_by_peer()
    errors = []
    p = Producer({**sasl.confluent("SCRAM-SHA-512", "s512-none", "bad"),
                  "reconnect.backoff.ms": 1000, "error_cb": lambda e: errors.append(e)})
    with pytest.raises(KafkaException):
        p.list_topics(timeout=2)
    p.poll(1)  # serves error_cb
    assert any("uthentication" in str(e) for e in errors), errors


def test_before_authentication_other_apis_close_the_connection(sasl):
    produce = kw.request(0, 3, 5, kw.produce_v3_body({"t": {0: kw.record_batch([b"x"])}}))
    with kw.Conn("127.0.0.1", sasl.sasl_port) as conn:
        conn.send(produce)
        assert conn.recv_response() is None, "a Produce before authentication was answered"
    with kw.Conn("127.0.0.1", sasl.sasl_port) as conn:
        conn.send(kw.request(kw.API_VERSIONS, 0, 1, b""))
        assert conn.recv_response()[0] == 1, "ApiVersions is served before authentication"
        conn.send(kw.request(3, 1, 2, kw.metadata_v1_body(None)))
        assert conn.recv_response() is None, "a Metadata before authentication was answered"
    with kw.Conn("127.0.0.1", sasl.sasl_port) as conn:
        handshake(conn, "PLAIN")
        conn.send(produce)
        # Rill closes unanswered; Kafka answers ILLEGAL_SASL_STATE first (COMPATIBILITY.md H10).
        answer = conn.recv_response()
        assert answer is None or conn.closed_by_peer(), "a Produce between the two was served"
    with kw.Conn("127.0.0.1", sasl.sasl_port) as conn:
        error, mechanisms = handshake(conn, "GSSAPI")
        assert (error, sorted(mechanisms)) == (ERR_UNSUPPORTED_SASL_MECHANISM,
                                               MECHANISMS.split(","))
        assert conn.closed_by_peer()
    with kw.Conn("127.0.0.1", sasl.sasl_port) as conn:
        # Over sasl.server.max.receive.size (512 KiB) before authentication.
        conn.send(struct.pack(">i", 600_000) + b"\0" * 1024)
        assert conn.closed_by_peer()
    # The PLAINTEXT listener has no SASL: a SaslHandshake there is ILLEGAL_SASL_STATE.
    with kw.Conn("127.0.0.1", sasl.broker.port) as conn:
        assert handshake(conn, "PLAIN")[0] == ERR_ILLEGAL_SASL_STATE


def test_kcat_and_aiokafka_over_sasl_ssl_with_scram_sha_512(sasl):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    from clients import kcat
    create_scram_users(sasl, {"cli512": ("SCRAM-SHA-512", "pw-cli")})
    topic = unique("cli")
    x = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={sasl.ca_pem}",
         "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=cli512",
         "-X", "sasl.password=pw-cli"]
    bootstrap = f"127.0.0.1:{sasl.ssl_port}"
    kcat(bootstrap, *x, "-P", "-t", topic, "-p", "0", input=b"one\ntwo\n")
    out = kcat(bootstrap, *x, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q")
    assert out.stdout.split() == [b"one", b"two"]

    async def aiokafka_round_trip() -> list[bytes]:
        common = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_SSL",
                  "ssl_context": create_ssl_context(cafile=str(sasl.ca_pem)),
                  "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "cli512",
                  "sasl_plain_password": "pw-cli"}
        producer = AIOKafkaProducer(**common, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"three", partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **common, auto_offset_reset="earliest")
        await consumer.start()
        try:
            values = []
            while len(values) < 3:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                for messages in batch.values():
                    values.extend(m.value for m in messages)
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(aiokafka_round_trip()) == [b"one", b"two", b"three"]


def test_deleted_users_cannot_log_in_and_users_survive_a_restart(sasl):
    from kafka.admin import UserScramCredentialDeletion
    create_scram_users(sasl, {"keep": ("SCRAM-SHA-256", "kept"),
                              "drop": ("SCRAM-SHA-512", "dropped")})
    client = admin(sasl)
    try:
        assert client.alter_user_scram_credentials(
            [UserScramCredentialDeletion("drop", "SCRAM-SHA-512")]) == {"drop": None}
        again = client.alter_user_scram_credentials(
            [UserScramCredentialDeletion("drop", "SCRAM-SHA-512")])
        assert "does not exist" in again["drop"], again
    finally:
        client.close()
    sasl.broker.restart()
    topic = unique("restart")
    assert len(confluent_round_trip(sasl.confluent("SCRAM-SHA-256", "keep", "kept"), topic)) == 3
    with kw.Conn("127.0.0.1", sasl.sasl_port) as conn:
        handshake(conn, "SCRAM-SHA-512")
        error, _, _ = authenticate(conn, b"n,,n=drop,r=abcdef")
        assert error == ERR_SASL_AUTHENTICATION_FAILED

