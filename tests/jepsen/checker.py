"""Jepsen's anomaly classes for a queue History (queue_workload.History as JSON-like dicts).

Safety (any one fails the run):
| anomaly               | what was observed                                                         |
|-----------------------|---------------------------------------------------------------------------|
| lost-write            | a send acknowledged at (p, o), or a value some consumer polled, is absent  |
|                       | from the final read                                                       |
| duplicate             | one value at two or more offsets (final read, acks and polls together)    |
| inconsistent-offsets  | one (partition, offset) seen holding two different values                 |
| unexpected-value      | a polled or final value that no producer ever sent                        |
| nonmonotonic-send     | one producer incarnation's acks to a partition, in send order, do not     |
|                       | strictly increase                                                         |
| nonmonotonic-poll     | one consumer's polls of a partition in one assignment epoch do not         |
|                       | strictly increase                                                         |
| poll-skip             | between two consecutive polls of a partition (one consumer, one epoch),    |
|                       | the final read holds a record that was not polled; or an assign consumer's |
|                       | first poll is past the partition's first record                           |
| offset-rewind         | a subscribe consumer's first poll of a partition in a new epoch is below   |
|                       | an offset the group's coordinator had acknowledged as committed before    |
|                       | that epoch began (committed offsets lost: Bufstream's jump to zero)        |

Liveness (also failures): stuck-producer, stuck-consumer, producer-fatal, final-read, found by
the runner (jepsen.py) and passed in History.liveness.

Every check is a plain function of the history, so tests/jepsen/test_checker.py feeds each one a
hand-made history that has the anomaly, and one that has none.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict

#: Examples kept per anomaly class in the report.
EXAMPLES_MAX = 8


class Report:
    """Anomalies by class: a count and the first few examples."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self.examples: dict[str, list] = defaultdict(list)

    def add(self, kind: str, example) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES_MAX:
            self.examples[kind].append(example)

    @property
    def ok(self) -> bool:
        return not self.counts

    def merge(self, other: "Report", prefix: str) -> None:
        """Another workload's report into this one, its classes named `prefix` + class."""
        for kind, n in other.counts.items():
            self.counts[prefix + kind] += n
            room = EXAMPLES_MAX - len(self.examples[prefix + kind])
            self.examples[prefix + kind].extend(other.examples[kind][:max(room, 0)])

    def as_dict(self) -> dict:
        return {k: {"count": self.counts[k], "examples": self.examples[k]} for k in self.counts}


def check(h: dict) -> Report:
    """Every check over one history."""
    r = Report()
    final = {int(p): [tuple(x) for x in v] for p, v in h["final"].items()}
    check_values(h, final, r)
    check_nonmonotonic_send(h, r)
    check_polls(h, final, r)
    check_rewind(h, r)
    for item in h.get("liveness", []):
        r.add(item["kind"], item)
    return r


def check_values(h: dict, final: dict, r: Report) -> None:
    """lost-write, duplicate, inconsistent-offsets, unexpected-value."""
    sent = {s["value"] for s in h["sends"]}
    at: dict[tuple[int, int], set[str]] = defaultdict(set)    # (p, o) -> values
    where: dict[str, set[tuple[int, int]]] = defaultdict(set)  # value -> {(p, o)}
    final_values: set[str] = set()
    for p, records in final.items():
        for o, v in records:
            at[(p, o)].add(v)
            where[v].add((p, o))
            final_values.add(v)
    for s in h["sends"]:
        if s["offset"] is not None:
            at[(s["partition"], s["offset"])].add(s["value"])
            where[s["value"]].add((s["partition"], s["offset"]))
            if s["value"] not in final_values:
                r.add("lost-write", {"acked": s})
    lost_polled = set()
    for poll in h["polls"]:
        at[(poll["partition"], poll["offset"])].add(poll["value"])
        where[poll["value"]].add((poll["partition"], poll["offset"]))
        v = poll["value"]
        if v not in sent:
            r.add("unexpected-value", {"polled": poll})
        elif v not in final_values and v not in lost_polled:
            lost_polled.add(v)
            r.add("lost-write", {"polled, not in final read": poll})
    for p, records in final.items():
        for o, v in records:
            if v not in sent:
                r.add("unexpected-value", {"final": (p, o, v)})
    for key, values in sorted(at.items()):
        if len(values) > 1:
            r.add("inconsistent-offsets", {"partition": key[0], "offset": key[1],
                                           "values": sorted(values)})
    for v, places in where.items():
        if len(places) > 1:
            r.add("duplicate", {"value": v, "at": sorted(places)})


def check_nonmonotonic_send(h: dict, r: Report) -> None:
    """Acks of one producer incarnation to one partition, in send order, strictly increase."""
    last: dict[tuple[str, int], dict] = {}
    for s in h["sends"]:                       # recorded in send order, per producer thread
        if s["offset"] is None:
            continue
        key = (s["producer"], s["partition"])
        prev = last.get(key)
        if prev is not None and s["offset"] <= prev["offset"]:
            r.add("nonmonotonic-send", {"before": prev, "after": s})
        last[key] = s


def check_polls(h: dict, final: dict, r: Report) -> None:
    """nonmonotonic-poll and poll-skip, per (consumer, epoch, partition), in poll order."""
    offsets = {p: [o for o, _ in records] for p, records in final.items()}
    last: dict[tuple[str, int, int], dict] = {}
    for poll in h["polls"]:
        p, o = poll["partition"], poll["offset"]
        key = (poll["consumer"], poll["epoch"], p)
        prev = last.get(key)
        last[key] = poll
        log = offsets.get(p, [])
        if prev is None:
            if poll["mode"] == "assign" and log and o > log[0]:
                r.add("poll-skip", {"first poll": poll, "log starts at": log[0]})
            continue
        if o <= prev["offset"]:
            r.add("nonmonotonic-poll", {"before": prev, "after": poll})
            continue
        # Records of the final read strictly between the two polls were skipped.
        between = bisect_right(log, o - 1) - bisect_right(log, prev["offset"])
        if between > 0:
            r.add("poll-skip", {"before": prev, "after": poll, "records skipped": between})


def check_rewind(h: dict, r: Report) -> None:
    """A subscribe consumer's epoch starts at or past every commit acknowledged before it."""
    commits = sorted(h["commits"], key=lambda c: c["t"])
    starts = {(a["consumer"], a["epoch"]): a["t"] for a in h["assigns"]}
    firsts: dict[tuple[str, int, int], dict] = {}
    for poll in h["polls"]:
        if poll["mode"] == "subscribe":
            firsts.setdefault((poll["consumer"], poll["epoch"], poll["partition"]), poll)
    for (consumer, epoch, p), poll in firsts.items():
        began = starts.get((consumer, epoch))
        if began is None:
            continue
        acked = [c["offset"] for c in commits if c["partition"] == p and c["t"] < began]
        if acked and poll["offset"] < max(acked):
            r.add("offset-rewind", {"first poll": poll, "epoch began": began,
                                    "committed before": max(acked)})
