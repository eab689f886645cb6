"""The seeded fault schedule and the nemesis that carries it out, one fault at a time.

The schedule is a pure function of (seed, duration): printed before the run, so a seed replays
the same faults in the same order with the same holds. Targets named by role ("the leader of
partition 1", "the active controller") are resolved when the fault starts, from what the cluster
says then.

| fault               | start                                   | end (after hold_s)         |
|---------------------|-----------------------------------------|----------------------------|
| isolate-leader      | iptables DROP between the leader of a   | flush the rules            |
|                     | partition and both other nodes          |                            |
| isolate-controller  | same, the active controller             | flush the rules            |
| isolate-follower    | same, a replica that does not lead      | flush the rules            |
| kill9               | SIGKILL a node (a leader or any)        | start it again             |
| pause               | SIGSTOP a node (a leader or any)        | SIGCONT                    |
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

FAULT_KINDS = ("isolate-leader", "isolate-controller", "isolate-follower", "kill9", "pause")


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: what, whom (partition or node, by role), how long, then quiet."""
    kind: str
    partition: int | None   # for leader/follower targets
    node: int | None        # for kill9/pause of a fixed node (None: the partition's leader)
    hold_s: float
    quiet_s: float

    def describe(self) -> str:
        if self.kind == "isolate-controller":
            who = "the active controller"
        elif self.kind == "isolate-follower":
            who = f"a follower of partition {self.partition}"
        elif self.node is not None:
            who = f"node {self.node}"
        else:
            who = f"the leader of partition {self.partition}"
        action = {"kill9": "kill -9", "pause": "SIGSTOP"}.get(self.kind, "isolate")
        return f"{action} {who} for {self.hold_s:.1f}s, then {self.quiet_s:.1f}s quiet"


def schedule(seed: int, duration_s: float, partitions: int, nodes: int,
             hold_s: tuple[float, float], quiet_s: tuple[float, float]) -> list[Fault]:
    """Faults whose holds and quiets add up to at most `duration_s` (at least one fault)."""
    rng = random.Random(seed)
    out: list[Fault] = []
    spent = 0.0
    while True:
        kind = rng.choice(FAULT_KINDS)
        partition = rng.randrange(partitions)
        node = rng.randint(1, nodes) if kind in ("kill9", "pause") and rng.random() < 0.5 \
            else None
        f = Fault(kind, partition, node, round(rng.uniform(*hold_s), 1),
                  round(rng.uniform(*quiet_s), 1))
        if out and spent + f.hold_s + f.quiet_s > duration_s:
            return out
        out.append(f)
        spent += f.hold_s + f.quiet_s


class Nemesis:
    """Carries out faults on a nodes.Cluster over a net.Network, logging into a History."""

    def __init__(self, cluster, net, topic: str, history, log):
        self.cluster, self.net, self.topic, self.history, self.log = \
            cluster, net, topic, history, log

    def resolve(self, f: Fault) -> int | None:
        """The node a fault hits now, or None when the cluster cannot say (fault skipped)."""
        if f.kind == "isolate-controller":
            for n in self.cluster.serving():
                try:
                    c = n.controller()
                except OSError:
                    continue
                if c > 0:
                    return c
            return None
        if f.node is not None:
            return f.node
        p = self.cluster.partitions(self.topic).get(f.partition)
        if p is None or p[1] < 0:
            return None
        if f.kind == "isolate-follower":
            followers = [r for r in p[2] if r != p[1]]
            return followers[f.partition % len(followers)] if followers else None
        return p[1]

    def run(self, faults: list[Fault], stop) -> None:
        for i, f in enumerate(faults):
            if stop.is_set():
                return
            target = self.resolve(f)
            t = self.history.now()
            if target is None:
                self.log(f"[{t:7.1f}s] fault {i + 1}: {f.describe()}: no target now, skipped")
                self.history.faults.append({"t": t, "fault": f.describe(), "node": None})
                stop.wait(f.hold_s + f.quiet_s)
                continue
            self.log(f"[{t:7.1f}s] fault {i + 1}: {f.describe()} -> node {target}")
            self.history.faults.append({"t": t, "fault": f.describe(), "node": target})
            self.start(f.kind, target)
            stop.wait(f.hold_s)
            self.end(f.kind, target)
            self.log(f"[{self.history.now():7.1f}s] fault {i + 1} healed")
            stop.wait(f.quiet_s)

    def start(self, kind: str, node_id: int) -> None:
        node = self.cluster.node(node_id)
        if kind.startswith("isolate"):
            self.net.isolate(node_id)
        elif kind == "kill9":
            if node.alive():
                node.kill9()
        elif kind == "pause":
            if node.alive():
                node.pause()

    def end(self, kind: str, node_id: int) -> None:
        node = self.cluster.node(node_id)
        if kind.startswith("isolate"):
            self.net.heal()
        elif kind == "kill9":
            node.start()
        elif kind == "pause":
            if node.alive() and node.paused:
                node.resume()

    def heal_all(self) -> None:
        """Every rule flushed, every paused node continued, every dead node started."""
        self.net.heal()
        for n in self.cluster.nodes:
            if n.alive() and n.paused:
                n.resume()
        for n in self.cluster.nodes:
            if not n.alive():
                n.start()
