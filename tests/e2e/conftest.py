"""Fixtures for Rill's end-to-end tests: a real broker process and unique topics per test."""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path

import pytest

from broker import Broker, ExternalBroker, external_broker
from broker_watchdog import WATCHDOG, describe_exit

#: Every broker started in this session, newest last; failing tests get their log tails attached.
_BROKERS: list = []
#: The session's shared broker(s): once one died, every later test that could use it fails.
_SHARED: list = []


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """The shared broker: one `rill` for the whole session (or RILL_E2E_BROKER), auto-create on."""
    address = external_broker()
    if address:
        b = ExternalBroker(address)
        assert b.alive(), f"RILL_E2E_BROKER={address} does not accept connections"
        yield b
        return
    root = tmp_path_factory.mktemp("rill-shared")
    b = Broker(root / "data", root / "rill.log")
    _BROKERS.append(b)
    _SHARED.append(b)
    b.start()
    yield b
    code = b.stop()
    assert code == 0, f"shared rill exited with {code} on SIGTERM; log tail:\n{b.log_tail()}"
    assert "panicked" not in b.log_text(), f"rill panicked; log tail:\n{b.log_tail()}"


@pytest.fixture
def broker_factory(tmp_path):
    """Start private brokers (own port and data dir) for tests that restart, kill or reconfigure."""
    if external_broker():
        pytest.skip("needs a rill process it can restart/kill/configure (RILL_E2E_BROKER is set)")
    started: list[Broker] = []
    counter = itertools.count()

    def make(**kwargs) -> Broker:
        n = next(counter)
        b = Broker(tmp_path / f"data{n}", tmp_path / f"rill{n}.log", **kwargs)
        _BROKERS.append(b)
        started.append(b)
        b.start()
        return b

    yield make
    for b in started:
        if b.alive():
            b.stop()


@pytest.fixture(autouse=True)
def _broker_watchdog(request):
    """Fail a test whose broker died without being asked to (see broker_watchdog.py), with the
    broker's log; a test after the shared broker died fails at once instead of hanging on it."""
    for b in _SHARED:
        death = WATCHDOG.dead(b)
        if death:
            pytest.fail(f"the shared broker {describe_exit(death['status'])} during "
                        f"{death['test']}; log tail:\n{b.log_tail()}", pytrace=False)
    yield
    deaths = WATCHDOG.deaths_in(request.node.nodeid)
    if deaths:
        pytest.fail("\n".join(f"broker {d['broker'].bootstrap} {describe_exit(d['status'])} "
                              f"during the test, unasked; log tail:\n{d['broker'].log_tail()}"
                              for d in deaths), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Arm the watchdog's hard deadline for this test: its pytest-timeout plus a grace."""
    marker = item.get_closest_marker("timeout")
    timeout = None
    if marker is not None:
        timeout = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if timeout is None:
        timeout = float(item.config.getini("timeout") or 0) or None
    WATCHDOG.test_started(item.nodeid, float(timeout) if timeout else None)
    try:
        yield
    finally:
        WATCHDOG.test_finished()


@pytest.fixture
def topic_name(request):
    """A topic name unique to this test (Kafka-legal: letters, digits, '.', '_', '-')."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:120]
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the tail of every live broker's log to a failing test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for b in _BROKERS[-3:]:
            report.sections.append((f"rill log tail ({b.log_path})", b.log_tail(60)))


def pytest_report_header(config):
    address = external_broker()
    if address:
        return f"rill e2e: EXTERNAL broker at {address} (RILL_E2E_BROKER)"
    from broker import rill_binary
    return f"rill e2e: broker binary {rill_binary()} (shards={os.environ.get('RILL_E2E_SHARDS', '2')})"


def _real_stderr_fd(config) -> int:
    """A descriptor of the run's real stderr: with fd capture, fd 2 is a temporary file."""
    capman = config.pluginmanager.getplugin("capturemanager")
    try:
        return capman._global_capturing.err.targetfd_save
    except AttributeError:
        return 2


def pytest_configure(config):
    WATCHDOG.configure(_real_stderr_fd(config))
    # The suite runs from any cwd; make the helper modules importable as plain modules.
    here = str(Path(__file__).parent)
    import sys
    if here not in sys.path:
        sys.path.insert(0, here)
