"""Fixtures: a real Kafka broker per version for the whole session, and Spark in child processes."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from harness import Broker, broker_versions

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


def run_spark(script: str, *args: str, timeout: float = 300, killed: bool = False) -> dict[str, object]:
    """Runs tests/python/spark_apps/<script> in its own Python process (its own Spark JVM), returns its JSON.

    Spark takes jars only when its JVM starts, so each configuration gets a fresh process.
    With killed=True the script must die by SIGKILL (an injected driver crash); returns {}.
    """
    done = subprocess.run([sys.executable, str(HERE / "spark_apps" / script), *args],
                          capture_output=True, text=True, timeout=timeout)
    # The driver's log, kept per test for reading after a failure.
    test = os.environ.get("PYTEST_CURRENT_TEST", script).split(" ")[0]
    log = SPARK_LOGS / (re.sub(r"[^A-Za-z0-9_.-]+", "_", test) + ".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(done.stderr)
    if killed:
        assert done.returncode == -9, f"{script} was to be killed, exited {done.returncode}:\n{done.stderr[-6000:]}"
        return {}
    if done.returncode != 0:
        raise AssertionError(f"{script} {' '.join(args)} exited {done.returncode}:\n{done.stderr[-6000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


COUNTS = HERE.parents[1] / "target" / "test-results" / "delivery-counts.txt"
SPARK_LOGS = HERE.parents[1] / "target" / "test-results" / "spark-logs"


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
