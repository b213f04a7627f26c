"""Speculation is refused with the setting to change. It is set when a Spark session starts, so it needs a
Spark application of its own; the other start errors (bad options, missing topics, unreachable brokers,
brokers without share groups) are tests/integration's StartErrorsSuite, in the test JVM's session."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from harness import Broker
from spark_runs import run_spark
from streams import NEWEST


def failures(cases: dict[str, dict[str, str]], speculation: bool = False) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = run_spark(
        "source_errors.py", json.dumps({"cases": cases, "speculation": speculation}), timeout=600
    )
    return result


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
def test_speculation_is_refused(broker: Broker, fresh_name: Callable[[str], str]) -> None:
    topic = fresh_name("spec")
    broker.create_topic(topic, 1)
    seen = failures(
        {
            "speculation": {
                "kafka.bootstrap.servers": broker.bootstrap,
                "kafka.share.group.id": fresh_name("g"),
                "subscribe": topic,
            }
        },
        speculation=True,
    )
    assert "set spark.speculation=false" in str(seen["speculation"]["message"])
    assert "[KAFKA_SHARE_UNSUPPORTED_USE.SPECULATION]" in str(seen["speculation"]["message"])
