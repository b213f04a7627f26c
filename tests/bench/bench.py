"""`make bench`: kafka-share against Kafka's own clients and Spark's built-in Kafka source, fairly.

One broker, one topic, the same records for every contender, in one run:
  (k) Kafka's plain consumer (KafkaConsumer), K consumers of a consumer group: the broker-and-client
      ceiling of the machine;
  (a) Kafka's share consumer (KafkaShareConsumer, implicit acknowledgement), K consumers of a share group;
  (b) Spark's built-in `kafka` source (spark-sql-kafka-0-10 from Maven Central), minPartitions K;
  (c) the kafka-share source, each strategy, parallelism K, with its metrics on (the plugin that
      configure() adds, and Spark's CSV sink reading every metric each second);
  (c-) the kafka-share source, --metrics-strategy (the first of --strategies), with the metrics off (no
      plugin): what the metrics cost; (c0) the same with the plugin and no sink; (c1) with the sink and no
      plugin (Spark's own metrics only).
Fair means:
  - every contender is clocked the same way, from its first record reaching the application to its
    last (tests/harness ConsumerPerf for (k) and (a); spark_read.py's "records" clock for (b) and (c)),
    so no group join, first assignment, JVM start or Ivy resolution is counted;
  - every Kafka client gets the same settings (max.poll.records, printed with the table);
  - (b) gets batches comparable to kafka-share's: maxOffsetsPerTrigger records / --batches-b; with
    --bounded-b N, (b') is the same source held to N records a batch (a bound such as two-phase-commit's);
  - every contender must read every record, or the run fails;
  - each contender runs --runs times (at least 3), in an order that rotates from run to run (and is
    reversed every other run), with a fresh group each time; the table prints the median and the range.
(b) and (c) write into a foreachBatch that keeps each batch's earliest and latest row time and its
count (Spark computes them in the batch's tasks), the same work for both.

Usage: bench.py [--records N] [--size BYTES] [--partitions P] [--parallelism K] [--strategies s1,s2] [--runs R]
                [--max-poll-records M] [--batches-b B] [--bounded-b N] [--lock-limit L] [--metrics-strategy S]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import charts  # noqa: E402

from harness import Broker, broker_versions, pins  # noqa: E402

STRATEGIES = ["none", "idempotent", "checkpoint-dedup", "two-phase-commit"]


def kafka_client(
    broker: Broker, kind: str, topic: str, group: str, records: int, threads: int, settings: dict[str, object]
) -> dict[str, Any]:
    """(k) or (a): tests/harness ConsumerPerf in its own JVM; raises unless every record arrived."""
    if kind == "share":
        broker.read_from_earliest(group)
    classpath = (ROOT / "target" / "harness.classpath").read_text().strip()
    done = subprocess.run(
        ["java", "-Xmx1g", "-cp", classpath, "io.github.kafkashare.testkit.ConsumerPerf", kind, broker.bootstrap, topic, group]
        + [str(records), str(threads)]
        + [f"{k}={v}" for k, v in settings.items()],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        output = done.stdout[-2000:] + done.stderr[-3000:]
        raise SystemExit(f"ConsumerPerf {kind} read fewer than {records} records or failed:\n{output}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


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
    """A spark_read.py measurement, clocked by batch (the scaling and cost benchmarks)."""
    return run_measurement("spark_read.py", config)


def spark_read_by_record(config: dict[str, object]) -> dict[str, Any]:
    """(b) or (c): spark_read.py clocked from the first record to the last; raises unless every record arrived."""
    result = run_measurement("spark_read.py", {**config, "clock": "records"})
    if not result["complete"]:
        raise SystemExit(f"{config['source']} read {result['records']} of {config['records']} records: {result}")
    return result


def throughput(result: dict[str, Any]) -> str:
    return f"{result['records_per_s']:,} records/s ({result['records']:,} records, {result['seconds']} s)"


Contender = tuple[str, Callable[[int], dict[str, Any]]]


def rotated_runs(
    contenders: list[Contender], runs: int, describe: Callable[[dict[str, Any]], str] = throughput
) -> dict[str, list[dict[str, Any]]]:
    """Runs every contender `runs` times (at least 3), each run starting one contender later and every other
    run in reverse order, so that no contender always runs first or right after the same one; the results
    by contender, in run order. Prints each result as it comes (`describe`)."""
    if runs < 3:
        raise SystemExit("--runs must be at least 3: a single run is not a result")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in contenders}
    for run in range(runs):
        shift = run % len(contenders)
        order = contenders[shift:] + contenders[:shift]
        for name, read in order[::-1] if run % 2 else order:
            result = read(run)
            results[name].append(result)
            print(f"run {run + 1}: {name}: {describe(result)}", flush=True)
    return results


def print_slow_runs(results: dict[str, list[dict[str, Any]]]) -> None:
    """Each kafka-share run at under half its contender's median rate, batch by batch: what a slow run did
    (rows, and where each batch's time went), so that one comes with its own evidence."""
    for name, runs in results.items():
        typical = statistics.median(r["records_per_s"] for r in runs)
        for r in runs:
            if r["records_per_s"] >= typical / 2 or not Path(r.get("progress_file", "")).is_file():
                continue
            print(f"\nslow run of {name}: {throughput(r)}, {r['progress_file']}")
            print("batch | rows | ms | latestOffset ms | addBatch ms")
            for p in json.loads(Path(r["progress_file"]).read_text()):
                d = p["durationMs"]
                print(
                    f"{p['batchId']} | {p['numInputRows']:,} | {d.get('triggerExecution', 0):,} | "
                    f"{d.get('latestOffset', 0):,} | {d.get('addBatch', 0):,}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--parallelism", type=int, default=4, help="K: consumers, Spark input partitions")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--runs", type=int, default=3, help="runs of each contender, in rotating order (at least 3)")
    parser.add_argument("--max-poll-records", type=int, default=2000, help="max.poll.records of every Kafka client")
    parser.add_argument("--batches-b", type=int, default=6, help="(b)'s batches: maxOffsetsPerTrigger = records / this")
    parser.add_argument(
        "--bounded-b",
        type=int,
        default=0,
        help="also run (b') the built-in source with maxOffsetsPerTrigger this (a batch bound, such as two-phase-commit's "
        "partitions x lock limit), and print each ratio to it",
    )
    parser.add_argument(
        "--lock-limit",
        type=int,
        default=10_000,
        help="the two-phase-commit group's share.partition.max.record.locks (Kafka 4.3+; 0: the broker's 2,000)",
    )
    parser.add_argument(
        "--metrics-strategy",
        default=None,
        help="the strategy that also runs with the metrics off, (c-), one of --strategies (default: the first; '' for "
        "no such run): metrics on against off in one run",
    )
    args = parser.parse_args()
    if args.metrics_strategy is None:
        args.metrics_strategy = args.strategies.split(",")[0]
    if args.metrics_strategy and args.metrics_strategy not in args.strategies.split(","):
        raise SystemExit(f"--metrics-strategy {args.metrics_strategy} must be one of --strategies ({args.strategies})")

    version = broker_versions()[-1]
    work = Path(tempfile.mkdtemp(prefix="kafka-share-bench-"))
    broker = Broker(version, work / "broker").start()
    cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    try:
        topic = "bench"
        broker.create_topic(topic, args.partitions)
        broker.produce(topic, args.records, args.size, bulk=True)
        client = {"max.poll.records": args.max_poll_records}
        print(
            f"Kafka {version}, topic '{topic}': {args.partitions} partitions, {args.records:,} records of "
            f"{args.size} bytes; K={args.parallelism}; {platform.processor() or platform.machine()}, {cores} cores; "
            f"every Kafka client with {', '.join(f'{k}={v}' for k, v in client.items())}; {args.runs} runs each, rotating",
            flush=True,
        )
        common = {
            "bootstrap": broker.bootstrap,
            "topic": topic,
            "records": args.records,
            "parallelism": args.parallelism,
            "master": f"local[{max(2, args.parallelism)}]",
        }

        def read_b(per_batch: int, name: str) -> Callable[[int], dict[str, Any]]:
            def read(run: int) -> dict[str, Any]:
                return spark_read_by_record(
                    {
                        **common,
                        "source": "kafka",
                        "checkpoint": str(work / f"chk-{name}-{run}"),
                        "options": {"maxOffsetsPerTrigger": per_batch, "kafka.max.poll.records": args.max_poll_records},
                        "packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pins()['spark-sql-kafka']}",
                    }
                )

            return read

        def clients(kind: str, group: str) -> dict[str, Any]:
            return kafka_client(broker, kind, topic, group, args.records, args.parallelism, client)

        def lock_note(strategy: str) -> str:
            return f", group lock limit {args.lock_limit:,}" if strategy == "two-phase-commit" and args.lock_limit else ""

        def read_c(strategy: str, metrics: str = "on") -> Callable[[int], dict[str, Any]]:
            def read(run: int) -> dict[str, Any]:
                group = f"perf-c-{strategy}-{metrics}-{run}"
                # Two-phase-commit holds a batch's records until the commit: the group's lock limit bounds its batches.
                if strategy == "two-phase-commit" and args.lock_limit:
                    broker.group_config(group, {"share.partition.max.record.locks": str(args.lock_limit)})
                progress = work / f"progress-c-{strategy}-{metrics}-{run}.json"
                result = spark_read_by_record(
                    {
                        **common,
                        "source": "kafka-share",
                        "group": group,
                        "strategy": strategy,
                        "checkpoint": str(work / f"chk-c-{strategy}-{metrics}-{run}"),
                        "options": {"kafka.max.poll.records": args.max_poll_records},
                        "metrics": metrics,
                        "progress_file": str(progress),
                    }
                )
                return {**result, "progress_file": str(progress)}

            return read

        contenders: list[tuple[str, Callable[[int], dict[str, Any]]]] = [
            ("(k) Kafka consumer (ceiling)", lambda run: clients("consumer", f"perf-k-{run}")),
            ("(a) Kafka share consumer", lambda run: clients("share", f"perf-a-{run}")),
            ("(b) Spark built-in kafka source", read_b(max(1000, args.records // args.batches_b), "b")),
        ]
        bounded = f"(b') Spark built-in kafka source, at most {args.bounded_b:,} records a batch"
        if args.bounded_b:
            contenders.append((bounded, read_b(args.bounded_b, "b-bounded")))
        contenders += [(f"(c) kafka-share {s}" + lock_note(s), read_c(s)) for s in args.strategies.split(",")]
        unmetered = f"(c-) kafka-share {args.metrics_strategy}, metrics off"
        if args.metrics_strategy:
            contenders.append((unmetered, read_c(args.metrics_strategy, "off")))
            # The plugin without any sink reading it: tells the plugin's cost from the sink's.
            contenders.append(
                (f"(c0) kafka-share {args.metrics_strategy}, plugin without a sink", read_c(args.metrics_strategy, "plugin"))
            )
            # The sink without the plugin: what Spark's own metrics cost when a sink reads them each second.
            contenders.append(
                (f"(c1) kafka-share {args.metrics_strategy}, sink without the plugin", read_c(args.metrics_strategy, "sink"))
            )

        results = rotated_runs(contenders, args.runs)

        def median(name: str) -> float:
            return float(statistics.median(r["records_per_s"] for r in results[name]))

        a, b = median("(a) Kafka share consumer"), median("(b) Spark built-in kafka source")
        print("\n| contender | records/s (median) | range | c/a | c/b | batches |\n|---|---:|---:|---:|---:|---:|")
        for name, _ in contenders:
            rates = [r["records_per_s"] for r in results[name]]
            ratios = f"{median(name) / a:.2f} | {median(name) / b:.2f}" if name.startswith("(c") else " | "
            batches = "/".join(str(r["batches"]) for r in results[name]) if "batches" in results[name][0] else ""
            print(f"| {name} | {median(name):,.0f} | {min(rates):,} to {max(rates):,} | {ratios} | {batches} |")
        if args.bounded_b:
            print(f"\n(b') / (b): {median(bounded) / b:.2f}")
            for name, _ in contenders:
                if name.startswith("(c)"):
                    print(f"{name} / (b'): {median(name) / median(bounded):.2f}")
        if args.metrics_strategy:
            metered = f"(c) kafka-share {args.metrics_strategy}" + lock_note(args.metrics_strategy)
            on, off = [r["records_per_s"] for r in results[metered]], [r["records_per_s"] for r in results[unmetered]]
            within = "within" if min(off) <= median(metered) <= max(off) else "outside"
            print(
                f"\nmetrics on / off ({args.metrics_strategy}): {median(metered) / median(unmetered):.2f} "
                f"(on {median(metered):,.0f}, {min(on):,} to {max(on):,}; off {median(unmetered):,.0f}, "
                f"{min(off):,} to {max(off):,}): on's median is {within} off's range; "
                f"series published per on run: {'/'.join(str(r['published_series']) for r in results[metered])}"
            )
        print_slow_runs(results)
        charts.bars(
            "bench-throughput",
            f"records/s (median of {args.runs}), {args.records:,} records of {args.size} B, "
            f"{args.partitions} partitions, K={args.parallelism}",
            "records/s",
            {"records/s": [median(name) for name, _ in contenders]},
            [name for name, _ in contenders],
            f"make bench: Kafka {version}, one broker, {cores} cores, first record to last",
        )
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
