"""progress(query): the source's figures in a query's progress as numbers. Plain Python: progresses built by hand,
as dicts and as pyspark's own StreamingQueryProgress (what classic pyspark and Spark Connect both return)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, Optional

import pytest
from pyspark.sql.streaming.listener import StreamingQueryProgress

import spark_kafka_share
from harness import ROOT
from spark_kafka_share import KafkaShareProgress, NoKafkaShareSourceError
from spark_kafka_share.progress import METRIC_FIELDS

METRICS = {
    "lastBatch": "41",
    "lastBatchRecordsAcquired": "2000",
    "lastBatchMaxDeliveryCount": "1",
    "pinnedRanges": "4",
    "parallelism": "2",
    "parallelismReason": "2: a backlog of 1200 records and 400 arriving a second, at 900 records a second per read task",
    "lockDurationMs": "30000",
    "deliveryCountLimit": "5",
    "recordsAcquiredTotal": "84000",
    "recordsAcceptedTotal": "83990",
    "recordsReleasedTotal": "10",
    "recordsReplayedTotal": "0",
    "redeliveriesDroppedTotal": "0",
    "recordsRejectedTotal": "0",
    "recordsAtLastDeliveryTotal": "0",
    "backlogRecords": "1200",
    "backlogRecordsByTopic": "orders=1200,payments=0",
    "backlogChangeSinceLastBatch": "-300",
    "consumersCreatedTotal": "2",
    "lockUsedPercent": "12",
    "backlogAgeMs": "4500",
    "emittedAgeMaxMs": "900",
    "emittedAgeP99Ms": "850",
}


def _source(description: str, metrics: dict[str, str]) -> dict[str, Any]:
    return {
        "description": description,
        "startOffset": "{}",
        "endOffset": "{}",
        "latestOffset": None,
        "numInputRows": 2000,
        "inputRowsPerSecond": 1000.0,
        "processedRowsPerSecond": 4000.0,
        "metrics": metrics,
    }


def _progress(*sources: dict[str, Any]) -> dict[str, Any]:
    """A progress as Spark's JSON has it (StreamingQueryProgress.json())."""
    return {
        "id": "5b7c2a8e-0d43-4f0e-9d7e-1a2b3c4d5e6f",
        "runId": "0f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f",
        "name": "orders",
        "timestamp": "2026-03-01T12:00:00.123Z",
        "batchId": 42,
        "batchDuration": 310,
        "numInputRows": 2000,
        "inputRowsPerSecond": 1000.0,
        "processedRowsPerSecond": 4000.0,
        "durationMs": {"triggerExecution": 310},
        "stateOperators": [],
        "sources": list(sources),
        "sink": {"description": "NoopSink", "numOutputRows": -1, "metrics": {}},
    }


ORDERS = _source("KafkaShareMicroBatchStream[orders-processing]", METRICS)


class _Query:
    """What progress() reads of a StreamingQuery, classic or Connect: lastProgress."""

    def __init__(self, last: Optional[dict[str, Any]]) -> None:
        self.lastProgress = last


def test_the_figures_are_numbers() -> None:
    p = spark_kafka_share.progress(_Query(_progress(ORDERS)))
    assert p is not None
    assert (p.source, p.batch_id) == ("KafkaShareMicroBatchStream[orders-processing]", 42)
    assert p.timestamp == datetime(2026, 3, 1, 12, 0, 0, 123000, tzinfo=timezone.utc)
    assert (p.backlog_records, p.backlog_age_ms, p.lock_used_percent) == (1200, 4500, 12)
    assert (p.records_acquired_total, p.records_accepted_total, p.records_released_total) == (84000, 83990, 10)
    assert (p.emitted_age_max_ms, p.emitted_age_p99_ms, p.delivery_count_limit) == (900, 850, 5)
    assert p.backlog_change_since_last_batch == -300
    assert p.backlog_records_by_topic == {"orders": 1200, "payments": 0}
    assert p.metrics == METRICS


def test_every_metric_is_read_into_its_field() -> None:
    p = spark_kafka_share.progress(_progress(ORDERS))
    assert p is not None
    for metric, field_name in METRIC_FIELDS.items():
        if metric == "parallelismReason":
            assert getattr(p, field_name) == METRICS[metric]
        elif metric != "backlogRecordsByTopic":
            assert getattr(p, field_name) == int(METRICS[metric]), metric


def test_pysparks_progress_object_reads_as_the_dict() -> None:
    """pyspark 4 gives StreamingQueryProgress (a dict subclass, with SourceProgress inside), classic and Connect."""
    as_object = StreamingQueryProgress.fromJson(json.loads(json.dumps(_progress(ORDERS))))
    assert spark_kafka_share.progress(_Query(as_object)) == spark_kafka_share.progress(_progress(ORDERS))


def test_no_delivery_limit_known_is_none() -> None:
    p = spark_kafka_share.progress(_progress(_source(ORDERS["description"], {**METRICS, "deliveryCountLimit": "-"})))
    assert p is not None and p.delivery_count_limit is None


def test_an_older_jar_leaves_the_newer_figures_none_and_unknown_ones_in_metrics() -> None:
    older = {k: v for k, v in METRICS.items() if k not in {"lockUsedPercent", "backlogAgeMs", "emittedAgeMaxMs"}}
    older["someLaterMetric"] = "7"
    p = spark_kafka_share.progress(_progress(_source(ORDERS["description"], older)))
    assert p is not None
    assert (p.lock_used_percent, p.backlog_age_ms, p.emitted_age_max_ms) == (None, None, None)
    assert p.emitted_age_p99_ms == 850 and p.metrics["someLaterMetric"] == "7"


def test_a_fraction_is_rounded_and_a_word_is_refused() -> None:
    p = spark_kafka_share.progress(_progress(_source(ORDERS["description"], {"lockUsedPercent": "82.6"})))
    assert p is not None and p.lock_used_percent == 83
    with pytest.raises(ValueError, match=r"kafka-share metric backlogRecords is 'many', not a number"):
        spark_kafka_share.progress(_progress(_source(ORDERS["description"], {"backlogRecords": "many"})))


def test_no_progress_yet_is_none() -> None:
    assert spark_kafka_share.progress(_Query(None)) is None
    assert spark_kafka_share.progresses(_Query(None)) == []


def test_a_query_without_a_kafka_share_source_is_told_what_to_pass() -> None:
    rate = _source("RateStreamV2[rowsPerSecond=1, rampUpTimeSeconds=0, numPartitions=default", {})
    told = r'no kafka-share source \(its sources: RateStreamV2.*pass the query that reads .*format\("kafka-share"\)'
    with pytest.raises(NoKafkaShareSourceError, match=told):
        spark_kafka_share.progress(_Query(_progress(rate)))


def test_a_union_gives_one_progress_per_kafka_share_source() -> None:
    payments = _source("KafkaShareMicroBatchStream[payments]", {"backlogRecords": "7"})
    rate = _source("RateStreamV2[rowsPerSecond=1]", {})
    query = _Query(_progress(ORDERS, rate, payments))
    found = spark_kafka_share.progresses(query)
    assert [(p.source, p.backlog_records) for p in found] == [
        ("KafkaShareMicroBatchStream[orders-processing]", 1200),
        ("KafkaShareMicroBatchStream[payments]", 7),
    ]
    with pytest.raises(ValueError, match=r"2 kafka-share sources .*spark_kafka_share\.progresses\(query\)"):
        spark_kafka_share.progress(query)


def test_the_fields_are_the_metrics_the_reference_lists() -> None:
    """docs/reference/metrics.md lists the progress metrics (a Scala suite keeps it equal to the code): each has a
    field, and each field a metric there."""
    text = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    table = text[text.index("## Query progress metrics") :].split("\n\n")[0]
    listed = set(re.findall(r"^\| `(\w+)` \|", table, flags=re.M))
    fields = set(METRIC_FIELDS)
    assert listed == fields, f"listed without a field: {listed - fields}; a field not listed: {fields - listed}"


def test_the_view_is_frozen() -> None:
    p = spark_kafka_share.progress(_progress(ORDERS))
    assert isinstance(p, KafkaShareProgress)
    with pytest.raises(AttributeError):
        p.backlog_records = 0  # type: ignore[misc]
