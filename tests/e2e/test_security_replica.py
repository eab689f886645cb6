"""A client can never pose as a follower (issue 27 item 5; SECURITY.md, "Replication").

A follower's Fetch names its replica id, and a leader that believed it would move the high
watermark and acknowledge acks=all writes that no follower holds. Rill's leaders accept a replica
Fetch only with the secret the follower's broker registered with in the metadata log (which no
client is served). Here, on a real 3-node cluster (rill.shards=1): one follower is SIGSTOPped,
an acks=all write waits for it, and a client sends Fetches naming that follower (v4 with no
secret, v12 with a wrong one) at the leader's log end. Each partition is answered
TOPIC_AUTHORIZATION_FAILED (Kafka's answer to a follower fetch without CLUSTER_ACTION); the high
watermark does not move and the write is answered REQUEST_TIMED_OUT, not acknowledged. Once the
follower resumes, real replication goes on and the write is committed.
"""

from __future__ import annotations

import struct
import threading
import time

import kafka_wire as kw
import pytest
import wire_flexible as wf

from test_replication import create, leader_of, partitions, unique, wait_for, wait_isr
from test_replication_edges import PATIENT, produce_raw
from test_replication_faults import Nodes, pause, read_values, resume, serving

ERR_TOPIC_AUTHORIZATION_FAILED = 29
ERR_REQUEST_TIMED_OUT = 7


def fetch_v12(replica_id: int, topic: str, offset: int, secret: bytes | None) -> bytes:
    """Fetch v12 naming `replica_id`, of partition 0 from `offset`; `secret` in Rill's tagged
    field 0x5249 when given."""
    partition = struct.pack(">iiqiqi", 0, -1, offset, -1, -1, 1 << 20) + wf.TAGS
    topics = wf.carray([wf.cstring(topic) + wf.carray([partition]) + wf.TAGS])
    body = struct.pack(">iiiibii", replica_id, 0, 1, 1 << 20, 0, 0, -1) + topics
    body += wf.carray([]) + wf.cstring("")
    if secret is None:
        return body + wf.TAGS
    return body + wf.uvarint(1) + wf.uvarint(0x5249) + wf.uvarint(len(secret)) + secret


def parse_fetch_v12(body: bytes) -> dict[int, tuple[int, int]]:
    """{partition: (error, high watermark)} of the one topic of a Fetch v12 response."""
    r = wf.flex_body(body)
    r.take(">i")                                    # throttle
    assert r.take(">h") == 0, "top-level error"
    r.take(">i")                                    # session id
    out = {}
    for _ in range(r.uvarint() - 1):
        r.cstring()
        for _ in range(r.uvarint() - 1):
            index, err, hw, _lso, _start = r.take(">ihqqq")
            for _ in range(max(r.uvarint() - 1, 0)):  # aborted transactions
                r.take(">qq")
                r.tags()
            r.take(">i")                            # preferred read replica
            r.cbytes()
            r.tags()
            out[index] = (err, hw)
        r.tags()
    return out


def ask(node, frame: bytes) -> bytes:
    conn = kw.Conn(node.host, node.port)
    try:
        conn.send(frame)
        answer = conn.recv_response()
    finally:
        conn.sock.close()
    assert answer is not None, "the leader closed the connection"
    return answer[1]


def high_watermark(node, topic: str) -> int:
    """The partition's high watermark as a consumer sees it (ListOffsets latest)."""
    body = kw.list_offsets_v2_body({(topic, 0): -1})
    return kw.parse_list_offsets_v2(ask(node, kw.request(kw.API_LIST_OFFSETS, 2, 5, body)))[
        (topic, 0)][1]


@pytest.mark.timeout(120)
def test_a_client_posing_as_a_follower_is_refused_and_moves_nothing(tmp_path):
    with Nodes(tmp_path, **PATIENT) as c:
        topic = unique("pose")
        create(c, topic, 1)
        wait_isr(c, topic, 3)
        leader = c.node(leader_of(c, topic, 0))
        assert produce_raw(leader, topic, b"committed", 10000)[0] == kw.ERR_NONE
        wait_for(lambda: high_watermark(leader, topic) == 1, 10, lambda: "first write uncommitted")
        follower = next(n for n in c.nodes if n is not leader)
        pause(follower)
        try:
            answered = {}
            write = threading.Thread(target=lambda: answered.update(
                result=produce_raw(leader, topic, b"waits-for-the-follower", 4000)))
            write.start()
            # Until the write is answered (the leader holds it at offset 1, uncommitted), pose
            # as the stopped follower at offset 2, as if it held the write.
            time.sleep(0.3)
            rounds = 0
            while write.is_alive() or rounds == 0:
                rounds += 1
                v4 = kw.fetch_v4_body({(topic, 0): 2})
                v4 = struct.pack(">i", follower.node_id) + v4[4:]
                got = kw.parse_fetch_v4(ask(leader, kw.request(kw.API_FETCH, 4, 9, v4)))
                assert got[(topic, 0)][0] == ERR_TOPIC_AUTHORIZATION_FAILED, got
                for secret in (None, bytes(16), b"short"):
                    frame = wf.request(kw.API_FETCH, 12, 10,
                                       fetch_v12(follower.node_id, topic, 2, secret))
                    got12 = parse_fetch_v12(ask(leader, frame))
                    assert got12 == {0: (ERR_TOPIC_AUTHORIZATION_FAILED, -1)}, (secret, got12)
                assert high_watermark(leader, topic) == 1, "a posing client moved the HW"
            write.join(30)
            code, _took = answered["result"]
            assert code == ERR_REQUEST_TIMED_OUT, f"acks=all answered {code} with the follower stopped"
            assert high_watermark(leader, topic) == 1
            isr = partitions(c, topic)[0][3]
            assert follower.node_id in isr, f"the follower left the ISR meanwhile: {isr}"
        finally:
            resume(follower)
        # The real follower still replicates: the write is committed once it has it.
        wait_for(lambda: high_watermark(leader, topic) == 2, 30, lambda: "never committed")
        assert read_values(serving(c), topic) == ["committed", "waits-for-the-follower"]


def with_internal_listener(c) -> dict[int, int]:
    """Gives every node of `c` (not started) a second listener INTERNAL, made the
    inter-broker listener (Kafka's names); returns {node id: its INTERNAL port}."""
    from broker import free_port
    internal = {}
    for node in c.nodes:
        port = free_port()
        internal[node.node_id] = port
        lines = [line for line in node.config_path.read_text().splitlines()
                 if not line.startswith(("listeners=", "advertised.listeners="))]
        lines += [
            f"listeners=PLAINTEXT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port},"
            f"INTERNAL://127.0.0.1:{port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,"
            "CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
        ]
        node.config_path.write_text("\n".join(lines) + "\n")
    return internal


def metadata_brokers(host: str, port: int) -> dict[int, tuple[str, int]]:
    conn = kw.Conn(host, port)
    try:
        conn.send(kw.request(kw.API_METADATA, 1, 7, kw.metadata_v1_body([])))
        answer = conn.recv_response()
    finally:
        conn.sock.close()
    r = kw.Reader(answer[1])
    brokers = {}
    for _ in range(r.take(">i")):
        node_id = r.take(">i")
        host = r.string()
        brokers[node_id] = (host, r.take(">i"))
        r.string()
    return brokers


@pytest.mark.timeout(120)
def test_brokers_replicate_over_the_inter_broker_listener_and_each_listener_advertises_its_own(
        tmp_path):
    """listeners with a second listener INTERNAL, inter.broker.listener.name=INTERNAL: followers
    fetch from the leaders' INTERNAL listener (replica Fetches are taken on no other), acks=all
    is acknowledged, and Metadata lists every broker at the endpoints of the listener it was
    asked on."""
    nodes = Nodes(tmp_path, **PATIENT)
    internal = with_internal_listener(nodes.cluster)
    with nodes as c:
        topic = unique("internal")
        create(c, topic, 1)
        wait_isr(c, topic, 3)
        leader = c.node(leader_of(c, topic, 0))
        assert produce_raw(leader, topic, b"replicated", 10000)[0] == kw.ERR_NONE
        wait_for(lambda: high_watermark(leader, topic) == 1, 10, lambda: "not committed")
        plain = {n.node_id: ("127.0.0.1", n.port) for n in c.nodes}
        inner = {i: ("127.0.0.1", p) for i, p in internal.items()}
        for node in c.nodes:
            assert metadata_brokers("127.0.0.1", node.port) == plain
            assert metadata_brokers("127.0.0.1", internal[node.node_id]) == inner
        # A posing client is refused on the inter-broker listener too (no secret).
        v4 = kw.fetch_v4_body({(topic, 0): 1})
        v4 = struct.pack(">i", next(i for i in internal if i != leader.node_id)) + v4[4:]
        got = kw.parse_fetch_v4(ask_at("127.0.0.1", internal[leader.node_id],
                                       kw.request(kw.API_FETCH, 4, 9, v4)))
        assert got[(topic, 0)][0] == ERR_TOPIC_AUTHORIZATION_FAILED, got


def ask_at(host: str, port: int, frame: bytes) -> bytes:
    conn = kw.Conn(host, port)
    try:
        conn.send(frame)
        answer = conn.recv_response()
    finally:
        conn.sock.close()
    assert answer is not None, "the broker closed the connection"
    return answer[1]
