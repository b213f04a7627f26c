"""`make bench-latency`: time from a record's timestamp to its batch's commit, at a steady produce rate.

One broker, one topic; a producer writes `--rate` records/s for the whole run while each reader runs
in turn with a processing-time trigger of 0: kafka-share (checkpoint-dedup, parallelism K) and Spark's
built-in `kafka` source (minPartitions K), each --runs times (at least 3) in rotating order, each run with
a fresh group and checkpoint. Prints the median and range of p50 and p99 for each, and the ratio of
kafka-share's median p99 to the built-in source's.

Usage: latency.py [--rate N] [--seconds S] [--partitions P] [--parallelism K] [--runs R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))

import charts
from bench import rotated_runs, run_measurement

from harness import Broker, broker_versions, harness, pins


def read(config: dict[str, object]) -> dict[str, float]:
    return {k: float(v) for k, v in run_measurement("latency_read.py", config).items()}


def latency(result: dict[str, Any]) -> str:
    return f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms ({result['records']:,.0f} records)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=40, help="measured seconds per reader")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3, help="runs of each reader, in rotating order (at least 3)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kafka-share-latency-"))
    broker = Broker(broker_versions()[-1], work / "broker").start()
    try:
        broker.create_topic("latency", args.partitions)
        common = {"bootstrap": broker.bootstrap, "topic": "latency", "parallelism": args.parallelism, "seconds": args.seconds}
        package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pins()['spark-sql-kafka']}"

        def reader(source: dict[str, object]) -> Callable[[int], dict[str, Any]]:
            def run(n: int) -> dict[str, Any]:
                # The producer covers the reader's start (JVM, Ivy resolution) and its measured window. Each
                # run has a fresh group and checkpoint, both starting at the end of the topic.
                seconds = args.seconds + 60
                producer = threading.Thread(
                    target=harness,
                    args=("produce-rate", broker.bootstrap, "latency", str(args.rate), str(seconds)),
                    kwargs={"timeout": seconds + 120},
                )
                producer.start()
                try:
                    checkpoint = str(work / f"chk-{source['source']}-{n}")
                    return dict(read({**common, **source, "group": f"latency-{n}", "checkpoint": checkpoint}))
                finally:
                    producer.join()

            return run

        contenders = [
            ("kafka-share checkpoint-dedup", reader({"source": "kafka-share"})),
            ("built-in kafka", reader({"source": "kafka", "packages": package})),
        ]
        results = rotated_runs(contenders, args.runs, latency)

        def median(name: str, key: str) -> float:
            return float(statistics.median(r[key] for r in results[name]))

        def spread(name: str, key: str) -> str:
            values = [r[key] for r in results[name]]
            return f"{median(name, key):,.1f} ({min(values):,.1f} to {max(values):,.1f})"

        print(
            f"\n{args.rate:,} records/s, {args.partitions} partitions, K={args.parallelism}, trigger 0, "
            f"{args.runs} runs each, rotating\n"
            "| reader | records (median) | p50 ms, median (range) | p99 ms, median (range) |\n|---|---:|---:|---:|"
        )
        for name, _ in contenders:
            print(f"| {name} | {median(name, 'records'):,.0f} | {spread(name, 'p50_ms')} | {spread(name, 'p99_ms')} |")
        share, builtin = median(contenders[0][0], "p99_ms"), median(contenders[1][0], "p99_ms")
        if builtin:
            print(f"p99 ratio kafka-share / built-in (medians): {share / builtin:.2f}")
        charts.bars(
            "bench-latency",
            f"record timestamp to batch commit at {args.rate:,} records/s (median of {args.runs})",
            "ms",
            {key[:3]: [median(name, key) for name, _ in contenders] for key in ("p50_ms", "p99_ms")},
            [name for name, _ in contenders],
            f"make bench-latency: {args.partitions} partitions, K={args.parallelism}, trigger 0, "
            f"{args.seconds} s measured per reader",
        )
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
