"""The offline tools of issue 16 on a real data directory: `rill dump-log` shows what kcat produced,
`rill check` passes it after kill -9, names the partition, segment and offset of a flipped byte,
`--repair` cuts there, and the repaired broker serves everything before the damage."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from broker import rill_binary
from clients import CLIENT_TIMEOUT_S, create_topic, kcat, producer
from test_transactions import read_all

SEGMENT = "00000000000000000000.log"


def rill(*args: str) -> subprocess.CompletedProcess:
    """Runs a `rill` tool; never a broker (the arguments name a subcommand)."""
    return subprocess.run([str(rill_binary()), *args], capture_output=True, text=True, timeout=60)


def consume_all(bootstrap: str, topic: str) -> list[dict]:
    out = kcat(bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-J").stdout
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def produce_batches(bootstrap: str, topic: str, batches: int, per_batch: int) -> list[str]:
    """One kcat run per batch (so batch boundaries are known); zstd and none alternate."""
    lines = []
    for b in range(batches):
        chunk = [f"k{b}-{i}:value {b}-{i}" for i in range(per_batch)]
        codec = "zstd" if b % 2 else "none"
        kcat(bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-z", codec, "-X", "acks=all",
             "-X", f"batch.num.messages={per_batch}", input="\n".join(chunk).encode() + b"\n")
        lines += chunk
    return lines


def test_version_names_the_commit():
    out = rill("--version")
    assert out.returncode == 0
    assert re.fullmatch(r"rill \d+\.\d+\.\d+ \(git [0-9a-f]{7,}\)\n", out.stdout), out.stdout


def test_dump_log_check_and_repair_on_a_real_data_dir(broker_factory, topic_name):
    b = broker_factory(shards=1)
    create_topic(b.bootstrap, topic_name, partitions=1)
    lines = produce_batches(b.bootstrap, topic_name, batches=6, per_batch=5)
    data = Path(b.data_dir)
    log = data / f"{topic_name}-0" / SEGMENT

    busy = rill("check", "--repair", str(data))
    assert busy.returncode == 2 and "stop the broker" in busy.stdout, busy.stdout

    b.kill9()
    # After kill -9 the active segment ends in preallocated zeros: a note, not damage.
    clean = rill("check", str(data))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "DAMAGED" not in clean.stdout

    dump = rill("dump-log", "--print-records", str(log))
    assert dump.returncode == 0, dump.stdout + dump.stderr
    batch_lines = [l for l in dump.stdout.splitlines() if l.startswith("baseOffset:")]
    assert len(batch_lines) >= 6, dump.stdout
    assert all("crcValid: true" in l for l in batch_lines)
    assert "compresscodec: zstd" in dump.stdout and "compresscodec: none" in dump.stdout
    assert "key: k3-4 payload: value 3-4" in dump.stdout
    assert "zeros to the end" in dump.stdout

    # Flip one byte inside the first batch from offset 12 on (kcat decides the batching).
    victim = next(l for l in batch_lines if int(l.split()[1]) >= 12)
    first_lost = int(victim.split()[1])
    position = int(re.search(r"position: (\d+)", victim).group(1))
    raw = bytearray(log.read_bytes())
    raw[position + 70] ^= 0xFF
    log.write_bytes(raw)
    damaged = rill("check", str(data))
    assert damaged.returncode == 1, damaged.stdout
    assert re.search(rf"DAMAGED +{re.escape(topic_name)}-0 {SEGMENT} offset {first_lost} position {position}:",
                     damaged.stdout), damaged.stdout
    assert "crcValid: false" in rill("dump-log", str(log)).stdout

    repaired = rill("check", "--repair", str(data))
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert f"cut {SEGMENT} at position {position} (offsets from {first_lost} removed)" in repaired.stdout
    assert rill("check", str(data)).returncode == 0
    # The repair closed the log cleanly: its indexes are written whole and name real batches.
    index = rill("dump-log", str(log.with_suffix(".index")), str(log.with_suffix(".timeindex")))
    assert index.returncode == 0, index.stdout + index.stderr
    assert "offset: 0 position: 0" in index.stdout and "MISMATCH" not in index.stdout

    b.start()
    served = consume_all(b.bootstrap, topic_name)
    assert [f"{m['key']}:{m['payload']}" for m in served] == lines[:first_lost]


def test_check_and_dump_log_know_transactions(broker_factory, topic_name):
    """A sealed segment with an aborted and a committed transaction: dump-log shows the markers
    and the `.txnindex`; check passes it, names a `.txnindex` that lost its entry, and --repair
    rebuilds it so read_committed consumers still skip the aborted records."""
    b = broker_factory(shards=1)
    create_topic(b.bootstrap, topic_name, partitions=1, config={"segment.ms": "1000"})
    tx = producer(b.bootstrap, **{"transactional.id": f"{topic_name}-tx"})
    tx.init_transactions(CLIENT_TIMEOUT_S)
    for value, commit in ((b"aborted", False), (b"committed", True)):
        tx.begin_transaction()
        tx.produce(topic_name, value=value, partition=0)
        tx.flush(CLIENT_TIMEOUT_S)
        tx.commit_transaction(CLIENT_TIMEOUT_S) if commit else tx.abort_transaction(CLIENT_TIMEOUT_S)
    time.sleep(1.2)  # segment.ms: the next append seals the segment holding both transactions
    kcat(b.bootstrap, "-P", "-t", topic_name, "-p", "0", "-X", "acks=all", input=b"after\n")
    b.stop()
    data = Path(b.data_dir)
    log = data / f"{topic_name}-0" / SEGMENT
    txn_index = log.with_suffix(".txnindex")

    assert rill("check", str(data)).returncode == 0
    dump = rill("dump-log", "--print-records", str(log))
    assert dump.returncode == 0, dump.stdout + dump.stderr
    assert "endTxnMarker: ABORT" in dump.stdout and "endTxnMarker: COMMIT" in dump.stdout
    assert dump.stdout.count("isTransactional: true isControl: true") == 2
    entries = rill("dump-log", str(txn_index))
    assert re.fullmatch(r"(?s).*producerId: \d+ firstOffset: 0 lastOffset: 1 lastStableOffset: \d+\n",
                        entries.stdout), entries.stdout

    txn_index.unlink()  # as if the entry were lost: the aborted record would show
    damaged = rill("check", str(data))
    assert damaged.returncode == 1, damaged.stdout
    assert re.search(rf"DAMAGED +{re.escape(topic_name)}-0 {SEGMENT.replace('.log', '.txnindex')}: "
                     r"1 wrong entry: offset 1: the ABORT marker of producer \d+ has no entry",
                     damaged.stdout), damaged.stdout
    repaired = rill("check", "--repair", str(data))
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert rill("check", str(data)).returncode == 0
    assert rill("dump-log", str(txn_index)).stdout == entries.stdout

    b.start()
    assert read_all(b.bootstrap, topic_name, "read_committed") == ["committed", "after"]
