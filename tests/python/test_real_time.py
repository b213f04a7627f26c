"""Spark's real-time mode (Spark 4.1+, `trigger(realTime=...)`), on the newest pyspark and broker.

The query writes through a foreach writer that keeps every row it is given (spark_apps/real_time_stream.py):
a record that came twice in one epoch is a batch Spark ran again after a crash (real time does not replay a
batch, it runs it anew, and the source emits what the earlier run pinned first); a record in two epochs is
the source emitting it twice, which checkpoint-dedup must never do.
"""

from __future__ import annotations

import collections
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness import Broker, broker_versions, harness
from spark_runs import finish, record_delivery_counts, run_spark, start_spark

NEWEST = broker_versions()[-1]
pytestmark = pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])

LOCK_MS = 15000  # the shortest lock the broker allows: what the dead driver's consumers held comes back soon


def sink_rows(sink: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(sink.glob("*.jsonl")) for line in f.read_text().splitlines() if line]


def counts(rows: list[dict[str, Any]], produced: int) -> dict[str, int]:
    per_key = collections.Counter(r["k"] for r in rows)
    epochs: dict[str, set[int]] = collections.defaultdict(set)
    for r in rows:
        epochs[r["k"]].add(r["epoch"])
    return {
        "produced": produced,
        "landed": len(per_key),
        "lost": sum(1 for k in range(produced) if str(k) not in per_key),
        "in_two_batches": sum(1 for e in epochs.values() if len(e) > 1),
        "again_in_a_rerun": sum(1 for k, c in per_key.items() if c > 1 and len(epochs[k]) == 1),
    }


def test_real_time_refuses_what_it_cannot_hold(broker: Broker, fresh_name: Any, tmp_path: Path) -> None:
    """Two-phase-commit, explicit mode, maxRecordsPerTrigger and more read tasks than task slots: each a
    catalogued error at start, naming the option."""
    topic, group = fresh_name("rt-refused"), fresh_name("rt-refused-group")
    broker.create_topic(topic, partitions=1)
    config = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "group": group,
        "checkpoint": str(tmp_path / "checkpoint"),
        "sink": str(tmp_path / "sink"),
        "master": "local[2]",
        "parallelism": 1,
        "only_checks": True,
        "checks": [
            {"kafka.share.exactly.once.strategy": "two-phase-commit"},
            {"kafka.share.acknowledgment.mode": "explicit"},
            {"maxRecordsPerTrigger": "100"},
            {"kafka.share.parallelism": "3"},
        ],
    }
    checks = run_spark("real_time_stream.py", json.dumps(config))["checks"]
    expected = [
        ("KAFKA_SHARE_UNSUPPORTED_USE.REAL_TIME_HOLDS_RECORDS", "two-phase-commit"),
        ("KAFKA_SHARE_UNSUPPORTED_USE.REAL_TIME_HOLDS_RECORDS", "kafka.share.acknowledgment.mode"),
        ("KAFKA_SHARE_UNSUPPORTED_USE.REAL_TIME_MAX_RECORDS", "maxRecordsPerTrigger"),
        ("KAFKA_SHARE_UNSUPPORTED_USE.REAL_TIME_TOO_FEW_SLOTS", "runs 2 task(s) at once"),
    ]
    for check, (condition, named) in zip(checks, expected, strict=True):
        assert check["condition"] == condition, check
        assert named in check["error"], check


@pytest.mark.parametrize("strategy", ["checkpoint-dedup", "none"])
def test_real_time_loses_nothing_across_a_driver_kill(broker: Broker, fresh_name: Any, tmp_path: Path, strategy: str) -> None:
    """Records produced while the query runs; the driver SIGKILLed at a moment inside a real-time batch (seeded),
    then started again on the checkpoint: every record lands, and with checkpoint-dedup none in two batches."""
    topic, group = fresh_name("rt-crash"), fresh_name("rt-crash-group")
    broker.create_topic(topic, partitions=2)
    broker.group_config(group, {"share.record.lock.duration.ms": str(LOCK_MS), "share.auto.offset.reset": "earliest"})
    seed = 20261128
    kill_after = round(random.Random(f"{seed}-{strategy}").uniform(0.5, 4.5), 2)
    rate, seconds = 100, 30  # still producing when the driver dies, in the run's third batch
    config = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "group": group,
        "strategy": strategy,
        "checkpoint": str(tmp_path / "checkpoint"),
        "sink": str(tmp_path / "sink"),
        "parallelism": 2,
        "expected": rate * seconds,
        "timeout_s": 150,
    }
    pid_file = tmp_path / "driver.pid"
    upstream = threading.Thread(
        target=harness, args=("produce-rate", broker.bootstrap, topic, str(rate), str(seconds)), kwargs={"timeout": 300}
    )
    crashing = {**config, "kill_after_commit_s": kill_after, "pid_file": str(pid_file)}
    first = start_spark("real_time_stream.py", json.dumps(crashing))
    # Produced from when Spark runs: the driver dies about 12 s later, with most records still to come.
    while not pid_file.exists() and first.poll() is None:
        time.sleep(0.2)
    upstream.start()
    try:
        finish(first, killed=True)
        killed_rows = len(sink_rows(tmp_path / "sink"))
        result = run_spark("real_time_stream.py", json.dumps(config), timeout=240)
    finally:
        upstream.join()
    assert result["error"] is None, result["error"]
    got = counts(sink_rows(tmp_path / "sink"), rate * seconds)
    record_delivery_counts(
        f"real time, driver killed {kill_after} s into a batch, {strategy}: produced {got['produced']} landed "
        f"{got['landed']} lost {got['lost']} in two batches {got['in_two_batches']} again in a re-run "
        f"{got['again_in_a_rerun']} ({killed_rows} rows before the kill)"
    )
    assert got["lost"] == 0, got
    assert got["landed"] == got["produced"], got
    if strategy == "checkpoint-dedup":
        assert got["in_two_batches"] == 0, got
