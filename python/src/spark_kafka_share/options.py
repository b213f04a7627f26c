"""Typed options for ``spark.readStream.format("kafka-share")``, in plain Python.

No py4j and no JVM: the result is a dict of strings, so it works the same under classic Spark and
Spark Connect::

    opts = KafkaShareOptions(bootstrap_servers="broker:9092", group_id="orders",
                             subscribe=["orders"], strategy="checkpoint-dedup")
    df = spark.readStream.format("kafka-share").options(**opts.to_dict()).load()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Optional

Strategy = Literal["none", "idempotent", "checkpoint-dedup", "two-phase-commit"]
StartingOffsets = Literal["earliest", "latest"]
AcknowledgmentMode = Literal["implicit", "explicit"]
DefaultDecision = Literal["accept", "release"]

STRATEGIES: tuple[Strategy, ...] = ("none", "idempotent", "checkpoint-dedup", "two-phase-commit")


@dataclass(frozen=True)
class KafkaShareOptions:
    """The kafka-share source's options; docs/options.md explains each one."""

    bootstrap_servers: str
    group_id: str
    subscribe: Optional[Sequence[str]] = None
    subscribe_pattern: Optional[str] = None
    strategy: Strategy = "none"
    acknowledgment_mode: AcknowledgmentMode = "implicit"
    acknowledgment_default: Optional[DefaultDecision] = None
    """Explicit mode: the decision for records foreachBatch did not decide on (the source's default: accept)."""
    max_deliveries: Optional[int] = None
    """Poison records: the highest delivery count emitted; records delivered more often are rejected."""
    dead_letter_topic: Optional[str] = None
    """With max_deliveries: poison records go to this topic before they are rejected."""
    parallelism: Optional[int] = None
    lock_timeout_ms: Optional[int] = None
    include_headers: bool = False
    max_records_per_trigger: Optional[int] = None
    starting_offsets: StartingOffsets = "latest"
    poll_timeout_ms: Optional[int] = None
    read_duration_ms: Optional[int] = None
    """How long a read task keeps polling while there is a backlog (0: one poll per task)."""
    fail_on_data_loss: bool = True
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
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}; got {self.strategy!r}")
        if self.starting_offsets not in ("earliest", "latest"):
            raise ValueError(f"starting_offsets must be 'earliest' or 'latest'; got {self.starting_offsets!r}")
        if self.acknowledgment_mode not in ("implicit", "explicit"):
            raise ValueError(f"acknowledgment_mode must be 'implicit' or 'explicit'; got {self.acknowledgment_mode!r}")
        if self.acknowledgment_default is not None:
            if self.acknowledgment_mode != "explicit":
                raise ValueError("acknowledgment_default applies only with acknowledgment_mode='explicit'")
            if self.acknowledgment_default not in ("accept", "release"):
                raise ValueError(f"acknowledgment_default must be 'accept' or 'release'; got {self.acknowledgment_default!r}")
        if self.dead_letter_topic is not None and self.max_deliveries is None:
            raise ValueError("dead_letter_topic applies only with max_deliveries; set both")
        for name in ("parallelism", "lock_timeout_ms", "max_records_per_trigger", "poll_timeout_ms", "max_deliveries"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a whole number of at least 1; got {value!r}")
        value = self.read_duration_ms
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"read_duration_ms must be a whole number of at least 0; got {value!r}")

    def to_dict(self) -> dict[str, str]:
        """The options as Spark takes them: ``.options(**opts.to_dict())``."""
        result = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "kafka.share.group.id": self.group_id,
            "kafka.share.exactly.once.strategy": self.strategy,
            "kafka.share.acknowledgment.mode": self.acknowledgment_mode,
            "includeHeaders": str(self.include_headers).lower(),
            "startingOffsets": self.starting_offsets,
            "failOnDataLoss": str(self.fail_on_data_loss).lower(),
        }
        if self.subscribe is not None:
            result["subscribe"] = ",".join(self.subscribe)
        if self.subscribe_pattern is not None:
            result["subscribePattern"] = self.subscribe_pattern
        optional = {
            "kafka.share.parallelism": self.parallelism,
            "kafka.share.lock.timeout.ms": self.lock_timeout_ms,
            "maxRecordsPerTrigger": self.max_records_per_trigger,
            "kafka.share.poll.timeout.ms": self.poll_timeout_ms,
            "kafka.share.read.duration.ms": self.read_duration_ms,
            "kafka.share.acknowledgment.default": self.acknowledgment_default,
            "kafka.share.maxDeliveries": self.max_deliveries,
            "kafka.share.deadLetterTopic": self.dead_letter_topic,
        }
        result.update({k: str(v) for k, v in optional.items() if v is not None})
        result.update({f"kafka.{k}": str(v) for k, v in self.kafka.items()})
        return result
