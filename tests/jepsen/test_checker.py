"""The checker finds each anomaly class in a hand-made history that has it, and nothing in one
that has none (so a clean Jepsen run means something). Plain pytest, no broker, no root."""

from __future__ import annotations

import copy

import checker
import txn_checker


def clean() -> dict:
    """Two acked sends and one failed send to partition 0, polled in order by an assign
    consumer and by a subscribe consumer (epoch 1), all in the final read."""
    sends = [
        {"producer": "p1.1", "value": "p1.1-0", "partition": 0, "offset": 0, "t_invoke": 0.0},
        {"producer": "p1.1", "value": "p1.1-1", "partition": 0, "offset": 1, "t_invoke": 0.1},
        {"producer": "p1.1", "value": "p1.1-2", "partition": 0, "offset": None, "t_invoke": 0.2},
    ]
    polls = [{"consumer": c, "mode": m, "epoch": 1, "partition": 0, "offset": o,
              "value": f"p1.1-{o}", "t": 1.0 + o}
             for c, m in (("a1", "assign"), ("s1", "subscribe")) for o in (0, 1)]
    return {"sends": sends, "polls": polls,
            "assigns": [{"consumer": "a1", "epoch": 1, "partitions": [0], "t": 0.0},
                        {"consumer": "s1", "epoch": 1, "partitions": [0], "t": 0.0}],
            "commits": [], "final": {"0": [(0, "p1.1-0"), (1, "p1.1-1")]}, "liveness": []}


def kinds(h: dict) -> set[str]:
    return set(checker.check(h).counts)


def test_a_clean_history_has_no_anomaly():
    assert kinds(clean()) == set()


def test_an_indeterminate_send_that_landed_is_no_anomaly():
    h = clean()
    h["final"]["0"].append((2, "p1.1-2"))
    assert kinds(h) == set()


def test_an_acknowledged_send_missing_from_the_final_read_is_a_lost_write():
    h = clean()
    h["final"]["0"] = [(0, "p1.1-0")]
    h["polls"] = [p for p in h["polls"] if p["offset"] == 0]
    assert kinds(h) == {"lost-write"}


def test_a_polled_value_missing_from_the_final_read_is_a_lost_write():
    h = clean()
    h["sends"][1]["offset"] = None        # not acked, but a consumer read it
    h["final"]["0"] = [(0, "p1.1-0")]
    assert kinds(h) == {"lost-write"}


def test_a_value_at_two_offsets_is_a_duplicate():
    h = clean()
    h["final"]["0"].append((2, "p1.1-1"))
    assert kinds(h) == {"duplicate"}


def test_two_values_at_one_offset_are_inconsistent_offsets():
    h = clean()
    h["polls"][0]["value"] = "p1.1-2"      # a1 saw another value at offset 0
    assert "inconsistent-offsets" in kinds(h)


def test_a_value_nobody_sent_is_unexpected():
    h = clean()
    h["final"]["0"].append((2, "garbage"))
    assert kinds(h) == {"unexpected-value"}


def test_acks_going_backwards_are_a_nonmonotonic_send():
    h = clean()
    h["sends"][1]["offset"] = 0
    h["sends"][0]["offset"] = 1
    assert "nonmonotonic-send" in kinds(h)


def test_a_poll_going_backwards_in_one_epoch_is_nonmonotonic():
    h = clean()
    h["polls"].append(dict(h["polls"][0], t=5.0))
    assert kinds(h) == {"nonmonotonic-poll"}


def test_a_rebalance_may_go_back():
    h = clean()
    h["assigns"].append({"consumer": "s1", "epoch": 2, "partitions": [0], "t": 4.0})
    h["polls"].append(dict(h["polls"][2], epoch=2, t=5.0))
    assert kinds(h) == set()


def test_a_poll_jumping_over_a_record_is_a_skip():
    h = clean()
    h["sends"].append({"producer": "p1.1", "value": "p1.1-3", "partition": 0, "offset": 3,
                       "t_invoke": 0.3})
    h["final"]["0"] += [(2, "p1.1-2"), (3, "p1.1-3")]
    h["polls"].append({"consumer": "a1", "mode": "assign", "epoch": 1, "partition": 0,
                       "offset": 3, "value": "p1.1-3", "t": 6.0})
    assert kinds(h) == {"poll-skip"}


def test_an_offset_gap_without_records_is_no_skip():
    """A transaction marker or an aborted batch holds an offset no final read returns."""
    h = clean()
    h["sends"][2]["offset"] = 3
    h["final"]["0"].append((3, "p1.1-2"))
    h["polls"].append({"consumer": "a1", "mode": "assign", "epoch": 1, "partition": 0,
                       "offset": 3, "value": "p1.1-2", "t": 6.0})
    assert kinds(h) == set()


def test_an_assign_consumer_starting_past_the_log_start_skipped():
    h = clean()
    h["polls"] = [p for p in h["polls"] if not (p["consumer"] == "a1" and p["offset"] == 0)]
    assert kinds(h) == {"poll-skip"}


def test_a_new_epoch_below_an_acknowledged_commit_is_a_rewind():
    h = clean()
    h["commits"].append({"consumer": "s1", "partition": 0, "offset": 2, "t": 3.5})
    h["assigns"].append({"consumer": "s2", "epoch": 1, "partitions": [0], "t": 4.0})
    h["polls"].append({"consumer": "s2", "mode": "subscribe", "epoch": 1, "partition": 0,
                       "offset": 0, "value": "p1.1-0", "t": 5.0})
    assert kinds(h) == {"offset-rewind"}


def test_a_commit_acknowledged_after_the_epoch_began_is_no_rewind():
    h = clean()
    h["commits"].append({"consumer": "s1", "partition": 0, "offset": 2, "t": 4.5})
    h["assigns"].append({"consumer": "s2", "epoch": 1, "partitions": [0], "t": 4.0})
    h["polls"].append({"consumer": "s2", "mode": "subscribe", "epoch": 1, "partition": 0,
                       "offset": 0, "value": "p1.1-0", "t": 5.0})
    assert kinds(h) == set()


def test_liveness_failures_fail_the_check():
    h = copy.deepcopy(clean())
    h["liveness"].append({"kind": "stuck-consumer", "who": "a1", "detail": "behind"})
    assert kinds(h) == {"stuck-consumer"}


def test_reports_merge_under_a_prefix():
    r = checker.Report()
    r.add("lost-write", {"x": 1})
    other = checker.Report()
    other.add("lost-write", {"y": 2})
    r.merge(other, "txn/")
    assert dict(r.counts) == {"lost-write": 1, "txn/lost-write": 1}
    assert r.examples["txn/lost-write"] == [{"y": 2}]


# --- the transactional workload (txn_checker.py) ---------------------------------------------

def txn(tid: str, outcome: str, values, t_commit=None) -> dict:
    """A transaction of producer t1.1 writing (value, partition, delivery offset) `values`."""
    return {"id": tid, "producer": "t1.1", "intent": "commit" if t_commit else "abort",
            "outcome": outcome, "t_begin": 0.0, "t_commit": t_commit, "t_end": None,
            "error": None, "abort_after_error": None,
            "values": [{"value": v, "partition": p, "offset": o, "error": None}
                       for v, p, o in values]}


def txn_clean() -> dict:
    """Three transactions on partitions 0 and 1: T0 committed (offset 0 of each, its marker at
    1), T1 aborted (offset 2 of each, marker at 3), T2 committed (partition 0 offset 4). An
    assign consumer (ta1) and a subscribe consumer (ts1, epoch 1) poll every committed value
    after its commit was requested, jumping over T1's records and the markers as
    read_committed consumers do."""
    txns = [txn("t1.1-0", "committed", [("t1.1-0-0", 0, 0), ("t1.1-0-1", 1, 0)], t_commit=0.5),
            txn("t1.1-1", "aborted", [("t1.1-1-0", 0, 2), ("t1.1-1-1", 1, 2)]),
            txn("t1.1-2", "committed", [("t1.1-2-0", 0, 4)], t_commit=1.5)]
    committed = [(0, 0, "t1.1-0-0", 1.0), (1, 0, "t1.1-0-1", 1.0), (0, 4, "t1.1-2-0", 2.0)]
    polls = [{"consumer": c, "mode": m, "epoch": 1, "partition": p, "offset": o, "value": v,
              "t": t} for c, m in (("ta1", "assign"), ("ts1", "subscribe"))
             for p, o, v, t in committed]
    return {"txns": txns, "polls": polls,
            "assigns": [{"consumer": "ta1", "epoch": 1, "partitions": [0, 1], "t": 0.0},
                        {"consumer": "ts1", "epoch": 1, "partitions": [0, 1], "t": 0.0}],
            "commits": [],
            "final": {"0": [(0, "t1.1-0-0"), (4, "t1.1-2-0")], "1": [(0, "t1.1-0-1")]},
            "final_uncommitted": {"0": [(0, "t1.1-0-0"), (2, "t1.1-1-0"), (4, "t1.1-2-0")],
                                  "1": [(0, "t1.1-0-1"), (2, "t1.1-1-1")]}}


def txn_kinds(h: dict) -> set[str]:
    return set(txn_checker.check(h).counts)


def poll(consumer: str, p: int, o: int, v: str, t: float, mode: str = "assign",
         epoch: int = 1) -> dict:
    return {"consumer": consumer, "mode": mode, "epoch": epoch, "partition": p, "offset": o,
            "value": v, "t": t}


def test_a_clean_transactional_history_has_no_anomaly():
    """Including the read_committed consumers' jump from offset 0 to 4 over the aborted
    record and two markers: no committed value lies between, so nothing was skipped."""
    assert txn_kinds(txn_clean()) == set()


def test_an_empty_transactional_history_has_no_anomaly():
    assert txn_kinds({"txns": [], "polls": [], "assigns": [], "commits": [], "final": {},
                      "final_uncommitted": {}}) == set()
    assert txn_kinds({"txns": [], "polls": [], "assigns": [], "commits": [],
                      "final": {"0": [], "1": []}}) == set()


def test_polling_a_value_of_an_aborted_transaction_is_an_aborted_read():
    h = txn_clean()
    h["polls"].insert(1, poll("ta1", 0, 2, "t1.1-1-0", 1.2))
    assert txn_kinds(h) == {"aborted-read"}


def test_an_aborted_transaction_in_the_final_read_is_an_aborted_read():
    """Both of its values, so no partial transaction; the consumers that jumped over them
    (correctly for an aborted transaction) now seem to have skipped committed records."""
    h = txn_clean()
    h["final"]["0"].insert(1, (2, "t1.1-1-0"))
    h["final"]["1"].append((2, "t1.1-1-1"))
    assert txn_kinds(h) == {"aborted-read", "poll-skip"}


def test_a_transaction_never_asked_to_commit_must_stay_invisible():
    """Its abort failed (never-committed): Kafka commits only on EndTxn(commit)."""
    h = txn_clean()
    h["txns"][1]["outcome"] = "never-committed"
    h["polls"].insert(1, poll("ta1", 0, 2, "t1.1-1-0", 1.2))
    assert txn_kinds(h) == {"aborted-read"}


def test_an_unknown_transaction_that_turned_out_visible_is_no_anomaly():
    h = txn_clean()
    h["txns"][1] = txn("t1.1-1", "unknown", [("t1.1-1-0", 0, 2), ("t1.1-1-1", 1, 2)],
                       t_commit=1.1)
    h["final"]["0"].insert(1, (2, "t1.1-1-0"))
    h["final"]["1"].append((2, "t1.1-1-1"))
    # The consumers read it too (or they would have skipped a committed record).
    h["polls"] = [q for q in h["polls"] if q["offset"] != 4]
    for c, m in (("ta1", "assign"), ("ts1", "subscribe")):
        h["polls"] += [poll(c, 0, 2, "t1.1-1-0", 1.6, m), poll(c, 1, 2, "t1.1-1-1", 1.6, m),
                       poll(c, 0, 4, "t1.1-2-0", 2.0, m)]
    assert txn_kinds(h) == set()


def test_an_unknown_transaction_that_turned_out_invisible_is_no_anomaly():
    h = txn_clean()
    h["txns"][1] = txn("t1.1-1", "unknown", [("t1.1-1-0", 0, 2), ("t1.1-1-1", 1, 2)],
                       t_commit=1.1)
    assert txn_kinds(h) == set()


def test_an_unknown_transaction_partly_visible_is_partial():
    h = txn_clean()
    h["txns"][1] = txn("t1.1-1", "unknown", [("t1.1-1-0", 0, 2), ("t1.1-1-1", 1, 2)],
                       t_commit=1.1)
    h["final"]["1"].append((2, "t1.1-1-1"))
    assert txn_kinds(h) == {"partial-transaction"}


def test_a_committed_value_missing_from_the_final_read_is_lost():
    h = txn_clean()
    h["final"]["0"] = [(0, "t1.1-0-0")]
    h["polls"] = [q for q in h["polls"] if q["offset"] != 4]
    assert txn_kinds(h) == {"lost-committed-write"}


def test_a_committed_transaction_missing_one_value_is_lost_and_partial():
    h = txn_clean()
    h["final"]["1"] = []
    h["polls"] = [q for q in h["polls"] if q["partition"] != 1]
    assert txn_kinds(h) == {"lost-committed-write", "partial-transaction"}


def test_a_polled_value_of_an_unknown_transaction_must_stay_visible():
    """A read_committed consumer saw it, so its transaction committed: gone at the end is lost
    (both of its values are gone, so it is not partial)."""
    h = txn_clean()
    h["txns"][1] = txn("t1.1-1", "unknown", [("t1.1-1-0", 0, 2), ("t1.1-1-1", 1, 2)],
                       t_commit=1.1)
    h["polls"].insert(1, poll("ta1", 0, 2, "t1.1-1-0", 1.2))
    assert txn_kinds(h) == {"lost-committed-write"}


def test_a_read_before_the_commit_was_requested_is_precommitted():
    h = txn_clean()
    for q in h["polls"]:
        if q["value"] == "t1.1-2-0" and q["consumer"] == "ts1":
            q["t"] = 1.4            # T2's commit was requested at 1.5
    assert txn_kinds(h) == {"precommitted-read"}


def test_a_read_at_the_instant_the_commit_was_requested_is_not_precommitted():
    h = txn_clean()
    for q in h["polls"]:
        if q["value"] == "t1.1-2-0":
            q["t"] = 1.5
    assert txn_kinds(h) == set()


def test_a_transactional_value_at_two_offsets_is_a_duplicate():
    h = txn_clean()
    h["final"]["0"].append((6, "t1.1-0-0"))
    assert txn_kinds(h) == {"duplicate"}


def test_two_values_at_one_offset_of_the_whole_log_are_inconsistent():
    """T1's value was reported delivered at partition 0 offset 2; the log says otherwise."""
    h = txn_clean()
    h["final_uncommitted"]["0"][1] = (2, "t1.1-x")
    assert txn_kinds(h) == {"inconsistent-offsets"}


def test_a_value_no_transaction_wrote_is_unexpected():
    h = txn_clean()
    h["final"]["1"].append((4, "garbage"))
    assert txn_kinds(h) == {"unexpected-value"}


def test_a_read_committed_poll_jumping_over_a_committed_value_is_a_skip():
    h = txn_clean()
    h["txns"].append(txn("t1.1-3", "committed", [("t1.1-3-0", 0, 6)], t_commit=2.5))
    h["final"]["0"].append((6, "t1.1-3-0"))
    h["polls"] = [q for q in h["polls"] if not (q["consumer"] == "ta1" and q["offset"] == 4)]
    h["polls"] += [poll("ta1", 0, 6, "t1.1-3-0", 3.0),
                   poll("ts1", 0, 6, "t1.1-3-0", 3.0, "subscribe")]
    assert txn_kinds(h) == {"poll-skip"}


def test_jumping_over_an_unknown_transaction_that_committed_is_a_skip():
    """The last stable offset keeps a read_committed fetch below every open transaction, so a
    consumer past it saw it decided: committed, it had to be returned."""
    h = txn_clean()
    h["txns"][1] = txn("t1.1-1", "unknown", [("t1.1-1-0", 0, 2), ("t1.1-1-1", 1, 2)],
                       t_commit=1.1)
    h["final"]["0"].insert(1, (2, "t1.1-1-0"))
    h["final"]["1"].append((2, "t1.1-1-1"))
    assert txn_kinds(h) == {"poll-skip"}


def test_a_read_committed_assign_consumer_starting_past_the_first_committed_record_skipped():
    h = txn_clean()
    h["polls"] = [q for q in h["polls"] if not (q["consumer"] == "ta1" and q["offset"] == 0
                                                and q["partition"] == 0)]
    assert txn_kinds(h) == {"poll-skip"}


def test_a_read_committed_poll_going_backwards_is_nonmonotonic():
    h = txn_clean()
    h["polls"].append(poll("ta1", 0, 0, "t1.1-0-0", 5.0))
    assert txn_kinds(h) == {"nonmonotonic-poll"}


def test_transactional_delivery_offsets_going_backwards_are_a_nonmonotonic_send():
    h = txn_clean()
    h["txns"][0]["values"][0]["offset"], h["txns"][2]["values"][0]["offset"] = 4, 0
    h["final"]["0"] = [(0, "t1.1-2-0"), (4, "t1.1-0-0")]
    h["final_uncommitted"]["0"] = [(0, "t1.1-2-0"), (2, "t1.1-1-0"), (4, "t1.1-0-0")]
    for q in h["polls"]:
        if q["partition"] == 0:
            q["value"] = {0: "t1.1-2-0", 4: "t1.1-0-0"}[q["offset"]]
            q["t"] = 2.0
    assert txn_kinds(h) == {"nonmonotonic-send"}


def test_a_read_committed_group_rewinding_below_a_commit_is_a_rewind():
    h = txn_clean()
    h["commits"].append({"consumer": "ts1", "partition": 0, "offset": 5, "t": 2.5})
    h["assigns"].append({"consumer": "ts2", "epoch": 1, "partitions": [0], "t": 3.0})
    h["polls"].append(poll("ts2", 0, 0, "t1.1-0-0", 3.5, "subscribe"))
    assert txn_kinds(h) == {"offset-rewind"}
