"""`make bench-latency`: time from a record's timestamp to its batch's commit, at a steady produce rate.

One broker, one topic; a producer writes `--rate` records/s for the whole run while each reader runs
in turn with a processing-time trigger of 0: kafka-share (checkpoint-dedup, parallelism K) and Spark's
built-in `kafka` source (minPartitions K). Prints p50 and p99 for each and the ratio of kafka-share's
p99 to the built-in source's.

Usage: latency.py [--rate N] [--seconds S] [--partitions P] [--parallelism K]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))

import charts
from bench import run_measurement

from harness import Broker, broker_versions, harness, pins


def read(config: dict[str, object]) -> dict[str, float]:
    return {k: float(v) for k, v in run_measurement("latency_read.py", config).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=40, help="measured seconds per reader")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--parallelism", type=int, default=4)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kafka-share-latency-"))
    broker = Broker(broker_versions()[-1], work / "broker").start()
    try:
        broker.create_topic("latency", args.partitions)
        common = {"bootstrap": broker.bootstrap, "topic": "latency", "parallelism": args.parallelism, "seconds": args.seconds}
        package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pins()['spark-sql-kafka']}"
        results: dict[str, dict[str, float]] = {}
        for name, config in (
            ("kafka-share checkpoint-dedup", {"source": "kafka-share", "group": "latency"}),
            ("built-in kafka", {"source": "kafka", "packages": package}),
        ):
            # The producer covers the reader's start (JVM, Ivy resolution) and its measured window.
            seconds = args.seconds + 60
            producer = threading.Thread(
                target=harness,
                args=("produce-rate", broker.bootstrap, "latency", str(args.rate), str(seconds)),
                kwargs={"timeout": seconds + 120},
            )
            producer.start()
            results[name] = read({**common, **config, "checkpoint": str(work / f"chk-{config['source']}")})
            print(name, results[name], flush=True)
            producer.join()
        share, builtin = results["kafka-share checkpoint-dedup"], results["built-in kafka"]
        print(
            f"\n{args.rate:,} records/s, {args.partitions} partitions, K={args.parallelism}, trigger 0\n"
            "| reader | records | p50 ms | p99 ms |\n|---|---:|---:|---:|"
        )
        for name, r in results.items():
            print(f"| {name} | {r['records']:,.0f} | {r['p50_ms']} | {r['p99_ms']} |")
        if builtin["p99_ms"]:
            print(f"p99 ratio kafka-share / built-in: {share['p99_ms'] / builtin['p99_ms']:.2f}")
        charts.bars(
            "bench-latency",
            f"record timestamp to batch commit at {args.rate:,} records/s",
            "ms",
            {"p50": [r["p50_ms"] for r in results.values()], "p99": [r["p99_ms"] for r in results.values()]},
            list(results),
            f"make bench-latency: {args.partitions} partitions, K={args.parallelism}, trigger 0, "
            f"{args.seconds} s measured per reader",
        )
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
