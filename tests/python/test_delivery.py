"""The delivery contract, end to end: real Spark, a real broker, failures injected for real.

Each case produces keyed records ("0".."N-1"), runs a kafka-share query into a sink that is
idempotent per batch id, injects one failure of ../shared/delivery-contract.md, and counts what
landed. Lost must be 0 everywhere; doubled must be 0 for the exactly-once strategies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from conftest import record_delivery_counts, run_spark
from harness import Broker, broker_versions

NEWEST = broker_versions()[-1]
STRATEGIES = ["none", "idempotent", "checkpoint-dedup", "two-phase-commit"]
EXACTLY_ONCE = {"checkpoint-dedup", "two-phase-commit"}
RECORDS = 2000


def prepare(broker: Broker, fresh_name: Callable[[str], str], partitions: int = 2, records: int = RECORDS) -> tuple[str, str]:
    topic, group = fresh_name("orders"), fresh_name("spark")
    broker.create_topic(topic, partitions)
    # The shortest lock the broker allows, so records held by a killed driver come back quickly.
    broker.group_config(group, {"share.record.lock.duration.ms": "15000"})
    broker.produce(topic, records)
    return topic, group


def stream(broker: Broker, tmp: Path, topic: str, group: str, strategy: str, expected: int, **extra: object) -> dict[str, object]:
    config = {"bootstrap": broker.bootstrap, "topic": topic, "group": group, "strategy": strategy,
              "parallelism": 2, "checkpoint": str(tmp / "checkpoint"), "sink": str(tmp / "sink"),
              "marker": str(tmp / "failed-once"), "expected": expected, "timeout_s": 150}
    killed = bool(extra.pop("killed", False))
    config.update(extra)
    return run_spark("share_stream.py", json.dumps(config), timeout=400, killed=killed)


def check(case: str, strategy: str, landed: dict[str, object], produced: int, tmp: Path) -> None:
    rows, distinct = int(landed["rows"]), int(landed["distinct"])  # type: ignore[call-overload]
    lost, doubled = produced - distinct, rows - distinct
    record_delivery_counts(f"{case:4} {strategy:17} produced {produced:6} landed {rows:6} lost {lost:4} doubled {doubled:4}")
    assert lost == 0, f"{case}/{strategy}: {lost} records lost"
    if strategy in EXACTLY_ONCE:
        assert doubled == 0, f"{case}/{strategy}: {doubled} records landed twice"
    assert not (tmp / "sink.replay-mismatch").exists(), (tmp / "sink.replay-mismatch").read_text()


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("failure", ["F1", "F2", "F8"])
def test_task_and_batch_failures_lose_nothing(broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path,
                                              strategy: str, failure: str) -> None:
    """F1 a read task throws midway and is retried; F2 the batch fails after its reader finished and
    the query restarts; F8 foreachBatch runs two actions (the sink checks both saw the same rows)."""
    topic, group = prepare(broker, fresh_name)
    landed = stream(broker, tmp_path, topic, group, strategy, RECORDS, failure=failure)
    assert (tmp_path / "failed-once").exists() or failure == "F8", "the failure was not injected"
    check(failure, strategy, landed, RECORDS, tmp_path)


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("failure", ["F4", "F5"])
def test_driver_killed_then_restarted_loses_nothing(broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path,
                                                    strategy: str, failure: str) -> None:
    """F4 the driver dies after offset log 1, before the sink has batch 1; F5 after the sink has it,
    before commit log 1. The restarted query re-runs batch 1 from the checkpoint."""
    topic, group = prepare(broker, fresh_name)
    stream(broker, tmp_path, topic, group, strategy, RECORDS, failure=failure, killed=True)
    assert (tmp_path / "failed-once").exists()
    landed = stream(broker, tmp_path, topic, group, strategy, RECORDS, failure=failure)
    check(failure, strategy, landed, RECORDS, tmp_path)


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_stopped_and_started_many_times_loses_nothing(broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path,
                                                      strategy: str) -> None:
    """F11: the query stops after its first non-empty batch, five times in a row, then runs to the end."""
    topic, group = prepare(broker, fresh_name, records=RECORDS)
    for _ in range(5):
        stream(broker, tmp_path, topic, group, strategy, RECORDS, stop_after_batches=1)
    landed = stream(broker, tmp_path, topic, group, strategy, RECORDS)
    check("F11", strategy, landed, RECORDS, tmp_path)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_reads_everything_on_every_broker(broker: Broker, fresh_name: Callable[[str], str],
                                                         tmp_path: Path, strategy: str) -> None:
    topic, group = prepare(broker, fresh_name)
    landed = stream(broker, tmp_path, topic, group, strategy, RECORDS)
    check("-", strategy, landed, RECORDS, tmp_path)
