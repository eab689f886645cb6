"""The queue workload (Jepsen's Kafka queue test): what clients did, recorded as a History.

- Producers: idempotent, acks=all confluent-kafka producers, each sending values no one else sends
  ("p<i>.<incarnation>-<seq>") to partitions it picks at random. Every send is recorded with its
  outcome: acknowledged at (partition, offset), or failed (indeterminate: it may still be there).
  A producer whose idempotence state becomes fatal is replaced by a new incarnation.
- Assign consumers: assign every partition from the beginning and poll; one assignment epoch.
- Subscribe consumers: one group; each rebalance starts a new assignment epoch (on_assign);
  offsets are committed asynchronously and every commit the coordinator acknowledged is recorded.
- The final read: a fresh consumer reads every partition from its log start to its high watermark.

The checker (checker.py) judges the History; nothing here decides what is an anomaly.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

#: Producer pacing: messages per second per producer (debug brokers on 2 shared cores).
PRODUCE_RATE_PER_S = 60
#: librdkafka gives up on a message after this: the send is then recorded as failed.
MESSAGE_TIMEOUT_MS = 30_000
#: librdkafka's own log lines go here (the runner adds a file handler in its work dir).
CLIENT_LOG = logging.getLogger("jepsen.clients")
CLIENT_LOG.propagate = False
#: Subscribe consumers commit at most this often.
COMMIT_INTERVAL_S = 0.5


@dataclass
class History:
    """Everything the clients observed, with times in seconds since the run started."""
    t0: float = field(default_factory=time.monotonic)
    #: {producer, value, partition, t_invoke, t_complete, offset (None: failed), error}
    sends: list[dict] = field(default_factory=list)
    #: {consumer, mode, epoch, partition, offset, value, t}
    polls: list[dict] = field(default_factory=list)
    #: {consumer, epoch, partitions, t}
    assigns: list[dict] = field(default_factory=list)
    #: {consumer, partition, offset (next to read), t}: acknowledged commits
    commits: list[dict] = field(default_factory=list)
    #: {partition: [(offset, value)]}
    final: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    #: {t, fault}
    faults: list[dict] = field(default_factory=list)
    #: Liveness observations: {kind, who, detail}
    liveness: list[dict] = field(default_factory=list)
    #: Client errors seen (counts by text), for the report only.
    client_errors: dict[str, int] = field(default_factory=dict)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def error(self, who: str, err) -> None:
        """Count a client error by role (p, a, s) and code name."""
        name = err.name() if hasattr(err, "name") else str(err)[:60]
        key = f"{who.split('.')[0].rstrip('0123456789')}: {name}"
        self.client_errors[key] = self.client_errors.get(key, 0) + 1

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("sends", "polls", "assigns", "commits", "faults",
                                              "liveness", "client_errors")} | {
            "final": {str(p): v for p, v in self.final.items()}}


class ProducerWorker(threading.Thread):
    """One producer role; sends until `stop`, then flushes."""

    def __init__(self, index: int, bootstrap: str, topic: str, partitions: int,
                 history: History, seed: int):
        super().__init__(name=f"producer-{index}", daemon=True)
        self.index, self.bootstrap, self.topic, self.partitions = index, bootstrap, topic, partitions
        self.history = history
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.incarnation = 0
        self.fatal = threading.Event()
        self.last_ack_t: float | None = None
        self.flushed = False

    def _new_producer(self) -> Producer:
        self.incarnation += 1
        self.fatal.clear()
        return Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                         "error_cb": self._on_error, "logger": CLIENT_LOG})

    @property
    def name_now(self) -> str:
        return f"p{self.index}.{self.incarnation}"

    def _on_error(self, err) -> None:
        self.history.error(self.name_now, err)
        if err.fatal():
            self.fatal.set()

    def run(self) -> None:
        producer = self._new_producer()
        seq = 0
        period = 1.0 / PRODUCE_RATE_PER_S
        while not self.stop.is_set():
            if self.fatal.is_set():
                producer.flush(MESSAGE_TIMEOUT_MS / 1000 + 5)
                self.history.liveness.append({"kind": "producer fatal error", "who": self.name_now,
                                              "detail": f"at {self.history.now():.1f}s"})
                producer = self._new_producer()
            record = {"producer": self.name_now, "value": f"{self.name_now}-{seq}",
                      "partition": self.rng.randrange(self.partitions),
                      "t_invoke": self.history.now(), "t_complete": None, "offset": None,
                      "error": None}
            seq += 1
            self.history.sends.append(record)
            try:
                producer.produce(self.topic, record["value"].encode(),
                                 partition=record["partition"],
                                 on_delivery=lambda e, m, r=record: self._done(r, e, m))
            except BufferError as e:
                record["error"] = f"not queued: {e}"
                record["t_complete"] = self.history.now()
            producer.poll(0)
            time.sleep(period)
        self.flushed = producer.flush(MESSAGE_TIMEOUT_MS / 1000 + 10) == 0

    def _done(self, record: dict, err, msg) -> None:
        record["t_complete"] = self.history.now()
        if err is not None:
            record["error"] = str(err)
            self.history.error(record["producer"], err)
            return
        record["offset"] = msg.offset()
        record["partition"] = msg.partition()
        self.last_ack_t = record["t_complete"]


class ConsumerWorker(threading.Thread):
    """One consumer: `assign` mode (every partition from the start) or `subscribe` mode (group).
    The queue workload reads uncommitted; the transactional one (txn_workload.py) read_committed."""

    def __init__(self, name: str, mode: str, bootstrap: str, topic: str, partitions: int,
                 group: str, history: History, isolation: str = "read_uncommitted"):
        super().__init__(name=name, daemon=True)
        self.cname, self.mode, self.topic, self.partitions = name, mode, topic, partitions
        self.history = history
        self.stop = threading.Event()
        self.epoch = 0
        self.positions: dict[int, int] = {}
        conf = {"bootstrap.servers": bootstrap, "group.id": group,
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "isolation.level": isolation, "error_cb": self._on_error,
                "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000,
                "logger": CLIENT_LOG}
        if mode == "subscribe":
            conf["on_commit"] = self._on_commit
        self.consumer = Consumer(conf)

    def _on_error(self, err) -> None:
        self.history.error(self.cname, err)

    def _on_assign(self, consumer, partitions) -> None:
        self.epoch += 1
        self.history.assigns.append({"consumer": self.cname, "epoch": self.epoch,
                                     "partitions": [tp.partition for tp in partitions],
                                     "t": self.history.now()})

    def _on_commit(self, err, partitions) -> None:
        if err is not None:
            self.history.error(self.cname, f"commit: {err}")
            return
        t = self.history.now()
        for tp in partitions:
            if tp.error is None and tp.offset >= 0:
                self.history.commits.append({"consumer": self.cname, "partition": tp.partition,
                                             "offset": tp.offset, "t": t})

    def run(self) -> None:
        if self.mode == "assign":
            self.epoch = 1
            self.consumer.assign([TopicPartition(self.topic, p, -2)
                                  for p in range(self.partitions)])   # -2: OFFSET_BEGINNING
            self.history.assigns.append({"consumer": self.cname, "epoch": 1,
                                         "partitions": list(range(self.partitions)),
                                         "t": self.history.now()})
        else:
            self.consumer.subscribe([self.topic], on_assign=self._on_assign)
        last_commit = time.monotonic()
        pending = False
        while not self.stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None:
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self.history.error(self.cname, msg.error())
                else:
                    self._record(msg)
                    pending = True
            if self.mode == "subscribe" and pending \
                    and time.monotonic() - last_commit > COMMIT_INTERVAL_S:
                try:
                    self.consumer.commit(asynchronous=True)
                except Exception as e:  # noqa: BLE001 (no offsets to commit, mid-rebalance)
                    self.history.error(self.cname, f"commit: {e}")
                last_commit, pending = time.monotonic(), False

    def _record(self, msg) -> None:
        p, o = msg.partition(), msg.offset()
        self.history.polls.append({"consumer": self.cname, "mode": self.mode, "epoch": self.epoch,
                                   "partition": p, "offset": o, "value": msg.value().decode(),
                                   "t": self.history.now()})
        self.positions[p] = max(self.positions.get(p, -1), o)

    def close(self) -> None:
        self.consumer.close()


def final_read(bootstrap: str, topic: str, partitions: int, timeout_s: float,
               isolation: str = "read_uncommitted",
               marks: dict[int, tuple[int, int]] | None = None
               ) -> tuple[dict[int, list[tuple[int, str]]], dict[int, tuple[int, int]], str | None]:
    """Every record of every partition from its log start to its high watermark, in offset
    order: ({partition: [(offset, value)]}, {partition: (low, high)}, error or None).

    A read_committed read must be given `marks` from a read_uncommitted one: asked itself, the
    broker answers the last stable offset, and a read that stopped there while a transaction
    was still open would miss every committed record after it. Given the high watermarks, it
    ends only once the position passes them (no transaction left open), else times out."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jepsen-final-read",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": isolation, "logger": CLIENT_LOG})
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    marks = dict(marks) if marks is not None else {}
    try:
        for p in range(partitions):
            if p not in marks:
                marks[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
        consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in range(partitions)])
        done = {p for p in range(partitions) if marks[p][0] >= marks[p][1]}
        deadline = time.monotonic() + timeout_s
        while len(done) < partitions:
            if time.monotonic() > deadline:
                return out, marks, (f"final read incomplete after {timeout_s}s: "
                                    f"{ {p: (len(out[p]), marks[p]) for p in range(partitions)} }")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= marks[msg.partition()][1]:
                        done.add(msg.partition())
                continue
            p = msg.partition()
            if msg.offset() < marks[p][1]:
                out[p].append((msg.offset(), msg.value().decode()))
            if msg.offset() + 1 >= marks[p][1]:
                done.add(p)
        return out, marks, None
    finally:
        consumer.close()
