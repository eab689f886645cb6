"""Hang safety for the e2e suite: a broker that dies mid-test fails the test, and nothing hangs.

Clients block in C: librdkafka's `commit(asynchronous=False)` waits for a coordinator without
bound, and pytest-timeout's SIGALRM cannot interrupt a C call. So a broker that crashed (an
abort, a segfault) or a broker that stopped answering could hang the whole run. Here:

- Every broker the harness started is watched from a thread. One that exits without the
  harness asking (`Broker.stop`/`kill9` disarm it first) is recorded with its exit status; the
  test it died in fails at teardown with the broker's log (`conftest._broker_watchdog`), and a
  later test that would use a dead shared broker fails at once.
- If that test has not ended DEATH_GRACE_S after the death (it is stuck in a client call), the
  run is aborted: the report (the test, the broker's exit status and log tail) goes to the real
  stderr and the process exits with status 3. Nothing is retried.
- A test still running HARD_GRACE_S past its pytest-timeout (the signal did not end it) aborts
  the run the same way; faulthandler, armed a little later, dumps every thread's stack and
  exits even if Python code can no longer run.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import threading
import time

#: How often the watchdog looks at the brokers and the running test.
POLL_S = 0.2
#: After a broker died unasked, how long its test gets to end (failing) before the run is aborted.
DEATH_GRACE_S = 20.0
#: Past a test's pytest-timeout, how long before the run is aborted.
HARD_GRACE_S = 60.0
#: Past that, faulthandler's own last resort (works while a C call holds the GIL).
FAULTHANDLER_GRACE_S = 30.0
#: Exit status of an aborted run.
ABORT_STATUS = 3


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class Watchdog:
    """Watches the brokers the harness started, and the running test's hard deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._brokers: list = []          # every broker ever armed (weakly: tests are short)
        self._deaths: list[dict] = []     # {broker, status, at, test}
        self._test: str | None = None
        self._test_deadline: float | None = None
        self._out_fd = 2
        self._out_file = None
        self._thread: threading.Thread | None = None

    def configure(self, out_fd: int) -> None:
        """Where an abort report goes (a descriptor of the real stderr, not pytest's capture)."""
        self._out_fd = out_fd
        self._out_file = os.fdopen(os.dup(out_fd), "w", closefd=True)
        faulthandler.enable(file=self._out_file)

    def arm(self, broker) -> None:
        """Watch `broker` (its process is up and serving) until the harness stops or kills it."""
        with self._lock:
            broker.watch_armed = True
            if broker not in self._brokers:
                self._brokers.append(broker)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="e2e-watchdog",
                                                daemon=True)
                self._thread.start()

    def disarm(self, broker) -> None:
        """The harness is about to stop or kill `broker`: its exit is expected."""
        broker.watch_armed = False

    def test_started(self, nodeid: str, timeout_s: float | None) -> None:
        with self._lock:
            self._test = nodeid
            self._test_deadline = (time.monotonic() + timeout_s + HARD_GRACE_S
                                   if timeout_s else None)
        if timeout_s and self._out_file is not None:
            faulthandler.dump_traceback_later(timeout_s + HARD_GRACE_S + FAULTHANDLER_GRACE_S,
                                              exit=True, file=self._out_file)

    def test_finished(self) -> None:
        faulthandler.cancel_dump_traceback_later()
        with self._lock:
            self._test = None
            self._test_deadline = None

    def deaths_in(self, nodeid: str) -> list[dict]:
        """The unasked broker deaths seen while test `nodeid` ran."""
        self._check_brokers()
        with self._lock:
            return [d for d in self._deaths if d["test"] == nodeid]

    def dead(self, broker) -> dict | None:
        """The recorded unasked death of `broker`, if it died."""
        self._check_brokers()
        with self._lock:
            return next((d for d in self._deaths if d["broker"] is broker), None)

    def _check_brokers(self) -> None:
        with self._lock:
            for broker in self._brokers:
                proc = broker.proc
                if not getattr(broker, "watch_armed", False) or proc is None:
                    continue
                status = proc.poll()
                # Re-read the flag: the harness may have disarmed it while it exited.
                if status is None or not broker.watch_armed:
                    continue
                broker.watch_armed = False
                self._deaths.append({"broker": broker, "status": status,
                                     "at": time.monotonic(), "test": self._test})

    def _run(self) -> None:
        while True:
            time.sleep(POLL_S)
            self._check_brokers()
            now = time.monotonic()
            with self._lock:
                test, deadline = self._test, self._test_deadline
                stuck = [d for d in self._deaths
                         if test is not None and d["test"] == test
                         and now - d["at"] > DEATH_GRACE_S]
            if stuck:
                self.abort(f"a broker died during {test} and the test did not end within "
                           f"{DEATH_GRACE_S:.0f} s (a client call waits on the dead broker)",
                           stuck)
            if deadline is not None and now > deadline:
                self.abort(f"{test} ran {HARD_GRACE_S:.0f} s past its pytest-timeout: stuck "
                           f"where the timeout's signal cannot reach (a C call)", [])

    def abort(self, reason: str, deaths: list[dict]) -> None:
        """Report to the real stderr and end the run at once (no retry, no hang)."""
        lines = ["", "=" * 78, f"E2E WATCHDOG: aborting the pytest run: {reason}"]
        for d in deaths:
            b = d["broker"]
            lines.append(f"--- broker {b.bootstrap} (pid {b.proc.pid}, log {b.log_path}) "
                         f"{describe_exit(d['status'])}; log tail:")
            lines.append(b.log_tail(80))
        with self._lock:
            live = [b for b in self._brokers if b.proc is not None and b.proc.poll() is None]
        for b in live:
            lines.append(f"--- live broker {b.bootstrap} (pid {b.proc.pid}, log {b.log_path}); "
                         f"log tail:")
            lines.append(b.log_tail(40))
        lines.append("=" * 78)
        text = "\n".join(lines) + "\n"
        try:
            os.write(self._out_fd, text.encode(errors="replace"))
            faulthandler.dump_traceback(file=self._out_file or 2, all_threads=True)
        finally:
            for b in live:  # leave no broker behind
                try:
                    b.proc.kill()
                except OSError:
                    pass
            os._exit(ABORT_STATUS)


#: The suite's one watchdog.
WATCHDOG = Watchdog()
