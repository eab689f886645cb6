"""Anomaly classes for a transactional History (txn_workload.TxnHistory as JSON-like dicts).

Every read judged here is read_committed: the consumers' polls and the final read (`final`).
`final_uncommitted` (the whole log) only helps: offset consistency, and the examples say whether
a missing value is in the log at all. A transaction's outcome is what its producer was told
(txn_workload.py): committed, aborted, unknown (commit requested, no clean answer) or
never-committed (commit never requested, the abort not confirmed).

| anomaly              | what was observed                                                         |
|----------------------|---------------------------------------------------------------------------|
| aborted-read (G1a)   | a value of an aborted or never-committed transaction read by a            |
|                      | read_committed consumer or in the read_committed final read               |
| precommitted-read    | a value polled strictly before its transaction's commit was requested     |
|                      | (both times from one process's monotonic clock; a poll is timed when it  |
|                      | returned, so it was served earlier still). Not flagged for a transaction  |
|                      | never asked to commit: that read is an aborted-read                       |
| lost-committed-write | a value of a committed transaction, or a value some read_committed        |
|                      | consumer polled (its transaction was visible, so committed), absent from  |
|                      | the read_committed final read                                             |
| partial-transaction  | a transaction with some but not all of its values in the read_committed   |
|                      | final read, whatever its outcome (atomicity). A committed one missing     |
|                      | values is a lost-committed-write too                                      |
| duplicate            | one value at two or more offsets (final read, polls, delivery reports)    |
| inconsistent-offsets | one (partition, offset) seen holding two values (both final reads, polls, |
|                      | delivery reports)                                                         |
| unexpected-value     | a value read that no transaction wrote                                    |
| nonmonotonic-send    | one incarnation's delivery offsets to a partition, in send order, do not  |
|                      | strictly increase (checker.check_nonmonotonic_send)                       |
| nonmonotonic-poll,   | checker.check_polls and checker.check_rewind over the read_committed      |
| poll-skip,           | polls and the read_committed final read (see below)                       |
| offset-rewind        |                                                                           |

An unknown transaction is never an anomaly for being visible or for being invisible: only for
being partly visible, or for being polled and then gone.

Poll skip under read_committed. A read_committed consumer legitimately jumps over offsets: the
records of aborted transactions (dropped by the client with the fetch's aborted-transaction
list) and the control records (commit and abort markers). So a gap in a consumer's offsets is
judged only by the committed values between them: between two consecutive polls of a partition
(one consumer, one assignment epoch) at offsets a < b, the read_committed final read must hold
no record at an offset strictly between a and b. That final read holds exactly the committed
records, so aborted records and markers never count as skipped, and a record of an unknown
transaction that committed does (the consumer could not have passed it before it was decided:
the last stable offset stops a read_committed fetch below every open transaction). An assign
consumer's first poll must be the first record of that final read. This is checker.check_polls
given the read_committed final read, so the rule is the queue workload's, over committed values.

Every check is a plain function of the history, fed hand-made histories in test_checker.py.
"""

from __future__ import annotations

from collections import defaultdict

import checker
from checker import Report

#: Outcomes whose values a read_committed reader must never see.
INVISIBLE = ("aborted", "never-committed")


def check(h: dict) -> Report:
    """Every transactional check over one history (liveness is the run history's: checker.py)."""
    r = Report()
    final = _records(h.get("final", {}))
    uncommitted = _records(h.get("final_uncommitted", {}))
    writer = {v["value"]: t for t in h["txns"] for v in t["values"]}
    check_unexpected(h, final, writer, r)
    check_aborted_reads(h, final, writer, r)
    check_precommitted_reads(h, writer, r)
    check_lost_committed(h, final, uncommitted, r)
    check_partial(h, final, r)
    check_offsets(h, final, uncommitted, r)
    checker.check_nonmonotonic_send({"sends": sends(h)}, r)
    checker.check_polls(h, final, r)
    checker.check_rewind(h, r)
    return r


def _records(raw: dict) -> dict[int, list[tuple[int, str]]]:
    return {int(p): [tuple(x) for x in v] for p, v in raw.items()}


def sends(h: dict) -> list[dict]:
    """The transactions' values as queue-style sends, in send order (one list per producer
    incarnation is enough: check_nonmonotonic_send keys by producer and partition)."""
    return [{"producer": t["producer"], "value": v["value"], "partition": v["partition"],
             "offset": v["offset"]} for t in h["txns"] for v in t["values"]]


def _visible(final: dict) -> dict[str, tuple[int, int]]:
    return {v: (p, o) for p, records in final.items() for o, v in records}


def _brief(t: dict) -> dict:
    """A transaction for an example: everything but the value list, plus its value names."""
    return {k: t[k] for k in t if k != "values"} | {
        "values": [(v["value"], v["partition"], v["offset"]) for v in t["values"]]}


def check_unexpected(h: dict, final: dict, writer: dict, r: Report) -> None:
    """unexpected-value: a polled or final value no transaction wrote."""
    for poll in h["polls"]:
        if poll["value"] not in writer:
            r.add("unexpected-value", {"polled": poll})
    for p, records in final.items():
        for o, v in records:
            if v not in writer:
                r.add("unexpected-value", {"final": (p, o, v)})


def check_aborted_reads(h: dict, final: dict, writer: dict, r: Report) -> None:
    """aborted-read (G1a): a read_committed read of an aborted or never-committed value."""
    for poll in h["polls"]:
        t = writer.get(poll["value"])
        if t is not None and t["outcome"] in INVISIBLE:
            r.add("aborted-read", {"polled": poll, "txn": _brief(t)})
    for p, records in final.items():
        for o, v in records:
            t = writer.get(v)
            if t is not None and t["outcome"] in INVISIBLE:
                r.add("aborted-read", {"final": (p, o, v), "txn": _brief(t)})


def check_precommitted_reads(h: dict, writer: dict, r: Report) -> None:
    """precommitted-read: a poll strictly before its transaction's commit was requested."""
    for poll in h["polls"]:
        t = writer.get(poll["value"])
        if t is None or t["outcome"] in INVISIBLE or t["t_commit"] is None:
            continue        # unexpected-value or aborted-read already say it
        if poll["t"] < t["t_commit"]:
            r.add("precommitted-read", {"polled": poll, "commit requested at": t["t_commit"],
                                        "txn": _brief(t)})


def check_lost_committed(h: dict, final: dict, uncommitted: dict, r: Report) -> None:
    """lost-committed-write: a committed value, or one a consumer polled, not in the final
    read. The example says where (if anywhere) the whole log holds it."""
    visible = _visible(final)
    in_log = _visible(uncommitted)
    for t in h["txns"]:
        if t["outcome"] != "committed":
            continue
        for v in t["values"]:
            if v["value"] not in visible:
                r.add("lost-committed-write", {"value": v["value"], "txn": t["id"],
                                               "in read_uncommitted log at":
                                               in_log.get(v["value"])})
    writer = {v["value"]: t for t in h["txns"] for v in t["values"]}
    reported = set()
    for poll in h["polls"]:
        v = poll["value"]
        if v not in writer or writer[v]["outcome"] in INVISIBLE:
            continue        # unexpected-value or aborted-read already say it
        if v not in visible and v not in reported:
            reported.add(v)
            r.add("lost-committed-write", {"polled, not in final read": poll,
                                           "in read_uncommitted log at": in_log.get(v)})


def check_partial(h: dict, final: dict, r: Report) -> None:
    """partial-transaction: some but not all of a transaction's values visible at the end."""
    visible = _visible(final)
    for t in h["txns"]:
        seen = [v["value"] for v in t["values"] if v["value"] in visible]
        if seen and len(seen) < len(t["values"]):
            r.add("partial-transaction", {"txn": _brief(t), "visible": seen})


def check_offsets(h: dict, final: dict, uncommitted: dict, r: Report) -> None:
    """duplicate (over what read_committed readers see, and delivery reports) and
    inconsistent-offsets (over everything, the whole log too)."""
    at: dict[tuple[int, int], set[str]] = defaultdict(set)     # (p, o) -> values
    where: dict[str, set[tuple[int, int]]] = defaultdict(set)  # value -> {(p, o)}
    for p, records in final.items():
        for o, v in records:
            at[(p, o)].add(v)
            where[v].add((p, o))
    for poll in h["polls"]:
        at[(poll["partition"], poll["offset"])].add(poll["value"])
        where[poll["value"]].add((poll["partition"], poll["offset"]))
    for t in h["txns"]:
        for v in t["values"]:
            if v["offset"] is not None:
                at[(v["partition"], v["offset"])].add(v["value"])
                where[v["value"]].add((v["partition"], v["offset"]))
    # The whole log: a value of an aborted transaction written twice is no read_committed
    # duplicate, but two values at one offset are inconsistent whoever reads them.
    for p, records in uncommitted.items():
        for o, v in records:
            at[(p, o)].add(v)
    for key, values in sorted(at.items()):
        if len(values) > 1:
            r.add("inconsistent-offsets", {"partition": key[0], "offset": key[1],
                                           "values": sorted(values)})
    for v, places in where.items():
        if len(places) > 1:
            r.add("duplicate", {"value": v, "at": sorted(places)})
