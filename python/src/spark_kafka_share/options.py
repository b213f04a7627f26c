"""Typed options for ``spark.readStream.format("kafka-share")``, in plain Python.

No py4j and no JVM: the result is a dict of strings, so it works the same under classic Spark and
Spark Connect::

    opts = KafkaShareOptions(bootstrap_servers="broker:9092", group_id="orders",
                             subscribe=["orders"], strategy="checkpoint-dedup")
    df = spark.readStream.format("kafka-share").options(**opts.to_dict()).load()
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal, Optional

# The options are declared once, in the connector's OptionDeclarations.scala: options_spec.json is generated
# from there (key, field, allowed values, bounds), and a test fails if the fields below drift from it. The
# Literal types repeat the choices for type checkers; a test checks those too.
SPEC: list[dict[str, Any]] = json.loads(resources.files(__package__).joinpath("options_spec.json").read_text("utf-8"))["options"]
_BY_FIELD: dict[str, dict[str, Any]] = {o["python"]: o for o in SPEC}

Strategy = Literal["none", "idempotent", "checkpoint-dedup", "two-phase-commit"]
StartingOffsets = Literal["earliest", "latest"]
AcknowledgmentMode = Literal["implicit", "explicit"]
DefaultDecision = Literal["accept", "release"]

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _check(name: str, value: object) -> None:
    """Checks one field's value against its declaration (kind, choices, bounds)."""
    spec = _BY_FIELD[name]
    kind = spec["kind"]
    if kind == "whole":
        low, high = spec["min"], spec["max"]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            span = f"of at least {low}" if high >= 2**63 - 1 else f"from {low} to {high}"
            raise ValueError(f"{name} must be a whole number {span}; got {value!r}")
    elif kind == "choice":
        if value not in spec["values"]:
            raise ValueError(f"{name} must be one of {', '.join(repr(v) for v in spec['values'])}; got {value!r}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise TypeError(f"{name} takes True or False; got {value!r}")
    elif kind in ("topic", "topics"):
        for topic in [value] if kind == "topic" else list(value):  # type: ignore[call-overload]
            # Spaces around a name are trimmed by the source (as in a comma-separated list).
            if not isinstance(topic, str) or not _TOPIC_NAME.fullmatch(topic.strip()) or topic.strip() in (".", ".."):
                raise ValueError(f"{name}: {topic!r} is not a Kafka topic name (letters, digits, '.', '_' and '-', at most 249)")


@dataclass(frozen=True)
class KafkaShareOptions:
    """The kafka-share source's options; docs/reference/options.md explains each one.

    A field left at None is not sent: the source applies its own default (docs/reference/options.md), so a default
    changed in the connector reaches Python users too. ``to_dict`` holds only what was set here."""

    bootstrap_servers: str
    group_id: str
    subscribe: Optional[Sequence[str]] = None
    subscribe_pattern: Optional[str] = None
    strategy: Optional[Strategy] = None
    """None: the source's default, 'none' (at least once)."""
    acknowledgment_mode: Optional[AcknowledgmentMode] = None
    """None: the source's default, 'implicit'."""
    acknowledgment_default: Optional[DefaultDecision] = None
    """Explicit mode: the decision for records foreachBatch did not decide on (the source's default: accept)."""
    max_deliveries: Optional[int] = None
    """Poison records: the highest delivery count emitted; records delivered more often are rejected."""
    dead_letter_topic: Optional[str] = None
    """With max_deliveries: poison records go to this topic before they are rejected."""
    broker_dead_letter_topic: Optional[str] = None
    """Kafka 4.4+ (share.version=2): the broker's dead-letter queue of the group gets rejected and exhausted records."""
    parallelism: Optional[int] = None
    lock_timeout_ms: Optional[int] = None
    include_headers: Optional[bool] = None
    max_records_per_trigger: Optional[int] = None
    starting_offsets: Optional[StartingOffsets] = None
    """Where a group with no state starts; None leaves the group's share.auto.offset.reset (broker default: latest)."""
    poll_timeout_ms: Optional[int] = None
    read_duration_ms: Optional[int] = None
    """How long a read task keeps polling while there is a backlog (0: one poll per task)."""
    fail_on_data_loss: Optional[bool] = None
    kafka: Mapping[str, str] = field(default_factory=dict)
    """Other Kafka client settings (security, fetch sizes), without the ``kafka.`` prefix."""

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ValueError("bootstrap_servers is required, for example 'broker1:9092,broker2:9092'")
        if not self.group_id:
            raise ValueError("group_id (the share group) is required")
        if (self.subscribe is None) == (self.subscribe_pattern is None):
            raise ValueError("set exactly one of subscribe (a list of topics) and subscribe_pattern (a Java regex)")
        if isinstance(self.subscribe, str):
            raise TypeError("subscribe takes a list of topic names, for example ['orders'], not a string")
        if self.subscribe is not None and not self.subscribe:
            raise ValueError("subscribe needs at least one topic")
        if self.acknowledgment_default is not None and self.acknowledgment_mode != "explicit":
            raise ValueError("acknowledgment_default applies only with acknowledgment_mode='explicit'")
        if self.dead_letter_topic is not None and self.max_deliveries is None:
            raise ValueError("dead_letter_topic applies only with max_deliveries; set both")
        if self.broker_dead_letter_topic is not None and self.dead_letter_topic is not None:
            raise ValueError("broker_dead_letter_topic and dead_letter_topic cannot be used together; keep one of them")
        for name in _BY_FIELD:
            value = getattr(self, name)
            if value is not None and name != "kafka":
                _check(name, value)

    def to_dict(self) -> dict[str, str]:
        """The options as Spark takes them: ``.options(**opts.to_dict())``, under their declared keys."""
        result: dict[str, str] = {}
        for name, spec in _BY_FIELD.items():
            value = getattr(self, name)
            if value is None or name == "kafka":
                continue
            if isinstance(value, bool):
                result[spec["key"]] = str(value).lower()
            elif spec["kind"] == "topics":
                result[spec["key"]] = ",".join(value)
            else:
                result[spec["key"]] = str(value)
        result.update({f"kafka.{k}": str(v) for k, v in self.kafka.items()})
        return result
