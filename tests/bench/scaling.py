"""`make bench-scaling`: reading past the partition count, when each record needs blocking work.

One broker, a 1-partition topic, records that each need `--work-ms` of blocking work in the query
(a sleep in a Python UDF, standing in for a call to a service). Prints records/s of kafka-share
(checkpoint-dedup) for each parallelism, and of Spark's built-in `kafka` source on the same topic,
without and with `minPartitions` (which splits a partition's offset range over several tasks), and
the ratio of each kafka-share figure to its parallelism 1.

Usage: scaling.py [--records N] [--work-ms MS] [--parallelism 1,2,4,8] [--work-in python|jvm]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))

import charts
from bench import spark_read

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
        rows: list[tuple[str, float]] = []
        for k in levels:
            result = spark_read(
                {
                    **common,
                    "source": "kafka-share",
                    "parallelism": k,
                    "group": f"scaling-{k}",
                    "strategy": "checkpoint-dedup",
                    "checkpoint": str(work / f"chk-share-{k}"),
                    "options": {"kafka.max.poll.records": 100},
                }
            )
            rows.append((f"kafka-share, parallelism {k}", float(result["records_per_s"])))
            print(rows[-1], result, flush=True)
        package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pins()['spark-sql-kafka']}"
        for k in (1, max(levels)):
            result = spark_read(
                {
                    **common,
                    "source": "kafka",
                    "parallelism": k,
                    "packages": package,
                    "checkpoint": str(work / f"chk-kafka-{k}"),
                    "options": {"maxOffsetsPerTrigger": max(100, args.records // 10)},
                }
            )
            rows.append((f"built-in kafka, minPartitions {k}", float(result["records_per_s"])))
            print(rows[-1], result, flush=True)
        base = rows[0][1]
        print("\n| reader | records/s | x parallelism 1 |\n|---|---:|---:|")
        for name, rate in rows:
            print(f"| {name} | {rate:,.0f} | {rate / base:.1f} |")
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
