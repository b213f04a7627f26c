"""Spark applications of tests/python/spark_apps, each in its own Python process (its own Spark JVM).

Spark takes jars only when its JVM starts, so each configuration gets a fresh process. Used by the
pytest suites and by the chaos suite (chaos.py), which runs without pytest.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve().parent
# A second run on another Spark (make test-compat) keeps its logs apart.
RESULTS = HERE.parents[1] / os.environ.get("KAFKASHARE_RESULTS", "target/test-results")
SPARK_LOGS = RESULTS / "spark-logs"
# One line per delivery test, printed at the end of the run.
COUNTS = RESULTS / "delivery-counts.txt"


def _log_name(script: str) -> Path:
    test = os.environ.get("PYTEST_CURRENT_TEST", os.environ.get("KAFKASHARE_RUN", script)).split(" ")[0]
    return SPARK_LOGS / (re.sub(r"[^A-Za-z0-9_.-]+", "_", test) + ".log")


# The JVMs of these applications (driver, and executors in local-cluster mode) compile with C1 only.
# They live for seconds to a minute and handle a few thousand records, so most of their CPU went to
# the C2 compiler: a driver-crash cell took 64 s of CPU in 51 s without it, 37 s of CPU in 36 s with it
# (2 cores; the tests are CPU-bound). Behaviour is the same; the benchmarks (tests/bench) keep C2.
SPARK_TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
# And they map Spark's classes from a class-data-sharing archive of this interpreter's pyspark, where
# make test-setup wrote one (spark_apps/class_archive.py): a small application took 9 s with it, 15 s without. A JVM
# whose classes differ (another pyspark) ignores it; the JVM's own warnings go to stderr, never into the
# JSON an application prints.
CLASS_ARCHIVE = HERE.parents[1] / "target" / "spark-cds" / f"{Path(sys.prefix).name}.jsa"
if CLASS_ARCHIVE.is_file():
    SPARK_TEST_JAVA_OPTIONS += f" -XX:SharedArchiveFile={CLASS_ARCHIVE} -Xlog:disable -Xlog:all=warning:stderr"


def spark_log(script: str = "share_stream.py") -> Path:
    """Where the current test's Spark applications write their stderr (log4j's console: WARN and up)."""
    return _log_name(script)


def start_spark(script: str, *args: str) -> subprocess.Popen[str]:
    """Starts spark_apps/<script>; finish() waits for it and returns its JSON."""
    return subprocess.Popen(
        [sys.executable, str(HERE / "spark_apps" / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "JDK_JAVA_OPTIONS": SPARK_TEST_JAVA_OPTIONS},
    )


def finish(process: subprocess.Popen[str], timeout: float = 300, killed: bool | None = False) -> dict[str, Any]:
    """Waits for a Spark application; with killed=True it must die by SIGKILL (an injected driver crash),
    with killed=None it may (and then gives {})."""
    timed_out = False
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        stderr += f"\n(killed after {timeout} s)"
        timed_out = True
    log = _log_name(str(process.args[1]))  # type: ignore[index]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(stderr)
    if killed is None and process.returncode == -9 and not timed_out:
        return {}
    if killed:
        assert process.returncode == -9, f"was to be killed, exited {process.returncode}:\n{stderr[-6000:]}"
        return {}
    if process.returncode != 0:
        command = " ".join(str(a) for a in cast(list[str], process.args))
        raise AssertionError(f"{command[-300:]} exited {process.returncode}:\n{stderr[-6000:]}")
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return result


def run_spark(script: str, *args: str, timeout: float = 300, killed: bool = False) -> dict[str, Any]:
    """Runs spark_apps/<script> to its end and returns the JSON line it prints last."""
    return finish(start_spark(script, *args), timeout=timeout, killed=killed)


def record_delivery_counts(line: str) -> None:
    """One line per delivery test; workers of pytest-xdist append to the same file."""
    COUNTS.parent.mkdir(parents=True, exist_ok=True)
    with COUNTS.open("a") as f:
        f.write(line + "\n")
