"""Spark's real-time mode (Spark 4.1+, `trigger(realTime=...)`), on the newest pyspark and broker.

The query writes through a foreach writer that keeps every row it is given, a file per task attempt, marked
when the attempt ends well (spark_apps/real_time_stream.py). The counts are of what a sink that keeps one
attempt per batch and task holds (spark_apps/attempt_files.py): the last attempt at each that ended well. A
killed attempt's rows, and those of a batch's run that a crash cut short (real time does not replay a batch,
it runs it anew, and the source emits what the earlier run pinned first), are not kept: a record that only
they had is lost. With checkpoint-dedup, no record may be kept twice. From Spark 4.3, real time keeps state:
a dropDuplicates and an aggregation run beside the stateless queries, through the same crash.
The task failure, the stop inside a batch and the broker restart run in the test JVM on Spark 4.1
(tests/realtime-integration/.../RealTimeSuite.scala).
"""

from __future__ import annotations

import collections
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pyspark
import pytest
from spark_apps.attempt_files import all_rows, kept_rows

from harness import Broker, broker_versions, harness
from spark_runs import finish, record_delivery_counts, run_spark, start_spark

NEWEST = broker_versions()[-1]
pytestmark = pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])

LOCK_MS = 15000  # the shortest lock the broker allows: what the dead driver's consumers held comes back soon


def counts(sink: Path, produced: int) -> dict[str, int]:
    """Counted over what a sink that keeps one attempt per batch and task holds (attempt_files.kept_rows)."""
    rows = kept_rows(sink)
    per_key = collections.Counter(r["k"] for r in rows)
    epochs: dict[str, set[int]] = collections.defaultdict(set)
    for r in rows:
        epochs[r["k"]].add(r["epoch"])
    return {
        "produced": produced,
        "landed": len(per_key),
        "lost": sum(1 for k in range(produced) if str(k) not in per_key),
        "doubled": len(rows) - len(per_key),
        "in_two_batches": sum(1 for e in epochs.values() if len(e) > 1),
        "not_kept": len(all_rows(sink)) - len(rows),
    }


STRATEGIES = ["none", "checkpoint-dedup"]
# Real time keeps state from Spark 4.3 on (aggregations, dropDuplicates); both need exactly-once input.
STATEFUL = tuple(int(p) for p in pyspark.__version__.split(".")[:2]) >= (4, 3)
STATEFUL_SHAPES = ["dedup", "count"] if STATEFUL else []
GROUPS_OF_COUNT = 10  # the count query's groups: key % 10


def stateful_counts(shape: str, rows: list[dict[str, Any]], keys: int) -> dict[str, Any]:
    """dedup: every key once, in one epoch; count: each group's final count is the records of its keys (each
    key was produced twice), neither more (a record counted twice) nor less."""
    if shape == "dedup":
        epochs: dict[str, set[int]] = collections.defaultdict(set)
        for r in rows:
            epochs[r["k"]].add(r["epoch"])
        lost = sum(1 for k in range(keys) if str(k) not in epochs)
        return {
            "keys": keys,
            "landed": len(epochs),
            "lost": lost,
            "written_twice": len(rows) - len(epochs),  # each key once, though it was sent twice
            "in_two_batches": sum(1 for e in epochs.values() if len(e) > 1),
        }
    final: dict[int, int] = collections.defaultdict(int)
    for r in rows:
        final[r["g"]] = max(final[r["g"]], r["count"])
    expected = collections.Counter(k % GROUPS_OF_COUNT for k in range(keys))
    return {"expected": {g: 2 * n for g, n in sorted(expected.items())}, "final": dict(sorted(final.items()))}


# Two read tasks a query, and a stateful query's two shuffle partitions as long-running tasks too.
SLOTS = 4 + 4 * len(STATEFUL_SHAPES)
REFUSED = [  # option set, the condition it must fail with, and a word of its message
    ({"kafka.share.exactly.once.strategy": "two-phase-commit"}, "REAL_TIME_HOLDS_RECORDS", "two-phase-commit"),
    ({"kafka.share.acknowledgment.mode": "explicit"}, "REAL_TIME_HOLDS_RECORDS", "kafka.share.acknowledgment.mode"),
    ({"maxRecordsPerTrigger": "100"}, "REAL_TIME_MAX_RECORDS", "maxRecordsPerTrigger"),
    ({"kafka.share.parallelism": str(SLOTS + 1)}, "REAL_TIME_TOO_FEW_SLOTS", f"runs {SLOTS} task(s) at once"),
]


def query_of(broker: Broker, fresh_name: Any, work: Path, strategy: str, shape: str, topic: str) -> dict[str, str]:
    """A query of the application: its own group (short locks, from the earliest record), checkpoint and sink."""
    group = fresh_name(f"rt-{work.name}")
    broker.group_config(group, {"share.record.lock.duration.ms": str(LOCK_MS), "share.auto.offset.reset": "earliest"})
    return {
        "group": group,
        "strategy": strategy,
        "shape": shape,
        "topic": topic,
        "checkpoint": str(work / "checkpoint"),
        "sink": str(work / "sink"),
    }


def rows_problems(q: dict[str, str], result: dict[str, Any], produced: int, what: str) -> list[str]:
    """Records the counts of a query that writes every record's key; returns what breaks the contract."""
    strategy, error = q["strategy"], result["queries"][q["group"]]["error"]
    got = counts(Path(q["sink"]), produced)
    record_delivery_counts(
        f"real time, {what}, {strategy}: produced {got['produced']} landed {got['landed']} lost {got['lost']} "
        f"doubled {got['doubled']} (in two batches {got['in_two_batches']}; {got['not_kept']} rows of attempts not kept)"
    )
    problems = [f"{strategy}: the query failed: {error}"] if error is not None else []
    if got["lost"] or got["landed"] != got["produced"]:
        problems.append(f"{strategy}: {got}")
    if strategy == "checkpoint-dedup" and got["doubled"]:
        problems.append(f"{strategy}: records landed twice: {got}")
    return problems


def test_real_time_loses_nothing_across_a_driver_kill_and_refuses_what_it_cannot_hold(
    broker: Broker, fresh_name: Any, tmp_path: Path
) -> None:
    """One application, a real-time query per strategy side by side (a group each, one topic), records
    produced while they run; the driver SIGKILLed at a seeded moment inside a real-time batch, then started
    again on the checkpoints: every record lands, and with checkpoint-dedup none in two batches. On Spark
    4.3, two stateful checkpoint-dedup queries of a second topic, where every key comes twice, go through the
    same crash: dropDuplicates writes every key once, and a count per key % 10 ends at the records produced.
    Before the queries start, the run that is killed starts one with each option set real time cannot hold:
    each fails at start with its catalogued error."""
    topic, keyed_twice = fresh_name("rt-crash"), fresh_name("rt-twice")
    for t in (topic, keyed_twice):
        broker.create_topic(t, partitions=2)
    queries = [query_of(broker, fresh_name, tmp_path / s, s, "rows", topic) for s in STRATEGIES] + [
        query_of(broker, fresh_name, tmp_path / shape, "checkpoint-dedup", shape, keyed_twice) for shape in STATEFUL_SHAPES
    ]
    kill_after = round(random.Random(20261128).uniform(0.5, 4.5), 2)
    rate, seconds = 100, 30
    config = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "queries": queries,
        "master": f"local[{SLOTS}]",
        "parallelism": 2,
        "expected": rate * seconds,
        "expected_keys": rate * seconds // 2,
        "settle_s": 6,  # more than a batch
        "timeout_s": 150,
    }
    pid_file, checks_file = tmp_path / "driver.pid", tmp_path / "checks.json"

    def produce() -> None:
        both = [
            threading.Thread(
                target=harness, args=("produce-rate", broker.bootstrap, topic, str(rate), str(seconds)), kwargs={"timeout": 300}
            ),
            threading.Thread(target=keyed_twice_upstream),
        ]
        for t in both:
            t.start()
        for t in both:
            t.join()

    def keyed_twice_upstream() -> None:
        for _ in range(2):  # keys 0 until rate * seconds / 2, twice: the second time 15 s after the first
            harness("produce-rate", broker.bootstrap, keyed_twice, str(rate), str(seconds // 2), timeout=300)

    upstream = threading.Thread(target=produce)
    crashing = {
        **config,
        "kill_after_commit_s": kill_after,
        "pid_file": str(pid_file),
        "checks": [options for options, _, _ in REFUSED],
        "checks_file": str(checks_file),
    }
    first = start_spark("real_time_stream.py", json.dumps(crashing))
    # Produced once the queries run: the driver dies about 12 s later, with most records still to come.
    while not pid_file.exists() and first.poll() is None:
        time.sleep(0.2)
    while not checks_file.exists() and first.poll() is None:
        time.sleep(0.2)
    upstream.start()
    try:
        finish(first, killed=True)
        killed_rows = {q["sink"]: len(all_rows(Path(q["sink"]))) for q in queries}
        result = run_spark("real_time_stream.py", json.dumps(config), timeout=240)
    finally:
        if upstream.ident is not None:  # started
            upstream.join()

    for check, (options, condition, named) in zip(json.loads(checks_file.read_text()), REFUSED, strict=True):
        assert check["condition"] == f"KAFKA_SHARE_UNSUPPORTED_USE.{condition}", (options, check)
        assert named in check["error"], (options, check)
    problems = []
    for q in queries:
        if q["shape"] != "rows":
            error = result["queries"][q["group"]]["error"]
            got_state = stateful_counts(q["shape"], kept_rows(Path(q["sink"])), rate * seconds // 2)
            record_delivery_counts(
                f"real time, driver killed {kill_after} s into a batch, {q['shape']} (checkpoint-dedup): {got_state} "
                f"({killed_rows[q['sink']]} rows before the kill)"
            )
            if error is not None:
                problems.append(f"{q['shape']}: the query failed: {error}")
            if q["shape"] == "dedup" and (got_state["lost"] or got_state["written_twice"]):
                problems.append(f"dedup: {got_state}")
            if q["shape"] == "count" and got_state["final"] != got_state["expected"]:
                problems.append(f"count: {got_state}")
            continue
        what = f"driver killed {kill_after} s into a batch ({killed_rows[q['sink']]} rows before the kill)"
        problems += rows_problems(q, result, rate * seconds, what)
    assert not problems, problems


def test_real_time_loses_nothing_when_an_executor_dies_inside_a_batch(broker: Broker, fresh_name: Any, tmp_path: Path) -> None:
    """local-cluster, two executor JVMs of two cores: a real-time query of `idempotent` and one of
    `checkpoint-dedup` side by side, records produced while they run; one executor SIGKILLed at a seeded
    moment inside a batch. Its tasks run again once a slot is free (the batch's other tasks hold theirs until
    the batch ends), those that start after Spark's end of the batch leave what their lost attempt pinned to
    the next batch; the application goes on: every record lands, with checkpoint-dedup none in two batches."""
    topic = fresh_name("rt-executor")
    broker.create_topic(topic, partitions=2)
    queries = [query_of(broker, fresh_name, tmp_path / s, s, "rows", topic) for s in ("idempotent", "checkpoint-dedup")]
    rate, seconds = 100, 30
    killed_file = tmp_path / "killed.json"
    config = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "queries": queries,
        "master": "local-cluster[2,2,1024]",
        "parallelism": 2,
        "expected": rate * seconds,
        "timeout_s": 180,
        "settle_s": 6,
        # The next batch's tasks start a second or two after the commit in local-cluster mode; the kill comes
        # once they all run, after they pinned and ACCEPTed some records (which only the source can bring back).
        "kill_after_commit_s": 0,
        "kill_after_busy_s": round(random.Random(20261129).uniform(1.0, 2.5), 2),
        "kill": "executor",
        "killed_file": str(killed_file),
    }
    upstream = threading.Thread(
        target=harness, args=("produce-rate", broker.bootstrap, topic, str(rate), str(seconds)), kwargs={"timeout": 300}
    )
    upstream.start()
    try:
        result = run_spark("real_time_stream.py", json.dumps(config), timeout=300)
    finally:
        upstream.join()
    assert killed_file.exists(), "no executor was killed: the queries did not commit two batches"
    killed = json.loads(killed_file.read_text())
    assert killed["running_tasks"] == 4, f"the executor was killed between batches, not inside one: {killed}"
    what = f"an executor killed {config['kill_after_busy_s']} s into its tasks (local-cluster)"
    problems = [p for q in queries for p in rows_problems(q, result, rate * seconds, what)]
    assert not problems, problems
