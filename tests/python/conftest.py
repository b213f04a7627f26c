"""Fixtures: a real Kafka broker per version for the whole session, and Spark in child processes."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from harness import Broker, broker_versions
from spark_runs import COUNTS, SPARK_LOGS

HERE = Path(__file__).resolve().parent
# The tests' brokers without the C2 compiler: 7.4 s of CPU instead of 12.3 s to start and pass 100,000 records
# (medians of 4 rotated runs each, 2 Dec), on a machine where the tests are CPU-bound. The benchmarks
# (tests/bench) start theirs as a user's would run. See KafkaBroker.extraJavaOptions.
os.environ.setdefault("KAFKASHARE_BROKER_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test shows the tail of each running broker's log."""
    report = yield
    if report.failed:
        for b in _brokers:
            report.sections.append((f"broker {b.version} log ({b.log})", b.log_tail()))
    return report


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, once per run
        COUNTS.unlink(missing_ok=True)
        shutil.rmtree(SPARK_LOGS, ignore_errors=True)


# Seconds per test file, summed over its tests (set-up, call, tear-down), whichever worker ran them.
_seconds_per_file: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    file = report.nodeid.split("::")[0]
    _seconds_per_file[file] = _seconds_per_file.get(file, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Prints the produced/landed/lost/doubled line of every delivery test that ran, and where the time went."""
    if COUNTS.exists():
        terminalreporter.section("delivery counts")
        for line in sorted(COUNTS.read_text().splitlines()):
            terminalreporter.write_line(line)
    if _seconds_per_file:
        terminalreporter.section("seconds per test file (summed over tests; two workers share the wall clock)")
        for file, seconds in sorted(_seconds_per_file.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{seconds:8.1f}  {file}")
