"""Spark's internals the source touches, on this interpreter's pyspark (docs/internals/architecture.md).

The check the jar carries (io.github.kafkashare.spark.sparkinternals.SparkInternalsCheck) tries each
touchpoint on the Spark it runs in, as a user would run it: spark-submit of the bundled jar. One test per
touchpoint, so that a Spark line that moves one fails that test by name. `make test` runs this file on the
newest pyspark, `make test-compat` on the oldest and on the line between (pyspark.between); the test JVM's
SparkInternalsSuite runs the same check on Spark 4.0 and 4.1.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

import spark_kafka_share
from spark_runs import SPARK_TEST_JAVA_OPTIONS

SPARK_HOME = Path(pyspark.__file__).parent
CHECK = "io.github.kafkashare.spark.sparkinternals.SparkInternalsCheck"
ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "jvm/src/main/scala/io/github/kafkashare/spark/sparkinternals/SparkInternalsCheck.scala"
# The touchpoints as SparkInternalsCheck.Touchpoints lists them: the check must report each, in that order.
_LISTED = re.search(r"val Touchpoints: Seq\[String\] = Seq\((.*?)\)", SOURCE.read_text(), re.S)
TOUCHPOINTS = re.findall(r'"([a-z-]+)"', _LISTED.group(1)) if _LISTED else []


def _run_check(work: Path) -> tuple[int, str, str]:
    result = subprocess.run(
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            "local[2]",
            "--driver-java-options",
            f"-Djava.io.tmpdir={work}",
            "--class",
            CHECK,
            str(spark_kafka_share.jar_path()),
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=180,
        env={
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "PYSPARK_PYTHON": sys.executable,
            "JDK_JAVA_OPTIONS": SPARK_TEST_JAVA_OPTIONS,
        },
    )
    return result.returncode, result.stdout, result.stderr[-4000:]


@pytest.fixture(scope="module")
def check(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, tuple[str, str]]]:
    """The check's output on this pyspark: its Spark line, and each touchpoint's verdict and detail.

    One run per pyspark and pytest session: each xdist worker builds module fixtures of its own, so the
    first worker of the session (PYTEST_XDIST_TESTRUNUID, the same for all of them) runs the check under a
    lock and leaves its output for the other. Never an output of another session (another jar)."""
    work = tmp_path_factory.mktemp("spark-internals")
    session = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if session is None:
        returncode, stdout, stderr = _run_check(work)
    else:
        shared = tmp_path_factory.getbasetemp().parent  # the session's directory, above each worker's
        output = shared / f"spark-internals-{session}-{pyspark.__version__}.json"
        with open(shared / f"spark-internals-{session}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not output.exists():
                output.write_text(json.dumps(_run_check(work)))
            returncode, stdout, stderr = json.loads(output.read_text())
    lines = stdout.splitlines()
    header = [line for line in lines if line.startswith("kafka-share: Spark ")]
    assert header, f"the check printed no verdicts (exit {returncode}):\n{stdout}\n{stderr}"
    verdicts = {}
    for line in lines[lines.index(header[0]) + 1 :]:
        name, verdict, detail = (line.split(None, 2) + ["", ""])[:3]
        verdicts[name] = (verdict, detail)
    assert (returncode == 0) == all(v == "holds" for v, _ in verdicts.values()), stdout
    return header[0].removeprefix("kafka-share: Spark "), verdicts


def test_the_check_runs_on_this_pyspark(check: tuple[str, dict[str, tuple[str, str]]]) -> None:
    assert check[0] == pyspark.__version__


def test_every_touchpoint_is_checked(check: tuple[str, dict[str, tuple[str, str]]]) -> None:
    assert len(TOUCHPOINTS) >= 8, f"the touchpoints were not found in {SOURCE}"
    assert list(check[1]) == TOUCHPOINTS


@pytest.mark.parametrize("touchpoint", TOUCHPOINTS)
def test_touchpoint_holds(check: tuple[str, dict[str, tuple[str, str]]], touchpoint: str) -> None:
    verdict, detail = check[1].get(touchpoint, ("missing", "not in the check's output"))
    assert verdict == "holds", f"{touchpoint} on Spark {check[0]}: {detail}"
