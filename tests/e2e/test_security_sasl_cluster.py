"""SCRAM credentials in a cluster live in the metadata log (issue 27 item 3; SECURITY.md, "SASL").

A real 3-node cluster (rill.shards=1): each node has a PLAINTEXT listener (inter-broker), a
SASL_PLAINTEXT one with SCRAM-SHA-256 and SCRAM-SHA-512, and its CONTROLLER listener. A user made
with AlterUserScramCredentials on one node (kafka-python's admin) logs in on every node; a node
restarted logs them in again from its metadata (log or snapshot). The SCRAM exchange here is
written from RFC 5802 with Python's hashlib/hmac, so the server's signature is checked too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time

import kafka_wire as kw

from broker import free_port
from cluster import Cluster, running
from conftest import _BROKERS

API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36


def sasl_request(conn: kw.Conn, api: int, version: int, body: bytes) -> bytes | None:
    conn.send(kw.request(api, version, 1, body))
    got = conn.recv_response()
    return None if got is None else got[1]


def scram_login(port: int, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    """A whole SCRAM exchange over raw SaslHandshake v1 / SaslAuthenticate v0; True when the
    broker accepted the proof and its own signature checks out."""
    digest = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mechanism]
    with kw.Conn("127.0.0.1", port) as conn:
        body = sasl_request(conn, API_SASL_HANDSHAKE, 1, kw.kstring(mechanism))
        assert body is not None and body[:2] == b"\0\0", body

        def authenticate(token: bytes) -> bytes | None:
            answer = sasl_request(conn, API_SASL_AUTHENTICATE, 0, kw.kbytes(token))
            if answer is None:
                return None
            r = kw.Reader(answer)
            error, _message = r.take(">h"), r.string()
            size = r.take(">i")
            return None if error else r.data[r.pos:r.pos + size]

        nonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = f"n={user},r={nonce}"
        server_first = authenticate(f"n,,{first_bare}".encode())
        if server_first is None:
            return False
        fields = dict(f.split("=", 1) for f in server_first.decode().split(","))
        assert fields["r"].startswith(nonce)
        salted = hashlib.pbkdf2_hmac(digest().name, password.encode(),
                                     base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", digest).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth = f"{first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(digest(client_key).digest(), auth, digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_final = authenticate(f"{without_proof},p={base64.b64encode(proof).decode()}"
                                    .encode())
        if server_final is None:
            return False
        server_key = hmac.new(salted, b"Server Key", digest).digest()
        expected = base64.b64encode(hmac.new(server_key, auth, digest).digest()).decode()
        assert server_final.decode() == f"v={expected}", "the server's signature is wrong"
        return True


def until(check, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def test_a_scram_user_logs_in_on_every_node_and_after_a_restart(tmp_path):
    cluster = Cluster(tmp_path, **{"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"})
    sasl_ports = {}
    for node in cluster.nodes:
        port = sasl_ports[node.node_id] = free_port()
        text = node.config_path.read_text().replace(
            f"listeners=PLAINTEXT://127.0.0.1:{node.port},",
            f"listeners=PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{port},")
        text = text.replace(
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{port}")
        node.config_path.write_text(text)
    with running(cluster, _BROKERS):
        for port in sasl_ports.values():
            assert not scram_login(port, "carol", "pw"), "an unknown user logged in"
        from kafka.admin import KafkaAdminClient, UserScramCredentialUpsertion
        client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(1))
        try:
            result = client.alter_user_scram_credentials([
                UserScramCredentialUpsertion("carol", "SCRAM-SHA-256", "pw"),
                UserScramCredentialUpsertion("carol512", "SCRAM-SHA-512", "pw5", iterations=8192),
            ])
        finally:
            client.close()
        assert result == {"carol": None, "carol512": None}, result
        for node_id, port in sasl_ports.items():
            assert until(lambda: scram_login(port, "carol", "pw")), f"node {node_id}"
            assert scram_login(port, "carol512", "pw5", "SCRAM-SHA-512"), f"node {node_id}"
            assert not scram_login(port, "carol", "wrong"), f"node {node_id}: wrong password"
        cluster.node(2).restart()
        assert until(lambda: scram_login(sasl_ports[2], "carol", "pw")), "after a restart"
