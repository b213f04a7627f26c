"""Object stores on loopback for checkpoint tests: moto's server (the real S3 protocol, from PyPI), reached by
Spark through Hadoop's S3A (hadoop-aws and the AWS SDK of the running pyspark's Hadoop, target/s3/, fetched by
`make test`); and fake-gcs-server (GCS's JSON API), reached through Hadoop's GCS connector (target/gcs/, both
fetched by `make test`)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyspark

from harness import ROOT, pins


def _spark_hadoop() -> str:
    """The Hadoop version of the running pyspark (its jars/hadoop-client-api-<version>.jar)."""
    jars = list((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    assert len(jars) == 1, f"pyspark {pyspark.__version__} has no single hadoop-client-api jar: {jars}"
    return jars[0].name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def _s3_jars() -> Path:
    """hadoop-aws must be the running Spark's Hadoop: target/s3/jars (pin hadoop-aws) or jars-oldest (hadoop-aws.oldest)."""
    hadoop, versions = _spark_hadoop(), pins()
    by_version = {versions["hadoop-aws"]: "jars", versions["hadoop-aws.oldest"]: "jars-oldest"}
    assert hadoop in by_version, f"pyspark {pyspark.__version__} runs Hadoop {hadoop}: pin its hadoop-aws in versions.properties"
    return ROOT / "target" / "s3" / by_version[hadoop]


S3_JARS = _s3_jars()
# S3A makes the conditional write itself from Hadoop 3.4.2 on; before, the source sends it through S3A's client.
S3A_WRITES_CONDITIONALLY = S3_JARS.name == "jars"
ACCESS_KEY = "testing"  # moto takes any key; the S3A settings name the same


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _server(command: list[str], port: int, log: Path, what: str) -> Iterator[str]:
    """Starts a server on loopback and waits for its port; yields its endpoint (http://127.0.0.1:<port>)."""
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    raise AssertionError(f"{what} did not start: {log.read_text()[-3000:]}") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextmanager
def s3_server(log: Path) -> Iterator[str]:
    """Starts moto's S3 server, its conditional writes atomic as S3's are (atomic_moto_server.py); yields its endpoint."""
    port = _free_port()
    launcher = Path(__file__).parent / "atomic_moto_server.py"
    with _server([sys.executable, str(launcher), str(port)], port, log, "moto's S3 server") as endpoint:
        yield endpoint


def _client(endpoint: str) -> Any:
    import boto3  # type: ignore[import-untyped]  # moto[server] brings it; it has no type stubs

    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=ACCESS_KEY, region_name="us-east-1"
    )


def create_bucket(endpoint: str) -> str:
    """A new bucket on the server; returns its name."""
    name = f"checkpoints-{uuid.uuid4().hex[:8]}"
    _client(endpoint).create_bucket(Bucket=name)
    return name


def keys(endpoint: str, bucket: str, prefix: str) -> list[str]:
    """The keys under `prefix` in the bucket (up to 1000)."""
    listed = _client(endpoint).list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [str(o["Key"]) for o in listed.get("Contents", [])]


def s3a_spark_conf(endpoint: str) -> dict[str, str]:
    """Spark settings that put S3A on the class path and point it at the server."""
    jars = S3_JARS.read_text().strip()
    return {
        "spark.jars": jars,
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
        "spark.hadoop.fs.s3a.secret.key": ACCESS_KEY,
        "spark.hadoop.fs.s3a.attempts.maximum": "3",
        "spark.hadoop.fs.s3a.retry.limit": "3",
    }


GCS_DIR = ROOT / "target" / "gcs"
GCS_PROJECT = "test-project"


@contextmanager
def gcs_server(log: Path) -> Iterator[str]:
    """Starts fake-gcs-server, in memory; yields its endpoint."""
    port = _free_port()
    command = [
        str(GCS_DIR / "fake-gcs-server"),
        "-scheme",
        "http",
        "-host",
        "127.0.0.1",
        "-port",
        str(port),
        "-backend",
        "memory",
    ]
    with _server(command, port, log, "fake-gcs-server") as endpoint:
        yield endpoint


def create_gcs_bucket(endpoint: str) -> str:
    """A new bucket on the GCS server; returns its name."""
    name = f"checkpoints-{uuid.uuid4().hex[:8]}"
    request = urllib.request.Request(
        f"{endpoint}/storage/v1/b?project={GCS_PROJECT}",
        data=json.dumps({"name": name}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30):
        return name


def gcs_objects(endpoint: str, bucket: str, prefix: str) -> list[str]:
    """The object names under `prefix` in the bucket."""
    with urllib.request.urlopen(f"{endpoint}/storage/v1/b/{bucket}/o?prefix={prefix}", timeout=30) as r:
        return [str(o["name"]) for o in json.load(r).get("items", [])]


def gcs_spark_conf(endpoint: str) -> dict[str, str]:
    """Spark settings that put the GCS connector on the class path and point it at the server, without credentials."""
    (jar,) = GCS_DIR.glob("gcs-connector-*.jar")
    return {
        "spark.jars": str(jar),
        "spark.hadoop.fs.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.gs.impl": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFS",
        "spark.hadoop.fs.gs.storage.root.url": f"{endpoint}/",
        "spark.hadoop.fs.gs.project.id": GCS_PROJECT,
        "spark.hadoop.fs.gs.auth.type": "UNAUTHENTICATED",
        # A rename is a move (one request) by default; fake-gcs-server has no move, so the connector copies
        # and deletes, as GCS connectors before 4.0 do. Spark's own logs are published by rename.
        "spark.hadoop.fs.gs.operation.move.enable": "false",
        # Hadoop 3.5 (pyspark 4.3) has a GCS file system of its own, and its core-default.xml gives these
        # settings with units ("64m"), which Google's connector reads as plain numbers: the same, in bytes.
        "spark.hadoop.fs.gs.block.size": str(64 << 20),
        "spark.hadoop.fs.gs.rewrite.max.chunk.size": str(512 << 20),
        "spark.hadoop.fs.gs.outputstream.buffer.size": str(8 << 20),
        "spark.hadoop.fs.gs.inputstream.inplace.seek.limit": str(8 << 20),
        "spark.hadoop.fs.gs.inputstream.min.range.request.size": str(2 << 20),
    }
