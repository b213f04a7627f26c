"""Checkpoints on object stores: S3, served by moto on loopback and reached through Hadoop's S3A; and GCS,
served by fake-gcs-server and reached through Hadoop's GCS connector.

On S3 and GCS a rename is a check followed by a copy, so the rename-without-overwrite that publishes a log
file elsewhere lets two writers both win. The source writes its logs there with S3's conditional write
(If-None-Match: *), or the GCS connector's create without overwrite (an upload on condition
ifGenerationMatch=0), instead (docs/internals/checkpoints.md). These tests race writers for the same
files on the real protocols, and crash a driver whose checkpoint is in the bucket.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from object_store import (
    S3A_WRITES_CONDITIONALLY,
    create_bucket,
    create_gcs_bucket,
    gcs_objects,
    gcs_server,
    gcs_spark_conf,
    keys,
    s3_server,
    s3a_spark_conf,
)
from test_delivery import SEED, check

from chaos import run_cell
from harness import TEST_GROUP_TIMING, Broker, broker_versions
from spark_runs import run_spark

NEWEST = broker_versions()[-1]


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with s3_server(tmp_path_factory.mktemp("s3") / "moto.log") as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with gcs_server(tmp_path_factory.mktemp("gcs") / "fake-gcs-server.log") as endpoint:
        yield endpoint


def assert_one_winner_per_task(result: dict[str, Any]) -> None:
    """store_race.py's result: per task, exactly one attempt told the part is its own, and the log holds its records."""
    winners = [t["winners"] for t in result["tasks"]]
    assert winners == [1] * len(winners), f"attempts told the part was theirs, per task: {winners}"
    assert all(t["holds_winner"] for t in result["tasks"]), result["tasks"]


def crash_with_checkpoint_at(broker: Broker, tmp_path: Path, strategy: str, checkpoint: str, spark_conf: dict[str, str]) -> None:
    """F4 (the driver killed after offset log N, before the sink has N; restart) with every checkpoint file,
    Spark's and the source's, at `checkpoint`: lost 0, and doubled 0 for the exactly-once strategies."""
    cell = run_cell(
        broker,
        tmp_path,
        "F4",
        strategy,
        SEED,
        records=2000,
        group_timing=TEST_GROUP_TIMING,
        checkpoint=checkpoint,
        spark_conf=spark_conf,
    )
    check(cell)


def test_two_attempts_of_a_task_never_both_pin_the_same_part_on_s3(s3: str) -> None:
    """Two attempts of each of 40 tasks pin part 0 of a batch at once, with different records: exactly one
    is told the part is its own, and the log holds its records. (With fs.s3a.create.conditional.enabled=false
    the store falls back to the rename, and in a run 27 of 40 tasks had both attempts told so; on Spark 4.0
    before the source sent the write through S3A's client, 30 of 40.)"""
    bucket = create_bucket(s3)
    config = {"dir": f"s3a://{bucket}/checkpoint/sources/0", "tasks": 40, "spark_conf": s3a_spark_conf(s3)}
    result = run_spark("store_race.py", json.dumps(config))
    assert result["atomic"], result["by"]
    # Which conditional write: S3A's own (Hadoop 3.4.2 and later), or the source's through S3A's client (3.4.1).
    expected = "a conditional write (s3a:" if S3A_WRITES_CONDITIONALLY else "a conditional write through the S3 client"
    assert expected in result["by"], result["by"]
    assert_one_winner_per_task(result)


def test_without_the_conditional_write_the_store_says_it_is_not_atomic(s3: str) -> None:
    """The control: S3A with its conditional write switched off publishes by rename (HEAD, then COPY), and
    the store reports it, which makes the driver warn at start."""
    bucket = create_bucket(s3)
    spark_conf = {**s3a_spark_conf(s3), "spark.hadoop.fs.s3a.create.conditional.enabled": "false"}
    result = run_spark("store_race.py", json.dumps({"dir": f"s3a://{bucket}/cp/sources/0", "tasks": 1, "spark_conf": spark_conf}))
    assert not result["atomic"], result["by"]
    assert "rename without overwrite" in result["by"], result["by"]


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
# Two-phase-commit only: it pins and drops redeliveries as checkpoint-dedup does, and its phase 2 also
# watches the commit log in the bucket (checkpoint-dedup's cell was dropped from CI for time; `make chaos` has it).
@pytest.mark.parametrize("strategy", ["two-phase-commit"])
def test_driver_crash_with_the_checkpoint_on_s3_loses_nothing(broker: Broker, s3: str, tmp_path: Path, strategy: str) -> None:
    """F4 (the driver killed after offset log N, before the sink has N; restart) with every checkpoint file,
    Spark's and the source's, in the bucket."""
    bucket = create_bucket(s3)
    crash_with_checkpoint_at(broker, tmp_path, strategy, f"s3a://{bucket}/checkpoint", s3a_spark_conf(s3))
    # The files were in the bucket, Spark's and the source's: the cell did not run on a local checkpoint.
    assert keys(s3, bucket, "checkpoint/commits/"), "no commit log in the bucket"
    assert keys(s3, bucket, "checkpoint/sources/0/acquisitions/"), "no acquisition log in the bucket"


def test_two_attempts_of_a_task_never_both_pin_the_same_part_on_gcs(gcs: str) -> None:
    """The same race on GCS: exactly one attempt per task is told part 0 is its own, and the log holds its
    records. (Published by the rename, a copy and a delete here, instead, 32 of 40 tasks had both attempts
    told so.)"""
    bucket = create_gcs_bucket(gcs)
    config = {"dir": f"gs://{bucket}/checkpoint/sources/0", "tasks": 40, "spark_conf": gcs_spark_conf(gcs)}
    result = run_spark("store_race.py", json.dumps(config))
    assert result["atomic"], result["by"]
    assert "a create without overwrite (gs:" in result["by"], result["by"]
    assert_one_winner_per_task(result)
    assert gcs_objects(gcs, bucket, "checkpoint/sources/0/acquisitions/0/"), "no acquisition log in the bucket"


# `make chaos` (long): what GCS changes, the store's create without overwrite, is the race test's above; the
# crash with the checkpoint in a bucket is the S3 cell's.
@pytest.mark.long
@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
def test_driver_crash_with_the_checkpoint_on_gcs_loses_nothing(broker: Broker, gcs: str, tmp_path: Path) -> None:
    """F4 with every checkpoint file in a GCS bucket, two-phase-commit (the strategy whose phase 2 also
    watches the commit log there)."""
    bucket = create_gcs_bucket(gcs)
    crash_with_checkpoint_at(broker, tmp_path, "two-phase-commit", f"gs://{bucket}/checkpoint", gcs_spark_conf(gcs))
    assert gcs_objects(gcs, bucket, "checkpoint/commits/"), "no commit log in the bucket"
    assert gcs_objects(gcs, bucket, "checkpoint/sources/0/acquisitions/"), "no acquisition log in the bucket"
