"""The source's behaviour where read tasks run in executor JVMs (local-cluster mode).

Everything else the source does on a real broker runs in the in-JVM stream suites
(tests/integration/.../stream/SourceBehaviourSuite.scala), without a Spark process per test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from harness import Broker
from streams import NEWEST, check, prepare, stream

pytestmark = pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])


# `make chaos` (long), for make test's time: F3 (test_delivery.py) reads exactly once on local-cluster, through an
# executor's death.
@pytest.mark.long
def test_local_cluster_50k_records_into_parquet_exactly_once(
    broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    topic, group = prepare(broker, fresh_name, partitions=4, records=50_000)
    landed = stream(
        broker,
        tmp_path,
        topic,
        group,
        "checkpoint-dedup",
        50_000,
        parallelism=4,
        master="local-cluster[2,1,1024]",
        timeout_s=300,
    )
    check("lc", "checkpoint-dedup", landed, 50_000, tmp_path)


def test_a_stopped_query_on_a_cluster_leaves_the_rest_to_the_group_at_once(
    broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    """Promise 7 where the read tasks run in executor JVMs: what their pooled consumers fetched ahead
    goes back when the query stops, not when the pool would close them (half a lock: 30 s here)."""
    topic, group = prepare(broker, fresh_name, records=5000, lock_ms=60000)
    landed = stream(
        broker,
        tmp_path,
        topic,
        group,
        "checkpoint-dedup",
        5000,
        stop_after_batches=1,
        trigger_interval="60 seconds",
        master="local-cluster[2,1,1024]",
        options={"maxRecordsPerTrigger": 500},
        consume_after_stop_ms=10000,
    )
    assert int(landed["distinct"]) == sum(landed["batch_sizes"]), landed
    assert landed["consumed_after_stop"] == landed["remaining"], landed


def test_available_now_on_a_cluster_acknowledges_its_last_batch_before_it_ends(
    broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    """Two-phase commit acknowledges a batch on the executors after it commits. A job that stops Spark
    as soon as its AvailableNow query ends must leave nothing to come back: records locked by
    executors that are gone would return to the group when those consumers' sessions (10 s in the tests)
    or locks (15 s) expire."""
    topic, group = prepare(broker, fresh_name, records=2000)
    landed = stream(
        broker,
        tmp_path,
        topic,
        group,
        "two-phase-commit",
        2000,
        trigger="available_now",
        master="local-cluster[2,1,1024]",
        stop_spark_when_ended=True,
    )
    assert landed["ended_by_itself"] is True, landed
    check("AN2p", "two-phase-commit", landed, 2000, tmp_path)
    # (The group's start offset is no measure: the broker persists it with the next acknowledgement.)
    assert broker.share_consume(group, topic, 1, timeout_ms=25000) == 0, "records came back after the locks expired"
