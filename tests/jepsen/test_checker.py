"""The checker finds each anomaly class in a hand-made history that has it, and nothing in one
that has none (so a clean Jepsen run means something). Plain pytest, no broker, no root."""

from __future__ import annotations

import copy

import checker


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
