"""`make bench`: kafka-share against Kafka's own share consumer and Spark's built-in Kafka source.

One broker, one topic, the same records for every contender, in one run:
  (a) Kafka's ShareConsumerPerformance (kafka-tools, its own JVM) with K consumers;
  (b) Spark's built-in `kafka` source (spark-sql-kafka-0-10 from Maven Central), minPartitions K, noop sink;
  (c) the kafka-share source, each strategy, parallelism K, noop sink.
Prints records/s for each and the ratios c/a and c/b. Each contender reads with a fresh group.

Usage: bench.py [--records N] [--size BYTES] [--partitions P] [--parallelism K] [--strategies s1,s2]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import charts  # noqa: E402

from harness import Broker, broker_versions, pins  # noqa: E402

STRATEGIES = ["none", "idempotent", "checkpoint-dedup", "two-phase-commit"]


def share_consumer_performance(broker: Broker, topic: str, group: str, records: int, threads: int) -> float:
    """(a): records/s that Kafka's own tool reports for `threads` share consumers."""
    broker.read_from_earliest(group)
    classpath = (ROOT / "target" / "bench" / "tools.classpath").read_text().strip()
    done = subprocess.run(
        [
            "java",
            "-Xmx1g",
            "-cp",
            classpath,
            "org.apache.kafka.tools.ShareConsumerPerformance",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--messages",
            str(records),
            "--threads",
            str(threads),
            "--timeout",
            "30000",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ShareConsumerPerformance failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    # The last line: start, end, MB, MB/s, records/s, records, fetch time.
    fields = [f.strip() for f in done.stdout.strip().splitlines()[-1].split(",")]
    return float(fields[4])


def run_measurement(script: str, config: dict[str, object]) -> dict[str, Any]:
    """Runs one of the benchmark's Spark apps in its own process; returns the JSON line it prints last."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name(script)), json.dumps(config)], capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def spark_read(config: dict[str, object]) -> dict[str, Any]:
    return run_measurement("spark_read.py", config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--parallelism", type=int, default=4, help="K: share consumers, Spark input partitions")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument(
        "--max-poll-records",
        type=int,
        default=2000,
        help="kafka.max.poll.records for kafka-share (one acquiring poll per read task and batch)",
    )
    args = parser.parse_args()

    version = broker_versions()[-1]
    work = Path(tempfile.mkdtemp(prefix="kafka-share-bench-"))
    broker = Broker(version, work / "broker").start()
    try:
        topic = "bench"
        broker.create_topic(topic, args.partitions)
        broker.produce(topic, args.records, args.size, bulk=True)
        print(
            f"Kafka {version}, topic '{topic}': {args.partitions} partitions, {args.records:,} records of "
            f"{args.size} bytes; K={args.parallelism}; {platform.processor() or platform.machine()}, "
            f"{subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores",
            flush=True,
        )
        rows: list[tuple[str, float, str]] = []

        share_consumer_performance(broker, topic, "warm-up", min(args.records, 200_000), args.parallelism)
        a = share_consumer_performance(broker, topic, "perf-a", args.records, args.parallelism)
        rows.append(("(a) Kafka ShareConsumerPerformance", a, f"{args.parallelism} consumers"))
        print(f"(a) {a:,.0f} records/s", flush=True)

        common = {
            "bootstrap": broker.bootstrap,
            "topic": topic,
            "records": args.records,
            "parallelism": args.parallelism,
            "master": f"local[{max(2, args.parallelism)}]",
        }
        # Without a limit the built-in source reads everything in one batch; about 20 batches give it
        # a steady state to measure, as kafka-share has (its batches are bounded by its polls).
        b = spark_read(
            {
                **common,
                "source": "kafka",
                "checkpoint": str(work / "chk-b"),
                "options": {"maxOffsetsPerTrigger": max(1000, args.records // 20)},
                "packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pins()['spark-sql-kafka']}",
            }
        )
        rows.append(("(b) Spark built-in kafka source", float(b["records_per_s"]), f"{b['batches']} batches"))
        print(f"(b) {b}", flush=True)

        for strategy in args.strategies.split(","):
            c = spark_read(
                {
                    **common,
                    "source": "kafka-share",
                    "group": f"perf-c-{strategy}",
                    "strategy": strategy,
                    "checkpoint": str(work / f"chk-c-{strategy}"),
                    "options": {"kafka.max.poll.records": args.max_poll_records},
                }
            )
            rows.append((f"(c) kafka-share {strategy}", float(c["records_per_s"]), f"{c['batches']} batches"))
            print(f"(c) {strategy}: {c}", flush=True)

        print("\n| contender | records/s | c/a | c/b | note |\n|---|---:|---:|---:|---|")
        for name, rate, note in rows:
            ratios = f"{rate / a:.2f} | {rate / float(b['records_per_s']):.2f}" if name.startswith("(c)") else " | "
            print(f"| {name} | {rate:,.0f} | {ratios} | {note} |")
        charts.bars(
            "bench-throughput",
            f"records/s, {args.records:,} records of {args.size} B, {args.partitions} partitions, K={args.parallelism}",
            "records/s",
            {"records/s": [rate for _, rate, _ in rows]},
            [name for name, _, _ in rows],
            f"make bench: Kafka {version}, one broker, "
            f"{subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores",
        )
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
