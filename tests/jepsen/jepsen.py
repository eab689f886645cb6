"""Jepsen-style black-box test of a three-node rill cluster under network partitions and process
faults (issue 32 item 4). Run it through tests/jepsen/run.sh (root: namespaces and iptables).

One run: make the network (net.py), start three nodes (nodes.py), create a topic per workload
(RF 3, min.insync.replicas 2), start the workload (--workload: queue_workload.py, txn_workload.py
or both at once, each on its own topic), carry out the seeded fault schedule (nemesis.py), heal
everything, let the clients recover, read every partition, and judge the histories (checker.py,
txn_checker.py). Any anomaly, liveness failure, broker panic or unclean exit fails the run (exit
status 1) and is reported with the seed that replays the schedule. The histories and the report
are kept in the work dir (history.json: the run's faults and liveness and the queue workload;
txn-history.json: the transactional workload; report.json) with every node's log.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

import checker
import txn_checker
from nemesis import Nemesis, schedule
from net import Network, sweep_stale
from nodes import Cluster
from queue_workload import CLIENT_LOG, ConsumerWorker, History, ProducerWorker, final_read
from txn_workload import TxnHistory, TxnProducerWorker, final_reads

TOPIC = "jepsen-queue"
TXN_TOPIC = "jepsen-txn"
#: After the last heal: how long the producers keep sending, and the most any client may take
#: to make progress again before it counts as stuck.
RECOVERY_SEND_S = 10.0
RECOVERY_TIMEOUT_S = 60.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    a.add_argument("--seed", type=int, default=None, help="fault schedule seed (default: random)")
    a.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    a.add_argument("--partitions", type=int, default=3)
    a.add_argument("--producers", type=int, default=2)
    a.add_argument("--assign-consumers", type=int, default=1)
    a.add_argument("--subscribe-consumers", type=int, default=2)
    a.add_argument("--workload", choices=("queue", "txn", "both"), default="queue",
                   help="queue (idempotent producers), txn (transactional producers and\n"
                        "read_committed consumers) or both at once on two topics")
    a.add_argument("--txn-producers", type=int, default=2)
    a.add_argument("--txn-assign-consumers", type=int, default=1)
    a.add_argument("--txn-subscribe-consumers", type=int, default=2)
    a.add_argument("--hold", default="3,10", help="min,max seconds a fault lasts")
    a.add_argument("--quiet", default="2,6", help="min,max seconds between faults")
    a.add_argument("--work-dir", type=Path, default=None,
                   help="where logs, history.json and report.json go (default: target/jepsen/<seed>)")
    return a.parse_args(argv)


def pair(text: str) -> tuple[float, float]:
    lo, hi = (float(x) for x in text.split(","))
    return lo, hi


def log(msg: str) -> None:
    print(msg, flush=True)


def create_topic(bootstrap: str, partitions: int, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": CLIENT_LOG})
    futures = admin.create_topics([NewTopic(topic, partitions, 3)], request_timeout=30)
    futures[topic].result(timeout=40)


def wait_isr_full(cluster: Cluster, partitions: int, timeout_s: float,
                  topic: str = TOPIC) -> str | None:
    """None once every partition has a leader and a full ISR, else what was seen."""
    deadline = time.monotonic() + timeout_s
    seen: dict = {}
    while time.monotonic() < deadline:
        seen = cluster.partitions(topic)
        if len(seen) == partitions and all(p[0] == 0 and p[1] > 0 and sorted(p[3]) == sorted(p[2])
                                           for p in seen.values()):
            return None
        time.sleep(0.25)
    return f"{topic}: ISR not full after {timeout_s}s: {seen}"


class Run:
    """One run's state, so that cleanup can always find what to remove."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
        root = Path(__file__).resolve().parents[2]
        target = Path(os.environ.get("CARGO_TARGET_DIR", root / "target"))
        self.work = args.work_dir or (target / "jepsen" / f"seed-{self.seed}")
        self.queue = args.workload in ("queue", "both")
        self.txn = args.workload in ("txn", "both")
        #: The run's record (faults, liveness) and the queue workload's.
        self.history = History()
        #: The transactional workload's, on the same clock and the same fault list.
        self.txn_history = TxnHistory(faults=self.history.faults)
        self.net: Network | None = None
        self.cluster: Cluster | None = None
        self.producers: list[ProducerWorker] = []
        self.consumers: list[ConsumerWorker] = []
        self.txn_producers: list[TxnProducerWorker] = []
        self.txn_consumers: list[ConsumerWorker] = []

    @property
    def topics(self) -> list[str]:
        return [TOPIC] * self.queue + [TXN_TOPIC] * self.txn

    def replay(self) -> str:
        a = self.args
        return (f"tests/jepsen/run.sh --workload {a.workload} --seed {self.seed} "
                f"--duration {a.duration:g} --hold {a.hold} --quiet {a.quiet}")

    def liveness(self, kind: str, who: str, detail: str) -> None:
        self.history.liveness.append({"kind": kind, "who": who, "detail": detail})
        log(f"LIVENESS {kind}: {who}: {detail}")

    def main(self) -> int:
        a = self.args
        faults = schedule(self.seed, a.duration, a.partitions, 3, pair(a.hold), pair(a.quiet))
        log(f"jepsen {a.workload} workload: seed {self.seed}; replay: {self.replay()}")
        for i, f in enumerate(faults):
            log(f"  schedule {i + 1}: {f.describe()}")
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        handler = logging.FileHandler(self.work / "clients.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        CLIENT_LOG.addHandler(handler)
        # librdkafka's debug lines (JEPSEN_TXN_DEBUG, txn_workload.py) are at level 7.
        CLIENT_LOG.setLevel(logging.DEBUG if os.environ.get("JEPSEN_TXN_DEBUG") else logging.INFO)
        swept = sweep_stale()
        if swept:
            log(f"removed leftovers of earlier runs: {swept}")
        self.net = Network(3, random.Random(self.seed ^ os.getpid()))
        self.net.create()
        self.net.enter_clients()
        log(f"network {self.net.subnet} (run {self.net.run_id}), work dir {self.work}")
        self.cluster = Cluster(self.net, self.work)
        self.cluster.start()
        for topic in self.topics:
            create_topic(self.cluster.bootstrap, a.partitions, topic)
            problem = wait_isr_full(self.cluster, a.partitions, 30, topic)
            if problem:
                raise RuntimeError(f"set-up: {problem}")
        self.history.t0 = self.txn_history.t0 = time.monotonic()
        self.start_clients()
        time.sleep(3)
        # "The leader of partition p" is the first topic's (the queue's when both run).
        Nemesis(self.cluster, self.net, self.topics[0], self.history, log).run(
            faults, threading.Event())
        return self.finish(faults)

    def start_clients(self) -> None:
        if self.queue:
            self.start_queue_clients()
        if self.txn:
            self.start_txn_clients()
        for w in self.consumers + self.producers + self.txn_consumers + self.txn_producers:
            w.start()

    def start_txn_clients(self) -> None:
        """read_committed consumers (assign, and one subscribe group) and transactional
        producers on TXN_TOPIC, recording into the txn history."""
        a, b, h = self.args, self.cluster.bootstrap, self.txn_history
        for i in range(a.txn_assign_consumers):
            self.txn_consumers.append(ConsumerWorker(
                f"ta{i + 1}", "assign", b, TXN_TOPIC, a.partitions, f"jepsen-txn-assign-{i + 1}",
                h, isolation="read_committed"))
        for i in range(a.txn_subscribe_consumers):
            self.txn_consumers.append(ConsumerWorker(
                f"ts{i + 1}", "subscribe", b, TXN_TOPIC, a.partitions, "jepsen-txn-group", h,
                isolation="read_committed"))
        for i in range(a.txn_producers):
            # Seeds apart from the queue producers' (seed + i), so both runs differ.
            self.txn_producers.append(TxnProducerWorker(i + 1, b, TXN_TOPIC, a.partitions, h,
                                                        self.seed + 1000 + i))

    def start_queue_clients(self) -> None:
        a, b = self.args, self.cluster.bootstrap
        for i in range(a.assign_consumers):
            self.consumers.append(ConsumerWorker(f"a{i + 1}", "assign", b, TOPIC, a.partitions,
                                                 f"jepsen-assign-{i + 1}", self.history))
        for i in range(a.subscribe_consumers):
            self.consumers.append(ConsumerWorker(f"s{i + 1}", "subscribe", b, TOPIC,
                                                 a.partitions, "jepsen-group", self.history))
        for i in range(a.producers):
            self.producers.append(ProducerWorker(i + 1, b, TOPIC, a.partitions, self.history,
                                                 self.seed + i))

    def finish(self, faults) -> int:
        nemesis = Nemesis(self.cluster, self.net, self.topics[0], self.history, log)
        nemesis.heal_all()
        healed = self.history.now()
        log(f"[{healed:7.1f}s] all healed; {RECOVERY_SEND_S:g}s of recovery traffic")
        self.cluster.wait_brokers(3, RECOVERY_TIMEOUT_S)
        time.sleep(RECOVERY_SEND_S)
        self.check_producers_recover(healed)
        self.check_txn_producers_recover(healed)
        for p in self.producers + self.txn_producers:
            p.stop.set()
        for p in self.producers:
            p.join(timeout=RECOVERY_TIMEOUT_S)
            if p.is_alive() or not p.flushed:
                self.liveness("stuck-producer", p.name_now, "messages still in flight after flush")
        for p in self.txn_producers:
            # Each finishes the transaction it is in: at most END_RETRIES bounded calls.
            p.join(timeout=RECOVERY_TIMEOUT_S)
            if p.is_alive():
                self.liveness("stuck-producer", p.name_now, "its last transaction did not end")
        for topic in self.topics:
            problem = wait_isr_full(self.cluster, self.args.partitions, RECOVERY_TIMEOUT_S, topic)
            if problem:
                self.liveness("isr-not-restored", "cluster", problem)
        marks: dict = {}
        if self.queue:
            final, marks[TOPIC], err = final_read(self.cluster.bootstrap, TOPIC,
                                                  self.args.partitions, RECOVERY_TIMEOUT_S)
            self.history.final = final
            if err:
                self.liveness("final-read", "final reader", err)
            self.check_consumers_catch_up(final, self.consumers, "group")
        if self.txn:
            # After the producers stopped, so that no transaction is left open but a dead
            # incarnation's, which the broker aborts within its transaction timeout.
            uncommitted, committed, marks[TXN_TOPIC], err = final_reads(
                self.cluster.bootstrap, TXN_TOPIC, self.args.partitions, RECOVERY_TIMEOUT_S)
            self.txn_history.final_uncommitted, self.txn_history.final = uncommitted, committed
            if err:
                self.liveness("final-read", "txn final reader", err)
            self.check_consumers_catch_up(committed, self.txn_consumers, "txn group")
        for c in self.consumers + self.txn_consumers:
            c.stop.set()
        for c in self.consumers + self.txn_consumers:
            c.join(timeout=30)
            if c.is_alive():
                self.liveness("stuck-consumer", c.cname, "poll loop did not end in 30s")
            else:
                c.close()
        self.stop_cluster()
        return self.report(faults, marks)

    def check_producers_recover(self, healed: float) -> None:
        """Each producer has an ack for a message sent after the heal, within the timeout."""
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        waiting = list(self.producers)
        while waiting and time.monotonic() < deadline:
            waiting = [p for p in waiting
                       if not any(s["offset"] is not None and s["t_invoke"] >= healed
                                  and s["producer"] == p.name_now for s in self.history.sends[-2000:])]
            time.sleep(0.5)
        for p in waiting:
            self.liveness("stuck-producer", p.name_now,
                          f"no acknowledgement of a send made after the heal within "
                          f"{RECOVERY_SEND_S + RECOVERY_TIMEOUT_S:g}s")

    def check_txn_producers_recover(self, healed: float) -> None:
        """Each transactional producer commits a transaction begun after the heal, within the
        timeout."""
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S

        def committed_since(p: TxnProducerWorker) -> bool:
            return any(t["outcome"] == "committed" and t["t_begin"] >= healed
                       and t["producer"].startswith(f"t{p.index}.")
                       for t in self.txn_history.txns[-200:])

        waiting = list(self.txn_producers)
        while waiting and time.monotonic() < deadline:
            waiting = [p for p in waiting if not committed_since(p)]
            time.sleep(0.5)
        for p in waiting:
            self.liveness("stuck-producer", p.name_now,
                          f"no transaction begun after the heal committed within "
                          f"{RECOVERY_SEND_S + RECOVERY_TIMEOUT_S:g}s")

    def check_consumers_catch_up(self, final, consumers: list[ConsumerWorker],
                                 group_name: str) -> None:
        """Every assign consumer, and the subscribe group together, polls each partition's last
        record within the timeout (read_committed consumers: the last committed record)."""
        last = {p: recs[-1][0] for p, recs in final.items() if recs}
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S

        def behind() -> dict[str, dict]:
            out = {}
            for c in consumers:
                if c.mode == "assign":
                    lag = {p: (c.positions.get(p, -1), o) for p, o in last.items()
                           if c.positions.get(p, -1) < o}
                    if lag:
                        out[c.cname] = lag
            group = {p: max((c.positions.get(p, -1) for c in consumers
                             if c.mode == "subscribe"), default=-1) for p in last}
            lag = {p: (group[p], o) for p, o in last.items() if group[p] < o}
            if lag and any(c.mode == "subscribe" for c in consumers):
                out[group_name] = lag
            return out

        lagging = behind()
        while lagging and time.monotonic() < deadline:
            time.sleep(0.5)
            lagging = behind()
        for who, lag in lagging.items():
            self.liveness("stuck-consumer", who,
                          f"(polled, last) per partition after {RECOVERY_TIMEOUT_S:g}s: {lag}")

    def stop_cluster(self) -> None:
        for n in self.cluster.nodes:
            try:
                code = n.stop()
            except RuntimeError as e:
                code = str(e)
            if code != 0:
                self.liveness("unclean-exit", f"node {n.node_id}", f"SIGTERM exit: {code}")
            if "panicked" in n.log_text():
                self.liveness("panic", f"node {n.node_id}", "its log says panicked")

    def report(self, faults, marks) -> int:
        h = self.history.to_json()
        (self.work / "history.json").write_text(json.dumps(h))
        # Judged as read back from JSON (tuples become lists), as a saved history would be.
        r = checker.check(json.loads(json.dumps(h)))
        if self.txn:
            th = self.txn_history.to_json()
            (self.work / "txn-history.json").write_text(json.dumps(th))
            r.merge(txn_checker.check(json.loads(json.dumps(th))), "txn/")
        (self.work / "report.json").write_text(json.dumps(r.as_dict(), indent=1, default=str))
        log(f"\nseed {self.seed}: {len(self.history.faults)} faults "
            f"({sum(f['node'] is not None for f in self.history.faults)} injected), "
            f"high watermarks {marks}")
        if self.queue:
            sends = self.history.sends
            acked = sum(s["offset"] is not None for s in sends)
            log(f"queue: {len(sends)} sends, {acked} acknowledged, {len(sends) - acked} failed "
                f"or unknown, {len(self.history.polls)} polls, "
                f"{sum(len(v) for v in self.history.final.values())} records in the final read")
        if self.txn:
            t = self.txn_history
            log(f"txn: {len(t.txns)} transactions {t.counts()}, "
                f"{sum(len(x['values']) for x in t.txns)} values, {len(t.polls)} polls, "
                f"{sum(len(v) for v in t.final.values())} records in the read_committed final "
                f"read ({sum(len(v) for v in t.final_uncommitted.values())} read_uncommitted), "
                f"{len(t.replaced)} producer incarnations replaced")
        errors = dict(self.history.client_errors)
        for k, v in self.txn_history.client_errors.items():
            errors[f"txn {k}"] = v
        if errors:
            top = sorted(errors.items(), key=lambda kv: -kv[1])[:10]
            log("client errors (not anomalies): " + "; ".join(f"{k} x{v}" for k, v in top))
        if r.ok:
            log(f"seed {self.seed}: no anomaly")
            return 0
        log(f"seed {self.seed}: ANOMALIES {dict(r.counts)}")
        for kind, ex in r.examples.items():
            for e in ex[:3]:
                log(f"  {kind}: {json.dumps(e, default=str)}")
        log(f"history and report in {self.work}; replay: {self.replay()}")
        return 1

    def cleanup(self) -> None:
        """Always: stop what runs, remove the network. Never raises."""
        for w in self.producers + self.consumers + self.txn_producers + self.txn_consumers:
            w.stop.set()
        if self.cluster is not None:
            try:
                self.cluster.kill_all()
            except Exception as e:  # noqa: BLE001
                log(f"cleanup: {e}")
        if self.net is not None:
            try:
                self.net.close()
            except Exception as e:  # noqa: BLE001
                log(f"cleanup: {e}")


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    if os.geteuid() != 0:
        log("tests/jepsen needs root (network namespaces, iptables)")
        return 2
    run = Run(parse_args(argv))
    # SIGTERM unwinds like Ctrl-C, so the finally below removes the network either way.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return run.main()
    except KeyboardInterrupt:
        log(f"interrupted (seed {run.seed})")
        return 130
    except Exception as e:  # noqa: BLE001: a harness or set-up failure, not an anomaly
        log(f"seed {run.seed}: run failed: {type(e).__name__}: {e}")
        if run.cluster is not None:
            for n in run.cluster.nodes:
                log(f"--- node {n.node_id} log tail:\n{n.log_tail(20)}")
        return 1
    finally:
        run.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
