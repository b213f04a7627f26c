"""`make bench-latency-profile`: where the slowest records of a real-time query lose their milliseconds.

One broker, the topic and producer of `make bench-latency` at one rate; one run of kafka-share in real time and
one of Spark's built-in Kafka source in real time (the anchor), each clocked from send to the Kafka sink's write
(latency_sink_read.py). For each, from the progress of its batches: the boundary between two real-time batches,
when no task reads (the end of batch N's tasks to the start of batch N+1's: Spark's commit log, the wait for the
next trigger, the source's latestOffset, Spark's offset log and planning), its median length and parts; the
share of records sent during a boundary, and of the slowest 1% (above p99). For kafka-share, from its read
tasks' own clocks (PinnedPolls, at DEBUG): of the tasks' time, the poll wait (polls include waiting for records),
the pin write, the acknowledgement and Spark's work on the rows (the sink's write).

A diagnosis, not a benchmark: one run each. Compare contenders with `make bench-latency`.

Usage: latency_profile.py [--rate 5000] [--seconds S] [--partitions P] [--parallelism K]
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))

from bench import run_measurement
from profile_read import LOG4J2, STEPS, TASK_LINE

from harness import Broker, broker_versions, harness, pins

# RealTimePlanning's line for each batch it plans.
PLANNED = re.compile(r"real-time batch \d+ planned in (\d+) ms \(the earlier batches' pins (\d+) ms, the cluster (\d+) ms\)")
PLANNED_PARTS = ("in all", "the earlier batches' pins", "the cluster")

# Spark's loggers that time a boundary: the stages and tasks, on the driver and the executor, and the stream's steps.
SPARK_TIMELINE = (
    "org.apache.spark.scheduler.DAGScheduler",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.executor.Executor",
    "org.apache.spark.sql.execution.streaming",
)

# Spark's phases of a micro-batch that run before its tasks (real time: before they read) and after them.
BEFORE_TASKS = ("latestOffset", "walCommit", "queryPlanning", "getBatch")
AFTER_TASKS = ("commitOffsets",)


def seconds_of(timestamp: str) -> float:
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def boundaries(batches: list[dict[str, Any]]) -> list[dict[str, float]]:
    """The windows between two batches' reading, in epoch seconds, with the milliseconds of each part."""
    windows = []
    for this, after in zip(batches, batches[1:]):
        d, n = this["durationMs"], after["durationMs"]
        start, next_start = seconds_of(this["timestamp"]), seconds_of(after["timestamp"])
        reading_ends = start + sum(d.get(k, 0) for k in BEFORE_TASKS) / 1000 + d.get("addBatch", 0) / 1000
        reading_starts = next_start + sum(n.get(k, 0) for k in BEFORE_TASKS) / 1000
        parts = {
            "commit log": d.get("commitOffsets", 0),
            "until the next trigger": max(0.0, (next_start - start) * 1000 - d.get("triggerExecution", 0)),
            **{k: n.get(k, 0) for k in BEFORE_TASKS},
        }
        windows.append({"from": reading_ends, "to": reading_starts, **parts})
    return windows


def profile(records: list[list[float]], batches: list[dict[str, Any]]) -> dict[str, Any]:
    windows = boundaries(batches)
    latencies = sorted(w - s for s, w in records)
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else 0.0

    def at_boundary(sent: float) -> bool:  # sent during a boundary, or in the 50 ms before it a task stops reading
        return any(w["from"] - 0.05 <= sent <= w["to"] for w in windows)

    slowest = [(s, w) for s, w in records if w - s >= p99]
    inside = sorted(w - s for s, w in records if not at_boundary(s))
    part_names = [k for k in windows[0] if k not in ("from", "to")] if windows else []
    return {
        "records": len(records),
        "p99_ms": round(p99 * 1000, 1),
        "boundaries": len(windows),
        "boundary_ms": round(statistics.median((w["to"] - w["from"]) * 1000 for w in windows), 1) if windows else 0.0,
        "parts_ms": {k: round(statistics.median(w[k] for w in windows), 1) for k in part_names},
        "sent_at_boundary_pct": round(100 * sum(at_boundary(s) for s, _ in records) / max(1, len(records)), 1),
        "slowest_at_boundary_pct": round(100 * sum(at_boundary(s) for s, _ in slowest) / max(1, len(slowest)), 1),
        "p99_away_from_boundaries_ms": round(inside[min(len(inside) - 1, int(0.99 * len(inside)))] * 1000, 1) if inside else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=5000, help="records/s")
    parser.add_argument("--seconds", type=int, default=20, help="measured seconds, after a 10 s warm-up")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--share-option", action="append", default=[], help="KEY=VALUE, an option of kafka-share's reader")
    parser.add_argument("--spark-log", action="store_true", help="also log Spark's scheduler and stream at INFO (a timeline)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kafka-share-latency-profile-"))
    log = work / "tasks.log"
    # And the source's planning of each real-time batch (its time, and its parts).
    planning = "logger.planning.name = io.github.kafkashare.spark.planning.RealTimePlanning\nlogger.planning.level = info\n"
    if args.spark_log:
        planning += "".join(
            f"logger.s{i}.name = {name}\nlogger.s{i}.level = info\n"
            for i, name in enumerate(SPARK_TIMELINE + ("io.github.kafkashare.spark.reader.RealTimeRecords",))
        )
    (work / "log4j2.properties").write_text(LOG4J2.format(log=log) + planning)
    broker = Broker(broker_versions()[-1], work / "broker").start()
    package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pins()['spark-sql-kafka']}"
    results = {}
    try:
        broker.create_topic("latency", args.partitions)
        for n, source in enumerate(("kafka-share", "kafka")):
            producer = threading.Thread(
                target=harness,
                args=("produce-rate", broker.bootstrap, "latency", str(args.rate), str(args.seconds + 60)),
                kwargs={"timeout": args.seconds + 180},
            )
            broker.create_topic(f"latency-out-{n}", args.partitions)
            producer.start()
            try:
                config = {
                    "source": source,
                    "trigger": "real-time",
                    "bootstrap": broker.bootstrap,
                    "topic": "latency",
                    "out_topic": f"latency-out-{n}",
                    "group": f"latency-profile-{n}",
                    "parallelism": args.parallelism,
                    "checkpoint": str(work / f"chk-{n}"),
                    "seconds": args.seconds,
                    "packages": package,
                    "profile_file": str(work / f"profile-{n}.json"),
                    "share_options": dict(o.split("=", 1) for o in args.share_option),
                    "driver_java_options": f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}",
                }
                run_measurement("latency_sink_read.py", config)
            finally:
                producer.join()
            measured = json.loads((work / f"profile-{n}.json").read_text())
            results[source] = profile(measured["records"], measured["batches"])

    finally:
        broker.stop()

    print(f"\nreal time at {args.rate:,} records/s, {args.partitions} partitions, K={args.parallelism}, one run each")
    for source, r in results.items():
        print(
            f"\n{source}: {r['records']:,} records, p99 {r['p99_ms']} ms; p99 of records sent away from boundaries "
            f"{r['p99_away_from_boundaries_ms']} ms"
        )
        print(
            f"  {r['boundaries']} boundaries between batches, median {r['boundary_ms']} ms with no task reading: "
            + ", ".join(f"{k} {v}" for k, v in r["parts_ms"].items())
        )
        print(
            f"  sent during a boundary: {r['sent_at_boundary_pct']}% of all records, {r['slowest_at_boundary_pct']}% of "
            "the slowest 1%"
        )
    planned = [tuple(int(g) for g in m.groups()) for m in PLANNED.finditer(log.read_text() if log.exists() else "")]
    if planned:
        parts = ", ".join(f"{name} {statistics.median(p[i] for p in planned)}" for i, name in enumerate(PLANNED_PARTS))
        print(f"\nkafka-share's planning of its {len(planned)} real-time batches, median ms: {parts}")
    tasks = [tuple(int(g) for g in m.groups()) for m in TASK_LINE.finditer(log.read_text() if log.exists() else "")]
    if tasks:
        total = sum(t[4] for t in tasks)
        shares = ", ".join(f"{s} {100 * sum(t[5 + i] for t in tasks) / max(1, total):.0f}%" for i, s in enumerate(STEPS))
        print(f"\nkafka-share read tasks ({len(tasks)}), of their time: {shares} (polling includes waiting for records)")


if __name__ == "__main__":
    main()
