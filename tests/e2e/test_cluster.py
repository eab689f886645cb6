"""A cluster of three brokers (issue 13): KRaft-style metadata quorum, any node serves any client.

Three `rill` processes on loopback, each started from its own .properties file
(process.roles=broker,controller, controller.quorum.voters, rill.shards=1), driven by
confluent-kafka, kcat and kafka-python bootstrapping from any node. Kill tests use short sessions
(broker.session.timeout.ms=4000) to stay bounded; the whole module runs in about a minute.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic as KafkaNewTopic
from kafka.errors import InvalidReplicationFactorError

import kafka_wire as kw
from broker import Broker, free_port, port_accepts, rill_binary
from cluster import (Cluster, active_controller, node_metadata, wait_isr_full,
                     wait_topic_everywhere)
from clients import kcat, watermarks
from conftest import _BROKERS

ERR_LEADER_NOT_AVAILABLE = 5
ERR_NOT_LEADER_OR_FOLLOWER = 6


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster3"))
    _BROKERS.extend(c.nodes)
    c.start()
    yield c
    codes = c.stop()
    assert codes == [0, 0, 0], f"exit codes on SIGTERM: {codes}"
    for node in c.nodes:
        assert "panicked" not in node.log_text(), f"node {node.node_id} panicked"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, name: str, partitions: int, replicas: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replicas)])[name].result(15)


def test_every_node_lists_all_three_brokers_and_names_the_controller(cluster3):
    ports = {n.node_id: n.port for n in cluster3.nodes}
    controllers = set()
    for node in cluster3.nodes:
        md = node_metadata(node)
        assert {i: p for i, (_, p) in md["brokers"].items()} == ports
        controllers.add(md["controller"])
        listing = kcat(node.bootstrap, "-L").stdout.decode()
        assert " 3 brokers:" in listing, listing
    # Each names itself (it forwards admin requests to the active controller: KIP-590), and
    # they agree on which node that is.
    assert controllers == set(ports), controllers
    assert len({active_controller(n) for n in cluster3.nodes}) == 1
    admin = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap(2))
    described = admin.describe_cluster()
    admin.close()
    assert described["controller_id"] in controllers
    assert sorted(b["broker_id"] for b in described["brokers"]) == [1, 2, 3]


def test_a_topic_created_through_node_1_is_served_by_node_3(cluster3):
    topic = unique("via-node1")
    create(cluster3.bootstrap(1), topic, partitions=3)
    elapsed = wait_topic_everywhere(cluster3, topic, 3, timeout_s=1.0)
    assert elapsed < 1.0
    producer = KafkaProducer(bootstrap_servers=cluster3.bootstrap(3), acks="all")
    for i in range(30):
        producer.send(topic, f"m{i}".encode(), partition=i % 3)
    producer.flush(30)
    producer.close()
    out = kcat(cluster3.bootstrap(3), "-C", "-t", topic, "-e", "-q", "-o", "beginning").stdout.decode()
    assert sorted(out.split()) == sorted(f"m{i}" for i in range(30))


def test_six_partitions_with_three_replicas_lead_on_at_least_two_brokers(cluster3):
    topic = unique("six")
    create(cluster3.bootstrap(2), topic, partitions=6)
    wait_topic_everywhere(cluster3, topic, 6)
    views = [node_metadata(n)["topics"][topic][1] for n in cluster3.nodes]
    placements = [{p: s[:3] for p, s in v.items()} for v in views]
    assert placements[0] == placements[1] == placements[2], "every node answers the same placement"
    leaders = {leader for (_, leader, _, _) in views[0].values()}
    assert len(leaders) >= 2, views[0]
    for error, leader, replicas, isr in views[0].values():
        assert error == 0 and len(replicas) == 3 and len(set(replicas)) == 3
        # The ISR starts as the leader; followers join as they catch up (issue 14).
        assert replicas[0] == leader and leader in isr and set(isr) <= set(replicas)
    wait_isr_full(cluster3, topic)


def test_producing_through_node_2_and_consuming_through_node_3_returns_every_message(cluster3):
    topic = unique("p2c3")
    create(cluster3.bootstrap(1), topic, partitions=3)
    wait_topic_everywhere(cluster3, topic, 3)
    producer = Producer({"bootstrap.servers": cluster3.bootstrap(2), "acks": "all",
                         "enable.idempotence": True})
    sent = [f"{topic}-{i}".encode() for i in range(600)]
    for i, value in enumerate(sent):
        producer.produce(topic, value, key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster3.bootstrap(3), "group.id": unique("g"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(sent) and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value())
    consumer.close()
    assert sorted(got) == sorted(sent)
    # kafka-python through node 3 too.
    kp = KafkaConsumer(topic, bootstrap_servers=cluster3.bootstrap(3),
                       auto_offset_reset="earliest", consumer_timeout_ms=5000)
    assert sorted(m.value for m in kp) == sorted(sent)
    kp.close()


def test_a_partition_not_led_here_answers_not_leader_or_follower(cluster3):
    topic = unique("notleader")
    create(cluster3.bootstrap(1), topic, partitions=3)
    wait_topic_everywhere(cluster3, topic, 3)
    wait_isr_full(cluster3, topic)  # acks=all needs min.insync.replicas=2 in the ISR
    placement = node_metadata(cluster3.node(1))["topics"][topic][1]
    batch = kw.record_batch([b"x"])
    for node in cluster3.nodes:
        for partition, (_, leader, _, _) in placement.items():
            conn = kw.Conn(node.host, node.port)
            conn.send(kw.request(kw.API_PRODUCE, 3, 1,
                                 kw.produce_v3_body({topic: {partition: batch}})))
            codes = kw.parse_produce_v3(conn.recv_response()[1])
            conn.sock.close()
            expected = 0 if leader == node.node_id else ERR_NOT_LEADER_OR_FOLLOWER
            assert codes[(topic, partition)] == expected, (node.node_id, partition, leader)


def test_consumer_groups_have_their_coordinators_spread_over_the_brokers(cluster3):
    topic = unique("groups")
    create(cluster3.bootstrap(1), topic, partitions=3)
    wait_topic_everywhere(cluster3, topic, 3)
    producer = Producer({"bootstrap.servers": cluster3.bootstrap(1)})
    for i in range(30):
        producer.produce(topic, f"v{i}".encode(), partition=i % 3)
    producer.flush(30)
    groups = [unique(f"grp{i}") for i in range(8)]
    for group in groups:
        consumer = Consumer({"bootstrap.servers": cluster3.bootstrap(2), "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 30 and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and not m.error():
                seen += 1
        assert seen == 30, group
        consumer.commit(asynchronous=False)
        consumer.close()
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap(3)})
    described = admin.describe_consumer_groups(groups)
    coordinators = {g: f.result(15).coordinator.id for g, f in described.items()}
    assert len(set(coordinators.values())) >= 2, coordinators
    # The committed offsets hold, read back through another broker.
    resumed = KafkaConsumer(bootstrap_servers=cluster3.bootstrap(1), group_id=groups[0],
                            enable_auto_commit=False)
    from kafka import TopicPartition as KTP
    committed = [resumed.committed(KTP(topic, p)) for p in range(3)]
    resumed.close()
    assert committed == [10, 10, 10]


INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def metadata_flags(node, topics: list[str] | None) -> dict[str, tuple[int, bool, int]]:
    """{topic: (error, is_internal, partition count)} of a raw Metadata v1 asked of `node`."""
    with kw.Conn(node.host, node.port) as conn:
        conn.send(kw.request(kw.API_METADATA, 1, 9, kw.metadata_v1_body(topics)))
        answer = conn.recv_response()
    assert answer is not None, f"node at {node.bootstrap} closed the connection"
    r = kw.Reader(answer[1])
    for _ in range(r.take(">i")):
        r.take(">i"), r.string(), r.take(">i"), r.string()     # node, host, port, rack
    r.take(">i")                                               # controller
    out = {}
    for _ in range(r.take(">i")):
        error, name, internal = r.take(">h"), r.string(), r.take(">b")
        count = r.take(">i")
        for _ in range(count):
            r.take(">hii")
            for _ in range(2):                                 # replicas, isr
                [r.take(">i") for _ in range(r.take(">i"))]
        out[name] = (error, internal == 1, count)
    return out


def test_internal_topics_are_listed_and_marked_internal_as_kafka_does(cluster3):
    """__consumer_offsets and __transaction_state are replicated topics in a cluster: Metadata
    names them with is_internal (asking for one creates it with its own settings, as Kafka),
    lists them among all topics, and refuses a client's Produce to them (INVALID_TOPIC)."""
    topic = unique("plain")
    create(cluster3.bootstrap(1), topic, partitions=1)
    wait_topic_everywhere(cluster3, topic, 1)
    deadline = time.monotonic() + 30
    named = {}
    while time.monotonic() < deadline:
        named = metadata_flags(cluster3.node(2), list(INTERNAL_TOPICS))
        if all(named[t][0] == 0 for t in INTERNAL_TOPICS):
            break
        time.sleep(0.2)
    assert named == {t: (0, True, 8) for t in INTERNAL_TOPICS}, named
    for node in cluster3.nodes:
        listed = {}
        while time.monotonic() < deadline:
            listed = metadata_flags(node, None)
            if all(t in listed for t in INTERNAL_TOPICS):
                break
            time.sleep(0.2)
        for t in INTERNAL_TOPICS:
            assert listed.get(t) == (0, True, 8), (node.node_id, t, listed.get(t))
        assert listed[topic] == (0, False, 1)
    # Real clients: librdkafka lists every topic; kafka-python's consumer leaves internal ones
    # out by their flag (exclude_internal_topics), keeping the ordinary one.
    listed = AdminClient({"bootstrap.servers": cluster3.bootstrap(3)}).list_topics(timeout=15)
    assert set(INTERNAL_TOPICS) <= set(listed.topics) and topic in listed.topics
    consumer = KafkaConsumer(bootstrap_servers=cluster3.bootstrap(1))
    try:
        seen = consumer.topics()
    finally:
        consumer.close()
    assert topic in seen and not set(INTERNAL_TOPICS) & seen, seen
    # The coordinators' logs are not a client's to write.
    for t in INTERNAL_TOPICS:
        with kw.Conn(cluster3.node(1).host, cluster3.node(1).port) as conn:
            conn.send(kw.request(kw.API_PRODUCE, 3, 5,
                                 kw.produce_v3_body({t: {0: kw.record_batch([b"x"])}})))
            codes = kw.parse_produce_v3(conn.recv_response()[1])
        assert codes == {(t, 0): kw.ERR_INVALID_TOPIC_EXCEPTION}, codes


def test_delete_and_grow_topics_through_any_node(cluster3):
    topic = unique("lifecycle")
    create(cluster3.bootstrap(3), topic, partitions=2)
    wait_topic_everywhere(cluster3, topic, 2)
    admin1 = AdminClient({"bootstrap.servers": cluster3.bootstrap(1)})
    admin1.create_partitions([NewPartitions(topic, 4)])[topic].result(15)
    wait_topic_everywhere(cluster3, topic, 4)
    admin2 = AdminClient({"bootstrap.servers": cluster3.bootstrap(2)})
    admin2.delete_topics([topic])[topic].result(15)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        if all(topic not in node_metadata(n)["topics"] for n in cluster3.nodes):
            break
        time.sleep(0.05)
    assert all(topic not in node_metadata(n)["topics"] for n in cluster3.nodes)
    # The name is free again, with a fresh id and no old data.
    create(cluster3.bootstrap(1), topic, partitions=1)
    wait_topic_everywhere(cluster3, topic, 1)
    out = kcat(cluster3.bootstrap(2), "-C", "-t", topic, "-e", "-q", "-o", "beginning").stdout.decode()
    assert out.strip() == ""


def test_topic_configs_altered_through_one_node_are_described_by_another(cluster3):
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ConfigSource)
    topic = unique("configs")
    create(cluster3.bootstrap(1), topic, partitions=1)
    wait_topic_everywhere(cluster3, topic, 1, timeout_s=5.0)
    entry = ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap(1)})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(15)
    deadline = time.monotonic() + 5
    while True:
        other = AdminClient({"bootstrap.servers": cluster3.bootstrap(3)})
        res = other.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        configs = list(res.values())[0].result(15)
        if configs["retention.ms"].value == "123456" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert configs["retention.ms"].value == "123456"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_auto_created_topics_work_through_any_node(cluster3):
    topic = unique("auto")
    kcat(cluster3.bootstrap(2), "-P", "-t", topic, input=b"a\nb\nc\n")
    out = kcat(cluster3.bootstrap(1), "-C", "-t", topic, "-e", "-q", "-o", "beginning").stdout.decode()
    assert out.split() == ["a", "b", "c"]
    placement = node_metadata(cluster3.node(3))["topics"][topic][1]
    assert len(placement[0][2]) == 3, "default.replication.factor=3"


def test_kafka_clients_on_the_controller_port_are_refused_and_the_node_lives_on(cluster3):
    node = cluster3.node(2)
    for _ in range(3):
        conn = kw.Conn(node.host, node.controller_port)
        conn.send(kw.request(kw.API_VERSIONS, 0, 1, b""))
        assert conn.recv_response() is None, "the controller listener closes Kafka traffic"
        conn.sock.close()
    result = kcat(f"127.0.0.1:{node.controller_port}", "-L", "-m", "3", check=False)
    assert result.returncode != 0
    assert node.alive()
    assert len(node_metadata(node)["brokers"]) == 3


def broker_only_properties(cluster: Cluster, node_id: int, stem):
    """A properties file for a broker-only node (an observer) of `cluster`; (path, client port)."""
    voters = cluster.node(1).config_path.read_text().split("controller.quorum.voters=")[1]
    voters = voters.splitlines()[0]
    port = free_port()
    path = stem.with_suffix(".properties")
    path.write_text(f"node.id={node_id}\nprocess.roles=broker\ncontroller.quorum.voters={voters}\n"
                    f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={stem}-data\n"
                    "rill.shards=1\nrill.shard.io.memory.bytes=1048576\nrill.admin.listen=off\n")
    return path, port


def test_a_second_node_with_a_taken_id_stops_with_an_error_naming_node_id(cluster3, tmp_path):
    props, _ = broker_only_properties(cluster3, 2, tmp_path / "dup")
    run = subprocess.run([str(rill_binary()), "--config", str(props)], capture_output=True,
                         timeout=30)
    assert run.returncode != 0
    assert b"node.id=2 is already used by another live broker" in run.stdout + run.stderr
    assert len(node_metadata(cluster3.node(2))["brokers"]) == 3


def test_a_broker_only_node_joins_follows_the_metadata_and_leaves(cluster3, tmp_path):
    props, port = broker_only_properties(cluster3, 4, tmp_path / "observer")
    observer = Broker(tmp_path / "observer-data", tmp_path / "observer.log",
                      partitions_default=None, auto_create_topics=None, shards=1,
                      config_path=props)
    observer.port = port
    _BROKERS.append(observer)
    observer.start()
    try:
        cluster3.wait_brokers(4, timeout_s=15)
        topic = unique("observer")
        create(cluster3.bootstrap(1), topic, partitions=4)
        deadline = time.monotonic() + 2.0
        while topic not in node_metadata(observer)["topics"] and time.monotonic() < deadline:
            time.sleep(0.05)
        led = [p for p, (_, leader, _, _) in node_metadata(observer)["topics"][topic][1].items()
               if leader == 4]
        assert led, "round-robin placement gives the new broker partitions"
        kcat(observer.bootstrap, "-P", "-t", topic, "-p", str(led[0]), input=b"hello\n")
        out = kcat(cluster3.bootstrap(2), "-C", "-t", topic, "-p", str(led[0]), "-e", "-q",
                   "-o", "beginning").stdout.decode()
        assert out.split() == ["hello"]
    finally:
        assert observer.stop() == 0
    # Controlled shutdown fenced it at once: the others list three brokers again.
    cluster3.wait_brokers(3, timeout_s=5)


@pytest.mark.timeout(120)
def test_killing_the_controller_a_new_topic_within_30s_and_the_node_rejoins(tmp_path):
    c = Cluster(tmp_path, **{"broker.session.timeout.ms": 4000,
                             "broker.heartbeat.interval.ms": 1000})
    _BROKERS.extend(c.nodes)
    c.start()
    try:
        old = unique("before-kill")
        create(c.bootstrap(1), old, partitions=3)
        doomed = unique("doomed")
        create(c.bootstrap(1), doomed, partitions=3)
        wait_topic_everywhere(c, old, 3)
        wait_topic_everywhere(c, doomed, 3)
        for p in range(3):
            kcat(c.bootstrap(1), "-P", "-t", doomed, "-p", str(p), input=b"gone\n")
        producer = Producer({"bootstrap.servers": c.bootstrap(1), "acks": "all"})
        for i in range(30):
            producer.produce(old, f"o{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        victim = c.controller()
        led_by_victim = [p for p, (_, leader, _, _) in
                         node_metadata(c.node(victim))["topics"][old][1].items()
                         if leader == victim]
        assert led_by_victim
        c.node(victim).kill9()
        survivor = next(n for n in c.nodes if n.node_id != victim)
        killed_at = time.monotonic()
        # One AdminClient made at once, bootstrapped from both survivors, and one request: the
        # survivor it asks names itself as controller and forwards to the new active
        # controller, so the client never waits on the dead one (issue 32).
        assert node_metadata(survivor)["controller"] == survivor.node_id
        new = unique("after-kill")
        admin = AdminClient({"bootstrap.servers": ",".join(
            n.bootstrap for n in c.nodes if n.node_id != victim)})
        admin.create_topics([NewTopic(new, 2, 2)], request_timeout=25)[new].result(30)
        took = time.monotonic() - killed_at
        print(f"new topic created {took:.1f}s after kill -9 of controller {victim}, "
              f"now {active_controller(survivor)}")
        assert took < 30, f"the new topic took {took:.1f} s"
        # Fenced after its session: its partitions fail over to a survivor in their ISR, which
        # holds every acknowledged message (issue 14).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            parts = node_metadata(survivor)["topics"][old][1]
            if all(parts[p][0] == 0 and parts[p][1] not in (-1, victim) for p in led_by_victim):
                break
            time.sleep(0.2)
        assert all(parts[p][0] == 0 and parts[p][1] not in (-1, victim)
                   for p in led_by_victim), parts
        # A follower learns the leader's high watermark on its next fetch, so a new leader's may
        # stand below its log end until the other ISR member fetches from it (Kafka's too).
        # Wait for each partition's 10 to be visible; what was lost never becomes visible.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            highs = [watermarks(survivor.bootstrap, old, p)[1] for p in range(3)]
            if highs == [10, 10, 10]:
                break
            time.sleep(0.2)
        assert highs == [10, 10, 10], f"high watermarks {highs} 15 s after the failover"
        out = kcat(survivor.bootstrap, "-C", "-t", old, "-e", "-q", "-o", "beginning").stdout.decode()
        assert sorted(out.split()) == sorted(f"o{i}" for i in range(30))
        assert len(node_metadata(survivor)["brokers"]) == 2
        # A topic deleted while it is down...
        survivor_admin = AdminClient({"bootstrap.servers": survivor.bootstrap})
        survivor_admin.delete_topics([doomed])[doomed].result(15)
        victim_dir = c.node(victim).data_dir
        assert any(victim_dir.glob(f"{doomed}-*")), "the victim held doomed's data"
        # It restarts and rejoins: it catches up on the log and leads its partitions again.
        c.node(victim).start()
        c.wait_brokers(3, timeout_s=30)
        wait_topic_everywhere(c, new, 2, timeout_s=10)
        wait_topic_everywhere(c, old, 3, timeout_s=10)
        out = kcat(c.bootstrap(victim), "-C", "-t", old, "-e", "-q", "-o", "beginning").stdout.decode()
        assert sorted(out.split()) == sorted(f"o{i}" for i in range(30))
        # ...is deleted from its disk once it caught up.
        deadline = time.monotonic() + 5
        while any(victim_dir.glob(f"{doomed}-*")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(victim_dir.glob(f"{doomed}-*"))
    finally:
        c.stop()
    for node in c.nodes:
        assert "panicked" not in node.log_text(), f"node {node.node_id} panicked"


def test_controller_only_and_combined_nodes_form_one_cluster(tmp_path):
    c = Cluster(tmp_path, roles={1: "controller"}, **{"default.replication.factor": 2,
                                                       "offsets.topic.replication.factor": 2})
    _BROKERS.extend(c.nodes)
    c.start()
    try:
        for node in c.live_nodes():
            assert sorted(node_metadata(node)["brokers"]) == [2, 3]
        # The controller-only node's admin listener (issue 16): ready, and it lists the brokers.
        admin = f"http://127.0.0.1:{c.node(1).admin_port}"
        with urllib.request.urlopen(f"{admin}/health/ready", timeout=10) as r:
            assert r.status == 200
        with urllib.request.urlopen(f"{admin}/v1/status", timeout=10) as r:
            status = json.load(r)
        assert [b["node_id"] for b in status["brokers"]] == [2, 3] and status["shards"] == []
        topic = unique("mixed")
        create(c.bootstrap(2), topic, partitions=4, replicas=2)
        wait_topic_everywhere(c, topic, 4)
        kcat(c.bootstrap(3), "-P", "-t", topic, "-p", "0", input=b"x\ny\n")
        out = kcat(c.bootstrap(2), "-C", "-t", topic, "-p", "0", "-e", "-q", "-o", "beginning")
        assert out.stdout.decode().split() == ["x", "y"]
    finally:
        codes = c.stop()
    assert codes == [0, 0, 0], codes


def start_one_node(tmp_path, data_dir, change: dict | None = None) -> tuple[int, str]:
    """Run a one-voter cluster node from a properties file (with `change` applied) that is
    expected to stop during start-up: (exit code, everything it printed)."""
    client, control = free_port(), free_port()
    props = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": f"PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{control}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{control}",
        "log.dirs": str(data_dir),
        "rill.shards": "1",
        "rill.admin.listen": "off",
    }
    props.update(change or {})
    path = tmp_path / "node.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    run = subprocess.run([str(rill_binary()), "--config", str(path)], capture_output=True,
                         timeout=30)
    return run.returncode, (run.stdout + run.stderr).decode(errors="replace")


def test_a_single_nodes_data_directory_is_refused_as_a_cluster_nodes_and_kept(tmp_path):
    """Rill does not move a single node's data into a cluster (the cluster's metadata would
    delete its topics, its coordinators would not read the private offsets log): a cluster
    node started on such a directory stops at once saying so, and the data stays."""
    from clients import consume_partition, create_topic, produce_all, producer
    single = Broker(tmp_path / "data", tmp_path / "single.log", shards=1)
    _BROKERS.append(single)
    single.start()
    topic, group = unique("kept"), unique("kept-group")
    create_topic(single.bootstrap, topic)
    produce_all(producer(single.bootstrap), topic, [(None, b"v%d" % i) for i in range(5)])
    c = Consumer({"bootstrap.servers": single.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    c.close()
    assert single.stop() == 0

    code, output = start_one_node(tmp_path, single.data_dir)
    assert code != 0, output
    assert "holds a single node's data (1 topic(s), committed offsets in __rill_groups/" in \
        output, output
    assert not (single.data_dir / "meta.properties").exists(), "nothing of a cluster written"

    single.start()
    got = consume_partition(single.bootstrap, topic, 0, 0, 5)
    assert [m.value() for m in got] == [b"v%d" % i for i in range(5)]
    c = Consumer({"bootstrap.servers": single.bootstrap, "group.id": group})
    assert c.committed([TopicPartition(topic, 0)], timeout=15)[0].offset == 3
    c.close()
    assert single.stop() == 0


@pytest.mark.parametrize("change, property_named", [
    ({"controller.quorum.voters": "1@127.0.0.1"}, "controller.quorum.voters"),
    ({"controller.quorum.voters": "1@127.0.0.1:1,1@127.0.0.1:2"}, "controller.quorum.voters"),
    ({"node.id": "7"}, "node.id"),
    ({"controller.listener.names": "CTRL"}, "controller.listener.names"),
    ({"process.roles": "broker,zookeeper"}, "process.roles"),
])
def test_bad_cluster_settings_stop_the_start_with_an_error_naming_the_property(
        tmp_path, change, property_named):
    code, output = start_one_node(tmp_path, tmp_path / "data", change)
    assert code != 0
    assert property_named in output, output


def kafka_python_create(admin: KafkaAdminClient, name: str) -> None:
    """CreateTopics through kafka-python's admin client; raises on a topic-level error."""
    response = admin.create_topics([KafkaNewTopic(name, 1, 2)], timeout_ms=10_000)
    errors = [t for t in getattr(response, "topic_errors", []) if t[1] != 0]
    assert not errors, errors


def created_within(what: str, create_once, budget_s: float, since: float) -> float:
    """Seconds from `since` until `create_once` (one request through a long-lived client)
    succeeds, asking again on each error; fails past `budget_s`."""
    last = None
    while time.monotonic() - since < budget_s:
        try:
            create_once()
            return time.monotonic() - since
        except Exception as e:  # noqa: BLE001 - any refusal or timeout is asked again
            last = e
            time.sleep(0.2)
    pytest.fail(f"{what}: no topic within {budget_s} s of the kill (last error: {last!r})")


def test_admin_clients_are_answered_at_cluster_start_and_outlive_the_controller(tmp_path):
    """Issue 32's two AdminClient scenarios, with librdkafka's AdminClient and kafka-python's:
    a CreateTopics sent as soon as the first node listens is answered (it used to be created
    but never answered), and a topic is created within 10 s of a kill -9 of the active
    controller: through librdkafka's client made before the kill (it kept failing 'waiting for
    controller' for more than 30 s when Metadata named the dead controller), and through a
    kafka-python client made after it. kafka-python 3.0.12 keeps the controller id of its first
    Metadata answer and never asks again after a connection error, so a client of it made
    before the kill fails for good whenever that id was the dead node's, against Kafka too
    (whose Metadata names a random live broker)."""
    c = Cluster(tmp_path, **{"broker.session.timeout.ms": 4000,
                             "broker.heartbeat.interval.ms": 1000})
    _BROKERS.extend(c.nodes)
    starts = [n.spawn() for n in c.nodes]
    try:
        bootstrap = ",".join(n.bootstrap for n in c.nodes)
        deadline = time.monotonic() + 30
        while not port_accepts(c.node(1).host, c.node(1).port):
            assert time.monotonic() < deadline, c.node(1).log_tail()
            time.sleep(0.02)
        # Answered, either way: created, or refused as Kafka refuses it while fewer than three
        # brokers are registered (INVALID_REPLICATION_FACTOR); never left to time out.
        at_start, kp_at_start = unique("at-start"), unique("kp-at-start")
        librdkafka = AdminClient({"bootstrap.servers": bootstrap})
        future = librdkafka.create_topics([NewTopic(at_start, 1, 3)],
                                          request_timeout=30)[at_start]
        kafka_python = KafkaAdminClient(bootstrap_servers=c.node(1).bootstrap,
                                        request_timeout_ms=30_000)
        try:
            kafka_python.create_topics([KafkaNewTopic(kp_at_start, 1, 3)], timeout_ms=30_000)
            kp_codes = [0]
        except InvalidReplicationFactorError:
            kp_codes = [KafkaError.INVALID_REPLICATION_FACTOR]
        kafka_python.close()
        try:
            future.result(40)
            refused = None
        except KafkaException as e:
            refused = e.args[0]
        assert refused is None or refused.code() == KafkaError.INVALID_REPLICATION_FACTOR, refused
        for node, start in zip(c.nodes, starts):
            node.wait_ready(start)
        c.wait_brokers(3)
        listed = node_metadata(c.node(1))["topics"]
        assert (at_start in listed) == (refused is None), (refused, sorted(listed))
        assert (kp_at_start in listed) == (kp_codes == [0]), (kp_codes, sorted(listed))
        victim = c.controller()
        c.node(victim).kill9()
        killed = time.monotonic()
        took = created_within("librdkafka", lambda: librdkafka.create_topics(
            [NewTopic(name := unique("rd-after"), 1, 2)], request_timeout=5)[name].result(6),
            10, killed)
        kafka_python = KafkaAdminClient(
            bootstrap_servers=",".join(n.bootstrap for n in c.nodes if n.node_id != victim),
            request_timeout_ms=5_000)
        took_kp = created_within("kafka-python", lambda: kafka_python_create(
            kafka_python, unique("kp-after")), 10, killed)
        print(f"after kill -9 of controller {victim}: librdkafka {took:.1f} s, "
              f"kafka-python {took_kp:.1f} s")
        kafka_python.close()
        assert c.stop() == [0, 0], "the survivors' exit codes on SIGTERM"
    finally:
        for node in c.nodes:
            if node.alive():
                node.kill9()
    for node in c.nodes:
        assert "panicked" not in node.log_text(), f"node {node.node_id} panicked"
