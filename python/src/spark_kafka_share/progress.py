"""The kafka-share source's figures in a query's progress, as numbers.

Spark reports a source's metrics as strings (``query.lastProgress["sources"][0]["metrics"]``), and
``deliveryCountLimit`` may be ``"-"``. :func:`progress` reads them into a :class:`KafkaShareProgress`. Plain
Python, no py4j: classic pyspark and Spark Connect both give the progress as a dict (pyspark 4's
``StreamingQueryProgress`` is a dict subclass), and that is all this reads::

    p = spark_kafka_share.progress(query)
    if p is not None and p.backlog_records:
        print(p.backlog_records, p.backlog_age_ms)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

# Spark names a source in the progress by its stream's toString: KafkaShareMicroBatchStream[group], or the
# real-time stream's. That prefix is how a kafka-share source is told from the others of a union.
SOURCE_PREFIX = "KafkaShare"
# What the source reports where it knows no value (deliveryCountLimit without a known limit).
_NO_VALUE = "-"


class NoKafkaShareSourceError(ValueError):
    """progress() was given a query, or a progress, that reads no ``format("kafka-share")`` source."""


@dataclass(frozen=True)
class KafkaShareProgress:
    """One kafka-share source's figures in one progress of a query, in snake case (``backlogRecords`` is
    ``backlog_records``). What each means:
    https://github.com/kafkashare/spark-kafka-share/blob/main/docs/reference/metrics.md

    A metric the progress does not carry is None: a connector jar older than this package does not report
    every one (``lock_used_percent``, ``backlog_age_ms`` and the emitted ages came later). ``metrics`` keeps
    every metric as Spark gave it, strings, with those this package does not know.
    """

    source: str  # the source's description in the progress, KafkaShareMicroBatchStream[<group>]
    batch_id: int
    timestamp: datetime  # when the batch started (UTC)
    last_batch: Optional[int]
    last_batch_records_acquired: Optional[int]
    last_batch_max_delivery_count: Optional[int]
    pinned_ranges: Optional[int]
    parallelism: Optional[int]
    parallelism_reason: Optional[str]  # with parallelism="auto": why the batch got that many read tasks
    lock_duration_ms: Optional[int]
    delivery_count_limit: Optional[int]  # None also where the source reports "-": no limit known
    records_acquired_total: Optional[int]
    records_accepted_total: Optional[int]
    records_released_total: Optional[int]
    records_replayed_total: Optional[int]
    redeliveries_dropped_total: Optional[int]
    records_rejected_total: Optional[int]
    records_at_last_delivery_total: Optional[int]
    backlog_records: Optional[int]
    backlog_records_by_topic: Optional[dict[str, int]]
    backlog_change_since_last_batch: Optional[int]
    consumers_created_total: Optional[int]
    lock_used_percent: Optional[int]
    backlog_age_ms: Optional[int]
    emitted_age_max_ms: Optional[int]
    emitted_age_p99_ms: Optional[int]
    metrics: Mapping[str, str]


# The fields that are not metrics of the source.
_NOT_METRICS = frozenset({"source", "batch_id", "timestamp", "metrics"})


def metric_name(field_name: str) -> str:
    """The progress metric a field reads: ``emitted_age_p99_ms`` reads ``emittedAgeP99Ms``."""
    first, *rest = field_name.split("_")
    return first + "".join(part.capitalize() for part in rest)


METRIC_FIELDS: dict[str, str] = {
    metric_name(f.name): f.name for f in dataclasses.fields(KafkaShareProgress) if f.name not in _NOT_METRICS
}


def progress(query: Any) -> Optional[KafkaShareProgress]:
    """The kafka-share source's figures in the last progress of ``query``; None before its first progress.

    ``query`` is a ``StreamingQuery`` (classic or Spark Connect), or one progress itself (an item of
    ``query.recentProgress``, a listener's ``event.progress``, or its JSON read into a dict). Raises
    :class:`NoKafkaShareSourceError` when that progress has no kafka-share source, and ValueError when it has
    several (a union of kafka-share streams): :func:`progresses` gives one per source.
    """
    found = progresses(query)
    if len(found) > 1:
        sources = [p.source for p in found]
        raise ValueError(
            f"this progress has {len(found)} kafka-share sources ({', '.join(sources)}): "
            "spark_kafka_share.progresses(query) gives one KafkaShareProgress for each"
        )
    return found[0] if found else None


def progresses(query: Any) -> list[KafkaShareProgress]:
    """One :class:`KafkaShareProgress` per kafka-share source of the last progress of ``query``, in the order
    of the progress's sources; an empty list before the first progress. See :func:`progress`."""
    last = query if isinstance(query, Mapping) else query.lastProgress
    if last is None:
        return []
    sources = list(last["sources"])
    ours = [s for s in sources if str(s["description"]).startswith(SOURCE_PREFIX)]
    if not ours:
        described = ", ".join(str(s["description"]) for s in sources) or "none"
        raise NoKafkaShareSourceError(
            f"this progress has no kafka-share source (its sources: {described}): pass the query that reads "
            f'spark.readStream.format("kafka-share"), or its progress'
        )
    batch_id, timestamp = int(last["batchId"]), _timestamp(str(last["timestamp"]))
    return [_read(str(s["description"]), batch_id, timestamp, dict(s["metrics"] or {})) for s in ours]


def _read(source: str, batch_id: int, timestamp: datetime, metrics: dict[str, str]) -> KafkaShareProgress:
    values: dict[str, Any] = {}
    for metric, field_name in METRIC_FIELDS.items():
        raw = metrics.get(metric)
        if raw is None:
            values[field_name] = None
        elif metric == "backlogRecordsByTopic":
            values[field_name] = _by_topic(metric, str(raw))
        elif metric == "parallelismReason":
            values[field_name] = str(raw)
        else:
            values[field_name] = _whole(metric, str(raw))
    return KafkaShareProgress(source=source, batch_id=batch_id, timestamp=timestamp, metrics=metrics, **values)


def _whole(metric: str, raw: str) -> Optional[int]:
    if raw.strip() == _NO_VALUE:
        return None
    try:
        return int(raw)
    except ValueError:
        pass
    try:  # a percentage or an age a later jar reports with a fraction
        return round(float(raw))
    except ValueError:
        raise ValueError(f"the kafka-share metric {metric} is {raw!r}, not a number") from None


def _by_topic(metric: str, raw: str) -> dict[str, int]:
    """``orders=1200,payments=0``: topic names hold neither ``=`` nor ``,``."""
    counts: dict[str, int] = {}
    for pair in filter(None, (p.strip() for p in raw.split(","))):
        topic, equals, count = pair.rpartition("=")
        value = _whole(metric, count) if equals else None
        if not topic or value is None:
            raise ValueError(f"the kafka-share metric {metric} is {raw!r}, not topic=count,...")
        counts[topic] = value
    return counts


def _timestamp(raw: str) -> datetime:
    """Spark's progress timestamps: 2026-03-01T12:00:00.000Z (datetime.fromisoformat takes the Z from 3.11 on)."""
    return datetime.fromisoformat(raw.replace("Z", "+00:00")).astimezone(timezone.utc)
