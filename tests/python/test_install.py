"""Every way users install the connector, each ending in a stream that reads a real broker.

- pip: the wheel into a fresh virtualenv holding only pyspark; configure(); a stream defined in SQL
  (`CREATE TABLE ... USING kafka-share`, then `readStream.table`).
- spark-submit --packages: the Maven repository the build publishes (target/maven-repo); the script
  never names the jar, and calls configure() once the session runs, as the README says.
- spark-submit --jars of a copy of the jar at another path: configure() after the session started, and
  before it (then it adds no second copy and drops none of the submitted jars).
- Spark Connect: a local Connect server started with a copy of the jar, a client on sc://localhost that
  calls configure(), options from the plain-Python builders.
- Without the jar (spark-submit, Spark Connect): configure() raises JarNotLoadedError naming the fix.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import venv
import xml.etree.ElementTree as ElementTree
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

import pyspark
import pytest

import spark_kafka_share
from harness import ROOT, Broker, broker_versions, pins

NO_JAR_APP = Path(__file__).resolve().parent / "spark_apps" / "session_without_jar.py"

NEWEST = broker_versions()[-1]
APP = Path(__file__).resolve().parent / "spark_apps" / "install_read.py"
VERSION = spark_kafka_share.__version__
COORDINATES = f"io.github.kafkashare:spark-kafka-share_2.13:{VERSION}"
MAVEN_REPO = ROOT / "target" / "maven-repo"
SPARK_HOME = Path(pyspark.__file__).parent
WHEEL = ROOT / "dist" / f"spark_kafka_share-{VERSION}-py3-none-any.whl"


def _topic_with_records(broker: Broker, name: str, records: int) -> dict[str, str]:
    broker.create_topic(name, 2)
    broker.produce(name, records)
    broker.group_config(f"{name}-group", {"share.auto.offset.reset": "earliest"})
    return {"bootstrap": broker.bootstrap, "topic": name, "group": f"{name}-group"}


def _run(command: list[str], work: Path, timeout: float = 400, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=work, env={**os.environ, **(env or {})})
    (work / "stderr.log").write_text(done.stderr)
    assert done.returncode == 0, f"{' '.join(command)[:300]} exited {done.returncode}:\n{done.stderr[-5000:]}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _jar_elsewhere(tmp_path: Path) -> Path:
    """A copy of the connector jar outside the wheel, as a user downloads or uploads it."""
    copy = tmp_path / "libs" / f"spark-kafka-share_2.13-{VERSION}.jar"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(spark_kafka_share.jar_path().read_bytes())
    return copy


def _spark_env() -> dict[str, str]:
    return {"SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _assert_errors_carry_conditions(errors: dict[str, dict[str, Any]]) -> None:
    """The source's errors reach Python as Spark errors: getCondition() and getSqlState() name them, and a
    query the cluster stopped says the condition in its StreamingQueryException."""
    missing, misspelt, topic = errors["missing"], errors["misspelt"], errors["missing_topic"]
    assert (missing["condition"], missing["sqlState"]) == ("KAFKA_SHARE_INVALID_OPTION.MISSING", "42616"), missing
    assert missing["type"] == "IllegalArgumentException", missing
    assert "option 'kafka.bootstrap.servers' is required" in missing["message"], missing
    assert misspelt["condition"] == "KAFKA_SHARE_INVALID_OPTION.UNKNOWN", misspelt
    assert "did you mean 'kafka.share.exactly.once.strategy'?" in misspelt["message"], misspelt
    assert topic["type"] == "StreamingQueryException", topic
    assert "[KAFKA_SHARE_MISSING_TOPICS]" in topic["message"] and "SQLSTATE: 42P01" in topic["message"], topic


def test_the_wheel_metadata_is_complete_and_twine_clean() -> None:
    with zipfile.ZipFile(WHEEL) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(z.read(meta_name).decode())
    assert meta["Name"] == "spark-kafka-share" and meta["Version"] == VERSION
    assert meta["Requires-Python"] == ">=3.9"
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Description-Content-Type"] == "text/markdown" and "kafka-share" in meta.get_payload()
    assert 'pyspark>=4.0; extra == "pyspark"' in (meta.get_all("Requires-Dist") or [])
    check = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(WHEEL)], capture_output=True, text=True)
    assert check.returncode == 0 and "PASSED" in check.stdout, check.stdout + check.stderr


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
def test_pip_install_into_a_fresh_virtualenv_then_a_stream_defined_in_sql(broker: Broker, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", f"pyspark=={pins()['pyspark']}", str(WHEEL)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    listed = subprocess.run([python, "-m", "pip", "list", "--format=json"], capture_output=True, text=True).stdout
    assert {p["name"].lower() for p in json.loads(listed)} >= {"pyspark", "spark-kafka-share"}

    config = {**_topic_with_records(broker, f"install-pip-{os.getpid()}", 300), "work": str(tmp_path), "sql": "orders_stream"}
    # Not the test's own interpreter: the fresh one, with the wheel's jar and helper.
    result = _run([python, str(APP), "wheel", json.dumps(config)], tmp_path, env={"PYSPARK_PYTHON": python})
    assert (result["rows"], result["distinct"]) == (300, 300)
    _assert_errors_carry_conditions(result["errors"])


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
def test_spark_submit_packages_from_the_published_maven_repository_then_configure(broker: Broker, tmp_path: Path) -> None:
    pom_file = MAVEN_REPO / "io/github/kafkashare/spark-kafka-share_2.13" / VERSION / f"spark-kafka-share_2.13-{VERSION}.pom"
    pom = ElementTree.parse(pom_file).getroot()
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    # kafka-clients is shaded inside the jar and Spark is the cluster's: the pom must bring nothing.
    assert pom.find("m:dependencies", ns) is None, "the published pom names dependencies"
    assert (pom_file.parent / f"spark-kafka-share_2.13-{VERSION}-sources.jar").is_file()

    config = {**_topic_with_records(broker, f"install-packages-{os.getpid()}", 300), "work": str(tmp_path), "configure": "before"}
    ivy = tmp_path / "ivy"  # an empty Ivy home: the jar must come from the repository, not a cache
    result = _run(
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            "local[2]",
            "--packages",
            COORDINATES,
            "--repositories",
            MAVEN_REPO.as_uri(),
            "--conf",
            f"spark.jars.ivy={ivy}",
            "--conf",
            f"spark.sql.warehouse.dir={tmp_path / 'warehouse'}",
            str(APP),
            "submitted",
            json.dumps(config),
        ],
        tmp_path,
        env=_spark_env(),
    )
    assert (result["rows"], result["distinct"]) == (300, 300)
    resolved = sorted(p.name for p in (ivy / "jars").iterdir())
    assert resolved == [f"io.github.kafkashare_spark-kafka-share_2.13-{VERSION}.jar"], resolved
    assert [Path(j).name for j in result["jars"].split(",")] == resolved, result["jars"]


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
# Before the session is `make chaos`'s (long): the --packages test above calls configure() before its session.
@pytest.mark.parametrize(
    "when",
    ["after", pytest.param("before", marks=pytest.mark.long)],
    ids=["configure-after-the-session", "configure-before-it"],
)
def test_spark_submit_jars_of_a_copy_elsewhere_then_configure(broker: Broker, tmp_path: Path, when: str) -> None:
    """--jars of the jar at another path (and another jar): configure() accepts the session, and adds no second
    copy of the connector nor drops a submitted jar, whether called after the session started or before."""
    copy = _jar_elsewhere(tmp_path)
    other = tmp_path / "libs" / "other-library.jar"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    config = {**_topic_with_records(broker, f"install-jars-{when}-{os.getpid()}", 300), "work": str(tmp_path), "configure": when}
    result = _run(
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            "local[2]",
            "--jars",
            f"{copy},{other}",
            "--conf",
            f"spark.sql.warehouse.dir={tmp_path / 'warehouse'}",
            str(APP),
            "submitted",
            json.dumps(config),
        ],
        tmp_path,
        env=_spark_env(),
    )
    assert (result["rows"], result["distinct"]) == (300, 300)
    assert sorted(result["jars"].split(",")) == sorted(f"file://{p}" for p in (copy, other)), result["jars"]


def test_spark_submit_without_the_connector_then_configure_says_what_to_do(tmp_path: Path) -> None:
    """spark-submit started the JVM without the jar and configure() runs before any session: too late to add
    the jar, so configure() asks the session and says how to submit with the connector."""
    outcome = _run(
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[1]", str(NO_JAR_APP), "submitted"],
        tmp_path,
        env=_spark_env(),
    )
    assert outcome["error_type"] == "JarNotLoadedError", outcome
    message = str(outcome["message"])
    assert 'Spark answered DATA_SOURCE_NOT_FOUND for format("kafka-share")' in message, message
    assert f"spark-submit --packages {COORDINATES}" in message and f"--jars {spark_kafka_share.jar_path()}" in message, message


def test_spark_connect_without_the_connector_then_configure_says_what_to_do(tmp_path: Path) -> None:
    """A Connect server without the jar: the client cannot add it, so the error names the server's fix."""
    outcome = _run([sys.executable, str(NO_JAR_APP), "connect"], tmp_path)
    assert outcome["error_type"] == "JarNotLoadedError", outcome
    message = str(outcome["message"])
    assert "This Spark Connect session's server cannot load the connector" in message, message
    assert 'Spark answered DATA_SOURCE_NOT_FOUND for format("kafka-share")' in message, message
    assert f"start-connect-server.sh --packages {COORDINATES}" in message, message
    assert "before the first getOrCreate()" not in message, message  # no client-side fix exists


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
def test_spark_connect_client_reads_through_a_local_connect_server(broker: Broker, tmp_path: Path) -> None:
    port = _free_port()
    server_log = tmp_path / "connect-server.log"
    with server_log.open("w") as log:
        server = subprocess.Popen(
            [
                str(SPARK_HOME / "bin" / "spark-submit"),
                "--master",
                "local[2]",
                "--class",
                "org.apache.spark.sql.connect.service.SparkConnectServer",
                "--jars",
                str(_jar_elsewhere(tmp_path)),
                "--conf",
                f"spark.connect.grpc.binding.port={port}",
                "--conf",
                f"spark.sql.warehouse.dir={tmp_path / 'warehouse'}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env={**os.environ, **_spark_env()},
        )
    try:
        until = time.time() + 120
        while "Spark Connect server started" not in server_log.read_text() and time.time() < until:
            assert server.poll() is None, f"the Connect server exited:\n{server_log.read_text()[-3000:]}"
            time.sleep(0.5)
        assert "Spark Connect server started" in server_log.read_text(), server_log.read_text()[-3000:]
        config = {
            **_topic_with_records(broker, f"install-connect-{os.getpid()}", 300),
            "work": str(tmp_path),
            "remote": f"sc://localhost:{port}",
        }
        result = _run([sys.executable, str(APP), "connect", json.dumps(config)], tmp_path)
        assert (result["rows"], result["distinct"]) == (300, 300)
        _assert_errors_carry_conditions(result["errors"])
    finally:
        server.terminate()
        server.wait(timeout=60)
