"""SASL re-authentication (KIP-368, `connections.max.reauth.ms`; issue 27 item 3; SECURITY.md,
"SASL").

One broker with a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-512) and
`connections.max.reauth.ms=2000`:
- SaslAuthenticate v1 answers `session_lifetime_ms=2000`; a client that does not authenticate
  again is closed on its first request after that (as Kafka's broker closes it);
- a client that re-authenticates (SaslHandshake then SaslAuthenticate on the same connection)
  as the same user goes on past the first expiry; as another user it is refused with Kafka's
  message and closed; with another mechanism, closed;
- confluent-kafka (librdkafka 2.16, which re-authenticates by itself) produces for 7 s over one
  connection with SCRAM-SHA-512: every record is delivered and the broker logged
  re-authentications.
"""

from __future__ import annotations

import time
import uuid

import kafka_wire as kw
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from broker import Broker, free_port
from conftest import _BROKERS

API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
ERR_ILLEGAL_SASL_STATE = 34
ERR_SASL_AUTHENTICATION_FAILED = 58
REAUTH_MS = 2000
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')


@pytest.fixture(scope="module")
def reauth(tmp_path_factory):
    root = tmp_path_factory.mktemp("reauth")
    sasl_port = free_port()
    config = root / "reauth.properties"
    broker = Broker(root / "data", root / "rill.log", config_path=config)
    config.write_text("\n".join([
        f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        f"connections.max.reauth.ms={REAUTH_MS}",
    ]) + "\n")
    _BROKERS.append(broker)
    broker.start()
    yield broker, sasl_port
    assert broker.stop() == 0
    assert "panicked" not in broker.log_text()


def handshake(conn: kw.Conn, mechanism: str, correlation_id: int) -> int:
    conn.send(kw.request(API_SASL_HANDSHAKE, 1, correlation_id, kw.kstring(mechanism)))
    got = conn.recv_response()
    assert got is not None, "SaslHandshake not answered"
    return kw.Reader(got[1]).take(">h")


def plain_login(conn: kw.Conn, user: str, password: str, correlation_id: int):
    """SaslAuthenticate v1 with a PLAIN token: (error, message, session lifetime ms), or None
    if the broker closed."""
    token = f"\0{user}\0{password}".encode()
    conn.send(kw.request(API_SASL_AUTHENTICATE, 1, correlation_id, kw.kbytes(token)))
    got = conn.recv_response()
    if got is None:
        return None
    r = kw.Reader(got[1])
    error, message = r.take(">h"), r.string()
    size = r.take(">i")
    r.pos += max(size, 0)
    return error, message, r.take(">q")


def metadata_answered(conn: kw.Conn, correlation_id: int) -> bool:
    conn.send(kw.request(kw.API_METADATA, 1, correlation_id, kw.metadata_v1_body([])))
    return conn.recv_response() is not None


def test_the_session_lifetime_is_given_and_an_expired_session_is_closed(reauth):
    _broker, port = reauth
    with kw.Conn("127.0.0.1", port) as conn:
        assert handshake(conn, "PLAIN", 1) == 0
        assert plain_login(conn, "alice", "alice-secret", 2) == (0, "", REAUTH_MS)
        assert metadata_answered(conn, 3)
        time.sleep(REAUTH_MS / 1000 + 0.5)
        assert not metadata_answered(conn, 4), "served after its authentication expired"


def test_re_authenticating_as_the_same_user_goes_on_and_as_another_is_refused(reauth):
    _broker, port = reauth
    with kw.Conn("127.0.0.1", port) as conn:
        assert handshake(conn, "PLAIN", 1) == 0
        assert plain_login(conn, "alice", "alice-secret", 2)[0] == 0
        time.sleep(REAUTH_MS / 1000 * 0.6)
        assert handshake(conn, "PLAIN", 3) == 0
        assert plain_login(conn, "alice", "alice-secret", 4) == (0, "", REAUTH_MS)
        time.sleep(REAUTH_MS / 1000 * 0.6)   # past the first authentication's expiry
        assert metadata_answered(conn, 5)
        assert handshake(conn, "PLAIN", 6) == 0
        error, message, _ = plain_login(conn, "bob", "bob-secret", 7)
        assert error == ERR_SASL_AUTHENTICATION_FAILED
        assert message == ("Cannot change principals during re-authentication from "
                           "User:alice: User:bob")
        assert conn.closed_by_peer()
    with kw.Conn("127.0.0.1", port) as conn:
        assert handshake(conn, "PLAIN", 1) == 0
        assert plain_login(conn, "alice", "alice-secret", 2)[0] == 0
        assert handshake(conn, "SCRAM-SHA-512", 3) == ERR_ILLEGAL_SASL_STATE
        assert conn.closed_by_peer()


def test_librdkafka_re_authenticates_by_itself_and_delivers_everything(reauth):
    broker, port = reauth
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    for f in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("carol", info, b"carol-pw")]).values():
        f.result(10)
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    before = broker.log_text().count("SASL re-authentication succeeded")
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": "carol", "sasl.password": "carol-pw",
                         "acks": "all", "linger.ms": 0})
    errors, sent = [], 0
    deadline = time.monotonic() + 7
    while time.monotonic() < deadline:
        producer.produce(topic, f"v{sent}".encode(),
                         on_delivery=lambda err, _m: errors.append(err))
        sent += 1
        producer.poll(0.1)
    assert producer.flush(30) == 0
    assert len(errors) == sent and not any(errors), [e for e in errors if e][:3]
    again = broker.log_text().count("SASL re-authentication succeeded") - before
    assert again >= 2, f"{again} re-authentications in 7 s with a 2 s lifetime"
    assert "its SASL authentication expired" not in broker.log_text().split(topic)[-1]
