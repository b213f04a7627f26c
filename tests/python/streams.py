"""Helpers of the behaviour tests: a prepared topic and group, one kafka-share query, its counts checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from chaos import EXACTLY_ONCE
from harness import TEST_GROUP_TIMING, Broker, broker_versions
from spark_runs import record_delivery_counts, run_spark

NEWEST = broker_versions()[-1]
RECORDS = 2000


def prepare(
    broker: Broker, fresh_name: Callable[[str], str], partitions: int = 2, records: int = RECORDS, lock_ms: int = 15000
) -> tuple[str, str]:
    topic, group = fresh_name("orders"), fresh_name("spark")
    broker.create_topic(topic, partitions)
    # By default the shortest lock the broker allows; with the short session of TEST_GROUP_TIMING, records
    # held by a killed driver come back within seconds (docs/guide/operating.md).
    broker.group_config(group, {"share.record.lock.duration.ms": str(lock_ms), **TEST_GROUP_TIMING})
    broker.produce(topic, records)
    return topic, group


def stream(broker: Broker, tmp: Path, topic: str, group: str, strategy: str, expected: int, **extra: object) -> dict[str, Any]:
    config = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "group": group,
        "strategy": strategy,
        "parallelism": 2,
        "checkpoint": str(tmp / "checkpoint"),
        "sink": str(tmp / "sink"),
        "marker": str(tmp / "failed-once"),
        "expected": expected,
        "timeout_s": 150,
    }
    killed = bool(extra.pop("killed", False))
    config.update(extra)
    # The app may run to twice its timeout_s while rows keep landing (share_stream.py).
    return run_spark(
        "share_stream.py", json.dumps(config), timeout=max(400, 2 * float(str(config["timeout_s"])) + 120), killed=killed
    )


def crash_at_moments(
    broker: Broker, tmp: Path, topic: str, group: str, strategy: str, expected: int, moments: tuple[float, ...], **shape: object
) -> None:
    """Runs the query once per moment and kills its driver that many seconds after the run's first
    committed batch (F4r), at whatever it is doing; each run restarts from the checkpoint. A restart
    that failed (the query stopped with an error and the app had to start it again) fails the test,
    also inside a run that was then killed."""
    failed_restarts = tmp / "failed-restarts.json"
    for crash, after_s in enumerate(moments):
        stream(
            broker,
            tmp,
            topic,
            group,
            strategy,
            expected,
            failure="F4r",
            inject_after_s=after_s,
            marker=str(tmp / f"crash-{crash}"),
            killed=True,
            restarts_file=str(failed_restarts),
            **shape,
        )
        assert not failed_restarts.exists(), f"a restart failed before crash {crash}: {failed_restarts.read_text()[:3000]}"


def check(case: str, strategy: str, landed: dict[str, Any], produced: int, tmp: Path) -> None:
    rows, distinct = int(landed["rows"]), int(landed["distinct"])
    lost, doubled = produced - distinct, rows - distinct
    record_delivery_counts(f"{case:4} {strategy:17} produced {produced:6} landed {rows:6} lost {lost:4} doubled {doubled:4}")
    assert lost == 0, f"{case}/{strategy}: {lost} records lost"
    if strategy in EXACTLY_ONCE:
        assert doubled == 0, f"{case}/{strategy}: {doubled} records landed twice"
    assert not (tmp / "sink.replay-mismatch").exists(), (tmp / "sink.replay-mismatch").read_text()
