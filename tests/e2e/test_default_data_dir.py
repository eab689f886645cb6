"""The README's first command: `rill` with no --data-dir serves from ./rill-data, relative to where
it was started. glommio opens directories through io_uring without the working directory, so a
relative data dir failed at the first partition ("Bad file descriptor") until the broker anchored
it (shard::runtime::run)."""

from __future__ import annotations

import signal
import subprocess
import time

from broker import READY_LINE, START_TIMEOUT_S, free_port, rill_binary


def test_a_relative_default_data_dir_starts_and_stops_cleanly(tmp_path):
    log = tmp_path / "rill.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(rill_binary()), "--listen", f"127.0.0.1:{free_port()}",
                                 "--admin-listen", "off", "--shards", "1"],
                                cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while READY_LINE not in log.read_text(errors="replace"):
            assert proc.poll() is None, f"rill exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"not up:\n{log.read_text()[-3000:]}"
            time.sleep(0.05)
        assert (tmp_path / "rill-data").is_dir()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0, log.read_text()[-3000:]
