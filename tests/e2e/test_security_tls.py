"""TLS listeners (issue 27 item 2; SECURITY.md, "TLS"): real clients, certificates this test makes
(trustme: a CA, a server certificate for 127.0.0.1, client certificates for alice and bob).

One broker, three listeners, configured with Kafka's own properties:
  PLAINTEXT (the first), SSL (server-authenticated TLS), MTLS (an SSL listener with
  `listener.name.mtls.ssl.client.auth=required`, a PEM trust store, and
  `ssl.principal.mapping.rules` that admit CN=bob only).
- confluent-kafka and kafka-python produce and consume over SSL; kcat, confluent-kafka,
  kafka-python, aiokafka and kafkajs over mTLS with bob's certificate;
- on MTLS a client without a certificate, or with alice's (no mapping rule applies to her DN),
  is refused;
- a plaintext client on the SSL port gets nothing: no Kafka response, and the connection closes.
"""

from __future__ import annotations

import socket
import struct
import uuid

import kafka_wire as kw
import pytest
import trustme
from confluent_kafka import Consumer, Producer

from broker import Broker, free_port
from clients import kcat
from conftest import _BROKERS


#: `connections.max.idle.ms` of the TLS broker: long enough for every client exchange here.
IDLE_MS = 3000


class TlsBroker:
    def __init__(self, root):
        self.ca = trustme.CA()
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.files = {}
        for name, pem in {
            "server.pem": server.private_key_pem.bytes() + b"".join(
                p.bytes() for p in server.cert_chain_pems),
            "ca.pem": self.ca.cert_pem.bytes(),
        }.items():
            (root / name).write_bytes(pem)
            self.files[name] = str(root / name)
        for user in ("alice", "bob"):
            cert = self.ca.issue_cert(f"{user}.example", common_name=user)
            (root / f"{user}.key").write_bytes(cert.private_key_pem.bytes())
            (root / f"{user}.crt").write_bytes(cert.cert_chain_pems[0].bytes())
            self.files[user] = (str(root / f"{user}.crt"), str(root / f"{user}.key"))
        self.ssl_port, self.mtls_port = free_port(), free_port()
        config = root / "tls.properties"
        self.broker = Broker(root / "data", root / "rill.log", config_path=config)
        config.write_text("\n".join([
            f"listeners=PLAINTEXT://127.0.0.1:{self.broker.port},"
            f"SSL://127.0.0.1:{self.ssl_port},MTLS://127.0.0.1:{self.mtls_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={self.files['server.pem']}",
            "listener.name.mtls.ssl.client.auth=required",
            "listener.name.mtls.ssl.truststore.type=PEM",
            f"listener.name.mtls.ssl.truststore.location={self.files['ca.pem']}",
            r"listener.name.mtls.ssl.principal.mapping.rules=RULE:^CN=(bob),OU=.*$/$1/",
            f"connections.max.idle.ms={IDLE_MS}",
        ]) + "\n")

    def ssl_config(self, port: int, user: str | None = None) -> dict:
        config = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                  "ssl.ca.location": self.files["ca.pem"]}
        if user:
            config["ssl.certificate.location"], config["ssl.key.location"] = self.files[user]
        return config


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    t = TlsBroker(tmp_path_factory.mktemp("tls"))
    _BROKERS.append(t.broker)
    t.broker.start()
    yield t
    assert t.broker.stop() == 0
    assert "panicked" not in t.broker.log_text()


def round_trip(config: dict, topic: str, n: int = 5) -> list[bytes]:
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


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_confluent_kafka_and_kafka_python_over_ssl(tls):
    topic = unique("ssl")
    assert round_trip(tls.ssl_config(tls.ssl_port), topic) == [f"m{i}".encode() for i in range(5)]
    from kafka import KafkaConsumer, KafkaProducer
    common = {"bootstrap_servers": f"127.0.0.1:{tls.ssl_port}", "security_protocol": "SSL",
              "ssl_cafile": tls.files["ca.pem"]}
    producer = KafkaProducer(**common, acks="all")
    producer.send(topic, b"from-kafka-python").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, **common, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    values = []
    for m in consumer:
        values.append(m.value)
        if len(values) == 6:
            break
    consumer.close()
    assert values[-1] == b"from-kafka-python" and len(values) == 6, values


def test_kcat_and_confluent_kafka_over_mtls_with_a_mapped_certificate(tls):
    topic = unique("mtls")
    cert, key = tls.files["bob"]
    x = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={tls.files['ca.pem']}",
         "-X", f"ssl.certificate.location={cert}", "-X", f"ssl.key.location={key}"]
    bootstrap = f"127.0.0.1:{tls.mtls_port}"
    kcat(bootstrap, *x, "-P", "-t", topic, "-p", "0", input=b"one\ntwo\n")
    out = kcat(bootstrap, *x, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q")
    assert out.stdout.split() == [b"one", b"two"]
    got = round_trip(tls.ssl_config(tls.mtls_port, "bob"), unique("mtls-ck"))
    assert len(got) == 5


def test_kafka_python_aiokafka_and_kafkajs_over_mtls(tls):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    from kafka import KafkaConsumer, KafkaProducer

    from clients import kafkajs
    topic = unique("mtls-py")
    cert, key = tls.files["bob"]
    bootstrap = f"127.0.0.1:{tls.mtls_port}"
    common = {"bootstrap_servers": bootstrap, "security_protocol": "SSL",
              "ssl_cafile": tls.files["ca.pem"], "ssl_certfile": cert, "ssl_keyfile": key}
    producer = KafkaProducer(**common, acks="all")
    producer.send(topic, b"kafka-python").get(timeout=30)
    producer.close()

    async def aiokafka_round_trip() -> list[bytes]:
        context = create_ssl_context(cafile=tls.files["ca.pem"], certfile=cert, keyfile=key)
        secured = {"bootstrap_servers": bootstrap, "security_protocol": "SSL",
                   "ssl_context": context}
        p = AIOKafkaProducer(**secured, acks="all")
        await p.start()
        try:
            await p.send_and_wait(topic, b"aiokafka", partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, **secured, auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        try:
            got = []
            async for m in c:
                got.append(m.value)
                if len(got) == 2:
                    return got
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(aiokafka_round_trip(), 60)) == [b"kafka-python",
                                                                       b"aiokafka"]
    security = {"ssl": {"ca": tls.files["ca.pem"], "cert": cert, "key": key}}
    kafkajs(bootstrap, "produce", {"topic": topic, "partition": 0, "acks": -1,
                                   "messages": [{"value": "kafkajs"}], "security": security})
    got = kafkajs(bootstrap, "fetch", {"topic": topic, "partition": 0, "offset": 0, "count": 3,
                                       "security": security})
    assert [m["value"] for m in got] == ["kafka-python", "aiokafka", "kafkajs"], got
    consumer = KafkaConsumer(topic, **common, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    values = []
    for m in consumer:
        values.append(m.value)
        if len(values) == 3:
            break
    consumer.close()
    assert values == [b"kafka-python", b"aiokafka", b"kafkajs"], values
    # Alice's certificate maps to no principal: kafkajs is refused too.
    alice_cert, alice_key = tls.files["alice"]
    with pytest.raises(AssertionError):
        kafkajs(bootstrap, "list-topics",
                {"security": {"ssl": {"ca": tls.files["ca.pem"], "cert": alice_cert,
                                      "key": alice_key}}}, timeout_s=120)


def tls_handshake(port: int, ca: str, cert: tuple[str, str] | None) -> bytes | None:
    """ApiVersions v0 over TLS: the response body, or None if the broker refused (a failed
    handshake or a closed connection)."""
    import ssl
    context = ssl.create_default_context(cafile=ca)
    if cert:
        context.load_cert_chain(*cert)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s = context.wrap_socket(raw, server_hostname="127.0.0.1")
        s.sendall(kw.request(kw.API_VERSIONS, 0, 3, b""))
        head = s.recv(4)
        return head or None
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return None
    finally:
        raw.close()


def test_mtls_refuses_no_certificate_and_a_certificate_no_rule_maps(tls):
    ca = tls.files["ca.pem"]
    assert tls_handshake(tls.mtls_port, ca, tls.files["bob"]) is not None
    assert tls_handshake(tls.mtls_port, ca, None) is None
    assert tls_handshake(tls.mtls_port, ca, tls.files["alice"]) is None
    # The SSL listener asks for no certificate.
    assert tls_handshake(tls.ssl_port, ca, None) is not None


def test_a_plaintext_client_on_a_tls_port_gets_nothing(tls):
    conn = kw.Conn("127.0.0.1", tls.ssl_port, timeout_s=15)
    try:
        conn.send(kw.request(kw.API_VERSIONS, 0, 77, b""))
        got = b""
        while True:
            chunk = conn.sock.recv(4096)
            if not chunk:
                break
            got += chunk
    finally:
        conn.sock.close()
    # Nothing, or a TLS alert record (content type 21), never a Kafka response.
    assert got == b"" or got[0] == 21, got[:16]
    assert struct.pack(">i", 77) not in got


def test_an_idle_tls_connection_is_closed_after_connections_max_idle_ms(tls):
    import ssl
    import time
    context = ssl.create_default_context(cafile=tls.files["ca.pem"])
    raw = socket.create_connection(("127.0.0.1", tls.ssl_port), timeout=IDLE_MS / 1000 + 10)
    try:
        s = context.wrap_socket(raw, server_hostname="127.0.0.1")
        start = time.monotonic()
        try:
            assert s.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            pass
        took = time.monotonic() - start
        assert took >= IDLE_MS / 1000 * 0.9, f"closed after {took:.1f}s, before the idle bound"
    finally:
        raw.close()


def test_a_renewed_key_store_is_served_without_a_restart(tmp_path):
    """The SSL listener's key store file replaced by a certificate of another CA: within a few
    seconds new handshakes get the new certificate (clients trusting only the old CA are
    refused, clients trusting the new one connect and produce), without a restart; a key store
    replaced by garbage keeps the current certificate in service."""
    import time
    old_ca, new_ca = trustme.CA(), trustme.CA()
    keystore = tmp_path / "server.pem"

    def issue(ca) -> bytes:
        cert = ca.issue_cert("127.0.0.1", "localhost")
        return cert.private_key_pem.bytes() + b"".join(p.bytes() for p in cert.cert_chain_pems)

    keystore.write_bytes(issue(old_ca))
    cas = {}
    for name, ca in (("old", old_ca), ("new", new_ca)):
        cas[name] = str(tmp_path / f"{name}-ca.pem")
        (tmp_path / f"{name}-ca.pem").write_bytes(ca.cert_pem.bytes())
    ssl_port = free_port()
    config = tmp_path / "renew.properties"
    broker = Broker(tmp_path / "data", tmp_path / "rill.log", config_path=config)
    config.write_text("\n".join([
        f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
    ]) + "\n")
    _BROKERS.append(broker)
    broker.start()
    try:
        assert tls_handshake(ssl_port, cas["old"], None) is not None
        assert tls_handshake(ssl_port, cas["new"], None) is None
        starts = broker.starts
        # Written aside then renamed, as certificate tools (and cert-manager) replace files.
        renewed = tmp_path / "server.pem.new"
        renewed.write_bytes(issue(new_ca))
        renewed.replace(keystore)
        deadline = time.monotonic() + 10
        while tls_handshake(ssl_port, cas["new"], None) is None:
            assert time.monotonic() < deadline, "the renewed certificate is never served"
            time.sleep(0.2)
        assert tls_handshake(ssl_port, cas["old"], None) is None
        assert broker.starts == starts and broker.alive()
        config_new = {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
                      "ssl.ca.location": cas["new"]}
        assert len(round_trip(config_new, unique("renewed"))) == 5
        # A broken key store: the current certificate stays in service.
        keystore.write_bytes(b"not a key store")
        time.sleep(2.5)
        assert tls_handshake(ssl_port, cas["new"], None) is not None
        assert broker.logged_since(0, "key store changed but cannot be used")
    finally:
        assert broker.stop() == 0
    assert "panicked" not in broker.log_text()


def test_a_changed_trust_store_is_used_without_a_restart(tmp_path):
    """The mTLS listener's trust store file replaced by another CA's certificate: within a few
    seconds client certificates of the new CA are accepted and those of the old one refused,
    without a restart; a trust store replaced by garbage keeps the current one in service."""
    import time
    old_ca, new_ca = trustme.CA(), trustme.CA()
    server = old_ca.issue_cert("127.0.0.1", "localhost")
    files = {"server": tmp_path / "server.pem", "trust": tmp_path / "trust.pem",
             "server-ca": tmp_path / "server-ca.pem"}
    files["server"].write_bytes(server.private_key_pem.bytes() + b"".join(
        p.bytes() for p in server.cert_chain_pems))
    files["server-ca"].write_bytes(old_ca.cert_pem.bytes())
    files["trust"].write_bytes(old_ca.cert_pem.bytes())
    clients = {}
    for name, ca in (("old", old_ca), ("new", new_ca)):
        cert = ca.issue_cert(f"{name}.example", common_name=name)
        (tmp_path / f"{name}.key").write_bytes(cert.private_key_pem.bytes())
        (tmp_path / f"{name}.crt").write_bytes(cert.cert_chain_pems[0].bytes())
        clients[name] = (str(tmp_path / f"{name}.crt"), str(tmp_path / f"{name}.key"))
    mtls_port = free_port()
    config = tmp_path / "trust.properties"
    broker = Broker(tmp_path / "data", tmp_path / "rill.log", config_path=config)
    config.write_text("\n".join([
        f"listeners=PLAINTEXT://127.0.0.1:{broker.port},MTLS://127.0.0.1:{mtls_port}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,MTLS:SSL",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={files['server']}",
        "listener.name.mtls.ssl.client.auth=required",
        "listener.name.mtls.ssl.truststore.type=PEM",
        f"listener.name.mtls.ssl.truststore.location={files['trust']}",
    ]) + "\n")
    _BROKERS.append(broker)
    broker.start()
    ca = str(files["server-ca"])
    try:
        assert tls_handshake(mtls_port, ca, clients["old"]) is not None
        assert tls_handshake(mtls_port, ca, clients["new"]) is None
        starts = broker.starts
        changed = tmp_path / "trust.pem.new"
        changed.write_bytes(new_ca.cert_pem.bytes())
        changed.replace(files["trust"])
        deadline = time.monotonic() + 10
        while tls_handshake(mtls_port, ca, clients["new"]) is None:
            assert time.monotonic() < deadline, "the new trust store is never used"
            time.sleep(0.2)
        assert tls_handshake(mtls_port, ca, clients["old"]) is None
        assert broker.starts == starts and broker.alive()
        new_client = {"bootstrap.servers": f"127.0.0.1:{mtls_port}", "security.protocol": "SSL",
                      "ssl.ca.location": ca, "ssl.certificate.location": clients["new"][0],
                      "ssl.key.location": clients["new"][1]}
        assert len(round_trip(new_client, unique("trusted"))) == 5
        files["trust"].write_bytes(b"not a trust store")
        time.sleep(2.5)
        assert tls_handshake(mtls_port, ca, clients["new"]) is not None
        assert broker.logged_since(0, "trust store changed but cannot be used")
    finally:
        assert broker.stop() == 0
    assert "panicked" not in broker.log_text()
