"""Recovery without stalls (issue 42 item 6): after the driver is killed inside a batch and started again,
every strategy's batches are back to their usual length within one lock duration of the restart.

The driver dies 20 s into the batch that took the last records (longer than the 15 s lock: two-phase
commit renews the held locks until then). The restarted application replays that batch, then gets a
record every 15 s: longer than the pool keeps an idle consumer (LockBudget.idleCloseMs, half a lock), so
each of those batches starts with new consumers, and one of its two read tasks finds nothing. A new
consumer's first poll used to wait PooledShareConsumer.JoinTimeoutMs (12 s) whenever nothing came, also
after the broker had answered its fetches: each such batch took 12 to 14 s where the poll timeout is 2.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from harness import Broker
from spark_runs import record_delivery_counts, run_spark
from streams import NEWEST

STRATEGIES = ["none", "checkpoint-dedup", "two-phase-commit"]
LOCK_S = 15
RECORDS = 800  # two batches of 400: the driver dies in the second, the last
TRICKLE_EVERY_S = 15
TRICKLE_RECORDS = 4
# The usual length of a batch whose consumers are new: the poll timeout (2 s), the group's assignment
# (its heartbeat, 1 s here) and Spark's own time: 6 to 7 s alone, with room for the other pytest worker's load;
# below the stall's 12 s and more.
USUAL_BATCH_S = 11.0


def _batch_spans(result: dict[str, object]) -> list[tuple[int, float, float, int]]:
    """(batch id, start as epoch seconds, seconds it took, rows) of each batch of a query's run."""
    spans = []
    for batch, rows, started, took_ms in result["batch_times"]:  # type: ignore[attr-defined]
        start = datetime.fromisoformat(str(started).replace("Z", "+00:00")).timestamp()
        spans.append((int(batch), start, took_ms / 1000, int(rows)))
    return spans


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
def test_batches_after_a_driver_killed_inside_a_batch_are_back_to_their_usual_length_within_a_lock(
    broker: Broker, tmp_path: Path
) -> None:
    topic = f"recovery-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    queries: list[dict[str, str | int]] = []
    for strategy in STRATEGIES:
        group = f"{topic}-{strategy}"
        # The broker's session (45 s): the killed driver's members linger as they would in production.
        broker.group_config(
            group,
            {
                "share.record.lock.duration.ms": str(LOCK_S * 1000),
                "share.heartbeat.interval.ms": "1000",
                "share.auto.offset.reset": "earliest",
            },
        )
        own = tmp_path / strategy
        own.mkdir()
        queries.append(
            {
                "group": group,
                "strategy": strategy,
                "checkpoint": str(own / "checkpoint"),
                "sink": str(own / "sink"),
                "marker": str(own / "injected"),
                "failure_batch": 1,
            }
        )
    broker.produce(topic, RECORDS)
    config = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "parallelism": 2,
        "expected": RECORDS,
        "timeout_s": 240,
        "failure": "F4",
        "slow_batch_s": 20,
        "options": {"kafka.max.poll.records": 150, "maxRecordsPerTrigger": RECORDS // 2},
        "queries": queries,
        "spark_conf": {"spark.sql.streaming.numRecentProgressUpdates": "1000"},
    }
    run_spark("share_stream.py", json.dumps(config), timeout=400, killed=True)
    assert all(Path(str(q["marker"])).exists() for q in queries), "the driver was not killed inside the batch"

    until = tmp_path / "until"

    def trickle() -> None:
        for i in range(TRICKLE_RECORDS):
            time.sleep(TRICKLE_EVERY_S)
            broker.produce(topic, 1, first_key=RECORDS + i)
        time.sleep(TRICKLE_EVERY_S)
        until.write_text("done")

    producer = threading.Thread(target=trickle)
    producer.start()
    restarted = run_spark("share_stream.py", json.dumps({**config, "until_file": str(until), "timeout_s": 400}), timeout=600)
    producer.join()

    failures = []
    expected = RECORDS + TRICKLE_RECORDS
    for q, result in zip(queries, restarted["queries"]):
        spans = _batch_spans(result)
        assert spans, f"{q['strategy']}: no batch ran after the restart"
        back_by = spans[0][1] + LOCK_S  # the restart's first batch, plus a lock
        slow = [(b, round(took, 1), rows) for b, start, took, rows in spans if start >= back_by and took > USUAL_BATCH_S]
        later = [took for _, start, took, _ in spans if start >= back_by]
        rows, distinct = int(result["rows"]), int(result["distinct"])
        lost = expected - distinct  # the last record comes a trickle period before the run stops
        doubled = rows - distinct
        record_delivery_counts(
            f"recovery {q['strategy']:17} batches after a lock {len(later)}, longest "
            f"{max(later, default=0):.1f} s, over {USUAL_BATCH_S:g} s: {slow}; lost {lost} doubled {doubled}"
        )
        if len(later) < TRICKLE_RECORDS - 1:
            failures.append(f"{q['strategy']}: only {len(later)} batch(es) ran after the first lock: {spans}")
        if slow:
            failures.append(f"{q['strategy']}: batches longer than {USUAL_BATCH_S:g} s after the first lock: {slow}")
        if lost:
            failures.append(f"{q['strategy']}: lost {lost}")
        if doubled and q["strategy"] != "none":
            failures.append(f"{q['strategy']}: doubled {doubled}")
    assert not failures, "\n".join(failures)
