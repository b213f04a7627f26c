"""`make bench-scaling`: reading past the partition count, when each record needs blocking work.

One broker, a 1-partition topic, records that each need `--work-ms` of blocking work in the query
(a sleep in a Python UDF, standing in for a call to a service). Prints records/s of kafka-share
(checkpoint-dedup) for each parallelism, and of Spark's built-in `kafka` source on the same topic,
without and with `minPartitions` (which splits a partition's offset range over several tasks), and
the ratio of each kafka-share figure to its parallelism 1. As `make bench`: every reader is clocked
from its first record to its last, must read every record, and runs --runs times (at least 3) in an
order that rotates from run to run; the table shows medians and ranges.

Usage: scaling.py [--records N] [--work-ms MS] [--parallelism 1,2,4,8] [--work-in python|jvm] [--runs R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))

import charts
from bench import rotated_runs, spark_read_by_record

from harness import Broker, broker_versions, pins


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=30000)
    parser.add_argument("--work-ms", type=float, default=1.0)
    parser.add_argument("--parallelism", default="1,2,4,8")
    parser.add_argument(
        "--work-in",
        choices=["python", "jvm"],
        default="python",
        help="where the work runs: a Python UDF (default), or Thread.sleep in the JVM (no Python workers)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of each reader, in rotating order (at least 3)")
    args = parser.parse_args()
    levels = [int(p) for p in args.parallelism.split(",")]

    work = Path(tempfile.mkdtemp(prefix="kafka-share-scaling-"))
    broker = Broker(broker_versions()[-1], work / "broker").start()
    try:
        broker.create_topic("work", 1)
        # Typical 16 KB producer batches (about 140 records of 100 bytes): a share fetch hands out whole
        # batches, so 256 KB ones (about 2,200 records, 2 s of work each) would leave parallelism to luck.
        broker.produce("work", args.records, 100)
        print(
            f"1 partition, {args.records:,} records, {args.work_ms} ms of blocking work each "
            f"({'Thread.sleep in the executor JVM' if args.work_in == 'jvm' else 'time.sleep in a Python UDF'})",
            flush=True,
        )
        common = {
            "bootstrap": broker.bootstrap,
            "topic": "work",
            "records": args.records,
            "work_ms": args.work_ms,
            "work_in": args.work_in,
            "master": f"local[{max(levels)}]",
        }
        package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pins()['spark-sql-kafka']}"

        def share_reader(k: int) -> tuple[str, dict[str, object]]:
            return f"kafka-share, parallelism {k}", {
                "source": "kafka-share",
                "parallelism": k,
                "strategy": "checkpoint-dedup",
                "options": {"kafka.max.poll.records": 100},
            }

        def builtin_reader(k: int) -> tuple[str, dict[str, object]]:
            return f"built-in kafka, minPartitions {k}", {
                "source": "kafka",
                "parallelism": k,
                "packages": package,
                "options": {"maxOffsetsPerTrigger": max(100, args.records // 10), "kafka.max.poll.records": 100},
            }

        def reading(i: int, config: dict[str, object]) -> Callable[[int], dict[str, Any]]:
            return lambda run: spark_read_by_record(
                {**common, **config, "group": f"scaling-{run}-{i}", "checkpoint": str(work / f"chk-{run}-{i}")}
            )

        readers = [share_reader(k) for k in levels] + [builtin_reader(k) for k in (1, max(levels))]
        results = rotated_runs([(name, reading(i, config)) for i, (name, config) in enumerate(readers)], args.runs)
        rates = {name: [float(r["records_per_s"]) for r in results[name]] for name, _ in readers}
        rows = [(name, float(statistics.median(rates[name]))) for name, _ in readers]
        base = rows[0][1]
        print("\n| reader | records/s (median) | range | x parallelism 1 |\n|---|---:|---:|---:|")
        for name, rate in rows:
            print(f"| {name} | {rate:,.0f} | {min(rates[name]):,.0f} to {max(rates[name]):,.0f} | {rate / base:.1f} |")
        share = [rate for name, rate in rows if name.startswith("kafka-share")]
        builtin = [rate for name, rate in rows if name.startswith("built-in")]
        charts.lines(
            "bench-scaling",
            f"1 partition, {args.work_ms} ms of blocking work per record",
            "parallelism (consumers, tasks)",
            "records/s",
            {
                "kafka-share (kafka.share.parallelism)": ([float(k) for k in levels], share),
                "built-in kafka (minPartitions)": ([1.0, float(max(levels))], builtin),
                "ideal (parallelism x kafka-share at 1)": ([float(k) for k in levels], [base * k for k in levels]),
            },
            f"make bench-scaling: {args.records:,} records, work in {args.work_in}",
        )
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
