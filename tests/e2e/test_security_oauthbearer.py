"""SASL/OAUTHBEARER with unsecured JWTs (issue 27 item 3; SECURITY.md, "SASL"): real clients,
one broker, as Kafka's broker serves OAUTHBEARER by default (OAuthBearerUnsecuredValidator-
CallbackHandler).

The broker runs the StandardAuthorizer (super user User:admin), `connections.max.reauth.ms=30000`
and two SASL_PLAINTEXT listeners offering OAUTHBEARER: OAUTH (JAAS line with no validator
options) and SCOPED (`unsecuredValidatorRequiredScope="kafka"`).
- confluent-kafka (librdkafka, which builds an unsecured JWT itself with
  `enable.sasl.oauthbearer.unsecure.jwt`) as alice produces and consumes with ACLs for
  User:alice; bob, without ACLs, gets TOPIC_AUTHORIZATION_FAILED: the principal is the token's
  `sub`;
- on SCOPED, a token with scope kafka logs in and one without is refused;
- a raw client: an invalid token (signed, expired, a non-string sub) is answered with the error
  challenge `{"status":"invalid_token"}` (`insufficient_scope` with the scope on SCOPED), its
  `\\x01` then fails with SASL_AUTHENTICATION_FAILED and the connection is closed; a malformed
  message fails at once with Kafka's message;
- the answered session lifetime is min(connections.max.reauth.ms, exp - now), and a connection
  whose token expired is closed on its next request.
"""

from __future__ import annotations

import base64
import json
import math
import time
import uuid

import kafka_wire as kw
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from broker import Broker, free_port
from conftest import _BROKERS

JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
        'unsecuredLoginStringClaim_sub="admin";')
SCOPED_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
               'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="kafka";')
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
REAUTH_MS = 30000
API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
ERR_SASL_AUTHENTICATION_FAILED = 58
INVALID_TOKEN = b'{"status":"invalid_token"}'
GENERIC = ("Authentication failed during authentication due to invalid credentials with SASL "
           "mechanism OAUTHBEARER")


class OAuthBroker:
    def __init__(self, root):
        self.oauth_port, self.scoped_port = free_port(), free_port()
        config = root / "oauth.properties"
        self.broker = Broker(root / "data", root / "rill.log", config_path=config)
        config.write_text("\n".join([
            f"listeners=PLAINTEXT://127.0.0.1:{self.broker.port},"
            f"OAUTH://127.0.0.1:{self.oauth_port},SCOPED://127.0.0.1:{self.scoped_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OAUTH:SASL_PLAINTEXT,"
            "SCOPED:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms=OAUTHBEARER",
            f"listener.name.oauth.oauthbearer.sasl.jaas.config={JAAS}",
            f"listener.name.scoped.oauthbearer.sasl.jaas.config={SCOPED_JAAS}",
            f"connections.max.reauth.ms={REAUTH_MS}",
            f"authorizer.class.name={AUTHORIZER}",
            "super.users=User:admin",
        ]) + "\n")

    def config(self, principal: str, scope: str = "", scoped: bool = False) -> dict:
        claims = f"principal={principal}" + (f" scope={scope}" if scope else "")
        return {
            "bootstrap.servers": f"127.0.0.1:{self.scoped_port if scoped else self.oauth_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": claims,
        }


@pytest.fixture(scope="module")
def oauth(tmp_path_factory):
    o = OAuthBroker(tmp_path_factory.mktemp("oauth"))
    _BROKERS.append(o.broker)
    o.broker.start()
    yield o
    assert o.broker.stop() == 0
    assert "panicked" not in o.broker.log_text()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def b64url(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def jwt(claims: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{b64url(header or {'alg': 'none'})}.{b64url(claims)}.{signature}"


def claims(sub="alice", lifetime_s: float = 3600, **more) -> dict:
    now = time.time()
    # exp to the whole millisecond below: the broker rounds exp to milliseconds and reads its
    # clock in whole ones, so a remaining lifetime is then never a rounding over lifetime_s.
    exp = math.floor((now + lifetime_s) * 1000) / 1000
    return {"sub": sub, "iat": int(now), "exp": exp, **more}


def first_message(token: str) -> bytes:
    return b"n,,\x01auth=Bearer " + token.encode() + b"\x01\x01"


def handshake(conn: kw.Conn, correlation_id: int = 1) -> int:
    conn.send(kw.request(API_SASL_HANDSHAKE, 1, correlation_id, kw.kstring("OAUTHBEARER")))
    got = conn.recv_response()
    assert got is not None, "SaslHandshake not answered"
    return kw.Reader(got[1]).take(">h")


def authenticate(conn: kw.Conn, token: bytes, correlation_id: int = 2):
    """SaslAuthenticate v1: (error, message, auth bytes, session lifetime ms), or None if the
    broker closed."""
    conn.send(kw.request(API_SASL_AUTHENTICATE, 1, correlation_id, kw.kbytes(token)))
    got = conn.recv_response()
    if got is None:
        return None
    r = kw.Reader(got[1])
    error, message = r.take(">h"), r.string()
    size = r.take(">i")
    auth = r.data[r.pos:r.pos + max(size, 0)]
    r.pos += max(size, 0)
    return error, message, auth, r.take(">q")


def create_topic(oauth: OAuthBroker, topic: str) -> None:
    admin = AdminClient(oauth.config("admin"))
    for f in admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=15).values():
        f.result()


def allow(oauth: OAuthBroker, principal: str, topic: str, group: str) -> None:
    admin = AdminClient(oauth.config("admin"))
    bindings = [AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", op,
                           AclPermissionType.ALLOW)
                for rtype, name, op in [(ResourceType.TOPIC, topic, AclOperation.WRITE),
                                        (ResourceType.TOPIC, topic, AclOperation.READ),
                                        (ResourceType.GROUP, group, AclOperation.READ)]]
    for f in admin.create_acls(bindings, request_timeout=10).values():
        f.result()


def produce(config: dict, topic: str, n: int = 3) -> list:
    """Delivery errors of n records (None for each delivered)."""
    errors = []
    p = Producer({**config, "acks": "all", "message.timeout.ms": 10000})
    for i in range(n):
        p.produce(topic, f"m{i}".encode(), on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    return errors


def consume(config: dict, topic: str, group: str, want: int, seconds: float = 15) -> list:
    from confluent_kafka import Consumer
    c = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(got) < want:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def test_librdkafka_produces_and_consumes_as_the_tokens_principal(oauth):
    topic, group = unique("oauth"), unique("g")
    create_topic(oauth, topic)
    allow(oauth, "User:alice", topic, group)
    alice = oauth.config("alice")
    assert produce(alice, topic) == [None, None, None]
    assert consume(alice, topic, group, 3) == [b"m0", b"m1", b"m2"]
    bob = oauth.config("bob")
    assert [e.code() for e in produce(bob, topic, 1)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_a_required_scope_is_needed(oauth):
    topic = unique("scoped")
    create_topic(oauth, topic)
    allow(oauth, "User:alice", topic, unique("g"))
    assert produce(oauth.config("alice", "kafka", scoped=True), topic, 1) == [None]
    errors = []
    p = Producer({**oauth.config("alice", "other", scoped=True),
                  "reconnect.backoff.ms": 1000, "error_cb": lambda e: errors.append(e)})
    with pytest.raises(KafkaException):
        p.list_topics(timeout=3)
    p.poll(1)  # serves error_cb
    assert any("insufficient_scope" in str(e) or "uthentication" in str(e) for e in errors), errors
    # The raw exchange: Kafka's challenge names the required scope.
    with kw.Conn("127.0.0.1", oauth.scoped_port) as conn:
        assert handshake(conn) == 0
        error, _, challenge, _ = authenticate(conn, first_message(jwt(claims(scope=["other"]))))
        assert (error, challenge) == (0, b'{"status":"insufficient_scope", "scope":"[kafka]"}')
        error, message, _, _ = authenticate(conn, b"\x01", 3)
        assert error == ERR_SASL_AUTHENTICATION_FAILED
        assert message == challenge.decode()
        assert conn.closed_by_peer()
    with kw.Conn("127.0.0.1", oauth.scoped_port) as conn:
        handshake(conn)
        error, _, reply, _ = authenticate(conn, first_message(jwt(claims(scope="kafka"))))
        assert (error, reply) == (0, b"")


@pytest.mark.parametrize("token", [
    jwt(claims(), header={"alg": "HS256"}),
    jwt(claims(), signature="c2lnbmF0dXJl"),
    jwt(claims(lifetime_s=-5)),
    jwt(claims(sub=42)),
    jwt({"sub": "alice"}),
    jwt(claims(iat=int(time.time()) + 3600, lifetime_s=7200)),
], ids=["signed", "signature", "expired", "sub-not-a-string", "no-exp", "iat-in-the-future"])
def test_an_invalid_token_gets_the_challenge_then_fails_and_is_closed(oauth, token):
    with kw.Conn("127.0.0.1", oauth.oauth_port) as conn:
        assert handshake(conn) == 0
        error, message, challenge, lifetime = authenticate(conn, first_message(token))
        assert (error, message or None, challenge, lifetime) == (0, None, INVALID_TOKEN, 0)
        error, message, _, _ = authenticate(conn, b"\x01", 3)
        assert error == ERR_SASL_AUTHENTICATION_FAILED
        # Kafka's OAuthBearerSaslServer fails with the challenge as its message.
        assert message == INVALID_TOKEN.decode()
        assert conn.closed_by_peer()


def test_a_malformed_message_fails_at_once(oauth):
    for message in [b"", b"n,,\x01auth=Basic abc\x01\x01", b"n,,\x01user=alice\x01\x01",
                    first_message(jwt(claims()))[:-1]]:
        with kw.Conn("127.0.0.1", oauth.oauth_port) as conn:
            handshake(conn)
            error, told, _, _ = authenticate(conn, message)
            assert (error, told) == (ERR_SASL_AUTHENTICATION_FAILED, GENERIC), message
            assert conn.closed_by_peer()


def test_the_session_lifetime_is_the_lesser_of_reauth_and_the_token(oauth):
    with kw.Conn("127.0.0.1", oauth.oauth_port) as conn:
        handshake(conn)
        error, _, _, lifetime = authenticate(conn, first_message(jwt(claims(lifetime_s=3600))))
        assert (error, lifetime) == (0, REAUTH_MS)
    with kw.Conn("127.0.0.1", oauth.oauth_port) as conn:
        handshake(conn)
        error, _, _, lifetime = authenticate(conn, first_message(jwt(claims(lifetime_s=10))))
        assert error == 0 and 8000 < lifetime <= 10000, lifetime
    # A token that expires before connections.max.reauth.ms closes its connection at expiry.
    with kw.Conn("127.0.0.1", oauth.oauth_port) as conn:
        handshake(conn)
        error, _, _, lifetime = authenticate(conn, first_message(jwt(claims(lifetime_s=2))))
        assert error == 0 and 0 < lifetime <= 2000, lifetime
        conn.send(kw.request(3, 1, 3, kw.metadata_v1_body([])))
        assert conn.recv_response() is not None, "served before the token expired"
        time.sleep(lifetime / 1000 + 0.5)
        conn.send(kw.request(3, 1, 4, kw.metadata_v1_body([])))
        assert conn.recv_response() is None, "served after the token expired"


def test_a_reauthentication_needs_the_same_principal(oauth):
    with kw.Conn("127.0.0.1", oauth.oauth_port) as conn:
        handshake(conn)
        assert authenticate(conn, first_message(jwt(claims())))[0] == 0
        assert handshake(conn, 3) == 0, "a re-authentication begins"
        assert authenticate(conn, first_message(jwt(claims())), 4)[0] == 0
        assert handshake(conn, 5) == 0
        error, message, _, _ = authenticate(conn, first_message(jwt(claims(sub="bob"))), 6)
        assert error == ERR_SASL_AUTHENTICATION_FAILED
        assert message == ("Cannot change principals during re-authentication from User:alice: "
                           "User:bob")
        assert conn.closed_by_peer()


def test_a_broker_with_another_validator_does_not_start(tmp_path):
    port = free_port()
    config = tmp_path / "jwks.properties"
    broker = Broker(tmp_path / "data", tmp_path / "rill.log", config_path=config)
    config.write_text("\n".join([
        f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms=OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    ]) + "\n")
    broker.spawn()
    assert broker.proc.wait(timeout=30) != 0, "started with a validator it does not run"
    assert "only Kafka's unsecured validator" in broker.log_text()
