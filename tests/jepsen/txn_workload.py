"""The transactional workload: what transactional producers and read_committed consumers did,
recorded as a TxnHistory (the queue workload's History plus the transactions).

- Producers: confluent-kafka producers with a `transactional.id` each ("jepsen-txn-<i>") and
  acks=all. Each transaction writes values nobody else writes ("t<i>.<incarnation>-<txn>-<j>")
  to two or three partitions of one topic, one or two values a partition, then commits or aborts
  at random (seeded). Every transaction is recorded with its values and its outcome:
    committed        commit_transaction returned;
    aborted          abort_transaction returned, and commit was never requested;
    unknown          commit was requested and did not return cleanly (an error or a timeout):
                     the values may or may not be visible;
    never-committed  commit was never requested, but the abort did not return cleanly either
                     (the producer failed first). Kafka commits only on EndTxn(commit), which
                     only commit_transaction sends, so the coordinator aborts it (on the
                     transaction timeout, or when the next incarnation's init_transactions
                     fences the old one): its values must stay invisible, as an aborted one's.
  `t_commit` is the monotonic time (seconds since the run began) just before commit was
  requested; None when it never was. A producer whose state becomes fatal (fenced, or an
  unrecoverable error) is replaced by a new incarnation of the same transactional id, which
  fences the old one.
- Consumers: queue_workload.ConsumerWorker with isolation.level=read_committed; subscribe mode
  (one group, committing offsets) and assign mode (every partition from the start).
- The final reads, after every fault is healed and every producer stopped: read_uncommitted
  (the whole log, for diagnosis and offset consistency) and read_committed, both from the log
  start to the high watermark.

The checker (txn_checker.py) judges the TxnHistory; nothing here decides what is an anomaly.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, Producer

from queue_workload import CLIENT_LOG, History, final_read

#: The broker aborts a transaction left open this long (a dead incarnation's): short, so that a
#: hanging transaction does not hold every read_committed reader back for long after the heal.
TXN_TIMEOUT_MS = 20_000
#: librdkafka fails a message after this; must not exceed the transaction timeout.
MESSAGE_TIMEOUT_MS = 15_000
#: Bound of one init_transactions call (retried while retriable).
INIT_TIMEOUT_S = 20.0
#: Bound of one flush, commit_transaction or abort_transaction call: shorter than the longest
#: fault (--hold), so that some commits end without an answer (unknown) and some producers are
#: replaced, and the broker's resolution of what they left (the next incarnation's fencing, the
#: transaction timeout) is exercised too, not only the happy path.
CALL_TIMEOUT_S = 6.0
#: How often a retriable commit is retried before the producer gives up on it (unknown).
END_RETRIES = 2
#: A retriable abort is retried until this much time has passed: by then every message of the
#: transaction is acknowledged or failed (librdkafka cannot abort before that).
ABORT_DEADLINE_S = MESSAGE_TIMEOUT_MS / 1000 + CALL_TIMEOUT_S
#: Pause between transactions (debug brokers on 2 shared cores).
TXN_PAUSE_S = 0.05
#: Chance that a transaction is meant to commit (else it is aborted on purpose).
COMMIT_P = 0.6


@dataclass
class TxnHistory(History):
    """The queue History's consumer records (polls, assigns, commits) plus the transactions:
    {id, producer, values: [{value, partition, offset (delivery report; None: none),
    error}], intent, outcome, t_begin, t_commit, t_end, error, abort_after_error}; and
    `final_uncommitted`, the read_uncommitted final read ({partition: [(offset, value)]})."""
    txns: list[dict] = field(default_factory=list)
    final_uncommitted: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    #: {who, t, why}: producer incarnations given up (fenced or fatal). Not an anomaly: a
    #: transaction open past the timeout is aborted and its producer fenced, as Kafka does.
    replaced: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("txns", "polls", "assigns", "commits", "faults",
                                              "client_errors", "replaced")} | {
            "final": {str(p): v for p, v in self.final.items()},
            "final_uncommitted": {str(p): v for p, v in self.final_uncommitted.items()}}

    def counts(self) -> dict[str, int]:
        """Transactions by outcome (None: still running), for the report."""
        out: dict[str, int] = {}
        for t in self.txns:
            out[str(t["outcome"])] = out.get(str(t["outcome"]), 0) + 1
        return out


def kafka_error(e: BaseException):
    """The KafkaError behind an exception, or None. confluent-kafka sometimes raises a
    SystemError whose cause is the KafkaException (a fatal error met inside flush while a
    callback ran), so the chain is searched."""
    seen = 0
    while e is not None and seen < 5:
        if isinstance(e, KafkaException) and e.args:
            return e.args[0]
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


class Replace(Exception):
    """The producer is unusable (a fatal error, or an end that could not be finished): the
    worker starts a new incarnation, whose init_transactions resolves what the old one left."""


class TxnProducerWorker(threading.Thread):
    """One transactional producer role; runs transactions until `stop`, finishing the one it is
    in (the history then holds no transaction without an outcome)."""

    def __init__(self, index: int, bootstrap: str, topic: str, partitions: int,
                 history: TxnHistory, seed: int):
        super().__init__(name=f"txn-producer-{index}", daemon=True)
        self.index, self.bootstrap, self.topic, self.partitions = index, bootstrap, topic, partitions
        self.history = history
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.incarnation = 0
        self.txn_seq = 0
        self.last_commit_t: float | None = None

    @property
    def name_now(self) -> str:
        return f"t{self.index}.{self.incarnation}"

    def _on_error(self, err) -> None:
        self.history.error(self.name_now, err)

    def _new_producer(self) -> Producer | None:
        """A new incarnation, its init_transactions done (retried while retriable); None if
        `stop` came first."""
        while not self.stop.is_set():
            self.incarnation += 1
            p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                          "transactional.id": f"jepsen-txn-{self.index}", "linger.ms": 5,
                          "transaction.timeout.ms": TXN_TIMEOUT_MS,
                          "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                          "error_cb": self._on_error, "logger": CLIENT_LOG,
                          # librdkafka debug contexts into clients.log (e.g. "eos,msg"), to read
                          # the sequence numbers and coordinator answers after an anomaly.
                          **({"debug": os.environ["JEPSEN_TXN_DEBUG"]}
                             if os.environ.get("JEPSEN_TXN_DEBUG") else {})})
            while not self.stop.is_set():
                try:
                    p.init_transactions(INIT_TIMEOUT_S)
                    return p
                except Exception as e:  # noqa: BLE001 (see kafka_error)
                    err = kafka_error(e)
                    self.history.error(self.name_now, err or e)
                    if err is None or not err.retriable():
                        break           # fatal or not retriable: the next incarnation
                    time.sleep(0.5)
        return None

    def run(self) -> None:
        producer = None
        while not self.stop.is_set():
            if producer is None:
                producer = self._new_producer()
                if producer is None:
                    return
            try:
                self._transaction(producer)
            except Replace as e:
                self.history.replaced.append({"who": self.name_now, "t": self.history.now(),
                                              "why": str(e)})
                producer = None
            except Exception as e:  # noqa: BLE001: a harness bug must not end the role
                # Never expected (every client call is guarded); the last transaction's outcome
                # is then the weakest claim its progress allows.
                last = self.history.txns[-1]
                if last["outcome"] is None:
                    last["outcome"] = "never-committed" if last["t_commit"] is None else "unknown"
                    last["t_end"] = self.history.now()
                self.history.replaced.append({"who": self.name_now, "t": self.history.now(),
                                              "why": f"harness: {type(e).__name__}: {e}"})
                producer = None
            time.sleep(TXN_PAUSE_S)

    def _plan(self) -> tuple[str, list[dict]]:
        """The next transaction's intent and values (seeded: the same seed, the same plan)."""
        k = min(self.partitions, self.rng.choice((2, 3)))
        values = []
        for p in self.rng.sample(range(self.partitions), k):
            for _ in range(self.rng.choice((1, 2))):
                values.append({"value": f"{self.name_now}-{self.txn_seq}-{len(values)}",
                               "partition": p, "offset": None, "error": None})
        intent = "commit" if self.rng.random() < COMMIT_P else "abort"
        return intent, values

    def _transaction(self, producer: Producer) -> None:
        intent, values = self._plan()
        txn = {"id": f"{self.name_now}-{self.txn_seq}", "producer": self.name_now,
               "values": values, "intent": intent, "outcome": None,
               "t_begin": self.history.now(), "t_commit": None, "t_end": None, "error": None,
               "abort_after_error": None}
        self.txn_seq += 1
        self.history.txns.append(txn)
        try:
            producer.begin_transaction()
            for rec in values:
                producer.produce(self.topic, rec["value"].encode(), partition=rec["partition"],
                                 on_delivery=lambda e, m, r=rec: self._delivered(r, e, m))
            # Flushed before an abort too: an abort of records still in the client's queue
            # would only purge them, and test nothing of the broker.
            left = producer.flush(CALL_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 (see kafka_error)
            txn["error"] = f"before the end: {type(e).__name__}: {e}"
            err = kafka_error(e)
            if err is None and not isinstance(e, BufferError):
                # Not the client's error: its state is unknown, so a new incarnation.
                txn["outcome"], txn["t_end"] = "never-committed", self.history.now()
                raise Replace(txn["error"]) from e
            self._abort(producer, txn, err)
            return
        failed = [r for r in values if r["error"] is not None]
        if left or failed:
            # The transaction is abortable now; commit_transaction would only fail.
            txn["error"] = f"{left} not flushed, {len(failed)} deliveries failed"
            self._abort(producer, txn, None)
            return
        if intent == "abort":
            self._abort(producer, txn, None)
            return
        self._commit(producer, txn)

    def _delivered(self, rec: dict, err, msg) -> None:
        if err is not None:
            rec["error"] = str(err)
            self.history.error(self.name_now, err)
        else:
            rec["offset"] = msg.offset()

    def _commit(self, producer: Producer, txn: dict) -> None:
        """commit_transaction, retried while retriable: committed, or unknown."""
        txn["t_commit"] = self.history.now()
        err = None
        for _ in range(END_RETRIES):
            try:
                producer.commit_transaction(CALL_TIMEOUT_S)
                txn["outcome"], txn["t_end"] = "committed", self.history.now()
                self.last_commit_t = txn["t_end"]
                return
            except Exception as e:  # noqa: BLE001 (see kafka_error)
                err = kafka_error(e)
                self.history.error(self.name_now, err or e)
                txn["error"] = f"commit: {err or repr(e)}"
                if err is None or not err.retriable():
                    break
        txn["outcome"], txn["t_end"] = "unknown", self.history.now()
        if err is None or err.fatal():
            raise Replace(txn["error"])
        # An abortable error (or retries spent): abort to go on. Its result is recorded but does
        # not change the outcome: the commit was requested, so "unknown" stays the safe claim.
        try:
            producer.abort_transaction(CALL_TIMEOUT_S)
            txn["abort_after_error"] = "ok"
        except Exception as e:  # noqa: BLE001 (see kafka_error)
            txn["abort_after_error"] = str(kafka_error(e) or repr(e))
            self.history.error(self.name_now, kafka_error(e) or e)
            raise Replace(f"abort after a failed commit: {txn['abort_after_error']}") from e

    def _abort(self, producer: Producer, txn: dict, cause) -> None:
        """abort_transaction, retried while retriable (until ABORT_DEADLINE_S): aborted, or
        never-committed. `cause`: the KafkaError that forced the abort, or None."""
        if cause is not None and cause.fatal():
            txn["outcome"], txn["t_end"] = "never-committed", self.history.now()
            raise Replace(str(cause))
        deadline = time.monotonic() + ABORT_DEADLINE_S
        while True:
            try:
                producer.abort_transaction(CALL_TIMEOUT_S)
                txn["outcome"], txn["t_end"] = "aborted", self.history.now()
                return
            except Exception as e:  # noqa: BLE001 (see kafka_error)
                err = kafka_error(e)
                self.history.error(self.name_now, err or e)
                txn["error"] = f"{txn['error'] or ''}; abort: {err or repr(e)}".lstrip("; ")
                if err is None or not err.retriable() or time.monotonic() > deadline:
                    break
                producer.poll(0.2)      # serve the delivery reports the abort waits for
        txn["outcome"], txn["t_end"] = "never-committed", self.history.now()
        raise Replace(txn["error"])


def final_reads(bootstrap: str, topic: str, partitions: int, timeout_s: float):
    """The read_uncommitted and the read_committed final reads, both to the high watermark:
    (uncommitted, committed, marks, error or None)."""
    uncommitted, marks, err = final_read(bootstrap, topic, partitions, timeout_s)
    if err:
        return uncommitted, {p: [] for p in range(partitions)}, marks, f"read_uncommitted: {err}"
    committed, _, err = final_read(bootstrap, topic, partitions, timeout_s,
                                   isolation="read_committed", marks=marks)
    return uncommitted, committed, marks, (f"read_committed: {err}" if err else None)
