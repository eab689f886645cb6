"""Jepsen-style black-box test of a three-node rill cluster under network partitions and process
faults (issue 32 item 4). Run it through tests/jepsen/run.sh (root: namespaces and iptables).

One run: make the network (net.py), start three nodes (nodes.py), create a topic (RF 3,
min.insync.replicas 2), start the queue workload (queue_workload.py), carry out the seeded fault
schedule (nemesis.py), heal everything, let the clients recover, read every partition, and judge
the history (checker.py). Any anomaly, liveness failure, broker panic or unclean exit fails the
run (exit status 1) and is reported with the seed that replays the schedule. The history and the
report are kept in the work dir (history.json, report.json) with every node's log.
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
from nemesis import Nemesis, schedule
from net import Network, sweep_stale
from nodes import Cluster
from queue_workload import CLIENT_LOG, ConsumerWorker, History, ProducerWorker, final_read

TOPIC = "jepsen-queue"
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


def create_topic(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": CLIENT_LOG})
    futures = admin.create_topics([NewTopic(TOPIC, partitions, 3)], request_timeout=30)
    futures[TOPIC].result(timeout=40)


def wait_isr_full(cluster: Cluster, partitions: int, timeout_s: float) -> str | None:
    """None once every partition has a leader and a full ISR, else what was seen."""
    deadline = time.monotonic() + timeout_s
    seen: dict = {}
    while time.monotonic() < deadline:
        seen = cluster.partitions(TOPIC)
        if len(seen) == partitions and all(p[0] == 0 and p[1] > 0 and sorted(p[3]) == sorted(p[2])
                                           for p in seen.values()):
            return None
        time.sleep(0.25)
    return f"ISR not full after {timeout_s}s: {seen}"


class Run:
    """One run's state, so that cleanup can always find what to remove."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
        root = Path(__file__).resolve().parents[2]
        target = Path(os.environ.get("CARGO_TARGET_DIR", root / "target"))
        self.work = args.work_dir or (target / "jepsen" / f"seed-{self.seed}")
        self.history = History()
        self.net: Network | None = None
        self.cluster: Cluster | None = None
        self.producers: list[ProducerWorker] = []
        self.consumers: list[ConsumerWorker] = []

    def liveness(self, kind: str, who: str, detail: str) -> None:
        self.history.liveness.append({"kind": kind, "who": who, "detail": detail})
        log(f"LIVENESS {kind}: {who}: {detail}")

    def main(self) -> int:
        a = self.args
        faults = schedule(self.seed, a.duration, a.partitions, 3, pair(a.hold), pair(a.quiet))
        log(f"jepsen queue workload: seed {self.seed}; replay: tests/jepsen/run.sh --seed "
            f"{self.seed} --duration {a.duration:g} --hold {a.hold} --quiet {a.quiet}")
        for i, f in enumerate(faults):
            log(f"  schedule {i + 1}: {f.describe()}")
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        handler = logging.FileHandler(self.work / "clients.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        CLIENT_LOG.addHandler(handler)
        CLIENT_LOG.setLevel(logging.INFO)
        swept = sweep_stale()
        if swept:
            log(f"removed leftovers of earlier runs: {swept}")
        self.net = Network(3, random.Random(self.seed ^ os.getpid()))
        self.net.create()
        self.net.enter_clients()
        log(f"network {self.net.subnet} (run {self.net.run_id}), work dir {self.work}")
        self.cluster = Cluster(self.net, self.work)
        self.cluster.start()
        create_topic(self.cluster.bootstrap, a.partitions)
        problem = wait_isr_full(self.cluster, a.partitions, 30)
        if problem:
            raise RuntimeError(f"set-up: {problem}")
        self.history.t0 = time.monotonic()
        self.start_clients()
        time.sleep(3)
        Nemesis(self.cluster, self.net, TOPIC, self.history, log).run(faults, threading.Event())
        return self.finish(faults)

    def start_clients(self) -> None:
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
        for w in self.consumers + self.producers:
            w.start()

    def finish(self, faults) -> int:
        nemesis = Nemesis(self.cluster, self.net, TOPIC, self.history, log)
        nemesis.heal_all()
        healed = self.history.now()
        log(f"[{healed:7.1f}s] all healed; {RECOVERY_SEND_S:g}s of recovery traffic")
        self.cluster.wait_brokers(3, RECOVERY_TIMEOUT_S)
        time.sleep(RECOVERY_SEND_S)
        self.check_producers_recover(healed)
        for p in self.producers:
            p.stop.set()
        for p in self.producers:
            p.join(timeout=RECOVERY_TIMEOUT_S)
            if p.is_alive() or not p.flushed:
                self.liveness("stuck-producer", p.name_now, "messages still in flight after flush")
        problem = wait_isr_full(self.cluster, self.args.partitions, RECOVERY_TIMEOUT_S)
        if problem:
            self.liveness("isr-not-restored", "cluster", problem)
        final, marks, err = final_read(self.cluster.bootstrap, TOPIC, self.args.partitions,
                                       RECOVERY_TIMEOUT_S)
        self.history.final = final
        if err:
            self.liveness("final-read", "final reader", err)
        self.check_consumers_catch_up(final)
        for c in self.consumers:
            c.stop.set()
        for c in self.consumers:
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

    def check_consumers_catch_up(self, final) -> None:
        """Every assign consumer, and the subscribe group together, polls each partition's last
        record within the timeout."""
        last = {p: recs[-1][0] for p, recs in final.items() if recs}
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S

        def behind() -> dict[str, dict]:
            out = {}
            for c in self.consumers:
                if c.mode == "assign":
                    lag = {p: (c.positions.get(p, -1), o) for p, o in last.items()
                           if c.positions.get(p, -1) < o}
                    if lag:
                        out[c.cname] = lag
            group = {p: max((c.positions.get(p, -1) for c in self.consumers
                             if c.mode == "subscribe"), default=-1) for p in last}
            lag = {p: (group[p], o) for p, o in last.items() if group[p] < o}
            if lag and any(c.mode == "subscribe" for c in self.consumers):
                out["group"] = lag
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
        r = checker.check(json.loads(json.dumps(h)))
        (self.work / "report.json").write_text(json.dumps(r.as_dict(), indent=1, default=str))
        sends = self.history.sends
        acked = sum(s["offset"] is not None for s in sends)
        log(f"\nseed {self.seed}: {len(self.history.faults)} faults "
            f"({sum(f['node'] is not None for f in self.history.faults)} injected), "
            f"{len(sends)} sends, {acked} acknowledged, {len(sends) - acked} failed or unknown, "
            f"{len(self.history.polls)} polls, {sum(len(v) for v in self.history.final.values())} "
            f"records in the final read, high watermarks {marks}")
        if self.history.client_errors:
            top = sorted(self.history.client_errors.items(), key=lambda kv: -kv[1])[:8]
            log("client errors (not anomalies): " + "; ".join(f"{k} x{v}" for k, v in top))
        if r.ok:
            log(f"seed {self.seed}: no anomaly")
            return 0
        log(f"seed {self.seed}: ANOMALIES {dict(r.counts)}")
        for kind, ex in r.examples.items():
            for e in ex[:3]:
                log(f"  {kind}: {json.dumps(e, default=str)}")
        log(f"history and report in {self.work}; replay: tests/jepsen/run.sh --seed {self.seed} "
            f"--duration {self.args.duration:g} --hold {self.args.hold} --quiet {self.args.quiet}")
        return 1

    def cleanup(self) -> None:
        """Always: stop what runs, remove the network. Never raises."""
        for w in self.producers + self.consumers:
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
