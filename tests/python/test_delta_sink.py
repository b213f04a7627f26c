"""foreachBatch into a Delta table, made idempotent by Delta's own txnAppId and txnVersion, with the
driver killed right after Delta committed a batch (before Spark's commit log). Kills at random moments of
such queries, many in a row, are `make crash-series`'s (tests/python/crash_series.py).

Runs in `make test-compat` on the oldest Spark: no Delta release supports the newest pyspark yet
(Delta 4.0 is built for Spark 4.0). The Delta jars come from Maven Central (versions.properties:
delta); the Makefile passes them in KAFKASHARE_DELTA_JARS."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

from harness import Broker
from streams import NEWEST, check, prepare, stream

pytestmark = pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])

# Six batches of 300: a kill after batch 2 with the query mid-stream (a Delta batch on Spark 4.0 takes seconds).
RECORDS = 1800


def test_foreach_batch_into_delta_survives_driver_crashes(
    broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    """Two-phase commit and checkpoint-dedup side by side: a query each in one application (one Spark
    start per run for both), each on its own topic and group, into its own Delta table."""
    jars = os.environ.get("KAFKASHARE_DELTA_JARS", "")
    assert jars, "KAFKASHARE_DELTA_JARS is not set: run this file through `make test-compat`, which fetches Delta"
    strategies = ["two-phase-commit", "checkpoint-dedup"]
    queries = []
    for strategy in strategies:
        # The default lock (30 s): on 2 cores Delta's first batches on Spark 4.0 take 15 to 20 s, and a
        # two-phase-commit batch longer than its locks spends delivery attempts (docs/internals/delivery-semantics.md).
        topic, group = prepare(broker, fresh_name, records=RECORDS, lock_ms=30000)
        own = tmp_path / strategy
        queries.append(
            {
                "topic": topic,
                "group": group,
                "strategy": strategy,
                "checkpoint": str(own / "checkpoint"),
                "sink": str(own / "sink"),
            }
        )
    shape = {"delta": True, "delta_jars": jars, "options": {"maxRecordsPerTrigger": 300}, "queries": queries}
    first = queries[0]
    # Killed once each query's Delta table has its batch 2 and before Spark's commit log does: the restart
    # runs batch 2 again and Delta skips it (its txnVersion is there).
    at_the_sink = [{**q, "marker": str(tmp_path / f"crash-sink-{q['strategy']}")} for q in queries]
    stream(
        broker,
        tmp_path,
        str(first["topic"]),
        str(first["group"]),
        strategies[0],
        RECORDS,
        failure="F5",
        failure_batch=2,
        killed=True,
        **{**shape, "queries": at_the_sink},
    )
    landed = stream(broker, tmp_path, str(first["topic"]), str(first["group"]), strategies[0], RECORDS, timeout_s=240, **shape)
    for strategy, result in zip(strategies, landed["queries"]):
        check("dlt", strategy, result, RECORDS, tmp_path)
        assert result["restarts"] == 0, (strategy, result)
    for q in at_the_sink:
        assert Path(str(q["marker"])).exists(), f"{q['strategy']}: never killed at the sink"
