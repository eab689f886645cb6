"""Start and stop the broker many times in a row: every start listens, every stop exits cleanly.

Guards the start-up that once hung about one time in a few hundred (a glommio executor parked
with a runnable task while the shards connected their channel mesh; see
server/src/shard/mesh.rs). Two shards, so the meshes and the start-up rendezvous are in play;
each stop is a SIGTERM and must exit 0 with every log closed. Nothing is retried: one start that
does not listen within broker.START_TIMEOUT_S, or one stop that does not exit, fails the test.

The default cycle count keeps this near two minutes on 2 cores (debug build);
RILL_START_STOP_CYCLES=2000 runs more.
"""

from __future__ import annotations

import os
import time

import pytest

from clients import create_topic

#: Start/stop cycles (a few hundred by default; the env var asks for more).
CYCLES = int(os.environ.get("RILL_START_STOP_CYCLES", "300"))
#: What a clean stop logs last (server/src/main.rs).
STOPPED_LINE = "rill stopped cleanly"


@pytest.mark.timeout(60 + 2 * CYCLES)
def test_every_start_listens_and_every_stop_exits(broker_factory, topic_name):
    b = broker_factory(shards=2)
    # Partitions on both shards, so every restart opens logs on each of them.
    create_topic(b.bootstrap, topic_name, partitions=4)
    started = time.monotonic()
    for cycle in range(CYCLES):
        code = b.stop()
        assert code == 0, f"cycle {cycle}: rill exited with {code} on SIGTERM:\n{b.log_tail()}"
        b.start()  # fails the test if this start does not listen in time
    code = b.stop()
    assert code == 0, f"last stop: rill exited with {code} on SIGTERM:\n{b.log_tail()}"
    elapsed = time.monotonic() - started
    log = b.log_text()
    assert log.count("all shards listening") == CYCLES + 1
    assert log.count(STOPPED_LINE) == CYCLES + 1
    assert "panicked" not in log, b.log_tail()
    print(f"{CYCLES} restarts (2 shards) in {elapsed:.1f}s, {elapsed / CYCLES * 1000:.0f} ms each")
