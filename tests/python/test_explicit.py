"""Explicit acknowledgement and poison records, against a real broker and real Spark.

Each test runs spark_apps/explicit_stream.py, whose foreachBatch decides per record with
spark_kafka_share.acknowledge, then checks what the broker did with the decisions.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeAlias

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


# Scenarios that run to their end without a failure, a query each in one application: one Spark start for
# all of them (explicit_stream.py's queries). test_scenarios_side_by_side runs them and applies each
# scenario's check (check_* below) to its own query's result.
TOGETHER: dict[str, dict[str, Any]] = {
    "decisions": {"scenario": "decisions", "records": 60},
    "poison": {"scenario": "poison", "records": 100, "dead_letters": True},
    "bad-decisions": {"scenario": "bad-decisions", "records": 50},
    **{
        f"release-by-default/{strategy}": {
            "scenario": "release-by-default",
            "records": 100,
            "strategy": strategy,
            "options": {"kafka.share.acknowledgment.default": "release"},
        }
        for strategy in ("two-phase-commit", "checkpoint-dedup")
    },
    "ack-first": {"scenario": "ack-first", "records": 200},
}
Ran: TypeAlias = dict[str, tuple[str, str, dict[str, Any]]]  # each scenario's topic, group and result


def run_together(broker: Broker, tmp: Path) -> Ran:
    """Runs every scenario of TOGETHER in one application."""
    queries, run = [], uuid.uuid4().hex[:8]
    for i, scenario in enumerate(TOGETHER.values()):
        topic, group = f"explicit-together-{run}-{i}", f"explicit-together-group-{run}-{i}"
        broker.create_topic(topic, 2)
        broker.group_config(group, {"share.record.lock.duration.ms": "15000", **TEST_GROUP_TIMING})
        broker.produce(topic, int(scenario["records"]))
        query = {k: v for k, v in scenario.items() if k != "dead_letters"}
        if scenario.get("dead_letters"):
            broker.create_topic(f"{topic}-dlt", 1)
            query["options"] = {"kafka.share.maxDeliveries": 3, "kafka.share.deadLetterTopic": f"{topic}-dlt"}
        own = tmp / str(i)
        query.update({"topic": topic, "group": group, "checkpoint": str(own / "checkpoint"), "sink": str(own / "sink")})
        queries.append(query)
    config = {"bootstrap": broker.bootstrap, "queries": queries, "timeout_s": 240}
    results = run_spark("explicit_stream.py", json.dumps(config), timeout=600)["queries"]
    return {name: (str(q["topic"]), str(q["group"]), r) for name, q, r in zip(TOGETHER, queries, results)}


def nothing_left(broker: Broker, group: str, topic: str) -> int:
    """How many records a plain share consumer of the group still gets (waits 8 s for any)."""
    return broker.share_consume(group, topic, expected=1, timeout_ms=8000)


def check_each_decision_is_carried_out_by_the_broker(broker: Broker, ran: Ran) -> None:
    records = 60
    topic, group, result = ran["decisions"]
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
    landed: Counter[str] = Counter(result["landed"])
    assert sorted(landed) == sorted(released + defaulted) and set(landed.values()) == {1}, landed
    metrics = result["metrics"]
    assert isinstance(metrics, dict) and int(metrics["recordsRejectedTotal"]) == len(rejected), metrics
    # The broker holds nothing more for the group: everything was accepted or rejected.
    assert nothing_left(broker, group, topic) == 0


def check_a_poison_record_goes_to_the_dead_letter_topic_and_the_stream_goes_on(broker: Broker, ran: Ran) -> None:
    """F10: a record whose processing fails every time."""
    records = 100
    topic, group, result = ran["poison"]
    dead_letters = f"{topic}-dlt"
    poison_deliveries = sorted(dc for k, dc, _ in result["seen"] if k == "7")
    assert poison_deliveries == [1, 2, 3], poison_deliveries  # emitted up to maxDeliveries, not after
    dlt = broker.read_topic(dead_letters)
    assert len(dlt) == 1 and dlt[0]["key"] == "7", dlt
    headers = dlt[0]["headers"]
    assert isinstance(headers, dict)
    assert headers["kafka-share.origin.topic"] == topic and headers["kafka-share.origin.group"] == group
    assert headers["kafka-share.origin.deliveryCount"] == "4" and "kafka-share.origin.offset" in headers
    landed: Counter[str] = Counter(result["landed"])
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
    # (docs/guide/explicit-mode.md); the restart runs the batch again from its pins, and the released records
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


def check_decisions_that_cannot_apply_are_refused(broker: Broker, ran: Ran) -> None:
    records = 50
    topic, group, result = ran["bad-decisions"]
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


def check_records_released_by_the_default_decision_come_back(broker: Broker, ran: Ran, strategy: str) -> None:
    records = 100
    topic, group, result = ran[f"release-by-default/{strategy}"]
    seen = Counter((k, dc) for k, dc, _ in result["seen"])
    keys = [str(k) for k in range(records)]
    assert all(seen[(k, 1)] == 1 and seen[(k, 2)] == 1 for k in keys), seen
    landed: Counter[str] = Counter(result["landed"])
    lost, doubled = records - len(landed), sum(n - 1 for n in landed.values())
    record_delivery_counts(
        f"dflt explicit+{strategy:17} produced {records:6d} landed {len(landed):6d} "
        f"lost {lost:4d} doubled {doubled:4d} (released by default, then accepted)"
    )
    assert lost == 0 and doubled == 0, landed
    assert nothing_left(broker, group, topic) == 0


def check_acknowledge_may_be_the_first_action_on_the_batch(broker: Broker, ran: Ran) -> None:
    records = 200
    topic, group, result = ran["ack-first"]
    assert result["restarts"] == 0, result
    assert Counter(result["landed"]) == Counter(str(k) for k in range(records))
    assert nothing_left(broker, group, topic) == 0


CHECKS: dict[str, Callable[[Broker, Ran], None]] = {
    "decisions": check_each_decision_is_carried_out_by_the_broker,
    "poison": check_a_poison_record_goes_to_the_dead_letter_topic_and_the_stream_goes_on,
    "bad-decisions": check_decisions_that_cannot_apply_are_refused,
    "release-by-default/two-phase-commit": lambda b, r: check_records_released_by_the_default_decision_come_back(
        b, r, "two-phase-commit"
    ),
    "release-by-default/checkpoint-dedup": lambda b, r: check_records_released_by_the_default_decision_come_back(
        b, r, "checkpoint-dedup"
    ),
    "ack-first": check_acknowledge_may_be_the_first_action_on_the_batch,
}


def test_scenarios_side_by_side(broker: Broker, tmp_path: Path) -> None:
    """The scenarios of TOGETHER in one application; every scenario's check runs, and each failing one is named."""
    assert set(CHECKS) == set(TOGETHER)
    ran = run_together(broker, tmp_path)

    def failure_of(check: Callable[[Broker, Ran], None]) -> str | None:
        try:
            check(broker, ran)
            return None
        except Exception as e:  # a harness error too: the other checks still report
            return f"{type(e).__name__}: {str(e)[:1500]}"

    # Three at a time: each check ends by waiting 8 s for a record still with its group.
    with ThreadPoolExecutor(3) as pool:
        outcomes = dict(zip(CHECKS, pool.map(failure_of, CHECKS.values())))
    failed = [f"{name}: {why}" for name, why in outcomes.items() if why is not None]
    assert not failed, "\n".join(failed)
