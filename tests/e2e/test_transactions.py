"""Transactions (issue 15) with real clients: commit and abort, read_committed vs read_uncommitted,
fencing and validation on the wire, an open transaction across kill -9, and consume-transform-
produce with offsets sent to the transaction under five kill -9s (exactly-once output).
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, OFFSET_BEGINNING, TopicPartition

import kafka_wire as kw
from clients import CLIENT_TIMEOUT_S, admin, create_topic, kafkajs, produce_all, producer

COMMITTED_FIRST = [f"c{i}" for i in range(5)]
ABORTED = ["a0", "a1", "a2"]
COMMITTED_LAST = ["c5"]
#: What every client writes: a committed transaction, an aborted one, a committed one.
TRANSACTIONS = [(COMMITTED_FIRST, True), (ABORTED, False), (COMMITTED_LAST, True)]
#: What confluent-kafka reports for a partition the group never committed.
NO_OFFSET = -1001
#: The broker's timed-out-transaction check, fast enough for the tests.
TXN_PROPERTIES = "transaction.abort.timed.out.transaction.cleanup.interval.ms=200\n"


def read_all(bootstrap: str, topic: str, isolation: str, partition: int = 0,
             timeout_s: float = CLIENT_TIMEOUT_S) -> list[str]:
    """Every value of a partition a consumer with `isolation` sees, up to the end it reports
    (read_committed: the last stable offset). Fails if it never reaches that end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rill-e2e-unused",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:        # _PARTITION_EOF: reached the visible end
                    return out
                assert not m.error().fatal(), m.error()
                continue
            out.append(m.value().decode())
        raise AssertionError(f"{isolation} consumer never reached the end of {topic}; got {out}")
    finally:
        c.close()


def visible_end(bootstrap: str, topic: str, isolation: str, partition: int = 0) -> int:
    """ListOffsets latest under `isolation` (read_committed: the last stable offset)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rill-e2e-unused",
                  "isolation.level": isolation, "enable.auto.commit": False})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=CLIENT_TIMEOUT_S,
                                       cached=False)[1]
    finally:
        c.close()


def assert_committed_only(bootstrap: str, topic: str) -> None:
    assert read_all(bootstrap, topic, "read_committed") == COMMITTED_FIRST + COMMITTED_LAST
    assert read_all(bootstrap, topic, "read_uncommitted") == \
        COMMITTED_FIRST + ABORTED + COMMITTED_LAST
    # Three markers among the offsets; nothing left open.
    assert visible_end(bootstrap, topic, "read_committed") == 12
    assert visible_end(bootstrap, topic, "read_uncommitted") == 12


# --- each client family's transactional producer and read_committed consumer ---------------------

def test_confluent_kafka_commit_and_abort(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    p = producer(broker.bootstrap, **{"transactional.id": f"{topic_name}-tx"})
    p.init_transactions(CLIENT_TIMEOUT_S)
    for values, commit in TRANSACTIONS:
        p.begin_transaction()
        for v in values:
            p.produce(topic_name, value=v.encode(), partition=0)
        p.flush(CLIENT_TIMEOUT_S)
        if commit:
            p.commit_transaction(CLIENT_TIMEOUT_S)
        else:
            p.abort_transaction(CLIENT_TIMEOUT_S)
    assert_committed_only(broker.bootstrap, topic_name)


def test_kafka_python_commit_and_abort(broker, topic_name):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition
    create_topic(broker.bootstrap, topic_name)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{topic_name}-tx")
    p.init_transactions()
    for values, commit in TRANSACTIONS:
        p.begin_transaction()
        for v in values:
            p.send(topic_name, value=v.encode(), partition=0)
        p.flush()
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
    p.close()
    assert_committed_only(broker.bootstrap, topic_name)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                      enable_auto_commit=False, consumer_timeout_ms=10_000)
    c.assign([KTopicPartition(topic_name, 0)])
    c.seek_to_beginning()
    got = []
    for m in c:
        got.append(m.value.decode())
        if len(got) == 6:
            break
    c.close()
    assert got == COMMITTED_FIRST + COMMITTED_LAST


def test_aiokafka_commit_and_abort(broker, topic_name):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATopicPartition

    async def run() -> list[str]:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                             transactional_id=f"{topic_name}-tx", enable_idempotence=True)
        await p.start()
        try:
            for values, commit in TRANSACTIONS:
                await p.begin_transaction()
                for v in values:
                    await p.send_and_wait(topic_name, value=v.encode(), partition=0)
                if commit:
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([ATopicPartition(topic_name, 0)])
            got: list[str] = []
            deadline = time.monotonic() + CLIENT_TIMEOUT_S
            while len(got) < 6 and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=500)
                got += [m.value.decode() for ms in batches.values() for m in ms]
            return got
        finally:
            await c.stop()

    create_topic(broker.bootstrap, topic_name)
    got = asyncio.run(run())
    assert got == COMMITTED_FIRST + COMMITTED_LAST
    assert_committed_only(broker.bootstrap, topic_name)


def test_kafkajs_commit_and_abort(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    kafkajs(broker.bootstrap, "txn-produce", {
        "topic": topic_name, "partition": 0, "transactionalId": f"{topic_name}-tx",
        "transactions": [{"messages": values, "commit": commit} for values, commit in TRANSACTIONS],
    })
    assert_committed_only(broker.bootstrap, topic_name)
    # kafkajs's own consumer reads committed by default.
    got = kafkajs(broker.bootstrap, "group-consume",
                  {"topic": topic_name, "groupId": f"{topic_name}-g", "count": 6})
    assert [m["value"] for m in got] == COMMITTED_FIRST + COMMITTED_LAST


# --- validation on the wire ---------------------------------------------------------------------

def call(broker, api: int, version: int, body: bytes, corr: int = 7) -> bytes:
    with kw.Conn(broker.host, broker.port) as c:
        c.send(kw.request(api, version, corr, body))
        resp = c.recv_response()
    assert resp is not None and resp[0] == corr, f"no answer to api {api}"
    return resp[1]


def test_unadded_partitions_control_batches_and_stale_epochs_are_refused(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    tid = f"{topic_name}-wire"
    err, pid, epoch = kw.parse_init_producer_id_v0(
        call(broker, kw.API_INIT_PRODUCER_ID, 0, kw.init_producer_id_v0_body(tid)))
    assert err == 0

    def produce(partition: int, batch: bytes) -> int:
        body = kw.produce_v3_body({topic_name: {partition: batch}}, transactional_id=tid)
        return kw.parse_produce_v3(call(broker, kw.API_PRODUCE, 3, body))[(topic_name, partition)]

    def txn_batch(seq: int, at_epoch: int) -> bytes:
        return kw.record_batch([b"x"], producer_id=pid, producer_epoch=at_epoch,
                               base_sequence=seq, attributes=kw.ATTR_TRANSACTIONAL)

    added = kw.parse_add_partitions_to_txn_v0(call(
        broker, kw.API_ADD_PARTITIONS_TO_TXN, 0,
        kw.add_partitions_to_txn_v0_body(tid, pid, epoch, {topic_name: [0]})))
    assert added == {(topic_name, 0): 0}
    assert produce(1, txn_batch(0, epoch)) == kw.ERR_INVALID_TXN_STATE, "partition 1 not added"
    assert produce(0, txn_batch(0, epoch)) == 0
    assert produce(0, kw.commit_marker_batch(pid, epoch)) == kw.ERR_INVALID_RECORD
    # A new producer of the same id fences the old one and aborts its transaction.
    err, pid2, epoch2 = kw.parse_init_producer_id_v0(
        call(broker, kw.API_INIT_PRODUCER_ID, 0, kw.init_producer_id_v0_body(tid)))
    assert (err, pid2) == (0, pid) and epoch2 > epoch
    assert produce(0, txn_batch(1, epoch)) == kw.ERR_INVALID_PRODUCER_EPOCH
    end = call(broker, kw.API_END_TXN, 0, kw.end_txn_v0_body(tid, pid, epoch, True))
    assert kw.parse_end_txn_v0(end) == kw.ERR_INVALID_PRODUCER_EPOCH
    assert read_all(broker.bootstrap, topic_name, "read_committed") == []
    assert read_all(broker.bootstrap, topic_name, "read_uncommitted") == ["x"]


#: Produce requests a transactional producer pipelines on one connection (franz-go keeps 5 in
#: flight per broker; more widen the window in which verifications race).
PIPELINED_REQUESTS = 8
#: Records in each pipelined request's batch for partition 0.
RECORDS_PER_REQUEST = 3
#: The first request's batch for partition 1: big enough that its write and flush keep that
#: request busy while the later ones' verifications already end.
SLOW_VALUE_BYTES = 256 * 1024


def add_partitions(broker, tid: str, pid: int, epoch: int, topic: str) -> None:
    """AddPartitionsToTxn for partitions 0 and 1, again while the previous transaction
    completes (CONCURRENT_TRANSACTIONS is the coordinator's "not yet", which clients retry)."""
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while True:
        added = kw.parse_add_partitions_to_txn_v0(call(
            broker, kw.API_ADD_PARTITIONS_TO_TXN, 0,
            kw.add_partitions_to_txn_v0_body(tid, pid, epoch, {topic: [0, 1]})))
        busy = kw.ERR_CONCURRENT_TRANSACTIONS in added.values()
        if not busy or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert added == {(topic, 0): 0, (topic, 1): 0}


def test_pipelined_first_appends_of_a_transaction_land_in_request_order(broker, topic_name):
    """franz-go's TestTxnEtl (issue 30): a transactional producer pipelines several Produce
    requests to a partition newly in its transaction, on one connection. Each first append
    there is verified with the coordinator (KIP-890); the first request also writes a big batch
    to another partition, so the later requests' verifications end before its own. The
    appends must still land in request order (Kafka serves a connection one request at a
    time). Was: a later request's append landed first (OUT_OF_ORDER_SEQUENCE_NUMBER), then the
    earlier one found its guard used up (INVALID_TXN_STATE), and the transaction failed."""
    create_topic(broker.bootstrap, topic_name, partitions=2)
    tid = f"{topic_name}-pipelined"
    err, pid, epoch = kw.parse_init_producer_id_v0(
        call(broker, kw.API_INIT_PRODUCER_ID, 0, kw.init_producer_id_v0_body(tid)))
    assert err == 0

    def txn_batch(values: list[bytes], seq: int) -> bytes:
        return kw.record_batch(values, producer_id=pid, producer_epoch=epoch,
                               base_sequence=seq, attributes=kw.ATTR_TRANSACTIONAL)

    expected, seq, seq_slow = [], 0, 0
    for txn in range(5):
        add_partitions(broker, tid, pid, epoch, topic_name)
        # Partition 1's transaction opens first, so the big batch is appended without a wait.
        opening = kw.produce_v3_body({topic_name: {1: txn_batch([b"open"], seq_slow)}},
                                     transactional_id=tid)
        seq_slow += 1
        assert kw.parse_produce_v3(call(broker, kw.API_PRODUCE, 3, opening)) == \
            {(topic_name, 1): 0}
        frames, values = b"", []
        for req in range(PIPELINED_REQUESTS):
            batch_values = [f"t{txn}-r{req}-{k}" for k in range(RECORDS_PER_REQUEST)]
            partitions = {0: txn_batch([v.encode() for v in batch_values], seq)}
            seq += RECORDS_PER_REQUEST
            values += batch_values
            if req == 0:
                partitions[1] = txn_batch([b"s" * SLOW_VALUE_BYTES] * 2, seq_slow)
                seq_slow += 2
            body = kw.produce_v3_body({topic_name: partitions}, transactional_id=tid)
            frames += kw.request(kw.API_PRODUCE, 3, 100 + req, body)
        with kw.Conn(broker.host, broker.port) as c:
            c.send(frames)  # all of them before any answer
            answers = [c.recv_response() for _ in range(PIPELINED_REQUESTS)]
        assert [a[0] for a in answers] == [100 + r for r in range(PIPELINED_REQUESTS)]
        results = [kw.parse_produce_v3_offsets(a[1]) for a in answers]
        assert results[0][(topic_name, 1)][0] == 0
        on_0 = [r[(topic_name, 0)] for r in results]
        assert [err for err, _ in on_0] == [0] * PIPELINED_REQUESTS, f"transaction {txn}: {on_0}"
        offsets = [base for _, base in on_0]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), offsets
        end = call(broker, kw.API_END_TXN, 0, kw.end_txn_v0_body(tid, pid, epoch, True))
        assert kw.parse_end_txn_v0(end) == 0
        expected += values
    assert read_all(broker.bootstrap, topic_name, "read_committed") == expected


# --- admin: the transactions and producers a real admin client sees -----------------------------

def test_admin_lists_and_describes_transactions_and_producers(broker, topic_name):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    create_topic(broker.bootstrap, topic_name, partitions=2)
    tid = f"{topic_name}-tx"
    p = producer(broker.bootstrap, **{"transactional.id": tid})
    p.init_transactions(CLIENT_TIMEOUT_S)
    p.begin_transaction()
    for part in (0, 1):
        produce_all(p, topic_name, [(None, b"open")], partition=part)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        listed = [t for ts in a.list_transactions().values() for t in ts
                  if t.transactional_id == tid]
        assert [t.state for t in listed] == ["Ongoing"], listed
        d = a.describe_transactions([tid])[tid]
        assert d.state == "Ongoing" and d.producer_id == listed[0].producer_id
        assert d.topic_partitions == {KTopicPartition(topic_name, 0),
                                      KTopicPartition(topic_name, 1)}
        tps = [KTopicPartition(topic_name, part) for part in (0, 1)]
        producers = a.describe_producers(tps)
        for tp in tps:
            [ps] = producers[tp].active_producers
            assert (ps.producer_id, ps.producer_epoch) == (d.producer_id, d.producer_epoch)
            assert ps.current_transaction_start_offset == 0, "the open transaction starts at 0"
        p.commit_transaction(CLIENT_TIMEOUT_S)
        assert a.describe_transactions([tid])[tid].state == "CompleteCommit"
        ongoing = a.list_transactions(state_filters=["Ongoing"])
        assert not any(t.transactional_id == tid for ts in ongoing.values() for t in ts)
        for tp in tps:
            [ps] = a.describe_producers([tp])[tp].active_producers
            assert ps.current_transaction_start_offset == -1, "nothing open after the commit"
    finally:
        a.close()


def test_admin_aborts_a_hanging_transaction_on_its_partition(broker, topic_name):
    """What `kafka-transactions.sh abort` does: a WriteTxnMarkers ABORT straight to the partition
    leader, for the producer and epochs DescribeProducers shows there."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import AbortTransactionSpec
    create_topic(broker.bootstrap, topic_name)
    p = producer(broker.bootstrap, **{"transactional.id": f"{topic_name}-tx"})
    p.init_transactions(CLIENT_TIMEOUT_S)
    p.begin_transaction()
    produce_all(p, topic_name, [(None, b"hanging-0"), (None, b"hanging-1")])
    assert visible_end(broker.bootstrap, topic_name, "read_committed") == 0
    tp = KTopicPartition(topic_name, 0)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        [ps] = a.describe_producers([tp])[tp].active_producers
        assert ps.current_transaction_start_offset == 0
        a.abort_transaction(AbortTransactionSpec(tp, ps.producer_id, ps.producer_epoch,
                                                 ps.coordinator_epoch))
        [ps] = a.describe_producers([tp])[tp].active_producers
        assert ps.current_transaction_start_offset == -1
    finally:
        a.close()
    # Two records and the ABORT marker: read_committed reaches the end and sees nothing.
    assert visible_end(broker.bootstrap, topic_name, "read_committed") == 3
    assert read_all(broker.bootstrap, topic_name, "read_committed") == []


# --- offsets sent to a transaction ---------------------------------------------------------------

def test_offsets_sent_to_a_transaction_are_visible_only_once_it_commits(broker, topic_name):
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.error import KafkaError
    create_topic(broker.bootstrap, topic_name)
    group = f"{topic_name}-g"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    a = admin(broker.bootstrap)

    def committed(require_stable: bool) -> int:
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, 0)])]
        f = a.list_consumer_group_offsets(request, require_stable=require_stable,
                                          request_timeout=10)[group]
        [tp] = f.result(timeout=CLIENT_TIMEOUT_S).topic_partitions
        if tp.error is not None:
            return tp.error.code()
        return tp.offset

    p = producer(broker.bootstrap, **{"transactional.id": f"{topic_name}-tx"})
    p.init_transactions(CLIENT_TIMEOUT_S)
    try:
        for offset, commit in ((7, False), (5, True)):
            p.begin_transaction()
            p.send_offsets_to_transaction([TopicPartition(topic_name, 0, offset)],
                                          c.consumer_group_metadata(), CLIENT_TIMEOUT_S)
            # Pending: a plain fetch sees the last committed offset, a stable one is told to wait.
            assert committed(require_stable=False) == NO_OFFSET
            assert committed(require_stable=True) == KafkaError.UNSTABLE_OFFSET_COMMIT
            if commit:
                p.commit_transaction(CLIENT_TIMEOUT_S)
            else:
                p.abort_transaction(CLIENT_TIMEOUT_S)
            want = 5 if commit else NO_OFFSET   # the aborted 7 is never seen
            assert committed(require_stable=False) == want
            assert committed(require_stable=True) == want
    finally:
        c.close()


# --- kill -9 --------------------------------------------------------------------------------------

def test_open_transaction_across_kill9_is_aborted_when_it_times_out(broker_factory, tmp_path,
                                                                    topic_name):
    config = tmp_path / "txn.properties"
    config.write_text(TXN_PROPERTIES)
    b = broker_factory(config_path=config)
    create_topic(b.bootstrap, topic_name)
    tid = f"{topic_name}-tx"
    old = producer(b.bootstrap, **{"transactional.id": tid, "transaction.timeout.ms": 4000,
                                   "message.timeout.ms": 4000})
    old.init_transactions(CLIENT_TIMEOUT_S)
    old.begin_transaction()
    produce_all(old, topic_name, [(None, f"open-{i}".encode()) for i in range(3)])
    b.kill9()
    b.start()
    # The open transaction survived the crash: its records stay invisible to read_committed.
    assert read_all(b.bootstrap, topic_name, "read_committed") == []
    assert visible_end(b.bootstrap, topic_name, "read_uncommitted") == 3
    deadline = time.monotonic() + 20
    while visible_end(b.bootstrap, topic_name, "read_committed") < 4:
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.2)
    assert read_all(b.bootstrap, topic_name, "read_committed") == []
    # A later transaction with the same id commits.
    new = producer(b.bootstrap, **{"transactional.id": tid})
    new.init_transactions(CLIENT_TIMEOUT_S)
    new.begin_transaction()
    produce_all(new, topic_name, [(None, b"after-0"), (None, b"after-1")])
    new.commit_transaction(CLIENT_TIMEOUT_S)
    assert read_all(b.bootstrap, topic_name, "read_committed") == ["after-0", "after-1"]
    assert len(read_all(b.bootstrap, topic_name, "read_uncommitted")) == 5
    del old


# --- consume-transform-produce, exactly once under kill -9 ----------------------------------------

class Worker:
    """A consume-transform-produce loop (confluent-kafka) that survives broker crashes: one
    transaction per batch, the consumed offsets sent to it; on any error the transaction is
    aborted (or the producer replaced, which fences and aborts it) and the consumer rewinds to
    the group's committed offsets."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str, tid: str):
        self.bootstrap, self.source, self.sink, self.group, self.tid = \
            bootstrap, source, sink, group, tid
        self.committed = 0
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def new_producer(self):
        # metadata.recovery.strategy=none: librdkafka's re-bootstrap after its only broker went
        # away decommissions the cached group coordinator, and send_offsets_to_transaction then
        # hangs past its own timeout (librdkafka issues #5511 and #5456, open in 2.16).
        p = producer(self.bootstrap, **{"transactional.id": self.tid,
                                        "transaction.timeout.ms": 10000,
                                        "message.timeout.ms": 10000,
                                        "metadata.recovery.strategy": "none"})
        p.init_transactions(CLIENT_TIMEOUT_S)
        return p

    def rewind(self, consumer) -> None:
        parts = consumer.assignment()
        if not parts:
            return
        for tp in consumer.committed(parts, timeout=CLIENT_TIMEOUT_S):
            consumer.seek(TopicPartition(tp.topic, tp.partition,
                                         tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
        consumer.subscribe([self.source])
        p = None
        while not self.stop.is_set():
            try:
                if p is None:
                    p = self.new_producer()
                    self.rewind(consumer)
                self.step(consumer, p)
            except KafkaException as e:
                self.errors.append(str(e))
                err = e.args[0]
                try:
                    if p is not None and err.txn_requires_abort():
                        p.abort_transaction(CLIENT_TIMEOUT_S)
                    else:
                        p = None
                    self.rewind(consumer)
                except KafkaException as again:
                    self.errors.append(f"recovering: {again}")
                    p = None
                    time.sleep(0.3)
        consumer.close()

    def step(self, consumer, p) -> None:
        msgs = [m for m in consumer.consume(100, timeout=0.3) if not m.error()]
        if not msgs:
            return
        p.begin_transaction()
        next_offsets: dict[tuple[str, int], int] = {}
        for m in msgs:
            p.produce(self.sink, value=b"out-" + m.value(), partition=0)
            next_offsets[(m.topic(), m.partition())] = m.offset() + 1
        offsets = [TopicPartition(t, part, o) for (t, part), o in next_offsets.items()]
        p.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(),
                                      CLIENT_TIMEOUT_S)
        p.commit_transaction(CLIENT_TIMEOUT_S)
        self.committed += len(msgs)


def test_consume_transform_produce_is_exactly_once_across_kill9(broker_factory, tmp_path,
                                                                topic_name):
    config = tmp_path / "txn.properties"
    config.write_text(TXN_PROPERTIES)
    b = broker_factory(config_path=config)
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-g"
    create_topic(b.bootstrap, source, partitions=2)
    create_topic(b.bootstrap, sink)
    total = 1000
    feed = producer(b.bootstrap, acks="all", **{"enable.idempotence": True})
    for part in (0, 1):
        produce_all(feed, source, [(None, f"v{part}-{i}".encode()) for i in range(total // 2)],
                    partition=part)
    worker = Worker(b.bootstrap, source, sink, group, f"{topic_name}-tx")
    worker.thread.start()
    try:
        for kill_after in (150, 300, 450, 600, 750):
            deadline = time.monotonic() + 60
            while worker.committed < kill_after:
                assert time.monotonic() < deadline, \
                    f"no progress past {worker.committed}; errors {worker.errors[-5:]}"
                time.sleep(0.05)
            b.kill9()
            b.start()
        deadline = time.monotonic() + 90
        while len(read_all(b.bootstrap, sink, "read_committed")) < total:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"stuck: worker committed {worker.committed}, output read_committed "
                    f"{len(read_all(b.bootstrap, sink, 'read_committed'))}, uncommitted "
                    f"{len(read_all(b.bootstrap, sink, 'read_uncommitted'))}, LSO "
                    f"{visible_end(b.bootstrap, sink, 'read_committed')}, HW "
                    f"{visible_end(b.bootstrap, sink, 'read_uncommitted')}; errors "
                    f"{worker.errors[-5:]}")
            time.sleep(0.5)
    finally:
        worker.stop.set()
        worker.thread.join(timeout=60)
    out = read_all(b.bootstrap, sink, "read_committed")
    want = [f"out-v{part}-{i}" for part in (0, 1) for i in range(total // 2)]
    dupes = [v for v, n in collections.Counter(out).items() if n > 1]
    assert not dupes, f"{len(dupes)} duplicated outputs, e.g. {dupes[:5]}"
    assert sorted(out) == sorted(want)
    # The group's committed offsets are exactly past every input record.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(source, p) for p in (0, 1)],
                                timeout=CLIENT_TIMEOUT_S)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [total // 2, total // 2]
    assert "panicked" not in b.log_text()
