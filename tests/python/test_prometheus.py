"""The source's series at Spark's Prometheus endpoint, scraped over HTTP while a backlog of 200,000 records drains
(spark_apps/prometheus_drain.py), on the oldest broker line (the backlog is the source's own count there) and the
newest (the broker's lag): the series exist, the backlog falls to 0, each scraped value is one the query's progress
reported, JMX says the same, and the series go when the query stops."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from harness import Broker, broker_versions
from spark_runs import record_delivery_counts, run_spark

OLDEST, NEWEST = broker_versions()[0], broker_versions()[-1]
RECORDS = 200_000
PER_BATCH = 25_000


@pytest.mark.parametrize("broker", [OLDEST, NEWEST], indirect=True, ids=[f"kafka-{OLDEST}", f"kafka-{NEWEST}"])
def test_a_prometheus_scrape_follows_a_backlog_of_200k_records_down_to_0(
    broker: Broker, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    topic, group = fresh_name("scraped"), fresh_name("scraped-group")
    broker.create_topic(topic, 2)
    broker.read_from_earliest(group)
    broker.produce(topic, RECORDS, bulk=True)
    config = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "group": group,
        "records": RECORDS,
        "per_batch": PER_BATCH,
        "checkpoint": str(tmp_path / "checkpoint"),
        "timeout_s": 240,
    }
    outcome = run_spark("prometheus_drain.py", json.dumps(config), timeout=360)
    assert outcome["failure"] is None, outcome["failure"]
    assert outcome["rows"] == RECORDS, outcome["rows"]  # every record read once: nothing failed on the way

    samples = outcome["samples"]
    backlogs = [s["backlogRecords"] for s in samples]
    record_delivery_counts(
        f"prometheus scrape, kafka {broker.version}: {len(samples)} scrapes, backlog {max(backlogs, default=None)} at "
        f"its peak, then {backlogs[-1:] or '-'}; rows {outcome['rows']} of {RECORDS}; "
        f"JMX at the end {outcome['at_end']['jmx_backlog']}"
    )
    # Scraped while the backlog was there, then down to 0: at least a batch of records waited at one scrape.
    assert max(backlogs) >= PER_BATCH, backlogs
    assert backlogs[-1] == 0, backlogs
    peak = backlogs.index(max(backlogs))
    assert any(b < max(backlogs) for b in backlogs[peak:]), backlogs
    # Every scraped value is one the progress reported (the gauges are the last progress's figures).
    reported = set(outcome["progress_backlogs"])
    assert set(backlogs) <= reported, (sorted(set(backlogs) - reported), sorted(reported))
    # The topic's series (one topic: the query's backlog) is a value the progress reported too, and says what
    # the query's does at the end; a scrape may fall between the updates of two gauges of one progress.
    assert {s["topicBacklogRecords"] for s in samples} <= reported, samples
    assert samples[-1]["topicBacklogRecords"] == 0, samples[-1]
    assert all(s["backlogAgeMs"] is not None and s["lockUsedPercent"] is not None for s in samples), samples
    assert samples[-1]["recordsAcquiredTotal"] >= RECORDS, samples[-1]
    # JMX, the other sink configured, has the same gauge.
    assert outcome["at_end"]["jmx_backlog"] == 0, outcome["at_end"]
    # A stopped query has no series.
    assert outcome["series_after_stop"] == [], outcome["series_after_stop"]
