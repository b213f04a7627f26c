"""`make bench-latency`: time from a record's send to the moment the sink has it, at steady produce rates.

One broker, one topic; for each rate (--rates), a producer writes that many records/s for the whole of each
run while one reader runs: kafka-share in Spark's real-time mode, Spark's built-in `kafka` source in real
time (the anchor: spark-sql-kafka-0-10 on the same pyspark), and kafka-share in micro-batch (processing-time
trigger 0). Each writes every record to a Kafka topic through Spark's Kafka sink; a record's latency is from
its Kafka timestamp to the timestamp of the record the sink wrote for it (latency_sink_read.py), the same clock
for every reader. Each reader runs --runs times (at least 3) in rotating order, each run with a fresh group,
checkpoint and output topic. Prints, per rate, the median and range of p50 and p99, and the ratio of
kafka-share's real-time median p99 to the built-in source's.

With --commit-clock, the earlier comparison instead: micro-batch only, latency to the end of the batch's
foreachBatch (latency_read.py), kafka-share against the built-in source, at the first rate.

Usage: latency.py [--rates 1000,5000] [--seconds S] [--partitions P] [--parallelism K] [--runs R] [--commit-clock]
"""

from __future__ import annotations

import argparse
import itertools
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


def latency(result: dict[str, Any]) -> str:
    return f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms ({result['records']:,.0f} records)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="1000,5000", help="records/s, comma-separated")
    parser.add_argument("--seconds", type=int, default=20, help="measured seconds per run, after a 10 s warm-up")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3, help="runs of each reader, in rotating order (at least 3)")
    parser.add_argument("--commit-clock", action="store_true", help="the micro-batch comparison to the batch's commit")
    parser.add_argument("--real-time-only", action="store_true", help="only the two real-time readers")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]

    work = Path(tempfile.mkdtemp(prefix="kafka-share-latency-"))
    broker = Broker(broker_versions()[-1], work / "broker").start()
    runs = itertools.count()
    try:
        broker.create_topic("latency", args.partitions)
        common = {"bootstrap": broker.bootstrap, "topic": "latency", "parallelism": args.parallelism, "seconds": args.seconds}
        package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pins()['spark-sql-kafka']}"

        def reader(script: str, rate: int, source: dict[str, object]) -> Callable[[int], dict[str, Any]]:
            def run(_: int) -> dict[str, Any]:
                # The producer covers the reader's start (JVM, Ivy resolution) and its measured window. Each
                # run has a fresh group, checkpoint and output topic, the group starting at the end of the topic.
                n = next(runs)
                producer = threading.Thread(
                    target=harness,
                    args=("produce-rate", broker.bootstrap, "latency", str(rate), str(args.seconds + 60)),
                    kwargs={"timeout": args.seconds + 180},
                )
                out_topic = f"latency-out-{n}"
                broker.create_topic(out_topic, args.partitions)
                producer.start()
                try:
                    own = {"group": f"latency-{n}", "checkpoint": str(work / f"chk-{n}"), "out_topic": out_topic}
                    config = {**common, **source, **own}
                    measured = run_measurement(script, {**config, "packages": package})
                    return {k: v if k == "p99_by_second" else float(v) for k, v in measured.items()}
                finally:
                    producer.join()

            return run

        if args.commit_clock:
            contenders = [
                ("kafka-share micro-batch", reader("latency_read.py", rates[0], {"source": "kafka-share"})),
                ("built-in kafka micro-batch", reader("latency_read.py", rates[0], {"source": "kafka"})),
            ]
            results = rotated_runs(contenders, args.runs, latency)
            table(f"{rates[0]:,} records/s, to the batch's commit", results, contenders, args)
            return
        medians: dict[str, list[float]] = {}
        names: list[str] = []
        per_second: dict[str, tuple[list[float], list[float]]] = {}
        for rate in rates:
            sink = "latency_sink_read.py"
            contenders = [
                ("kafka-share real time", reader(sink, rate, {"source": "kafka-share", "trigger": "real-time"})),
                ("built-in kafka real time", reader(sink, rate, {"source": "kafka", "trigger": "real-time"})),
                ("kafka-share micro-batch", reader(sink, rate, {"source": "kafka-share", "trigger": "micro-batch"})),
            ][: 2 if args.real_time_only else 3]
            results = rotated_runs(contenders, args.runs, latency)
            table(f"{rate:,} records/s, to the sink", results, contenders, args)
            for name, _ in contenders:
                label = f"{name} {rate // 1000}k/s"
                names.append(label)
                for key in ("p50_ms", "p99_ms"):
                    medians.setdefault(key[:3], []).append(float(statistics.median(r[key] for r in results[name])))
                if "real time" in name:
                    # The run whose p99 is the median: its p99 second by second.
                    middle = sorted(results[name], key=lambda r: r["p99_ms"])[len(results[name]) // 2]
                    seconds = middle.get("p99_by_second", [])
                    per_second[label] = ([float(s) for s, _ in seconds], [float(v) for _, v in seconds])
        charts.bars(
            "bench-latency",
            f"record send to the sink's write (median of {args.runs})",
            "ms",
            medians,
            names,
            f"make bench-latency: {args.partitions} partitions, K={args.parallelism}, real time 5 s, micro-batch trigger 0, "
            f"{args.seconds} s measured per run",
        )
        charts.lines(
            "bench-latency-seconds",
            "p99 of the records sent in each second (the run with the median p99)",
            "second of the measured window",
            "ms",
            per_second,
            f"make bench-latency: {args.partitions} partitions, K={args.parallelism}, real time 5 s",
            annotate=False,
        )
    finally:
        broker.stop()


def table(title: str, results: dict[str, list[dict[str, Any]]], contenders: list[tuple[str, Any]], args: Any) -> None:
    def median(name: str, key: str) -> float:
        return float(statistics.median(r[key] for r in results[name]))

    def spread(name: str, key: str) -> str:
        values = [r[key] for r in results[name]]
        return f"{median(name, key):,.1f} ({min(values):,.1f} to {max(values):,.1f})"

    print(
        f"\n{title}: {args.partitions} partitions, K={args.parallelism}, {args.runs} runs each, rotating\n"
        "| reader | records (median) | p50 ms, median (range) | p99 ms, median (range) |\n|---|---:|---:|---:|"
    )
    for name, _ in contenders:
        print(f"| {name} | {median(name, 'records'):,.0f} | {spread(name, 'p50_ms')} | {spread(name, 'p99_ms')} |")
    share, builtin = median(contenders[0][0], "p99_ms"), median(contenders[1][0], "p99_ms")
    if builtin:
        print(f"p99 ratio {contenders[0][0]} / {contenders[1][0]} (medians): {share / builtin:.2f}", flush=True)


if __name__ == "__main__":
    main()
