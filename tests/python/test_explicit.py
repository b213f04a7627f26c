"""Explicit acknowledgement and poison records, against a real broker and real Spark.

Each test runs spark_apps/explicit_stream.py, whose foreachBatch decides per record with
spark_kafka_share.acknowledge, then checks what the broker did with the decisions.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from harness import TEST_GROUP_TIMING, Broker
from spark_runs import finish, record_delivery_counts, run_spark, start_spark
from streams import NEWEST

pytestmark = pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])


def run(
    broker: Broker,
    fresh_name: Callable[[str], str],
    tmp: Path,
    scenario: str,
    records: int,
    lock_ms: int = 15000,
    **config: object,
) -> tuple[str, str, dict[str, Any]]:
    topic, group = fresh_name("explicit"), fresh_name("explicit-group")
    broker.create_topic(topic, 2)
    broker.group_config(group, {"share.record.lock.duration.ms": str(lock_ms), **TEST_GROUP_TIMING})
    broker.produce(topic, records)
    result = run_spark(
        "explicit_stream.py",
        json.dumps(
            {
                "bootstrap": broker.bootstrap,
                "topic": topic,
                "group": group,
                "scenario": scenario,
                "records": records,
                "checkpoint": str(tmp / "checkpoint"),
                "sink": str(tmp / "sink"),
                "marker": str(tmp / "failed-once"),
                **config,
            }
        ),
        timeout=400,
    )
    return topic, group, result


def nothing_left(broker: Broker, group: str, topic: str) -> int:
    """How many records a plain share consumer of the group still gets (waits 8 s for any)."""
    return broker.share_consume(group, topic, expected=1, timeout_ms=8000)


def test_each_decision_is_carried_out_by_the_broker(broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path) -> None:
    records = 60
    topic, group, result = run(broker, fresh_name, tmp_path, "decisions", records)
    seen = Counter((k, dc) for k, dc, _ in result["seen"])
    rejected = [str(k) for k in range(records) if k % 3 == 0]
    released = [str(k) for k in range(records) if k % 3 == 1]
    defaulted = [str(k) for k in range(records) if k % 3 == 2]
    # REJECT: delivered once, never again.
    assert all(seen[(k, 1)] == 1 and seen[(k, 2)] == 0 for k in rejected), seen
    # RELEASE: delivered again, with delivery count 2, and accepted then.
    assert all(seen[(k, 1)] == 1 and seen[(k, 2)] == 1 for k in released), seen
    # No decision: the default (accept), delivered once.
    assert all(seen[(k, 1)] == 1 and seen[(k, 2)] == 0 for k in defaulted), seen
    landed = Counter(result["landed"])
    assert sorted(landed) == sorted(released + defaulted) and set(landed.values()) == {1}, landed
    metrics = result["metrics"]
    assert isinstance(metrics, dict) and int(metrics["recordsRejectedTotal"]) == len(rejected), metrics
    # The broker holds nothing more for the group: everything was accepted or rejected.
    assert nothing_left(broker, group, topic) == 0


def test_a_poison_record_goes_to_the_dead_letter_topic_and_the_stream_goes_on(
    broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    """F10: a record whose processing fails every time."""
    records = 100
    dead_letters = fresh_name("dlt")
    broker.create_topic(dead_letters, 1)
    topic, group, result = run(
        broker,
        fresh_name,
        tmp_path,
        "poison",
        records,
        options={"kafka.share.maxDeliveries": 3, "kafka.share.deadLetterTopic": dead_letters},
    )
    poison_deliveries = sorted(dc for k, dc, _ in result["seen"] if k == "7")
    assert poison_deliveries == [1, 2, 3], poison_deliveries  # emitted up to maxDeliveries, not after
    dlt = broker.read_topic(dead_letters)
    assert len(dlt) == 1 and dlt[0]["key"] == "7", dlt
    headers = dlt[0]["headers"]
    assert isinstance(headers, dict)
    assert headers["kafka-share.origin.topic"] == topic and headers["kafka-share.origin.group"] == group
    assert headers["kafka-share.origin.deliveryCount"] == "4" and "kafka-share.origin.offset" in headers
    landed = Counter(result["landed"])
    others = {str(k) for k in range(records)} - {"7"}
    lost, doubled = len(others - set(landed)), sum(n - 1 for n in landed.values())
    record_delivery_counts(
        f"F10 explicit+two-phase-commit  produced {records:6d} landed {len(landed):6d} "
        f"lost {lost:4d} doubled {doubled:4d} (1 poison record dead-lettered)"
    )
    assert set(landed) == others and doubled == 0, landed
    assert nothing_left(broker, group, topic) == 0


def test_a_failed_batch_in_explicit_mode_loses_nothing(broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path) -> None:
    records = 500
    # The failure stops the query, and the commit watcher RELEASEs the failed batch's held records
    # (docs/explicit-mode.md); the restart runs the batch again from its pins, and the released records
    # come back to a later batch, which drops them as redeliveries with the re-run's decisions. The app
    # waits for that drop (a CI run once ended before the second task's records came back, and a plain
    # consumer then found them in the group). Without renewal (4.1) the hold ends at 80% of the lock.
    renews = tuple(int(n) for n in broker.version.split(".")[:2]) >= (4, 2)  # else the hold ends at the re-run's commit
    topic, group, result = run(broker, fresh_name, tmp_path, "fail-once", records, lock_ms=60000, released_at_stop=renews)
    assert result["restarts"] == 1
    landed = Counter(result["landed"])
    lost, doubled = records - len(landed), sum(n - 1 for n in landed.values())
    record_delivery_counts(
        f"F2 explicit+two-phase-commit   produced {records:6d} landed {len(landed):6d} lost {lost:4d} doubled {doubled:4d}"
    )
    assert lost == 0 and doubled == 0
    assert nothing_left(broker, group, topic) == 0


def test_decisions_that_cannot_apply_are_refused(broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path) -> None:
    records = 50
    topic, group, result = run(broker, fresh_name, tmp_path, "bad-decisions", records)
    errors = result["errors"]
    assert isinstance(errors, dict)
    assert "unknown decision 'maybe'" in errors["unknown"] and "use accept, release or reject" in errors["unknown"]
    assert "which is not a record of batch" in errors["not in batch"]
    # The good decisions that followed were applied: everything landed once, nothing left.
    assert Counter(result["landed"]) == Counter(str(k) for k in range(records))
    assert nothing_left(broker, group, topic) == 0


def test_decisions_in_a_union_name_sparks_batch_id(broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path) -> None:
    """The kafka-share stream is unioned with a rate stream, and its records are produced once the
    query has run batches of the rate stream alone: foreachBatch's batch id is then far ahead of the
    batches this source took part in, and the decisions name Spark's id."""
    records = 60
    topic, group = fresh_name("explicit"), fresh_name("explicit-group")
    broker.create_topic(topic, 2)
    # A lock long enough for a first batch that waits for its consumers to join on a loaded machine.
    broker.group_config(group, {"share.record.lock.duration.ms": "30000", **TEST_GROUP_TIMING})
    query = start_spark(
        "explicit_stream.py",
        json.dumps(
            {
                "bootstrap": broker.bootstrap,
                "topic": topic,
                "group": group,
                "scenario": "decisions",
                "records": records,
                "checkpoint": str(tmp_path / "checkpoint"),
                "sink": str(tmp_path / "sink"),
                "union_rate": True,
            }
        ),
    )
    commits = tmp_path / "checkpoint" / "commits"
    deadline = time.time() + 120
    # Batches of the rate stream alone (the kafka-share source has nothing) before any record exists.
    while time.time() < deadline and len([f for f in commits.glob("*") if f.name.isdigit()]) < 5:
        time.sleep(0.5)
    # The first batch's consumers wait in the pool with a fetch outstanding: records that arrived now
    # would be acquired by them, and given back when the pool closes them (after half a lock), with a
    # delivery spent. The decisions here go by delivery count, so produce once they are closed.
    time.sleep(18)
    broker.produce(topic, records)
    result = finish(query, timeout=400)
    assert result["restarts"] == 0, result
    seen = Counter((k, dc) for k, dc, _ in result["seen"])
    released = [str(k) for k in range(records) if k % 3 == 1]
    # RELEASE applied after the batch committed (not before: the commit watcher waits for Spark's
    # commit of this very batch): each released record came back once, with delivery count 2.
    assert all(seen[(k, 1)] == 1 and seen[(k, 2)] == 1 for k in released), seen
    assert all(seen[(str(k), 2)] == 0 for k in range(records) if k % 3 != 1), seen
    landed = Counter(result["landed"])
    assert sorted(landed) == sorted(str(k) for k in range(records) if k % 3 != 0), landed
    assert nothing_left(broker, group, topic) == 0


@pytest.mark.parametrize("strategy", ["two-phase-commit", "checkpoint-dedup"])
def test_records_released_by_the_default_decision_come_back(
    broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path, strategy: str
) -> None:
    records = 100
    topic, group, result = run(
        broker,
        fresh_name,
        tmp_path,
        "release-by-default",
        records,
        strategy=strategy,
        options={"kafka.share.acknowledgment.default": "release"},
    )
    seen = Counter((k, dc) for k, dc, _ in result["seen"])
    keys = [str(k) for k in range(records)]
    assert all(seen[(k, 1)] == 1 and seen[(k, 2)] == 1 for k in keys), seen
    landed = Counter(result["landed"])
    lost, doubled = records - len(landed), sum(n - 1 for n in landed.values())
    record_delivery_counts(
        f"dflt explicit+{strategy:17} produced {records:6d} landed {len(landed):6d} "
        f"lost {lost:4d} doubled {doubled:4d} (released by default, then accepted)"
    )
    assert lost == 0 and doubled == 0, landed
    assert nothing_left(broker, group, topic) == 0


def test_acknowledge_may_be_the_first_action_on_the_batch(
    broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    records = 200
    topic, group, result = run(broker, fresh_name, tmp_path, "ack-first", records)
    assert result["restarts"] == 0, result
    assert Counter(result["landed"]) == Counter(str(k) for k in range(records))
    assert nothing_left(broker, group, topic) == 0
