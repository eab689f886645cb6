"""Fixtures for Rill's end-to-end tests: a real broker process and unique topics per test."""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path

import pytest

from broker import Broker, ExternalBroker, external_broker

#: Every broker started in this session, newest last; failing tests get their log tails attached.
_BROKERS: list = []


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


def pytest_configure(config):
    # The suite runs from any cwd; make the helper modules importable as plain modules.
    here = str(Path(__file__).parent)
    import sys
    if here not in sys.path:
        sys.path.insert(0, here)
