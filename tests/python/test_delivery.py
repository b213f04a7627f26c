"""The delivery contract in CI: a subset of the chaos suite's cells (chaos.py), against real Spark and a real broker.

Every cell injects one failure of the delivery contract (docs/internals/delivery-semantics.md) for real, reads the sink back and
counts. Lost must be 0 everywhere; doubled must be 0 for the exactly-once strategies. `make chaos`
runs every cell (all failures x all strategies, plus a 3-node cluster) and prints the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos import STRATEGIES, Cell, run_cell, run_cells
from harness import TEST_GROUP_TIMING, Broker, broker_versions
from spark_runs import record_delivery_counts, spark_log

OLDEST, NEWEST = broker_versions()[0], broker_versions()[-1]
SEED = 20261122  # CI strikes the same points every run; `make chaos` draws new ones
# The cells that kill or pause a process: F4 and F5 for every strategy but idempotent, whose mechanics
# are none's (it differs only in what it asks of the sink); the slower F3, F6, F7 and F9 for the
# exactly-once ones. The strategies of a failure run side by side, a query each in one Spark application
# (chaos.run_cells): one Spark start, one crash and one restart for all of them. F1, F2, F8, F10 and F11
# need no process to die: they run in the test JVM, in tests/integration/.../stream/FailureCellsSuite.scala
# (and all cells, idempotent's too, in `make chaos`).
# `make test` keeps one cell per kind of process that dies: the driver (F5, here; F4 with the checkpoint on S3,
# test_object_store.py) and an executor (F3). F4 here, the broker's death (F6) and a pause (F7) are `make chaos`'s
# (long); the broker killed inside a real-time batch is in the real-time suite (tests/realtime-integration).
EXACTLY_ONCE_STRATEGIES = ["checkpoint-dedup", "two-phase-commit"]
FAILURES = [
    pytest.param(f, strategies, id=f, marks=[pytest.mark.long] if f in ("F4", "F6", "F7") else [])
    for f, strategies in [
        ("F4", [s for s in STRATEGIES if s != "idempotent"]),
        ("F5", [s for s in STRATEGIES if s != "idempotent"]),
    ]
    + [(f, EXACTLY_ONCE_STRATEGIES) for f in ("F3", "F6", "F7")]
]


def record(cell: Cell) -> None:
    record_delivery_counts(
        f"{cell.failure:4} {cell.strategy:17} produced {cell.produced:6} landed {cell.landed:6} "
        f"lost {cell.lost:4} doubled {cell.doubled:4} recover {cell.recover_s} s ({cell.detail})"
    )


def lock_given_up() -> list[str]:
    """The lines of this test's Spark logs that say a held batch's locks were given up before its commit."""
    log = spark_log().read_text() if spark_log().exists() else ""
    signs = ("did not come within the lock duration", "could not be renewed")
    return [line for line in log.splitlines() if any(sign in line for sign in signs)][:3]


def check(cell: Cell) -> None:
    record(cell)
    assert not cell.problems(), cell.problems()


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
@pytest.mark.parametrize("failure,strategies", FAILURES)
def test_failure_loses_nothing(broker: Broker, tmp_path: Path, failure: str, strategies: list[str]) -> None:
    """Also, after a driver crash (F4, F5), the restarted query runs the batch the crash interrupted again
    without failing first: Spark hands the source that batch's offsets as read back from the checkpoint
    (SerializedOffset), and the query must take them."""
    cells = run_cells(broker, tmp_path, failure, strategies, SEED, records=4000, group_timing=TEST_GROUP_TIMING)
    assert [c.strategy for c in cells] == strategies
    for cell in cells:
        record(cell)
    problems = [p for cell in cells for p in cell.problems()]
    if failure in ("F4", "F5"):
        problems += [f"{c.strategy}: the restarted query failed {c.restarts} times" for c in cells if c.restarts]
        # A query that reached its point first waits there for the others, holding its batch: the held
        # records' locks must be renewed meanwhile, not given up (Kafka 4.2+).
        problems += lock_given_up()
    assert not problems, problems


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
# checkpoint-dedup's cell is `make chaos`'s: two-phase-commit's holds are the ones the other members wait on.
@pytest.mark.parametrize("strategy", [pytest.param("checkpoint-dedup", marks=pytest.mark.long), "two-phase-commit"])
def test_a_group_shared_with_another_query_and_a_console_consumer_loses_nothing(
    broker: Broker, tmp_path: Path, strategy: str
) -> None:
    """F9: two queries (two Spark applications) and Kafka's console share consumer in one group."""
    check(run_cell(broker, tmp_path, "F9", strategy, SEED, records=4000, group_timing=TEST_GROUP_TIMING))


# `make chaos`: renewal itself is LockRenewalSuite's (tests/integration), in a test JVM, on every line with RENEW.
@pytest.mark.long
@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
def test_a_driver_killed_in_a_batch_longer_than_the_lock_loses_nothing(broker: Broker, tmp_path: Path) -> None:
    """F4, 40 s into a two-phase-commit batch with 15 s locks: the executor renewed the held records' locks
    (RENEW, Kafka 4.2+) until the driver died with it; the restarted query runs the batch again. Without
    renewal the records would have been ACCEPTed at 12 s, before the sink had them (the watcher's warning)."""
    check(
        run_cell(broker, tmp_path, "F4", "two-phase-commit", SEED, records=2000, group_timing=TEST_GROUP_TIMING, slow_batch_s=40)
    )
    early = lock_given_up()
    assert not early, early[:3]


@pytest.mark.parametrize("broker", [OLDEST], indirect=True, ids=[f"kafka-{OLDEST}"])
def test_the_installed_jar_reads_everything_on_the_floor_broker(broker: Broker, tmp_path: Path) -> None:
    """The shaded jar of the wheel on this pyspark, against the oldest broker line (every other test here reads
    the newest with it; the stream suites run every strategy on every broker, from the connector's classes on
    the oldest Spark line; test_prometheus.py drains 200,000 records on both). The group keeps the broker's
    heartbeat interval, as users' groups do."""
    check(run_cell(broker, tmp_path, "-", "two-phase-commit", SEED, records=2000))
