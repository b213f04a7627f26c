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
from typing import Any, Literal, Optional, Union

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
    if kind == "whole-or-auto" and isinstance(value, str) and value.lower() == "auto":
        return
    if kind in ("whole", "whole-or-auto"):
        low, high = spec["min"], spec["max"]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            span = f"of at least {low}" if high >= 2**63 - 1 else f"from {low} to {high}"
            either = "'auto' or " if kind == "whole-or-auto" else ""
            raise ValueError(f"{name} must be {either}a whole number {span}; got {value!r}")
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
    """The kafka-share source's options as typed fields, checked here before Spark sees them.

    ``to_dict()`` gives them under the option names Spark takes (in brackets below), for
    ``spark.readStream.format("kafka-share").options(**opts.to_dict())``. A field left at None is not sent: the
    source applies its own default, so a default changed in the connector reaches Python users too. The options
    reference: https://github.com/kafkashare/spark-kafka-share/blob/main/docs/reference/options.md

    Attributes:
        bootstrap_servers: [kafka.bootstrap.servers] The Kafka brokers, host:port, comma-separated. Required.
        group_id: [kafka.share.group.id] The share group the query reads as. Other queries and share consumers in
            the same group share its records. Required.
        subscribe: [subscribe] The topics to read, as a list of names. Exactly one of subscribe and
            subscribe_pattern.
        subscribe_pattern: [subscribePattern] A Java regex matched against the cluster's topics at every trigger,
            so new topics are picked up; while it matches none, the query runs no batch. A new topic is read from
            where the group's share.auto.offset.reset puts it (the broker's default: latest).
        strategy: [kafka.share.exactly.once.strategy] What a failure may cost. 'none' (the default) and
            'idempotent': at least once (after a failure a record may come again; with 'idempotent' always with
            the same topic, partition and offset, for upserting sinks). 'checkpoint-dedup' and 'two-phase-commit':
            exactly once into a sink that is idempotent per batch id (Delta, files, a foreachBatch that
            overwrites per batch id); 'two-phase-commit' also keeps records with the group until the sink has
            them, at a lower throughput, its batches bounded by the broker's lock limits. Which to choose:
            https://github.com/kafkashare/spark-kafka-share/blob/main/docs/guide/strategies.md
        acknowledgment_mode: [kafka.share.acknowledgment.mode] 'implicit' (the default): the source acknowledges
            as its strategy says. 'explicit': foreachBatch decides per record (accept, release, reject) with
            spark_kafka_share.acknowledge(), applied after the batch commits:
            https://github.com/kafkashare/spark-kafka-share/blob/main/docs/guide/explicit-mode.md
        acknowledgment_default: [kafka.share.acknowledgment.default] Explicit mode only: the decision for the
            records of a committed batch that got none, 'accept' (the default) or 'release'.
        max_deliveries: [kafka.share.maxDeliveries] Poison records, 1 to 1000: the highest delivery count the
            source emits; a record delivered more often is rejected (after going to dead_letter_topic, if set).
            Keep it below the group's share.delivery.count.limit (5 by default), where the broker drops records
            by itself. Default: no bound of the source's own.
        dead_letter_topic: [kafka.share.deadLetterTopic] With max_deliveries: a topic that receives poison
            records before they are rejected, with headers naming their origin. Not with broker_dead_letter_topic.
        broker_dead_letter_topic: [kafka.share.brokerDeadLetterTopic] Kafka 4.4+ with share.version=2: the topic
            of the broker's own dead-letter queue for the group (KIP-1191), which gets every rejected record and
            every record that reaches the group's delivery count limit. The topic must exist with
            errors.deadletterqueue.group.enable=true and a name with the broker's prefix (dlq. by default).
        parallelism: [kafka.share.parallelism] Share consumers, that is read tasks (Spark input partitions), per
            batch, 1 to 100000. It may exceed the topics' partition count: several consumers then read one
            partition, each getting its own records. Default: spark.default.parallelism. The group takes at most
            the broker's group.share.max.size members; a higher parallelism fails at start. 'auto': the source
            chooses each micro-batch's count from the backlog, between min_parallelism and max_parallelism, so
            that the backlog drains within backlog_drain_ms; real time runs the maximum:
            https://github.com/kafkashare/spark-kafka-share/blob/main/docs/guide/scaling.md
        min_parallelism: [kafka.share.minParallelism] With parallelism='auto': the fewest read tasks a batch
            gets, 1 to 100000. Default: 1.
        max_parallelism: [kafka.share.maxParallelism] With parallelism='auto': the most read tasks a batch gets,
            1 to 100000. Default: the application's task slots.
        backlog_drain_ms: [kafka.share.backlog.drain.ms] With parallelism='auto': how soon the backlog should be
            drained, in milliseconds (1000 to 86400000). Default: 10000.
        lock_timeout_ms: [kafka.share.lock.timeout.ms] The lock duration, in milliseconds (1 to 3600000), the
            source plans with: a batch that holds records longer (two-phase-commit, explicit mode) is reported,
            and on a broker without lock renewal, acknowledged before the lock runs out. Default: the group's
            share.record.lock.duration.ms (30 s unless the group or broker sets it). It only tells the source a
            shorter duration; it does not change the group's.
        include_headers: [includeHeaders] True adds the headers column (the record's headers, as Spark's Kafka
            source gives them). Default: false.
        max_records_per_trigger: [maxRecordsPerTrigger] An upper bound on the records of a batch (at least 1),
            split evenly over the read tasks. Records on their last delivery attempt are taken even past it
            (going back to the group would get them archived). Default: no bound, a batch takes what its read
            tasks poll in read_duration_ms.
        starting_offsets: [startingOffsets] 'earliest' or 'latest': where a group that has no state yet starts
            (it sets the group's share.auto.offset.reset). None leaves the group's setting alone: a new group
            then starts at the broker's default, latest, and skips what the topic held before the first start.
        poll_timeout_ms: [kafka.share.poll.timeout.ms] How long a read task waits for its first record before it
            ends empty, in milliseconds (1 to 600000). Default: 2000. Longer makes idle batches rarer, shorter
            ends an empty task sooner.
        read_duration_ms: [kafka.share.read.duration.ms] How long a read task keeps polling while there is a
            backlog, in milliseconds (0 to 600000); longer gives bigger batches. 0 polls once. Default: 1000.
        fail_on_data_loss: [failOnDataLoss] What a batch that must run again (a task retry, a restart) does when
            retention, compaction or a deleted topic removed records pinned to it: True (the default) fails the
            query with KAFKA_SHARE_DATA_LOSS.RECORDS_REMOVED, naming the records; False goes on with what is left
            and logs a warning, and the removed records are lost.
        kafka: Other Kafka client settings (security, fetch sizes), without the ``kafka.`` prefix:
            ``{"security.protocol": "SASL_SSL"}`` is sent as kafka.security.protocol. The settings the source
            refuses, and what to use instead: https://github.com/kafkashare/spark-kafka-share/blob/main/docs/reference/options.md#kafka-client-settings-the-source-refuses
    """

    bootstrap_servers: str
    group_id: str
    subscribe: Optional[Sequence[str]] = None
    subscribe_pattern: Optional[str] = None
    strategy: Optional[Strategy] = None
    acknowledgment_mode: Optional[AcknowledgmentMode] = None
    acknowledgment_default: Optional[DefaultDecision] = None
    max_deliveries: Optional[int] = None
    dead_letter_topic: Optional[str] = None
    broker_dead_letter_topic: Optional[str] = None
    parallelism: Optional[Union[int, Literal["auto"]]] = None
    min_parallelism: Optional[int] = None
    max_parallelism: Optional[int] = None
    backlog_drain_ms: Optional[int] = None
    lock_timeout_ms: Optional[int] = None
    include_headers: Optional[bool] = None
    max_records_per_trigger: Optional[int] = None
    starting_offsets: Optional[StartingOffsets] = None
    poll_timeout_ms: Optional[int] = None
    read_duration_ms: Optional[int] = None
    fail_on_data_loss: Optional[bool] = None
    kafka: Mapping[str, str] = field(default_factory=dict)

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
        if not (isinstance(self.parallelism, str) and self.parallelism.lower() == "auto"):
            for bound in ("min_parallelism", "max_parallelism", "backlog_drain_ms"):
                if getattr(self, bound) is not None:
                    raise ValueError(f"{bound} applies only with parallelism='auto'")
        if self.min_parallelism is not None and self.max_parallelism is not None and self.max_parallelism < self.min_parallelism:
            raise ValueError("max_parallelism must be at least min_parallelism")

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
