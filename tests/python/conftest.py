"""Fixtures: a real Kafka broker per version for the whole session, and Spark in child processes."""

from __future__ import annotations

import itertools
import shutil
import os
from pathlib import Path
from typing import Iterator

import pytest

from harness import Broker, broker_versions
from spark_runs import RESULTS, SPARK_LOGS, run_spark  # noqa: F401  (run_spark: for the tests)

HERE = Path(__file__).resolve().parent
_names = itertools.count()
_brokers: list[Broker] = []


@pytest.fixture(scope="session", params=broker_versions(), ids=lambda v: f"kafka-{v}")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker per version, shared by every test of the session."""
    started = Broker(request.param, tmp_path_factory.mktemp(f"kafka-{request.param}")).start()
    _brokers.append(started)
    yield started
    started.stop()
    _brokers.remove(started)


@pytest.fixture
def fresh_name() -> object:
    """Topic and group names no other test uses."""
    return lambda prefix: f"{prefix}-{os.getpid()}-{next(_names)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test shows the tail of each running broker's log."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for b in _brokers:
            report.sections.append((f"broker {b.version} log ({b.log})", b.log_tail()))


COUNTS = RESULTS / "delivery-counts.txt"


def record_delivery_counts(line: str) -> None:
    """One line per delivery test; workers of pytest-xdist append to the same file."""
    COUNTS.parent.mkdir(parents=True, exist_ok=True)
    with COUNTS.open("a") as f:
        f.write(line + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, once per run
        COUNTS.unlink(missing_ok=True)
        shutil.rmtree(SPARK_LOGS, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Prints the produced/landed/lost/doubled line of every delivery test that ran."""
    if COUNTS.exists():
        terminalreporter.section("delivery counts")
        for line in sorted(COUNTS.read_text().splitlines()):
            terminalreporter.write_line(line)
