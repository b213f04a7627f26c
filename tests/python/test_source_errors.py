"""Bad input and bad clusters give a clear error that names the option or setting and the fix."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, Callable

import pytest

from harness import Broker, broker_versions
from spark_runs import run_spark
from streams import NEWEST

OLDEST = broker_versions()[0]


def failures(cases: dict[str, dict[str, str]], speculation: bool = False) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = run_spark(
        "source_errors.py", json.dumps({"cases": cases, "speculation": speculation}), timeout=600
    )
    return result


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("broker", [NEWEST], indirect=True, ids=[f"kafka-{NEWEST}"])
def test_query_start_errors(broker: Broker, fresh_name: Callable[[str], str]) -> None:
    topic = fresh_name("errors")
    broker.create_topic(topic, 1)
    good = {"kafka.bootstrap.servers": broker.bootstrap, "kafka.share.group.id": fresh_name("g"), "subscribe": topic}
    seen = failures(
        {
            "missing topic": {**good, "subscribe": f"{topic},no-such-topic"},
            "unreachable broker": {**good, "kafka.bootstrap.servers": f"127.0.0.1:{closed_port()}"},
            "bad option": {**good, "kafka.share.exactly.once.strategy": "exactly-once"},
            "refused client setting": {**good, "kafka.auto.offset.reset": "earliest"},
            "explicit without foreachBatch": {**good, "kafka.share.acknowledgment.mode": "explicit"},
            "parallelism above the group's size": {**good, "kafka.share.parallelism": "500"},
        }
    )
    assert "topic(s) no-such-topic do not exist" in str(seen["missing topic"]["message"])
    unreachable = seen["unreachable broker"]
    assert "no Kafka broker answered at '127.0.0.1:" in str(unreachable["message"])
    assert "option 'kafka.bootstrap.servers'" in str(unreachable["message"])
    assert float(unreachable["seconds"]) < 60
    assert "option 'kafka.share.exactly.once.strategy' has the invalid value 'exactly-once'" in str(seen["bad option"]["message"])
    assert "use option 'startingOffsets'" in str(seen["refused client setting"]["message"])
    explicit = str(seen["explicit without foreachBatch"]["message"])
    assert "'explicit' needs a query whose foreachBatch gives the decisions" in explicit and "NoopTable" in explicit
    # The broker's default group.share.max.size is 200: 500 consumers could never all join the group.
    too_many = str(seen["parallelism above the group's size"]["message"])
    assert "'kafka.share.parallelism' = 500" in too_many and "group.share.max.size (200)" in too_many, too_many


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


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
def test_a_broker_without_share_groups_says_how_to_enable_them(version: str, tmp_path: Path) -> None:
    broker = Broker(version, tmp_path / "broker").start(share_groups=False)
    try:
        seen = failures(
            {"no share groups": {"kafka.bootstrap.servers": broker.bootstrap, "kafka.share.group.id": "g", "subscribe": "t"}}
        )
    finally:
        broker.stop()
    message = str(seen["no share groups"]["message"])
    assert "does not serve share groups" in message and "share.version=1" in message
